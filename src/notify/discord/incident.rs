//! An incident at Discord: its summary posted once and edited in place (at most once per
//! [`SUMMARY_EDIT_INTERVAL`]) as jobs join, and each job's verdict folded into it. A
//! webhook cannot start a thread in a text channel, so the summary is where the jobs are
//! named: the first [`SUMMARY_NAMED`], and the jobs after them in digest posts, one a
//! minute at most ([`digest`]); a job's message appears only when there is news of its
//! own: a changed verdict (its culprit no longer the shared one) or "could not diagnose".

use std::time::Duration;

use serde_json::{Value, json};

use super::{Discord, Posted};
use crate::model::notice::{Notice, NoticeKind};
use crate::notify::digest;
use crate::notify::{NotifyError, Sent};
use crate::render::discord::{DIGEST_NAMED, SUMMARY_NAMED, incident_digest, incident_message};

/// Least time between two edits of one summary: a storm brings a summary notice per job,
/// and one edit every 3 s shows them all without spending the webhook's bucket (Discord
/// publishes no fixed number, <https://discord.com/developers/docs/topics/rate-limits>).
pub const SUMMARY_EDIT_INTERVAL: Duration = Duration::from_secs(3);

/// The key of a folded job's state: the summary's message id.
pub const IN_INCIDENT: &str = "in_incident";

impl Discord {
    /// The summary of the incident the delivery loop read into the notice: posted when
    /// the channel has none yet (`state` is the summary's), else edited when what it
    /// shows changed. Nothing is sent when the store no longer has the incident.
    pub(super) async fn send_incident(&self, notice: &Notice, state: Option<&Value>) -> Result<Sent, NotifyError> {
        let Some(incident) = &notice.incident_view else {
            tracing::info!(destination = %self.what(), "discord: the incident is no longer in the store; its summary stays as it is");
            return Ok(Sent { state: state.cloned() });
        };
        let now = jiff::Timestamp::now().as_millisecond();
        let shown =
            json!({ "jobs": incident.members.len(), "others": incident.others.len(), "last_ms": incident.last_ms });
        let m = incident_message(incident);
        let mut kept = match Posted::from_state(state) {
            Some(_) if state.and_then(|s| s.get("shown")) == Some(&shown) => state.cloned().unwrap_or_default(),
            Some(p) => {
                self.summary_edits.turn(&p.id).await;
                let mut s = self.edit_or_post(&p, &m, notice).await?.state();
                s["shown"] = shown;
                s
            }
            None => {
                let mut s = Posted { id: self.post(&m, notice).await?, embed: None }.state();
                s["shown"] = shown;
                // The summary names the first jobs; the rest of them now, in digests (a
                // deferral now would post the summary again).
                for range in digest::ranges(SUMMARY_NAMED, incident.members.len(), DIGEST_NAMED) {
                    self.post(&incident_digest(incident, range), notice).await?;
                }
                return Ok(Sent { state: Some(digest::posted(Some(&s), incident, now)) });
            }
        };
        for key in ["incident_shown", "incident_posted_ms"] {
            if let Some(v) = state.and_then(|s| s.get(key)).filter(|_| kept.get(key).is_none()) {
                kept[key] = v.clone();
            }
        }
        // The summary as edited names the first jobs itself.
        let in_summary = incident.members.len().min(SUMMARY_NAMED) as u64;
        let named = kept.get("incident_shown").and_then(Value::as_u64).unwrap_or(0).max(in_summary);
        kept["incident_shown"] = json!(named);
        // The jobs after the summary's: named in digests, one a minute at most (a deferral
        // after an edit makes the next attempt edit again, to the same content).
        match digest::step(notice, Some(&kept), now) {
            digest::Step::Keep => Ok(Sent { state: Some(kept) }),
            digest::Step::Later(after) => {
                Err(NotifyError::later("discord: the incident's next digest is not due", after))
            }
            digest::Step::Post { incident, shown } => {
                for range in digest::ranges(shown, incident.members.len(), DIGEST_NAMED) {
                    self.post(&incident_digest(incident, range), notice).await?;
                }
                Ok(Sent { state: Some(digest::posted(Some(&kept), incident, now)) })
            }
        }
    }

    /// A job's first verdict whose destination shows its incident's summary, posted
    /// already: folded into it (nothing posted), the summary's id kept as the job's
    /// state. `None`: the verdict is posted on its own.
    pub(super) fn fold_into_incident(notice: &Notice) -> Option<Sent> {
        let tag = notice.incident.as_ref().filter(|t| t.summary_here)?;
        if notice.kind != NoticeKind::Verdict || notice.is_revision() || notice.changed {
            return None;
        }
        let summary = Posted::from_state(notice.incident_parent.as_ref())?;
        tracing::debug!(incident = %tag.id, "discord: the verdict is folded into its incident's summary");
        Some(Sent { state: Some(json!({ IN_INCIDENT: summary.id })) })
    }

    /// Whether `state` is that of a job folded into a summary, and the notice brings no
    /// news of its own (a revision, the same verdict again, its resolution): nothing is sent.
    pub(super) fn stays_folded(notice: &Notice, state: Option<&Value>) -> bool {
        let folded = state.and_then(|s| s.get(IN_INCIDENT)).is_some() && Posted::from_state(state).is_none();
        folded && matches!(notice.kind, NoticeKind::Verdict | NoticeKind::Resolved) && !notice.changed
    }
}
