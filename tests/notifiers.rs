//! The PagerDuty, Alertmanager and webhook notifiers against real local HTTP servers
//! (wiremock), and culprit's alert against a real Alertmanager, with a real verdict (the
//! bundled slow-sink capture) and the real Alertmanager webhook that paged for it.

use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use culprit::config::{AlertmanagerConfig, HttpAuth, Millis, PagerDutyConfig, SecretSource, WebhookConfig};
use culprit::model::notice::{Notice, NoticeKind};
use culprit::model::verdict::Verdict;
use culprit::notify::Notifier;
use culprit::notify::alertmanager::Alertmanager;
use culprit::notify::pagerduty::PagerDuty;
use culprit::notify::webhook::Webhook;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

/// A routing key shaped like PagerDuty's (32 characters); must never show up in errors.
const ROUTING_KEY: &str = "R0UT1NGKEY5ECRET0123456789abcdef";

/// The Alertmanager webhook that paged for the slow-sink run.
static WEBHOOK: LazyLock<Value> = LazyLock::new(|| {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/captures/slow-sink/alerts/webhook-0001.json");
    serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap()
});

/// culprit's verdict for the slow-sink capture.
static VERDICT: LazyLock<Verdict> = LazyLock::new(|| {
    let capture = culprit::samples::captures::CAPTURES.iter().find(|c| c.name == "slow-sink").unwrap();
    culprit::samples::captures::verdict(capture).unwrap()
});

fn group_key() -> String {
    WEBHOOK["groupKey"].as_str().unwrap().to_string()
}

fn now_ms() -> i64 {
    jiff::Timestamp::now().as_millisecond()
}

/// A notice about the slow-sink page, made now.
fn notice(kind: NoticeKind) -> Notice {
    let labels = WEBHOOK["commonLabels"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
        .collect();
    Notice {
        links: Default::default(),
        kind,
        group_key: group_key(),
        labels,
        job: VERDICT.job.clone(),
        verdict: (kind == NoticeKind::Verdict).then(|| VERDICT.clone()),
        verdict_id: Some(42),
        verdict_url: Some("http://culprit.example:8080/api/v1/verdicts/42".into()),
        reason: (kind == NoticeKind::CouldNotDiagnose).then(|| "Prometheus answered 503 for 5m".into()),
        firing: kind != NoticeKind::Resolved,
        changed: false,
        idempotency_key: format!("dest:{}:42", culprit::render::pagerduty::dedup_key(&group_key())),
        at_ms: now_ms(),
        episode: Default::default(),
        maybe_repeat: false,
        incident: None,
        incident_view: None,
        incident_parent: None,
    }
}

/// A secret in a temporary file, as a mounted Kubernetes Secret would be.
fn secret_file(secret: &str) -> (tempfile::NamedTempFile, PathBuf) {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    writeln!(f, "{secret}").unwrap();
    let p = f.path().to_path_buf();
    (f, p)
}

fn pagerduty(server: &MockServer, key_file: &Path) -> PagerDuty {
    PagerDuty::new(&PagerDutyConfig {
        name: None,
        routing_key: SecretSource::File(key_file.to_path_buf()),
        url: format!("{}/v2/enqueue", server.uri()),
        severity: "error".into(),
    })
    .unwrap()
}

fn alertmanager(url: &str, auth: Option<HttpAuth>) -> Alertmanager {
    Alertmanager::new(&AlertmanagerConfig {
        url: url.into(),
        ends_after: Millis::from_secs(900),
        alertname: "FlinkBackpressureCulprit".into(),
        auth,
    })
    .unwrap()
}

async fn requests(server: &MockServer) -> Vec<Request> {
    server.received_requests().await.unwrap()
}

fn ms(rfc3339: &Value) -> i64 {
    rfc3339.as_str().unwrap().parse::<jiff::Timestamp>().unwrap().as_millisecond()
}

/// `value` with the fields at `paths` (JSON pointers) replaced by `[timestamp]`.
fn redact_times(mut value: Value, paths: &[&str]) -> Value {
    for p in paths {
        if let Some(v) = value.pointer_mut(p) {
            *v = json!("[timestamp]");
        }
    }
    value
}

// ---------------------------------------------------------------------------------------
// PagerDuty
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn pagerduty_gets_a_trigger_event_deduplicated_on_the_sha256_of_the_real_group_key() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v2/enqueue"))
        .respond_with(
            ResponseTemplate::new(202).set_body_json(
                json!({"status": "success", "message": "Event processed", "dedup_key": "from-pagerduty"}),
            ),
        )
        .expect(1)
        .mount(&server)
        .await;
    let (_f, key_file) = secret_file(ROUTING_KEY);
    let pd = pagerduty(&server, &key_file);
    let n = notice(NoticeKind::Verdict);

    let sent = pd.send(&n, None).await.unwrap();
    assert_eq!(sent.state, Some(json!({"dedup_key": "from-pagerduty"})));

    let body: Value = requests(&server).await[0].body_json().unwrap();
    let expected_dedup = hex::encode(Sha256::digest(
        "{}:{alertname=\"FlinkJobBackpressured\", job_name=\"bp_lab_slow_sink\"}".as_bytes(),
    ));
    assert_eq!(group_key(), "{}:{alertname=\"FlinkJobBackpressured\", job_name=\"bp_lab_slow_sink\"}");
    assert_eq!(body["dedup_key"], expected_dedup);
    assert_eq!(body["dedup_key"].as_str().unwrap().len(), 64);
    assert_eq!(body["routing_key"], ROUTING_KEY);
    assert_eq!(body["event_action"], "trigger");
    assert_eq!(body["client"], "culprit");
    assert_eq!(body["client_url"], "http://culprit.example:8080/api/v1/verdicts/42");
    assert_eq!(
        body["links"],
        json!([{"href": "http://culprit.example:8080/api/v1/verdicts/42", "text": "culprit verdict"}])
    );
    let p = &body["payload"];
    // The answer, then the first step of the fix.
    assert_eq!(p["summary"], format!("bp-lab-slow-sink: {} Fix: {}", VERDICT.summary, VERDICT.fix[0]));
    assert_eq!(p["source"], "bp-lab-slow-sink");
    assert_eq!(p["severity"], "error");
    assert_eq!(p["component"], "slow-sink: Writer");
    assert_eq!(p["class"], "sink");
    assert_eq!(p["group"], "flink");
    assert_eq!(ms(&p["timestamp"]), n.at_ms);
    assert_eq!(p["custom_details"]["verdict"], serde_json::to_value(&*VERDICT).unwrap());
    assert_eq!(p["custom_details"]["idempotency_key"], n.idempotency_key);
    assert_eq!(p["custom_details"]["group_key"], group_key());
}

