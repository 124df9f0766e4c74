//! Approvals: a person confirms a call the agent may not approve itself.
//!
//! An irreversible call (or a write under an `ask_write` prefix, outside
//! the token's `write` prefixes) runs only once approved. A token with the
//! `self_approve` right approves its own plans (`toolhost plan`, then the
//! call with `--plan-token`). Any other token's call ends `approval_pending`:
//! the host ran the tool's dry run itself and keeps the plan here, as an
//! [`Approval`] with an id, until a person settles it
//! (`toolhost approvals approve ID` or `deny ID`) or it expires
//! ([`DEFAULT_APPROVAL_TTL`]). The agent then calls again with the id
//! (`--approval ID`, or `_meta["dev.toolhost/approval"]` over MCP):
//!
//! - approved → the call runs, once: the id is spent on the first call's
//!   idempotency key, so a retry with that key replays its result and a
//!   call under another key is refused (`stale_plan`);
//! - denied → `approval_declined`, nothing runs and no retry is advised;
//! - still pending → `approval_pending` again; expired → `stale_plan`;
//! - a target changed since the plan → `stale_plan`, nothing runs;
//! - an unknown id, one asked for under another capability token, or for
//!   another tool or other arguments → `denied`.
//!
//! An approval binds the exact capability token that asked (its
//! [binding](crate::policy::capability::Token::binding)), the tool, the digest of
//! the canonical arguments and the digest of every target as it was when
//! planned. Approvals live in the record store, so any host sharing it
//! (SQLite file or PostgreSQL) honours them, and each decision is written
//! to the call journal.
//!
//! Table (`toolhost_`-prefixed in PostgreSQL):
//!
//! ```sql
//! approval (id, state, tool, args, args_digest, targets, plan, plan_digest,
//!           capability, token_chain, requested_by, created_ms, expires_ms,
//!           decided_ms, decided_by, note, used_by)
//! ```

pub mod request_state;

use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::store_error::StoreError;

/// How long a pending approval waits for a person, and how long an
/// approved one waits for the agent's retry: 15 minutes.
pub const DEFAULT_APPROVAL_TTL: Duration = Duration::from_secs(15 * 60);

/// How long an approval is kept after it expired (for `toolhost approvals
/// list --all` and `show`): a day. Older ones are deleted when a new one
/// is asked for.
pub const KEEP_AFTER_EXPIRY: Duration = Duration::from_secs(24 * 60 * 60);

/// Where an approval is in its life (an expired one keeps its state; see
/// [`Approval::expired`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// Waiting for a person.
    Pending,
    /// A person approved it: the call may run once.
    Approved,
    /// A person declined it.
    Denied,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Pending => "pending",
            State::Approved => "approved",
            State::Denied => "denied",
        }
    }

    /// The state named by [`State::as_str`]; `None` for another text.
    pub fn parse(s: &str) -> Option<State> {
        [State::Pending, State::Approved, State::Denied]
            .into_iter()
            .find(|x| x.as_str() == s)
    }
}

/// One approval, as stored.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Approval {
    /// 32 hex digits, random: the handle a person and the agent use.
    pub id: String,
    pub state: State,
    pub tool: String,
    /// The canonical arguments (RFC 8785), for the person to read.
    pub args: String,
    pub args_digest: String,
    /// Each target path's digest when planned (as a plan token pins them).
    pub targets: Value,
    /// The tool's dry-run output (redacted like an output), `null` for a
    /// tool without one.
    pub plan: Value,
    /// SHA-256 of the tool, the argument digest, the targets and the plan:
    /// what the person approved.
    pub plan_digest: String,
    /// The binding of the capability token that asked (hex).
    #[serde(skip)]
    pub capability: String,
    /// The ids of that token's chain, oldest first.
    pub token_chain: Vec<String>,
    /// Who asked: the MCP client's name and version, or `cli`.
    pub requested_by: Option<String>,
    pub created_ms: u64,
    /// Until when a person may decide (pending), or the agent may use it
    /// (approved).
    pub expires_ms: u64,
    pub decided_ms: Option<u64>,
    /// Who decided: `cli:USER`, or an MCP client's name and version.
    pub decided_by: Option<String>,
    pub note: Option<String>,
    /// The idempotency key of the call it approved, once used.
    pub used_by: Option<String>,
}

