//! What answers the collector's queries ([`MetricSource`]) and how a query fails ([`QueryError`]).

use std::future::Future;

use crate::collect::query::{Query, QueryResult};

/// A query that could not be answered (network, HTTP status, bad answer). The message
/// never contains credentials.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct QueryError {
    pub message: String,
    /// The backend refused the query as too large: smaller queries may be answered.
    pub too_large: Option<TooLarge>,
}

/// What a backend found too large in a query it refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TooLarge {
    /// Too many series, chunks or samples: fewer series (or a shorter range) may pass.
    Series,
    /// Too many evaluation steps, or too long a range: only a shorter range passes.
    Steps,
}

impl QueryError {
    pub fn new(message: impl Into<String>) -> Self {
        QueryError { message: message.into(), too_large: None }
    }
}

/// Something that answers queries: a recording in memory or a live backend.
pub trait MetricSource {
    /// Answers independent queries; one result per query, in order. A backend may run
    /// them concurrently or merge them into fewer requests.
    fn run(&self, queries: &[Query]) -> impl Future<Output = Vec<Result<QueryResult, QueryError>>>;

    /// The newest time with data: a recording's last sample; live, now. Unix ms.
    fn latest_ms(&self) -> Option<i64>;
}

impl MetricSource for crate::collect::store::SeriesStore {
    async fn run(&self, queries: &[Query]) -> Vec<Result<QueryResult, QueryError>> {
        queries.iter().map(|q| Ok(self.evaluate(q))).collect()
    }

    fn latest_ms(&self) -> Option<i64> {
        self.last_timestamp_ms()
    }
}
