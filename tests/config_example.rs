//! `config/culprit.example.toml`: every commented example loads when uncommented as shown,
//! each on its own and all together; and every key the types define (their schema, walked
//! by `culprit::config::reference::keys`) is in it, at the type's default or with the
//! default stated beside it.
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
            "[[notify.webhook]]",
            "[[notify.opsgenie]]",
            "[[notify.opsgenie]]",
            "[[notify.jsm]]",
            "[[notify.mattermost]]",
            "[[notify.discord]]",
            "[[notify.teams]]",
            "[[notify.google_chat]]",
            "[[notify.email]]",
            "[[notify.grafana]]",
            // The route example, last: its own two webhooks and a two-team tree.
            "[[notify.webhook]]",
            "[[notify.webhook]]",
            "[route]",
            "[[route.routes]]",
            "[[route.routes]]"
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
    // payments = "7d" and audit-log = -1 (no age limit, as Kafka's retention.ms=-1).
    assert_eq!(c.kafka.retention.len(), 2);
    assert_eq!(c.kafka.retention["audit-log"], culprit::config::RetentionMs::Unlimited);
    assert_eq!(c.diagnosis.operator_kinds.len(), 1);
    assert!(c.prometheus.as_ref().is_some_and(|p| p.auth.is_some() && p.tenant.is_some()));
    assert_eq!(c.flink.clusters.len(), 1);
    assert_eq!(c.flink.cluster_label.as_deref(), Some("flink_cluster"));
    assert_eq!(c.flink.plans.len(), 1);
    assert!(c.server.auth.is_none() && c.server.webhook_auth.is_some() && c.server.api_auth.is_some());
    assert!(c.store.url.is_some() && c.store.password.is_some());
    assert!(c.server.external_url.is_some());
    assert!(c.notify.slack.is_some() && c.notify.pagerduty.is_some() && c.notify.alertmanager.is_some());
    // incident-bot, and the route example's payments and fraud.
    assert_eq!(c.notify.webhook.len(), 3);
    assert_eq!(c.route.routes.len(), 2);
    // The US and the EU Opsgenie examples, and JSM.
    assert_eq!(c.notify.opsgenie.len(), 2);
    assert_eq!(c.notify.opsgenie[1].region, culprit::notify::opsgenie::OpsgenieRegion::Eu);
    assert_eq!(c.notify.jsm.len(), 1);
    assert_eq!((c.notify.mattermost.len(), c.notify.discord.len()), (1, 1));
    assert_eq!((c.notify.teams.len(), c.notify.google_chat.len()), (1, 1));
    assert_eq!(c.notify.email.len(), 1);
    assert_eq!(c.notify.grafana.len(), 1);
}

/// How the example writes a key: its value, and for a commented one the comment lines
/// above it (back to the previous key or a line that is no comment), where prose such as
/// "(default 16)" states a default that the example value does not show.
#[derive(Debug)]
struct Written {
    value: serde_json::Value,
    commented: bool,
    prose: String,
}

/// The table a header line opens (`[a.b]` → `a.b`, `[[a.b]]` → `a.b[]`), commented or not.
fn header(line: &str) -> Option<String> {
    let text = line.strip_prefix("# ").unwrap_or(line).trim_end();
    let name = |s: &str| s.chars().all(|c| c.is_ascii_lowercase() || c == '_' || c == '.') && !s.is_empty();
    if let Some(t) = text.strip_prefix("[[").and_then(|t| t.strip_suffix("]]")) {
        return name(t).then(|| format!("{t}[]"));
    }
    text.strip_prefix('[').and_then(|t| t.strip_suffix(']')).filter(|t| name(t)).map(str::to_string)
}

/// Every dotted path of a parsed table (`diagnosis`, `diagnosis.window`, …).
fn paths_of(table: &toml::Table, prefix: &str, out: &mut Vec<(String, toml::Value)>) {
    for (k, v) in table {
        let path = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
        if let toml::Value::Table(t) = v {
            paths_of(t, &path, out);
        }
        out.push((path, v.clone()));
    }
}

