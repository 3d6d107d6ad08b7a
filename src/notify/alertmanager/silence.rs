//! Silences through Alertmanager's API v2 (`POST {url}/api/v2/silences`), for the Slack
//! "Silence 2 h" button (`[notify.slack] alertmanager_url`).
//!
//! The matchers are an alert group's labels as culprit stored them (each `name="value"`,
//! equal, not a regex), never labels from the request that asked for the silence.
//! <https://github.com/prometheus/alertmanager/blob/main/api/v2/openapi.yaml> (`postableSilence`).

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

use crate::model::secret::Redactor;
use crate::notify::webhook::{Auth, http_client, parse_url, read_answer};
use crate::notify::{NotifyError, status_error, transport_error};
use crate::settings::HttpAuth;

/// The path of the silences endpoint, after the configured base URL.
pub const SILENCES_PATH: &str = "api/v2/silences";

/// One matcher of a silence (`matcher` in the API).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Matcher {
    pub name: String,
    pub value: String,
    #[serde(rename = "isRegex")]
    pub is_regex: bool,
    #[serde(rename = "isEqual")]
    pub is_equal: bool,
}

/// A silence to create (`postableSilence`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NewSilence {
    pub matchers: Vec<Matcher>,
    /// RFC 3339.
    #[serde(rename = "startsAt")]
    pub starts_at: String,
    /// RFC 3339.
    #[serde(rename = "endsAt")]
    pub ends_at: String,
    #[serde(rename = "createdBy")]
    pub created_by: String,
    pub comment: String,
}

/// The matchers of an alert group's labels: each label equal to its value, empty values
/// left out (Alertmanager reads `name=""` as "the label is absent"). `None` when no label
/// is left: a silence without matchers is refused, and must never match everything.
pub fn matchers(labels: &BTreeMap<String, String>) -> Option<Vec<Matcher>> {
    let out: Vec<Matcher> = labels
        .iter()
        .filter(|(k, v)| !k.is_empty() && !v.is_empty())
        .map(|(k, v)| Matcher { name: k.clone(), value: v.clone(), is_regex: false, is_equal: true })
        .collect();
    (!out.is_empty()).then_some(out)
}

/// A silence of `labels` from `now_ms` for `for_ms`, by `created_by`, with `comment`.
pub fn silence(
    labels: &BTreeMap<String, String>,
    now_ms: i64,
    for_ms: i64,
    created_by: &str,
    comment: &str,
) -> Option<NewSilence> {
    let time = |ms: i64| jiff::Timestamp::from_millisecond(ms).map(|t| t.to_string()).unwrap_or_default();
    Some(NewSilence {
        matchers: matchers(labels)?,
        starts_at: time(now_ms),
        ends_at: time(now_ms + for_ms),
        created_by: created_by.to_string(),
        comment: comment.to_string(),
    })
}

/// Creates silences at one Alertmanager. `Debug` shows no secret.
pub struct Silencer {
    url: reqwest::Url,
    auth: Option<Auth>,
    client: reqwest::Client,
    redactor: Redactor,
}

impl fmt::Debug for Silencer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Silencer").field("url", &self.url.as_str()).field("auth", &self.auth).finish()
    }
}

impl Silencer {
    /// Toward `{base}/api/v2/silences`; resolves the secret now. Errors never show it.
    pub fn new(base: &str, auth: Option<&HttpAuth>) -> Result<Silencer, String> {
        let what = "alertmanager silences";
        let base = parse_url(what, base)?;
        let url = parse_url(what, &format!("{}/{SILENCES_PATH}", base.as_str().trim_end_matches('/')))?;
        let auth = auth.map(|a| Auth::resolve(a, what)).transpose()?;
        let redactor = Auth::redactor(auth.as_ref());
        Ok(Silencer { url, auth, client: http_client(what)?, redactor })
    }

    /// Posts the silence; `Ok` is the id Alertmanager gave it (`silenceID`).
    pub async fn create(&self, silence: &NewSilence) -> Result<String, NotifyError> {
        let what = "alertmanager: silence";
        let mut request = self.client.post(self.url.clone()).json(silence);
        if let Some(a) = &self.auth {
            request = a.apply(request);
        }
        let response = request.send().await.map_err(|e| transport_error(what, &e))?;
        let (status, headers, body) = read_answer(response).await;
        if !(200..300).contains(&status) {
            return Err(status_error(what, status, &headers, &body, &self.redactor));
        }
        let id = serde_json::from_str::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v["silenceID"].as_str().map(str::to_string))
            .ok_or_else(|| NotifyError::fatal(format!("{what}: the answer names no silenceID")))?;
        Ok(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_silence_matches_each_label_of_the_group_exactly_and_never_everything() {
        let labels = BTreeMap::from([
            ("alertname".to_string(), "FlinkJobBackpressured".to_string()),
            ("job_name".to_string(), "a\"b=~.*".to_string()),
            ("empty".to_string(), String::new()),
        ]);
        // 2 h = 7,200,000 ms after 2026-11-27T10:00:00Z.
        let start = jiff::Timestamp::from_second(1_795_773_600).unwrap().as_millisecond();
        let s = silence(&labels, start, 7_200_000, "alice", "https://c.example/verdicts/1").unwrap();
        assert_eq!(s.starts_at, "2026-11-27T10:00:00Z");
        assert_eq!(s.ends_at, "2026-11-27T12:00:00Z");
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(
            json["matchers"],
            serde_json::json!([
                {"name": "alertname", "value": "FlinkJobBackpressured", "isRegex": false, "isEqual": true},
                {"name": "job_name", "value": "a\"b=~.*", "isRegex": false, "isEqual": true},
            ])
        );
        assert_eq!(json["createdBy"], "alice");
        assert!(silence(&BTreeMap::from([("x".to_string(), String::new())]), start, 1, "a", "c").is_none());
        assert!(matchers(&BTreeMap::new()).is_none());
    }
}
