//! Unit tests of step `locate`.
use super::*;
use crate::diagnose::testkit::*;
use crate::model::facts::Fact;
use crate::model::facts::locate::{MaxOver, Receiver, Undecided};
use crate::model::verdict::{Outcome, Status, VertexState};

/// The locate facts of `f`, in order (a detail may be several facts one after the other).
fn locate_facts(f: &Fact) -> Vec<&LocateFact> {
    match f {
        Fact::Locate(l) => vec![l],
        Fact::Seq(all) => all.iter().flat_map(locate_facts).collect(),
        _ => Vec::new(),
    }
}

/// `(name, p_max)` pairs as the list of backpressured vertices.
fn red(list: &[(&str, f64)]) -> Vec<Backpressured> {
    list.iter().map(|(v, p)| Backpressured { vertex: v.to_string(), backpressured_ratio: Some(*p) }).collect()
}

/// Source → parse → score → sink, two subtasks each, `HASH` into score.
fn line_job() -> SnapshotBuilder {
    SnapshotBuilder::new()
        .vertex("src", "Source: txn", 2)
        .vertex("parse", "parse", 2)
        .vertex("score", "score", 2)
        .vertex("sink", "Sink: store", 2)
        .edge("src", "parse", "FORWARD")
        .edge("parse", "score", "HASH")
        .edge("score", "sink", "FORWARD")
}

#[test]
fn a_busy_vertex_after_red_vertices_is_the_culprit() {
    let snap = line_job()
        .all_subtasks("src", 0.02, 0.97, 0.01, None)
        .all_subtasks("parse", 0.03, 0.95, 0.02, 1000.0)
        .subtask("score", 0, 0.98, 0.0, 0.02, 1000.0)
        .subtask("score", 1, 0.91, 0.0, 0.09, 1000.0)
        .all_subtasks("sink", 0.05, 0.0, 0.95, 1000.0)
        .build();
    let located = with_context(&snap, run);
    assert_eq!(located.culprits, ["score"]);
    assert_eq!(located.report.outcome, Outcome::Hit);
    // locate names the culprit; the finding comes from a later step.
    assert_eq!(located.report.finding, None);
    // b_max = max(0.98, 0.91) = 0.98 against the 0.5 threshold.
    let busy = evidence(&located.report.evidence, "busyTimeMsPerSecond");
    assert_eq!((busy.subject.as_str(), busy.value, busy.threshold), ("score", 0.98, Some(0.5)));
    // Both red vertices (src, parse) are upstream: the fix is not theirs.
    assert_eq!(
        located.report.not_the_fix[0],
        Fact::Locate(LocateFact::NotTheBackpressured {
            vertices: vec!["Source: txn".into(), "parse".into()],
            culprit: "score".into()
        })
    );
    // busy 0.98, backpressured max(0, 0) = 0, two red upstream, over both subtasks.
    assert_eq!(
        located.report.cause[0],
        Fact::Locate(LocateFact::Slowest {
            vertex: "score".into(),
            busy_ratio: Some(0.98),
            max_over: MaxOver { with_data: 2, subtasks: 2, detailed: true },
            backpressured_ratio: Some(0.0),
            upstream_red: 2,
            graph_free: false,
        })
    );
    assert!(located.network.is_empty());
}

#[test]
fn a_receiver_without_backpressure_data_is_not_judged_as_an_exchange_from_a_missing_value() {
    // src and parse red (p_max 0.97, 0.95); score reports busy 0.10 but no
    // backPressuredTimeMsPerSecond. Read as 0 it would be "neither backpressured nor
    // busy": the exchange parse → score. Unknown, it is not judged, and the step says so.
    let snap = line_job()
        .all_subtasks("src", 0.02, 0.97, 0.01, None)
        .all_subtasks("parse", 0.03, 0.95, 0.02, 1000.0)
        .all_subtasks("score", 0.10, None, 0.90, 1000.0)
        .all_subtasks("sink", 0.05, 0.0, 0.95, 1000.0)
        .build();
    let located = with_context(&snap, run);
    assert_ne!(located.report.finding, Some(Finding::Network));
    assert!(located.network.is_empty());
    // score is undecided (not read as 0 % backpressured); the red list is src 0.97, parse 0.95.
    assert_eq!(
        located.report.detail,
        Fact::Locate(LocateFact::Undecided {
            red: red(&[("Source: txn", 0.97), ("parse", 0.95)]),
            undecided: vec![Undecided { vertex: "score".into(), subtasks_reporting: None }],
            classic: false,
        })
    );
}

