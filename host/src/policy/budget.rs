//! Call budgets and revocations: the `max_calls` and `budget_fuel` caveats
//! of capability tokens, counted host-wide, and the token ids taken back.
//!
//! A `max_calls=N` caveat limits the calls made by the token that carries it
//! *and by every token derived from it*, together; a `budget_fuel=N` caveat
//! does the same for the fuel those calls actually consume. Each such
//! caveat has a stable [`BudgetId`] (a hash of the token chain at that
//! caveat, computed when the token is verified; see [`CallBudget`]), so a
//! re-attenuated token, a new [`Session`](crate::policy::session::Session), a
//! restarted MCP session or an evicted cache entry all count against the
//! same numbers.
//!
//! Every call (and every plan: a plan runs the tool's dry-run) is admitted
//! against every budget in its token's chain with one atomic step
//! ([`BudgetLedger::admit`]): either all of them have room and all are
//! charged, or none is and the call is denied naming the caveat that ran
//! out and what is left. Fuel is reserved up front (the call's fuel limit
//! becomes at most what every fuel budget has left) and the part the call
//! did not consume is given back after it ([`BudgetLedger::refund_fuel`]),
//! so concurrent calls can never spend more than a budget together.
//!
//! Revocation: [`BudgetLedger::revoke`] takes back a token id; a call whose
//! chain ([`Token::chain_ids`](crate::policy::capability::Token::chain_ids)) holds a
//! revoked id is denied, so revoking a token revokes all its descendants.
//!
//! Two ledgers:
//!
//! - [`MemoryLedger`] keeps everything in memory for the whole process
//!   ([`process_ledger`], what [`Host::new`](crate::pipeline::Host::new)
//!   uses). It cannot be reset by filling it: an entry lives until every
//!   token that carries its caveat has expired, and when the table is full
//!   a call needing a *new* entry is denied (fail closed) rather than an
//!   old count forgotten. So that one holder cannot fill the table for
//!   everyone, the entries opened under one minted token (all its
//!   attenuations) are capped too.
//! - [`crate::policy::ledger::StoreLedger`] keeps them in the record store (SQLite
//!   or PostgreSQL), so they hold across processes and hosts; a
//!   [`Host`](crate::pipeline::Host) with a record store uses it.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock};

use serde::Serialize;

use crate::policy::capability::{BudgetId, BudgetKind, CallBudget, TokenId};

/// Default number of budgets [`MemoryLedger`] tracks at once.
pub const DEFAULT_CAPACITY: usize = 262_144;
/// Default number of budgets opened under one minted token (all its
/// attenuations together).
pub const DEFAULT_PER_TOKEN: usize = 4_096;

/// Why a call was not admitted, or a ledger operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BudgetError {
    /// A `max_calls` or `budget_fuel` caveat has nothing left.
    #[error("{}", exhausted_message(.budget, *.used))]
    Exhausted { budget: CallBudget, used: u64 },
    /// A token of the chain was revoked.
    #[error("the token was revoked: {}", revoked_message(.id, .chain))]
    Revoked {
        /// The revoked id.
        id: TokenId,
        /// The token's chain, oldest first.
        chain: Vec<TokenId>,
    },
    /// The ledger cannot open another budget; it denies rather than forget
    /// a count.
    #[error("the host tracks no more call budgets ({reason}); calls under a new max_calls caveat are refused until older tokens expire")]
    Full { reason: String },
    /// The ledger could not be reached (a store-backed ledger).
    #[error("the call budget store cannot be reached: {0}")]
    Unavailable(String),
    /// The token is bound to a record store (a `store` caveat) and this
    /// host's store is another one (or it keeps none): its counts and
    /// revocations are not here.
    #[error(
        "the token is bound to the record store {token}, and this host's store is {}: its budgets and revocations are kept there, so it is refused here",
        .host.as_deref().unwrap_or("none")
    )]
    OtherStore { token: String, host: Option<String> },
}

fn exhausted_message(b: &CallBudget, used: u64) -> String {
    let position = b.position + 1;
    match b.kind {
        BudgetKind::Calls => format!(
            "the token's max_calls={} caveat (caveat {position} of its chain) allows {} calls, shared with every token derived from it; {used} were used, none is left",
            b.max, b.max
        ),
        BudgetKind::Fuel => format!(
            "the token's budget_fuel={} caveat (caveat {position} of its chain) allows {} units of fuel, shared with every token derived from it; {used} were used, {} are left",
            b.max,
            b.max,
            b.max.saturating_sub(used)
        ),
    }
}

