//! A notice: one thing to tell one destination about one Alertmanager group.
//!
//! Planned by [`crate::service`], rendered by [`crate::render`] and sent by
//! [`crate::notify`]; it lives here, below all three, so the renderers do not depend on
//! the layer that sends what they render. Pure data.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model::verdict::{JobRef, Verdict};

/// What a notice says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NoticeKind {
    /// A verdict for the group (first, or changed).
    Verdict,
    /// The group resolved.
    Resolved,
    /// The diagnosis failed for longer than the retry window; `reason` says why.
    CouldNotDiagnose,
    /// Another alert group (`group_key`) now carries the job's verdict, which the
    /// destination already shows: the group is tied to it (Slack: a short reply in its
    /// thread), never a second verdict.
    Joined,
    /// An alert group (`group_key`) that carried the job's verdict resolved while others
    /// (`episode.groups`) still fire: the shared verdict stays open.
    GroupResolved,
    /// The summary of an incident (`incident`): many jobs whose culprits share a cause.
    /// The first at a destination posts it; later ones (one per job joining) show it as it
    /// is at delivery ([`Notice::incident_view`]), in place where the destination can.
    Incident,
}

/// One thing to tell one destination about one Alertmanager group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Notice {
    pub kind: NoticeKind,
    /// Alertmanager's `groupKey` of the webhook.
    pub group_key: String,
    /// The group's common labels (untrusted: escape before display).
    pub labels: BTreeMap<String, String>,
    /// The job the notice is about.
    pub job: JobRef,
    /// The verdict, for [`NoticeKind::Verdict`].
    pub verdict: Option<Verdict>,
    /// Stored verdict id, for links.
    pub verdict_id: Option<i64>,
    /// A link to the verdict (`{external_url}/api/v1/verdicts/{id}`), when configured.
    pub verdict_url: Option<String>,
    /// Why there is no verdict, for [`NoticeKind::CouldNotDiagnose`].
    pub reason: Option<String>,
    /// True when the group still fires.
    pub firing: bool,
    /// True when this verdict replaces an earlier, different one for the group.
    pub changed: bool,
    /// Unique per (destination, group, verdict): what makes a delivery idempotent.
    pub idempotency_key: String,
    /// When the notice was made, Unix ms.
    pub at_ms: i64,
    /// The links the alert source gave (Grafana's silence, dashboard and panel links):
    /// http(s) only, untrusted (escape before display).
    #[serde(default, skip_serializing_if = "AlertLinks::is_empty")]
    pub links: AlertLinks,
    /// The job's episode at this destination the notice belongs to (empty for notices
    /// stored before episodes: they are delivered under their group).
    #[serde(default, skip_serializing_if = "NoticeEpisode::is_empty")]
    pub episode: NoticeEpisode,
    /// Set by the delivery loop, never stored: an earlier attempt at this notice may have
    /// arrived (culprit died or the request timed out mid-send) and the destination could
    /// not say whether it did. A destination that cannot fold a repeat by a key of its own
    /// marks the message as a possible repeat, so that a second copy is never unmarked.
    #[serde(skip)]
    pub maybe_repeat: bool,
    /// The incident the notice's job is counted in, for a verdict, and the incident a
    /// summary ([`NoticeKind::Incident`]) is of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incident: Option<NoticeIncident>,
    /// Set by the delivery loop, never stored: the incident as the store shows it at
    /// delivery (every job counted so far), for a summary.
    #[serde(skip)]
    pub incident_view: Option<crate::model::incident::Incident>,
    /// Set by the delivery loop, never stored: the destination's state of the incident's
    /// summary (a Slack message), for a verdict that goes into its thread.
    #[serde(skip)]
    pub incident_parent: Option<serde_json::Value>,
}

/// The incident a notice belongs to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NoticeIncident {
    /// [`crate::model::incident::Incident::id`].
    pub id: String,
    /// The key the incident's summary is delivered and kept under.
    pub thread: String,
    /// What the jobs share.
    pub cause: crate::model::incident::Cause,
    /// Jobs counted when the notice was planned (the summary shows those at delivery).
    pub jobs: usize,
    /// For a verdict: its destination shows the incident's summary, so the verdict goes
    /// into the summary's thread.
    #[serde(default)]
    pub summary_here: bool,
}

