//! Capability ledgers kept in the record store: `max_calls` and
//! `budget_fuel` counts, revoked token ids and the tokens issued through
//! the host, shared by every process (SQLite) or every host (PostgreSQL)
//! that uses the store.
//!
//! [`StoreLedger`] is the [`BudgetLedger`] of a
//! [`Host`](crate::pipeline::Host) with a record store
//! ([`EffectGuard`](crate::effects::EffectGuard)). Over a [`LedgerBackend`]
//! (one per database, kept beside the store it writes in:
//! `toolhost_store::SqliteStore`,
//! `toolhost_store::PostgresStore`) it adds:
//!
//! - **admission in one transaction**: every budget of the chain is read
//!   and charged under one write lock (SQLite `BEGIN IMMEDIATE`; PostgreSQL
//!   row locks taken in id order), so 50 concurrent calls against
//!   `max_calls=10` run exactly 10, whichever process or host makes them. A
//!   call whose chain has no budget touches no table.
//! - **a revocation cache with bounded staleness**: the set of revoked ids
//!   is read from the store at most [`REVOCATION_STALENESS`] (1 s) after
//!   the previous read, and every call is checked against it; a revocation
//!   made through this ledger is seen at once, one made elsewhere (another
//!   process, another host) within that bound. The refresh is on the call
//!   path and fails closed: a store that cannot be read denies the call.
//! - **use counts in batches**: each admitted call counts one use for every
//!   id of its chain, in memory, written to the store with the next
//!   refresh (and when the ledger is dropped); `cap list` shows them.
//!
//! Counts live until every token carrying their caveat has expired (a row
//! keeps the earliest expiry at or before its caveat) and are purged after.
//! A budget of a token without an expiry is kept for good.
//!
//! Tables (created on first use, beside the idempotency records):
//!
//! ```sql
//! capability_budget  (id TEXT PRIMARY KEY, kind TEXT, max INTEGER, used INTEGER, expires_s INTEGER)
//! capability_revoked (id TEXT PRIMARY KEY, revoked_s INTEGER, expires_s INTEGER)
//! capability_issued  (id TEXT PRIMARY KEY, parent TEXT, via TEXT, caveats TEXT,
//!                     issued_s INTEGER, expires_s INTEGER, calls INTEGER)
//! ```
//!
//! (`toolhost_`-prefixed in PostgreSQL.) Ids are lowercase hex; times are
//! unix seconds of the host's clock, the clock tokens are verified by.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::policy::budget::{
    issued_state, Admission, BudgetError, BudgetLedger, Issued, IssuedState,
};
use crate::policy::capability::{BudgetId, BudgetKind, CallBudget, TokenId};
use crate::store_error::StoreError;

/// Longest time a revocation made elsewhere can go unseen by a call.
pub const REVOCATION_STALENESS: Duration = Duration::from_secs(1);

/// How often expired counts and revocations are deleted.
const PURGE_EVERY: Duration = Duration::from_secs(60);

/// One database's side of a [`StoreLedger`]. Every method is atomic on its
/// own; [`admit`](LedgerBackend::admit) across all its budgets.
pub trait LedgerBackend: Send + Sync {
    /// Creates the tables if absent.
    fn init(&self) -> Result<(), StoreError>;
    /// Reads the budgets' counts, decides with [`decide`] and writes the
    /// charges, in one transaction. The outer error is the store's; the
    /// inner one the refusal.
    fn admit(
        &self,
        budgets: &[CallBudget],
        fuel: u64,
        now: u64,
    ) -> Result<Result<Admission, BudgetError>, StoreError>;
    /// Takes `amount` off the count of every fuel budget in `budgets`.
    fn refund_fuel(&self, budgets: &[CallBudget], amount: u64) -> Result<(), StoreError>;
    fn used(&self, id: &BudgetId) -> Result<u64, StoreError>;
    /// Ids revoked and not yet expired at `now`.
    fn revoked_ids(&self, now: u64) -> Result<Vec<TokenId>, StoreError>;
    /// Whether the id was newly revoked.
    fn revoke(&self, id: TokenId, expires_at: Option<u64>, now: u64) -> Result<bool, StoreError>;
    /// Adds use counts to issued tokens (ids not issued here are skipped).
    fn add_uses(&self, uses: &[(TokenId, u64)]) -> Result<(), StoreError>;
    /// Deletes counts and revocations expired at `now`.
    fn purge(&self, now: u64) -> Result<(), StoreError>;
    fn record_issued(&self, issued: &Issued) -> Result<(), StoreError>;
    /// Every issued token with its use count, oldest first.
    fn issued(&self) -> Result<Vec<(Issued, u64)>, StoreError>;
    /// The store's id: `candidate` when the store has none yet (it was just
    /// created), else the one it was given then.
    fn store_id(&self, candidate: &str) -> Result<String, StoreError>;
}