fn revoked_message(id: &TokenId, chain: &[TokenId]) -> String {
    if chain.last() == Some(id) {
        format!("id {id} is revoked")
    } else {
        format!("its ancestor {id} is revoked, and with it every token derived from it")
    }
}

/// What [`BudgetLedger::admit`] granted a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Admission {
    /// Fuel reserved for the call: what it asked for, or less when a
    /// `budget_fuel` caveat of its chain has less left. Give back what the
    /// call did not use with [`BudgetLedger::refund_fuel`].
    pub fuel: u64,
}

/// How a token came to be recorded in a ledger (`cap list`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Issue {
    /// `cap mint`.
    Mint,
    /// `cap attenuate`.
    Attenuate,
    /// The MCP `delegate` tool.
    Delegate,
}

impl Issue {
    pub fn as_str(self) -> &'static str {
        match self {
            Issue::Mint => "mint",
            Issue::Attenuate => "attenuate",
            Issue::Delegate => "delegate",
        }
    }

    pub fn parse(s: &str) -> Option<Issue> {
        [Issue::Mint, Issue::Attenuate, Issue::Delegate]
            .into_iter()
            .find(|i| i.as_str() == s)
    }
}

/// A token minted or delegated through this host, for `cap list`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Issued {
    pub id: TokenId,
    /// The token it was made from (`None` when minted).
    pub parent: Option<TokenId>,
    pub via: Issue,
    /// Its caveats in text form, e.g. `tool=file_view; right=read`.
    pub caveats: String,
    /// Unix seconds.
    pub issued_at: u64,
    /// Unix seconds, when the token expires.
    pub expires_at: Option<u64>,
}

/// An [`Issued`] token with what the ledger knows of it now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IssuedState {
    #[serde(flatten)]
    pub issued: Issued,
    /// Calls admitted under the token and its descendants (counted in
    /// batches: up to about a second late). Informational only: an `id`
    /// caveat can be copied onto another token, whose calls then count
    /// here too; budgets and plan bindings do not rely on ids.
    pub calls: u64,
    /// `active`, `revoked` (itself or an ancestor) or `expired`.
    pub state: &'static str,
}

/// Counts calls and fuel against budgets and keeps revocations.
/// Implementations must make [`admit`](BudgetLedger::admit) atomic across
/// all the budgets it is given, and must never forget a count before
/// `expires_at` has passed.
pub trait BudgetLedger: Send + Sync {
    /// Admits one call: checks every budget in `budgets` and charges them
    /// all, or none. A `max_calls` budget is charged one call; every
    /// `budget_fuel` budget is charged the fuel reserved, `fuel` or less
    /// (what the budget with the least left still has). `now` is unix
    /// seconds.
    fn admit(&self, budgets: &[CallBudget], fuel: u64, now: u64) -> Result<Admission, BudgetError>;

    /// Counts one call against every budget in `budgets`, all or nothing
    /// ([`admit`](BudgetLedger::admit) with no fuel).
    fn charge(&self, budgets: &[CallBudget], now: u64) -> Result<(), BudgetError> {
        self.admit(budgets, 0, now).map(|_| ())
    }

    /// Gives back `amount` units of reserved fuel the call did not consume
    /// to every `budget_fuel` budget in `budgets`.
    fn refund_fuel(&self, budgets: &[CallBudget], amount: u64) -> Result<(), BudgetError>;

    /// Calls (or fuel) counted so far against `id` (0 if unknown).
    fn used(&self, id: &BudgetId) -> u64;

    /// The first revoked id of `chain` (oldest first), if any. A
    /// store-backed ledger may answer from a cache up to
    /// [`crate::policy::ledger::REVOCATION_STALENESS`] old.
    fn revoked(&self, chain: &[TokenId], now: u64) -> Result<Option<TokenId>, BudgetError>;

    /// The id the record store was given when it was created (`None`: this
    /// ledger keeps no store, so a token bound to one is refused).
    fn store_id(&self) -> Result<Option<crate::policy::capability::StoreId>, BudgetError> {
        Ok(None)
    }

