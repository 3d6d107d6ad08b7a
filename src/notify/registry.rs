//! The one list of destinations, and the `[notify]` section that holds them.
//!
//! Each destination is one unit, `src/notify/<name>/`:
//! * `config.rs`: its section's struct (documented, typed, secrets as
//!   [`SecretSource`]) and its [`DestinationConfig`]: the secrets it holds (the redactor,
//!   `check-config` and the leak tests take them from here, never from a list kept by
//!   hand), its validation, the line `serve` logs and `check-config` prints, and building
//!   its sender;
//! * `mod.rs` (and further files): the sender, implementing [`Destination`]: which
//!   notices it wants, sending once, the probe of `check-config --connect`, and whether a
//!   notice already arrived (its dedup question);
//! * its payload, pure, in `src/render/<name>.rs` (snapshot-tested with `insta`).
//!
//! # Adding a destination
//!
//! Adding one (say Opsgenie) touches exactly:
//! 1. its own files: `src/notify/opsgenie/{mod.rs,config.rs}` and
//!    `src/render/opsgenie.rs` (with its tests and snapshots), and `pub mod opsgenie;` in
//!    `src/notify/mod.rs` and `src/render/mod.rs`;
//! 2. this file: its section as a field of [`NotifyConfig`] (`pub opsgenie:
//!    Option<OpsgenieConfig>`, or a `Vec` for a list such as `[[notify.webhook]]`) and one
//!    line in `entries` (`one("notify.opsgenie", &cfg.opsgenie),`);
//! 3. its example section in `config/culprit.example.toml` (the example test loads it
//!    and checks the defaults it documents);
//! 4. its section in the tests that must reach every destination, each of which fails
//!    until it is there: `FULL` and the header list in this file's tests (the first fails
//!    too while a secret its section holds is not reported by `secrets`), and
//!    `destinations()` of `tests/secrets.rs` (every secret at every offset).
//!
//! Nothing else: validation, secrets, redaction, `check-config` (its listing, unreadable
//! secrets, `--connect` probes), the start-up log line (and its warning naming every
//! section, [`headers`]) and the delivery loops iterate [`sections`].

use serde::{Deserialize, Serialize};

use crate::notify::alertmanager::AlertmanagerConfig;
use crate::notify::discord::DiscordConfig;
use crate::notify::email::EmailConfig;
use crate::notify::google_chat::GoogleChatConfig;
use crate::notify::grafana::GrafanaConfig;
use crate::notify::jsm::JsmConfig;
use crate::notify::mattermost::MattermostConfig;
use crate::notify::opsgenie::OpsgenieConfig;
use crate::notify::pagerduty::PagerDutyConfig;
use crate::notify::sections::OneOrMany;
use crate::notify::slack::SlackConfig;
use crate::notify::teams::TeamsConfig;
use crate::notify::webhook::WebhookConfig;
use crate::notify::{Destination, Notifier};
use crate::settings::{HttpAuth, Millis, SecretSource, check_backend_url};

/// Where verdicts are posted. Every destination is optional.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct NotifyConfig {
    /// `[notify.slack]`, or `[[notify.slack]]` several times (each with a `name`).
    pub slack: Option<OneOrMany<SlackConfig>>,
    /// `[notify.pagerduty]`, or `[[notify.pagerduty]]` several times (each with a `name`).
    pub pagerduty: Option<OneOrMany<PagerDutyConfig>>,
    /// `[notify.alertmanager]`.
    pub alertmanager: Option<AlertmanagerConfig>,
    /// `[[notify.webhook]]`, any number.
    pub webhook: Vec<WebhookConfig>,
    /// `[[notify.opsgenie]]`, any number.
    pub opsgenie: Vec<OpsgenieConfig>,
    /// `[[notify.jsm]]` (Jira Service Management Operations), any number.
    pub jsm: Vec<JsmConfig>,
    /// `[[notify.mattermost]]`, any number (Mattermost incoming webhooks).
    pub mattermost: Vec<MattermostConfig>,
    /// `[[notify.discord]]`, any number (Discord webhooks).
    pub discord: Vec<DiscordConfig>,
    /// `[[notify.teams]]`, any number: Microsoft Teams through Workflows webhooks.
    pub teams: Vec<TeamsConfig>,
    /// `[[notify.google_chat]]`, any number: Google Chat spaces' incoming webhooks.
    pub google_chat: Vec<GoogleChatConfig>,
    /// `[[notify.email]]`, any number.
    pub email: Vec<EmailConfig>,
    /// `[[notify.grafana]]`, any number.
    pub grafana: Vec<GrafanaConfig>,
    /// Retry of failed deliveries (one place for every destination).
    pub retry: RetryConfig,
    /// Alert groups delivered at once per destination; each group's notices stay in
    /// order. Default 4.
    pub concurrency: usize,
    /// At most one "could not diagnose" notice per destination within this window: the
    /// one sent after it names every job that failed meanwhile (10, and counts the rest),
    /// whatever its alert group. `0s`: only the notices waiting at once are folded.
    /// Default 10m.
    pub could_not_diagnose_every: Millis,
}

