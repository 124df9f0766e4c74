//! Stopping a server without cutting off its calls.
//!
//! The binary turns the first SIGTERM (or SIGINT) into
//! [`Shutdown::request`]. The server then stops taking work: over HTTP it
//! closes its listener, answers new requests on open connections `503`,
//! and `/readyz` says it is draining, so a load balancer moves on; over
//! stdio it reads no further requests. Calls already running finish, each
//! within its own deadline, for at most the grace period
//! (`--shutdown-grace-ms`), and the server returns, so the process exits 0
//! with its journal written. A second signal ends the process at once (the
//! binary's part).
//!
//! An HTTP request let in before the stop ([`Shutdown::admit`]) counts as
//! running from then on, and the call it carries runs even if the stop
//! comes while it is still being read or checked: a request is either
//! refused with `503` at the door, which a proxy can retry elsewhere, or
//! answered.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Notify;

/// A request to stop serving, and the count of calls still running.
#[derive(Debug, Default)]
pub struct Shutdown {
    requested: AtomicBool,
    notify: Notify,
    in_flight: AtomicUsize,
}

impl Shutdown {
    /// Asks the server to stop taking work and to return once its running
    /// calls are done. Safe to call from any thread, more than once.
    pub fn request(&self) {
        self.requested.store(true, Ordering::SeqCst);
        self.notify.notify_waiters();
    }

    /// Whether a stop was asked for.
    pub fn requested(&self) -> bool {
        self.requested.load(Ordering::SeqCst)
    }

    /// Calls running now.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }

    /// Resolves once a stop is asked for.
    pub(crate) async fn wait(&self) {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.requested() {
                return;
            }
            notified.await;
        }
    }

    /// Lets an HTTP request in: counted as running while it lives, so a
    /// stop waits for it.
    pub(crate) fn admit(self: &Arc<Self>) -> Admitted {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        Admitted {
            _guard: Arc::new(AdmittedGuard(self.clone())),
        }
    }

    /// Counts a call as running until the guard drops.
    pub(crate) fn call(&self) -> CallGuard<'_> {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        CallGuard(self)
    }

    /// Waits until no call runs, or `grace` has passed; whether every call
    /// ended.
    pub(crate) async fn drained(&self, grace: Duration) -> bool {
        let end = Instant::now() + grace;
        while self.in_flight() > 0 {
            if Instant::now() >= end {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        true
    }
}

/// An HTTP request let in before a stop was asked ([`Shutdown::admit`]),
/// carried in its extensions: counted as running until the last copy
/// drops.
#[derive(Clone)]
pub(crate) struct Admitted {
    _guard: Arc<AdmittedGuard>,
}

struct AdmittedGuard(Arc<Shutdown>);

impl Drop for AdmittedGuard {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A running call ([`Shutdown::call`]).
pub(crate) struct CallGuard<'a>(&'a Shutdown);

impl Drop for CallGuard<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "current_thread")]
    async fn drained_waits_for_the_running_calls_up_to_the_grace() {
        let s = std::sync::Arc::new(Shutdown::default());
        let guard = s.call();
        assert_eq!(s.in_flight(), 1);
        assert!(
            !s.drained(Duration::from_millis(50)).await,
            "a call still runs"
        );
        drop(guard);
        assert!(s.drained(Duration::from_millis(50)).await);

        // A request let in holds the drain while any copy of it lives.
        let admitted = s.admit();
        let copy = admitted.clone();
        s.request();
        drop(admitted);
        assert!(!s.drained(Duration::from_millis(20)).await);
        drop(copy);
        assert!(s.drained(Duration::from_millis(50)).await);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn wait_returns_for_a_request_made_before_or_after() {
        let s = std::sync::Arc::new(Shutdown::default());
        let waiter = tokio::spawn({
            let s = s.clone();
            async move { s.wait().await }
        });
        tokio::task::yield_now().await;
        s.request();
        waiter.await.unwrap();
        // Already requested: returns at once.
        s.wait().await;
        assert!(s.requested());
    }
}
