//! What a session was shown beyond its first list: the tools `find_tools`
//! revealed in lazy mode, and `artifact_view` after a spill.
//!
//! A 2025-11-25 session keeps them in its handler. A stateless request
//! (2026-07-28) has no handler that outlives it, and in a fleet the next
//! request may reach another host: with a shared store the revealed names
//! are kept there ([`RevealBackend`], the PostgreSQL store), keyed by the
//! token id (or the session id), for as long as the front end that keeps
//! them asks.

use std::time::Duration;

use crate::store_error::StoreError;

/// Revealed tool names in a store shared by hosts.
pub trait RevealBackend: Send + Sync {
    /// Adds `tools` to what `key` was shown (and keeps all of them for
    /// `keep` from now); returns whether any was new.
    fn add(&self, key: &str, tools: &[String], keep: Duration) -> Result<bool, StoreError>;
    /// What `key` was shown and is still kept, sorted.
    fn revealed(&self, key: &str) -> Result<Vec<String>, StoreError>;
}

/// What every [`RevealBackend`] must do.
#[cfg(any(test, feature = "conformance"))]
#[doc(hidden)]
pub fn conformance(backend: &dyn RevealBackend) {
    let mut raw = [0u8; 8];
    getrandom::fill(&mut raw).unwrap();
    let (a, b) = (
        format!("token:{}", hex::encode(raw)),
        format!("session:{}", hex::encode(raw)),
    );
    const KEEP: Duration = Duration::from_secs(3600);
    assert_eq!(backend.revealed(&a).unwrap(), Vec::<String>::new());
    assert!(backend
        .add(&a, &["file_view".into(), "find_text".into()], KEEP)
        .unwrap());
    assert!(!backend.add(&a, &["file_view".into()], KEEP).unwrap());
    assert!(backend.add(&a, &["artifact_view".into()], KEEP).unwrap());
    assert_eq!(
        backend.revealed(&a).unwrap(),
        vec!["artifact_view", "file_view", "find_text"]
    );
    // Keys do not see each other's.
    assert_eq!(backend.revealed(&b).unwrap(), Vec::<String>::new());
    // Expired names are gone.
    backend
        .add(&b, &["x".into()], Duration::from_millis(1))
        .unwrap();
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(backend.revealed(&b).unwrap(), Vec::<String>::new());
}
