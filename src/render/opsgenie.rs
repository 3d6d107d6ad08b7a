//! The alert of Opsgenie's Alert API v2 and of its successor, Jira Service Management
//! Operations (the same alert, a few field names apart), for a [`Notice`]. Pure.
//!
//! * Opsgenie: <https://docs.opsgenie.com/docs/alert-api> (create, update message and
//!   description, add note, close).
//! * Jira Service Management Operations:
//!   <https://developer.atlassian.com/cloud/jira/service-desk-ops/rest/v2/api-group-alerts/>
//!   takes the same create body but `extraProperties` for Opsgenie's `details`
//!   ([`Flavor`]); every other body here is the same for both.
//!
//! ```json
//! {
//!   "message": "<job>: <verdict summary> Fix: <first step>",   // ≤ 130 characters
//!   "alias": "<lowercase hex SHA-256 of the lead group key>",   // Alertmanager's alias
//!   "description": "<summary, cause, fix, culprit, links>\n\nculprit notice <key>",
//!   "responders": [{ "name": "<team>", "type": "team" }],
//!   "tags": ["culprit", "flink", "<finding>", …],
//!   "details": { "job": "…", "finding": "…", "idempotency_key": "…", … },  // extraProperties on JSM
//!   "entity": "<job name>",
//!   "source": "culprit",
//!   "priority": "P1 … P5"
//! }
//! ```
//!
//! Text from outside (label values, job and vertex names, verdict prose) is cleaned of
//! control characters and HTML-escaped: "HTML formatting for the message values is also
//! supported" (<https://docs.opsgenie.com/docs/alerts-and-alert-fields>), so a `<` of a
//! vertex name must not become markup. Every field is cut to its documented limit (the
//! constants below), never refused for its size.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use crate::model::notice::{Notice, NoticeKind};
use crate::render::names::{self, Names};
use crate::render::pagerduty;

/// Longest `message`: "This field is limited to at most 130 characters."
/// <https://docs.opsgenie.com/docs/alerts-and-alert-fields>, and the Create Alert table of
/// <https://docs.opsgenie.com/docs/alert-api> ("message … 130 characters").
pub const MAX_MESSAGE_CHARS: usize = 130;

/// Longest `alias`: "512 characters" (<https://docs.opsgenie.com/docs/alert-api>, Create
/// Alert). culprit's is 64 (a hex SHA-256), [`alias`] cuts anything longer.
pub const MAX_ALIAS_CHARS: usize = 512;

/// Longest `description`: "15000 characters" (<https://docs.opsgenie.com/docs/alert-api>,
/// Create Alert; the same for Update Alert Description).
pub const MAX_DESCRIPTION_CHARS: usize = 15_000;

/// Longest `note` of Add Note and Close Alert: "25000 characters"
/// (<https://docs.opsgenie.com/docs/alert-api-continued>).
pub const MAX_NOTE_CHARS: usize = 25_000;

/// Most `tags` and the longest one: "20 x 50 characters"
/// (<https://docs.opsgenie.com/docs/alert-api>, Create Alert).
pub const MAX_TAGS: usize = 20;
/// See [`MAX_TAGS`].
pub const MAX_TAG_CHARS: usize = 50;

/// Most `responders`: "50 teams/users/escalations/schedules"
/// (<https://docs.opsgenie.com/docs/alert-api>, Create Alert).
pub const MAX_RESPONDERS: usize = 50;

/// Longest `entity`: "512 characters" (<https://docs.opsgenie.com/docs/alert-api>).
pub const MAX_ENTITY_CHARS: usize = 512;

/// Longest `source` and `user`: "100 characters" (<https://docs.opsgenie.com/docs/alert-api>).
pub const MAX_SOURCE_CHARS: usize = 100;

/// The whole of `details` (keys and values): "8000 characters in total"
/// (<https://docs.opsgenie.com/docs/alert-api>, Create Alert).
pub const MAX_DETAILS_CHARS: usize = 8000;

/// The `source` and `user` of every request.
pub const SOURCE: &str = "culprit";

/// The priorities Opsgenie accepts: "Possible values are P1, P2, P3, P4 and P5. Default
/// value is P3." (<https://docs.opsgenie.com/docs/alert-api>).
pub const PRIORITIES: [&str; 5] = ["P1", "P2", "P3", "P4", "P5"];

/// Which API the create body is for: the two name the custom key-value map differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    /// Opsgenie Alert API v2: `details`.
    Opsgenie,
    /// Jira Service Management Operations REST API: `extraProperties`.
    Jsm,
}

