//! Words of [`LocateFact`], and of the busy range and the subtasks a maximum was taken over.

use std::fmt::{self, Display, Formatter};

use super::numbers::{limited_list, num, pct, pct_or_unknown};
use crate::model::facts::locate::{
    Averaged, Backpressured, BusyRange, LeftOut, LocateFact, MaxOver, Period, Receiver, SampleReading,
};

impl Display for BusyRange {
    /// `54%–100%`, `54%–100%; 1 of 3 subtasks without data`, `unknown: no subtask reports
    /// busy time`.
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let Some((lo, hi)) = self.min_max_ratio else {
            return f.write_str("unknown: no subtask reports busy time");
        };
        write!(f, "{}–{}", pct(lo), pct(hi))?;
        match self.without_data {
            0 => Ok(()),
            n => write!(f, "; {n} of {} subtasks without data", self.subtasks),
        }
    }
}

impl Display for MaxOver {
    /// `max over 3 subtasks`, `max over the 2 of 3 subtasks with data`.
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        if !self.detailed || self.with_data == self.subtasks {
            write!(f, "max over {} subtasks", self.subtasks)
        } else {
            write!(f, "max over the {} of {} subtasks with data", self.with_data, self.subtasks)
        }
    }
}

/// `Source: txn 97%, parse 95%`, at most 8.
fn red_list(red: &[Backpressured]) -> String {
    let each: Vec<String> =
        red.iter().map(|r| format!("{} {}", r.vertex, pct_or_unknown(r.backpressured_ratio))).collect();
    limited_list(&each, 8)
}

/// `3 vertices`, `1 vertex`.
fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn is_are(n: usize) -> &'static str {
    if n == 1 { "is" } else { "are" }
}

fn names_with_pct(list: &[(String, f64)], sep: &str) -> Vec<String> {
    list.iter().map(|(name, p)| format!("{name}{sep}{}", pct(*p))).collect()
}

fn output_pool(out_pool_ratio: Option<f64>) -> String {
    match out_pool_ratio {
        Some(o) => format!("its output pool nearly empty (outPoolUsage {})", pct(o)),
        None => "no output pool (nothing after it)".to_string(),
    }
}

fn period(p: &Option<Period>) -> String {
    match p {
        Some(Period { period_ms, checkpoint_spacing_ms: Some(c) }) => format!(
            " The stalls recur every ~{} s, in phase with the checkpoints (completed every ~{} s).",
            period_ms / 1000,
            c / 1000
        ),
        Some(Period { period_ms, checkpoint_spacing_ms: None }) => {
            format!(" The stalls recur every ~{} s.", period_ms / 1000)
        }
        None => String::new(),
    }
}

/// `busy 97%, while the averages point to score`.
fn averages(s: &SampleReading) -> String {
    let pointer = match &s.averaged {
        Averaged::Exchange => ", which by the averages points to the exchange before it".to_string(),
        Averaged::Nothing => String::new(),
        Averaged::Culprit(name) => format!(", while the averages point to {name}"),
    };
    format!("busy {}{pointer}", pct_or_unknown(s.averaged_busy_ratio))
}

/// `in 12 of the 60 samples of the window (20%), busy up to 98% while parse up to 90% backpressured`.
fn when(s: &SampleReading) -> String {
    let busy = match (s.busy_holding_ratio, s.stalled.is_empty()) {
        (Some(b), false) => {
            format!(
                ", busy up to {} while {} backpressured",
                pct(b),
                limited_list(&names_with_pct(&s.stalled, " up to "), 4)
            )
        }
        (Some(b), true) => format!(", busy up to {}", pct(b)),
        (None, _) => String::new(),
    };
    format!("in {} of the {} samples of the window ({}){busy}", s.bottleneck_samples, s.samples, pct(s.share_ratio))
}

fn receiver_not_busy(r: &Receiver) -> String {
    match r {
        Receiver::Busy { busy_ratio } => format!("nor busy ({})", pct(*busy_ratio)),
        Receiver::InputPool { in_pool_ratio } => {
            format!("nor short of input buffers (inPoolUsage {}; busy time unknown)", pct_or_unknown(*in_pool_ratio))
        }
    }
}

fn receiver_state(r: &Receiver) -> String {
    match r {
        Receiver::Busy { busy_ratio } => format!("is {} busy and not backpressured", pct(*busy_ratio)),
        Receiver::InputPool { in_pool_ratio } => {
            format!("has free input buffers (inPoolUsage {}) and is not backpressured", pct_or_unknown(*in_pool_ratio))
        }
    }
}

