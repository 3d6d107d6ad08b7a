//! Opsgenie and Jira Service Management Operations against a local stand-in that behaves
//! as their documentation says (tests/support/opsgenie.rs): one alert per alias while it is
//! open, 202 with a `requestId`, 422 for a field over its limit, 429 with its rate limit
//! headers, and on demand a connection dropped after the request was applied.

mod support;

use std::path::PathBuf;
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use axum::http::Method;
use culprit::model::notice::{Notice, NoticeEpisode, NoticeKind};
use culprit::model::verdict::Verdict;
use culprit::notify::FailureReason;
use culprit::notify::jsm::{Jsm, JsmConfig};
use culprit::notify::opsgenie::{Opsgenie, OpsgenieConfig, OpsgenieRegion};
use culprit::render::opsgenie::{REPEAT_MARK, alias, marker};
use culprit::settings::SecretSource;
use support::opsgenie::OpsStandIn;

const API_KEY: &str = "0psG3nie-K3Y-5ecret-0123456789ab";
const JSM_USER: &str = "culprit@example.com";
const JSM_TOKEN: &str = "ATATT-jsm-T0KEN-5ecret-0123";
const CLOUD_ID: &str = "0a1b2c3d-4e5f-6789-abcd-ef0123456789";

static VERDICT: LazyLock<Verdict> = LazyLock::new(|| {
    let capture = culprit::samples::captures::CAPTURES.iter().find(|c| c.name == "slow-sink").unwrap();
    culprit::samples::captures::verdict(capture).unwrap()
});

const GROUP_KEY: &str = "{}/{}:{alertname=\"FlinkJobBackpressured\", job_name=\"bp-lab-slow-sink\"}";

fn notice(kind: NoticeKind, key: &str) -> Notice {
    Notice {
        links: Default::default(),
        kind,
        group_key: GROUP_KEY.into(),
        labels: Default::default(),
        job: VERDICT.job.clone(),
        verdict: (kind == NoticeKind::Verdict).then(|| VERDICT.clone()),
        verdict_id: Some(7),
        verdict_url: Some("https://culprit.example.com/api/v1/verdicts/7".into()),
        reason: (kind == NoticeKind::CouldNotDiagnose).then(|| "Prometheus is unreachable".to_string()),
        firing: kind != NoticeKind::Resolved,
        changed: false,
        idempotency_key: key.into(),
        at_ms: 1_795_948_587_780,
        episode: NoticeEpisode {
            thread: "t".into(),
            groups: vec![GROUP_KEY.into()],
            revision: 0,
            verdict_ref: "v0".into(),
        },
        maybe_repeat: false,
        incident: None,
        incident_view: None,
        incident_parent: None,
    }
}

/// A revision (same verdict, other numbers) of the first post.
fn revision(key: &str, n: u32) -> Notice {
    let mut x = notice(NoticeKind::Verdict, key);
    x.episode.revision = n;
    x.verdict.as_mut().unwrap().summary = format!("{} (revision {n})", VERDICT.summary);
    x
}

fn changed(key: &str) -> Notice {
    let mut x = notice(NoticeKind::Verdict, key);
    x.changed = true;
    x.verdict.as_mut().unwrap().summary = "the Kafka source is the culprit now".into();
    x
}

fn secret(value: &str) -> (tempfile::NamedTempFile, PathBuf) {
    let f = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(f.path(), value).unwrap();
    let p = f.path().to_path_buf();
    (f, p)
}

fn opsgenie_config(url: &str, key: PathBuf) -> OpsgenieConfig {
    OpsgenieConfig {
        name: "payments".into(),
        api_key: SecretSource::File(key),
        region: OpsgenieRegion::Us,
        url: Some(url.into()),
        priority: "P2".into(),
        responders: vec!["flink-oncall".into()],
        tags: vec!["prod".into()],
    }
}

struct Og {
    server: OpsStandIn,
    og: Opsgenie,
    _key: tempfile::NamedTempFile,
}

