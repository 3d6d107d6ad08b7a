//! Broken answers from the metric source never reach a sentence or a finding (attack F2,
//! F3, F4): every real capture, its answers mutated the way the attack's `promproxy.py`
//! mutated a real Prometheus' (`mixed`: each value at random NaN, +Inf, −Inf, −1e308, 1e308
//! or itself; `negative`: every value negated; `partial`: the second half of every answer's
//! series dropped, as a Thanos partial response can), gives no sentence with "inf", "NaN",
//! a negative age or "-0"; all values negated is inconclusive with a note; a partial answer
//! is named as possibly incomplete data, never as double scraping.
//!
//! Stand-in: the mutation wraps the in-memory series store (the recording) as a
//! `MetricSource`, in place of the proxy in front of Prometheus; the collector and the
//! diagnosis are the real ones.

use std::cell::Cell;
use std::path::{Path, PathBuf};

use culprit::collect::collector::{CollectInput, MetricSource, QueryError, collect};
use culprit::collect::query::{Query, QueryResult};
use culprit::collect::store::SeriesStore;
use culprit::config::Config;
use culprit::model::catalog::MetricCatalog;
use culprit::model::graph::JobGraph;
use culprit::model::request::DiagnosisRequest;
use culprit::model::snapshot::CheckpointConfig;
use culprit::model::verdict::{Status, Verdict};
use culprit::render::{Format, Options, render_with};

#[derive(Clone, Copy, Debug)]
enum Mutation {
    Mixed(u64),
    Negated,
    Partial,
}

/// The recording's answers, mutated.
struct Mutated<'a> {
    inner: &'a SeriesStore,
    how: Mutation,
    /// xorshift64 state for `Mixed`.
    state: Cell<u64>,
}

impl Mutated<'_> {
    fn next(&self) -> u64 {
        let mut x = self.state.get();
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.state.set(x);
        x
    }

    fn mutate(&self, v: f64) -> f64 {
        match self.how {
            Mutation::Negated if v.is_nan() => v,
            Mutation::Negated => -v.abs(),
            Mutation::Mixed(_) => {
                [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, v, -1e308, 1e308][(self.next() % 6) as usize]
            }
            Mutation::Partial => v,
        }
    }
}

impl MetricSource for Mutated<'_> {
    async fn run(&self, queries: &[Query]) -> Vec<Result<QueryResult, QueryError>> {
        let mut answers = self.inner.run(queries).await;
        for result in answers.iter_mut().flatten() {
            if let Mutation::Partial = self.how {
                // Half the series, rounded up: an answer of one series stays whole.
                result.truncate(result.len().div_ceil(2));
            }
            for series in result.iter_mut() {
                for p in series.points.iter_mut() {
                    p.1 = self.mutate(p.1);
                }
            }
        }
        answers
    }

    fn latest_ms(&self) -> Option<i64> {
        self.inner.latest_ms()
    }
}

fn captures() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/captures");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("recording.om.gz").exists() && p.join("plan.json").exists())
        .collect();
    dirs.sort();
    assert!(dirs.len() >= 11, "the bundled captures: {}", dirs.len());
    dirs
}

fn diagnose(dir: &Path, how: Mutation) -> Verdict {
    let mut store = SeriesStore::new();
    let bytes = std::fs::read(dir.join("recording.om.gz")).unwrap();
    store.read_from(&bytes[..], "recording.om.gz", None).unwrap();
    store.finish();
    let graph = JobGraph::from_plan_json(&std::fs::read_to_string(dir.join("plan.json")).unwrap()).unwrap();
    let checkpoint_config = std::fs::read_to_string(dir.join("rest/checkpoints-config.json"))
        .ok()
        .and_then(|t| CheckpointConfig::from_rest_json(&t));
    let seed = match how {
        Mutation::Mixed(seed) => seed,
        Mutation::Negated | Mutation::Partial => 1,
    };
    let source = Mutated { inner: &store, how, state: Cell::new(seed) };
    let config = Config::default();
    let snapshot = culprit::collect::block_on(collect(
        &source,
        CollectInput {
            request: &DiagnosisRequest::default(),
            graph: Some(graph),
            checkpoint_config,
            exceptions: None,
            rescales: None,
            config: &config,
            catalog: &MetricCatalog::default(),
        },
    ))
    .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    culprit::render::words::verdict(&culprit::diagnose::diagnose(&snapshot, &config.diagnosis))
}

