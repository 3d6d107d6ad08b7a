//! Hazards `retention` and `checkpoints_stalled`: can the log upstream hold the lag?
//!
//! Evaluated on every diagnosis, whatever the finding. Backpressure is safe only while
//! the durable log absorbs it. Records are lost only when the consumer's position falls
//! below the partition's log start offset (the low water mark); a Kafka source that falls
//! off the log resets silently to the earliest offset.
//!
//! Per topic (worst partition), in this order:
//!
//! 1. The topic's `cleanup.policy` decides what can remove records: `compact` alone removes
//!    nothing by age or size (only older values of a key), so neither `retention.ms` nor
//!    `retention.bytes` applies; `delete` and `compact,delete` remove whole segments by
//!    both. An unknown policy is taken as Kafka's default, `delete`, and the hazard says so.
//! 2. The position — the committed offset, or the log end less the lag where the exporter
//!    gives no committed offset (KMinion) — below the log start is evidence: "already
//!    losing data". That holds under every policy.
//! 3. The log start advancing faster than the position gives the time to loss from
//!    offsets: `(position − log start) / (log-start advance − consume rate)`.
//! 4. Estimates, under a deleting policy only: the age of the oldest unconsumed record
//!    (the exporter's lag in seconds, or records behind ÷ produce rate) against
//!    `retention.ms` (`-1`: unlimited), `(retention − lag_s) / d(lag_s)/dt`; and the lag in
//!    records against what `retention.bytes` lets a partition hold (`retention.bytes` ÷
//!    bytes per record, the partition's size ÷ its records), only while it grows. An
//!    estimate is a risk ("at risk in …"), never "losing data": a lag in time that reached
//!    the retention without offsets is "at risk now". A lag in records past what
//!    `retention.bytes` holds while the position is still in the log is contradicted by the
//!    offsets: not used, and a note gives the margin (position − log start). A lag in seconds that the offsets contradict (at or past the
//!    retention while the position is still in the log, or aging faster than one second per
//!    second) is an exporter's extrapolation gone wrong (kafka-lag-exporter after an offset
//!    reset or on a sparse interpolation table): it is not used, and a note says so.
//!
//! `checkpoints_stalled`: when the recovery point is older than the lag the log can still
//! hold (by age), a restart would fall off the log.

use std::collections::BTreeMap;

use crate::diagnose::steps::checkpoints::last_completion;
use crate::diagnose::steps::locate::sum_lag;
use crate::diagnose::{Context, slope_per_s};
use crate::model::facts::retention::{LagEstimate, Measured, Position, RetentionFact, Rules};
use crate::model::facts::{Fact, HazardFacts};
use crate::model::snapshot::{PartitionLag, Point, TopicRetention};
use crate::model::verdict::{HazardKind, Severity};

/// What decided a topic's time to loss.
#[derive(Debug, Clone, PartialEq)]
enum By {
    /// The position is below the log start (evidence).
    BelowLogStart,
    /// The lag in time has reached the retention; no offsets to say more (an estimate).
    LagAtRetention,
    /// The lag in time ages towards the retention (an estimate).
    Lag,
    /// The log start advances faster than the position.
    Offsets,
    /// The lag in records grows towards what `retention.bytes` holds (an estimate).
    Size { lag_records: f64, capacity_records: f64, retention_bytes: f64, bytes_per_record: f64 },
}

/// One topic's exposure.
#[derive(Debug, Clone, PartialEq)]
struct Exposure {
    topic: String,
    /// Age of the oldest unconsumed record, s; None when no plausible estimate exists.
    lag_s: Option<f64>,
    /// How fast that age grows, s per s (1.0: the consumer stands still).
    lag_growth: Option<f64>,
    /// `retention.ms` in s when records go by age; None when nothing goes by age.
    retention_s: Option<f64>,
    /// Seconds until loss; 0 when already losing (or, for an estimate, at risk now).
    time_to_loss_s: Option<f64>,
    by: By,
    rules: Rules,
    how: Measured,
}

fn last(points: &[Point]) -> Option<f64> {
    points.iter().rev().find(|p| p.1.is_finite()).map(|p| p.1)
}

/// What the hazards need besides the snapshot: the retention inputs that were missing and
/// notes on lag estimates that were not used.
#[derive(Debug, Default)]
pub struct Remarks {
    pub missing: Vec<Fact>,
    pub notes: Vec<Fact>,
}

/// The hazards, the retention inputs that were missing, and notes.
pub fn evaluate(ctx: &Context) -> (Vec<HazardFacts>, Remarks) {
    let mut remarks = Remarks::default();
    let retention: BTreeMap<&str, &TopicRetention> =
        ctx.snapshot.retention.iter().map(|r| (r.topic.as_str(), r)).collect();
    let mut exposures = exporter_exposures(ctx, &retention, &mut remarks);
    // Flink's own source lag when no exporter covers the job.
    if ctx.snapshot.partitions.is_empty() {
        exposures.extend(source_lag_exposures(ctx, &retention, &mut remarks));
    }
    let mut hazards = retention_hazards(ctx, &exposures);
    hazards.extend(checkpoints_stalled(ctx, &exposures));
    hazards.sort_by(|a, b| b.severity.cmp(&a.severity).then(a.time_to_loss_seconds.cmp(&b.time_to_loss_seconds)));
    // In the order their sentences read (sources' topics, then topics, each by name).
    let missing = &mut remarks.missing;
    missing.sort_by_key(|m| match m {
        Fact::Retention(RetentionFact::SourceRetentionUnknown { vertex }) => (0, vertex.clone()),
        Fact::Retention(RetentionFact::TopicRetentionUnknown { topic }) => (1, topic.clone()),
        _ => (2, String::new()),
    });
    missing.dedup();
    (hazards, remarks)
}

/// The rules of a topic, as the facts name them.
fn rules(r: Option<&TopicRetention>) -> Rules {
    Rules {
        policy: r.and_then(|r| r.cleanup_policy),
        policy_from: r.and_then(|r| r.cleanup_policy_from.clone()),
        retention_from: r.map(|r| r.from.clone()).unwrap_or_default(),
    }
}

/// Whether the topic's records go by age and size: `delete` in the policy, or an unknown
/// policy (Kafka's default is `delete`).
fn deletes(r: &TopicRetention) -> bool {
    r.cleanup_policy.is_none_or(|p| p.deletes())
}

/// `retention.ms` in s when records go by age.
fn age_limit_s(r: &TopicRetention) -> Option<f64> {
    r.retention_ms.filter(|_| deletes(r)).map(|ms| ms as f64 / 1000.0)
}

/// `retention.bytes` and the partition's size now, when records go by size.
fn size_limit(r: &TopicRetention) -> Option<(f64, f64)> {
    let bytes = r.retention_bytes.filter(|_| deletes(r))?;
    Some((bytes as f64, r.partition_bytes.filter(|b| *b > 0.0)?))
}

