//! The terminal view: the job graph in topological order, each vertex marked culprit /
//! backpressured / ok with its busy and backpressured percentages, then cause, fix, what
//! would not help, hazards, and the runbook's steps.
//!
//! Plain text, no colours, lines wrapped at 100 columns.

use std::fmt::Write as _;

use crate::model::verdict::{Severity, Status, Verdict, VertexState};

/// Line width of the terminal view, columns.
pub const WIDTH: usize = 100;

fn pct(v: Option<f64>) -> String {
    v.map(|r| format!("{:.0}%", r * 100.0)).unwrap_or_else(|| "?".into())
}

/// Wraps `text` at [`WIDTH`], the first line after `first`, the others indented by `indent`.
pub fn wrap(text: &str, first: &str, indent: &str) -> String {
    let mut out = String::new();
    let mut line = first.to_string();
    let mut line_has_word = false;
    for word in text.split_whitespace() {
        if line_has_word && line.chars().count() + 1 + word.chars().count() > WIDTH {
            out.push_str(line.trim_end());
            out.push('\n');
            line = indent.to_string();
            line_has_word = false;
        }
        if line_has_word {
            line.push(' ');
        }
        line.push_str(word);
        line_has_word = true;
    }
    out.push_str(line.trim_end());
    out.push('\n');
    out
}

fn status_line(v: &Verdict) -> String {
    let status = match v.status {
        Status::CulpritFound => "CULPRIT FOUND",
        Status::NoSingleCulprit => "NO SINGLE CULPRIT",
        Status::NoBackpressure => "NO BACKPRESSURE",
        Status::Inconclusive => "INCONCLUSIVE",
    };
    format!("{status} · finding {} · confidence {}", v.finding.as_str(), v.confidence.as_str())
}

/// Renders the terminal view.
pub fn render(v: &Verdict) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{} ({})  at {}, window {} s", v.job.name, v.job.id, v.at, v.window_seconds);
    let _ = writeln!(s, "{}", status_line(v));
    s.push_str(&wrap(&v.summary, "", ""));

    let critical: Vec<_> = v.hazards.iter().filter(|h| h.severity == Severity::Critical).collect();
    if !critical.is_empty() {
        s.push('\n');
        for h in &critical {
            s.push_str(&wrap(&h.detail, "!! ", "   "));
        }
    }

    s.push_str(if v.graph.from_plan {
        "\nJob graph (sources first)\n"
    } else {
        "\nVertices (no job graph: order and edges unknown)\n"
    });
    let name_width = v.graph.vertices.iter().map(|x| x.name.chars().count()).max().unwrap_or(4).clamp(4, 44);
    let _ = writeln!(s, "     {:<name_width$}  {:>4}  {:>5}  {:>7}  state", "vertex", "par", "busy", "backpr.");
    for vertex in &v.graph.vertices {
        let marker = match vertex.state {
            VertexState::Culprit => ">>",
            VertexState::Backpressured => "~~",
            VertexState::Ok => "  ",
            VertexState::Unknown => "??",
        };
        let mut state = vertex.state.as_str().to_string();
        if vertex.state == VertexState::Culprit
            && let Some(c) =
                v.culprit.as_ref().filter(|c| c.vertex_id == vertex.id && c.subtasks.len() < c.parallelism as usize)
        {
            let subs: Vec<String> = c.subtasks.iter().map(|i| i.to_string()).collect();
            let _ = write!(state, " (subtask {})", subs.join(", "));
        }
        let inputs: Vec<String> = v
            .graph
            .edges
            .iter()
            .filter(|e| e.to == vertex.id && e.ship_strategy != "FORWARD")
            .filter_map(|e| {
                v.graph
                    .vertices
                    .iter()
                    .find(|x| x.id == e.from)
                    .map(|from| format!("{} from {}", e.ship_strategy, from.name))
            })
            .collect();
        if !inputs.is_empty() {
            let _ = write!(state, "  [{}]", inputs.join("; "));
        }
        let name: String = vertex.name.chars().take(name_width).collect();
        let _ = writeln!(
            s,
            "  {marker} {name:<name_width$}  {:>4}  {:>5}  {:>7}  {state}",
            format!("×{}", vertex.parallelism),
            pct(vertex.busy_max),
            pct(vertex.backpressured_max)
        );
    }

    if !v.cause.is_empty() {
        s.push_str("\nCause\n");
        s.push_str(&wrap(&v.cause, "  ", "  "));
    }
    if !v.fix.is_empty() {
        s.push_str("\nFix\n");
        for (i, f) in v.fix.iter().enumerate() {
            s.push_str(&wrap(f, &format!("  {}. ", i + 1), "     "));
        }
    }
    if !v.not_the_fix.is_empty() {
        s.push_str("\nNot the fix\n");
        for f in &v.not_the_fix {
            s.push_str(&wrap(f, "  - ", "    "));
        }
    }
    if !v.advice.is_empty() {
        s.push_str("\nAlso\n");
        for f in &v.advice {
            s.push_str(&wrap(f, "  - ", "    "));
        }
    }
    let other_hazards: Vec<_> = v.hazards.iter().filter(|h| h.severity != Severity::Critical).collect();
    if !other_hazards.is_empty() {
        s.push_str("\nHazards\n");
        for h in other_hazards {
            s.push_str(&wrap(&h.detail, "  [warning] ", "            "));
        }
    }
    s.push_str("\nSteps\n");
    for step in &v.steps {
        s.push_str(&wrap(
            &step.detail,
            &format!("  {:<13} {:<8} ", step.step.as_str(), step.outcome.as_str()),
            &" ".repeat(25),
        ));
    }
    if !v.missing.is_empty() {
        s.push_str("\nMissing\n");
        for m in &v.missing {
            s.push_str(&wrap(m, "  - ", "    "));
        }
    }
    if !v.notes.is_empty() {
        s.push_str("\nNotes\n");
        for n in &v.notes {
            s.push_str(&wrap(n, "  - ", "    "));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapping_keeps_every_word_and_the_width() {
        let text = "word ".repeat(60);
        let out = wrap(&text, "  1. ", "     ");
        assert!(out.lines().all(|l| l.chars().count() <= WIDTH));
        assert_eq!(out.split_whitespace().filter(|w| *w == "word").count(), 60);
        assert!(out.starts_with("  1. word"));
    }

    #[test]
    fn a_word_longer_than_the_line_is_not_split() {
        let long = "x".repeat(150);
        let out = wrap(&long, "", "");
        assert_eq!(out.trim_end(), long);
    }
}
