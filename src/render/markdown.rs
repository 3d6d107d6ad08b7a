//! Markdown: for tickets, chat tools that render Markdown, and bug reports.
//!
//! Like the terminal view it leads with the answer, then the fix, then the evidence (a
//! table of the vertices); the cause, every number, the runbook's steps, what was missing
//! and the notes come with `verbose`. Every string that came from the job (names, label
//! values) is cleaned of control characters and escaped so it cannot break the table or
//! inject markup; table cells are cut with `…`.

use std::fmt::Write as _;

use crate::model::verdict::{Severity, Verdict, VertexState};
use crate::render::names::{self, Names, clip};

/// Widest vertex name in a table cell, columns.
pub const MAX_CELL_NAME: usize = 60;

/// Escapes Markdown metacharacters and table pipes; newlines become spaces, control
/// characters `�`.
pub fn escape(s: &str) -> String {
    let s = names::clean(s);
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' | '`' | '*' | '_' | '~' | '[' | ']' | '<' | '>' | '|' | '#' => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

fn pct(v: Option<f64>) -> String {
    v.map(|r| format!("{:.0}%", r * 100.0)).unwrap_or_else(|| "unknown".into())
}

fn list(s: &mut String, title: &str, items: &[String], names: &Names, numbered: bool) {
    if items.is_empty() {
        return;
    }
    let _ = writeln!(s, "\n#### {title}\n");
    for (i, item) in items.iter().enumerate() {
        let item = escape(&names.text(item));
        if numbered {
            let _ = writeln!(s, "{}. {item}", i + 1);
        } else {
            let _ = writeln!(s, "- {item}");
        }
    }
}

fn evidence(s: &mut String, v: &Verdict, names: &Names) {
    if v.graph.vertices.is_empty() {
        return;
    }
    let order = if v.graph.from_plan { "sources first" } else { "no job graph: order and edges unknown" };
    let _ = writeln!(
        s,
        "\n#### Evidence\n\nJob {} · {} s to {} · confidence {} · finding `{}` · vertices {order}\n",
        escape(&v.job.name),
        v.window_seconds,
        escape(&v.at),
        v.confidence.as_str(),
        v.finding.as_str()
    );
    if let Some(c) = &v.culprit {
        let flink = names::vertex_name(&c.vertex_name);
        if flink != names.prose(&c.vertex_name) {
            let _ = writeln!(s, "Culprit vertex: {}\n", escape(&flink));
        }
    }
    s.push_str("| vertex | parallelism | busy max | backpressured max | state |\n|---|---:|---:|---:|---|\n");
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
            escape(&clip(&names.prose(&vertex.name), MAX_CELL_NAME)),
            vertex.parallelism,
            pct(vertex.busy_max),
            pct(vertex.backpressured_max)
        );
    }
}

/// `#### Profile of <vertex>: top frames …` and a line per frame, escaped; nothing without
/// a profile.
fn profile(s: &mut String, v: &Verdict, names: &Names) {
    use crate::render::words::profile;
    let Some(p) = &v.profile else { return };
    let _ = writeln!(s, "\n#### {}\n", escape(&profile::heading(p, &names.prose(&p.vertex_name))));
    for f in p.top_frames.iter().take(profile::SHOWN_FRAMES) {
        let _ = writeln!(s, "- {}", escape(&profile::frame(f)));
    }
}

fn verbose_parts(s: &mut String, v: &Verdict, names: &Names) {
    if !v.cause.is_empty() {
        let _ = writeln!(s, "\n#### Cause\n\n{}", escape(&names.text(&v.cause)));
    }
    if !v.evidence.is_empty() {
        s.push_str("\n#### Numbers\n\n| subject | metric | value | unit | threshold |\n|---|---|---:|---|---:|\n");
        for e in &v.evidence {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} |",
                escape(&clip(&names.text(&e.subject), MAX_CELL_NAME)),
                escape(&e.metric),
                e.value,
                escape(&e.unit),
                e.threshold.map(|t| t.to_string()).unwrap_or_default()
            );
        }
    }
    if !v.steps.is_empty() {
        s.push_str("\n#### Steps\n\n| step | outcome | detail |\n|---|---|---|\n");
        for step in &v.steps {
            let _ = writeln!(
                s,
                "| {} | {} | {} |",
                step.step.as_str(),
                step.outcome.as_str(),
                escape(&names.text(&step.detail))
            );
        }
    }
    list(s, "Missing", &v.missing, names, false);
    list(s, "Notes", &v.notes, names, false);
}

/// Renders the verdict as Markdown; `verbose` adds the cause, numbers, steps, missing
/// data and notes.
pub fn render(v: &Verdict, verbose: bool) -> String {
    let names = Names::of(v);
    let mut s = String::new();
    let _ = writeln!(s, "**{}**", escape(&names.text(&v.summary)));
    for h in v.hazards.iter().filter(|h| h.severity == Severity::Critical) {
        let _ = writeln!(s, "\n> **Critical:** {}", escape(&names.text(&h.detail)));
    }
    list(&mut s, "Fix", &v.fix, &names, true);
    list(&mut s, "Not the fix", &v.not_the_fix, &names, false);
    list(&mut s, "Also", &v.advice, &names, false);
    if let Some(a) = &v.autoscaler {
        let line = crate::render::words::autoscaler::line(a);
        let _ = writeln!(s, "\n**Autoscaler:** {}", escape(&names.text(&line)));
    }
    let warnings: Vec<String> =
        v.hazards.iter().filter(|h| h.severity != Severity::Critical).map(|h| h.detail.clone()).collect();
    list(&mut s, "Warnings", &warnings, &names, false);
    evidence(&mut s, v, &names);
    profile(&mut s, v, &names);
    if verbose {
        verbose_parts(&mut s, v, &names);
    } else if !v.cause.is_empty() || !v.steps.is_empty() {
        s.push_str(
            "\nThe cause, every number with its PromQL, and the runbook's steps: `--verbose` or `--format json`.\n",
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_in_names_is_escaped() {
        assert_eq!(escape("a|b *c* <x> `y`\nz ~s~\u{1b}"), "a\\|b \\*c\\* \\<x\\> \\`y\\` z \\~s\\~\u{FFFD}");
    }
}
