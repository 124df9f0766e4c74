//! The [`JournalBackend`] of a [`SqliteStore`]: the `call_journal` table in
//! the store's file. Appends run under `BEGIN IMMEDIATE`, so the attempt
//! ordinals of processes sharing the file are one sequence per logical
//! call.

use rusqlite::{params, params_from_iter, types::Value as Sql};

use super::{map_err, SqliteStore};
use crate::rows::journal::{entry_from_row, COLUMNS};
use toolhost::record::journal::{Entry, Filter, JournalBackend};
use toolhost::store_error::StoreError;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS call_journal (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    call_id         TEXT    NOT NULL,
    trajectory      TEXT,
    turn            INTEGER,
    tool            TEXT    NOT NULL,
    token_chain     TEXT    NOT NULL,
    started_us      INTEGER NOT NULL,
    ended_us        INTEGER NOT NULL,
    status          TEXT    NOT NULL,
    error_code      TEXT,
    args_sha256     TEXT    NOT NULL,
    args_summary    TEXT    NOT NULL,
    result_sha256   TEXT,
    output_bytes    INTEGER NOT NULL,
    logical_key     TEXT,
    attempt         INTEGER NOT NULL,
    first_try       INTEGER NOT NULL,
    idempotency_key TEXT,
    host            TEXT    NOT NULL
) STRICT;
CREATE INDEX IF NOT EXISTS call_journal_by_start ON call_journal (started_us);
CREATE INDEX IF NOT EXISTS call_journal_by_logical ON call_journal (logical_key)
    WHERE logical_key IS NOT NULL;
CREATE INDEX IF NOT EXISTS call_journal_by_trajectory ON call_journal (trajectory, tool);
";

impl JournalBackend for SqliteStore {
    fn init(&self) -> Result<(), StoreError> {
        self.write(|tx, _| tx.execute_batch(SCHEMA).map_err(map_err))
    }

    fn append(&self, entries: &mut [Entry]) -> Result<(), StoreError> {
        self.write(|tx, _| {
            let mut count = tx
                .prepare_cached("SELECT count(*) FROM call_journal WHERE logical_key = ?1")
                .map_err(map_err)?;
            let mut insert = tx
                .prepare_cached(&format!(
                    "INSERT INTO call_journal ({COLUMNS}) VALUES
                     (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18)"
                ))
                .map_err(map_err)?;
            for e in entries.iter_mut() {
                let before: i64 = match &e.logical_key {
                    Some(k) => count.query_row([k], |r| r.get(0)).map_err(map_err)?,
                    None => 0,
                };
                e.attempt = u32::try_from(before + 1).unwrap_or(u32::MAX);
                e.first_try = e.attempt == 1;
                insert
                    .execute(params![
                        e.call_id,
                        e.trajectory,
                        e.turn.map(|t| i64::try_from(t).unwrap_or(i64::MAX)),
                        e.tool,
                        e.token_chain.join(" "),
                        e.started_at,
                        e.ended_at,
                        e.status,
                        e.error_code,
                        e.args_sha256,
                        e.args_summary.to_string(),
                        e.result_sha256,
                        i64::try_from(e.output_bytes).unwrap_or(i64::MAX),
                        e.logical_key,
                        i64::from(e.attempt),
                        e.first_try,
                        e.idempotency_key,
                        e.host,
                    ])
                    .map_err(map_err)?;
            }
            Ok(())
        })
    }

    fn query(&self, filter: &Filter) -> Result<Vec<Entry>, StoreError> {
        let mut sql = format!("SELECT {COLUMNS} FROM call_journal WHERE 1 = 1");
        let mut args: Vec<Sql> = Vec::new();
        let mut add = |clause: &str, v: Sql| {
            args.push(v);
            sql.push_str(&format!(" AND {clause} ?{}", args.len()));
        };
        if let Some(t) = &filter.tool {
            add("tool =", Sql::Text(t.clone()));
        }
        if let Some(t) = &filter.trajectory {
            add("trajectory =", Sql::Text(t.clone()));
        }
        if let Some(t) = &filter.token_chain {
            add("token_chain =", Sql::Text(t.clone()));
        }
        if let Some(s) = filter.since_us {
            add("started_us >=", Sql::Integer(s));
        }
        if let Some(s) = &filter.status {
            add("status =", Sql::Text(s.clone()));
        }
        sql.push_str(" ORDER BY started_us DESC, seq DESC");
        if let Some(n) = filter.limit {
            sql.push_str(&format!(" LIMIT {n}"));
        }
        let conn = self.lock();
        let mut stmt = conn.prepare(&sql).map_err(map_err)?;
        let rows = stmt
            .query_map(params_from_iter(args), |r| {
                Ok(entry_from_row(
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    r.get(5)?,
                    r.get(6)?,
                    r.get(7)?,
                    r.get(8)?,
                    r.get(9)?,
                    r.get(10)?,
                    r.get(11)?,
                    r.get(12)?,
                    r.get(13)?,
                    r.get(14)?,
                    r.get(16)?,
                    r.get(17)?,
                ))
            })
            .map_err(map_err)?;
        let mut out = Vec::new();
        for row in rows {
            out.push(row.map_err(map_err)?);
        }
        out.reverse();
        Ok(out)
    }

    fn prune(&self, before_us: i64) -> Result<u64, StoreError> {
        self.write(|tx, _| {
            tx.execute(
                "DELETE FROM call_journal WHERE started_us < ?1",
                [before_us],
            )
            .map(|n| n as u64)
            .map_err(map_err)
        })
    }
}
