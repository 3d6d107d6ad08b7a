//! `[store]`: the durable queue and outbox (SQLite or PostgreSQL).

use serde::{Deserialize, Serialize};

use super::{Millis, SecretSource};

/// How hard the store syncs to disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Synchronous {
    /// Every commit reaches the disk: survives power loss (SQLite `synchronous=FULL`; webhook
    /// intake gets it by syncing the WAL once per batch before answering, see the SQLite store).
    Full,
    /// Commits survive a crash of the process, not of the machine (`synchronous=NORMAL`).
    Normal,
}

/// The embedded SQLite store (WAL) of accepted work and pending notifications.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct StoreConfig {
    /// PostgreSQL (`postgres://user@host:5432/db`), shared by any number of replicas.
    /// Unset: the SQLite file at `path` (one replica). Never holds the password.
    pub url: Option<String>,
    /// The PostgreSQL password (a secret reference).
    pub password: Option<SecretSource>,
    /// PostgreSQL connections per replica. Default 16.
    pub pool_size: usize,
    /// How long a replica's claim on a diagnosis or a send lasts without renewal (by
    /// PostgreSQL's clock): after it dies, another replica takes its diagnoses this much
    /// later and its sends 10 s after that; a replica paused or cut off from the database
    /// for longer has lost its claims and does not send them. Default 30s.
    pub lease: Millis,
    /// Database file. Default `culprit.db` in the working directory.
    pub path: std::path::PathBuf,
    /// How hard each commit syncs to the SQLite file: `full` survives power loss, `normal`
    /// a crash of the process only. Default `full`.
    pub synchronous: Synchronous,
    /// Most diagnoses waiting; beyond it webhooks get 503 (Alertmanager retries). Default
    /// 10000.
    pub max_queue: usize,
    /// Verdicts kept for `/api/v1/verdicts`. Default 1000.
    pub verdicts_kept: usize,
    /// Delivered and failed notices, dead letters, verdicts, and the state of groups not
    /// heard of for this long are removed. Default 7d.
    pub prune_after: Millis,
    /// At most this many delivered or failed notices, and dead letters, are kept (the
    /// newest). Default 100000.
    pub keep_rows: usize,
    /// Most diagnoses of unknown jobs (never diagnosed with a verdict, not in
    /// `[flink.plans]`) waiting per sender (the Alertmanager: its `externalURL`, else the
    /// peer address); beyond it that sender's webhooks for more unknown jobs get 429
    /// (Alertmanager retries), other senders and known jobs are not held. Default 1000.
    pub max_unknown_per_sender: usize,
    /// Known jobs are claimed first; a due diagnosis of an unknown job that waited this
    /// long ranks with them, so unknown jobs are never starved for good. Default 10m.
    pub unknown_max_wait: Millis,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            url: None,
            password: None,
            pool_size: 16,
            lease: Millis::from_secs(30),
            path: "culprit.db".into(),
            synchronous: Synchronous::Full,
            max_queue: 10_000,
            verdicts_kept: 1000,
            prune_after: Millis::from_secs(7 * 24 * 3600),
            keep_rows: 100_000,
            max_unknown_per_sender: 1000,
            unknown_max_wait: Millis::from_secs(600),
        }
    }
}

impl StoreConfig {
    pub(super) fn validate(&self, problems: &mut Vec<String>) {
        if let Some(url) = &self.url {
            problems.extend(store_url_problems(url));
        }
        if self.lease.as_ms() < 3000 {
            problems.push("store.lease must be at least 3s (renewed every third of it)".into());
        }
        if self.max_queue == 0 {
            problems.push("store.max_queue must be at least 1 (0 would answer every webhook with 503)".into());
        }
        if self.max_unknown_per_sender == 0 {
            problems.push(
                "store.max_unknown_per_sender must be at least 1 (0 would refuse every job never diagnosed)".into(),
            );
        }
        if self.verdicts_kept == 0 {
            problems.push("store.verdicts_kept must be at least 1 (verdict links would lead nowhere)".into());
        }
        if self.prune_after.as_ms() < 3_600_000 || self.keep_rows == 0 {
            problems.push(
                "store.prune_after must be at least 1h and store.keep_rows at least 1 (a replayed notice must still find its twin)"
                    .into(),
            );
        }
    }
}

/// What is wrong with `store.url`: not PostgreSQL, or a password written in it.
fn store_url_problems(url: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let Some(rest) = url.strip_prefix("postgres://").or_else(|| url.strip_prefix("postgresql://")) else {
        problems.push(
            "store.url must be a PostgreSQL URL (postgres://user@host:5432/database); for SQLite set store.path".into(),
        );
        return problems;
    };
    let authority = rest.split(['/', '?']).next().unwrap_or("");
    // In the user info (`user:pw@`) or as libpq's `?password=` parameter, which
    // tokio-postgres takes too.
    let in_query = rest.split_once('?').is_some_and(|(_, q)| {
        q.split('&').any(|kv| kv.split('=').next().is_some_and(|k| k.eq_ignore_ascii_case("password")))
    });
    if authority.rsplit_once('@').is_some_and(|(user, _)| user.contains(':')) || in_query {
        problems.push("store.url holds a password: give it as store.password = { env = \"…\" } or { file = \"…\" } (the value is not shown)".into());
    }
    problems
}
