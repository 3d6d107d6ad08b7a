//! culprit's own alert for the Alertmanager API v2 (`POST /api/v2/alerts`, a JSON array of
//! these). Pure.
//!
//! <https://github.com/prometheus/alertmanager/blob/main/api/v2/openapi.yaml> (`postableAlert`)
//!
//! ```json
//! {
//!   "labels": {
//!     "alertname": "FlinkBackpressureCulprit", "job_name": "bp_lab_slow_sink",
//!     "job_id": "da23…", "flink_job_name": "bp-lab-slow-sink",
//!     "culprit_vertex": "slow-sink: Writer", "finding": "sink",
//!     "status": "culprit_found", "culprit": "true"
//!   },
//!   "annotations": { "summary": "…", "fix": "<first fix line>", "description": "<cause>", "verdict_url": "…" },
//!   "startsAt": "<notice time>",
//!   "endsAt": "<notice time + ends_after, or the notice time to resolve>",
//!   "generatorURL": "<verdict URL>"
//! }
//! ```
//!
//! The labels say which job the alert is about exactly as the alert culprit diagnosed says
//! it: the source alert's identifying labels are copied unchanged (`job_id`, `job_name` as
//! the reporter writes it, `namespace`, `cluster`, … — every label common to the job's alerts
//! in the group but `alertname` and `severity`, see [`NOT_COPIED`]), so silences, inhibit
//! rules and bots keyed on them join the two; Flink's own name of the job (`bp-lab-slow-sink`
//! where the reporter writes `bp_lab_slow_sink`) is in `flink_job_name`. culprit's own labels
//! follow (`alertname`, `culprit_vertex`, `finding`, `status`, `culprit="true"`), so culprit's
//! alert never has the source alert's identity and never overwrites it. Empty label values
//! are left out (Alertmanager treats an empty label as an absent one).

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::model::graph::sanitize_label_value;
use crate::model::notice::{Notice, NoticeKind};
use crate::model::verdict::rfc3339;
use crate::render::names::{self, Names};

/// Longest `summary` and `fix` annotation, characters: Alertmanager's own integrations cut
/// what they show of an alert at 1,024 runes (its Slack title, `maxTitleLenRunes`, and
/// PagerDuty summary, `maxV2SummaryLenRunes`, in prometheus/alertmanager `notify/`).
pub const MAX_SUMMARY_ANNOTATION: usize = 1024;

/// Longest `description` annotation, characters: the longest text Alertmanager's own
/// integrations pass on (Discord's description and Telegram's message, 4,096 runes, in
/// prometheus/alertmanager `notify/discord` and `notify/telegram`).
pub const MAX_DESCRIPTION_ANNOTATION: usize = 4096;

/// Longest `culprit_vertex` label value, characters. Alertmanager sets no limit; a label is
/// matched by silences and inhibit rules and shown in titles, where Alertmanager's
/// integrations keep 250–256 runes (Pushover, Discord titles).
pub const MAX_VERTEX_LABEL: usize = 250;

fn cut(s: &str, max: usize) -> String {
    crate::render::pagerduty::truncate(s, max).into_owned()
}

/// The default `alertname` of culprit's alert.
pub const DEFAULT_ALERTNAME: &str = "FlinkBackpressureCulprit";

/// The `summary` prefix of a [`NoticeKind::CouldNotDiagnose`] alert.
pub const COULD_NOT_DIAGNOSE: &str = "could not diagnose: ";

/// Labels of the source alert that say what kind of alert it was or how urgent, not which
/// job: not copied onto culprit's alert (a `severity` would let the source's inhibit
/// rules mute the verdict).
pub const NOT_COPIED: [&str; 2] = ["alertname", "severity"];

