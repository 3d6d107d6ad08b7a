//! An incident at Slack (`web_api` mode): its summary posted once to the channel and kept
//! up to date in place (`chat.update`, at most once per [`INCIDENT_UPDATE_INTERVAL`] per
//! summary), and each job's verdict as a reply in the summary's thread instead of a
//! top-level message.

use std::time::Duration;

use serde_json::{Value, json};

use super::{GONE_ERRORS, Parent, Slack};
use crate::model::notice::Notice;
use crate::notify::{NotifyError, Sent};
use crate::render::slack::{SlackMessage, incident_message, incident_metadata};

/// Least time between two updates of one summary. `chat.update` is a Tier 3 method
/// (50+ calls a minute per workspace,
/// <https://api.slack.com/methods/chat.update>, <https://api.slack.com/docs/rate-limits>):
/// one summary takes at most 20 a minute, leaving the rest to the verdicts' own updates.
pub const INCIDENT_UPDATE_INTERVAL: Duration = Duration::from_secs(3);

impl Slack {
    /// The summary of the incident the delivery loop read into the notice: posted when
    /// the channel has none yet (`state` is the summary's), else updated when what it
    /// shows changed. Nothing is sent when the store no longer has the incident.
    pub(super) async fn send_incident(
        &self,
        channel: &str,
        notice: &Notice,
        state: Option<&Value>,
    ) -> Result<Sent, NotifyError> {
        let Some(incident) = &notice.incident_view else {
            tracing::info!(
                destination = "slack",
                "slack: the incident is no longer in the store; its summary stays as it is"
            );
            return Ok(Sent { state: state.cloned() });
        };
        let msg = incident_message(incident);
        let shown =
            json!({ "jobs": incident.members.len(), "others": incident.others.len(), "last_ms": incident.last_ms });
        let metadata = incident_metadata(&incident.id, &notice.idempotency_key);
        let parent = match Parent::from_state(state) {
            Some(_) if state.and_then(|s| s.get("shown")) == Some(&shown) => return Ok(Sent { state: state.cloned() }),
            Some(p) => {
                self.wait_for_update(&p.ts).await;
                let body = |text: &str, blocks: &[Value]| {
                    json!({ "channel": p.channel, "ts": p.ts, "text": text, "blocks": blocks, "metadata": metadata,
                        "parse": "none", "link_names": false })
                };
                match self.write("chat.update", None, body(&msg.text, &msg.blocks), body(&msg.text, &[])).await {
                    Ok(_) => p,
                    Err(super::Failure::Api { code, .. }) if GONE_ERRORS.contains(&code.as_str()) => {
                        tracing::warn!(destination = "slack", error = %code, "slack: the incident's summary is gone; posting it again");
                        self.post_summary(channel, &msg, &metadata).await?
                    }
                    Err(f) => return Err(self.error("chat.update", f)),
                }
            }
            None => self.post_summary(channel, &msg, &metadata).await?,
        };
        let mut state = parent.state();
        state["shown"] = shown;
        Ok(Sent { state: Some(state) })
    }

    /// A new summary in `channel`.
    async fn post_summary(&self, channel: &str, msg: &SlackMessage, metadata: &Value) -> Result<Parent, NotifyError> {
        let body = |text: &str, blocks: Option<&[Value]>| {
            let mut b = json!({ "channel": channel, "text": text, "metadata": metadata, "unfurl_links": false,
                "unfurl_media": false, "parse": "none", "link_names": false });
            if let Some(blocks) = blocks {
                b["blocks"] = json!(blocks);
            }
            b
        };
        let method = "chat.postMessage";
        let answer = self
            .write(method, Some(channel), body(&msg.text, Some(&msg.blocks)), body(&msg.text, None))
            .await
            .map_err(|f| self.error(method, f))?;
        let parent = Parent::from_answer(&answer)
            .ok_or_else(|| NotifyError::fatal("slack: chat.postMessage answered ok without channel and ts"))?;
        self.pacer.learn(channel, &parent.channel);
        tracing::info!(destination = "slack", channel = %parent.channel, ts = %parent.ts, "slack: posted an incident's summary");
        Ok(parent)
    }

    /// A job's verdict as a reply in its incident's summary thread; the reply is the
    /// job's message from now on (updated in place, replied about in the same thread).
    pub(super) async fn post_in_incident(
        &self,
        summary: &Parent,
        notice: &Notice,
        msg: &SlackMessage,
    ) -> Result<Sent, NotifyError> {
        let answer = self.post(&summary.channel, Some(summary.thread()), notice, msg).await?;
        let Some(mut reply) = Parent::from_answer(&answer) else {
            tracing::warn!(
                destination = "slack",
                "slack: chat.postMessage answered ok without channel and ts; later notices cannot thread"
            );
            return Ok(Sent { state: None });
        };
        reply.thread_ts = Some(summary.thread().to_string());
        tracing::info!(destination = "slack", channel = %reply.channel, thread_ts = %summary.thread(),
            "slack: the verdict replied in its incident's thread");
        Ok(Sent { state: Some(reply.state()) })
    }

    /// Waits until the summary `ts` may be updated again ([`INCIDENT_UPDATE_INTERVAL`]).
    async fn wait_for_update(&self, ts: &str) {
        self.incident_updates.turn(ts).await;
    }
}
