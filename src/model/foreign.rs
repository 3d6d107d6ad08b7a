//! What a message may say about an answer from another system (Prometheus, Flink REST, a
//! destination): its status and culprit's own words, never the body's text. A backend's
//! body can hold anything the host behind the URL chose to send (a metadata service's
//! credentials, an internal page); what culprit writes goes to verdicts, posts and API
//! answers, so bodies go to the log only (redacted and cut there). Pure.

/// Longest message of a shape error kept (see [`json_error`]).
const SHAPE_MESSAGE_CHARS: usize = 120;

/// Why a body could not be read as JSON of the expected shape, without quoting it:
/// serde_json's own message quotes offending input between `"` or backticks (`invalid
/// type: string "…"`, serde's `Unexpected`), so a shape error keeps its message only when
/// it quotes nothing (a reader's own words, e.g. "time 1e300 is outside the years …"), and
/// every other error only its category and place.
pub fn json_error(e: &serde_json::Error) -> String {
    use serde_json::error::Category;
    let place = format!("line {}, column {}", e.line(), e.column());
    let what = match e.classify() {
        Category::Syntax => "not valid JSON",
        Category::Eof => "JSON cut short",
        Category::Data => {
            let text = e.to_string();
            let message = text.strip_suffix(&format!(" at {}", place.replace(',', ""))).unwrap_or(&text);
            let quotes = message.contains(['"', '`', '\'']);
            if quotes || message.chars().count() > SHAPE_MESSAGE_CHARS {
                "JSON of another shape"
            } else {
                return format!("JSON of another shape: {message} ({place})");
            }
        }
        Category::Io => "unreadable",
    };
    format!("{what} ({place})")
}

/// A status as HTTP names it (`404 Not Found`), the name from the standard's registry,
/// never from the answer; the number alone when it has no standard name.
pub fn status_words(code: u16, canonical_reason: Option<&str>) -> String {
    match canonical_reason {
        Some(name) => format!("{code} {name}"),
        None => code.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_json_error_says_where_and_what_kind_but_never_quotes_the_body() {
        #[derive(serde::Deserialize, Debug)]
        #[allow(dead_code)]
        struct Wire {
            jobs: Vec<String>,
        }
        let e = serde_json::from_str::<Wire>(r#"{"jobs": "SECRET-METADATA-TOKEN"}"#).unwrap_err();
        assert!(e.to_string().contains("SECRET-METADATA-TOKEN"), "serde_json quotes it: {e}");
        assert_eq!(json_error(&e), "JSON of another shape (line 1, column 32)");
        let e = serde_json::from_str::<Wire>(r#"{"jobs": ["a", 7]}"#).unwrap_err();
        assert!(e.to_string().contains("`7`"), "numbers are quoted too: {e}");
        assert_eq!(json_error(&e), "JSON of another shape (line 1, column 16)");
        // A reader's own message, quoting nothing, is kept.
        let e = <serde_json::Error as serde::de::Error>::custom("time 1e300 is outside the years -9999 to 9999");
        assert_eq!(
            json_error(&e),
            "JSON of another shape: time 1e300 is outside the years -9999 to 9999 (line 0, column 0)"
        );
        let e = serde_json::from_str::<Wire>("<html>SECRET</html>").unwrap_err();
        assert_eq!(json_error(&e), "not valid JSON (line 1, column 1)");
        let e = serde_json::from_str::<Wire>(r#"{"jobs": ["#).unwrap_err();
        assert_eq!(json_error(&e), "JSON cut short (line 1, column 10)");
    }

    #[test]
    fn a_status_is_named_by_the_standard() {
        assert_eq!(status_words(500, Some("Internal Server Error")), "500 Internal Server Error");
        assert_eq!(status_words(599, None), "599");
    }
}
