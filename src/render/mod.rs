//! Pure renderers of a [`Verdict`]: JSON, a terminal view, Markdown.

pub mod alertmanager;
pub mod markdown;
pub mod pagerduty;
pub mod slack;
pub mod text;

use crate::model::verdict::Verdict;

/// Output formats of the CLI and the HTTP API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Json,
    Text,
    Markdown,
}

/// Renders a verdict in a format.
pub fn render(verdict: &Verdict, format: Format) -> String {
    match format {
        Format::Json => json(verdict),
        Format::Text => text::render(verdict),
        Format::Markdown => markdown::render(verdict),
    }
}

/// The verdict as pretty JSON (`culprit.verdict/v1`), ending with a newline.
pub fn json(verdict: &Verdict) -> String {
    let mut s = serde_json::to_string_pretty(verdict).expect("a verdict always serializes");
    s.push('\n');
    s
}