#[tokio::test]
async fn the_pagerduty_event_for_the_slow_sink_verdict_matches_the_snapshot() {
    let server = MockServer::start().await;
    Mock::given(method("POST")).respond_with(ResponseTemplate::new(202)).mount(&server).await;
    let (_f, key_file) = secret_file(ROUTING_KEY);
    pagerduty(&server, &key_file).send(&notice(NoticeKind::Verdict), None).await.unwrap();
    let body: Value = requests(&server).await[0].body_json().unwrap();
    insta::assert_json_snapshot!("pagerduty_event_slow_sink", redact_times(body, &["/payload/timestamp"]));
}

#[tokio::test]
async fn a_summary_longer_than_1024_characters_reaches_pagerduty_cut_with_an_ellipsis() {
    let server = MockServer::start().await;
    Mock::given(method("POST")).respond_with(ResponseTemplate::new(202)).mount(&server).await;
    let (_f, key_file) = secret_file(ROUTING_KEY);
    let mut n = notice(NoticeKind::Verdict);
    n.verdict.as_mut().unwrap().summary = "ü".repeat(5000);
    pagerduty(&server, &key_file).send(&n, None).await.unwrap();
    let body: Value = requests(&server).await[0].body_json().unwrap();
    let summary = body["payload"]["summary"].as_str().unwrap();
    assert_eq!(summary.chars().count(), culprit::render::pagerduty::MAX_SUMMARY_CHARS);
    assert_eq!(summary.chars().count(), 1024);
    assert!(summary.ends_with("ü…"));
}