/// Every destination `[notify]` can hold, with its configured sections, in the order
/// they are built, validated and listed: the registry. One line per destination.
fn entries(cfg: &NotifyConfig) -> Vec<Entry<'_>> {
    vec![
        one_or_many("notify.slack", &cfg.slack),
        one_or_many("notify.pagerduty", &cfg.pagerduty),
        one("notify.alertmanager", &cfg.alertmanager),
        each("notify.webhook", &cfg.webhook),
        each("notify.opsgenie", &cfg.opsgenie),
        each("notify.jsm", &cfg.jsm),
        each("notify.mattermost", &cfg.mattermost),
        each("notify.discord", &cfg.discord),
        each("notify.teams", &cfg.teams),
        each("notify.google_chat", &cfg.google_chat),
        each("notify.email", &cfg.email),
        each("notify.grafana", &cfg.grafana),
    ]
}

/// One destination of the registry: its key, whether it is a list (`[[notify.webhook]]`),
/// and its configured sections.
struct Entry<'a> {
    key: &'static str,
    list: bool,
    configs: Vec<&'a dyn DestinationConfig>,
}

fn one<'a, T: DestinationConfig>(key: &'static str, c: &'a Option<T>) -> Entry<'a> {
    Entry { key, list: false, configs: c.iter().map(|c| c as &dyn DestinationConfig).collect() }
}

fn one_or_many<'a, T: DestinationConfig>(key: &'static str, c: &'a Option<OneOrMany<T>>) -> Entry<'a> {
    Entry {
        key,
        list: c.as_ref().is_some_and(OneOrMany::is_list),
        configs: c.iter().flat_map(|c| c.as_slice()).map(|c| c as &dyn DestinationConfig).collect(),
    }
}

fn each<'a, T: DestinationConfig>(key: &'static str, list: &'a [T]) -> Entry<'a> {
    Entry { key, list: true, configs: list.iter().map(|c| c as &dyn DestinationConfig).collect() }
}

/// Every configured destination section, in the registry's order.
pub fn sections(cfg: &NotifyConfig) -> Vec<Section<'_>> {
    let mut out = Vec::new();
    for e in entries(cfg) {
        for (i, config) in e.configs.into_iter().enumerate() {
            let section = if e.list {
                let label = config.label().map(|l| format!(" ({l})")).unwrap_or_default();
                Section { key: format!("{}[{i}]{label}", e.key), list: Some(e.key), config }
            } else {
                Section { key: e.key.to_string(), list: None, config }
            };
            out.push(section);
        }
    }
    out
}

/// The name of every configured destination as routes, metrics and the outbox know it
/// ([`crate::notify::Destination::name`]): its kind (`slack`, `pagerduty`, `alertmanager`),
/// with `:<name>` when its section has a name (`webhook:ops`, `slack:payments`), in the
/// registry's order.
pub fn names(cfg: &NotifyConfig) -> Vec<String> {
    sections(cfg)
        .iter()
        .map(|s| destination_name(s.list.unwrap_or(&s.key).trim_start_matches("notify."), s.config.label()))
        .collect()
}

/// A destination's name from its kind and its section's name: `slack`, `slack:payments`.
pub fn destination_name(kind: &str, name: Option<&str>) -> String {
    match name {
        Some(n) => format!("{kind}:{n}"),
        None => kind.to_string(),
    }
}

/// The TOML header of every destination, configured or not (`[notify.slack]`,
/// `[[notify.webhook]]`): for messages that name them all.
pub fn headers() -> Vec<String> {
    entries(&NotifyConfig::default())
        .iter()
        .map(|e| if e.list { format!("[[{}]]", e.key) } else { format!("[{}]", e.key) })
        .collect()
}

