//! Every capture's renderings as snapshots (text, verbose text, Markdown, the Slack,
//! PagerDuty and Alertmanager payloads), with the limits asserted: the default text
//! verdict is at most 20 lines and no line is wider than the width (100, 80, 60 or 40
//! columns); every Slack message is one Slack takes; PagerDuty and Alertmanager fields
//! within theirs. Each capture is also diagnosed without its plan: no arrows then.

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use culprit::cli::{DiagnoseArgs, diagnose_command};
use culprit::model::notice::{Notice, NoticeKind};
use culprit::model::verdict::Verdict;
use culprit::render::names::width;
use culprit::render::{Format, Options, render_with};
use serde_json::{Value, json};

/// Every real capture, and the field report of a Flink SQL job.
fn inputs() -> Vec<(String, PathBuf)> {
    let mut out: Vec<(String, PathBuf)> =
        support::captures().into_iter().map(|d| (d.file_name().unwrap().to_string_lossy().into_owned(), d)).collect();
    assert!(out.len() >= 11, "the bundled captures: {out:?}");
    out.push((
        "report-04-sql-names".into(),
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/reports/04-sql-names"),
    ));
    out
}

fn verdict(dir: &Path, with_plan: bool) -> Verdict {
    let checkpoint_config = dir.join("rest/checkpoints-config.json");
    let args = DiagnoseArgs {
        recording: Some(dir.join("recording.om.gz")),
        metrics: Vec::new(),
        scrape: Vec::new(),
        flamegraph: None,
        flink: None,
        cluster: None,
        plan: with_plan.then(|| dir.join("plan.json")),
        job: None,
        label: Vec::new(),
        at: None,
        window: None,
        config: None,
        checkpoint_config: checkpoint_config.exists().then_some(checkpoint_config),
        exceptions: Some(dir.join("rest/exceptions.json")).filter(|p| p.exists()),
        rescales: Some(dir.join("rest/rescales-history.json")).filter(|p| p.exists()),
        format: Format::Json,
    };
    diagnose_command(&args, 0).unwrap_or_else(|e| panic!("{}: {}", dir.display(), e.message))
}

fn notice(v: &Verdict) -> Notice {
    Notice {
        links: Default::default(),
        kind: NoticeKind::Verdict,
        group_key: "{}/{alertname=\"FlinkJobBackpressured\"}:{job_id=\"x\"}".into(),
        labels: BTreeMap::from([("alertname".to_string(), "FlinkJobBackpressured".to_string())]),
        job: v.job.clone(),
        verdict: Some(v.clone()),
        verdict_id: Some(7),
        verdict_url: Some("https://culprit.example.com/verdicts/7".into()),
        reason: None,
        firing: true,
        changed: false,
        idempotency_key: "slack:g:7".into(),
        at_ms: 1_795_000_000_000,
        episode: Default::default(),
        maybe_repeat: false,
        incident: None,
        incident_view: None,
        incident_parent: None,
    }
}

/// The default text view at `w` columns, its limits asserted.
fn brief(name: &str, v: &Verdict, w: usize) -> String {
    let text = render_with(v, Format::Text, &Options { width: w, verbose: false });
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.len() <= 20, "{name} at {w} columns: {} lines\n{text}", lines.len());
    for l in &lines {
        assert!(width(l) <= w, "{name} at {w} columns: a line of {}: {l:?}", width(l));
    }
    text
}

