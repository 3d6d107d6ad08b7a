//! The verdict page: one self-contained HTML file (inline CSS and SVG, no script, no
//! font, image or request of any kind), readable offline and as an email attachment.
//! Pure.
//!
//! It gives what the other renderings give, in the same order (the answer, hazards, the
//! fix, what would not help, the evidence), then what they leave to the verbose view (the
//! cause, every number with its PromQL, the runbook's steps, what was missing, the notes),
//! and draws:
//!
//! * **the job graph**, sources on the left and sinks on the right ([`super::layout`]):
//!   each vertex a box with its name, chained operators and parallelism, its busy bar
//!   coloured from blue (idle) to red (busy) and its backpressured bar in Flink's levels
//!   (OK ≤ 10 % < LOW ≤ 50 % < HIGH), each state also written; the culprit outlined and
//!   labelled with the finding; edges labelled with the ship strategy. Without a job plan
//!   there are no edges and the page says the order is unknown;
//! * **the evidence**: busy and backpressured time of every vertex as bars
//!   ([`super::plot`]), with its axis in percent.

use std::fmt::Write as _;

use crate::model::verdict::{GraphVertex, Severity, Verdict, VertexState};
use crate::render::names::{self, Names, clip};
use crate::render::{layout, plot};

/// Flink's backpressure levels (the web UI's): OK up to 10 %, LOW up to 50 %, HIGH above.
pub fn backpressure_level(ratio: f64) -> &'static str {
    if ratio <= 0.10 {
        "OK"
    } else if ratio <= 0.50 {
        "LOW"
    } else {
        "HIGH"
    }
}

/// The colour of a backpressure level: green, amber, red.
fn level_colour(level: &str) -> &'static str {
    match level {
        "OK" => "#2e7d32",
        "LOW" => "#ef8f00",
        _ => "#c62828",
    }
}

/// Busy time as a colour from blue (idle, hue 240) to red (busy, hue 0).
pub fn busy_colour(ratio: f64) -> String {
    format!("hsl({:.0},75%,45%)", 240.0 * (1.0 - ratio.clamp(0.0, 1.0)))
}