pub(super) fn word(fact: &LocateFact, f: &mut Formatter<'_>) -> fmt::Result {
    match fact {
        LocateFact::Culprit { .. }
        | LocateFact::Slowest { .. }
        | LocateFact::NotTheBackpressured { .. }
        | LocateFact::IndependentCulprits { .. }
        | LocateFact::Chain { .. }
        | LocateFact::BreakChain { .. }
        | LocateFact::ClassicCulprit { .. }
        | LocateFact::ClassicCause { .. } => culprit(fact, f),
        LocateFact::HoldsBackInSamples(_)
        | LocateFact::ComesAndGoes(_)
        | LocateFact::NotTheStalled { .. }
        | LocateFact::Alternates { .. }
        | LocateFact::AlternatesShort { .. } => samples(fact, f),
        LocateFact::NoMetrics
        | LocateFact::LeftOutImpossible { .. }
        | LocateFact::Exchange { .. }
        | LocateFact::ExchangeSlow { .. }
        | LocateFact::LookAtExchange { .. }
        | LocateFact::ExchangeInconclusive { .. }
        | LocateFact::Undecided { .. }
        | LocateFact::NothingRed { .. } => undecided(fact, f),
        LocateFact::SourceBound { .. }
        | LocateFact::SourceCannotKeepUp { .. }
        | LocateFact::RaiseSourceParallelism { .. }
        | LocateFact::TuneFetch
        | LocateFact::MoveToFlip27
        | LocateFact::SourceCulprit { .. } => source(fact, f),
        LocateFact::SeriesDropped { .. }
        | LocateFact::SeriesDroppedCause { .. }
        | LocateFact::RestoreDroppedSeries { .. }
        | LocateFact::SeriesDroppedSummary { .. }
        | LocateFact::UnseenBetween { .. } => dropped(fact, f),
    }
}

/// A vertex whose series the store dropped, where the backpressure stops.
fn dropped(fact: &LocateFact, f: &mut Formatter<'_>) -> fmt::Result {
    match fact {
        LocateFact::SeriesDropped { vertex, red, downstream } if downstream.is_empty() => write!(
            f,
            "Backpressured: {}. The backpressure stops at {vertex}, a sink with no series at all; nothing after the backpressured vertices reports: {vertex} is the likely culprit, judged without its own metrics.",
            red_list(red)
        ),
        LocateFact::UnseenBetween { vertices, culprit } => write!(
            f,
            "The metrics of {} are missing: the store has no series of {}. The backpressure passes through unseen: {culprit} after {} is busy, so the backpressure stops at {culprit}.",
            vertices.join(", "),
            if vertices.len() > 1 { "them" } else { "it" },
            if vertices.len() > 1 { "them" } else { "it" },
        ),
        LocateFact::SeriesDropped { vertex, red, downstream } => {
            let below: Vec<String> =
                downstream.iter().map(|(name, busy)| format!("{name} busy {}", pct_or_unknown(*busy))).collect();
            write!(
                f,
                "Backpressured: {}. The backpressure stops at {vertex}, which has no series at all; downstream of it, {} is neither backpressured nor busy: {vertex} is the likely culprit, judged without its own metrics.",
                red_list(red),
                below.join(", ")
            )
        }
        LocateFact::SeriesDroppedCause { vertex, name_chars, label_limit_chars } => {
            write!(
                f,
                "The metrics of {vertex} are missing: the store has no series of it, although the plan has it. "
            )?;
            if name_chars > label_limit_chars {
                write!(
                    f,
                    "Its name is {name_chars} characters long, and stores such as Mimir and Cortex refuse a series whose label value (task_name, operator_name) is longer than {label_limit_chars} characters (Mimir's default max_label_value_length), so every series of it is dropped at ingestion, silently for whoever reads the data."
                )
            } else {
                write!(
                    f,
                    "Stores drop series silently: a label value over a limit (Mimir and Cortex refuse values longer than {label_limit_chars} characters by default; a long Flink SQL operator name is one), or a per-tenant or per-metric series limit (cardinality) reached."
                )
            }
        }
        LocateFact::RestoreDroppedSeries { vertex, long_name } => {
            if *long_name {
                write!(
                    f,
                    "Give {vertex} back its series: keep Flink SQL's short operator names (table.exec.simplify-operator-name-enabled: true, the default since Flink 1.15), leave <task_name> and <operator_name> out of metrics.scope.task and metrics.scope.operator (their ids identify them), or raise the store's label value limit (Mimir: max_label_value_length); then diagnose again."
                )
            } else {
                write!(
                    f,
                    "Give {vertex} back its series: look in the store's ingestion errors for what it refused (label value too long, series or cardinality limits), shorten long names (table.exec.simplify-operator-name-enabled: true; metrics.scope.task and metrics.scope.operator without <task_name> and <operator_name>) or raise the store's limit (Mimir: max_label_value_length, max_global_series_per_user, max_global_series_per_metric); then diagnose again."
                )
            }
        }
        LocateFact::SeriesDroppedSummary { vertex } => write!(
            f,
            "{vertex} is likely the culprit: the backpressure stops there, but the store has none of its metrics."
        ),
        _ => Ok(()),
    }
}

