//! The verdict's picture, for where the alert is (Slack, Teams, Discord, email,
//! PagerDuty): the answer in a few lines, the job graph of the verdict page with the
//! culprit outlined ([`html::graph_svg`], laid out top to bottom for a phone's narrow
//! screen) and the busy / backpressured strip, as a PNG. Pure: an SVG string made here,
//! rasterized by `resvg`, with text only from the fonts bundled in `assets/fonts`
//! (Liberation Sans, SIL OFL 1.1, `assets/fonts/LICENSE-OFL.txt`); system fonts are never
//! read, so the picture is the same on every machine and a machine without fonts still
//! gets its text.
//!
//! The picture is [`WIDTH`] px wide (400 px at twice a phone's pixel density): readable
//! shown 400 px wide. A graph too large for it at [`MIN_SCALE`] shows the culprit and its
//! neighbours (the page has the whole graph); the strip lists at most [`STRIP_ROWS`]
//! vertices, the culprits first and then the busiest.

use std::fmt::Write as _;
use std::sync::{Arc, LazyLock};

use crate::model::verdict::{Graph, GraphVertex, Verdict, VertexState};
use crate::render::html::{self, Flow, backpressure_level, busy_colour, escape};
use crate::render::names::{Names, clip};
use crate::render::text::wrap;

/// The picture's width in SVG units (CSS px); the PNG is [`DENSITY`] times as wide.
pub const UNITS: f64 = 400.0;
/// Pixels per unit: twice a phone's CSS pixel, so the picture is sharp at 400 px.
pub const DENSITY: f32 = 2.0;
/// The PNG's width, px.
pub const WIDTH: u32 = 800;
/// The smallest scale at which the graph's 12 px labels stay readable (≈ 8 px on a phone);
/// a graph that would be drawn smaller (too wide, or too deep for [`MAX_GRAPH_UNITS`]) is
/// cut to the culprit's neighbourhood.
pub const MIN_SCALE: f64 = 0.6;
/// The tallest the graph may be, in units (a very deep graph is scaled down to it).
pub const MAX_GRAPH_UNITS: f64 = 1600.0;
/// Vertices listed in the strip.
pub const STRIP_ROWS: usize = 16;
/// The culprit's outline on the page and in the picture.
pub const CULPRIT_RGB: [u8; 3] = [0xb7, 0x1c, 0x1c];
/// What the picture shows, for the `alt` text of destinations that show it by its link.
pub const ALT_TEXT: &str = "culprit: the job graph with the culprit marked, busy and backpressured time";
/// The fonts' family: every `font-family` of the page (`system-ui, sans-serif`) and of the
/// plots (`sans-serif`) resolves to it.
const FAMILY: &str = "Liberation Sans";
static REGULAR: &[u8] = include_bytes!("../../assets/fonts/LiberationSans-Regular.ttf");
static BOLD: &[u8] = include_bytes!("../../assets/fonts/LiberationSans-Bold.ttf");
const MARGIN: f64 = 12.0;

/// Why a picture could not be made.
#[derive(Debug, thiserror::Error)]
pub enum PictureError {
    #[error("the picture's SVG does not parse: {0}")]
    Svg(String),
    #[error("the picture is too large to draw ({0} × {1} px)")]
    Size(u32, u32),
    #[error("the PNG could not be encoded: {0}")]
    Encode(String),
}

/// The bundled fonts, loaded once (from the binary's own bytes: no file is read).
static FONTS: LazyLock<Arc<resvg::usvg::fontdb::Database>> = LazyLock::new(|| {
    let mut db = resvg::usvg::fontdb::Database::new();
    for face in [REGULAR, BOLD] {
        db.load_font_source(resvg::usvg::fontdb::Source::Binary(Arc::new(face)));
    }
    db.set_sans_serif_family(FAMILY);
    db.set_serif_family(FAMILY);
    db.set_monospace_family(FAMILY);
    Arc::new(db)
});

/// The faces the picture's text is drawn with (the bundled ones, never the system's).
pub fn font_faces() -> usize {
    FONTS.len()
}

/// The verdict's picture as PNG bytes, [`WIDTH`] px wide.
pub fn png(v: &Verdict) -> Result<Vec<u8>, PictureError> {
    render_svg(&picture_svg(v))
}