impl Approval {
    /// Whether it can no longer be decided (pending) or used (approved).
    pub fn expired(&self, now_ms: u64) -> bool {
        self.state != State::Denied && now_ms >= self.expires_ms
    }

    /// The state a person reads: `expired` once past its time.
    pub fn shown_state(&self, now_ms: u64) -> &'static str {
        if self.expired(now_ms) && self.used_by.is_none() {
            "expired"
        } else if self.used_by.is_some() {
            "used"
        } else {
            self.state.as_str()
        }
    }
}

/// The digest a person approves: the tool, the arguments' digest, the
/// targets and the plan, length-framed.
pub fn plan_digest(tool: &str, args_digest: &str, targets: &Value, plan: &Value) -> String {
    let mut h = Sha256::new();
    h.update(b"toolhost/approval/v1\0");
    for part in [
        tool.as_bytes(),
        args_digest.as_bytes(),
        targets.to_string().as_bytes(),
        plan.to_string().as_bytes(),
    ] {
        h.update((part.len() as u64).to_be_bytes());
        h.update(part);
    }
    hex::encode(h.finalize())
}

/// A fresh approval id: 16 random bytes in hex.
pub fn new_id() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)?;
    Ok(hex::encode(bytes))
}

/// Whether `id` has the form of an approval id (32 lowercase hex digits).
pub fn is_id(id: &str) -> bool {
    id.len() == 32 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// What [`ApprovalBackend::decide`] did.
#[derive(Debug, Clone, PartialEq)]
pub enum Decided {
    /// Settled as asked; the approval as it now is.
    Done(Approval),
    /// No approval has this id.
    NotFound,
    /// It was already settled (or expired) and is unchanged.
    NotPending(Approval),
}

/// What [`ApprovalBackend::take`] did.
#[derive(Debug, Clone, PartialEq)]
pub enum Take {
    /// The approval now approves the call of this key (first use, or the
    /// same call again).
    Taken,
    /// It already approved the call of another key.
    UsedBy(String),
    /// It is not approved (or is gone) any more.
    NotApproved,
}

/// One database's side of the approvals. Each method is atomic.
pub trait ApprovalBackend: Send + Sync {
    /// Creates the table if absent.
    fn init(&self) -> Result<(), StoreError>;
    /// Stores a new approval (its id is fresh).
    fn insert(&self, approval: &Approval) -> Result<(), StoreError>;
    /// The approval with this id.
    fn get(&self, id: &str) -> Result<Option<Approval>, StoreError>;
    /// Every approval, oldest first.
    fn list(&self) -> Result<Vec<Approval>, StoreError>;
    /// Settles a pending approval that has not expired at `now_ms`, in
    /// one conditional write: approved ones may be used until
    /// `use_until_ms`.
    fn decide(
        &self,
        id: &str,
        approve: bool,
        by: &str,
        note: Option<&str>,
        now_ms: u64,
        use_until_ms: u64,
    ) -> Result<Decided, StoreError>;
    /// Spends an approved approval on the call of idempotency `key`, in one
    /// conditional write: accepted when it is unused or already used by
    /// `key`.
    fn take(&self, id: &str, key: &str) -> Result<Take, StoreError>;
    /// Deletes approvals that expired before `before_ms`; returns how many.
    fn purge(&self, before_ms: u64) -> Result<u64, StoreError>;
}

/// The approvals of a record store, its table created on first use.
#[derive(Clone)]
pub struct Approvals {
    backend: Arc<dyn ApprovalBackend>,
    init: Arc<OnceLock<()>>,
    ttl: Duration,
    /// Where each decision is written ([`journal_entry`]).
    journal: Option<Arc<dyn crate::record::journal::JournalBackend>>,
    journal_init: Arc<OnceLock<()>>,
}

impl Approvals {
    pub fn new(backend: Arc<dyn ApprovalBackend>) -> Approvals {
        Approvals {
            backend,
            init: Arc::new(OnceLock::new()),
            ttl: DEFAULT_APPROVAL_TTL,
            journal: None,
            journal_init: Arc::new(OnceLock::new()),
        }
    }

    /// Writes each decision to `journal` (the call journal of the same
    /// store), where `toolhost log` shows it.
    pub fn with_journal(
        mut self,
        journal: Option<Arc<dyn crate::record::journal::JournalBackend>>,
    ) -> Approvals {
        self.journal = journal;
        self
    }

    /// How long a pending approval waits, and an approved one stays usable
    /// (default [`DEFAULT_APPROVAL_TTL`]).
    pub fn with_ttl(mut self, ttl: Duration) -> Approvals {
        self.ttl = ttl;
        self
    }

    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// The backend, its table created once.
    pub fn backend(&self) -> Result<&dyn ApprovalBackend, StoreError> {
        if self.init.get().is_none() {
            self.backend.init()?;
            let _ = self.init.set(());
        }
        Ok(&*self.backend)
    }

    /// Stores a new pending approval, and deletes those that expired more
    /// than [`KEEP_AFTER_EXPIRY`] ago.
    pub fn ask(&self, approval: &Approval) -> Result<(), StoreError> {
        let backend = self.backend()?;
        backend.insert(approval)?;
        let horizon = approval
            .created_ms
            .saturating_sub(KEEP_AFTER_EXPIRY.as_millis() as u64);
        // Housekeeping only: a failure here does not undo the request.
        let _ = backend.purge(horizon);
        Ok(())
    }

    /// Approves (or declines) a pending approval now; a decision is written
    /// to the journal.
    pub fn decide(
        &self,
        id: &str,
        approve: bool,
        by: &str,
        note: Option<&str>,
    ) -> Result<Decided, StoreError> {
        let now = now_ms();
        let until = now.saturating_add(self.ttl.as_millis() as u64);
        let decided = self.backend()?.decide(id, approve, by, note, now, until)?;
        if let (Decided::Done(a), Some(journal)) = (&decided, &self.journal) {
            let written = match self.journal_init.get() {
                Some(()) => Ok(()),
                None => journal.init().map(|()| {
                    let _ = self.journal_init.set(());
                }),
            }
            .and_then(|()| journal.append(&mut [journal_entry(a)]));
            if let Err(e) = written {
                // The decision stands; only its journal line is missing.
                tracing::warn!("approval {} is not in the call journal: {e}", a.id);
            }
        }
        Ok(decided)
    }
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Who is deciding at this terminal: `cli:` and `$USER` (or `$LOGNAME`,
/// else the name of the process's user id).
pub fn cli_user() -> String {
    let name = ["USER", "LOGNAME"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|s| !s.trim().is_empty()))
        .unwrap_or_else(os_user);
    format!("cli:{name}")
}

#[cfg(unix)]
fn os_user() -> String {
    use std::os::unix::fs::MetadataExt;
    // The owner of this process's own /proc entry is its user id.
    std::fs::metadata("/proc/self")
        .map(|m| format!("uid {}", m.uid()))
        .unwrap_or_else(|_| "unknown".into())
}

#[cfg(not(unix))]
fn os_user() -> String {
    "unknown".into()
}

fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// The call journal's entry of a decision (`toolhost log` shows it): the
/// tool and arguments' digest of the call decided, status `approved` or
/// `declined`, and in `args_summary.approval` who decided, when, the plan
/// digest, the outcome and the note.
pub fn journal_entry(a: &Approval) -> crate::record::journal::Entry {
    let at_ms = a.decided_ms.unwrap_or_else(now_ms);
    let at_us = to_i64(at_ms).saturating_mul(1000);
    let outcome = match a.state {
        State::Approved => "approved",
        State::Denied => "declined",
        State::Pending => "pending",
    };
    crate::record::journal::Entry {
        call_id: format!("approval:{}", a.id),
        trajectory: None,
        turn: None,
        tool: a.tool.clone(),
        token_id: a.token_chain.last().cloned(),
        token_chain: a.token_chain.clone(),
        started_at: at_us,
        ended_at: at_us,
        status: outcome.to_string(),
        error_code: None,
        args_sha256: a.args_digest.clone(),
        args_summary: serde_json::json!({
            "approval": {
                "id": a.id,
                "outcome": outcome,
                "decided_by": a.decided_by,
                "decided_at": crate::record::journal::format_us(at_us),
                "plan_digest": a.plan_digest,
                "requested_by": a.requested_by,
                "note": a.note,
            }
        }),
        result_sha256: None,
        output_bytes: 0,
        attempt: 1,
        first_try: true,
        idempotency_key: None,
        host: crate::record::journal::host_name(),
        logical_key: None,
    }
}
