//! Field report 14's kind, "one job through several alert groups", at the destinations
//! `episode.rs` does not cover: Microsoft Teams, Google Chat, Mattermost, Discord, email,
//! Grafana annotations, Opsgenie and Jira Service Management. One table of destinations,
//! each read the way its vendor shows it: for three alert groups of one job, one verdict per
//! destination, and the groups that arrive or resolve apart tied to it (a reply in its
//! thread where the destination has threads, nothing where it has none), the verdict ending
//! once, with the last group.
//!
//! Real parts as in `episode.rs` (`culprit serve` in process, its SQLite store, a real
//! VictoriaMetrics holding the Flink 1.20 slow-sink capture shifted to end now, report 14's
//! three webhooks), and the stand-ins of `tests/support/`: the Teams and Google Chat
//! webhooks (`cards.rs`), Mattermost and Discord (`chat.rs`, answering as their webhooks
//! are documented to), a real SMTP server (`smtp_server.py`, aiosmtpd), Grafana's
//! annotations API (`grafana.rs`), Opsgenie's and JSM's alert APIs (`opsgenie.rs`).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use culprit::config::Config;
use culprit::service::server::Application;
use serde_json::{Value, json};

use super::episode::{CAPTURE, diagnoses, post, recording, resolved, root, switch, vm, webhook};
use crate::support;
use crate::support::capture::Capture;
use crate::support::cards::{ChatStandIn, Vendor};
use crate::support::chat::{Reply, Request, Stand};
use crate::support::opsgenie::OpsStandIn;

const MATTERMOST_HOOK: &str = "/hooks/xq8mattermostkey0123456789";
const DISCORD_HOOK: &str = "/api/webhooks/1111111111111111111/T0kenS3cretD1scordWebhookZZ";
const GENIE_KEY: &str = "0a1b2c3d-4e5f-6789-abcd-ef0123456789";
const JSM_USER: &str = "oncall@example.com";
const JSM_TOKEN: &str = "ATATT3xJSMt0ken0123456789";
const JSM_CLOUD: &str = "0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b";

/// aiosmtpd on a free loopback port without TLS (`tls = "none"` is allowed on loopback
/// only), writing each message it takes to a directory; stopped when dropped.
struct Smtp {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl Drop for Smtp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Smtp {
    fn start() -> Smtp {
        let dir = tempfile::tempdir().unwrap();
        let port = support::free_port();
        let script = root().join("tests/support/smtp_server.py");
        let mut child = Command::new("python3")
            .arg(script)
            .arg(dir.path())
            .arg(port.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("python3 runs");
        let mut line = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(child.stdout.take().unwrap()), &mut line).unwrap();
        assert_eq!(line.trim(), "ready", "aiosmtpd started (pip install aiosmtpd; scripts/test.sh does)");
        Smtp { child, port, dir }
    }

    /// Every message taken so far, in order.
    fn received(&self) -> Vec<Value> {
        let mut files: Vec<_> = std::fs::read_dir(self.dir.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "json"))
            .collect();
        files.sort();
        files.iter().map(|p| serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()).collect()
    }
}

/// Mattermost's incoming webhook: `200 ok` for a post with text, the post kept.
fn mattermost(posts: &Mutex<Vec<Value>>, r: &Request) -> Reply {
    if r.method != "POST" || r.path != MATTERMOST_HOOK {
        return Reply::json(404, json!({"id": "web.incoming_webhook.invalid.app_error", "status_code": 404}));
    }
    posts.lock().unwrap().push(r.json());
    Reply::text(200, "ok")
}

