//! The profile of the culprit's vertex (its flame graph's top frames) in words, one
//! heading and one line a frame; the renderers escape them as their format needs. Pure.

use crate::model::flamegraph::{Profile, ProfileKind, TopFrame};
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

/// `jdk.internal.misc.Unsafe.park:-2: 100% (200 samples), in lab.BackpressureLab.sleepMicros:109`.
pub fn frame(f: &TopFrame) -> String {
    let place = match &f.user_frame {
        Some(u) if *u != f.frame => format!(", in {u}"),
        _ => String::new(),
    };
    format!("{}: {} ({} samples){place}", f.frame, pct(f.share_ratio), f.self_samples)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_reads_with_its_share_samples_and_the_user_code_it_runs_for() {
        let f = TopFrame {
            frame: "jdk.internal.misc.Unsafe.park:-2".into(),
            self_samples: 200,
            share_ratio: 1.0,
            user_frame: Some("lab.BackpressureLab.sleepMicros:109".into()),
        };
        assert_eq!(
            frame(&f),
            "jdk.internal.misc.Unsafe.park:-2: 100% (200 samples), in lab.BackpressureLab.sleepMicros:109"
        );
        let own = TopFrame { user_frame: Some(f.frame.clone()), ..f };
        assert_eq!(frame(&own), "jdk.internal.misc.Unsafe.park:-2: 100% (200 samples)");
    }
}
