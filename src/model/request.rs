//! The one input every entry point builds: which job, at what time, over what window.
//!
//! Pure data.

use serde::{Deserialize, Serialize};

/// A request for one diagnosis.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct DiagnosisRequest {
    /// Job name as Flink shows it (`bp-lab-slow-sink`), as the reporter sanitizes it
    /// (`bp_lab_slow_sink`), or the job id. `None`: the only job there is (or the plan's).
    pub job: Option<String>,
    /// The time the verdict is about, Unix ms. `None`: the newest data (a recording's last
    /// sample; live, now).
    pub at_ms: Option<i64>,
    /// Window length in ms. `None`: the configured default.
    pub window_ms: Option<i64>,
    /// Labels that say which deployment is meant when two report the same job id (the
    /// alert's labels, `--label namespace=flink-us`, the API's `label=`), e.g.
    /// `namespace`, `cluster`. Only labels that tell the job's deployments apart are read.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub labels: std::collections::BTreeMap<String, String>,
}