async fn opsgenie() -> Og {
    let server = OpsStandIn::start(API_KEY).await;
    let (f, p) = secret(API_KEY);
    let og = Opsgenie::new(&opsgenie_config(&server.url, p)).unwrap();
    Og { server, og, _key: f }
}

fn the_alias() -> String {
    alias(&notice(NoticeKind::Verdict, "k"))
}

#[tokio::test]
async fn the_first_verdict_opens_one_alert_under_alertmanagers_alias_showing_the_verdict() {
    let t = opsgenie().await;
    let n = notice(NoticeKind::Verdict, "v7-first");
    let sent = t.og.send(&n, None).await.unwrap();
    let alerts = t.server.alerts();
    assert_eq!(alerts.len(), 1, "{alerts:#?}");
    let a = &alerts[0];
    // Alertmanager's alias for the group: sha256 of the group key, hex.
    assert_eq!(a.alias, culprit::render::pagerduty::dedup_key(GROUP_KEY));
    assert_eq!((a.count, a.status, a.priority.as_str()), (1, "open", "P2"));
    assert!(a.message.starts_with("bp-lab-slow-sink: slow-sink: Writer (sink) is the culprit"), "{}", a.message);
    assert!(a.description.ends_with(&marker(&n)), "{}", a.description);
    assert!(a.tags.contains(&"prod".to_string()) && a.tags.contains(&"sink".to_string()));
    assert_eq!(a.created_with["details"]["idempotency_key"], "v7-first");
    let state = sent.state.unwrap();
    assert_eq!(state["alias"], a.alias.as_str());
    // Create, update message, update description: the last 202's requestId is kept.
    assert_eq!(state["request_id"], "req-3");
    let paths: Vec<String> = t.server.requests().into_iter().map(|(m, p)| format!("{m} {p}")).collect();
    assert_eq!(
        paths,
        [
            "POST /v2/alerts?".to_string(),
            format!("PUT /v2/alerts/{}/message?identifierType=alias", a.alias),
            format!("PUT /v2/alerts/{}/description?identifierType=alias", a.alias),
        ]
    );
    // Asked again, Opsgenie shows it arrived.
    assert!(t.og.already_sent(&n, None).await.unwrap().is_some());
}

#[tokio::test]
async fn the_verdict_lands_on_the_alert_alertmanager_opened_without_a_second_alert() {
    let t = opsgenie().await;
    t.server.open(&the_alias(), "[FIRING:1] FlinkJobBackpressured bp-lab-slow-sink");
    t.og.send(&notice(NoticeKind::Verdict, "v7"), None).await.unwrap();
    let alerts = t.server.alerts();
    // The create folds into the open alert (count 1 + 1), the updates put the verdict on it.
    assert_eq!(alerts.len(), 1, "{alerts:#?}");
    assert_eq!(alerts[0].count, 2);
    assert!(alerts[0].message.contains("is the culprit"), "{}", alerts[0].message);
    assert!(alerts[0].description.ends_with("culprit notice v7"));
}

#[tokio::test]
async fn a_revision_updates_the_alert_in_place_and_a_changed_verdict_adds_one_note() {
    let t = opsgenie().await;
    let state = t.og.send(&notice(NoticeKind::Verdict, "v7"), None).await.unwrap().state.unwrap();
    let state = t.og.send(&revision("v7-r1", 1), Some(&state)).await.unwrap().state.unwrap();
    let alerts = t.server.alerts();
    assert_eq!(alerts.len(), 1);
    // No second create: the count stays 1, the description shows revision 1.
    assert_eq!(alerts[0].count, 1);
    assert!(alerts[0].description.contains("(revision 1)") && alerts[0].description.ends_with("culprit notice v7-r1"));
    assert!(alerts[0].notes.is_empty(), "a revision adds no note: {:?}", alerts[0].notes);
    t.og.send(&changed("v8"), Some(&state)).await.unwrap();
    let alerts = t.server.alerts();
    assert_eq!((alerts.len(), alerts[0].count), (1, 1));
    assert!(alerts[0].message.contains("the Kafka source is the culprit now"), "{}", alerts[0].message);
    assert_eq!(alerts[0].notes.len(), 1);
    assert!(alerts[0].notes[0].contains("verdict changed") && alerts[0].notes[0].ends_with("culprit notice v8"));
    assert!(t.og.already_sent(&changed("v8"), Some(&state)).await.unwrap().is_some());
}

