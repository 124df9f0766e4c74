//! The [`LedgerBackend`] of a [`SqliteStore`]: the ledger's tables in the
//! store's file, written under the store's connection and its
//! `BEGIN IMMEDIATE` transactions (so admissions from every process using
//! the file are serialized by SQLite's write lock).

use rusqlite::{params, OptionalExtension};

use super::{map_err, SqliteStore};
use crate::rows::{to_i64, to_u64};
use toolhost::policy::budget::{Admission, BudgetError, Issue, Issued};
use toolhost::policy::capability::{BudgetId, BudgetKind, CallBudget, TokenId};
use toolhost::policy::ledger::{decide, fuel_budgets, parse_id, LedgerBackend};
use toolhost::store_error::StoreError;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS capability_budget (
    id        TEXT    PRIMARY KEY NOT NULL,
    kind      TEXT    NOT NULL CHECK (kind IN ('max_calls', 'budget_fuel')),
    max       INTEGER NOT NULL,
    used      INTEGER NOT NULL,
    expires_s INTEGER
) STRICT;
CREATE INDEX IF NOT EXISTS capability_budget_by_expiry ON capability_budget (expires_s)
    WHERE expires_s IS NOT NULL;
CREATE TABLE IF NOT EXISTS capability_revoked (
    id        TEXT    PRIMARY KEY NOT NULL,
    revoked_s INTEGER NOT NULL,
    expires_s INTEGER
) STRICT;
CREATE TABLE IF NOT EXISTS capability_issued (
    id        TEXT    PRIMARY KEY NOT NULL,
    parent    TEXT,
    via       TEXT    NOT NULL,
    caveats   TEXT    NOT NULL,
    issued_s  INTEGER NOT NULL,
    expires_s INTEGER,
    calls     INTEGER NOT NULL DEFAULT 0
) STRICT;
CREATE TABLE IF NOT EXISTS capability_store (
    one INTEGER PRIMARY KEY NOT NULL CHECK (one = 1),
    id  TEXT    NOT NULL
) STRICT;
";

fn kind_str(kind: BudgetKind) -> &'static str {
    kind.as_str()
}

impl LedgerBackend for SqliteStore {
    fn store_id(&self, candidate: &str) -> Result<String, StoreError> {
        self.write(|tx, _| {
            tx.execute(
                "INSERT INTO capability_store (one, id) VALUES (1, ?1) ON CONFLICT (one) DO NOTHING",
                [candidate],
            )
            .map_err(map_err)?;
            tx.query_row("SELECT id FROM capability_store WHERE one = 1", [], |r| {
                r.get::<_, String>(0)
            })
            .map_err(map_err)
        })
    }

    fn init(&self) -> Result<(), StoreError> {
        self.write(|tx, _| tx.execute_batch(SCHEMA).map_err(map_err))
    }

    fn admit(
        &self,
        budgets: &[CallBudget],
        fuel: u64,
        now: u64,
    ) -> Result<Result<Admission, BudgetError>, StoreError> {
        let _ = now;
        self.write(|tx, _| {
            let mut used = Vec::with_capacity(budgets.len());
            {
                let mut select = tx
                    .prepare_cached("SELECT used FROM capability_budget WHERE id = ?1")
                    .map_err(map_err)?;
                for b in budgets {
                    let n: Option<i64> = select
                        .query_row([b.id.to_string()], |r| r.get(0))
                        .optional()
                        .map_err(map_err)?;
                    used.push((b.id, n.map_or(0, to_u64)));
                }
            }
            let lookup = |id: &BudgetId| {
                used.iter()
                    .find(|(i, _)| i == id)
                    .map_or(0, |(_, n)| *n)
            };
            let (admission, charges) = match decide(budgets, fuel, lookup) {
                Ok(d) => d,
                Err(refusal) => return Ok(Err(refusal)),
            };
            let mut upsert = tx
                .prepare_cached(
                    "INSERT INTO capability_budget (id, kind, max, used, expires_s)
                     VALUES (?1, ?2, ?3, ?4, ?5)
                     ON CONFLICT (id) DO UPDATE SET used = min(used + excluded.used, 9223372036854775807)",
                )
                .map_err(map_err)?;
            for (b, charge) in charges {
                upsert
                    .execute(params![
                        b.id.to_string(),
                        kind_str(b.kind),
                        to_i64(b.max),
                        to_i64(charge),
                        b.expires_at.map(to_i64),
                    ])
                    .map_err(map_err)?;
            }
            Ok(Ok(admission))
        })
    }