/// What ties a notice to its job's episode at one destination: one verdict per job per
/// destination, however many alert groups carry it.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct NoticeEpisode {
    /// The key the episode's notices are delivered in order under and the destination's
    /// state (the Slack message) is kept under.
    #[serde(default)]
    pub thread: String,
    /// The alert groups that carry the verdict and still fire, the notice's `group_key`
    /// (the episode's lead group) first.
    #[serde(default)]
    pub groups: Vec<String>,
    /// 0 for a verdict's first post; 1, 2, … for each later one with the same decision
    /// (culprit, finding, status, hazards) and other confidence or numbers, shown in place.
    #[serde(default)]
    pub revision: u32,
    /// The idempotency key of the verdict's first post (revision 0): the same for every
    /// revision of it, so a receiver keeps the latest revision per verdict.
    #[serde(default)]
    pub verdict_ref: String,
}

impl NoticeEpisode {
    pub fn is_empty(&self) -> bool {
        self == &NoticeEpisode::default()
    }
}

/// The link to a verdict's picture from the signed link to its page
/// (`…/verdicts/{id}?expires=…&sig=…`, [`crate::service::links::signed_url`]): the same
/// query string opens `…/verdicts/{id}.png`. `None` for any other link (the API's URL,
/// which a browser or a chat service cannot open without credentials).
pub fn picture_link(page_url: &str) -> Option<String> {
    let (path, query) = page_url.split_once('?')?;
    let id = path.rsplit_once("/verdicts/")?.1;
    let signed = query.split('&').any(|kv| kv.starts_with("sig="));
    (signed && !path.contains("/api/") && !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()))
        .then(|| format!("{path}.png?{query}"))
}

impl Notice {
    /// The link to the verdict's picture ([`picture_link`]), when the notice links the
    /// verdict's signed page.
    pub fn picture_url(&self) -> Option<String> {
        self.verdict.as_ref()?;
        picture_link(self.verdict_url.as_deref()?)
    }

    /// [`Self::picture_url`] when it is HTTPS: what a service fetching the image itself
    /// (PagerDuty, Slack's image block, Teams, Discord) is given.
    pub fn picture_https(&self) -> Option<String> {
        self.picture_url().filter(|u| u.to_ascii_lowercase().starts_with("https://"))
    }

    /// The key the notice is delivered and its destination state kept under: its episode's
    /// thread, else (a notice stored before episodes) its group.
    pub fn thread_key(&self) -> &str {
        if self.episode.thread.is_empty() { &self.group_key } else { &self.episode.thread }
    }

    /// Whether the notice shows a verdict again in place (same decision, new confidence or
    /// numbers): no new post where the destination can update one.
    pub fn is_revision(&self) -> bool {
        self.kind == NoticeKind::Verdict && !self.changed && self.episode.revision > 0
    }
}

/// The links an alert source sends with an alert (Grafana Alerting's `silenceURL`,
/// `dashboardURL`, `panelURL`), kept with the group and shown beside culprit's own.
/// Only absolute `http`/`https` URLs are kept ([`AlertLinks::keep`]); the values are the
/// sender's, untrusted: each renderer escapes them for its medium.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AlertLinks {
    /// A page that silences the alert.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub silence: Option<String>,
    /// The dashboard the alert rule belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dashboard: Option<String>,
    /// The panel the alert rule belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub panel: Option<String>,
}

/// Longest link kept: a longer one is the sender's mistake or an attack, and would not
/// fit a Slack button (3,000 characters, <https://api.slack.com/reference/block-kit/block-elements#button>).
pub const MAX_LINK_BYTES: usize = 2000;

impl AlertLinks {
    /// Whether no link is kept.
    pub fn is_empty(&self) -> bool {
        self.silence.is_none() && self.dashboard.is_none() && self.panel.is_none()
    }

