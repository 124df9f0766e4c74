//! Idempotency: a tool call with side effects runs at most once per logical
//! call, and a repeat gets the first call's observation back, byte for byte.
//!
//! # Keys
//!
//! A call is identified by
//! `HMAC-SHA256(host_key, trajectory_id | turn | call_id | tool | JCS(args))`
//! ([`derive_key`]), where `JCS(args)` is the RFC 8785 canonical form of the
//! arguments ([`crate::json::canonical`]) and every part is length-prefixed, so no
//! two different tuples frame to the same bytes. The key is deterministic: the
//! same logical call gets the same key after a restart. The host key makes
//! keys unguessable by anyone who does not hold it. Beside the key, the store
//! keeps [`args_digest`] (SHA-256 of the canonical arguments): the same key
//! presented with other arguments is a [`Claim::Conflict`], never a replay.
//!
//! # States
//!
//! ```text
//!            claim                 complete / settle(Done)
//!  unseen ──────────► in-flight ─────────────────────────► completed
//!    ▲   release /        │  mark_in_doubt, lease runs out      │
//!    │   settle(NotDone)  ▼                                     │ retention
//!    └──────────────── in-doubt ◄──(never re-run silently)      ▼ passes
//!                                                            (unseen)
//! ```
//!
//! - **in-flight**: claimed atomically ([`Store::claim`] is one atomic write:
//!   insert-if-absent, never check-then-write) with a lease that must be
//!   longer than the call's deadline, and a fence number. Repeats get
//!   [`Claim::InFlight`] and must not run.
//! - **completed**: the owner stored the observation ([`Store::complete`]);
//!   repeats get [`Claim::Completed`] with the stored text, verbatim.
//! - **in-doubt**: the effect may or may not have happened: the plugin
//!   trapped ([`Store::mark_in_doubt`]), or the host died and the lease ran
//!   out (an expired in-flight record is moved to in-doubt when it is next
//!   read). Repeats get [`Claim::InDoubt`] until a probe or an operator
//!   [`Store::settle`]s the record.
//!
//! A key's fence only grows: every claim that creates or takes over a
//! record gets a fence above any the key had before (even if its record was
//! deleted in between), so a worker whose claim was superseded (after a
//! settle or an expiry) cannot complete a record it no longer owns:
//! [`StoreErrorKind::StaleFence`].
//!
//! # Rules for callers
//!
//! - **Nothing is recorded for calls rejected before execution** (unknown
//!   tool, invalid JSON, schema or grant failure): validate first, claim only
//!   a call that is about to run. The store does not enforce this.
//! - If [`Store::claim`] returns an error (for instance
//!   [`StoreErrorKind::Unavailable`]), **do not run** the call.
//! - After [`Claim::Acquired`], end in exactly one of: [`Store::complete`]
//!   (the call returned an observation, success or tool error alike: stored
//!   failures are replayed too), [`Store::mark_in_doubt`] (trap, timeout,
//!   anything after the effect may have started) or [`Store::release`] (only
//!   when the effect provably never started, e.g. the sandbox could not be
//!   built). A failure during execution is never a release.
//!
//! # Retention
//!
//! A completed record is kept for the store's retention
//! ([`DEFAULT_RETENTION`], 24 h, by default) after completion; expiry is
//! checked on every read, so an expired record acts as unseen even before
//! [`Store::purge_expired`] deletes it. In-flight and in-doubt records do
//! not expire: forgetting an in-doubt record would let a retry repeat an
//! effect that may have happened.
//!
//! # Backends
//!
//! The `toolhost-store` crate: `SqliteStore` (one machine, several host
//! processes) and `PostgresStore` (hosts that share work; leases use the
//! database's clock), both checked by one conformance suite.

use std::time::{Duration, SystemTime};

use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::json::canonical::{self, CanonError};

pub use crate::store_error::{State, StoreError, StoreErrorKind, UnknownState};

/// How long completed records are kept by default: 24 hours.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(24 * 60 * 60);