#[test]
fn a_culprit_with_a_subtask_without_busy_data_says_what_its_maximum_is_over() {
    // score: busy 0.98 and none; b_max = 0.98 over the 1 of 2 subtasks with data.
    let snap = line_job()
        .all_subtasks("src", 0.02, 0.97, 0.01, None)
        .all_subtasks("parse", 0.03, 0.95, 0.02, 1000.0)
        .subtask("score", 0, 0.98, 0.0, 0.02, 1000.0)
        .subtask("score", 1, None, 0.0, None, 1000.0)
        .all_subtasks("sink", 0.05, 0.0, 0.95, 1000.0)
        .build();
    let located = with_context(&snap, run);
    assert_eq!(located.culprits, ["score"]);
    assert!(
        matches!(
            &located.report.cause[0],
            Fact::Locate(LocateFact::Slowest {
                busy_ratio: Some(0.98),
                max_over: MaxOver { with_data: 1, subtasks: 2, detailed: true },
                ..
            })
        ),
        "{:?}",
        located.report.cause
    );
    assert!(
        located.report.cause[0].to_string().contains("busy 98% of the time (max over the 1 of 2 subtasks with data)"),
        "{:?}",
        located.report.cause
    );
}

#[test]
fn red_vertices_read_from_their_aggregates_still_point_at_the_culprit() {
    // src and parse carry only aggregates (p_max 0.97 and 0.95); the culprit is found
    // the same way, and its cause counts the subtasks from the detail (2).
    let snap = line_job()
        .all_subtasks("src", 0.02, 0.97, 0.01, None)
        .all_subtasks("parse", 0.03, 0.95, 0.02, 1000.0)
        .all_subtasks("score", 0.98, 0.0, 0.02, 1000.0)
        .all_subtasks("sink", 0.05, 0.0, 0.95, 1000.0)
        .aggregate_only(&["src", "parse", "sink"])
        .build();
    let located = with_context(&snap, run);
    assert_eq!(located.culprits, ["score"]);
    // score itself is detailed: both of its 2 subtasks report busy time.
    assert!(
        matches!(
            &located.report.cause[0],
            Fact::Locate(LocateFact::Slowest { max_over: MaxOver { with_data: 2, subtasks: 2, .. }, .. })
        ),
        "{:?}",
        located.report.cause
    );
    let red_p = evidence(&located.report.evidence[2..], "backPressuredTimeMsPerSecond");
    assert_eq!((red_p.subject.as_str(), red_p.value), ("Source: txn", 0.97));
}

#[test]
fn a_candidate_busy_exactly_at_the_threshold_is_busy_by_itself() {
    // b_max ≥ 0.5 (inclusive): 0.5 is busy by itself.
    let snap = line_job()
        .all_subtasks("src", 0.0, 0.6, 0.4, None)
        .all_subtasks("parse", 0.0, 0.6, 0.4, 100.0)
        .all_subtasks("score", 0.5, 0.0, 0.5, 100.0)
        .all_subtasks("sink", 0.0, 0.0, 1.0, 100.0)
        .build();
    assert_eq!(with_context(&snap, run).culprits, ["score"]);
}

#[test]
fn a_candidate_with_subtasks_missing_is_unknown_not_a_slow_exchange() {
    // score has parallelism 2 but only subtask 1 reports (busy 0.2 < 0.5, not red): the
    // missing subtask 0 may be the busy one, so nothing is concluded about the exchange.
    let snap = line_job()
        .all_subtasks("src", 0.1, 0.8, 0.1, None)
        .all_subtasks("parse", 0.1, 0.8, 0.1, 500.0)
        .subtask("score", 1, 0.2, 0.05, 0.75, 250.0)
        .all_subtasks("sink", 0.05, 0.0, 0.95, 500.0)
        .build();
    let located = with_context(&snap, run);
    assert_eq!(located.report.outcome, Outcome::NoData);
    assert!(located.network.is_empty() && located.culprits.is_empty());
    assert!(
        matches!(&located.report.detail, Fact::Locate(LocateFact::Undecided { undecided, classic: false, .. })
            if undecided == &[Undecided { vertex: "score".into(), subtasks_reporting: Some((1, 2)) }]),
        "{:?}",
        located.report.detail
    );
    let v = verdict(&snap);
    assert_eq!(v.status, Status::Inconclusive);
    assert!(v.notes.iter().any(|n| n.contains("score (1 of 2)")), "{:?}", v.notes);
}

