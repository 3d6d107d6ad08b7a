//! Markdown: for tickets, chat tools that render Markdown, and bug reports.
//!
//! Every string that came from the job (names, label values) is escaped so it cannot
//! break the table or inject markup.

use std::fmt::Write as _;

use crate::model::verdict::{Verdict, VertexState};

/// Escapes Markdown metacharacters and table pipes; newlines become spaces.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' | '`' | '*' | '_' | '[' | ']' | '<' | '>' | '|' | '#' => {
                out.push('\\');
                out.push(c);
            }
            '\n' | '\r' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

fn pct(v: Option<f64>) -> String {
    v.map(|r| format!("{:.0}%", r * 100.0)).unwrap_or_else(|| "?".into())
}

/// Renders the verdict as Markdown.
pub fn render(v: &Verdict) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "## {} — {}", escape(&v.job.name), v.status.as_str().replace('_', " "));
    let _ = writeln!(
        s,
        "\n**{}**\n\nFinding `{}` · confidence {} · at {} · window {} s · job id `{}`",
        escape(&v.summary),
        v.finding.as_str(),
        v.confidence.as_str(),
        v.at,
        v.window_seconds,
        v.job.id
    );
    if !v.hazards.is_empty() {
        s.push_str("\n### Hazards\n\n");
        for h in &v.hazards {
            let sev = format!("{:?}", h.severity).to_lowercase();
            let _ = writeln!(s, "- **{sev}**: {}", escape(&h.detail));
        }
    }
    s.push_str(if v.graph.from_plan {
        "\n### Job graph\n"
    } else {
        "\n### Vertices (no job graph: order and edges unknown)\n"
    });
    s.push_str("\n| vertex | parallelism | busy max | backpressured max | state |\n|---|---:|---:|---:|---|\n");
    for vertex in &v.graph.vertices {
        let state = match vertex.state {
            VertexState::Culprit => "**culprit**",
            VertexState::Backpressured => "backpressured",
            VertexState::Ok => "ok",
            VertexState::Unknown => "unknown",
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {state} |",
            escape(&vertex.name),
            vertex.parallelism,
            pct(vertex.busy_max),
            pct(vertex.backpressured_max)
        );
    }
    if !v.cause.is_empty() {
        let _ = writeln!(s, "\n### Cause\n\n{}", escape(&v.cause));
    }
    let list = |s: &mut String, title: &str, items: &[String], numbered: bool| {
        if items.is_empty() {
            return;
        }
        let _ = writeln!(s, "\n### {title}\n");
        for (i, item) in items.iter().enumerate() {
            if numbered {
                let _ = writeln!(s, "{}. {}", i + 1, escape(item));
            } else {
                let _ = writeln!(s, "- {}", escape(item));
            }
        }
    };
    list(&mut s, "Fix", &v.fix, true);
    list(&mut s, "Not the fix", &v.not_the_fix, false);
    list(&mut s, "Also", &v.advice, false);
    s.push_str("\n### Steps\n\n| step | outcome | detail |\n|---|---|---|\n");
    for step in &v.steps {
        let _ = writeln!(s, "| {} | {} | {} |", step.step.as_str(), step.outcome.as_str(), escape(&step.detail));
    }
    list(&mut s, "Missing", &v.missing, false);
    list(&mut s, "Notes", &v.notes, false);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_in_names_is_escaped() {
        assert_eq!(escape("a|b *c* <x> `y`\nz"), "a\\|b \\*c\\* \\<x\\> \\`y\\` z");
    }
}