/// The reason recorded when an in-flight lease runs out before the owner
/// completed, marked or released the call.
pub const REASON_LEASE_EXPIRED: &str = "lease_expired";

/// Domain-separation prefix of the key derivation (versioned: changing the
/// framing must change this).
const KEY_DOMAIN: &[u8] = b"toolhost/idempotency-key/v1";

/// Derives the idempotency key of one call: lowercase hex of
/// `HMAC-SHA256(host_key, frame(trajectory_id, turn, call_id, tool,
/// canonical_args))`.
///
/// The frame is a fixed domain tag followed, for each part, by its length as
/// a big-endian `u64` and its bytes (`turn` as 8 big-endian bytes), so
/// `("a|b", "c")` and `("a", "|bc")` never collide. `canonical_args` must be
/// the RFC 8785 form ([`canonical::canonicalize`]); [`call_key`] does both
/// steps.
pub fn derive_key(
    host_key: &[u8],
    trajectory_id: &str,
    turn: u64,
    call_id: &str,
    tool: &str,
    canonical_args: &str,
) -> String {
    let mut mac =
        <Hmac<Sha256> as Mac>::new_from_slice(host_key).expect("HMAC accepts keys of any length");
    mac.update(KEY_DOMAIN);
    let turn = turn.to_be_bytes();
    let parts: [&[u8]; 5] = [
        trajectory_id.as_bytes(),
        &turn,
        call_id.as_bytes(),
        tool.as_bytes(),
        canonical_args.as_bytes(),
    ];
    for part in parts {
        mac.update(&(part.len() as u64).to_be_bytes());
        mac.update(part);
    }
    hex::encode(mac.finalize().into_bytes())
}

/// Lowercase hex SHA-256 of the canonical arguments, stored beside the key
/// to tell a replay from a conflicting reuse of the key.
pub fn args_digest(canonical_args: &str) -> String {
    hex::encode(Sha256::digest(canonical_args.as_bytes()))
}

/// The key material of one call, computed by [`call_key`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallKey {
    /// [`derive_key`] of the call.
    pub key: String,
    /// [`args_digest`] of the canonical arguments.
    pub args_digest: String,
    /// The RFC 8785 form of the arguments.
    pub canonical_args: String,
}

/// Canonicalizes `args` once and derives both the key and the digest.
///
/// # Errors
///
/// Any [`CanonError`] (an integer beyond ±2^53, nesting too deep). Such a
/// call must be rejected before execution, so nothing is recorded for it.
pub fn call_key(
    host_key: &[u8],
    trajectory_id: &str,
    turn: u64,
    call_id: &str,
    tool: &str,
    args: &Value,
) -> Result<CallKey, CanonError> {
    let canonical_args = canonical::canonicalize(args)?;
    Ok(CallKey {
        key: derive_key(
            host_key,
            trajectory_id,
            turn,
            call_id,
            tool,
            &canonical_args,
        ),
        args_digest: args_digest(&canonical_args),
        canonical_args,
    })
}

/// The answer to [`Store::claim`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// The caller owns the call and must run it, then complete, mark or
    /// release it with this fence.
    Acquired {
        /// The owner's fence number.
        fence: u64,
    },
    /// Already done: return this stored observation text verbatim; do not run.
    Completed {
        /// The observation exactly as passed to [`Store::complete`].
        observation: String,
    },
    /// Another worker is running the call: refuse (409-like); do not run.
    InFlight {
        /// When the current lease runs out (store clock).
        until: SystemTime,
    },
    /// The effect is unknown: refuse until settled; do not run.
    InDoubt {
        /// Why ([`REASON_LEASE_EXPIRED`] or the owner's reason).
        reason: String,
    },
    /// The key was used with other arguments (422-like); do not run.
    Conflict {
        /// The digest stored with the key.
        stored_digest: String,
    },
}

/// How an operator or a probe resolves an in-doubt record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settlement {
    /// The effect happened: store this observation and replay it.
    Done(String),
    /// The effect did not happen: forget the record so a retry runs.
    NotDone,
}

