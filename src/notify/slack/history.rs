//! Reading a channel or a thread back for [`Slack::already_sent`]: `conversations.history`
//! and `conversations.replies` are paged (`cursor`) from the newest message back to the
//! notice's own time (`oldest`: when the notice was made, less [`LOOKBACK_MARGIN`]), so
//! the check finds an earlier post however many other messages came after it. At most
//! [`MAX_PAGES`] pages are read per lookup (logged when the bound stops it), one request
//! per [`READ_INTERVAL`] (Slack's Tier 3 rate limit).

use std::sync::Mutex;
use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

use super::{Failure, HISTORY_LIMIT, Slack};

/// Least time between two history reads of one notifier: `conversations.history` and
/// `conversations.replies` are Tier 3 (50+ requests a minute per workspace and app;
/// 60 s / 50 = 1.2 s).
/// <https://api.slack.com/methods/conversations.history>,
/// <https://api.slack.com/docs/rate-limits#tier_t3>. (Since 2025 Slack gives
/// non-Marketplace apps *distributed to other workspaces* 1 request a minute on these
/// methods; an app installed in its own workspace, as culprit's is, keeps Tier 3.)
pub const READ_INTERVAL: Duration = Duration::from_millis(1_200);

/// Most pages ([`HISTORY_LIMIT`] messages each) one lookup reads: 3000 messages, about a
/// minute of reads at [`READ_INTERVAL`]. A channel busier than that between the post and
/// the check is reported (logged) and the notice taken as not posted.
pub const MAX_PAGES: usize = 30;

/// How far before the notice was made (its `at_ms`, by the clock of the replica that made
/// it) the lookup reads back: a replica clock off from Slack's by up to this much still
/// finds its post (`/readyz` warns from 2 s of skew to the database).
pub const LOOKBACK_MARGIN: Duration = Duration::from_secs(300);

/// Spaces history reads by [`READ_INTERVAL`], in this process and through the replicas'
/// ledger ([`crate::notify::pace::across`]) under the token's scope.
#[derive(Default)]
pub(super) struct ReadPacer {
    scope: String,
    next: Mutex<Option<Instant>>,
    /// One ledger reservation at a time from this process.
    reserving: tokio::sync::Mutex<()>,
}

impl ReadPacer {
    pub(super) fn new(scope: &str) -> ReadPacer {
        ReadPacer { scope: format!("{scope}:reads"), next: Mutex::new(None), reserving: Default::default() }
    }

    async fn wait(&self) {
        let slot = {
            let mut next = self.next.lock().unwrap_or_else(|e| e.into_inner());
            let now = Instant::now();
            let slot = next.map_or(now, |t| t.max(now));
            *next = Some(slot + READ_INTERVAL);
            slot
        };
        tokio::time::sleep_until(slot).await;
        let _one_at_a_time = self.reserving.lock().await;
        crate::notify::pace::across(&self.scope, READ_INTERVAL).await;
    }
}

/// `oldest` for a notice made at `at_ms` (Unix ms): Slack's `ts` form, seconds with six
/// decimals; `None` for a notice without a time.
pub(super) fn oldest(at_ms: i64) -> Option<String> {
    let ms = at_ms - LOOKBACK_MARGIN.as_millis() as i64;
    (at_ms > 0 && ms > 0).then(|| format!("{}.{:03}000", ms / 1000, ms % 1000))
}

impl Slack {
    /// Pages `method` with `query` (plus `limit`, `include_all_metadata`, `oldest` and the
    /// cursor), newest first, handing every message to `visit` until it returns `true`
    /// (found: `Ok(true)`). `Ok(false)`: not there back to `oldest`, or the page bound was
    /// hit (logged).
    pub(super) async fn scan(
        &self,
        method: &str,
        query: &[(&str, &str)],
        oldest: Option<&str>,
        mut visit: impl FnMut(&Value) -> bool,
    ) -> Result<bool, Failure> {
        let limit = HISTORY_LIMIT.to_string();
        let mut cursor: Option<String> = None;
        let mut read = 0usize;
        for _ in 0..MAX_PAGES {
            let mut q: Vec<(&str, &str)> = query.to_vec();
            q.extend([("limit", limit.as_str()), ("include_all_metadata", "true")]);
            if let Some(o) = oldest {
                q.push(("oldest", o));
            }
            if let Some(c) = &cursor {
                q.push(("cursor", c.as_str()));
            }
            self.reads.wait().await;
            let page = self.call(method, self.request(method, reqwest::Method::GET).query(&q)).await?;
            let messages = page.get("messages").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
            read += messages.len();
            if messages.iter().any(&mut visit) {
                return Ok(true);
            }
            let next = page.pointer("/response_metadata/next_cursor").and_then(Value::as_str).unwrap_or_default();
            let more = page.get("has_more").and_then(Value::as_bool).unwrap_or(!next.is_empty());
            if next.is_empty() || !more {
                return Ok(false);
            }
            cursor = Some(next.to_string());
        }
        tracing::warn!(destination = "slack", method, pages = MAX_PAGES, messages = read, oldest = ?oldest,
            "slack: read the most pages one check reads without reaching the notice's time; taken as not posted (it may be posted twice)");
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oldest_is_five_minutes_before_the_notice_in_slacks_ts_form() {
        // 1795000000123 ms − 300000 ms = 1794999700123 ms = 1794999700.123 s.
        assert_eq!(oldest(1_795_000_000_123).as_deref(), Some("1794999700.123000"));
        assert_eq!(oldest(0), None);
    }
}