/// Escapes text for HTML (element content and quoted attributes); control characters
/// become `�`.
pub fn escape(s: &str) -> String {
    let s = names::clean(s);
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn pct(v: Option<f64>) -> String {
    v.map(|r| format!("{:.0}%", r * 100.0)).unwrap_or_else(|| "unknown".into())
}

/// The page's one style sheet (in a `<style>` element; the server's Content-Security-Policy
/// allows exactly it, by hash).
pub const CSS: &str = "body{font:15px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;color:#1a1a1a;max-width:1200px;margin:0 auto;padding:16px 24px}\
h1{font-size:22px;margin:8px 0}h2{font-size:17px;margin:22px 0 6px;border-bottom:1px solid #ddd}\
.meta{color:#555}.badge{display:inline-block;padding:2px 8px;border-radius:4px;color:#fff;font-weight:600;font-size:13px}\
.culprit_found{background:#c62828}.no_single_culprit{background:#ef8f00}.no_backpressure{background:#2e7d32}.inconclusive{background:#666}\
.hazard{border-left:5px solid #c62828;background:#fdecea;padding:6px 10px;margin:6px 0}\
table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ddd;padding:3px 6px;text-align:left;vertical-align:top}\
code{font:12px ui-monospace,monospace;background:#f4f4f4;padding:1px 3px;word-break:break-all}\
svg{max-width:100%;height:auto}.note{color:#555;font-size:13px}";

/// Renders the page.
pub fn page(v: &Verdict) -> String {
    let names = Names::of(v);
    let t = |s: &str| escape(&names.text(s));
    let mut s = String::with_capacity(32 * 1024);
    let _ = write!(
        s,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
         <title>{}</title><style>{CSS}</style></head><body>\n",
        escape(&format!("culprit: {}", names.text(&v.summary)))
    );
    let status = v.status.as_str();
    let _ = writeln!(
        s,
        "<p><span class=\"badge {status}\">{}</span> <span class=\"meta\">finding <b>{}</b> · confidence <b>{}</b> · job {} (<code>{}</code>) · {} s to {}</span></p>",
        status.replace('_', " ").to_uppercase(),
        v.finding.as_str(),
        v.confidence.as_str(),
        escape(&v.job.name),
        escape(&v.job.id),
        v.window_seconds,
        escape(&v.at)
    );
    let _ = writeln!(s, "<h1 id=\"answer\">{}</h1>", t(&v.summary));
    for h in v.hazards.iter().filter(|h| h.severity == Severity::Critical) {
        let _ = writeln!(s, "<div class=\"hazard\"><b>Critical:</b> {}</div>", t(&h.detail));
    }
    list(&mut s, "Fix", &v.fix, &t, "ol");
    list(&mut s, "Not the fix", &v.not_the_fix, &t, "ul");
    list(&mut s, "Also", &v.advice, &t, "ul");
    let warnings: Vec<String> =
        v.hazards.iter().filter(|h| h.severity != Severity::Critical).map(|h| h.detail.clone()).collect();
    list(&mut s, "Warnings", &warnings, &t, "ul");
    graph_section(&mut s, v, &names);
    if !v.graph.vertices.is_empty() {
        s.push_str("<h2>Busy and backpressured time</h2>\n");
        s.push_str(&plot::vertex_bars(v, &names));
        s.push('\n');
    }
    if !v.cause.is_empty() {
        let _ = writeln!(s, "<h2>Why</h2>\n<p>{}</p>", t(&v.cause));
    }
    profile(&mut s, v, &names);
    numbers(&mut s, v, &t);
    if !v.steps.is_empty() {
        s.push_str("<h2>Runbook steps</h2>\n<table><tr><th>step</th><th>outcome</th><th>detail</th></tr>\n");
        for step in &v.steps {
            let _ = writeln!(
                s,
                "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
                step.step.as_str(),
                step.outcome.as_str(),
                t(&step.detail)
            );
        }
        s.push_str("</table>\n");
    }
    list(&mut s, "Missing", &v.missing, &t, "ul");
    list(&mut s, "Notes", &v.notes, &t, "ul");
    let _ = writeln!(
        s,
        "<p class=\"note\">{} · window from {} to {} · made by culprit</p>\n</body></html>",
        escape(&v.schema),
        escape(&v.window_start),
        escape(&v.at)
    );
    s
}

fn list(s: &mut String, title: &str, items: &[String], t: &dyn Fn(&str) -> String, tag: &str) {
    if items.is_empty() {
        return;
    }
    let _ = write!(s, "<h2>{title}</h2>\n<{tag}>");
    for item in items {
        let _ = write!(s, "<li>{}</li>", t(item));
    }
    let _ = writeln!(s, "</{tag}>");
}

/// The profile of the culprit's vertex: a heading and a table of its top frames (every
/// frame the verdict keeps), escaped; nothing without a profile.
fn profile(s: &mut String, v: &Verdict, names: &Names) {
    use crate::render::words::profile::heading;
    let Some(p) = &v.profile else { return };
    let _ = writeln!(s, "<h2 id=\"profile\">{}</h2>", escape(&heading(p, &names.prose(&p.vertex_name))));
    s.push_str("<table><tr><th>frame</th><th>self samples</th><th>share</th><th>in (job code)</th><th>function (operator)</th></tr>\n");
    for f in &p.top_frames {
        let function = f.function.as_deref().map(|func| {
            let operator = f.operator.as_deref().map(|op| format!(" ({})", escape(op))).unwrap_or_default();
            format!("<code>{}</code>{operator}", escape(&crate::render::words::profile::function_name(func)))
        });
        let _ = writeln!(
            s,
            "<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&f.frame),
            f.self_samples,
            crate::render::words::numbers::pct(f.share_ratio),
            f.user_frame.as_deref().map(|u| format!("<code>{}</code>", escape(u))).unwrap_or_default(),
            function.unwrap_or_default()
        );
    }
    s.push_str("</table>\n");
}

fn numbers(s: &mut String, v: &Verdict, t: &dyn Fn(&str) -> String) {
    if v.evidence.is_empty() {
        return;
    }
    s.push_str("<h2>Numbers</h2>\n<table><tr><th>subject</th><th>metric</th><th>value</th><th>threshold</th><th>PromQL</th></tr>\n");
    for e in &v.evidence {
        let _ = writeln!(
            s,
            "<tr><td>{}</td><td>{}</td><td>{} {}</td><td>{}</td><td>{}</td></tr>",
            t(&e.subject),
            escape(&e.metric),
            e.value,
            escape(&e.unit),
            e.threshold.map(|x| x.to_string()).unwrap_or_default(),
            e.query.as_deref().map(|q| format!("<code>{}</code>", escape(q))).unwrap_or_default()
        );
    }
    s.push_str("</table>\n");
}

/// Box geometry of the graph, px.
const BOX_W: f64 = 240.0;
const GAP_X: f64 = 80.0;
const GAP_Y: f64 = 28.0;
const MARGIN: f64 = 16.0;
const LINE: f64 = 15.0;
/// Chained operators listed in a box before `+n more`.
const MAX_OPS_LISTED: usize = 4;
/// Vertices per column without a job graph.
const GRID_ROWS: usize = 6;

fn box_height(ops: usize) -> f64 {
    let listed = if ops > 1 { ops.min(MAX_OPS_LISTED) + usize::from(ops > MAX_OPS_LISTED) } else { 0 };
    4.0 * LINE + 18.0 + listed as f64 * LINE
}

/// How the graph runs: sources left and sinks right (the page), or sources on top and
/// sinks below, layers as rows (the picture, [`super::png`], for a phone's narrow screen).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    Across,
    Down,
}

