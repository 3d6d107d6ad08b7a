//! The email of a [`Notice`]: subject, the threading headers and a multipart/alternative
//! body (a text part and the verdict page). Pure: the notifier
//! ([`crate::notify::email`]) hands it to SMTP as it is.
//!
//! * `Subject`: `[culprit] <job>: <culprit> (<finding>)` for a verdict (`changed:` when it
//!   replaces an earlier one), `[culprit] <job>: resolved`, `[culprit] <job>: could not
//!   diagnose`. Untrusted text (job and vertex names) is cleaned of every control character,
//!   CR and LF included, so it cannot start a header of its own; cut to
//!   [`MAX_SUBJECT_CHARS`].
//! * `Message-ID`: `<culprit.<first 32 hex of SHA-256(idempotency key)>@<domain>>`: a notice
//!   sent again has the same id, which mail systems and clients fold.
//! * `In-Reply-To` / `References`: the episode's earlier message (kept by the notifier in
//!   its state), else the id of the verdict's first post ([`NoticeEpisode::verdict_ref`]),
//!   so that a client threads updates and the resolution under the first message.
//! * The text part: the verbose terminal view ([`crate::render::text`], at [`TEXT_WIDTH`]
//!   columns) after a line naming the job and the link; the HTML part: the verdict page
//!   ([`crate::render::html::page`]) with the same lines at the top. A notice without a
//!   verdict has a short text and the same text as HTML.
//! * A possible repeat ([`Notice::maybe_repeat`]) starts both parts with [`REPEAT_MARK`].
//! * A verdict's picture ([`crate::render::png`]) goes inline (`Content-ID`
//!   [`PICTURE_CID`], the HTML part and the PNG in a `multipart/related`), shown by an
//!   `<img>` above the page: mail clients that draw no inline SVG still show the graph, and
//!   no public URL is needed.
//!
//! [`NoticeEpisode::verdict_ref`]: crate::model::notice::NoticeEpisode::verdict_ref

use sha2::{Digest, Sha256};

use crate::model::notice::{Notice, NoticeKind};
use crate::render::html::{self, escape};
use crate::render::names;
use crate::render::pagerduty::truncate;
use crate::render::text::{self, Options};

/// Longest subject, in characters. RFC 5322 section 2.1.1: "Each line of characters MUST
/// be no more than 998 characters, and SHOULD be no more than 78 characters"
/// (<https://www.rfc-editor.org/rfc/rfc5322#section-2.1.1>); a longer subject is folded
/// over lines by the encoder, and mail clients show about this much in a list.
pub const MAX_SUBJECT_CHARS: usize = 150;

/// Columns of the text part: RFC 5322's recommended 78 characters per line.
pub const TEXT_WIDTH: usize = 78;

/// The first line of a message sent again after an attempt whose outcome is unknown.
pub const REPEAT_MARK: &str = "possible repeat: an earlier delivery could not be confirmed";

/// The `Content-ID` of the verdict's picture, inline in the email (`cid:` in the HTML).
pub const PICTURE_CID: &str = "verdict-picture@culprit";

/// The email of one notice.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Email {
    pub subject: String,
    /// `<…@domain>`, with the angle brackets.
    pub message_id: String,
    /// The message this one answers (`In-Reply-To`), when it continues an episode.
    pub in_reply_to: Option<String>,
    /// The thread (`References`), first message first.
    pub references: Vec<String>,
    pub text: String,
    pub html: String,
    /// The verdict's picture (PNG) the HTML shows as `cid:`[`PICTURE_CID`], for a verdict.
    #[serde(skip)]
    pub picture: Option<Vec<u8>>,
}

/// The `Message-ID` of the message carrying the notice with `idempotency_key`, in `domain`
/// (the `from` address's).
pub fn message_id(idempotency_key: &str, domain: &str) -> String {
    let hash = hex::encode(Sha256::digest(idempotency_key.as_bytes()));
    format!("<culprit.{}@{}>", &hash[..32], domain)
}