impl Settlement {
    /// A person's decision on the in-doubt record `rec` (`toolhost settle`,
    /// the console): done stores a recorded "settled" result that repeats
    /// of the call get back without running; not done forgets the record,
    /// so the next repeat runs the call.
    pub fn by_operator(rec: &KeyRecord, done: bool) -> Settlement {
        if !done {
            return Settlement::NotDone;
        }
        let obs = crate::observation::Observation::ok(
            "settled-by-operator",
            &rec.tool,
            crate::descriptor::SideEffect::Irreversible,
            serde_json::json!({"settled": "done", "by": "operator"}),
            1024,
        )
        .with_idempotency_key(&rec.key);
        Settlement::Done(serde_json::to_string(&obs).expect("an observation serialises"))
    }
}

/// The record stored under one idempotency key: what the call was, its
/// state, and (once completed) the observation a repeat gets back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRecord {
    /// The idempotency key.
    pub key: String,
    /// The tool called.
    pub tool: String,
    /// [`args_digest`] of the canonical arguments.
    pub args_digest: String,
    /// Current state (an expired lease already shows as in-doubt).
    pub state: State,
    /// Fence of the current (or last) owner.
    pub fence: u64,
    /// When the record was claimed.
    pub created_at: SystemTime,
    /// When the record last changed.
    pub updated_at: SystemTime,
    /// End of the last claim's lease.
    pub lease_until: Option<SystemTime>,
    /// When a completed record expires.
    pub expires_at: Option<SystemTime>,
    /// The stored observation (completed records).
    pub observation: Option<String>,
    /// Why the record is (or was) in doubt.
    pub reason: Option<String>,
}

/// A persistent idempotency store. Implementations are synchronous and
/// shareable between threads; every method is atomic on its own.
pub trait Store: Send + Sync {
    /// Claims `key` for a call of `tool` whose canonical arguments hash to
    /// `args_digest`, in one atomic step:
    ///
    /// - no live record → a new in-flight record leased for `lease` with a
    ///   fresh fence: [`Claim::Acquired`];
    /// - a record with another digest → [`Claim::Conflict`];
    /// - in-flight, lease running → [`Claim::InFlight`];
    /// - in-flight, lease run out → moved to in-doubt: [`Claim::InDoubt`];
    /// - in-doubt → [`Claim::InDoubt`];
    /// - completed (not expired) → [`Claim::Completed`].
    ///
    /// `lease` must exceed the call's deadline. An error means: do not run.
    fn claim(
        &self,
        key: &str,
        tool: &str,
        args_digest: &str,
        lease: Duration,
    ) -> Result<Claim, StoreError>;

    /// Stores the owner's observation and completes the record. Accepted
    /// while the record is in-flight or in-doubt under the same fence (the
    /// owner knows the outcome even if its lease ran out). Fails with
    /// [`StoreErrorKind::StaleFence`] if another owner holds the record,
    /// [`StoreErrorKind::WrongState`] if it is already completed,
    /// [`StoreErrorKind::NotFound`] if it is gone.
    fn complete(&self, key: &str, fence: u64, observation: &str) -> Result<(), StoreError>;

    /// The owner reports that the effect's outcome is unknown (trap,
    /// timeout, lost host call). Same fence rules as [`Store::complete`].
    fn mark_in_doubt(&self, key: &str, fence: u64, reason: &str) -> Result<(), StoreError>;

    /// The owner withdraws its claim: only for a call proven not to have
    /// started its effect (e.g. the sandbox could not be built). The record
    /// is deleted. Same fence rules as [`Store::complete`].
    fn release(&self, key: &str, fence: u64) -> Result<(), StoreError>;

    /// Resolves an in-doubt record (an in-flight one whose lease ran out
    /// counts as in-doubt): [`Settlement::Done`] completes it with the given
    /// observation, [`Settlement::NotDone`] deletes it so a retry runs.
    /// [`StoreErrorKind::WrongState`] for a running or completed record.
    fn settle(&self, key: &str, settlement: Settlement) -> Result<(), StoreError>;

