//! A job that fails and restarts: its restarts in the window (Flink's `numRestarts`, a job
//! gauge on the JobManager) and its exception history from Flink REST
//! (`GET /jobs/:id/exceptions`).
//!
//! Shapes of the REST answer (Flink's `JobExceptionsInfoWithHistory`):
//! - 1.13 and later: `exceptionHistory.entries[]`, newest first, each with `exceptionName`,
//!   `stacktrace`, `timestamp` (Unix ms), `taskName` (`validate (2/2)`; 1.20 and 2.3 add
//!   ` - execution #4`), `endpoint` (1.20 has it beside `location`, 2.3 only it; older ones
//!   `location`), `taskManagerId`, `concurrentExceptions[]` (other tasks failing with the same
//!   cause), and `exceptionHistory.truncated` (seen in the lab's 1.20.5 and 2.3.0 captures);
//! - 1.13 to 1.20 also, and before 1.13 only: the legacy `root-exception` (a stack trace),
//!   `timestamp`, `all-exceptions[]` (`exception`, `task`, `location`, `timestamp`,
//!   `taskManagerId`) and `truncated`.
//!
//! The history holds at most `web.exception-history-size` entries (16 by default): a job
//! that failed more often in the window shows its newest failures only (`truncated`).
//!
//! Pure data and parsing.

use serde::{Deserialize, Serialize};

/// Longest exception message kept, in characters: the first line of a message is enough
/// to name the failure; destinations cut further to their own limits.
pub const MAX_MESSAGE_CHARS: usize = 300;

/// What the snapshot knows about the job's failures.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Failover {
    /// The rises of `numRestarts` inside the requested window, `(Unix ms, restarts added)`,
    /// oldest first; `None` when the store has no `numRestarts` of the run.
    pub restarts: Option<Vec<(i64, u32)>>,
    /// Start of the span the restarts were counted over (the requested window, before any
    /// narrowing), Unix ms.
    pub counted_from_ms: i64,
    /// The run's uptime reads 0 at the end of the window: it is restarting right now.
    pub restarting_now: bool,
    /// Flink REST's exception history; `None` when not read (no Flink REST, or it failed).
    pub exceptions: Option<JobExceptions>,
}

impl Failover {
    /// Restarts counted in the window by `numRestarts`.
    pub fn restarts_in_window(&self) -> Option<u32> {
        self.restarts.as_ref().map(|r| r.iter().map(|(_, n)| n).sum())
    }

    /// Unix ms of the newest restart by `numRestarts`.
    pub fn latest_restart_ms(&self) -> Option<i64> {
        self.restarts.as_ref().and_then(|r| r.last()).map(|(t, _)| *t)
    }
}

/// Flink REST's exception history of one job, newest first.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct JobExceptions {
    pub entries: Vec<ExceptionEntry>,
    /// Flink left older entries out (`web.exception-history-size`).
    pub truncated: bool,
}

/// One failure in the history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExceptionEntry {
    /// The exception's class, `java.lang.IllegalStateException`.
    pub exception: String,
    /// The first line of its message, at most [`MAX_MESSAGE_CHARS`] characters; empty
    /// when it has none.
    pub message: String,
    /// The first frame of the stack trace outside the JDK and Flink (the user's code), or
    /// the first frame when all are theirs: `lab.Job$Map.map(Job.java:502)`.
    pub frame: Option<String>,
    /// For a wrapper (`org.apache.flink.runtime.JobException: Recovery is suppressed`, a
    /// `RuntimeException` around the real one): the innermost `Caused by:` class and
    /// message line, as `Class: message`.
    pub root_cause: Option<String>,
    /// Unix ms.
    pub timestamp_ms: i64,
    /// The task as Flink names it, `validate (2/2) - execution #4`; `None` for a global
    /// failure (the JobManager's own).
    pub task_name: Option<String>,
    /// Where the task ran, `host:port`.
    pub endpoint: Option<String>,
    pub task_manager_id: Option<String>,
    /// Other tasks that failed with it (`concurrentExceptions`).
    pub concurrent: u32,
}

