//! Flink's own record of the job's rescales: `GET /jobs/:id/rescales/history` (Flink 2.3,
//! FLIP-495), read beside the plan.
//!
//! Flink answers it only for a job on the Adaptive scheduler (`jobmanager.scheduler:
//! adaptive`) with `web.adaptive-scheduler.rescale-history.size` above its default 0; else
//! it answers an error (`RescalesUnavailableException`), and versions before 2.3 answer 404.
//! Either is "no history", never an error of the diagnosis.
//!
//! Shape (Flink's `JobRescalesHistory`, a JSON array of `JobRescaleDetails`, newest first as
//! seen in the lab's 2.3.0 capture `examples/captures/adaptive-rescale`): each entry has
//! `rescaleUuid`, `resourceRequirementsUuid`, `rescaleAttemptId`, `startTimestampInMillis`,
//! `endTimestampInMillis` (null while in progress), `terminalState` (`COMPLETED`, `FAILED`,
//! `IGNORED`), `triggerCause` (`INITIAL_SCHEDULE`, `UPDATE_REQUIREMENT`,
//! `NEW_RESOURCE_AVAILABLE`, `RECOVERABLE_FAILOVER`), `terminatedReason` (`SUCCEEDED`,
//! `EXCEPTION_OCCURRED`, `RESOURCE_REQUIREMENTS_UPDATED`,
//! `NO_RESOURCES_OR_PARALLELISMS_CHANGE`, `JOB_FINISHED`, `JOB_FAILED`, `JOB_CANCELED`,
//! `JOB_FAILOVER_RESTARTING`), and `vertices` / `slots` / `schedulerStates`, which the
//! history leaves empty (only `/rescales/details/:uuid` fills them: per vertex
//! `jobVertexId`, `jobVertexName`, `preRescaleParallelism`, `postRescaleParallelism`). An
//! object wrapping the array (`{"rescales": [...]}`) is read too; unknown fields are
//! ignored.
//!
//! Pure data and parsing.

use serde::{Deserialize, Serialize};

/// Longest enum name kept from the answer (Flink's longest today is 34 characters): a value
/// beyond it is not one of Flink's names.
const MAX_NAME_CHARS: usize = 64;

/// Flink REST's rescale history of one job, newest first.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct RescaleHistory {
    pub entries: Vec<RescaleEntry>,
}

/// One rescale (or attempt at one) by the Adaptive scheduler.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RescaleEntry {
    /// `rescaleUuid` (32 hexadecimal digits), for `/rescales/details/:uuid`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    /// `rescaleAttemptId`: the attempts of one rescale count up from 1.
    pub attempt: u64,
    /// When the scheduler began it, Unix ms.
    pub start_ms: i64,
    /// When it ended, Unix ms; `None` while in progress.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_ms: Option<i64>,
    /// What it says about itself: why it began, how it ended.
    pub cause: RescaleCause,
    /// Per vertex, the parallelism before and after (only a detailed answer has them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vertices: Vec<VertexRescale>,
}

/// Why a rescale began and how it ended, in Flink's names (`UPDATE_REQUIREMENT`,
/// `COMPLETED`, `SUCCEEDED`, …); each `None` when the answer had none.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RescaleCause {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigger: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terminal_state: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terminated_reason: Option<String>,
}

impl RescaleCause {
    /// The rescale took effect (`COMPLETED`), or is still running (no terminal state yet).
    pub fn completed(&self) -> bool {
        self.terminal_state.as_deref().is_none_or(|s| s == "COMPLETED")
    }
}

/// One vertex's parallelism before and after a rescale.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VertexRescale {
    pub vertex_id: String,
    pub vertex: String,
    pub from: Option<u32>,
    pub to: Option<u32>,
}

impl RescaleEntry {
    /// Not a change of a running job: the job's first schedule.
    pub fn is_initial_schedule(&self) -> bool {
        self.cause.trigger.as_deref() == Some("INITIAL_SCHEDULE")
    }

    /// When it took effect (its end), else when it began.
    pub fn at_ms(&self) -> i64 {
        self.end_ms.unwrap_or(self.start_ms)
    }
}

impl RescaleHistory {
    /// The newest rescale of the running job (not its first schedule): the one whose
    /// details (`/rescales/details/:uuid`) are worth a request.
    pub fn newest_rescale(&self) -> Option<&RescaleEntry> {
        self.entries.iter().find(|e| !e.is_initial_schedule())
    }

    /// Takes the per-vertex parallelism of `details` (the answer of
    /// `/rescales/details/:uuid`, one `JobRescaleDetails`) into the entry of the same uuid.
    pub fn add_details(&mut self, details: &str) -> Result<(), String> {
        let v: serde_json::Value = serde_json::from_str(details).map_err(|e| format!("not JSON: {e}"))?;
        let detailed = entry_of(&v).ok_or("not the details of a rescale (no startTimestampInMillis)")?;
        let entry = self
            .entries
            .iter_mut()
            .find(|e| e.uuid.is_some() && e.uuid == detailed.uuid)
            .ok_or("the details are of no rescale in the history")?;
        entry.vertices = detailed.vertices;
        Ok(())
    }