    /// `url` when it is an absolute http(s) URL of at most [`MAX_LINK_BYTES`] with a host,
    /// no credentials (`user:pass@`) and nothing a destination cannot show as a link:
    /// whitespace, control and bidirectional-control characters (U+061C, U+200E, U+200F,
    /// U+202A–U+202E, U+2066–U+2069, which reorder what the reader sees) and `<`, `>`, `|`
    /// (which end a Slack link). `None` otherwise (empty, `javascript:`, relative, …). The
    /// scheme is given in lower case. The one filter of every destination's alert links.
    pub fn keep(url: &str) -> Option<String> {
        let url = url.trim();
        let unsafe_char = |c: char| {
            c.is_whitespace()
                || c.is_control()
                || matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
                || matches!(c, '<' | '>' | '|')
        };
        if url.is_empty() || url.len() > MAX_LINK_BYTES || url.chars().any(unsafe_char) {
            return None;
        }
        let lower = url.get(..8).unwrap_or(url).to_ascii_lowercase();
        let (scheme, rest) = if lower.starts_with("https://") {
            ("https://", &url[8..])
        } else if lower.starts_with("http://") {
            ("http://", &url[7..])
        } else {
            return None;
        };
        // The authority ends where the path, query or fragment begins; an `@` in it means
        // credentials, which must not be forwarded (a backslash does not end it here:
        // browsers read it as a slash, other parsers do not, so `g\@host` is refused too).
        let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
        (!authority.is_empty() && !authority.contains('@')).then(|| format!("{scheme}{rest}"))
    }

    /// The links [`AlertLinks::keep`] keeps (links stored before it refused more are
    /// dropped here): what a destination forwards.
    pub fn kept(&self) -> AlertLinks {
        let keep = |u: &Option<String>| u.as_deref().and_then(Self::keep);
        AlertLinks { silence: keep(&self.silence), dashboard: keep(&self.dashboard), panel: keep(&self.panel) }
    }

    /// The links, labelled, in the order they are shown: (label, url).
    pub fn labelled(&self) -> Vec<(&'static str, &str)> {
        [("Silence", &self.silence), ("Dashboard", &self.dashboard), ("Panel", &self.panel)]
            .into_iter()
            .filter_map(|(label, url)| url.as_deref().map(|u| (label, u)))
            .filter(|(_, u)| Self::keep(u).is_some())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_absolute_http_and_https_links_are_kept() {
        assert_eq!(
            AlertLinks::keep(" https://grafana.example.com/d/x?orgId=1 ").as_deref(),
            Some("https://grafana.example.com/d/x?orgId=1")
        );
        // The scheme in lower case (RFC 3986 3.1: the same URL), so every destination links it.
        assert_eq!(AlertLinks::keep("HTTP://g:3000/a").as_deref(), Some("http://g:3000/a"));
        assert_eq!(AlertLinks::keep("HTTPS://g/A?B").as_deref(), Some("https://g/A?B"));
        // An `@` after the authority is not a credential.
        assert_eq!(AlertLinks::keep("https://g/d/x?by=a@b").as_deref(), Some("https://g/d/x?by=a@b"));
        for bad in [
            "",
            "javascript:alert(1)",
            "/alerting/silence/new",
            "https://",
            "ftp://g/x",
            "https://g/a b",
            "https://g/\u{7}",
            "data:text/html,x",
            "https://user:pass@grafana.example.com/d/x",
            "HTTPS://admin@grafana.example.com/",
            "https://:glsa_SECRET@g/",
            "https://g\\@evil.example.com/",
            "https://g/d/x?a=<b>",
            "https://g/d/x|label",
            "https://g/d/\u{202E}gnp.exe",
            "https://g/\u{2066}x\u{2069}",
            "https://g/\u{202A}",
            "https://g/\u{200F}",
        ] {
            assert_eq!(AlertLinks::keep(bad), None, "{bad}");
        }
        assert_eq!(AlertLinks::keep(&format!("https://g/{}", "a".repeat(MAX_LINK_BYTES))), None);
    }

    #[test]
    fn links_stored_before_the_filter_refused_them_are_not_forwarded() {
        let links = AlertLinks {
            silence: Some("https://user:pass@g/alerting/silence/new".into()),
            dashboard: Some("https://g/d/x".into()),
            panel: Some("https://g/d/x\u{202E}".into()),
        };
        assert_eq!(links.kept(), AlertLinks { dashboard: Some("https://g/d/x".into()), ..Default::default() });
        assert_eq!(links.labelled(), [("Dashboard", "https://g/d/x")]);
    }
}
