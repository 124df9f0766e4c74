//! The [`JournalBackend`] of a [`PostgresStore`]: `toolhost_call_journal`
//! in the shared database, so the journals of a fleet of hosts are one
//! table. An append is one transaction; each entry with a logical key
//! takes a transaction-scoped advisory lock on a hash of that key before it
//! counts the key's earlier attempts, so two hosts retrying one logical
//! call get attempts 1 and 2, never two firsts.

use postgres::types::ToSql;

use super::{map_err, PostgresStore};
use crate::rows::journal::{entry_from_row, COLUMNS};
use toolhost::record::journal::{Entry, Filter, JournalBackend};
use toolhost::store_error::StoreError;

/// Advisory-lock id guarding the journal's schema creation.
const SCHEMA_LOCK: i64 = 0x746f_6f6c_6a6f_7572;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS toolhost_call_journal (
    seq             BIGSERIAL PRIMARY KEY,
    call_id         TEXT    NOT NULL,
    trajectory      TEXT,
    turn            BIGINT,
    tool            TEXT    NOT NULL,
    token_chain     TEXT    NOT NULL,
    started_us      BIGINT  NOT NULL,
    ended_us        BIGINT  NOT NULL,
    status          TEXT    NOT NULL,
    error_code      TEXT,
    args_sha256     TEXT    NOT NULL,
    args_summary    TEXT    NOT NULL,
    result_sha256   TEXT,
    output_bytes    BIGINT  NOT NULL,
    logical_key     TEXT,
    attempt         BIGINT  NOT NULL,
    first_try       BOOLEAN NOT NULL,
    idempotency_key TEXT,
    host            TEXT    NOT NULL
);
CREATE INDEX IF NOT EXISTS toolhost_call_journal_by_start ON toolhost_call_journal (started_us);
CREATE INDEX IF NOT EXISTS toolhost_call_journal_by_logical ON toolhost_call_journal (logical_key)
    WHERE logical_key IS NOT NULL;
CREATE INDEX IF NOT EXISTS toolhost_call_journal_by_trajectory
    ON toolhost_call_journal (trajectory, tool);
";

impl JournalBackend for PostgresStore {
    fn init(&self) -> Result<(), StoreError> {
        self.create_tables(SCHEMA_LOCK, SCHEMA)
    }

    fn append(&self, entries: &mut [Entry]) -> Result<(), StoreError> {
        self.with_client(|client| {
            let mut tx = client.transaction().map_err(map_err)?;
            let lock = tx
                .prepare("SELECT pg_advisory_xact_lock(hashtextextended($1, 7))")
                .map_err(map_err)?;
            let count = tx
                .prepare("SELECT count(*) FROM toolhost_call_journal WHERE logical_key = $1")
                .map_err(map_err)?;
            let insert = tx
                .prepare(&format!(
                    "INSERT INTO toolhost_call_journal ({COLUMNS}) VALUES
                     ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)"
                ))
                .map_err(map_err)?;
            for e in entries.iter_mut() {
                let before: i64 = match &e.logical_key {
                    Some(k) => {
                        tx.execute(&lock, &[k]).map_err(map_err)?;
                        tx.query_one(&count, &[k]).map_err(map_err)?.get(0)
                    }
                    None => 0,
                };
                e.attempt = u32::try_from(before + 1).unwrap_or(u32::MAX);
                e.first_try = e.attempt == 1;
                let turn = e.turn.map(|t| i64::try_from(t).unwrap_or(i64::MAX));
                let chain = e.token_chain.join(" ");
                let summary = e.args_summary.to_string();
                let bytes = i64::try_from(e.output_bytes).unwrap_or(i64::MAX);
                let attempt = i64::from(e.attempt);
                let params: [&(dyn ToSql + Sync); 18] = [
                    &e.call_id,
                    &e.trajectory,
                    &turn,
                    &e.tool,
                    &chain,
                    &e.started_at,
                    &e.ended_at,
                    &e.status,
                    &e.error_code,
                    &e.args_sha256,
                    &summary,
                    &e.result_sha256,
                    &bytes,
                    &e.logical_key,
                    &attempt,
                    &e.first_try,
                    &e.idempotency_key,
                    &e.host,
                ];
                tx.execute(&insert, &params).map_err(map_err)?;
            }
            tx.commit().map_err(map_err)
        })
    }

    fn query(&self, filter: &Filter) -> Result<Vec<Entry>, StoreError> {
        let mut sql = format!("SELECT {COLUMNS} FROM toolhost_call_journal WHERE true");
        let mut texts: Vec<(String, String)> = Vec::new();
        if let Some(t) = &filter.tool {
            texts.push(("tool".into(), t.clone()));
        }
        if let Some(t) = &filter.trajectory {
            texts.push(("trajectory".into(), t.clone()));
        }
        if let Some(t) = &filter.token_chain {
            texts.push(("token_chain".into(), t.clone()));
        }
        if let Some(s) = &filter.status {
            texts.push(("status".into(), s.clone()));
        }
        let mut params: Vec<&(dyn ToSql + Sync)> = Vec::new();
        for (i, (column, value)) in texts.iter().enumerate() {
            sql.push_str(&format!(" AND {column} = ${}", i + 1));
            params.push(value);
        }
        let since = filter.since_us;
        if let Some(s) = &since {
            sql.push_str(&format!(" AND started_us >= ${}", params.len() + 1));
            params.push(s);
        }
        sql.push_str(" ORDER BY started_us DESC, seq DESC");
        if let Some(n) = filter.limit {
            sql.push_str(&format!(" LIMIT {n}"));
        }
        self.with_client(|client| {
            let rows = client.query(&sql, &params).map_err(map_err)?;
            let mut out: Vec<Entry> = rows
                .iter()
                .map(|r| {
                    entry_from_row(
                        r.get(0),
                        r.get(1),
                        r.get(2),
                        r.get(3),
                        r.get(4),
                        r.get(5),
                        r.get(6),
                        r.get(7),
                        r.get(8),
                        r.get(9),
                        r.get(10),
                        r.get(11),
                        r.get(12),
                        r.get(13),
                        r.get(14),
                        r.get(16),
                        r.get(17),
                    )
                })
                .collect();
            out.reverse();
            Ok(out)
        })
    }

    fn prune(&self, before_us: i64) -> Result<u64, StoreError> {
        self.with_client(|client| {
            client
                .execute(
                    "DELETE FROM toolhost_call_journal WHERE started_us < $1",
                    &[&before_us],
                )
                .map_err(map_err)
        })
    }
}