#[tokio::test]
async fn the_resolved_episode_closes_the_alert() {
    let t = opsgenie().await;
    let state = t.og.send(&notice(NoticeKind::Verdict, "v7"), None).await.unwrap().state.unwrap();
    let resolved = notice(NoticeKind::Resolved, "r7");
    assert!(t.og.wants(&resolved));
    assert!(t.og.already_sent(&resolved, Some(&state)).await.unwrap().is_none(), "still open");
    t.og.send(&resolved, Some(&state)).await.unwrap();
    let alerts = t.server.alerts();
    assert_eq!((alerts.len(), alerts[0].status), (1, "closed"));
    assert!(alerts[0].notes[0].contains("resolved"));
    let (method, path) = t.server.requests().pop().unwrap();
    assert_eq!(format!("{method} {path}"), format!("POST /v2/alerts/{}/close?identifierType=alias", the_alias()));
    assert!(t.og.already_sent(&resolved, Some(&state)).await.unwrap().is_some());
    // An alert culprit never showed a verdict on (no state) is Alertmanager's to close.
    let before = t.server.requests().len();
    t.server.open(&alias(&notice(NoticeKind::Verdict, "k")), "another page");
    assert_eq!(t.og.send(&resolved, None).await.unwrap().state, None);
    assert_eq!(t.server.requests().len(), before);
    assert_eq!(t.server.alerts()[1].status, "open");
}

#[tokio::test]
async fn could_not_diagnose_and_notices_about_one_group_never_reach_opsgenie() {
    let t = opsgenie().await;
    for kind in [NoticeKind::CouldNotDiagnose, NoticeKind::Joined, NoticeKind::GroupResolved] {
        let n = notice(kind, "x");
        assert!(!t.og.wants(&n), "{kind:?}");
        let e = t.og.send(&n, None).await.unwrap_err();
        assert!(!e.retryable, "{e}");
    }
    let mut stale = notice(NoticeKind::Verdict, "x");
    stale.firing = false;
    assert!(!t.og.wants(&stale));
    assert!(t.server.requests().is_empty() && t.server.alerts().is_empty());
}

#[tokio::test]
async fn a_refused_payload_is_final_with_a_hint_naming_the_setting() {
    let server = OpsStandIn::start(API_KEY).await;
    // A responder team the account does not have: 422, final, the hint names responders.
    let (_f, p) = secret(API_KEY);
    let mut cfg = opsgenie_config(&server.url, p);
    cfg.responders = vec!["no-such-team".into()];
    let og = Opsgenie::new(&cfg).unwrap();
    let e = og.send(&notice(NoticeKind::Verdict, "v7"), None).await.unwrap_err();
    assert!(!e.retryable && e.reason == FailureReason::Refused, "{e:?}");
    assert!(
        e.message.contains("422") && e.hint.as_deref().unwrap().contains("notify.opsgenie[payments].responders"),
        "{e}"
    );
    // A key of another account (an EU key at the US API): 401, the hint names the key
    // and the region; the key is nowhere in the error or in Debug.
    let (_g, wrong) = secret("another-K3Y-0123456789");
    let og = Opsgenie::new(&opsgenie_config(&server.url, wrong)).unwrap();
    let e = og.send(&notice(NoticeKind::Verdict, "v7"), None).await.unwrap_err();
    assert!(!e.retryable && e.message.contains("401"), "{e}");
    let hint = e.hint.clone().unwrap();
    assert!(
        hint.contains("notify.opsgenie[payments].api_key") && hint.contains("notify.opsgenie[payments].region"),
        "{hint}"
    );
    for text in [e.message.clone(), format!("{e:?}"), format!("{og:?}")] {
        assert!(!text.contains("another-K3Y") && !text.contains(API_KEY), "{text}");
    }
    assert!(server.alerts().is_empty());
}

