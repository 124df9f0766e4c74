//! The [`ApprovalBackend`] of a [`SqliteStore`]: the `approval` table in
//! the store's file, every write under `BEGIN IMMEDIATE`.

use rusqlite::{params, OptionalExtension};

use super::{map_err, SqliteStore};
use crate::rows::approval::{Row, COLUMNS};
use crate::rows::to_i64;
use toolhost::effects::approval::{Approval, ApprovalBackend, Decided, Take};
use toolhost::store_error::StoreError;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS approval (
    id           TEXT    PRIMARY KEY NOT NULL,
    state        TEXT    NOT NULL CHECK (state IN ('pending', 'approved', 'denied')),
    tool         TEXT    NOT NULL,
    args         TEXT    NOT NULL,
    args_digest  TEXT    NOT NULL,
    targets      TEXT    NOT NULL,
    plan         TEXT    NOT NULL,
    plan_digest  TEXT    NOT NULL,
    capability   TEXT    NOT NULL,
    token_chain  TEXT    NOT NULL,
    requested_by TEXT,
    created_ms   INTEGER NOT NULL,
    expires_ms   INTEGER NOT NULL,
    decided_ms   INTEGER,
    decided_by   TEXT,
    note         TEXT,
    used_by      TEXT
) STRICT;
CREATE INDEX IF NOT EXISTS approval_by_expiry ON approval (expires_ms);
";

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Row> {
    Ok(Row {
        id: r.get(0)?,
        state: r.get(1)?,
        tool: r.get(2)?,
        args: r.get(3)?,
        args_digest: r.get(4)?,
        targets: r.get(5)?,
        plan: r.get(6)?,
        plan_digest: r.get(7)?,
        capability: r.get(8)?,
        token_chain: r.get(9)?,
        requested_by: r.get(10)?,
        created_ms: r.get(11)?,
        expires_ms: r.get(12)?,
        decided_ms: r.get(13)?,
        decided_by: r.get(14)?,
        note: r.get(15)?,
        used_by: r.get(16)?,
    })
}

fn read(tx: &rusqlite::Connection, id: &str) -> Result<Option<Approval>, StoreError> {
    tx.query_row(
        &format!("SELECT {COLUMNS} FROM approval WHERE id = ?1"),
        [id],
        row,
    )
    .optional()
    .map_err(map_err)?
    .map(Row::into_approval)
    .transpose()
}

impl ApprovalBackend for SqliteStore {
    fn init(&self) -> Result<(), StoreError> {
        self.write(|tx, _| tx.execute_batch(SCHEMA).map_err(map_err))
    }

    fn insert(&self, a: &Approval) -> Result<(), StoreError> {
        self.write(|tx, _| {
            tx.execute(
                &format!(
                    "INSERT INTO approval ({COLUMNS}) VALUES
                     (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)"
                ),
                params![
                    a.id,
                    a.state.as_str(),
                    a.tool,
                    a.args,
                    a.args_digest,
                    a.targets.to_string(),
                    a.plan.to_string(),
                    a.plan_digest,
                    a.capability,
                    serde_json::to_string(&a.token_chain).unwrap_or_else(|_| "[]".into()),
                    a.requested_by,
                    to_i64(a.created_ms),
                    to_i64(a.expires_ms),
                    a.decided_ms.map(to_i64),
                    a.decided_by,
                    a.note,
                    a.used_by,
                ],
            )
            .map_err(map_err)?;
            Ok(())
        })
    }

    fn get(&self, id: &str) -> Result<Option<Approval>, StoreError> {
        let conn = self.lock();
        read(&conn, id)
    }

    fn list(&self) -> Result<Vec<Approval>, StoreError> {
        let conn = self.lock();
        let mut stmt = conn
            .prepare(&format!(
                "SELECT {COLUMNS} FROM approval ORDER BY created_ms, id"
            ))
            .map_err(map_err)?;
        let rows = stmt
            .query_map([], row)
            .map_err(map_err)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(map_err)?;
        rows.into_iter().map(Row::into_approval).collect()
    }

    fn decide(
        &self,
        id: &str,
        approve: bool,
        by: &str,
        note: Option<&str>,
        now_ms: u64,
        use_until_ms: u64,
    ) -> Result<Decided, StoreError> {
        let state = if approve { "approved" } else { "denied" };
        self.write(|tx, _| {
            let changed = tx
                .execute(
                    "UPDATE approval SET state = ?2, decided_ms = ?3, decided_by = ?4, note = ?5,
                         expires_ms = CASE WHEN ?2 = 'approved' THEN ?6 ELSE expires_ms END
                     WHERE id = ?1 AND state = 'pending' AND expires_ms > ?3",
                    params![id, state, to_i64(now_ms), by, note, to_i64(use_until_ms)],
                )
                .map_err(map_err)?;
            Ok(match (changed, read(tx, id)?) {
                (_, None) => Decided::NotFound,
                (1, Some(a)) => Decided::Done(a),
                (_, Some(a)) => Decided::NotPending(a),
            })
        })
    }

    fn take(&self, id: &str, key: &str) -> Result<Take, StoreError> {
        self.write(|tx, _| {
            let changed = tx
                .execute(
                    "UPDATE approval SET used_by = ?2
                     WHERE id = ?1 AND state = 'approved' AND (used_by IS NULL OR used_by = ?2)",
                    params![id, key],
                )
                .map_err(map_err)?;
            if changed == 1 {
                return Ok(Take::Taken);
            }
            Ok(match read(tx, id)? {
                Some(Approval {
                    used_by: Some(other),
                    ..
                }) => Take::UsedBy(other),
                _ => Take::NotApproved,
            })
        })
    }

    fn purge(&self, before_ms: u64) -> Result<u64, StoreError> {
        self.write(|tx, _| {
            let n = tx
                .execute(
                    "DELETE FROM approval WHERE expires_ms < ?1",
                    [to_i64(before_ms)],
                )
                .map_err(map_err)?;
            Ok(n as u64)
        })
    }
}
