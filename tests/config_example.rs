//! `config/culprit.example.toml`: every commented example loads when uncommented as shown,
//! each on its own and all together.
//!
//! An example line is a comment `# <TOML>` whose text after `# ` is a TOML table header or
//! `key = value` on its own (prose does not parse; alternatives are written as prose, `#
//! or …`). A block is a run of consecutive example lines.

use culprit::config::Config;

const EXAMPLE: &str = include_str!("../config/culprit.example.toml");

/// The TOML of an example line, `None` for anything else.
fn example(line: &str) -> Option<&str> {
    let text = line.strip_prefix("# ")?;
    if text.starts_with(char::is_whitespace) || text.is_empty() {
        return None;
    }
    toml::from_str::<toml::Table>(text).ok().map(|_| text)
}

/// Runs of consecutive example lines, as line indexes.
fn blocks() -> Vec<Vec<usize>> {
    let mut out: Vec<Vec<usize>> = Vec::new();
    let mut previous_was_example = false;
    for (i, line) in EXAMPLE.lines().enumerate() {
        let is_example = example(line).is_some();
        match (is_example, previous_was_example) {
            (true, true) => out.last_mut().unwrap().push(i),
            (true, false) => out.push(vec![i]),
            _ => {}
        }
        previous_was_example = is_example;
    }
    out
}

/// The example with these lines uncommented.
fn uncommented(lines: &[usize]) -> String {
    EXAMPLE
        .lines()
        .enumerate()
        .map(|(i, l)| if lines.contains(&i) { example(l).unwrap() } else { l })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn the_example_has_the_commented_examples_it_documents() {
    let headers: Vec<&str> = blocks()
        .iter()
        .flatten()
        .filter_map(|i| example(EXAMPLE.lines().nth(*i).unwrap()))
        .filter(|t| t.starts_with('['))
        .collect();
    assert_eq!(
        headers,
        [
            "[[kafka.jobs]]",
            "[prometheus]",
            "[[flink.clusters]]",
            "[notify.slack]",
            "[notify.pagerduty]",
            "[notify.alertmanager]",
            "[[notify.webhook]]"
        ]
    );
}

#[test]
fn every_commented_example_loads_when_uncommented_on_its_own() {
    let defaults = Config::default();
    for block in blocks() {
        let first = EXAMPLE.lines().nth(block[0]).unwrap();
        let config = Config::from_toml(&uncommented(&block), "culprit.example.toml")
            .unwrap_or_else(|e| panic!("uncommenting `{first}` (line {}): {e}", block[0] + 1));
        assert_ne!(config, defaults, "uncommenting `{first}` changes nothing");
    }
}

/// The line of the example that starts with `# {start}`.
fn line_of(start: &str) -> usize {
    EXAMPLE.lines().position(|l| l.starts_with(&format!("# {start}"))).unwrap_or_else(|| panic!("no `# {start}`"))
}

#[test]
fn every_commented_example_uncommented_together_gives_exactly_its_two_conflicts_in_one_run() {
    // `server.auth` beside `webhook_auth`/`api_auth`, `store.path` beside `store.url`
    // (attack H5): both refused at once, each naming both keys and which to keep.
    let all: Vec<usize> = blocks().into_iter().flatten().collect();
    let err = Config::from_toml(&uncommented(&all), "culprit.example.toml").unwrap_err();
    assert_eq!(err.problems.len(), 2, "{err}");
    assert!(
        err.problems[0].starts_with("store.path and store.url are both set")
            && err.problems[0].contains("keep store.url"),
        "{err}"
    );
    assert!(
        err.problems[1].starts_with("server.auth and server.webhook_auth and server.api_auth are both set")
            && err.problems[1].contains("remove server.auth"),
        "{err}"
    );
}

#[test]
fn every_commented_example_loads_when_all_are_uncommented_together_but_the_alternatives() {
    let alternatives = [
        line_of("auth = { type = \"bearer\", token = { file = \"/run/secrets/culprit-webhook-token"),
        line_of("path = "),
    ];
    let all: Vec<usize> = blocks().into_iter().flatten().filter(|i| !alternatives.contains(i)).collect();
    let c = Config::from_toml(&uncommented(&all), "culprit.example.toml").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.kafka.jobs.len(), 1);
    assert_eq!(c.kafka.retention.len(), 1);
    assert_eq!(c.diagnosis.operator_kinds.len(), 1);
    assert!(c.prometheus.as_ref().is_some_and(|p| p.auth.is_some() && p.tenant.is_some()));
    assert_eq!(c.flink.clusters.len(), 1);
    assert_eq!(c.flink.cluster_label.as_deref(), Some("flink_cluster"));
    assert_eq!(c.flink.plans.len(), 1);
    assert!(c.server.auth.is_none() && c.server.webhook_auth.is_some() && c.server.api_auth.is_some());
    assert!(c.store.url.is_some() && c.store.password.is_some());
    assert!(c.server.external_url.is_some());
    assert!(c.notify.slack.is_some() && c.notify.pagerduty.is_some() && c.notify.alertmanager.is_some());
    assert_eq!(c.notify.webhook.len(), 1);
}