#[tokio::test]
async fn a_pagerduty_500_is_retryable_and_the_next_attempt_202_is_delivered() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(500).set_body_string("internal error"))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST")).respond_with(ResponseTemplate::new(202)).mount(&server).await;
    let (_f, key_file) = secret_file(ROUTING_KEY);
    let pd = pagerduty(&server, &key_file);
    let n = notice(NoticeKind::Verdict);

    let first = pd.send(&n, None).await.unwrap_err();
    assert!(first.retryable);
    assert_eq!(first.retry_after, None);
    // The answer's body is logged, never in the error (stored, served by the API).
    assert_eq!(first.message, "pagerduty: HTTP 500 Internal Server Error");

    let second = pd.send(&n, None).await.unwrap();
    let dedup = culprit::render::pagerduty::dedup_key(&group_key());
    assert_eq!(second.state, Some(json!({ "dedup_key": dedup })));

    let sent = requests(&server).await;
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[0].body, sent[1].body, "both attempts send the same event");
}

#[tokio::test]
async fn a_pagerduty_400_is_final_and_its_error_says_the_status_without_the_answer_or_the_routing_key() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(400).set_body_json(json!({
            "status": "invalid event",
            "message": "Event object is invalid",
            "errors": [format!("routing_key {ROUTING_KEY} is not an integration key")]
        })))
        .mount(&server)
        .await;
    let (_f, key_file) = secret_file(ROUTING_KEY);
    let pd = pagerduty(&server, &key_file);
    let e = pd.send(&notice(NoticeKind::Verdict), None).await.unwrap_err();
    assert!(!e.retryable);
    // PagerDuty's `message` and `errors` go to the log (redacted), not into the error; the
    // error ends with culprit's own hint for a refused routing key (tests/final_errors.rs).
    let hint = e.hint.clone().expect("a routing-key hint");
    assert_eq!(e.message, format!("pagerduty: HTTP 400 Bad Request. To fix: {hint}"));
    assert!(hint.contains("notify.pagerduty.routing_key"));
    assert!(!e.message.contains("is not an integration key"));
    assert!(!e.to_string().contains(ROUTING_KEY));
    assert!(!format!("{e:?}").contains(ROUTING_KEY));
    assert!(!format!("{pd:?}").contains(ROUTING_KEY));
}

#[tokio::test]
async fn a_pagerduty_429_is_retryable_after_the_time_pagerduty_asks_for() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(429).insert_header("Retry-After", "7"))
        .mount(&server)
        .await;
    let (_f, key_file) = secret_file(ROUTING_KEY);
    let e = pagerduty(&server, &key_file).send(&notice(NoticeKind::Verdict), None).await.unwrap_err();
    assert!(e.retryable);
    assert_eq!(e.retry_after, Some(Duration::from_secs(7)));
    assert!(e.message.starts_with("pagerduty: HTTP 429"));
}

#[tokio::test]
async fn an_unreachable_pagerduty_is_retryable_and_the_error_holds_no_secret() {
    let port = free_port();
    let (_f, key_file) = secret_file(ROUTING_KEY);
    let pd = PagerDuty::new(&PagerDutyConfig {
        name: None,
        routing_key: SecretSource::File(key_file.clone()),
        url: format!("http://127.0.0.1:{port}/v2/enqueue"),
        severity: "critical".into(),
    })
    .unwrap();
    let e = pd.send(&notice(NoticeKind::Verdict), None).await.unwrap_err();
    assert!(e.retryable);
    // The cause is kept (which part failed and the OS error), the URL and key are not.
    assert!(e.message.starts_with("pagerduty: cannot connect: "), "{}", e.message);
    assert!(e.message.contains("Connection refused"), "{}", e.message);
    assert!(!e.message.contains(&port.to_string()) && !e.message.contains(ROUTING_KEY), "{}", e.message);
}

#[tokio::test]
async fn pagerduty_is_never_triggered_for_a_resolved_group_nor_for_a_failure_to_diagnose() {
    let server = MockServer::start().await;
    Mock::given(method("POST")).respond_with(ResponseTemplate::new(202)).expect(0).mount(&server).await;
    let (_f, key_file) = secret_file(ROUTING_KEY);
    let pd = pagerduty(&server, &key_file);
    let resolved = notice(NoticeKind::Resolved);
    let mut late_verdict = notice(NoticeKind::Verdict);
    late_verdict.firing = false;
    assert!(!pd.wants(&resolved));
    assert!(!pd.wants(&late_verdict));
    assert!(pd.wants(&notice(NoticeKind::Verdict)));
    // A trigger for culprit's own trouble could open (or escalate) an incident by itself.
    let failed = notice(NoticeKind::CouldNotDiagnose);
    assert!(!pd.wants(&failed));
    assert!(!pd.send(&resolved, None).await.unwrap_err().retryable);
    assert!(!pd.send(&late_verdict, None).await.unwrap_err().retryable);
    assert!(!pd.send(&failed, None).await.unwrap_err().retryable);
}

