//! A verdict page opened as a new user would: from the "Open verdict" button of the Slack
//! message, in a browser that sends no credentials. The signed link opens the page (200
//! HTML); a tampered, expired or unsigned link does not (403, 403, 401, each with a page
//! saying why); the JSON API keeps its authentication. Real Prometheus, culprit serve, a
//! capture server for Slack. The page's picture (`/verdicts/{id}.png`) opens under the
//! same signature and not without it. Every answer, page or JSON, has the security headers (CSP,
//! nosniff, no-store, no-referrer).

mod support;

use std::time::Duration;

use culprit::config::Config;
use culprit::service::server::Application;
use support::capture::Capture;

const API_TOKEN: &str = "api-t0ken-for-tests";
const LINK_KEY: &str = "link-signing-key-for-tests";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_view_verdict_button_opens_the_page_a_tampered_or_expired_link_does_not_and_every_answer_has_security_headers()
 {
    let now = jiff::Timestamp::now().as_millisecond();
    let jobs = support::synthetic_jobs(1, now - 1_000);
    let prom = support::prometheus_with_texts(&[jobs[0].1.clone()], support::free_port());
    let (slack, pagerduty) = (Capture::start().await, Capture::start().await);
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("api-token"), API_TOKEN).unwrap();
    std::fs::write(tmp.path().join("link-key"), LINK_KEY).unwrap();
    let port = support::free_port();
    let text =
        support::culprit_config(tmp.path(), &prom.url, &slack.url, &pagerduty.url, "[service]\ncoalesce = \"100ms\"\n")
            .replace(
                "[server]\nlisten = \"127.0.0.1:0\"\n",
                &format!(
                    "[server]\nlisten = \"127.0.0.1:{port}\"\nexternal_url = \"http://127.0.0.1:{port}\"\n\
                 link_secret = {{ file = \"{}\" }}\nauth = {{ type = \"bearer\", token = {{ file = \"{}\" }} }}\n",
                    tmp.path().join("link-key").display(),
                    tmp.path().join("api-token").display()
                ),
            );
    assert!(text.contains("link_secret"), "{text}");
    let app = Application::build(Config::from_toml(&text, "links.toml").unwrap()).await.unwrap();
    let client = reqwest::Client::new();
    let (job, _) = &jobs[0];
    let status = client
        .post(format!("{}/webhook/alertmanager", app.url()))
        .bearer_auth(API_TOKEN)
        .json(&support::webhook_for(&job.job_id(), &job.job_name(), &["a".into()]))
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, 202);
    support::wait_for("the Slack message", Duration::from_secs(60), || !slack.slack_messages().is_empty()).await;

    let message = &slack.slack_messages()[0];
    let button = message["blocks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["type"] == "actions")
        .unwrap_or_else(|| panic!("no Open verdict button: {message:#}"));
    let url = button["elements"][0]["url"].as_str().unwrap().to_string();
    assert_eq!(button["elements"][0]["text"]["text"], "Open verdict");
    assert!(url.starts_with(&format!("http://127.0.0.1:{port}/verdicts/")) && url.contains("&sig="), "{url}");
    let pd = &pagerduty.pagerduty_events()[0];
    assert_eq!(pd["links"][0]["href"], url, "PagerDuty links to the same page");

    // A browser: no credentials, asks for HTML.
    let open = |u: String| {
        let client = client.clone();
        async move { client.get(u).header("accept", "text/html,application/xhtml+xml").send().await.unwrap() }
    };
    let page = open(url.clone()).await;
    assert_eq!(page.status(), 200);
    assert_eq!(page.headers()["content-type"], "text/html; charset=utf-8");
    let headers = page.headers().clone();
    let body = page.text().await.unwrap();
    assert!(body.starts_with("<!doctype html>") && body.contains("is the culprit"), "{}", &body[..body.len().min(500)]);
    assert_secure(&headers, Some(&body));

    // The picture under the same signature: the page's query string opens its PNG.
    let picture_url = culprit::model::notice::picture_link(&url).unwrap();
    assert!(picture_url.contains(".png?expires="), "{picture_url}");
    let picture = client.get(&picture_url).send().await.unwrap();
    assert_eq!(picture.status(), 200);
    assert_eq!(picture.headers()["content-type"], "image/png");
    assert_secure(&picture.headers().clone(), None);
    let bytes = picture.bytes().await.unwrap();
    let info = png::Decoder::new(std::io::Cursor::new(&bytes[..])).read_info().unwrap().info().clone();
    assert_eq!(info.width, culprit::render::png::WIDTH);
    let tampered =
        format!("{}{}", &picture_url[..picture_url.len() - 1], if picture_url.ends_with('0') { '1' } else { '0' });
    assert_eq!(client.get(tampered).send().await.unwrap().status(), 403);
    let r = client.get(picture_url.replace("/verdicts/", "/verdicts/9")).send().await.unwrap();
    assert_eq!(r.status(), 403, "another id under this signature");
    let r = client.get(picture_url.replace("/verdicts/", "/verdicts/x")).send().await.unwrap();
    assert_eq!(r.status(), 404);
    let unsigned = picture_url.split('?').next().unwrap().to_string();
    assert_eq!(client.get(unsigned).send().await.unwrap().status(), 401);

    let tampered = format!("{}{}", &url[..url.len() - 1], if url.ends_with('0') { '1' } else { '0' });
    let r = open(tampered).await;
    assert_eq!(r.status(), 403);
    let headers = r.headers().clone();
    let body = r.text().await.unwrap();
    assert_secure(&headers, Some(&body));
    assert!(body.contains("signature is not valid"));
    // No such verdict: a page too, with the same headers.
    let r = open(url.replace("/verdicts/", "/verdicts/x")).await;
    assert_eq!(r.status(), 404);
    let headers = r.headers().clone();
    assert_secure(&headers, Some(&r.text().await.unwrap()));

    let id: i64 = url.split("/verdicts/").nth(1).unwrap().split('?').next().unwrap().parse().unwrap();
    let stored: serde_json::Value = client
        .get(format!("{}/api/v1/verdicts/{id}", app.url()))
        .bearer_auth(API_TOKEN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let expired = culprit::service::links::signed_url(
        &app.url(),
        LINK_KEY.as_bytes(),
        id,
        &culprit::service::links::binding(&stored),
        now - 8 * 24 * 3600 * 1000,
        7 * 24 * 3600 * 1000,
    );
    let r = open(expired).await;
    assert_eq!(r.status(), 403);
    assert!(r.text().await.unwrap().contains("expired"));

    let unsigned = open(format!("{}/verdicts/{id}", app.url())).await;
    assert_eq!(unsigned.status(), 401);
    assert!(unsigned.text().await.unwrap().contains("not signed"));

    // The JSON API keeps its authentication.
    let api = client.get(format!("{}/api/v1/verdicts/{id}", app.url())).send().await.unwrap();
    assert_eq!(api.status(), 401);
    let api = client.get(format!("{}/api/v1/verdicts/{id}", app.url())).bearer_auth(API_TOKEN).send().await.unwrap();
    assert_eq!(api.status(), 200);
    assert_secure(api.headers(), None);
    let html = client
        .get(format!("{}/api/v1/verdicts/{id}?format=html", app.url()))
        .bearer_auth(API_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(html.headers()["content-type"], "text/html; charset=utf-8");
    let headers = html.headers().clone();
    assert_secure(&headers, Some(&html.text().await.unwrap()));
    app.stop().await;
}

/// The security headers every answer has: a Content-Security-Policy that allows nothing
/// but the page's own style sheet (by its SHA-256, checked against the page as served),
/// `nosniff`, `no-store`, `no-referrer`.
fn assert_secure(headers: &reqwest::header::HeaderMap, page: Option<&str>) {
    use base64::Engine as _;
    use sha2::Digest as _;
    let csp = headers["content-security-policy"].to_str().unwrap();
    assert_eq!(csp, *culprit::service::headers::CSP);
    assert!(
        csp.starts_with("default-src 'none'; ") && csp.contains("frame-ancestors 'none'") && !csp.contains("unsafe")
    );
    assert_eq!(headers["x-content-type-options"], "nosniff");
    assert_eq!(headers["cache-control"], "no-store");
    assert_eq!(headers["referrer-policy"], "no-referrer");
    if let Some(page) = page {
        assert!(!page.contains("style=\"") && !page.contains("<script"), "inline style or script");
        for sheet in page.split("<style>").skip(1).map(|rest| rest.split("</style>").next().unwrap()) {
            let hash = base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(sheet.as_bytes()));
            assert!(csp.contains(&format!("'sha256-{hash}'")), "the page's style sheet is not allowed by {csp}");
        }
    }
}
