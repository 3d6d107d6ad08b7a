//! Step `headroom`: nothing broken, just too close to capacity.
//!
//! Utilisation ρ of a vertex is its mean busy ratio. Hits when the culprit (or, with no
//! culprit, the busiest vertex) runs at ρ ≥ 0.9. Response time grows as 1/(1−ρ). When
//! several vertices are near capacity (ρ ≥ 0.8) and the culprit does not stand out (within
//! 0.1), there is no single culprit: the whole job needs capacity. The fix gives a number:
//! `parallelism_needed = ceil(p × offered / (capacity × 0.7))`, offered being the source's
//! produce rate when its lag shows it, else the observed rate (a lower bound).
//!
//! Inside: `async_io` — a busy async I/O or lookup operator on TaskManagers with low CPU
//! waits on its in-flight queue, not on CPU (Little's law), and needs a different fix.

use crate::diagnose::signals::VertexSignals;
use crate::diagnose::steps::locate::sum_lag;
use crate::diagnose::{Context, StepReport, num, pct, slope_per_s};
use crate::verdict::Finding;

/// The parallelism a vertex needs for the offered load at the target utilisation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Needed {
    pub parallelism: u32,
    /// Offered rate at this vertex, records/s.
    pub offered_per_s: f64,
    /// The vertex's true processing rate now, records/s.
    pub capacity_per_s: f64,
    /// False when the offered rate is the observed one (a lower bound).
    pub offered_known: bool,
}

/// How much more the sources are offered than they emit: Σ (emitted + lag growth) / Σ
/// emitted, from Flink's `pendingRecords`. `None` without lag data.
pub fn offered_factor(ctx: &Context) -> Option<f64> {
    let mut emitted = 0.0;
    let mut offered = 0.0;
    let mut any = false;
    for v in ctx.signals.vertices.iter().filter(|v| v.is_source) {
        let Some(out) = v.throughput() else { continue };
        let lag = sum_lag(ctx, &v.id);
        let Some(growth) = slope_per_s(&lag) else { continue };
        any = true;
        emitted += out;
        offered += out + growth.max(0.0);
    }
    (any && emitted > 0.0).then(|| offered / emitted)
}

/// `ceil(p × offered / (capacity × target))` for `v`, or `None` without rates.
pub fn parallelism_needed(ctx: &Context, v: &VertexSignals) -> Option<Needed> {
    let capacity = v.capacity()?;
    let observed = v.throughput()?;
    if capacity <= 0.0 {
        return None;
    }
    let factor = offered_factor(ctx);
    let offered = observed * factor.unwrap_or(1.0);
    let p = v.subtasks.len().max(1) as f64;
    let target = ctx.cfg.thresholds.target_utilisation;
    let parallelism = (p * offered / (capacity * target)).ceil().max(1.0) as u32;
    Some(Needed { parallelism, offered_per_s: offered, capacity_per_s: capacity, offered_known: factor.is_some() })
}

/// What `headroom` found besides its report.
#[derive(Debug, Clone, PartialEq)]
pub struct HeadroomResult {
    pub report: StepReport,
    /// The vertex judged (the culprit, or the busiest one).
    pub subject: Option<String>,
    /// True when several vertices are near capacity and none stands out.
    pub no_single_culprit: bool,
}

