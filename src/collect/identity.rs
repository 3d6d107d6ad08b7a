//! Which series stand for the same thing: series hygiene.
//!
//! Flink's reporter names a task series by its job, vertex (`task_id`), subtask and task
//! attempt; what reaches Prometheus can still hold several series for one subtask, or
//! series of two different jobs under one job id:
//!
//! * **superseded task attempts**: after a restart the old attempt's series linger for
//!   Prometheus' lookback, and a PushGateway keeps serving a dead TaskManager's last push
//!   forever, with fresh timestamps. Only the newest attempt of each subtask counts.
//! * **one target scraped twice** (pod annotations and a PodMonitor, two Prometheus
//!   replicas): series equal but for target labels (`job`, `instance`, `pod`, …) count once.
//! * **two deployments under one job id** (application mode with HA gives every job the id
//!   `000…0`, and the same jar gives the same vertex ids): series are told apart by the labels
//!   that differ between the deployments' JobManager series (`namespace`, `cluster`, …).
//!
//! This module holds the [`Hygiene`] semantics for a recording ([`reduce`]; the PromQL form
//! is [`crate::collect::query::Query::to_promql`]) and what the collector asks to learn which
//! hygiene a job needs. Pure: no IO.

use std::collections::{BTreeMap, BTreeSet};

use crate::collect::query::{
    ATTEMPT_LABEL, Agg, Aggregation, Hygiene, OverTime, Query, QueryResult, SUBTASK_LABELS, Selector,
};

/// How the collector selects one run's series: the matchers that pick its deployment among
/// others under the same job id, and the hygiene its task series need.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SeriesScope {
    /// `label = value` on every series of the run (e.g. `namespace = flink-us`); empty when
    /// the job id is one deployment's.
    pub matchers: Vec<(String, String)>,
    pub hygiene: Hygiene,
}

impl SeriesScope {
    /// A task or operator selector: the run's deployment, only the newest attempt of each
    /// subtask, each target once.
    pub fn task(&self, selector: Selector) -> Selector {
        self.deployment(selector).with_hygiene(self.hygiene.clone())
    }

    /// A JobManager selector: the run's deployment.
    pub fn deployment(&self, selector: Selector) -> Selector {
        self.matchers.iter().fold(selector, |s, (k, v)| s.with(k, v))
    }

    /// A TaskManager selector (no task attempts): the run's deployment, each target once.
    pub fn taskmanager(&self, selector: Selector) -> Selector {
        let hygiene = Hygiene { attempts: Vec::new(), scrape_labels: self.hygiene.scrape_labels.clone() };
        self.deployment(selector).with_hygiene(hygiene)
    }
}

/// One series of a job id's JobManager uptime (scrape labels dropped): a deployment that
/// reports the job, or an older incarnation of one.
#[derive(Debug, Clone, PartialEq)]
pub struct Reporter<'a> {
    /// Its labels but `job_id` and `job_name`.
    pub labels: &'a BTreeMap<String, String>,
    /// Reports up to the newest data of the job id (not an incarnation that stopped).
    pub current: bool,
    /// When its newest sample was taken, Unix ms.
    pub sampled_at_ms: i64,
}

/// The deployment chosen among the reporters of one job id.
#[derive(Debug, Clone, PartialEq)]
pub struct Chosen {
    /// Index into the reporters.
    pub index: usize,
    /// The labels that tell the deployments apart, with the chosen one's values; empty when
    /// the job id is one deployment's.
    pub distinguishing: Vec<(String, String)>,
    pub note: Option<String>,
}

/// Several deployments report the job id at once and the request does not pick one.
#[derive(Debug, Clone, PartialEq)]
pub struct Ambiguous {
    /// Each deployment, as `label=value, …`.
    pub deployments: Vec<String>,
    /// The labels that tell them apart.
    pub labels: Vec<String>,
    /// The request's values of those labels, as `label=value` (none: it named none).
    pub asked: Vec<String>,
}

