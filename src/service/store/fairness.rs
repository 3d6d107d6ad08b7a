//! What the queue holds back for fairness, decided once for both backends: the caps on
//! diagnoses of unknown jobs, per sender (`store.max_unknown_per_sender`) and in all
//! ([`unknown_share`]). The backends count what waits in their tables; the decision is
//! here.

use std::collections::BTreeMap;

use super::Enqueued;
use crate::config::StoreConfig;

/// Most diagnoses of unknown jobs waiting, all senders together: half the queue, so that
/// however many senders a flood of bogus job names comes from, known jobs always find
/// room.
pub fn unknown_share(max_queue: i64) -> i64 {
    (max_queue / 2).max(1)
}

/// What the queue holds back for fairness, from `[store]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fairness {
    /// `store.max_unknown_per_sender`.
    pub max_unknown_per_sender: i64,
    /// `store.unknown_max_wait`, ms.
    pub unknown_max_wait_ms: i64,
}

impl Fairness {
    pub fn of(cfg: &StoreConfig) -> Fairness {
        Fairness {
            max_unknown_per_sender: i64::try_from(cfg.max_unknown_per_sender).unwrap_or(i64::MAX),
            unknown_max_wait_ms: cfg.unknown_max_wait.as_ms(),
        }
    }
}

/// The diagnoses of unknown jobs waiting, in all and per sender, as one intake transaction
/// sees them: counted in the table by the backend (once, before the first decision that
/// needs them), then kept up to date in memory as webhooks are stored.
#[derive(Debug, Clone)]
pub struct UnknownWaiting {
    fairness: Fairness,
    total: Option<i64>,
    per_sender: BTreeMap<String, i64>,
}

impl UnknownWaiting {
    /// Nothing counted yet.
    pub fn new(fairness: Fairness) -> UnknownWaiting {
        UnknownWaiting { fairness, total: None, per_sender: BTreeMap::new() }
    }

    /// Whether the total is counted.
    pub fn has_total(&self) -> bool {
        self.total.is_some()
    }

    /// Sets the total as counted in the table.
    pub fn set_total(&mut self, waiting: i64) {
        self.total = Some(waiting);
    }

    /// Whether `sender`'s count is known.
    pub fn has_sender(&self, sender: &str) -> bool {
        self.per_sender.contains_key(sender)
    }

    /// Sets a sender's count as counted in the table.
    pub fn set_sender(&mut self, sender: &str, waiting: i64) {
        self.per_sender.insert(sender.to_string(), waiting);
    }

    /// The refusal when `new` unknown diagnoses (per sender) would not fit, `None` if they
    /// do: first the unknown jobs' share of the queue, then each sender's cap. A sender not
    /// counted has none waiting.
    pub fn refusal<K: AsRef<str>>(&self, new: &BTreeMap<K, i64>, max_queue: i64) -> Option<Enqueued> {
        if new.is_empty() {
            return None;
        }
        let share = unknown_share(max_queue);
        let total = self.total.unwrap_or(0);
        if total + new.values().sum::<i64>() > share {
            return Some(Enqueued::TooManyUnknown { waiting: total, limit: share });
        }
        let cap = self.fairness.max_unknown_per_sender;
        new.iter().find_map(|(sender, n)| {
            let waiting = self.per_sender.get(sender.as_ref()).copied().unwrap_or(0);
            (waiting + n > cap).then_some(Enqueued::TooManyUnknown { waiting, limit: cap })
        })
    }

    /// Counts a stored webhook's new unknown diagnoses.
    pub fn stored<K: AsRef<str>>(&mut self, new: &BTreeMap<K, i64>) {
        for (sender, n) in new {
            *self.total.get_or_insert(0) += n;
            *self.per_sender.entry(sender.as_ref().to_string()).or_default() += n;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waiting(total: i64, per_sender: &[(&str, i64)]) -> UnknownWaiting {
        let mut u = UnknownWaiting::new(Fairness { max_unknown_per_sender: 3, unknown_max_wait_ms: 0 });
        u.set_total(total);
        for (s, n) in per_sender {
            u.set_sender(s, *n);
        }
        u
    }

    #[test]
    fn the_unknown_share_is_checked_before_a_senders_cap_and_stored_webhooks_count() {
        // max_queue 10: the share is 10 / 2 = 5. 4 waiting + 2 new = 6 > 5: refused by the share.
        let u = waiting(4, &[("a", 0)]);
        let two = BTreeMap::from([("a", 2)]);
        assert_eq!(u.refusal(&two, 10), Some(Enqueued::TooManyUnknown { waiting: 4, limit: 5 }));
        // 2 waiting + 2 new = 4 <= 5, but sender a has 2 and the cap is 3: 2 + 2 = 4 > 3.
        let mut u = waiting(2, &[("a", 2)]);
        assert_eq!(u.refusal(&two, 10), Some(Enqueued::TooManyUnknown { waiting: 2, limit: 3 }));
        // One new fits (2 + 1 = 3); once stored, a has 3 and one more is refused.
        let one = BTreeMap::from([("a".to_string(), 1)]);
        assert_eq!(u.refusal(&one, 10), None);
        u.stored(&one);
        assert_eq!(u.refusal(&one, 10), Some(Enqueued::TooManyUnknown { waiting: 3, limit: 3 }));
        // Nothing new is never refused, and the share is at least 1.
        assert_eq!(waiting(100, &[]).refusal(&BTreeMap::<String, i64>::new(), 0), None);
        assert_eq!(unknown_share(1), 1);
    }
}