    /// Parses the answer of `GET /jobs/:id/rescales/history` (the array, or an object
    /// wrapping it in `rescales`). Flink's error body (`{"errors": [...]}`) and anything
    /// else is an error: the caller treats it as "no history".
    pub fn from_rest_json(text: &str) -> Result<RescaleHistory, String> {
        let v: serde_json::Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        let list = match &v {
            serde_json::Value::Array(list) => list,
            serde_json::Value::Object(o) => match (o.get("rescales"), o.get("errors")) {
                (Some(serde_json::Value::Array(list)), _) => list,
                (_, Some(errors)) => {
                    let first = errors.as_array().and_then(|e| e.first()).and_then(|e| e.as_str()).unwrap_or("");
                    let first = first.lines().next().unwrap_or("").chars().take(200).collect::<String>();
                    return Err(format!("Flink answered an error: {first}"));
                }
                _ => return Err("not a rescale history (no list of rescales)".into()),
            },
            _ => return Err("not a rescale history (neither a list nor an object)".into()),
        };
        let mut entries: Vec<RescaleEntry> = list.iter().filter_map(entry_of).collect();
        entries.sort_by_key(|e| std::cmp::Reverse((e.start_ms, e.attempt)));
        Ok(RescaleHistory { entries })
    }

    /// The history in Flink's shape, as `culprit record` writes it for `--rescales`: reads
    /// back the same.
    pub fn to_rest_json(&self) -> serde_json::Value {
        let entries: Vec<serde_json::Value> = self
            .entries
            .iter()
            .map(|e| {
                let vertices: serde_json::Map<String, serde_json::Value> = e
                    .vertices
                    .iter()
                    .map(|v| {
                        (
                            v.vertex_id.clone(),
                            serde_json::json!({
                                "jobVertexId": v.vertex_id,
                                "jobVertexName": v.vertex,
                                "preRescaleParallelism": v.from,
                                "postRescaleParallelism": v.to,
                            }),
                        )
                    })
                    .collect();
                serde_json::json!({
                    "rescaleUuid": e.uuid,
                    "rescaleAttemptId": e.attempt,
                    "startTimestampInMillis": e.start_ms,
                    "endTimestampInMillis": e.end_ms,
                    "triggerCause": e.cause.trigger,
                    "terminalState": e.cause.terminal_state,
                    "terminatedReason": e.cause.terminated_reason,
                    "vertices": vertices,
                })
            })
            .collect();
        serde_json::Value::Array(entries)
    }
}