fn describe(labels: &[String], values: &[String]) -> String {
    let pairs: Vec<String> =
        labels.iter().zip(values).filter(|(_, v)| !v.is_empty()).map(|(k, v)| format!("{k}={v}")).collect();
    pairs.join(", ")
}

/// Picks the deployment to diagnose among the reporters of one job id (application mode
/// with HA gives every job the id `000…0`). Current reporters whose labels differ in a
/// label with two or more values are several deployments: `wanted` (the request's labels)
/// must name one by those labels, or nothing is blended and the answer is [`Ambiguous`].
/// Reporters that differ only where one has a label the other lacks (two relabelling
/// schemes), or that stopped, are one deployment: the newest wins.
pub fn pick_deployment(reporters: &[Reporter], wanted: &BTreeMap<String, String>) -> Result<Chosen, Ambiguous> {
    let newest_of = |members: &[usize]| {
        *members
            .iter()
            .max_by_key(|&&i| (reporters[i].current, reporters[i].sampled_at_ms))
            .expect("at least one reporter")
    };
    let all: Vec<usize> = (0..reporters.len()).collect();
    let current: Vec<usize> = all.iter().copied().filter(|&i| reporters[i].current).collect();
    let mut values_of: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for &i in &current {
        for (k, v) in reporters[i].labels.iter().filter(|(_, v)| !v.is_empty()) {
            values_of.entry(k.as_str()).or_default().insert(v.as_str());
        }
    }
    let labels: Vec<String> = values_of.iter().filter(|(_, vs)| vs.len() > 1).map(|(k, _)| k.to_string()).collect();
    if labels.is_empty() {
        return Ok(Chosen { index: newest_of(&all), distinguishing: Vec::new(), note: None });
    }
    let mut groups: BTreeMap<Vec<String>, Vec<usize>> = BTreeMap::new();
    for &i in &current {
        let key = labels.iter().map(|l| reporters[i].labels.get(l).cloned().unwrap_or_default()).collect();
        groups.entry(key).or_default().push(i);
    }
    let deployments: Vec<String> = groups.keys().map(|k| describe(&labels, k)).collect();
    let asked: Vec<(usize, &String)> =
        labels.iter().enumerate().filter_map(|(i, l)| wanted.get(l).map(|v| (i, v))).collect();
    let matching: Vec<(&Vec<String>, &Vec<usize>)> =
        groups.iter().filter(|(k, _)| asked.iter().all(|(i, v)| k[*i] == **v)).collect();
    match (asked.is_empty(), matching.as_slice()) {
        (false, [(values, members)]) => {
            let distinguishing = labels
                .iter()
                .zip(values.iter())
                .filter(|(_, v)| !v.is_empty())
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            let note = format!(
                "{} deployments report this job id at once ({}): diagnosing {}, which the request names; the others' series are left out",
                groups.len(),
                deployments.join("; "),
                describe(&labels, values)
            );
            Ok(Chosen { index: newest_of(members), distinguishing, note: Some(note) })
        }
        _ => Err(Ambiguous {
            deployments,
            asked: asked.iter().map(|(i, v)| format!("{}={v}", labels[*i])).collect(),
            labels,
        }),
    }
}

/// Names of the queries that find the hygiene a run needs.
pub const ATTEMPTS: &str = "series/attempts";
pub const ATTEMPTS_ONCE: &str = "series/attempts_once";
/// Names of the queries that count the series of superseded attempts left out.
pub const SUPERSEDED_ALL: &str = "series/superseded_all";
pub const SUPERSEDED_NEWEST: &str = "series/superseded_newest";

