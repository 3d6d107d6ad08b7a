//! The live API's parameter errors say what is wrong: a window too long is not "at least
//! 1s", a valid RFC 3339 time past the range culprit takes is not "not RFC 3339". Real
//! sockets against `culprit serve` (in process); the parameters are refused before
//! Prometheus is asked, so it is a closed port here.

mod support;

use culprit::config::Config;
use culprit::service::server::Application;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_window_or_time_the_api_cannot_take_gets_400_naming_the_limit_it_crosses() {
    let tmp = tempfile::tempdir().unwrap();
    let nowhere = "http://127.0.0.1:9";
    let text = support::culprit_config(tmp.path(), nowhere, nowhere, nowhere, "");
    let app = Application::build(Config::from_toml(&text, "api.toml").unwrap()).await.unwrap();
    let client = reqwest::Client::new();
    let cases = [
        ("window=1000000000d", "`window` `1000000000d` is longer than 36525d (100 years), the longest window"),
        ("window=36526d", "`window` `36526d` is longer than 36525d (100 years), the longest window"),
        ("window=500ms", "`window` `500ms` is shorter than 1s, the shortest window (e.g. 5m)"),
        ("window=soon", "`window` `soon` is not a duration (examples: \"20s\", \"5m\", \"1h30m\", \"7d\")"),
        (
            "at=9999-12-31T23:59:59Z",
            "`at` `9999-12-31T23:59:59Z` is after 9999-12-30T22:00:00Z, the latest time culprit takes",
        ),
        (
            "at=2026-11-29T10:36:00",
            "`at` `2026-11-29T10:36:00` has no offset: add Z for UTC or one such as +01:00 (RFC 3339)",
        ),
        ("at=yesterday", "`at` `yesterday` is not an RFC 3339 time such as 2026-11-29T10:36:00Z"),
    ];
    for (query, expected) in cases {
        let r = client.get(format!("{}/api/v1/diagnose?job=orders&{query}", app.url())).send().await.unwrap();
        assert_eq!(r.status(), 400, "{query}");
        let body: serde_json::Value = r.json().await.unwrap();
        assert_eq!(body["error"], expected, "{query}");
    }
    app.stop().await;
}
