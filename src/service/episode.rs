//! One verdict per job per destination for one episode, however many alert groups carry it
//! (pure): the one place that decides what each destination gets of a finished diagnosis.
//!
//! An Alertmanager route with `group_by: ['...']`, `group_by` labels that split one job's
//! alerts (task, severity, alertname), job-level and task-level alerts, or several routes
//! with `continue: true` bring one job to culprit in several alert groups. What a
//! destination shows follows the job: its *episode* starts with the first group that
//! carries a verdict of the job while none did, and ends when the last group carrying it
//! resolves. Per destination, the episode is one `group_state` row
//! ([`crate::service::store::episode_row`]) holding an [`EpisodeState`] as JSON: the
//! decision shown ([`crate::service::verdict_key`]), the content shown ([`content_key`]:
//! confidence and numbers), the revision, the lead group (the one notices are addressed
//! under: PagerDuty's `dedup_key`), the thread (the key the episode's notices are delivered
//! in order and the destination's state is kept under) and every group that carried it.
//!
//! What a destination gets, per diagnosis:
//!
//! * no open episode, a group fires: the verdict (or "could not diagnose"), once, naming
//!   every firing group of the diagnosis;
//! * the decision changed: the verdict as `changed` (today's behaviour: Slack updates its
//!   message and says so in the thread; PagerDuty re-triggers; the webhook gets a new POST
//!   with a new idempotency key);
//! * same decision, other confidence or numbers: a *revision* ([`Notice::is_revision`]),
//!   shown in place (Slack `chat.update` alone, PagerDuty the same `dedup_key`, the webhook a
//!   new POST with the same `X-Culprit-Verdict-Ref` and the next `X-Culprit-Revision`);
//! * same decision, same content: nothing (Alertmanager: its alert again, to stay alive);
//! * another group now carries the verdict: [`NoticeKind::Joined`], naming it (after the
//!   verdict notice, when one goes out in the same diagnosis);
//! * a group resolves while others still fire: [`NoticeKind::GroupResolved`]; the verdict
//!   stays open;
//! * the last group resolves: [`NoticeKind::Resolved`] (with `service.notify_resolved`), and
//!   the episode is over: a later firing starts a new one, with a new post.
//!
//! Idempotency keys are derived from the stored state and the item, never from the
//! verdict's id or the time: a diagnosis replayed after a crash plans the same keys, and
//! the outbox stores each once.
//!
//! Episodes began by a build before this one (a group's `group_state` row holding a verdict
//! key) continue under that group's row: its thread, its Slack message.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model::notice::{Notice, NoticeEpisode, NoticeKind};
use crate::model::verdict::Verdict;
use crate::service::intake::sha256_hex;
use crate::service::store::{GroupInfo, NewNotice, Plan, Remember};
use crate::service::{NoticePlan, Outcome, RESOLVED, verdict_key};

/// What one destination was told of one job's episode (the episode row's `verdict_key`, as
/// JSON).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct EpisodeState {
    /// The decision shown last ([`verdict_key`], or a "could not diagnose" key), or
    /// [`RESOLVED`] once the episode ended.
    pub key: String,
    /// The content shown last ([`content_key`]); empty when unknown (an episode of an
    /// earlier build): then only a changed decision is posted.
    #[serde(default)]
    pub content: String,
    /// The revision of the decision shown (0: its first post).
    #[serde(default)]
    pub revision: u32,
    /// The group the episode's notices are addressed under.
    pub lead: String,
    /// The key the episode's notices are delivered under and the destination's state kept.
    pub thread: String,
    /// Every group that carried the verdict: whether it still fires.
    #[serde(default)]
    pub groups: BTreeMap<String, bool>,
    /// The labels the groups that opened the episode have in common.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// The idempotency key of the decision's first post.
    #[serde(default)]
    pub verdict_ref: String,
    /// Notices planned in this episode so far: part of every idempotency key, so that no
    /// two notices of one episode share one.
    #[serde(default)]
    pub seq: u64,
    /// The episode's number among the job's at this destination (0 first): part of its
    /// thread, so that no two episodes of a job share a thread or an idempotency key.
    #[serde(default)]
    pub number: u64,
}

impl EpisodeState {
    fn decode(raw: Option<String>) -> Option<EpisodeState> {
        serde_json::from_str(raw.as_deref()?).ok()
    }

    fn is_open(&self) -> bool {
        self.key != RESOLVED
    }

    fn firing(&self) -> Vec<String> {
        let mut out: Vec<String> = self.groups.iter().filter(|(_, f)| **f).map(|(g, _)| g.clone()).collect();
        // The lead first.
        out.sort_by_key(|g| *g != self.lead);
        out
    }
}

