//! An incident's summary as one Slack message: the headline, when it started and how many
//! verdicts it holds, the jobs that share the cause (each one's verdict is in the thread)
//! and the jobs of the same minutes that do not fit.

use serde_json::{Value, json};

use super::blocks::{context, section};
use super::escaping::clip;
use super::{MAX_FALLBACK_TEXT, MAX_SECTION_TEXT, SlackMessage, code, mrkdwn};
use crate::model::incident::Incident;
use crate::render::hh_mm;
use crate::render::incident::{MAX_JOBS_NAMED, MAX_OTHERS_NAMED, cause_phrase_quoted, job_line, named};

/// The summary of `incident`.
pub fn incident_message(incident: &Incident) -> SlackMessage {
    let phrase = cause_phrase_quoted(&incident.cause, &code, &mrkdwn);
    let n = incident.members.len();
    let headline = format!("*{n} jobs held back by {phrase}*");
    let when = format!(
        "Since {} · last verdict {} · each job's verdict is in this thread",
        hh_mm(incident.first_ms),
        hh_mm(incident.last_ms)
    );
    let jobs = names(incident.members.iter().map(|m| job_line(m, false)), MAX_JOBS_NAMED);
    let mut blocks: Vec<Value> =
        vec![section(&headline, MAX_SECTION_TEXT), context(vec![mrkdwn(&when)], MAX_SECTION_TEXT)];
    blocks.push(section(&format!("*Jobs:* {jobs}"), MAX_SECTION_TEXT));
    let mut text = format!("{n} jobs held back by {phrase}\n{}\nJobs: {jobs}", mrkdwn(&when));
    if !incident.others.is_empty() {
        let others = names(incident.others.iter().map(|m| job_line(m, true)), MAX_OTHERS_NAMED);
        blocks.push(section(
            &format!("*Not part of it* ({} jobs with other culprits): {others}", incident.others.len()),
            MAX_SECTION_TEXT,
        ));
        text.push_str(&format!("\nNot part of it: {others}"));
    }
    SlackMessage { text: clip(&text, MAX_FALLBACK_TEXT), blocks }
}

/// Names as Slack code, comma-separated, the first `max` of them and a count of the rest.
fn names(all: impl Iterator<Item = String>, max: usize) -> String {
    named(all, max, &|n| code(n))
}

/// The metadata of a summary: its own event type, so that a channel's summaries can be
/// told from verdicts (and found again after a crash).
pub fn incident_metadata(incident_id: &str, idempotency_key: &str) -> Value {
    json!({ "event_type": INCIDENT_EVENT_TYPE, "event_payload": { "incident": incident_id, "idempotency_key": idempotency_key } })
}

/// `metadata.event_type` of an incident's summary.
pub const INCIDENT_EVENT_TYPE: &str = "culprit_incident";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::incident::{Cause, CauseKind, Member};
    use crate::model::verdict::{Finding, JobRef};

    fn member(i: i64, name: &str, finding: Finding) -> Member {
        Member {
            verdict_id: i,
            at_ms: 1_764_590_400_000 + i,
            job: JobRef { name: name.into(), id: String::new() },
            finding,
            culprit: Some("Sink: Elasticsearch logs-*".into()),
            causes: Vec::new(),
        }
    }

    #[test]
    fn the_summary_names_the_cause_the_jobs_and_those_that_do_not_fit_escaped() {
        let inc = Incident {
            id: "1-ab".into(),
            cause: Cause {
                kind: CauseKind::System,
                name: "elasticsearch".into(),
                target: Some("logs-<*>".into()),
                writes: true,
                finding: Finding::Sink,
            },
            members: (1..=45).map(|i| member(i, &format!("job-{i}"), Finding::Sink)).collect(),
            others: vec![member(99, "<!channel> orders", Finding::HotKey)],
            first_ms: 1_764_590_400_000,
            last_ms: 1_764_590_460_000,
        };
        let m = incident_message(&inc);
        let all = serde_json::to_string(&m.blocks).unwrap();
        assert!(all.contains("*45 jobs held back by their sinks writing to Elasticsearch `logs-&lt;*&gt;`*"), "{all}");
        assert!(all.contains("`job-40`, and 5 more"), "40 named, the rest counted: {all}");
        assert!(all.contains("`&lt;!channel&gt; orders (hot_key in Sink: Elasticsearch logs-*)`"), "{all}");
        assert!(!all.contains("<!channel>"), "no mention from a job name");
        assert!(m.text.starts_with("45 jobs held back by"), "{}", m.text);
        assert!(all.contains("Since 12:00 UTC · last verdict 12:01 UTC"), "{all}");
    }
}