impl ExceptionEntry {
    /// The task's vertex name and subtask index (0-based) from its task name:
    /// `validate (2/2) - execution #4` → (`validate`, 1).
    pub fn vertex_and_subtask(&self) -> Option<(String, Option<u32>)> {
        let name = self.task_name.as_deref()?;
        let name = name.rsplit_once(" - execution #").map_or(name, |(n, _)| n).trim_end();
        if let Some((vertex, tail)) = name.rsplit_once(" (")
            && let Some((k, n)) = tail.strip_suffix(')').and_then(|t| t.split_once('/'))
            && let (Ok(k), Ok(_)) = (k.parse::<u32>(), n.parse::<u32>())
        {
            return Some((vertex.to_string(), k.checked_sub(1)));
        }
        Some((name.to_string(), None))
    }
}

impl JobExceptions {
    /// Parses the answer of `GET /jobs/:id/exceptions` (any of the shapes above).
    pub fn from_rest_json(text: &str) -> Result<JobExceptions, String> {
        let v: serde_json::Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        if !v.is_object() {
            return Err("not a JSON object".into());
        }
        if let Some(history) = v.get("exceptionHistory").filter(|h| h.get("entries").is_some()) {
            let entries = history["entries"].as_array().ok_or("exceptionHistory.entries is not a list")?;
            return Ok(JobExceptions {
                entries: entries.iter().filter_map(entry_of_history).collect(),
                truncated: history.get("truncated").and_then(|t| t.as_bool()).unwrap_or(false),
            });
        }
        if v.get("root-exception").is_none() && v.get("all-exceptions").is_none() {
            return Err("neither exceptionHistory nor root-exception: not an exceptions answer".into());
        }
        Ok(legacy(&v))
    }
}

impl JobExceptions {
    /// The history in Flink 2.x's shape (`exceptionHistory.entries[]`), as `culprit record`
    /// writes it for `--exceptions`: each stack trace is what was kept of it (the class and
    /// message line, the user's frame, the innermost cause), so that it reads back the same.
    pub fn to_rest_json(&self) -> serde_json::Value {
        let entries: Vec<serde_json::Value> = self
            .entries
            .iter()
            .map(|e| {
                let mut trace = e.exception.clone();
                if !e.message.is_empty() {
                    trace.push_str(&format!(": {}", e.message));
                }
                if let Some(frame) = &e.frame {
                    trace.push_str(&format!("\n\tat {frame}"));
                }
                if let Some(cause) = &e.root_cause {
                    trace.push_str(&format!("\nCaused by: {cause}"));
                }
                serde_json::json!({
                    "exceptionName": e.exception,
                    "stacktrace": trace,
                    "timestamp": e.timestamp_ms,
                    "taskName": e.task_name,
                    "endpoint": e.endpoint,
                    "taskManagerId": e.task_manager_id,
                    "concurrentExceptions": vec![serde_json::json!({}); e.concurrent as usize],
                })
            })
            .collect();
        serde_json::json!({ "exceptionHistory": { "entries": entries, "truncated": self.truncated } })
    }
}

fn str_of<'a>(v: &'a serde_json::Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(|s| s.as_str()).filter(|s| !s.is_empty())
}

fn entry_of_history(e: &serde_json::Value) -> Option<ExceptionEntry> {
    let trace = str_of(e, "stacktrace").unwrap_or("");
    let name = str_of(e, "exceptionName").map(str::to_string).or_else(|| class_of(trace))?;
    Some(ExceptionEntry {
        message: message_of(trace, &name),
        frame: user_frame(trace),
        root_cause: root_cause(trace),
        exception: name,
        timestamp_ms: e.get("timestamp").and_then(|t| t.as_i64()).unwrap_or(0),
        task_name: str_of(e, "taskName").map(str::to_string),
        endpoint: str_of(e, "endpoint").or_else(|| str_of(e, "location")).map(str::to_string),
        task_manager_id: str_of(e, "taskManagerId").map(str::to_string),
        concurrent: e.get("concurrentExceptions").and_then(|c| c.as_array()).map_or(0, |c| c.len() as u32),
    })
}

/// The answer before Flink 1.13: the root exception, and the tasks' own in `all-exceptions`
/// (the first of them names the task the root one hit).
fn legacy(v: &serde_json::Value) -> JobExceptions {
    let truncated = v.get("truncated").and_then(|t| t.as_bool()).unwrap_or(false);
    let tasks: Vec<&serde_json::Value> =
        v.get("all-exceptions").and_then(|a| a.as_array()).map(|a| a.iter().collect()).unwrap_or_default();
    let Some(trace) = str_of(v, "root-exception") else {
        return JobExceptions { entries: Vec::new(), truncated };
    };
    let Some(name) = class_of(trace) else { return JobExceptions { entries: Vec::new(), truncated } };
    let task = tasks.first();
    let entry = ExceptionEntry {
        message: message_of(trace, &name),
        frame: user_frame(trace),
        root_cause: root_cause(trace),
        exception: name,
        timestamp_ms: v.get("timestamp").and_then(|t| t.as_i64()).unwrap_or(0),
        task_name: task.and_then(|t| str_of(t, "task")).map(str::to_string),
        endpoint: task.and_then(|t| str_of(t, "location")).map(str::to_string),
        task_manager_id: task.and_then(|t| str_of(t, "taskManagerId")).map(str::to_string),
        concurrent: tasks.len().saturating_sub(1) as u32,
    };
    JobExceptions { entries: vec![entry], truncated }
}

