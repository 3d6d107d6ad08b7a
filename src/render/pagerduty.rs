//! The PagerDuty Events API v2 trigger event for a [`Notice`]. Pure.
//!
//! <https://developer.pagerduty.com/docs/events-api-v2/trigger-events/>
//!
//! ```json
//! {
//!   "routing_key": "<integration key>",
//!   "event_action": "trigger",
//!   "dedup_key": "<lowercase hex SHA-256 of the group key>",
//!   "payload": {
//!     "summary": "<job>: <verdict summary> Fix: <first step>",  // ≤ 1024 characters
//!     "source": "<job name>",
//!     "severity": "critical | error | warning | info",
//!     "timestamp": "<notice time, RFC 3339>",
//!     "component": "<culprit: Flink's vertex name>", // left out without a culprit
//!     "group": "flink",
//!     "class": "<finding> | could_not_diagnose",
//!     "custom_details": { "fix": ["…"], "culprit": "…", "verdict": { … culprit.verdict/v1 … },
//!                         "group_key": "…", "idempotency_key": "…" }
//!   },
//!   "client": "culprit",
//!   "client_url": "<verdict URL>",                 // both only with a verdict URL
//!   "links": [{ "href": "<verdict URL>", "text": "culprit verdict" }],
//!   "images": [{ "src": "<picture URL>", "href": "<verdict URL>", "alt": "…" }] // HTTPS only
//! }
//! ```

use std::borrow::Cow;

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use crate::model::notice::{Notice, NoticeKind};
use crate::model::verdict::JobRef;
use crate::render::names::{self, Names};

/// Longest `payload.summary`, in characters: "The maximum permitted length of this property is
/// 1024 characters." <https://developer.pagerduty.com/docs/events-api-v2/trigger-events/>
pub const MAX_SUMMARY_CHARS: usize = 1024;

/// Largest event PagerDuty accepts: "Events API payloads are limited to 512 KB".
/// <https://developer.pagerduty.com/docs/events-api-v2/overview/> ("Size Limits").
/// Alertmanager's own PagerDuty integration uses the same 512 000 bytes. Beyond it, the
/// verdict in `custom_details` is cut down to its summary, cause and fix.
pub const MAX_EVENT_BYTES: usize = 512_000;

/// The `client` of every event.
pub const CLIENT: &str = "culprit";

/// The `payload.group` of every event: the sources (jobs) are Flink jobs.
pub const GROUP: &str = "flink";

/// The text of the link to the verdict.
pub const LINK_TEXT: &str = "culprit verdict";

/// The `alt` of the verdict's picture in `images`.
pub const IMAGE_ALT: &str = crate::render::png::ALT_TEXT;

/// The `dedup_key` for an Alertmanager group: the lowercase hex SHA-256 of its `groupKey`
/// (64 characters, within PagerDuty's 255).
///
/// It is exactly the key Alertmanager's own PagerDuty integration sends for the group, so
/// culprit's event lands on the incident the page opened: in prometheus/alertmanager,
/// `notify/pagerduty/pagerduty.go` (commit 94d875f1227b29abece661db1a68c001122d1da5, line
/// 181, in `notifyV2`) sets `DedupKey: key.Hash(),` where `key` is the group key, and
/// `notify/util.go` (commit bef850ac905cade91423789615de31b9d0288b3d, line 118) defines
/// `func (k Key) Hash() string` as `sha256` of the key's bytes, formatted `%x`.
pub fn dedup_key(group_key: &str) -> String {
    hex::encode(Sha256::digest(group_key.as_bytes()))
}

/// `s` cut to at most `max_chars` characters (Unicode scalar values), the last one `…` when
/// anything was cut.
pub fn truncate(s: &str, max_chars: usize) -> Cow<'_, str> {
    if s.chars().count() <= max_chars {
        return Cow::Borrowed(s);
    }
    let mut out: String = s.chars().take(max_chars.saturating_sub(1)).collect();
    if max_chars > 0 {
        out.push('…');
    }
    Cow::Owned(out)
}

/// The job a notice is about: the verdict's when there is one (as Flink names it), else the
/// notice's.
fn job(notice: &Notice) -> &JobRef {
    notice.verdict.as_ref().map_or(&notice.job, |v| &v.job)
}

