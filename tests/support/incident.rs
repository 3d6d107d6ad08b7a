//! An incident to hand to a notifier: `jobs` jobs whose sinks write to Elasticsearch
//! `logs-*`, one verdict each, and its tag on a notice.

use culprit::model::notice::{Notice, NoticeIncident, NoticeKind};

pub fn incident(jobs: i64) -> culprit::model::incident::Incident {
    use culprit::model::incident::{Cause, CauseKind, Incident, Member};
    use culprit::model::verdict::{Finding, JobRef};
    let cause = Cause {
        kind: CauseKind::System,
        name: "elasticsearch".into(),
        target: Some("logs-*".into()),
        writes: true,
        finding: Finding::Sink,
    };
    let member = |i: i64| Member {
        verdict_id: i,
        at_ms: 1_795_000_000_000 + i,
        job: JobRef { name: format!("job-{i}"), id: String::new() },
        finding: Finding::Sink,
        culprit: Some("Sink: Elasticsearch logs-*".into()),
        causes: vec![cause.clone()],
    };
    let members = (1..=jobs).map(member).collect();
    Incident {
        id: "1-abcd".into(),
        cause,
        members,
        others: Vec::new(),
        first_ms: 1_795_000_000_000,
        last_ms: 1_795_000_000_000 + jobs,
    }
}

/// The tag a notice of [`incident`] carries (its summary shown at the destination).
pub fn tag() -> NoticeIncident {
    NoticeIncident {
        id: "1-abcd".into(),
        thread: "incident:1-abcd".into(),
        cause: incident(5).cause,
        jobs: 5,
        summary_here: true,
    }
}

/// `base` (a notice of the test's own) turned into the summary of [`incident`] of `jobs`.
pub fn summary(base: &Notice, jobs: i64) -> Notice {
    let mut n = base.clone();
    n.kind = NoticeKind::Incident;
    n.verdict = None;
    n.group_key = tag().thread;
    n.episode.thread = tag().thread;
    n.incident = Some(tag());
    n.incident_view = Some(incident(jobs));
    n
}