    fn refund_fuel(&self, budgets: &[CallBudget], amount: u64) -> Result<(), StoreError> {
        let fuel = fuel_budgets(budgets);
        if fuel.is_empty() {
            return Ok(());
        }
        self.write(|tx, _| {
            let mut update = tx
                .prepare_cached(
                    "UPDATE capability_budget SET used = max(used - ?2, 0) WHERE id = ?1",
                )
                .map_err(map_err)?;
            for b in fuel {
                update
                    .execute(params![b.id.to_string(), to_i64(amount)])
                    .map_err(map_err)?;
            }
            Ok(())
        })
    }

    fn used(&self, id: &BudgetId) -> Result<u64, StoreError> {
        let conn = self.lock();
        let n: Option<i64> = conn
            .prepare_cached("SELECT used FROM capability_budget WHERE id = ?1")
            .and_then(|mut s| s.query_row([id.to_string()], |r| r.get(0)).optional())
            .map_err(map_err)?;
        Ok(n.map_or(0, to_u64))
    }

    fn revoked_ids(&self, now: u64) -> Result<Vec<TokenId>, StoreError> {
        let conn = self.lock();
        let mut stmt = conn
            .prepare_cached(
                "SELECT id FROM capability_revoked WHERE expires_s IS NULL OR expires_s > ?1",
            )
            .map_err(map_err)?;
        let rows = stmt
            .query_map([to_i64(now)], |r| r.get::<_, String>(0))
            .map_err(map_err)?;
        let mut ids = Vec::new();
        for row in rows {
            if let Some(id) = parse_id(&row.map_err(map_err)?) {
                ids.push(id);
            }
        }
        Ok(ids)
    }

    fn revoke(&self, id: TokenId, expires_at: Option<u64>, now: u64) -> Result<bool, StoreError> {
        self.write(|tx, _| {
            let n = tx
                .execute(
                    "INSERT INTO capability_revoked (id, revoked_s, expires_s) VALUES (?1, ?2, ?3)
                     ON CONFLICT (id) DO NOTHING",
                    params![id.to_string(), to_i64(now), expires_at.map(to_i64)],
                )
                .map_err(map_err)?;
            Ok(n == 1)
        })
    }

    fn add_uses(&self, uses: &[(TokenId, u64)]) -> Result<(), StoreError> {
        self.write(|tx, _| {
            let mut update = tx
                .prepare_cached("UPDATE capability_issued SET calls = calls + ?2 WHERE id = ?1")
                .map_err(map_err)?;
            for (id, n) in uses {
                update
                    .execute(params![id.to_string(), to_i64(*n)])
                    .map_err(map_err)?;
            }
            Ok(())
        })
    }

    fn purge(&self, now: u64) -> Result<(), StoreError> {
        self.write(|tx, _| {
            tx.execute(
                "DELETE FROM capability_budget WHERE expires_s IS NOT NULL AND expires_s <= ?1",
                [to_i64(now)],
            )
            .map_err(map_err)?;
            tx.execute(
                "DELETE FROM capability_revoked WHERE expires_s IS NOT NULL AND expires_s <= ?1",
                [to_i64(now)],
            )
            .map_err(map_err)?;
            Ok(())
        })
    }

    fn record_issued(&self, i: &Issued) -> Result<(), StoreError> {
        self.write(|tx, _| {
            tx.execute(
                "INSERT INTO capability_issued (id, parent, via, caveats, issued_s, expires_s)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (id) DO NOTHING",
                params![
                    i.id.to_string(),
                    i.parent.map(|p| p.to_string()),
                    i.via.as_str(),
                    i.caveats,
                    to_i64(i.issued_at),
                    i.expires_at.map(to_i64),
                ],
            )
            .map_err(map_err)?;
            Ok(())
        })
    }

    fn issued(&self) -> Result<Vec<(Issued, u64)>, StoreError> {
        let conn = self.lock();
        let mut stmt = conn
            .prepare_cached(
                "SELECT id, parent, via, caveats, issued_s, expires_s, calls
                 FROM capability_issued ORDER BY issued_s, rowid",
            )
            .map_err(map_err)?;
        let rows = stmt
            .query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, Option<String>>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, i64>(4)?,
                    r.get::<_, Option<i64>>(5)?,
                    r.get::<_, i64>(6)?,
                ))
            })
            .map_err(map_err)?;
        let mut out = Vec::new();
        for row in rows {
            let (id, parent, via, caveats, issued_s, expires_s, calls) = row.map_err(map_err)?;
            let (Some(id), Some(via)) = (parse_id(&id), Issue::parse(&via)) else {
                return Err(StoreError::corrupt(&id, "not a token id or issue kind"));
            };
            out.push((
                Issued {
                    id,
                    parent: parent.as_deref().and_then(parse_id),
                    via,
                    caveats,
                    issued_at: to_u64(issued_s),
                    expires_at: expires_s.map(to_u64),
                },
                to_u64(calls),
            ));
        }
        Ok(out)
    }
}