#[test]
fn a_candidate_neither_red_nor_busy_points_to_the_exchange_and_the_verdict_is_inconclusive() {
    // parse is red (p 0.8 > 0.10); score is neither red (0.05 ≤ 0.10) nor busy
    // (0.2 < 0.5): the backpressure stops at the exchange parse → score.
    let snap = line_job()
        .all_subtasks("src", 0.1, 0.8, 0.1, None)
        .all_subtasks("parse", 0.1, 0.8, 0.1, 500.0)
        .all_subtasks("score", 0.2, 0.05, 0.75, 500.0)
        .all_subtasks("sink", 0.05, 0.0, 0.95, 500.0)
        .build();
    let located = with_context(&snap, run);
    assert_eq!(located.report.finding, Some(Finding::Network));
    assert!(located.culprits.is_empty());
    assert_eq!(located.network, [("parse".to_string(), "score".to_string())]);
    // score: p_max 0.05, busy 0.2 (below 0.5); parse at 0.8 and src at 0.8 are red.
    assert_eq!(
        located.report.detail,
        Fact::Locate(LocateFact::Exchange {
            red: red(&[("Source: txn", 0.8), ("parse", 0.8)]),
            backpressured_threshold_ratio: 0.1,
            from: "parse".into(),
            to: "score".into(),
            to_backpressured_ratio: Some(0.05),
            receiver: Receiver::Busy { busy_ratio: 0.2 },
        })
    );

    let v = verdict(&snap);
    assert_eq!(v.status, Status::Inconclusive);
    assert_eq!(v.finding, Finding::Network);
    assert!(v.culprit.is_none());
}

/// Two pipelines sharing nothing: a1 → a2 → a3 → ca → ka and b1 → cb → kb.
fn two_regions() -> SnapshotBuilder {
    SnapshotBuilder::new()
        .vertex("a1", "Source: a", 1)
        .vertex("b1", "Source: b", 1)
        .vertex("a2", "a-parse", 1)
        .vertex("a3", "a-enrich", 1)
        .vertex("ca", "a-score", 1)
        .vertex("cb", "b-score", 1)
        .vertex("ka", "Sink: a", 1)
        .vertex("kb", "Sink: b", 1)
        .edge("a1", "a2", "FORWARD")
        .edge("a2", "a3", "FORWARD")
        .edge("a3", "ca", "HASH")
        .edge("ca", "ka", "FORWARD")
        .edge("b1", "cb", "HASH")
        .edge("cb", "kb", "FORWARD")
        .all_subtasks("ka", 0.1, 0.0, 0.9, 10.0)
        .all_subtasks("kb", 0.1, 0.0, 0.9, 10.0)
}

#[test]
fn two_independent_red_regions_give_two_culprits_the_larger_region_first() {
    // Region of ca: a1, a2, a3 = 3 red vertices; region of cb: b1 = 1. cb is busier
    // (0.99 > 0.7) but region size ranks first: [ca, cb].
    let snap = two_regions()
        .all_subtasks("a1", 0.0, 0.9, 0.1, None)
        .all_subtasks("a2", 0.0, 0.9, 0.1, 10.0)
        .all_subtasks("a3", 0.0, 0.9, 0.1, 10.0)
        .all_subtasks("ca", 0.7, 0.0, 0.3, 10.0)
        .all_subtasks("b1", 0.0, 0.9, 0.1, None)
        .all_subtasks("cb", 0.99, 0.0, 0.01, 10.0)
        .build();
    let located = with_context(&snap, run);
    assert_eq!(located.culprits, ["ca", "cb"]);
    assert!(
        locate_facts(&located.report.detail).contains(&&LocateFact::IndependentCulprits {
            culprits: vec![("a-score".into(), 3), ("b-score".into(), 1)]
        }),
        "{:?}",
        located.report.detail
    );

    let v = verdict(&snap);
    assert_eq!(v.status, Status::CulpritFound);
    assert_eq!(v.culprit.as_ref().unwrap().vertex_id, "ca");
    assert_eq!(v.culprits.iter().map(|c| c.vertex_id.as_str()).collect::<Vec<_>>(), ["ca", "cb"]);
    assert!(v.summary.contains("1 more independent culprit: b-score"), "{}", v.summary);
}

