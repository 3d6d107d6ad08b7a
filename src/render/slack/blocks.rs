//! Block Kit blocks (header, section, fields, context, actions) with each text cut to
//! its limit, lists cut with "… n more", and the verdict link or button.

use serde_json::{Value, json};

use super::escaping::{clip, code, escape, slack_len};
use super::{Budget, ELLIPSIS, MAX_BLOCKS, MAX_BUTTON_URL, MAX_CONTEXT_ELEMENTS, MAX_FIELD_TEXT, MAX_FIELDS};
use super::{MAX_HEADER_TEXT, MAX_SECTION_TEXT, MAX_TEXT_OBJECT};
use crate::model::notice::Notice;
use crate::render::names;

pub(super) fn mrkdwn_object(text: &str, max: usize) -> Value {
    json!({ "type": "mrkdwn", "text": clip(text, max), "verbatim": true })
}

pub(super) fn header(text: &str) -> Value {
    json!({
        "type": "header",
        "text": { "type": "plain_text", "text": clip(text, MAX_HEADER_TEXT), "emoji": true }
    })
}

pub(super) fn section(text: &str, max: usize) -> Value {
    json!({ "type": "section", "text": mrkdwn_object(text, max.min(MAX_SECTION_TEXT)) })
}

pub(super) fn fields(items: Vec<String>, max: usize) -> Value {
    let fields: Vec<Value> = items.iter().take(MAX_FIELDS).map(|f| mrkdwn_object(f, max.min(MAX_FIELD_TEXT))).collect();
    json!({ "type": "section", "fields": fields })
}

pub(super) fn context(items: Vec<String>, max: usize) -> Value {
    let elements: Vec<Value> =
        items.iter().take(MAX_CONTEXT_ELEMENTS).map(|t| mrkdwn_object(t, max.min(MAX_TEXT_OBJECT))).collect();
    json!({ "type": "context", "elements": elements })
}

/// `title` and the lines under it, cut to `max` with `… n more in the verdict` when not
/// all lines fit.
pub(super) fn list_text(title: &str, lines: &[String], max: usize) -> String {
    let mut text = title.to_string();
    for (i, line) in lines.iter().enumerate() {
        let more = format!("\n{ELLIPSIS} {} more in the verdict", lines.len() - i);
        let room = max.saturating_sub(slack_len(&text) + 1 + slack_len(&more));
        if slack_len(line) > room && i > 0 {
            text.push_str(&more);
            return text;
        }
        text.push('\n');
        text.push_str(&clip(line, room.max(20)));
    }
    clip(&text, max)
}

/// Keeps at most [`MAX_BLOCKS`] blocks; the last kept says that some were left out.
pub(super) fn within_block_limit(mut blocks: Vec<Value>) -> Vec<Value> {
    if blocks.len() > MAX_BLOCKS {
        let left_out = blocks.len() - (MAX_BLOCKS - 1);
        blocks.truncate(MAX_BLOCKS - 1);
        blocks.push(context(vec![format!("{ELLIPSIS} {left_out} more blocks left out")], MAX_TEXT_OBJECT));
    }
    blocks
}

/// `<url|label>` when the URL is a plain http(s) URL; otherwise the escaped URL as text
/// (never a link).
pub(super) fn link(url: &str, label: &str) -> String {
    if linkable(url) { format!("<{}|{label}>", escape(url)) } else { code(&names::clean(url)) }
}

/// True for a URL Slack can link to: plain http(s), nothing that could break out of a link.
pub(super) fn linkable(url: &str) -> bool {
    let scheme = url.get(..8).unwrap_or(url).to_ascii_lowercase();
    (scheme.starts_with("https://") || scheme.starts_with("http://"))
        && !url.chars().any(|c| c.is_whitespace() || names::is_unsafe(c) || matches!(c, '<' | '>' | '|'))
}

/// Longest alert link (Grafana's silence, dashboard, panel) written into text: a longer
/// one is a button only, so that it cannot crowd out the message.
const MAX_TEXT_LINK_URL: usize = 500;

/// The buttons of a notice (an `actions` block): "Open verdict" when the notice links to a
/// verdict page Slack can open, then the alert source's links (Grafana's "Silence",
/// "Dashboard", "Panel"); a verdict link Slack cannot open is shown in a `context` block
/// instead ([`verdict_link`]).
pub(super) fn view_block(n: &Notice) -> Vec<Value> {
    let button = |label: &str, url: &str, action: &str| {
        json!({
            "type": "button",
            "text": { "type": "plain_text", "text": label, "emoji": false },
            "url": url,
            "action_id": action,
        })
    };
    let fits = |url: &str| linkable(url) && slack_len(url) <= MAX_BUTTON_URL;
    let mut blocks = Vec::new();
    let mut buttons = Vec::new();
    if let Some(url) = n.verdict_url.as_deref() {
        if fits(url) {
            buttons.push(button("Open verdict", url, "view_verdict"));
        } else {
            blocks.extend(verdict_link(n).map(|l| context(vec![l], Budget::LINK)));
        }
    }
    for (label, url) in n.links.labelled().into_iter().filter(|(_, u)| fits(u)) {
        buttons.push(button(label, url, &format!("alert_{}", label.to_ascii_lowercase())));
    }
    if !buttons.is_empty() {
        blocks.push(json!({ "type": "actions", "elements": buttons }));
    }
    blocks
}

/// The links line: the verdict (`Verdict #42`), then the alert source's links Slack can
/// open (`Silence`, `Dashboard`, `Panel`), each `<url|label>`; `None` when there is none.
pub(super) fn verdict_link(n: &Notice) -> Option<String> {
    let mut links = Vec::new();
    if let Some(url) = n.verdict_url.as_deref() {
        let label = match n.verdict_id {
            Some(id) => format!("Verdict #{id}"),
            None => "The verdict".to_string(),
        };
        links.push(link(url, &label));
    }
    for (label, url) in n.links.labelled() {
        if linkable(url) && slack_len(url) <= MAX_TEXT_LINK_URL {
            links.push(link(url, label));
        }
    }
    (!links.is_empty()).then(|| format!(":link: {}", links.join(" · ")))
}
