//! `culprit check-config FILE [--connect]`: validates a configuration, says what it
//! configures (the store `serve` will use, backends, clusters, destinations, how `serve`
//! would listen), lists every problem in one run (each with its key and fix: "valid" means
//! `serve` can start), and with `--connect` reaches the store and each backend and
//! destination without changing or posting anything (a dry run where the destination has
//! one; PagerDuty and generic webhooks have none, and the report says so).
//!
//! Nothing printed holds a secret: secrets are named by their reference (`env`, `file`),
//! and whatever a backend answers is redacted.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use crate::cli::{CliError, EXIT_BACKEND, EXIT_USAGE};
use crate::config::{Config, HttpAuth, SecretSource, ServerAuth};

/// How long a probe of Prometheus may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

fn secret_ref(s: &SecretSource) -> String {
    match s {
        SecretSource::Env(v) => format!("env {v}"),
        SecretSource::File(p) => format!("file {}", p.display()),
    }
}

fn http_auth(a: Option<&HttpAuth>) -> String {
    match a {
        None => "no auth".into(),
        Some(HttpAuth::Bearer { token }) => format!("bearer token from {}", secret_ref(token)),
        Some(HttpAuth::Basic { username, password }) => {
            format!("basic auth as {username}, password from {}", secret_ref(password))
        }
    }
}

fn server_auth(a: Option<&ServerAuth>) -> String {
    match a {
        None => "none (allowed on a loopback address only)".into(),
        Some(ServerAuth::None) => "none, on purpose".into(),
        Some(other) => http_auth(other.http().as_ref()),
    }
}

/// What the configuration sets up, one line per part.
pub fn describe(config: &Config) -> String {
    let mut out = String::new();
    let s = &config.server;
    let _ = writeln!(out, "server: listens on {}", s.listen);
    let _ = writeln!(out, "  webhook auth: {}", server_auth(s.webhook()));
    let _ = writeln!(out, "  API auth: {}", server_auth(s.api()));
    let _ = writeln!(out, "{}", crate::cli::check_store::describe(&config.store));
    match &config.prometheus {
        Some(p) => {
            let tenant = p.tenant.as_deref().map(|t| format!(", tenant {t}")).unwrap_or_default();
            let url = crate::settings::shown_url(&p.url);
            let _ = writeln!(out, "prometheus: {url} ({}{tenant})", http_auth(p.auth.as_ref()));
        }
        None => {
            let _ = writeln!(out, "prometheus: none (recordings and scrapes only; serve needs one)");
        }
    }
    let f = &config.flink;
    if f.clusters.is_empty() {
        let _ = writeln!(out, "flink clusters: none (diagnoses without Flink REST)");
    }
    for c in &f.clusters {
        let matches = if c.r#match.is_empty() {
            "the default".to_string()
        } else {
            c.r#match.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(", ")
        };
        let url = match &c.rest_url_template {
            Some(t) if c.allowed_host_suffixes.is_empty() => format!("{t} (per job, from its labels)"),
            Some(t) => {
                format!("{t} (per job, from its labels; hosts ending in {})", c.allowed_host_suffixes.join(", "))
            }
            None => crate::settings::shown_url(&c.rest_url),
        };
        let _ = writeln!(out, "flink cluster {}: {url} (for {matches}; {})", c.name, http_auth(c.auth.as_ref()));
    }
    if let Some(label) = &f.cluster_label {
        let _ = writeln!(out, "  an alert's `{label}` label chooses the cluster by name");
    }
    for (job, path) in &f.plans {
        let state = if path.exists() { "" } else { " (the file does not exist)" };
        let _ = writeln!(out, "flink plan: {job} -> {}{state}", path.display());
    }
    let svc = &config.service;
    let names =
        if svc.alertnames.is_empty() { "every alert with a job label".into() } else { svc.alertnames.join(", ") };
    let _ = writeln!(out, "alerts diagnosed: {names} (job labels {}, {})", svc.job_id_label, svc.job_name_label);
    let destinations = crate::notify::describe(&config.notify);
    if destinations.is_empty() {
        let _ = writeln!(out, "destinations: none (verdicts are stored and served by the API only)");
    }
    for d in destinations {
        let _ = writeln!(out, "destination: {d}");
    }
    if !crate::notify::registry::names(&config.notify).is_empty() {
        for line in config.route.describe(&crate::notify::registry::names(&config.notify)) {
            let _ = writeln!(out, "{line}");
        }
    }
    out
}

/// `check-config FILE --route LABELS`: the destinations a job whose alerts carry these
/// labels would be notified at, one per line (the name first, then the route and its
/// filters), or a line saying none.
pub fn route(config: &Config, labels: &str) -> Result<String, CliError> {
    let labels = crate::notify::route::parse_label_set(labels)
        .map_err(|e| CliError::usage(format!("--route: {e} (expected e.g. namespace=payments,team=fraud)")))?;
    let configured = crate::notify::registry::names(&config.notify);
    let decision = config.route.decide(&labels, &configured);
    let mut out = String::new();
    let mut seen = std::collections::BTreeSet::new();
    for t in &decision.taken {
        // A destination two routes send to (`continue`) is listed once, with the first.
        for d in t.destinations.iter().filter(|d| seen.insert(d.as_str())) {
            let mut filters = Vec::new();
            if let Some(c) = t.min_confidence {
                filters.push(format!("verdicts of confidence ≥ {}", c.as_str()));
            }
            if !t.could_not_diagnose {
                filters.push("no \"could not diagnose\"".to_string());
            }
            let filters = if filters.is_empty() { String::new() } else { format!(": {}", filters.join(", ")) };
            let _ = writeln!(out, "{d} ({}{filters})", t.key);
        }
    }
    if out.is_empty() {
        out.push_str("none: no destination is configured, or the route these labels take names none\n");
    }
    Ok(out)
}