/// Significant digits a number must change in to be shown again: a reader does not see
/// busy 0.9893 → 0.9894 or 3.289 → 3.29 ms (a repeat notification of an unchanged job
/// gives such wiggles every time), but does see 600 → 700 records/s or parallelism 4 → 5.
const SHOWN_DIGITS: i32 = 2;

/// `v` to [`SHOWN_DIGITS`] significant digits.
fn shown(v: f64) -> f64 {
    if v == 0.0 || !v.is_finite() {
        return v;
    }
    let factor = 10f64.powi(SHOWN_DIGITS - 1 - v.abs().log10().floor() as i32);
    (v * factor).round() / factor
}

/// `text` with every number in it at [`SHOWN_DIGITS`] significant digits.
pub(super) fn shown_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut number = String::new();
    let flush = |number: &mut String, out: &mut String| {
        if !number.is_empty() {
            let token = number.trim_end_matches('.');
            match token.parse::<f64>() {
                Ok(v) => out.push_str(&shown(v).to_string()),
                Err(_) => out.push_str(token),
            }
            out.push_str(&number[token.len()..]);
            number.clear();
        }
    };
    for c in text.chars() {
        if c.is_ascii_digit() || (c == '.' && !number.is_empty() && !number.contains('.')) {
            number.push(c);
        } else {
            flush(&mut number, &mut out);
            out.push(c);
        }
    }
    flush(&mut number, &mut out);
    out
}

/// What a verdict shows besides its decision, as a reader sees it: confidence, the summary,
/// cause, fix and advice, hazards, the evidence and the steps, what was missing, with every
/// number at [`SHOWN_DIGITS`] significant digits. Not its time, window or graph. A verdict
/// whose decision is unchanged but whose content differs is shown again in place (a
/// revision); one that differs only in digits a reader does not see is not.
pub fn content_key(v: &Verdict) -> String {
    let texts = |xs: &[String]| xs.iter().map(|x| shown_text(x)).collect::<Vec<_>>();
    let hazards: Vec<_> = v
        .hazards
        .iter()
        .map(|h| (h.kind, h.severity, h.time_to_loss_seconds.map(|t| shown(t as f64)), &h.topic, shown_text(&h.detail)))
        .collect();
    let evidence: Vec<_> = v.evidence.iter().map(|e| (&e.subject, &e.metric, shown(e.value), &e.unit)).collect();
    let steps: Vec<_> = v.steps.iter().map(|s| (s.step, s.outcome, shown_text(&s.detail))).collect();
    sha256_hex(
        &serde_json::json!({
            "confidence": v.confidence, "summary": shown_text(&v.summary), "cause": shown_text(&v.cause),
            "fix": texts(&v.fix), "not_the_fix": texts(&v.not_the_fix), "advice": texts(&v.advice),
            "hazards": hazards, "evidence": evidence, "steps": steps, "missing": v.missing,
        })
        .to_string(),
    )
}

/// The episode a destination holds for the item's job before this diagnosis: its episode
/// row, else (an episode of an earlier build) the first of the item's groups whose own row
/// holds a verdict key. `None` when the destination shows nothing of the job.
pub fn open_episode(
    plan: &NoticePlan<'_>,
    destination: &str,
    last: &dyn Fn(&str, &str) -> Option<String>,
) -> Option<EpisodeState> {
    let row = plan.item.episode_row();
    if let Some(e) = EpisodeState::decode(last(destination, &row)) {
        return e.is_open().then_some(e);
    }
    let mut legacy: Option<EpisodeState> = None;
    for (g, info) in &plan.item.groups {
        let Some(key) = last(destination, g).filter(|k| k != RESOLVED) else { continue };
        match &mut legacy {
            None => {
                legacy = Some(EpisodeState {
                    key,
                    lead: g.clone(),
                    thread: g.clone(),
                    groups: [(g.clone(), true)].into_iter().collect(),
                    labels: info.labels.clone(),
                    ..Default::default()
                })
            }
            Some(e) => {
                e.groups.insert(g.clone(), true);
            }
        }
    }
    legacy
}

/// Whether `destination` was shown anything for `group` before this diagnosis (a group
/// that resolved with nothing shown anywhere resolved before it was diagnosed).
pub fn heard(
    plan: &NoticePlan<'_>,
    destination: &str,
    group: &str,
    last: &dyn Fn(&str, &str) -> Option<String>,
) -> bool {
    open_episode(plan, destination, last).is_some_and(|e| e.groups.get(group) == Some(&true))
}