    /// Revokes `id` (and so every token derived from it) until
    /// `expires_at` (unix seconds; `None`: for good). Returns whether it
    /// was newly revoked.
    fn revoke(&self, id: TokenId, expires_at: Option<u64>) -> Result<bool, BudgetError>;

    /// Counts one admitted call for every id of `chain` (for `cap list`).
    fn note_use(&self, chain: &[TokenId]);

    /// Records a token minted or delegated through this host.
    fn record_issued(&self, issued: &Issued) -> Result<(), BudgetError>;

    /// The tokens recorded with [`record_issued`](BudgetLedger::record_issued),
    /// oldest first, with their use counts and state at `now`.
    fn issued(&self, now: u64) -> Result<Vec<IssuedState>, BudgetError>;
}

/// The state of an issued token given the revoked ids.
pub(crate) fn issued_state(
    issued: &Issued,
    by_id: &HashMap<TokenId, Option<TokenId>>,
    revoked: &HashSet<TokenId>,
    now: u64,
) -> &'static str {
    let mut at = Some(issued.id);
    let mut hops = 0;
    while let Some(id) = at {
        if revoked.contains(&id) {
            return "revoked";
        }
        hops += 1;
        at = by_id.get(&id).copied().flatten().filter(|_| hops < 256);
    }
    if issued.expires_at.is_some_and(|t| t <= now) {
        return "expired";
    }
    "active"
}

/// The ledger every [`Host`](crate::pipeline::Host) of this process shares
/// unless given another.
pub fn process_ledger() -> Arc<dyn BudgetLedger> {
    static LEDGER: OnceLock<Arc<MemoryLedger>> = OnceLock::new();
    LEDGER
        .get_or_init(|| Arc::new(MemoryLedger::new(DEFAULT_CAPACITY, DEFAULT_PER_TOKEN)))
        .clone()
}

/// In-memory [`BudgetLedger`], bounded and fail-closed.
pub struct MemoryLedger {
    capacity: usize,
    per_token: usize,
    table: Mutex<Table>,
}

#[derive(Default)]
struct Table {
    entries: HashMap<BudgetId, Entry>,
    /// Entries that can be forgotten, by expiry.
    expiring: BTreeSet<(u64, BudgetId)>,
    /// Entries per minted token.
    per_token: HashMap<[u8; 16], usize>,
    /// Revoked ids, with when the revocation may be forgotten.
    revoked: HashMap<TokenId, Option<u64>>,
    issued: BTreeMap<(u64, TokenId), Issued>,
    uses: HashMap<TokenId, u64>,
}

struct Entry {
    used: u64,
    token_id: [u8; 16],
}

impl MemoryLedger {
    /// At most `capacity` budgets, at most `per_token` under one minted token.
    pub fn new(capacity: usize, per_token: usize) -> MemoryLedger {
        MemoryLedger {
            capacity,
            per_token,
            table: Mutex::new(Table::default()),
        }
    }