/// What the configuration adds to a created alert.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AlertOptions {
    /// One of [`PRIORITIES`] (configuration checks it).
    pub priority: String,
    /// Teams by name.
    pub responders: Vec<String>,
    /// Tags besides culprit's own (`culprit`, `flink`, the finding).
    pub tags: Vec<String>,
}

/// The alert group a notice's alert belongs to: the episode's lead group (the first of
/// `episode.groups`), else the notice's group.
pub fn lead_group(notice: &Notice) -> &str {
    notice.episode.groups.first().map_or(&notice.group_key, String::as_str)
}

/// The `alias` for a notice: the lowercase hex SHA-256 of its lead group's key
/// ([`lead_group`]), which is exactly the alias Alertmanager's own Opsgenie integration
/// sends for the group, so that culprit's verdict lands on the alert the page opened: in
/// prometheus/alertmanager, `notify/opsgenie/opsgenie.go` (commit
/// 039374e923b9f34c24e5f9027dd33a8cd28e579d, `createRequests`) sets `alias = key.Hash()`
/// for the create and the close (`v2/alerts/%s/close` with `identifierType=alias`), and
/// `Key.Hash` is the SHA-256 of the group key, formatted `%x` (the same as PagerDuty's
/// `dedup_key`, [`pagerduty::dedup_key`]).
pub fn alias(notice: &Notice) -> String {
    cut(&pagerduty::dedup_key(lead_group(notice)), MAX_ALIAS_CHARS)
}

/// The line every description and note ends with, naming the notice: how
/// `already_sent` recognises a delivery that arrived.
pub fn marker(notice: &Notice) -> String {
    format!("culprit notice {}", notice.idempotency_key)
}

/// `s` cut to at most `max` characters, the last one `…` when anything was cut.
fn cut(s: &str, max: usize) -> String {
    pagerduty::truncate(s, max).into_owned()
}

/// `s` cleaned of control characters and HTML-escaped (`&`, `<`, `>`, `"`), at most `max`
/// characters *after* escaping (an entity is never cut in half), ending with `…` when
/// anything was cut.
pub fn escape_cut(s: &str, max: usize) -> String {
    escape_cut_clean(&names::clean(s), max)
}

/// [`escape_cut`] of text of several lines: each line cleaned, the line breaks kept.
pub fn escape_cut_text(s: &str, max: usize) -> String {
    let clean: Vec<String> = s.split('\n').map(|l| names::clean(l).into_owned()).collect();
    escape_cut_clean(&clean.join("\n"), max)
}

fn escape_cut_clean(clean: &str, max: usize) -> String {
    let escaped = |c: char| -> Option<&'static str> {
        match c {
            '&' => Some("&amp;"),
            '<' => Some("&lt;"),
            '>' => Some("&gt;"),
            '"' => Some("&quot;"),
            _ => None,
        }
    };
    let width = |c: char| escaped(c).map_or(1, str::len);
    let total: usize = clean.chars().map(width).sum();
    let budget = if total <= max { max } else { max.saturating_sub(1) };
    let mut out = String::new();
    let mut used = 0;
    for c in clean.chars() {
        let w = width(c);
        if used + w > budget {
            break;
        }
        used += w;
        match escaped(c) {
            Some(e) => out.push_str(e),
            None => out.push(c),
        }
    }
    if total > max && max > 0 {
        out.push('…');
    }
    out
}

/// The `message`: PagerDuty's summary ([`pagerduty::summary`]: the job, the verdict's
/// summary, the first step of the fix), escaped and cut to [`MAX_MESSAGE_CHARS`].
pub fn message(notice: &Notice) -> String {
    escape_cut(&pagerduty::summary(notice), MAX_MESSAGE_CHARS)
}