/// The labels every one of these groups has, with the same value.
fn common_labels<'a>(groups: impl Iterator<Item = &'a GroupInfo>) -> BTreeMap<String, String> {
    let mut out: Option<BTreeMap<String, String>> = None;
    for g in groups {
        out = Some(match out {
            None => g.labels.clone(),
            Some(mut c) => {
                c.retain(|k, v| g.labels.get(k) == Some(v));
                c
            }
        });
    }
    out.unwrap_or_default()
}

/// The notices of a finished diagnosis for every destination, and what each destination's
/// episode row holds afterwards (see the module docs).
pub fn plan_notices(plan: &NoticePlan<'_>, last: &dyn Fn(&str, &str) -> Option<String>) -> Plan {
    let mut out = Plan::default();
    for (dest, refreshes) in plan.destinations {
        let (notices, state) = plan_destination(plan, dest, *refreshes, last);
        out.notices.extend(notices.into_iter().map(|n| NewNotice {
            destination: dest.clone(),
            notice: n,
            remember_verdict: None,
        }));
        if let Some(state) = state {
            let value = serde_json::to_string(&state).expect("an episode always serializes");
            out.remember.push(Remember { destination: dest.clone(), row: plan.item.episode_row(), value });
        }
    }
    out
}

/// The decision key and content key of an outcome.
fn keys(outcome: &Outcome<'_>) -> (String, String) {
    match outcome {
        Outcome::Verdict(v) => (verdict_key(v), content_key(v)),
        Outcome::CouldNotDiagnose(reason) => (format!("could-not-diagnose:{}", sha256_hex(reason)), String::new()),
    }
}

/// One destination's notices and its episode afterwards (`None`: nothing to remember).
fn plan_destination(
    plan: &NoticePlan<'_>,
    dest: &str,
    refreshes: bool,
    last: &dyn Fn(&str, &str) -> Option<String>,
) -> (Vec<Notice>, Option<EpisodeState>) {
    let item = plan.item;
    let firing: Vec<(&String, &GroupInfo)> = item.groups.iter().filter(|(_, i)| i.firing).collect();
    let resolved: Vec<(&String, &GroupInfo)> = item.groups.iter().filter(|(_, i)| !i.firing).collect();
    let (key, content) = keys(&plan.outcome);
    let mut notices = Vec::new();
    let mut e = match open_episode(plan, dest, last) {
        Some(e) => e,
        None if firing.is_empty() => return (notices, None),
        None => {
            // A new episode: its thread is its own (the episode's number after the one that
            // ended, and this diagnosis's id), so that it never updates the message of an
            // episode that ended nor repeats one of its idempotency keys.
            let number = EpisodeState::decode(last(dest, &item.episode_row())).map_or(0, |ended| ended.number + 1);
            let e = EpisodeState {
                key: key.clone(),
                content: content.clone(),
                lead: firing[0].0.clone(),
                thread: format!("{}\u{1f}{number}\u{1f}{}", item.episode_row(), item.id),
                number,
                groups: firing.iter().map(|(g, _)| ((*g).clone(), true)).collect(),
                labels: common_labels(firing.iter().map(|(_, i)| *i)),
                ..Default::default()
            };
            let mut e = e;
            let mut n = base(plan, &e, NoticeKind::Verdict, &e.lead.clone(), &e.labels.clone());
            fill_outcome(&mut n, &plan.outcome);
            n.idempotency_key = idem(dest, &mut e, "post", &key);
            e.verdict_ref = n.idempotency_key.clone();
            n.episode.verdict_ref = e.verdict_ref.clone();
            notices.push(n);
            return (notices, Some(e));
        }
    };
    let mut newly_resolved = Vec::new();
    for (g, _) in &resolved {
        if e.groups.get(*g) == Some(&true) {
            e.groups.insert((*g).clone(), false);
            newly_resolved.push(*g);
        }
    }
    if !firing.is_empty() {
        let joined: Vec<&(&String, &GroupInfo)> =
            firing.iter().filter(|(g, _)| e.groups.get(*g) != Some(&true)).collect();
        for (g, _) in &firing {
            e.groups.insert((*g).clone(), true);
        }
        if e.groups.get(&e.lead) != Some(&true) {
            e.lead = firing[0].0.clone();
        }
        let verdict = verdict_notice(plan, dest, refreshes, &mut e, &key, &content);
        notices.extend(verdict);
        // The destination shows the verdict already: each group new to it is tied to it,
        // named in its thread, whatever else this diagnosis changed.
        for (g, info) in joined {
            let mut n = base(plan, &e, NoticeKind::Joined, g, &info.labels);
            n.idempotency_key = idem(dest, &mut e, "joined", g);
            notices.push(n);
        }
    }
    let still_firing = e.groups.values().any(|f| *f);
    if !newly_resolved.is_empty() && !still_firing {
        if plan.notify_resolved {
            let (lead, labels) = (e.lead.clone(), e.labels.clone());
            let mut n = base(plan, &e, NoticeKind::Resolved, &lead, &labels);
            n.firing = false;
            n.verdict_id = None;
            n.verdict_url = None;
            n.idempotency_key = idem(dest, &mut e, RESOLVED, &lead);
            notices.push(n);
        }
        e.key = RESOLVED.to_string();
    } else if !newly_resolved.is_empty() {
        for g in newly_resolved {
            let labels = item.groups.get(g).map(|i| i.labels.clone()).unwrap_or_default();
            let mut n = base(plan, &e, NoticeKind::GroupResolved, g, &labels);
            n.firing = false;
            n.verdict_id = None;
            n.verdict_url = None;
            n.idempotency_key = idem(dest, &mut e, "group-resolved", g);
            notices.push(n);
        }
    }
    (notices, Some(e))
}