/// The charges of one admission: what each distinct budget is charged, and
/// the fuel reserved. `used` gives each budget's count so far.
pub fn decide(
    budgets: &[CallBudget],
    fuel: u64,
    used: impl Fn(&BudgetId) -> u64,
) -> Result<(Admission, Vec<(CallBudget, u64)>), BudgetError> {
    let mut reserve = fuel;
    let mut distinct: Vec<CallBudget> = Vec::with_capacity(budgets.len());
    for b in budgets {
        if distinct.iter().any(|d| d.id == b.id) {
            continue;
        }
        let u = used(&b.id);
        let left = b.max.saturating_sub(u);
        if left == 0 {
            return Err(BudgetError::Exhausted {
                budget: *b,
                used: u,
            });
        }
        if b.kind == BudgetKind::Fuel {
            reserve = reserve.min(left);
        }
        distinct.push(*b);
    }
    let charges = distinct
        .into_iter()
        .map(|b| {
            let charge = match b.kind {
                BudgetKind::Calls => 1,
                BudgetKind::Fuel => reserve,
            };
            (b, charge)
        })
        .collect();
    Ok((Admission { fuel: reserve }, charges))
}

/// Distinct fuel budgets of a chain.
pub fn fuel_budgets(budgets: &[CallBudget]) -> Vec<CallBudget> {
    let mut out: Vec<CallBudget> = Vec::new();
    for b in budgets.iter().filter(|b| b.kind == BudgetKind::Fuel) {
        if !out.iter().any(|o| o.id == b.id) {
            out.push(*b);
        }
    }
    out
}

/// A [`BudgetLedger`] in the record store (see the module docs).
pub struct StoreLedger {
    backend: Arc<dyn LedgerBackend>,
    staleness: Duration,
    init: std::sync::OnceLock<()>,
    cache: Mutex<Cache>,
    store_id: std::sync::OnceLock<crate::policy::capability::StoreId>,
}

#[derive(Default)]
struct Cache {
    revoked: HashSet<TokenId>,
    fetched: Option<Instant>,
    purged: Option<Instant>,
    uses: HashMap<TokenId, u64>,
}

impl std::fmt::Debug for StoreLedger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreLedger")
            .field("staleness", &self.staleness)
            .finish_non_exhaustive()
    }
}

fn unavailable(e: StoreError) -> BudgetError {
    BudgetError::Unavailable(e.to_string())
}

impl StoreLedger {
    /// A ledger over `backend`, its revocation cache at most
    /// [`REVOCATION_STALENESS`] old.
    pub fn new(backend: Arc<dyn LedgerBackend>) -> StoreLedger {
        StoreLedger {
            backend,
            staleness: REVOCATION_STALENESS,
            init: std::sync::OnceLock::new(),
            cache: Mutex::new(Cache::default()),
            store_id: std::sync::OnceLock::new(),
        }
    }

    /// How old the revocation cache may get (at most
    /// [`REVOCATION_STALENESS`]; zero reads the store on every call).
    pub fn with_staleness(mut self, staleness: Duration) -> StoreLedger {
        self.staleness = staleness.min(REVOCATION_STALENESS);
        self
    }