/// The `description`: the verdict as a responder reads it (summary, why, the fix, the
/// culprit, the links, the alert groups), escaped, cut to leave room for the last line,
/// [`marker`]; at most [`MAX_DESCRIPTION_CHARS`] in all.
pub fn description(notice: &Notice) -> String {
    let mut body = String::new();
    match &notice.verdict {
        Some(v) => {
            let n = Names::of(v);
            if notice.changed {
                body.push_str("Verdict changed.\n\n");
            }
            body.push_str(&n.text(&v.summary));
            body.push_str("\n\nWhy: ");
            body.push_str(&n.text(&v.cause));
            if !v.fix.is_empty() {
                body.push_str("\n\nFix:");
                for (i, f) in v.fix.iter().enumerate() {
                    body.push_str(&format!("\n{}. {}", i + 1, n.text(f)));
                }
            }
            body.push_str("\n\n");
            if let Some(c) = &v.culprit {
                body.push_str(&format!("Culprit: {}\n", names::vertex_name(&c.vertex_name)));
            }
            body.push_str(&format!(
                "Finding: {}, status {}, confidence {}\n",
                v.finding.as_str(),
                v.status.as_str(),
                v.confidence.as_str()
            ));
        }
        None => body.push_str(&pagerduty::summary(notice)),
    }
    if let Some(url) = &notice.verdict_url {
        body.push_str(&format!("Verdict: {url}\n"));
    }
    for (label, url) in notice.links.labelled() {
        body.push_str(&format!("{label}: {url}\n"));
    }
    if notice.episode.groups.len() > 1 {
        body.push_str(&format!("Alert groups carrying this verdict: {}\n", notice.episode.groups.len()));
    }
    if notice.episode.revision > 0 {
        body.push_str(&format!("Revision {} of this verdict\n", notice.episode.revision));
    }
    finish(body.trim_end(), &marker(notice), MAX_DESCRIPTION_CHARS)
}

/// `body` escaped and cut so that `\n\n` and `last` (escaped) follow within `max`.
fn finish(body: &str, last: &str, max: usize) -> String {
    let last = escape_cut(last, max);
    let room = max.saturating_sub(last.chars().count() + 2);
    format!("{}\n\n{last}", escape_cut_text(body, room))
}

/// The possible-repeat mark of a note (the delivery loop could not tell whether an
/// earlier one arrived).
pub const REPEAT_MARK: &str = "possible repeat: an earlier delivery could not be confirmed";

/// The body of Add Note for a changed verdict: `{"note", "user", "source"}`, the note
/// saying what changed, ending with [`marker`] (and [`REPEAT_MARK`] first when the
/// notice is a possible repeat), at most [`MAX_NOTE_CHARS`].
pub fn note(notice: &Notice) -> Value {
    let mut text = String::new();
    if notice.maybe_repeat {
        text.push_str(REPEAT_MARK);
        text.push_str("\n\n");
    }
    text.push_str("culprit: ");
    text.push_str(&pagerduty::summary(notice));
    action_body(finish(&text, &marker(notice), MAX_NOTE_CHARS))
}

/// The body of Close Alert: `{"note", "user", "source"}`, the note saying the job's alert
/// groups resolved.
pub fn close(notice: &Notice) -> Value {
    action_body(finish(&pagerduty::summary(notice), &marker(notice), MAX_NOTE_CHARS))
}

fn action_body(note: String) -> Value {
    json!({ "user": SOURCE, "source": SOURCE, "note": note })
}

/// The body of Update Alert Message: `{"message"}` ([`message`]).
pub fn update_message(notice: &Notice) -> Value {
    json!({ "message": message(notice) })
}

/// The body of Update Alert Description: `{"description"}` ([`description`]).
pub fn update_description(notice: &Notice) -> Value {
    json!({ "description": description(notice) })
}

/// The custom key-value map (`details`, `extraProperties`): strings only, the job,
/// finding, culprit, links and keys, each value cut so that keys and values stay within
/// [`MAX_DETAILS_CHARS`] in all (what does not fit is left out, in this order).
pub fn details(notice: &Notice) -> BTreeMap<String, String> {
    let job = notice.verdict.as_ref().map_or(&notice.job, |v| &v.job);
    let mut pairs: Vec<(&str, String)> = vec![("job", job.name.clone()), ("job_id", job.id.clone())];
    if let Some(v) = &notice.verdict {
        pairs.push(("finding", v.finding.as_str().into()));
        pairs.push(("status", v.status.as_str().into()));
        pairs.push(("confidence", v.confidence.as_str().into()));
        if let Some(c) = &v.culprit {
            pairs.push(("culprit", names::vertex_name(&c.vertex_name)));
        }
    }
    if let Some(url) = &notice.verdict_url {
        pairs.push(("verdict_url", url.clone()));
    }
    if notice.episode.revision > 0 {
        pairs.push(("revision", notice.episode.revision.to_string()));
    }
    pairs.push(("idempotency_key", notice.idempotency_key.clone()));
    pairs.push(("group_key", lead_group(notice).to_string()));
    // Many jobs share the cause: each job's alert says so.
    if let Some(tag) = &notice.incident {
        pairs.push((
            "shared_cause",
            format!("{} jobs held back by {}", tag.jobs, crate::render::incident::cause_phrase(&tag.cause)),
        ));
        pairs.push(("incident", tag.id.clone()));
    }
    if notice.episode.groups.len() > 1 {
        pairs.push(("alert_groups", notice.episode.groups.join(", ")));
    }
    let mut out = BTreeMap::new();
    let mut used = 0;
    for (k, v) in pairs {
        let v = names::clean(&v).into_owned();
        let left = MAX_DETAILS_CHARS.saturating_sub(used + k.len());
        if left == 0 || v.is_empty() {
            continue;
        }
        let v = cut(&v, left.min(1024));
        used += k.len() + v.chars().count();
        out.insert(k.to_string(), v);
    }
    out
}