/// The class on a stack trace's first line (`java.io.IOException: …` → `java.io.IOException`).
fn class_of(trace: &str) -> Option<String> {
    let first = trace.lines().next()?.trim();
    let class = first.split_once(':').map_or(first, |(c, _)| c).trim();
    (!class.is_empty() && !class.contains(' ')).then(|| class.to_string())
}

/// The first line of the message after `Class: `, cut to [`MAX_MESSAGE_CHARS`].
fn message_of(trace: &str, class: &str) -> String {
    let first = trace.lines().next().unwrap_or("").trim();
    let message = first.strip_prefix(class).map_or(first, |m| m.trim_start_matches(':').trim());
    cut(message)
}

fn cut(s: &str) -> String {
    if s.chars().count() <= MAX_MESSAGE_CHARS {
        return s.to_string();
    }
    let mut out: String = s.chars().take(MAX_MESSAGE_CHARS - 1).collect();
    out.push('…');
    out
}

/// Frames of the JDK, Scala, Akka/Pekko and Flink itself: the user's code is elsewhere.
const FRAMEWORK_PREFIXES: [&str; 9] =
    ["java.", "javax.", "jdk.", "sun.", "scala.", "akka.", "org.apache.pekko.", "org.apache.flink.", "com.sun."];

/// The first `at …` frame of the outermost trace outside the framework, else the first one.
fn user_frame(trace: &str) -> Option<String> {
    let frames: Vec<&str> = trace
        .lines()
        .map(str::trim)
        .take_while(|l| !l.starts_with("Caused by:"))
        .filter_map(|l| l.strip_prefix("at "))
        .map(without_module)
        .collect();
    frames
        .iter()
        .find(|f| !FRAMEWORK_PREFIXES.iter().any(|p| f.starts_with(p)))
        .or(frames.first())
        .map(|f| f.to_string())
}

/// A frame without the module and class loader Java writes before the class
/// (`java.base/java.lang.Thread.run(…)`, `app//com.acme.Job.map(…)`,
/// `loader/mod@1.0/com.acme.X.y(…)`); a hidden class's own `/` (`Job$$Lambda/0x….apply`)
/// stays.
fn without_module(frame: &str) -> &str {
    let mut rest = frame;
    while let Some((before, after)) = rest.split_once('/') {
        if before.contains(['$', '(']) || after.starts_with("0x") {
            break;
        }
        rest = after;
    }
    rest
}

