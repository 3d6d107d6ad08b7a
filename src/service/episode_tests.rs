//! The episode planner: one verdict per job per destination, however many alert groups
//! carry it; the latest verdict shown in place.

use std::collections::BTreeMap;

use super::*;
use crate::model::verdict::{Confidence, JobRef};
use crate::service::store::{GroupInfo, LastVerdicts, WorkItem};

fn verdict() -> Verdict {
    crate::samples::captures::verdict(&crate::samples::captures::CAPTURES[0]).unwrap()
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// A work item of job `j` with these groups (firing or not); each group's labels are the
/// job's plus `task_name` = the group's name.
fn item_with(id: i64, groups: &[(&str, bool)]) -> WorkItem {
    WorkItem {
        id,
        job_key: "id:j".into(),
        job: "j".into(),
        labels: BTreeMap::new(),
        groups: groups
            .iter()
            .map(|(g, f)| {
                let labels = labels(&[("job_id", "j"), ("task_name", g)]);
                (
                    g.to_string(),
                    GroupInfo {
                        firing: *f,
                        firing_set: "s".into(),
                        labels,
                        rediagnosis: false,
                        links: Default::default(),
                    },
                )
            })
            .collect(),
        created_ms: 0,
        attempts: 0,
        first_failure_ms: None,
        known: true,
    }
}

fn item(groups: &[(&str, bool)]) -> WorkItem {
    item_with(7, groups)
}

fn dests() -> Vec<(String, bool)> {
    vec![("slack".into(), false), ("alertmanager".into(), true)]
}

fn job() -> JobRef {
    JobRef { name: "j".into(), id: "i".into() }
}

/// Plans the notices of verdict `v` for one group `g` (firing or not), given the
/// last verdict each destination holds.
fn plan(
    v: &Verdict,
    firing: bool,
    verdict_id: Option<i64>,
    last: &dyn Fn(&str, &str) -> Option<String>,
) -> Vec<NewNotice> {
    let (item, job, dests) = (item(&[("g", firing)]), job(), dests());
    let plan = NoticePlan {
        item: &item,
        outcome: Outcome::Verdict(v),
        job: &job,
        destinations: &dests,
        verdict_id,
        verdict_url: None,
        notify_resolved: true,
        now_ms: 5,
    };
    plan_notices(&plan, last).notices
}

/// The store as the planner sees it: each (destination, row)'s verdict key, and each
/// completion's remembered rows written back, as the completing transaction does.
#[derive(Default)]
struct Rows(LastVerdicts);

impl Rows {
    /// One finished diagnosis of `item` with verdict `v` (or none: resolved-only work).
    fn finish(&mut self, item: &WorkItem, v: Option<&Verdict>) -> Vec<NewNotice> {
        let (job, dests) = (job(), dests());
        let plan = NoticePlan {
            item,
            outcome: v.map_or(Outcome::CouldNotDiagnose(""), Outcome::Verdict),
            job: &job,
            destinations: &dests,
            verdict_id: Some(item.id),
            verdict_url: None,
            notify_resolved: true,
            now_ms: 5,
        };
        let last = self.0.clone();
        let mut out = plan_notices(&plan, &|d: &str, g: &str| last.get(d, g));
        if v.is_none() {
            out.notices.retain(|n| matches!(n.notice.kind, NoticeKind::Resolved | NoticeKind::GroupResolved));
        }
        for r in out.remember {
            self.0.0.insert((r.destination, r.row), r.value);
        }
        out.notices
    }
}

fn to<'a>(notices: &'a [NewNotice], dest: &str) -> Vec<&'a Notice> {
    notices.iter().filter(|n| n.destination == dest).map(|n| &n.notice).collect()
}

#[test]
fn a_first_verdict_goes_to_every_destination_and_is_remembered() {
    let v = verdict();
    let mut rows = Rows::default();
    let n = rows.finish(&item(&[("g", true)]), Some(&v));
    assert_eq!(n.len(), 2);
    assert!(n.iter().all(|x| x.notice.kind == NoticeKind::Verdict && !x.notice.changed));
    let row = rows.0.get("slack", &item(&[]).episode_row()).expect("the episode is remembered");
    let e: EpisodeState = serde_json::from_str(&row).unwrap();
    assert_eq!((e.key, e.lead.as_str(), e.revision), (verdict_key(&v), "g", 0));
}