/// The job as a person reads it: its name, else its id, else `unknown job`.
fn job_label(job: &JobRef) -> &str {
    if !job.name.is_empty() {
        &job.name
    } else if !job.id.is_empty() {
        &job.id
    } else {
        "unknown job"
    }
}

/// The summary before truncation, leading with the answer: `<job>: <verdict summary> Fix:
/// <first step>` (`<job>: verdict changed: …` when it replaces an earlier one), `<job>:
/// could not diagnose: <reason>`, or `<job>: resolved`. Vertex names in their prose form,
/// control characters cleaned.
pub fn summary(notice: &Notice) -> String {
    let job = names::clean(job_label(job(notice))).into_owned();
    let answer = |v: &crate::model::verdict::Verdict| {
        let n = Names::of(v);
        match v.fix.first() {
            Some(first) => format!("{} Fix: {}", n.text(&v.summary), n.text(first)),
            None => n.text(&v.summary),
        }
    };
    let s = match (notice.kind, &notice.verdict) {
        (NoticeKind::Verdict, Some(v)) if notice.changed => format!("{job}: verdict changed: {}", answer(v)),
        (NoticeKind::Verdict, Some(v)) => match &notice.incident {
            Some(tag) => format!(
                "{job}: one of {} jobs held back by {}. {}",
                tag.jobs,
                crate::render::incident::cause_phrase(&tag.cause),
                answer(v)
            ),
            None => format!("{job}: {}", answer(v)),
        },
        (NoticeKind::Verdict, None) => format!("{job}: no verdict"),
        (NoticeKind::CouldNotDiagnose, _) => {
            format!("{job}: could not diagnose: {}", notice.reason.as_deref().unwrap_or("no reason given"))
        }
        (NoticeKind::Resolved, _) => format!("{job}: resolved"),
        (NoticeKind::Joined, _) => format!("{job}: another alert group carries the verdict"),
        (NoticeKind::GroupResolved, _) => format!("{job}: an alert group resolved; others still fire"),
        (NoticeKind::Incident, _) => format!("{job}: counted in an incident"),
    };
    names::clean(&s).into_owned()
}