/// Discord's webhook: `POST ?wait=true` answers the message with its id, `PATCH` and
/// `GET …/messages/<id>` edit and read it.
fn discord(messages: &Mutex<BTreeMap<u64, Value>>, r: &Request) -> Reply {
    let Some(rest) = r.path.strip_prefix(DISCORD_HOOK) else {
        return Reply::json(404, json!({"message": "Unknown Webhook", "code": 10015}));
    };
    let mut m = messages.lock().unwrap();
    if r.method == "POST" && rest.is_empty() {
        let id = 1_300_000_000_000_000_001 + m.len() as u64;
        let body = r.json();
        let message = json!({"id": id.to_string(), "content": body["content"], "embeds": body["embeds"]});
        m.insert(id, message.clone());
        return Reply::json(200, message);
    }
    let Some(id) = rest.strip_prefix("/messages/").and_then(|i| i.parse::<u64>().ok()) else {
        return Reply::json(405, json!({"message": "405: Method Not Allowed", "code": 0}));
    };
    let Some(message) = m.get_mut(&id) else {
        return Reply::json(404, json!({"message": "Unknown Message", "code": 10008}));
    };
    if r.method == "PATCH" {
        let body = r.json();
        for k in ["content", "embeds"] {
            if !body[k].is_null() {
                message[k] = body[k].clone();
            }
        }
    }
    Reply::json(200, message.clone())
}

/// Every destination of the table, as its stand-in saw it.
struct Destinations {
    teams: ChatStandIn,
    google_chat: ChatStandIn,
    mattermost: (Stand, Arc<Mutex<Vec<Value>>>),
    discord: (Stand, Arc<Mutex<BTreeMap<u64, Value>>>),
    email: Smtp,
    grafana: (support::grafana::Stand, String),
    opsgenie: OpsStandIn,
    jsm: OpsStandIn,
}

/// What one destination shows of the job, read from its stand-in.
#[derive(Debug, PartialEq)]
struct Shown {
    /// Posts (messages, cards, mails, annotations, alerts) that show the verdict itself.
    verdicts: usize,
    /// Replies tied to the verdict about a group that joined it.
    joined: usize,
    /// Replies tied to the verdict about a group that resolved while others fire.
    group_resolved: usize,
    /// Whether it shows the verdict resolved (a post, an edit, a closed region or alert).
    resolved: usize,
    /// Anything else it got that is not tied to the verdict (a top-level post about one
    /// group, a second alert): must stay empty.
    stray: Vec<String>,
}

impl Destinations {
    async fn start() -> Destinations {
        let posts = Arc::new(Mutex::new(Vec::new()));
        let p = posts.clone();
        let messages = Arc::new(Mutex::new(BTreeMap::new()));
        let m = messages.clone();
        Destinations {
            teams: ChatStandIn::start(Vendor::Teams).await,
            google_chat: ChatStandIn::start(Vendor::GoogleChat).await,
            mattermost: (Stand::start(move |r| mattermost(&p, r)).await, posts),
            discord: (Stand::start(move |r| discord(&m, r)).await, messages),
            email: Smtp::start(),
            grafana: support::grafana::start().await,
            opsgenie: OpsStandIn::start(GENIE_KEY).await,
            jsm: OpsStandIn::start(&format!("{JSM_USER}:{JSM_TOKEN}")).await,
        }
    }

    /// The `[[notify.*]]` sections of every destination; secrets written under `dir`.
    fn config(&self, dir: &Path) -> String {
        let secret = |name: &str, value: &str| {
            let p = dir.join(name);
            std::fs::write(&p, value).unwrap();
            format!("{{ file = \"{}\" }}", p.display())
        };
        format!(
            "[[notify.teams]]\nname = \"ops\"\nwebhook_url = {}\n\
             [[notify.google_chat]]\nname = \"ops\"\nwebhook_url = {}\n\
             [[notify.mattermost]]\nname = \"ops\"\nwebhook_url = {}\n\
             [[notify.discord]]\nname = \"ops\"\nwebhook_url = {}\n\
             [[notify.email]]\nname = \"ops\"\nsmtp_host = \"127.0.0.1\"\nsmtp_port = {}\ntls = \"none\"\n\
             from = \"culprit <culprit@example.com>\"\nto = [\"oncall@example.com\"]\n\
             [[notify.grafana]]\nname = \"ops\"\nurl = \"{}\"\ntoken = {}\n\
             [[notify.opsgenie]]\nname = \"ops\"\napi_key = {}\nurl = \"{}\"\n\
             [[notify.jsm]]\nname = \"ops\"\ncloud_id = \"{JSM_CLOUD}\"\nuser = \"{JSM_USER}\"\napi_token = {}\nurl = \"{}\"\n",
            secret("teams-url", &self.teams.webhook_url()),
            secret("google-chat-url", &self.google_chat.webhook_url()),
            secret("mattermost-url", &format!("{}{MATTERMOST_HOOK}", self.mattermost.0.url)),
            secret("discord-url", &format!("{}{DISCORD_HOOK}", self.discord.0.url)),
            self.email.port,
            self.grafana.1,
            secret("grafana-token", support::grafana::TOKEN),
            secret("genie-key", GENIE_KEY),
            self.opsgenie.url,
            secret("jsm-token", JSM_TOKEN),
            self.jsm.url,
        )
    }

