//! Hazards `retention` and `checkpoints_stalled`: can the log upstream hold the lag?
//!
//! Evaluated on every diagnosis, whatever the finding. Backpressure is safe only while
//! the durable log absorbs it. Per topic (worst partition): the time until the oldest
//! unconsumed record falls out of retention, `(retention − lag_seconds) / d(lag_seconds)/dt`,
//! or from offsets `(consumer offset − log-start offset) / (log-start advance − consume
//! rate)`; "already losing data" when the consumer is below the log start or the lag
//! reaches the retention. A Kafka source that falls off the log resets silently to the
//! earliest offset: the loss is silent. `checkpoints_stalled`: when the recovery point is
//! older than the lag the log can still hold, a restart would fall off the log.

use std::collections::BTreeMap;

use crate::collect::snapshot::{PartitionLag, Point};
use crate::diagnose::steps::locate::sum_lag;
use crate::diagnose::{Context, human_secs, num, slope_per_s};
use crate::verdict::{Hazard, HazardKind, Severity};

/// One topic's exposure.
#[derive(Debug, Clone, PartialEq)]
struct Exposure {
    topic: String,
    /// Age of the oldest unconsumed record, s.
    lag_s: f64,
    /// How fast that age grows, s per s (1.0: the consumer stands still).
    lag_growth: Option<f64>,
    retention_s: f64,
    /// Seconds until loss; 0 when already losing.
    time_to_loss_s: Option<f64>,
    how: String,
}

fn last(points: &[Point]) -> Option<f64> {
    points.iter().rev().find(|p| p.1.is_finite()).map(|p| p.1)
}

/// The hazards and the retention inputs that were missing.
pub fn evaluate(ctx: &Context) -> (Vec<Hazard>, Vec<String>) {
    let mut missing = Vec::new();
    let retention: BTreeMap<&str, Option<i64>> =
        ctx.snapshot.retention.iter().map(|r| (r.topic.as_str(), r.retention_ms)).collect();
    let mut exposures: Vec<Exposure> = Vec::new();

    // Kafka exporters: per topic, the worst partition.
    let mut by_topic: BTreeMap<&str, Vec<&PartitionLag>> = BTreeMap::new();
    for p in &ctx.snapshot.partitions {
        by_topic.entry(p.topic.as_str()).or_default().push(p);
    }
    for (topic, partitions) in by_topic {
        match retention.get(topic) {
            Some(Some(ms)) => {
                let worst = partitions.iter().filter_map(|p| partition_exposure(topic, p, *ms as f64 / 1000.0)).min_by(
                    |a, b| {
                        a.time_to_loss_s.unwrap_or(f64::INFINITY).total_cmp(&b.time_to_loss_s.unwrap_or(f64::INFINITY))
                    },
                );
                exposures.extend(worst);
            }
            Some(None) => {}
            None => missing.push(format!("retention.ms of topic {topic} ([kafka.retention] or KMinion topic info)")),
        }
    }

    // Flink's own source lag when no exporter covers the job.
    if ctx.snapshot.partitions.is_empty() {
        for v in ctx.signals.vertices.iter().filter(|v| v.is_source) {
            let lag = sum_lag(ctx, &v.id);
            let (Some(lag_records), Some(out)) = (last(&lag), v.throughput()) else { continue };
            let growth = slope_per_s(&lag).unwrap_or(0.0);
            let topic = topic_of_source(ctx, &v.name);
            let Some(Some(ms)) = retention.get(topic.as_str()) else {
                if growth > 0.0 || lag_records > 0.0 {
                    missing.push(format!(
                        "retention.ms of the topic that {} reads (set [kafka.retention] and [[kafka.jobs]] topics in the configuration)",
                        v.name
                    ));
                }
                continue;
            };
            let produce = out + growth.max(0.0);
            if produce <= 0.0 {
                continue;
            }
            // Age of the oldest unconsumed record ≈ lag ÷ produce rate; it grows by
            // growth ÷ produce seconds per second.
            let lag_s = lag_records / produce;
            let lag_growth = growth / produce;
            let retention_s = *ms as f64 / 1000.0;
            let time_to_loss_s = if lag_s >= retention_s {
                Some(0.0)
            } else if lag_growth > 0.0 {
                Some((retention_s - lag_s) / lag_growth)
            } else {
                None
            };
            exposures.push(Exposure {
                topic,
                lag_s,
                lag_growth: Some(lag_growth),
                retention_s,
                time_to_loss_s,
                how: format!(
                    "pendingRecords {} at {} records/s produced ({} consumed)",
                    num(lag_records),
                    num(produce),
                    num(out)
                ),
            });
        }
    }

    let t = &ctx.cfg.thresholds;
    let critical_s = t.retention_critical.as_ms() as f64 / 1000.0;
    let warning_s = t.retention_warning.as_ms() as f64 / 1000.0;
    let mut hazards = Vec::new();
    for e in &exposures {
        let Some(ttl) = e.time_to_loss_s else { continue };
        if ttl > warning_s {
            continue;
        }
        let severity = if ttl <= critical_s { Severity::Critical } else { Severity::Warning };
        let detail = if ttl <= 0.0 {
            format!(
                "Already losing data on {}: the lag ({}) has reached the retention ({}). A Kafka source that falls off the log resets silently to the earliest retained offset.",
                e.topic,
                human_secs(e.lag_s),
                human_secs(e.retention_s)
            )
        } else {
            format!(
                "{} falls out of retention in {}: the oldest unconsumed record is {} old and ages {:.2} s per s against a retention of {} ({}). The loss would be silent: the source resets to the earliest retained offset.",
                e.topic,
                human_secs(ttl),
                human_secs(e.lag_s),
                e.lag_growth.unwrap_or(0.0),
                human_secs(e.retention_s),
                e.how
            )
        };
        hazards.push(Hazard {
            kind: HazardKind::Retention,
            severity,
            time_to_loss_seconds: Some(ttl.max(0.0).round() as i64),
            topic: Some(e.topic.clone()),
            detail,
        });
    }

    // The recovery point against what the log can still hold.
    if let Some(age_s) = checkpoint_age_s(ctx) {
        for e in &exposures {
            let room = e.retention_s - e.lag_s;
            if age_s > room.max(0.0) {
                hazards.push(Hazard {
                    kind: HazardKind::CheckpointsStalled,
                    severity: Severity::Critical,
                    time_to_loss_seconds: Some(0),
                    topic: Some(e.topic.clone()),
                    detail: format!(
                        "The last completed checkpoint is {} old, more than the {} of lag {} can still hold: a restart now would resume from offsets already out of retention.",
                        human_secs(age_s),
                        human_secs(room.max(0.0)),
                        e.topic
                    ),
                });
            }
        }
    }
    hazards.sort_by(|a, b| b.severity.cmp(&a.severity).then(a.time_to_loss_seconds.cmp(&b.time_to_loss_seconds)));
    missing.sort();
    missing.dedup();
    (hazards, missing)
}

