//! `[[notify.email]]`: one SMTP relay and its recipients (a list: several may be configured).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::notify::Destination;
use crate::notify::registry::{DestinationConfig, SecretField, SecretForm};
use crate::settings::SecretSource;

/// How the connection to the relay is protected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EmailTls {
    /// Plain SMTP upgraded with `STARTTLS`, which is required: a relay that does not offer
    /// it is refused (port 587, RFC 6409).
    #[default]
    Starttls,
    /// TLS from the first byte (port 465, RFC 8314).
    Tls,
    /// No encryption: only for a relay on loopback (`localhost`, `127.0.0.1`, `::1`).
    None,
}

impl EmailTls {
    pub fn as_str(self) -> &'static str {
        match self {
            EmailTls::Starttls => "starttls",
            EmailTls::Tls => "tls",
            EmailTls::None => "none",
        }
    }
}

/// Verdicts by email over SMTP.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EmailConfig {
    /// A name for metrics and logs (the destination is `email:<name>`).
    pub name: String,
    /// The relay's host name (also the name its certificate must carry).
    pub smtp_host: String,
    /// Default 587 (submission with STARTTLS).
    #[serde(default = "default_smtp_port")]
    pub smtp_port: u16,
    /// `starttls` (default), `tls`, or `none` (loopback only).
    #[serde(default)]
    pub tls: EmailTls,
    /// The user of SMTP AUTH; with `password`.
    #[serde(default)]
    pub username: Option<String>,
    /// The password of SMTP AUTH; with `username`.
    #[serde(default)]
    pub password: Option<SecretSource>,
    /// The sender address (`culprit@example.com` or `culprit <culprit@example.com>`); its
    /// domain is the domain of every `Message-ID`.
    pub from: String,
    /// The recipients, at least one.
    pub to: Vec<String>,
    /// A PEM file of certificate authorities trusted besides the system's (a private
    /// relay's).
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
}

fn default_smtp_port() -> u16 {
    587
}

/// Whether `host` is loopback: `localhost` or a loopback address.
pub fn is_loopback(host: &str) -> bool {
    let h = host.trim_start_matches('[').trim_end_matches(']');
    h.eq_ignore_ascii_case("localhost") || h.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

impl DestinationConfig for EmailConfig {
    fn label(&self) -> Option<&str> {
        Some(&self.name)
    }

    fn secrets(&self) -> Vec<SecretField<'_>> {
        self.password
            .iter()
            .map(|p| SecretField { key: "password".into(), source: p, form: SecretForm::Plain })
            .collect()
    }

    fn urls(&self) -> Vec<(&'static str, &str)> {
        Vec::new()
    }

    fn validate(&self, problems: &mut Vec<String>) {
        let at = format!("notify.email ({})", self.name);
        if self.name.trim().is_empty() {
            problems.push("notify.email: `name` is empty".into());
        }
        if self.smtp_host.trim().is_empty() {
            problems.push(format!("{at}: smtp_host is empty"));
        }
        if self.smtp_port == 0 {
            problems.push(format!("{at}: smtp_port must not be 0"));
        }
        if self.tls == EmailTls::None && !is_loopback(&self.smtp_host) {
            problems.push(format!(
                "{at}: tls = \"none\" is only allowed for a relay on loopback (localhost, 127.0.0.1, ::1); use \"starttls\" or \"tls\" for {}",
                self.smtp_host
            ));
        }
        match (&self.username, &self.password) {
            (Some(_), None) => problems.push(format!("{at}: username is set without password")),
            (None, Some(_)) => problems.push(format!("{at}: password is set without username")),
            _ => {}
        }
        if self.from.parse::<lettre::message::Mailbox>().is_err() {
            problems.push(format!("{at}: from is not an email address"));
        }
        if self.to.is_empty() {
            problems.push(format!("{at}: to lists no recipient"));
        }
        for (i, t) in self.to.iter().enumerate() {
            if t.parse::<lettre::message::Mailbox>().is_err() {
                problems.push(format!("{at}: to[{i}] is not an email address"));
            }
        }
    }

    fn describe(&self) -> String {
        let auth = if self.username.is_some() { ", with AUTH" } else { "" };
        format!(
            "email:{} (SMTP {}:{} {}{auth}, to {} recipient{})",
            self.name,
            self.smtp_host,
            self.smtp_port,
            self.tls.as_str(),
            self.to.len(),
            if self.to.len() == 1 { "" } else { "s" }
        )
    }

    fn build(&self) -> Result<Box<dyn Destination>, String> {
        Ok(Box::new(super::Email::new(self)?))
    }

    fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }
}