    /// The live record under `key` (`None` if absent or expired).
    fn get(&self, key: &str) -> Result<Option<KeyRecord>, StoreError>;

    /// Live records, all or in one state, oldest first.
    fn list(&self, state: Option<State>) -> Result<Vec<KeyRecord>, StoreError>;

    /// Deletes completed records whose retention has passed (store clock);
    /// returns how many.
    fn purge_expired(&self) -> Result<u64, StoreError>;

    /// The capability ledger kept in this store (`max_calls` and
    /// `budget_fuel` counts, revocations; see [`crate::policy::ledger`]), if the
    /// backend keeps one. A host with this store counts budgets there.
    fn capability_ledger(
        self: std::sync::Arc<Self>,
    ) -> Option<std::sync::Arc<dyn crate::policy::budget::BudgetLedger>> {
        None
    }

    /// The approvals kept in this store ([`crate::effects::approval`]), if the
    /// backend keeps them. Without them no call that needs a person's
    /// approval can be asked for.
    fn approvals(
        self: std::sync::Arc<Self>,
    ) -> Option<std::sync::Arc<dyn crate::effects::approval::ApprovalBackend>> {
        None
    }

    /// The call journal kept in this store ([`crate::record::journal`]), if the
    /// backend keeps one.
    fn journal(
        self: std::sync::Arc<Self>,
    ) -> Option<std::sync::Arc<dyn crate::record::journal::JournalBackend>> {
        None
    }

    /// The artifacts kept in this store ([`crate::tools::artifact`]), if the
    /// backend keeps them: then every host sharing the store serves every
    /// artifact. Without them a host keeps its artifacts in a directory.
    fn artifacts(
        self: std::sync::Arc<Self>,
    ) -> Option<std::sync::Arc<dyn crate::tools::artifact::ArtifactBackend>> {
        None
    }

    /// The circuit breaker's counts kept in this store
    /// ([`crate::record::breaker::BreakerBackend`]), if the backend shares them
    /// between hosts. Without them each host counts in memory.
    fn breaker_counts(
        self: std::sync::Arc<Self>,
    ) -> Option<std::sync::Arc<dyn crate::record::breaker::BreakerBackend>> {
        None
    }

    /// The tools revealed to tokens and sessions ([`crate::tools::reveal`]), if
    /// the backend shares them between hosts. Without them a 2025-11-25
    /// session keeps its own and a stateless request sees none.
    fn reveals(
        self: std::sync::Arc<Self>,
    ) -> Option<std::sync::Arc<dyn crate::tools::reveal::RevealBackend>> {
        None
    }
}

