//! The [`LedgerBackend`] of a [`PostgresStore`]: the ledger's tables in the
//! shared database, so budgets and revocations hold across hosts.
//!
//! An admission is one transaction: the budgets' rows are created if absent
//! (`INSERT … ON CONFLICT DO NOTHING`), locked with `SELECT … FOR UPDATE`
//! in id order (every host locks in the same order, so two admissions never
//! deadlock), checked, and charged; a refused admission writes nothing but
//! the empty rows.

use postgres::Client;

use super::{map_err, PostgresStore};
use crate::rows::{to_i64, to_u64};
use toolhost::policy::budget::{Admission, BudgetError, Issue, Issued};
use toolhost::policy::capability::{BudgetId, CallBudget, TokenId};
use toolhost::policy::ledger::{decide, fuel_budgets, parse_id, LedgerBackend};
use toolhost::store_error::StoreError;

/// Advisory-lock id guarding the ledger's schema creation.
const SCHEMA_LOCK: i64 = 0x746f_6f6c_6c65_6467;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS toolhost_capability_budget (
    id        TEXT   PRIMARY KEY,
    kind      TEXT   NOT NULL CHECK (kind IN ('max_calls', 'budget_fuel')),
    max       BIGINT NOT NULL,
    used      BIGINT NOT NULL,
    expires_s BIGINT
);
CREATE INDEX IF NOT EXISTS toolhost_capability_budget_by_expiry
    ON toolhost_capability_budget (expires_s) WHERE expires_s IS NOT NULL;
CREATE TABLE IF NOT EXISTS toolhost_capability_revoked (
    id        TEXT   PRIMARY KEY,
    revoked_s BIGINT NOT NULL,
    expires_s BIGINT
);
CREATE TABLE IF NOT EXISTS toolhost_capability_issued (
    id        TEXT   PRIMARY KEY,
    parent    TEXT,
    via       TEXT   NOT NULL,
    caveats   TEXT   NOT NULL,
    issued_s  BIGINT NOT NULL,
    expires_s BIGINT,
    calls     BIGINT NOT NULL DEFAULT 0,
    seq       BIGSERIAL
);
CREATE TABLE IF NOT EXISTS toolhost_capability_store (
    one INTEGER PRIMARY KEY CHECK (one = 1),
    id  TEXT    NOT NULL
);
";

fn backend(e: postgres::Error) -> StoreError {
    map_err(e)
}

impl PostgresStore {
    fn run<T: Send>(
        &self,
        f: impl FnOnce(&mut Client) -> Result<T, postgres::Error> + Send,
    ) -> Result<T, StoreError> {
        self.with_client(|client| f(client).map_err(backend))
    }
}

