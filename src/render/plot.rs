//! Server-side SVG plots for the page, drawn with `plotters` (its SVG backend: no fonts
//! or files are read; text is left to the browser). Pure.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::model::verdict::Verdict;
use crate::render::html::{backpressure_level, escape};
use crate::render::names::{Names, clip};

/// Width of a plot, px.
const WIDTH: u32 = 900;
/// Height of one vertex's pair of bars, px.
const ROW: u32 = 30;
/// Widest vertex label, characters.
const LABEL: usize = 32;

/// An HSL colour (hue in degrees, saturation and lightness 0–1) as RGB.
fn hsl(h: f64, s: f64, l: f64) -> RGBColor {
    let c = (1.0 - (2.0 * l - 1.0).abs()) * s;
    let hp = (h / 60.0) % 6.0;
    let x = c * (1.0 - (hp % 2.0 - 1.0).abs());
    let (r, g, b) = match hp as u32 {
        0 => (c, x, 0.0),
        1 => (x, c, 0.0),
        2 => (0.0, c, x),
        3 => (0.0, x, c),
        4 => (x, 0.0, c),
        _ => (c, 0.0, x),
    };
    let m = l - c / 2.0;
    let byte = |v: f64| ((v + m) * 255.0).round().clamp(0.0, 255.0) as u8;
    RGBColor(byte(r), byte(g), byte(b))
}

fn level_rgb(ratio: f64) -> RGBColor {
    match backpressure_level(ratio) {
        "OK" => RGBColor(0x2e, 0x7d, 0x32),
        "LOW" => RGBColor(0xef, 0x8f, 0x00),
        _ => RGBColor(0xc6, 0x28, 0x28),
    }
}

/// Busy and backpressured time of every vertex (max over subtasks, over the window), as
/// pairs of horizontal bars with the value written at each bar's end; the first vertex on
/// top. An SVG element, or a sentence when it cannot be drawn.
pub fn vertex_bars(v: &Verdict, names: &Names) -> String {
    // A plotting library's panic on an odd input must not take the page (or the server)
    // down: it becomes the sentence.
    let drawn = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| draw_vertex_bars(v, names)))
        .unwrap_or_else(|_| Err("the plotting library failed".into()));
    match drawn {
        Ok(svg) => svg,
        Err(e) => format!("<p class=\"note\">The plot could not be drawn: {}</p>", escape(&e)),
    }
}

fn draw_vertex_bars(v: &Verdict, names: &Names) -> Result<String, String> {
    let vertices = &v.graph.vertices;
    let n = vertices.len();
    let height = 70 + ROW * n as u32;
    let labels: Vec<String> = vertices.iter().map(|x| clip(&names.prose(&x.name), LABEL).into_owned()).collect();
    // Three segments a vertex (busy, backpressured, gap), the first vertex at the top.
    let seg = |i: usize, k: i32| (3 * (n - 1 - i)) as i32 + 2 - k;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let mut chart = ChartBuilder::on(&root)
            .margin(8)
            .x_label_area_size(36)
            .y_label_area_size(230)
            .build_cartesian_2d(0f64..145f64, (0..3 * n as i32).into_segmented())
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .x_desc("% of the time (max over subtasks)")
            .x_labels(12)
            .x_label_formatter(&|x| if *x <= 100.0 { format!("{x:.0}%") } else { String::new() })
            .y_labels(1)
            .y_label_formatter(&|_| String::new())
            .draw()
            .map_err(|e| e.to_string())?;
        let busy = vertices.iter().enumerate().filter_map(|(i, x)| {
            let r = x.busy_max?;
            let colour = hsl(240.0 * (1.0 - r.clamp(0.0, 1.0)), 0.75, 0.45);
            Some(Rectangle::new(
                [(0.0, SegmentValue::Exact(seg(i, 0))), (r * 100.0, SegmentValue::Exact(seg(i, 0) + 1))],
                colour.filled(),
            ))
        });
        chart
            .draw_series(busy)
            .map_err(|e| e.to_string())?
            .label("busy (blue idle … red busy)")
            .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], hsl(0.0, 0.75, 0.45).filled()));
        let bp = vertices.iter().enumerate().filter_map(|(i, x)| {
            let r = x.backpressured_max?;
            Some(Rectangle::new(
                [(0.0, SegmentValue::Exact(seg(i, 1))), (r * 100.0, SegmentValue::Exact(seg(i, 1) + 1))],
                level_rgb(r).filled(),
            ))
        });
        chart
            .draw_series(bp)
            .map_err(|e| e.to_string())?
            .label("backpressured (OK ≤ 10% < LOW ≤ 50% < HIGH)")
            .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], level_rgb(1.0).filled()));
        let values = vertices.iter().enumerate().flat_map(|(i, x)| {
            let busy = match x.busy_max {
                Some(r) => format!("busy {:.0}%", r * 100.0),
                None => "busy unknown".into(),
            };
            let bp = match x.backpressured_max {
                Some(r) => format!("backpressured {:.0}% {}", r * 100.0, backpressure_level(r)),
                None => "backpressured unknown".into(),
            };
            let at = |r: Option<f64>| r.unwrap_or(0.0).clamp(0.0, 1.0) * 100.0 + 1.0;
            // A text hangs down from its point: the top of its bar's segment.
            [
                Text::new(busy, (at(x.busy_max), SegmentValue::Exact(seg(i, 0) + 1)), ("sans-serif", 11).into_font()),
                Text::new(
                    bp,
                    (at(x.backpressured_max), SegmentValue::Exact(seg(i, 1) + 1)),
                    ("sans-serif", 11).into_font(),
                ),
            ]
        });
        chart.draw_series(values).map_err(|e| e.to_string())?;
        // Each vertex's name beside its pair of bars, level with the line between them.
        let style = TextStyle::from(("sans-serif", 12).into_font()).pos(Pos::new(HPos::Right, VPos::Center));
        for (i, label) in labels.iter().enumerate() {
            let (x, y) = chart.backend_coord(&(0.0, SegmentValue::Exact(seg(i, 0))));
            root.draw(&Text::new(label.clone(), (x - 8, y), style.clone())).map_err(|e| e.to_string())?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(|e| e.to_string())?;
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hsl_converts_the_busy_scale_ends() {
        assert_eq!(hsl(0.0, 0.75, 0.45), RGBColor(201, 29, 29));
        assert_eq!(hsl(240.0, 0.75, 0.45), RGBColor(29, 29, 201));
    }
}
