//! A vertex's flame graph as Flink REST gives it (`GET /jobs/:jid/vertices/:vid/flamegraph`,
//! with `rest.flamegraph.enabled: true`), read into a tree, and the profile a verdict
//! carries: the frames that hold the most samples themselves.
//!
//! Flink's answer is `{"endTimestamp": ms, "data": {"name": "root", "value": N,
//! "children": [...]}}` (`VertexFlameGraph`); `endTimestamp` -1 means the vertex's tasks
//! ended, -2 that flame graphs are disabled, -3 that Flink is still taking its first
//! samples, and then there is no `data`. A tree without children (a type of sample the
//! threads never were in, e.g. `on_cpu` for a thread parked in `parkNanos`) has no frames.
//!
//! Pure data.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Frames kept in a profile.
pub const TOP_FRAMES: usize = 5;

/// Frame prefixes that are not the job's own code: the JDK's and Flink's. The "where" of a
/// frame is the nearest frame on its stack (itself included) outside them.
pub const FRAMEWORK_PREFIXES: [&str; 7] =
    ["java.", "javax.", "jdk.", "sun.", "com.sun.", "org.apache.flink.", "scala."];

/// One node of a flame graph: a frame (`lab.BackpressureLab$ScoreMap.map:591`, with its
/// line), the samples of stacks through it, and the frames it called.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct FrameNode {
    pub name: String,
    pub value: u64,
    #[serde(default)]
    pub children: Vec<FrameNode>,
}

/// What one flame-graph answer says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FlameGraph {
    /// Samples: the tree under `root` (whose value is the total), taken up to `end_ms`.
    Ready { end_ms: i64, root: FrameNode },
    /// No samples yet (`endTimestamp` -3, or 0 / an empty tree): ask again later.
    Waiting,
    /// `rest.flamegraph.enabled` is false on the cluster (`endTimestamp` -2).
    Disabled,
    /// The vertex's tasks are no longer running (`endTimestamp` -1).
    Terminated,
}

/// Reads a flame-graph answer. Errors: one sentence when the body is not one.
pub fn parse(text: &str) -> Result<FlameGraph, String> {
    #[derive(Deserialize)]
    struct Wire {
        #[serde(rename = "endTimestamp")]
        end_timestamp: i64,
        #[serde(default)]
        data: Option<FrameNode>,
    }
    let wire: Wire = serde_json::from_str(text).map_err(|e| {
        format!(
            "not a Flink flame graph (expected `endTimestamp` and `data` with `name`, `value`, `children`): {}",
            crate::model::foreign::json_error(&e)
        )
    })?;
    Ok(match (wire.end_timestamp, wire.data) {
        (-2, _) => FlameGraph::Disabled,
        (-1, _) => FlameGraph::Terminated,
        (end, Some(root)) if end > 0 && root.value > 0 && !root.children.is_empty() => {
            FlameGraph::Ready { end_ms: end, root }
        }
        _ => FlameGraph::Waiting,
    })
}

/// Which samples a flame graph counts (Flink's `type` parameter).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ProfileKind {
    /// Every sampled thread state: on-CPU and off-CPU together.
    Full,
    /// Threads that were running (`RUNNABLE`, `NEW`).
    OnCpu,
    /// Threads that were waiting (`TIMED_WAITING`, `WAITING`, `BLOCKED`).
    OffCpu,
}

impl ProfileKind {
    /// The `type` parameter of the request.
    pub fn as_str(self) -> &'static str {
        match self {
            ProfileKind::Full => "full",
            ProfileKind::OnCpu => "on_cpu",
            ProfileKind::OffCpu => "off_cpu",
        }
    }
}

/// A frame that holds samples itself (the top of their stacks).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TopFrame {
    /// The frame as Flink names it, with its line (`jdk.internal.misc.Unsafe.park:-2`).
    pub frame: String,
    /// Samples whose stack ends in this frame (its value less its children's), summed over
    /// every place it appears in the tree.
    pub self_samples: u64,
    /// `self_samples` over every sample of the flame graph, ratio.
    pub share_ratio: f64,
    /// The nearest frame of the job's own code on its stack (itself, or its nearest caller
    /// outside `java.`, `javax.`, `jdk.`, `sun.`, `com.sun.`, `org.apache.flink.`,
    /// `scala.`), from the place in the tree with the most of its samples; absent when the
    /// whole stack is JDK and Flink.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_frame: Option<String>,
}