/// The queries that say which hygiene the run's task series need: per `task_attempt_num`,
/// the series of `records` (a task counter every Flink version reports; `selector` holds the
/// run's job id and deployment) over `lookback` before `at`, as they are and once per
/// scrape target. Several attempts call for the newest-attempt rule; fewer series once per
/// target than as they are, for merging what two scrape jobs read.
///
/// With `deployment_labels` (those that tell deployments under one job id apart), the
/// counts are per their values too: [`task_matchers`] reads which of them the task series
/// carry.
pub fn hygiene_queries(
    selector: &Selector,
    deployment_labels: &[String],
    scrape_labels: &[String],
    at_ms: i64,
    lookback_ms: i64,
) -> Vec<(String, Query)> {
    let mut by: Vec<&str> = vec![ATTEMPT_LABEL];
    by.extend(deployment_labels.iter().map(String::as_str));
    let per_attempt = |selector: Selector| Query::OverTime {
        selector,
        func: OverTime::Last,
        range_ms: lookback_ms,
        at_ms,
        aggregation: Some(Aggregation::new(Agg::Count, &by)),
    };
    let once = Hygiene { attempts: Vec::new(), scrape_labels: scrape_labels.to_vec() };
    vec![
        (ATTEMPTS.to_string(), per_attempt(selector.clone())),
        (ATTEMPTS_ONCE.to_string(), per_attempt(selector.clone().with_hygiene(once))),
    ]
}

/// The deployment's matchers its task series can be selected by: of `distinguishing` (the
/// labels that tell the deployments apart, with the chosen one's values), those whose value
/// the task series of [`hygiene_queries`]' `attempts` answer carry. Empty when none do (the
/// JobManager's `host` tells deployments apart, but task series carry their TaskManager's).
pub fn task_matchers(distinguishing: &[(String, String)], attempts: &QueryResult) -> Vec<(String, String)> {
    distinguishing.iter().filter(|(k, v)| attempts.iter().any(|s| s.label(k) == v)).cloned().collect()
}

/// The rows of `result` whose labels match every matcher.
pub fn matching(result: &QueryResult, matchers: &[(String, String)]) -> QueryResult {
    result.iter().filter(|s| matchers.iter().all(|(k, v)| s.label(k) == v)).cloned().collect()
}

/// The hygiene [`hygiene_queries`]' answers call for, and a note when series were scraped
/// more than once, or when the two answers cannot both be whole.
///
/// Both answers count the same series, per attempt (and deployment labels): as they are
/// (`attempts`), and once per scrape target (`once`). Read as duplicate scraping only when
/// they agree that far: every group of one is in the other, and counts once per target no
/// more than as they are. Otherwise one answer lacks series (a Thanos or Mimir partial
/// response, a querier that timed out, a series limit): that is said, never "scraped more
/// than once", and the copies are merged anyway (a no-op where nothing is scraped twice).
pub fn hygiene_from(attempts: &QueryResult, once: &QueryResult, scrape_labels: &[String]) -> (Hygiene, Option<String>) {
    let groups = |r: &QueryResult| -> BTreeMap<BTreeMap<String, String>, f64> {
        r.iter().filter_map(|s| Some((s.labels.clone(), s.last_value().filter(|v| v.is_finite())?))).collect()
    };
    let (per_attempt, per_target) = (groups(attempts), groups(once));
    // `fold` from +0: an empty sum is 0, never −0.
    let total = |g: &BTreeMap<BTreeMap<String, String>, f64>| g.values().fold(0.0, |a, v| a + v);
    let (all, distinct) = (total(&per_attempt), total(&per_target));
    let consistent = per_attempt.len() == per_target.len()
        && per_attempt.iter().all(|(k, n)| per_target.get(k).is_some_and(|m| *m >= 1.0 && m <= n));
    let twice = all > distinct;
    let hygiene = Hygiene {
        attempts: sorted_attempts(attempts.iter().map(|s| s.label(ATTEMPT_LABEL).to_string())),
        scrape_labels: if twice || !consistent { scrape_labels.to_vec() } else { Vec::new() },
    };
    let some_labels = scrape_labels.iter().take(3).cloned().collect::<Vec<_>>().join(", ");
    let note = if !consistent {
        Some(format!(
            "The metric store's answers disagree, so the data may be incomplete: counted per task attempt the job's task series are {all:.0} in {} group(s), counted once per scrape target {distinct:.0} in {} group(s), and the second can hold no series the first lacks. An answer was likely partial (a Thanos or Mimir partial response, a store or querier that timed out, a series limit): numbers below may leave part of the job out",
            per_attempt.len(),
            per_target.len()
        ))
    } else {
        twice.then(|| {
            format!(
                "{all:.0} task series were scraped more than once ({distinct:.0} distinct; the copies differ only in scrape labels such as {some_labels}): each counts once"
            )
        })
    };
    (hygiene, note)
}