/// One configured destination section.
pub struct Section<'a> {
    /// Its key as check-config names it: `notify.slack`, `notify.webhook[0] (ops)`.
    pub key: String,
    /// The key of a list's section without its index (`notify.webhook`); `None` for a
    /// single section.
    pub list: Option<&'static str>,
    pub config: &'a dyn DestinationConfig,
}

/// How a secret travels on the wire, so that the redactor removes every form of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecretForm<'a> {
    /// A token or key, sent as it is (in a header or a body).
    Plain,
    /// A URL that holds a token (a Slack incoming webhook): the URL, its path and its last
    /// segment are secret.
    Url,
    /// The password of HTTP Basic authentication with this user name.
    Basic { username: &'a str },
}

/// One secret a destination's section holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretField<'a> {
    /// Its key inside the section: `token`, `auth.password`.
    pub key: String,
    pub source: &'a SecretSource,
    pub form: SecretForm<'a>,
}

/// The secret of an optional `auth` (`{prefix}.token` or `{prefix}.password`).
pub fn auth_secrets<'a>(prefix: &str, auth: Option<&'a HttpAuth>) -> Vec<SecretField<'a>> {
    match auth {
        Some(HttpAuth::Bearer { token }) => {
            vec![SecretField { key: format!("{prefix}.token"), source: token, form: SecretForm::Plain }]
        }
        Some(HttpAuth::Basic { username, password }) => vec![SecretField {
            key: format!("{prefix}.password"),
            source: password,
            form: SecretForm::Basic { username },
        }],
        None => Vec::new(),
    }
}

/// A destination's section of `[notify]`: everything culprit asks of it besides sending.
pub trait DestinationConfig: Send + Sync {
    /// The label of one section of a list (a webhook's `name`), shown in its key.
    fn label(&self) -> Option<&str> {
        None
    }
    /// Every secret the section holds, each with its key inside the section. A secret
    /// left out here would be neither checked by `check-config` nor redacted.
    fn secrets(&self) -> Vec<SecretField<'_>>;
    /// The URLs it posts to, with their full keys: each must be http(s) without
    /// credentials or a query ([`check_backend_url`]).
    fn urls(&self) -> Vec<(&'static str, &str)>;
    /// Problems with its other values (every one, each naming its key).
    fn validate(&self, _problems: &mut Vec<String>) {}
    /// One line without a secret: what `serve` logs at start and `check-config` prints.
    fn describe(&self) -> String;
    /// Its sender; secrets are resolved now. The error names the destination, never a
    /// secret.
    fn build(&self) -> Result<Box<dyn Destination>, String>;
    /// The section as JSON (secret references as `{"env": …}` / `{"file": …}`), for the
    /// test that every secret it holds is reported.
    fn to_json(&self) -> serde_json::Value;
}

impl Default for NotifyConfig {
    fn default() -> Self {
        NotifyConfig {
            slack: None,
            pagerduty: None,
            alertmanager: None,
            webhook: Vec::new(),
            opsgenie: Vec::new(),
            jsm: Vec::new(),
            mattermost: Vec::new(),
            discord: Vec::new(),
            teams: Vec::new(),
            google_chat: Vec::new(),
            email: Vec::new(),
            grafana: Vec::new(),
            retry: RetryConfig::default(),
            concurrency: 4,
            could_not_diagnose_every: Millis::from_secs(600),
        }
    }
}

impl NotifyConfig {
    /// Every value out of range, in one pass: the delivery settings, then every
    /// destination's URLs, then their other values, then names used twice in a list.
    pub fn validate(&self, problems: &mut Vec<String>) {
        if self.concurrency == 0 {
            problems.push("notify.concurrency must be at least 1 (0 would deliver nothing)".into());
        }
        if self.retry.min.as_ms() <= 0 || self.retry.max < self.retry.min {
            problems.push("notify.retry.min must be positive and at most notify.retry.max".into());
        }
        let sections = sections(self);
        for (key, url) in sections.iter().flat_map(|s| s.config.urls()) {
            // A notification URL may carry a token: refused, never echoed.
            check_backend_url(key, url, "its `auth`", problems);
        }
        for s in &sections {
            s.config.validate(problems);
        }
        for s in &sections {
            if s.list.is_some() && s.config.label().is_none() {
                problems.push(format!(
                    "{}: needs a `name` (written several times, each section is told apart by its name in routes, metrics and logs)",
                    s.key
                ));
            }
        }
        let mut names = std::collections::BTreeSet::new();
        for s in &sections {
            if let (Some(list), Some(label)) = (s.list, s.config.label())
                && !names.insert((list, label))
            {
                problems.push(format!("{list}: the name `{label}` is used twice"));
            }
        }
    }

