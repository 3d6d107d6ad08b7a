//! Why no snapshot could be taken ([`CollectError`]), worded for a person.

use crate::model::graph::sanitize_label_value;

/// Why no snapshot could be taken. One sentence each.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CollectError {
    #[error("there is no data to diagnose (no samples, and no time was given)")]
    NoData,
    #[error("no Flink job named or with id `{wanted}` has metrics here{}", did_you_mean(.wanted, .known))]
    JobNotFound { wanted: String, known: Vec<String> },
    #[error("several jobs have metrics here ({}); choose one with --job", list_some(.names))]
    AmbiguousJob { names: Vec<String> },
    #[error("{}", ambiguous_deployment(.job_id, .deployments, .labels, .asked))]
    AmbiguousDeployment {
        job_id: String,
        /// Each deployment, as `label=value, …`.
        deployments: Vec<String>,
        /// The labels that tell them apart.
        labels: Vec<String>,
        /// What the request said of those labels (`label=value`).
        asked: Vec<String>,
    },
    #[error(
        "job_id {job_id} is reported by several deployments at once, and its task metrics carry none of the labels that tell the one with {} apart: they cannot be diagnosed apart. Give every series of each deployment a label that tells it apart (e.g. relabel `namespace` or `cluster` onto the TaskManagers' series too)",
        .deployment.join(", ")
    )]
    InseparableDeployments { job_id: String, deployment: Vec<String> },
    #[error(
        "no Flink job metrics (`{metric}`) between {from} and {to}; is this a Flink reporter's output, and is that the time to look at?"
    )]
    NoJobs { metric: String, from: String, to: String },
    #[error("could not look up the job: {0}")]
    Source(String),
}

/// Most job names an error quotes: a Prometheus holds other teams' jobs, and a message
/// that goes to Slack and PagerDuty must neither list them all nor grow with them.
pub const QUOTED_JOBS: usize = 3;

/// `; did you mean `a`, `b`?` with the known names closest to `wanted` (at most
/// [`QUOTED_JOBS`], only those alike: sharing most characters, or one holding the other),
/// else how many jobs there are.
pub(super) fn did_you_mean(wanted: &str, known: &[String]) -> String {
    let close = closest(wanted, known, QUOTED_JOBS);
    match (close.is_empty(), known.len()) {
        (_, 0) => " (no job has metrics)".into(),
        (true, 1) => " (1 other job has metrics; its name is not alike)".into(),
        (true, n) => format!(" ({n} other jobs have metrics; none is named alike)"),
        (false, _) => {
            format!("; did you mean {}?", close.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", "))
        }
    }
}

/// The names of `known` most like `wanted` (compared as the reporter writes names, case
/// aside), best first, at most `max`.
pub fn closest<'a>(wanted: &str, known: &'a [String], max: usize) -> Vec<&'a str> {
    let norm = |s: &str| sanitize_label_value(s).to_lowercase();
    let w = norm(wanted);
    let mut scored: Vec<(f64, &str)> = known
        .iter()
        // A job without a name (series without `job_name`) is nothing to suggest, and the
        // empty string is inside every name.
        .filter(|k| !k.trim().is_empty())
        .map(|k| {
            let n = norm(k);
            let mut score = strsim::normalized_damerau_levenshtein(&w, &n);
            if !w.is_empty() && (n.contains(&w) || w.contains(&n)) {
                score = score.max(0.7);
            }
            (score, k.as_str())
        })
        .filter(|(score, _)| *score >= 0.6)
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(b.1)));
    scored.into_iter().take(max).map(|(_, k)| k).collect()
}

/// Up to ten names, then how many more.
pub(super) fn list_some(v: &[String]) -> String {
    const MAX: usize = 10;
    match v.len() {
        n if n > MAX => format!("{}, and {} more", v[..MAX].join(", "), n - MAX),
        _ => v.join(", "),
    }
}

pub(super) fn ambiguous_deployment(
    job_id: &str,
    deployments: &[String],
    labels: &[String],
    asked: &[String],
) -> String {
    let example = labels.first().map(String::as_str).unwrap_or("namespace");
    let which = if asked.is_empty() {
        String::from("the request does not say which")
    } else {
        format!("the request's {} names no single one of them", asked.join(", "))
    };
    format!(
        "job_id {job_id} is reported by {} deployments at once ({}) and {which}; their metrics are not blended into one verdict. Name one by {} (an alert label, `--label {example}=…`, or the API's `label={example}=…`)",
        deployments.len(),
        deployments.join("; "),
        labels.join(", ")
    )
}
