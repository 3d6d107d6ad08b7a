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
    /// The job's function the frame runs in: the nearest frame on its stack (itself
    /// included) of the job's own code that a Flink frame called — an operator's
    /// `processElement` calling the user's `map`, `flatMap` or `processElement`, a window
    /// operator its window function, a sink writer operator its writer, a partitioner its
    /// key selector. Absent when no Flink frame calls job code on its stack.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function: Option<String>,
    /// The operator of the vertex's chain `function` belongs to, when its class names one
    /// operator of the chain (`ScoreMap` → `score`) or the Flink operator that called it is
    /// of a kind only one operator of the chain has by its default name (`StreamMap` → the
    /// chain's only `Map`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator: Option<String>,
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

/// Whether `frame` is Flink's own (the runtime, its operators, its connectors).
fn is_flink(frame: &str) -> bool {
    frame.starts_with("org.apache.flink.")
}

/// Where a frame of the tree runs: the nearest job frame on its stack, and the job's
/// function with the Flink frame that called it.
#[derive(Clone, Copy, Default)]
struct Place<'a> {
    user: Option<&'a str>,
    function: Option<(&'a str, &'a str)>,
}

/// The `n` frames with the most self samples (value less the children's values), summed
/// by frame name over the tree; ties by name. Each with its share of the root's samples,
/// and from the path that contributes most, the nearest user-code frame, the job's
/// function it runs in and the operator of `operators` (the vertex's chain) that is.
/// Empty for a tree without samples.
pub fn top_frames(root: &FrameNode, n: usize, operators: &[String]) -> Vec<TopFrame> {
    // name → (self samples, the largest single contribution and its place)
    let mut by_name: BTreeMap<&str, (u64, u64, Place)> = BTreeMap::new();
    let mut stack: Vec<(&FrameNode, Option<&str>, Place)> =
        root.children.iter().map(|c| (c, None, Place::default())).collect();
    while let Some((node, caller, above)) = stack.pop() {
        let name = node.name.as_str();
        let place = if is_framework(name) {
            above
        } else {
            // Job code a Flink frame calls is a function of the job's (an operator's user
            // function, a key selector, a writer); job code calling job code, or called
            // back by the JDK (a lambda in a stream), runs inside the function it is in.
            let entered = caller.filter(|c| is_flink(c)).map(|c| (name, c));
            Place { user: Some(name), function: entered.or(above.function) }
        };
        let children: u64 = node.children.iter().map(|c| c.value).sum();
        let own = node.value.saturating_sub(children);
        if own > 0 {
            let entry = by_name.entry(name).or_insert((0, 0, Place::default()));
            entry.0 += own;
            if own > entry.1 {
                entry.1 = own;
                entry.2 = place;
            }
        }
        stack.extend(node.children.iter().map(|c| (c, Some(name), place)));
    }
    let total = root.value.max(1) as f64;
    let mut frames: Vec<TopFrame> = by_name
        .into_iter()
        .map(|(name, (own, _, place))| TopFrame {
            frame: name.to_string(),
            self_samples: own,
            share_ratio: crate::model::verdict::round_sig(own as f64 / total),
            user_frame: place.user.map(str::to_string),
            function: place.function.map(|(f, _)| f.to_string()),
            operator: place.function.and_then(|(f, caller)| operator_of(f, caller, operators)),
        })
        .collect();
    frames.sort_by(|a, b| b.self_samples.cmp(&a.self_samples).then_with(|| a.frame.cmp(&b.frame)));
    frames.truncate(n);
    frames
}

/// A frame's class and method: `lab.BackpressureLab$ScoreMap.map:591` →
/// (`lab.BackpressureLab$ScoreMap`, `map`).
pub fn class_and_method(frame: &str) -> (&str, &str) {
    let without_line = frame.rsplit_once(':').map_or(frame, |(f, _)| f);
    without_line.rsplit_once('.').unwrap_or(("", without_line))
}