/// The tags: `culprit`, `flink`, the finding, then the configured ones; each cleaned
/// and cut to [`MAX_TAG_CHARS`], at most [`MAX_TAGS`], none twice.
pub fn tags(notice: &Notice, extra: &[String]) -> Vec<String> {
    let mut all = vec!["culprit".to_string(), "flink".to_string()];
    if let Some(v) = &notice.verdict {
        all.push(v.finding.as_str().to_string());
    }
    all.extend(extra.iter().cloned());
    let mut out: Vec<String> = Vec::new();
    for t in all {
        let t = cut(names::clean(t.trim()).as_ref(), MAX_TAG_CHARS);
        if !t.is_empty() && !out.contains(&t) && out.len() < MAX_TAGS {
            out.push(t);
        }
    }
    out
}

/// The body of Create Alert (see the module docs for the shape).
pub fn create(notice: &Notice, options: &AlertOptions, flavor: Flavor) -> Value {
    let job = notice.verdict.as_ref().map_or(&notice.job, |v| &v.job);
    let mut alert = Map::new();
    alert.insert("message".into(), message(notice).into());
    alert.insert("alias".into(), alias(notice).into());
    alert.insert("description".into(), description(notice).into());
    let responders: Vec<Value> = options
        .responders
        .iter()
        .take(MAX_RESPONDERS)
        .map(|team| json!({ "name": cut(team, MAX_ENTITY_CHARS), "type": "team" }))
        .collect();
    if !responders.is_empty() {
        alert.insert("responders".into(), responders.into());
    }
    alert.insert("tags".into(), tags(notice, &options.tags).into());
    let key = match flavor {
        Flavor::Opsgenie => "details",
        Flavor::Jsm => "extraProperties",
    };
    alert.insert(key.into(), serde_json::to_value(details(notice)).expect("a map of strings serializes"));
    let entity = if job.name.is_empty() { &job.id } else { &job.name };
    if !entity.is_empty() {
        alert.insert("entity".into(), escape_cut(entity, MAX_ENTITY_CHARS).into());
    }
    alert.insert("source".into(), SOURCE.into());
    alert.insert("user".into(), SOURCE.into());
    alert.insert("priority".into(), options.priority.clone().into());
    Value::Object(alert)
}