/// Problems that stop `serve` (or a live diagnosis), every one in one run: what
/// validation found (`validation`), a listen address open to other hosts without auth,
/// every secret reference that cannot be read (each with its key), and what building the
/// backends and destinations refuses besides.
fn problems(config: &Config, validation: Vec<String>) -> Vec<String> {
    let mut out = validation;
    if let Some(p) = config.server.exposure_problem() {
        out.push(p);
    }
    let mut unreadable: Vec<String> = Vec::new();
    for (key, secret) in config.secrets() {
        if let Err(e) = secret.resolve() {
            out.push(format!("{key}: {e}"));
            unreadable.push(e);
        }
    }
    // Building stops at its first unreadable secret, said above with its key.
    let built = [
        crate::service::pipeline::Live::new(config.clone()).err().map(|e| e.to_string()),
        crate::notify::Notifier::from_config(&config.notify).err(),
    ];
    for e in built.into_iter().flatten() {
        if !unreadable.iter().any(|u| e.contains(u.as_str())) && !out.contains(&e) {
            out.push(e);
        }
    }
    out
}

/// Reaches every backend and destination; one line each, and whether all answered.
async fn connect(config: &Config) -> (String, bool) {
    let redactor = config.redactor();
    let mut out = String::from("connect:\n");
    let mut ok = true;
    let store = crate::cli::check_store::probe(&config.store).await;
    // Ok, Err (a failure), or Ok(None) with a reason: not probed, not a failure.
    let mut line = |what: String, result: Result<Result<String, String>, String>| {
        let (mark, text) = match result {
            Ok(Ok(t)) => ("ok", t),
            Ok(Err(why)) => ("skipped", why),
            Err(e) => {
                ok = false;
                ("FAILED", e)
            }
        };
        let _ = writeln!(out, "  {what}: {mark}: {}", redactor.redact(&text));
    };
    line(store.0, store.1.map(Ok));
    if let Ok(live) = crate::service::pipeline::Live::new(config.clone()) {
        if let Some(p) = live.prometheus() {
            let result = p.ping(PROBE_TIMEOUT).await.map(|()| Ok("answers queries".to_string())).map_err(|e| {
                format!(
                    "Prometheus at {} {} ({})",
                    crate::settings::shown_url(p.base()),
                    crate::collect::prometheus::what_went_wrong(p.base(), &e),
                    e
                )
            });
            line(format!("prometheus {}", crate::settings::shown_url(p.base())), result);
        }
        for c in &config.flink.clusters {
            if let Some(template) = &c.rest_url_template {
                // Only an alert (or a job's JobManager series) gives the placeholders values.
                let why = "its REST URL is built per job from the alert's labels; `culprit diagnose --config FILE --job JOB` reaches it for one job";
                line(format!("flink cluster {} {template}", c.name), Ok(Err(why.to_string())));
                continue;
            }
            let labels = crate::service::Service::request_labels(Some(&c.name));
            if let Some(rest) = live.flink_for(&labels) {
                let result =
                    rest.jobs().await.map(|jobs| Ok(format!("{} jobs", jobs.len()))).map_err(|e| e.to_string());
                line(format!("flink cluster {} {}", c.name, crate::settings::shown_url(&c.rest_url)), result);
            }
        }
    }
    if let Ok(notifiers) = crate::notify::Notifier::from_config(&config.notify) {
        for n in notifiers {
            let result = n.probe().await.map(Ok).map_err(|e| e.message);
            line(n.name(), result);
        }
    }
    (out, ok)
}

/// `check-config`: the report on `out`; an error (exit 2 for a configuration that cannot
/// be used, 3 when `--connect` could not reach something) after it.
pub fn run(
    path: &Path,
    connect_too: bool,
    route_labels: Option<&str>,
    out: &mut dyn std::io::Write,
) -> Result<(), CliError> {
    let (config, validation) = Config::read(path).map_err(|e| CliError { code: EXIT_USAGE, message: e.to_string() })?;
    if let Some(labels) = route_labels {
        // Where labels go depends on the file alone: a secret that cannot be read here (a
        // laptop without the production's variables) does not stop the answer.
        if !validation.is_empty() {
            return Err(CliError {
                code: EXIT_USAGE,
                message: format!("{}: {}", path.display(), validation.join("; ")),
            });
        }
        return crate::cli::write_out(out, &route(&config, labels)?);
    }
    let problems = problems(&config, validation);
    let verdict = if problems.is_empty() { "valid" } else { "loads, but cannot be used as it is (problems below)" };
    let mut report = format!("{}: {verdict}\n", path.display());
    report.push_str(&describe(&config));
    for p in &problems {
        let _ = writeln!(report, "problem: {p}");
    }
    // Secret files read while looking for problems that every local user can read.
    for w in crate::config::secret_file::warnings() {
        let _ = writeln!(report, "warning: {w}");
    }
    let mut unreachable = false;
    if connect_too {
        let (text, ok) = crate::cli::runtime()?.block_on(connect(&config));
        report.push_str(&text);
        unreachable = !ok;
    }
    crate::cli::write_out(out, &report)?;
    if !problems.is_empty() {
        return Err(CliError { code: EXIT_USAGE, message: format!("{}: {}", path.display(), problems.join("; ")) });
    }
    if unreachable {
        return Err(CliError {
            code: EXIT_BACKEND,
            message: format!("{}: a backend or destination could not be reached (see above)", path.display()),
        });
    }
    Ok(())
}