/// The labels of culprit's alert for `notice`: the source alert's labels but
/// [`NOT_COPIED`], unchanged; `job_id` and `job_name` (as the reporter writes it) from the
/// job when the source has none; `flink_job_name` (the job as Flink names it);
/// `alertname`; `culprit_vertex` (the culprit's vertex name); `finding` (`none` for
/// [`NoticeKind::CouldNotDiagnose`]); `status` (the verdict status); `culprit="true"`.
/// Empty values are left out.
pub fn labels(notice: &Notice, alertname: &str) -> BTreeMap<String, String> {
    let job = notice.verdict.as_ref().map_or(&notice.job, |v| &v.job);
    let mut out: BTreeMap<String, String> = notice
        .labels
        .iter()
        .filter(|(k, v)| !NOT_COPIED.contains(&k.as_str()) && !v.is_empty())
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let reporter_name = sanitize_label_value(&job.name);
    for (k, v) in [("job_id", job.id.as_str()), ("job_name", reporter_name.as_str())] {
        if !v.is_empty() {
            out.entry(k.to_string()).or_insert_with(|| v.to_string());
        }
    }
    let verdict = notice.verdict.as_ref().filter(|_| notice.kind != NoticeKind::CouldNotDiagnose);
    let finding = match (notice.kind, verdict) {
        (NoticeKind::CouldNotDiagnose, _) => Some("none"),
        (_, Some(v)) => Some(v.finding.as_str()),
        (_, None) => None,
    };
    // Flink's vertex name (never a SQL plan's description), bounded.
    let culprit_vertex =
        verdict.and_then(|v| v.culprit.as_ref()).map(|c| cut(&names::vertex_name(&c.vertex_name), MAX_VERTEX_LABEL));
    let pairs = [
        ("alertname", Some(alertname)),
        ("flink_job_name", Some(job.name.as_str())),
        ("culprit_vertex", culprit_vertex.as_deref()),
        ("finding", finding),
        ("status", verdict.map(|v| v.status.as_str())),
        ("culprit", Some("true")),
    ];
    for (k, v) in pairs {
        match v.filter(|v| !v.is_empty()) {
            Some(v) => out.insert(k.to_string(), v.to_string()),
            None => out.remove(k),
        };
    }
    out
}

/// The annotations: `summary` (the verdict's, or `could not diagnose: <reason>`), `fix`
/// (the first fix line), `description` (the verdict's cause), `verdict_url`, and
/// `alert_groups` (a JSON array of the `groupKey`s) when several alert groups carry it. Vertex names
/// in their prose form, control characters cleaned, each cut to its limit
/// ([`MAX_SUMMARY_ANNOTATION`], [`MAX_DESCRIPTION_ANNOTATION`]). Empty values are left out.
pub fn annotations(notice: &Notice) -> BTreeMap<String, String> {
    let verdict = notice.verdict.as_ref().filter(|_| notice.kind != NoticeKind::CouldNotDiagnose);
    let n = verdict.map(Names::of).unwrap_or_default();
    let summary = match (notice.kind, verdict) {
        (NoticeKind::CouldNotDiagnose, _) => {
            Some(format!("{COULD_NOT_DIAGNOSE}{}", notice.reason.as_deref().unwrap_or("no reason given")))
        }
        (_, Some(v)) => Some(v.summary.clone()),
        (NoticeKind::Resolved | NoticeKind::GroupResolved, None) => Some("resolved".to_string()),
        (NoticeKind::Verdict | NoticeKind::Joined | NoticeKind::Incident, None) => None,
    };
    // One alert for the job, however many alert groups carry its verdict: they are listed.
    let groups = (notice.episode.groups.len() > 1)
        .then(|| serde_json::to_string(&notice.episode.groups).expect("strings always serialize"));
    let pairs = [
        ("summary", summary.map(|s| cut(&n.text(&s), MAX_SUMMARY_ANNOTATION))),
        ("fix", verdict.and_then(|v| v.fix.first()).map(|f| cut(&n.text(f), MAX_SUMMARY_ANNOTATION))),
        ("description", verdict.map(|v| cut(&n.text(&v.cause), MAX_DESCRIPTION_ANNOTATION))),
        ("verdict_url", notice.verdict_url.clone()),
        ("alert_groups", groups),
    ];
    pairs.into_iter().filter_map(|(k, v)| v.filter(|v| !v.is_empty()).map(|v| (k.to_string(), v))).collect()
}

