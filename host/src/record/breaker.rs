//! The circuit breaker: stop answering the same failing call the same way.
//!
//! Within one conversation — an MCP session, or a trajectory for the CLI
//! and the library — the breaker counts each tool's consecutive failures
//! with one error code. Once a tool has failed with the same code
//! [`DEFAULT_THRESHOLD`] (K) times in a row, a call that would repeat one
//! of those failures (the same tool, the same canonical arguments) is
//! answered `circuit_open` without running: correctable, naming the count
//! and what to change. A different call of the tool still runs; a success
//! of the tool closes the breaker; a failure with another code starts a
//! new count. Timeouts of read-only retries count like any other failure.
//! A `circuit_open` answer itself changes nothing.
//!
//! Every failure's observation carries `consecutive_failures` (the count
//! including it). The state is in memory, bounded ([`MAX_RUNS`]);
//! [`Breaker::seed`] replays a trajectory's journaled calls into it, which
//! is how the CLI (one process per call) carries the count from one call to
//! the next. A breaker [shared](Breaker::shared) through a store
//! ([`BreakerBackend`], the PostgreSQL store) keeps the counts there
//! instead, so failures of one conversation spread over several hosts trip
//! it on all of them; when that store cannot answer, the breaker counts in
//! memory (it guards against loops, it is not an authority).

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use serde_json::json;

use crate::observation::{ErrorCode, ErrorInfo};
use crate::store_error::StoreError;

/// Consecutive failures with one code after which a repeat is refused.
pub const DEFAULT_THRESHOLD: u32 = 3;

/// Most (conversation, tool) counts kept; beyond, the oldest conversation's
/// are forgotten.
pub const MAX_RUNS: usize = 4096;

/// A tool's current run of failures with one code.
#[derive(Debug, Clone, Default)]
struct Run {
    code: String,
    count: u32,
    /// The canonical-argument digests of the failed calls of this run.
    args: HashSet<String>,
}

/// A run of failures as a store keeps it: the error code, the count and
/// the argument digests of the failed calls.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredRun {
    pub code: String,
    pub count: u32,
    pub args: Vec<String>,
}

/// Breaker counts kept in a store shared by several hosts, keyed by
/// conversation (a session id, or a trajectory under a token) and tool.
/// Each method is one atomic step.
pub trait BreakerBackend: Send + Sync {
    /// The current run of `tool` in `conversation`.
    fn run(&self, conversation: &str, tool: &str) -> Result<Option<StoredRun>, StoreError>;
    /// A success (`None`) ends the run; a failure with the run's code
    /// extends it, with another code starts a new one. Returns the count
    /// (0 for a success).
    fn record(
        &self,
        conversation: &str,
        tool: &str,
        failure: Option<(&str, &str)>,
    ) -> Result<u32, StoreError>;
}

/// The breaker of one host (see the module docs).
pub struct Breaker {
    threshold: u32,
    runs: Mutex<Runs>,
    shared: Option<std::sync::Arc<dyn BreakerBackend>>,
}

impl std::fmt::Debug for Breaker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Breaker")
            .field("threshold", &self.threshold)
            .field("shared", &self.shared.is_some())
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Default)]
struct Runs {
    /// (conversation, tool) → run.
    map: HashMap<(String, String), Run>,
    /// Insertion order, for the bound.
    order: std::collections::VecDeque<(String, String)>,
    /// (conversation, tool) pairs already seeded from the journal.
    seeded: HashSet<(String, String)>,
}

impl Default for Breaker {
    fn default() -> Self {
        Breaker::new(DEFAULT_THRESHOLD)
    }
}

impl Breaker {
    /// A breaker that opens after `threshold` failures (0 never opens).
    pub fn new(threshold: u32) -> Breaker {
        Breaker {
            threshold,
            runs: Mutex::new(Runs::default()),
            shared: None,
        }
    }

    /// The same breaker counting in `backend` (shared by hosts).
    pub fn shared(mut self, backend: std::sync::Arc<dyn BreakerBackend>) -> Breaker {
        self.shared = Some(backend);
        self
    }