    /// Budgets tracked now.
    pub fn len(&self) -> usize {
        self.lock().entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Table {
    /// Forgets the entries whose every token has expired.
    fn purge(&mut self, now: u64) {
        while let Some(&(at, id)) = self.expiring.first() {
            if at > now {
                break;
            }
            self.expiring.pop_first();
            if let Some(e) = self.entries.remove(&id) {
                if let Some(n) = self.per_token.get_mut(&e.token_id) {
                    *n -= 1;
                    if *n == 0 {
                        self.per_token.remove(&e.token_id);
                    }
                }
            }
        }
    }
}

/// What a budget has left, given what it used.
fn left(b: &CallBudget, used: u64) -> u64 {
    b.max.saturating_sub(used)
}

impl BudgetLedger for MemoryLedger {
    fn admit(&self, budgets: &[CallBudget], fuel: u64, now: u64) -> Result<Admission, BudgetError> {
        if budgets.is_empty() {
            return Ok(Admission { fuel });
        }
        let mut t = self.lock();
        t.purge(now);
        // Check every budget first: all or nothing.
        let mut new: Vec<&CallBudget> = Vec::new();
        let mut reserve = fuel;
        for b in budgets {
            let used = t.entries.get(&b.id).map_or(0, |e| e.used);
            if left(b, used) == 0 {
                return Err(BudgetError::Exhausted { budget: *b, used });
            }
            if b.kind == BudgetKind::Fuel {
                reserve = reserve.min(left(b, used));
            }
            if !t.entries.contains_key(&b.id) && !new.iter().any(|n| n.id == b.id) {
                new.push(b);
            }
        }
        if !new.is_empty() {
            if t.entries.len() + new.len() > self.capacity {
                return Err(BudgetError::Full {
                    reason: format!("{} budgets, the limit", self.capacity),
                });
            }
            for b in &new {
                let open = t.per_token.get(&b.token_id).copied().unwrap_or(0);
                let adding = new.iter().filter(|n| n.token_id == b.token_id).count();
                if open + adding > self.per_token {
                    return Err(BudgetError::Full {
                        reason: format!(
                            "{} budgets under this token and its attenuations, the limit",
                            self.per_token
                        ),
                    });
                }
            }
        }
        let mut seen: Vec<BudgetId> = Vec::with_capacity(budgets.len());
        for b in budgets {
            if seen.contains(&b.id) {
                continue;
            }
            seen.push(b.id);
            let charge = match b.kind {
                BudgetKind::Calls => 1,
                BudgetKind::Fuel => reserve,
            };
            if let Some(e) = t.entries.get_mut(&b.id) {
                e.used = e.used.saturating_add(charge);
                continue;
            }
            t.entries.insert(
                b.id,
                Entry {
                    used: charge,
                    token_id: b.token_id,
                },
            );
            *t.per_token.entry(b.token_id).or_insert(0) += 1;
            if let Some(at) = b.expires_at {
                t.expiring.insert((at, b.id));
            }
        }
        Ok(Admission { fuel: reserve })
    }

    fn refund_fuel(&self, budgets: &[CallBudget], amount: u64) -> Result<(), BudgetError> {
        if amount == 0 {
            return Ok(());
        }
        let mut t = self.lock();
        let mut seen: Vec<BudgetId> = Vec::new();
        for b in budgets.iter().filter(|b| b.kind == BudgetKind::Fuel) {
            if seen.contains(&b.id) {
                continue;
            }
            seen.push(b.id);
            if let Some(e) = t.entries.get_mut(&b.id) {
                e.used = e.used.saturating_sub(amount);
            }
        }
        Ok(())
    }

    fn used(&self, id: &BudgetId) -> u64 {
        self.lock().entries.get(id).map_or(0, |e| e.used)
    }

    fn revoked(&self, chain: &[TokenId], now: u64) -> Result<Option<TokenId>, BudgetError> {
        let t = self.lock();
        if t.revoked.is_empty() {
            return Ok(None);
        }
        Ok(chain.iter().copied().find(|id| {
            t.revoked
                .get(id)
                .is_some_and(|until| until.is_none_or(|u| u > now))
        }))
    }

    fn revoke(&self, id: TokenId, expires_at: Option<u64>) -> Result<bool, BudgetError> {
        Ok(self.lock().revoked.insert(id, expires_at).is_none())
    }

    fn note_use(&self, chain: &[TokenId]) {
        let mut t = self.lock();
        if t.issued.is_empty() {
            return;
        }
        for id in chain {
            *t.uses.entry(*id).or_insert(0) += 1;
        }
    }

    fn record_issued(&self, issued: &Issued) -> Result<(), BudgetError> {
        self.lock()
            .issued
            .insert((issued.issued_at, issued.id), issued.clone());
        Ok(())
    }

    fn issued(&self, now: u64) -> Result<Vec<IssuedState>, BudgetError> {
        let t = self.lock();
        let by_id: HashMap<TokenId, Option<TokenId>> =
            t.issued.values().map(|i| (i.id, i.parent)).collect();
        let revoked: HashSet<TokenId> = t.revoked.keys().copied().collect();
        Ok(t.issued
            .values()
            .map(|i| IssuedState {
                calls: t.uses.get(&i.id).copied().unwrap_or(0),
                state: issued_state(i, &by_id, &revoked, now),
                issued: i.clone(),
            })
            .collect())
    }
}

impl std::fmt::Debug for MemoryLedger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryLedger")
            .field("capacity", &self.capacity)
            .field("per_token", &self.per_token)
            .field("len", &self.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::capability::{Caveat, RootKey, Token};
    use std::time::{Duration, UNIX_EPOCH};

    const NOW: u64 = 1_767_225_600;

    fn key() -> RootKey {
        RootKey::from_bytes([9; 32])
    }

    fn verified(t: &Token) -> Vec<CallBudget> {
        key()
            .verify(t, UNIX_EPOCH + Duration::from_secs(NOW))
            .unwrap()
            .call_budgets()
            .to_vec()
    }

    fn token(caveats: &[&str]) -> Token {
        let c: Vec<Caveat> = caveats.iter().map(|c| c.parse().unwrap()).collect();
        Token::mint(&key(), &c).unwrap()
    }

    #[test]
    fn attenuation_shares_the_parent_budget() {
        let parent = token(&["tool=*", "max_calls=2"]);
        let child = parent.attenuate(&["max_calls=2".parse().unwrap()]).unwrap();
        let (p, c) = (verified(&parent), verified(&child));
        assert_eq!(p.len(), 1);
        assert_eq!(c.len(), 2);
        assert_eq!(c[0], p[0], "the child carries the parent's budget");
        assert_ne!(c[1].id, p[0].id);
        // Computed without the key from the parent's verified budgets.
        assert_eq!(child.budgets_derived_from(&parent, &p).unwrap(), c);
        // A token that does not extend the parent is refused.
        let other = token(&["tool=*", "max_calls=2"]);
        assert!(other.budgets_derived_from(&parent, &p).is_none());
        assert_ne!(verified(&other)[0].id, p[0].id, "each mint its own budget");

        let ledger = MemoryLedger::new(16, 16);
        ledger.charge(&p, NOW).unwrap();
        ledger.charge(&c, NOW).unwrap();
        let err = ledger.charge(&c, NOW).unwrap_err();
        assert!(
            matches!(&err, BudgetError::Exhausted { budget, used: 2 } if budget.id == p[0].id),
            "{err:?}"
        );
        assert!(err.to_string().contains("none is left"), "{err}");
        // All or nothing: the child's own budget was not counted by the
        // refused call.
        assert_eq!(ledger.used(&c[1].id), 1);
        assert!(ledger.charge(&p, NOW).is_err());
    }

    #[test]
    fn a_full_ledger_refuses_new_budgets_and_keeps_old_counts() {
        let ledger = MemoryLedger::new(2, 16);
        let a = verified(&token(&["tool=*", "max_calls=1"]));
        ledger.charge(&a, NOW).unwrap();
        let b = verified(&token(&["tool=*", "max_calls=5"]));
        ledger.charge(&b, NOW).unwrap();
        let c = verified(&token(&["tool=*", "max_calls=5"]));
        assert!(matches!(
            ledger.charge(&c, NOW),
            Err(BudgetError::Full { .. })
        ));
        // The old count is still there.
        assert!(matches!(
            ledger.charge(&a, NOW),
            Err(BudgetError::Exhausted { .. })
        ));
        ledger.charge(&b, NOW).unwrap();
    }

    #[test]
    fn one_token_cannot_fill_the_ledger_for_others() {
        let ledger = MemoryLedger::new(100, 3);
        let root = token(&["tool=*", "max_calls=100"]);
        let mut t = root.clone();
        let mut refused = 0;
        for _ in 0..5 {
            t = t.attenuate(&["max_calls=100".parse().unwrap()]).unwrap();
            if ledger.charge(&verified(&t), NOW).is_err() {
                refused += 1;
            }
        }
        assert_eq!(refused, 3, "only 3 budgets under one minted token");
        ledger
            .charge(&verified(&token(&["tool=*", "max_calls=1"])), NOW)
            .unwrap();
    }

    #[test]
    fn expired_budgets_are_forgotten_and_only_they() {
        let ledger = MemoryLedger::new(1, 16);
        let short = verified(&token(&[
            "tool=*",
            &format!("expires={}", NOW + 10),
            "max_calls=1",
        ]));
        assert_eq!(short[0].expires_at, Some(NOW + 10));
        ledger.charge(&short, NOW).unwrap();
        let other = verified(&token(&["tool=*", "max_calls=1"]));
        assert!(ledger.charge(&other, NOW + 9).is_err(), "still full");
        ledger.charge(&other, NOW + 10).unwrap();
        assert_eq!(ledger.len(), 1);
        // An expiry after the caveat does not shorten its life: a token
        // derived before it need not carry it.
        let late = verified(&token(&[
            "tool=*",
            "max_calls=1",
            &format!("expires={}", NOW + 10),
        ]));
        assert_eq!(late[0].expires_at, None);
    }
}