/// The culprit and why it holds the job back (by the averages, or by the classic method).
fn culprit(fact: &LocateFact, f: &mut Formatter<'_>) -> fmt::Result {
    match fact {
        LocateFact::Culprit {
            graph_free: true,
            red,
            backpressured_threshold_ratio,
            vertex,
            busy_ratio,
            backpressured_ratio,
            ..
        } => write!(
            f,
            "Backpressured (p_max > {:.2}): {}. Without the job graph, the busiest vertex that is not backpressured is taken: {vertex} (busy {}, backpressured {}).",
            backpressured_threshold_ratio,
            red_list(red),
            pct_or_unknown(*busy_ratio),
            pct_or_unknown(*backpressured_ratio)
        ),
        LocateFact::Culprit {
            graph_free: false,
            red,
            backpressured_threshold_ratio,
            vertex,
            busy_ratio,
            backpressured_ratio,
            busy_threshold_ratio,
        } => write!(
            f,
            "Backpressured (p_max > {:.2}): {}. First vertex downstream that is not: {vertex} (busy {}, backpressured {}), busy by itself (b_max ≥ {:.2}).",
            backpressured_threshold_ratio,
            red_list(red),
            pct_or_unknown(*busy_ratio),
            pct_or_unknown(*backpressured_ratio),
            busy_threshold_ratio
        ),
        LocateFact::Slowest { vertex, busy_ratio, max_over, backpressured_ratio, upstream_red, graph_free: true } => {
            write!(
                f,
                "{vertex} is busy {} of the time ({max_over}) and not backpressured ({}), while {} {} backpressured. Without the job graph it is assumed, not known, that they are upstream of it: then it is the slowest vertex, and credit-based flow control slows everything before it.",
                pct_or_unknown(*busy_ratio),
                pct_or_unknown(*backpressured_ratio),
                plural(*upstream_red, "other vertex", "other vertices"),
                is_are(*upstream_red),
            )
        }
        LocateFact::Slowest { vertex, busy_ratio, max_over, backpressured_ratio, upstream_red, graph_free: false } => {
            write!(
                f,
                "{vertex} is busy {} of the time ({max_over}) and not backpressured ({}), while {} upstream of it {} backpressured: it is the slowest vertex, and credit-based flow control slows everything before it.",
                pct_or_unknown(*busy_ratio),
                pct_or_unknown(*backpressured_ratio),
                plural(*upstream_red, "vertex", "vertices"),
                is_are(*upstream_red),
            )
        }
        LocateFact::NotTheBackpressured { vertices, culprit } => write!(
            f,
            "More parallelism or resources for the backpressured {} ({}): {} on {culprit}; the job's throughput is the minimum over its vertices.",
            if vertices.len() == 1 { "vertex" } else { "vertices" },
            limited_list(vertices, 8),
            if vertices.len() == 1 { "it waits" } else { "they wait" },
        ),
        LocateFact::IndependentCulprits { culprits } => write!(
            f,
            " {} independent culprits: {}.",
            culprits.len(),
            culprits.iter().map(|(v, n)| format!("{v} ({n} red upstream)")).collect::<Vec<_>>().join(", ")
        ),
        LocateFact::Chain { operators } => write!(
            f,
            "The vertex chains {} operators ({}); task metrics are per vertex, so they cannot tell which operator inside the chain is slow.",
            operators.len(),
            operators.join(", ")
        ),
        LocateFact::BreakChain { operators } => write!(
            f,
            "To see which of {} is slow, break the chain: disableChaining() on the suspect operator (or startNewChain()), or pipeline.operator-chaining.enabled: false for a test run; a flame graph (rest.flamegraph.enabled: true, then the vertex's Flame Graph tab) shows it without redeploying.",
            operators.join(", ")
        ),
        LocateFact::ClassicCulprit {
            red,
            backpressured_threshold_ratio,
            vertex,
            backpressured_ratio,
            in_pool_ratio,
            in_pool_full_threshold_ratio,
            out_pool_ratio,
        } => write!(
            f,
            "Backpressured (isBackPressured = 1 in more than {} of samples): {}. First vertex downstream that is not: {vertex} (isBackPressured = 1 in {} of samples), with its input buffer pool full (inPoolUsage {} ≥ {}) and {}. Busy time is unknown: the reporter predates Flink 1.13.",
            pct(*backpressured_threshold_ratio),
            red_list(red),
            pct(*backpressured_ratio),
            pct(*in_pool_ratio),
            pct(*in_pool_full_threshold_ratio),
            output_pool(*out_pool_ratio)
        ),
        LocateFact::ClassicCause { vertex, upstream_red, in_pool_ratio, out_pool_ratio } => write!(
            f,
            "{vertex} is not backpressured while {} upstream of it {} backpressured, and records wait in front of it: its input buffers are full (inPoolUsage {}) and {}. It takes records more slowly than they arrive, and credit-based flow control slows everything before it.",
            plural(*upstream_red, "vertex", "vertices"),
            is_are(*upstream_red),
            pct(*in_pool_ratio),
            output_pool(*out_pool_ratio)
        ),
        // Worded by the other families (`word` routes each variant once).
        _ => Ok(()),
    }
}

