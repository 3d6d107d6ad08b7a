//! Which naming scheme the data holds ([`crate::model::naming`]): a recording or a store
//! without the configured scheme's names may hold another scheme's (Flink's OpenTelemetry
//! reporter through a Collector, or over OTLP into Prometheus 3 with dotted names). A scheme
//! is told by how many of its names for the metrics every diagnosis reads are there: the
//! job's `uptime`, the tasks' busy time and their record counters and meters (the
//! Collector's gauges are the Prometheus reporter's names; its counters and meters are not).

use crate::collect::query::{Agg, Aggregation, Query, QueryResult, Selector};
use crate::collect::store::SeriesStore;
use crate::model::catalog::MetricCatalog;
use crate::model::naming::NamingScheme;

/// What the data says of the naming scheme.
#[derive(Debug, Clone, PartialEq)]
pub enum Detection {
    /// The configured names are there: nothing to change.
    Configured,
    /// The configured names are absent and one other scheme's are present: its catalog,
    /// and the note that says so.
    Other { catalog: Box<MetricCatalog>, note: String },
    /// The configured names are absent and several other schemes' are present: an error
    /// naming them and the setting.
    Ambiguous(String),
    /// No scheme's names: the data holds no Flink job metrics culprit knows, and (when it
    /// holds Flink metrics under names of the OpenTelemetry reporter none of the schemes
    /// matches) a hint that says so.
    Absent { hint: Option<String> },
}

/// The names that tell a scheme: the job's uptime, the tasks' busy time, record counters
/// and record meters.
fn telling_names(catalog: &MetricCatalog) -> [&str; 6] {
    [
        catalog.uptime.as_str(),
        catalog.busy.as_str(),
        catalog.records_in.as_str(),
        catalog.records_out.as_str(),
        catalog.records_in_per_second.as_str(),
        catalog.records_out_per_second.as_str(),
    ]
}

/// Reads the scheme from a recording or scrape dumps.
pub fn detect_in_store(store: &SeriesStore, catalog: &MetricCatalog) -> Detection {
    let present = |name: &str| store.count_matching(&Selector::metric(name)) > 0;
    decide(catalog, present, || dotted_flink_hint(&store.metric_names()))
}

/// How many of a catalog's telling names `present` finds.
fn score(catalog: &MetricCatalog, present: &impl Fn(&str) -> bool) -> usize {
    telling_names(catalog).into_iter().filter(|n| present(n)).count()
}

/// The configured scheme while no other scheme's telling names are found more often; else
/// the one that is, or an error when several are.
fn decide(catalog: &MetricCatalog, present: impl Fn(&str) -> bool, hint: impl Fn() -> Option<String>) -> Detection {
    let own = score(catalog, &present);
    let others: Vec<(NamingScheme, MetricCatalog, usize)> = NamingScheme::CONCRETE
        .iter()
        .filter(|&&s| !same_scheme(catalog.scheme, s))
        .map(|&s| {
            let other = catalog.with_scheme(s);
            let n = score(&other, &present);
            (s, other, n)
        })
        .filter(|(_, _, n)| *n > own)
        .collect();
    let best = others.iter().map(|(_, _, n)| *n).max().unwrap_or(0);
    let found: Vec<&(NamingScheme, MetricCatalog, usize)> = others.iter().filter(|(_, _, n)| *n == best).collect();
    match found.as_slice() {
        [] if own > 0 => Detection::Configured,
        [] => Detection::Absent { hint: hint() },
        [(scheme, other, _)] => {
            Detection::Other { catalog: Box::new(other.clone()), note: switched_note(catalog, *scheme) }
        }
        several => Detection::Ambiguous(format!(
            "the metrics carry the names of several naming schemes ({}) and none of `[metrics] scheme = \"{}\"`: set `[metrics] scheme` to the one to diagnose",
            several.iter().map(|(s, _, _)| format!("`{}`", s.key())).collect::<Vec<_>>().join(", "),
            catalog.scheme.key()
        )),
    }
}

