//! The Alertmanager webhook as the server takes it: parse the body, split it into one
//! intake per Flink job (with the shipped alertnames, and with every alert let through),
//! and escape each untrusted job name and label for every medium it reaches (PromQL, Slack,
//! HTML, logs). Must never panic; the escapes must hold their invariants.
#![no_main]

use culprit::collect::query::{escape_promql_string, escape_regex};
use culprit::config::ServiceConfig;
use culprit::service::intake;
use libfuzzer_sys::fuzz_target;

/// Reads back a PromQL double-quoted string body as `escape_promql_string` writes it.
fn unescape_promql(s: &str) -> Option<String> {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' | '\n' | '\r' => return None,
            '\\' => out.push(match chars.next()? {
                '\\' => '\\',
                '"' => '"',
                'n' => '\n',
                'r' => '\r',
                't' => '\t',
                _ => return None,
            }),
            c => out.push(c),
        }
    }
    Some(out)
}

fn check_escapes(value: &str) {
    let promql = escape_promql_string(value);
    assert_eq!(unescape_promql(&promql).as_deref(), Some(value), "PromQL escape of {value:?}: {promql:?}");
    let regex = escape_regex(value);
    assert!(regex.len() >= value.len());
    let slack = culprit::render::slack::escape(value);
    assert!(!slack.contains('<') && !slack.contains('>'), "Slack escape of {value:?}: {slack:?}");
    let html = culprit::render::html::escape(value);
    assert!(!html.contains('<') && !html.contains('>') && !html.contains('"'), "HTML escape of {value:?}: {html:?}");
    let log = culprit::cli::logging::escape_controls(value);
    assert!(!log.contains(['\n', '\r', '\0', '\u{1b}']), "log escape of {value:?}: {log:?}");
    let _ = culprit::render::slack::code(value);
    let _ = culprit::render::slack::prose(value);
}

fuzz_target!(|body: &[u8]| {
    let Ok(webhook) = intake::parse(body) else { return };
    let shipped = ServiceConfig::default();
    let everything = ServiceConfig { alertnames: Vec::new(), ..ServiceConfig::default() };
    for cfg in [&shipped, &everything] {
        let plan = intake::plan(&webhook, cfg);
        for i in &plan.intakes {
            assert!(!i.job.is_empty(), "an intake without a job: {i:?}");
            // The sender's links are kept only as absolute http(s) URLs.
            for (_, url) in i.links.labelled() {
                let lower = url.to_ascii_lowercase();
                assert!(lower.starts_with("https://") || lower.starts_with("http://"), "a kept link {url:?}");
            }
            check_escapes(&i.job);
            for (k, v) in &i.labels {
                check_escapes(k);
                check_escapes(v);
            }
        }
        for (reason, alertname) in &plan.ignored {
            let _ = format!("{reason:?}");
            check_escapes(alertname);
        }
    }
});
