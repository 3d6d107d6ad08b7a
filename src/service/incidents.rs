//! Incidents in the service: a finished verdict is counted with the recent ones it shares a
//! cause with ([`crate::model::incident`]); when they make an incident, its notices carry
//! it (PagerDuty, Opsgenie and the others name the shared cause in the job's own event),
//! and every destination that takes summaries ([`NoticeKind::Incident`]: Slack) gets one
//! more notice under the incident's thread: the first posts the summary, each later one
//! shows it as the store has it then. The verdicts of the incident's jobs go into the
//! summary's thread there, after unrelated jobs' verdicts.
//!
//! Planning is pure (inside the completing transaction, from the rows it read); the
//! delivery loop fills in what the store holds at delivery ([`fill_for_delivery`]).

use std::time::Duration;

use crate::model::incident::{Incident, IncidentRules, Member, incident_of, incidents};
use crate::model::notice::{Notice, NoticeEpisode, NoticeIncident, NoticeKind};
use crate::model::verdict::{JobRef, Verdict};
use crate::service::store::{NewNotice, Plan, RecentMember, Store};

/// How long a verdict that goes into an incident's thread waits for the summary to be
/// posted at its destination (both are delivered by the same loop, the summary first;
/// with several sends at once the verdict can be claimed while the summary is on the
/// wire). After it, the verdict is posted on its own: late, never lost.
pub const SUMMARY_WAIT: Duration = Duration::from_secs(10);

/// Counts `verdict` (stored as `verdict_id` at `now_ms`) with the recent verdicts the
/// completing transaction read, and plans what its incident brings: the row to keep
/// ([`Plan::member`]), the incident on each of the job's verdict notices, and a summary
/// notice per destination that shows the verdict.
pub fn plan(
    planned: &mut Plan,
    verdict: &Verdict,
    verdict_id: i64,
    recent: &[RecentMember],
    rules: &IncidentRules,
    now_ms: i64,
) {
    let Some(member) = Member::of(verdict_id, now_ms, verdict) else { return };
    planned.member = serde_json::to_string(&member).ok();
    let mut all: Vec<Member> = recent
        .iter()
        .filter(|r| r.verdict_id != verdict_id)
        .filter_map(|r| serde_json::from_str(&r.member).ok())
        .collect();
    all.push(member);
    let Some(incident) = incident_of(verdict_id, &all, rules) else { return };
    let tag = NoticeIncident {
        id: incident.id.clone(),
        thread: incident.thread(),
        cause: incident.cause.clone(),
        jobs: incident.members.len(),
        summary_here: false,
    };
    let mut summaries = Vec::new();
    for n in planned.notices.iter_mut().filter(|n| n.notice.kind == NoticeKind::Verdict) {
        n.notice.incident = Some(tag.clone());
        if !n.notice.is_revision() && !summaries.iter().any(|s: &NewNotice| s.destination == n.destination) {
            summaries.push(NewNotice {
                destination: n.destination.clone(),
                notice: summary_notice(&tag, &verdict.job, verdict_id, &n.destination, now_ms),
                remember_verdict: None,
            });
        }
    }
    // The summary first: it is claimed before the verdict that goes into its thread.
    summaries.append(&mut planned.notices);
    planned.notices = summaries;
}

/// Marks the verdicts whose destination kept the incident's summary (after each
/// destination took what it wants of the plan): those go into the summary's thread.
pub fn mark_summaries(planned: &mut Plan) {
    let with_summary: Vec<(String, String)> = planned
        .notices
        .iter()
        .filter(|n| n.notice.kind == NoticeKind::Incident)
        .filter_map(|n| n.notice.incident.as_ref().map(|t| (n.destination.clone(), t.id.clone())))
        .collect();
    for n in planned.notices.iter_mut().filter(|n| n.notice.kind == NoticeKind::Verdict) {
        let destination = n.destination.clone();
        if let Some(tag) = n.notice.incident.as_mut() {
            tag.summary_here = with_summary.iter().any(|(d, id)| *d == destination && *id == tag.id);
        }
    }
}

