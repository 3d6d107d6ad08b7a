//! Alertmanager webhooks in, diagnosis requests out. Pure.
//!
//! The wire types follow Alertmanager's webhook payload version 4 and tolerate unknown
//! and newer fields (`truncatedAlerts`, `notification_reason`, …); firing alerts carry
//! `endsAt` `0001-01-01T00:00:00Z`. A group's alerts are split by Flink job — one
//! diagnosis per job, named by the `job_id` label when present, else `job_name` (both
//! label names are configurable) — and alerts culprit emitted itself are ignored.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::config::ServiceConfig;

/// One alert of a webhook.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Alert {
    #[serde(default)]
    pub status: String,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    #[serde(default, rename = "startsAt")]
    pub starts_at: String,
    #[serde(default, rename = "endsAt")]
    pub ends_at: String,
    #[serde(default, rename = "generatorURL")]
    pub generator_url: String,
    #[serde(default)]
    pub fingerprint: String,
}

/// Alertmanager's webhook payload (version 4).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Webhook {
    #[serde(default)]
    pub version: String,
    #[serde(rename = "groupKey")]
    pub group_key: String,
    #[serde(default, rename = "truncatedAlerts")]
    pub truncated_alerts: u64,
    /// `firing` or `resolved`.
    pub status: String,
    #[serde(default)]
    pub receiver: String,
    #[serde(default, rename = "groupLabels")]
    pub group_labels: BTreeMap<String, String>,
    #[serde(default, rename = "commonLabels")]
    pub common_labels: BTreeMap<String, String>,
    #[serde(default, rename = "commonAnnotations")]
    pub common_annotations: BTreeMap<String, String>,
    #[serde(default, rename = "externalURL")]
    pub external_url: String,
    pub alerts: Vec<Alert>,
}

/// A webhook that cannot be accepted; the message is one sentence for the 400 answer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct BadWebhook(pub String);

/// Parses a webhook body.
pub fn parse(body: &[u8]) -> Result<Webhook, BadWebhook> {
    let w: Webhook = serde_json::from_slice(body)
        .map_err(|e| BadWebhook(format!("not an Alertmanager webhook (version 4): {e}")))?;
    if w.group_key.is_empty() {
        return Err(BadWebhook("the webhook has an empty groupKey".into()));
    }
    if w.status != "firing" && w.status != "resolved" {
        return Err(BadWebhook(format!("the webhook status `{}` is neither firing nor resolved", w.status)));
    }
    if !w.version.is_empty() && w.version != "4" {
        return Err(BadWebhook(format!("webhook version {} is not supported (Alertmanager sends 4)", w.version)));
    }
    Ok(w)
}

/// What one webhook asks of one Flink job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Intake {
    /// Identity of the diagnosis: `id:<job_id>` or `name:<job_name>`.
    pub job_key: String,
    /// What to diagnose: the job id or name.
    pub job: String,
    pub group_key: String,
    /// True while the group fires.
    pub firing: bool,
    /// Hex SHA-256 of the sorted fingerprints of the job's firing alerts in the group.
    pub firing_set: String,
    /// Labels common to the job's alerts (they choose the Flink cluster).
    pub labels: BTreeMap<String, String>,
}

/// Splits a webhook into one intake per Flink job. Alerts without a job label and alerts
/// culprit emitted (its alertnames, or `culprit="true"`) are left out.
pub fn intakes(w: &Webhook, cfg: &ServiceConfig) -> Vec<Intake> {
    let mut by_job: BTreeMap<(String, String), Vec<&Alert>> = BTreeMap::new();
    for a in &w.alerts {
        let own = a.labels.get("culprit").is_some_and(|v| v == "true")
            || a.labels.get("alertname").is_some_and(|n| cfg.ignore_alertnames.contains(n));
        if own {
            continue;
        }
        let key = match (a.labels.get(&cfg.job_id_label), a.labels.get(&cfg.job_name_label)) {
            (Some(id), _) if !id.is_empty() => (format!("id:{id}"), id.clone()),
            (_, Some(name)) if !name.is_empty() => (format!("name:{name}"), name.clone()),
            _ => continue,
        };
        by_job.entry(key).or_default().push(a);
    }
    by_job
        .into_iter()
        .map(|((job_key, job), alerts)| {
            let fingerprints: BTreeSet<String> = alerts
                .iter()
                .filter(|a| a.status != "resolved")
                .map(|a| if a.fingerprint.is_empty() { label_fingerprint(&a.labels) } else { a.fingerprint.clone() })
                .collect();
            let mut labels = alerts[0].labels.clone();
            for a in &alerts[1..] {
                labels.retain(|k, v| a.labels.get(k) == Some(v));
            }
            Intake {
                job_key,
                job,
                group_key: w.group_key.clone(),
                firing: w.status == "firing" && !fingerprints.is_empty(),
                firing_set: sha256_hex(&fingerprints.into_iter().collect::<Vec<_>>().join(",")),
                labels,
            }
        })
        .collect()
}