#[test]
fn a_bad_pagerduty_configuration_is_refused_without_showing_the_key() {
    let (_f, key_file) = secret_file(ROUTING_KEY);
    let cfg = |severity: &str, url: &str| PagerDutyConfig {
        name: None,
        routing_key: SecretSource::File(key_file.clone()),
        url: url.into(),
        severity: severity.into(),
    };
    let e = PagerDuty::new(&cfg("page-me", "https://events.pagerduty.com/v2/enqueue")).unwrap_err();
    assert_eq!(e, "pagerduty: severity `page-me` is not one of critical, error, warning, info");
    assert!(PagerDuty::new(&cfg("info", "ftp://events.pagerduty.com")).is_err());
    let missing = PagerDutyConfig {
        name: None,
        routing_key: SecretSource::File("/nonexistent/culprit/routing-key".into()),
        ..cfg("error", "https://events.pagerduty.com/v2/enqueue")
    };
    assert!(PagerDuty::new(&missing).unwrap_err().starts_with("pagerduty: routing key: cannot read the secret file"));
    let ok = PagerDuty::new(&cfg("error", "https://events.pagerduty.com/v2/enqueue")).unwrap();
    assert!(!format!("{ok:?}").contains(ROUTING_KEY));
}

// ---------------------------------------------------------------------------------------
// Alertmanager
// ---------------------------------------------------------------------------------------

/// The source alert's identifying labels (from the real webhook: job_id, job_name as the
/// reporter writes it, lab, team; not alertname or severity), Flink's name of the job, and
/// culprit's own.
fn expected_labels() -> Value {
    json!({
        "alertname": "FlinkBackpressureCulprit",
        "job_name": "bp_lab_slow_sink",
        "job_id": "da23ad9af4e7326542c9a70eac958f42",
        "lab": "flink-bp",
        "team": "streaming",
        "flink_job_name": "bp-lab-slow-sink",
        "culprit_vertex": "slow-sink: Writer",
        "finding": "sink",
        "status": "culprit_found",
        "culprit": "true"
    })
}

#[tokio::test]
async fn alertmanager_gets_culprits_own_alert_with_the_verdicts_labels_ending_in_15_minutes() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/api/v2/alerts"))
        .respond_with(ResponseTemplate::new(200))
        .mount(&server)
        .await;
    let am = alertmanager(&server.uri(), None);
    let n = notice(NoticeKind::Verdict);
    let sent = am.send(&n, None).await.unwrap();

    let body: Value = requests(&server).await[0].body_json().unwrap();
    let alerts = body.as_array().unwrap();
    assert_eq!(alerts.len(), 1);
    let a = &alerts[0];
    assert_eq!(a["labels"], expected_labels());
    assert_eq!(a["annotations"]["summary"], VERDICT.summary);
    assert_eq!(a["annotations"]["fix"], VERDICT.fix[0]);
    assert_eq!(a["annotations"]["description"], VERDICT.cause);
    assert_eq!(a["annotations"]["verdict_url"], "http://culprit.example:8080/api/v1/verdicts/42");
    assert_eq!(a["generatorURL"], "http://culprit.example:8080/api/v1/verdicts/42");
    assert_eq!(ms(&a["startsAt"]), n.at_ms);
    assert_eq!(ms(&a["endsAt"]) - ms(&a["startsAt"]), 15 * 60 * 1000);
    // The source alert's identifying labels are copied unchanged; its kind and urgency
    // are not (culprit's alert is another alert, never the source's identity).
    for (k, v) in &n.labels {
        let copied = a["labels"].get(k).and_then(Value::as_str) == Some(v.as_str());
        assert_eq!(copied, !["alertname", "severity"].contains(&k.as_str()), "label {k}");
    }
    assert_eq!(sent.state, Some(json!({ "alert": a })));
}

