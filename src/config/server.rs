//! `[server]`: `culprit serve`'s listener, its limits and its authentication.

use serde::{Deserialize, Serialize};

use super::{HttpAuth, Millis, SecretSource};

/// `culprit serve`'s HTTP side.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// Address to listen on. Default `127.0.0.1:9187` (this host only); another address
    /// (`0.0.0.0:9187` in a container) needs `auth`.
    pub listen: String,
    /// Base URL users reach culprit at, for links to verdicts (`https://culprit.example.com`).
    pub external_url: Option<String>,
    /// Largest request body accepted, bytes; larger bodies get 413. Default 1 MiB.
    pub body_limit_bytes: usize,
    /// Time a request may take before 408/503. Default 30s (a live `/api/v1/diagnose`
    /// runs a whole diagnosis).
    pub request_timeout: Millis,
    /// A connection that has not sent a whole request head this long after it opened, or
    /// after the first byte of its next request, is closed (slowloris). Default 10s.
    pub header_read_timeout: Millis,
    /// A kept-alive connection that sends nothing this long after an answer is closed.
    /// Default 75s (nginx's own default): above the idle timeout of the proxies that keep
    /// connections to culprit (ingress-nginx's upstream keep-alive and AWS ALB, 60 s), so
    /// that the proxy, not culprit, closes an idle connection and no request races a close.
    pub idle_timeout: Millis,
    /// Connections served at once. When reached, a new connection closes the oldest one
    /// with no request in flight; it is refused only while every one has a request in
    /// flight. Lowered at start to the open-file limit (raised to its hard limit where
    /// allowed) minus what the store, outgoing HTTP and files need. Default 1024.
    pub max_connections: usize,
    /// Authentication required on `/webhook/*` and `/api/*` (bearer or basic, compared in
    /// constant time), or `{ type = "none" }` to accept anyone on purpose. `/healthz`,
    /// `/readyz` and `/metrics` stay open. Unset: allowed only while `listen` is a loopback
    /// address (`serve` refuses to start otherwise).
    pub auth: Option<ServerAuth>,
    /// Credentials for `/webhook/*` only (Alertmanager's), instead of `auth`.
    pub webhook_auth: Option<ServerAuth>,
    /// Credentials for `/api/*` only (people and bots reading verdicts), instead of `auth`.
    pub api_auth: Option<ServerAuth>,
    /// The key that signs links to verdict pages (`{external_url}/verdicts/{id}?expires=…&sig=…`,
    /// HMAC-SHA256), a secret reference. A browser cannot send the API's token: with a key,
    /// a signed link opens its page until it expires; without one, links point at the API.
    pub link_secret: Option<SecretSource>,
    /// How long a signed link opens its page. Default 7d.
    pub link_expiry: Millis,
}

/// How `culprit serve` authenticates requests.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "snake_case", tag = "type")]
pub enum ServerAuth {
    /// No authentication: whoever reaches the port may post alerts and read verdicts.
    /// Only when chosen explicitly.
    None,
    /// `Authorization: Bearer <token>`.
    Bearer { token: SecretSource },
    /// `Authorization: Basic …`.
    Basic { username: String, password: SecretSource },
}

impl ServerAuth {
    /// The credentials to expect, `None` for [`ServerAuth::None`].
    pub fn http(&self) -> Option<HttpAuth> {
        match self {
            ServerAuth::None => None,
            ServerAuth::Bearer { token } => Some(HttpAuth::Bearer { token: token.clone() }),
            ServerAuth::Basic { username, password } => {
                Some(HttpAuth::Basic { username: username.clone(), password: password.clone() })
            }
        }
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: "127.0.0.1:9187".into(),
            external_url: None,
            body_limit_bytes: 1024 * 1024,
            request_timeout: Millis::from_secs(30),
            header_read_timeout: Millis::from_secs(10),
            idle_timeout: Millis::from_secs(75),
            max_connections: 1024,
            auth: None,
            link_secret: None,
            link_expiry: Millis::from_secs(7 * 24 * 3600),
            webhook_auth: None,
            api_auth: None,
        }
    }
}

impl ServerConfig {
    /// The authentication of `/webhook/*`: `webhook_auth`, else `auth`.
    pub fn webhook(&self) -> Option<&ServerAuth> {
        self.webhook_auth.as_ref().or(self.auth.as_ref())
    }

    /// The authentication of `/api/*`: `api_auth`, else `auth`.
    pub fn api(&self) -> Option<&ServerAuth> {
        self.api_auth.as_ref().or(self.auth.as_ref())
    }

    /// Why `serve` must not start as configured: a `listen` address other hosts can reach
    /// while `/webhook/*` or `/api/*` has no authentication and none was chosen explicitly
    /// (`{ type = "none" }`). A browser page can post to an open webhook cross-site.
    pub fn exposure_problem(&self) -> Option<String> {
        let addr: std::net::SocketAddr = self.listen.parse().ok()?;
        if addr.ip().is_loopback() {
            return None;
        }
        let open: Vec<&str> = [("/webhook/*", self.webhook()), ("/api/*", self.api())]
            .into_iter()
            .filter(|(_, auth)| auth.is_none())
            .map(|(route, _)| route)
            .collect();
        (!open.is_empty()).then(|| {
            format!(
                "server.listen {} is reachable from other hosts and {} would accept anyone: set server.auth = {{ type = \"bearer\", token = {{ file = \"/run/secrets/culprit/webhook-token\" }} }} (Alertmanager sends the same token), or server.auth = {{ type = \"none\" }} to accept unauthenticated requests on purpose, or listen on 127.0.0.1",
                self.listen,
                open.join(" and ")
            )
        })
    }

    pub(super) fn validate(&self, problems: &mut Vec<String>) {
        if self.listen.parse::<std::net::SocketAddr>().is_err() {
            problems.push(format!("server.listen `{}` is not an address such as 0.0.0.0:9187", self.listen));
        }
        if let Some(u) = &self.external_url
            && reqwest::Url::parse(u).is_err()
        {
            problems.push(format!("server.external_url `{u}` is not a URL"));
        }
        if self.body_limit_bytes < 1024 {
            problems.push("server.body_limit_bytes must be at least 1024".into());
        }
        for (key, value) in [("header_read_timeout", self.header_read_timeout), ("idle_timeout", self.idle_timeout)] {
            if value.as_ms() < 100 {
                problems.push(format!(
                    "server.{key} must be at least 100ms (it is {value}; a client on another continent needs that for a round trip)"
                ));
            }
        }
        if self.max_connections == 0 {
            problems.push("server.max_connections must be at least 1 (0 would serve nobody)".into());
        }
    }
}
