//! Slack's interaction payloads: a form-encoded body with one field, `payload`, holding
//! JSON. Only `block_actions` (a button pressed) is acted on; of it culprit reads who
//! pressed, which buttons (`action_id`, `value`) and nothing else: the labels, channel and
//! thread come from the store.
//! <https://api.slack.com/reference/interaction-payloads/block-actions>

use serde::Deserialize;

/// The user who pressed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct User {
    #[serde(default)]
    pub id: String,
    #[serde(default)]
    pub username: String,
    #[serde(default)]
    pub name: String,
}

impl User {
    /// The name a silence is created by: the Slack username, else the name, else the id.
    pub fn handle(&self) -> &str {
        [&self.username, &self.name, &self.id].into_iter().find(|s| !s.trim().is_empty()).map_or("slack user", |s| s)
    }
}

/// One pressed element.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Action {
    #[serde(default)]
    pub action_id: String,
    #[serde(default)]
    pub value: Option<String>,
}

/// The part of an interaction payload culprit reads.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Payload {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub user: User,
    #[serde(default)]
    pub actions: Vec<Action>,
    /// Where Slack takes an answer to this interaction (ephemeral messages), for 30 minutes.
    #[serde(default)]
    pub response_url: Option<String>,
}

/// The payload of a form-encoded body (`payload=<JSON>`); an error says what is wrong.
pub fn parse(body: &[u8]) -> Result<Payload, String> {
    let json = url::form_urlencoded::parse(body)
        .find(|(k, _)| k == "payload")
        .map(|(_, v)| v.into_owned())
        .ok_or("the body has no `payload` field (Slack posts application/x-www-form-urlencoded payload=…)")?;
    serde_json::from_str(&json).map_err(|e| format!("the payload is not an interaction payload: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of Slack's block_actions reference (trimmed of the message it carries),
    /// form-encoded as Slack posts it.
    pub const BLOCK_ACTIONS: &str = r#"{"type":"block_actions","team":{"id":"T9TK3CUKW","domain":"example"},"user":{"id":"UA8RXUSPL","username":"jtorrance","name":"jtorrance","team_id":"T9TK3CUKW"},"api_app_id":"AABA1ABCD","token":"9s8d9as89d8as9d8as989","container":{"type":"message","message_ts":"1548261231.000200","channel_id":"CBR2V3XEX","is_ephemeral":false},"trigger_id":"12321423423.333649436676.d8c1bb837935619ccad0f624c448ffb3","channel":{"id":"CBR2V3XEX","name":"review-updates"},"response_url":"https://hooks.slack.com/actions/AABA1ABCD/1232321423432/D09sSasdasdAS9091209","actions":[{"action_id":"WaXA","block_id":"=qXel","text":{"type":"plain_text","text":"View","emoji":true},"value":"click_me_123","type":"button","action_ts":"1548426417.840180"}]}"#;

    #[test]
    fn a_form_encoded_block_actions_payload_gives_the_user_and_the_pressed_button() {
        let body: String =
            url::form_urlencoded::Serializer::new(String::new()).append_pair("payload", BLOCK_ACTIONS).finish();
        let p = parse(body.as_bytes()).unwrap();
        assert_eq!(p.kind, "block_actions");
        assert_eq!(p.user.id, "UA8RXUSPL");
        assert_eq!(p.user.handle(), "jtorrance");
        assert_eq!(p.actions, vec![Action { action_id: "WaXA".into(), value: Some("click_me_123".into()) }]);
        assert_eq!(
            p.response_url.as_deref(),
            Some("https://hooks.slack.com/actions/AABA1ABCD/1232321423432/D09sSasdasdAS9091209")
        );
    }

    #[test]
    fn a_body_without_a_payload_or_with_another_shape_is_refused() {
        assert!(parse(b"text=hello").unwrap_err().contains("no `payload`"));
        assert!(parse(b"payload=%7Bnope").unwrap_err().contains("not an interaction payload"));
        let nameless = User { id: " ".into(), ..Default::default() };
        assert_eq!(nameless.handle(), "slack user");
    }
}