#[tokio::test]
async fn the_alertmanager_alert_for_the_slow_sink_verdict_matches_the_snapshot() {
    let server = MockServer::start().await;
    Mock::given(method("POST")).respond_with(ResponseTemplate::new(200)).mount(&server).await;
    alertmanager(&server.uri(), None).send(&notice(NoticeKind::Verdict), None).await.unwrap();
    let body: Value = requests(&server).await[0].body_json().unwrap();
    insta::assert_json_snapshot!("alertmanager_alert_slow_sink", redact_times(body, &["/0/startsAt", "/0/endsAt"]));
}

#[tokio::test]
async fn a_resolved_group_posts_the_same_labels_with_endsat_now() {
    let server = MockServer::start().await;
    Mock::given(method("POST")).respond_with(ResponseTemplate::new(200)).mount(&server).await;
    let am = alertmanager(&format!("{}/", server.uri()), None);
    let firing = am.send(&notice(NoticeKind::Verdict), None).await.unwrap();
    let resolved = notice(NoticeKind::Resolved);
    let after = am.send(&resolved, firing.state.as_ref()).await.unwrap();
    assert_eq!(after.state, None);

    let sent = requests(&server).await;
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[1].url.path(), "/api/v2/alerts");
    let body: Value = sent[1].body_json().unwrap();
    let alerts = body.as_array().unwrap();
    assert_eq!(alerts.len(), 1);
    assert_eq!(alerts[0]["labels"], expected_labels());
    assert_eq!(ms(&alerts[0]["endsAt"]), resolved.at_ms);
    assert_eq!(ms(&alerts[0]["startsAt"]), resolved.at_ms);
}

#[tokio::test]
async fn a_resolved_notice_with_the_verdict_but_no_state_resolves_by_the_verdicts_labels() {
    let server = MockServer::start().await;
    Mock::given(method("POST")).respond_with(ResponseTemplate::new(200)).mount(&server).await;
    let am = alertmanager(&server.uri(), None);
    let mut resolved = notice(NoticeKind::Resolved);
    resolved.verdict = Some(VERDICT.clone());
    am.send(&resolved, None).await.unwrap();
    let body: Value = requests(&server).await[0].body_json().unwrap();
    assert_eq!(body[0]["labels"], expected_labels());
    assert_eq!(ms(&body[0]["endsAt"]), resolved.at_ms);
}

#[tokio::test]
async fn a_resolved_notice_with_nothing_to_resolve_posts_nothing() {
    let server = MockServer::start().await;
    Mock::given(method("POST")).respond_with(ResponseTemplate::new(200)).expect(0).mount(&server).await;
    let am = alertmanager(&server.uri(), None);
    assert!(am.wants(&notice(NoticeKind::Resolved)));
    assert_eq!(am.send(&notice(NoticeKind::Resolved), None).await.unwrap().state, None);
}

#[tokio::test]
async fn a_changed_culprit_resolves_the_earlier_alert_in_the_same_post() {
    let server = MockServer::start().await;
    Mock::given(method("POST")).respond_with(ResponseTemplate::new(200)).mount(&server).await;
    let am = alertmanager(&server.uri(), None);
    let first = am.send(&notice(NoticeKind::CouldNotDiagnose), None).await.unwrap();
    let mut changed = notice(NoticeKind::Verdict);
    changed.changed = true;
    am.send(&changed, first.state.as_ref()).await.unwrap();

    let body: Value = requests(&server).await[1].body_json().unwrap();
    let alerts = body.as_array().unwrap();
    assert_eq!(alerts.len(), 2);
    assert_eq!(alerts[0]["labels"], expected_labels());
    assert_eq!(ms(&alerts[0]["endsAt"]) - changed.at_ms, 900_000);
    assert_eq!(alerts[1]["labels"]["finding"], "none");
    assert_eq!(ms(&alerts[1]["endsAt"]), changed.at_ms);
}

#[tokio::test]
async fn a_failure_to_diagnose_is_an_alert_with_finding_none() {
    let server = MockServer::start().await;
    Mock::given(method("POST")).respond_with(ResponseTemplate::new(200)).mount(&server).await;
    alertmanager(&server.uri(), None).send(&notice(NoticeKind::CouldNotDiagnose), None).await.unwrap();
    let body: Value = requests(&server).await[0].body_json().unwrap();
    assert_eq!(
        body[0]["labels"],
        json!({"alertname": "FlinkBackpressureCulprit", "job_name": "bp_lab_slow_sink",
               "job_id": "da23ad9af4e7326542c9a70eac958f42", "lab": "flink-bp", "team": "streaming",
               "flink_job_name": "bp-lab-slow-sink", "finding": "none", "culprit": "true"})
    );
    assert_eq!(body[0]["annotations"]["summary"], "could not diagnose: Prometheus answered 503 for 5m");
}

