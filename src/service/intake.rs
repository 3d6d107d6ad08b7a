//! Alert notifications in, diagnosis requests out. Pure.
//!
//! Two senders post notifications of one shape, and both are read here:
//! * **Alertmanager**'s webhook, payload version 4;
//! * **Grafana Alerting**'s webhook contact point (Grafana-managed alert rules), version
//!   `1`: Alertmanager's shape (`groupKey`, `status`, per alert `status`, `labels`,
//!   `fingerprint`) with fields of its own — `orgId`, `state`, `title`, `message`, and per
//!   alert `silenceURL`, `dashboardURL`, `panelURL`, `values`, `valueString`
//!   (<https://grafana.com/docs/grafana/latest/alerting/configure-notifications/manage-contact-points/integrations/webhook-notifier/>).
//!   Its links are kept ([`AlertLinks`], http(s) only) and shown with the verdict.
//!
//! Which sender it is comes from the payload ([`Webhook::source`]), not from the path it was
//! posted to: `/webhook/grafana` and `/webhook/alertmanager` read both. The wire types
//! tolerate unknown and newer fields (`truncatedAlerts`, `notification_reason`, …); firing
//! alerts carry `endsAt` `0001-01-01T00:00:00Z`.
//!
//! **Versions.** The version string alone never drops a usable alert: a payload of this
//! shape with another version (a newer Alertmanager, a Grafana that bumps its own, another
//! sender that mimics Alertmanager) is read as the shape it has, accepted, and its version
//! named in the answer's `note` and in one log line per sender ([`Webhook::unknown_version`]).
//! What does not have the shape (no `groupKey`, no `alerts`, a status that is neither
//! firing nor resolved, Grafana's legacy dashboard alerts) is refused with a 400 that says
//! which payloads are accepted ([`ACCEPTED`]).
//!
//! **Groups.** A Grafana group's key is its `groupKey` scoped by the Grafana and the
//! organisation that sent it ([`Webhook::group_key`]): Grafana's keys (`{}:{}` for a
//! notification policy without grouping) are the same in every Grafana and organisation,
//! and may equal an Alertmanager's; Alertmanager's own keys always begin with `{` (the
//! route's matchers), a scoped Grafana key with `grafana:`, so the two never meet.
//!
//! A group's alerts are split by Flink job — one diagnosis per job, named by the `job_id`
//! label when present, else `job_name` (both label names are configurable).
//!
//! culprit diagnoses only alerts that are its own business ([`plan`]): an alertname of
//! `service.alertnames` (by default the shipped rules', `deploy/prometheus/`), a job label,
//! and a `job_id` that is a Flink job id. Every other alert is left out with its reason
//! ([`Ignored`]): the webhook is answered 2xx all the same, and nothing is posted for it.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::config::ServiceConfig;
pub use crate::model::notice::AlertLinks;

/// A string of the body: borrowed where it has no JSON escapes (most), else unescaped.
/// (A newtype: serde borrows a `Cow` only where it is a field itself, not inside a map.)
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
#[serde(transparent)]
pub struct Text<'a>(#[serde(borrow)] pub Cow<'a, str>);

impl std::ops::Deref for Text<'_> {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl std::borrow::Borrow<str> for Text<'_> {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for Text<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl PartialEq<str> for Text<'_> {
    fn eq(&self, other: &str) -> bool {
        *self.0 == *other
    }
}

impl PartialEq<&str> for Text<'_> {
    fn eq(&self, other: &&str) -> bool {
        *self.0 == **other
    }
}

/// Labels, as Alertmanager sends them.
pub type Labels<'a> = BTreeMap<Text<'a>, Text<'a>>;

/// One alert of a webhook: the fields culprit reads (the others, such as `annotations`,
/// `startsAt`, `values` or `valueString`, are skipped).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Alert<'a> {
    #[serde(default, borrow)]
    pub status: Text<'a>,
    #[serde(default, borrow)]
    pub labels: Labels<'a>,
    #[serde(default, borrow)]
    pub fingerprint: Text<'a>,
    /// Grafana's: a page that silences this alert.
    #[serde(rename = "silenceURL", default, borrow)]
    pub silence_url: Option<Text<'a>>,
    /// Grafana's: the dashboard of the rule (empty when the rule has none).
    #[serde(rename = "dashboardURL", default, borrow)]
    pub dashboard_url: Option<Text<'a>>,
    /// Grafana's: the panel of the rule (empty when the rule has none).
    #[serde(rename = "panelURL", default, borrow)]
    pub panel_url: Option<Text<'a>>,
}

