//! One log line per sender per interval: what culprit refuses (or reads with a doubt) must
//! show in its log, not only in a counter — Alertmanager and Grafana drop a notification
//! answered 4xx, so the log is the only trace of the lost alert — but a sender that posts
//! the same bad payload in a loop must not flood it.
//!
//! [`OncePerSender::due`] says whether a sender's line is due and how many of its events
//! were left out since its last one. Senders are untrusted names (an `externalURL`): at
//! most [`MAX_SENDERS`] are remembered; past that, new ones share one line per interval
//! under [`OTHER_SENDERS`], so the log gets at most `MAX_SENDERS + 1` lines per interval
//! whatever arrives.

use std::collections::HashMap;
use std::sync::Mutex;

/// How often one sender's refusals are logged: the first at once, then one line per
/// interval with the count left out.
pub const LOG_INTERVAL_MS: i64 = 10 * 60 * 1000;

/// Most senders remembered.
pub const MAX_SENDERS: usize = 1024;

/// The name new senders share once [`MAX_SENDERS`] are remembered.
pub const OTHER_SENDERS: &str = "(other senders)";

/// Per sender: when its last line was logged (Unix ms), and events left out since.
#[derive(Debug, Default)]
pub struct OncePerSender {
    seen: Mutex<HashMap<String, (i64, u64)>>,
}

/// A line that is due.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Due {
    /// The sender as remembered ([`OTHER_SENDERS`] past the cap).
    pub sender: String,
    /// Events of this sender left out of the log since its last line.
    pub left_out: u64,
}

impl OncePerSender {
    /// Whether `sender`'s line is due at `now_ms`: `Some` (with the count left out since
    /// its last line) for its first event and the first after each [`LOG_INTERVAL_MS`];
    /// `None` (the event counted) otherwise.
    pub fn due(&self, sender: &str, now_ms: i64) -> Option<Due> {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        let mut key = sender;
        if !seen.contains_key(sender) && seen.len() >= MAX_SENDERS {
            seen.retain(|_, (at, _)| now_ms - *at < LOG_INTERVAL_MS);
            if seen.len() >= MAX_SENDERS {
                key = OTHER_SENDERS;
            }
        }
        match seen.get_mut(key) {
            Some((at, left_out)) if now_ms - *at < LOG_INTERVAL_MS => {
                *left_out += 1;
                None
            }
            Some((at, left_out)) => {
                let due = Due { sender: key.to_string(), left_out: *left_out };
                (*at, *left_out) = (now_ms, 0);
                Some(due)
            }
            None => {
                seen.insert(key.to_string(), (now_ms, 0));
                Some(Due { sender: key.to_string(), left_out: 0 })
            }
        }
    }
}

/// A webhook refused before its body is read: the sender is its peer address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// 413: the body is over `server.body_limit_bytes`.
    TooLarge,
    /// 401: missing or wrong webhook credentials.
    Unauthorized,
    /// 415: a `Content-Type` other than `application/json`.
    UnsupportedMediaType,
}

impl Refused {
    /// The HTTP status answered.
    pub fn status(self) -> u16 {
        match self {
            Refused::TooLarge => 413,
            Refused::Unauthorized => 401,
            Refused::UnsupportedMediaType => 415,
        }
    }

    /// Why, in a few words (never the body or a credential).
    pub fn reason(self) -> &'static str {
        match self {
            Refused::TooLarge => "the body is larger than server.body_limit_bytes",
            Refused::Unauthorized => "missing or wrong webhook credentials (server.webhook_auth or server.auth)",
            Refused::UnsupportedMediaType => "the Content-Type is not application/json",
        }
    }
}

/// One [`OncePerSender`] per kind of [`Refused`]: a sender refused one way in a loop does
/// not hide that it is refused another way.
#[derive(Debug, Default)]
pub struct RefusedLog {
    by_kind: [OncePerSender; 3],
}

impl RefusedLog {
    /// Whether `sender`'s line for `kind` is due at `now_ms` (see [`OncePerSender::due`]).
    pub fn due(&self, kind: Refused, sender: &str, now_ms: i64) -> Option<Due> {
        let i = match kind {
            Refused::TooLarge => 0,
            Refused::Unauthorized => 1,
            Refused::UnsupportedMediaType => 2,
        };
        self.by_kind[i].due(sender, now_ms)
    }
}

/// Most characters of a refusal's reason, in the log and in the 400 answer.
pub const REASON_CHARS: usize = 160;

/// What stands for a value of the payload in a reason.
pub const NOT_SHOWN: &str = "(value not shown)";

/// `reason` cut to [`REASON_CHARS`] characters (an ellipsis marks the cut).
pub fn cut(reason: &str) -> String {
    match reason.char_indices().nth(REASON_CHARS) {
        Some((end, _)) => format!("{}…", &reason[..end]),
        None => reason.to_string(),
    }
}

/// The parser's message without any value of the payload: serde quotes the value it did
/// not expect (`invalid type: string "Bearer …", expected i64`, ``unknown variant `x` ``,
/// ``unknown field `x` ``), which may be a credential. Kept: what kind of value it was,
/// what was expected (culprit's own types), the line and column.
pub fn parser_message(e: &serde_json::Error) -> String {
    let full = e.to_string();
    // serde_json appends " at line L column C" to what the deserializer said.
    let place = format!(" at line {} column {}", e.line(), e.column());
    let said = full.strip_suffix(&place).unwrap_or(&full);
    let scrubbed = match said.rfind(", expected ") {
        // The part before the last ", expected " is the payload's value; what follows is
        // culprit's own expectation (a quoted value cannot hold an unescaped `"`).
        Some(at) => format!("{}{}", kind_only(&said[..at]), &said[at..]),
        None if said.starts_with("missing field `") || said.starts_with("duplicate field `") => said.to_string(),
        None => kind_only(said),
    };
    if e.line() == 0 { scrubbed } else { format!("{scrubbed}{place}") }
}

