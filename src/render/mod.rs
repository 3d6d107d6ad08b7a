//! Pure renderers of a [`Verdict`]: JSON, a terminal view, Markdown, and the payloads of
//! Slack, PagerDuty, Opsgenie (and JSM Operations) and Alertmanager.
//!
//! Every rendering leads with the answer (the culprit, why, the first step of the fix),
//! then the fix, then the evidence; the runbook's steps and the queueing theory go to the
//! verbose view, the Slack thread and the JSON. Names come in their short forms
//! ([`names`]); every string from outside is cleaned of control characters and escaped
//! for where it goes.

pub mod alertmanager;
pub mod discord;
pub mod email;
pub mod google_chat;
pub mod grafana;
pub mod history;
pub mod html;
pub mod incident;
pub mod layout;
pub mod markdown;
pub mod mattermost;
pub mod names;
pub mod opsgenie;
pub mod pagerduty;
pub mod plot;
pub mod png;
pub mod slack;
pub mod teams;
pub mod text;
pub mod words;

pub use text::Options;

use crate::model::verdict::Verdict;

/// Output formats of the CLI and the HTTP API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Json,
    Text,
    Markdown,
    /// The verdict page: self-contained HTML with the job graph and plots as inline SVG.
    Html,
}

/// Renders a verdict in a format, the default view at the default width.
pub fn render(verdict: &Verdict, format: Format) -> String {
    render_with(verdict, format, &Options::default())
}

/// Renders a verdict in a format with the given width and verbosity (JSON ignores both).
pub fn render_with(verdict: &Verdict, format: Format, options: &Options) -> String {
    match format {
        Format::Json => json(verdict),
        Format::Text => text::render(verdict, options),
        Format::Markdown => markdown::render(verdict, options.verbose),
        Format::Html => html::page(verdict),
    }
}

/// The verdict as pretty JSON (`culprit.verdict/v1`), ending with a newline.
pub fn json(verdict: &Verdict) -> String {
    let mut s = serde_json::to_string_pretty(verdict).expect("a verdict always serializes");
    s.push('\n');
    s
}

/// A time (Unix ms) as `HH:MM UTC`, as posts say when what they update was posted.
pub fn hh_mm(at_ms: i64) -> String {
    jiff::Timestamp::from_millisecond(at_ms)
        .map(|t| t.strftime("%H:%M UTC").to_string())
        .unwrap_or_else(|_| "an earlier time".to_string())
}