/// When the run has several attempts: per vertex, the series of `records` in the window
/// with every attempt and with the newest only (both once per target), to say what was left
/// out. None otherwise.
pub fn superseded_queries(task_selector: &Selector, window_ms: i64, at_ms: i64) -> Vec<(String, Query)> {
    if task_selector.hygiene.attempts.len() < 2 {
        return Vec::new();
    }
    let count = |selector: Selector| Query::OverTime {
        selector,
        func: OverTime::Count,
        range_ms: window_ms,
        at_ms,
        aggregation: Some(Aggregation::new(Agg::Count, &["task_id", "task_name"])),
    };
    let every_attempt = Hygiene { attempts: Vec::new(), scrape_labels: task_selector.hygiene.scrape_labels.clone() };
    vec![
        (SUPERSEDED_ALL.to_string(), count(task_selector.clone().with_hygiene(every_attempt))),
        (SUPERSEDED_NEWEST.to_string(), count(task_selector.clone())),
    ]
}

/// The note saying which series of superseded attempts were left out, from
/// [`superseded_queries`]' answers; `name` gives a vertex's name by id. None when none were.
pub fn superseded_note(
    all: &QueryResult,
    newest: &QueryResult,
    attempts: &[String],
    name: impl Fn(&str, &str) -> String,
) -> Option<String> {
    let newest: BTreeMap<&str, f64> =
        newest.iter().filter_map(|s| Some((s.label("task_id"), s.last_value()?))).collect();
    let mut dropped: Vec<(String, u64)> = all
        .iter()
        .filter_map(|s| {
            let n = s.last_value()? - newest.get(s.label("task_id")).copied().unwrap_or(0.0);
            (n >= 1.0).then(|| (name(s.label("task_id"), s.label("task_name")), n as u64))
        })
        .collect();
    if dropped.is_empty() {
        return None;
    }
    dropped.sort();
    let total: u64 = dropped.iter().map(|d| d.1).sum();
    let list: Vec<String> = dropped.iter().map(|(n, c)| format!("{n} ({c})")).collect();
    Some(format!(
        "Left out {total} series of superseded task attempts ({}): only the newest attempt of each subtask counts (attempts seen: {}). A restart leaves the old attempt's series behind for a few minutes; a PushGateway serves a dead TaskManager's last push until its group is deleted.",
        crate::render::words::numbers::limited_list(&list, 8),
        attempts.join(", ")
    ))
}

/// One selected series' result before aggregation: its labels and value. A series is a row
/// when it has samples (in the range, or within the lookback of an instant); `value` is
/// `None` when it has samples but no value (a rate over a single sample).
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub labels: BTreeMap<String, String>,
    pub value: Option<f64>,
}

/// Applies `hygiene` to the rows of one selector, as the PromQL of
/// [`crate::collect::query::Query::to_promql`] does: rows of superseded attempts are left
/// out, then (when `once_per_target`) rows equal but for the scrape labels are merged by
/// `max` (NaN only when every value is NaN). Returns the rows with a value.
pub fn reduce(hygiene: &Hygiene, rows: Vec<Row>, once_per_target: bool) -> Vec<(BTreeMap<String, String>, f64)> {
    let rows = newest_attempts(&hygiene.attempts, rows);
    let valued = rows.into_iter().filter_map(|r| r.value.map(|v| (r.labels, v)));
    if !once_per_target || hygiene.scrape_labels.is_empty() {
        return valued.collect();
    }
    let mut merged: BTreeMap<BTreeMap<String, String>, f64> = BTreeMap::new();
    for (labels, v) in valued {
        merged.entry(target_identity(hygiene, labels)).and_modify(|m| *m = merge_max(*m, v)).or_insert(v);
    }
    merged.into_iter().collect()
}