/// The summary notice of `incident` for `destination`, planned by the verdict of
/// `verdict_id`: one per verdict joining, so that the summary shows every job.
fn summary_notice(tag: &NoticeIncident, job: &JobRef, verdict_id: i64, destination: &str, now_ms: i64) -> Notice {
    Notice {
        kind: NoticeKind::Incident,
        group_key: tag.thread.clone(),
        labels: Default::default(),
        job: job.clone(),
        verdict: None,
        verdict_id: Some(verdict_id),
        verdict_url: None,
        reason: None,
        firing: true,
        changed: false,
        idempotency_key: format!("{destination}\u{1f}{}\u{1f}joined\u{1f}{verdict_id}", tag.thread),
        at_ms: now_ms,
        links: Default::default(),
        episode: NoticeEpisode {
            thread: tag.thread.clone(),
            groups: Vec::new(),
            revision: 0,
            verdict_ref: String::new(),
        },
        maybe_repeat: false,
        incident: Some(tag.clone()),
        incident_view: None,
        incident_parent: None,
    }
}

/// The incidents of the verdicts stored within `lookback_ms` before `now_ms`, newest
/// first (`GET /api/v1/incidents`).
pub async fn recent(
    store: &Store,
    rules: &IncidentRules,
    now_ms: i64,
    lookback_ms: i64,
) -> Result<Vec<Incident>, String> {
    let rows = store.recent_members(now_ms - lookback_ms).await.map_err(|e| e.to_string())?;
    let members: Vec<Member> = rows.iter().filter_map(|r| serde_json::from_str(&r.member).ok()).collect();
    let mut found = incidents(&members, rules);
    found.reverse();
    Ok(found)
}

/// The `GET /api/v1/incidents` body: `{"enabled", "incidents": [{"id", "headline",
/// "cause", "jobs", "first_at", "last_at", "members": [...], "others": [...]}]}`, each
/// member `{"job", "verdict_id", "at", "finding", "culprit"}`.
pub fn listing(incidents: &[Incident], enabled: bool) -> serde_json::Value {
    let at = |ms: i64| jiff::Timestamp::from_millisecond(ms).map(|t| t.to_string()).unwrap_or_default();
    let member = |m: &Member| {
        serde_json::json!({ "job": m.job, "verdict_id": m.verdict_id, "at": at(m.at_ms), "finding": m.finding,
            "culprit": m.culprit })
    };
    let list: Vec<serde_json::Value> = incidents
        .iter()
        .map(|i| {
            serde_json::json!({
                "id": i.id,
                "headline": crate::render::incident::headline(i),
                "cause": i.cause,
                "jobs": i.members.len(),
                "first_at": at(i.first_ms),
                "last_at": at(i.last_ms),
                "members": i.members.iter().map(member).collect::<Vec<_>>(),
                "others": i.others.iter().map(member).collect::<Vec<_>>(),
            })
        })
        .collect();
    serde_json::json!({ "enabled": enabled, "incidents": list })
}