/// The trigger event for `notice` (see the module docs for the shape).
///
/// * `summary`: [`summary`], cut to [`MAX_SUMMARY_CHARS`].
/// * `source`: the job name (its id when the name is empty); `component`: the culprit
///   vertex's name, left out without a culprit; `class`: the finding (`sink`, `hot_key`, …)
///   or `could_not_diagnose`.
/// * `custom_details`: `verdict` (the `culprit.verdict/v1` value) or `reason`, plus
///   `group_key`, `idempotency_key` and `verdict_url` when there is one; `alert_groups`
///   (every alert group carrying the job's verdict, the lead first) when there are several,
///   since one event stands for the job's episode; `revision` (1, 2, …) when the same
///   verdict comes again with other confidence or numbers. When the whole event
///   would exceed [`MAX_EVENT_BYTES`], `verdict` is replaced by its `schema`, `status`,
///   `finding`, `summary`, `cause` and `fix` and a `truncated` note.
/// * `client_url` and `links`: the verdict URL, only when the notice has one.
/// * `images`: the verdict's picture, only when the notice links its signed page over
///   HTTPS ([`Notice::picture_https`]).
///
/// `severity` is written as given (configuration checks it).
pub fn event(notice: &Notice, routing_key: &str, severity: &str) -> Value {
    let job = job(notice);
    let mut payload = Map::new();
    payload.insert("summary".into(), truncate(&summary(notice), MAX_SUMMARY_CHARS).into_owned().into());
    payload.insert("source".into(), names::clean(job_label(job)).into_owned().into());
    payload.insert("severity".into(), severity.into());
    payload.insert("timestamp".into(), crate::model::verdict::rfc3339(notice.at_ms).into());
    if let Some(c) = notice.verdict.as_ref().and_then(|v| v.culprit.as_ref()) {
        payload.insert("component".into(), names::vertex_name(&c.vertex_name).into());
    }
    payload.insert("group".into(), GROUP.into());
    let class = match (&notice.verdict, notice.kind) {
        (_, NoticeKind::CouldNotDiagnose) => "could_not_diagnose",
        (_, NoticeKind::Resolved) => "resolved",
        (_, NoticeKind::Joined) => "joined",
        (_, NoticeKind::GroupResolved) => "group_resolved",
        (_, NoticeKind::Incident) => "incident",
        (Some(v), NoticeKind::Verdict) => v.finding.as_str(),
        (None, NoticeKind::Verdict) => "none",
    };
    payload.insert("class".into(), class.into());

    let mut details = Map::new();
    match &notice.verdict {
        Some(v) => {
            let n = Names::of(v);
            details.insert("fix".into(), v.fix.iter().map(|f| n.text(f)).collect::<Vec<_>>().into());
            if let Some(c) = &v.culprit {
                details.insert("culprit".into(), names::vertex_name(&c.vertex_name).into());
            }
            details.insert("verdict".into(), serde_json::to_value(v).expect("a verdict always serializes"));
        }
        None => {
            details.insert("reason".into(), notice.reason.clone().map_or(Value::Null, Value::from));
            details.insert("job".into(), json!({ "name": job.name, "id": job.id }));
        }
    }
    details.insert("group_key".into(), notice.group_key.clone().into());
    // Many jobs share the cause: each job's event says so (PagerDuty groups alerts by
    // its own rules; the cause is culprit's to name).
    if let Some(tag) = &notice.incident {
        details.insert(
            "shared_cause".into(),
            json!({
                "incident": tag.id,
                "jobs": tag.jobs,
                "cause": crate::render::incident::cause_phrase(&tag.cause),
            }),
        );
    }
    // One event for the job's episode, however many alert groups carry it: the others are
    // folded into it here (the event goes under the lead group's `dedup_key`).
    if notice.episode.groups.len() > 1 {
        details.insert("alert_groups".into(), notice.episode.groups.clone().into());
    }
    if notice.episode.revision > 0 {
        details.insert("revision".into(), notice.episode.revision.into());
    }
    details.insert("idempotency_key".into(), notice.idempotency_key.clone().into());
    if let Some(url) = &notice.verdict_url {
        details.insert("verdict_url".into(), url.clone().into());
    }
    payload.insert("custom_details".into(), Value::Object(details));

    let mut event = Map::new();
    event.insert("routing_key".into(), routing_key.into());
    event.insert("event_action".into(), "trigger".into());
    event.insert("dedup_key".into(), dedup_key(&notice.group_key).into());
    event.insert("payload".into(), Value::Object(payload));
    event.insert("client".into(), CLIENT.into());
    let mut links = Vec::new();
    if let Some(url) = &notice.verdict_url {
        event.insert("client_url".into(), url.clone().into());
        links.push(json!({ "href": url, "text": LINK_TEXT }));
    }
    // The alert source's links (Grafana's silence, dashboard and panel): http(s) only
    // (kept so at intake), shown by PagerDuty as links of the alert.
    for (label, url) in notice.links.labelled() {
        links.push(json!({ "href": url, "text": label }));
    }
    if !links.is_empty() {
        event.insert("links".into(), links.into());
    }
    // The verdict's picture (`/verdicts/{id}.png` under the page's signature): PagerDuty
    // shows `images` only from HTTPS sources.
    // <https://developer.pagerduty.com/docs/events-api-v2-overview#images>
    if let (Some(src), Some(href)) = (notice.picture_https(), &notice.verdict_url) {
        event.insert("images".into(), json!([{ "src": src, "href": href, "alt": IMAGE_ALT }]));
    }
    let mut event = Value::Object(event);

    let size = serde_json::to_vec(&event).map_or(0, |b| b.len());
    if size > MAX_EVENT_BYTES {
        shrink(&mut event, notice, size);
    }
    event
}

