//! Safe defaults: `serve` listens on loopback unless told otherwise and refuses another
//! address without authentication (unless `{ type = "none" }` says so on purpose); the
//! webhook takes only `application/json`; the webhook and the API may have credentials of
//! their own; `serve` logs its destinations at start and warns when there is none;
//! `culprit check-config FILE [--connect]` says what a file sets up and reaches each part
//! without posting anything.

mod support;

use std::path::Path;
use std::process::Command;

use culprit::config::Config;
use culprit::service::server::Application;
use serde_json::json;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn config(dir: &Path, server: &str, extra: &str) -> Config {
    let dead = format!("http://127.0.0.1:{}", support::free_port());
    let text = format!(
        "[prometheus]\nurl = \"{dead}\"\n[server]\n{server}\n[store]\npath = \"{}\"\n{extra}",
        dir.join("culprit.db").display()
    );
    Config::from_toml(&text, "safe.toml").unwrap()
}

fn secret(dir: &Path, name: &str, value: &str) -> String {
    std::fs::write(dir.join(name), value).unwrap();
    format!("{{ file = \"{}\" }}", dir.join(name).display())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_listens_on_loopback_by_default_and_refuses_other_hosts_without_auth_unless_none_is_chosen() {
    assert_eq!(Config::default().server.listen, "127.0.0.1:9187");
    let tmp = tempfile::tempdir().unwrap();
    let err = Application::build(config(tmp.path(), "listen = \"0.0.0.0:0\"", "")).await.err().unwrap();
    assert!(
        err.starts_with("server.listen 0.0.0.0:0 is reachable from other hosts and /webhook/* and /api/* would accept anyone: set server.auth"),
        "{err}"
    );
    // Only the API open (the webhook has its own credentials): still refused, naming it.
    let webhook_only = format!(
        "listen = \"0.0.0.0:0\"\nwebhook_auth = {{ type = \"bearer\", token = {} }}",
        secret(tmp.path(), "t", "tok")
    );
    let err = Application::build(config(tmp.path(), &webhook_only, "")).await.err().unwrap();
    assert!(err.contains(" and /api/* would accept anyone") && !err.contains("/webhook/*"), "{err}");
    // On purpose: starts.
    let app =
        Application::build(config(tmp.path(), "listen = \"0.0.0.0:0\"\nauth = { type = \"none\" }", "")).await.unwrap();
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_webhook_takes_only_application_json() {
    let tmp = tempfile::tempdir().unwrap();
    let app = Application::build(config(tmp.path(), "listen = \"127.0.0.1:0\"", "")).await.unwrap();
    let c = reqwest::Client::new();
    let url = format!("{}/webhook/alertmanager", app.url());
    let body = support::webhook_for("5e1ec7ed000000000000000000000002", "j", &["a".into()]).to_string();
    // A browser form or fetch without a preflight: text/plain; and no type at all.
    let plain = c.post(&url).header("content-type", "text/plain").body(body.clone()).send().await.unwrap();
    assert_eq!(plain.status(), 415);
    let answer: serde_json::Value = plain.json().await.unwrap();
    assert_eq!(answer["error"], "the webhook takes Content-Type: application/json (as Alertmanager sends it)");
    assert_eq!(c.post(&url).body(body.clone()).send().await.unwrap().status(), 415);
    let json = c.post(&url).header("content-type", "application/json; charset=utf-8").body(body).send().await.unwrap();
    assert_eq!(json.status(), 202);
    let metrics = reqwest::get(format!("{}/metrics", app.url())).await.unwrap().text().await.unwrap();
    assert!(metrics.contains("culprit_webhooks_total{outcome=\"unsupported_media_type\"} 2"), "{metrics}");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_webhook_and_the_api_can_have_credentials_of_their_own() {
    let tmp = tempfile::tempdir().unwrap();
    let server = format!(
        "listen = \"127.0.0.1:0\"\nwebhook_auth = {{ type = \"bearer\", token = {} }}\napi_auth = {{ type = \"basic\", username = \"oncall\", password = {} }}",
        secret(tmp.path(), "hook", "alertmanager-token"),
        secret(tmp.path(), "api", "api-password")
    );
    let app = Application::build(config(tmp.path(), &server, "")).await.unwrap();
    let c = reqwest::Client::new();
    let hook = format!("{}/webhook/alertmanager", app.url());
    let body = support::webhook_for("5e1ec7ed000000000000000000000002", "j", &["a".into()]);
    let api = format!("{}/api/v1/verdicts", app.url());
    assert_eq!(c.post(&hook).bearer_auth("alertmanager-token").json(&body).send().await.unwrap().status(), 202);
    assert_eq!(
        c.post(&hook).basic_auth("oncall", Some("api-password")).json(&body).send().await.unwrap().status(),
        401
    );
    assert_eq!(c.get(&api).basic_auth("oncall", Some("api-password")).send().await.unwrap().status(), 200);
    assert_eq!(c.get(&api).bearer_auth("alertmanager-token").send().await.unwrap().status(), 401);
    assert_eq!(c.get(&api).send().await.unwrap().status(), 401);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_logs_its_destinations_at_start_and_warns_when_there_is_none() {
    support::logs::capture();
    let tmp = tempfile::tempdir().unwrap();
    let extra = format!(
        "[notify.pagerduty]\nrouting_key = {}\n[[notify.webhook]]\nname = \"bot\"\nurl = \"https://bot.example.com/hooks/SECRETPATH\"\n",
        secret(tmp.path(), "rk", "R0UT1NG")
    );
    let app = Application::build(config(tmp.path(), "listen = \"127.0.0.1:0\"", &extra)).await.unwrap();
    let addr = app.addr().to_string();
    app.stop().await;
    let none = tempfile::tempdir().unwrap();
    let bare = Application::build(config(none.path(), "listen = \"127.0.0.1:0\"", "")).await.unwrap();
    let bare_addr = bare.addr().to_string();
    bare.stop().await;

    let logs = support::logs::text();
    let start = logs.lines().find(|l| l.contains("culprit listening") && l.contains(&addr)).unwrap();
    assert!(
        start.contains(r#"destinations="pagerduty (Events API v2 at https://events.pagerduty.com/v2/enqueue, severity error), webhook:bot (https://bot.example.com)""#),
        "{start}"
    );
    assert!(!start.contains("SECRETPATH") && !start.contains("R0UT1NG"), "{start}");
    let bare_start = logs.lines().position(|l| l.contains("culprit listening") && l.contains(&bare_addr)).unwrap();
    assert!(logs.lines().nth(bare_start).unwrap().contains("destinations=none"));
    assert!(
        logs.lines().nth(bare_start + 1).unwrap().contains("WARN")
            && logs.contains("verdicts are stored and served by the API, and go nowhere else")
    );
}

/// Writes `text` as `c.toml` in `dir` and runs `check-config c.toml --connect` on it (off
/// the runtime: the test's mock servers must go on answering).
async fn check_connect(dir: &Path, text: &str) -> (Option<i32>, String, String) {
    let file = dir.join("c.toml");
    std::fs::write(&file, text).unwrap();
    let f = file.to_str().unwrap().to_string();
    tokio::task::spawn_blocking(move || check_config(&[&f, "--connect"])).await.unwrap()
}

fn check_config(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_culprit")).arg("check-config").args(args).output().unwrap();
    (out.status.code(), String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap())
}

#[test]
fn check_config_says_what_a_file_sets_up_and_names_the_key_and_the_fix_when_it_cannot_be_used() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("c.toml");
    std::fs::write(
        &file,
        "[prometheus]\nurl = \"http://prometheus:9090\"\nauth = { type = \"bearer\", token = { env = \"PROM_TOKEN_NOT_SET\" } }\n[[flink.clusters]]\nname = \"prod\"\nrest_url = \"http://jm:8081\"\n[flink.plans]\nfraud-detection = \"/nope/plan.json\"\n[server]\nlisten = \"0.0.0.0:9187\"\n[notify.alertmanager]\nurl = \"http://am:9093\"\n",
    )
    .unwrap();
    let (code, out, err) = check_config(&[file.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{out}{err}");
    for line in [
        "server: listens on 0.0.0.0:9187",
        "  webhook auth: none (allowed on a loopback address only)",
        "prometheus: http://prometheus:9090 (bearer token from env PROM_TOKEN_NOT_SET)",
        "flink cluster prod: http://jm:8081 (for the default; no auth)",
        "flink plan: fraud-detection -> /nope/plan.json (the file does not exist)",
        "destination: alertmanager (http://am:9093, alert FlinkBackpressureCulprit)",
        "alerts diagnosed: FlinkJobBackpressured, FlinkTaskBackpressured, FlinkCheckpointSlow (job labels job_id, job_name)",
    ] {
        assert!(out.lines().any(|l| l == line), "`{line}` missing from:\n{out}");
    }
    assert!(out.starts_with(&format!("{}: loads, but cannot be used as it is", file.display())), "{out}");
    assert!(out.contains("problem: server.listen 0.0.0.0:9187 is reachable from other hosts"), "{out}");
    assert!(
        out.contains("problem: prometheus.auth.token: the environment variable PROM_TOKEN_NOT_SET is not set"),
        "{out}"
    );
    assert!(err.starts_with("culprit: "), "{err}");

    // A key given twice, as the example once made it easy: the key, both lines, the fix.
    std::fs::write(&file, "[notify]\nwebhook = []\n\n[[notify.webhook]]\nname = \"bot\"\nurl = \"http://bot\"\n")
        .unwrap();
    let (code, _, err) = check_config(&[file.to_str().unwrap()]);
    assert_eq!(code, Some(2));
    assert!(err.contains("`notify.webhook` is given twice, as `webhook = []` (line 2) and as `[[notify.webhook]]` (line 4): remove the empty `webhook = []`"), "{err}");

    // The shipped example is valid as it is.
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/culprit.example.toml");
    let (code, out, err) = check_config(&[example.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{out}{err}");
    // As the other commands take it, too.
    let (code, again, err) = check_config(&["--config", example.to_str().unwrap()]);
    assert_eq!((code, &again), (Some(0), &out), "{err}");
    assert!(out.contains("destinations: none"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_config_connect_reaches_every_backend_and_destination_and_posts_nothing() {
    let mock = MockServer::start().await;
    let ok = |body: serde_json::Value| ResponseTemplate::new(200).set_body_json(body);
    Mock::given(method("POST"))
        .and(path("/prom/api/v1/query"))
        .respond_with(ok(json!({"status": "success", "data": {"resultType": "vector", "result": []}})))
        .mount(&mock)
        .await;
    Mock::given(method("GET"))
        .and(path("/flink/jobs/overview"))
        .respond_with(ok(json!({"jobs": [{"jid": "5e2b7c9a1d3f4e6a8b0c2d4e6f8a0b1c", "name": "fraud-detection", "state": "RUNNING", "start-time": 1, "end-time": -1}]})))
        .mount(&mock)
        .await;
    Mock::given(method("POST"))
        .and(path("/slack/auth.test"))
        .respond_with(ok(json!({"ok": true, "user": "culprit", "team": "Flink Ops"})))
        .mount(&mock)
        .await;
    Mock::given(method("POST")).and(path("/pd/v2/enqueue")).respond_with(
        ResponseTemplate::new(400).set_body_json(json!({"status": "invalid event", "message": "Event object is invalid", "errors": ["'routing_key' is missing or blank"]})),
    ).mount(&mock).await;
    Mock::given(method("GET"))
        .and(path("/am/api/v2/status"))
        .respond_with(ok(json!({"versionInfo": {"version": "0.27.0"}})))
        .mount(&mock)
        .await;
    Mock::given(method("HEAD")).and(path("/hook")).respond_with(ResponseTemplate::new(405)).mount(&mock).await;

    let tmp = tempfile::tempdir().unwrap();
    let m = mock.uri();
    let text = format!(
        "[prometheus]\nurl = \"{m}/prom\"\n[[flink.clusters]]\nname = \"prod\"\nrest_url = \"{m}/flink\"\n\
         [[flink.clusters]]\nname = \"k8s\"\nmatch = {{ env = \"k8s\" }}\nrest_url_template = \"http://{{deployment}}-rest.{{namespace}}:8081\"\n\
         [notify.slack]\ntoken = {}\nchannel = \"C0FLINKOPS\"\napi_url = \"{m}/slack\"\n\
         [notify.pagerduty]\nrouting_key = {}\nurl = \"{m}/pd/v2/enqueue\"\n\
         [notify.alertmanager]\nurl = \"{m}/am\"\n[[notify.webhook]]\nname = \"bot\"\nurl = \"{m}/hook\"\n",
        secret(tmp.path(), "slack", "xoxb-token"),
        secret(tmp.path(), "rk", "R0UT1NGKEY"),
    );
    let (code, out, err) = check_connect(tmp.path(), &text).await;
    assert_eq!(code, Some(0), "{out}{err}");
    for line in [
        format!("  prometheus {m}/prom: ok: answers queries"),
        format!("  flink cluster prod {m}/flink: ok: 1 jobs"),
        // A templated cluster has no URL until a job's labels fill it: said, not failed.
        "  flink cluster k8s http://{deployment}-rest.{namespace}:8081: skipped: its REST URL is built per job from the alert's labels; `culprit diagnose --config FILE --job JOB` reaches it for one job".to_string(),
        format!(
            "  slack: ok: the token is valid (auth.test at {m}/slack: bot culprit in team Flink Ops); posts go to channel C0FLINKOPS; nothing was posted"
        ),
        format!(
            "  pagerduty: ok: {m}/pd/v2/enqueue answers (an event without a routing key was refused with 400, so nothing was opened); PagerDuty has no dry run, so the routing key is not verified"
        ),
        "  alertmanager: ok: Alertmanager 0.27.0 answers (GET /api/v2/status); nothing was posted".to_string(),
        "  webhook:bot: ok: reachable (HEAD answered 405); a generic webhook has no dry run, so nothing was posted"
            .to_string(),
    ] {
        assert!(out.lines().any(|l| l == line), "`{line}` missing from:\n{out}");
    }
    // Nothing was posted anywhere: the only POSTs are the probe of Prometheus, Slack's
    // auth.test and PagerDuty's event without a routing key.
    let requests = mock.received_requests().await.unwrap();
    for r in &requests {
        let p = r.url.path();
        assert!(
            r.method.as_str() != "POST" || ["/prom/api/v1/query", "/slack/auth.test", "/pd/v2/enqueue"].contains(&p),
            "{p}"
        );
        if p == "/pd/v2/enqueue" {
            assert!(!String::from_utf8_lossy(&r.body).contains("R0UT1NGKEY"), "no routing key is sent");
        }
    }

    // A Prometheus that refuses the connection: exit 3, the line says which and why.
    let dead = format!("http://127.0.0.1:{}", support::free_port());
    let (code, out, _) = check_connect(tmp.path(), &text.replace(&format!("{m}/prom"), &dead)).await;
    assert_eq!(code, Some(3), "{out}");
    assert!(
        out.contains(&format!("  prometheus {dead}: FAILED: Prometheus at {dead} refused the connection")),
        "{out}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_config_connect_takes_a_head_not_implemented_as_reachable_and_says_when_an_empty_event_is_accepted() {
    // Python's http.server answers HEAD with 501: the receiver is there. A URL that accepts
    // an event without a routing key is not PagerDuty (it answers 400): said, not FAILED.
    let mock = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/prom/api/v1/query"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"status": "success", "data": {"resultType": "vector", "result": []}})),
        )
        .mount(&mock)
        .await;
    Mock::given(method("POST"))
        .and(path("/pd"))
        .respond_with(
            ResponseTemplate::new(202).set_body_json(json!({"status": "success", "message": "Event processed"})),
        )
        .mount(&mock)
        .await;
    Mock::given(method("HEAD")).and(path("/hook")).respond_with(ResponseTemplate::new(501)).mount(&mock).await;
    let tmp = tempfile::tempdir().unwrap();
    let m = mock.uri();
    let text = format!(
        "[prometheus]\nurl = \"{m}/prom\"\n[notify.pagerduty]\nrouting_key = {}\nurl = \"{m}/pd\"\n\
         [[notify.webhook]]\nname = \"bot\"\nurl = \"{m}/hook\"\n",
        secret(tmp.path(), "rk", "R0UT1NGKEY"),
    );
    let (code, out, err) = check_connect(tmp.path(), &text).await;
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("  webhook:bot: ok: reachable (HEAD answered 501)"), "{out}");
    assert!(
        out.contains(&format!("  pagerduty: ok: {m}/pd answers, but accepted an event without a routing key (202)")),
        "{out}"
    );
}