/// The bottleneck read sample by sample.
fn samples(fact: &LocateFact, f: &mut Formatter<'_>) -> fmt::Result {
    match fact {
        LocateFact::HoldsBackInSamples(s) => write!(
            f,
            "Read sample by sample, {} holds the job back {}; nothing is backpressured in {} of them{}. Averaged over the window it is {}: the averages hide a bottleneck that comes and goes.{}",
            s.vertex,
            when(s),
            pct(s.calm_ratio),
            if s.network_ratio > 0.0 {
                format!(" and the exchange is suspect in {}", pct(s.network_ratio))
            } else {
                String::new()
            },
            averages(s),
            period(&s.period),
        ),
        LocateFact::ComesAndGoes(s) => write!(
            f,
            "Backpressure comes and goes: {} holds the job back {}{}; between those stalls nothing is backpressured. Credit-based flow control stalls everything before it while it is blocked, so the window averages ({}) understate it.{}",
            s.vertex,
            when(s),
            s.busy_other_ratio.map(|b| format!(" and drops to {} busy between them", pct(b))).unwrap_or_default(),
            averages(s),
            period(&s.period),
        ),
        LocateFact::NotTheStalled { vertices, culprit } => write!(
            f,
            "More parallelism or resources for the vertices it stalls ({}): they wait on {culprit}.",
            limited_list(vertices, 4),
        ),
        LocateFact::Alternates { holders } => write!(
            f,
            "The bottleneck alternates between vertices (window firings, bursts): read sample by sample, the share of the window each holds the job back is {}; {} holds it back most often, so the fix starts there, and the others come next.",
            names_with_pct(holders, " ").join(", "),
            holders.first().map(|h| h.0.as_str()).unwrap_or_default()
        ),
        LocateFact::AlternatesShort { holders } => {
            write!(f, " The bottleneck alternates: {} of the samples.", names_with_pct(holders, " ").join(", "))
        }
        // Worded by the other families (`word` routes each variant once).
        _ => Ok(()),
    }
}