    /// The shared run of (`conversation`, `tool`), when the breaker is
    /// shared and its store answers.
    fn stored(&self, conversation: &str, tool: &str) -> Option<Option<Run>> {
        let backend = self.shared.as_ref()?;
        match backend.run(conversation, tool) {
            Ok(run) => Some(run.map(|r| Run {
                code: r.code,
                count: r.count,
                args: r.args.into_iter().collect(),
            })),
            Err(e) => {
                tracing::warn!(error = %e, "the breaker's store did not answer; counting in memory");
                None
            }
        }
    }

    pub fn threshold(&self) -> u32 {
        self.threshold
    }

    fn runs(&self) -> std::sync::MutexGuard<'_, Runs> {
        self.runs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether the breaker of `tool` in `conversation` is open at all (so
    /// a caller computes the argument digest only then).
    pub fn is_open(&self, conversation: &str, tool: &str) -> bool {
        if self.threshold == 0 {
            return false;
        }
        if let Some(run) = self.stored(conversation, tool) {
            return run.is_some_and(|r| r.count >= self.threshold);
        }
        self.runs()
            .map
            .get(&(conversation.to_string(), tool.to_string()))
            .is_some_and(|r| r.count >= self.threshold)
    }

    /// The `circuit_open` error for a call that repeats a failure of an open
    /// breaker, `None` when the call may run.
    pub fn check(&self, conversation: &str, tool: &str, args_digest: &str) -> Option<ErrorInfo> {
        if self.threshold == 0 {
            return None;
        }
        let run = match self.stored(conversation, tool) {
            Some(run) => run?,
            None => self
                .runs()
                .map
                .get(&(conversation.to_string(), tool.to_string()))?
                .clone(),
        };
        if run.count < self.threshold || !run.args.contains(args_digest) {
            return None;
        }
        let info = ErrorCode::CircuitOpen
            .info(format!(
                "`{tool}` failed with `{}` {} times in a row, the last time with these same arguments; \
                 the call was not run again. Change the arguments (or use another tool or approach): \
                 repeating it will fail the same way. A success of `{tool}` closes the breaker.",
                run.code, run.count
            ))
            .with_details(json!({
                "consecutive_failures": run.count,
                "error_code": run.code,
                "threshold": self.threshold,
            }));
        Some(info)
    }

    /// Notes the outcome of a call that ran (or was refused before running):
    /// `None` for a success, else its error code and argument digest.
    /// Returns the consecutive failures with that code, this one included
    /// (0 for a success).
    pub fn record(&self, conversation: &str, tool: &str, failure: Option<(&str, &str)>) -> u32 {
        if let Some(backend) = &self.shared {
            match backend.record(conversation, tool, failure) {
                Ok(count) => return count,
                Err(e) => {
                    tracing::warn!(error = %e, "the breaker's store did not answer; counting in memory");
                }
            }
        }
        let key = (conversation.to_string(), tool.to_string());
        let mut runs = self.runs();
        let Some((code, digest)) = failure else {
            runs.map.remove(&key);
            return 0;
        };
        if !runs.map.contains_key(&key) {
            runs.order.push_back(key.clone());
            while runs.order.len() > MAX_RUNS {
                if let Some(old) = runs.order.pop_front() {
                    runs.map.remove(&old);
                    runs.seeded.remove(&old);
                }
            }
        }
        let run = runs.map.entry(key).or_default();
        if run.code != code {
            *run = Run {
                code: code.to_string(),
                count: 0,
                args: HashSet::new(),
            };
        }
        run.count = run.count.saturating_add(1);
        run.args.insert(digest.to_string());
        run.count
    }

    /// Replays earlier outcomes of `tool` in `conversation`, oldest first,
    /// once per pair (later calls find it seeded and skip the lookup).
    /// Returns whether the pair still needed seeding.
    pub fn seed(
        &self,
        conversation: &str,
        tool: &str,
        earlier: impl FnOnce() -> Vec<(Option<String>, String)>,
    ) -> bool {
        let key = (conversation.to_string(), tool.to_string());
        // A shared store has every host's counts already.
        if self.shared.is_some() || !self.runs().seeded.insert(key) {
            return false;
        }
        for (code, digest) in earlier() {
            match code.as_deref() {
                Some("circuit_open") => {}
                Some(c) => {
                    self.record(conversation, tool, Some((c, &digest)));
                }
                None => {
                    self.record(conversation, tool, None);
                }
            }
        }
        true
    }
}

/// What a [`BreakerBackend`] must do, seen through two breakers sharing
/// it (two hosts): failures counted on either trip both.
#[cfg(any(test, feature = "conformance"))]
#[doc(hidden)]
pub fn conformance(backend: std::sync::Arc<dyn BreakerBackend>) {
    let mut raw = [0u8; 8];
    getrandom::fill(&mut raw).unwrap();
    let conv = format!("conv-{}", hex::encode(raw));
    let hosts = [
        Breaker::new(3).shared(backend.clone()),
        Breaker::new(3).shared(backend.clone()),
    ];
    assert_eq!(backend.run(&conv, "t").unwrap(), None);
    assert_eq!(hosts[0].record(&conv, "t", Some(("timeout", "d1"))), 1);
    assert_eq!(hosts[1].record(&conv, "t", Some(("timeout", "d1"))), 2);
    assert!(!hosts[0].is_open(&conv, "t"));
    assert_eq!(hosts[0].record(&conv, "t", Some(("timeout", "d2"))), 3);
    for h in &hosts {
        assert!(h.is_open(&conv, "t"));
        assert!(h.check(&conv, "t", "d1").is_some());
        assert!(h.check(&conv, "t", "d2").is_some());
        assert!(h.check(&conv, "t", "d3").is_none());
        assert!(!h.is_open(&conv, "other"));
    }
    // Another code starts a new run; a success ends it.
    assert_eq!(hosts[1].record(&conv, "t", Some(("denied", "d1"))), 1);
    let run = backend.run(&conv, "t").unwrap().unwrap();
    assert_eq!(
        (run.code.as_str(), run.count, run.args.len()),
        ("denied", 1, 1)
    );
    assert_eq!(hosts[0].record(&conv, "t", None), 0);
    assert_eq!(backend.run(&conv, "t").unwrap(), None);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opens_after_k_same_failures_for_the_same_arguments_only() {
        let b = Breaker::new(3);
        for n in 1..=3 {
            assert_eq!(b.check("s", "t", "A"), None);
            assert_eq!(b.record("s", "t", Some(("not_found", "A"))), n);
        }
        let info = b.check("s", "t", "A").expect("open");
        assert_eq!(info.code, "circuit_open");
        assert!(info.correctable);
        assert!(info.message.contains("3 times"), "{}", info.message);
        assert_eq!(info.details.as_ref().unwrap()["consecutive_failures"], 3);
        // Other arguments still run; other sessions and tools are apart.
        assert_eq!(b.check("s", "t", "B"), None);
        assert_eq!(b.check("other", "t", "A"), None);
        assert_eq!(b.check("s", "u", "A"), None);
        // Another code starts a new run.
        assert_eq!(b.record("s", "t", Some(("timeout", "A"))), 1);
        assert_eq!(b.check("s", "t", "A"), None);
        // A success closes it.
        for _ in 0..3 {
            b.record("s", "t", Some(("timeout", "A")));
        }
        assert!(b.is_open("s", "t"));
        assert_eq!(b.record("s", "t", None), 0);
        assert!(!b.is_open("s", "t"));
        assert_eq!(b.check("s", "t", "A"), None);
    }

    #[test]
    fn a_zero_threshold_never_opens_and_the_map_is_bounded() {
        let b = Breaker::new(0);
        for _ in 0..5 {
            b.record("s", "t", Some(("x", "A")));
        }
        assert_eq!(b.check("s", "t", "A"), None);
        let b = Breaker::new(1);
        for i in 0..(MAX_RUNS + 10) {
            b.record(&i.to_string(), "t", Some(("x", "A")));
        }
        assert!(b.runs().map.len() <= MAX_RUNS);
        assert!(b.is_open(&(MAX_RUNS + 9).to_string(), "t"));
    }

    #[test]
    fn seeding_replays_once() {
        let b = Breaker::new(2);
        let earlier = || vec![(Some("not_found".into()), "A".to_string()); 2];
        assert!(b.seed("traj", "t", earlier));
        assert!(b.check("traj", "t", "A").is_some());
        assert!(!b.seed("traj", "t", Vec::new));
    }
}
