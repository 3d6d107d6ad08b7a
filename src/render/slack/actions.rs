//! The buttons that act ("Re-diagnose now", "Silence 2 h") of a verdict message, when the
//! Slack app's interactivity is configured (`[notify.slack] signing_secret`).
//!
//! Each button's `value` is the stored verdict's id alone: the server looks the rest up
//! (the job, the alert group's labels, the thread) and never takes a label from Slack's
//! payload. <https://api.slack.com/reference/block-kit/block-elements#button>

use serde_json::{Value, json};

use super::escaping::{code, mrkdwn};
use super::parts::culprit_name;
use super::{MAX_BLOCKS, SlackMessage};
use crate::model::notice::{Notice, NoticeKind};
use crate::model::verdict::Verdict;

/// `action_id` of "Re-diagnose now".
pub const REDIAGNOSE_ACTION: &str = "culprit_rediagnose";

/// `action_id` of "Silence 2 h".
pub const SILENCE_ACTION: &str = "culprit_silence";

/// Most elements of an `actions` block.
/// <https://api.slack.com/reference/block-kit/blocks#actions>
pub const MAX_ACTION_ELEMENTS: usize = 25;

/// Text the buttons add to a message, at most (UTF-16 units): 15 + 11 (labels) + 19 + 60 +
/// 11 + 6 (the Silence button's confirmation) = 122, within the 150 that a verdict's
/// block budgets leave below [`super::MAX_BLOCKS_TEXT`] (8,000 − 7,850).
pub const ACTIONS_TEXT: usize = 122;

/// Which buttons that act a destination can answer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Actions {
    /// "Re-diagnose now" (interactivity configured).
    pub rediagnose: bool,
    /// "Silence 2 h" (interactivity and an Alertmanager configured).
    pub silence: bool,
}

fn button(label: &str, action: &str, value: &str) -> Value {
    json!({
        "type": "button",
        "text": { "type": "plain_text", "text": label, "emoji": false },
        "action_id": action,
        "value": value,
    })
}

/// The buttons of a verdict with a stored id, in the order shown.
fn buttons(actions: Actions, verdict_id: i64) -> Vec<Value> {
    let id = verdict_id.to_string();
    let mut out = Vec::new();
    if actions.rediagnose {
        out.push(button("Re-diagnose now", REDIAGNOSE_ACTION, &id));
    }
    if actions.silence {
        let mut silence = button("Silence 2 h", SILENCE_ACTION, &id);
        silence["confirm"] = json!({
            "title": { "type": "plain_text", "text": "Silence this group?" },
            "text": { "type": "plain_text", "text": "A 2-hour silence on this alert group's labels, in your name." },
            "confirm": { "type": "plain_text", "text": "Silence 2 h" },
            "deny": { "type": "plain_text", "text": "Cancel" },
        });
        out.push(silence);
    }
    out
}

/// `msg` (the [`super::message`] of `notice`) with the buttons `actions` allows, for a
/// verdict notice whose verdict is stored: added to the message's `actions` block (after
/// "Open verdict" and the alert's links), else in an `actions` block of their own at the
/// end. Other notices, and a message already at [`MAX_BLOCKS`] without an `actions`
/// block, are returned unchanged.
pub fn with_actions(mut msg: SlackMessage, notice: &Notice, actions: Actions) -> SlackMessage {
    let (NoticeKind::Verdict, Some(id), Some(_)) = (notice.kind, notice.verdict_id, &notice.verdict) else {
        return msg;
    };
    let new = buttons(actions, id);
    if new.is_empty() {
        return msg;
    }
    let room = msg.blocks.len() < MAX_BLOCKS;
    let existing = msg.blocks.iter_mut().rev().find(|b| b["type"] == "actions");
    match existing.and_then(|b| b["elements"].as_array_mut()) {
        Some(elements) if elements.len() + new.len() <= MAX_ACTION_ELEMENTS => elements.extend(new),
        Some(_) => {}
        None if room => msg.blocks.push(json!({ "type": "actions", "elements": new })),
        None => {}
    }
    msg
}

/// Who pressed a button, as a reply names them: a mention `<@U…>` when Slack's user id
/// is one (capitals and digits), else their name as text.
pub fn who(user_id: &str, name: &str) -> String {
    let is_id = user_id.len() >= 2 && user_id.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit());
    if is_id { format!("<@{user_id}>") } else { mrkdwn(name) }
}

/// Slack's date formatting of `at_ms` as the reader's local `HH:MM`, with `fallback_utc`
/// for clients that cannot. <https://api.slack.com/reference/surfaces/formatting#date-formatting>
fn local_time(at_ms: i64) -> String {
    let s = at_ms.div_euclid(1000);
    let utc = jiff::Timestamp::from_second(s).map(|t| t.strftime("%H:%M UTC").to_string()).unwrap_or_default();
    format!("<!date^{s}^{{time}}|{utc}>")
}

/// The reply after "Silence 2 h": "silenced by @x until 14:00 (Alertmanager silence `id`)".
pub fn silenced_reply(who: &str, until_ms: i64, silence_id: &str) -> String {
    format!(":no_bell: Silenced by {who} until {} (Alertmanager silence {})", local_time(until_ms), code(silence_id))
}