    fn backend(&self) -> Result<&dyn LedgerBackend, BudgetError> {
        if self.init.get().is_none() {
            self.backend.init().map_err(unavailable)?;
            let _ = self.init.set(());
        }
        Ok(&*self.backend)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Cache> {
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Writes the pending use counts.
    fn flush(&self, cache: &mut Cache) -> Result<(), BudgetError> {
        if cache.uses.is_empty() {
            return Ok(());
        }
        let uses: Vec<(TokenId, u64)> = cache.uses.drain().collect();
        self.backend()?.add_uses(&uses).map_err(unavailable)
    }

    /// Re-reads the revoked ids if the cache is older than the bound (and
    /// writes the pending uses, and now and then purges).
    fn refresh(&self, cache: &mut Cache, now: u64) -> Result<(), BudgetError> {
        if cache
            .fetched
            .is_some_and(|at| at.elapsed() < self.staleness)
        {
            return Ok(());
        }
        let backend = self.backend()?;
        let ids = backend.revoked_ids(now).map_err(unavailable)?;
        cache.revoked = ids.into_iter().collect();
        cache.fetched = Some(Instant::now());
        // Use counts are informational: a failed write is not a refusal.
        let _ = self.flush(cache);
        if cache.purged.is_none_or(|at| at.elapsed() >= PURGE_EVERY) {
            cache.purged = Some(Instant::now());
            let _ = backend.purge(now);
        }
        Ok(())
    }
}

impl Drop for StoreLedger {
    fn drop(&mut self) {
        let mut cache = std::mem::take(&mut *self.lock());
        let _ = self.flush(&mut cache);
    }
}

impl BudgetLedger for StoreLedger {
    fn store_id(&self) -> Result<Option<crate::policy::capability::StoreId>, BudgetError> {
        if let Some(id) = self.store_id.get() {
            return Ok(Some(id.clone()));
        }
        let candidate = crate::policy::capability::StoreId::random()
            .map_err(|e| BudgetError::Unavailable(e.to_string()))?;
        let id: crate::policy::capability::StoreId = self
            .backend()?
            .store_id(candidate.as_str())
            .map_err(unavailable)?
            .parse()
            .map_err(|e: crate::policy::capability::CapError| {
                BudgetError::Unavailable(e.to_string())
            })?;
        let _ = self.store_id.set(id.clone());
        Ok(Some(id))
    }

    fn admit(&self, budgets: &[CallBudget], fuel: u64, now: u64) -> Result<Admission, BudgetError> {
        if budgets.is_empty() {
            return Ok(Admission { fuel });
        }
        self.backend()?
            .admit(budgets, fuel, now)
            .map_err(unavailable)?
    }

    fn refund_fuel(&self, budgets: &[CallBudget], amount: u64) -> Result<(), BudgetError> {
        if amount == 0 || !budgets.iter().any(|b| b.kind == BudgetKind::Fuel) {
            return Ok(());
        }
        self.backend()?
            .refund_fuel(budgets, amount)
            .map_err(unavailable)
    }

    fn used(&self, id: &BudgetId) -> u64 {
        self.backend()
            .ok()
            .and_then(|b| b.used(id).ok())
            .unwrap_or(0)
    }

    fn revoked(&self, chain: &[TokenId], now: u64) -> Result<Option<TokenId>, BudgetError> {
        let mut cache = self.lock();
        self.refresh(&mut cache, now)?;
        if cache.revoked.is_empty() {
            return Ok(None);
        }
        Ok(chain.iter().copied().find(|id| cache.revoked.contains(id)))
    }

    fn revoke(&self, id: TokenId, expires_at: Option<u64>) -> Result<bool, BudgetError> {
        let now = crate::policy::ledger::unix_now();
        let fresh = self
            .backend()?
            .revoke(id, expires_at, now)
            .map_err(unavailable)?;
        self.lock().revoked.insert(id);
        Ok(fresh)
    }

    fn note_use(&self, chain: &[TokenId]) {
        let mut cache = self.lock();
        for id in chain {
            *cache.uses.entry(*id).or_insert(0) += 1;
        }
    }

    fn record_issued(&self, issued: &Issued) -> Result<(), BudgetError> {
        self.backend()?.record_issued(issued).map_err(unavailable)
    }

    fn issued(&self, now: u64) -> Result<Vec<IssuedState>, BudgetError> {
        {
            let mut cache = self.lock();
            self.flush(&mut cache)?;
        }
        let backend = self.backend()?;
        let list = backend.issued().map_err(unavailable)?;
        let revoked: HashSet<TokenId> = backend
            .revoked_ids(now)
            .map_err(unavailable)?
            .into_iter()
            .collect();
        let by_id: HashMap<TokenId, Option<TokenId>> =
            list.iter().map(|(i, _)| (i.id, i.parent)).collect();
        Ok(list
            .into_iter()
            .map(|(issued, calls)| IssuedState {
                state: issued_state(&issued, &by_id, &revoked, now),
                calls,
                issued,
            })
            .collect())
    }
}

/// The host clock in unix seconds.
pub(crate) fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A stored id back (hex); `None` for a malformed one.
pub fn parse_id(s: &str) -> Option<TokenId> {
    s.parse().ok()
}