/// What a notice of an incident needs from the store at delivery: a summary, the
/// incident as it is now (`None`: it is gone from the store, nothing to show); a verdict
/// that goes into a summary's thread, the summary's state at `destination` (waited for up
/// to [`SUMMARY_WAIT`]) unless the job shows a message there already (`has_state`).
pub async fn fill_for_delivery(
    store: &Store,
    destination: &str,
    has_state: bool,
    notice: &mut Notice,
    rules: &IncidentRules,
    now_ms: i64,
    lookback_ms: i64,
) -> Result<(), String> {
    let Some(tag) = notice.incident.clone() else { return Ok(()) };
    match notice.kind {
        NoticeKind::Incident => {
            let all = recent(store, rules, now_ms, lookback_ms).await?;
            notice.incident_view = all.into_iter().find(|i| i.id == tag.id);
        }
        NoticeKind::Verdict if !notice.is_revision() && tag.summary_here && !has_state => {
            let started = tokio::time::Instant::now();
            loop {
                let state = store.thread_state(destination, &tag.thread).await.map_err(|e| e.to_string())?;
                if state.is_some() || started.elapsed() >= SUMMARY_WAIT {
                    notice.incident_parent = state;
                    break;
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        }
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::attribution::{Attribution, ExternalSystem};
    use crate::model::verdict::{Finding, Status};

    fn verdict(job: &str) -> Verdict {
        let capture = crate::samples::captures::CAPTURES.iter().find(|c| c.name == "slow-sink").unwrap();
        let mut v = crate::samples::captures::verdict(capture).unwrap();
        assert_eq!((v.status, v.finding), (Status::CulpritFound, Finding::Sink));
        v.job = JobRef { name: job.into(), id: String::new() };
        v.attribution = Some(Attribution {
            system: Some(ExternalSystem {
                connector: "elasticsearch".into(),
                target: Some("logs-*".into()),
                writes: true,
            }),
            ..Default::default()
        });
        v
    }

    fn row(id: i64, v: &Verdict) -> RecentMember {
        let m = Member::of(id, 1_000 + id, v).unwrap();
        RecentMember { verdict_id: id, created_ms: m.at_ms, member: serde_json::to_string(&m).unwrap() }
    }

    fn verdict_notice(dest: &str, v: &Verdict) -> NewNotice {
        let mut n = summary_notice(
            &NoticeIncident {
                id: String::new(),
                thread: "job-thread".into(),
                cause: Member::of(0, 0, v).unwrap().causes[0].clone(),
                jobs: 0,
                summary_here: false,
            },
            &v.job,
            0,
            dest,
            0,
        );
        n.kind = NoticeKind::Verdict;
        n.incident = None;
        n.verdict = Some(v.clone());
        NewNotice { destination: dest.into(), notice: n, remember_verdict: None }
    }

    const RULES: IncidentRules = IncidentRules { min_jobs: 5, window_ms: 60_000 };

    #[test]
    fn the_fifth_job_sharing_a_sink_system_brings_a_summary_before_its_verdict_at_each_destination() {
        let recent: Vec<RecentMember> = (1..=4).map(|i| row(i, &verdict(&format!("job-{i}")))).collect();
        let v = verdict("job-5");
        let mut planned =
            Plan { notices: vec![verdict_notice("slack", &v), verdict_notice("pagerduty", &v)], ..Default::default() };
        plan(&mut planned, &v, 5, &recent, &RULES, 1_010);
        let kinds: Vec<(&str, NoticeKind)> =
            planned.notices.iter().map(|n| (n.destination.as_str(), n.notice.kind)).collect();
        assert_eq!(
            kinds,
            vec![
                ("slack", NoticeKind::Incident),
                ("pagerduty", NoticeKind::Incident),
                ("slack", NoticeKind::Verdict),
                ("pagerduty", NoticeKind::Verdict)
            ]
        );
        let tag = planned.notices[2].notice.incident.clone().expect("the verdict carries its incident");
        assert_eq!((tag.jobs, tag.cause.name.as_str()), (5, "elasticsearch"));
        assert_eq!(planned.notices[0].notice.group_key, tag.thread);
        assert_ne!(planned.notices[0].notice.idempotency_key, planned.notices[1].notice.idempotency_key);
        let kept: Member = serde_json::from_str(planned.member.as_deref().unwrap()).unwrap();
        assert_eq!(kept.verdict_id, 5);
        // PagerDuty takes no summary: its verdict is not waiting for one.
        planned.notices.retain(|n| !(n.destination == "pagerduty" && n.notice.kind == NoticeKind::Incident));
        mark_summaries(&mut planned);
        let here = |d: &str| {
            planned
                .notices
                .iter()
                .find(|n| n.destination == d && n.notice.kind == NoticeKind::Verdict)
                .unwrap()
                .notice
                .incident
                .as_ref()
                .unwrap()
                .summary_here
        };
        assert!(here("slack") && !here("pagerduty"));
    }

    #[test]
    fn the_fourth_job_or_a_job_with_another_cause_plans_no_incident_but_keeps_its_row() {
        let recent: Vec<RecentMember> = (1..=3).map(|i| row(i, &verdict(&format!("job-{i}")))).collect();
        let v = verdict("job-4");
        let mut planned = Plan { notices: vec![verdict_notice("slack", &v)], ..Default::default() };
        plan(&mut planned, &v, 4, &recent, &RULES, 1_010);
        assert_eq!(planned.notices.len(), 1);
        assert!(planned.notices[0].notice.incident.is_none());
        assert!(planned.member.is_some(), "counted by the verdicts after it");
    }
}