/// The profile of the culprit's vertex at alert time (added field of the verdict).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Profile {
    pub vertex_id: String,
    pub vertex_name: String,
    /// Which samples: `full` (what a live diagnosis asks for), `on_cpu` or `off_cpu`.
    #[serde(rename = "type")]
    pub kind: ProfileKind,
    /// Samples in the flame graph (its root's value).
    pub samples: u64,
    /// When Flink took the last sample, RFC 3339; absent for a recorded answer without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
    /// The frames with the most self samples, most first (at most [`TOP_FRAMES`]).
    pub top_frames: Vec<TopFrame>,
}

/// Whether `frame` is the JDK's or Flink's, not the job's own code.
pub fn is_framework(frame: &str) -> bool {
    FRAMEWORK_PREFIXES.iter().any(|p| frame.starts_with(p))
}

/// The `n` frames with the most self samples (value less the children's values), summed
/// by frame name over the tree; ties by name. Each with its share of the root's samples
/// and the nearest user-code frame of the path that contributes most. Empty for a tree
/// without samples.
pub fn top_frames(root: &FrameNode, n: usize) -> Vec<TopFrame> {
    // name → (self samples, the largest single contribution and its user frame)
    let mut by_name: BTreeMap<&str, (u64, u64, Option<&str>)> = BTreeMap::new();
    let mut stack: Vec<(&FrameNode, Option<&str>)> = root.children.iter().map(|c| (c, None)).collect();
    while let Some((node, user_above)) = stack.pop() {
        let user = if is_framework(&node.name) { user_above } else { Some(node.name.as_str()) };
        let children: u64 = node.children.iter().map(|c| c.value).sum();
        let own = node.value.saturating_sub(children);
        if own > 0 {
            let entry = by_name.entry(node.name.as_str()).or_insert((0, 0, None));
            entry.0 += own;
            if own > entry.1 {
                entry.1 = own;
                entry.2 = user;
            }
        }
        stack.extend(node.children.iter().map(|c| (c, user)));
    }
    let total = root.value.max(1) as f64;
    let mut frames: Vec<TopFrame> = by_name
        .into_iter()
        .map(|(name, (own, _, user))| TopFrame {
            frame: name.to_string(),
            self_samples: own,
            share_ratio: crate::model::verdict::round_sig(own as f64 / total),
            user_frame: user.map(str::to_string),
        })
        .collect();
    frames.sort_by(|a, b| b.self_samples.cmp(&a.self_samples).then_with(|| a.frame.cmp(&b.frame)));
    frames.truncate(n);
    frames
}

/// The profile of a vertex from a flame graph with samples; `None` for one without.
pub fn profile(
    vertex_id: &str,
    vertex_name: &str,
    kind: ProfileKind,
    graph: &FlameGraph,
    at: impl Fn(i64) -> String,
) -> Option<Profile> {
    let FlameGraph::Ready { end_ms, root } = graph else { return None };
    Some(Profile {
        vertex_id: vertex_id.to_string(),
        vertex_name: vertex_name.to_string(),
        kind,
        samples: root.value,
        at: Some(at(*end_ms)),
        top_frames: top_frames(root, TOP_FRAMES),
    })
}