#[test]
fn a_repeat_with_an_unchanged_verdict_posts_nothing_but_refreshes_the_alertmanager_alert() {
    let v = verdict();
    let key = verdict_key(&v);
    // An episode of an earlier build: the group's own row holds the key.
    let n = plan(&v, true, None, &|_, _| Some(key.clone()));
    let d: Vec<&str> = n.iter().map(|x| x.destination.as_str()).collect();
    assert_eq!(d, ["alertmanager"]);
    // The same through an episode row.
    let mut rows = Rows::default();
    rows.finish(&item(&[("g", true)]), Some(&v));
    let again = rows.finish(&item_with(8, &[("g", true)]), Some(&v));
    let d: Vec<&str> = again.iter().map(|x| x.destination.as_str()).collect();
    assert_eq!(d, ["alertmanager"]);
}

#[test]
fn a_changed_verdict_is_posted_as_changed_with_a_new_idempotency_key() {
    let v = verdict();
    let first = plan(&v, true, None, &|_, _| None);
    let changed = plan(&v, true, None, &|_, _| Some("older".into()));
    assert!(changed[0].notice.changed);
    assert_ne!(first[0].notice.idempotency_key, changed[0].notice.idempotency_key);
}

#[test]
fn replaying_the_same_diagnosis_gives_the_same_idempotency_keys() {
    // A replay (after a crash) runs later and stores the verdict again under a new id:
    // the keys must not depend on either, and the notices carry the replay's own.
    let (v, item, job, dests) = (verdict(), item(&[("g", true)]), job(), dests());
    let plan_at = |verdict_id: i64, now_ms: i64| {
        let plan = NoticePlan {
            item: &item,
            outcome: Outcome::Verdict(&v),
            job: &job,
            destinations: &dests,
            verdict_id: Some(verdict_id),
            verdict_url: None,
            notify_resolved: true,
            now_ms,
        };
        plan_notices(&plan, &|_, _| None)
    };
    let (first, replay) = (plan_at(3, 5), plan_at(4, 60_005));
    let keys = |n: &[NewNotice]| n.iter().map(|x| x.notice.idempotency_key.clone()).collect::<Vec<_>>();
    assert_eq!(keys(&first.notices), keys(&replay.notices));
    assert_eq!(first.remember, replay.remember);
    assert_eq!(first.notices.len(), 2);
    assert!(replay.notices.iter().all(|x| x.notice.verdict_id == Some(4) && x.notice.at_ms == 60_005));
    // Two destinations, two keys: the key names its destination.
    assert_ne!(first.notices[0].notice.idempotency_key, first.notices[1].notice.idempotency_key);
}

#[test]
fn a_resolved_group_gets_one_resolved_notice_only_if_it_had_a_verdict() {
    let v = verdict();
    let n = plan(&v, false, None, &|_, _| Some("k".into()));
    assert!(n.iter().all(|x| x.notice.kind == NoticeKind::Resolved) && n.len() == 2);
    let none = plan(&v, false, None, &|_, _| None);
    assert!(none.is_empty());
    let again = plan(&v, false, None, &|_, _| Some(RESOLVED.into()));
    assert!(again.is_empty());
}

#[test]
fn three_groups_of_one_job_in_one_diagnosis_give_one_notice_per_destination_naming_all_three() {
    // group_by: ['...']: the job-level alert and two task-level ones, each its own group,
    // coalesced into one diagnosis.
    let v = verdict();
    let mut rows = Rows::default();
    let n = rows.finish(&item(&[("job", true), ("task-a", true), ("task-b", true)]), Some(&v));
    for d in ["slack", "alertmanager"] {
        let got = to(&n, d);
        assert_eq!(got.len(), 1, "{d}: one verdict for the job");
        // The lead is the first group (by groupKey), and every group is named.
        assert_eq!(got[0].group_key, "job");
        assert_eq!(got[0].episode.groups, ["job", "task-a", "task-b"]);
        // The labels the three have in common: not one task's.
        assert_eq!(got[0].labels, labels(&[("job_id", "j")]));
    }
}

