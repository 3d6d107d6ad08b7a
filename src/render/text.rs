//! The terminal view. Plain text, no colours; no line wider than [`Options::width`].
//!
//! The default view is what an engineer paged at 3 a.m. reads, at most [`MAX_LINES`]
//! lines: the answer first (the verdict's summary: culprit and why), critical hazards,
//! the fix, what would not help, then the evidence (each vertex's busy and backpressured
//! time), and a last line saying what `--verbose` adds. When it would not fit, the less
//! urgent parts shrink first (what would not help, then the evidence rows, then each fix
//! step); nothing is shortened in the verbose view, which adds the cause (the queueing
//! theory), every number with its threshold, the runbook's steps, what was missing and
//! the notes.
//!
//! Long vertex names are written in their prose form ([`crate::render::names`]); table
//! cells are cut with `…`. Without a job plan the vertices are listed without any sign of
//! order or data flow.

use std::fmt::Write as _;

use crate::model::verdict::{Culprit, GraphVertex, Severity, Verdict, VertexState};
use crate::render::names::{self, ELLIPSIS, Names, clip, width};

/// Width of the view when the output is not a terminal, columns.
pub const DEFAULT_WIDTH: usize = 100;

/// Narrowest width honoured; a narrower terminal gets this width.
pub const MIN_WIDTH: usize = 40;

/// Most lines of the default view.
pub const MAX_LINES: usize = 20;

/// How to render the terminal view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Columns; at least [`MIN_WIDTH`] is used.
    pub width: usize,
    /// Everything, unshortened (the cause, numbers, steps, missing data, notes).
    pub verbose: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options { width: DEFAULT_WIDTH, verbose: false }
    }
}

/// Wraps `text` at `width` columns, the first line after `first`, the others after
/// `indent`. A word longer than a line is broken across lines, so no line is wider than
/// `width` (unless `first` or `indent` alone is).
pub fn wrap(text: &str, first: &str, indent: &str, width: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut line = first.to_string();
    let mut line_w = names::width(first);
    let mut has_word = false;
    for word in text.split_whitespace() {
        let word_w = names::width(word);
        if has_word && line_w + 1 + word_w > width {
            out.push(line.trim_end().to_string());
            line = indent.to_string();
            line_w = names::width(indent);
            has_word = false;
        }
        if has_word {
            line.push(' ');
            line_w += 1;
        }
        for c in word.chars() {
            let w = unicode_width::UnicodeWidthChar::width(c).unwrap_or(0);
            if line_w + w > width && line_w > names::width(indent).max(1) {
                out.push(line.trim_end().to_string());
                line = indent.to_string();
                line_w = names::width(indent);
            }
            line.push(c);
            line_w += w;
        }
        has_word = true;
    }
    out.push(line.trim_end().to_string());
    out
}

/// At most `max` of `lines`, the last kept one ending with `…` when some were left out.
fn at_most(mut lines: Vec<String>, max: usize, width: usize) -> Vec<String> {
    if lines.len() <= max {
        return lines;
    }
    lines.truncate(max.max(1));
    if let Some(last) = lines.last_mut() {
        let kept = clip(last, width.saturating_sub(2)).into_owned();
        *last = if kept.ends_with(ELLIPSIS) { kept } else { format!("{kept} {ELLIPSIS}") };
    }
    lines
}

fn pct(v: Option<f64>) -> String {
    v.map(|r| format!("{:.0}%", r * 100.0)).unwrap_or_else(|| "unknown".into())
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// What the default view shows at one level of shortening.
#[derive(Debug, Clone, Copy)]
struct Caps {
    answer_lines: usize,
    hazard_lines: usize,
    fix_items: usize,
    fix_lines: usize,
    not_items: usize,
    not_lines: usize,
    min_rows: usize,
}

/// Shortening levels of the default view, tried in order until it fits.
const LEVELS: [Caps; 7] = [
    Caps { answer_lines: 4, hazard_lines: 2, fix_items: 8, fix_lines: 4, not_items: 4, not_lines: 3, min_rows: 5 },
    Caps { answer_lines: 4, hazard_lines: 2, fix_items: 8, fix_lines: 4, not_items: 1, not_lines: 2, min_rows: 5 },
    Caps { answer_lines: 4, hazard_lines: 2, fix_items: 8, fix_lines: 4, not_items: 1, not_lines: 2, min_rows: 3 },
    Caps { answer_lines: 3, hazard_lines: 2, fix_items: 8, fix_lines: 3, not_items: 0, not_lines: 0, min_rows: 3 },
    Caps { answer_lines: 3, hazard_lines: 2, fix_items: 3, fix_lines: 2, not_items: 0, not_lines: 0, min_rows: 2 },
    Caps { answer_lines: 2, hazard_lines: 1, fix_items: 2, fix_lines: 2, not_items: 0, not_lines: 0, min_rows: 1 },
    Caps { answer_lines: 2, hazard_lines: 1, fix_items: 1, fix_lines: 2, not_items: 0, not_lines: 0, min_rows: 0 },
];

/// The verdict and what every part of the view needs.
struct View<'a> {
    v: &'a Verdict,
    names: Names,
    width: usize,
}