/// `auto` reads the Prometheus reporter's names first: the same scheme.
fn same_scheme(a: NamingScheme, b: NamingScheme) -> bool {
    let concrete = |s| if s == NamingScheme::Auto { NamingScheme::FlinkPrometheus } else { s };
    concrete(a) == concrete(b)
}

fn switched_note(catalog: &MetricCatalog, scheme: NamingScheme) -> String {
    let configured = if catalog.scheme == NamingScheme::Auto { NamingScheme::FlinkPrometheus } else { catalog.scheme };
    format!(
        "the metrics do not carry the names of `[metrics] scheme = \"{}\"` (such as `{}`) but those of {}: read with `[metrics] scheme = \"{}\"`; set it in the configuration to say so",
        configured.key(),
        catalog.records_in,
        scheme.describe(),
        scheme.key()
    )
}

/// When Flink metrics are there under dotted (UTF-8) names none of the schemes names
/// exactly (another scope format, other suffixes), says so and which setting maps them:
/// the `[metrics]` keys, one by one. This is only asked when no scheme's names were found,
/// so naming a scheme here (`otlp_utf8` included) would send the user in a circle.
fn dotted_flink_hint(names: &[&str]) -> Option<String> {
    let dotted: Vec<&&str> = names.iter().filter(|n| n.starts_with("flink.") && n.contains('.')).collect();
    let first = dotted.first()?;
    Some(format!(
        "the data holds {} Flink metric{} under dotted (UTF-8) names such as `{first}`, which no `[metrics] scheme` names (another `metrics.scope.*` format or other suffixes): map them with the `[metrics]` keys one by one (e.g. `busy = \"…busyTimeMsPerSecond\"`)",
        dotted.len(),
        if dotted.len() == 1 { "" } else { "s" }
    ))
}

/// The one cheap query of a live detection: how many series of each scheme's telling names
/// the store has at each step of the lookback, by name (`count by (__name__)
/// ({__name__=~"a|b|…"})` over a range: a `*_over_time` function would drop the names, and
/// the series of several names would then collide).
pub fn lookup_query(catalog: &MetricCatalog, at_ms: i64, lookback_ms: i64, step_ms: i64) -> Query {
    let mut names: Vec<String> =
        NamingScheme::CONCRETE.iter().flat_map(|&s| telling_names(&catalog.with_scheme(s)).map(String::from)).collect();
    names.sort();
    names.dedup();
    Query::Range {
        selector: Selector::metrics(&names),
        aggregation: Some(Aggregation::new(Agg::Count, &["__name__"])),
        start_ms: at_ms - lookback_ms,
        end_ms: at_ms,
        step_ms: step_ms.max(1),
    }
}