#[test]
fn equal_red_regions_rank_their_culprits_by_busy_max() {
    // Only a3 is red in the a-chain: region of ca = {a3} (a2 is not red, the walk
    // upstream stops there) = 1; region of cb = {b1} = 1. Tie → b_max: cb 0.99 > ca 0.7
    // → [cb, ca].
    let snap = two_regions()
        .all_subtasks("a1", 0.2, 0.0, 0.8, None)
        .all_subtasks("a2", 0.2, 0.0, 0.8, 10.0)
        .all_subtasks("a3", 0.0, 0.9, 0.1, 10.0)
        .all_subtasks("ca", 0.7, 0.0, 0.3, 10.0)
        .all_subtasks("b1", 0.0, 0.9, 0.1, None)
        .all_subtasks("cb", 0.99, 0.0, 0.01, 10.0)
        .build();
    assert_eq!(with_context(&snap, run).culprits, ["cb", "ca"]);
}

#[test]
fn nothing_red_is_clear_even_at_exactly_the_threshold() {
    // p_max = 0.10 is not > 0.10: OK in Flink's UI, not backpressured.
    let snap = line_job()
        .all_subtasks("src", 0.3, 0.10, 0.6, None)
        .all_subtasks("parse", 0.3, 0.05, 0.65, 100.0)
        .all_subtasks("score", 0.6, 0.0, 0.4, 100.0)
        .all_subtasks("sink", 0.1, 0.0, 0.9, 100.0)
        .build();
    let located = with_context(&snap, run);
    assert_eq!(located.report.outcome, Outcome::Clear);
    assert!(located.culprits.is_empty());
    assert_eq!(verdict(&snap).status, Status::NoBackpressure);
}

#[test]
fn nothing_red_and_a_busy_source_whose_lag_grows_is_the_source_culprit() {
    // Source busy 0.95 ≥ 0.9; pendingRecords of each subtask grows 50 records/s over
    // the window (1000 → 16000 in 300 s), so the summed lag grows 2 × 50 = 100 records/s.
    let snap = line_job()
        .all_subtasks("src", 0.95, 0.0, 0.05, None)
        .all_subtasks("parse", 0.4, 0.0, 0.6, 800.0)
        .all_subtasks("score", 0.4, 0.0, 0.6, 800.0)
        .all_subtasks("sink", 0.1, 0.0, 0.9, 800.0)
        .pending_records("src", 0, line(-295, 0, 5, 1000.0, 50.0))
        .pending_records("src", 1, line(-295, 0, 5, 1000.0, 50.0))
        .build();
    let located = with_context(&snap, run);
    assert_eq!(located.report.finding, Some(Finding::Source));
    assert_eq!(located.culprits, ["src"]);
    assert_close(evidence(&located.report.evidence, "lag growth").value, 100.0, 1e-6);
    assert_eq!(
        located.report.fix[0],
        Fact::Locate(LocateFact::RaiseSourceParallelism { vertex: "Source: txn".into(), parallelism: 2 })
    );

    let v = verdict(&snap);
    assert_eq!((v.status, v.finding), (Status::CulpritFound, Finding::Source));
    assert_eq!(v.culprit.unwrap().role, crate::model::verdict::Role::Source);
}