/// Rasterizes an SVG document at [`DENSITY`] with the bundled fonts.
pub fn render_svg(svg: &str) -> Result<Vec<u8>, PictureError> {
    let options = resvg::usvg::Options { font_family: FAMILY.into(), fontdb: FONTS.clone(), ..Default::default() };
    let tree = resvg::usvg::Tree::from_str(svg, &options).map_err(|e| PictureError::Svg(e.to_string()))?;
    let size = tree.size().to_int_size().scale_by(DENSITY).ok_or(PictureError::Size(0, 0))?;
    let mut pixmap = resvg::tiny_skia::Pixmap::new(size.width(), size.height())
        .ok_or(PictureError::Size(size.width(), size.height()))?;
    pixmap.fill(resvg::tiny_skia::Color::WHITE);
    resvg::render(&tree, resvg::tiny_skia::Transform::from_scale(DENSITY, DENSITY), &mut pixmap.as_mut());
    pixmap.encode_png().map_err(|e| PictureError::Encode(e.to_string()))
}

/// The picture as an SVG document, [`UNITS`] wide: the answer, the graph, the strip.
pub fn picture_svg(v: &Verdict) -> String {
    let names = Names::of(v);
    let mut body = String::with_capacity(16 * 1024);
    let mut y = header(&mut body, v, &names);
    y = graph(&mut body, v, &names, y);
    y = strip(&mut body, v, &names, y);
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{UNITS:.0}\" height=\"{y:.0}\" viewBox=\"0 0 {UNITS:.0} {y:.0}\" font-family=\"sans-serif\" font-size=\"12\">\
         <rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>{body}</svg>"
    )
}

fn status_colour(v: &Verdict) -> &'static str {
    match v.status.as_str() {
        "culprit_found" => "#c62828",
        "no_single_culprit" => "#ef8f00",
        "no_backpressure" => "#2e7d32",
        _ => "#666",
    }
}

/// The status, the summary (at most four lines) and the job; returns the next free y.
fn header(s: &mut String, v: &Verdict, names: &Names) -> f64 {
    let _ = write!(
        s,
        "<text x=\"{MARGIN}\" y=\"22\" font-size=\"13\" font-weight=\"700\" fill=\"{}\">{} · {} · confidence {}</text>",
        status_colour(v),
        v.status.as_str().replace('_', " ").to_uppercase(),
        v.finding.as_str(),
        v.confidence.as_str()
    );
    let mut y = 22.0;
    let lines = wrap(&names.text(&v.summary), "", "", 50);
    for (i, line) in lines.iter().take(4).enumerate() {
        y += 19.0;
        let line = if i == 3 && lines.len() > 4 { format!("{}…", clip(line, 49)) } else { line.clone() };
        let _ = write!(
            s,
            "<text x=\"{MARGIN}\" y=\"{y:.0}\" font-size=\"15\" font-weight=\"700\">{}</text>",
            escape(&line)
        );
    }
    y += 17.0;
    let job = format!("job {} · {} s to {}", v.job.name, v.window_seconds, v.at);
    let _ = write!(
        s,
        "<text x=\"{MARGIN}\" y=\"{y:.0}\" font-size=\"11\" fill=\"#555\">{}</text>",
        escape(&clip(&job, 66))
    );
    y + 8.0
}

/// The page's graph, top to bottom, scaled to the width (cut to the culprit's
/// neighbourhood when too wide to read); returns the next free y.
fn graph(s: &mut String, v: &Verdict, names: &Names, y: f64) -> f64 {
    let Some(mut g) = html::graph_svg(v, names, Flow::Down) else { return y };
    let mut note = None;
    let scale = |g: &html::GraphSvg| (UNITS / g.width).min(1.0).min(MAX_GRAPH_UNITS / g.height);
    if scale(&g) < MIN_SCALE
        && let Some(near) = neighbourhood(v)
        && let Some(cut) = html::graph_svg(&near, names, Flow::Down)
    {
        note = Some(format!(
            "The culprit and its neighbours: {} of {} vertices.",
            near.graph.vertices.len(),
            v.graph.vertices.len()
        ));
        g = cut;
    }
    let k = scale(&g);
    let mut y = y;
    if let Some(note) = note {
        y += 14.0;
        let _ = write!(s, "<text x=\"{MARGIN}\" y=\"{y:.0}\" font-size=\"11\" fill=\"#555\">{}</text>", escape(&note));
    }
    // Centred: a narrow graph (one box a row) sits in the middle of the screen.
    let x = ((UNITS - g.width * k) / 2.0).max(0.0);
    let _ = write!(s, "<g transform=\"translate({x:.1},{y:.1}) scale({k:.4})\">{}</g>", g.svg);
    y + g.height * k
}