fn partition_exposure(topic: &str, p: &PartitionLag, retention_s: f64) -> Option<Exposure> {
    // Already below the log start: records were skipped.
    if let (Some(consumer), Some(start)) = (last(&p.consumer_offset), last(&p.log_start_offset))
        && consumer < start
    {
        return Some(Exposure {
            topic: topic.into(),
            lag_s: retention_s,
            lag_growth: None,
            retention_s,
            time_to_loss_s: Some(0.0),
            how: format!("partition {}: consumer offset below the log start", p.partition),
        });
    }
    let produce = slope_per_s(&p.log_end_offset).filter(|r| *r > 0.0);
    let (lag_s, growth) = if !p.lag_seconds.is_empty() {
        (last(&p.lag_seconds)?, slope_per_s(&p.lag_seconds))
    } else {
        let produce = produce?;
        (last(&p.lag_records)? / produce, slope_per_s(&p.lag_records).map(|g| g / produce))
    };
    let mut ttl =
        if lag_s >= retention_s { Some(0.0) } else { growth.filter(|g| *g > 0.0).map(|g| (retention_s - lag_s) / g) };
    // From offsets: the log start advancing faster than the consumer.
    if let (Some(consumer), Some(start), Some(start_rate), Some(consume_rate)) = (
        last(&p.consumer_offset),
        last(&p.log_start_offset),
        slope_per_s(&p.log_start_offset),
        slope_per_s(&p.consumer_offset),
    ) && start_rate > consume_rate
    {
        let by_offsets = (consumer - start) / (start_rate - consume_rate);
        ttl = Some(ttl.map_or(by_offsets, |t| t.min(by_offsets)));
    }
    Some(Exposure {
        topic: topic.into(),
        lag_s,
        lag_growth: growth,
        retention_s,
        time_to_loss_s: ttl,
        how: format!("partition {} of consumer group {} ({})", p.partition, p.consumer_group, p.exporter),
    })
}

/// The topic a source reads: the configured topic when the job has exactly one, else the
/// source vertex name.
fn topic_of_source(ctx: &Context, source_name: &str) -> String {
    match ctx.snapshot.job_topics.as_slice() {
        [one] => one.clone(),
        _ => source_name.to_string(),
    }
}

/// Seconds since the last completed checkpoint, when known.
pub fn checkpoint_age_s(ctx: &Context) -> Option<f64> {
    let last =
        ctx.snapshot.checkpoints.series.iter().rev().find_map(|p| p.last_completed_at_ms).filter(|t| *t > 0.0)?;
    Some(((ctx.snapshot.at_ms as f64 - last) / 1000.0).max(0.0))
}