/// The verdict notice an open episode gets, if any: changed, a revision, or (a destination
/// that refreshes) the same again. Updates the episode.
fn verdict_notice(
    plan: &NoticePlan<'_>,
    dest: &str,
    refreshes: bool,
    e: &mut EpisodeState,
    key: &str,
    content: &str,
) -> Option<Notice> {
    let unchanged = e.key == key;
    let revised = unchanged && !content.is_empty() && !e.content.is_empty() && e.content != content;
    if unchanged && !revised && !refreshes {
        if e.content.is_empty() {
            e.content = content.to_string();
        }
        return None;
    }
    let (lead, labels) = (e.lead.clone(), e.labels.clone());
    let mut n = base(plan, e, NoticeKind::Verdict, &lead, &labels);
    fill_outcome(&mut n, &plan.outcome);
    if !unchanged {
        n.changed = true;
        e.key = key.to_string();
        e.revision = 0;
        n.idempotency_key = idem(dest, e, "changed", key);
        e.verdict_ref = n.idempotency_key.clone();
    } else if revised {
        e.revision += 1;
        n.idempotency_key = idem(dest, e, "revision", key);
    } else {
        n.idempotency_key = idem(dest, e, "refresh", key);
    }
    e.content = content.to_string();
    n.episode.revision = e.revision;
    n.episode.verdict_ref = e.verdict_ref.clone();
    Some(n)
}

/// A notice of the episode, addressed under `group`.
fn base(
    plan: &NoticePlan<'_>,
    e: &EpisodeState,
    kind: NoticeKind,
    group: &str,
    labels: &BTreeMap<String, String>,
) -> Notice {
    Notice {
        kind,
        group_key: group.to_string(),
        labels: labels.clone(),
        job: plan.job.clone(),
        verdict: None,
        verdict_id: plan.verdict_id,
        verdict_url: plan.verdict_url.clone(),
        reason: None,
        firing: true,
        changed: false,
        idempotency_key: String::new(),
        at_ms: plan.now_ms,
        links: alert_links(plan, group),
        episode: NoticeEpisode {
            thread: e.thread.clone(),
            groups: e.firing(),
            revision: e.revision,
            verdict_ref: e.verdict_ref.clone(),
        },
        maybe_repeat: false,
        incident: None,
        incident_view: None,
        incident_parent: None,
    }
}

/// The alert source's links (Grafana's silence, dashboard, panel) of `group`, else of the
/// first group of this diagnosis that has any: the lead group may not be in this work item.
fn alert_links(plan: &NoticePlan<'_>, group: &str) -> crate::model::notice::AlertLinks {
    let groups = &plan.item.groups;
    let own = groups.get(group).map(|i| &i.links).filter(|l| !l.is_empty());
    own.or_else(|| groups.values().map(|i| &i.links).find(|l| !l.is_empty())).cloned().unwrap_or_default()
}

fn fill_outcome(n: &mut Notice, outcome: &Outcome<'_>) {
    match outcome {
        Outcome::Verdict(v) => n.verdict = Some((*v).clone()),
        Outcome::CouldNotDiagnose(reason) => {
            n.kind = NoticeKind::CouldNotDiagnose;
            n.reason = Some(reason.to_string());
        }
    }
}

/// The next idempotency key of the episode: its destination, thread, what the notice is and
/// the episode's count of notices so far (which it advances).
fn idem(dest: &str, e: &mut EpisodeState, what: &str, about: &str) -> String {
    let key = sha256_hex(&format!("{dest}\u{1f}{}\u{1f}{what}\u{1f}{about}\u{1f}{}", e.thread, e.seq));
    e.seq += 1;
    key
}

#[cfg(test)]
#[path = "episode_tests.rs"]
mod tests;