/// The labels rows merged once per target agree on: all but the metric name and the
/// scrape labels.
pub fn target_identity(hygiene: &Hygiene, mut labels: BTreeMap<String, String>) -> BTreeMap<String, String> {
    labels.retain(|k, _| k != "__name__" && !hygiene.scrape_labels.contains(k));
    labels
}

/// One more value of rows merged once per target: the larger, a number over NaN.
pub fn merge_max(merged: f64, v: f64) -> f64 {
    if merged.is_nan() || v > merged { v } else { merged }
}

/// Where the newest-attempt rule places a row: its subtask (the values of
/// [`SUBTASK_LABELS`]) and the rank of its attempt among the listed ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptRank {
    subtask: Vec<String>,
    rank: Option<usize>,
}

impl AttemptRank {
    pub fn of(attempts: &[String], labels: &BTreeMap<String, String>) -> Self {
        AttemptRank {
            subtask: SUBTASK_LABELS.iter().map(|l| labels.get(*l).cloned().unwrap_or_default()).collect(),
            rank: labels.get(ATTEMPT_LABEL).and_then(|a| attempts.iter().position(|x| x == a)),
        }
    }
}

/// Whether each row (by its [`AttemptRank`]) stays when only the newest of the `listed`
/// attempts with samples counts per subtask.
pub fn newest_attempts_kept(listed: usize, ranks: &[&AttemptRank]) -> Vec<bool> {
    // The highest listed attempt with samples, per subtask.
    let mut newest: BTreeMap<&[String], usize> = BTreeMap::new();
    for r in ranks {
        if let Some(i) = r.rank {
            let e = newest.entry(&r.subtask).or_insert(i);
            *e = (*e).max(i);
        }
    }
    ranks
        .iter()
        .map(|r| match r.rank {
            // The last listed attempt, like an unlisted one, is never superseded.
            Some(i) if i + 1 < listed => newest.get(r.subtask.as_slice()).is_none_or(|&n| n <= i),
            _ => true,
        })
        .collect()
}

/// The rows left when only the newest listed attempt of each subtask counts (see
/// [`Hygiene::attempts`]).
fn newest_attempts(attempts: &[String], rows: Vec<Row>) -> Vec<Row> {
    if attempts.len() < 2 {
        return rows;
    }
    let ranks: Vec<AttemptRank> = rows.iter().map(|r| AttemptRank::of(attempts, &r.labels)).collect();
    let kept = newest_attempts_kept(attempts.len(), &ranks.iter().collect::<Vec<_>>());
    rows.into_iter().zip(kept).filter_map(|(r, keep)| keep.then_some(r)).collect()
}