#[test]
fn a_busy_source_whose_lag_is_flat_is_not_the_culprit() {
    // Same source at 0.95 busy, but pendingRecords stays at 1000: slope 0, not growing.
    let snap = line_job()
        .all_subtasks("src", 0.95, 0.0, 0.05, None)
        .all_subtasks("parse", 0.4, 0.0, 0.6, 800.0)
        .all_subtasks("score", 0.4, 0.0, 0.6, 800.0)
        .all_subtasks("sink", 0.1, 0.0, 0.9, 800.0)
        .pending_records("src", 0, line(-295, 0, 5, 1000.0, 0.0))
        .build();
    let located = with_context(&snap, run);
    assert_eq!(located.report.outcome, Outcome::Clear);
    assert!(located.culprits.is_empty());
}

#[test]
fn a_busy_source_whose_kafka_exporter_lag_grows_is_the_source_culprit() {
    // No pendingRecords, but the job's consumer group lags more every scrape: 200
    // records/s (kafka_exporter / KMinion lag of group test-job on topic txn).
    let p = crate::model::snapshot::PartitionLag {
        lag_records: line(-240, 0, 60, 10_000.0, 200.0),
        ..partition("txn", "0")
    };
    let snap = line_job()
        .all_subtasks("src", 0.95, 0.0, 0.05, None)
        .all_subtasks("parse", 0.4, 0.0, 0.6, 800.0)
        .all_subtasks("score", 0.4, 0.0, 0.6, 800.0)
        .all_subtasks("sink", 0.1, 0.0, 0.9, 800.0)
        .partition(p)
        .build();
    assert_eq!(with_context(&snap, run).report.finding, Some(Finding::Source));
}

#[test]
fn no_busy_or_backpressured_metrics_at_all_is_no_data_and_inconclusive() {
    // Only records rates: nothing to read the graph with.
    let snap = line_job()
        .all_subtasks("parse", None, None, None, 800.0)
        .all_subtasks("score", None, None, None, 800.0)
        .build();
    let located = with_context(&snap, run);
    assert_eq!(located.report.outcome, Outcome::NoData);
    assert_eq!(located.report.missing, ["backPressuredTimeMsPerSecond", "busyTimeMsPerSecond"]);
    let v = verdict(&snap);
    assert_eq!(v.status, Status::Inconclusive);
    assert_eq!(v.confidence, crate::model::verdict::Confidence::Low);
}

#[test]
fn red_vertices_whose_downstream_has_no_metrics_are_no_data() {
    // parse is red; score (its only downstream) reports nothing at all.
    let snap = line_job().all_subtasks("src", 0.0, 0.9, 0.1, None).all_subtasks("parse", 0.0, 0.9, 0.1, 100.0).build();
    let located = with_context(&snap, run);
    assert_eq!(located.report.outcome, Outcome::NoData);
    assert!(located.report.detail.to_string().contains("score"), "{}", located.report.detail);
    assert_eq!(verdict(&snap).status, Status::Inconclusive);
}

#[test]
fn without_a_graph_the_busiest_vertex_that_is_not_red_is_taken() {
    // Graph-free: red = {src, parse}; not red and busy ≥ 0.5: score (0.9), sink (0.6).
    // Ranked by b_max: score first.
    let snap = line_job()
        .all_subtasks("src", 0.05, 0.9, 0.05, None)
        .all_subtasks("parse", 0.05, 0.9, 0.05, 100.0)
        .all_subtasks("score", 0.9, 0.0, 0.1, 100.0)
        .all_subtasks("sink", 0.6, 0.0, 0.4, 100.0)
        .without_graph()
        .build();
    let located = with_context(&snap, run);
    assert_eq!(located.culprits.first().map(String::as_str), Some("score"));
    assert!(
        matches!(
            locate_facts(&located.report.detail)[0],
            LocateFact::Culprit { graph_free: true, vertex, busy_ratio: Some(0.9), .. } if vertex == "score"
        ),
        "{:?}",
        located.report.detail
    );

    let v = verdict(&snap);
    assert_eq!(v.culprit.as_ref().unwrap().vertex_id, "score");
    assert_eq!(v.confidence, crate::model::verdict::Confidence::Low);
    assert!(v.notes.iter().any(|n| n.contains("No job graph")), "{:?}", v.notes);
    assert!(v.graph.edges.is_empty());
}