/// Kafka exporters: per topic, the worst partition. Topics without a known retention are
/// noted in `missing` (their offsets are still judged); compacted topics get a note.
fn exporter_exposures(
    ctx: &Context,
    retention: &BTreeMap<&str, &TopicRetention>,
    remarks: &mut Remarks,
) -> Vec<Exposure> {
    let mut exposures: Vec<Exposure> = Vec::new();
    let mut by_topic: BTreeMap<&str, Vec<&PartitionLag>> = BTreeMap::new();
    for p in &ctx.snapshot.partitions {
        by_topic.entry(p.topic.as_str()).or_default().push(p);
    }
    for (topic, partitions) in by_topic {
        let r = retention.get(topic).copied();
        if r.is_none() {
            remarks.missing.push(RetentionFact::TopicRetentionUnknown { topic: topic.to_string() }.into());
        }
        let limits = Limits { age_s: r.and_then(age_limit_s), size: r.and_then(size_limit), rules: rules(r) };
        let (mut rejected, mut contradicted) = (Vec::new(), Vec::new());
        let all: Vec<Exposure> = partitions
            .iter()
            .filter_map(|p| partition_exposure(topic, p, &limits, &mut rejected, &mut contradicted))
            .collect();
        // The note says a compacted topic loses nothing: never beside offsets that show loss.
        let below_log_start = all.iter().any(|e| e.by == By::BelowLogStart);
        if let Some(r) = r.filter(|r| !deletes(r) && !below_log_start) {
            let lag_s = partitions.iter().filter_map(|p| lag_age(p)).reduce(f64::max);
            let retention_s = r.retention_ms.map(|ms| ms as f64 / 1000.0);
            remarks.notes.push(
                RetentionFact::Compacted { topic: topic.into(), rules: limits.rules.clone(), retention_s, lag_s }
                    .into(),
            );
        }
        let worst = all.into_iter().min_by(|a, b| {
            a.time_to_loss_s.unwrap_or(f64::INFINITY).total_cmp(&b.time_to_loss_s.unwrap_or(f64::INFINITY))
        });
        exposures.extend(worst);
        if let Some(retention_s) = limits.age_s {
            remarks.notes.extend(implausible_notes(topic, retention_s, &rejected));
        }
        remarks.notes.extend(size_notes(topic, &contradicted));
    }
    exposures
}

/// Flink's own source lag (`pendingRecords`) per source vertex, for jobs no Kafka exporter
/// covers: an estimate, judged by age only. Sources whose topic's retention is unknown are
/// noted in `missing`.
fn source_lag_exposures(
    ctx: &Context,
    retention: &BTreeMap<&str, &TopicRetention>,
    remarks: &mut Remarks,
) -> Vec<Exposure> {
    let mut exposures: Vec<Exposure> = Vec::new();
    for v in ctx.signals.vertices.iter().filter(|v| v.is_source) {
        let lag = sum_lag(ctx, &v.id);
        let (Some(lag_records), Some(out)) = (last(&lag), v.throughput()) else { continue };
        // One lag sample has no slope: the growth is unknown, not 0 (the age below is then
        // judged on the consumed rate, a lower bound of the produced one).
        let growth = slope_per_s(&lag);
        let topic = topic_of_source(ctx, &v.name);
        let Some(r) = retention.get(topic.as_str()).copied() else {
            // Retention matters only for a backlog that grows or is more than a minute of
            // data; a small flat lag can never fall out of any retention.
            let relevant = crate::diagnose::steps::locate::steady_growth(&lag).is_some()
                || (out > 0.0 && lag_records / out > 60.0);
            if relevant {
                remarks.missing.push(RetentionFact::SourceRetentionUnknown { vertex: v.name.clone() }.into());
            }
            continue;
        };
        // Compacted or unlimited: nothing goes by age.
        let Some(retention_s) = age_limit_s(r) else { continue };
        let produce = out + growth.unwrap_or(0.0).max(0.0);
        if produce <= 0.0 {
            continue;
        }
        // Age of the oldest unconsumed record ≈ lag ÷ produce rate; it grows by
        // growth ÷ produce seconds per second.
        let lag_s = lag_records / produce;
        let lag_growth = growth.map(|g| g / produce);
        let (time_to_loss_s, by) = if lag_s >= retention_s {
            (Some(0.0), By::LagAtRetention)
        } else {
            (lag_growth.filter(|g| *g > 0.0).map(|g| (retention_s - lag_s) / g), By::Lag)
        };
        exposures.push(Exposure {
            topic,
            lag_s: Some(lag_s),
            lag_growth,
            retention_s: Some(retention_s),
            time_to_loss_s,
            by,
            rules: rules(Some(r)),
            how: Measured::SourceLag {
                pending_records: lag_records,
                produced_records_per_s: produce,
                consumed_records_per_s: out,
            },
        });
    }
    exposures
}

/// A `retention` hazard per topic that falls out of retention within the warning time.
fn retention_hazards(ctx: &Context, exposures: &[Exposure]) -> Vec<HazardFacts> {
    let t = &ctx.cfg.thresholds;
    let critical_s = t.retention_critical.as_ms() as f64 / 1000.0;
    let warning_s = t.retention_warning.as_ms() as f64 / 1000.0;
    let mut hazards = Vec::new();
    for e in exposures {
        let Some(ttl) = e.time_to_loss_s else { continue };
        if ttl > warning_s {
            continue;
        }
        let severity = if ttl <= critical_s { Severity::Critical } else { Severity::Warning };
        let (topic, rules, measured) = (e.topic.clone(), e.rules.clone(), e.how.clone());
        let retention_s = e.retention_s.unwrap_or(f64::INFINITY);
        let (detail, time_to_loss) = match (&e.by, e.lag_s) {
            (By::BelowLogStart, _) => (RetentionFact::LosingBelowLogStart { topic, measured }, Some(0.0)),
            // An estimate that has reached the retention: at risk now, no time to loss.
            (By::LagAtRetention, Some(lag_s)) => {
                (RetentionFact::AtRiskLagAtRetention { topic, lag_s, retention_s, rules, measured }, None)
            }
            (By::Lag, Some(lag_s)) => (
                RetentionFact::FallsOutByLag {
                    topic,
                    time_to_loss_s: ttl,
                    lag_s,
                    lag_growth: e.lag_growth,
                    retention_s,
                    rules,
                    measured,
                },
                Some(ttl),
            ),
            (By::Size { lag_records, capacity_records, retention_bytes, bytes_per_record }, _) => (
                RetentionFact::FallsOutBySize {
                    topic,
                    time_to_loss_s: ttl,
                    lag_records: *lag_records,
                    capacity_records: *capacity_records,
                    retention_bytes: *retention_bytes,
                    bytes_per_record: *bytes_per_record,
                    rules,
                    measured,
                },
                // An estimate that has reached the limit: at risk now, no time to loss.
                Some(ttl).filter(|s| *s > 0.0),
            ),
            _ => (RetentionFact::FallsOutByOffsets { topic, time_to_loss_s: ttl, measured }, Some(ttl)),
        };
        hazards.push(HazardFacts {
            kind: HazardKind::Retention,
            severity,
            time_to_loss_seconds: time_to_loss.map(|s: f64| s.max(0.0).round() as i64),
            topic: Some(e.topic.clone()),
            time_to_timeout_seconds: None,
            detail: detail.into(),
        });
    }
    hazards
}

