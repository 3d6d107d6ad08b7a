//! The MCP server with a real MCP client, the SDK's own (rmcp): over stdio (`culprit mcp`
//! as a child process) on a bundled capture, offline, and with a Prometheus that is down;
//! over streamable HTTP (`POST /mcp` of `culprit serve`) on a real Prometheus holding the
//! capture, behind the API's authentication.

mod support;

use std::sync::Arc;

use rmcp::ServiceExt as _;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

type Client = RunningService<RoleClient, ()>;

const BINARY: &str = env!("CARGO_BIN_EXE_culprit");

/// `culprit mcp ARGS` as the client's child process.
async fn stdio_client(args: &[&str]) -> Client {
    let mut command = tokio::process::Command::new(BINARY);
    command.arg("mcp").args(args).env("RUST_LOG", "warn");
    ().serve(TokioChildProcess::new(command).unwrap()).await.expect("the MCP session starts")
}

async fn call(client: &Client, tool: &str, args: Value) -> CallToolResult {
    let params = CallToolRequestParams::new(tool.to_string()).with_arguments(args.as_object().unwrap().clone());
    client.call_tool(params).await.unwrap_or_else(|e| panic!("{tool}: {e}"))
}

/// A call that succeeds: its structured content.
async fn ok(client: &Client, tool: &str, args: Value) -> Value {
    let r = call(client, tool, args).await;
    assert_ne!(r.is_error, Some(true), "{tool}: {r:?}");
    r.structured_content.unwrap_or_else(|| panic!("{tool}: no structured content"))
}

/// A call that fails as a tool result: its text.
async fn failed(client: &Client, tool: &str, args: Value) -> String {
    let r = call(client, tool, args).await;
    assert_eq!(r.is_error, Some(true), "{tool}: {r:?}");
    assert!(r.structured_content.is_none(), "an error carries no structured content");
    r.content.iter().filter_map(|c| c.as_text().map(|t| t.text.clone())).collect::<Vec<_>>().join("\n")
}

fn verdict_schema() -> jsonschema::Validator {
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/verdict.schema.json")).unwrap(),
    )
    .unwrap();
    jsonschema::validator_for(&schema).unwrap()
}

/// A SQLite store holding one verdict about the slow-sink capture's job, stored as a
/// finished diagnosis stores it; its id.
async fn store_with_one_verdict(path: &std::path::Path) -> i64 {
    use culprit::service::store::{Completion, Plan, Store};
    let cfg = culprit::config::StoreConfig { path: path.to_path_buf(), ..Default::default() };
    let store = Store::open(&cfg, Arc::new(culprit::service::metrics::Metrics::new())).unwrap();
    let verdict = culprit::samples::capture_verdict("slow-sink");
    let now = jiff::Timestamp::now().as_millisecond();
    let intake = culprit::service::intake::Intake {
        job_key: format!("id:{}", verdict.job.id),
        job: verdict.job.id.clone(),
        group_key: "g".into(),
        firing: true,
        firing_set: "s".into(),
        labels: Default::default(),
        sender: String::new(),
        known: true,
        links: Default::default(),
    };
    store.enqueue(vec![intake], now, 0, 10).await.unwrap();
    let item = store.claim_work(now).await.unwrap().expect("due at once");
    let json = serde_json::to_string(&verdict).unwrap();
    let completion = Completion {
        verdict: Some((verdict.job.name.clone(), json)),
        plan: Box::new(|_, _| Plan::default()),
        now_ms: now,
    };
    let id = store.complete(&item, completion).await.unwrap().verdict_id.expect("stored");
    store.close().await.unwrap();
    id
}