/// Gaps of the [`Flow::Down`] layout, px: between boxes of a row, between rows (room for
/// an edge's label and the culprit's label above its box).
const ROW_GAP_X: f64 = 24.0;
const ROW_GAP_Y: f64 = 52.0;
/// Vertices per row without a job graph, in the [`Flow::Down`] layout.
const GRID_COLUMNS: usize = 2;

/// The job graph as an SVG element: its title, the element, and its width and height in px.
pub struct GraphSvg {
    pub title: &'static str,
    pub svg: String,
    pub width: f64,
    pub height: f64,
}

fn graph_section(s: &mut String, v: &Verdict, names: &Names) {
    let Some(g) = graph_svg(v, names, Flow::Across) else { return };
    let _ = writeln!(s, "<h2>{}</h2>", g.title);
    s.push_str(&g.svg);
    s.push('\n');
}

/// The job graph of the page ([`Flow::Across`]) or of the picture ([`Flow::Down`]): each
/// vertex a box with its busy and backpressured bars, the culprit outlined and labelled,
/// edges labelled with the ship strategy. `None` without vertices.
pub fn graph_svg(v: &Verdict, names: &Names, flow: Flow) -> Option<GraphSvg> {
    let vertices = &v.graph.vertices;
    if vertices.is_empty() {
        return None;
    }
    let index = |id: &str| vertices.iter().position(|x| x.id == id);
    let edges: Vec<(usize, usize, &str)> = if v.graph.from_plan {
        v.graph.edges.iter().filter_map(|e| Some((index(&e.from)?, index(&e.to)?, e.ship_strategy.as_str()))).collect()
    } else {
        Vec::new()
    };
    let ops: Vec<Vec<String>> =
        vertices.iter().map(|x| names::operators(&x.name).into_iter().map(names::operator_name).collect()).collect();
    let layers: Vec<Vec<usize>> = if v.graph.from_plan {
        let pairs: Vec<(usize, usize)> = edges.iter().map(|e| (e.0, e.1)).collect();
        layout::layered(vertices.len(), &pairs).layers
    } else {
        let per = if flow == Flow::Across { GRID_ROWS } else { GRID_COLUMNS };
        (0..vertices.len()).collect::<Vec<_>>().chunks(per).map(<[usize]>::to_vec).collect()
    };
    let heights: Vec<f64> = ops.iter().map(|o| box_height(o.len())).collect();
    let (pos, width, height) = match flow {
        Flow::Across => across(&layers, &heights),
        Flow::Down => down(&layers, &heights),
    };
    let title = if v.graph.from_plan {
        if flow == Flow::Across { "Job graph (sources left, sinks right)" } else { "Job graph (sources on top)" }
    } else {
        "Vertices (no job graph: order and edges unknown)"
    };
    let mut s = String::with_capacity(1024 * vertices.len());
    let _ = write!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {width:.0} {height:.0}\" width=\"{width:.0}\" height=\"{height:.0}\" role=\"img\" aria-label=\"{}\" font-family=\"system-ui,sans-serif\" font-size=\"12\">\
         <defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" markerWidth=\"7\" markerHeight=\"7\" orient=\"auto\"><path d=\"M0,0L10,5L0,10z\" fill=\"#777\"/></marker></defs>",
        escape(title)
    );
    for &(a, b, strategy) in &edges {
        edge(&mut s, flow, (pos[a], heights[a]), (pos[b], heights[b]), strategy);
    }
    for (i, x) in vertices.iter().enumerate() {
        vertex_box(&mut s, v, x, &ops[i], pos[i], names, flow);
    }
    s.push_str("</svg>");
    Some(GraphSvg { title, svg: s, width, height })
}