/// culprit's alert for `notice` (see the module docs): `startsAt` the notice time,
/// `endsAt` `ends_at_ms` (always explicit: the notice time plus `ends_after` to keep it
/// firing, the notice time itself to resolve it), `generatorURL` the verdict URL when there
/// is one.
pub fn culprit_alert(notice: &Notice, alertname: &str, ends_at_ms: i64) -> Value {
    let mut alert = Map::new();
    alert.insert("labels".into(), to_object(labels(notice, alertname)));
    alert.insert("annotations".into(), to_object(annotations(notice)));
    alert.insert("startsAt".into(), rfc3339(notice.at_ms).into());
    alert.insert("endsAt".into(), rfc3339(ends_at_ms).into());
    if let Some(url) = notice.verdict_url.as_ref().filter(|u| !u.is_empty()) {
        alert.insert("generatorURL".into(), url.clone().into());
    }
    Value::Object(alert)
}

/// A copy of an alert posted earlier (same labels, so the same alert for Alertmanager) with
/// `startsAt` and `endsAt` both `at_ms`: posting it resolves that alert.
pub fn ended(alert: &Value, at_ms: i64) -> Value {
    let mut alert = alert.clone();
    if let Some(o) = alert.as_object_mut() {
        o.insert("startsAt".into(), rfc3339(at_ms).into());
        o.insert("endsAt".into(), rfc3339(at_ms).into());
    }
    alert
}