    /// The table: every destination by name with what it shows.
    fn shown(&self) -> Vec<(&'static str, Shown)> {
        vec![
            ("teams", teams(&self.teams)),
            ("google_chat", google_chat(&self.google_chat)),
            ("mattermost", mattermost_shown(&self.mattermost.1.lock().unwrap())),
            ("discord", discord_shown(&self.discord.0.received(), &self.discord.1.lock().unwrap())),
            ("email", email(&self.email.received())),
            ("grafana", grafana(&self.grafana.0)),
            ("opsgenie", ops(&self.opsgenie)),
            ("jsm", ops(&self.jsm)),
        ]
    }
}

fn card_texts(post: &Value) -> String {
    post["attachments"][0]["content"]["body"]
        .as_array()
        .map(|b| b.iter().filter_map(|x| x["text"].as_str()).collect::<Vec<_>>().join(" | "))
        .unwrap_or_default()
}

/// Teams: cards in the channel, none threaded. A verdict card has the vertices' facts.
fn teams(s: &ChatStandIn) -> Shown {
    let (mut verdicts, mut resolved, mut stray) = (0, 0, Vec::new());
    for p in s.posts() {
        let text = card_texts(&p.body);
        if text.contains("**Resolved:**") {
            resolved += 1;
        } else if p.body.to_string().contains("FactSet") && !text.contains("alert group") {
            verdicts += 1;
        } else {
            stray.push(text);
        }
    }
    Shown { verdicts, joined: 0, group_resolved: 0, resolved, stray }
}

/// Google Chat: every post in the episode's thread; the verdict is the card with the
/// vertices, the rest short replies.
fn google_chat(s: &ChatStandIn) -> Shown {
    let posts = s.posts();
    let thread = posts.first().map(|p| p.body["thread"]["threadKey"].clone());
    let mut shown = Shown { verdicts: 0, joined: 0, group_resolved: 0, resolved: 0, stray: Vec::new() };
    for p in &posts {
        let text = p.body["text"].as_str().unwrap_or_default().to_string();
        if Some(&p.body["thread"]["threadKey"]) != thread.as_ref() {
            shown.stray.push(format!("outside the thread: {text}"));
        } else if text.contains("another alert group now carries this verdict") {
            shown.joined += 1;
        } else if text.contains("one alert group stopped firing") {
            shown.group_resolved += 1;
        } else if text.starts_with("Resolved: ") {
            shown.resolved += 1;
        } else if p.body.to_string().contains("\"Vertices\"") {
            shown.verdicts += 1;
        } else if !text.contains("the verdict was revised") {
            shown.stray.push(text);
        }
    }
    shown
}

/// Mattermost: posts in the channel, none threaded.
fn mattermost_shown(posts: &[Value]) -> Shown {
    let (mut verdicts, mut resolved, mut stray) = (0, 0, Vec::new());
    for p in posts {
        let text = p["text"].as_str().unwrap_or_default().to_string();
        if text.contains("**Resolved**") {
            resolved += 1;
        } else if text.contains("Backpressure culprit") && !text.contains("**Update**") {
            verdicts += 1;
        } else {
            stray.push(text);
        }
    }
    Shown { verdicts, joined: 0, group_resolved: 0, resolved, stray }
}