/// Cuts an event over [`MAX_EVENT_BYTES`] down: first the verdict to its schema, status,
/// finding, summary, cause and fix; if still too big, every detail to at most 4,096
/// characters and at most 20 fix steps of 1,024 (surely under 512 KB: about 30 KB of
/// details besides a routing key and URLs of configuration's size).
fn shrink(event: &mut Value, notice: &Notice, size: usize) {
    let truncated = format!(
        "the verdict ({size} bytes as an event) exceeds PagerDuty's {MAX_EVENT_BYTES}-byte limit; the full verdict is at the link"
    );
    let details = &mut event["payload"]["custom_details"];
    if let Some(v) = &notice.verdict {
        details["verdict"] = json!({
            "schema": v.schema,
            "status": v.status,
            "finding": v.finding,
            "summary": truncate(&v.summary, 4096),
            "cause": truncate(&v.cause, 16_384),
            "fix": v.fix.iter().take(20).map(|f| truncate(f, 4096)).collect::<Vec<_>>(),
            "truncated": truncated,
        });
        if let Some(fix) = details.get_mut("fix").and_then(Value::as_array_mut) {
            fix.truncate(20);
        }
    }
    if serde_json::to_vec(&*event).map_or(0, |b| b.len()) <= MAX_EVENT_BYTES {
        return;
    }
    let cut = |v: &Value, max: usize| match v {
        Value::String(s) => Value::String(truncate(s, max).into_owned()),
        Value::Array(a) => Value::Array(
            a.iter()
                .take(20)
                .map(|x| x.as_str().map_or(Value::Null, |s| truncate(s, 1024).into_owned().into()))
                .collect(),
        ),
        _ => Value::Null,
    };
    let details = &mut event["payload"]["custom_details"];
    if let Some(map) = details.as_object_mut() {
        for (_, v) in map.iter_mut() {
            let shorter = match &*v {
                Value::Object(o) => Value::Object(o.iter().map(|(k, x)| (k.clone(), cut(x, 4096))).collect()),
                other => cut(other, 4096),
            };
            *v = shorter;
        }
    }
    for key in ["source", "component"] {
        if let Some(s) = event["payload"][key].as_str() {
            event["payload"][key] = truncate(s, 1024).into_owned().into();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::verdict::{Confidence, Finding, Graph, SCHEMA, Status, Verdict};

    fn verdict(summary: &str) -> Verdict {
        Verdict {
            schema: SCHEMA.into(),
            job: JobRef { name: "bp-lab-slow-sink".into(), id: "da23ad9af4e7326542c9a70eac958f42".into() },
            at: "2026-11-29T10:36:27.78Z".into(),
            window_seconds: 57,
            window_start: "2026-11-29T10:35:30.462Z".into(),
            status: Status::NoSingleCulprit,
            finding: Finding::None,
            culprit: None,
            culprits: vec![],
            summary: summary.into(),
            cause: "cause".into(),
            fix: vec!["fix it".into()],
            not_the_fix: vec![],
            advice: vec![],
            steps: vec![],
            hazards: vec![],
            evidence: vec![],
            graph: Graph { vertices: vec![], edges: vec![], from_plan: true },
            confidence: Confidence::Low,
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
            labels: Default::default(),
            job: JobRef { name: "bp_lab_slow_sink".into(), id: "da23ad9af4e7326542c9a70eac958f42".into() },
            verdict,
            verdict_id: None,
            verdict_url: None,
            reason: Some("Prometheus is unreachable".into()),
            firing: true,
            changed: false,
            idempotency_key: "k1".into(),
            at_ms: 1_795_948_587_780,
            episode: Default::default(),
            maybe_repeat: false,
            incident: None,
            incident_view: None,
            incident_parent: None,
        }
    }

    #[test]
    fn the_dedup_key_is_the_lowercase_hex_sha256_of_the_group_key() {
        // sha256("") and sha256("abc"), the FIPS 180-2 test vectors.
        assert_eq!(dedup_key(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
        assert_eq!(dedup_key("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }

    #[test]
    fn truncation_counts_characters_and_ends_with_an_ellipsis() {
        assert_eq!(truncate("héllo", 5), "héllo");
        assert_eq!(truncate("héllo wörld", 5), "héll…");
        assert_eq!(truncate("abc", 1), "…");
        assert_eq!(truncate("abc", 0), "");
    }

    #[test]
    fn a_long_summary_is_cut_to_1024_characters() {
        let e = event(&notice(NoticeKind::Verdict, Some(verdict(&"é".repeat(3000)))), "rk", "error");
        let s = e["payload"]["summary"].as_str().unwrap();
        assert_eq!(s.chars().count(), MAX_SUMMARY_CHARS);
        assert!(s.starts_with("bp-lab-slow-sink: éé") && s.ends_with('…'));
    }

    #[test]
    fn a_verdict_too_big_for_pagerduty_is_cut_down_to_summary_cause_and_fix() {
        let mut v = verdict("slow sink");
        v.notes = vec!["n".repeat(1000); 600];
        let e = event(&notice(NoticeKind::Verdict, Some(v)), "rk", "error");
        assert!(serde_json::to_vec(&e).unwrap().len() <= MAX_EVENT_BYTES);
        let d = &e["payload"]["custom_details"]["verdict"];
        assert_eq!(d["summary"], "slow sink");
        assert_eq!(d["fix"], json!(["fix it"]));
        assert!(d["truncated"].as_str().unwrap().contains("512000-byte limit"));
        assert!(d.get("notes").is_none());
    }

    #[test]
    fn could_not_diagnose_carries_the_reason_and_no_component() {
        let e = event(&notice(NoticeKind::CouldNotDiagnose, None), "rk", "warning");
        assert_eq!(e["payload"]["summary"], "bp_lab_slow_sink: could not diagnose: Prometheus is unreachable");
        assert_eq!(e["payload"]["class"], "could_not_diagnose");
        assert_eq!(e["payload"]["severity"], "warning");
        assert_eq!(e["payload"]["custom_details"]["reason"], "Prometheus is unreachable");
        assert!(e["payload"].get("component").is_none());
        assert!(e.get("links").is_none() && e.get("client_url").is_none());
    }

    #[test]
    fn the_pictures_image_goes_only_with_a_signed_https_link() {
        let mut n = notice(NoticeKind::Verdict, Some(verdict("s")));
        n.verdict_url = Some("https://culprit.example.com/verdicts/7?expires=9&sig=ab".into());
        let e = event(&n, "R0UTINGKEY0000000000000000000000", "warning");
        assert_eq!(
            e["images"],
            json!([{
                "src": "https://culprit.example.com/verdicts/7.png?expires=9&sig=ab",
                "href": "https://culprit.example.com/verdicts/7?expires=9&sig=ab",
                "alt": IMAGE_ALT,
            }])
        );
        for url in ["http://culprit.example.com/verdicts/7?expires=9&sig=ab", "https://c.example.com/api/v1/verdicts/7"]
        {
            n.verdict_url = Some(url.into());
            assert!(event(&n, "R0UTINGKEY0000000000000000000000", "warning").get("images").is_none(), "{url}");
        }
    }

    #[test]
    fn the_timestamp_is_rfc3339_utc() {
        assert_eq!(crate::model::verdict::rfc3339(1_795_948_587_780), "2026-11-29T10:36:27.78Z");
    }

    #[test]
    fn the_alert_sources_links_follow_the_verdict_link_in_links() {
        let mut n = notice(NoticeKind::Verdict, None);
        n.verdict_url = Some("https://culprit.example.com/verdicts/7".into());
        n.links = crate::model::notice::AlertLinks {
            silence: Some("https://g.example.com/alerting/silence/new?matcher=a".into()),
            dashboard: None,
            panel: Some("https://g.example.com/d/x?viewPanel=2".into()),
        };
        let e = event(&n, "R0UTINGKEY0000000000000000000000", "warning");
        let links: Vec<(&str, &str)> = e["links"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| (l["text"].as_str().unwrap(), l["href"].as_str().unwrap()))
            .collect();
        assert_eq!(
            links,
            [
                (LINK_TEXT, "https://culprit.example.com/verdicts/7"),
                ("Silence", "https://g.example.com/alerting/silence/new?matcher=a"),
                ("Panel", "https://g.example.com/d/x?viewPanel=2"),
            ]
        );
        n.verdict_url = None;
        n.links = Default::default();
        assert!(event(&n, "R0UTINGKEY0000000000000000000000", "warning").get("links").is_none());
    }
}