/// Where no vertex is named: no data, a slow exchange, undecided vertices, nothing red.
fn undecided(fact: &LocateFact, f: &mut Formatter<'_>) -> fmt::Result {
    match fact {
        LocateFact::NoMetrics => f.write_str("no busy or backpressured time for any vertex of the job"),
        LocateFact::LeftOutImpossible { what } => {
            match what {
                LeftOut::Backpressure { vertices } => {
                    write!(f, "the backpressure of {} is unknown", limited_list(vertices, 8))?
                }
                LeftOut::BusyOfEveryVertex => f.write_str("the busy time of every vertex is unknown")?,
            }
            f.write_str(
                ", the metric source having returned impossible values for it (see the notes): the job's state cannot be told",
            )
        }
        LocateFact::Exchange { red, backpressured_threshold_ratio, from, to, to_backpressured_ratio, receiver } => {
            write!(
                f,
                "Backpressured (p_max > {:.2}): {}. The backpressure stops at the exchange {from} → {to}: {to} is neither backpressured ({}) {}.",
                backpressured_threshold_ratio,
                red_list(red),
                pct_or_unknown(*to_backpressured_ratio),
                receiver_not_busy(receiver),
            )
        }
        LocateFact::ExchangeSlow { from, to, receiver } => write!(
            f,
            "{from} waits to send while {to} {}: the exchange between them (network, serialization, a stuck channel) is slow, not an operator.",
            receiver_state(receiver)
        ),
        LocateFact::LookAtExchange { from, to } => write!(
            f,
            "Look at the exchange {from} → {to}: network between the TaskManagers (bandwidth, packet loss), serialization cost of the records (Kryo fallback: pipeline.generic-types: false shows it), and the network buffers (taskmanager.memory.network.fraction; outPoolUsage of {from} and inPoolUsage of {to})."
        ),
        LocateFact::ExchangeInconclusive { from, to } => write!(
            f,
            "Inconclusive: backpressure stops at the exchange {from} → {to}, whose receiver is neither backpressured nor busy."
        ),
        LocateFact::Undecided { red, undecided, classic } => {
            let names: Vec<String> = undecided
                .iter()
                .map(|u| match u.subtasks_reporting {
                    None => u.vertex.clone(),
                    Some((with, of)) => format!("{}: {with} of {of} subtasks report", u.vertex),
                })
                .collect();
            let names = if names.is_empty() { "none found".to_string() } else { names.join(", ") };
            if *classic {
                write!(
                    f,
                    "Backpressured: {}, but the reporter predates Flink 1.13 (no busy time) and the vertices downstream of them report no input buffer pool usage to confirm a culprit ({names}).",
                    red_list(red)
                )
            } else {
                write!(
                    f,
                    "Backpressured: {}, but the vertices downstream of them have no or partial metrics ({names}).",
                    red_list(red)
                )
            }
        }
        LocateFact::NothingRed { backpressured_threshold_ratio } => {
            write!(f, "No vertex is backpressured (every p_max ≤ {backpressured_threshold_ratio:.2}).")
        }
        // Worded by the other families (`word` routes each variant once).
        _ => Ok(()),
    }
}