/// The sentences of a verdict that lie about numbers: "inf"/"NaN" as words, a negative
/// zero, a negative age.
fn lies(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for word in text.split(|c: char| !c.is_ascii_alphanumeric()) {
        if word.eq_ignore_ascii_case("inf") || word.eq_ignore_ascii_case("nan") || word.eq_ignore_ascii_case("infinity")
        {
            found.push(word.to_string());
        }
    }
    // A number with a minus sign that is zero: "-0", "-0.0", "-0%".
    let bytes = text.as_bytes();
    for (i, _) in text.match_indices('-') {
        let number: String = text[i + 1..].chars().take_while(|c| c.is_ascii_digit() || *c == '.').collect::<String>();
        let preceded_by_word = i > 0 && (bytes[i - 1].is_ascii_alphanumeric());
        if !preceded_by_word && !number.is_empty() && number.trim_end_matches('.').parse::<f64>() == Ok(0.0) {
            found.push(format!("-{number} in …{}…", &text[i.saturating_sub(40)..(i + 20).min(text.len())]));
        }
    }
    for bad in ["only -", "s before -", "started -"] {
        if text.contains(bad) {
            found.push(bad.to_string());
        }
    }
    found
}

fn every_sentence(v: &Verdict) -> String {
    render_with(v, Format::Markdown, &Options { width: 100, verbose: true })
}

#[test]
fn random_nan_infinite_and_huge_values_give_no_sentence_with_inf_nan_or_negative_zero_on_any_capture() {
    for dir in captures() {
        for seed in [0x9e37_79b9_7f4a_7c15, 0x2545_f491_4f6c_dd1d, 7] {
            let v = diagnose(&dir, Mutation::Mixed(seed));
            let text = every_sentence(&v);
            let lies = lies(&text);
            assert!(lies.is_empty(), "{} (seed {seed}): {lies:?}\n{text}", dir.display());
            // One note says what was left out.
            assert!(
                v.notes.iter().any(|n| n.contains("non-finite or impossible values")),
                "{}: {:?}",
                dir.display(),
                v.notes
            );
        }
    }
}

#[test]
fn every_value_negated_is_inconclusive_with_a_note_and_no_negative_age_on_any_capture() {
    for dir in captures() {
        let v = diagnose(&dir, Mutation::Negated);
        let text = every_sentence(&v);
        let lies = lies(&text);
        assert!(lies.is_empty(), "{}: {lies:?}\n{text}", dir.display());
        assert_eq!(v.status, Status::Inconclusive, "{}: {}\n{text}", dir.display(), v.summary);
        assert_eq!(v.finding, culprit::model::verdict::Finding::None, "{}", dir.display());
        assert!(
            v.notes.iter().any(|n| n.contains("non-finite or impossible values") && n.contains("out of range")),
            "{}: {:?}",
            dir.display(),
            v.notes
        );
    }
}

#[test]
fn the_lie_detector_catches_what_the_attack_saw() {
    // The sentences the attack quoted (F2, F3, F4), as they were.
    assert!(!lies("Checkpoints are in trouble: inf checkpoint(s) failed or expired in the window.").is_empty());
    assert!(!lies("Too young to diagnose: the job started only -77 s before 2026-12-01").is_empty());
    assert!(!lies("8 task series were scraped more than once (-0 distinct; …)").is_empty());
    assert!(lies("busy 0%–100%, lag -5 records of `non-finite` 2026-12-01T10:00:00Z").is_empty());
}

#[test]
fn half_of_every_answer_dropped_is_named_as_possibly_incomplete_data_never_as_double_scraping() {
    for dir in captures() {
        let v = diagnose(&dir, Mutation::Partial);
        let text = every_sentence(&v);
        let lies = lies(&text);
        assert!(lies.is_empty(), "{}: {lies:?}\n{text}", dir.display());
        assert!(!text.contains("scraped more than once"), "{}:\n{text}", dir.display());
        assert!(v.notes.iter().any(|n| n.contains("may be incomplete")), "{}: {:#?}", dir.display(), v.notes);
    }
}
