//! The Grafana annotation of a [`Notice`]: the bodies of `POST /api/annotations` and
//! `PATCH /api/annotations/{id}`. Pure.
//!
//! <https://grafana.com/docs/grafana/latest/developers/http_api/annotations/> (the legacy
//! `/api/annotations` API, still served by every Grafana):
//!
//! ```json
//! POST  { "time": <ms>, "tags": ["culprit", "<job>", "<finding>", "culprit-key:<hash>", …],
//!         "text": "<short verdict> <a href=\"…\">verdict</a>", "dashboardUID": "…" }
//! PATCH { "text": "…" }            // an update of the same episode
//! PATCH { "timeEnd": <ms> }        // the resolution: the point becomes a region
//! ```
//!
//! Grafana shows `text` as sanitized HTML: every piece of untrusted text (job and vertex
//! names, the summary) is escaped; the one link is the verdict URL when
//! [`AlertLinks::keep`] keeps it.
//!
//! [`AlertLinks::keep`]: crate::model::notice::AlertLinks::keep

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use crate::model::notice::{AlertLinks, Notice, NoticeKind};
use crate::render::html::escape;
use crate::render::names::{self, Names};
use crate::render::pagerduty::truncate;

/// The tag every annotation of culprit carries.
pub const TAG: &str = "culprit";

/// The prefix of the idempotency tag: `culprit-key:<first 32 hex of SHA-256(key)>`.
pub const KEY_TAG_PREFIX: &str = "culprit-key:";

/// Longest text before its link, in characters. Grafana documents no limit (the text is a
/// `TEXT` column); this is culprit's own, to keep a tooltip readable.
pub const MAX_TEXT_CHARS: usize = 500;

/// Longest tag, in characters. Grafana documents no limit either; tags are shown as chips,
/// and a job or finding longer than this is cut.
pub const MAX_TAG_CHARS: usize = 100;

/// The idempotency tag of the annotation that `idempotency_key`'s notice creates: what
/// `already_sent` looks for.
pub fn key_tag(idempotency_key: &str) -> String {
    let hash = hex::encode(Sha256::digest(idempotency_key.as_bytes()));
    format!("{KEY_TAG_PREFIX}{}", &hash[..32])
}

fn job_name(notice: &Notice) -> String {
    let job = notice.verdict.as_ref().map_or(&notice.job, |v| &v.job);
    let name = if !job.name.is_empty() { &job.name } else { &job.id };
    names::clean(name).into_owned()
}

/// The tags: the configured ones, then `culprit`, the job name, the finding (for a
/// verdict) and the idempotency tag; each cleaned, cut to [`MAX_TAG_CHARS`], once.
pub fn tags(notice: &Notice, configured: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut push = |t: &str| {
        let t = truncate(names::clean(t).trim(), MAX_TAG_CHARS).into_owned();
        if !t.is_empty() && !out.contains(&t) {
            out.push(t);
        }
    };
    configured.iter().for_each(|t| push(t));
    push(TAG);
    push(&job_name(notice));
    if let Some(v) = &notice.verdict {
        push(v.finding.as_str());
    }
    push(&key_tag(&notice.idempotency_key));
    out
}

/// The text: the short verdict (the summary and the first step of the fix) or what the
/// notice says, escaped and cut to [`MAX_TEXT_CHARS`], then the link to the verdict.
pub fn text(notice: &Notice) -> String {
    let job = job_name(notice);
    let plain = match (notice.kind, &notice.verdict) {
        (NoticeKind::Verdict, Some(v)) => {
            let n = Names::of(v);
            let changed = if notice.changed { "changed: " } else { "" };
            // The confidence too: a revision that only firms it up is shown in place.
            let confidence = format!(" (confidence {})", v.confidence.as_str());
            match v.fix.first() {
                Some(f) => format!("{job}: {changed}{} Fix: {}{confidence}", n.text(&v.summary), n.text(f)),
                None => format!("{job}: {changed}{}{confidence}", n.text(&v.summary)),
            }
        }
        _ => crate::render::pagerduty::summary(notice),
    };
    let mut s = escape(&truncate(&names::clean(&plain), MAX_TEXT_CHARS));
    if let Some(url) = notice.verdict_url.as_deref().and_then(AlertLinks::keep) {
        s.push_str(&format!(" <a href=\"{}\">verdict</a>", escape(&url)));
    }
    s
}

