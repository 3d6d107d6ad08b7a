//! Fencing inside a send: a send that makes several requests (a Slack verdict: the message,
//! then its details reply in the thread; an update, then its "changed" reply) asks before
//! each later request whether its sender still holds the send's lease, so that a replica
//! paused between two requests for longer than the lease (another replica has taken the
//! send over and completes it) stops there instead of posting the rest a second time.
//!
//! The delivery loop runs each send in [`scoped`] with a check against the store; a
//! notifier calls [`held`] before a later request. Outside a scope (the CLI, tests of a
//! notifier alone) every request may go.

use std::future::Future;
use std::sync::Arc;

use futures::future::BoxFuture;

/// Whether the send may go on: the sender still holds its lease.
pub type Check = Arc<dyn Fn() -> BoxFuture<'static, bool> + Send + Sync>;

tokio::task_local! {
    static FENCE: Check;
}

/// Runs `send` with `check` as its fence.
pub async fn scoped<F: Future>(check: Check, send: F) -> F::Output {
    FENCE.scope(check, send).await
}

/// Whether the send this task makes may make its next request (`true` outside a scope).
pub async fn held() -> bool {
    match FENCE.try_with(Arc::clone) {
        Ok(check) => check().await,
        Err(_) => true,
    }
}