fn to_object(map: BTreeMap<String, String>) -> Value {
    Value::Object(map.into_iter().map(|(k, v)| (k, Value::String(v))).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::verdict::{Confidence, Culprit, Finding, Graph, JobRef, Role, SCHEMA, Status, Verdict};
    use serde_json::json;

    fn verdict() -> Verdict {
        Verdict {
            schema: SCHEMA.into(),
            job: JobRef { name: "bp-lab-slow-sink".into(), id: "da23".into() },
            at: "2026-11-29T10:36:27.78Z".into(),
            window_seconds: 57,
            window_start: "2026-11-29T10:35:30.462Z".into(),
            status: Status::CulpritFound,
            finding: Finding::Sink,
            culprit: Some(Culprit {
                vertex_id: "2e58".into(),
                vertex_name: "slow-sink: Writer".into(),
                operators: vec!["slow-sink: Writer".into()],
                role: Role::Sink,
                parallelism: 2,
                subtasks: vec![0, 1],
            }),
            culprits: vec![],
            summary: "the sink is slow".into(),
            cause: "busy 99%".into(),
            fix: vec!["fix the sink".into(), "batch".into()],
            not_the_fix: vec![],
            advice: vec![],
            steps: vec![],
            hazards: vec![],
            evidence: vec![],
            graph: Graph { vertices: vec![], edges: vec![], from_plan: true },
            confidence: Confidence::High,
            missing: vec![],
            notes: vec![],
            timeline: None,
            profile: None,
            autoscaler: None,
            attribution: None,
        }
    }

    fn notice(kind: NoticeKind, verdict: Option<Verdict>) -> Notice {
        Notice {
            links: Default::default(),
            kind,
            group_key: "{}:{alertname=\"FlinkJobBackpressured\"}".into(),
            labels: [
                ("alertname", "FlinkJobBackpressured"),
                ("job_id", "da23"),
                ("job_name", "bp_lab_slow_sink"),
                ("severity", "warning"),
                ("cluster", "prod-eu"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
            job: JobRef { name: "bp_lab_slow_sink".into(), id: "da23".into() },
            verdict,
            verdict_id: Some(7),
            verdict_url: Some("http://culprit:8080/api/v1/verdicts/7".into()),
            reason: Some("Prometheus is unreachable".into()),
            firing: true,
            changed: false,
            idempotency_key: "k".into(),
            at_ms: 1_795_948_587_780,
            episode: Default::default(),
            maybe_repeat: false,
            incident: None,
            incident_view: None,
            incident_parent: None,
        }
    }

    #[test]
    fn a_verdict_becomes_an_alert_with_the_verdicts_labels_and_an_explicit_end() {
        let a = culprit_alert(&notice(NoticeKind::Verdict, Some(verdict())), DEFAULT_ALERTNAME, 1_795_949_487_780);
        assert_eq!(
            a,
            json!({
                "labels": {
                    "alertname": "FlinkBackpressureCulprit", "job_name": "bp_lab_slow_sink", "job_id": "da23",
                    "cluster": "prod-eu", "flink_job_name": "bp-lab-slow-sink",
                    "culprit_vertex": "slow-sink: Writer", "finding": "sink", "status": "culprit_found",
                    "culprit": "true"
                },
                "annotations": {
                    "summary": "the sink is slow", "fix": "fix the sink", "description": "busy 99%",
                    "verdict_url": "http://culprit:8080/api/v1/verdicts/7"
                },
                "startsAt": "2026-11-29T10:36:27.78Z",
                "endsAt": "2026-11-29T10:51:27.78Z",
                "generatorURL": "http://culprit:8080/api/v1/verdicts/7"
            })
        );
    }

    #[test]
    fn could_not_diagnose_is_an_alert_with_finding_none_and_the_reason() {
        let n = notice(NoticeKind::CouldNotDiagnose, None);
        let a = culprit_alert(&n, DEFAULT_ALERTNAME, n.at_ms);
        assert_eq!(
            a["labels"],
            json!({"alertname": "FlinkBackpressureCulprit", "job_name": "bp_lab_slow_sink", "job_id": "da23",
                   "cluster": "prod-eu", "flink_job_name": "bp_lab_slow_sink", "finding": "none", "culprit": "true"})
        );
        assert_eq!(a["annotations"]["summary"], "could not diagnose: Prometheus is unreachable");
        assert!(a["annotations"].get("fix").is_none());
    }

    #[test]
    fn empty_label_values_are_left_out_and_the_source_alerts_kind_and_urgency_never_copied() {
        let mut v = verdict();
        v.culprit = None;
        v.job.name = String::new();
        let mut n = notice(NoticeKind::Verdict, Some(v));
        n.labels.insert("namespace".into(), String::new());
        n.labels.insert("culprit_vertex".into(), "forged".into());
        let l = labels(&n, "X");
        assert_eq!(
            l.keys().collect::<Vec<_>>(),
            ["alertname", "cluster", "culprit", "finding", "job_id", "job_name", "status"]
        );
        assert_eq!(l["alertname"], "X");
        assert_eq!(l["job_name"], "bp_lab_slow_sink", "the source's, unchanged");
    }

    #[test]
    fn without_job_labels_on_the_source_the_job_is_named_as_the_reporter_writes_it() {
        let mut n = notice(NoticeKind::Verdict, Some(verdict()));
        n.labels.clear();
        let l = labels(&n, DEFAULT_ALERTNAME);
        assert_eq!(l["job_name"], "bp_lab_slow_sink");
        assert_eq!(l["flink_job_name"], "bp-lab-slow-sink");
        assert_eq!(l["job_id"], "da23");
    }

    #[test]
    fn ending_an_alert_keeps_its_labels_and_sets_both_times() {
        let n = notice(NoticeKind::Verdict, Some(verdict()));
        let a = culprit_alert(&n, DEFAULT_ALERTNAME, n.at_ms + 900_000);
        let e = ended(&a, n.at_ms + 60_000);
        assert_eq!(e["labels"], a["labels"]);
        assert_eq!(e["startsAt"], "2026-11-29T10:37:27.78Z");
        assert_eq!(e["endsAt"], "2026-11-29T10:37:27.78Z");
    }
}