impl View<'_> {
    /// `Autoscaler: …`, one line, when the verdict has the operator autoscaler's view.
    fn autoscaler_line(&self) -> Option<String> {
        let a = self.v.autoscaler.as_ref()?;
        let line = format!("Autoscaler: {}", self.text(&crate::render::words::autoscaler::line(a)));
        Some(clip(&line, self.width).into_owned())
    }

    fn text(&self, s: &str) -> String {
        self.names.text(s)
    }

    fn answer(&self) -> Vec<String> {
        wrap(&self.text(&self.v.summary), "", "", self.width)
    }

    fn critical(&self) -> Vec<&crate::model::verdict::Hazard> {
        self.v.hazards.iter().filter(|h| h.severity == Severity::Critical).collect()
    }

    fn hazard_lines(&self, caps: Caps, all: bool) -> Vec<String> {
        let critical = self.critical();
        let shown = if all { critical.len() } else { critical.len().min(2) };
        let mut out = Vec::new();
        for h in &critical[..shown] {
            let lines = wrap(&self.text(&h.detail), "!! ", "   ", self.width);
            out.extend(if all { lines } else { at_most(lines, caps.hazard_lines, self.width) });
        }
        if shown < critical.len() {
            out.push(format!("!! and {} more", plural(critical.len() - shown, "critical hazard", "critical hazards")));
        }
        out
    }

    /// The numbered fix; `None` caps for all of it.
    fn fix_lines(&self, caps: Option<Caps>) -> Vec<String> {
        if self.v.fix.is_empty() {
            return Vec::new();
        }
        let mut out = vec!["Fix".to_string()];
        let items = caps.map_or(self.v.fix.len(), |c| c.fix_items.min(self.v.fix.len()));
        for (i, f) in self.v.fix.iter().take(items).enumerate() {
            let lines = wrap(&self.text(f), &format!("  {}. ", i + 1), "     ", self.width);
            out.extend(match caps {
                Some(c) => at_most(lines, c.fix_lines, self.width),
                None => lines,
            });
        }
        if items < self.v.fix.len() {
            out.push(format!("  and {} (--verbose)", plural(self.v.fix.len() - items, "more step", "more steps")));
        }
        out
    }

    fn list_lines(&self, title: &str, items: &[String], max_items: usize, max_lines: Option<usize>) -> Vec<String> {
        let shown = max_items.min(items.len());
        if shown == 0 {
            return Vec::new();
        }
        let mut out = Vec::new();
        if items.len() == 1 {
            let lines = wrap(&self.text(&items[0]), &format!("{title}: "), "  ", self.width);
            out.extend(max_lines.map_or(lines.clone(), |m| at_most(lines, m, self.width)));
            return out;
        }
        out.push(title.to_string());
        for item in &items[..shown] {
            let lines = wrap(&self.text(item), "  - ", "    ", self.width);
            out.extend(max_lines.map_or(lines.clone(), |m| at_most(lines, m, self.width)));
        }
        if shown < items.len() {
            out.push(format!("  and {} more (--verbose)", items.len() - shown));
        }
        out
    }

    /// `Profile of <vertex>: top frames of N … samples` and a line per frame (at most
    /// `frames`); nothing without a profile.
    fn profile_lines(&self, frames: usize) -> Vec<String> {
        use crate::render::words::profile;
        let Some(p) = &self.v.profile else { return Vec::new() };
        let mut out = wrap(&self.text(&profile::heading(p, &self.names.prose(&p.vertex_name))), "", "  ", self.width);
        for f in p.top_frames.iter().take(frames) {
            out.extend(wrap(&self.text(&profile::frame(f)), "  - ", "    ", self.width));
        }
        out
    }

    /// `Evidence (sources first) · confidence high · job · 57 s to <at>` (cut at the width).
    fn evidence_header(&self) -> String {
        let v = self.v;
        let order = if v.graph.from_plan { "sources first" } else { "no job graph: order unknown" };
        let line = format!(
            "Evidence ({order}) · confidence {} · {} · {} s to {}",
            v.confidence.as_str(),
            names::clean(&v.job.name),
            v.window_seconds,
            names::clean(&v.at)
        );
        clip(&line, self.width).into_owned()
    }

    /// `Culprit vertex: <Flink's name>` when the prose form shortened it.
    fn full_name_lines(&self) -> Vec<String> {
        let Some(c) = &self.v.culprit else { return Vec::new() };
        let flink = names::vertex_name(&c.vertex_name);
        if flink == self.names.prose(&c.vertex_name) {
            return Vec::new();
        }
        wrap(&flink, "Culprit vertex: ", "  ", self.width)
    }

    fn culprit_of(&self, x: &GraphVertex) -> Option<&Culprit> {
        self.v.culprits.iter().chain(&self.v.culprit).find(|c| c.vertex_id == x.id)
    }

    fn row(&self, x: &GraphVertex, name_w: usize) -> String {
        let marker = match x.state {
            VertexState::Culprit => ">>",
            VertexState::Backpressured => "~~",
            VertexState::Ok => "  ",
            VertexState::Unknown => "??",
        };
        let mut state = x.state.as_str().to_string();
        if let Some(c) =
            self.culprit_of(x).filter(|c| !c.subtasks.is_empty() && c.subtasks.len() < c.parallelism as usize)
        {
            let subs: Vec<String> = c.subtasks.iter().take(8).map(|i| i.to_string()).collect();
            let more = if c.subtasks.len() > 8 { format!(", {ELLIPSIS}") } else { String::new() };
            let noun = if c.subtasks.len() == 1 { "subtask" } else { "subtasks" };
            let _ = write!(state, " ({noun} {}{more} of {})", subs.join(", "), c.parallelism);
        }
        if self.v.graph.from_plan {
            let inputs: Vec<String> = self
                .v
                .graph
                .edges
                .iter()
                .filter(|e| e.to == x.id && e.ship_strategy != "FORWARD")
                .filter_map(|e| {
                    let from = self.v.graph.vertices.iter().find(|y| y.id == e.from)?;
                    Some(format!("{} from {}", names::clean(&e.ship_strategy), self.names.prose(&from.name)))
                })
                .collect();
            if !inputs.is_empty() {
                let _ = write!(state, "  [{}]", inputs.join("; "));
            }
        }
        let name = clip(&self.names.prose(&x.name), name_w).into_owned();
        let pad = name_w.saturating_sub(width(&name));
        let line = format!(
            "  {marker} {name}{:pad$}  ×{:<4} busy {:>4}  backpr. {:>4}  {state}",
            "",
            x.parallelism,
            pct(x.busy_max),
            pct(x.backpressured_max)
        );
        clip(&line, self.width).into_owned()
    }

    fn name_width(&self) -> usize {
        let widest = self.v.graph.vertices.iter().map(|x| width(&self.names.prose(&x.name))).max().unwrap_or(6);
        // After the name: 37 columns of numbers (`  ×64   busy 100%  backpr. 100%  `) and the
        // state (`backpressured`, 13).
        widest.clamp(6, self.width.saturating_sub(4 + 37 + 13).max(12))
    }

    /// The vertex rows, at most `max` lines: the culprits and the most backpressured
    /// first when not all fit, listed in the graph's order, and a line saying how many
    /// were left out.
    fn rows(&self, max: Option<usize>) -> Vec<String> {
        let vertices = &self.v.graph.vertices;
        let name_w = self.name_width();
        let keep: Vec<bool> = match max {
            Some(max) if max < vertices.len() => {
                let room = max.saturating_sub(1);
                let mut order: Vec<usize> = (0..vertices.len()).collect();
                let rank = |x: &GraphVertex| match x.state {
                    VertexState::Culprit => 0,
                    VertexState::Backpressured => 1,
                    VertexState::Unknown => 2,
                    VertexState::Ok => 3,
                };
                order.sort_by(|&a, &b| {
                    let (x, y) = (&vertices[a], &vertices[b]);
                    rank(x)
                        .cmp(&rank(y))
                        .then(y.backpressured_max.unwrap_or(0.0).total_cmp(&x.backpressured_max.unwrap_or(0.0)))
                });
                let mut keep = vec![false; vertices.len()];
                order.into_iter().take(room).for_each(|i| keep[i] = true);
                keep
            }
            _ => vec![true; vertices.len()],
        };
        let mut out: Vec<String> =
            vertices.iter().zip(&keep).filter(|(_, k)| **k).map(|(x, _)| self.row(x, name_w)).collect();
        let left: Vec<&GraphVertex> = vertices.iter().zip(&keep).filter(|(_, k)| !**k).map(|(x, _)| x).collect();
        if !left.is_empty() {
            let red = left.iter().filter(|x| x.state == VertexState::Backpressured).count();
            let more = format!(
                "  and {} ({red} backpressured) (--verbose)",
                plural(left.len(), "more vertex", "more vertices")
            );
            out.push(clip(&more, self.width).into_owned());
        }
        out
    }

    /// `More with --verbose: the cause, 6 steps, 1 missing, 2 notes`.
    fn footer(&self, caps: Caps) -> Option<String> {
        let v = self.v;
        let mut more = Vec::new();
        if !v.cause.is_empty() {
            more.push("the cause".to_string());
        }
        if v.not_the_fix.len() > caps.not_items {
            more.push("what would not help".to_string());
        }
        if !v.advice.is_empty() {
            more.push(plural(v.advice.len(), "more advice", "more advice"));
        }
        let warnings = v.hazards.iter().filter(|h| h.severity != Severity::Critical).count();
        if warnings > 0 {
            more.push(plural(warnings, "warning", "warnings"));
        }
        if !v.evidence.is_empty() {
            more.push(plural(v.evidence.len(), "number", "numbers"));
        }
        if !v.steps.is_empty() {
            more.push(plural(v.steps.len(), "step", "steps"));
        }
        if !v.missing.is_empty() {
            more.push(format!("{} missing", v.missing.len()));
        }
        if !v.notes.is_empty() {
            more.push(plural(v.notes.len(), "note", "notes"));
        }
        (!more.is_empty()).then(|| clip(&format!("More with --verbose: {}", more.join(", ")), self.width).into_owned())
    }

    fn brief_at(&self, caps: Caps) -> Option<Vec<String>> {
        let v = self.v;
        let mut lines = at_most(self.answer(), caps.answer_lines, self.width);
        lines.extend(self.hazard_lines(caps, false));
        lines.extend(self.fix_lines(Some(caps)));
        lines.extend(self.list_lines("Not the fix", &v.not_the_fix, caps.not_items, Some(caps.not_lines)));
        lines.extend(at_most(self.profile_lines(1), 2, self.width));
        lines.extend(self.autoscaler_line());
        let footer = self.footer(caps);
        let mut evidence = Vec::new();
        if !v.graph.vertices.is_empty() {
            evidence.push(self.evidence_header());
            evidence.extend(self.full_name_lines());
        }
        let used = lines.len() + evidence.len() + usize::from(footer.is_some());
        let room = MAX_LINES.saturating_sub(used);
        let all_rows = v.graph.vertices.len();
        if used > MAX_LINES || room < caps.min_rows.min(all_rows) {
            return None;
        }
        if room > 0 && all_rows > 0 {
            lines.extend(evidence);
            lines.extend(self.rows(Some(room)));
        } else if !evidence.is_empty() {
            lines.push(clip(&evidence[0], self.width).into_owned());
        }
        lines.extend(footer);
        (lines.len() <= MAX_LINES).then_some(lines)
    }

    fn brief(&self) -> Vec<String> {
        for caps in LEVELS {
            if let Some(lines) = self.brief_at(caps) {
                return lines;
            }
        }
        // The answer and the first step alone, whatever else there is.
        let last = LEVELS[LEVELS.len() - 1];
        let mut lines = at_most(self.answer(), last.answer_lines, self.width);
        lines.extend(self.fix_lines(Some(last)));
        lines.extend(self.footer(last));
        at_most(lines, MAX_LINES, self.width)
    }

    fn verbose(&self) -> Vec<String> {
        let v = self.v;
        let w = self.width;
        let mut lines = self.answer();
        lines.extend(self.hazard_lines(LEVELS[0], true));
        lines.extend(self.fix_lines(None));
        lines.extend(self.list_lines("Not the fix", &v.not_the_fix, usize::MAX, None));
        lines.extend(self.list_lines("Also", &v.advice, usize::MAX, None));
        lines.extend(self.autoscaler_line());
        let warnings: Vec<String> =
            v.hazards.iter().filter(|h| h.severity != Severity::Critical).map(|h| h.detail.clone()).collect();
        lines.extend(self.list_lines("Warnings", &warnings, usize::MAX, None));
        if !v.cause.is_empty() {
            lines.push("Cause".into());
            lines.extend(wrap(&self.text(&v.cause), "  ", "  ", w));
        }
        if !v.graph.vertices.is_empty() {
            lines.push(self.evidence_header());
            lines.extend(self.full_name_lines());
            if let Some(c) = v.culprit.as_ref().filter(|c| c.operators.len() > 1) {
                let ops: Vec<String> = c.operators.iter().map(|o| names::vertex_name(o)).collect();
                lines.extend(wrap(&ops.join(", "), "Chained operators: ", "  ", w));
            }
            lines.extend(self.rows(None));
        }
        lines.extend(self.profile_lines(crate::render::words::profile::SHOWN_FRAMES));
        if !v.evidence.is_empty() {
            lines.push("Numbers (PromQL of each: --format json)".into());
            for e in &v.evidence {
                let threshold = e.threshold.map(|t| format!(" (threshold {t})")).unwrap_or_default();
                let item = format!(
                    "{}: {} = {} {}{threshold}",
                    self.names.text(&e.subject),
                    names::clean(&e.metric),
                    e.value,
                    names::clean(&e.unit)
                );
                lines.extend(wrap(&item, "  - ", "    ", w));
            }
        }
        if !v.steps.is_empty() {
            lines.push("Steps".into());
            for s in &v.steps {
                let head = format!("  {:<13} {:<8} ", s.step.as_str(), s.outcome.as_str());
                lines.extend(wrap(&self.text(&s.detail), &head, &" ".repeat(25.min(w / 2)), w));
            }
        }
        lines.extend(self.list_lines("Missing", &v.missing, usize::MAX, None));
        lines.extend(self.list_lines("Notes", &v.notes, usize::MAX, None));
        let job = format!(
            "Job {} ({}) · {} · finding {} · confidence {} · {} s from {} to {}",
            names::clean(&v.job.name),
            names::clean(&v.job.id),
            v.status.as_str(),
            v.finding.as_str(),
            v.confidence.as_str(),
            v.window_seconds,
            names::clean(&v.window_start),
            names::clean(&v.at)
        );
        lines.extend(wrap(&job, "", "  ", w));
        lines
    }
}

