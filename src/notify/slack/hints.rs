//! What to do about each final Slack error: data the classification picks by the error
//! code Slack answers (<https://api.slack.com/methods/chat.postMessage#errors>,
//! <https://api.slack.com/methods/auth.test#errors>), for the Web API and for incoming
//! webhooks (<https://api.slack.com/messaging/webhooks#handling_errors>).

/// (codes, what to do). `{needed}` is replaced by the scope Slack's `missing_scope` answer
/// names in its `needed` field.
const HINTS: &[(&[&str], &str)] = &[
    (
        &["is_archived", "channel_is_archived"],
        "the channel is archived: unarchive it and invite the app again (`/invite @<app>` in the channel), or set notify.slack.channel to another channel",
    ),
    (
        &["not_in_channel"],
        "the app is not a member of the channel: invite it (`/invite @<app>` in the channel), or give the app the `chat:write.public` scope to post to public channels it has not joined",
    ),
    (
        &["channel_not_found"],
        "notify.slack.channel names no channel this token can see: use the channel's ID (C…, at the bottom of the channel's details), and invite the app to a private channel first",
    ),
    (
        &["invalid_auth", "not_authed", "token_revoked", "token_expired", "account_inactive", "invalid_token"],
        "the token in notify.slack.token is not valid (revoked, expired, of an uninstalled app or another workspace): reinstall the app to the workspace and configure its Bot User OAuth Token (xoxb-…)",
    ),
    (
        &["missing_scope"],
        "the token lacks the scope {needed}: add it under OAuth & Permissions → Bot Token Scopes, reinstall the app, and configure the new token",
    ),
    (
        &["no_permission", "restricted_action", "action_prohibited", "ekm_access_denied"],
        "the workspace does not let this app post there: ask a workspace admin, or set notify.slack.channel to another channel",
    ),
    (
        &["msg_too_long", "msg_blocks_too_long", "invalid_blocks", "invalid_blocks_format", "too_many_blocks"],
        "Slack refused the message even as text alone: the verdict is kept (GET /api/v1/verdicts); report the verdict id to culprit's maintainers",
    ),
    (
        &["no_service", "no_team", "team_disabled"],
        "the incoming webhook in notify.slack.webhook_url is gone (its app was removed or the workspace disabled): create a new incoming webhook and configure its URL",
    ),
];

/// What to do about the final error `code`; `needed` is the scope a `missing_scope`
/// answer names (already checked to be a list of scope names).
pub fn hint(code: &str, needed: Option<&str>) -> Option<String> {
    let (_, text) = HINTS.iter().find(|(codes, _)| codes.contains(&code))?;
    let needed = match needed {
        Some(n) => format!("`{n}`"),
        None => "Slack names in its answer (culprit posts with chat:write, reads with channels:history)".to_string(),
    };
    Some(text.replace("{needed}", &needed))
}

/// A `needed` field as Slack writes it (`chat:write`, `channels:history,groups:history`):
/// scope names only, else nothing (it goes into errors that are stored and served).
pub fn scopes(needed: &str) -> Option<String> {
    let ok = !needed.is_empty()
        && needed.len() <= 200
        && needed.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b":._,-".contains(&b));
    ok.then(|| needed.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_final_error_of_slack_has_its_own_hint() {
        for code in super::super::FINAL_ERRORS.iter().chain(super::super::BLOCK_ERRORS) {
            assert!(hint(code, None).is_some(), "{code}");
        }
        assert!(hint("is_archived", None).unwrap().contains("unarchive"));
        assert!(hint("not_in_channel", None).unwrap().contains("/invite @<app>"));
        assert!(hint("not_in_channel", None).unwrap().contains("chat:write.public"));
        assert_ne!(hint("channel_not_found", None), hint("is_archived", None));
        assert!(hint("missing_scope", Some("channels:history")).unwrap().contains("the scope `channels:history`"));
        assert_eq!(hint("ratelimited", None), None);
    }

    #[test]
    fn only_scope_names_are_taken_from_the_answer() {
        assert_eq!(scopes("chat:write,chat:write.public").as_deref(), Some("chat:write,chat:write.public"));
        assert_eq!(scopes("chat:write <@U1>"), None);
        assert_eq!(scopes(""), None);
    }
}
