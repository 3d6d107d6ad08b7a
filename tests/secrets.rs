//! Secrets, in every form they travel: backends and destinations that echo what they were
//! sent (the `Authorization` header, the URL, a routing key; raw, percent-encoded,
//! JSON-escaped; Basic auth as base64 of `user:password`) never get a piece of a secret
//! into an error, at every truncation offset; nor into the service's logs, API answers
//! (`/readyz` is unauthenticated), stored errors (outbox `last_error`) or "could not
//! diagnose" posts.
//!
//! Logs are captured for the whole test binary by a global subscriber that uses culprit's
//! log format **without** the redaction of configured secrets, so that a leak in what the
//! code logs cannot hide behind the formatter.

mod support;

use std::path::Path;
use std::sync::LazyLock;
use std::time::Duration;

use base64::Engine as _;
use culprit::config::Config;
use culprit::model::notice::{Notice, NoticeKind};
use culprit::notify::Notifier;
use support::echo::{Echo, Style, json_escaped, pct};

const PROM_TOKEN: &str = "prom-Tok3n/with+plus&amp=Zz9\"q";
const FLINK_USER: &str = "culprit";
const FLINK_PASSWORD: &str = "fl1nk:Pa55/wörd+&\"";
const SLACK_TOKEN: &str = "xoxb-5LACK-t0ken-&/+-0123456789";
const SLACK_HOOK: &str = "/T0S3CR3T/B0S3CR3T/XoxSECRET0123456789";
const ROUTING_KEY: &str = "R0UT1NGKEY5ECRET0123456789abcdef";
const HOOK_PASSWORD: &str = "h00k-pa55/word?&=";
const AM_TOKEN: &str = "am-t0ken-5ECRET/+=&";
const OPSGENIE_KEY: &str = "0p5g3nie-k3y-5ECRET-0123456789ab";
const JSM_TOKEN: &str = "ATATT-j5m-T0KEN/5ECRET+=&";
const MATTERMOST_HOOK: &str = "/mm/Mm5ecretK3y0123456789abcd";
const DISCORD_HOOK: &str = "/dc/1234567890123456789/D1sc0rd-T0KEN_5ecret-abcdefghij";
const TEAMS_HOOK: &str = "/wkflwZ9Q/trgrZ9Q/T3AMSinvk?sv=1.0&sig=T3AMS5IGS3CR3T0123456789abc";
const GCHAT_HOOK: &str = "/v9/spcZ9QXW/msgZ9QXW?key=AIzaG00GLEKEYS3CR3T0123&token=GCHATT0KENS3CR3T0123456789";
const SMTP_PASSWORD: &str = "smtp-Pa55/w0rd+&=";
const GRAFANA_TOKEN: &str = "glsa_Gr4fanaT0ken/+=&_0123456789";

/// Offsets tried: from the secret at the very start to well past every 200-character cut.
const OFFSETS: std::ops::RangeInclusive<usize> = 0..=300;

/// Every 6-character piece of every form a secret travels in; none may appear in output.
fn pieces(secrets: &[String]) -> Vec<String> {
    let mut forms = Vec::new();
    for s in secrets {
        forms.extend([s.clone(), pct(s), json_escaped(s)]);
    }
    let mut out = Vec::new();
    for f in forms {
        let chars: Vec<char> = f.chars().collect();
        for w in chars.windows(6) {
            out.push(w.iter().collect());
        }
    }
    out.sort();
    out.dedup();
    out
}

fn basic(user: &str, password: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
}

/// Every secret of the test, in the forms that need more than encoding (Basic auth's
/// base64): the backends' by hand, the destinations' as the registry reports them for the
/// sections of [`destinations`] (`culprit::notify::registry`), so that a destination's
/// new secret is looked for without being added here.
fn all_secrets() -> Vec<String> {
    let mut out = vec![PROM_TOKEN.to_string(), FLINK_PASSWORD.to_string(), basic(FLINK_USER, FLINK_PASSWORD)];
    out.extend(destination_secrets());
    out
}

