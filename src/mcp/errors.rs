//! A tool's failure as a tool result an agent can act on (`isError: true` with one text
//! block), never a protocol error or a crash of the session: the kind first, then what to
//! do about it (the closest job names, which backend is down and since when).

use rmcp::handler::server::tool::IntoCallToolResult;
use rmcp::model::{CallToolResponse, CallToolResult, ContentBlock};

use crate::collect::collector::{CollectError, QUOTED_JOBS, closest};

/// What went wrong, for the agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Nothing to answer about (no such job, verdict or data): change the arguments.
    NotFound,
    /// The arguments do not make a request (a bad time, window, label, an ambiguous job).
    BadRequest,
    /// A backend (Prometheus, the store) failed: retry later, or tell a person.
    BackendDown,
    /// A fault of culprit's: tell a person.
    Internal,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::NotFound => "not_found",
            Kind::BadRequest => "bad_request",
            Kind::BackendDown => "backend_down",
            Kind::Internal => "internal",
        }
    }
}

/// One failed tool call.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolError {
    pub kind: Kind,
    pub message: String,
}

impl ToolError {
    pub fn not_found(message: impl Into<String>) -> Self {
        ToolError { kind: Kind::NotFound, message: message.into() }
    }

    pub fn request(message: impl Into<String>) -> Self {
        ToolError { kind: Kind::BadRequest, message: message.into() }
    }

    pub fn internal(message: impl Into<String>) -> Self {
        ToolError { kind: Kind::Internal, message: message.into() }
    }

    /// `backend` at `base` failed (`what`), failing since `since_ms`.
    pub fn backend(backend: &str, base: &str, what: &str, since_ms: i64, now_ms: i64) -> Self {
        let ago = (now_ms - since_ms).max(0) / 1000;
        ToolError {
            kind: Kind::BackendDown,
            message: format!(
                "backend {backend} at {base} {what}; failing since {} ({ago} s ago). Retry later; until then culprit cannot diagnose live",
                crate::model::verdict::rfc3339(since_ms)
            ),
        }
    }

    /// `backend` failed now (`what` says how).
    pub fn backend_now(backend: &str, what: &str, now_ms: i64) -> Self {
        ToolError {
            kind: Kind::BackendDown,
            message: format!("backend {backend}: {what} (at {})", crate::model::verdict::rfc3339(now_ms)),
        }
    }

    /// No job named `wanted` among `known` (`where_`: "with metrics here", …): the
    /// closest names first.
    pub fn unknown_job(wanted: &str, known: &[String], where_: &str) -> Self {
        let close = closest(wanted, known, QUOTED_JOBS);
        let hint = if close.is_empty() {
            let some: Vec<&str> = known.iter().take(QUOTED_JOBS).map(String::as_str).collect();
            format!("known jobs: {}", if some.is_empty() { "none".into() } else { some.join(", ") })
        } else {
            format!("closest job names: {}", close.join(", "))
        };
        ToolError::not_found(format!("no Flink job named or with id `{wanted}` {where_}; {hint}"))
    }

    /// A collection that did not give a snapshot.
    pub fn collect(e: &CollectError) -> Self {
        match e {
            CollectError::JobNotFound { wanted, known } => ToolError::unknown_job(wanted, known, "has metrics here"),
            CollectError::NoJobs { .. } | CollectError::NoData => ToolError::not_found(e.to_string()),
            CollectError::Source(_) => {
                ToolError { kind: Kind::BackendDown, message: format!("backend prometheus: {e}") }
            }
            _ => ToolError::request(e.to_string()),
        }
    }

    /// The text the agent reads.
    pub fn text(&self) -> String {
        format!("error ({}): {}", self.kind.as_str(), self.message)
    }
}

impl IntoCallToolResult for ToolError {
    fn into_call_tool_result(self) -> Result<CallToolResponse, rmcp::ErrorData> {
        Ok(CallToolResult::error(vec![ContentBlock::text(self.text())]).into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_job_names_the_closest_known_jobs() {
        let known = vec!["bp-lab-slow-sink".to_string(), "bp-lab-hot-key".to_string(), "payments".to_string()];
        let e = ToolError::unknown_job("bp-lab-slow-snk", &known, "has metrics here");
        assert_eq!(e.kind, Kind::NotFound);
        assert!(e.text().starts_with("error (not_found): no Flink job named or with id `bp-lab-slow-snk`"), "{e:?}");
        assert!(e.message.contains("closest job names: bp-lab-slow-sink"), "{e:?}");
        assert!(!e.message.contains("payments"), "{e:?}");
    }

    #[test]
    fn a_backend_down_says_since_when_and_how_long_ago() {
        // Down since 10:00:00, asked at 10:01:30: 90 s ago.
        let since = 1_795_000_000_000;
        let e = ToolError::backend("prometheus", "http://prom:9090", "refused the connection", since, since + 90_000);
        assert_eq!(e.kind, Kind::BackendDown);
        assert!(e.message.contains("backend prometheus at http://prom:9090 refused the connection"), "{e:?}");
        assert!(e.message.contains(&format!("failing since {} (90 s ago)", crate::model::verdict::rfc3339(since))));
    }
}
