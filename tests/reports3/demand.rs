//! A job running flat out (issue 22, lab defect): a source without a rate limit and no lag
//! metric. Its throughput is the job's maximum, not what it is offered, so no parallelism
//! number can be advised with confidence: the verdict names what limits the job, says the
//! demand is unknown, and lowers its confidence.

use culprit::cli::{DiagnoseArgs, diagnose_command};
use culprit::model::verdict::{Confidence, Finding, Verdict};
use culprit::render::Format;
use culprit::samples::synthetic::SyntheticJob;

/// The verdict of `culprit diagnose --recording <the job's OpenMetrics> --plan <its plan>`.
fn diagnose(job: &SyntheticJob) -> Verdict {
    let tmp = tempfile::tempdir().unwrap();
    let recording = tmp.path().join("recording.om");
    let plan = tmp.path().join("plan.json");
    std::fs::write(&recording, job.write_openmetrics(Vec::new()).unwrap()).unwrap();
    std::fs::write(&plan, job.plan_json()).unwrap();
    let args = DiagnoseArgs {
        recording: Some(recording),
        metrics: Vec::new(),
        scrape: Vec::new(),
        flamegraph: None,
        flink: None,
        cluster: None,
        plan: Some(plan),
        job: None,
        label: Vec::new(),
        at: None,
        window: None,
        config: None,
        checkpoint_config: None,
        exceptions: None,
        rescales: None,
        format: Format::Json,
    };
    diagnose_command(&args, 0).unwrap_or_else(|e| panic!("{}", e.message))
}

#[test]
fn a_job_at_capacity_without_any_lag_metric_names_its_limit_and_the_missing_demand_not_a_parallelism() {
    // The synthetic job: a source, a bottleneck in the middle at ~100 % busy, a sink; no
    // pendingRecords and no Kafka exporter, so nothing says what the source is offered.
    for (vertices, subtasks) in [(3, 2), (5, 4)] {
        let job = SyntheticJob { vertices, subtasks, samples: 24, start_ms: 1_800_000_000_000, job: 1 };
        let v = diagnose(&job);
        let culprit = v.culprit.as_ref().unwrap_or_else(|| panic!("no culprit: {}", v.summary));
        assert_eq!(culprit.vertex_id, SyntheticJob::vertex_id(job.culprit()), "{}", v.summary);
        assert_eq!(v.finding, Finding::Headroom, "{}", v.summary);
        // What limits it, and that the demand is unknown: no "raise … from 2 to 4".
        assert!(v.summary.contains("limits the job, which runs flat out"), "{}", v.summary);
        assert!(v.summary.contains("the demand is unknown"), "{}", v.summary);
        assert!(!v.summary.contains("raise its parallelism"), "{}", v.summary);
        assert!(v.fix.iter().all(|f| !f.contains(": parallelism ")), "{:?}", v.fix);
        assert!(v.fix[0].starts_with("The job runs as fast as"), "{:?}", v.fix);
        // The demand is a missing input, and the confidence is not high.
        assert!(v.missing.iter().any(|m| m.starts_with("the demand on the job")), "{:?}", v.missing);
        assert_ne!(v.confidence, Confidence::High, "{}", v.summary);
        // A per-record time is never "0.00 ms".
        assert!(v.fix.iter().all(|f| !f.contains("0.00 ms")), "{:?}", v.fix);
    }
}

#[test]
fn the_per_record_time_of_a_fast_vertex_is_written_with_its_digits() {
    // 3 subtasks at 500 records/s each at ~99.6 % busy: ~2 ms per record; the words must
    // carry non-zero digits in whatever unit they use.
    let job = SyntheticJob { vertices: 3, subtasks: 3, samples: 24, start_ms: 1_800_000_000_000, job: 2 };
    let v = diagnose(&job);
    let cheaper = v.fix.iter().find(|f| f.contains("cheaper per record")).unwrap_or_else(|| panic!("{:?}", v.fix));
    let time = cheaper.split("it spends ").nth(1).unwrap().split(" of busy time").next().unwrap();
    assert!(time.chars().any(|c| c.is_ascii_digit() && c != '0'), "{cheaper}");
    assert!(time.ends_with(" ms") || time.ends_with(" µs") || time.ends_with(" ns"), "{cheaper}");
}