/// Every key the example writes, by dotted path: uncommented ones as TOML reads the file,
/// commented ones (`# key = value`, also indented alternatives) in the table of the last
/// header above them, commented or not.
fn written(example: &str) -> Vec<(String, Written)> {
    let table: toml::Table = toml::from_str(example).expect("the example parses");
    let mut uncommented = Vec::new();
    paths_of(&table, "", &mut uncommented);
    let json = |v: &toml::Value| serde_json::to_value(v).unwrap();
    let mut out: Vec<(String, Written)> = uncommented
        .iter()
        .map(|(p, v)| (p.clone(), Written { value: json(v), commented: false, prose: String::new() }))
        .collect();
    let (mut table, mut prose) = (String::new(), Vec::<&str>::new());
    for line in example.lines() {
        if let Some(h) = header(line) {
            (table, prose) = (h, Vec::new());
            continue;
        }
        let Some(text) = line.strip_prefix('#') else {
            prose.clear();
            continue;
        };
        match toml::from_str::<toml::Table>(text.trim_start()) {
            Ok(t) if t.len() == 1 && !table.is_empty() => {
                let (k, v) = t.iter().next().unwrap();
                let w = Written { value: json(v), commented: true, prose: prose.join(" ") };
                out.push((format!("{table}.{k}"), w));
                prose.clear();
            }
            _ => prose.push(text),
        }
    }
    out
}

/// The defaults prose states: each word after "default", as JSON (`16`, `"30s"`, `"culprit.db"`).
fn stated_defaults(prose: &str) -> Vec<serde_json::Value> {
    let lower = prose.to_lowercase();
    lower
        .split("default ")
        .skip(1)
        .filter_map(|rest| rest.split_whitespace().next())
        .map(|w| w.trim_end_matches(['.', ',', ';', ')', ':']).trim_matches(['`', '"']))
        .map(|w| match w.parse::<i64>() {
            Ok(n) => serde_json::Value::from(n),
            Err(_) => w.parse::<f64>().map_or_else(|_| serde_json::Value::from(w), serde_json::Value::from),
        })
        .collect()
}

/// What the example fails to document about the keys: a key it does not write (commented
/// or not), a key it writes at another value than the type's default, and a commented key
/// whose value is not the default and whose prose does not state the default either.
/// Defaults that set nothing (unset, "", [], {}) need only be written.
fn undocumented(example: &str, keys: &[culprit::config::reference::Key]) -> Vec<String> {
    let written = written(example);
    let mut problems = Vec::new();
    for key in keys.iter().filter(|k| !k.table || k.map) {
        let ways: Vec<&Written> = written.iter().filter(|(p, _)| *p == key.path).map(|(_, w)| w).collect();
        if ways.is_empty() {
            problems.push(format!("{} is not in the example", key.path));
            continue;
        }
        let Some(default) = key.meaningful_default() else { continue };
        let shown = |w: &Written| {
            key.is_default(&w.value) || (w.commented && stated_defaults(&w.prose).iter().any(|d| key.is_default(d)))
        };
        if !ways.iter().any(|w| shown(w)) {
            problems.push(format!(
                "{}: the example writes {} and does not state the default {default}",
                key.path, ways[0].value
            ));
        }
    }
    problems
}

#[test]
fn every_key_the_types_define_is_in_the_example_at_its_default() {
    // The keys come from the types' schema (src/config/reference.rs), not from a list here.
    let keys = culprit::config::reference::keys();
    assert!(keys.len() > 150, "{} keys", keys.len());
    assert_eq!(undocumented(EXAMPLE, &keys), Vec::<String>::new());
}

#[test]
fn a_changed_default_or_a_key_left_out_of_the_example_is_found() {
    let keys = culprit::config::reference::keys();
    let with_default = |path: &str, default: serde_json::Value| {
        let mut changed = keys.clone();
        changed.iter_mut().find(|k| k.path == path).unwrap().default = Some(default);
        undocumented(EXAMPLE, &changed)
    };
    // Written uncommented (`window = "5m"`): 6m is another value.
    assert_eq!(
        with_default("diagnosis.window", "6m".into()),
        ["diagnosis.window: the example writes \"5m\" and does not state the default \"6m\""]
    );
    // "168h" is the same duration as the example's "7d": no problem.
    assert_eq!(with_default("store.prune_after", "168h".into()), Vec::<String>::new());
    // Commented in an optional section (`# timeout = "10s"`).
    assert_eq!(with_default("prometheus.timeout", "11s".into()).len(), 1);
    // Commented at another value, with the default in prose ("(default 16)").
    assert_eq!(with_default("store.pool_size", 16.into()), Vec::<String>::new());
    assert_eq!(
        with_default("store.pool_size", 17.into()),
        ["store.pool_size: the example writes 32 and does not state the default 17"]
    );
    // A key the example does not have.
    let without = EXAMPLE.replace("\nkeep_rows = 100000\n", "\n");
    assert_eq!(undocumented(&without, &keys), ["store.keep_rows is not in the example"]);
}
