//! `[incidents]`: one message for a shared cause when many jobs go red together.

use serde::{Deserialize, Serialize};

use super::Millis;
use crate::model::incident::IncidentRules;

/// When many jobs reach verdicts within a short time and their culprits share a cause
/// (the system their sinks write to, a host, a topic, else the same finding), chat
/// destinations get one summary naming it, with each job's verdict in its thread, instead
/// of a top-level post per job; incident destinations (PagerDuty, Opsgenie, …) get the
/// shared cause in each job's event. `GET /api/v1/incidents` lists them.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct IncidentsConfig {
    /// Group verdicts into incidents. Default true.
    pub enabled: bool,
    /// Least number of jobs sharing a cause. Default 5: fewer is a coincidence a channel
    /// reads at a glance; a shared cause of five jobs is already the thing to say.
    pub min_jobs: usize,
    /// Longest gap between two verdicts of one incident. Default 2m: a storm's verdicts
    /// come within seconds of each other; Alertmanager's `group_interval` (5m) and its
    /// `repeat_interval` bring the same jobs again later, and those start a new incident.
    pub window: Millis,
    /// How far back each diagnosis looks for verdicts it may share a cause with (and
    /// `GET /api/v1/incidents` lists incidents). Default 30m; an incident longer than this
    /// is cut into two.
    pub lookback: Millis,
}

impl Default for IncidentsConfig {
    fn default() -> Self {
        IncidentsConfig {
            enabled: true,
            min_jobs: 5,
            window: Millis::from_secs(120),
            lookback: Millis::from_secs(1800),
        }
    }
}

impl IncidentsConfig {
    /// The grouping rules these settings give.
    pub fn rules(&self) -> IncidentRules {
        IncidentRules { min_jobs: self.min_jobs, window_ms: self.window.as_ms() }
    }

    pub(super) fn validate(&self, problems: &mut Vec<String>) {
        if self.min_jobs < 2 {
            problems.push("incidents.min_jobs must be at least 2 (one job is no shared cause)".into());
        }
        if self.window.as_ms() <= 0 {
            problems.push("incidents.window must be more than 0s".into());
        }
        if self.lookback.as_ms() < self.window.as_ms() {
            problems.push("incidents.lookback must be at least incidents.window".into());
        }
    }
}