/// Whether `notice` is one the alert shows: a verdict (opening or updating the alert) or
/// the job's resolution (closing it). Never "could not diagnose" (it would open an alert
/// about culprit's own trouble), nor the notices about one alert group among several
/// (the alert stands for the job's episode).
pub fn shown(notice: &Notice) -> bool {
    match notice.kind {
        NoticeKind::Verdict => notice.firing && notice.verdict.is_some(),
        NoticeKind::Resolved => true,
        // An incident's summary is for chat channels: each job's alert names the cause.
        NoticeKind::CouldNotDiagnose | NoticeKind::Joined | NoticeKind::GroupResolved | NoticeKind::Incident => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::notice::NoticeEpisode;

    fn notice(kind: NoticeKind) -> Notice {
        let capture = crate::samples::captures::CAPTURES.iter().find(|c| c.name == "slow-sink").unwrap();
        let verdict = crate::samples::captures::verdict(capture).unwrap();
        Notice {
            links: Default::default(),
            kind,
            group_key: "{}:{alertname=\"FlinkJobBackpressured\"}".into(),
            labels: Default::default(),
            job: verdict.job.clone(),
            verdict: (kind == NoticeKind::Verdict).then_some(verdict),
            verdict_id: Some(7),
            verdict_url: Some("https://culprit.example.com/api/v1/verdicts/7".into()),
            reason: None,
            firing: kind != NoticeKind::Resolved,
            changed: false,
            idempotency_key: "v7-opsgenie".into(),
            at_ms: 1_795_948_587_780,
            episode: Default::default(),
            maybe_repeat: false,
            incident: None,
            incident_view: None,
            incident_parent: None,
        }
    }

    fn options() -> AlertOptions {
        AlertOptions { priority: "P2".into(), responders: vec!["flink-oncall".into()], tags: vec!["prod".into()] }
    }

    #[test]
    fn the_create_body_for_the_slow_sink_verdict_matches_the_snapshot() {
        insta::assert_json_snapshot!(create(&notice(NoticeKind::Verdict), &options(), Flavor::Opsgenie));
    }

    #[test]
    fn the_jsm_create_body_differs_only_in_extra_properties() {
        let n = notice(NoticeKind::Verdict);
        let mut og = create(&n, &options(), Flavor::Opsgenie);
        let jsm = create(&n, &options(), Flavor::Jsm);
        let details = og.as_object_mut().unwrap().remove("details").unwrap();
        og["extraProperties"] = details;
        assert_eq!(og, jsm);
    }

    #[test]
    fn the_note_of_a_changed_verdict_and_the_close_match_the_snapshot() {
        let mut n = notice(NoticeKind::Verdict);
        n.changed = true;
        insta::assert_json_snapshot!("changed_note", note(&n));
        insta::assert_json_snapshot!("close", close(&notice(NoticeKind::Resolved)));
    }

    #[test]
    fn the_alias_is_alertmanagers_the_sha256_of_the_lead_group_key() {
        let mut n = notice(NoticeKind::Verdict);
        n.group_key = "abc".into();
        // sha256("abc"), the FIPS 180-2 test vector.
        assert_eq!(alias(&n), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        n.episode = NoticeEpisode { groups: vec!["abc".into(), "other".into()], ..Default::default() };
        assert_eq!(alias(&n), pagerduty::dedup_key("abc"));
    }

    #[test]
    fn markup_in_names_is_escaped_and_an_entity_is_never_cut_in_half() {
        assert_eq!(escape_cut("a<b>&\"c", 100), "a&lt;b&gt;&amp;&quot;c");
        // "ab" (2) + "&lt;" (4) = 6 > 5: the budget is 4 and "…" ends it.
        assert_eq!(escape_cut("ab<cd", 5), "ab…");
        assert_eq!(escape_cut("abc", 3), "abc");
    }

    #[test]
    fn every_field_is_cut_to_its_documented_limit() {
        let mut n = notice(NoticeKind::Verdict);
        let v = n.verdict.as_mut().unwrap();
        v.summary = "é<".repeat(10_000);
        v.cause = "c".repeat(20_000);
        n.job.name = "j".repeat(600);
        v.job.name = "j".repeat(600);
        let many: Vec<String> = (0..30).map(|i| format!("tag-{i}-{}", "t".repeat(60))).collect();
        let o = AlertOptions { tags: many, responders: vec!["r".into(); 60], ..options() };
        let a = create(&n, &o, Flavor::Opsgenie);
        assert_eq!(a["message"].as_str().unwrap().chars().count(), MAX_MESSAGE_CHARS);
        let d = a["description"].as_str().unwrap();
        assert!(
            d.chars().count() <= MAX_DESCRIPTION_CHARS && d.ends_with("culprit notice v7-opsgenie"),
            "{}",
            &d[..80]
        );
        assert!(a["entity"].as_str().unwrap().chars().count() <= MAX_ENTITY_CHARS);
        let tags = a["tags"].as_array().unwrap();
        assert_eq!(tags.len(), MAX_TAGS);
        assert!(tags.iter().all(|t| t.as_str().unwrap().chars().count() <= MAX_TAG_CHARS));
        assert_eq!(a["responders"].as_array().unwrap().len(), MAX_RESPONDERS);
        let total: usize =
            a["details"].as_object().unwrap().iter().map(|(k, v)| k.len() + v.as_str().unwrap().chars().count()).sum();
        assert!(total <= MAX_DETAILS_CHARS, "{total}");
    }

    #[test]
    fn a_possible_repeat_note_is_marked() {
        let mut n = notice(NoticeKind::Verdict);
        n.changed = true;
        n.maybe_repeat = true;
        assert!(note(&n)["note"].as_str().unwrap().starts_with(REPEAT_MARK));
    }

    #[test]
    fn could_not_diagnose_and_the_notices_about_one_group_are_never_shown() {
        assert!(shown(&notice(NoticeKind::Verdict)) && shown(&notice(NoticeKind::Resolved)));
        for k in [NoticeKind::CouldNotDiagnose, NoticeKind::Joined, NoticeKind::GroupResolved] {
            assert!(!shown(&notice(k)), "{k:?}");
        }
        let mut not_firing = notice(NoticeKind::Verdict);
        not_firing.firing = false;
        assert!(!shown(&not_firing));
    }
}