fn label_fingerprint(labels: &BTreeMap<String, String>) -> String {
    sha256_hex(&labels.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join("\u{1f}"))
}

/// Lowercase hex SHA-256.
pub fn sha256_hex(s: &str) -> String {
    hex::encode(Sha256::digest(s.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn real() -> Vec<u8> {
        std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/captures/slow-sink/alerts/webhook-0001.json"))
            .unwrap()
    }

    #[test]
    fn a_real_alertmanager_webhook_becomes_one_intake_for_its_job() {
        let w = parse(&real()).unwrap();
        let i = intakes(&w, &ServiceConfig::default());
        assert_eq!(i.len(), 1);
        assert_eq!(i[0].job_key, "id:da23ad9af4e7326542c9a70eac958f42");
        assert!(i[0].firing);
        assert_eq!(i[0].group_key, r#"{}:{alertname="FlinkJobBackpressured", job_name="bp_lab_slow_sink"}"#);
        assert_eq!(i[0].labels.get("job_name").map(String::as_str), Some("bp_lab_slow_sink"));
    }

    #[test]
    fn unknown_and_newer_fields_are_tolerated() {
        let mut v: serde_json::Value = serde_json::from_slice(&real()).unwrap();
        v["notification_reason"] = "repeat".into();
        v["alerts"][0]["silenceURL"] = "http://x".into();
        assert!(parse(v.to_string().as_bytes()).is_ok());
    }

    #[test]
    fn a_body_that_is_not_a_webhook_says_where() {
        let e = parse(b"{\"status\": \"firing\"").unwrap_err();
        assert!(e.0.starts_with("not an Alertmanager webhook"), "{e}");
        assert!(parse(br#"{"groupKey":"g","status":"exploded","alerts":[]}"#).is_err());
    }

    #[test]
    fn alerts_split_by_job_and_culprits_own_alerts_are_ignored() {
        let w: Webhook = serde_json::from_value(serde_json::json!({
            "groupKey": "g", "status": "firing", "alerts": [
                {"status": "firing", "labels": {"alertname": "X", "job_id": "a"}, "fingerprint": "1"},
                {"status": "firing", "labels": {"alertname": "X", "job_id": "a", "task": "t"}, "fingerprint": "2"},
                {"status": "firing", "labels": {"alertname": "X", "job_name": "b"}, "fingerprint": "3"},
                {"status": "firing", "labels": {"alertname": "FlinkBackpressureCulprit", "job_id": "c"}},
                {"status": "firing", "labels": {"alertname": "Y", "job_id": "d", "culprit": "true"}},
                {"status": "firing", "labels": {"alertname": "Z"}}
            ]
        }))
        .unwrap();
        let i = intakes(&w, &ServiceConfig::default());
        let keys: Vec<&str> = i.iter().map(|x| x.job_key.as_str()).collect();
        assert_eq!(keys, ["id:a", "name:b"]);
        // Labels common to both alerts of job a: the `task` label is not.
        assert!(!i[0].labels.contains_key("task"));
    }

    #[test]
    fn the_firing_set_depends_on_which_alerts_fire_not_their_order() {
        let mk = |fps: &[&str]| -> Webhook {
            serde_json::from_value(serde_json::json!({
                "groupKey": "g", "status": "firing",
                "alerts": fps.iter().map(|f| serde_json::json!({"status": "firing", "labels": {"job_id": "a"}, "fingerprint": f})).collect::<Vec<_>>()
            }))
            .unwrap()
        };
        let cfg = ServiceConfig::default();
        assert_eq!(intakes(&mk(&["1", "2"]), &cfg)[0].firing_set, intakes(&mk(&["2", "1"]), &cfg)[0].firing_set);
        assert_ne!(intakes(&mk(&["1"]), &cfg)[0].firing_set, intakes(&mk(&["1", "2"]), &cfg)[0].firing_set);
    }
}