/// The innermost `Caused by:` line (class and message, cut), when the trace has one.
fn root_cause(trace: &str) -> Option<String> {
    let line = trace.lines().rev().map(str::trim).find_map(|l| l.strip_prefix("Caused by:"))?;
    Some(cut(line.trim()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const CAPTURE: &str = include_str!("../../examples/captures/failover/rest/exceptions.json");

    #[test]
    fn the_failover_capture_gives_five_failures_of_validate_with_the_users_frame() {
        let x = JobExceptions::from_rest_json(CAPTURE).unwrap();
        assert_eq!(x.entries.len(), 5, "five restarts in the lab run, five entries");
        let e = &x.entries[0];
        assert_eq!(e.exception, "java.lang.IllegalStateException");
        assert_eq!(e.message, "lab failover: validate gave up after 60000 records (txn 265524, user user-8178)");
        assert_eq!(e.frame.as_deref(), Some("lab.BackpressureLab$FailingMap.map(BackpressureLab.java:502)"));
        assert_eq!(e.vertex_and_subtask(), Some(("validate".to_string(), Some(1))));
        assert_eq!(e.endpoint.as_deref(), Some("localhost:36487"));
        assert_eq!(e.task_manager_id.as_deref(), Some("127.0.0.1:40657-d921c1"));
        assert_eq!(e.root_cause, None);
        assert!(!x.truncated);
    }

    #[test]
    fn task_names_of_every_flink_version_give_the_vertex_and_the_subtask() {
        let with = |t: &str| ExceptionEntry {
            exception: "E".into(),
            message: String::new(),
            frame: None,
            root_cause: None,
            timestamp_ms: 0,
            task_name: Some(t.into()),
            endpoint: None,
            task_manager_id: None,
            concurrent: 0,
        };
        // 1.x: "name (k/n)"; 2.x adds " - execution #N"; a chained vertex keeps its arrows.
        assert_eq!(
            with("Source: in -> parse (3/4)").vertex_and_subtask(),
            Some(("Source: in -> parse".into(), Some(2)))
        );
        assert_eq!(with("sink (1/1) - execution #12").vertex_and_subtask(), Some(("sink".into(), Some(0))));
        assert_eq!(with("odd name (x)").vertex_and_subtask(), Some(("odd name (x)".into(), None)));
    }

    #[test]
    fn the_legacy_answer_gives_its_root_exception_and_the_task_it_hit() {
        let text = r#"{"root-exception": "java.lang.RuntimeException: boom\n\tat com.acme.Job$F.map(Job.java:10)\nCaused by: java.io.IOException: disk full\n\tat x.y(Z.java:1)",
            "timestamp": 1000, "truncated": true,
            "all-exceptions": [{"exception": "…", "task": "enrich (1/2)", "location": "tm-1:6121", "timestamp": 1000}]}"#;
        let x = JobExceptions::from_rest_json(text).unwrap();
        let e = &x.entries[0];
        assert_eq!((e.exception.as_str(), e.message.as_str()), ("java.lang.RuntimeException", "boom"));
        assert_eq!(e.root_cause.as_deref(), Some("java.io.IOException: disk full"));
        assert_eq!(e.frame.as_deref(), Some("com.acme.Job$F.map(Job.java:10)"));
        assert_eq!(e.vertex_and_subtask(), Some(("enrich".into(), Some(0))));
        assert!(x.truncated);
    }

    #[test]
    fn a_job_that_never_failed_has_no_entries_and_other_json_is_an_error() {
        let none = r#"{"root-exception": null, "all-exceptions": [], "truncated": false, "exceptionHistory": {"entries": [], "truncated": false}}"#;
        assert_eq!(JobExceptions::from_rest_json(none).unwrap().entries, vec![]);
        assert!(JobExceptions::from_rest_json(r#"{"plan": {}}"#).is_err());
        assert!(JobExceptions::from_rest_json("[1]").is_err());
        assert!(JobExceptions::from_rest_json("<html>").is_err());
    }

    #[test]
    fn what_record_writes_reads_back_the_same() {
        let mut x = JobExceptions::from_rest_json(CAPTURE).unwrap();
        x.entries[0].root_cause = Some("java.io.IOException: gone".into());
        x.entries[1].concurrent = 2;
        let written = x.to_rest_json().to_string();
        assert_eq!(JobExceptions::from_rest_json(&written).unwrap(), x);
    }

    #[test]
    fn a_frame_loses_its_module_and_loader_but_a_lambda_keeps_its_hidden_class_name() {
        assert_eq!(
            without_module("java.base/java.lang.Thread.run(Thread.java:840)"),
            "java.lang.Thread.run(Thread.java:840)"
        );
        assert_eq!(without_module("app//com.acme.Job.map(Job.java:7)"), "com.acme.Job.map(Job.java:7)");
        assert_eq!(without_module("loader/mod@1.0/com.acme.X.y(X.java:1)"), "com.acme.X.y(X.java:1)");
        let lambda = "com.acme.Job$$Lambda/0x000000080019c440.apply(Unknown Source)";
        assert_eq!(without_module(lambda), lambda);
        // The user's lambda is found as the user's frame, under Flink's.
        let trace = format!(
            "java.lang.RuntimeException: x\n\tat {lambda}\n\tat org.apache.flink.streaming.api.operators.StreamMap.processElement(StreamMap.java:37)"
        );
        assert_eq!(user_frame(&trace).as_deref(), Some(lambda));
    }

    #[test]
    fn a_long_message_is_cut_on_a_character_boundary() {
        let trace = format!("java.lang.Error: {}\n\tat a.b(C.java:1)", "é".repeat(1000));
        let m = message_of(&trace, "java.lang.Error");
        assert_eq!(m.chars().count(), MAX_MESSAGE_CHARS);
        assert!(m.ends_with('…'));
    }
}
