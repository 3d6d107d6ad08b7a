//! What the queue holds back for fairness and which diagnosis goes first, decided once
//! for both backends: the caps on diagnoses of unknown jobs, per sender
//! (`store.max_unknown_per_sender`) and in all ([`unknown_share`]); the claim class of a
//! diagnosis ([`claim_class`]); and, under a deep queue, whether a claim takes the newest
//! first diagnosis ([`newest_first`]). The backends count what waits in their tables and
//! keep `work.claim_class` up to date with [`claim_class`] at every write of a row's groups
//! or attempts; the decisions are here.
//!
//! # Claim order (both backends)
//!
//! Of the due diagnoses of jobs with none running (one running diagnosis per job):
//!
//! 1. known jobs (and unknown ones waiting longer than `store.unknown_max_wait`) before
//!    unknown ones: a flood of bogus job names never delays a real alert;
//! 2. by claim class: first diagnoses of firing groups ([`FIRST_DIAGNOSIS`]), then weak
//!    verdicts' follow-ups and retries ([`FOLLOW_UP`]), then work for resolved groups only
//!    ([`RESOLVED_ONLY`]);
//! 3. the sender whose turn came least recently (round robin);
//! 4. the earliest due, except every other claim under a deep queue (more due diagnoses
//!    than `service.concurrency`), which takes the newest due first diagnosis: a job whose
//!    webhook comes after a storm of hundreds is claimed within the next two claims, not
//!    after the storm. The limit: a job that arrives in the middle of a burst can be
//!    shadowed by newer ones (the newest-first claims take them first) and waits for the
//!    oldest-first claims to reach it. On PostgreSQL the alternation is over all replicas
//!    (a sequence); on SQLite over the one process.

use std::collections::BTreeMap;

use super::{Enqueued, GroupInfo};
use crate::config::StoreConfig;

/// Claim class of a first diagnosis of a firing group (a webhook asked): claimed first.
pub const FIRST_DIAGNOSIS: i64 = 0;
/// Claim class of a weak verdict's follow-up (every group a rediagnosis) or of a retry (an
/// attempt failed): after first diagnoses, which have no verdict at all yet.
pub const FOLLOW_UP: i64 = 1;
/// Claim class of work whose groups all resolved: last (nothing fires; its answer is a
/// resolution).
pub const RESOLVED_ONLY: i64 = 2;

/// The claim class of a diagnosis with these groups after `attempts` failed attempts
/// (`work.claim_class`): [`RESOLVED_ONLY`] when no group fires, else [`FOLLOW_UP`] when it
/// was tried before or every group is a follow-up's, else [`FIRST_DIAGNOSIS`].
pub fn claim_class(groups: &BTreeMap<String, GroupInfo>, attempts: i64) -> i64 {
    if !groups.values().any(|g| g.firing) {
        RESOLVED_ONLY
    } else if attempts > 0 || groups.values().all(|g| g.rediagnosis) {
        FOLLOW_UP
    } else {
        FIRST_DIAGNOSIS
    }
}

/// Whether `due` due diagnoses make a deep queue: more than `concurrency` (they cannot all
/// start now).
pub fn is_deep(due: i64, concurrency: i64) -> bool {
    due > concurrency
}

/// Whether the claim of turn `turn` (counted over claims under a deep queue) takes the
/// newest due first diagnosis rather than the oldest: every other one.
pub fn newest_first(turn: i64) -> bool {
    turn.rem_euclid(2) == 1
}

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

    fn group(firing: bool, rediagnosis: bool) -> GroupInfo {
        GroupInfo { firing, firing_set: "s".into(), labels: BTreeMap::new(), rediagnosis, links: Default::default() }
    }

    #[test]
    fn a_firing_webhook_is_a_first_diagnosis_a_retry_or_follow_up_comes_after_and_resolved_only_last() {
        let of = |groups: &[(&str, GroupInfo)]| -> BTreeMap<String, GroupInfo> {
            groups.iter().map(|(k, g)| (k.to_string(), g.clone())).collect()
        };
        let fresh = of(&[("g1", group(true, false))]);
        assert_eq!(claim_class(&fresh, 0), FIRST_DIAGNOSIS);
        assert_eq!(claim_class(&fresh, 1), FOLLOW_UP, "a retry");
        assert_eq!(claim_class(&of(&[("g1", group(true, true))]), 0), FOLLOW_UP, "a weak verdict's follow-up");
        // A webhook for another group joins a follow-up: someone asks now.
        assert_eq!(claim_class(&of(&[("g1", group(true, true)), ("g2", group(true, false))]), 0), FIRST_DIAGNOSIS);
        assert_eq!(claim_class(&of(&[("g1", group(false, false))]), 0), RESOLVED_ONLY);
        assert_eq!(claim_class(&of(&[("g1", group(false, false)), ("g2", group(true, false))]), 0), FIRST_DIAGNOSIS);
        assert_eq!(claim_class(&BTreeMap::new(), 0), RESOLVED_ONLY, "no group: nothing fires");
    }

    #[test]
    fn under_a_deep_queue_every_other_claim_takes_the_newest() {
        // service.concurrency 4: 5 due cannot all start.
        assert!(!is_deep(4, 4) && is_deep(5, 4));
        assert_eq!((0..4).map(newest_first).collect::<Vec<_>>(), [false, true, false, true]);
    }

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
