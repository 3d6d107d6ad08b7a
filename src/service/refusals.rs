//! One log line per sender per interval: what culprit refuses (or reads with a doubt) must
//! show in its log, not only in a counter — Alertmanager and Grafana drop a notification
//! answered 4xx, so the log is the only trace of the lost alert — but a sender that posts
//! the same bad payload in a loop must not flood it.
//!
//! [`OncePerSender::due`] says whether a sender's line is due and how many of its events
//! were left out since its last one. Senders are untrusted names (an `externalURL`): at
//! most [`MAX_SENDERS`] are remembered; past that, new ones share one line per interval
//! under [`OTHER_SENDERS`], so the log gets at most `MAX_SENDERS + 1` lines per interval
//! whatever arrives.

use std::collections::HashMap;
use std::sync::Mutex;

/// How often one sender's refusals are logged: the first at once, then one line per
/// interval with the count left out.
pub const LOG_INTERVAL_MS: i64 = 10 * 60 * 1000;

/// Most senders remembered.
pub const MAX_SENDERS: usize = 1024;

/// The name new senders share once [`MAX_SENDERS`] are remembered.
pub const OTHER_SENDERS: &str = "(other senders)";

/// Per sender: when its last line was logged (Unix ms), and events left out since.
#[derive(Debug, Default)]
pub struct OncePerSender {
    seen: Mutex<HashMap<String, (i64, u64)>>,
}

/// A line that is due.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Due {
    /// The sender as remembered ([`OTHER_SENDERS`] past the cap).
    pub sender: String,
    /// Events of this sender left out of the log since its last line.
    pub left_out: u64,
}

impl OncePerSender {
    /// Whether `sender`'s line is due at `now_ms`: `Some` (with the count left out since
    /// its last line) for its first event and the first after each [`LOG_INTERVAL_MS`];
    /// `None` (the event counted) otherwise.
    pub fn due(&self, sender: &str, now_ms: i64) -> Option<Due> {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        let mut key = sender;
        if !seen.contains_key(sender) && seen.len() >= MAX_SENDERS {
            seen.retain(|_, (at, _)| now_ms - *at < LOG_INTERVAL_MS);
            if seen.len() >= MAX_SENDERS {
                key = OTHER_SENDERS;
            }
        }
        match seen.get_mut(key) {
            Some((at, left_out)) if now_ms - *at < LOG_INTERVAL_MS => {
                *left_out += 1;
                None
            }
            Some((at, left_out)) => {
                let due = Due { sender: key.to_string(), left_out: *left_out };
                (*at, *left_out) = (now_ms, 0);
                Some(due)
            }
            None => {
                seen.insert(key.to_string(), (now_ms, 0));
                Some(Due { sender: key.to_string(), left_out: 0 })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sender_gets_one_line_per_interval_with_the_count_left_out() {
        let log = OncePerSender::default();
        assert_eq!(log.due("g", 0), Some(Due { sender: "g".into(), left_out: 0 }));
        // Three more within the interval: counted, not logged.
        for t in [1, 1000, LOG_INTERVAL_MS - 1] {
            assert_eq!(log.due("g", t), None);
        }
        // Another sender has its own line at once.
        assert!(log.due("h", 5).is_some());
        assert_eq!(log.due("g", LOG_INTERVAL_MS), Some(Due { sender: "g".into(), left_out: 3 }));
        assert_eq!(log.due("g", LOG_INTERVAL_MS + 1), None);
    }

    #[test]
    fn past_the_cap_new_senders_share_one_line() {
        let log = OncePerSender::default();
        for i in 0..MAX_SENDERS {
            assert!(log.due(&format!("s{i}"), 0).is_some());
        }
        // 1024 remembered: the next two new names share one line, then nothing.
        assert_eq!(log.due("new-1", 1).map(|d| d.sender), Some(OTHER_SENDERS.to_string()));
        assert_eq!(log.due("new-2", 2), None);
        // A remembered sender keeps its own.
        assert_eq!(log.due("s0", 3), None);
        // After the interval the old entries are let go and a new name gets its own line.
        assert_eq!(log.due("new-3", LOG_INTERVAL_MS + 1).map(|d| d.sender), Some("new-3".to_string()));
    }
}
