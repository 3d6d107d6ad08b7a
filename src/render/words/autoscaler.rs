//! Words of [`AutoscalerFact`]: what the Flink Kubernetes Operator autoscaler recommends for
//! the culprit, whether it agrees, and whether its next step can help; and the short
//! "Autoscaler:" line of the text and Markdown renderings.

use std::fmt::{self, Formatter};

use super::numbers::approx;
use crate::model::autoscaler::{AutoscalerStance, AutoscalerView};
use crate::model::facts::autoscaler::AutoscalerFact;
use crate::model::verdict::Finding;

/// Why more parallelism does not relieve the culprit, for the findings it cannot fix.
fn why_not(finding: Finding) -> &'static str {
    match finding {
        Finding::Sink => "the system behind it is the limit, and more writers only add load on it",
        Finding::HotKey => "one subtask carries a hot key, and a key stays on one subtask at any parallelism",
        Finding::SlowInstance => "one subtask is slow where it runs, and more subtasks leave it as slow",
        Finding::SourceSkew => "one reader's partition carries most records, and a partition is never split",
        _ => "it is the bottleneck",
    }
}

/// ` (its true processing rate … against culprit's capacity estimate …)`, with what is known.
fn rates(v: &AutoscalerView, f: &mut Formatter<'_>) -> fmt::Result {
    match (v.true_processing_rate_per_s, v.capacity_per_s) {
        (Some(t), Some(c)) => write!(
            f,
            " (its true processing rate {} records/s; culprit's capacity estimate {} records/s)",
            approx(t),
            approx(c)
        ),
        (Some(t), None) => write!(f, " (its true processing rate {} records/s)", approx(t)),
        _ => Ok(()),
    }
}

pub(super) fn word(fact: &AutoscalerFact, f: &mut Formatter<'_>) -> fmt::Result {
    let v = &fact.view;
    let (name, from) = (&v.vertex_name, v.parallelism);
    let to = v.recommended_parallelism.unwrap_or(from);
    match v.stance {
        AutoscalerStance::ScalesUpCulprit if v.next_step_helps == Some(false) => {
            write!(
                f,
                "The Flink autoscaler would scale {name} from {from} to {to}: that will not help, {}",
                why_not(fact.finding)
            )?;
            rates(v, f)?;
        }
        AutoscalerStance::ScalesUpCulprit => {
            write!(f, "The Flink autoscaler agrees: it recommends {name} from {from} to {to}")?;
            rates(v, f)?;
        }
        AutoscalerStance::ScalesDownCulprit => {
            write!(f, "The Flink autoscaler would scale {name} down from {from} to {to}: that makes it worse, it is the bottleneck")?;
            if let Some(load) = v.load_ratio {
                write!(f, "; the autoscaler reads its load as {load:.2}")?;
            }
            rates(v, f)?;
        }
        AutoscalerStance::ScalesUpOthers => {
            write!(f, "The Flink autoscaler disagrees: it keeps {name} at {from} and would scale ")?;
            let steps: Vec<String> =
                v.scales_up_elsewhere.iter().map(|s| format!("{} from {} to {}", s.vertex_name, s.from, s.to)).collect();
            write!(f, "{} instead", steps.join(", "))?;
        }
        AutoscalerStance::Holds => write!(f, "The Flink autoscaler recommends no change: {name} stays at {from}")?,
        AutoscalerStance::NotEvaluated => write!(
            f,
            "The Flink autoscaler has not evaluated {name} yet (its recommended parallelism is NaN: a new deployment, a metric window not yet full, or just after a rescale)"
        )?,
        AutoscalerStance::NoCulpritSeries => {
            write!(f, "The Flink autoscaler reports other vertices of the job, not {name}")?
        }
        AutoscalerStance::Ambiguous => f.write_str(
            "Several Flink autoscaler resources report this job's vertex ids (the same plan deployed twice): their recommendations are left out",
        )?,
    }
    f.write_str(".")
}

/// The short line the text and Markdown renderings show after `Autoscaler: `.
pub fn line(v: &AutoscalerView) -> String {
    let (name, from) = (&v.vertex_name, v.parallelism);
    let verdict = match (v.stance, v.next_step_helps) {
        (AutoscalerStance::ScalesUpCulprit, Some(false)) => "agrees; will not help",
        (AutoscalerStance::ScalesUpCulprit, _) => "agrees",
        (AutoscalerStance::ScalesDownCulprit, _) => "disagrees, scales it down",
        (AutoscalerStance::ScalesUpOthers, _) => "disagrees, scales other vertices up",
        (AutoscalerStance::Holds, _) => "no change",
        (AutoscalerStance::NotEvaluated, _) => "not evaluated yet",
        (AutoscalerStance::NoCulpritSeries, _) => "no gauges for this vertex",
        (AutoscalerStance::Ambiguous, _) => "several resources report these vertices",
    };
    match v.recommended_parallelism {
        Some(to) => format!("{name} {from} → {to}, {verdict}"),
        None => format!("{name} at {from}, {verdict}"),
    }
}