/// What the notice's message answers: `previous` (the episode's last message id, kept by
/// the notifier) when there is one, else the first post of the verdict when this notice is
/// not that first post, else nothing.
pub fn reply_to(notice: &Notice, domain: &str, previous: Option<&str>) -> Option<String> {
    if let Some(p) = previous.filter(|p| !p.is_empty()) {
        return Some(p.to_string());
    }
    let first = &notice.episode.verdict_ref;
    (!first.is_empty() && first != &notice.idempotency_key).then(|| message_id(first, domain))
}

fn job_label(notice: &Notice) -> String {
    let job = notice.verdict.as_ref().map_or(&notice.job, |v| &v.job);
    let name = if !job.name.is_empty() {
        job.name.as_str()
    } else if !job.id.is_empty() {
        job.id.as_str()
    } else {
        "unknown job"
    };
    names::clean(name).into_owned()
}

/// The subject (see the module docs): one line, at most [`MAX_SUBJECT_CHARS`].
pub fn subject(notice: &Notice) -> String {
    let job = job_label(notice);
    let s = match (notice.kind, &notice.verdict) {
        (NoticeKind::Verdict, Some(v)) => {
            let what = match &v.culprit {
                Some(c) => format!("{} ({})", names::prose_name(&c.vertex_name), v.finding.as_str()),
                None => v.finding.as_str().replace('_', " "),
            };
            let changed = if notice.changed { "changed: " } else { "" };
            format!("[culprit] {job}: {changed}{what}")
        }
        (NoticeKind::Verdict, None) => format!("[culprit] {job}: no verdict"),
        (NoticeKind::Resolved, _) => format!("[culprit] {job}: resolved"),
        (NoticeKind::CouldNotDiagnose, _) => format!("[culprit] {job}: could not diagnose"),
        (NoticeKind::Joined, _) => format!("[culprit] {job}: another alert group carries the verdict"),
        (NoticeKind::GroupResolved, _) => format!("[culprit] {job}: an alert group resolved"),
        (NoticeKind::Incident, _) => "[culprit] jobs that share a cause".to_string(),
    };
    // Every control character (CR and LF included) out: no header of its own.
    let one_line = names::clean(&s).into_owned();
    truncate(&one_line, MAX_SUBJECT_CHARS).into_owned()
}

/// The lines above either part: the repeat mark, what the notice is, the links.
fn head_lines(notice: &Notice) -> Vec<String> {
    let mut lines = Vec::new();
    if notice.maybe_repeat {
        lines.push(REPEAT_MARK.to_string());
    }
    let job = job_label(notice);
    let line = match (notice.kind, &notice.verdict) {
        (NoticeKind::Verdict, Some(_)) if notice.changed => format!("The verdict for {job} changed."),
        (NoticeKind::Verdict, Some(_)) => format!("Verdict for {job}."),
        _ => crate::render::pagerduty::summary(notice),
    };
    lines.push(line);
    if let Some(url) = notice.verdict_url.as_deref() {
        lines.push(format!("Verdict: {}", names::clean(url)));
    }
    for (label, url) in notice.links.labelled() {
        lines.push(format!("{label}: {url}"));
    }
    lines
}

/// The email of `notice` from an address in `domain`, answering `previous` (the episode's
/// last message id, when known).
pub fn email(notice: &Notice, domain: &str, previous: Option<&str>) -> Email {
    let head = head_lines(notice);
    let mut text = head.join("\n");
    text.push_str("\n\n");
    let mut head_html = String::new();
    for (i, l) in head.iter().enumerate() {
        let l = escape(l);
        if notice.maybe_repeat && i == 0 {
            head_html.push_str(&format!("<p class=\"hazard\"><b>{l}</b></p>\n"));
        } else {
            head_html.push_str(&format!("<p class=\"meta\">{l}</p>\n"));
        }
    }
    let mut picture = None;
    let html = match (notice.kind, &notice.verdict) {
        (NoticeKind::Verdict, Some(v)) => {
            text.push_str(&text::render(v, &Options { width: TEXT_WIDTH, verbose: true }));
            // A picture that cannot be drawn leaves the page alone (its SVG is still there).
            picture = crate::render::png::png(v).ok();
            if picture.is_some() {
                head_html.push_str(&format!(
                    "<p><img src=\"cid:{PICTURE_CID}\" alt=\"{}\" width=\"400\"></p>\n",
                    escape(crate::render::png::ALT_TEXT)
                ));
            }
            // The page, with the head lines right after <body>.
            let page = html::page(v);
            match page.find("<body>\n") {
                Some(at) => {
                    let at = at + "<body>\n".len();
                    format!("{}{head_html}{}", &page[..at], &page[at..])
                }
                None => page,
            }
        }
        _ => {
            if let Some(labels) = labels_line(notice) {
                text.push_str(&labels);
                text.push('\n');
                head_html.push_str(&format!("<p class=\"meta\">{}</p>\n", escape(&labels)));
            }
            format!(
                "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>{}</style></head><body>\n{head_html}</body></html>\n",
                escape(&subject(notice)),
                html::CSS
            )
        }
    };
    let message_id = message_id(&notice.idempotency_key, domain);
    let in_reply_to = reply_to(notice, domain, previous);
    let mut references = Vec::new();
    let first = &notice.episode.verdict_ref;
    if !first.is_empty() && first != &notice.idempotency_key {
        references.push(self::message_id(first, domain));
    }
    if let Some(r) = &in_reply_to
        && !references.contains(r)
    {
        references.push(r.clone());
    }
    Email { subject: subject(notice), message_id, in_reply_to, references, text, html, picture }
}

