//! Store work off the async workers.
//!
//! The stores are synchronous (SQLite, and the blocking PostgreSQL client,
//! which drives its own runtime and panics when called from inside
//! another). An async handler that must read or write the store hands the
//! work to the blocking pool with [`blocking`], bounded by a deadline: the
//! request is answered when the deadline passes (the work finishes in the
//! background) or when the work panics, never left without an answer.

use std::time::Duration;

/// Longest a request handled outside a tool call (`resources/read`)
/// waits for the store.
pub(crate) const STORE_WAIT: Duration = Duration::from_secs(10);

/// Why [`blocking`] has no result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Offload {
    /// The deadline passed first.
    #[error("the store did not answer within {} ms", .0.as_millis())]
    TimedOut(Duration),
    /// The work panicked (a bug; the request is answered anyway).
    #[error("the store work failed unexpectedly")]
    Failed,
}

/// Runs `work` on the blocking pool and waits for it at most `within`.
pub(crate) async fn blocking<T: Send + 'static>(
    within: Duration,
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, Offload> {
    match tokio::time::timeout(within, tokio::task::spawn_blocking(work)).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(_)) => Err(Offload::Failed),
        Err(_) => Err(Offload::TimedOut(within)),
    }
}