impl Alert<'_> {
    /// The alert's links that are absolute http(s) URLs.
    pub fn links(&self) -> AlertLinks {
        let keep = |u: &Option<Text<'_>>| u.as_deref().and_then(AlertLinks::keep);
        AlertLinks {
            silence: keep(&self.silence_url),
            dashboard: keep(&self.dashboard_url),
            panel: keep(&self.panel_url),
        }
    }
}

/// An alert notification of Alertmanager's shape (Alertmanager's version 4, Grafana's
/// version 1): the fields culprit reads, borrowed from the body (parsing is a part of every
/// webhook's cost; the others, such as `commonLabels`, `title` or `message`, are skipped).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Webhook<'a> {
    #[serde(default, borrow)]
    pub version: Text<'a>,
    /// The sender's own group key; see [`Webhook::group_key`] for culprit's.
    #[serde(rename = "groupKey", borrow)]
    pub group_key: Text<'a>,
    /// `firing` or `resolved`.
    #[serde(borrow)]
    pub status: Text<'a>,
    #[serde(default, borrow)]
    pub receiver: Text<'a>,
    /// The sender's own URL (Alertmanager's `--web.external-url`, Grafana's `root_url`):
    /// who sent the webhook.
    #[serde(rename = "externalURL", default, borrow)]
    pub external_url: Text<'a>,
    /// Grafana's: the organisation of the alert rule.
    #[serde(rename = "orgId", default)]
    pub org_id: Option<i64>,
    /// Grafana's: `alerting` or `ok`.
    #[serde(default, borrow)]
    pub state: Option<Text<'a>>,
    #[serde(borrow)]
    pub alerts: Vec<Alert<'a>>,
}

/// Who sent a notification, read from the payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Alertmanager,
    /// Grafana Alerting's webhook contact point.
    Grafana,
}

impl Source {
    /// The version this sender's payload has, as culprit reads it.
    pub fn version(self) -> &'static str {
        match self {
            Source::Alertmanager => "4",
            Source::Grafana => "1",
        }
    }

    /// The sender's name, for messages.
    pub fn name(self) -> &'static str {
        match self {
            Source::Alertmanager => "Alertmanager",
            Source::Grafana => "Grafana Alerting",
        }
    }
}

impl Webhook<'_> {
    /// Grafana when the payload carries a field only Grafana sends (`orgId`, `state`, an
    /// alert's `silenceURL`, `dashboardURL` or `panelURL`), else Alertmanager.
    pub fn source(&self) -> Source {
        let grafana_alert =
            |a: &Alert<'_>| a.silence_url.is_some() || a.dashboard_url.is_some() || a.panel_url.is_some();
        if self.org_id.is_some() || self.state.is_some() || self.alerts.iter().any(grafana_alert) {
            Source::Grafana
        } else {
            Source::Alertmanager
        }
    }

    /// The version when it is not the one its sender is known to send (empty is taken
    /// for Alertmanager's, as older senders leave it out): the payload is read all the
    /// same, by its shape.
    pub fn unknown_version(&self) -> Option<&str> {
        let known = self.source().version();
        (!self.version.is_empty() && *self.version != *known).then_some(&*self.version)
    }

    /// culprit's key of the group: Alertmanager's `groupKey` as sent; Grafana's scoped by
    /// its `externalURL` and `orgId` (`grafana:{orgId}@{externalURL}|{groupKey}`), which
    /// never equals an Alertmanager key (those begin with `{`) nor another Grafana's or
    /// organisation's.
    pub fn group_key(&self) -> String {
        match self.source() {
            Source::Alertmanager => self.group_key.to_string(),
            Source::Grafana => {
                format!("grafana:{}@{}|{}", self.org_id.unwrap_or_default(), self.external_url.trim(), &*self.group_key)
            }
        }
    }
}

/// What culprit accepts, for the answer to a payload it refuses.
pub const ACCEPTED: &str = "culprit accepts Alertmanager's webhook (version 4) and Grafana Alerting's webhook contact point (version 1), at POST /webhook/alertmanager or POST /webhook/grafana";

/// The payloads culprit accepts, as a list for the JSON answer.
pub const ACCEPTED_SOURCES: [&str; 2] = ["alertmanager webhook version 4", "grafana alerting webhook version 1"];