/// The email of an incident's summary (`shown` 0) or of a digest of its jobs after the
/// first `shown` ([`crate::notify::digest`]), answering `previous` (the summary's thread)
/// so that a mail client keeps the incident in one thread.
pub fn incident_email(
    notice: &Notice,
    incident: &crate::model::incident::Incident,
    shown: usize,
    domain: &str,
    previous: Option<&str>,
) -> Email {
    let clean = |t: &str| names::clean(t).into_owned();
    let range = (shown, incident.members.len());
    let d = crate::render::incident::digest(incident, range, &|t| format!("`{}`", clean(t)), &clean);
    let mut text = format!("{}.\n{}\n\nJobs: {}\n", d.title, d.when, d.jobs);
    let mut body = format!(
        "<h1>{}</h1>\n<p class=\"meta\">{}</p>\n<p><b>Jobs:</b> {}</p>\n",
        escape(&d.title),
        escape(&d.when),
        escape(&d.jobs)
    );
    if let Some(o) = &d.others {
        text.push_str(&format!("Not part of it: {o}\n"));
        body.push_str(&format!("<p><b>Not part of it:</b> {}</p>\n", escape(o)));
    }
    let subject = truncate(&clean(&format!("[culprit] {}", d.title)), MAX_SUBJECT_CHARS).into_owned();
    let html = format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>{}</style></head><body>\n{body}</body></html>\n",
        escape(&subject),
        html::CSS
    );
    let in_reply_to = previous.filter(|p| !p.is_empty()).map(str::to_string);
    Email {
        subject,
        message_id: message_id(&notice.idempotency_key, domain),
        references: in_reply_to.iter().cloned().collect(),
        in_reply_to,
        text,
        html,
        picture: None,
    }
}