/// Discord: messages created (POST) and what the first one shows now.
fn discord_shown(requests: &[Request], messages: &BTreeMap<u64, Value>) -> Shown {
    let created = requests.iter().filter(|r| r.method == "POST").count();
    let first = messages.values().next();
    let title = first.map(|m| m["embeds"][0]["title"].as_str().unwrap_or_default().to_string()).unwrap_or_default();
    let stray = messages.values().skip(1).map(|m| m["content"].to_string()).collect();
    Shown {
        verdicts: created.min(1),
        joined: 0,
        group_resolved: 0,
        resolved: usize::from(title.starts_with("✅ Resolved")),
        stray,
    }
}

/// Email: mails, the later ones replies in the first one's thread.
fn email(mails: &[Value]) -> Shown {
    let first_id = mails.first().map(|m| m["message_id"].as_str().unwrap().to_string());
    let mut shown = Shown { verdicts: 0, joined: 0, group_resolved: 0, resolved: 0, stray: Vec::new() };
    for (i, m) in mails.iter().enumerate() {
        let subject = m["subject"].as_str().unwrap_or_default().to_string();
        let references = m["references"].as_str().unwrap_or_default();
        if i == 0 {
            shown.verdicts += 1;
        } else if subject.ends_with(": resolved") && first_id.as_deref().is_some_and(|id| references.contains(id)) {
            shown.resolved += 1;
        } else {
            shown.stray.push(subject);
        }
    }
    shown
}

/// Grafana: annotations; the verdict's is a region closed at resolution (`timeEnd`).
fn grafana(s: &support::grafana::Stand) -> Shown {
    let i = s.0.lock().unwrap();
    let creates = i.requests.iter().filter(|r| *r == "POST").count();
    Shown {
        verdicts: creates.min(1),
        joined: 0,
        group_resolved: 0,
        resolved: i.annotations.first().map_or(0, |a| usize::from(a["timeEnd"].is_i64())),
        stray: i.annotations.iter().skip(1).map(|a| a["text"].to_string()).collect(),
    }
}

/// Opsgenie, JSM: alerts; the verdict's is one alert (a repeated create only raises its
/// count), closed when the job resolves.
fn ops(s: &OpsStandIn) -> Shown {
    let alerts = s.alerts();
    let mut stray: Vec<String> = alerts.iter().skip(1).map(|a| a.message.clone()).collect();
    if let Some(a) = alerts.first()
        && a.count != 1
    {
        stray.push(format!("created {} times", a.count));
    }
    Shown {
        verdicts: alerts.len().min(1),
        joined: 0,
        group_resolved: 0,
        resolved: alerts.first().map_or(0, |a| usize::from(a.status == "closed")),
        stray,
    }
}

/// `serve` reading `prometheus`, posting Slack and PagerDuty to `capture` and every
/// destination of the table to its stand-in.
async fn serve(dir: &Path, prometheus: &str, capture: &Capture, d: &Destinations, service: &str) -> Application {
    let plan = root().join(CAPTURE).join("plan.json");
    let extra = format!(
        "[flink.plans]\n\"bp-lab-slow-sink\" = \"{}\"\n{}[service]\n{service}\n",
        plan.display(),
        d.config(dir)
    );
    let text = support::culprit_config(dir, prometheus, &capture.url, &capture.url, &extra);
    Application::build(Config::from_toml(&text, "everywhere.toml").unwrap()).await.unwrap()
}

#[track_caller]
fn assert_shown(d: &Destinations, expected: &dyn Fn(&str) -> (usize, usize, usize, usize), when: &str) {
    for (name, shown) in d.shown() {
        let (verdicts, joined, group_resolved, resolved) = expected(name);
        assert_eq!(
            (shown.verdicts, shown.joined, shown.group_resolved, shown.resolved),
            (verdicts, joined, group_resolved, resolved),
            "{name} {when}: (verdicts, joined, group resolved, resolved) {shown:#?}"
        );
        assert!(shown.stray.is_empty(), "{name} {when}: posts not tied to the verdict: {:#?}", shown.stray);
    }
}

