//! Documented vendor rate limits are kept before they are hit: for each paced destination,
//! a burst of notices at once to a stand-in that answers 429 past the documented limit gets
//! no 429 and every notice arrives.
//!
//! The stand-ins are stricter than the vendors where a vendor counts per window: they
//! refuse any two requests closer than window / limit (so a burst is refused at once,
//! where the vendor would take a window's worth first), less 10% for the scheduling of a
//! loaded machine. Assertions are on the stand-in's counts and on the least spacing,
//! never on an upper bound of time.

mod support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use culprit::config::Config;
use culprit::model::notice::{Notice, NoticeKind};
use culprit::notify::Notifier;
use serde_json::json;
use support::chat::{Reply, Request, Stand};

/// How a stand-in enforces its vendor's limit.
#[derive(Clone, Copy, Debug)]
enum Rule {
    /// No two requests closer than this (PagerDuty: 120 per 60 s; Mattermost: 10 per s).
    Spacing(Duration),
    /// Discord's bucket: `limit` requests, then empty until `reset` after the first of
    /// them; every answer says `X-RateLimit-Remaining` and `X-RateLimit-Reset-After`.
    Bucket { limit: u32, reset: Duration },
}

#[derive(Default)]
struct Vendor {
    accepted: Vec<Instant>,
    refused: usize,
    /// Bucket: when the current window started and how many it took.
    window: Option<(Instant, u32)>,
}

impl Vendor {
    /// `Ok`: accepted, with the headers to answer; `Err`: the 429 to answer.
    fn judge(&mut self, rule: Rule, now: Instant) -> Result<Vec<(String, String)>, Reply> {
        match rule {
            Rule::Spacing(least) => {
                if self.accepted.last().is_some_and(|last| now.duration_since(*last) < least) {
                    self.refused += 1;
                    return Err(Reply::json(429, json!({"status": "throttle event", "message": "Requests for this service are arriving too quickly."})).with_header("retry-after", "1"));
                }
                self.accepted.push(now);
                Ok(Vec::new())
            }
            Rule::Bucket { limit, reset } => {
                let (start, used) = match self.window {
                    Some((start, used)) if now.duration_since(start) < reset => (start, used),
                    _ => (now, 0),
                };
                let left_s = (reset - now.duration_since(start)).as_secs_f64();
                if used >= limit {
                    self.refused += 1;
                    return Err(Reply::json(
                        429,
                        json!({"message": "You are being rate limited.", "retry_after": left_s, "global": false}),
                    )
                    .with_header("x-ratelimit-remaining", "0")
                    .with_header("x-ratelimit-reset-after", &format!("{left_s:.3}")));
                }
                self.window = Some((start, used + 1));
                self.accepted.push(now);
                Ok(vec![
                    ("x-ratelimit-limit".into(), limit.to_string()),
                    ("x-ratelimit-remaining".into(), (limit - used - 1).to_string()),
                    ("x-ratelimit-reset-after".into(), format!("{left_s:.3}")),
                ])
            }
        }
    }
}

/// The vendor's answer to an accepted request.
fn accepted_answer(path: &str, n: usize) -> Reply {
    if path == "/v2/enqueue" {
        Reply::json(202, json!({"status": "success", "message": "Event processed", "dedup_key": format!("k{n}")}))
    } else if path.starts_with("/api/webhooks/") {
        Reply::json(200, json!({"id": (1_300_000_000_000_000_000u64 + n as u64).to_string(), "content": ""}))
    } else {
        Reply::text(200, "ok")
    }
}

fn stand_handler(vendor: Arc<Mutex<Vendor>>, rule: Rule) -> impl Fn(&Request) -> Reply + Send + Sync + 'static {
    move |r: &Request| {
        let mut v = vendor.lock().unwrap();
        match v.judge(rule, r.at) {
            Err(refusal) => refusal,
            Ok(headers) => {
                let n = v.accepted.len();
                headers.iter().fold(accepted_answer(&r.path, n), |reply, (k, val)| reply.with_header(k, val))
            }
        }
    }
}