/// The body of `POST /api/annotations` that creates the notice's annotation at `time_ms`.
pub fn create(notice: &Notice, configured_tags: &[String], dashboard_uid: Option<&str>, time_ms: i64) -> Value {
    let mut body = Map::new();
    body.insert("time".into(), json!(time_ms));
    body.insert("tags".into(), json!(tags(notice, configured_tags)));
    body.insert("text".into(), json!(text(notice)));
    if let Some(uid) = dashboard_uid {
        body.insert("dashboardUID".into(), json!(uid));
    }
    Value::Object(body)
}

/// The body of `PATCH /api/annotations/{id}`: the end of the region for a resolution, the
/// new text otherwise.
pub fn patch(notice: &Notice) -> Value {
    match notice.kind {
        NoticeKind::Resolved => json!({ "timeEnd": notice.at_ms }),
        _ => json!({ "text": text(notice) }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::verdict::{JobRef, Verdict};

    fn demo(name: &str) -> Verdict {
        let capture = crate::samples::captures::CAPTURES.iter().find(|c| c.name == name).expect("a bundled capture");
        crate::samples::captures::verdict(capture).expect("the capture diagnoses")
    }

    fn notice(kind: NoticeKind, verdict: Option<Verdict>) -> Notice {
        let job = verdict
            .as_ref()
            .map(|v| v.job.clone())
            .unwrap_or(JobRef { name: "bp-lab-slow-sink".into(), id: "da23ad9af4e7326542c9a70eac958f42".into() });
        Notice {
            links: Default::default(),
            kind,
            group_key: "{}:{alertname=\"FlinkBackpressure\"}".into(),
            labels: Default::default(),
            job,
            verdict,
            verdict_id: Some(42),
            verdict_url: Some("https://culprit.example.com/api/v1/verdicts/42".into()),
            reason: None,
            firing: kind != NoticeKind::Resolved,
            changed: false,
            idempotency_key: "grafana:ops:group:1".into(),
            at_ms: 1_795_000_000_000,
            episode: Default::default(),
            maybe_repeat: false,
            incident: None,
            incident_view: None,
            incident_parent: None,
        }
    }

    #[test]
    fn a_first_sink_verdict_renders_as_snapshot() {
        let n = notice(NoticeKind::Verdict, Some(demo("slow-sink")));
        let body = create(&n, &["flink".into(), "culprit".into()], Some("flink-jobs"), n.at_ms);
        insta::assert_json_snapshot!(body);
    }

    #[test]
    fn the_tags_are_the_configured_ones_then_culprit_job_finding_and_the_key_once_each() {
        let n = notice(NoticeKind::Verdict, Some(demo("slow-sink")));
        let t = tags(&n, &["team-payments".into(), "culprit".into()]);
        assert_eq!(t[..4], ["team-payments", "culprit", "bp-lab-slow-sink", "sink"]);
        assert_eq!(t[4], key_tag("grafana:ops:group:1"));
        // "culprit-key:" (12) + 32 hex = 44.
        assert_eq!(t[4].len(), 44);
    }

    #[test]
    fn a_resolution_closes_the_region_and_an_update_replaces_the_text() {
        let r = notice(NoticeKind::Resolved, None);
        assert_eq!(patch(&r), json!({ "timeEnd": 1_795_000_000_000_i64 }));
        let mut u = notice(NoticeKind::Verdict, Some(demo("slow-sink")));
        u.changed = true;
        assert!(patch(&u)["text"].as_str().unwrap().starts_with("bp-lab-slow-sink: changed: "));
    }

    #[test]
    fn untrusted_names_are_escaped_and_a_bad_link_is_left_out() {
        let mut n = notice(NoticeKind::Resolved, None);
        n.job.name = "<img src=x onerror=alert(1)>".into();
        n.verdict_url = Some("javascript:alert(1)".into());
        let t = text(&n);
        assert!(!t.contains('<'), "{t}");
        assert!(t.contains("&lt;img"), "{t}");
        let long = "x".repeat(2 * MAX_TAG_CHARS);
        n.job.name = long;
        assert!(tags(&n, &[]).iter().all(|t| t.chars().count() <= MAX_TAG_CHARS));
    }
}