/// The culprit whose vertex a profile is taken of: an `unexplained` finding's, or a
/// chained vertex's (more than one operator), where the metrics cannot say which operator
/// or which code holds the job back. `None` otherwise.
pub fn wants_profile(v: &crate::model::verdict::Verdict) -> Option<&crate::model::verdict::Culprit> {
    let culprit = v.culprit.as_ref()?;
    (v.finding == crate::model::verdict::Finding::Unexplained || culprit.operators.len() > 1).then_some(culprit)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CAPTURE: &str = include_str!(
        "../../examples/captures/chained-culprit-flamegraph/rest/vertex-1-enrich_-_score-flamegraph-off_cpu.json"
    );

    #[test]
    fn the_captured_off_cpu_flame_graph_is_read_with_its_200_samples() {
        let FlameGraph::Ready { end_ms, root } = parse(CAPTURE).unwrap() else { panic!("not ready") };
        assert_eq!(end_ms, 1796211547153);
        assert_eq!(root.name, "root");
        assert_eq!(root.value, 200);
        assert_eq!(root.children[0].name, "java.lang.Thread.run:840");
    }

    #[test]
    fn the_captured_top_frame_is_the_park_under_score_with_every_sample() {
        // Hand check (python over the file): the tree is one path of 31 frames, each with
        // value 200, from java.lang.Thread.run:840 down to jdk.internal.misc.Unsafe.park:-2;
        // every frame's children hold its 200 samples but the last one's, so the only frame
        // with self samples is Unsafe.park with 200 - 0 = 200, a share of 200 / 200 = 1.
        // Its nearest frame outside the JDK and Flink, going up: LockSupport.parkNanos:376
        // (java.), then lab.BackpressureLab.sleepMicros:109, called by ScoreMap.map:591.
        let FlameGraph::Ready { root, .. } = parse(CAPTURE).unwrap() else { panic!("not ready") };
        let top = top_frames(&root, 5);
        assert_eq!(
            top,
            [TopFrame {
                frame: "jdk.internal.misc.Unsafe.park:-2".into(),
                self_samples: 200,
                share_ratio: 1.0,
                user_frame: Some("lab.BackpressureLab.sleepMicros:109".into()),
            }]
        );
    }

    #[test]
    fn self_samples_are_a_frames_value_less_its_childrens_summed_over_the_tree() {
        // root 10 = a 6 + c 4. a 6: self 6 - 5 = 1, calls lab.X.f 5 (self 5 - 2 = 3) which
        // calls java.P.park 2 (self 2). c (org.apache.flink.C) 4 calls java.P.park 4 (self 4).
        // park: 2 + 4 = 6 (share 0.6), its user frame from the larger place (4, under
        // org.apache.flink.C: none); lab.X.f 3 (0.3) is its own user frame; a 1 (0.1).
        let root = parse(
            r#"{"endTimestamp":5,"data":{"name":"root","value":10,"children":[
              {"name":"a","value":6,"children":[{"name":"lab.X.f","value":5,"children":[{"name":"java.P.park","value":2}]}]},
              {"name":"org.apache.flink.C","value":4,"children":[{"name":"java.P.park","value":4}]}]}}"#,
        )
        .unwrap();
        let FlameGraph::Ready { root, .. } = root else { panic!("not ready") };
        let top = top_frames(&root, 2);
        let got: Vec<(&str, u64, f64, Option<&str>)> =
            top.iter().map(|f| (f.frame.as_str(), f.self_samples, f.share_ratio, f.user_frame.as_deref())).collect();
        assert_eq!(got, [("java.P.park", 6, 0.6, None), ("lab.X.f", 3, 0.3, Some("lab.X.f"))]);
    }

    #[test]
    fn disabled_waiting_terminated_and_empty_answers_have_no_samples() {
        assert_eq!(parse(r#"{"endTimestamp":-2}"#), Ok(FlameGraph::Disabled));
        assert_eq!(parse(r#"{"endTimestamp":-1}"#), Ok(FlameGraph::Terminated));
        assert_eq!(parse(r#"{"endTimestamp":-3}"#), Ok(FlameGraph::Waiting));
        assert_eq!(
            parse(r#"{"endTimestamp":0,"data":{"name":"root","value":0,"children":[]}}"#),
            Ok(FlameGraph::Waiting)
        );
        assert_eq!(
            parse(r#"{"endTimestamp":1796211547153,"data":{"name":"root","value":0,"children":[]}}"#),
            Ok(FlameGraph::Waiting)
        );
        assert!(parse("<html>").is_err());
    }
}