/// The scheme the answer of [`lookup_query`] shows.
pub fn detect_in_answer(answer: &QueryResult, catalog: &MetricCatalog) -> Detection {
    let present = |name: &str| answer.iter().any(|s| s.label("__name__") == name && s.points.iter().any(|p| p.1 > 0.0));
    decide(catalog, present, || None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store_with(names: &[&str]) -> SeriesStore {
        let mut store = SeriesStore::new();
        for name in names {
            store.push(name, &[("job_id", "j")], 1_000, 1.0);
        }
        store.finish();
        store
    }

    #[test]
    fn the_configured_names_present_change_nothing() {
        let store = store_with(&["flink_jobmanager_job_uptime"]);
        assert_eq!(detect_in_store(&store, &MetricCatalog::default()), Detection::Configured);
    }

    #[test]
    fn another_schemes_names_are_used_and_a_note_says_which_and_the_setting() {
        let store = store_with(&["flink.jobmanager.job.uptime", "flink.taskmanager.job.task.busyTimeMsPerSecond"]);
        let Detection::Other { catalog, note } = detect_in_store(&store, &MetricCatalog::default()) else {
            panic!("a scheme should be found")
        };
        assert_eq!(catalog.scheme, NamingScheme::OtlpUtf8);
        assert_eq!(catalog.records_in, "flink.taskmanager.job.task.numRecordsIn_total");
        assert!(note.contains("`[metrics] scheme = \"otlp_utf8\"`") && note.contains("Prometheus 3"), "{note}");
    }

    #[test]
    fn a_key_set_by_hand_is_kept_when_the_scheme_is_read_from_the_data() {
        let store = store_with(&["flink.jobmanager.job.uptime"]);
        let given = MetricCatalog { idle: "my.idle".into(), ..MetricCatalog::default() };
        let Detection::Other { catalog, .. } = detect_in_store(&store, &given) else { panic!("a scheme") };
        assert_eq!(catalog.idle, "my.idle");
    }

    #[test]
    fn a_collector_recording_is_told_from_the_prometheus_reporters_by_its_counters() {
        // The Collector's gauges carry the Prometheus reporter's names; `_total` tells it.
        let store = store_with(&[
            "flink_jobmanager_job_uptime",
            "flink_taskmanager_job_task_busyTimeMsPerSecond",
            "flink_taskmanager_job_task_numRecordsIn_total",
            "flink_taskmanager_job_task_numRecordsOut_total",
        ]);
        let Detection::Other { catalog, note } = detect_in_store(&store, &MetricCatalog::default()) else {
            panic!("the Collector's scheme")
        };
        assert_eq!(catalog.scheme, NamingScheme::OtelCollector);
        assert!(catalog.scrape_labels.iter().any(|l| l == "exported_job"));
        assert!(note.contains("OpenTelemetry Collector"), "{note}");
        // With the Prometheus reporter's counters there too, the configured scheme stands.
        let store = store_with(&["flink_jobmanager_job_uptime", "flink_taskmanager_job_task_numRecordsIn"]);
        assert_eq!(detect_in_store(&store, &MetricCatalog::default()), Detection::Configured);
    }

    #[test]
    fn the_names_of_two_other_schemes_as_often_are_an_error_naming_both_and_the_setting() {
        // One OTLP name, one Collector name, none of the Prometheus reporter's.
        let store = store_with(&["flink.jobmanager.job.uptime", "flink_taskmanager_job_task_numRecordsIn_total"]);
        let Detection::Ambiguous(message) = detect_in_store(&store, &MetricCatalog::default()) else {
            panic!("ambiguous")
        };
        assert_eq!(
            message,
            "the metrics carry the names of several naming schemes (`otel_collector`, `otlp_utf8`) and none of `[metrics] scheme = \"flink_prometheus\"`: set `[metrics] scheme` to the one to diagnose"
        );
    }

    #[test]
    fn dotted_flink_names_no_scheme_knows_get_a_hint_naming_the_setting() {
        let store = store_with(&["flink.tm.job.task.busy", "flink.tm.job.task.idle"]);
        let Detection::Absent { hint: Some(hint) } = detect_in_store(&store, &MetricCatalog::default()) else {
            panic!("a hint")
        };
        assert!(
            hint.starts_with(
                "the data holds 2 Flink metrics under dotted (UTF-8) names such as `flink.tm.job.task.busy`"
            ),
            "{hint}"
        );
        assert!(hint.contains("[metrics] scheme"), "{hint}");
        assert_eq!(detect_in_store(&store_with(&["up"]), &MetricCatalog::default()), Detection::Absent { hint: None });
    }

    #[test]
    fn the_live_lookup_is_one_range_count_by_name_over_every_schemes_telling_names() {
        let q = lookup_query(&MetricCatalog::default(), 600_000, 300_000, 15_000);
        let promql = q.to_promql();
        assert!(promql.starts_with("count by (__name__) ({__name__=~\""), "{promql}");
        assert!(promql.contains("flink\\\\.jobmanager\\\\.job\\\\.uptime"), "{promql}");
        let answer = vec![crate::collect::query::ResultSeries {
            labels: [("__name__".to_string(), "flink.jobmanager.job.uptime".to_string())].into(),
            points: vec![(600_000, 1.0)],
        }];
        assert!(matches!(detect_in_answer(&answer, &MetricCatalog::default()), Detection::Other { .. }));
        assert_eq!(detect_in_answer(&Vec::new(), &MetricCatalog::default()), Detection::Absent { hint: None });
    }
}