#[test]
fn a_group_that_joins_later_with_the_same_verdict_is_tied_to_it_never_a_second_verdict() {
    let v = verdict();
    let mut rows = Rows::default();
    let first = rows.finish(&item_with(1, &[("job", true)]), Some(&v));
    let joined = rows.finish(&item_with(2, &[("task-a", true)]), Some(&v));
    let slack = to(&joined, "slack");
    assert_eq!(slack.len(), 1);
    assert_eq!((slack[0].kind, slack[0].group_key.as_str()), (NoticeKind::Joined, "task-a"));
    // In the verdict's thread, as its lead's.
    assert_eq!(slack[0].thread_key(), to(&first, "slack")[0].thread_key());
    assert_eq!(slack[0].episode.groups, ["job", "task-a"]);
    // Alertmanager's alert is refreshed under the lead and lists both groups (the Joined
    // notice planned for it too is one it does not take: `wants`).
    let am: Vec<&Notice> = to(&joined, "alertmanager").into_iter().filter(|n| n.kind != NoticeKind::Joined).collect();
    assert_eq!(am.len(), 1);
    assert_eq!((am[0].kind, am[0].group_key.as_str()), (NoticeKind::Verdict, "job"));
    assert_eq!(am[0].episode.groups, ["job", "task-a"]);
    // The same group again (Alertmanager's repeat): nothing new for Slack.
    let repeat = rows.finish(&item_with(3, &[("task-a", true)]), Some(&v));
    assert!(to(&repeat, "slack").is_empty());
}

#[test]
fn the_shared_verdict_resolves_with_the_last_group_carrying_it_not_before() {
    let v = verdict();
    let mut rows = Rows::default();
    rows.finish(&item_with(1, &[("job", true), ("task-a", true), ("task-b", true)]), Some(&v));
    // The lead resolves while two others fire: the verdict stays open, the thread says so.
    let one = rows.finish(&item_with(2, &[("job", false)]), None);
    let slack = to(&one, "slack");
    assert_eq!(slack.len(), 1);
    assert_eq!((slack[0].kind, slack[0].group_key.as_str()), (NoticeKind::GroupResolved, "job"));
    assert_eq!(slack[0].episode.groups, ["task-a", "task-b"]);
    let two = rows.finish(&item_with(3, &[("task-a", false)]), None);
    assert_eq!(to(&two, "slack")[0].kind, NoticeKind::GroupResolved);
    // The last one: the verdict resolves, once per destination.
    let last = rows.finish(&item_with(4, &[("task-b", false)]), None);
    for d in ["slack", "alertmanager"] {
        let got = to(&last, d);
        assert_eq!(got.len(), 1, "{d}");
        assert_eq!(got[0].kind, NoticeKind::Resolved);
    }
    // A repeat of the resolved webhook: nothing.
    assert!(rows.finish(&item_with(5, &[("task-b", false)]), None).is_empty());
    // Firing again later is a new episode: a new post, in a new thread.
    let again = rows.finish(&item_with(6, &[("task-a", true)]), Some(&v));
    let slack = to(&again, "slack");
    assert_eq!((slack[0].kind, slack[0].changed), (NoticeKind::Verdict, false));
    assert!(slack[0].thread_key().ends_with("\u{1f}1\u{1f}6"), "{:?}", slack[0].thread_key());
}

#[test]
fn a_follow_up_with_higher_confidence_is_a_revision_of_the_same_verdict_for_every_destination() {
    let mut weak = verdict();
    weak.confidence = Confidence::Medium;
    let mut firm = weak.clone();
    firm.confidence = Confidence::High;
    // Same culprit, finding, status and hazards: the same decision.
    assert_eq!(verdict_key(&weak), verdict_key(&firm));
    let mut rows = Rows::default();
    let first = rows.finish(&item_with(1, &[("job", true)]), Some(&weak));
    let follow_up = rows.finish(&item_with(1, &[("job", true)]), Some(&firm));
    for d in ["slack", "alertmanager"] {
        let (a, b) = (to(&first, d)[0], to(&follow_up, d)[0]);
        assert!(b.is_revision(), "{d}: shown in place");
        assert_eq!((b.episode.revision, b.changed), (1, false));
        assert_eq!(b.verdict.as_ref().map(|v| v.confidence), Some(Confidence::High));
        // The same verdict, another notice.
        assert_eq!(b.episode.verdict_ref, a.idempotency_key);
        assert_ne!(b.idempotency_key, a.idempotency_key);
        assert_eq!(b.thread_key(), a.thread_key());
    }
    // The same again: nothing for Slack (Alertmanager refreshes, still revision 1).
    let same = rows.finish(&item_with(2, &[("job", true)]), Some(&firm));
    assert!(to(&same, "slack").is_empty());
    assert_eq!(to(&same, "alertmanager")[0].episode.revision, 1);
}