/// Waits until every destination of the table has the verdict.
async fn every_verdict(d: &Destinations) {
    support::wait_for("the verdict at every destination", Duration::from_secs(60), || {
        d.shown().iter().all(|(_, s)| s.verdicts >= 1)
    })
    .await;
}

/// Only Google Chat, of the table, has threads: a group joining or resolving apart is a
/// reply there (`n` of each) and nothing anywhere else.
fn threaded(name: &str, n: usize) -> usize {
    if name == "google_chat" { n } else { 0 }
}

/// Report 14 as reported, at the other destinations: the three groups back to back (one
/// diagnosis). Every destination shows one verdict, no reply about a group.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_14_three_groups_of_one_job_at_once_give_one_verdict_at_every_other_destination() {
    support::init_logs();
    let store = vm(&recording(true));
    let capture = Capture::start().await;
    let d = Destinations::start().await;
    let dir = tempfile::tempdir().unwrap();
    let app = serve(dir.path(), &store.url, &capture, &d, "coalesce = \"1s\"").await;
    for n in 1..=3 {
        post(&app, &webhook(n)).await;
    }
    every_verdict(&d).await;
    support::drained(&app).await;
    assert_eq!(diagnoses(&app).await, 1.0, "one diagnosis");
    assert_shown(&d, &|_| (1, 0, 0, 0), "at once");
    app.stop().await;
}

/// The three groups arriving apart (three diagnoses), then resolving one by one. Every
/// destination keeps one verdict; each later group and each group resolving while others
/// fire is a reply in the verdict's thread where there is one (Google Chat) and nothing
/// elsewhere; the verdict resolves once, with the last group.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_that_arrive_and_resolve_apart_are_tied_to_the_one_verdict_at_every_other_destination() {
    support::init_logs();
    let store = vm(&recording(true));
    let capture = Capture::start().await;
    let d = Destinations::start().await;
    let dir = tempfile::tempdir().unwrap();
    let app = serve(dir.path(), &store.url, &capture, &d, "coalesce = \"100ms\"").await;
    for n in 1..=3 {
        post(&app, &webhook(n)).await;
        support::drained(&app).await;
    }
    assert_eq!(diagnoses(&app).await, 3.0, "three diagnoses, one per webhook");
    assert_shown(&d, &|name| (1, threaded(name, 2), 0, 0), "after three groups");
    for n in [1, 2] {
        post(&app, &resolved(webhook(n))).await;
        support::drained(&app).await;
    }
    assert_shown(&d, &|name| (1, threaded(name, 2), threaded(name, 2), 0), "after two of three resolved");
    post(&app, &resolved(webhook(3))).await;
    support::drained(&app).await;
    assert_shown(&d, &|name| (1, threaded(name, 2), threaded(name, 2), 1), "after the last resolved");
    app.stop().await;
}