/// The verdict with only its culprits and the vertices next to them (and the edges among
/// those); `None` without a culprit in the graph.
fn neighbourhood(v: &Verdict) -> Option<Verdict> {
    let culprits: Vec<&str> =
        v.graph.vertices.iter().filter(|x| x.state == VertexState::Culprit).map(|x| x.id.as_str()).collect();
    if culprits.is_empty() {
        return None;
    }
    let mut keep: Vec<&str> = culprits.clone();
    for e in &v.graph.edges {
        if culprits.contains(&e.from.as_str()) {
            keep.push(&e.to);
        }
        if culprits.contains(&e.to.as_str()) {
            keep.push(&e.from);
        }
    }
    let vertices: Vec<GraphVertex> =
        v.graph.vertices.iter().filter(|x| keep.contains(&x.id.as_str())).cloned().collect();
    let edges = v
        .graph
        .edges
        .iter()
        .filter(|e| keep.contains(&e.from.as_str()) && keep.contains(&e.to.as_str()))
        .cloned()
        .collect();
    let mut near = v.clone();
    near.graph = Graph { vertices, edges, ..v.graph.clone() };
    Some(near)
}

/// Busy and backpressured time (max over subtasks) of the culprits and then the busiest
/// vertices, a row each with two bars across the width; returns the picture's height.
fn strip(s: &mut String, v: &Verdict, names: &Names, y: f64) -> f64 {
    let vertices = &v.graph.vertices;
    if vertices.is_empty() {
        return y + MARGIN;
    }
    let mut order: Vec<&GraphVertex> = vertices.iter().collect();
    let load = |x: &GraphVertex| x.busy_max.unwrap_or(0.0).max(x.backpressured_max.unwrap_or(0.0));
    order.sort_by(|a, b| {
        (b.state == VertexState::Culprit).cmp(&(a.state == VertexState::Culprit)).then(load(b).total_cmp(&load(a)))
    });
    let mut y = y + 26.0;
    let _ = write!(
        s,
        "<text x=\"{MARGIN}\" y=\"{y:.0}\" font-size=\"13\" font-weight=\"700\">Busy and backpressured (max over subtasks)</text>"
    );
    y += 6.0;
    for x in order.iter().take(STRIP_ROWS) {
        strip_row(s, x, names, y);
        y += 34.0;
    }
    if vertices.len() > STRIP_ROWS {
        y += 10.0;
        let _ = write!(
            s,
            "<text x=\"{MARGIN}\" y=\"{y:.0}\" font-size=\"11\" fill=\"#555\">+{} more vertices on the page</text>",
            vertices.len() - STRIP_ROWS
        );
    }
    y + MARGIN
}