/// The group's labels, `k=v` joined, cleaned; `None` without labels.
fn labels_line(notice: &Notice) -> Option<String> {
    if notice.labels.is_empty() {
        return None;
    }
    let l: Vec<String> = notice.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    Some(names::clean(&format!("Labels: {}", l.join(", "))).into_owned())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::model::notice::NoticeEpisode;
    use crate::model::verdict::{JobRef, Verdict};

    fn demo(name: &str) -> Verdict {
        let capture = crate::samples::captures::CAPTURES.iter().find(|c| c.name == name).expect("a bundled capture");
        crate::samples::captures::verdict(capture).expect("the capture diagnoses")
    }

    fn notice(kind: NoticeKind, verdict: Option<Verdict>) -> Notice {
        let job = verdict
            .as_ref()
            .map(|v| v.job.clone())
            .unwrap_or(JobRef { name: "slow-sink".into(), id: "da23ad9af4e7326542c9a70eac958f42".into() });
        Notice {
            links: Default::default(),
            kind,
            group_key: "{}:{alertname=\"FlinkBackpressure\"}".into(),
            labels: BTreeMap::from([("alertname".to_string(), "FlinkBackpressure".to_string())]),
            job,
            verdict,
            verdict_id: Some(42),
            verdict_url: Some("https://culprit.example.com/api/v1/verdicts/42".into()),
            reason: None,
            firing: kind != NoticeKind::Resolved,
            changed: false,
            idempotency_key: "email:ops:group:1".into(),
            at_ms: 1_795_000_000_000,
            episode: NoticeEpisode {
                thread: "t".into(),
                groups: vec![],
                revision: 0,
                verdict_ref: "email:ops:group:1".into(),
            },
            maybe_repeat: false,
            incident: None,
            incident_view: None,
            incident_parent: None,
        }
    }

    #[test]
    fn a_first_sink_verdict_renders_as_snapshot() {
        let e = email(&notice(NoticeKind::Verdict, Some(demo("slow-sink"))), "example.com", None);
        assert!(e.in_reply_to.is_none() && e.references.is_empty(), "a first post answers nothing");
        assert!(e.html.contains("<svg"), "the HTML part is the verdict page");
        insta::assert_snapshot!("slow_sink_subject", e.subject);
        insta::assert_snapshot!("slow_sink_text", e.text);
        insta::assert_snapshot!("slow_sink_message_id", e.message_id);
    }

    #[test]
    fn the_message_id_is_the_same_for_a_repeat_and_differs_per_notice() {
        assert_eq!(message_id("k1", "example.com"), message_id("k1", "example.com"));
        assert_ne!(message_id("k1", "example.com"), message_id("k2", "example.com"));
        // "<culprit." + 32 hex + "@example.com>": 9 + 32 + 13 = 54.
        assert_eq!(message_id("k1", "example.com").len(), 54);
    }

    #[test]
    fn an_update_answers_the_episodes_last_message_and_references_the_first() {
        let mut n = notice(NoticeKind::Verdict, Some(demo("slow-sink")));
        n.idempotency_key = "email:ops:group:2".into();
        n.changed = true;
        let e = email(&n, "example.com", None);
        let first = message_id("email:ops:group:1", "example.com");
        assert_eq!(e.in_reply_to.as_deref(), Some(first.as_str()));
        assert_eq!(e.references, std::slice::from_ref(&first));
        assert!(e.subject.contains("changed: "), "{}", e.subject);
        let e = email(&n, "example.com", Some("<last@example.com>"));
        assert_eq!(e.in_reply_to.as_deref(), Some("<last@example.com>"));
        assert_eq!(e.references, [first, "<last@example.com>".to_string()]);
    }

    #[test]
    fn a_job_name_with_cr_lf_cannot_start_a_header_and_the_subject_is_cut() {
        let mut n = notice(NoticeKind::Resolved, None);
        n.job.name = format!("evil\r\nBcc: victim@example.com\r\n{}", "x".repeat(400));
        let s = subject(&n);
        assert!(!s.contains('\r') && !s.contains('\n'), "{s:?}");
        assert_eq!(s.chars().count(), MAX_SUBJECT_CHARS);
        assert!(s.ends_with('…'));
    }

    #[test]
    fn a_possible_repeat_is_marked_in_both_parts_and_keeps_its_message_id() {
        let mut n = notice(NoticeKind::Verdict, Some(demo("slow-sink")));
        let plain = email(&n, "example.com", None);
        n.maybe_repeat = true;
        let e = email(&n, "example.com", None);
        assert!(e.text.starts_with(REPEAT_MARK), "{}", e.text);
        assert!(e.html.contains(REPEAT_MARK));
        assert_eq!(e.message_id, plain.message_id);
        assert!(!plain.text.contains(REPEAT_MARK));
    }

    #[test]
    fn a_resolution_is_short_and_escapes_labels_in_html() {
        let mut n = notice(NoticeKind::Resolved, None);
        n.idempotency_key = "email:ops:group:resolved".into();
        n.labels.insert("team".into(), "<script>x</script>".into());
        let e = email(&n, "example.com", Some("<first@example.com>"));
        insta::assert_snapshot!("resolved_text", e.text);
        assert!(e.html.contains("&lt;script&gt;") && !e.html.contains("<script>"), "{}", e.html);
        assert_eq!(e.in_reply_to.as_deref(), Some("<first@example.com>"));
    }
}
