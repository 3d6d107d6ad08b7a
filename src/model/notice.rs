//! A notice: one thing to tell one destination about one Alertmanager group.
//!
//! Planned by [`crate::service`], rendered by [`crate::render`] and sent by
//! [`crate::notify`]; it lives here, below all three, so the renderers do not depend on
//! the layer that sends what they render. Pure data.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model::verdict::{JobRef, Verdict};

/// What a notice says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NoticeKind {
    /// A verdict for the group (first, or changed).
    Verdict,
    /// The group resolved.
    Resolved,
    /// The diagnosis failed for longer than the retry window; `reason` says why.
    CouldNotDiagnose,
}

/// One thing to tell one destination about one Alertmanager group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Notice {
    pub kind: NoticeKind,
    /// Alertmanager's `groupKey` of the webhook.
    pub group_key: String,
    /// The group's common labels (untrusted: escape before display).
    pub labels: BTreeMap<String, String>,
    /// The job the notice is about.
    pub job: JobRef,
    /// The verdict, for [`NoticeKind::Verdict`].
    pub verdict: Option<Verdict>,
    /// Stored verdict id, for links.
    pub verdict_id: Option<i64>,
    /// A link to the verdict (`{external_url}/api/v1/verdicts/{id}`), when configured.
    pub verdict_url: Option<String>,
    /// Why there is no verdict, for [`NoticeKind::CouldNotDiagnose`].
    pub reason: Option<String>,
    /// True when the group still fires.
    pub firing: bool,
    /// True when this verdict replaces an earlier, different one for the group.
    pub changed: bool,
    /// Unique per (destination, group, verdict): what makes a delivery idempotent.
    pub idempotency_key: String,
    /// When the notice was made, Unix ms.
    pub at_ms: i64,
}