fn strip_row(s: &mut String, x: &GraphVertex, names: &Names, y: f64) {
    let culprit = x.state == VertexState::Culprit;
    let pct = |r: Option<f64>| r.map(|r| format!("{:.0}%", r * 100.0)).unwrap_or_else(|| "unknown".into());
    let level = x.backpressured_max.map(backpressure_level).map(|l| format!(" {l}")).unwrap_or_default();
    let values = format!("busy {} · backpr. {}{level}", pct(x.busy_max), pct(x.backpressured_max));
    let (weight, fill) = if culprit { ("700", "#b71c1c") } else { ("400", "#1a1a1a") };
    let _ = write!(
        s,
        "<text x=\"{MARGIN}\" y=\"{:.0}\" font-weight=\"{weight}\" fill=\"{fill}\">{}</text>\
         <text x=\"{:.0}\" y=\"{:.0}\" font-size=\"11\" text-anchor=\"end\" fill=\"#333\">{}</text>",
        y + 13.0,
        escape(&clip(&names.prose(&x.name), 30)),
        UNITS - MARGIN,
        y + 13.0,
        escape(&values)
    );
    let track = UNITS - 2.0 * MARGIN;
    let busy_fill = x.busy_max.map(busy_colour).unwrap_or_else(|| "#bbb".into());
    let bp_fill = match x.backpressured_max.map(backpressure_level) {
        Some("OK") => "#2e7d32",
        Some("LOW") => "#ef8f00",
        Some(_) => "#c62828",
        None => "#bbb",
    };
    for (dy, ratio, colour) in [(17.0, x.busy_max, busy_fill.as_str()), (24.0, x.backpressured_max, bp_fill)] {
        let w = ratio.unwrap_or(0.0).clamp(0.0, 1.0) * track;
        let _ = write!(
            s,
            "<rect x=\"{MARGIN}\" y=\"{:.0}\" width=\"{track:.0}\" height=\"5\" fill=\"#eee\"/>\
             <rect x=\"{MARGIN}\" y=\"{:.0}\" width=\"{w:.1}\" height=\"5\" fill=\"{colour}\"/>",
            y + dy,
            y + dy
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(bytes: &[u8]) -> (u32, u32, Vec<u8>) {
        let mut reader = ::png::Decoder::new(bytes).read_info().expect("a PNG");
        let mut buf = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut buf).expect("a frame");
        assert_eq!(info.color_type, ::png::ColorType::Rgba);
        buf.truncate(info.buffer_size());
        (info.width, info.height, buf)
    }

    fn has_rgb(pixels: &[u8], rgb: [u8; 3]) -> bool {
        pixels.chunks_exact(4).any(|p| p[..3] == rgb && p[3] == 255)
    }

    #[test]
    fn the_fonts_are_the_two_bundled_faces() {
        assert_eq!(font_faces(), 2);
    }

    #[test]
    fn text_is_drawn_with_the_bundled_font_and_never_silently_dropped() {
        // Only text, black on white: without a font nothing but white would be drawn.
        let svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"120\" height=\"30\" font-family=\"system-ui,sans-serif\"><text x=\"4\" y=\"22\" font-size=\"20\">culprit</text></svg>";
        let (w, h, pixels) = decode(&render_svg(svg).unwrap());
        // 120 × 30 units at 2 px a unit.
        assert_eq!((w, h), (240, 60));
        let dark = pixels.chunks_exact(4).filter(|p| p[0] < 100 && p[3] == 255).count();
        assert!(dark > 200, "{dark} dark pixels");
    }

    #[test]
    fn a_capture_verdict_becomes_a_phone_wide_png_with_the_culprit_outlined() {
        let capture = crate::samples::captures::CAPTURES.iter().find(|c| c.name == "slow-sink").unwrap();
        let v = crate::samples::captures::verdict(capture).unwrap();
        assert!(v.graph.vertices.iter().any(|x| x.state == VertexState::Culprit));
        let (w, h, pixels) = decode(&png(&v).unwrap());
        assert_eq!(w, WIDTH);
        assert!(h > 400 && h < 8000, "{h}");
        assert!(has_rgb(&pixels, CULPRIT_RGB), "no pixel of the culprit's outline");
    }

    #[test]
    fn a_verdict_without_a_graph_is_still_a_picture_of_its_answer() {
        let capture = crate::samples::captures::CAPTURES.iter().find(|c| c.name == "healthy").unwrap();
        let mut v = crate::samples::captures::verdict(capture).unwrap();
        v.graph.vertices.clear();
        v.graph.edges.clear();
        let (w, _, pixels) = decode(&png(&v).unwrap());
        assert_eq!(w, WIDTH);
        assert!(!has_rgb(&pixels, CULPRIT_RGB));
        // The status line is green (no backpressure: #2e7d32).
        assert!(has_rgb(&pixels, [0x2e, 0x7d, 0x32]));
    }

    #[test]
    fn a_long_chain_is_cut_to_the_culprit_and_its_neighbours_and_stays_phone_sized() {
        let capture = crate::samples::captures::CAPTURES.iter().find(|c| c.name == "slow-sink").unwrap();
        let mut v = crate::samples::captures::verdict(capture).unwrap();
        let template = v.graph.vertices[0].clone();
        // 60 vertices in a chain, the culprit the 31st: drawn whole it would be 60 boxes
        // tall (≈ 60 × 130 units), far below MIN_SCALE in MAX_GRAPH_UNITS.
        v.graph.vertices = (0..60)
            .map(|i| GraphVertex {
                id: format!("v{i}"),
                name: format!("op-{i}"),
                state: if i == 30 { VertexState::Culprit } else { VertexState::Backpressured },
                ..template.clone()
            })
            .collect();
        v.graph.edges = (0..59)
            .map(|i| crate::model::verdict::GraphEdge {
                from: format!("v{i}"),
                to: format!("v{}", i + 1),
                ship_strategy: "FORWARD".into(),
            })
            .collect();
        v.graph.from_plan = true;
        let svg = picture_svg(&v);
        assert!(svg.contains("3 of 60 vertices"), "the culprit (op-30) and op-29, op-31");
        assert!(svg.contains(">op-29<") && svg.contains(">op-31<") && !svg.contains(">op-28<"));
        let (w, h, pixels) = decode(&png(&v).unwrap());
        assert_eq!(w, WIDTH);
        // Header ≈ 100, three boxes ≈ 3 × 98 + gaps, strip 16 rows × 34: under 1500 units.
        assert!(h < 3000, "{h} px");
        assert!(has_rgb(&pixels, CULPRIT_RGB));
    }

    #[test]
    fn markup_in_names_is_escaped_in_the_picture() {
        let capture = crate::samples::captures::CAPTURES.iter().find(|c| c.name == "slow-sink").unwrap();
        let mut v = crate::samples::captures::verdict(capture).unwrap();
        v.job.name = "<script>&\"".into();
        v.graph.vertices[0].name = "Sink: </text><x>".into();
        let svg = picture_svg(&v);
        assert!(!svg.contains("<script>") && !svg.contains("</text><x>"), "{svg}");
        assert!(png(&v).is_ok());
    }
}