/// `unexpected` up to its first quoted part (`"` or a backtick), the rest replaced by
/// [`NOT_SHOWN`]: `invalid type: string "x"` → `invalid type: string (value not shown)`.
fn kind_only(unexpected: &str) -> String {
    match unexpected.find(['"', '`']) {
        Some(at) => format!("{}{NOT_SHOWN}", &unexpected[..at]),
        None => unexpected.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_error(body: &str) -> String {
        #[derive(serde::Deserialize, Debug)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code)]
        struct W {
            #[serde(rename = "orgId")]
            org_id: Option<i64>,
            status: Option<Kind>,
            truncated: Option<bool>,
            tags: Option<Vec<String>>,
        }
        #[derive(serde::Deserialize, Debug)]
        #[serde(rename_all = "lowercase")]
        enum Kind {
            Firing,
        }
        parser_message(&serde_json::from_str::<W>(body).unwrap_err())
    }

    #[test]
    fn a_parser_message_never_quotes_a_value_of_the_payload_but_keeps_kind_expectation_and_place() {
        const SECRET: &str = "glsa_SECRETTOKEN_abcdef0123456789";
        let m = parse_error(&format!(r#"{{"orgId": "Bearer {SECRET}"}}"#));
        // `{"orgId": "` is 11 characters, the string ends at column 11 + 7 + 33 + 1 = 52.
        assert_eq!(m, "invalid type: string (value not shown), expected i64 at line 1 column 52");
        for body in [
            format!(r#"{{"status": "{SECRET}"}}"#),
            format!(r#"{{"{SECRET}": 1}}"#),
            format!(r#"{{"truncated": "{SECRET}"}}"#),
            format!(r#"{{"tags": [1, "{SECRET}"], "orgId": 1}}"#),
            format!(r#"{{"tags": "{SECRET}, expected "x""}}"#),
            format!(r#"{{"orgId": 1.{}}}"#, "7".repeat(20)),
            format!(r#"{{"status": "a`b{SECRET}`, expected `firing`"}}"#),
        ] {
            let m = parse_error(&body);
            assert!(!m.contains("SECRET") && !m.contains("777"), "{m}");
            assert!(m.contains(" at line 1 column "), "{m}");
        }
        assert!(parse_error(&format!(r#"{{"status": "{SECRET}"}}"#)).contains("expected `firing`"));
        assert!(parse_error("{}x").starts_with("trailing characters at line 1"));
    }

    #[test]
    fn a_reason_is_cut_to_160_characters_on_a_character_boundary() {
        assert_eq!(cut("short"), "short");
        let long = "é".repeat(400);
        // 160 two-byte characters kept, then the ellipsis: 161 characters.
        assert_eq!(cut(&long).chars().count(), REASON_CHARS + 1);
        assert!(cut(&long).ends_with("é…"));
        assert_eq!(cut(&"a".repeat(REASON_CHARS)), "a".repeat(REASON_CHARS));
    }

    #[test]
    fn a_sender_gets_one_line_per_interval_with_the_count_left_out() {
        let log = OncePerSender::default();
        assert_eq!(log.due("g", 0), Some(Due { sender: "g".into(), left_out: 0 }));
        // Three more within the interval: counted, not logged.
        for t in [1, 1000, LOG_INTERVAL_MS - 1] {
            assert_eq!(log.due("g", t), None);
        }
        // Another sender has its own line at once.
        assert!(log.due("h", 5).is_some());
        assert_eq!(log.due("g", LOG_INTERVAL_MS), Some(Due { sender: "g".into(), left_out: 3 }));
        assert_eq!(log.due("g", LOG_INTERVAL_MS + 1), None);
    }

    #[test]
    fn each_kind_of_refusal_has_its_own_line_per_sender() {
        let log = RefusedLog::default();
        assert!(log.due(Refused::Unauthorized, "peer 10.0.0.7", 0).is_some());
        assert!(log.due(Refused::Unauthorized, "peer 10.0.0.7", 1).is_none());
        // The same sender's 413 is not hidden by its 401 loop.
        assert!(log.due(Refused::TooLarge, "peer 10.0.0.7", 2).is_some());
        assert!(log.due(Refused::UnsupportedMediaType, "peer 10.0.0.7", 3).is_some());
        assert_eq!(log.due(Refused::Unauthorized, "peer 10.0.0.7", LOG_INTERVAL_MS).map(|d| d.left_out), Some(1));
    }

    #[test]
    fn past_the_cap_new_senders_share_one_line() {
        let log = OncePerSender::default();
        for i in 0..MAX_SENDERS {
            assert!(log.due(&format!("s{i}"), 0).is_some());
        }
        // 1024 remembered: the next two new names share one line, then nothing.
        assert_eq!(log.due("new-1", 1).map(|d| d.sender), Some(OTHER_SENDERS.to_string()));
        assert_eq!(log.due("new-2", 2), None);
        // A remembered sender keeps its own.
        assert_eq!(log.due("s0", 3), None);
        // After the interval the old entries are let go and a new name gets its own line.
        assert_eq!(log.due("new-3", LOG_INTERVAL_MS + 1).map(|d| d.sender), Some("new-3".to_string()));
    }
}