#[tokio::test]
async fn an_agent_lists_five_tools_each_with_an_input_schema_and_a_structured_output_the_verdicts_in_culprit_verdict_v1()
 {
    let client = stdio_client(&["--capture", "slow-sink"]).await;
    let info = client.peer_info().expect("initialized");
    assert_eq!(info.server_info.as_ref().map(|i| i.name.as_str()), Some("culprit"));
    assert!(info.instructions.as_deref().is_some_and(|i| i.contains("victims") && i.contains("hot_key")));
    let tools = client.list_all_tools().await.unwrap();
    let mut names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    names.sort();
    assert_eq!(
        names,
        ["diagnose_job", "explain_vertex", "get_verdict", "list_backpressured_jobs", "list_recent_verdicts"]
    );
    let verdict = culprit::model::verdict::json_schema();
    let keys = |v: &Value| {
        let mut k: Vec<String> = v["properties"].as_object().unwrap().keys().cloned().collect();
        k.sort();
        k
    };
    for tool in &tools {
        assert!(tool.description.as_deref().is_some_and(|d| d.len() > 100), "{}: a description for a model", tool.name);
        assert_eq!(tool.input_schema.get("type"), Some(&json!("object")), "{}", tool.name);
        let output = Value::Object((*tool.output_schema.clone().expect("an output schema")).clone());
        if tool.name == "diagnose_job" || tool.name == "get_verdict" {
            assert_eq!(keys(&output), keys(&verdict), "{}: the verdict's fields", tool.name);
            // rmcp describes the serialized form: `culprit` and `timeline`, written as null
            // when absent, are required there too.
            let required = output["required"].as_array().unwrap();
            assert!(verdict["required"].as_array().unwrap().iter().all(|r| required.contains(r)), "{}", tool.name);
        }
    }
    let diagnose = tools.iter().find(|t| t.name == "diagnose_job").unwrap();
    let input = Value::Object((*diagnose.input_schema).clone());
    assert_eq!(input["required"], json!(["job"]));
    for arg in ["job", "at", "window", "label"] {
        assert!(input["properties"].get(arg).is_some(), "diagnose_job takes `{arg}`: {input:#}");
    }
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn offline_on_a_bundled_capture_every_tool_answers_and_a_failure_is_a_result_the_agent_can_act_on() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("culprit.db");
    let id = store_with_one_verdict(&db).await;
    let config = tmp.path().join("culprit.toml");
    std::fs::write(&config, format!("[store]\npath = {:?}\n", db.display().to_string())).unwrap();
    let client = stdio_client(&["--config", config.to_str().unwrap(), "--capture", "slow-sink"]).await;
    let schema = verdict_schema();

    // diagnose_job: the capture's verdict, valid culprit.verdict/v1.
    let v = ok(&client, "diagnose_job", json!({"job": "bp-lab-slow-sink"})).await;
    assert!(schema.is_valid(&v), "{:?}", schema.iter_errors(&v).map(|e| e.to_string()).collect::<Vec<_>>());
    assert_eq!(v["culprit"]["vertex_name"], "slow-sink: Writer");
    assert_eq!(v["finding"], "sink");
    assert_eq!(v, serde_json::to_value(culprit::samples::capture_verdict("slow-sink")).unwrap());

    // list_backpressured_jobs over a 1 m window is the verdict's own reading: its graph's
    // ratios are each vertex's max over subtasks of the 60 s mean backpressure, so the job's
    // max over all subtasks is the largest of them (fraud-score's).
    let found = ok(&client, "list_backpressured_jobs", json!({"window": "1m"})).await;
    let jobs = found["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 1, "{found:#}");
    assert_eq!(jobs[0]["job_id"], v["job"]["id"]);
    let max = v["graph"]["vertices"].as_array().unwrap().iter().filter_map(|x| x["backpressured_max"].as_f64());
    let max = max.fold(0.0, f64::max);
    assert!((jobs[0]["backpressured_max"].as_f64().unwrap() - max).abs() < 1e-3, "{found:#} vs {max}");
    assert_eq!(found["at"], v["at"], "now is the recording's last sample");
    assert!(found["query"].as_str().unwrap().starts_with("max by (job_id, job_name) (avg_over_time("));

    // The stored verdict, by job and by id.
    let recent = ok(&client, "list_recent_verdicts", json!({"job": "bp_lab_slow_sink"})).await;
    assert_eq!(recent["verdicts"][0]["id"], id, "{recent:#}");
    assert_eq!(recent["verdicts"][0]["culprit"], "slow-sink: Writer");
    let stored = ok(&client, "get_verdict", json!({"id": id})).await;
    assert!(schema.is_valid(&stored));
    assert_eq!(stored, v);

    // explain_vertex: a victim of the stored verdict, and the culprit diagnosed now.
    let victim = ok(&client, "explain_vertex", json!({"verdict_id": id, "vertex": "parse"})).await;
    assert_eq!(victim["vertex"]["state"], "backpressured");
    assert!(victim["role"].as_str().unwrap().starts_with("a victim"), "{victim:#}");
    assert!(victim["evidence"].as_array().unwrap().iter().all(|e| e["query"].is_string()), "{victim:#}");
    let culprit =
        ok(&client, "explain_vertex", json!({"job": "bp-lab-slow-sink", "vertex": "slow-sink: Writer"})).await;
    assert_eq!(culprit["finding"], "sink");
    assert_eq!(
        culprit["steps"].as_array().unwrap().iter().map(|s| s["step"].clone()).collect::<Vec<_>>(),
        [json!("locate"), json!("sink")]
    );

    // Failures are results naming what to do, and the session goes on.
    let text = failed(&client, "diagnose_job", json!({"job": "bp-lab-slow-snk"})).await;
    assert!(text.starts_with("error (not_found):") && text.contains("closest job names: bp_lab_slow_sink"), "{text}");
    let text = failed(&client, "get_verdict", json!({"id": id + 1000})).await;
    assert!(text.contains("no stored verdict has id"), "{text}");
    let text = failed(&client, "explain_vertex", json!({"verdict_id": id, "vertex": "nope"})).await;
    assert!(text.contains("its vertices: Source: txn-source (id "), "{text}");
    let text = failed(&client, "diagnose_job", json!({"job": "bp-lab-slow-sink", "at": "yesterday"})).await;
    assert!(text.starts_with("error (bad_request): `at`"), "{text}");
    let text = failed(&client, "list_recent_verdicts", json!({"job": "bp-lab-slow-sinc"})).await;
    assert!(text.contains("closest job names: bp-lab-slow-sink"), "{text}");

    // A label value is data: a PromQL injection matches nothing (and stays in its string).
    let evil = r#"x"} or vector(1) or {a=""#;
    let found = ok(&client, "list_backpressured_jobs", json!({"label": {"namespace": evil}})).await;
    assert_eq!(found["jobs"], json!([]), "{found:#}");
    assert!(found["query"].as_str().unwrap().contains(r#"namespace="x\"} or vector(1) or {a=\"""#), "{found:#}");
    let text = failed(&client, "diagnose_job", json!({"job": "j", "label": {"a\"b": "x"}})).await;
    assert!(text.starts_with("error (bad_request): label"), "{text}");

    // While another process holds the SQLite store (a running serve), the stored-verdict
    // tools say so and where to ask instead.
    let cfg = culprit::config::StoreConfig { path: db.clone(), ..Default::default() };
    let held = culprit::service::store::Store::open(&cfg, Arc::new(culprit::service::metrics::Metrics::new())).unwrap();
    let text = failed(&client, "get_verdict", json!({"id": id})).await;
    assert!(text.starts_with("error (backend_down): backend store:"), "{text}");
    assert!(text.contains("ask its POST /mcp instead"), "{text}");
    held.close().await.unwrap();
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_prometheus_that_is_down_is_a_tool_error_naming_it_and_since_when_and_the_session_goes_on() {
    let tmp = tempfile::tempdir().unwrap();
    let port = support::free_port();
    let config = tmp.path().join("culprit.toml");
    std::fs::write(&config, format!("[prometheus]\nurl = \"http://127.0.0.1:{port}\"\n")).unwrap();
    let client = stdio_client(&["--config", config.to_str().unwrap()]).await;
    let first = failed(&client, "diagnose_job", json!({"job": "payments"})).await;
    let expected =
        format!("error (backend_down): backend prometheus at http://127.0.0.1:{port} refused the connection");
    assert!(first.starts_with(&expected), "{first}");
    assert!(first.contains("failing since "), "{first}");
    let since = |t: &str| t.split("failing since ").nth(1).unwrap().split(' ').next().unwrap().to_string();
    let second = failed(&client, "list_backpressured_jobs", json!({})).await;
    assert_eq!(since(&second), since(&first), "down since the first failure: {second}");
    // No store was written: the stored-verdict tools say where they looked.
    let text = failed(&client, "get_verdict", json!({"id": 1})).await;
    assert!(text.contains("no store at culprit.db"), "{text}");
    assert_eq!(client.list_all_tools().await.unwrap().len(), 5, "the session is alive");
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn over_post_mcp_of_serve_every_tool_answers_from_a_real_prometheus_behind_the_apis_authentication() {
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let dir = support::capture("slow-sink");
    let now = jiff::Timestamp::now().as_millisecond();
    let prom_port = support::free_port();
    let _prom =
        support::prometheus_with_texts(&[support::shifted(&dir.join("recording.om.gz"), now - 2_000)], prom_port);
    let flink = support::flink_rest_for(&dir).await;
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("api-token"), "s3cret-mcp-token").unwrap();
    let config = format!(
        "[prometheus]\nurl = \"http://127.0.0.1:{prom_port}\"\n[server]\nlisten = \"127.0.0.1:0\"\nauth = {{ type = \"bearer\", token = {{ file = {:?} }} }}\n[store]\npath = {:?}\n[service]\ncoalesce = \"1s\"\nrediagnose_weak_after = \"0s\"\n[[flink.clusters]]\nname = \"lab\"\nrest_url = \"{}\"\n",
        tmp.path().join("api-token").display().to_string(),
        tmp.path().join("culprit.db").display().to_string(),
        flink.uri()
    );
    let config = culprit::config::Config::from_toml(&config, "mcp.toml").unwrap();
    let mount: culprit::service::server::Mount = Box::new(culprit::mcp::http_routes);
    let app = culprit::service::server::Application::build_with(config, Some(mount)).await.unwrap();
    let url = format!("{}/mcp", app.url());

    // Without the token: 401, as for /api.
    let http = reqwest::Client::new();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}});
    let r = http.post(&url).header("accept", "application/json, text/event-stream").json(&init).send().await.unwrap();
    assert_eq!(r.status(), 401);
    let r = http.post(&url).bearer_auth("wrong").json(&init).send().await.unwrap();
    assert_eq!(r.status(), 401);

    // An alert makes a stored verdict (the worker diagnoses it from this Prometheus).
    let verdict = culprit::samples::capture_verdict("slow-sink");
    let webhook = support::webhook_for(&verdict.job.id, &verdict.job.name, &["a".into()]);
    let r = http
        .post(format!("{}/webhook/alertmanager", app.url()))
        .bearer_auth("s3cret-mcp-token")
        .json(&webhook)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    support::drained(&app).await;

    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url.as_str()).auth_header("s3cret-mcp-token"),
    );
    let client = ().serve(transport).await.expect("the MCP session starts over HTTP");
    assert_eq!(client.list_all_tools().await.unwrap().len(), 5);
    let schema = verdict_schema();

    let v = ok(&client, "diagnose_job", json!({"job": "bp-lab-slow-sink"})).await;
    assert!(schema.is_valid(&v));
    assert_eq!(v["culprit"]["vertex_name"], "slow-sink: Writer", "{v:#}");
    let found = ok(&client, "list_backpressured_jobs", json!({})).await;
    assert_eq!(found["jobs"][0]["job_id"], verdict.job.id.as_str(), "{found:#}");
    let recent = ok(&client, "list_recent_verdicts", json!({"job": verdict.job.id})).await;
    let id = recent["verdicts"][0]["id"].as_i64().unwrap_or_else(|| panic!("a stored verdict: {recent:#}"));
    let stored = ok(&client, "get_verdict", json!({"id": id})).await;
    assert!(schema.is_valid(&stored));
    assert_eq!(stored["finding"], "sink");
    let culprit = ok(&client, "explain_vertex", json!({"verdict_id": id, "vertex": "slow-sink: Writer"})).await;
    assert_eq!(culprit["vertex"]["state"], "culprit");
    assert!(
        culprit["evidence"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["query"].as_str().is_some_and(|q| q.contains("busyTimeMsPerSecond")))
    );
    let text = failed(&client, "diagnose_job", json!({"job": "bp-lab-slow-snk"})).await;
    assert!(text.contains("closest job names: bp_lab_slow_sink"), "{text}");
    client.cancel().await.unwrap();
    app.stop().await;
}

