//! The profile of the culprit's vertex (its flame graph's top frames) in words, one
//! heading and one line a frame; the renderers escape them as their format needs. Pure.

use crate::model::flamegraph::{Profile, ProfileKind, TopFrame, class_and_method, simple_class};
use crate::render::words::numbers::pct;

/// Frames a rendering shows (the verdict keeps up to [`crate::model::flamegraph::TOP_FRAMES`]).
pub const SHOWN_FRAMES: usize = 3;

/// Which samples, in words.
pub fn kind(k: ProfileKind) -> &'static str {
    match k {
        ProfileKind::Full => "on- and off-CPU",
        ProfileKind::OnCpu => "on-CPU",
        ProfileKind::OffCpu => "off-CPU",
    }
}

/// `Profile of enrich -> score: top frames of 200 off-CPU samples (Flink flame graph)`;
/// `vertex` is the name as the renderer writes it.
pub fn heading(p: &Profile, vertex: &str) -> String {
    format!(
        "Profile of {vertex}: top frames of {} {} sample{} (Flink flame graph)",
        p.samples,
        kind(p.kind),
        if p.samples == 1 { "" } else { "s" }
    )
}

/// `in ScoreMap.map (operator score): 100% (200 samples) at BackpressureLab.sleepMicros:109 →
/// jdk.internal.misc.Unsafe.park:-2`: first the job's function the frame runs in and the
/// chain's operator that is (what a short rendering keeps), then the way from the nearest
/// job frame to the frame. Without a function, the frame first and the nearest job frame
/// (`jdk.internal.misc.Unsafe.park:-2: 100% (200 samples), in lab.Job.sleep:109`).
pub fn frame(f: &TopFrame) -> String {
    let samples = format!("{} ({} samples)", pct(f.share_ratio), f.self_samples);
    match (&f.function, &f.user_frame) {
        (Some(function), user) => {
            let operator = f.operator.as_deref().map(|op| format!(" (operator {op})")).unwrap_or_default();
            let way = match user {
                Some(u) if *u != f.frame => format!("{} → {}", short(u), f.frame),
                _ => f.frame.clone(),
            };
            format!("in {}{operator}: {samples} at {way}", function_name(function))
        }
        (None, Some(u)) if *u != f.frame => format!("{}: {samples}, in {u}", f.frame),
        (None, _) => format!("{}: {samples}", f.frame),
    }
}

/// A frame by its class's own name, method and line (`lab.BackpressureLab.sleepMicros:109`
/// → `BackpressureLab.sleepMicros:109`); no line for a native method's (`Unsafe.park:-2`
/// → `Unsafe.park`).
pub fn short(frame: &str) -> String {
    let (class, method) = class_and_method(frame);
    let line = frame.rsplit_once(':').and_then(|(_, l)| l.parse::<i64>().ok()).filter(|l| *l >= 0);
    let name = format!("{}.{method}", simple_class(class));
    match line {
        Some(l) => format!("{name}:{l}"),
        None => name,
    }
}

/// A function by its class's own name and method (`lab.BackpressureLab$ScoreMap.map:582` →
/// `ScoreMap.map`).
pub fn function_name(frame: &str) -> String {
    let (class, method) = class_and_method(frame);
    format!("{}.{method}", simple_class(class))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_read_by_their_class_own_name_method_and_line_but_a_native_ones() {
        assert_eq!(short("lab.BackpressureLab.sleepMicros:109"), "BackpressureLab.sleepMicros:109");
        assert_eq!(short("jdk.internal.misc.Unsafe.park:-2"), "Unsafe.park");
        assert_eq!(short("com.acme.Job$1.map:12"), "Job.map:12");
        assert_eq!(function_name("lab.BackpressureLab$ScoreMap.map:582"), "ScoreMap.map");
        assert_eq!(function_name("Job.lambda$main$0"), "Job.lambda$main$0");
    }

    #[test]
    fn a_frame_reads_with_its_share_samples_and_the_user_code_it_runs_for() {
        let f = TopFrame {
            frame: "jdk.internal.misc.Unsafe.park:-2".into(),
            self_samples: 200,
            share_ratio: 1.0,
            user_frame: Some("lab.BackpressureLab.sleepMicros:109".into()),
            function: Some("lab.BackpressureLab$ScoreMap.map:582".into()),
            operator: Some("score".into()),
        };
        assert_eq!(
            frame(&f),
            "in ScoreMap.map (operator score): 100% (200 samples) at BackpressureLab.sleepMicros:109 → jdk.internal.misc.Unsafe.park:-2"
        );
        // No operator of the chain fits: the function alone.
        let unmapped = TopFrame { operator: None, ..f.clone() };
        assert_eq!(
            frame(&unmapped),
            "in ScoreMap.map: 100% (200 samples) at BackpressureLab.sleepMicros:109 → jdk.internal.misc.Unsafe.park:-2"
        );
        // The hot frame is the job's own code: the frame itself, with its line.
        let own_code = TopFrame {
            frame: "lab.BackpressureLab$ScoreMap.map:591".into(),
            user_frame: Some("lab.BackpressureLab$ScoreMap.map:591".into()),
            ..f.clone()
        };
        assert_eq!(
            frame(&own_code),
            "in ScoreMap.map (operator score): 100% (200 samples) at lab.BackpressureLab$ScoreMap.map:591"
        );
        // No function (no Flink frame calls job code on the stack): the nearest job frame.
        let no_function = TopFrame { function: None, operator: None, ..f.clone() };
        assert_eq!(
            frame(&no_function),
            "jdk.internal.misc.Unsafe.park:-2: 100% (200 samples), in lab.BackpressureLab.sleepMicros:109"
        );
        let framework_only = TopFrame { user_frame: None, ..no_function };
        assert_eq!(frame(&framework_only), "jdk.internal.misc.Unsafe.park:-2: 100% (200 samples)");
    }
}