/// The recovery point against what the log can still hold: a `checkpoints_stalled` hazard
/// per topic whose remaining room (by age) is shorter than the age of the last checkpoint.
fn checkpoints_stalled(ctx: &Context, exposures: &[Exposure]) -> Vec<HazardFacts> {
    let mut hazards = Vec::new();
    if let Some(age_s) = checkpoint_age_s(ctx) {
        for e in exposures {
            let (Some(lag_s), Some(retention_s)) = (e.lag_s, e.retention_s) else { continue };
            let room = retention_s - lag_s;
            if age_s > room.max(0.0) {
                hazards.push(HazardFacts {
                    kind: HazardKind::CheckpointsStalled,
                    severity: Severity::Critical,
                    // Nothing is lost until the job restarts; then it is at once.
                    time_to_loss_seconds: None,
                    topic: Some(e.topic.clone()),
                    time_to_timeout_seconds: None,
                    detail: RetentionFact::CheckpointOlderThanRoom {
                        checkpoint_age_s: age_s,
                        room_s: room,
                        topic: e.topic.clone(),
                    }
                    .into(),
                });
            }
        }
    }
    hazards
}

/// What removes a topic's records: its age limit (s) and size limit (`retention.bytes`,
/// partition bytes), each `None` when it does not apply.
struct Limits {
    age_s: Option<f64>,
    size: Option<(f64, f64)>,
    rules: Rules,
}

/// The consumer's position per step: the committed offset, else the log end less the lag
/// in records at the same steps.
fn position(p: &PartitionLag) -> Option<(Vec<Point>, Position)> {
    if !p.consumer_offset.is_empty() {
        return Some((p.consumer_offset.clone(), Position::Committed));
    }
    let end: BTreeMap<i64, f64> = p.log_end_offset.iter().copied().collect();
    let derived: Vec<Point> =
        p.lag_records.iter().filter_map(|&(t, lag)| end.get(&t).map(|e| (t, (e - lag).max(0.0)))).collect();
    (!derived.is_empty()).then_some((derived, Position::LogEndLessLag))
}

/// The age of the oldest unconsumed record as the exporter gives it (s), unjudged: its lag
/// in seconds, or records behind ÷ produce rate.
fn lag_age(p: &PartitionLag) -> Option<f64> {
    let produce = slope_per_s(&p.log_end_offset).filter(|r| *r > 0.0);
    last(&p.lag_seconds).or_else(|| Some(last(&p.lag_records)? / produce?))
}

/// One partition's exposure (see the module doc): the position against the log start
/// first, then the sooner of the estimates that apply. Lag estimates that cannot be true
/// are left out with a note.
fn partition_exposure(
    topic: &str,
    p: &PartitionLag,
    limits: &Limits,
    rejected: &mut Vec<Rejected>,
    contradicted: &mut Vec<SizeContradicted>,
) -> Option<Exposure> {
    let how = Measured::Partition {
        partition: p.partition.clone(),
        consumer_group: p.consumer_group.clone(),
        exporter: p.exporter.clone(),
    };
    let position = position(p);
    let offsets = position.as_ref().and_then(|(series, kind)| Some((last(series)?, last(&p.log_start_offset)?, *kind)));
    let mut exposure = Exposure {
        topic: topic.into(),
        lag_s: None,
        lag_growth: None,
        retention_s: limits.age_s,
        time_to_loss_s: None,
        by: By::Lag,
        rules: limits.rules.clone(),
        how,
    };
    // Already below the log start: records were skipped.
    if let Some((consumer, start, kind)) = offsets
        && consumer < start
    {
        exposure.time_to_loss_s = Some(0.0);
        exposure.by = By::BelowLogStart;
        exposure.how = Measured::BelowLogStart {
            partition: p.partition.clone(),
            position: kind,
            committed_offset: consumer,
            log_start_offset: start,
        };
        return Some(exposure);
    }
    let sooner = |ttl: f64, by: By, e: &mut Exposure| {
        if ttl < e.time_to_loss_s.unwrap_or(f64::INFINITY) {
            e.time_to_loss_s = Some(ttl);
            e.by = by;
        }
    };
    if let Some(retention_s) = limits.age_s {
        let room = offsets.map(|(consumer, start, _)| (consumer, start));
        if let Some((lag_s, growth)) = plausible_lag(p, retention_s, room, rejected) {
            (exposure.lag_s, exposure.lag_growth) = (Some(lag_s), growth);
            // A plausible lag at the retention is one without offsets to contradict it.
            if lag_s >= retention_s {
                sooner(0.0, By::LagAtRetention, &mut exposure);
            } else if let Some(g) = growth.filter(|g| *g > 0.0) {
                sooner((retention_s - lag_s) / g, By::Lag, &mut exposure);
            }
        } else if offsets.is_none() {
            return None;
        }
    }
    // From offsets: the log start advancing faster than the consumer.
    if let (Some((consumer, start, _)), Some(start_rate), Some(consume_rate)) =
        (offsets, slope_per_s(&p.log_start_offset), position.as_ref().and_then(|(s, _)| slope_per_s(s)))
        && start_rate > consume_rate
    {
        sooner((consumer - start) / (start_rate - consume_rate), By::Offsets, &mut exposure);
    }
    let room = offsets.map(|(consumer, start, _)| consumer - start);
    match limits.size.and_then(|(retention_bytes, bytes)| by_size(p, retention_bytes, bytes, room)) {
        Some(BySize::Risk(ttl, by)) => sooner(ttl, by, &mut exposure),
        Some(BySize::Contradicted(c)) => contradicted.push(c),
        None => {}
    }
    Some(exposure)
}

/// What `retention.bytes` says of one partition.
enum BySize {
    /// The lag grows towards the records the partition can hold: at risk in this time.
    Risk(f64, By),
    /// The lag is past what the partition can hold by the estimate while the position is
    /// still in the log: the estimate is not used.
    Contradicted(SizeContradicted),
}

/// A `retention.bytes` estimate the offsets contradict.
#[derive(Debug, Clone, PartialEq)]
struct SizeContradicted {
    partition: String,
    lag_records: f64,
    capacity_records: f64,
    retention_bytes: f64,
    /// Records between the position and the log start.
    room_records: f64,
}

/// The time until the lag in records exceeds what `retention.bytes` lets the partition
/// hold: capacity = `retention_bytes` ÷ (partition bytes ÷ records in the log now). A lag
/// already past it while `room` (position − log start, records) shows the position still
/// in the log is contradicted by the offsets; past it without `room`, at risk now. `None`
/// without the log's offsets, or when the lag stands still or shrinks below the capacity.
fn by_size(p: &PartitionLag, retention_bytes: f64, partition_bytes: f64, room: Option<f64>) -> Option<BySize> {
    let (start, end) = (last(&p.log_start_offset)?, last(&p.log_end_offset)?);
    if end <= start {
        return None;
    }
    let bytes_per_record = partition_bytes / (end - start);
    let capacity_records = retention_bytes / bytes_per_record;
    let lag_records = last(&p.lag_records)?;
    let by = By::Size { lag_records, capacity_records, retention_bytes, bytes_per_record };
    if lag_records < capacity_records {
        let growth = slope_per_s(&p.lag_records).filter(|g| *g > 0.0)?;
        return Some(BySize::Risk((capacity_records - lag_records) / growth, by));
    }
    Some(match room {
        Some(room_records) => BySize::Contradicted(SizeContradicted {
            partition: p.partition.clone(),
            lag_records,
            capacity_records,
            retention_bytes,
            room_records,
        }),
        None => BySize::Risk(0.0, by),
    })
}

