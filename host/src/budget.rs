//! Call budgets: the `max_calls` caveats of capability tokens, counted
//! host-wide.
//!
//! A `max_calls=N` caveat limits the calls made by the token that carries it
//! *and by every token derived from it*, together. Each such caveat has a
//! stable [`BudgetId`] (a hash of the token chain at that caveat, computed
//! when the token is verified; see [`CallBudget`]), so a re-attenuated
//! token, a new [`Session`](crate::session::Session), a restarted MCP
//! session or an evicted cache entry all count against the same numbers.
//!
//! Every call (and every plan: a plan runs the tool's dry-run) is charged
//! against every budget in its token's chain with one atomic
//! check-and-increment ([`BudgetLedger::charge`]): either all of them have
//! room and all are counted, or none is counted and the call is denied
//! naming the caveat that ran out and what is left.
//!
//! [`MemoryLedger`] keeps the counts in memory for the whole process
//! ([`process_ledger`], what [`Host::new`](crate::pipeline::Host::new)
//! uses). It cannot be reset by filling it: an entry lives until every
//! token that carries its caveat has expired, and when the table is full a
//! call needing a *new* entry is denied (fail closed) rather than an old
//! count forgotten. So that one holder cannot fill the table for everyone,
//! the entries opened under one minted token (all its attenuations) are
//! capped too. A persistent record store can implement [`BudgetLedger`]
//! under the same ids.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, OnceLock};

use crate::capability::{BudgetId, CallBudget};

/// Default number of budgets [`MemoryLedger`] tracks at once.
pub const DEFAULT_CAPACITY: usize = 262_144;
/// Default number of budgets opened under one minted token (all its
/// attenuations together).
pub const DEFAULT_PER_TOKEN: usize = 4_096;

/// Why a call was not counted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BudgetError {
    /// A `max_calls` caveat has no calls left.
    #[error("the token's max_calls={} caveat (caveat {} of its chain) allows {} calls, shared with every token derived from it; {used} were used, none is left", .budget.max, .budget.position + 1, .budget.max)]
    Exhausted { budget: CallBudget, used: u64 },
    /// The ledger cannot open another budget; it denies rather than forget
    /// a count.
    #[error("the host tracks no more call budgets ({reason}); calls under a new max_calls caveat are refused until older tokens expire")]
    Full { reason: String },
    /// The ledger could not be reached (a store-backed ledger).
    #[error("the call budget store cannot be reached: {0}")]
    Unavailable(String),
}

/// Counts calls against budgets. Implementations must make
/// [`charge`](BudgetLedger::charge) atomic across all the budgets it is
/// given, and must never forget a count before `expires_at` has passed.
pub trait BudgetLedger: Send + Sync {
    /// Counts one call against every budget in `budgets`, all or nothing.
    /// `now` is unix seconds.
    fn charge(&self, budgets: &[CallBudget], now: u64) -> Result<(), BudgetError>;

    /// Calls counted so far against `id` (0 if unknown).
    fn used(&self, id: &BudgetId) -> u64;
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

impl BudgetLedger for MemoryLedger {
    fn charge(&self, budgets: &[CallBudget], now: u64) -> Result<(), BudgetError> {
        if budgets.is_empty() {
            return Ok(());
        }
        let mut t = self.lock();
        t.purge(now);
        // Check every budget first: all or nothing.
        let mut new: Vec<&CallBudget> = Vec::new();
        for b in budgets {
            match t.entries.get(&b.id) {
                Some(e) if e.used >= b.max => {
                    return Err(BudgetError::Exhausted {
                        budget: *b,
                        used: e.used,
                    })
                }
                Some(_) => {}
                None if b.max == 0 => {
                    return Err(BudgetError::Exhausted {
                        budget: *b,
                        used: 0,
                    })
                }
                None if !new.iter().any(|n| n.id == b.id) => new.push(b),
                None => {}
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
        for b in budgets {
            if let Some(e) = t.entries.get_mut(&b.id) {
                e.used += 1;
                continue;
            }
            t.entries.insert(
                b.id,
                Entry {
                    used: 1,
                    token_id: b.token_id,
                },
            );
            *t.per_token.entry(b.token_id).or_insert(0) += 1;
            if let Some(at) = b.expires_at {
                t.expiring.insert((at, b.id));
            }
        }
        Ok(())
    }

    fn used(&self, id: &BudgetId) -> u64 {
        self.lock().entries.get(id).map_or(0, |e| e.used)
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
    use crate::capability::{Caveat, RootKey, Token};
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