/// A class's own name: the last of its nested names that is a name (`Job$ScoreMap` →
/// `ScoreMap`; `Job$1`, an anonymous class, → `Job`; `Job$$Lambda$12/0x…` → `Job`).
pub fn simple_class(class: &str) -> &str {
    let class = class.rsplit_once('.').map_or(class, |(_, c)| c);
    let class = class.split_once("$$Lambda").map_or(class, |(c, _)| c);
    class.rsplit('$').find(|part| part.chars().next().is_some_and(|c| c.is_alphabetic())).unwrap_or(class)
}

/// Letters and digits, lower-cased: how names are compared (`Score-Map` ~ `ScoreMap`).
fn folded(name: &str) -> String {
    name.chars().filter(|c| c.is_alphanumeric()).flat_map(char::to_lowercase).collect()
}

/// Shortest name of either side a match counts for: shorter ones (`a`, `id`) would match
/// by chance.
const MIN_NAME_MATCH: usize = 3;

/// Flink operators that call a user function, with the name Flink gives an operator of
/// that kind when the job does not name it (`DataStream.map` → `Map`, …; the window
/// operator's names begin with `Window(`).
const DEFAULT_OPERATOR_NAMES: [(&str, &str); 9] = [
    ("org.apache.flink.streaming.api.operators.StreamMap", "Map"),
    ("org.apache.flink.streaming.api.operators.StreamFlatMap", "Flat Map"),
    ("org.apache.flink.streaming.api.operators.StreamFilter", "Filter"),
    ("org.apache.flink.streaming.api.operators.ProcessOperator", "Process"),
    ("org.apache.flink.streaming.api.operators.KeyedProcessOperator", "KeyedProcess"),
    ("org.apache.flink.streaming.api.operators.StreamSink", "Sink: Unnamed"),
    ("org.apache.flink.streaming.api.operators.co.CoStreamMap", "Co-Map"),
    ("org.apache.flink.streaming.api.operators.co.CoStreamFlatMap", "Co-Flat Map"),
    ("org.apache.flink.streaming.runtime.operators.windowing.", "Window("),
];

/// The operator of `operators` (a chain's, in its order) the job's `function` belongs
/// to, called by the Flink frame `caller`: the one operator whose name the function's
/// class holds or is held in (`ScoreMap` → `score`; of several, the longest name), else
/// the one operator named as Flink names the kind `caller` is of. `None` when neither
/// picks one operator.
pub fn operator_of(function: &str, caller: &str, operators: &[String]) -> Option<String> {
    let class = folded(simple_class(class_and_method(function).0));
    let by_class: Vec<&String> = operators
        .iter()
        .filter(|op| {
            let op = folded(op);
            op.len() >= MIN_NAME_MATCH && class.len() >= MIN_NAME_MATCH && (class.contains(&op) || op.contains(&class))
        })
        .collect();
    let longest = by_class.iter().map(|op| folded(op).len()).max();
    let best: Vec<&&String> = by_class.iter().filter(|op| Some(folded(op).len()) == longest).collect();
    if let [one] = best.as_slice() {
        return Some((**one).clone());
    }
    let (_, default) = DEFAULT_OPERATOR_NAMES.iter().find(|(class, _)| caller.starts_with(class))?;
    let by_kind: Vec<&String> = operators
        .iter()
        .filter(|op| if default.ends_with('(') { op.starts_with(default) } else { op.as_str() == *default })
        .collect();
    match by_kind.as_slice() {
        [one] => Some((*one).clone()),
        _ => None,
    }
}

