//! An incident where the destination can neither edit a message nor thread under one
//! (Teams and Mattermost incoming webhooks, email): a digest.
//!
//! * The first summary notice of the incident posts the summary as it is then (the jobs
//!   so far, those that do not fit).
//! * Each job's verdict counted in it after that is folded: nothing is posted for it
//!   ([`fold`]); its revisions and resolution post nothing either ([`stays_folded`]); news
//!   of its own (a changed verdict, "could not diagnose") is posted as usual.
//! * Each later summary notice posts the jobs counted since the last post, at most once
//!   per [`DIGEST_INTERVAL`]: sooner, it is deferred to the end of the interval
//!   ([`crate::notify::NotifyError::later`]) and then names every job counted by then, so
//!   the last jobs of a storm are named within a minute and a storm of 300 is a handful
//!   of posts. A step names all the jobs it counts, in as many posts as the medium's size
//!   needs ([`ranges`]): a folded job is always named, never only counted.
//! * A job is folded only once the summary is posted at the destination. A post that
//!   fails after the first of a step's posts went makes the step post them all again
//!   (a repeat, never a loss).
//!
//! The decisions here are pure; each destination renders and posts.

use std::time::Duration;

use serde_json::{Value, json};

use crate::model::incident::Incident;
use crate::model::notice::{Notice, NoticeKind};
use crate::notify::{NotifyError, Sent};

/// Jobs one post names at Teams and Mattermost: names cut to
/// [`crate::render::incident::DIGEST_NAME_CHARS`], even with
/// every character escaped (50 × about 250) a post stays under Teams' 28 KB card and
/// Mattermost's 16,383-character post.
pub const NAMED_PER_POST: usize = 50;

/// Least time between two posts of one incident's digest.
pub const DIGEST_INTERVAL: Duration = Duration::from_secs(60);

/// The state's keys: jobs the channel was shown, when the last digest was posted (Unix ms).
const SHOWN: &str = "incident_shown";
const POSTED: &str = "incident_posted_ms";

/// The key of a folded job's state: the incident's thread key.
pub const IN_INCIDENT: &str = "in_incident";

/// The posts of one step: consecutive ranges of `members` from `shown` to `members`, at
/// most `per_post` jobs each (the medium's size: a name is never only counted).
pub fn ranges(shown: usize, members: usize, per_post: usize) -> Vec<(usize, usize)> {
    let per_post = per_post.max(1);
    (shown..members).step_by(per_post).map(|from| (from, (from + per_post).min(members))).collect()
}

/// What to do with an incident's summary notice.
#[derive(Debug, PartialEq)]
pub enum Step<'a> {
    /// Post the incident; `shown` of its jobs (the first ones) were posted before (0: the
    /// summary itself).
    Post { incident: &'a Incident, shown: usize },
    /// Nothing new to show (or the incident is gone from the store): keep the state.
    Keep,
    /// Too soon after the last post: give the notice again after this long.
    Later(Duration),
}

/// The step for a summary notice at `now_ms`, with the destination's `state` of the
/// incident (`None`: nothing posted yet).
pub fn step<'a>(notice: &'a Notice, state: Option<&Value>, now_ms: i64) -> Step<'a> {
    let Some(incident) = &notice.incident_view else { return Step::Keep };
    let shown = state.and_then(|s| s.get(SHOWN)).and_then(Value::as_u64).map(|n| n as usize);
    let Some(shown) = shown else { return Step::Post { incident, shown: 0 } };
    if incident.members.len() <= shown {
        return Step::Keep;
    }
    let posted = state.and_then(|s| s.get(POSTED)).and_then(Value::as_i64).unwrap_or(0);
    let due = posted.saturating_add(DIGEST_INTERVAL.as_millis() as i64);
    if now_ms < due {
        return Step::Later(Duration::from_millis((due - now_ms) as u64));
    }
    Step::Post { incident, shown }
}

/// An incident's summary notice at a destination that posts each range of jobs with
/// `post` ([`NAMED_PER_POST`] a post): the whole step ([`step`], [`ranges`], [`posted`]),
/// `what` naming the destination in a deferral.
pub async fn send_step<F, Fut>(
    notice: &Notice,
    state: Option<&Value>,
    what: &str,
    mut post: F,
) -> Result<Sent, NotifyError>
where
    F: FnMut(&Incident, (usize, usize)) -> Fut,
    Fut: std::future::Future<Output = Result<(), NotifyError>>,
{
    let now = jiff::Timestamp::now().as_millisecond();
    match step(notice, state, now) {
        Step::Keep => Ok(Sent { state: state.cloned() }),
        Step::Later(after) => Err(NotifyError::later(format!("{what}: the incident's next digest is not due"), after)),
        Step::Post { incident, shown } => {
            for range in ranges(shown, incident.members.len(), NAMED_PER_POST) {
                post(incident, range).await?;
            }
            Ok(Sent { state: Some(posted(state, incident, now)) })
        }
    }
}

/// The state after posting `incident` at `now_ms`, keeping what else `state` held.
pub fn posted(state: Option<&Value>, incident: &Incident, now_ms: i64) -> Value {
    let mut s = state.filter(|s| s.is_object()).cloned().unwrap_or_else(|| json!({}));
    s[SHOWN] = json!(incident.members.len());
    s[POSTED] = json!(now_ms);
    s
}