pub fn run(ctx: &Context, culprit: Option<&VertexSignals>) -> HeadroomResult {
    let t = &ctx.cfg.thresholds;
    let busiest = || {
        ctx.signals
            .vertices
            .iter()
            .filter(|v| v.utilisation().is_some())
            .max_by(|a, b| a.utilisation().unwrap().total_cmp(&b.utilisation().unwrap()))
    };
    let Some(subject) = culprit.or_else(busiest) else {
        return HeadroomResult {
            report: StepReport::no_data("No busy time for any vertex.", vec!["busyTimeMsPerSecond".into()]),
            subject: None,
            no_single_culprit: false,
        };
    };
    let Some(rho) = subject.utilisation() else {
        return HeadroomResult {
            report: StepReport::no_data(
                format!("No busy time for {}.", subject.name),
                vec!["busyTimeMsPerSecond".into()],
            ),
            subject: Some(subject.id.clone()),
            no_single_culprit: false,
        };
    };
    let role = if culprit.is_some() { "the culprit" } else { "the busiest vertex" };
    if rho < t.headroom_utilisation {
        return HeadroomResult {
            report: StepReport::clear(format!(
                "{} ({role}) runs at ρ = {:.2} (mean busy over {} subtasks), below {:.2}.",
                subject.name,
                rho,
                subject.subtasks.len(),
                t.headroom_utilisation
            )),
            subject: Some(subject.id.clone()),
            no_single_culprit: false,
        };
    }

    let near: Vec<&VertexSignals> = ctx
        .signals
        .vertices
        .iter()
        .filter(|v| v.utilisation().is_some_and(|u| u >= t.near_capacity_utilisation))
        .collect();
    let others_max = near.iter().filter(|v| v.id != subject.id).filter_map(|v| v.utilisation()).reduce(f64::max);
    if let Some(other) = others_max.filter(|o| rho - o <= t.stand_out_margin) {
        return no_single_culprit(ctx, subject, &near, rho, other);
    }
    if let Some(report) = async_io(ctx, subject, rho) {
        return HeadroomResult { report, subject: Some(subject.id.clone()), no_single_culprit: false };
    }

    let mut r = StepReport::hit(
        Finding::Headroom,
        format!("{} ({role}) runs at ρ = {:.2} ≥ {:.2}: at capacity.", subject.name, rho, t.headroom_utilisation),
    );
    let busy_min = subject.subtasks.iter().filter_map(|s| s.busy).reduce(f64::min).unwrap_or(rho);
    let per_record_ms =
        subject.throughput().filter(|r| *r > 0.0).map(|rate| rho * 1000.0 * subject.subtasks.len() as f64 / rate);
    r.cause.push(format!(
        "{} runs at ρ = {} (mean busy over {} subtasks, {}–{}){}: it is at capacity{}. Response time grows as 1/(1−ρ): at ρ = 0.95 every burst waits 20× longer than on an idle job, so bursts turn into growing lag.",
        subject.name,
        pct(rho),
        subject.subtasks.len(),
        pct(busy_min),
        pct(subject.busy_max().unwrap_or(rho)),
        if culprit.is_some() { " and no earlier step explains it (no sink, no hot key, no state-backend or checkpoint trouble)" } else { "" },
        subject.capacity().map(|c| format!(", ~{} records/s", num(c))).unwrap_or_default()
    ));
    match parallelism_needed(ctx, subject) {
        Some(n) => {
            r.fix.push(format!(
                "Raise {}'s parallelism from {} to {}: ceil({} × offered {} records/s / (capacity {} records/s × {})){}. Here, unlike for backpressured vertices, parallelism helps.",
                subject.name,
                subject.subtasks.len(),
                n.parallelism.max(subject.subtasks.len() as u32 + 1),
                subject.subtasks.len(),
                num(n.offered_per_s),
                num(n.capacity_per_s),
                t.target_utilisation,
                if n.offered_known { "" } else { " — the offered rate is the observed one, a lower bound: without source lag data the real demand is unknown" }
            ));
            r.evidence.push(ctx.evidence(
                &subject.name,
                "capacity (records in / busy)",
                n.capacity_per_s,
                "records/s",
                None,
                "records_in",
            ));
            r.evidence.push(ctx.evidence(
                &subject.name,
                "offered rate",
                n.offered_per_s,
                "records/s",
                None,
                "pending_records",
            ));
        }
        None => {
            r.fix.push(format!(
                "Raise {}'s parallelism (now {}) so it runs below {} busy; records rates are missing, so the exact number is unknown.",
                subject.name,
                subject.subtasks.len(),
                pct(t.target_utilisation)
            ));
            r.missing.push("numRecordsIn".into());
        }
    }
    if let Some(ms) = per_record_ms {
        r.fix.push(format!(
            "Or make {} cheaper per record: it spends {:.2} ms of busy time per record now.",
            subject.name, ms
        ));
    }
    r.evidence.push(ctx.evidence(
        &subject.name,
        "utilisation ρ (mean busyTimeMsPerSecond)",
        rho,
        "ratio",
        Some(t.headroom_utilisation),
        "busy",
    ));
    r.summary = Some(match (culprit, parallelism_needed(ctx, subject)) {
        (Some(_), Some(n)) => format!(
            "{} is the culprit: it runs at {} of its capacity; raise its parallelism from {} to {}.",
            subject.name,
            pct(rho),
            subject.subtasks.len(),
            n.parallelism.max(subject.subtasks.len() as u32 + 1)
        ),
        (Some(_), None) => format!("{} is the culprit: it runs at {} of its capacity.", subject.name, pct(rho)),
        (None, _) => format!(
            "No backpressure yet, but {} runs at {} of its capacity: bursts will turn into lag.",
            subject.name,
            pct(rho)
        ),
    });
    HeadroomResult { report: r, subject: Some(subject.id.clone()), no_single_culprit: false }
}