/// The records by state, for the metrics' records gauge (a store that
/// cannot list them counts none).
pub fn counts_by_state(store: &dyn Store) -> Vec<(&'static str, i64)> {
    let mut counts = [
        (State::InFlight, 0i64),
        (State::Completed, 0),
        (State::InDoubt, 0),
    ];
    if let Ok(list) = store.list(None) {
        for r in list {
            if let Some(c) = counts.iter_mut().find(|(s, _)| *s == r.state) {
                c.1 += 1;
            }
        }
    }
    counts.iter().map(|(s, n)| (s.as_str(), *n)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const HOST_KEY: &[u8] = b"host-secret";

    #[test]
    fn key_is_deterministic_lowercase_hex() {
        let a = derive_key(HOST_KEY, "traj-1", 3, "call-7", "fs.write", r#"{"a":1}"#);
        let b = derive_key(HOST_KEY, "traj-1", 3, "call-7", "fs.write", r#"{"a":1}"#);
        assert_eq!(a, b);
        assert_eq!(a.len(), 64);
        assert!(a.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')));
    }

    /// Pins the framing: this vector was computed independently (Python's
    /// `hmac` over the documented frame). A change here breaks replays of
    /// records written by earlier builds.
    #[test]
    fn key_matches_independent_vector() {
        assert_eq!(
            derive_key(HOST_KEY, "traj-1", 3, "call-7", "fs.write", r#"{"a":1}"#),
            "7db9f30c9145bd0788fc025a2655a157feb07032a0ed12da7959164a56584ad2"
        );
    }

    #[test]
    fn every_part_changes_the_key() {
        let base = derive_key(HOST_KEY, "t", 1, "c", "tool", "{}");
        let variants = [
            derive_key(b"other-key", "t", 1, "c", "tool", "{}"),
            derive_key(HOST_KEY, "u", 1, "c", "tool", "{}"),
            derive_key(HOST_KEY, "t", 2, "c", "tool", "{}"),
            derive_key(HOST_KEY, "t", 1, "d", "tool", "{}"),
            derive_key(HOST_KEY, "t", 1, "c", "tool2", "{}"),
            derive_key(HOST_KEY, "t", 1, "c", "tool", "[]"),
        ];
        for (i, variant) in variants.iter().enumerate() {
            assert_ne!(&base, variant, "variant {i}");
        }
    }

    #[test]
    fn framing_is_unambiguous() {
        // Moving bytes across a boundary must change the key.
        assert_ne!(
            derive_key(HOST_KEY, "t", 1, "a|b", "c", "{}"),
            derive_key(HOST_KEY, "t", 1, "a", "|bc", "{}")
        );
        assert_ne!(
            derive_key(HOST_KEY, "t", 1, "c", "tool", "{}"),
            derive_key(HOST_KEY, "t", 1, "", "ctool", "{}")
        );
        assert_ne!(
            derive_key(HOST_KEY, "t", 1, "c", "tool{", "}"),
            derive_key(HOST_KEY, "t", 1, "c", "tool", "{}")
        );
        assert_ne!(
            derive_key(HOST_KEY, "", 0, "", "", ""),
            derive_key(HOST_KEY, "", 0, "", "", " ")
        );
    }

    #[test]
    fn digest_is_sha256_hex() {
        assert_eq!(
            args_digest("{}"),
            "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
        );
        assert_eq!(
            args_digest(""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn call_key_canonicalizes_first() {
        let a = call_key(
            HOST_KEY,
            "t",
            1,
            "c",
            "x",
            &json!({"b": 1.0, "a": "\u{e9}"}),
        )
        .unwrap();
        let b = call_key(HOST_KEY, "t", 1, "c", "x", &json!({"a": "é", "b": 1})).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.canonical_args, r#"{"a":"é","b":1}"#);
        assert_eq!(a.args_digest, args_digest(&a.canonical_args));
        assert_eq!(
            a.key,
            derive_key(HOST_KEY, "t", 1, "c", "x", &a.canonical_args)
        );
        let err = call_key(HOST_KEY, "t", 1, "c", "x", &json!({"n": u64::MAX})).unwrap_err();
        assert_eq!(
            err.kind(),
            crate::json::canonical::CanonErrorKind::IntegerOutOfRange
        );
    }

    #[test]
    fn states_round_trip_through_their_names() {
        for state in State::ALL {
            assert_eq!(state.as_str().parse::<State>().unwrap(), state);
            assert_eq!(state.to_string(), state.as_str());
        }
        assert_eq!(
            "running".parse::<State>().unwrap_err(),
            UnknownState("running".into())
        );
    }

    #[test]
    fn error_kinds_and_messages() {
        let err = StoreError::StaleFence {
            key: "k".into(),
            fence: 1,
            current: 2,
        };
        assert_eq!(err.kind(), StoreErrorKind::StaleFence);
        assert_eq!(err.kind().to_string(), "stale_fence");
        assert!(err.to_string().contains("fence 2"), "{err}");
        let err = StoreError::WrongState {
            key: "k".into(),
            operation: "settle",
            state: State::Completed,
        };
        assert_eq!(
            err.to_string(),
            "cannot settle key k: the record is completed"
        );
        assert_eq!(
            StoreError::unavailable("down").kind(),
            StoreErrorKind::Unavailable
        );
    }
}