fn notice(i: usize) -> Notice {
    let capture = culprit::samples::captures::CAPTURES.iter().find(|c| c.name == "slow-sink").unwrap();
    let verdict = culprit::samples::captures::verdict(capture).unwrap();
    Notice {
        links: Default::default(),
        kind: NoticeKind::Verdict,
        group_key: format!("{{}}:{{alertname=\"FlinkJobBackpressured\", job=\"{i}\"}}"),
        labels: [("team".to_string(), "flink".to_string())].into(),
        job: verdict.job.clone(),
        verdict: Some(verdict),
        verdict_id: Some(i as i64),
        verdict_url: None,
        reason: None,
        firing: true,
        changed: false,
        idempotency_key: format!("burst:{i}"),
        at_ms: 1_795_000_000_000,
        episode: Default::default(),
        maybe_repeat: false,
        incident: None,
        incident_view: None,
        incident_parent: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_to_each_paced_destination_gets_no_429_and_every_notice_arrives() {
    // (destination, its section given the stand-in's URL in a file, the stand-in's rule,
    // notices in the burst, least time the burst takes)
    let pagerduty = culprit::notify::pagerduty::MIN_EVENT_INTERVAL;
    let mattermost = culprit::notify::mattermost::MIN_POST_INTERVAL;
    let slack = |d: Duration| d.mul_f64(0.9);
    let rows: Vec<(&str, &str, Rule, usize, Duration)> = vec![
        (
            "pagerduty",
            "[notify.pagerduty]\nurl = \"{url}/v2/enqueue\"\nrouting_key = {{ file = \"{file}\" }}\n",
            // 114 per 60 s (95 % of 120) → one per 526 ms; 6 events take 5 × 526 ms = 2.63 s at least.
            Rule::Spacing(slack(pagerduty)),
            6,
            slack(pagerduty * 5),
        ),
        (
            "mattermost",
            "[[notify.mattermost]]\nname = \"ops\"\nwebhook_url = {{ file = \"{file}\" }}\n",
            // 10 per s → one per 100 ms; 12 posts take 11 × 100 ms = 1.1 s at least.
            Rule::Spacing(slack(mattermost)),
            12,
            slack(mattermost * 11),
        ),
        (
            "discord",
            "[[notify.discord]]\nname = \"ops\"\nwebhook_url = {{ file = \"{file}\" }}\n",
            // Webhook buckets as Discord answers them: 5 per 2 s. 12 posts: 5, 5 after 2 s,
            // 2 after 4 s, so 4 s at least.
            Rule::Bucket { limit: 5, reset: Duration::from_secs(2) },
            12,
            Duration::from_secs(4),
        ),
    ];
    for (name, section, rule, n, least) in rows {
        let vendor = Arc::new(Mutex::new(Vendor::default()));
        let stand = Stand::start(stand_handler(vendor.clone(), rule)).await;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("secret");
        let secret = match name {
            "pagerduty" => format!("R0UT1NGKEY{}0123456789abcdef0", &stand.url[stand.url.len() - 5..]),
            "mattermost" => format!("{}/hooks/k3yk3yk3yk3yk3yk3yk3yk3y", stand.url),
            _ => format!("{}/api/webhooks/1111111111111111111/T0kenS3cret", stand.url),
        };
        std::fs::write(&file, &secret).unwrap();
        let text = section
            .replace("{url}", &stand.url)
            .replace("{file}", &file.display().to_string())
            .replace("{{", "{")
            .replace("}}", "}");
        let config = Config::from_toml(&text, "burst.toml").unwrap_or_else(|e| panic!("{name}: {e}"));
        let notifier: Notifier = Notifier::from_config(&config.notify).unwrap().pop().unwrap();

        let started = Instant::now();
        let notices: Vec<Notice> = (0..n).map(notice).collect();
        let results = futures::future::join_all(notices.iter().map(|x| notifier.send(x, None))).await;
        let took = started.elapsed();
        for r in &results {
            assert!(r.is_ok(), "{name}: {r:?}");
        }
        let v = vendor.lock().unwrap();
        assert_eq!((v.refused, v.accepted.len()), (0, n), "{name}: 429s and notices arrived");
        if let Rule::Spacing(least_gap) = rule {
            let gaps = v.accepted.windows(2).map(|w| w[1].duration_since(w[0]));
            assert!(gaps.clone().all(|g| g >= least_gap), "{name}: {:?}", gaps.collect::<Vec<_>>());
        }
        assert!(took >= least, "{name}: the burst took {took:?}, less than the limit allows ({least:?})");
    }
}