/// One note per topic on the `retention.bytes` estimates its offsets contradict.
fn size_notes(topic: &str, contradicted: &[SizeContradicted]) -> Option<Fact> {
    let first = contradicted.first()?;
    let mut partitions: Vec<String> = contradicted.iter().map(|c| c.partition.clone()).collect();
    partitions.sort_by_key(|p| (p.parse::<u64>().unwrap_or(u64::MAX), p.to_string()));
    Some(
        RetentionFact::ImplausiblePastSize {
            topic: topic.to_string(),
            partitions,
            max_lag_records: contradicted.iter().map(|c| c.lag_records).fold(f64::MIN, f64::max),
            capacity_records: contradicted.iter().map(|c| c.capacity_records).fold(f64::MAX, f64::min),
            retention_bytes: first.retention_bytes,
            min_room_records: contradicted.iter().map(|c| c.room_records).fold(f64::MAX, f64::min),
        }
        .into(),
    )
}

/// Tolerance on "a record's age grows at most one second per second": scrape jitter and
/// the exporter's interpolation make a true 1.0 read a little higher.
const MAX_PLAUSIBLE_AGING: f64 = 1.1;

/// A lag estimate that was not used, and why.
#[derive(Debug, Clone, PartialEq)]
struct Rejected {
    exporter: String,
    partition: String,
    /// The exporter's lag in seconds, or records behind ÷ produce rate.
    what: LagEstimate,
    lag_s: f64,
    why: Implausible,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Implausible {
    /// At or past the retention while the committed offset is this many records above the
    /// log start.
    PastRetention { room: f64 },
    /// Ages this many seconds per second (more than 1).
    AgesTooFast { growth: f64 },
}

/// The age of the oldest unconsumed record (s) and how fast it grows (s per s): the
/// exporter's lag in seconds when it is plausible, else records behind ÷ produce rate.
/// A lag is implausible when it ages faster than time does, or when it has reached the
/// retention while `offsets` (committed, log start) show the consumer still in the log;
/// each rejected estimate is added to `rejected`.
fn plausible_lag(
    p: &PartitionLag,
    retention_s: f64,
    offsets: Option<(f64, f64)>,
    rejected: &mut Vec<Rejected>,
) -> Option<(f64, Option<f64>)> {
    let produce = slope_per_s(&p.log_end_offset).filter(|r| *r > 0.0);
    let by_records = produce
        .and_then(|produce| Some((last(&p.lag_records)? / produce, slope_per_s(&p.lag_records).map(|g| g / produce))));
    let by_seconds = last(&p.lag_seconds).map(|lag| (lag, slope_per_s(&p.lag_seconds)));
    let room = offsets.map(|(consumer, start)| consumer - start);
    let mut plausible = |(lag_s, growth): (f64, Option<f64>), what: LagEstimate| {
        let why = match (room, growth) {
            (Some(room), _) if lag_s >= retention_s => Some(Implausible::PastRetention { room }),
            (_, Some(growth)) if growth > MAX_PLAUSIBLE_AGING => Some(Implausible::AgesTooFast { growth }),
            _ => None,
        };
        if let Some(why) = why {
            rejected.push(Rejected { exporter: p.exporter.clone(), partition: p.partition.clone(), what, lag_s, why });
        }
        why.is_none()
    };
    if let Some(estimate) = by_seconds
        && plausible(estimate, LagEstimate::InSeconds)
    {
        return Some(estimate);
    }
    by_records.filter(|&estimate| plausible(estimate, LagEstimate::RecordsOverProduceRate))
}

/// One note per exporter, estimate and reason over a topic's partitions.
fn implausible_notes(topic: &str, retention_s: f64, rejected: &[Rejected]) -> Vec<Fact> {
    let mut groups: BTreeMap<(&str, LagEstimate, bool), Vec<&Rejected>> = BTreeMap::new();
    for r in rejected {
        let past_retention = matches!(r.why, Implausible::PastRetention { .. });
        groups.entry((r.exporter.as_str(), r.what, past_retention)).or_default().push(r);
    }
    groups
        .into_iter()
        .map(|((exporter, estimate, past_retention), rs)| {
            let mut partitions: Vec<String> = rs.iter().map(|r| r.partition.clone()).collect();
            partitions.sort_by_key(|p| (p.parse::<u64>().unwrap_or(u64::MAX), p.to_string()));
            let max_lag_s = rs.iter().map(|r| r.lag_s).fold(f64::MIN, f64::max);
            let (exporter, topic) = (exporter.to_string(), topic.to_string());
            let fact = if past_retention {
                let min_room_records = rs
                    .iter()
                    .filter_map(|r| match r.why {
                        Implausible::PastRetention { room } => Some(room),
                        Implausible::AgesTooFast { .. } => None,
                    })
                    .fold(f64::MAX, f64::min);
                RetentionFact::ImplausiblePastRetention {
                    exporter,
                    estimate,
                    max_lag_s,
                    topic,
                    partitions,
                    retention_s,
                    min_room_records,
                }
            } else {
                let max_growth = rs
                    .iter()
                    .filter_map(|r| match r.why {
                        Implausible::AgesTooFast { growth } => Some(growth),
                        Implausible::PastRetention { .. } => None,
                    })
                    .fold(f64::MIN, f64::max);
                RetentionFact::ImplausibleAgesTooFast { exporter, estimate, max_lag_s, topic, partitions, max_growth }
            };
            fact.into()
        })
        .collect()
}

/// The topic a source reads: the configured topic when the job has exactly one, else the
/// source vertex name.
fn topic_of_source(ctx: &Context, source_name: &str) -> String {
    match ctx.snapshot.job_topics.as_slice() {
        [one] => one.clone(),
        _ => source_name.to_string(),
    }
}

/// Seconds since the last completed checkpoint, when known (from the completion counter
/// where Flink 1.x reports no completion time).
pub fn checkpoint_age_s(ctx: &Context) -> Option<f64> {
    let last = last_completion(&ctx.snapshot.checkpoints.series, ctx.snapshot.at_ms)?;
    Some(((ctx.snapshot.at_ms as f64 - last.at_ms) / 1000.0).max(0.0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::testkit::*;
    use crate::model::snapshot::{CheckpointPoint, CleanupPolicy, Snapshot};
    use crate::model::verdict::{HazardKind, Severity};

    /// Source (red) → score → sink.
    fn job() -> SnapshotBuilder {
        SnapshotBuilder::new()
            .vertex("src", "Source: payments", 2)
            .vertex("score", "score", 2)
            .vertex("sink", "Sink: out", 2)
            .edge("src", "score", "REBALANCE")
            .edge("score", "sink", "FORWARD")
            .all_subtasks("src", 0.0, 0.9, 0.1, None)
            .all_subtasks("score", 0.95, 0.0, 0.05, 450.0)
            .all_subtasks("sink", 0.1, 0.0, 0.9, 450.0)
    }

    /// Lag of topic `payments`: 3480 s at −240 s, aging 0.5 s per s → 3600 s at `at`.
    fn aging_lag() -> PartitionLag {
        PartitionLag { lag_seconds: line(-240, 0, 60, 3480.0, 0.5), ..partition("payments", "0") }
    }

    fn hazards(snap: &Snapshot) -> (Vec<HazardFacts>, Vec<String>) {
        let (h, remarks) = with_context(snap, evaluate);
        (h, remarks.missing.iter().map(|m| m.to_string()).collect())
    }

    fn notes(snap: &Snapshot) -> Vec<String> {
        with_context(snap, evaluate).1.notes.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn lag_aging_toward_retention_within_a_day_is_a_warning() {
        // (7200 s retention − 3600 s lag) / 0.5 s per s = 7200 s = 2 h: over 1 h, under 24 h.
        let snap = job().partition(aging_lag()).retention("payments", Some(7200)).build();
        let (h, missing) = hazards(&snap);
        assert_eq!(h.len(), 1, "{h:?}");
        assert_eq!((h[0].kind, h[0].severity), (HazardKind::Retention, Severity::Warning));
        assert_eq!(h[0].time_to_loss_seconds, Some(7200));
        assert_eq!(h[0].topic.as_deref(), Some("payments"));
        // The growth is a number of the fact: 0.5 s per s, as the lag was made.
        assert!(
            matches!(&h[0].detail, Fact::Retention(RetentionFact::FallsOutByLag { lag_growth: Some(g), time_to_loss_s, .. })
                if (g - 0.5).abs() < 1e-9 && (time_to_loss_s - 7200.0).abs() < 1.0),
            "{:?}",
            h[0].detail
        );
        assert!(h[0].detail.to_string().contains("ages 0.50 s per s"), "{}", h[0].detail);
        assert!(missing.is_empty(), "{missing:?}");
    }

    #[test]
    fn lag_reaching_retention_within_the_hour_is_critical() {
        // (5000 − 3600) / 0.5 = 2800 s ≈ 47 min ≤ 1 h.
        let snap = job().partition(aging_lag()).retention("payments", Some(5000)).build();
        let (h, _) = hazards(&snap);
        assert_eq!(h[0].severity, Severity::Critical);
        assert_eq!(h[0].time_to_loss_seconds, Some(2800));
    }

    #[test]
    fn lag_reaching_retention_beyond_a_day_is_no_hazard() {
        // (604 800 − 3600) / 0.5 = 1 202 400 s ≈ 13.9 days > 24 h.
        let snap = job().partition(aging_lag()).retention("payments", Some(7 * 86_400)).build();
        assert!(hazards(&snap).0.is_empty());
    }

    #[test]
    fn lag_that_does_not_grow_never_reaches_retention() {
        let p = PartitionLag { lag_seconds: line(-240, 0, 60, 3600.0, 0.0), ..partition("payments", "0") };
        let snap = job().partition(p).retention("payments", Some(5000)).build();
        assert!(hazards(&snap).0.is_empty());
    }

    #[test]
    fn a_lag_in_time_at_the_retention_without_offsets_is_a_risk_not_a_loss() {
        // 7180 + 0.5 × 240 = 7300 s ≥ 7200 s, but a lag in time is an estimate and no
        // offsets say whether the consumer is still in the log: at risk now, critical, with
        // no time to loss (0 would read "already losing").
        let p = PartitionLag { lag_seconds: line(-240, 0, 60, 7180.0, 0.5), ..partition("payments", "3") };
        let snap = job().partition(aging_lag()).partition(p).retention("payments", Some(7200)).build();
        let (h, _) = hazards(&snap);
        // The worst partition (3) stands for the topic: one hazard.
        assert_eq!(h.len(), 1, "{h:?}");
        assert_eq!((h[0].severity, h[0].time_to_loss_seconds), (Severity::Critical, None));
        let words = h[0].detail.to_string();
        assert!(words.starts_with("At risk of losing data on payments: the lag, estimated at 2.0 h"), "{words}");
        assert!(words.contains("cleanup.policy unknown, Kafka's default delete assumed"), "{words}");
        assert!(!words.contains("Already losing"), "{words}");
    }

    #[test]
    fn a_consumer_offset_below_the_log_start_is_already_losing_data() {
        let p = PartitionLag {
            consumer_offset: line(-60, 0, 30, 1000.0, 0.0),
            log_start_offset: line(-60, 0, 30, 4000.0, 1000.0 / 60.0),
            ..partition("payments", "1")
        };
        let snap = job().partition(p).retention("payments", Some(86_400)).build();
        let (h, _) = hazards(&snap);
        assert_eq!(
            (h[0].kind, h[0].severity, h[0].time_to_loss_seconds),
            (HazardKind::Retention, Severity::Critical, Some(0))
        );
    }

    #[test]
    fn a_log_start_overtaking_the_consumer_gives_the_time_to_loss_from_offsets() {
        // Produce (log end) 200 records/s; lag 60 000 records → 60 000 / 200 = 300 s old,
        // growing 100 / 200 = 0.5 s per s: by lag (3600 − 300) / 0.5 = 6600 s.
        // Offsets: consumer at 500 000 reading 100/s, log start at 440 000 advancing 150/s:
        // (500 000 − 440 000) / (150 − 100) = 1200 s. The sooner wins: 1200 s → critical.
        let p = PartitionLag {
            log_end_offset: line(-240, 0, 60, 560_000.0 - 240.0 * 200.0, 200.0),
            lag_records: line(-240, 0, 60, 60_000.0 - 240.0 * 100.0, 100.0),
            consumer_offset: line(-240, 0, 60, 500_000.0 - 240.0 * 100.0, 100.0),
            log_start_offset: line(-240, 0, 60, 440_000.0 - 240.0 * 150.0, 150.0),
            ..partition("payments", "0")
        };
        let snap = job().partition(p).retention("payments", Some(3600)).build();
        let (h, _) = hazards(&snap);
        assert_eq!((h[0].severity, h[0].time_to_loss_seconds), (Severity::Critical, Some(1200)));
    }

    /// Report 09's shape: a consumer reset to an older offset catching up at 9000 records/s
    /// against 1500 produced, far above the log start; kafka-lag-exporter's extrapolated
    /// time lag is ~9.6e7 s and grows 40 s per s.
    fn catching_up_after_an_offset_reset() -> PartitionLag {
        PartitionLag {
            exporter: "kafka_lag_exporter".into(),
            lag_seconds: line(-240, 0, 60, 9.6e7, 40.0),
            log_end_offset: line(-240, 0, 60, 60_000_000.0, 1500.0),
            consumer_offset: line(-240, 0, 60, 20_000_000.0, 9000.0),
            lag_records: line(-240, 0, 60, 40_000_000.0, 1500.0 - 9000.0),
            log_start_offset: line(-240, 0, 60, 5_000_000.0, 200.0),
            ..partition("payments", "0")
        }
    }

    #[test]
    fn a_time_lag_past_the_retention_with_the_consumer_still_in_the_log_is_implausible_not_loss() {
        let snap = job().partition(catching_up_after_an_offset_reset()).retention("payments", Some(7 * 86_400)).build();
        let (h, missing) = hazards(&snap);
        // Offsets: committed 20 000 000 + 9000 × 240 = 22 160 000 ≥ log start 5 000 000 +
        // 200 × 240 = 5 048 000, and the log start (200/s) is slower than the consumer
        // (9000/s): nothing is lost and nothing will be. By records: lag 40 000 000 − 7500 ×
        // 240 = 38 200 000 at 1500 records/s produced = 25 467 s old, shrinking. The time lag
        // 9.6e7 + 40 × 240 = 96 009 600 s = 1111.2 d; the room 22 160 000 − 5 048 000.
        assert!(h.is_empty(), "{h:?}");
        assert!(missing.is_empty(), "{missing:?}");
        let notes = notes(&snap);
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(
            notes[0].starts_with("kafka_lag_exporter reports a lag (in seconds) of up to 1111.2 d on payments (partition 0), past the 7.0 d retention, while the committed offsets are still at least 17112000 records above the log start"),
            "{}",
            notes[0]
        );
    }

    #[test]
    fn a_time_lag_aging_faster_than_time_is_implausible_even_without_offsets() {
        // 3600 s growing 3 s per s (under the 7200 s retention): no record ages that fast.
        // Without offsets or records behind there is nothing else to judge by: no hazard.
        let p = PartitionLag { lag_seconds: line(-240, 0, 60, 2880.0, 3.0), ..partition("payments", "0") };
        let snap = job().partition(p).retention("payments", Some(7200)).build();
        assert!(hazards(&snap).0.is_empty());
        assert_eq!(
            notes(&snap),
            [
                "kminion reports a lag (in seconds) of up to 60 min on payments (partition 0) that grows 3.0 s per s, faster than the age of a record can: the estimate is implausible and not used."
            ]
        );
    }

    #[test]
    fn with_offsets_a_consumer_above_the_log_start_is_not_losing_data_whatever_the_time_lag() {
        // The time lag (7300 s) is past the 7200 s retention, but the committed offset
        // (1000) is above the log start (400), which stands still: no loss now, and none
        // coming from offsets; the lag in seconds is set aside.
        let p = PartitionLag {
            lag_seconds: line(-240, 0, 60, 7060.0, 1.0),
            consumer_offset: line(-240, 0, 60, 1000.0, 0.0),
            log_start_offset: line(-240, 0, 60, 400.0, 0.0),
            ..partition("payments", "0")
        };
        let snap = job().partition(p).retention("payments", Some(7200)).build();
        assert!(hazards(&snap).0.is_empty(), "{:?}", hazards(&snap));
    }

    #[test]
    fn an_unknown_retention_is_listed_as_missing() {
        let snap = job().partition(aging_lag()).build();
        let (h, missing) = hazards(&snap);
        assert!(h.is_empty());
        assert_eq!(missing, ["retention.ms of topic payments ([kafka.retention] or KMinion topic info)"]);
    }

    #[test]
    fn an_unlimited_retention_is_no_hazard_and_not_missing() {
        let snap = job().partition(aging_lag()).retention("payments", None).build();
        assert_eq!(hazards(&snap), (Vec::new(), Vec::new()));
    }

    #[test]
    fn flinks_own_pending_records_give_the_lag_when_no_exporter_covers_the_job() {
        // Source emits 2 × 450 = 900 records/s; pendingRecords grows 2 × 50 = 100 records/s
        // to 2 × 900 000 = 1 800 000. Produced = 900 + 100 = 1000 records/s.
        // Lag age = 1 800 000 / 1000 = 1800 s, aging 100 / 1000 = 0.1 s per s.
        // (7200 − 1800) / 0.1 = 54 000 s = 15 h → warning.
        let snap = job()
            .records_out("src", 0, 450.0)
            .records_out("src", 1, 450.0)
            .pending_records("src", 0, line(-240, 0, 60, 888_000.0, 50.0))
            .pending_records("src", 1, line(-240, 0, 60, 888_000.0, 50.0))
            .job_topics(&["payments"])
            .retention("payments", Some(7200))
            .build();
        let (h, missing) = hazards(&snap);
        assert_eq!(h.len(), 1, "{h:?} {missing:?}");
        assert_eq!((h[0].severity, h[0].time_to_loss_seconds), (Severity::Warning, Some(54_000)));
        assert!(
            h[0].detail.to_string().contains("pendingRecords 1800000 at 1000 records/s produced (900 consumed)"),
            "{}",
            h[0].detail
        );
    }

    #[test]
    fn flinks_pending_records_without_a_known_topic_retention_are_listed_as_missing() {
        let snap = job()
            .records_out("src", 0, 450.0)
            .records_out("src", 1, 450.0)
            .pending_records("src", 0, line(-240, 0, 60, 888_000.0, 50.0))
            .build();
        let (h, missing) = hazards(&snap);
        assert!(h.is_empty());
        assert_eq!(missing.len(), 1);
        assert!(missing[0].starts_with("retention.ms of the topic that Source: payments reads"), "{missing:?}");
    }

    /// Steady lag of 3600 s on a 7200 s retention (room: 3600 s); last checkpoint completed
    /// `age_s` before `at`.
    fn steady_lag_with_checkpoint_age(age_s: i64) -> Snapshot {
        let p = PartitionLag { lag_seconds: line(-240, 0, 60, 3600.0, 0.0), ..partition("payments", "0") };
        job()
            .partition(p)
            .retention("payments", Some(7200))
            .checkpoint_point(CheckpointPoint { last_completed_at_ms: Some(t(-age_s) as f64), ..cp(0) })
            .build()
    }

    #[test]
    fn a_recovery_point_older_than_the_room_left_in_the_log_is_a_checkpoints_stalled_hazard() {
        // 4000 s > 7200 − 3600 = 3600 s: a restart would resume from offsets out of retention.
        let (h, _) = hazards(&steady_lag_with_checkpoint_age(4000));
        assert_eq!(h.len(), 1, "{h:?}");
        assert_eq!(
            (h[0].kind, h[0].severity, h[0].time_to_loss_seconds),
            // No time to loss: nothing is lost until the job restarts.
            (HazardKind::CheckpointsStalled, Severity::Critical, None)
        );
        assert!(
            h[0].detail.to_string().contains("67 min old, more than the 60 min of lag payments can still hold"),
            "{}",
            h[0].detail
        );
    }

    #[test]
    fn without_the_completion_timestamp_the_recovery_points_age_comes_from_the_completed_counter() {
        // Flink 1.x: no lastCheckpointCompletedTimestamp. The counter last rose 4000 s before
        // `at` (12 → 13) and stayed: the recovery point is 4000 s old > 3600 s, as above.
        let p = PartitionLag { lag_seconds: line(-240, 0, 60, 3600.0, 0.0), ..partition("payments", "0") };
        let snap = job()
            .partition(p)
            .retention("payments", Some(7200))
            .checkpoint_point(CheckpointPoint { completed: Some(12.0), ..cp(-4005) })
            .checkpoint_point(CheckpointPoint { completed: Some(13.0), ..cp(-4000) })
            .checkpoint_point(CheckpointPoint { completed: Some(13.0), ..cp(0) })
            .build();
        let (h, _) = hazards(&snap);
        assert_eq!(h.iter().map(|h| h.kind).collect::<Vec<_>>(), vec![HazardKind::CheckpointsStalled], "{h:?}");
    }

    #[test]
    fn a_recovery_point_younger_than_the_room_left_in_the_log_is_no_hazard() {
        // 3000 s ≤ 3600 s.
        assert!(hazards(&steady_lag_with_checkpoint_age(3000)).0.is_empty());
    }

    /// A topic's settings as KMinion would label them (`from: "kminion"`).
    fn topic(
        policy: Option<CleanupPolicy>,
        retention_s: Option<i64>,
        retention_bytes: Option<i64>,
        partition_bytes: Option<f64>,
    ) -> TopicRetention {
        TopicRetention {
            cleanup_policy: policy,
            cleanup_policy_from: policy.map(|_| "kminion".into()),
            retention_bytes,
            partition_bytes,
            ..TopicRetention::by_time("payments", retention_s.map(|s| s * 1000), "kminion")
        }
    }

    /// A lag of 3480 + 0.5 × 240 = 3600 s (as [`aging_lag`]) on a 3000 s retention: past it
    /// by the estimate, with no offsets.
    fn past_retention(policy: Option<CleanupPolicy>) -> Snapshot {
        job().partition(aging_lag()).topic_retention(topic(policy, Some(3000), None, None)).build()
    }

    #[test]
    fn a_compacted_topic_loses_nothing_by_age_whatever_its_retention_ms() {
        let snap = past_retention(Some(CleanupPolicy::Compact));
        let (h, missing) = hazards(&snap);
        assert!(h.is_empty(), "{h:?}");
        assert!(missing.is_empty(), "{missing:?}");
        assert_eq!(
            notes(&snap),
            [
                "payments is compacted (cleanup.policy=compact and retention.ms from KMinion's topic configuration): records go by key, never by age or size, so a lag of about 60 min against its retention.ms of 50 min loses nothing; only a consumer position below the log start would lose data."
            ]
        );
    }

    #[test]
    fn compact_delete_and_delete_lose_records_by_age_and_the_hazard_names_the_policy() {
        for policy in [CleanupPolicy::CompactDelete, CleanupPolicy::Delete] {
            let (h, _) = hazards(&past_retention(Some(policy)));
            assert_eq!(h.len(), 1, "{policy:?}: {h:?}");
            // An estimate at the retention: at risk now, never "already losing".
            assert_eq!((h[0].severity, h[0].time_to_loss_seconds), (Severity::Critical, None));
            let words = h[0].detail.to_string();
            assert!(
                words.contains(&format!(
                    "cleanup.policy={} and retention.ms from KMinion's topic configuration",
                    policy.as_str()
                )),
                "{words}"
            );
            assert!(words.starts_with("At risk of losing data on payments"), "{words}");
        }
    }

    #[test]
    fn an_unlimited_retention_ms_loses_nothing_by_age_but_the_log_start_still_counts() {
        // retention.ms = -1 on a deleting topic: no age limit. The committed offset (1000)
        // is below the log start (4000, moved by retention.bytes or DeleteRecords): lost.
        let p = PartitionLag {
            consumer_offset: line(-60, 0, 30, 1000.0, 0.0),
            log_start_offset: line(-60, 0, 30, 4000.0, 0.0),
            ..aging_lag()
        };
        let snap = job().partition(p).topic_retention(topic(Some(CleanupPolicy::Delete), None, None, None)).build();
        let (h, _) = hazards(&snap);
        assert_eq!(h.len(), 1, "{h:?}");
        assert_eq!((h[0].severity, h[0].time_to_loss_seconds), (Severity::Critical, Some(0)));
        assert!(
            h[0].detail.to_string().contains("(partition 0: committed offset 1000 < log start 4000)"),
            "{}",
            h[0].detail
        );
        // Without the offsets: nothing goes by age, no hazard.
        let snap = job().partition(aging_lag()).topic_retention(topic(Some(CleanupPolicy::Delete), None, None, None));
        assert!(hazards(&snap.build()).0.is_empty());
    }

    /// A partition of 1 000 000 records (log start 0 → end 1 000 000, produced at 100/s)
    /// whose lag is 400 000 records growing 50/s.
    fn sized_partition() -> PartitionLag {
        PartitionLag {
            log_start_offset: line(-240, 0, 60, 0.0, 0.0),
            log_end_offset: line(-240, 0, 60, 1_000_000.0 - 240.0 * 100.0, 100.0),
            lag_records: line(-240, 0, 60, 400_000.0 - 240.0 * 50.0, 50.0),
            ..partition("payments", "0")
        }
    }

    #[test]
    fn retention_bytes_against_the_partitions_size_gives_an_at_risk_time() {
        // 1 GB over 1 000 000 records = 1000 bytes per record; retention.bytes 500 MB holds
        // 500 000 records: (500 000 − 400 000) / 50 per s = 2000 s ≈ 33 min → critical. The
        // position (1 000 000 − 400 000) is above the log start, and the age (400 000 / 100
        // = 4000 s) is far from the 7 d retention.ms.
        let r = topic(Some(CleanupPolicy::Delete), Some(7 * 86_400), Some(500_000_000), Some(1e9));
        let (h, _) = hazards(&job().partition(sized_partition()).topic_retention(r).build());
        assert_eq!(h.len(), 1, "{h:?}");
        assert_eq!((h[0].severity, h[0].time_to_loss_seconds), (Severity::Critical, Some(2000)));
        assert!(
            matches!(&h[0].detail, Fact::Retention(RetentionFact::FallsOutBySize { capacity_records, bytes_per_record, .. })
                if (capacity_records - 500_000.0).abs() < 1e-6 && (bytes_per_record - 1000.0).abs() < 1e-9),
            "{:?}",
            h[0].detail
        );
        let words = h[0].detail.to_string();
        assert!(words.starts_with("payments is at risk of falling out of retention in 33 min"), "{words}");
    }

    #[test]
    fn a_lag_past_what_retention_bytes_holds_while_the_position_is_in_the_log_is_a_note_not_a_hazard() {
        // 1000 bytes per record (1 GB over 1 000 000 records): retention.bytes 300 MB holds
        // 300 000 records < the 400 000 lag. But the position (1 000 000 − 400 000 =
        // 600 000) is 600 000 records above the log start (0), which stands still: the
        // offsets win, as for retention.ms; no "0 s" hazard, a note with the real margin.
        let r = topic(Some(CleanupPolicy::Delete), None, Some(300_000_000), Some(1e9));
        let snap = job().partition(sized_partition()).topic_retention(r).build();
        assert!(hazards(&snap).0.is_empty(), "{:?}", hazards(&snap));
        assert_eq!(
            notes(&snap),
            [
                "The lag of up to 400000 records on payments (partition 0) is past the 300000 records that retention.bytes (300.0 MB per partition) holds by the partition's size, while the position is still at least 600000 records above the log start: the estimate is contradicted by the offsets and not used; loss is judged from the offsets."
            ]
        );
    }

    #[test]
    fn a_shrinking_lag_below_what_retention_bytes_holds_never_falls_out_by_size() {
        // Capacity 500 000 records (as above with 500 MB); the lag 400 000 shrinks 50/s.
        let p = PartitionLag { lag_records: line(-240, 0, 60, 400_000.0 + 240.0 * 50.0, -50.0), ..sized_partition() };
        let r = topic(Some(CleanupPolicy::Delete), None, Some(500_000_000), Some(1e9));
        assert!(hazards(&job().partition(p).topic_retention(r).build()).0.is_empty());
    }

    #[test]
    fn a_lag_past_what_retention_bytes_holds_without_a_position_is_at_risk_now_with_no_time_to_loss() {
        // The lag is sampled at other instants than the log end, so no position (log end −
        // lag) can be formed: the estimate (400 000 > 300 000 records) stands alone, a risk
        // now, never "in 0 s", whether the lag grows or shrinks.
        for slope in [50.0, -50.0] {
            let p = PartitionLag { lag_records: line(-230, -10, 60, 400_000.0, slope), ..sized_partition() };
            let r = topic(Some(CleanupPolicy::Delete), None, Some(300_000_000), Some(1e9));
            let (h, _) = hazards(&job().partition(p).topic_retention(r).build());
            assert_eq!(h.len(), 1, "{h:?}");
            assert_eq!((h[0].severity, h[0].time_to_loss_seconds), (Severity::Critical, None));
            let words = h[0].detail.to_string();
            assert!(words.starts_with("At risk of losing data on payments: the lag ("), "{words}");
            assert!(!words.contains("grows towards") && !words.contains("in 0 s"), "{words}");
        }
    }

    #[test]
    fn a_compacted_topic_below_its_log_start_gets_no_loses_nothing_note() {
        // Committed 1000 < log start 4000: lost, whatever the policy; the compaction note
        // ("loses nothing") would contradict the hazard and is not given.
        let p = PartitionLag {
            consumer_offset: line(-60, 0, 30, 1000.0, 0.0),
            log_start_offset: line(-60, 0, 30, 4000.0, 0.0),
            ..aging_lag()
        };
        let snap = job().partition(p).topic_retention(topic(Some(CleanupPolicy::Compact), Some(3000), None, None));
        let snap = snap.build();
        let (h, _) = hazards(&snap);
        assert_eq!((h.len(), h[0].time_to_loss_seconds), (1, Some(0)), "{h:?}");
        assert!(notes(&snap).is_empty(), "{:?}", notes(&snap));
    }

    #[test]
    fn retention_bytes_does_not_apply_to_a_compacted_topic_nor_without_the_partitions_size() {
        let compacted = topic(Some(CleanupPolicy::Compact), Some(7 * 86_400), Some(500_000_000), Some(1e9));
        assert!(hazards(&job().partition(sized_partition()).topic_retention(compacted).build()).0.is_empty());
        let no_size = topic(Some(CleanupPolicy::Delete), Some(7 * 86_400), Some(500_000_000), None);
        assert!(hazards(&job().partition(sized_partition()).topic_retention(no_size).build()).0.is_empty());
    }

    #[test]
    fn the_hazard_says_the_retention_was_the_broker_default() {
        let r = TopicRetention::by_time("payments", Some(5_000_000), "broker default");
        let (h, _) = hazards(&job().partition(aging_lag()).topic_retention(r).build());
        // (5000 − 3600) / 0.5 = 2800 s: an estimate, at risk in 47 min.
        assert_eq!(h[0].time_to_loss_seconds, Some(2800));
        assert!(h[0].detail.to_string().contains("retention.ms from the configured broker default"), "{}", h[0].detail);
    }

    /// KMinion's view of partition 0: no committed offset, only the lag in records and the
    /// high / low water marks; produce 100 records/s.
    fn kminion_partition(log_start: f64) -> PartitionLag {
        PartitionLag {
            lag_records: line(-240, 0, 60, 900_000.0, 0.0),
            log_end_offset: line(-240, 0, 60, 1_000_000.0 - 240.0 * 100.0, 100.0),
            log_start_offset: line(-240, 0, 60, log_start, 0.0),
            ..partition("payments", "0")
        }
    }

    #[test]
    fn without_a_committed_offset_the_position_is_the_high_water_mark_less_the_lag() {
        // Position 1 000 000 − 900 000 = 100 000 < log start 200 000: evidence of loss,
        // said as a position, not a committed offset.
        let snap = job().partition(kminion_partition(200_000.0)).topic_retention(topic(None, Some(3600), None, None));
        let (h, _) = hazards(&snap.build());
        assert_eq!((h[0].severity, h[0].time_to_loss_seconds), (Severity::Critical, Some(0)));
        let words = h[0].detail.to_string();
        assert!(words.starts_with("Already losing data on payments: the consumer's position is below the log start offset (partition 0: position (log end − lag) 100000 < log start 200000)"), "{words}");
    }

    #[test]
    fn a_known_log_start_below_the_position_wins_over_a_lag_age_past_the_retention() {
        // Position 100 000 ≥ log start 50 000, which stands still. The age by records
        // (900 000 / 100 = 9000 s) is past the 3600 s retention: the estimate is set aside.
        let snap = job().partition(kminion_partition(50_000.0)).topic_retention(topic(None, Some(3600), None, None));
        let snap = snap.build();
        assert!(hazards(&snap).0.is_empty(), "{:?}", hazards(&snap));
        assert!(notes(&snap)[0].starts_with("kminion reports a lag (records behind ÷ produce rate) of up to 2.5 h"));
    }

    #[test]
    fn a_position_below_the_log_start_is_a_loss_even_when_the_retention_is_unknown() {
        let snap = job().partition(kminion_partition(200_000.0)).build();
        let (h, missing) = hazards(&snap);
        assert_eq!(h[0].time_to_loss_seconds, Some(0));
        assert_eq!(missing, ["retention.ms of topic payments ([kafka.retention] or KMinion topic info)"]);
    }

    #[test]
    fn critical_hazards_come_before_warnings() {
        // payments: warning (7200 s); refunds: critical (2800 s).
        let snap = job()
            .partition(aging_lag())
            .partition(PartitionLag { topic: "refunds".into(), ..aging_lag() })
            .retention("payments", Some(7200))
            .retention("refunds", Some(5000))
            .build();
        let (h, _) = hazards(&snap);
        let order: Vec<_> = h.iter().map(|h| (h.topic.as_deref().unwrap(), h.severity)).collect();
        assert_eq!(order, [("refunds", Severity::Critical), ("payments", Severity::Warning)]);
    }
}
