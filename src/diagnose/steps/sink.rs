//! Step `sink`: the culprit is a sink, so the fix belongs to the system it writes to.
//!
//! Hits when the culprit vertex has no downstream consumers. Tells a uniformly slow sink
//! (every subtask busy: the external system overall) from one hot subtask (one writer
//! stuck, or a hot key or document at the destination).

use crate::diagnose::signals::VertexSignals;
use crate::diagnose::steps::{headroom, skew};
use crate::diagnose::{Context, StepReport, num, pct};
use crate::verdict::Finding;

pub fn run(ctx: &Context, culprit: &VertexSignals) -> StepReport {
    if ctx.signals.graph_free {
        return StepReport::no_data(
            "Without the job graph it is unknown whether the culprit is a sink.",
            vec!["job graph (Flink REST /jobs/:id/plan)".into()],
        );
    }
    if !culprit.is_sink {
        return StepReport::clear(format!("{} has downstream consumers; it is not a sink.", culprit.name));
    }
    let t = &ctx.cfg.thresholds;
    let mut r = StepReport::hit(Finding::Sink, format!("{} is a sink vertex (no downstream consumers).", culprit.name));
    let throughput = culprit.throughput();
    let per_record_ms = match (culprit.utilisation(), throughput) {
        (Some(rho), Some(rate)) if rate > 0.0 => Some(rho * 1000.0 * culprit.subtasks.len() as f64 / rate),
        _ => None,
    };
    match skew::find(culprit, t) {
        Some(hot) => {
            let share = skew::share(culprit, hot.subtask);
            let tm = hot.tm_id.as_deref().unwrap_or("unknown");
            r.subtasks = Some(vec![hot.subtask]);
            match share {
                Some(s) if skew::is_hot_key(culprit, hot.subtask, t) => {
                    r.cause.push(format!(
                        "One sink subtask is hot: {} is busy {} and receives {} of the records (share {:.2} at parallelism {}), while the others are about {} busy: a hot key or document at the destination.",
                        culprit.subtask_name(hot.subtask),
                        pct(hot.busy.unwrap_or(0.0)),
                        pct(s),
                        s,
                        culprit.parallelism,
                        pct(skew::others_median(culprit, hot.subtask).unwrap_or(0.0))
                    ));
                    r.fix.push(format!(
                        "Spread the hot key at the destination: write it under a different key or partition (the sink's input is keyed so {} gets {} of the records), or batch and merge writes to that key before they reach the system behind {}.",
                        culprit.subtask_name(hot.subtask),
                        pct(s),
                        culprit.name
                    ));
                }
                _ => {
                    r.cause.push(format!(
                        "One sink writer is slow: {} is busy {} while the others are about {} busy, although records are spread evenly{}: that writer's connection or the destination node it talks to is slow or stuck.",
                        culprit.subtask_name(hot.subtask),
                        pct(hot.busy.unwrap_or(0.0)),
                        pct(skew::others_median(culprit, hot.subtask).unwrap_or(0.0)),
                        share.map(|s| format!(" (share {s:.2})")).unwrap_or_default()
                    ));
                    r.fix.push(format!(
                        "Look at the destination node, shard or partition that {} writes to, and at its TaskManager ({tm}): a stuck connection, a slow replica, a hot shard. Restarting that writer's connection (or the TaskManager) moves it elsewhere.",
                        culprit.subtask_name(hot.subtask)
                    ));
                }
            }
            r.summary = Some(format!(
                "{} (sink) is the culprit: one of its subtasks ({}) is the bottleneck, the others are mostly idle.",
                culprit.name, hot.subtask
            ));
        }
        None => {
            let busy_min = culprit.subtasks.iter().filter_map(|s| s.busy).reduce(f64::min).unwrap_or(0.0);
            r.cause.push(format!(
                "{} of the sink are busy ({}–{}): the system it writes to accepts only about {} records/s in total{}.",
                match culprit.subtasks.len() {
                    1 => "The one subtask".to_string(),
                    2 => "Both subtasks".to_string(),
                    n => format!("All {n} subtasks"),
                },
                pct(busy_min),
                pct(culprit.busy_max().unwrap_or(0.0)),
                throughput.map(num).unwrap_or_else(|| "?".into()),
                per_record_ms.map(|ms| format!(" ({ms:.2} ms per record per writer)")).unwrap_or_default()
            ));
            r.fix.push(format!(
                "Fix the system behind {}: it takes {} per record. Look at its write latency, locks, throttling, indexing and partitions (database, search cluster, HTTP service or broker).",
                culprit.name,
                per_record_ms.map(|ms| format!("{ms:.2} ms")).unwrap_or_else(|| "too long".into())
            ));
            r.fix.push(
                "Write in bigger batches: raise the sink's batch size and flush interval (JDBC sink.buffer-flush.max-rows / sink.buffer-flush.interval, Elasticsearch sink.bulk-flush.max-actions, Kafka properties.linger.ms and properties.batch.size).".into(),
            );
            if let Some(needed) = headroom::parallelism_needed(ctx, culprit) {
                r.fix.push(format!(
                    "Only if the destination scales with more connections: raise {}'s parallelism from {} to {} (for the offered {} records/s at {} busy).",
                    culprit.name,
                    culprit.parallelism,
                    needed.parallelism,
                    num(needed.offered_per_s),
                    pct(ctx.cfg.thresholds.target_utilisation)
                ));
            }
            r.summary = Some(format!(
                "{} (sink) is the culprit: the system it writes to is too slow ({} records/s); the vertices before it are backpressured.",
                culprit.name,
                throughput.map(num).unwrap_or_else(|| "?".into())
            ));
        }
    }
    r.evidence.push(ctx.evidence(
        &culprit.name,
        "busyTimeMsPerSecond",
        culprit.busy_max().unwrap_or(0.0),
        "ratio",
        Some(t.busy_ratio),
        "busy",
    ));
    if let Some(rate) = throughput {
        r.evidence.push(ctx.evidence(&culprit.name, "numRecordsIn rate", rate, "records/s", None, "records_in"));
    }
    if let Some(ms) = per_record_ms {
        r.evidence.push(ctx.evidence(&culprit.name, "busy time per record", ms, "ms", None, "busy"));
    }
    r
}