#[tokio::test]
async fn field_lengths_over_opsgenies_limits_are_cut_never_refused() {
    let t = opsgenie().await;
    let mut n = notice(NoticeKind::Verdict, "v7");
    let v = n.verdict.as_mut().unwrap();
    v.summary = "<b>".repeat(5000);
    v.fix = vec!["f".repeat(30_000)];
    t.og.send(&n, None).await.unwrap();
    let a = &t.server.alerts()[0];
    // At most 130 characters after escaping, an entity never cut: "bp-lab-slow-sink: " is
    // 18, each `<b>` is `&lt;b&gt;` (9); 129 leave room for "…": 18 + 12 × 9 = 126, the
    // next `&lt;` (4) would make 130 > 129, so 126 + "…" = 127.
    assert_eq!(a.message.chars().count(), 127);
    assert!(a.message.ends_with("&lt;b&gt;…"), "{}", a.message);
    assert!(a.description.chars().count() <= 15_000 && a.description.ends_with("culprit notice v7"));
}

#[tokio::test]
async fn a_rate_limit_is_retried_after_the_period_opsgenie_names() {
    let t = opsgenie().await;
    t.server.throttle(1);
    let n = notice(NoticeKind::Verdict, "v7");
    let e = t.og.send(&n, None).await.unwrap_err();
    // No Retry-After: X-RateLimit-Period-In-Sec: 1 is the wait.
    assert!(e.retryable && e.reason == FailureReason::RateLimited, "{e:?}");
    assert_eq!(e.retry_after, Some(Duration::from_secs(1)));
    let start = Instant::now();
    tokio::time::sleep(e.retry_after.unwrap()).await;
    t.og.send(&n, None).await.unwrap();
    assert!(start.elapsed() >= Duration::from_secs(1));
    assert_eq!(t.server.alerts().len(), 1);
}

#[tokio::test]
async fn a_crash_mid_create_is_maybe_delivered_and_already_sent_finds_the_alert() {
    let t = opsgenie().await;
    t.server.crash_next(Method::POST, "/v2/alerts");
    let n = notice(NoticeKind::Verdict, "v7");
    let e = t.og.send(&n, None).await.unwrap_err();
    assert!(e.retryable && e.reason.maybe_delivered(), "{e:?}");
    // The create arrived with the verdict and its marker: nothing is sent again.
    let found = t.og.already_sent(&n, None).await.unwrap().expect("the alert shows the notice");
    assert_eq!(found.state.unwrap()["alias"], the_alias().as_str());
    let alerts = t.server.alerts();
    assert_eq!((alerts.len(), alerts[0].count), (1, 1));
}

#[tokio::test]
async fn a_crash_on_a_create_folded_into_alertmanagers_alert_is_sent_again_onto_the_same_alert() {
    let t = opsgenie().await;
    t.server.open(&the_alias(), "[FIRING:1] FlinkJobBackpressured");
    t.server.crash_next(Method::POST, "/v2/alerts");
    let mut n = notice(NoticeKind::Verdict, "v7");
    assert!(t.og.send(&n, None).await.unwrap_err().reason.maybe_delivered());
    // Folded: Alertmanager's description, not culprit's, so Opsgenie cannot tell.
    assert!(t.og.already_sent(&n, None).await.unwrap().is_none());
    n.maybe_repeat = true;
    t.og.send(&n, None).await.unwrap();
    let alerts = t.server.alerts();
    // One alert: Alertmanager's 1, the dropped create 2, the repeat 3.
    assert_eq!((alerts.len(), alerts[0].count), (1, 3));
    assert!(alerts[0].description.ends_with("culprit notice v7") && alerts[0].notes.is_empty());
}