/// A webhook that cannot be accepted; the message is one sentence for the 400 answer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct BadWebhook(pub String);

impl BadWebhook {
    /// The refusal, cut to [`crate::service::refusals::REASON_CHARS`] characters: the one
    /// way a reason is made, so that none is longer in the log or the answer.
    pub fn new(reason: &str) -> Self {
        BadWebhook(crate::service::refusals::cut(reason))
    }
}

/// The fields of Grafana's legacy (dashboard) alert notifications, to name them when refused.
#[derive(Deserialize)]
struct Legacy {
    #[serde(rename = "ruleName")]
    rule_name: Option<serde::de::IgnoredAny>,
    #[serde(rename = "evalMatches")]
    eval_matches: Option<serde::de::IgnoredAny>,
}

/// Parses a webhook body (either sender's, see the module docs).
pub fn parse(body: &[u8]) -> Result<Webhook<'_>, BadWebhook> {
    let w: Webhook<'_> = match serde_json::from_slice(body) {
        Ok(w) => w,
        Err(e) => {
            if let Ok(Legacy { rule_name: Some(_), .. } | Legacy { eval_matches: Some(_), .. }) =
                serde_json::from_slice::<Legacy>(body)
            {
                return Err(BadWebhook::new(
                    "a notification of Grafana's legacy dashboard alerting (ruleName, evalMatches), which has no alert labels to diagnose: use a Grafana-managed alert rule and a webhook contact point",
                ));
            }
            // Never a value of the body (it may be a credential), cut as every reason.
            let why = crate::service::refusals::parser_message(&e);
            return Err(BadWebhook::new(&format!("not an alert notification of Alertmanager's shape: {why}")));
        }
    };
    if w.group_key.is_empty() {
        return Err(BadWebhook::new("the webhook has an empty groupKey"));
    }
    if w.status != "firing" && w.status != "resolved" {
        return Err(BadWebhook::new("the webhook status is neither firing nor resolved (its value is not shown)"));
    }
    // An alert's own status decides whether it still fires: anything else is not
    // Alertmanager's and must not be read as firing.
    if let Some(i) = w.alerts.iter().position(|a| a.status != "firing" && a.status != "resolved") {
        return Err(BadWebhook::new(&format!(
            "alerts[{i}] has a status that is neither firing nor resolved (its value is not shown)"
        )));
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
    /// Who sent the webhook ([`sender`]): the unit of fairness between Alertmanagers.
    #[serde(default)]
    pub sender: String,
    /// Whether the job is known without asking the store (`[flink.plans]` names it); the
    /// store adds the jobs it has given a verdict.
    #[serde(default)]
    pub known: bool,
    /// The links the source gave with the job's first firing alert (Grafana's).
    #[serde(default, skip_serializing_if = "AlertLinks::is_empty")]
    pub links: AlertLinks,
}

/// Longest sender name kept: an `externalURL` is untrusted, and is a key of the queue.
const MAX_SENDER_BYTES: usize = 256;

/// Who sent a webhook, the unit of fairness of the queue: the Alertmanager's
/// `externalURL` (stable across its restarts, pod addresses and proxies, and shared by
/// the replicas of one HA cluster, which send the same notifications), else the peer
/// address (`peer 10.0.0.7`), else `unknown`. Untrusted: it says whose turn it is and
/// whose unknown jobs are capped, never who may post (that is the webhook's credentials).
pub fn sender(external_url: &str, peer: Option<std::net::IpAddr>) -> String {
    let url = external_url.trim();
    if !url.is_empty() {
        let mut end = url.len().min(MAX_SENDER_BYTES);
        while !url.is_char_boundary(end) {
            end -= 1;
        }
        return url[..end].to_string();
    }
    match peer {
        Some(ip) => format!("peer {ip}"),
        None => "unknown".into(),
    }
}

/// The sender a body claims (its `externalURL`, read alone), for the log of a body that is
/// refused: else the peer address, as [`sender`].
pub fn claimed_sender(body: &[u8], peer: Option<std::net::IpAddr>) -> String {
    #[derive(Deserialize)]
    struct Claim<'a> {
        #[serde(rename = "externalURL", default, borrow)]
        external_url: Option<Text<'a>>,
    }
    let url = serde_json::from_slice::<Claim<'_>>(body).ok().and_then(|c| c.external_url).unwrap_or_default();
    sender(&url, peer)
}