/// `v` with every evidence value and the numbers of its summary scaled by `factor`.
fn scaled(v: &Verdict, factor: f64) -> Verdict {
    let mut out = v.clone();
    for e in &mut out.evidence {
        e.value *= factor;
    }
    out.summary = format!("{} ({} records/s)", v.summary, 1830.0 * factor);
    out
}

#[test]
fn a_repeat_whose_numbers_move_only_in_digits_a_reader_does_not_see_is_no_revision() {
    // A tester's repeat notifications of an unchanged job: busy 0.9893 → 0.9894, 3.289 →
    // 3.29 ms. A factor of 1.0001 moves the 4th or 5th significant digit: at 2 digits
    // (1830 → 1800, 0.9893 → 0.99) nothing a reader sees has changed.
    let v = scaled(&verdict(), 1.0);
    let mut rows = Rows::default();
    rows.finish(&item_with(1, &[("job", true)]), Some(&v));
    let repeat = rows.finish(&item_with(2, &[("job", true)]), Some(&scaled(&verdict(), 1.0001)));
    assert!(to(&repeat, "slack").is_empty(), "{:?}", to(&repeat, "slack"));
    assert_eq!(to(&repeat, "alertmanager")[0].episode.revision, 0, "refreshed, not revised");
    // 1830 → 2196 records/s (× 1.2) is seen: 1800 → 2200 at 2 digits.
    let moved = rows.finish(&item_with(3, &[("job", true)]), Some(&scaled(&verdict(), 1.2)));
    assert!(to(&moved, "slack")[0].is_revision());
}

#[test]
fn numbers_in_text_are_compared_at_two_significant_digits() {
    assert_eq!(
        shown_text("busy 0.9893, 3.289 ms per record, 195000 records, parallelism 2 to 4."),
        "busy 0.99, 3.3 ms per record, 200000 records, parallelism 2 to 4."
    );
    assert_eq!(shown_text("v1.20 at 11:13:15Z"), "v1.2 at 11:13:15Z");
}

#[test]
fn a_changed_culprit_is_a_changed_verdict_with_a_new_verdict_ref() {
    let v = verdict();
    let mut other = v.clone();
    other.culprit.as_mut().expect("the first capture has a culprit").vertex_id = "another-vertex".into();
    let mut rows = Rows::default();
    let first = rows.finish(&item_with(1, &[("job", true)]), Some(&v));
    let changed = rows.finish(&item_with(2, &[("job", true)]), Some(&other));
    let (a, b) = (to(&first, "slack")[0], to(&changed, "slack")[0]);
    assert!(b.changed && !b.is_revision());
    assert_eq!(b.episode.revision, 0);
    assert_eq!(b.episode.verdict_ref, b.idempotency_key);
    assert_ne!(b.episode.verdict_ref, a.episode.verdict_ref);
    assert_eq!(b.thread_key(), a.thread_key());
}

#[test]
fn a_new_episode_never_repeats_a_key_of_an_ended_one_even_under_the_same_diagnosis_id() {
    // SQLite may give a new work row the id of a deleted one: the episode's number keeps
    // the thread and every key new.
    let v = verdict();
    let mut rows = Rows::default();
    let first = rows.finish(&item_with(1, &[("g", true)]), Some(&v));
    rows.finish(&item_with(2, &[("g", false)]), None);
    let again = rows.finish(&item_with(1, &[("g", true)]), Some(&v));
    let (a, b) = (to(&first, "slack")[0], to(&again, "slack")[0]);
    assert_ne!(a.thread_key(), b.thread_key());
    assert_ne!(a.idempotency_key, b.idempotency_key);
}

#[test]
fn an_episode_of_an_earlier_build_continues_under_its_group() {
    // 0.1.x kept a verdict key per (destination, group) and the Slack message under the
    // group: a group joining the job now replies there.
    let v = verdict();
    let mut rows = Rows::default();
    rows.0.0.insert(("slack".into(), "job".into()), verdict_key(&v));
    let n = rows.finish(&item(&[("job", true), ("task-a", true)]), Some(&v));
    let slack = to(&n, "slack");
    assert_eq!(slack.len(), 1);
    assert_eq!((slack[0].kind, slack[0].thread_key()), (NoticeKind::Joined, "job"));
}