/// The official MCP inspector's command line (`npx @modelcontextprotocol/inspector --cli`),
/// `CULPRIT_MCP_INSPECTOR` naming another version. 0.15.0 runs on Node 20 (Debian's);
/// newer ones need Node 22.
fn inspector(target: &[&str], method: &[&str]) -> Value {
    let (target, transport) = match target.iter().position(|a| *a == "--transport") {
        Some(i) => (&target[..i], &target[i..]),
        None => (target, &[][..]),
    };
    let method: Vec<&str> = method.iter().chain(transport).copied().collect();
    let package =
        std::env::var("CULPRIT_MCP_INSPECTOR").unwrap_or_else(|_| "@modelcontextprotocol/inspector@0.15.0".into());
    let out = std::process::Command::new("npx")
        .args(["--yes", &package, "--cli"])
        .args(&method)
        // The inspector reads `--config` as its own before `--`.
        .arg("--")
        .args(target)
        .output()
        .expect("npx runs (apt-get install npm)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{method:?}: {stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{method:?}: {e}: {stdout}"))
}

/// A tool call through the inspector: its structured content, or its error text.
fn inspect_call(target: &[&str], tool: &str, args: &[&str]) -> Result<Value, String> {
    // `--tool-arg` takes every word up to the next option: the tool's name comes after.
    let mut method = vec!["--method", "tools/call"];
    if !args.is_empty() {
        method.push("--tool-arg");
        method.extend(args);
    }
    method.extend(["--tool-name", tool]);
    let r = inspector(target, &method);
    if r["isError"] == json!(true) {
        return Err(r["content"][0]["text"].as_str().unwrap_or_default().to_string());
    }
    Ok(r["structuredContent"].clone())
}