/// One of Flink's enum names (`UPPER_SNAKE`), else nothing: free text is never kept.
fn name_of(v: &serde_json::Value, key: &str) -> Option<String> {
    let s = v.get(key)?.as_str()?;
    (!s.is_empty()
        && s.len() <= MAX_NAME_CHARS
        && s.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
    .then(|| s.to_string())
}

fn entry_of(e: &serde_json::Value) -> Option<RescaleEntry> {
    let start_ms = e.get("startTimestampInMillis").and_then(|t| t.as_i64())?;
    let vertices = e
        .get("vertices")
        .and_then(|v| v.as_object())
        .map(|o| {
            o.iter()
                .map(|(id, v)| VertexRescale {
                    vertex_id: v.get("jobVertexId").and_then(|i| i.as_str()).unwrap_or(id).to_string(),
                    vertex: v.get("jobVertexName").and_then(|n| n.as_str()).unwrap_or(id).to_string(),
                    from: v.get("preRescaleParallelism").and_then(|p| p.as_u64()).map(|p| p as u32),
                    to: v.get("postRescaleParallelism").and_then(|p| p.as_u64()).map(|p| p as u32),
                })
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    let mut vertices = vertices;
    vertices.sort_by(|a, b| a.vertex_id.cmp(&b.vertex_id));
    let uuid = e
        .get("rescaleUuid")
        .and_then(|u| u.as_str())
        .filter(|u| u.len() == 32 && u.chars().all(|c| c.is_ascii_hexdigit()))
        .map(str::to_string);
    Some(RescaleEntry {
        uuid,
        attempt: e.get("rescaleAttemptId").and_then(|a| a.as_u64()).unwrap_or(0),
        start_ms,
        end_ms: e.get("endTimestampInMillis").and_then(|t| t.as_i64()),
        cause: RescaleCause {
            trigger: name_of(e, "triggerCause"),
            terminal_state: name_of(e, "terminalState"),
            terminated_reason: name_of(e, "terminatedReason"),
        },
        vertices,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const AFTER: &str = include_str!("../../tests/data/rescales/history-after.json");
    const BEFORE: &str = include_str!("../../tests/data/rescales/history-before.json");
    const DETAILS: &str = include_str!("../../tests/data/rescales/details.json");
    const UNAVAILABLE: &str = include_str!("../../tests/data/rescales/history-default-scheduler-404.json");
    const CAPTURE: &str = include_str!("../../examples/captures/adaptive-rescale/rest/rescales-history.json");

    #[test]
    fn the_lab_history_after_the_put_holds_the_rescale_and_the_first_schedule_newest_first() {
        let h = RescaleHistory::from_rest_json(AFTER).unwrap();
        assert_eq!(h.entries.len(), 2);
        let r = &h.entries[0];
        assert_eq!(r.uuid.as_deref(), Some("fa208db8c8c8624158e684f4d2d64fe2"));
        assert_eq!(r.attempt, 1);
        // 1796304218639 − 1796304196263 = 22 376 ms, the longest rescale of /rescales/summary.
        assert_eq!((r.start_ms, r.end_ms), (1_796_304_196_263, Some(1_796_304_218_639)));
        assert_eq!(r.at_ms(), 1_796_304_218_639);
        assert_eq!(r.cause.trigger.as_deref(), Some("UPDATE_REQUIREMENT"));
        assert_eq!(r.cause.terminal_state.as_deref(), Some("COMPLETED"));
        assert_eq!(r.cause.terminated_reason.as_deref(), Some("SUCCEEDED"));
        assert!(r.cause.completed() && !r.is_initial_schedule());
        // The history leaves `vertices` empty; only the details fill them.
        assert!(r.vertices.is_empty());
        // The first schedule: 1796304142114 − 1796304141219 = 895 ms, the shortest.
        let first = &h.entries[1];
        assert!(first.is_initial_schedule());
        assert_eq!(first.end_ms.unwrap() - first.start_ms, 895);
        assert_eq!(h.newest_rescale().map(|e| e.start_ms), Some(1_796_304_196_263));
        // The capture's answer (taken at the end of the run) is the same history.
        assert_eq!(RescaleHistory::from_rest_json(CAPTURE).unwrap(), h);
    }

    #[test]
    fn before_the_put_the_history_is_only_the_first_schedule() {
        let h = RescaleHistory::from_rest_json(BEFORE).unwrap();
        assert_eq!(h.entries.len(), 1);
        assert!(h.entries[0].is_initial_schedule());
        assert_eq!(h.newest_rescale(), None);
    }

    #[test]
    fn the_details_give_each_vertex_its_parallelism_before_and_after() {
        let mut h = RescaleHistory::from_rest_json(AFTER).unwrap();
        h.add_details(DETAILS).unwrap();
        let sink = h.entries[0].vertices.iter().find(|v| v.vertex == "slow-sink: Writer").unwrap();
        assert_eq!(
            (sink.vertex_id.as_str(), sink.from, sink.to),
            ("2e588ce1c86a9d46e2e85186773ce4fd", Some(4), Some(2))
        );
        assert_eq!(h.entries[0].vertices.len(), 4, "source, parse, fraud-score, sink");
        assert!(h.entries[0].vertices.iter().filter(|v| v.vertex != "slow-sink: Writer").all(|v| v.from == v.to));
        // Details of another rescale are refused, the history unchanged.
        let mut other = RescaleHistory::from_rest_json(BEFORE).unwrap();
        assert!(other.add_details(DETAILS).is_err());
        assert!(other.entries[0].vertices.is_empty());
    }

    #[test]
    fn flinks_unavailable_answer_garbage_and_other_json_are_errors_and_unknown_fields_are_ignored() {
        let e = RescaleHistory::from_rest_json(UNAVAILABLE).unwrap_err();
        assert!(e.contains("RescalesUnavailableException"), "{e}");
        assert!(!e.contains("\tat "), "no stack trace: {e}");
        assert!(RescaleHistory::from_rest_json("<html>").is_err());
        assert!(RescaleHistory::from_rest_json(r#"{"plan": {}}"#).is_err());
        assert!(RescaleHistory::from_rest_json("42").is_err());
        assert_eq!(RescaleHistory::from_rest_json("[]").unwrap().entries, vec![]);
        // An object wrapping the list, an entry with a field Flink may add, one without a
        // start (dropped), and a cause that is not one of Flink's names (not kept).
        let h = RescaleHistory::from_rest_json(
            r#"{"rescales": [{"startTimestampInMillis": 5, "terminalState": "FAILED", "triggerCause": "<b>x</b>", "newField": 1},
                             {"terminalState": "COMPLETED"}]}"#,
        )
        .unwrap();
        assert_eq!(h.entries.len(), 1);
        assert_eq!(h.entries[0].cause.trigger, None);
        assert!(!h.entries[0].cause.completed());
        assert_eq!(h.entries[0].end_ms, None);
    }

    #[test]
    fn what_record_writes_reads_back_the_same() {
        let mut h = RescaleHistory::from_rest_json(AFTER).unwrap();
        h.add_details(DETAILS).unwrap();
        let written = h.to_rest_json().to_string();
        assert_eq!(RescaleHistory::from_rest_json(&written).unwrap(), h);
    }
}