impl LedgerBackend for PostgresStore {
    fn init(&self) -> Result<(), StoreError> {
        self.run(|client| {
            let mut tx = client.transaction()?;
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK])?;
            tx.batch_execute(SCHEMA)?;
            tx.commit()
        })
    }

    fn admit(
        &self,
        budgets: &[CallBudget],
        fuel: u64,
        _now: u64,
    ) -> Result<Result<Admission, BudgetError>, StoreError> {
        let mut sorted: Vec<CallBudget> = Vec::with_capacity(budgets.len());
        for b in budgets {
            if !sorted.iter().any(|s| s.id == b.id) {
                sorted.push(*b);
            }
        }
        sorted.sort_by_key(|b| b.id.to_string());
        self.run(|client| {
            let mut tx = client.transaction()?;
            let ids: Vec<String> = sorted.iter().map(|b| b.id.to_string()).collect();
            for (b, id) in sorted.iter().zip(&ids) {
                tx.execute(
                    "INSERT INTO toolhost_capability_budget (id, kind, max, used, expires_s)
                     VALUES ($1, $2, $3, 0, $4) ON CONFLICT (id) DO NOTHING",
                    &[
                        id,
                        &b.kind.as_str(),
                        &to_i64(b.max),
                        &b.expires_at.map(to_i64),
                    ],
                )?;
            }
            let rows = tx.query(
                "SELECT id, used FROM toolhost_capability_budget
                 WHERE id = ANY($1) ORDER BY id FOR UPDATE",
                &[&ids],
            )?;
            let used: Vec<(String, u64)> = rows
                .iter()
                .map(|r| (r.get::<_, String>(0), to_u64(r.get::<_, i64>(1))))
                .collect();
            let lookup = |id: &BudgetId| {
                let id = id.to_string();
                used.iter().find(|(i, _)| *i == id).map_or(0, |(_, n)| *n)
            };
            let (admission, charges) = match decide(budgets, fuel, lookup) {
                Ok(d) => d,
                Err(refusal) => {
                    tx.commit()?;
                    return Ok(Err(refusal));
                }
            };
            for (b, charge) in charges {
                tx.execute(
                    "UPDATE toolhost_capability_budget
                     SET used = LEAST(used::numeric + $2::bigint, 9223372036854775807)::bigint
                     WHERE id = $1",
                    &[&b.id.to_string(), &to_i64(charge)],
                )?;
            }
            tx.commit()?;
            Ok(Ok(admission))
        })
    }

    fn refund_fuel(&self, budgets: &[CallBudget], amount: u64) -> Result<(), StoreError> {
        let fuel = fuel_budgets(budgets);
        if fuel.is_empty() {
            return Ok(());
        }
        self.run(|client| {
            let ids: Vec<String> = fuel.iter().map(|b| b.id.to_string()).collect();
            client.execute(
                "UPDATE toolhost_capability_budget SET used = GREATEST(used - $2::bigint, 0)
                 WHERE id = ANY($1)",
                &[&ids, &to_i64(amount)],
            )?;
            Ok(())
        })
    }

    fn used(&self, id: &BudgetId) -> Result<u64, StoreError> {
        self.run(|client| {
            let row = client.query_opt(
                "SELECT used FROM toolhost_capability_budget WHERE id = $1",
                &[&id.to_string()],
            )?;
            Ok(row.map_or(0, |r| to_u64(r.get(0))))
        })
    }

    fn store_id(&self, candidate: &str) -> Result<String, StoreError> {
        self.run(|client| {
            client.execute(
                "INSERT INTO toolhost_capability_store (one, id) VALUES (1, $1)
                 ON CONFLICT (one) DO NOTHING",
                &[&candidate],
            )?;
            let row = client.query_one(
                "SELECT id FROM toolhost_capability_store WHERE one = 1",
                &[],
            )?;
            Ok(row.get::<_, String>(0))
        })
    }

    fn revoked_ids(&self, now: u64) -> Result<Vec<TokenId>, StoreError> {
        self.run(|client| {
            let rows = client.query(
                "SELECT id FROM toolhost_capability_revoked
                 WHERE expires_s IS NULL OR expires_s > $1",
                &[&to_i64(now)],
            )?;
            Ok(rows
                .iter()
                .filter_map(|r| parse_id(&r.get::<_, String>(0)))
                .collect())
        })
    }

    fn revoke(&self, id: TokenId, expires_at: Option<u64>, now: u64) -> Result<bool, StoreError> {
        self.run(|client| {
            let n = client.execute(
                "INSERT INTO toolhost_capability_revoked (id, revoked_s, expires_s)
                 VALUES ($1, $2, $3) ON CONFLICT (id) DO NOTHING",
                &[&id.to_string(), &to_i64(now), &expires_at.map(to_i64)],
            )?;
            Ok(n == 1)
        })
    }

    fn add_uses(&self, uses: &[(TokenId, u64)]) -> Result<(), StoreError> {
        self.run(|client| {
            let mut tx = client.transaction()?;
            for (id, n) in uses {
                tx.execute(
                    "UPDATE toolhost_capability_issued SET calls = calls + $2 WHERE id = $1",
                    &[&id.to_string(), &to_i64(*n)],
                )?;
            }
            tx.commit()
        })
    }

    fn purge(&self, now: u64) -> Result<(), StoreError> {
        self.run(|client| {
            client.execute(
                "DELETE FROM toolhost_capability_budget
                 WHERE expires_s IS NOT NULL AND expires_s <= $1",
                &[&to_i64(now)],
            )?;
            client.execute(
                "DELETE FROM toolhost_capability_revoked
                 WHERE expires_s IS NOT NULL AND expires_s <= $1",
                &[&to_i64(now)],
            )?;
            Ok(())
        })
    }

    fn record_issued(&self, i: &Issued) -> Result<(), StoreError> {
        self.run(|client| {
            client.execute(
                "INSERT INTO toolhost_capability_issued
                     (id, parent, via, caveats, issued_s, expires_s)
                 VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (id) DO NOTHING",
                &[
                    &i.id.to_string(),
                    &i.parent.map(|p| p.to_string()),
                    &i.via.as_str(),
                    &i.caveats,
                    &to_i64(i.issued_at),
                    &i.expires_at.map(to_i64),
                ],
            )?;
            Ok(())
        })
    }

    fn issued(&self) -> Result<Vec<(Issued, u64)>, StoreError> {
        let rows = self.run(|client| {
            client.query(
                "SELECT id, parent, via, caveats, issued_s, expires_s, calls
                 FROM toolhost_capability_issued ORDER BY issued_s, seq",
                &[],
            )
        })?;
        let mut out = Vec::with_capacity(rows.len());
        for r in rows {
            let id: String = r.get(0);
            let via: String = r.get(2);
            let (Some(token), Some(via)) = (parse_id(&id), Issue::parse(&via)) else {
                return Err(StoreError::corrupt(&id, "not a token id or issue kind"));
            };
            out.push((
                Issued {
                    id: token,
                    parent: r.get::<_, Option<String>>(1).as_deref().and_then(parse_id),
                    via,
                    caveats: r.get(3),
                    issued_at: to_u64(r.get(4)),
                    expires_at: r.get::<_, Option<i64>>(5).map(to_u64),
                },
                to_u64(r.get(6)),
            ));
        }
        Ok(out)
    }
}