/// The secrets the registry reports for each section of [`destinations`], resolved: a URL
/// that holds a token by its path (its host is no secret: `127.0.0.1` is everywhere),
/// Basic auth's password and `base64(user:password)`.
fn destination_secrets() -> Vec<String> {
    use culprit::notify::registry::SecretForm;
    use secrecy::ExposeSecret as _;
    let dir = tempfile::tempdir().unwrap();
    let mut out = Vec::new();
    for (name, section, _) in destinations(dir.path(), "http://127.0.0.1:9") {
        let config = Config::from_toml(&section, "n.toml").unwrap();
        let secrets = config.notify.secrets();
        assert!(!secrets.is_empty(), "{name}: the registry reports its secrets");
        for (key, field) in secrets {
            let value = field.source.resolve().unwrap_or_else(|e| panic!("{key}: {e}"));
            let value = value.expose_secret();
            match field.form {
                SecretForm::Plain => out.push(value.to_string()),
                SecretForm::Url => out.push(value.trim_start_matches("http://127.0.0.1:9").to_string()),
                SecretForm::Basic { username } => out.extend([value.to_string(), basic(username, value)]),
            }
        }
    }
    out
}

#[test]
fn the_leak_tests_look_for_every_secret_of_every_destination_the_registry_reports() {
    // The registry's secrets are the ones this file writes: a destination reporting none
    // (or another) would leave its secret unlooked-for.
    let mut found = destination_secrets();
    found.sort();
    let mut written = vec![
        SLACK_TOKEN.to_string(),
        SLACK_HOOK.to_string(),
        ROUTING_KEY.to_string(),
        HOOK_PASSWORD.to_string(),
        basic("hook", HOOK_PASSWORD),
        AM_TOKEN.to_string(),
        OPSGENIE_KEY.to_string(),
        JSM_TOKEN.to_string(),
        basic("culprit@example.com", JSM_TOKEN),
        MATTERMOST_HOOK.to_string(),
        DISCORD_HOOK.to_string(),
        TEAMS_HOOK.to_string(),
        GCHAT_HOOK.to_string(),
        SMTP_PASSWORD.to_string(),
        GRAFANA_TOKEN.to_string(),
    ];
    written.sort();
    assert_eq!(found, written);
    // Every destination of `[notify]` (from the type's schema, its delivery settings
    // aside) has a section in `destinations`, so the offsets test reaches it.
    let schema = serde_json::to_value(schemars::schema_for!(culprit::config::NotifyConfig)).unwrap();
    let settings = ["retry", "concurrency", "could_not_diagnose_every"];
    let declared: std::collections::BTreeSet<String> =
        schema["properties"].as_object().unwrap().keys().filter(|k| !settings.contains(&k.as_str())).cloned().collect();
    let dir = tempfile::tempdir().unwrap();
    let tested: std::collections::BTreeSet<String> = destinations(dir.path(), "http://127.0.0.1:9")
        .into_iter()
        .flat_map(|(_, section, _)| {
            let config = Config::from_toml(&section, "n.toml").unwrap();
            culprit::notify::registry::sections(&config.notify)
                .iter()
                .map(|s| s.list.map(str::to_string).unwrap_or_else(|| s.key.clone()).replace("notify.", ""))
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(declared, tested, "every destination has a section in `destinations`");
}

#[track_caller]
fn assert_clean(what: &str, text: &str) {
    static PIECES: LazyLock<Vec<String>> = LazyLock::new(|| pieces(&all_secrets()));
    for p in PIECES.iter() {
        assert!(!text.contains(p.as_str()), "{what}: a piece of a secret ({p:?}) in: {text}");
    }
}

/// Writes each secret to a file in `dir` and returns a TOML reference to it.
fn secret_file(dir: &Path, name: &str, value: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, value).unwrap();
    format!("{{ file = \"{}\" }}", p.display())
}

// ---------------------------------------------------------------------------------------
// Logs of the whole binary.

static LOGS: LazyLock<()> = LazyLock::new(support::logs::capture);

/// The captured log without each line's timestamp: its microseconds are six digits that
/// match a six-digit piece of a secret (`234567`) about once in a million lines, which is
/// chance, not a leak.
fn logs() -> String {
    support::logs::text().lines().map(without_timestamp).collect::<Vec<_>>().join("\n")
}

/// `2026-12-01T23:10:40.234567Z  WARN …` → `WARN …`; a line without one is kept whole.
fn without_timestamp(line: &str) -> &str {
    match line.split_once("Z ") {
        Some((stamp, rest)) if stamp.len() == 26 && stamp.as_bytes()[10] == b'T' => rest.trim_start(),
        _ => line,
    }
}

// ---------------------------------------------------------------------------------------
// Every backend, every offset.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_errors_never_quote_a_piece_of_its_token_or_basic_credentials_at_any_offset() {
    LazyLock::force(&LOGS);
    let tmp = tempfile::tempdir().unwrap();
    let echo = Echo::start(400, Style::Plain).await;
    let bearer = format!("{{ type = \"bearer\", token = {} }}", secret_file(tmp.path(), "t", PROM_TOKEN));
    let basic_auth = format!(
        "{{ type = \"basic\", username = \"{FLINK_USER}\", password = {} }}",
        secret_file(tmp.path(), "p", FLINK_PASSWORD)
    );
    for auth in [bearer, basic_auth] {
        let text =
            format!("[prometheus]\nurl = \"{}\"\ntimeout = \"2s\"\ndeadline = \"2s\"\nauth = {auth}\n", echo.url);
        let config = Config::from_toml(&text, "p.toml").unwrap();
        let prom = culprit::collect::prometheus::Prometheus::new(config.prometheus.as_ref().unwrap()).unwrap();
        for style in [Style::Plain, Style::Prometheus] {
            echo.style(style);
            for pad in OFFSETS {
                echo.pad(pad);
                let e = prom.instant("up", 1_795_000_000_000).await.unwrap_err();
                assert!(e.message.contains("HTTP 400"), "{}", e.message);
                assert_clean(&format!("prometheus {style:?} pad {pad}"), &e.message);
            }
        }
    }
    // A retried failure (503) names its last error when the deadline passes.
    echo.style(Style::Plain);
    echo.status(503);
    echo.pad(190);
    let text = format!(
        "[prometheus]\nurl = \"{}\"\ntimeout = \"1s\"\ndeadline = \"1s\"\nauth = {{ type = \"bearer\", token = {} }}\n",
        echo.url,
        secret_file(tmp.path(), "t", PROM_TOKEN)
    );
    let config = Config::from_toml(&text, "p.toml").unwrap();
    let prom = culprit::collect::prometheus::Prometheus::new(config.prometheus.as_ref().unwrap()).unwrap();
    let e = prom.instant("up", 1_795_000_000_000).await.unwrap_err();
    assert!(e.message.contains("503"), "{}", e.message);
    assert_clean("prometheus 503 deadline", &e.message);
    assert_clean("logs", &logs());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flink_rest_errors_never_quote_a_piece_of_its_credentials_at_any_offset() {
    LazyLock::force(&LOGS);
    let tmp = tempfile::tempdir().unwrap();
    let echo = Echo::start(400, Style::Flink).await;
    let bearer = format!("{{ type = \"bearer\", token = {} }}", secret_file(tmp.path(), "t", PROM_TOKEN));
    let basic_auth = format!(
        "{{ type = \"basic\", username = \"{FLINK_USER}\", password = {} }}",
        secret_file(tmp.path(), "p", FLINK_PASSWORD)
    );
    for auth in [bearer, basic_auth] {
        let text = format!("[[flink.clusters]]\nname = \"prod\"\nrest_url = \"{}/flink\"\nauth = {auth}\n", echo.url);
        let config = Config::from_toml(&text, "f.toml").unwrap();
        let rest = culprit::collect::flink_rest::FlinkRest::new(&config.flink.clusters[0], &config.flink).unwrap();
        for style in [Style::Plain, Style::Flink] {
            echo.style(style);
            for pad in OFFSETS {
                echo.pad(pad);
                let e = rest.jobs().await.unwrap_err().to_string();
                assert!(e.contains("HTTP 400"), "{e}");
                assert_clean(&format!("flink {style:?} pad {pad}"), &e);
            }
        }
    }
    assert_clean("logs", &logs());
}

fn notice() -> Notice {
    let capture = culprit::samples::captures::CAPTURES.iter().find(|c| c.name == "slow-sink").unwrap();
    let verdict = culprit::samples::captures::verdict(capture).unwrap();
    Notice {
        links: Default::default(),
        kind: NoticeKind::Verdict,
        group_key: "{}:{alertname=\"FlinkJobBackpressured\"}".into(),
        labels: Default::default(),
        job: verdict.job.clone(),
        verdict: Some(verdict),
        verdict_id: Some(1),
        verdict_url: None,
        reason: None,
        firing: true,
        changed: false,
        idempotency_key: "k".into(),
        at_ms: 1_795_000_000_000,
        episode: Default::default(),
        maybe_repeat: false,
        incident: None,
        incident_view: None,
        incident_parent: None,
    }
}

/// The `[notify]` section of each destination, pointing at `url`.
fn destinations(dir: &Path, url: &str) -> Vec<(&'static str, String, Vec<Style>)> {
    vec![
        (
            "slack web_api",
            format!(
                "[notify.slack]\ntoken = {}\nchannel = \"C1\"\napi_url = \"{url}/api\"\n",
                secret_file(dir, "slack", SLACK_TOKEN)
            ),
            vec![Style::Plain, Style::SlackNotOk, Style::SlackNotJson],
        ),
        (
            "slack incoming_webhook",
            format!(
                "[notify.slack]\nmode = \"incoming_webhook\"\nwebhook_url = {}\n",
                secret_file(dir, "hook-url", &format!("{url}{SLACK_HOOK}"))
            ),
            vec![Style::Plain],
        ),
        (
            "pagerduty",
            format!(
                "[notify.pagerduty]\nrouting_key = {}\nurl = \"{url}/v2/enqueue\"\n",
                secret_file(dir, "rk", ROUTING_KEY)
            ),
            vec![Style::Plain, Style::PagerDuty],
        ),
        (
            "webhook",
            format!(
                "[[notify.webhook]]\nname = \"bot\"\nurl = \"{url}/hook\"\nauth = {{ type = \"basic\", username = \"hook\", password = {} }}\n",
                secret_file(dir, "hp", HOOK_PASSWORD)
            ),
            vec![Style::Plain],
        ),
        (
            "alertmanager",
            format!(
                "[notify.alertmanager]\nurl = \"{url}\"\nauth = {{ type = \"bearer\", token = {} }}\n",
                secret_file(dir, "am", AM_TOKEN)
            ),
            vec![Style::Plain],
        ),
        (
            "opsgenie",
            format!(
                "[[notify.opsgenie]]\nname = \"oncall\"\napi_key = {}\nurl = \"{url}\"\n",
                secret_file(dir, "og", OPSGENIE_KEY)
            ),
            vec![Style::Plain],
        ),
        (
            // SMTP is no HTTP: the relay is a closed loopback port (connect refused), so
            // what is checked is that the error built around a failed connection never
            // quotes the password; tests/email.rs checks a relay that refuses the login.
            "email",
            format!(
                "[[notify.email]]\nname = \"ops\"\nsmtp_host = \"127.0.0.1\"\nsmtp_port = {}\ntls = \"none\"\nusername = \"culprit\"\npassword = {}\nfrom = \"culprit@example.com\"\nto = [\"ops@example.com\"]\n",
                closed_port(),
                secret_file(dir, "smtp", SMTP_PASSWORD)
            ),
            vec![Style::Plain],
        ),
        (
            "teams",
            format!(
                "[[notify.teams]]\nname = \"payments\"\nwebhook_url = {}\n",
                secret_file(dir, "teams-url", &format!("{url}{TEAMS_HOOK}"))
            ),
            vec![Style::Plain],
        ),
        (
            "mattermost",
            format!(
                "[[notify.mattermost]]\nname = \"ops\"\nwebhook_url = {}\n",
                secret_file(dir, "mm-url", &format!("{url}{MATTERMOST_HOOK}"))
            ),
            vec![Style::Plain],
        ),
        (
            "jsm",
            format!(
                "[[notify.jsm]]\nname = \"oncall\"\ncloud_id = \"c1\"\nuser = \"culprit@example.com\"\napi_token = {}\nurl = \"{url}\"\n",
                secret_file(dir, "jsm", JSM_TOKEN)
            ),
            vec![Style::Plain],
        ),
        (
            "discord",
            format!(
                "[[notify.discord]]\nname = \"ops\"\nwebhook_url = {}\n",
                secret_file(dir, "dc-url", &format!("{url}{DISCORD_HOOK}"))
            ),
            vec![Style::Plain],
        ),
        (
            "google_chat",
            format!(
                "[[notify.google_chat]]\nname = \"payments\"\nwebhook_url = {}\n",
                secret_file(dir, "gchat-url", &format!("{url}{GCHAT_HOOK}"))
            ),
            vec![Style::Plain],
        ),
        (
            "grafana",
            format!(
                "[[notify.grafana]]\nname = \"ops\"\nurl = \"{url}\"\ntoken = {}\n",
                secret_file(dir, "grafana", GRAFANA_TOKEN)
            ),
            vec![Style::Plain],
        ),
    ]
}

/// A loopback port nothing listens on.
fn closed_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn destination_errors_never_quote_a_piece_of_a_secret_at_any_offset() {
    LazyLock::force(&LOGS);
    let tmp = tempfile::tempdir().unwrap();
    let echo = Echo::start(400, Style::Plain).await;
    let notice = notice();
    for (name, section, styles) in destinations(tmp.path(), &echo.url) {
        let config = Config::from_toml(&section, "n.toml").unwrap();
        // Destinations that pace by a scope shared in the process (PagerDuty by routing key,
        // Mattermost by server, Slack by token or webhook, Teams and Google Chat by webhook)
        // get a notifier of their own for each offset, and no other holds their pacer
        // meanwhile: its wait (0.25 to 1 s) over 301 offsets is minutes this test is not
        // about.
        let shared_pace = matches!(
            name,
            "pagerduty" | "mattermost" | "teams" | "google_chat" | "slack web_api" | "slack incoming_webhook"
        );
        let notifier = (!shared_pace).then(|| Notifier::from_config(&config.notify).unwrap().pop().unwrap());
        for style in styles {
            echo.style(style);
            for pad in OFFSETS {
                echo.pad(pad);
                let message = match name {
                    // Slack spaces posts to a channel by a second: every offset goes through
                    // the Web API call that looks for a post after a crash (the same request
                    // and answer handling, unpaced; a 500 so that it is an error), and the
                    // offsets across the 200-character cut through posts of new notifiers.
                    "slack web_api" => {
                        echo.status(500);
                        // A notifier of its own for each look: one notifier spaces its
                        // history reads 1.2 s apart (Slack's Tier 3), which over 301 offsets
                        // is minutes of waiting that this test is not about.
                        let looker = Notifier::from_config(&config.notify).unwrap().pop().unwrap();
                        let looked = looker.already_sent(&notice, None).await;
                        echo.status(400);
                        if (180..=220).contains(&pad) {
                            let fresh = Notifier::from_config(&config.notify).unwrap().pop().unwrap();
                            let e = fresh.send(&notice, None).await.unwrap_err();
                            assert_clean(&format!("{name} post {style:?} pad {pad}"), &e.message);
                        }
                        match looked {
                            Err(e) => e.message,
                            // `ok: false` with a code that is not retryable: logged.
                            Ok(None) if style == Style::SlackNotOk => continue,
                            other => panic!("{other:?}"),
                        }
                    }
                    // Each paces its posts (Teams: 4 a second; Google Chat: one a second
                    // per space): a notifier of its own for each offset.
                    "slack incoming_webhook" | "teams" | "google_chat" | "pagerduty" | "mattermost" => {
                        let fresh = Notifier::from_config(&config.notify).unwrap().pop().unwrap();
                        fresh.send(&notice, None).await.unwrap_err().message
                    }
                    _ => notifier.as_ref().expect("unpaced").send(&notice, None).await.unwrap_err().message,
                };
                assert_clean(&format!("{name} {style:?} pad {pad}"), &message);
            }
        }
    }
    assert_clean("logs", &logs());
}

// ---------------------------------------------------------------------------------------
// The service: logs, API answers, the store and posts.

/// Every text value of every table of the SQLite store (whatever its schema).
fn store_text(path: &Path) -> String {
    let db = rusqlite::Connection::open(path).unwrap();
    let tables: Vec<String> = db
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table'")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let mut out = String::new();
    for t in tables {
        let mut stmt = db.prepare(&format!("SELECT * FROM \"{t}\"")).unwrap();
        let columns = stmt.column_count();
        let mut rows = stmt.query([]).unwrap();
        while let Some(row) = rows.next().unwrap() {
            for i in 0..columns {
                match row.get_ref(i).unwrap() {
                    rusqlite::types::ValueRef::Text(b) | rusqlite::types::ValueRef::Blob(b) => {
                        out.push_str(&String::from_utf8_lossy(b));
                        out.push('\n');
                    }
                    _ => {}
                }
            }
        }
    }
    out
}

/// A service whose Prometheus and destinations are echoing servers.
fn echo_service_config(dir: &Path, prometheus: &str, flink: Option<&str>, dest: &str, extra: &str) -> String {
    let mut text = format!(
        "[prometheus]\nurl = \"{prometheus}\"\ntimeout = \"1s\"\ndeadline = \"1s\"\nauth = {{ type = \"bearer\", token = {} }}\n\
         [server]\nlisten = \"127.0.0.1:0\"\n[store]\npath = \"{}\"\nsynchronous = \"normal\"\n\
         [service]\ncoalesce = \"100ms\"\ndiagnose_retry_for = \"1s\"\n[notify.retry]\nmin = \"100ms\"\nmax = \"200ms\"\ngive_up_after = \"1s\"\n",
        secret_file(dir, "prom", PROM_TOKEN),
        dir.join("culprit.db").display(),
    );
    if let Some(flink) = flink {
        text.push_str(&format!(
            "[[flink.clusters]]\nname = \"prod\"\nrest_url = \"{flink}\"\nauth = {{ type = \"basic\", username = \"{FLINK_USER}\", password = {} }}\n",
            secret_file(dir, "flink", FLINK_PASSWORD)
        ));
    }
    for (_, section, _) in destinations(dir, dest) {
        if !section.contains("incoming_webhook") {
            text.push_str(&section);
        }
    }
    text.push_str(extra);
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_echoing_prometheus_leaks_nothing_into_logs_readyz_the_api_the_store_or_could_not_diagnose_posts() {
    LazyLock::force(&LOGS);
    let tmp = tempfile::tempdir().unwrap();
    let prometheus = Echo::start(400, Style::Plain).await;
    // The token slides across the 200-character cut, one offset per request.
    prometheus.cycle(150, 101);
    let dest = Echo::start(400, Style::Plain).await;
    dest.cycle(150, 101);
    let text = echo_service_config(tmp.path(), &prometheus.url, None, &dest.url, "");
    let app =
        culprit::service::server::Application::build(Config::from_toml(&text, "echo.toml").unwrap()).await.unwrap();
    let c = reqwest::Client::new();
    for i in 0..4 {
        let id = format!("5e1ec7ed00000000000000000000000{i}");
        let body = support::webhook_for(&id, &format!("job_{i}"), &["a".into()]);
        let r = c.post(format!("{}/webhook/alertmanager", app.url())).json(&body).send().await.unwrap();
        assert_eq!(r.status(), 202);
    }
    for _ in 0..101 {
        let r = c.get(format!("{}/readyz", app.url())).send().await.unwrap();
        assert_eq!(r.status(), 503);
        let body = r.text().await.unwrap();
        assert!(body.contains("HTTP 400"), "{body}");
        assert_clean("/readyz", &body);
        let r = c.get(format!("{}/api/v1/diagnose?job=job_1", app.url())).send().await.unwrap();
        assert_eq!(r.status(), 503);
        let body = r.text().await.unwrap();
        assert!(body.contains("HTTP 400"), "{body}");
        // Prometheus' answer is not quoted at all, only its status (REPORT D6).
        assert!(!body.contains("Authorization:"), "{body}");
        assert_clean("/api/v1/diagnose", &body);
    }
    // Four jobs could not be diagnosed: Slack, the webhook and Alertmanager each got
    // "could not diagnose" (folded: at most one per destination and window, naming the
    // others) and refused it, quoting the request back.
    let posted = |path: &str| dest.received().iter().filter(|r| r.0.ends_with(path)).count();
    support::wait_for("could-not-diagnose posts", Duration::from_secs(60), || {
        posted("/chat.postMessage") >= 1 && posted("/hook") >= 1 && posted("/api/v2/alerts") >= 1
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    for (path, body) in dest.received() {
        if path.ends_with("/v2/enqueue") {
            continue; // PagerDuty's body carries the routing key by design.
        }
        assert!(body.contains("could not diagnose") || body.contains("could_not_diagnose"), "{path}: {body}");
        assert!(!body.contains("Authorization:"), "the backend's answer is not posted: {path}: {body}");
        assert_clean(&format!("post to {path}"), &body);
    }
    app.stop().await;
    let stored = store_text(&tmp.path().join("culprit.db"));
    assert!(stored.contains("HTTP 400"), "the failures are stored: {stored}");
    assert_clean("the store", &stored);
    assert!(logs().contains("Authorization: Bearer [REDACTED]"), "the echo is logged, redacted");
    assert_clean("logs", &logs());
    assert!(prometheus.requests() > 101);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_echoing_flink_rest_leaks_nothing_into_verdicts_posts_the_store_or_logs() {
    LazyLock::force(&LOGS);
    let tmp = tempfile::tempdir().unwrap();
    let now = jiff::Timestamp::now().as_millisecond();
    let jobs = support::synthetic_jobs(1, now - 1_000);
    let prom = support::prometheus_with_texts(&[jobs[0].1.clone()], support::free_port());
    let flink = Echo::start(400, Style::Flink).await;
    flink.cycle(150, 101);
    let dest = Echo::start(400, Style::Plain).await;
    dest.cycle(150, 101);
    // Prometheus is real here (no auth needed, but configured: it must not leak either).
    let text = echo_service_config(tmp.path(), &prom.url, Some(&flink.url), &dest.url, "");
    let text = text.replace("timeout = \"1s\"\ndeadline = \"1s\"", "timeout = \"5s\"\ndeadline = \"10s\"");
    let app =
        culprit::service::server::Application::build(Config::from_toml(&text, "echo.toml").unwrap()).await.unwrap();
    let c = reqwest::Client::new();
    let (job, _) = &jobs[0];
    let body = support::webhook_for(&job.job_id(), &job.job_name(), &["a".into()]);
    assert_eq!(c.post(format!("{}/webhook/alertmanager", app.url())).json(&body).send().await.unwrap().status(), 202);
    let posted = |path: &str| dest.received().iter().filter(|r| r.0.ends_with(path)).count();
    support::wait_for("the verdict's posts", Duration::from_secs(60), || {
        posted("/chat.postMessage") >= 1 && posted("/hook") >= 1 && posted("/api/v2/alerts") >= 1
    })
    .await;
    // The API's verdict names what Flink REST said, without the credentials.
    for _ in 0..10 {
        let r = c.get(format!("{}/api/v1/diagnose?job={}", app.url(), job.job_id())).send().await.unwrap();
        assert_eq!(r.status(), 200);
        let v = r.text().await.unwrap();
        assert!(v.contains("HTTP 400"), "{v}");
        // Flink's answer is not quoted, only its status (REPORT D6).
        assert!(!v.contains("Authorization:"), "{v}");
        assert_clean("the API's verdict", &v);
    }
    for (path, body) in dest.received() {
        if !path.ends_with("/v2/enqueue") {
            assert!(!body.contains("Authorization:"), "the backend's answer is not posted: {path}: {body}");
            assert_clean(&format!("post to {path}"), &body);
        }
    }
    // It is in the log, redacted.
    let logged = logs();
    let answer =
        logged.lines().find(|l| l.contains("Flink REST answered an error") && l.contains("Authorization: Basic"));
    assert!(answer.is_some_and(|l| l.contains("[REDACTED]")), "the answer is logged, redacted");
    app.stop().await;
    let stored = store_text(&tmp.path().join("culprit.db"));
    assert!(stored.contains("answered HTTP 400"), "the verdict quotes Flink REST: {stored}");
    assert_clean("the store", &stored);
    assert_clean("logs", &logs());
}
