//! The [`ApprovalBackend`] of a [`PostgresStore`]: the
//! `toolhost_approval` table of the shared database, so an approval asked
//! for on one host is settled and used on any other. Each decision and
//! each use is one conditional `UPDATE`, atomic across hosts.

use postgres::{GenericClient, Row as PgRow};

use super::{map_err, PostgresStore};
use crate::rows::approval::{Row, COLUMNS};
use crate::rows::to_i64;
use toolhost::effects::approval::{Approval, ApprovalBackend, Decided, Take};
use toolhost::store_error::StoreError;

/// Advisory-lock id guarding the table's creation.
const SCHEMA_LOCK: i64 = 0x746f_6f6c_6170_7076;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS toolhost_approval (
    id           TEXT   PRIMARY KEY,
    state        TEXT   NOT NULL CHECK (state IN ('pending', 'approved', 'denied')),
    tool         TEXT   NOT NULL,
    args         TEXT   NOT NULL,
    args_digest  TEXT   NOT NULL,
    targets      TEXT   NOT NULL,
    plan         TEXT   NOT NULL,
    plan_digest  TEXT   NOT NULL,
    capability   TEXT   NOT NULL,
    token_chain  TEXT   NOT NULL,
    requested_by TEXT,
    created_ms   BIGINT NOT NULL,
    expires_ms   BIGINT NOT NULL,
    decided_ms   BIGINT,
    decided_by   TEXT,
    note         TEXT,
    used_by      TEXT
);
CREATE INDEX IF NOT EXISTS toolhost_approval_by_expiry ON toolhost_approval (expires_ms);
";

fn row(r: &PgRow) -> Row {
    Row {
        id: r.get(0),
        state: r.get(1),
        tool: r.get(2),
        args: r.get(3),
        args_digest: r.get(4),
        targets: r.get(5),
        plan: r.get(6),
        plan_digest: r.get(7),
        capability: r.get(8),
        token_chain: r.get(9),
        requested_by: r.get(10),
        created_ms: r.get(11),
        expires_ms: r.get(12),
        decided_ms: r.get(13),
        decided_by: r.get(14),
        note: r.get(15),
        used_by: r.get(16),
    }
}

fn read(client: &mut impl GenericClient, id: &str) -> Result<Option<Approval>, StoreError> {
    client
        .query_opt(
            &format!("SELECT {COLUMNS} FROM toolhost_approval WHERE id = $1"),
            &[&id],
        )
        .map_err(map_err)?
        .map(|r| row(&r).into_approval())
        .transpose()
}

impl ApprovalBackend for PostgresStore {
    fn init(&self) -> Result<(), StoreError> {
        self.create_tables(SCHEMA_LOCK, SCHEMA)
    }

    fn insert(&self, a: &Approval) -> Result<(), StoreError> {
        let chain = serde_json::to_string(&a.token_chain).unwrap_or_else(|_| "[]".into());
        let (targets, plan) = (a.targets.to_string(), a.plan.to_string());
        self.with_client(|client| {
            client
                .execute(
                    &format!(
                        "INSERT INTO toolhost_approval ({COLUMNS}) VALUES
                         ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)"
                    ),
                    &[
                        &a.id,
                        &a.state.as_str(),
                        &a.tool,
                        &a.args,
                        &a.args_digest,
                        &targets,
                        &plan,
                        &a.plan_digest,
                        &a.capability,
                        &chain,
                        &a.requested_by,
                        &to_i64(a.created_ms),
                        &to_i64(a.expires_ms),
                        &a.decided_ms.map(to_i64),
                        &a.decided_by,
                        &a.note,
                        &a.used_by,
                    ],
                )
                .map_err(map_err)?;
            Ok(())
        })
    }

    fn get(&self, id: &str) -> Result<Option<Approval>, StoreError> {
        self.with_client(|client| read(client, id))
    }

    fn list(&self) -> Result<Vec<Approval>, StoreError> {
        self.with_client(|client| {
            client
                .query(
                    &format!("SELECT {COLUMNS} FROM toolhost_approval ORDER BY created_ms, id"),
                    &[],
                )
                .map_err(map_err)?
                .iter()
                .map(|r| row(r).into_approval())
                .collect()
        })
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
        let (now, until) = (to_i64(now_ms), to_i64(use_until_ms));
        self.with_client(|client| {
            let changed = client
                .execute(
                    "UPDATE toolhost_approval SET state = $2, decided_ms = $3, decided_by = $4,
                         note = $5,
                         expires_ms = CASE WHEN $2 = 'approved' THEN $6 ELSE expires_ms END
                     WHERE id = $1 AND state = 'pending' AND expires_ms > $3",
                    &[&id, &state, &now, &by, &note, &until],
                )
                .map_err(map_err)?;
            Ok(match (changed, read(client, id)?) {
                (_, None) => Decided::NotFound,
                (1, Some(a)) => Decided::Done(a),
                (_, Some(a)) => Decided::NotPending(a),
            })
        })
    }

    fn take(&self, id: &str, key: &str) -> Result<Take, StoreError> {
        self.with_client(|client| {
            let changed = client
                .execute(
                    "UPDATE toolhost_approval SET used_by = $2
                     WHERE id = $1 AND state = 'approved' AND (used_by IS NULL OR used_by = $2)",
                    &[&id, &key],
                )
                .map_err(map_err)?;
            if changed == 1 {
                return Ok(Take::Taken);
            }
            Ok(match read(client, id)? {
                Some(Approval {
                    used_by: Some(other),
                    ..
                }) => Take::UsedBy(other),
                _ => Take::NotApproved,
            })
        })
    }

    fn purge(&self, before_ms: u64) -> Result<u64, StoreError> {
        self.with_client(|client| {
            client
                .execute(
                    "DELETE FROM toolhost_approval WHERE expires_ms < $1",
                    &[&to_i64(before_ms)],
                )
                .map_err(map_err)
        })
    }
}