/// Why an alert of a webhook is not diagnosed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum IgnoreReason {
    /// culprit's own alert come back (its alertname, or `culprit="true"`): no loops.
    Own,
    /// An alertname that is not in `service.alertnames`: not culprit's business.
    Alertname,
    /// Neither the job id label nor the job name label.
    NoJobLabel,
    /// A `job_id` label that is not a Flink job id (32 hexadecimal digits), and no job name.
    NotAFlinkJobId,
}

impl IgnoreReason {
    /// The metric label value.
    pub fn as_str(self) -> &'static str {
        match self {
            IgnoreReason::Own => "own",
            IgnoreReason::Alertname => "alertname",
            IgnoreReason::NoJobLabel => "no_job_label",
            IgnoreReason::NotAFlinkJobId => "not_a_flink_job_id",
        }
    }
}

/// What a webhook comes to: one intake per Flink job, and the alerts left out.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Plan {
    pub intakes: Vec<Intake>,
    /// (reason, the alert's alertname) per alert left out.
    pub ignored: Vec<(IgnoreReason, String)>,
}

/// Most alertnames a reason quotes (the rest are counted).
const QUOTED_NAMES: usize = 3;

impl Plan {
    /// One sentence per reason, saying how many alerts and why; empty when none was left
    /// out. Alertnames are quoted as given (untrusted: the caller escapes for its medium).
    pub fn why_ignored(&self, cfg: &ServiceConfig) -> Vec<String> {
        let mut by_reason: BTreeMap<IgnoreReason, Vec<&str>> = BTreeMap::new();
        for (reason, name) in &self.ignored {
            by_reason.entry(*reason).or_default().push(name);
        }
        by_reason
            .into_iter()
            .map(|(reason, names)| {
                let n = names.len();
                let alerts = if n == 1 { "1 alert".to_string() } else { format!("{n} alerts") };
                let mut distinct: Vec<&str> = names.clone();
                distinct.sort_unstable();
                distinct.dedup();
                let mut quoted =
                    distinct.iter().take(QUOTED_NAMES).map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ");
                if distinct.len() > QUOTED_NAMES {
                    quoted.push_str(&format!(" and {} more", distinct.len() - QUOTED_NAMES));
                }
                match reason {
                    IgnoreReason::Own => {
                        let verb = if n == 1 { "is" } else { "are" };
                        format!("{alerts} ({quoted}) {verb} culprit's own and {verb} never diagnosed")
                    }
                    IgnoreReason::Alertname => format!(
                        "{alerts} ({quoted}) not diagnosed: culprit diagnoses only the alertnames of service.alertnames ({})",
                        cfg.alertnames.join(", ")
                    ),
                    IgnoreReason::NoJobLabel => format!(
                        "{alerts} ({quoted}) not diagnosed: no `{}` or `{}` label names a Flink job",
                        cfg.job_id_label, cfg.job_name_label
                    ),
                    IgnoreReason::NotAFlinkJobId => format!(
                        "{alerts} ({quoted}) not diagnosed: the `{}` label is not a Flink job id (32 hexadecimal digits) and no `{}` label names a job",
                        cfg.job_id_label, cfg.job_name_label
                    ),
                }
            })
            .collect()
    }
}