/// Positions of the page's layout: columns of boxes, each column's boxes stacked; the
/// width and height.
fn across(layers: &[Vec<usize>], heights: &[f64]) -> (Vec<(f64, f64)>, f64, f64) {
    let mut pos = vec![(0.0, 0.0); heights.len()];
    let mut height: f64 = 0.0;
    for (l, column) in layers.iter().enumerate() {
        let mut y = MARGIN + 22.0;
        for &i in column {
            pos[i] = (MARGIN + l as f64 * (BOX_W + GAP_X), y);
            y += heights[i] + GAP_Y;
        }
        height = height.max(y);
    }
    (pos, MARGIN * 2.0 + layers.len() as f64 * (BOX_W + GAP_X) - GAP_X, height)
}

/// Positions of the picture's layout: rows of boxes side by side, a row as tall as its
/// tallest box; the width and height.
fn down(layers: &[Vec<usize>], heights: &[f64]) -> (Vec<(f64, f64)>, f64, f64) {
    let mut pos = vec![(0.0, 0.0); heights.len()];
    let mut y = MARGIN + 22.0;
    let mut widest = 0;
    for row in layers {
        for (j, &i) in row.iter().enumerate() {
            pos[i] = (MARGIN + j as f64 * (BOX_W + ROW_GAP_X), y);
        }
        widest = widest.max(row.len());
        y += row.iter().map(|&i| heights[i]).fold(0.0, f64::max) + ROW_GAP_Y;
    }
    (pos, MARGIN * 2.0 + widest as f64 * (BOX_W + ROW_GAP_X) - ROW_GAP_X, y - ROW_GAP_Y + MARGIN)
}

/// An edge from box `a` to box `b` (positions and heights) with its ship strategy.
fn edge(s: &mut String, flow: Flow, ((ax, ay), ah): ((f64, f64), f64), ((bx, by), bh): ((f64, f64), f64), label: &str) {
    let path = match flow {
        Flow::Across => {
            let (ax, ay, bx, by) = (ax + BOX_W, ay + ah / 2.0, bx, by + bh / 2.0);
            let mx = (ax + bx) / 2.0;
            (format!("M{ax:.0},{ay:.0} C{mx:.0},{ay:.0} {mx:.0},{by:.0} {bx:.0},{by:.0}"), mx, (ay + by) / 2.0 - 4.0)
        }
        Flow::Down => {
            let (ax, ay, bx) = (ax + BOX_W / 2.0, ay + ah, bx + BOX_W / 2.0);
            let my = (ay + by) / 2.0;
            (format!("M{ax:.0},{ay:.0} C{ax:.0},{my:.0} {bx:.0},{my:.0} {bx:.0},{by:.0}"), (ax + bx) / 2.0, my - 4.0)
        }
    };
    let (d, lx, ly) = path;
    let _ = write!(
        s,
        "<path d=\"{d}\" fill=\"none\" stroke=\"#777\" stroke-width=\"1.5\" marker-end=\"url(#arrow)\"/>\
         <text x=\"{lx:.0}\" y=\"{ly:.0}\" text-anchor=\"middle\" fill=\"#444\" font-size=\"11\">{}</text>",
        escape(label)
    );
}