/// Every payload a destination gets for the capture's verdict, each checked against its
/// vendor's limits.
fn messages(name: &str, v: &Verdict) -> Value {
    use culprit::render::{alertmanager, pagerduty, slack};
    let n = notice(v);
    let message = slack::message(&n);
    let details = slack::details(&n).expect("a verdict has details");
    let fallback = slack::fallback(&n);
    for (what, m) in [("message", &message), ("details", &details), ("fallback", &fallback)] {
        let body = json!({ "channel": "C1", "text": m.text, "blocks": m.blocks });
        assert_eq!(support::capture::slack_refusal(&body), None, "{name}: Slack refuses the {what}: {body:#}");
        assert!(m.text.chars().count() <= slack::MAX_FALLBACK_TEXT, "{name}: {what} text");
    }
    assert!(fallback.blocks.is_empty() && fallback.text.chars().count() <= slack::MAX_SAFE_TEXT);
    let event = pagerduty::event(&n, "R0UTINGKEY", "error");
    assert!(event["payload"]["summary"].as_str().unwrap().chars().count() <= 1024, "{name}: PagerDuty summary");
    assert!(serde_json::to_vec(&event).unwrap().len() <= 512_000, "{name}: PagerDuty event size");
    let alert = alertmanager::culprit_alert(&n, alertmanager::DEFAULT_ALERTNAME, n.at_ms + 900_000);
    for (k, max) in [("summary", 1024), ("fix", 1024), ("description", 4096)] {
        let len = alert["annotations"][k].as_str().map_or(0, |s| s.chars().count());
        assert!(len <= max, "{name}: annotation {k} of {len}");
    }
    // The payloads' summaries and evidence, not the whole verdict again (the JSON has it).
    json!({
        "slack": { "message": message, "details": details, "fallback": fallback },
        "pagerduty": { "summary": event["payload"]["summary"], "component": event["payload"]["component"],
                       "custom_details.fix": event["payload"]["custom_details"]["fix"] },
        "alertmanager": { "labels": alert["labels"], "annotations": alert["annotations"] },
    })
}

#[test]
fn every_capture_renders_within_its_limits_and_as_its_snapshot() {
    for (name, dir) in inputs() {
        let v = verdict(&dir, true);
        for w in [100, 80, 60, 40] {
            brief(&name, &v, w);
        }
        insta::assert_snapshot!(format!("{name}__text"), brief(&name, &v, 100));
        let verbose = render_with(&v, Format::Text, &Options { width: 100, verbose: true });
        for l in verbose.lines() {
            assert!(width(l) <= 100, "{name} verbose: {l:?}");
        }
        insta::assert_snapshot!(format!("{name}__verbose"), verbose);
        insta::assert_snapshot!(format!("{name}__markdown"), render_with(&v, Format::Markdown, &Options::default()));
        insta::assert_json_snapshot!(format!("{name}__messages"), messages(&name, &v));
        let page = culprit::render::html::page(&v);
        assert!(page.len() <= 60 * 1024, "{name}: a page of {} bytes", page.len());
        assert!(!page.contains("<script") && !page.contains("src=") && !page.contains("@import"), "{name}");
        assert!(!page.contains("NotNullEnforcer(") || name.starts_with("report-04"), "{name}");
        insta::assert_snapshot!(format!("{name}__page"), page);
    }
}

#[test]
fn the_answer_comes_first_then_the_fix_then_the_evidence() {
    for (name, dir) in inputs() {
        let v = verdict(&dir, true);
        let text = brief(&name, &v, 100);
        let first: String = text.lines().take(2).collect::<Vec<_>>().join(" ");
        let summary = culprit::render::names::Names::of(&v).text(&v.summary);
        let summary_start: String = summary.split_whitespace().take(3).collect::<Vec<_>>().join(" ");
        assert!(
            first.starts_with(&summary_start) || first.contains(&summary_start),
            "{name}: the answer is not first: {first:?} / {summary_start:?}"
        );
        let at = |s: &str| text.find(s);
        if !v.fix.is_empty() {
            assert!(at("\nFix\n").unwrap() < at("\nEvidence").unwrap(), "{name}:\n{text}");
        }
        for theory in ["credit-based flow control", "\nSteps", "\nCause"] {
            assert!(!text.contains(theory), "{name}: {theory:?} belongs to --verbose:\n{text}");
        }
    }
}

#[test]
fn a_graph_free_verdict_draws_no_arrows_and_says_the_order_is_unknown() {
    for (name, dir) in inputs() {
        let v = verdict(&dir, false);
        assert!(!v.graph.from_plan, "{name}");
        let text = brief(&name, &v, 100);
        assert!(text.contains("no job graph: order unknown"), "{name}:\n{text}");
        assert!(!text.contains('→'), "{name}:\n{text}");
        let rows = text.lines().filter(|l| l.contains(" busy ") && l.contains("backpr."));
        assert!(
            rows.clone().count() > 0 && rows.clone().all(|l| !l.contains('[')),
            "{name}: no edges without a plan:\n{text}"
        );
        let m = culprit::render::slack::message(&notice(&v));
        let all = serde_json::to_string(&m).unwrap();
        assert!(!all.contains('→'), "{name}: {all}");
        insta::assert_snapshot!(format!("{name}__text_without_plan"), text);
    }
}