#[test]
fn a_legacy_source_with_nan_busy_gets_busy_inferred_from_idle_and_backpressure() {
    // Flink reports busy NaN for legacy sources. i = 0.04, p = 0.02 →
    // b = 1 − min(0.04 + 0.02, 1) = 0.94 ≥ 0.9, and its lag grows 20 records/s:
    // source-bound. Treated as 0, it would have been clear.
    let snap = line_job()
        .all_subtasks("src", None, 0.02, 0.04, None)
        .all_subtasks("parse", 0.3, 0.0, 0.7, 500.0)
        .all_subtasks("score", 0.3, 0.0, 0.7, 500.0)
        .all_subtasks("sink", 0.1, 0.0, 0.9, 500.0)
        .pending_records("src", 0, line(-240, 0, 60, 0.0, 20.0))
        .build();
    let located = with_context(&snap, run);
    assert_eq!(located.report.finding, Some(Finding::Source));
    assert_close(evidence(&located.report.evidence, "busyTimeMsPerSecond").value, 0.94, 1e-9);
    let v = verdict(&snap);
    assert_close(v.graph.vertices[0].busy_max.unwrap(), 0.94, 1e-9);
}

#[test]
fn a_legacy_source_without_idle_has_unknown_busy_not_zero() {
    // busy NaN and no idle: b stays unknown (busy_max null), never 0.
    let snap =
        line_job().all_subtasks("src", None, 0.9, None, None).all_subtasks("parse", 0.8, 0.0, 0.2, 500.0).build();
    let located = with_context(&snap, run);
    assert_eq!(located.culprits, ["parse"]);
    let v = verdict(&snap);
    assert_eq!(v.graph.vertices[0].busy_max, None);
    assert_eq!(v.graph.vertices[0].state, VertexState::Backpressured);
}

/// A consumer-group lag that saw-tooths with the checkpoints: it drops by `drop` at
/// each commit (every 60 s) and climbs `per_s` in between, over the window.
fn sawtooth(trend_per_s: f64) -> Vec<(i64, f64)> {
    // Climbs 4000 records/s between commits, drops by 240,000 at each: flat on
    // average, plus `trend_per_s`.
    (-295..=0)
        .step_by(5)
        .map(|s| {
            let since_commit = (s + 300) % 60;
            (t(s), 500_000.0 + 4000.0 * since_commit as f64 + trend_per_s * (s + 300) as f64)
        })
        .collect()
}

#[test]
fn steady_growth_is_growth_beyond_the_sawtooth_of_commits() {
    // Flat sawtooth: slope ~0 and a spread of 236,000 → not growth.
    assert_eq!(steady_growth(&sawtooth(0.0)), None);
    // +2000 records/s: 2000 × 295 s = 590,000 > the spread (~240,000) → growth ≈ 2000.
    let g = steady_growth(&sawtooth(2000.0)).unwrap();
    assert!((g - 2000.0).abs() < 200.0, "{g}");
    // A clean line is growth however small.
    assert_eq!(steady_growth(&line(-300, 0, 5, 0.0, 1.0)), Some(1.0));
}

/// Legacy source (busy and idle NaN: unknown) → keyed → sink, nothing backpressured and
/// downstream mostly idle; the consumer group's lag saw-tooths, plus `trend` records/s.
fn legacy_source(trend: f64) -> crate::model::snapshot::Snapshot {
    let p = crate::model::snapshot::PartitionLag { lag_records: sawtooth(trend), ..partition("clicks", "0") };
    line_job()
        .all_subtasks("src", None, 0.0, None, None)
        .records_out("src", 0, 2871.0)
        .records_out("src", 1, 2871.0)
        .all_subtasks("parse", 0.16, 0.0, 0.84, 5742.0)
        .all_subtasks("score", 0.16, 0.0, 0.84, 5742.0)
        .all_subtasks("sink", 0.09, 0.0, 0.91, 5742.0)
        .partition(p)
        .build()
}

#[test]
fn a_source_with_unknown_busy_time_and_a_steadily_growing_lag_is_the_culprit_with_lowered_confidence() {
    let v = verdict(&legacy_source(2000.0));
    assert_eq!((v.status, v.finding), (Status::CulpritFound, Finding::Source));
    assert_eq!(v.culprit.as_ref().unwrap().vertex_id, "src");
    assert_eq!(v.confidence, crate::model::verdict::Confidence::Medium);
    // Unknown, never 0: no busy evidence, the graph says null, the cause says unknown.
    assert_eq!(v.graph.vertices[0].busy_max, None);
    assert!(!v.evidence.iter().any(|e| e.subject == "Source: txn" && e.metric == "busyTimeMsPerSecond"));
    assert!(v.cause.contains("busy and idle time are unknown"), "{}", v.cause);
    assert!(v.summary.contains("its busy time is unknown"), "{}", v.summary);
}