#[tokio::test]
async fn a_crash_after_a_note_leaves_one_note_and_a_repeat_that_cannot_be_told_is_marked() {
    let t = opsgenie().await;
    let state = t.og.send(&notice(NoticeKind::Verdict, "v7"), None).await.unwrap().state.unwrap();
    t.server.crash_next(Method::POST, "/notes");
    let n = changed("v8");
    assert!(t.og.send(&n, Some(&state)).await.unwrap_err().reason.maybe_delivered());
    assert!(t.og.already_sent(&n, Some(&state)).await.unwrap().is_some(), "the note arrived");
    assert_eq!(t.server.alerts()[0].notes.len(), 1);
    // Had Opsgenie not been able to say (its read failing), the repeat's note is marked.
    let mut repeat = changed("v8");
    repeat.maybe_repeat = true;
    t.og.send(&repeat, Some(&state)).await.unwrap();
    let notes = &t.server.alerts()[0].notes;
    assert_eq!(notes.len(), 2);
    assert!(!notes[0].starts_with(REPEAT_MARK) && notes[1].starts_with(REPEAT_MARK), "{notes:?}");
}

#[tokio::test]
async fn the_probe_lists_one_alert_and_posts_nothing() {
    let t = opsgenie().await;
    let ok = t.og.probe().await.unwrap();
    assert!(ok.contains("may read alerts") && ok.contains("not verified"), "{ok}");
    assert_eq!(t.server.requests(), [("GET".to_string(), "/v2/alerts?limit=1".to_string())]);
    let (_g, wrong) = secret("wrong");
    let e = Opsgenie::new(&opsgenie_config(&t.server.url, wrong)).unwrap().probe().await.unwrap_err();
    assert!(e.message.contains("401") && e.message.contains("api_key"), "{e}");
}

#[test]
fn the_regions_are_opsgenies_us_and_eu_apis() {
    let us: OpsgenieConfig = toml::from_str("name = \"a\"\napi_key = { env = \"K\" }\n").unwrap();
    let eu: OpsgenieConfig = toml::from_str("name = \"a\"\napi_key = { env = \"K\" }\nregion = \"eu\"\n").unwrap();
    assert_eq!((us.base_url(), us.priority.as_str()), ("https://api.opsgenie.com", "P3"));
    assert_eq!(eu.base_url(), "https://api.eu.opsgenie.com");
    assert!(toml::from_str::<OpsgenieConfig>("name = \"a\"\napi_key = { env = \"K\" }\nregion = \"apac\"\n").is_err());
}

// ---------------------------------------------------------------------------------------
// Jira Service Management Operations: the same alert, by id, Basic authentication.

struct J {
    server: OpsStandIn,
    jsm: Jsm,
    _token: tempfile::NamedTempFile,
}

fn jsm_config(url: &str, token: PathBuf) -> JsmConfig {
    toml::from_str::<JsmConfig>(&format!(
        "name = \"payments\"\ncloud_id = \"{CLOUD_ID}\"\nuser = \"{JSM_USER}\"\napi_token = {{ file = \"{}\" }}\nurl = \"{url}\"\nresponders = [\"flink-oncall\"]\n",
        token.display()
    ))
    .unwrap()
}

async fn jsm() -> J {
    let server = OpsStandIn::start(&format!("{JSM_USER}:{JSM_TOKEN}")).await;
    let (f, p) = secret(JSM_TOKEN);
    let jsm = Jsm::new(&jsm_config(&server.url, p)).unwrap();
    J { server, jsm, _token: f }
}

#[tokio::test]
async fn jsm_opens_one_alert_updates_it_by_id_in_place_and_closes_it() {
    let t = jsm().await;
    let base = format!("/jsm/ops/api/{CLOUD_ID}/v1/alerts");
    let state = t.jsm.send(&notice(NoticeKind::Verdict, "v7"), None).await.unwrap().state.unwrap();
    let alerts = t.server.alerts();
    assert_eq!(alerts.len(), 1);
    assert_eq!(alerts[0].created_with["extraProperties"]["idempotency_key"], "v7");
    assert!(alerts[0].created_with.get("details").is_none());
    // The id was found by alias (List Alerts) and is kept for the episode.
    assert_eq!(state["id"], alerts[0].id.as_str());
    let state = t.jsm.send(&revision("v7-r1", 1), Some(&state)).await.unwrap().state.unwrap();
    t.jsm.send(&notice(NoticeKind::Resolved, "r7"), Some(&state)).await.unwrap();
    let alerts = t.server.alerts();
    assert_eq!((alerts.len(), alerts[0].count, alerts[0].status), (1, 1, "closed"));
    assert!(alerts[0].description.ends_with("culprit notice v7-r1"));
    let id = &alerts[0].id;
    let writes: Vec<String> =
        t.server.requests().into_iter().filter(|(m, _)| m != "GET").map(|(m, p)| format!("{m} {p}")).collect();
    assert_eq!(
        writes,
        [
            format!("POST {base}?"),
            format!("PUT {base}/{id}/message?"),
            format!("PUT {base}/{id}/description?"),
            format!("PUT {base}/{id}/message?"),
            format!("PUT {base}/{id}/description?"),
            format!("POST {base}/{id}/close?"),
        ]
    );
}