/// The source that cannot keep up.
fn source(fact: &LocateFact, f: &mut Formatter<'_>) -> fmt::Result {
    match fact {
        LocateFact::SourceBound { vertex, busy_ratio, lag_growth_records_per_s } => write!(
            f,
            "Nothing is backpressured; source {vertex} {} and its lag grows steadily by {} records/s: the source itself is the bottleneck.",
            busy_ratio.map(|b| format!("is busy {}", pct(b))).unwrap_or_else(|| "has an unknown busy time".into()),
            num(*lag_growth_records_per_s)
        ),
        LocateFact::SourceCannotKeepUp { vertex, busy_ratio, emitted_records_per_s, lag_growth_records_per_s } => {
            let emitted = emitted_records_per_s.map(|e| format!(", emitting {} records/s", num(e))).unwrap_or_default();
            match busy_ratio {
                Some(b) => write!(
                    f,
                    "{vertex} spends {} of its time reading and emitting{emitted}, with no backpressure from downstream, and its lag grows by {} records/s: it cannot read as fast as data arrives.",
                    pct(*b),
                    num(*lag_growth_records_per_s)
                ),
                None => write!(
                    f,
                    "{vertex}'s busy and idle time are unknown (Flink cannot measure them for a legacy SourceFunction source), so its load cannot be read; but nothing downstream is backpressured or holds it back{emitted}, and its lag grows steadily by {} records/s: it cannot read as fast as data arrives. This rests on the lag alone, so the confidence is lowered.",
                    num(*lag_growth_records_per_s)
                ),
            }
        }
        LocateFact::RaiseSourceParallelism { vertex, parallelism } => write!(
            f,
            "Raise {vertex}'s parallelism (now {parallelism}) up to the number of partitions of its topic; beyond that, add partitions."
        ),
        LocateFact::TuneFetch => f.write_str(
            "Tune the source's fetch settings (Kafka: properties.fetch.min.bytes, properties.max.partition.fetch.bytes, properties.max.poll.records) and check deserialization cost.",
        ),
        LocateFact::MoveToFlip27 => f.write_str(
            "Move to the FLIP-27 KafkaSource: it reports busy, idle and pendingRecords, so its load can be read.",
        ),
        LocateFact::SourceCulprit { vertex, busy_ratio, lag_growth_records_per_s } => write!(
            f,
            "Source {vertex} is the culprit: {}; its lag grows by {} records/s.",
            match busy_ratio {
                Some(b) => format!("it is {} busy and cannot keep up", pct(*b)),
                None => "it cannot keep up (its busy time is unknown)".into(),
            },
            num(*lag_growth_records_per_s)
        ),
        // Worded by the other families (`word` routes each variant once).
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    //! Each family of `locate` facts reads as the step's sentences read before they were
    //! facts (the same words, byte for byte).
    use super::*;
    use crate::model::facts::Fact;
    use crate::model::facts::locate::Undecided;

    fn red(list: &[(&str, Option<f64>)]) -> Vec<Backpressured> {
        list.iter().map(|(v, p)| Backpressured { vertex: v.to_string(), backpressured_ratio: *p }).collect()
    }

    #[test]
    fn a_vertex_whose_series_were_dropped_reads_as_the_likely_culprit_with_its_reason_and_fix() {
        let detail = Fact::from(LocateFact::SeriesDropped {
            vertex: "score".into(),
            red: red(&[("parse", Some(0.95))]),
            downstream: vec![("Sink: store".into(), Some(0.05))],
        });
        assert_eq!(
            detail.to_string(),
            "Backpressured: parse 95%. The backpressure stops at score, which has no series at all; downstream of it, Sink: store busy 5% is neither backpressured nor busy: score is the likely culprit, judged without its own metrics."
        );
        let long = Fact::from(LocateFact::SeriesDroppedCause {
            vertex: "v".into(),
            name_chars: 2100,
            label_limit_chars: 2048,
        });
        assert!(long.to_string().contains("Its name is 2100 characters long"), "{long}");
        let short =
            Fact::from(LocateFact::SeriesDroppedCause { vertex: "v".into(), name_chars: 40, label_limit_chars: 2048 });
        assert!(short.to_string().contains("cardinality"), "{short}");
        let fix = Fact::from(LocateFact::RestoreDroppedSeries { vertex: "v".into(), long_name: true }).to_string();
        assert!(
            fix.contains("table.exec.simplify-operator-name-enabled: true") && fix.contains("max_label_value_length"),
            "{fix}"
        );
        assert_eq!(
            Fact::from(LocateFact::SeriesDroppedSummary { vertex: "v".into() }).to_string(),
            "v is likely the culprit: the backpressure stops there, but the store has none of its metrics."
        );
    }

    #[test]
    fn a_culprit_reads_with_its_thresholds_its_ratios_and_the_other_culprits() {
        let detail = Fact::from(LocateFact::Culprit {
            red: red(&[("Source: txn", Some(0.97)), ("parse", None)]),
            backpressured_threshold_ratio: 0.1,
            vertex: "score".into(),
            busy_ratio: Some(0.98),
            backpressured_ratio: Some(0.0),
            busy_threshold_ratio: 0.5,
            graph_free: false,
        })
        .then(LocateFact::IndependentCulprits { culprits: vec![("a-score".into(), 3), ("b-score".into(), 1)] });
        assert_eq!(
            detail.to_string(),
            "Backpressured (p_max > 0.10): Source: txn 97%, parse unknown. First vertex downstream that is not: score (busy 98%, backpressured 0%), busy by itself (b_max ≥ 0.50). 2 independent culprits: a-score (3 red upstream), b-score (1 red upstream)."
        );
        let slowest = |upstream_red, graph_free| {
            Fact::from(LocateFact::Slowest {
                vertex: "score".into(),
                busy_ratio: Some(0.98),
                max_over: MaxOver { with_data: 1, subtasks: 2, detailed: true },
                backpressured_ratio: None,
                upstream_red,
                graph_free,
            })
            .to_string()
        };
        assert_eq!(
            slowest(1, false),
            "score is busy 98% of the time (max over the 1 of 2 subtasks with data) and not backpressured (unknown), while 1 vertex upstream of it is backpressured: it is the slowest vertex, and credit-based flow control slows everything before it."
        );
        assert_eq!(
            slowest(2, true),
            "score is busy 98% of the time (max over the 1 of 2 subtasks with data) and not backpressured (unknown), while 2 other vertices are backpressured. Without the job graph it is assumed, not known, that they are upstream of it: then it is the slowest vertex, and credit-based flow control slows everything before it."
        );
        assert_eq!(
            Fact::from(LocateFact::NotTheBackpressured { vertices: vec!["parse".into()], culprit: "score".into() })
                .to_string(),
            "More parallelism or resources for the backpressured vertex (parse): it waits on score; the job's throughput is the minimum over its vertices."
        );
    }

    #[test]
    fn a_busy_range_and_a_maximum_say_which_subtasks_they_cover() {
        let range = |min_max_ratio, without_data| BusyRange { min_max_ratio, without_data, subtasks: 3 }.to_string();
        assert_eq!(range(Some((0.54, 1.0)), 0), "54%–100%");
        assert_eq!(range(Some((0.54, 1.0)), 1), "54%–100%; 1 of 3 subtasks without data");
        assert_eq!(range(None, 3), "unknown: no subtask reports busy time");
        // Read from the aggregate only, the maximum is over every subtask.
        assert_eq!(MaxOver { with_data: 1, subtasks: 3, detailed: false }.to_string(), "max over 3 subtasks");
        assert_eq!(
            MaxOver { with_data: 2, subtasks: 3, detailed: true }.to_string(),
            "max over the 2 of 3 subtasks with data"
        );
    }

    #[test]
    fn a_bottleneck_read_sample_by_sample_reads_with_its_counts_shares_and_period() {
        let reading = SampleReading {
            vertex: "score".into(),
            bottleneck_samples: 12,
            samples: 60,
            share_ratio: 0.2,
            busy_holding_ratio: Some(0.98),
            busy_other_ratio: Some(0.3),
            stalled: vec![("parse".into(), 0.9)],
            averaged_busy_ratio: Some(0.45),
            averaged: Averaged::Culprit("sink".into()),
            calm_ratio: 0.5,
            network_ratio: 0.1,
            period: Some(Period { period_ms: 120_000, checkpoint_spacing_ms: Some(60_000) }),
        };
        assert_eq!(
            Fact::from(LocateFact::HoldsBackInSamples(Box::new(reading.clone()))).to_string(),
            "Read sample by sample, score holds the job back in 12 of the 60 samples of the window (20%), busy up to 98% while parse up to 90% backpressured; nothing is backpressured in 50% of them and the exchange is suspect in 10%. Averaged over the window it is busy 45%, while the averages point to sink: the averages hide a bottleneck that comes and goes. The stalls recur every ~120 s, in phase with the checkpoints (completed every ~60 s)."
        );
        let calm = SampleReading {
            stalled: Vec::new(),
            averaged: Averaged::Exchange,
            period: Some(Period { period_ms: 90_500, checkpoint_spacing_ms: None }),
            ..reading
        };
        assert_eq!(
            Fact::from(LocateFact::ComesAndGoes(Box::new(calm))).to_string(),
            "Backpressure comes and goes: score holds the job back in 12 of the 60 samples of the window (20%), busy up to 98% and drops to 30% busy between them; between those stalls nothing is backpressured. Credit-based flow control stalls everything before it while it is blocked, so the window averages (busy 45%, which by the averages points to the exchange before it) understate it. The stalls recur every ~90 s."
        );
        assert_eq!(
            Fact::from(LocateFact::AlternatesShort { holders: vec![("a".into(), 0.4), ("b".into(), 0.35)] })
                .to_string(),
            " The bottleneck alternates: a 40%, b 35% of the samples."
        );
    }

    #[test]
    fn an_exchange_and_undecided_vertices_read_with_what_the_receiver_reports() {
        assert_eq!(
            Fact::from(LocateFact::Exchange {
                red: red(&[("parse", Some(1.0))]),
                backpressured_threshold_ratio: 0.1,
                from: "parse".into(),
                to: "score".into(),
                to_backpressured_ratio: Some(0.0),
                receiver: Receiver::InputPool { in_pool_ratio: Some(0.3) },
            })
            .to_string(),
            "Backpressured (p_max > 0.10): parse 100%. The backpressure stops at the exchange parse → score: score is neither backpressured (0%) nor short of input buffers (inPoolUsage 30%; busy time unknown)."
        );
        assert_eq!(
            Fact::from(LocateFact::ExchangeSlow {
                from: "parse".into(),
                to: "score".into(),
                receiver: Receiver::Busy { busy_ratio: 0.2 }
            })
            .to_string(),
            "parse waits to send while score is 20% busy and not backpressured: the exchange between them (network, serialization, a stuck channel) is slow, not an operator."
        );
        assert_eq!(
            Fact::from(LocateFact::Undecided {
                red: red(&[("parse", Some(0.9))]),
                undecided: vec![
                    Undecided { vertex: "score".into(), subtasks_reporting: Some((1, 2)) },
                    Undecided { vertex: "sink".into(), subtasks_reporting: None },
                ],
                classic: false,
            })
            .to_string(),
            "Backpressured: parse 90%, but the vertices downstream of them have no or partial metrics (score: 1 of 2 subtasks report, sink)."
        );
        assert_eq!(
            Fact::from(LocateFact::LeftOutImpossible {
                what: LeftOut::Backpressure { vertices: vec!["parse".into()] }
            })
            .to_string(),
            "the backpressure of parse is unknown, the metric source having returned impossible values for it (see the notes): the job's state cannot be told"
        );
    }

    #[test]
    fn a_classic_culprit_reads_with_its_pools_and_thresholds() {
        assert_eq!(
            Fact::from(LocateFact::ClassicCulprit {
                red: red(&[("Source: txn", Some(1.0)), ("parse", Some(1.0))]),
                backpressured_threshold_ratio: 0.1,
                vertex: "score".into(),
                backpressured_ratio: 0.0,
                in_pool_ratio: 0.97,
                in_pool_full_threshold_ratio: 0.9,
                out_pool_ratio: Some(0.2),
            })
            .to_string(),
            "Backpressured (isBackPressured = 1 in more than 10% of samples): Source: txn 100%, parse 100%. First vertex downstream that is not: score (isBackPressured = 1 in 0% of samples), with its input buffer pool full (inPoolUsage 97% ≥ 90%) and its output pool nearly empty (outPoolUsage 20%). Busy time is unknown: the reporter predates Flink 1.13."
        );
        assert_eq!(
            Fact::from(LocateFact::ClassicCause {
                vertex: "Sink: store".into(),
                upstream_red: 3,
                in_pool_ratio: 1.0,
                out_pool_ratio: None
            })
            .to_string(),
            "Sink: store is not backpressured while 3 vertices upstream of it are backpressured, and records wait in front of it: its input buffers are full (inPoolUsage 100%) and no output pool (nothing after it). It takes records more slowly than they arrive, and credit-based flow control slows everything before it."
        );
    }

    #[test]
    fn a_source_culprit_reads_with_its_busy_time_known_or_not() {
        assert_eq!(
            Fact::from(LocateFact::SourceCannotKeepUp {
                vertex: "Source: txn".into(),
                busy_ratio: None,
                emitted_records_per_s: Some(5742.0),
                lag_growth_records_per_s: 2000.0,
            })
            .to_string(),
            "Source: txn's busy and idle time are unknown (Flink cannot measure them for a legacy SourceFunction source), so its load cannot be read; but nothing downstream is backpressured or holds it back, emitting 5742 records/s, and its lag grows steadily by 2000 records/s: it cannot read as fast as data arrives. This rests on the lag alone, so the confidence is lowered."
        );
        assert_eq!(
            Fact::from(LocateFact::SourceCulprit {
                vertex: "Source: txn".into(),
                busy_ratio: Some(0.95),
                lag_growth_records_per_s: 100.0
            })
            .to_string(),
            "Source Source: txn is the culprit: it is 95% busy and cannot keep up; its lag grows by 100 records/s."
        );
        assert_eq!(
            Fact::from(LocateFact::SourceBound {
                vertex: "Source: txn".into(),
                busy_ratio: None,
                lag_growth_records_per_s: 12.5
            })
            .to_string(),
            "Nothing is backpressured; source Source: txn has an unknown busy time and its lag grows steadily by 12.5 records/s: the source itself is the bottleneck."
        );
        assert_eq!(
            Fact::from(LocateFact::NothingRed { backpressured_threshold_ratio: 0.1 }).to_string(),
            "No vertex is backpressured (every p_max ≤ 0.10)."
        );
    }
}