fn no_single_culprit(
    ctx: &Context,
    subject: &VertexSignals,
    near: &[&VertexSignals],
    rho: f64,
    other: f64,
) -> HeadroomResult {
    let t = &ctx.cfg.thresholds;
    let list = near
        .iter()
        .map(|v| format!("{} {}", v.name, pct(v.utilisation().unwrap_or(0.0))))
        .collect::<Vec<_>>()
        .join(", ");
    let mut r = StepReport::hit(
        Finding::Headroom,
        format!(
            "{} vertices run near capacity (ρ ≥ {:.2}): {list}; {} ({:.2}) does not stand out from the next ({:.2}) by more than {:.2}.",
            near.len(),
            t.near_capacity_utilisation,
            subject.name,
            rho,
            other,
            t.stand_out_margin
        ),
    );
    r.cause.push(format!(
        "No single operator is broken: {} vertices run near capacity ({list}). The whole job is too close to its capacity; scaling only the first one would move the bottleneck to the next.",
        near.len()
    ));
    for v in near {
        match parallelism_needed(ctx, v) {
            Some(n) => r.fix.push(format!(
                "{}: parallelism {} → {} (capacity {} records/s, offered {} records/s).",
                v.name,
                v.subtasks.len(),
                n.parallelism.max(v.subtasks.len() as u32 + 1),
                num(n.capacity_per_s),
                num(n.offered_per_s)
            )),
            None => r.fix.push(format!(
                "{}: more parallelism (now {}); records rates are missing.",
                v.name,
                v.subtasks.len()
            )),
        }
        r.evidence.push(ctx.evidence(
            &v.name,
            "utilisation ρ (mean busyTimeMsPerSecond)",
            v.utilisation().unwrap_or(0.0),
            "ratio",
            Some(t.near_capacity_utilisation),
            "busy",
        ));
    }
    r.not_the_fix.push(format!("Scaling only {}: the next vertex near capacity becomes the bottleneck.", subject.name));
    r.summary = Some(format!(
        "No single culprit: {} vertices run near capacity ({list}); the job needs more capacity.",
        near.len()
    ));
    HeadroomResult { report: r, subject: None, no_single_culprit: true }
}

/// A busy async I/O or lookup operator on TaskManagers with low CPU load waits on its
/// in-flight queue.
fn async_io(ctx: &Context, v: &VertexSignals, rho: f64) -> Option<StepReport> {
    if !v.has_async {
        return None;
    }
    let t = &ctx.cfg.thresholds;
    let tms: Vec<&str> = v.subtasks.iter().filter_map(|s| s.tm_id.as_deref()).collect();
    let loads: Vec<f64> = ctx
        .snapshot
        .taskmanagers
        .iter()
        .filter(|tm| tms.contains(&tm.tm_id.as_str()))
        .filter_map(|tm| tm.cpu_load)
        .collect();
    if loads.is_empty() {
        return None;
    }
    let cpu = loads.iter().sum::<f64>() / loads.len() as f64;
    if cpu >= t.async_io_cpu_load {
        return None;
    }
    let mut r = StepReport::hit(
        Finding::AsyncIo,
        format!(
            "{} chains an async I/O or lookup operator, runs at ρ = {:.2}, while its TaskManagers' CPU load is {}: it waits on the service it calls.",
            v.name,
            rho,
            pct(cpu)
        ),
    );
    r.cause.push(format!(
        "{} is {} busy but its TaskManagers use only {} CPU: the task thread waits for a free slot in the async operator's in-flight queue. Throughput is bounded by queue capacity × parallelism ÷ request latency (Little's law){}.",
        v.name,
        pct(rho),
        pct(cpu),
        v.throughput().map(|r| format!("; now {} records/s", num(r))).unwrap_or_default()
    ));
    r.fix.push("Fix the latency of the service it calls (its p99 is what bounds throughput), or cache its answers (lookup joins: lookup.cache = 'PARTIAL' with lookup.partial-cache.max-rows and lookup.partial-cache.expire-after-write).".into());
    r.fix.push(format!(
        "Raise the in-flight capacity of the async operator (AsyncDataStream.unorderedWait(…, timeout, capacity): e.g. capacity 100 → 400; SQL: table.exec.async-lookup.buffer-capacity) and check its timeout; parallelism of {} multiplies it too.",
        v.name
    ));
    r.not_the_fix.push("More CPU or memory for the TaskManagers: they are waiting, not computing.".into());
    r.evidence.push(ctx.evidence(&v.name, "Status.JVM.CPU.Load", cpu, "ratio", Some(t.async_io_cpu_load), "cpu_load"));
    r.evidence.push(ctx.evidence(
        &v.name,
        "utilisation ρ (mean busyTimeMsPerSecond)",
        rho,
        "ratio",
        Some(t.headroom_utilisation),
        "busy",
    ));
    r.summary =
        Some(format!("{} is the culprit: its async I/O waits on the service it calls (CPU {}).", v.name, pct(cpu)));
    Some(r)
}