    /// Every secret reference of every destination, with its full key
    /// (`notify.webhook[0] (ops).auth.token`), and how it travels.
    pub fn secrets(&self) -> Vec<(String, SecretField<'_>)> {
        sections(self)
            .into_iter()
            .flat_map(|s| s.config.secrets().into_iter().map(move |f| (format!("{}.{}", s.key, f.key), f)))
            .collect()
    }

    /// One line per configured destination, without a secret.
    pub fn describe(&self) -> Vec<String> {
        sections(self).iter().map(|s| s.config.describe()).collect()
    }

    /// Every configured destination's sender; secrets are resolved now.
    pub fn build(&self) -> Result<Vec<Notifier>, String> {
        sections(self).iter().map(|s| s.config.build().map(Notifier::from_box)).collect()
    }
}

/// Backoff of failed deliveries: `min` doubling to `max`, honouring `Retry-After`, until
/// `give_up_after` since the first attempt.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct RetryConfig {
    /// The first wait after a failed delivery, doubled after each failure. Default 1s.
    pub min: Millis,
    /// The longest wait between two attempts (a `Retry-After` may ask more). Default 60s.
    pub max: Millis,
    /// A delivery still failing this long after its first attempt is given up (a dead
    /// letter). Default 1h.
    pub give_up_after: Millis,
}