#[tokio::test]
async fn a_jsm_crash_mid_create_is_found_by_alias_and_not_sent_again() {
    let t = jsm().await;
    t.server.crash_next(Method::POST, "/v1/alerts");
    let n = notice(NoticeKind::Verdict, "v7");
    assert!(t.jsm.send(&n, None).await.unwrap_err().reason.maybe_delivered());
    let found = t.jsm.already_sent(&n, None).await.unwrap().expect("found by alias");
    assert_eq!(found.state.unwrap()["id"], t.server.alerts()[0].id.as_str());
    assert_eq!(t.server.alerts().len(), 1);
}

#[tokio::test]
async fn jsm_refuses_a_wrong_token_with_a_hint_and_never_shows_it() {
    let t = jsm().await;
    let (_g, wrong) = secret("ATATT-wrong-T0KEN");
    let j = Jsm::new(&jsm_config(&t.server.url, wrong)).unwrap();
    let e = j.send(&notice(NoticeKind::Verdict, "v7"), None).await.unwrap_err();
    assert!(!e.retryable && e.message.contains("401"), "{e}");
    assert!(e.hint.as_deref().unwrap().contains("notify.jsm[payments].api_token"), "{e}");
    for text in [e.message.clone(), format!("{e:?}"), format!("{j:?}"), format!("{:?}", t.jsm)] {
        assert!(!text.contains("wrong-T0KEN") && !text.contains(JSM_TOKEN), "{text}");
    }
    assert!(t.jsm.probe().await.unwrap().contains("may read alerts"));
    assert!(!t.jsm.wants(&notice(NoticeKind::CouldNotDiagnose, "x")));
}

#[test]
fn configured_sections_are_named_by_their_name_and_bad_values_are_refused_with_their_keys() {
    let text = format!(
        "[[notify.opsgenie]]\nname = \"payments\"\napi_key = {{ env = \"OG\" }}\nregion = \"eu\"\n\
         [[notify.jsm]]\nname = \"payments\"\ncloud_id = \"{CLOUD_ID}\"\nuser = \"{JSM_USER}\"\napi_token = {{ env = \"JSM\" }}\n"
    );
    let config = culprit::config::Config::from_toml(&text, "c.toml").unwrap();
    assert_eq!(
        config.notify.describe(),
        [
            "opsgenie:payments (Alert API v2 at https://api.eu.opsgenie.com, priority P3)".to_string(),
            format!("jsm:payments (JSM Operations at https://api.atlassian.com, cloud {CLOUD_ID}, priority P3)"),
        ]
    );
    let bad = "[[notify.opsgenie]]\nname = \"a\"\napi_key = { env = \"OG\" }\npriority = \"P9\"\n\
               [[notify.opsgenie]]\nname = \"a\"\napi_key = { env = \"OG\" }\n\
               [[notify.jsm]]\nname = \"b\"\ncloud_id = \"x/../y\"\nuser = \"nobody\"\napi_token = { env = \"JSM\" }\n";
    let e = culprit::config::Config::from_toml(bad, "c.toml").unwrap_err().to_string();
    for expected in [
        "notify.opsgenie[a].priority must be one of P1, P2, P3, P4, P5",
        "notify.opsgenie: the name `a` is used twice",
        "notify.jsm[b].cloud_id",
        "notify.jsm[b].user",
    ] {
        assert!(e.contains(expected), "{expected}: {e}");
    }
}