/// What each destination shows of the verdict's confidence now, and how many posts it
/// made: the follow-up must be the latest shown where the destination can show it in
/// place, and no new post where it cannot.
fn confidence_shown(d: &Destinations) -> Vec<(&'static str, Option<String>, usize)> {
    // The level written right after "confidence" (`confidence high`, `**Confidence** high`, a
    // card's fact `"title":"Confidence","value":"high"`).
    let find = |text: &str| -> Option<String> {
        let lower = text.to_lowercase();
        lower.match_indices("confidence").find_map(|(i, _)| {
            let after: String = lower[i + "confidence".len()..].chars().take(24).collect();
            ["high", "medium", "low"]
                .into_iter()
                .filter_map(|c| after.find(c).map(|at| (at, c)))
                .min()
                .map(|(_, c)| c.to_string())
        })
    };
    // Each stand-in's lock is taken and let go in turn (one statement holding two guards of
    // one mutex would wait for itself).
    let teams = d.teams.posts();
    let google = d.google_chat.posts();
    let mattermost = d.mattermost.1.lock().unwrap().clone();
    let discord = d.discord.1.lock().unwrap().clone();
    let discord_confidence = discord.values().next().and_then(|m| {
        let fields = m["embeds"][0]["fields"].as_array()?;
        fields.iter().find(|f| f["name"] == "Confidence")?["value"].as_str().map(str::to_string)
    });
    let mails = d.email.received();
    let annotations = d.grafana.0.0.lock().unwrap().annotations.clone();
    let annotation = annotations.first().map(|a| a["text"].as_str().unwrap_or_default().to_string());
    // An alert's posts: the alerts opened, and every create folded into one (its count).
    let ops = |s: &OpsStandIn| {
        let alerts = s.alerts();
        let posts = alerts.iter().map(|a| a.count as usize).sum();
        (alerts.first().and_then(|a| find(&a.description)), posts)
    };
    let (og, og_posts) = ops(&d.opsgenie);
    let (jsm, jsm_posts) = ops(&d.jsm);
    vec![
        ("teams", teams.last().and_then(|p| find(&p.body.to_string())), teams.len()),
        ("google_chat", google.last().and_then(|p| find(&p.body.to_string())), google.len()),
        ("mattermost", mattermost.last().and_then(|p| find(&p.to_string())), mattermost.len()),
        ("discord", discord_confidence, discord.len()),
        ("email", mails.last().and_then(|m| find(m["text"].as_str().unwrap_or_default())), mails.len()),
        ("grafana", annotation.as_deref().and_then(find), annotations.len()),
        ("opsgenie", og, og_posts),
        ("jsm", jsm, jsm_posts),
    ]
}

/// The lab defect at the other destinations: the weak verdict (confidence medium) followed
/// up with the same culprit and confidence high. Where the destination can edit (Discord,
/// Grafana, Opsgenie, JSM) it shows "high" in place, no new post; Google Chat, which
/// threads but cannot edit, adds one short reply in the thread saying "high"; Teams,
/// Mattermost and email, which can do neither, post nothing: their one post still says
/// "medium" (the README says so).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follow_up_with_higher_confidence_is_shown_in_place_or_not_posted_at_every_other_destination() {
    support::init_logs();
    let (weak, firm) = (vm(&recording(false)), vm(&recording(true)));
    let (prometheus, switched) = switch(&weak.url, &firm.url).await;
    let capture = Capture::start().await;
    let d = Destinations::start().await;
    let dir = tempfile::tempdir().unwrap();
    let app =
        serve(dir.path(), &prometheus, &capture, &d, "coalesce = \"100ms\"\nrediagnose_weak_after = \"6s\"").await;
    post(&app, &webhook(1)).await;
    // Not `drained`: the follow-up waits in the work queue, and drained would wait for it.
    every_verdict(&d).await;
    let before = confidence_shown(&d);
    // By the follow-up the records counters are there.
    switched.store(true, Ordering::SeqCst);
    for (name, confidence, _) in &before {
        assert_eq!(confidence.as_deref(), Some("medium"), "{name}: the weak verdict");
    }
    // Slack (configured beside them) updates its message in place with the follow-up; the
    // follow-up's notices are stored with it, so once that arrived, `drained` waits for them.
    support::wait_for("the follow-up", Duration::from_secs(60), || !capture.on("/api/chat.update").is_empty()).await;
    support::drained(&app).await;
    let after = confidence_shown(&d);
    for ((name, confidence, posts), (_, _, posts_before)) in after.iter().zip(&before) {
        let (expected, new_posts) = match *name {
            "google_chat" => ("high", 1),
            "teams" | "mattermost" | "email" => ("medium", 0),
            _ => ("high", 0),
        };
        assert_eq!(
            (confidence.as_deref(), posts - posts_before),
            (Some(expected), new_posts),
            "{name}: (confidence shown, new posts)"
        );
    }
    app.stop().await;
}