#[test]
fn the_same_source_whose_lag_only_saw_tooths_with_the_commits_is_no_culprit() {
    let v = verdict(&legacy_source(0.0));
    assert_eq!((v.status, v.finding), (Status::NoBackpressure, Finding::None));
}

#[test]
fn an_async_wait_chained_with_the_source_on_idle_cpus_is_async_io_not_source() {
    // One vertex: source → async wait → writer, busy 0.99 at CPU 0.07, nothing red, the
    // lag grows 100 records/s. The source-bound rule fits by the letter; async_io
    // decides first. The async operator completes 2 × 150 = 300 requests/s (operator
    // scope: the task counters of a source-and-sink vertex say 0).
    let snap = SnapshotBuilder::new()
        .vertex("all", "Source: pings -> async wait operator -> Writer", 2)
        .all_subtasks("all", 0.99, 0.0, 0.01, 0.0)
        .records_out("all", 0, 0.0)
        .records_out("all", 1, 0.0)
        .on_taskmanager("all", 0, "tm-1", "node-1")
        .on_taskmanager("all", 1, "tm-2", "node-2")
        .taskmanager("tm-1", 1.0, 0.07)
        .taskmanager("tm-2", 1.0, 0.07)
        .operator_rates("all", "Source: pings", 320.0, 320.0)
        .operator_rates("all", "async wait operator", 300.0, 300.0)
        .pending_records("all", 0, line(-295, 0, 5, 0.0, 50.0))
        .pending_records("all", 1, line(-295, 0, 5, 0.0, 50.0))
        .build();
    let v = verdict(&snap);
    assert_eq!((v.status, v.finding), (Status::CulpritFound, Finding::AsyncIo));
    // 300 requests/s over 2 subtasks = 150 per subtask per second = capacity ÷ latency:
    // with a capacity of 100, 100 × 2 / 300 = 0.667 s = 667 ms per request.
    assert!(v.cause.contains("150 per subtask per second"), "{}", v.cause);
    assert!(v.cause.contains("667 ms per request"), "{}", v.cause);
    assert!(v.not_the_fix.iter().any(|n| n.starts_with("More source parallelism")), "{:?}", v.not_the_fix);
}

#[test]
fn a_chained_culprit_names_its_operators_and_suggests_breaking_the_chain() {
    let snap = SnapshotBuilder::new()
        .vertex("src", "Source: txn -> parse", 2)
        .vertex("mid", "enrich -> score", 2)
        .edge("src", "mid", "HASH")
        .all_subtasks("src", 0.0, 0.9, 0.1, None)
        .all_subtasks("mid", 0.95, 0.0, 0.05, 100.0)
        .build();
    let located = with_context(&snap, run);
    assert_eq!(located.culprits, ["mid"]);
    let operators = vec!["enrich".to_string(), "score".to_string()];
    assert!(
        located.report.cause.contains(&Fact::Locate(LocateFact::Chain { operators: operators.clone() })),
        "{:?}",
        located.report.cause
    );
    assert!(
        located.report.fix.contains(&Fact::Locate(LocateFact::BreakChain { operators })),
        "{:?}",
        located.report.fix
    );
}

/// Flink ≤ 1.12: no busy time, backpressure as the share of isBackPressured samples,
/// and buffer pool usage `(vertex, inPoolUsage, outPoolUsage)` per vertex.
fn classic_job(pools: &[(&str, Option<f64>, Option<f64>)], candidate: &str) -> crate::model::snapshot::Snapshot {
    let mut b = line_job();
    for v in ["src", "parse", "score", "sink"] {
        // Red up to the candidate, not red from it on.
        let red = ["src", "parse", "score", "sink"].iter().position(|x| *x == v)
            < ["src", "parse", "score", "sink"].iter().position(|x| *x == candidate);
        b = b.all_subtasks(v, None, if red { 1.0 } else { 0.0 }, 0.02, 1000.0);
    }
    let mut snap = b.build();
    snap.backpressure_measure = BackpressureMeasure::IsBackPressuredShare;
    for (id, input, output) in pools {
        let a = snap.vertex_aggregates.iter_mut().find(|a| a.vertex_id == *id).unwrap();
        (a.in_pool_usage_max, a.out_pool_usage_max) = (*input, *output);
    }
    snap
}