/// The profile of the culprit's vertex from a flame graph with samples, its frames mapped
/// to the operators of its chain; `None` for one without.
pub fn profile(
    culprit: &crate::model::verdict::Culprit,
    kind: ProfileKind,
    graph: &FlameGraph,
    at: impl Fn(i64) -> String,
) -> Option<Profile> {
    let FlameGraph::Ready { end_ms, root } = graph else { return None };
    Some(Profile {
        vertex_id: culprit.vertex_id.clone(),
        vertex_name: culprit.vertex_name.clone(),
        kind,
        samples: root.value,
        at: Some(at(*end_ms)),
        top_frames: top_frames(root, TOP_FRAMES, &culprit.operators),
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
        // The job's function it runs in: going down from the park, the first job frame a
        // Flink frame calls is ScoreMap.map:582, called by StreamMap.processElement:37
        // (EnrichKeyed.processElement:564, further down, is the chain's first operator,
        // which called into score through Flink's chaining output). ScoreMap holds
        // "score", not "enrich": the operator score.
        let FlameGraph::Ready { root, .. } = parse(CAPTURE).unwrap() else { panic!("not ready") };
        let top = top_frames(&root, 5, &["enrich".into(), "score".into()]);
        assert_eq!(
            top,
            [TopFrame {
                frame: "jdk.internal.misc.Unsafe.park:-2".into(),
                self_samples: 200,
                share_ratio: 1.0,
                user_frame: Some("lab.BackpressureLab.sleepMicros:109".into()),
                function: Some("lab.BackpressureLab$ScoreMap.map:582".into()),
                operator: Some("score".into()),
            }]
        );
        // The chain's operators unnamed (Flink's defaults): StreamMap calls it, and the
        // chain has one Map.
        let unnamed = top_frames(&root, 1, &["KeyedProcess".into(), "Map".into()]);
        assert_eq!(unnamed[0].operator.as_deref(), Some("Map"));
        // Names that say nothing of either: the function without an operator.
        let other = top_frames(&root, 1, &["a".into(), "b".into()]);
        assert_eq!((other[0].function.as_deref(), other[0].operator.as_deref()), (top[0].function.as_deref(), None));
    }

    /// A flame graph of one path, root first, each frame with `value` samples.
    fn path(frames: &[&str], value: u64) -> FrameNode {
        let mut node: Option<FrameNode> = None;
        for name in frames.iter().rev() {
            node = Some(FrameNode { name: name.to_string(), value, children: node.into_iter().collect() });
        }
        FrameNode { name: "root".into(), value, children: node.into_iter().collect() }
    }

    #[test]
    fn the_function_is_the_job_frame_a_flink_frame_calls_nearest_below_the_hot_frame() {
        let task = "org.apache.flink.streaming.runtime.tasks.StreamTask.processInput:656";
        // A window function called through Flink's window operator, calling a helper that
        // calls the JDK, which calls back a lambda of the job: the function stays the
        // window function (the JDK's callback is inside it), the nearest job frame is the
        // lambda.
        let window = path(
            &[
                task,
                "org.apache.flink.streaming.runtime.operators.windowing.WindowOperator.processElement:390",
                "org.apache.flink.streaming.runtime.operators.windowing.functions.InternalIterableProcessWindowFunction.process:50",
                "com.acme.Sessions$SessionStats.process:31",
                "com.acme.Sessions.helper:80",
                "java.util.ArrayList.forEach:1596",
                "com.acme.Sessions.lambda$helper$0:82",
                "java.util.HashMap.getNode:570",
            ],
            10,
        );
        let ops = [
            "Source: clicks".to_string(),
            "Window(TumblingEventTimeWindows(60000), EventTimeTrigger, SessionStats)".into(),
        ];
        let top = &top_frames(&window, 1, &ops)[0];
        assert_eq!(top.frame, "java.util.HashMap.getNode:570");
        assert_eq!(top.user_frame.as_deref(), Some("com.acme.Sessions.lambda$helper$0:82"));
        assert_eq!(top.function.as_deref(), Some("com.acme.Sessions$SessionStats.process:31"));
        // "sessionstats" is in the window operator's folded name.
        assert_eq!(top.operator.as_deref(), Some(ops[1].as_str()));

        // A sink writer of the job, called by Flink's SinkWriterOperator; the hot frame is
        // the job's own code: it is its own nearest job frame, inside the writer's write.
        let sink = path(
            &[
                task,
                "org.apache.flink.streaming.runtime.operators.sink.SinkWriterOperator.processElement:228",
                "com.acme.EsWriter.write:44",
                "com.acme.EsWriter.encode:90",
            ],
            8,
        );
        let top = &top_frames(&sink, 1, &["enrich".into(), "Sink: es-writer".into()])[0];
        assert_eq!(top.user_frame.as_deref(), Some("com.acme.EsWriter.encode:90"));
        assert_eq!(top.function.as_deref(), Some("com.acme.EsWriter.write:44"));
        assert_eq!(top.operator.as_deref(), Some("Sink: es-writer"));

        // Only JDK and Flink (a Flink connector's writer): no job function.
        let connector = path(
            &[
                task,
                "org.apache.flink.streaming.runtime.operators.sink.SinkWriterOperator.processElement:228",
                "org.apache.flink.connector.jdbc.internal.JdbcOutputFormat.flush:190",
                "java.net.SocketInputStream.read:140",
            ],
            5,
        );
        let top = &top_frames(&connector, 1, &["Sink: jdbc".into()])[0];
        assert_eq!((top.user_frame.as_deref(), top.function.as_deref(), top.operator.as_deref()), (None, None, None));

        // Job code on a thread no Flink frame calls it from (a client's callback thread):
        // a nearest job frame, no function.
        let callback =
            path(&["java.lang.Thread.run:840", "com.acme.Client$Callback.run:12", "java.lang.Object.wait:-2"], 3);
        let top = &top_frames(&callback, 1, &[])[0];
        assert_eq!(
            (top.user_frame.as_deref(), top.function.as_deref()),
            (Some("com.acme.Client$Callback.run:12"), None)
        );
    }

    #[test]
    fn an_operator_is_named_only_when_one_of_the_chain_fits() {
        let map = "org.apache.flink.streaming.api.operators.StreamMap.processElement:37";
        let ops = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
        // The class's name holds the operator's (folded: "score-v2" → "scorev2").
        assert_eq!(
            operator_of("a.Job$ScoreV2Map.map:1", map, &ops(&["parse", "score-v2"])).as_deref(),
            Some("score-v2")
        );
        // The operator's name holds the class's.
        assert_eq!(
            operator_of("a.Enricher.map:1", map, &ops(&["Enricher (geo)", "score"])).as_deref(),
            Some("Enricher (geo)")
        );
        // Of two that fit, the longer name: "scoremap" holds both "score" and "scoremap".
        assert_eq!(operator_of("a.ScoreMap.map:1", map, &ops(&["score", "scoremap"])).as_deref(), Some("scoremap"));
        // An anonymous class is named by its outer class; names under 3 letters never fit.
        assert_eq!(operator_of("a.Job$1.map:1", map, &ops(&["ab", "Job"])).as_deref(), Some("Job"));
        // No name fits: the operator kind, when one operator of the chain has its default
        // name; two Maps or none: unknown.
        assert_eq!(operator_of("a.X.map:1", map, &ops(&["Filter", "Map"])).as_deref(), Some("Map"));
        assert_eq!(operator_of("a.X.map:1", map, &ops(&["Map", "Map"])), None);
        let flat = "org.apache.flink.streaming.api.operators.StreamFlatMap.processElement:47";
        assert_eq!(operator_of("a.X.flatMap:1", flat, &ops(&["Map", "Flat Map"])).as_deref(), Some("Flat Map"));
        assert_eq!(operator_of("a.X.map:1", "org.apache.flink.Other.f:1", &ops(&["Map"])), None);
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
        let top = top_frames(&root, 2, &[]);
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