impl Default for RetryConfig {
    fn default() -> Self {
        RetryConfig { min: Millis::from_secs(1), max: Millis::from_secs(60), give_up_after: Millis::from_secs(3600) }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use serde_json::Value;

    use super::*;

    /// The keys of `[notify]` that are delivery settings, not destinations.
    const SETTINGS: [&str; 3] = ["retry", "concurrency", "could_not_diagnose_every"];

    /// Every destination with every field that can hold a secret set, each secret a
    /// reference to its own environment variable `CULPRIT_TEST_SECRET_<n>`; both kinds of
    /// `auth`. A new destination gets its section here (the test below fails until it does).
    const FULL: &str = r#"
        [slack]
        token = { env = "CULPRIT_TEST_SECRET_1" }
        channel = "C1"
        webhook_url = { env = "CULPRIT_TEST_SECRET_2" }
        signing_secret = { env = "CULPRIT_TEST_SECRET_15" }
        alertmanager_url = "http://alertmanager:9093"
        alertmanager_auth = { type = "basic", username = "u", password = { env = "CULPRIT_TEST_SECRET_16" } }

        [pagerduty]
        routing_key = { env = "CULPRIT_TEST_SECRET_3" }

        [alertmanager]
        url = "http://alertmanager:9093"
        auth = { type = "bearer", token = { env = "CULPRIT_TEST_SECRET_4" } }

        [[webhook]]
        name = "bearer"
        url = "https://hooks.example/a"
        auth = { type = "bearer", token = { env = "CULPRIT_TEST_SECRET_5" } }

        [[webhook]]
        name = "basic"
        url = "https://hooks.example/b"
        auth = { type = "basic", username = "u", password = { env = "CULPRIT_TEST_SECRET_6" } }

        [[opsgenie]]
        name = "payments"
        api_key = { env = "CULPRIT_TEST_SECRET_7" }

        [[jsm]]
        name = "payments"
        cloud_id = "0a1b2c3d-4e5f-6789-abcd-ef0123456789"
        user = "culprit@example.com"
        api_token = { env = "CULPRIT_TEST_SECRET_14" }

        [[mattermost]]
        name = "ops"
        webhook_url = { env = "CULPRIT_TEST_SECRET_9" }

        [[discord]]
        name = "ops"
        webhook_url = { env = "CULPRIT_TEST_SECRET_10" }

        [[teams]]
        name = "payments"
        webhook_url = { env = "CULPRIT_TEST_SECRET_11" }

        [[google_chat]]
        name = "payments"
        webhook_url = { env = "CULPRIT_TEST_SECRET_12" }
        [[email]]
        name = "ops"
        smtp_host = "smtp.example.com"
        username = "culprit"
        password = { env = "CULPRIT_TEST_SECRET_13" }
        from = "culprit@example.com"
        to = ["ops@example.com"]

        [[grafana]]
        name = "ops"
        url = "https://grafana.example.com"
        token = { env = "CULPRIT_TEST_SECRET_8" }
    "#;

    /// Every secret reference in a JSON value (`{"env": …}` or `{"file": …}`, as a
    /// `SecretSource` serializes), as its variable or path.
    fn references(v: &Value, out: &mut BTreeSet<String>) {
        match v {
            Value::Object(m) if m.len() == 1 && (m.contains_key("env") || m.contains_key("file")) => {
                out.insert(m.values().next().and_then(Value::as_str).unwrap_or_default().to_string());
            }
            Value::Object(m) => m.values().for_each(|x| references(x, out)),
            Value::Array(a) => a.iter().for_each(|x| references(x, out)),
            _ => {}
        }
    }

    fn reported(f: &SecretField<'_>) -> String {
        match f.source {
            SecretSource::Env(name) => name.clone(),
            SecretSource::File(path) => path.display().to_string(),
        }
    }

    #[test]
    fn every_secret_a_destination_holds_is_reported() {
        let cfg: NotifyConfig = toml::from_str(FULL).unwrap();
        let sections = sections(&cfg);
        // Every destination of `[notify]` (from the type's schema) is registered and set
        // in FULL: a new section missing from `sections` or from FULL fails here.
        let schema = serde_json::to_value(schemars::schema_for!(NotifyConfig)).unwrap();
        let declared: BTreeSet<String> = schema["properties"]
            .as_object()
            .unwrap()
            .keys()
            .filter(|k| !SETTINGS.contains(&k.as_str()))
            .cloned()
            .collect();
        let registered: BTreeSet<String> = sections
            .iter()
            .map(|s| s.list.map(str::to_string).unwrap_or_else(|| s.key.clone()).replace("notify.", ""))
            .collect();
        assert_eq!(declared, registered, "every destination of [notify] is in `sections` and in FULL");
        let mut all = BTreeSet::new();
        for s in &sections {
            // What the section holds, read from its serialized form, is what it reports.
            let mut held = BTreeSet::new();
            references(&s.config.to_json(), &mut held);
            let told: BTreeSet<String> = s.config.secrets().iter().map(reported).collect();
            assert_eq!(held, told, "{}: every secret it holds is reported by `secrets`", s.key);
            assert!(!held.is_empty(), "{}: FULL sets its secrets", s.key);
            all.extend(held);
        }
        // Every field that can hold a secret is set in FULL: a field of a destination's
        // type whose schema is (or holds) a SecretSource or HttpAuth is present in each
        // of its sections. A new secret field left out of FULL fails here.
        let defs = schema["$defs"].as_object().unwrap();
        for s in &sections {
            let json = s.config.to_json();
            let name = s.list.unwrap_or(&s.key).replace("notify.", "");
            let def = schema["properties"][&name].to_string();
            let find = |text: &str| defs.iter().find(|(k, _)| text.contains(&format!("#/$defs/{k}\""))).unwrap();
            let (mut type_name, mut d) = find(&def);
            // A section written once or as a list (`OneOrMany`): the section's own type.
            while d.get("properties").is_none() {
                (type_name, d) = find(&d.to_string());
            }
            let (type_name, fields) = (type_name.clone(), d["properties"].as_object().cloned().unwrap_or_default());
            for (field, field_schema) in fields {
                let text = field_schema.to_string();
                if text.contains("#/$defs/SecretSource") || text.contains("#/$defs/HttpAuth") {
                    assert!(!json[&field].is_null(), "{type_name}.{field} can hold a secret: set it in FULL");
                }
            }
        }
        // 1 to 16, each reported once.
        assert_eq!(all.len(), 16, "{all:?}");
    }

    #[test]
    fn a_destinations_route_name_is_the_name_its_sender_reports() {
        // Every destination of FULL, built with each secret read from a file of its own:
        // the name a route uses is the one the delivery loop and the outbox know it by.
        let dir = tempfile::tempdir().unwrap();
        let re = regex::Regex::new(r#"env = "CULPRIT_TEST_SECRET_(\d+)""#).unwrap();
        let text = re.replace_all(FULL, |c: &regex::Captures<'_>| {
            let path = dir.path().join(&c[1]);
            // A URL, so that secrets that are URLs (webhooks) read as one too.
            std::fs::write(&path, format!("https://hooks.example/s/secret-{}", &c[1])).unwrap();
            format!("file = {:?}", path.display().to_string())
        });
        let cfg: NotifyConfig = toml::from_str(&text).unwrap();
        let built: Vec<String> = cfg.build().unwrap().iter().map(|n| n.name()).collect();
        assert_eq!(names(&cfg), built);
        assert!(built.contains(&"webhook:bearer".to_string()), "{built:?}");
    }

    #[test]
    fn slack_and_pagerduty_written_several_times_are_one_destination_each_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("s");
        std::fs::write(&secret, "xoxb-1").unwrap();
        let text = format!(
            "[[slack]]\nname = \"payments\"\ntoken = {{ file = {s:?} }}\nchannel = \"C1\"\n\
             [[slack]]\nname = \"fraud\"\ntoken = {{ file = {s:?} }}\nchannel = \"C2\"\n\
             [pagerduty]\nrouting_key = {{ file = {s:?} }}\n",
            s = secret.display().to_string()
        );
        let cfg: NotifyConfig = toml::from_str(&text).unwrap();
        assert_eq!(names(&cfg), ["slack:payments", "slack:fraud", "pagerduty"]);
        let built: Vec<String> = cfg.build().unwrap().iter().map(|n| n.name()).collect();
        assert_eq!(built, names(&cfg));
        let keys: Vec<String> = cfg.secrets().into_iter().map(|(k, _)| k).collect();
        assert_eq!(
            keys,
            ["notify.slack[0] (payments).token", "notify.slack[1] (fraud).token", "notify.pagerduty.routing_key"]
        );
        let mut problems = Vec::new();
        cfg.validate(&mut problems);
        assert!(problems.is_empty(), "{problems:?}");
        // Several without a name, or twice the same name: told apart by nothing.
        let nameless = text.replace("name = \"fraud\"\n", "").replace("fraud", "payments");
        let cfg: NotifyConfig = toml::from_str(&nameless).unwrap();
        let mut problems = Vec::new();
        cfg.validate(&mut problems);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].starts_with("notify.slack[1]: needs a `name`"), "{problems:?}");
        let twice = text.replace("name = \"fraud\"", "name = \"payments\"");
        let cfg: NotifyConfig = toml::from_str(&twice).unwrap();
        let mut problems = Vec::new();
        cfg.validate(&mut problems);
        assert_eq!(problems, ["notify.slack: the name `payments` is used twice"]);
    }

    #[test]
    fn the_headers_name_every_destination_as_the_file_writes_it() {
        assert_eq!(
            headers(),
            [
                "[notify.slack]",
                "[notify.pagerduty]",
                "[notify.alertmanager]",
                "[[notify.webhook]]",
                "[[notify.opsgenie]]",
                "[[notify.jsm]]",
                "[[notify.mattermost]]",
                "[[notify.discord]]",
                "[[notify.teams]]",
                "[[notify.google_chat]]",
                "[[notify.email]]",
                "[[notify.grafana]]"
            ]
        );
    }

    #[test]
    fn secrets_have_their_full_keys_and_wire_forms() {
        let cfg: NotifyConfig = toml::from_str(FULL).unwrap();
        let keys: Vec<(String, SecretForm<'_>)> = cfg.secrets().into_iter().map(|(k, f)| (k, f.form)).collect();
        assert_eq!(
            keys,
            vec![
                ("notify.slack.token".to_string(), SecretForm::Plain),
                ("notify.slack.webhook_url".to_string(), SecretForm::Url),
                ("notify.slack.signing_secret".to_string(), SecretForm::Plain),
                ("notify.slack.alertmanager_auth.password".to_string(), SecretForm::Basic { username: "u" }),
                ("notify.pagerduty.routing_key".to_string(), SecretForm::Plain),
                ("notify.alertmanager.auth.token".to_string(), SecretForm::Plain),
                ("notify.webhook[0] (bearer).auth.token".to_string(), SecretForm::Plain),
                ("notify.webhook[1] (basic).auth.password".to_string(), SecretForm::Basic { username: "u" }),
                ("notify.opsgenie[0] (payments).api_key".to_string(), SecretForm::Plain),
                (
                    "notify.jsm[0] (payments).api_token".to_string(),
                    SecretForm::Basic { username: "culprit@example.com" }
                ),
                ("notify.mattermost[0] (ops).webhook_url".to_string(), SecretForm::Url),
                ("notify.discord[0] (ops).webhook_url".to_string(), SecretForm::Url),
                ("notify.teams[0] (payments).webhook_url".to_string(), SecretForm::Url),
                ("notify.google_chat[0] (payments).webhook_url".to_string(), SecretForm::Url),
                ("notify.email[0] (ops).password".to_string(), SecretForm::Plain),
                ("notify.grafana[0] (ops).token".to_string(), SecretForm::Plain),
            ]
        );
    }
}