/// Whether `s` is a Flink job id: 32 hexadecimal digits.
pub fn is_flink_job_id(s: &str) -> bool {
    s.len() == 32 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The intakes of a webhook ([`plan`] without the alerts left out).
pub fn intakes(w: &Webhook<'_>, cfg: &ServiceConfig) -> Vec<Intake> {
    plan(w, cfg).intakes
}

/// Splits a webhook into one intake per Flink job, leaving out (with the reason) alerts
/// culprit emitted (its alertnames, or `culprit="true"`), alerts whose alertname is not in
/// `service.alertnames` (when that list is not empty), and alerts without a usable job
/// label.
pub fn plan(w: &Webhook<'_>, cfg: &ServiceConfig) -> Plan {
    let mut by_job: BTreeMap<(String, String), Vec<&Alert<'_>>> = BTreeMap::new();
    let mut ignored = Vec::new();
    for a in &w.alerts {
        let alertname: &str = a.labels.get("alertname").map_or("", |n| n);
        let own = a.labels.get("culprit").is_some_and(|v| v == "true")
            || cfg.ignore_alertnames.iter().any(|n| n == alertname);
        let reason = if own {
            Some(IgnoreReason::Own)
        } else if !cfg.alertnames.is_empty() && !cfg.alertnames.iter().any(|n| n == alertname) {
            Some(IgnoreReason::Alertname)
        } else {
            None
        };
        if let Some(reason) = reason {
            ignored.push((reason, alertname.to_string()));
            continue;
        }
        let id = a.labels.get(cfg.job_id_label.as_str()).filter(|v| !v.is_empty());
        let name = a.labels.get(cfg.job_name_label.as_str()).filter(|v| !v.is_empty());
        let key = match (id, name) {
            (Some(id), _) if is_flink_job_id(id) => (format!("id:{id}"), id.to_string()),
            (_, Some(name)) => (format!("name:{name}"), name.to_string()),
            (Some(_), None) => {
                ignored.push((IgnoreReason::NotAFlinkJobId, alertname.to_string()));
                continue;
            }
            (None, None) => {
                ignored.push((IgnoreReason::NoJobLabel, alertname.to_string()));
                continue;
            }
        };
        by_job.entry(key).or_default().push(a);
    }
    let group_key = w.group_key();
    let intakes = by_job
        .into_iter()
        .map(|((job_key, job), alerts)| {
            let fingerprints: BTreeSet<String> = alerts
                .iter()
                .filter(|a| a.status != "resolved")
                .map(
                    |a| if a.fingerprint.is_empty() { label_fingerprint(&a.labels) } else { a.fingerprint.to_string() },
                )
                .collect();
            let labels = alerts[0]
                .labels
                .iter()
                .filter(|(k, v)| alerts[1..].iter().all(|a| a.labels.get::<str>(k) == Some(*v)))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            // One silence link per job: the first firing alert's (each alert of a Grafana
            // group has its own, for its own labels), else the first alert's.
            let links =
                alerts.iter().find(|a| a.status == "firing").or(alerts.first()).map(|a| a.links()).unwrap_or_default();
            Intake {
                job_key,
                job,
                group_key: group_key.clone(),
                firing: w.status == "firing" && !fingerprints.is_empty(),
                firing_set: sha256_hex(&fingerprints.into_iter().collect::<Vec<_>>().join(",")),
                labels,
                sender: sender(&w.external_url, None),
                known: false,
                links,
            }
        })
        .collect();
    Plan { intakes, ignored }
}

fn label_fingerprint(labels: &Labels<'_>) -> String {
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
        let body = real();
        let w = parse(&body).unwrap();
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
    fn strings_with_json_escapes_are_read_unescaped_and_the_others_borrowed() {
        let body = br#"{"groupKey": "g\u0041", "status": "firing", "alerts": [{"status": "firing",
            "labels": {"alertname": "FlinkJobBackpressured", "job_name": "a\"b\\c\u00e9\n", "te\u0061m": "s"}}]}"#;
        let w = parse(body).unwrap();
        assert_eq!(&*w.group_key, "gA");
        let labels = &w.alerts[0].labels;
        assert_eq!(labels.get("job_name").map(|v| &**v), Some("a\"b\\c\u{e9}\n"));
        assert_eq!(labels.get("team").map(|v| &**v), Some("s"));
        assert!(matches!(labels.get("alertname").map(|v| &v.0), Some(Cow::Borrowed(_))), "no escapes: borrowed");
        let i = intakes(&w, &ServiceConfig::default());
        assert_eq!((i[0].job.as_str(), i[0].group_key.as_str()), ("a\"b\\c\u{e9}\n", "gA"));
        assert_eq!(i[0].labels.get("team").map(String::as_str), Some("s"));
    }

    #[test]
    fn an_alert_whose_status_is_neither_firing_nor_resolved_is_refused_not_read_as_firing() {
        let mut v: serde_json::Value = serde_json::from_slice(&real()).unwrap();
        v["alerts"][0]["status"] = "weird".into();
        let e = parse(v.to_string().as_bytes()).unwrap_err();
        assert_eq!(e.0, "alerts[0] has a status that is neither firing nor resolved (its value is not shown)");
        v["alerts"][0]["status"] = "resolved".into();
        assert!(parse(v.to_string().as_bytes()).is_ok());
    }

    #[test]
    fn a_refusal_quotes_no_value_of_the_body_and_is_at_most_160_characters() {
        const SECRET: &str = "Bearer glsa_SECRETTOKEN_abcdef0123456789";
        let real: serde_json::Value = serde_json::from_slice(&real()).unwrap();
        let long = format!("{SECRET}{}", "x".repeat(300));
        let mut cases = Vec::new();
        for (field, value) in [
            ("orgId", serde_json::Value::from(SECRET)),
            ("status", long.clone().into()),
            ("status", 7.into()),
            ("alerts", SECRET.into()),
            ("groupKey", serde_json::json!({ SECRET: SECRET })),
            ("receiver", serde_json::json!([SECRET])),
        ] {
            let mut v = real.clone();
            v[field] = value;
            cases.push(v);
        }
        let mut v = real.clone();
        v["alerts"][0]["status"] = long.into();
        cases.push(v);
        let mut v = real.clone();
        v["alerts"][0]["labels"] = SECRET.into();
        cases.push(v);
        for v in cases {
            let e = parse(v.to_string().as_bytes()).unwrap_err();
            assert!(!e.0.contains("SECRET") && !e.0.contains("xxx"), "{e}");
            // 160 characters and the ellipsis at most.
            assert!(e.0.chars().count() <= 161, "{} characters: {e}", e.0.chars().count());
        }
        let mut v = real.clone();
        v["orgId"] = SECRET.into();
        let e = parse(v.to_string().as_bytes()).unwrap_err();
        assert!(e.0.contains("invalid type: string (value not shown), expected"), "{e}");
        assert!(e.0.contains(" at line 1 column "), "{e}");
    }

    #[test]
    fn a_body_that_is_not_a_webhook_says_where() {
        let e = parse(b"{\"status\": \"firing\"").unwrap_err();
        assert!(e.0.starts_with("not an alert notification of Alertmanager's shape"), "{e}");
        assert!(parse(br#"{"groupKey":"g","status":"exploded","alerts":[]}"#).is_err());
    }

    const A: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const C: &str = "cccccccccccccccccccccccccccccccc";

    #[test]
    fn alerts_split_by_job_and_alerts_that_are_not_ours_are_left_out_with_their_reason() {
        let body = serde_json::json!({
            "groupKey": "g", "status": "firing", "alerts": [
                {"status": "firing", "labels": {"alertname": "FlinkJobBackpressured", "job_id": A}, "fingerprint": "1"},
                {"status": "firing", "labels": {"alertname": "FlinkJobBackpressured", "job_id": A, "task": "t"}, "fingerprint": "2"},
                {"status": "firing", "labels": {"alertname": "FlinkCheckpointSlow", "job_name": "b"}, "fingerprint": "3"},
                {"status": "firing", "labels": {"alertname": "FlinkBackpressureCulprit", "job_id": C}},
                {"status": "firing", "labels": {"alertname": "FlinkJobBackpressured", "job_id": "d", "culprit": "true"}},
                {"status": "firing", "labels": {"alertname": "FlinkJobBackpressured"}},
                {"status": "firing", "labels": {"alertname": "KubeJobFailed", "job_name": "flink-savepoint-cleanup-29386080"}},
                {"status": "firing", "labels": {"alertname": "FlinkTaskBackpressured", "job_id": "not-a-flink-id"}}
            ]
        })
        .to_string();
        let w = parse(body.as_bytes()).unwrap();
        let cfg = ServiceConfig::default();
        let p = plan(&w, &cfg);
        let keys: Vec<&str> = p.intakes.iter().map(|x| x.job_key.as_str()).collect();
        assert_eq!(keys, [format!("id:{A}").as_str(), "name:b"]);
        // Labels common to both alerts of job a: the `task` label is not.
        assert!(!p.intakes[0].labels.contains_key("task"));
        let reasons: Vec<IgnoreReason> = p.ignored.iter().map(|r| r.0).collect();
        use IgnoreReason::*;
        assert_eq!(reasons, [Own, Own, NoJobLabel, Alertname, NotAFlinkJobId]);
        let why = p.why_ignored(&cfg);
        assert_eq!(why.len(), 4, "{why:?}");
        assert!(why[0].starts_with("2 alerts (`FlinkBackpressureCulprit`, `FlinkJobBackpressured`) are culprit's own"));
        assert_eq!(
            why[1],
            "1 alert (`KubeJobFailed`) not diagnosed: culprit diagnoses only the alertnames of service.alertnames (FlinkJobBackpressured, FlinkTaskBackpressured, FlinkCheckpointSlow)"
        );
        assert_eq!(
            why[2],
            "1 alert (`FlinkJobBackpressured`) not diagnosed: no `job_id` or `job_name` label names a Flink job"
        );
    }

    #[test]
    fn an_empty_alertnames_list_diagnoses_every_alert_with_a_job_label() {
        let body = serde_json::json!({
            "groupKey": "g", "status": "firing",
            "alerts": [{"status": "firing", "labels": {"alertname": "MyOwnRule", "job_name": "j"}}]
        })
        .to_string();
        let w = parse(body.as_bytes()).unwrap();
        assert!(intakes(&w, &ServiceConfig::default()).is_empty());
        let cfg = ServiceConfig { alertnames: vec![], ..ServiceConfig::default() };
        assert_eq!(intakes(&w, &cfg).len(), 1);
    }

    #[test]
    fn the_default_alertnames_are_the_alerts_of_the_shipped_rules() {
        let rules = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/deploy/prometheus/flink-backpressure.rules.yml"
        ))
        .unwrap();
        let shipped: Vec<String> =
            rules.lines().filter_map(|l| l.trim().strip_prefix("- alert:")).map(|n| n.trim().to_string()).collect();
        assert_eq!(ServiceConfig::default().alertnames, shipped);
    }

    #[test]
    fn the_firing_set_depends_on_which_alerts_fire_not_their_order() {
        let cfg = ServiceConfig::default();
        let firing_set = |fps: &[&str]| -> String {
            let body = serde_json::json!({
                "groupKey": "g", "status": "firing",
                "alerts": fps.iter().map(|f| serde_json::json!({"status": "firing", "labels": {"alertname": "FlinkJobBackpressured", "job_id": A}, "fingerprint": f})).collect::<Vec<_>>()
            })
            .to_string();
            intakes(&parse(body.as_bytes()).unwrap(), &cfg)[0].firing_set.clone()
        };
        assert_eq!(firing_set(&["1", "2"]), firing_set(&["2", "1"]));
        assert_ne!(firing_set(&["1"]), firing_set(&["1", "2"]));
    }

    fn documented_grafana() -> serde_json::Value {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/grafana/documented-webhook.json");
        serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
    }

    /// Grafana's documented payload with a Flink job's labels on its first alert.
    fn grafana_for_job() -> serde_json::Value {
        let mut v = documented_grafana();
        v["alerts"][0]["labels"] =
            serde_json::json!({"alertname": "FlinkJobBackpressured", "job_id": A, "grafana_folder": "Streaming"});
        v["alerts"][0]["dashboardURL"] = "https://play.grafana.org/d/flink?orgId=1".into();
        v["alerts"][0]["panelURL"] = "javascript:alert(1)".into();
        v
    }

    #[test]
    fn grafanas_documented_payload_is_read_as_grafanas_with_its_links() {
        let body = documented_grafana().to_string();
        let w = parse(body.as_bytes()).unwrap();
        assert_eq!(w.source(), Source::Grafana);
        assert_eq!(w.unknown_version(), None, "Grafana sends version 1");
        assert_eq!(w.alerts[0].links(), AlertLinks {
            silence: Some("https://play.grafana.org/alerting/silence/new?alertmanager=grafana&matchers=alertname%3DT2%2Cteam%3Dblue%2Czone%3Dus-1".into()),
            dashboard: None,
            panel: None,
        }, "the empty dashboardURL and panelURL are no links");
        // Its alerts name no Flink job: both left out, as any other alert would be.
        let p = plan(&w, &ServiceConfig::default());
        assert!(p.intakes.is_empty());
        assert_eq!(p.ignored.len(), 2);
    }

    #[test]
    fn a_grafana_alert_for_a_flink_job_becomes_an_intake_with_its_http_links_only() {
        let body = grafana_for_job().to_string();
        let w = parse(body.as_bytes()).unwrap();
        let i = intakes(&w, &ServiceConfig::default());
        assert_eq!(i.len(), 1);
        assert_eq!(i[0].job_key, format!("id:{A}"));
        assert!(i[0].firing);
        assert_eq!(i[0].links.dashboard.as_deref(), Some("https://play.grafana.org/d/flink?orgId=1"));
        assert_eq!(i[0].links.panel, None, "a javascript: link is dropped");
        assert!(i[0].links.silence.as_deref().unwrap().starts_with("https://play.grafana.org/alerting/silence/new"));
        assert_eq!(i[0].sender, "https://play.grafana.org/");
    }

    #[test]
    fn a_grafana_group_key_is_scoped_and_never_an_alertmanager_one() {
        let body = grafana_for_job().to_string();
        let w = parse(body.as_bytes()).unwrap();
        // Grafana's documented key is `{}:{}`, which an Alertmanager root route without
        // group_by sends as well.
        assert_eq!(&*w.group_key, "{}:{}");
        assert_eq!(w.group_key(), "grafana:1@https://play.grafana.org/|{}:{}");
        let am = serde_json::json!({"groupKey": "{}:{}", "status": "firing", "externalURL": "https://play.grafana.org/",
            "version": "4", "alerts": [{"status": "firing", "labels": {"alertname": "FlinkJobBackpressured", "job_id": A}}]});
        let am_body = am.to_string();
        let am_w = parse(am_body.as_bytes()).unwrap();
        assert_eq!(am_w.source(), Source::Alertmanager);
        assert_eq!(am_w.group_key(), "{}:{}");
        // Another organisation of the same Grafana is another group.
        let mut other = grafana_for_job();
        other["orgId"] = 2.into();
        let other_body = other.to_string();
        assert_ne!(parse(other_body.as_bytes()).unwrap().group_key(), w.group_key());
        assert_eq!(intakes(&am_w, &ServiceConfig::default())[0].group_key, "{}:{}");
    }

    #[test]
    fn a_resolved_grafana_group_is_not_firing_and_keeps_its_fingerprints_apart() {
        let mut v = grafana_for_job();
        v["status"] = "resolved".into();
        v["state"] = "ok".into();
        v["alerts"][0]["status"] = "resolved".into();
        let body = v.to_string();
        let i = intakes(&parse(body.as_bytes()).unwrap(), &ServiceConfig::default());
        assert!(!i[0].firing);
        // The firing set of a resolved group is that of no fingerprint.
        assert_eq!(i[0].firing_set, sha256_hex(""));
    }

    #[test]
    fn another_version_of_a_usable_payload_is_read_by_its_shape_and_named() {
        let mut v = grafana_for_job();
        v["version"] = "2".into();
        let body = v.to_string();
        let w = parse(body.as_bytes()).unwrap();
        assert_eq!((w.source(), w.unknown_version()), (Source::Grafana, Some("2")));
        assert_eq!(intakes(&w, &ServiceConfig::default()).len(), 1);
        let am = br#"{"version": "5", "groupKey": "g", "status": "firing", "alerts": []}"#;
        let w = parse(am).unwrap();
        assert_eq!((w.source(), w.unknown_version()), (Source::Alertmanager, Some("5")));
        let am = br#"{"groupKey": "g", "status": "firing", "alerts": []}"#;
        assert_eq!(parse(am).unwrap().unknown_version(), None, "no version: Alertmanager's");
    }

    #[test]
    fn grafanas_legacy_dashboard_alerts_are_refused_by_name() {
        let legacy = br#"{"dashboardId": 1, "evalMatches": [{"value": 1, "metric": "Count"}], "orgId": 1,
            "panelId": 2, "ruleId": 1, "ruleName": "Panel Title alert", "ruleUrl": "http://g/d/x", "state": "alerting", "title": "[Alerting] Panel Title alert"}"#;
        let e = parse(legacy).unwrap_err();
        assert!(e.0.contains("legacy dashboard alerting"), "{e}");
    }

    #[test]
    fn a_refused_bodys_sender_is_its_claimed_external_url_else_the_peer() {
        let peer = Some(std::net::IpAddr::from([10, 0, 0, 7]));
        assert_eq!(claimed_sender(br#"{"externalURL": "https://g/", "alerts": 3}"#, peer), "https://g/");
        assert_eq!(claimed_sender(b"not json", peer), "peer 10.0.0.7");
        assert_eq!(claimed_sender(br#"{"externalURL": 7}"#, None), "unknown");
    }

    #[test]
    fn a_long_parse_error_is_cut() {
        let body = format!(r#"{{"groupKey": "g", "status": "firing", "alerts": "{}"}}"#, "x".repeat(5000));
        let e = parse(body.as_bytes()).unwrap_err();
        assert!(e.0.chars().count() < 300, "{}", e.0.len());
    }
}