#[test]
fn without_busy_time_a_full_input_pool_and_a_low_output_pool_make_the_culprit() {
    // src, parse: isBackPressured in every sample (share 1.0 > 0.10); score in none, its
    // input pool 0.97 ≥ 0.9 and output pool 0.2 ≤ 0.5.
    let snap = classic_job(&[("score", Some(0.97), Some(0.2)), ("sink", Some(0.1), None)], "score");
    let located = with_context(&snap, run);
    assert_eq!(located.culprits, ["score"]);
    assert_eq!(evidence(&located.report.evidence, "inPoolUsage").value, 0.97);
    assert_eq!(evidence(&located.report.evidence, "outPoolUsage").value, 0.2);
    assert!(!located.report.evidence.iter().any(|e| e.metric == "busyTimeMsPerSecond"));
    // isBackPressured share 0 for score, its pools 0.97 (≥ 0.9) and 0.2; src and parse at 1.0.
    assert_eq!(
        located.report.detail,
        Fact::Locate(LocateFact::ClassicCulprit {
            red: red(&[("Source: txn", 1.0), ("parse", 1.0)]),
            backpressured_threshold_ratio: 0.1,
            vertex: "score".into(),
            backpressured_ratio: 0.0,
            in_pool_ratio: 0.97,
            in_pool_full_threshold_ratio: 0.9,
            out_pool_ratio: Some(0.2),
        })
    );
    // The cause states no busy time at all (unknown, never 0 %).
    assert_eq!(
        located.report.cause[0],
        Fact::Locate(LocateFact::ClassicCause {
            vertex: "score".into(),
            upstream_red: 2,
            in_pool_ratio: 0.97,
            out_pool_ratio: Some(0.2)
        })
    );
    assert!(
        !located.report.cause.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(" ").contains("busy 0%"),
        "{:?}",
        located.report.cause
    );
}

#[test]
fn without_busy_time_a_sink_with_a_full_input_pool_and_no_output_pool_is_the_culprit() {
    let snap = classic_job(&[("sink", Some(1.0), None)], "sink");
    let located = with_context(&snap, run);
    assert_eq!(located.culprits, ["sink"]);
    // src, parse, score red (3 upstream); the sink's input pool 1.0, no output pool.
    assert_eq!(
        located.report.cause[0],
        Fact::Locate(LocateFact::ClassicCause {
            vertex: "Sink: store".into(),
            upstream_red: 3,
            in_pool_ratio: 1.0,
            out_pool_ratio: None
        })
    );
}

#[test]
fn without_busy_time_an_input_pool_that_is_not_full_points_at_the_exchange() {
    // score's input pool 0.3 < 0.9: records do not wait in front of it.
    let snap = classic_job(&[("score", Some(0.3), Some(0.1))], "score");
    let located = with_context(&snap, run);
    assert!(located.culprits.is_empty());
    assert_eq!(located.network, [("parse".to_string(), "score".to_string())]);
    assert_eq!(located.report.finding, Some(Finding::Network));
    assert!(
        matches!(
            &located.report.detail,
            Fact::Locate(LocateFact::Exchange { receiver: Receiver::InputPool { in_pool_ratio: Some(0.3) }, .. })
        ),
        "{:?}",
        located.report.detail
    );
}

#[test]
fn without_busy_time_or_buffer_pools_nothing_is_concluded_and_the_pools_are_missing() {
    let snap = classic_job(&[], "score");
    let located = with_context(&snap, run);
    assert!(located.culprits.is_empty() && located.network.is_empty());
    assert_eq!(located.report.outcome, Outcome::NoData);
    assert_eq!(located.report.missing, ["inPoolUsage", "outPoolUsage"]);
}