#[tokio::test]
async fn an_alertmanager_503_is_retryable_and_a_400_is_final() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(503).insert_header("Retry-After", "2"))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(400).set_body_string("\"start time must be before end time\""))
        .mount(&server)
        .await;
    let am = alertmanager(&server.uri(), None);
    let e = am.send(&notice(NoticeKind::Verdict), None).await.unwrap_err();
    assert!(e.retryable);
    assert_eq!(e.retry_after, Some(Duration::from_secs(2)));
    let e = am.send(&notice(NoticeKind::Verdict), None).await.unwrap_err();
    assert!(!e.retryable);
    assert_eq!(e.message, "alertmanager: HTTP 400 Bad Request");
}

#[tokio::test]
async fn alertmanager_gets_basic_auth_and_the_password_stays_out_of_errors() {
    let server = MockServer::start().await;
    // "culprit:pa55word" in base64.
    Mock::given(method("POST"))
        .and(header("authorization", "Basic Y3VscHJpdDpwYTU1d29yZA=="))
        .respond_with(ResponseTemplate::new(500).set_body_string("denied for pa55word"))
        .mount(&server)
        .await;
    let (_f, password) = secret_file("pa55word");
    let auth = HttpAuth::Basic { username: "culprit".into(), password: SecretSource::File(password) };
    let am = alertmanager(&server.uri(), Some(auth));
    assert!(!format!("{am:?}").contains("pa55word"));
    let e = am.send(&notice(NoticeKind::Verdict), None).await.unwrap_err();
    assert_eq!(e.message, "alertmanager: HTTP 500 Internal Server Error");
}

// ---------------------------------------------------------------------------------------
// A real Alertmanager
// ---------------------------------------------------------------------------------------

/// A free TCP port on 127.0.0.1.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A real Alertmanager (Debian's `prometheus-alertmanager`) on a free port, stopped when
/// dropped.
struct RealAlertmanager {
    child: Child,
    url: String,
    _dir: tempfile::TempDir,
}