/// A job's first verdict counted in an incident whose summary this destination shows:
/// folded (the summary or a digest names it), `Some` of the state to keep; `None`: the
/// notice is posted as usual.
///
/// Only once the summary is posted here (`incident_parent`, read by the delivery loop):
/// a summary that could not be posted names nobody, so the verdict goes out on its own.
pub fn fold(notice: &Notice, state: Option<&Value>) -> Option<Sent> {
    let tag = notice.incident.as_ref().filter(|t| t.summary_here)?;
    if state.is_some() || notice.kind != NoticeKind::Verdict || notice.is_revision() || notice.changed {
        return None;
    }
    notice.incident_parent.as_ref()?;
    Some(Sent { state: Some(json!({ IN_INCIDENT: tag.thread })) })
}

/// Whether a notice of a folded job brings no news of its own (a revision, the same
/// verdict again, its resolution): nothing is posted, the state is kept.
pub fn stays_folded(notice: &Notice, state: Option<&Value>) -> bool {
    let folded = state.and_then(|s| s.get(IN_INCIDENT)).is_some();
    folded && matches!(notice.kind, NoticeKind::Verdict | NoticeKind::Resolved) && !notice.changed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::incident::{Cause, CauseKind, Member};
    use crate::model::notice::{NoticeEpisode, NoticeIncident};
    use crate::model::verdict::{Finding, JobRef};

    fn incident(jobs: i64) -> Incident {
        let cause = Cause {
            kind: CauseKind::System,
            name: "elasticsearch".into(),
            target: Some("logs-*".into()),
            writes: true,
            finding: Finding::Sink,
        };
        let member = |i: i64| Member {
            verdict_id: i,
            at_ms: i,
            job: JobRef { name: format!("job-{i}"), id: String::new() },
            finding: Finding::Sink,
            culprit: None,
            causes: vec![cause.clone()],
        };
        let members = (1..=jobs).map(member).collect();
        Incident { id: "1".into(), cause, members, others: vec![], first_ms: 1, last_ms: jobs }
    }

    fn notice(kind: NoticeKind, view: Option<Incident>) -> Notice {
        Notice {
            kind,
            group_key: "incident:1".into(),
            labels: Default::default(),
            job: JobRef { name: "j".into(), id: String::new() },
            verdict: None,
            verdict_id: Some(1),
            verdict_url: None,
            reason: None,
            firing: true,
            changed: false,
            idempotency_key: "k".into(),
            at_ms: 0,
            links: Default::default(),
            episode: NoticeEpisode::default(),
            maybe_repeat: false,
            incident: Some(NoticeIncident {
                id: "1".into(),
                thread: "incident:1".into(),
                cause: incident(1).cause,
                jobs: 5,
                summary_here: true,
            }),
            incident_view: view,
            incident_parent: None,
        }
    }

    #[test]
    fn the_summary_posts_at_once_then_a_digest_of_the_new_jobs_at_most_once_a_minute() {
        let five = notice(NoticeKind::Incident, Some(incident(5)));
        assert_eq!(step(&five, None, 1_000), Step::Post { incident: five.incident_view.as_ref().unwrap(), shown: 0 });
        let state = posted(None, &incident(5), 1_000);
        // The same five: nothing. Seven, 20 s later: deferred to 60 s after the post
        // (61_000 − 21_000 = 40 s); at 61 s: the two new ones.
        assert_eq!(step(&five, Some(&state), 21_000), Step::Keep);
        let seven = notice(NoticeKind::Incident, Some(incident(7)));
        assert_eq!(step(&seven, Some(&state), 21_000), Step::Later(Duration::from_secs(40)));
        assert_eq!(
            step(&seven, Some(&state), 61_000),
            Step::Post { incident: seven.incident_view.as_ref().unwrap(), shown: 5 }
        );
        assert_eq!(posted(Some(&state), &incident(7), 61_000)["incident_shown"], 7);
        // The incident gone from the store: nothing.
        assert_eq!(step(&notice(NoticeKind::Incident, None), None, 0), Step::Keep);
    }

    #[test]
    fn a_step_names_every_job_it_counts_in_posts_of_the_mediums_size() {
        // 5 shown of 230, 100 a post: 5..105, 105..205, 205..230.
        assert_eq!(ranges(5, 230, 100), vec![(5, 105), (105, 205), (205, 230)]);
        assert_eq!(ranges(0, 5, 100), vec![(0, 5)]);
        assert!(ranges(7, 7, 100).is_empty());
        assert_eq!(ranges(0, 2, 0), vec![(0, 1), (1, 2)], "never zero a post");
    }

    #[test]
    fn a_counted_jobs_verdict_folds_and_only_news_of_its_own_is_posted_after() {
        let mut verdict = notice(NoticeKind::Verdict, None);
        assert!(fold(&verdict, None).is_none(), "no summary posted here: posted on its own");
        verdict.incident_parent = Some(json!({ "incident_shown": 5 }));
        let folded = fold(&verdict, None).unwrap().state.unwrap();
        assert_eq!(folded["in_incident"], "incident:1");
        assert!(fold(&verdict, Some(&folded)).is_none(), "a job with a message of its own is not folded");
        assert!(fold(&Notice { changed: true, ..verdict.clone() }, None).is_none());
        assert!(fold(&Notice { incident: None, ..verdict.clone() }, None).is_none());
        assert!(stays_folded(&verdict, Some(&folded)));
        assert!(stays_folded(&notice(NoticeKind::Resolved, None), Some(&folded)));
        assert!(!stays_folded(&Notice { changed: true, ..verdict.clone() }, Some(&folded)));
        assert!(!stays_folded(&notice(NoticeKind::CouldNotDiagnose, None), Some(&folded)));
        assert!(!stays_folded(&verdict, None));
    }
}
