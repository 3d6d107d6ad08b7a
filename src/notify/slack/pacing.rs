//! Slack's posting limit, "1 per second per channel, short bursts allowed"
//! (<https://api.slack.com/docs/rate-limits#limits-when-posting-messages>), kept before
//! it is hit.
//!
//! One [`Pacer`] per token (or incoming webhook URL) in the process, so that two sections
//! posting to one channel with one token pace as one; each post's slot is also taken from
//! the replicas' ledger ([`crate::notify::pace::across`]) under the channel's name, so that
//! replicas on one database post to a channel as one replica would.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, Weak};

use tokio::time::Instant;

use super::{MIN_POST_INTERVAL, Mode};
use crate::notify::pace::{across, scope_of_secret};

/// The scope of a Slack destination: its token's hash (web API) or its webhook URL's.
pub(super) fn scope_of(mode: &Mode) -> String {
    use secrecy::ExposeSecret;
    match mode {
        Mode::WebApi { token, .. } => scope_of_secret("slack", token.expose_secret()),
        Mode::Webhook { url } => scope_of_secret("slack-webhook", url.expose_secret()),
    }
}

/// Spaces posts per channel by [`MIN_POST_INTERVAL`]. A channel posted to by name
/// (`#alerts`) and answered with its id (`C…`) shares one slot once the id is known.
#[derive(Default)]
pub(super) struct Pacer {
    /// The destination's scope ([`scope_of`]): the ledger's keys start with it.
    scope: String,
    inner: Mutex<PacerState>,
    /// One ledger reservation per channel at a time from this process ([`across`]).
    reserving: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

#[derive(Default)]
struct PacerState {
    /// The time of the last post (or the reserved slot of the next) per channel.
    last: HashMap<String, Instant>,
    /// Channel name → id.
    alias: HashMap<String, String>,
}

/// Pacers by scope, alive while a destination holds them.
static SHARED: LazyLock<Mutex<HashMap<String, Weak<Pacer>>>> = LazyLock::new(Default::default);

/// Whether `channel` has the form of a Slack conversation id (`C…`, `G…`, `D…`).
fn is_id(channel: &str) -> bool {
    channel.len() >= 9
        && channel.starts_with(['C', 'G', 'D'])
        && channel.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
}

impl Pacer {
    /// The pacer of `scope`, shared with every Slack destination of the process that has it.
    pub(super) fn of(scope: &str) -> Arc<Pacer> {
        let mut map = SHARED.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(p) = map.get(scope).and_then(Weak::upgrade) {
            return p;
        }
        map.retain(|_, w| w.strong_count() > 0);
        let pacer = Arc::new(Pacer { scope: scope.to_string(), ..Pacer::default() });
        map.insert(scope.to_string(), Arc::downgrade(&pacer));
        pacer
    }

    /// Reserves the next slot of `channel` in this process and waits for it, then for the
    /// channel's slot in the replicas' ledger. `home`: the destination's configured
    /// channel, the ledger's name for an id this replica has not seen answered (a reply
    /// in a thread another replica started), since every post of a destination goes there.
    pub(super) async fn wait(&self, channel: &str, home: &str) {
        let (slot, name) = {
            let mut st = self.inner.lock().unwrap_or_else(|e| e.into_inner());
            let key = st.alias.get(channel).cloned().unwrap_or_else(|| channel.to_string());
            let now = Instant::now();
            let slot = st.last.get(&key).map_or(now, |t| (*t + MIN_POST_INTERVAL).max(now));
            st.last.insert(key, slot);
            (slot, st.name_of(channel, home))
        };
        tokio::time::sleep_until(slot).await;
        let lock = {
            let mut reserving = self.reserving.lock().unwrap_or_else(|e| e.into_inner());
            reserving.entry(name.clone()).or_default().clone()
        };
        let _one_at_a_time = lock.lock().await;
        across(&format!("{}:post:{name}", self.scope), MIN_POST_INTERVAL).await;
    }

    /// Records that a post to `channel` has just been answered: the next one waits
    /// [`MIN_POST_INTERVAL`] from now, so posts arrive at Slack that far apart however
    /// long each took.
    pub(super) fn done(&self, channel: &str) {
        let mut st = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let key = st.alias.get(channel).cloned().unwrap_or_else(|| channel.to_string());
        let now = Instant::now();
        let last = st.last.entry(key).or_insert(now);
        *last = (*last).max(now);
    }

    /// Records that `name` is the channel `id`.
    pub(super) fn learn(&self, name: &str, id: &str) {
        if name == id {
            return;
        }
        let mut st = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(t) = st.last.remove(name) {
            let merged = st.last.get(id).map_or(t, |u| t.max(*u));
            st.last.insert(id.to_string(), merged);
        }
        st.alias.insert(name.to_string(), id.to_string());
    }
}

impl PacerState {
    /// The name every replica knows `channel` by: the configured name an id was learned
    /// for, `home` for an id not learned, the channel itself otherwise.
    fn name_of(&self, channel: &str, home: &str) -> String {
        if let Some((name, _)) = self.alias.iter().filter(|(_, id)| id.as_str() == channel).min() {
            return name.clone();
        }
        if is_id(channel) && !is_id(home) && channel != home { home } else { channel }.to_string()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_pacer_spaces_posts_per_channel_and_follows_a_name_to_its_id() {
        let pacer = Pacer::default();
        let start = Instant::now();
        pacer.wait("#alerts", "#alerts").await;
        pacer.learn("#alerts", "C1");
        pacer.wait("C2", "#alerts").await;
        assert_eq!(start.elapsed(), Duration::ZERO, "another channel does not wait");
        pacer.wait("C1", "#alerts").await;
        assert_eq!(start.elapsed(), MIN_POST_INTERVAL, "the id shares the name's slot");
        // The post takes 300 ms; the next waits a whole interval from the answer.
        tokio::time::advance(Duration::from_millis(300)).await;
        pacer.done("C1");
        let answered = Instant::now();
        pacer.wait("#alerts", "#alerts").await;
        assert_eq!(answered.elapsed(), MIN_POST_INTERVAL, "counted from the answer");
    }

    #[test]
    fn replicas_name_a_channel_alike_whether_or_not_they_have_seen_its_id() {
        let mut st = PacerState::default();
        // Not learned yet: a reply into a thread another replica started, by id.
        assert_eq!(st.name_of("C0123456789", "#alerts"), "#alerts");
        assert_eq!(st.name_of("#alerts", "#alerts"), "#alerts");
        st.alias.insert("#alerts".into(), "C0123456789".into());
        assert_eq!(st.name_of("C0123456789", "#alerts"), "#alerts");
        // Configured by id: the id is the name.
        assert_eq!(PacerState::default().name_of("C0123456789", "C0123456789"), "C0123456789");
        assert_eq!(PacerState::default().name_of("#other", "#alerts"), "#other");
    }

    #[test]
    fn two_sections_with_one_token_share_one_pacer_and_other_tokens_do_not() {
        let a = Pacer::of("slack:aaaa");
        let b = Pacer::of("slack:aaaa");
        let c = Pacer::of("slack:bbbb");
        assert!(Arc::ptr_eq(&a, &b) && !Arc::ptr_eq(&a, &c));
    }
}
