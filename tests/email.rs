//! `[[notify.email]]` against a real SMTP server: aiosmtpd (Python, from PyPI; installed by
//! scripts/test.sh) run by `tests/support/smtp_server.py`, with STARTTLS on a certificate
//! made here and AUTH. The server writes every message it takes to a directory, decoded,
//! and these tests read them.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use culprit::config::SecretSource;
use culprit::model::notice::{Notice, NoticeEpisode, NoticeKind};
use culprit::notify::email::{Email, EmailConfig, EmailTls};
use culprit::notify::{Destination, FailureReason};
use culprit::render::email::REPEAT_MARK;
use serde_json::Value;

const USER: &str = "culprit";
const PASSWORD: &str = "Sm7p-PA55W0RD-never-shown";

/// aiosmtpd on a free loopback port, stopped when dropped.
struct Smtp {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
    cert: PathBuf,
}

impl Drop for Smtp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Smtp {
    /// With STARTTLS (a certificate for `localhost` made now) when `tls`, with AUTH when
    /// `auth`.
    fn start(tls: bool, auth: bool) -> Smtp {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("mail");
        std::fs::create_dir(&out).unwrap();
        let key = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
        let cert = dir.path().join("cert.pem");
        std::fs::write(&cert, key.cert.pem()).unwrap();
        std::fs::write(dir.path().join("key.pem"), key.signing_key.serialize_pem()).unwrap();
        let port = support::free_port();
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/smtp_server.py");
        let mut cmd = Command::new("python3");
        cmd.arg(script).arg(&out).arg(port.to_string());
        if tls {
            cmd.arg("--cert").arg(&cert).arg("--key").arg(dir.path().join("key.pem"));
        }
        if auth {
            cmd.args(["--user", USER, "--password", PASSWORD]);
        }
        let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::inherit()).spawn().expect("python3 runs");
        let mut line = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(child.stdout.take().unwrap()), &mut line).unwrap();
        assert_eq!(line.trim(), "ready", "aiosmtpd started (pip install aiosmtpd; scripts/test.sh does)");
        Smtp { child, port, dir, cert }
    }

    fn config(&self, to: &[&str]) -> EmailConfig {
        let password = self.dir.path().join("password");
        std::fs::write(&password, PASSWORD).unwrap();
        EmailConfig {
            name: "ops".into(),
            smtp_host: "localhost".into(),
            smtp_port: self.port,
            tls: EmailTls::Starttls,
            username: Some(USER.into()),
            password: Some(SecretSource::File(password)),
            from: "culprit <culprit@example.com>".into(),
            to: to.iter().map(|s| s.to_string()).collect(),
            ca_file: Some(self.cert.clone()),
        }
    }

    /// Every message received so far, in order.
    fn received(&self) -> Vec<Value> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(self.dir.path().join("mail"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "json"))
            .collect();
        files.sort();
        files.iter().map(|p| serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()).collect()
    }

    /// Waits until `n` messages were received.
    fn wait_for(&self, n: usize) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let got = self.received();
            if got.len() >= n || Instant::now() > deadline {
                return got;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn notice(kind: NoticeKind, key: &str) -> Notice {
    let capture = culprit::samples::captures::CAPTURES.iter().find(|c| c.name == "slow-sink").unwrap();
    let verdict = culprit::samples::captures::verdict(capture).unwrap();
    Notice {
        links: Default::default(),
        kind,
        group_key: "{}:{alertname=\"FlinkJobBackpressured\"}".into(),
        labels: Default::default(),
        job: verdict.job.clone(),
        verdict: (kind == NoticeKind::Verdict).then_some(verdict),
        verdict_id: Some(1),
        verdict_url: Some("https://culprit.example.com/api/v1/verdicts/1".into()),
        reason: None,
        firing: kind != NoticeKind::Resolved,
        changed: false,
        idempotency_key: key.into(),
        at_ms: 1_795_000_000_000,
        episode: NoticeEpisode { thread: "job".into(), groups: vec![], revision: 0, verdict_ref: "email:ops:1".into() },
        maybe_repeat: false,
        incident: None,
        incident_view: None,
        incident_parent: None,
    }
}

#[tokio::test]
async fn a_first_post_an_update_and_the_resolution_arrive_over_starttls_with_auth_in_one_thread() {
    let smtp = Smtp::start(true, true);
    let email = Email::new(&smtp.config(&["ops@example.com", "oncall@example.com"])).unwrap();
    let first = email.send(&notice(NoticeKind::Verdict, "email:ops:1"), None).await.unwrap();
    let mut update = notice(NoticeKind::Verdict, "email:ops:2");
    update.changed = true;
    let second = email.send(&update, first.state.as_ref()).await.unwrap();
    let resolved = notice(NoticeKind::Resolved, "email:ops:3");
    email.send(&resolved, second.state.as_ref()).await.unwrap();

    let got = smtp.wait_for(3);
    assert_eq!(got.len(), 3, "{got:?}");
    let id = |m: &Value| m["message_id"].as_str().unwrap().to_string();
    for m in &got {
        assert_eq!(m["tls"], true, "STARTTLS before MAIL");
        assert_eq!(m["authenticated"], true);
        assert_eq!(m["content_type"], "multipart/alternative");
        assert_eq!(m["rcpt_tos"], serde_json::json!(["ops@example.com", "oncall@example.com"]));
    }
    // The first post: the text view and the verdict page; it answers nothing.
    assert!(got[0]["subject"].as_str().unwrap().starts_with("[culprit] bp-lab-slow-sink: slow-sink: Writer (sink)"));
    assert!(got[0]["text"].as_str().unwrap().contains("slow-sink: Writer (sink) is the culprit"));
    assert!(got[0]["html"].as_str().unwrap().contains("<svg"), "the verdict page");
    // Its picture inline, shown by the HTML from its Content-ID; none with the resolution.
    let cid = culprit::render::email::PICTURE_CID;
    assert_eq!(
        got[0]["images"],
        serde_json::json!([{ "content_id": format!("<{cid}>"), "content_type": "image/png", "disposition": "inline", "png": true }])
    );
    assert!(got[0]["html"].as_str().unwrap().contains(&format!("<img src=\"cid:{cid}\"")));
    assert_eq!(got[2]["images"], serde_json::json!([]));
    assert_eq!(got[0]["in_reply_to"], "");
    assert_eq!(id(&got[0]), culprit::render::email::message_id("email:ops:1", "example.com"));
    // The update answers the first; the resolution answers the update, in the same thread.
    assert_eq!(got[1]["in_reply_to"].as_str().unwrap(), id(&got[0]));
    assert!(got[1]["subject"].as_str().unwrap().contains("changed: "));
    assert_eq!(got[2]["in_reply_to"].as_str().unwrap(), id(&got[1]));
    assert!(got[2]["references"].as_str().unwrap().contains(&id(&got[0])), "{}", got[2]["references"]);
    assert!(got[2]["subject"].as_str().unwrap().ends_with(": resolved"));
    assert!(!got.iter().any(|m| m["text"].as_str().unwrap().contains(REPEAT_MARK)));
}

#[test]
fn a_revision_and_the_notices_of_one_alert_group_among_several_are_not_mailed() {
    // An inbox cannot update a message in place, and a reply in the thread (In-Reply-To)
    // is a new mail in everyone's inbox: a revision (same culprit, other confidence or
    // numbers) is not mailed; the verdict page behind the link shows the latest. A changed
    // verdict is.
    let email = Email::new(&EmailConfig {
        name: "ops".into(),
        smtp_host: "localhost".into(),
        smtp_port: 2525,
        tls: EmailTls::None,
        username: None,
        password: None,
        from: "culprit <culprit@example.com>".into(),
        to: vec!["ops@example.com".into()],
        ca_file: None,
    })
    .unwrap();
    let mut revision = notice(NoticeKind::Verdict, "email:ops:1:r1");
    revision.episode.revision = 1;
    assert!(revision.is_revision() && !email.wants(&revision));
    let mut changed = revision.clone();
    changed.changed = true;
    assert!(email.wants(&changed) && email.wants(&notice(NoticeKind::Verdict, "email:ops:1")));
    assert!(!email.wants(&notice(NoticeKind::Joined, "j")) && !email.wants(&notice(NoticeKind::GroupResolved, "g")));
    assert!(email.wants(&notice(NoticeKind::Resolved, "r")));
}

#[tokio::test]
async fn a_refused_recipient_is_final_and_names_the_to_key() {
    let smtp = Smtp::start(true, true);
    let email = Email::new(&smtp.config(&["refused@example.com"])).unwrap();
    let e = email.send(&notice(NoticeKind::Verdict, "email:ops:1"), None).await.unwrap_err();
    assert!(!e.retryable && e.reason == FailureReason::Refused, "{e:?}");
    assert!(e.message.starts_with("email:ops: the relay answered 550"), "{}", e.message);
    assert!(e.hint.as_deref().unwrap().contains("check to and from of the [[notify.email]] named \"ops\""), "{e:?}");
    assert!(smtp.received().is_empty());
}

#[tokio::test]
async fn a_temporary_4xx_is_retryable_and_the_retry_arrives_once() {
    let smtp = Smtp::start(true, true);
    let email = Email::new(&smtp.config(&["busy@example.com"])).unwrap();
    let n = notice(NoticeKind::Verdict, "email:ops:1");
    let e = email.send(&n, None).await.unwrap_err();
    assert!(e.retryable && e.reason == FailureReason::ServerError, "{e:?}");
    assert!(e.message.contains("451"), "{}", e.message);
    assert!(smtp.received().is_empty(), "nothing was taken");
    // The delivery loop tries again; the relay takes it.
    email.send(&n, None).await.unwrap();
    assert_eq!(smtp.wait_for(1).len(), 1);
}

#[tokio::test]
async fn a_connection_dropped_after_data_may_have_delivered_and_the_resend_has_the_same_message_id_and_is_marked() {
    let smtp = Smtp::start(true, true);
    let email = Email::new(&smtp.config(&["crash@example.com"])).unwrap();
    let mut n = notice(NoticeKind::Verdict, "email:ops:1");
    let e = email.send(&n, None).await.unwrap_err();
    assert!(e.retryable && e.reason.maybe_delivered(), "{e:?}");
    // SMTP cannot be asked whether it arrived.
    assert_eq!(email.already_sent(&n, None).await.unwrap(), None);
    // The delivery loop sends it again, marked.
    n.maybe_repeat = true;
    email.send(&n, None).await.unwrap();
    let got = smtp.wait_for(2);
    assert_eq!(got.len(), 2, "the relay had taken the first copy");
    assert_eq!(got[0]["message_id"], got[1]["message_id"], "one Message-ID, which mail systems fold");
    assert!(!got[0]["text"].as_str().unwrap().contains(REPEAT_MARK));
    assert!(got[1]["text"].as_str().unwrap().starts_with(REPEAT_MARK), "{}", got[1]["text"]);
    assert!(got[1]["html"].as_str().unwrap().contains(REPEAT_MARK));
}

#[tokio::test]
async fn a_relay_without_starttls_is_refused_when_starttls_is_required() {
    let smtp = Smtp::start(false, false);
    let mut cfg = smtp.config(&["ops@example.com"]);
    cfg.username = None;
    cfg.password = None;
    let email = Email::new(&cfg).unwrap();
    let e = email.send(&notice(NoticeKind::Verdict, "email:ops:1"), None).await.unwrap_err();
    assert!(!e.retryable, "{e:?}");
    assert!(e.hint.as_deref().unwrap().contains("does not offer STARTTLS"), "{e:?}");
    assert!(email.probe().await.is_err());
    assert!(smtp.received().is_empty(), "nothing in the clear");
    // The same relay on loopback with tls = "none" is allowed and used.
    cfg.tls = EmailTls::None;
    let plain = Email::new(&cfg).unwrap();
    plain.send(&notice(NoticeKind::Verdict, "email:ops:1"), None).await.unwrap();
    assert_eq!(smtp.wait_for(1)[0]["tls"], false);
}

#[tokio::test]
async fn the_probe_connects_starttls_and_authenticates_without_sending_mail() {
    let smtp = Smtp::start(true, true);
    let email = Email::new(&smtp.config(&["ops@example.com"])).unwrap();
    let ok = email.probe().await.unwrap();
    assert!(ok.contains("STARTTLS, EHLO and AUTH accepted") && ok.contains("no message was sent"), "{ok}");
    assert!(smtp.received().is_empty());
}

#[tokio::test]
async fn a_closed_port_is_connect_and_nothing_was_sent() {
    let smtp = Smtp::start(true, true);
    let mut cfg = smtp.config(&["ops@example.com"]);
    cfg.smtp_port = support::free_port();
    let e = Email::new(&cfg).unwrap().send(&notice(NoticeKind::Verdict, "k"), None).await.unwrap_err();
    assert!(e.retryable && e.reason == FailureReason::Connect && !e.reason.maybe_delivered(), "{e:?}");
}

#[tokio::test]
async fn the_password_is_never_in_errors_debug_or_logs() {
    support::logs::capture();
    let smtp = Smtp::start(true, true);
    let mut cfg = smtp.config(&["ops@example.com"]);
    // A wrong password (the right one followed by more): refused with 535.
    let wrong = smtp.dir.path().join("wrong");
    std::fs::write(&wrong, format!("{PASSWORD}-x")).unwrap();
    cfg.password = Some(SecretSource::File(wrong));
    let email = Email::new(&cfg).unwrap();
    let e = email.send(&notice(NoticeKind::Verdict, "k"), None).await.unwrap_err();
    assert!(!e.retryable, "{e:?}");
    assert!(e.hint.as_deref().unwrap().contains("check username and password"), "{e:?}");
    let p = email.probe().await.unwrap_err();
    let debug = format!("{email:?}");
    assert!(debug.contains("[REDACTED]"), "{debug}");
    for (what, text) in
        [("error", e.message.clone()), ("probe", p.message), ("debug", debug), ("logs", support::logs::text())]
    {
        assert!(!text.contains(PASSWORD), "{what}: {text}");
    }
    assert!(smtp.received().is_empty());
}

#[test]
fn tls_none_is_refused_off_loopback_by_validation() {
    let text = r#"
        [[notify.email]]
        name = "ops"
        smtp_host = "smtp.example.com"
        tls = "none"
        from = "culprit@example.com"
        to = ["ops@example.com"]
    "#;
    let cfg: culprit::notify::NotifyConfig = toml::from_str(&text.replace("notify.", "")).unwrap();
    let mut problems = Vec::new();
    cfg.validate(&mut problems);
    assert!(
        problems.iter().any(|p| p.contains("tls = \"none\" is only allowed for a relay on loopback")),
        "{problems:?}"
    );
    assert_eq!(cfg.email[0].smtp_port, 587, "the default port");
}

#[tokio::test]
async fn an_incident_is_one_email_its_jobs_are_folded_and_a_digest_a_minute_later_answers_it() {
    let smtp = Smtp::start(true, true);
    let email = Email::new(&smtp.config(&["ops@example.com"])).unwrap();
    let summary = |jobs, key: &str| {
        let mut n = support::incident::summary(&notice(NoticeKind::Verdict, key), jobs);
        n.idempotency_key = key.into();
        n
    };
    let state = email.send(&summary(5, "incident:1"), None).await.unwrap().state.unwrap();
    // A job counted in it: folded, nothing mailed, nor for its resolution.
    let mut counted = notice(NoticeKind::Verdict, "email:ops:6");
    counted.incident = Some(support::incident::tag());
    counted.incident_parent = Some(serde_json::json!({ "incident_shown": 5 }));
    let job = email.send(&counted, None).await.unwrap().state;
    email.send(&notice(NoticeKind::Resolved, "email:ops:7"), job.as_ref()).await.unwrap();
    // Two more jobs at once: deferred; a minute after the summary, the digest.
    let e = email.send(&summary(7, "incident:2"), Some(&state)).await.unwrap_err();
    assert_eq!(e.reason, culprit::notify::FailureReason::Deferred);
    let mut earlier = state.clone();
    earlier["incident_posted_ms"] = serde_json::json!(jiff::Timestamp::now().as_millisecond() - 61_000);
    email.send(&summary(7, "incident:2"), Some(&earlier)).await.unwrap();
    let got = smtp.wait_for(2);
    assert_eq!(got.len(), 2, "{got:?}");
    let subject = |m: &Value| m["subject"].as_str().unwrap().to_string();
    assert!(subject(&got[0]).starts_with("[culprit] 5 jobs held back by their sinks writing to Elasticsearch"));
    assert!(got[0]["text"].as_str().unwrap().contains("Jobs: `job-1`, `job-2`, `job-3`, `job-4`, `job-5`"));
    assert!(subject(&got[1]).starts_with("[culprit] 2 more jobs held back by"), "{}", subject(&got[1]));
    assert_eq!(got[1]["in_reply_to"], got[0]["message_id"], "the digest answers the summary");
}