/// Renders the terminal view.
pub fn render(v: &Verdict, options: &Options) -> String {
    let view = View { v, names: Names::of(v), width: options.width.max(MIN_WIDTH) };
    let lines = if options.verbose { view.verbose() } else { view.brief() };
    // Every part keeps to the width; this is the guarantee.
    let lines: Vec<String> = lines.iter().map(|l| clip(l, view.width).into_owned()).collect();
    let mut s = lines.join("\n");
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapping_keeps_every_word_and_the_width() {
        let text = "word ".repeat(60);
        let out = wrap(&text, "  1. ", "     ", DEFAULT_WIDTH);
        assert!(out.iter().all(|l| width(l) <= DEFAULT_WIDTH));
        assert_eq!(out.join(" ").split_whitespace().filter(|w| *w == "word").count(), 60);
        assert!(out[0].starts_with("  1. word"));
    }

    #[test]
    fn a_word_longer_than_the_line_is_broken_at_the_width() {
        let long = "x".repeat(150);
        let out = wrap(&long, "", "", 100);
        assert_eq!(out, vec!["x".repeat(100), "x".repeat(50)]);
        let wide = "漢".repeat(60);
        assert!(wrap(&wide, "- ", "  ", 41).iter().all(|l| width(l) <= 41));
    }

    #[test]
    fn at_most_marks_what_it_left_out() {
        let lines = vec!["a".to_string(), "b".into(), "c".into()];
        assert_eq!(at_most(lines.clone(), 3, 10), lines);
        assert_eq!(at_most(lines, 2, 10), vec!["a".to_string(), "b …".into()]);
    }
}