impl Drop for RealAlertmanager {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl RealAlertmanager {
    async fn start() -> RealAlertmanager {
        let binary = ["prometheus-alertmanager", "alertmanager"]
            .iter()
            .flat_map(|b| {
                std::env::var("PATH")
                    .unwrap_or_default()
                    .split(':')
                    .map(move |d| Path::new(d).join(b))
                    .collect::<Vec<_>>()
            })
            .find(|p| p.exists())
            .expect(
                "`prometheus-alertmanager` is not installed: apt-get install -y prometheus-alertmanager (.ci/run does)",
            );
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("alertmanager.yml");
        std::fs::write(&config, "route:\n  receiver: blackhole\nreceivers:\n  - name: blackhole\n").unwrap();
        let port = free_port();
        let log = std::fs::File::create(dir.path().join("log")).unwrap();
        let child = Command::new(binary)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.path={}", dir.path().join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--cluster.listen-address=")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        let am = RealAlertmanager { child, url: format!("http://127.0.0.1:{port}"), _dir: dir };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(r) = reqwest::get(format!("{}/-/ready", am.url)).await
                && r.status().is_success()
            {
                return am;
            }
            assert!(Instant::now() < deadline, "Alertmanager not ready within 30 s");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Culprit's alerts Alertmanager holds and still considers active.
    async fn culprit_alerts(&self) -> Vec<Value> {
        let all: Vec<Value> = reqwest::get(format!("{}/api/v2/alerts?filter=culprit%3D%22true%22", self.url))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        all
    }
}

#[tokio::test]
async fn a_real_alertmanager_accepts_culprits_alert_and_drops_it_once_resolved() {
    let real = RealAlertmanager::start().await;
    let am = Notifier::new(alertmanager(&real.url, None));
    let n = notice(NoticeKind::Verdict);
    let sent = am.send(&n, None).await.unwrap();

    let alerts = real.culprit_alerts().await;
    assert_eq!(alerts.len(), 1, "{alerts:?}");
    assert_eq!(alerts[0]["labels"], expected_labels());
    assert_eq!(alerts[0]["annotations"]["summary"], VERDICT.summary);
    assert_eq!(ms(&alerts[0]["endsAt"]), n.at_ms + 900_000);
    assert_eq!(alerts[0]["generatorURL"], "http://culprit.example:8080/api/v1/verdicts/42");

    let resolved = notice(NoticeKind::Resolved);
    am.send(&resolved, sent.state.as_ref()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(real.culprit_alerts().await, Vec::<Value>::new());
}

// ---------------------------------------------------------------------------------------
// Generic webhook
// ---------------------------------------------------------------------------------------

fn webhook(url: &str, auth: Option<HttpAuth>) -> Webhook {
    Webhook::new(&WebhookConfig { name: "ops".into(), url: url.into(), auth }).unwrap()
}

#[tokio::test]
async fn a_webhook_gets_the_verdict_json_with_idempotency_and_group_key_headers() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/hooks/culprit"))
        .and(header("content-type", "application/json"))
        .and(header("authorization", "Bearer t0ken"))
        .respond_with(ResponseTemplate::new(204))
        .expect(1)
        .mount(&server)
        .await;
    let (_f, token) = secret_file("t0ken");
    let w = webhook(
        &format!("{}/hooks/culprit", server.uri()),
        Some(HttpAuth::Bearer { token: SecretSource::File(token) }),
    );
    assert_eq!(w.name(), "ops");
    assert_eq!(Notifier::new(webhook(&server.uri(), None)).name(), "webhook:ops");
    let n = notice(NoticeKind::Verdict);
    w.send(&n, None).await.unwrap();

    let r = &requests(&server).await[0];
    assert_eq!(r.headers["idempotency-key"], n.idempotency_key.as_str());
    assert_eq!(
        r.headers["x-culprit-group-key"],
        "{}:{alertname=\"FlinkJobBackpressured\", job_name=\"bp_lab_slow_sink\"}"
    );
    let body: Value = r.body_json().unwrap();
    assert_eq!(body["schema"], "culprit.verdict/v1");
    assert_eq!(body, serde_json::to_value(&*VERDICT).unwrap());
}

#[tokio::test]
async fn a_webhook_gets_a_small_notice_when_the_group_resolves_or_cannot_be_diagnosed() {
    let server = MockServer::start().await;
    Mock::given(method("POST")).respond_with(ResponseTemplate::new(200)).mount(&server).await;
    let w = webhook(&server.uri(), None);
    w.send(&notice(NoticeKind::Resolved), None).await.unwrap();
    w.send(&notice(NoticeKind::CouldNotDiagnose), None).await.unwrap();
    let sent = requests(&server).await;
    let job = json!({"name": "bp-lab-slow-sink", "id": "da23ad9af4e7326542c9a70eac958f42"});
    assert_eq!(
        sent[0].body_json::<Value>().unwrap(),
        json!({"schema": "culprit.notice/v1", "kind": "resolved", "group_key": group_key(), "job": job, "reason": null,
               "alert_groups": [group_key()]})
    );
    assert_eq!(
        sent[1].body_json::<Value>().unwrap(),
        json!({"schema": "culprit.notice/v1", "kind": "could_not_diagnose", "group_key": group_key(), "job": job,
               "reason": "Prometheus answered 503 for 5m", "alert_groups": [group_key()]})
    );
    assert!(sent[1].headers.contains_key("idempotency-key"));
}

#[tokio::test]
async fn a_webhook_408_429_and_5xx_are_retryable_and_other_4xx_are_final() {
    for (status, retryable) in [(408, true), (429, true), (502, true), (400, false), (404, false), (410, false)] {
        let server = MockServer::start().await;
        Mock::given(method("POST")).respond_with(ResponseTemplate::new(status)).mount(&server).await;
        let e = webhook(&server.uri(), None).send(&notice(NoticeKind::Verdict), None).await.unwrap_err();
        assert_eq!(e.retryable, retryable, "HTTP {status}");
        assert!(e.message.starts_with(&format!("webhook:ops: HTTP {status}")), "{}", e.message);
    }
}

#[tokio::test]
async fn a_webhook_redirect_is_not_followed() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(307).insert_header("location", "http://127.0.0.1:9/elsewhere"))
        .mount(&server)
        .await;
    let e = webhook(&server.uri(), None).send(&notice(NoticeKind::Verdict), None).await.unwrap_err();
    assert!(!e.retryable);
    assert_eq!(requests(&server).await.len(), 1);
}