/// Attempt values in ascending numeric order (non-numbers last, as text), deduplicated.
pub fn sorted_attempts(values: impl IntoIterator<Item = String>) -> Vec<String> {
    let set: BTreeSet<String> = values.into_iter().filter(|v| !v.is_empty()).collect();
    let mut v: Vec<String> = set.into_iter().collect();
    v.sort_by(|a, b| match (a.parse::<u64>(), b.parse::<u64>()) {
        (Ok(x), Ok(y)) => x.cmp(&y),
        (Ok(_), Err(_)) => std::cmp::Ordering::Less,
        (Err(_), Ok(_)) => std::cmp::Ordering::Greater,
        (Err(_), Err(_)) => a.cmp(b),
    });
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(task: &str, sub: &str, attempt: &str, extra: &[(&str, &str)], value: Option<f64>) -> Row {
        let mut labels: BTreeMap<String, String> =
            [("task_id", task), ("subtask_index", sub), ("task_attempt_num", attempt)]
                .iter()
                .filter(|(_, v)| !v.is_empty())
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
        labels.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        Row { labels, value }
    }

    fn hygiene(attempts: &[&str], scrape: &[&str]) -> Hygiene {
        Hygiene {
            attempts: attempts.iter().map(|s| s.to_string()).collect(),
            scrape_labels: scrape.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn counts(groups: &[(&str, f64)]) -> QueryResult {
        groups
            .iter()
            .map(|(attempt, n)| crate::collect::query::ResultSeries {
                labels: [(ATTEMPT_LABEL.to_string(), attempt.to_string())].into(),
                points: vec![(0, *n)],
            })
            .collect()
    }

    #[test]
    fn two_answers_that_cannot_both_be_whole_are_named_as_incomplete_not_as_double_scraping() {
        let scrape = ["job".to_string(), "instance".to_string()];
        // Scraped twice: 16 series per attempt, 8 once per target, for the same attempt.
        let (h, note) = hygiene_from(&counts(&[("0", 16.0)]), &counts(&[("0", 8.0)]), &scrape);
        assert_eq!(
            note.as_deref(),
            Some(
                "16 task series were scraped more than once (8 distinct; the copies differ only in scrape labels such as job, instance): each counts once"
            )
        );
        assert_eq!(h.scrape_labels, scrape);
        // A partial answer: the second answer lost attempt 1's group (as half the series of
        // every query dropped does), or holds more than the first: no sentence of scraping,
        // no "-0 distinct", but that the data may be incomplete.
        for (attempts, once) in [
            (counts(&[("0", 8.0), ("1", 8.0)]), counts(&[("0", 8.0)])),
            (counts(&[("0", 8.0)]), Vec::new()),
            (counts(&[("0", 4.0)]), counts(&[("0", 8.0)])),
        ] {
            let (_, note) = hygiene_from(&attempts, &once, &scrape);
            let note = note.unwrap();
            assert!(note.starts_with("The metric store's answers disagree, so the data may be incomplete"), "{note}");
            assert!(!note.contains("scraped more than once") && !note.contains("-0"), "{note}");
        }
        // Nothing twice, nothing lost: no note.
        assert_eq!(hygiene_from(&counts(&[("0", 8.0)]), &counts(&[("0", 8.0)]), &scrape).1, None);
    }

    #[test]
    fn only_the_newest_attempt_of_each_subtask_counts() {
        // Subtask 0 has attempts 0 and 1 (restarted): 1 counts. Subtask 1 has only
        // attempt 0 (not restarted, a region failover spared it): it counts.
        let rows = vec![
            row("v", "0", "0", &[], Some(960.0)),
            row("v", "0", "1", &[], Some(10.0)),
            row("v", "1", "0", &[], Some(300.0)),
        ];
        let out = reduce(&hygiene(&["0", "1"], &[]), rows, false);
        let values: Vec<f64> = out.iter().map(|(_, v)| *v).collect();
        assert_eq!(values, [10.0, 300.0]);
    }

    #[test]
    fn a_newer_attempt_without_a_value_still_supersedes() {
        // A rate over one sample has no value, but the newer attempt has samples: the old
        // attempt is gone all the same (PromQL: `unless on(…) count_over_time(…)`).
        let rows = vec![row("v", "0", "0", &[], Some(5.0)), row("v", "0", "1", &[], None)];
        assert!(reduce(&hygiene(&["0", "1"], &[]), rows, false).is_empty());
    }

    #[test]
    fn series_without_an_attempt_or_of_an_unlisted_attempt_always_count() {
        let rows = vec![
            row("", "", "", &[("tm_id", "tm-1")], Some(1.0)),
            row("v", "0", "7", &[], Some(2.0)),
            row("v", "0", "1", &[], Some(3.0)),
        ];
        // 7 is not listed: it neither counts as newer nor is dropped.
        assert_eq!(reduce(&hygiene(&["0", "1"], &[]), rows, false).len(), 3);
    }

    #[test]
    fn one_target_scraped_twice_counts_once_as_the_max() {
        // The same subtask from two scrape jobs, and a second subtask once: two rows remain,
        // subtask 0 at max(400, 410) = 410.
        let rows = vec![
            row("v", "0", "0", &[("job", "pods"), ("instance", "10.0.0.1:9249")], Some(400.0)),
            row("v", "0", "0", &[("job", "podmonitor"), ("instance", "10.0.0.1:9249")], Some(410.0)),
            row("v", "1", "0", &[("job", "pods")], Some(f64::NAN)),
            row("v", "1", "0", &[("job", "podmonitor")], Some(7.0)),
        ];
        let out = reduce(&hygiene(&[], &["job", "instance"]), rows.clone(), true);
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].1, 410.0);
        // NaN loses to a number, as in PromQL's max.
        assert_eq!(out[1].1, 7.0);
        assert!(!out[0].0.contains_key("job"));
        // Not merged where the query keeps series apart (a range query without aggregation).
        assert_eq!(reduce(&hygiene(&[], &["job", "instance"]), rows, false).len(), 4);
    }

    /// One vertex `v` with two subtasks, scraped every 5 s over (0, 300 s]: subtask 0
    /// restarted at 150 s (attempt 0 busy 900 ms/s until 145 s, attempt 1 busy 100 ms/s
    /// from 150 s); subtask 1 runs attempt 0 throughout at 400 ms/s.
    fn restarted() -> crate::collect::store::SeriesStore {
        let mut store = crate::collect::store::SeriesStore::new();
        for t in (5..=300).step_by(5) {
            let ms = t * 1000;
            let (attempt, busy) = if t < 150 { ("0", 900.0) } else { ("1", 100.0) };
            let labels = [("job_id", "j"), ("task_id", "v"), ("subtask_index", "0"), ("task_attempt_num", attempt)];
            store.push("busy", &labels, ms, busy);
            let labels = [("job_id", "j"), ("task_id", "v"), ("subtask_index", "1"), ("task_attempt_num", "0")];
            store.push("busy", &labels, ms, 400.0);
        }
        store.finish();
        store
    }

    fn max_busy(store: &crate::collect::store::SeriesStore, attempts: &[&str]) -> f64 {
        let q = Query::OverTime {
            selector: Selector::metric("busy").with("job_id", "j").with_hygiene(hygiene(attempts, &[])),
            func: OverTime::Avg,
            range_ms: 300_000,
            at_ms: 300_000,
            aggregation: Some(Aggregation::new(Agg::Max, &["task_id"])),
        };
        store.evaluate(&q)[0].points[0].1
    }

    #[test]
    fn a_restart_inside_the_window_counts_only_the_new_attempt_of_the_restarted_subtask() {
        let store = restarted();
        // Every series: max(avg 900 of attempt 0, avg 100 of attempt 1, avg 400) = 900.
        assert_eq!(max_busy(&store, &[]), 900.0);
        // Newest attempts: subtask 0's attempt 1 (100) and subtask 1's attempt 0 (400),
        // which nothing supersedes: max(100, 400) = 400.
        assert_eq!(max_busy(&store, &["0", "1"]), 400.0);
    }

    #[test]
    fn the_newest_attempt_rule_holds_at_each_step_of_a_range_query() {
        // max over the job's series at 100 s (only attempt 0 exists: 900) and at 200 s (the
        // instant vector holds attempt 0 until the 5 min lookback passes, but attempt 1
        // supersedes it: max(100, 400) = 400).
        let q = Query::Range {
            selector: Selector::metric("busy").with("job_id", "j").with_hygiene(hygiene(&["0", "1"], &[])),
            aggregation: Some(Aggregation::new(Agg::Max, &[])),
            start_ms: 100_000,
            end_ms: 200_000,
            step_ms: 100_000,
        };
        assert_eq!(restarted().evaluate(&q)[0].points, vec![(100_000, 900.0), (200_000, 400.0)]);
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn two_deployments_at_once_are_refused_unless_the_request_names_one() {
        let eu = labels(&[("host", "jm"), ("namespace", "flink-eu")]);
        let us = labels(&[("host", "jm"), ("namespace", "flink-us")]);
        let reporters = [
            Reporter { labels: &eu, current: true, sampled_at_ms: 1_000 },
            Reporter { labels: &us, current: true, sampled_at_ms: 1_000 },
        ];
        // `host` is the same: only `namespace` tells them apart.
        let err = pick_deployment(&reporters, &labels(&[("alertname", "X")])).unwrap_err();
        assert_eq!(err.deployments, ["namespace=flink-eu", "namespace=flink-us"]);
        assert_eq!(err.labels, ["namespace"]);
        assert!(err.asked.is_empty());
        let chosen = pick_deployment(&reporters, &labels(&[("namespace", "flink-us")])).unwrap();
        assert_eq!(chosen.index, 1);
        assert_eq!(chosen.distinguishing, [("namespace".to_string(), "flink-us".to_string())]);
        let err = pick_deployment(&reporters, &labels(&[("namespace", "flink-ap")])).unwrap_err();
        assert_eq!(err.asked, ["namespace=flink-ap"]);
    }

    #[test]
    fn one_jobmanager_under_two_relabelling_schemes_is_one_deployment() {
        // Pod annotations give `kubernetes_namespace`, the PodMonitor `namespace`: each
        // label has one value, so nothing tells two deployments apart.
        let a = labels(&[("host", "jm"), ("kubernetes_namespace", "flink")]);
        let b = labels(&[("host", "jm"), ("namespace", "flink")]);
        let reporters = [
            Reporter { labels: &a, current: true, sampled_at_ms: 1_000 },
            Reporter { labels: &b, current: true, sampled_at_ms: 2_000 },
        ];
        let chosen = pick_deployment(&reporters, &BTreeMap::new()).unwrap();
        assert_eq!((chosen.index, chosen.distinguishing.len(), chosen.note), (1, 0, None));
    }

    #[test]
    fn a_jobmanager_that_stopped_is_an_older_incarnation_not_a_second_deployment() {
        // A JobManager failover moved the job to host jm-b; jm-a's series stopped.
        let old = labels(&[("host", "jm-a")]);
        let new = labels(&[("host", "jm-b")]);
        let reporters = [
            Reporter { labels: &old, current: false, sampled_at_ms: 1_000 },
            Reporter { labels: &new, current: true, sampled_at_ms: 9_000 },
        ];
        let chosen = pick_deployment(&reporters, &BTreeMap::new()).unwrap();
        assert_eq!((chosen.index, chosen.distinguishing.len()), (1, 0));
    }

    #[test]
    fn task_series_are_split_only_by_labels_they_carry() {
        let row = |pairs: &[(&str, &str)]| crate::collect::query::ResultSeries {
            labels: labels(pairs),
            points: vec![(0, 4.0)],
        };
        let attempts = vec![row(&[("task_attempt_num", "0"), ("namespace", "flink-us")])];
        let distinguishing =
            [("host".to_string(), "jm-us".to_string()), ("namespace".to_string(), "flink-us".to_string())];
        // The JobManager's host is not on task series; the namespace is.
        assert_eq!(task_matchers(&distinguishing, &attempts), [distinguishing[1].clone()]);
        assert!(task_matchers(&distinguishing[..1], &attempts).is_empty());
    }

    #[test]
    fn attempts_sort_as_numbers() {
        let v = sorted_attempts(["10", "2", "0", "2", ""].iter().map(|s| s.to_string()));
        assert_eq!(v, ["0", "2", "10"]);
    }
}