/// Every tool through the inspector's command line at `target`: a command, or a URL and
/// `--transport http`.
fn every_tool_through_the_inspector(target: &[&str], id: i64) {
    let tools = inspector(target, &["--method", "tools/list"]);
    assert_eq!(tools["tools"].as_array().unwrap().len(), 5, "{tools:#}");
    let v = inspect_call(target, "diagnose_job", &["job=bp-lab-slow-sink"]).unwrap();
    assert_eq!(v["culprit"]["vertex_name"], "slow-sink: Writer");
    let found = inspect_call(target, "list_backpressured_jobs", &["window=1m"]).unwrap();
    assert_eq!(found["jobs"][0]["job_id"], v["job"]["id"], "{found:#}");
    let recent = inspect_call(target, "list_recent_verdicts", &["job=bp-lab-slow-sink", "limit=5"]).unwrap();
    assert_eq!(recent["verdicts"][0]["id"], id, "{recent:#}");
    let id = id.to_string();
    let stored = inspect_call(target, "get_verdict", &[&format!("id={id}")]).unwrap();
    assert_eq!(stored["finding"], "sink");
    let victim = inspect_call(target, "explain_vertex", &[&format!("verdict_id={id}"), "vertex=fraud-score"]).unwrap();
    assert_eq!(victim["vertex"]["state"], "backpressured");
    let e = inspect_call(target, "diagnose_job", &["job=bp-lab-slow-snk"]).unwrap_err();
    assert!(e.contains("closest job names: bp_lab_slow_sink"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs npx and the npm registry: cargo test --test mcp -- --ignored"]
async fn the_official_mcp_inspector_lists_and_calls_every_tool_over_stdio_and_over_http() {
    // stdio: a bundled capture, a store holding its verdict.
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("culprit.db");
    let id = store_with_one_verdict(&db).await;
    let config = tmp.path().join("culprit.toml");
    std::fs::write(&config, format!("[store]\npath = {:?}\n", db.display().to_string())).unwrap();
    let config = config.to_str().unwrap().to_string();
    tokio::task::spawn_blocking(move || {
        every_tool_through_the_inspector(&[BINARY, "mcp", "--config", &config, "--capture", "slow-sink"], id)
    })
    .await
    .unwrap();

    // HTTP: serve on loopback (no credentials: this inspector sends no header) with a real
    // Prometheus, its store holding a verdict of the alert's diagnosis.
    let dir = support::capture("slow-sink");
    let now = jiff::Timestamp::now().as_millisecond();
    let prom_port = support::free_port();
    let _prom =
        support::prometheus_with_texts(&[support::shifted(&dir.join("recording.om.gz"), now - 2_000)], prom_port);
    let flink = support::flink_rest_for(&dir).await;
    let served = tempfile::tempdir().unwrap();
    let config = format!(
        "[prometheus]\nurl = \"http://127.0.0.1:{prom_port}\"\n[server]\nlisten = \"127.0.0.1:0\"\n[store]\npath = {:?}\n[service]\ncoalesce = \"1s\"\nrediagnose_weak_after = \"0s\"\n[[flink.clusters]]\nname = \"lab\"\nrest_url = \"{}\"\n",
        served.path().join("culprit.db").display().to_string(),
        flink.uri()
    );
    let config = culprit::config::Config::from_toml(&config, "mcp.toml").unwrap();
    let mount: culprit::service::server::Mount = Box::new(culprit::mcp::http_routes);
    let app = culprit::service::server::Application::build_with(config, Some(mount)).await.unwrap();
    let verdict = culprit::samples::capture_verdict("slow-sink");
    let webhook = support::webhook_for(&verdict.job.id, &verdict.job.name, &["a".into()]);
    let r =
        reqwest::Client::new().post(format!("{}/webhook/alertmanager", app.url())).json(&webhook).send().await.unwrap();
    assert_eq!(r.status(), 202);
    support::drained(&app).await;
    let stored = app.service.store.verdicts(1).await.unwrap();
    let url = format!("{}/mcp", app.url());
    let id = stored[0].id;
    tokio::task::spawn_blocking(move || every_tool_through_the_inspector(&[url.as_str(), "--transport", "http"], id))
        .await
        .unwrap();
    app.stop().await;
}

#[test]
fn culprit_mcp_without_metrics_or_with_an_unknown_capture_is_bad_usage_naming_the_captures() {
    let out = std::process::Command::new(BINARY).arg("mcp").output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    let out = std::process::Command::new(BINARY).args(["mcp", "--capture", "slow-snk"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--capture slow-snk: no bundled capture has that name (slow-sink, "), "{stderr}");
    // A configuration without [prometheus] and no capture: nothing to diagnose from.
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("c.toml"), "").unwrap();
    let out =
        std::process::Command::new(BINARY).args(["mcp", "--config"]).arg(tmp.path().join("c.toml")).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("[prometheus]"));
}

/// `POST /mcp`'s answer to an `initialize` sent to `url` with this `Host`.
async fn initialize_status(url: &str, host: &str, token: Option<&str>) -> u16 {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}});
    let mut r = reqwest::Client::new()
        .post(url)
        .header("host", host)
        .header("accept", "application/json, text/event-stream")
        .json(&init);
    if let Some(token) = token {
        r = r.bearer_auth(token);
    }
    r.send().await.unwrap().status().as_u16()
}

#[tokio::test]
async fn on_loopback_post_mcp_refuses_a_foreign_host_and_elsewhere_behind_credentials_it_takes_the_hosts_name() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("token"), "t0ken").unwrap();
    let serve = |listen: &str, auth: &str| {
        let text = format!(
            "[prometheus]\nurl = \"http://127.0.0.1:{}\"\n[server]\nlisten = \"{listen}\"\n{auth}[store]\npath = {:?}\n",
            support::free_port(),
            tmp.path().join(format!("{}.db", listen.len() + auth.len())).display().to_string()
        );
        culprit::config::Config::from_toml(&text, "mcp.toml").unwrap()
    };
    let mount = || -> culprit::service::server::Mount { Box::new(culprit::mcp::http_routes) };
    // Loopback, no credentials: rmcp's check against DNS rebinding holds.
    let local =
        culprit::service::server::Application::build_with(serve("127.0.0.1:0", ""), Some(mount())).await.unwrap();
    let url = format!("{}/mcp", local.url());
    assert_eq!(initialize_status(&url, &local.addr().to_string(), None).await, 200);
    assert_eq!(initialize_status(&url, "evil.example:80", None).await, 403);
    local.stop().await;
    // Every interface, behind a token: the name people reach it by is theirs to choose.
    let auth = format!(
        "auth = {{ type = \"bearer\", token = {{ file = {:?} }} }}\n",
        tmp.path().join("token").display().to_string()
    );
    let public =
        culprit::service::server::Application::build_with(serve("0.0.0.0:0", &auth), Some(mount())).await.unwrap();
    let url = format!("http://127.0.0.1:{}/mcp", public.addr().port());
    assert_eq!(initialize_status(&url, "culprit.example.com", None).await, 401);
    assert_eq!(initialize_status(&url, "culprit.example.com", Some("t0ken")).await, 200);
    public.stop().await;
}
