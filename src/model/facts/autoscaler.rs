//! What the verdict says of the Flink Kubernetes Operator autoscaler's recommendation for
//! the culprit (`crate::diagnose::autoscaler` decides it): its stance, whether its next
//! step can help, and the numbers behind both.

use crate::model::autoscaler::AutoscalerView;
use crate::model::verdict::Finding;

/// The autoscaler's view of the culprit, next to the finding it is judged against.
#[derive(Debug, Clone, PartialEq)]
pub struct AutoscalerFact {
    pub view: AutoscalerView,
    pub finding: Finding,
}