fn vertex_box(
    s: &mut String,
    v: &Verdict,
    x: &GraphVertex,
    ops: &[String],
    (bx, by): (f64, f64),
    names: &Names,
    flow: Flow,
) {
    let h = box_height(ops.len());
    let culprit = x.state == VertexState::Culprit;
    let (stroke, stroke_w) = if culprit { ("#b71c1c", 4.0) } else { ("#999", 1.0) };
    let _ = write!(
        s,
        "<g><rect x=\"{bx:.0}\" y=\"{by:.0}\" width=\"{BOX_W:.0}\" height=\"{h:.0}\" rx=\"6\" fill=\"#fff\" stroke=\"{stroke}\" stroke-width=\"{stroke_w}\"/>"
    );
    if culprit {
        // Top to bottom, the edge into the box crosses its label: a white halo keeps it legible.
        let halo = if flow == Flow::Down { " stroke=\"#fff\" stroke-width=\"4\" paint-order=\"stroke\"" } else { "" };
        let _ = write!(
            s,
            "<text x=\"{bx:.0}\" y=\"{:.0}\" fill=\"#b71c1c\" font-weight=\"700\"{halo}>CULPRIT · {}</text>",
            by - 6.0,
            escape(v.finding.as_str())
        );
    }
    let tx = bx + 8.0;
    let mut y = by + LINE + 2.0;
    let name = clip(&names.prose(&x.name), 34).into_owned();
    let _ = write!(s, "<text x=\"{tx:.0}\" y=\"{y:.0}\" font-weight=\"700\">{}</text>", escape(&name));
    if ops.len() > 1 {
        for op in ops.iter().take(MAX_OPS_LISTED) {
            y += LINE;
            let _ =
                write!(s, "<text x=\"{:.0}\" y=\"{y:.0}\" fill=\"#555\">· {}</text>", tx + 4.0, escape(&clip(op, 34)));
        }
        if ops.len() > MAX_OPS_LISTED {
            y += LINE;
            let _ = write!(
                s,
                "<text x=\"{:.0}\" y=\"{y:.0}\" fill=\"#555\">+{} more</text>",
                tx + 4.0,
                ops.len() - MAX_OPS_LISTED
            );
        }
    }
    y += LINE;
    let state = match (x.state, v.culprits.iter().chain(&v.culprit).find(|c| c.vertex_id == x.id)) {
        (VertexState::Culprit, Some(c)) if !c.subtasks.is_empty() && c.subtasks.len() < c.parallelism as usize => {
            let subs: Vec<String> = c.subtasks.iter().take(6).map(u32::to_string).collect();
            format!("culprit: subtask {} of {}", subs.join(", "), c.parallelism)
        }
        (state, _) => state.as_str().to_string(),
    };
    let _ = write!(s, "<text x=\"{tx:.0}\" y=\"{y:.0}\">×{} · {}</text>", x.parallelism, escape(&state));
    bar(s, tx, y + 5.0, "busy", x.busy_max, x.busy_max.map(busy_colour), None);
    let level = x.backpressured_max.map(backpressure_level);
    bar(s, tx, y + 5.0 + LINE + 4.0, "backpr.", x.backpressured_max, level.map(|l| level_colour(l).to_string()), level);
    s.push_str("</g>");
}

/// A labelled bar: `label`, a 100 px track filled to `ratio`, the percentage and level
/// written beside it (`unknown` without a value).
fn bar(s: &mut String, x: f64, y: f64, label: &str, ratio: Option<f64>, colour: Option<String>, level: Option<&str>) {
    let fill = ratio.unwrap_or(0.0).clamp(0.0, 1.0) * 100.0;
    let colour = colour.unwrap_or_else(|| "#bbb".into());
    let text = match (ratio, level) {
        (Some(_), Some(l)) => format!("{} {l}", pct(ratio)),
        _ => pct(ratio),
    };
    let _ = write!(
        s,
        "<text x=\"{x:.0}\" y=\"{:.0}\" font-size=\"11\">{label}</text><rect x=\"{:.0}\" y=\"{y:.0}\" width=\"100\" height=\"12\" fill=\"#eee\"/>\
         <rect x=\"{:.0}\" y=\"{y:.0}\" width=\"{fill:.0}\" height=\"12\" fill=\"{colour}\"/><text x=\"{:.0}\" y=\"{:.0}\" font-size=\"11\">{}</text>",
        y + 10.0,
        x + 50.0,
        x + 50.0,
        x + 156.0,
        y + 10.0,
        escape(&text)
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flinks_backpressure_levels_are_ok_to_10_low_to_50_then_high() {
        assert_eq!(backpressure_level(0.10), "OK");
        assert_eq!(backpressure_level(0.11), "LOW");
        assert_eq!(backpressure_level(0.50), "LOW");
        assert_eq!(backpressure_level(0.51), "HIGH");
        assert_eq!(busy_colour(0.0), "hsl(240,75%,45%)");
        assert_eq!(busy_colour(1.0), "hsl(0,75%,45%)");
    }

    #[test]
    fn markup_and_control_characters_are_escaped() {
        assert_eq!(escape("<script>\"a\"&'b'\u{1b}"), "&lt;script&gt;&quot;a&quot;&amp;&#39;b&#39;\u{FFFD}");
    }
}