/// The reply after "Re-diagnose now": unchanged (same culprit, finding, status and
/// hazards as `before`), or what the verdict says now.
pub fn rediagnosed_reply(who: &str, unchanged: bool, now: &Verdict) -> String {
    let culprit = now.culprit.as_ref().map(|c| format!("culprit {} · ", culprit_name(c))).unwrap_or_default();
    let facts = format!("{culprit}finding `{}` · confidence {}", now.finding.as_str(), now.confidence.as_str());
    if unchanged {
        format!(":arrows_counterclockwise: Re-diagnosed by {who}: unchanged ({facts})")
    } else {
        format!(":arrows_counterclockwise: Re-diagnosed by {who}: changed, now {facts}")
    }
}

/// The reply when a button's action failed: what was asked and why (already free of secrets).
pub fn action_failed_reply(who: &str, what: &str, why: &str) -> String {
    format!(":warning: {what} asked by {who} failed: {}", mrkdwn(why))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::slack::tests::blocks_text_len as text_len;
    use crate::render::slack::{MAX_BLOCKS_TEXT, message};

    fn notice() -> Notice {
        let capture = &crate::samples::captures::CAPTURES[0];
        let v = crate::samples::captures::verdict(capture).unwrap();
        Notice {
            links: Default::default(),
            kind: NoticeKind::Verdict,
            group_key: "{}:{alertname=\"FlinkBackpressure\"}".into(),
            labels: Default::default(),
            job: v.job.clone(),
            verdict: Some(v),
            verdict_id: Some(42),
            verdict_url: Some("https://culprit.example.com/verdicts/42?expires=1&sig=ab".into()),
            reason: None,
            firing: true,
            changed: false,
            idempotency_key: "slack:group:1".into(),
            at_ms: 1_795_000_000_000,
            episode: Default::default(),
            maybe_repeat: false,
            incident: None,
            incident_view: None,
            incident_parent: None,
        }
    }

    const BOTH: Actions = Actions { rediagnose: true, silence: true };

    #[test]
    fn the_buttons_follow_view_verdict_in_its_block_and_carry_only_the_verdict_id() {
        let n = notice();
        let plain = message(&n);
        let with = with_actions(plain.clone(), &n, BOTH);
        assert_eq!(with.blocks.len(), plain.blocks.len(), "the buttons join the existing actions block");
        let actions = with.blocks.iter().find(|b| b["type"] == "actions").unwrap();
        let ids: Vec<&str> =
            actions["elements"].as_array().unwrap().iter().map(|e| e["action_id"].as_str().unwrap()).collect();
        assert_eq!(ids, ["view_verdict", REDIAGNOSE_ACTION, SILENCE_ACTION]);
        for e in &actions["elements"].as_array().unwrap()[1..] {
            assert_eq!(e["value"], "42");
        }
        assert_eq!(with.text, plain.text);
    }

    #[test]
    fn the_buttons_add_at_most_their_budget_of_text_and_keep_the_message_within_slacks_limit() {
        let n = notice();
        let plain = message(&n);
        let with = with_actions(plain.clone(), &n, BOTH);
        let added = text_len(&Value::from(with.blocks.clone())) - text_len(&Value::from(plain.blocks));
        assert_eq!(added, ACTIONS_TEXT);
        // The verdict's budgets (7,850) + 122 = 7,972 ≤ 8,000.
        assert!(text_len(&Value::from(with.blocks)) <= MAX_BLOCKS_TEXT);
    }

    #[test]
    fn without_a_verdict_link_the_buttons_get_a_block_of_their_own() {
        let mut n = notice();
        n.verdict_url = None;
        let plain = message(&n);
        assert!(plain.blocks.iter().all(|b| b["type"] != "actions"));
        let with = with_actions(plain.clone(), &n, Actions { rediagnose: true, silence: false });
        assert_eq!(with.blocks.len(), plain.blocks.len() + 1);
        assert_eq!(with.blocks.last().unwrap()["elements"][0]["action_id"], REDIAGNOSE_ACTION);
    }

    #[test]
    fn replies_name_the_user_by_mention_and_show_the_time_in_the_readers_zone() {
        assert_eq!(who("U2CERLKJA", "roadrunner"), "<@U2CERLKJA>");
        // Not an id: the name, as text that mentions nobody.
        assert_eq!(who("<!channel>", "<!channel>"), "&lt;!channel&gt;");
        // 1,795,780,800 s is 2026-11-27T12:00:00Z.
        assert_eq!(
            silenced_reply("<@U1>", 1_795_780_800_000, "a1-b2"),
            ":no_bell: Silenced by <@U1> until <!date^1795780800^{time}|12:00 UTC> (Alertmanager silence `a1-b2`)"
        );
        let v = notice().verdict.unwrap();
        assert!(
            rediagnosed_reply("<@U1>", true, &v)
                .starts_with(":arrows_counterclockwise: Re-diagnosed by <@U1>: unchanged (")
        );
        assert!(rediagnosed_reply("<@U1>", false, &v).contains(": changed, now "));
        assert_eq!(
            action_failed_reply("<@U1>", "Silence", "HTTP 400 <bad>"),
            ":warning: Silence asked by <@U1> failed: HTTP 400 &lt;bad&gt;"
        );
    }

    #[test]
    fn notices_other_than_a_stored_verdict_and_no_actions_leave_the_message_as_it_is() {
        let n = notice();
        assert_eq!(with_actions(message(&n), &n, Actions::default()), message(&n));
        let mut unstored = notice();
        unstored.verdict_id = None;
        assert_eq!(with_actions(message(&unstored), &unstored, BOTH), message(&unstored));
        let mut resolved = notice();
        resolved.kind = NoticeKind::Resolved;
        assert_eq!(with_actions(message(&resolved), &resolved, BOTH), message(&resolved));
    }
}
