//! The [`ArtifactBackend`] of a [`PostgresStore`]: spilled results in the
//! shared database, so any host of a fleet serves an artifact any other
//! host kept. The bytes are stored in chunks of [`CHUNK_BYTES`] (one row
//! each), written in the transaction that inserts the artifact, so a
//! reader sees the whole artifact or none of it. The quota check and the
//! write hold one transaction-scoped advisory lock, so hosts writing
//! together cannot pass a cap together.
//!
//! Schema:
//!
//! ```sql
//! CREATE TABLE IF NOT EXISTS toolhost_artifact (
//!     id           TEXT    PRIMARY KEY,
//!     owner_sha256 TEXT    NOT NULL,
//!     expires_at   BIGINT  NOT NULL,
//!     bytes        BIGINT  NOT NULL,
//!     chunks       INTEGER NOT NULL,
//!     meta         TEXT    NOT NULL
//! );
//! CREATE TABLE IF NOT EXISTS toolhost_artifact_chunk (
//!     id   TEXT    NOT NULL REFERENCES toolhost_artifact (id) ON DELETE CASCADE,
//!     seq  INTEGER NOT NULL,
//!     data BYTEA   NOT NULL,
//!     PRIMARY KEY (id, seq)
//! );
//! ```

use std::sync::{Arc, OnceLock};

use super::{map_err, PostgresStore};
use crate::rows::to_i64;
use toolhost::store_error::{StoreError, StoreErrorKind};
use toolhost::tools::artifact::{
    admit, ArtifactBackend, ArtifactError, ArtifactMeta, Quota, Usage,
};

/// Bytes per chunk row.
pub const CHUNK_BYTES: usize = 256 * 1024;

/// Advisory-lock id guarding the tables' creation.
const SCHEMA_LOCK: i64 = 0x746f_6f6c_6172_7466;

/// Advisory-lock id held while the quota is checked and an artifact
/// written.
const QUOTA_LOCK: i64 = 0x746f_6f6c_6172_7471;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS toolhost_artifact (
    id           TEXT    PRIMARY KEY,
    owner_sha256 TEXT    NOT NULL,
    expires_at   BIGINT  NOT NULL,
    bytes        BIGINT  NOT NULL,
    chunks       INTEGER NOT NULL,
    meta         TEXT    NOT NULL
);
CREATE INDEX IF NOT EXISTS toolhost_artifact_by_expiry ON toolhost_artifact (expires_at);
CREATE TABLE IF NOT EXISTS toolhost_artifact_chunk (
    id   TEXT    NOT NULL REFERENCES toolhost_artifact (id) ON DELETE CASCADE,
    seq  INTEGER NOT NULL,
    data BYTEA   NOT NULL,
    PRIMARY KEY (id, seq)
);
";

/// The artifacts of a PostgreSQL store (on the store's connection).
pub struct PgArtifacts {
    store: Arc<PostgresStore>,
    init: OnceLock<()>,
}

fn corrupt(id: &str, message: String) -> ArtifactError {
    ArtifactError::Store(StoreError::Corrupt {
        key: format!("artifact {id}"),
        message,
    })
}

impl PgArtifacts {
    pub fn new(store: Arc<PostgresStore>) -> PgArtifacts {
        PgArtifacts {
            store,
            init: OnceLock::new(),
        }
    }

    /// Runs `f` on the store's connection, the tables created first.
    fn with<T: Send>(
        &self,
        f: impl FnOnce(&mut postgres::Client) -> Result<T, ArtifactError> + Send,
    ) -> Result<T, ArtifactError> {
        if self.init.get().is_none() {
            self.store.create_tables(SCHEMA_LOCK, SCHEMA)?;
            let _ = self.init.set(());
        }
        // An unavailable store is the connection's failure: handed back so
        // the connection is dropped and the next call reconnects.
        self.store.with_client(|client| match f(client) {
            Err(ArtifactError::Store(e)) if e.kind() == StoreErrorKind::Unavailable => Err(e),
            other => Ok(other),
        })?
    }
}

impl ArtifactBackend for PgArtifacts {
    fn put(
        &self,
        id: &str,
        meta: &ArtifactMeta,
        content: &[u8],
        quota: &Quota,
        now: u64,
    ) -> Result<(), ArtifactError> {
        let json = serde_json::to_string(meta).map_err(|e| corrupt(id, e.to_string()))?;
        self.with(|client| {
            let mut tx = client.transaction().map_err(map_err)?;
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&QUOTA_LOCK])
                .map_err(map_err)?;
            let row = tx
                .query_one(
                    "SELECT COALESCE(SUM(bytes), 0)::BIGINT, COUNT(*),
                            COALESCE(SUM(bytes) FILTER (WHERE owner_sha256 = $1), 0)::BIGINT,
                            COUNT(*) FILTER (WHERE owner_sha256 = $1)
                     FROM toolhost_artifact WHERE expires_at > $2",
                    &[&meta.owner_sha256, &to_i64(now)],
                )
                .map_err(map_err)?;
            let n = |i: usize| row.get::<_, i64>(i).max(0) as u64;
            let usage = Usage {
                total_bytes: n(0),
                total_count: n(1),
                token_bytes: n(2),
                token_count: n(3),
            };
            admit(quota, &usage, content.len() as u64)?;
            let chunks: Vec<&[u8]> = content.chunks(CHUNK_BYTES).collect();
            tx.execute(
                "INSERT INTO toolhost_artifact (id, owner_sha256, expires_at, bytes, chunks, meta)
                 VALUES ($1, $2, $3, $4, $5, $6)",
                &[
                    &id,
                    &meta.owner_sha256,
                    &to_i64(meta.expires_at),
                    &to_i64(content.len() as u64),
                    &(chunks.len() as i32),
                    &json,
                ],
            )
            .map_err(map_err)?;
            let insert = tx
                .prepare("INSERT INTO toolhost_artifact_chunk (id, seq, data) VALUES ($1, $2, $3)")
                .map_err(map_err)?;
            for (seq, chunk) in chunks.iter().enumerate() {
                tx.execute(&insert, &[&id, &(seq as i32), chunk])
                    .map_err(map_err)?;
            }
            tx.commit().map_err(map_err)?;
            Ok(())
        })
    }

    fn meta(&self, id: &str) -> Result<Option<ArtifactMeta>, ArtifactError> {
        self.with(|client| {
            let row = client
                .query_opt("SELECT meta FROM toolhost_artifact WHERE id = $1", &[&id])
                .map_err(map_err)?;
            row.map(|r| {
                serde_json::from_str(r.get::<_, &str>(0)).map_err(|e| corrupt(id, e.to_string()))
            })
            .transpose()
        })
    }

    fn content(&self, id: &str) -> Result<Option<Vec<u8>>, ArtifactError> {
        self.with(|client| {
            let mut tx = client
                .build_transaction()
                .read_only(true)
                .start()
                .map_err(map_err)?;
            let Some(head) = tx
                .query_opt(
                    "SELECT bytes, chunks FROM toolhost_artifact WHERE id = $1",
                    &[&id],
                )
                .map_err(map_err)?
            else {
                return Ok(None);
            };
            let (bytes, chunks): (i64, i32) = (head.get(0), head.get(1));
            let mut out = Vec::with_capacity(bytes.max(0) as usize);
            let rows = tx
                .query(
                    "SELECT data FROM toolhost_artifact_chunk WHERE id = $1 ORDER BY seq",
                    &[&id],
                )
                .map_err(map_err)?;
            for r in &rows {
                out.extend_from_slice(r.get::<_, &[u8]>(0));
            }
            tx.commit().map_err(map_err)?;
            if rows.len() != chunks.max(0) as usize || out.len() as i64 != bytes {
                return Err(corrupt(id, "its chunks do not add up".into()));
            }
            Ok(Some(out))
        })
    }

    fn remove(&self, id: &str) -> Result<(), ArtifactError> {
        self.with(|client| {
            client
                .execute("DELETE FROM toolhost_artifact WHERE id = $1", &[&id])
                .map_err(map_err)?;
            Ok(())
        })
    }

    fn sweep(&self, now: u64) -> Result<(), ArtifactError> {
        self.with(|client| {
            client
                .execute(
                    "DELETE FROM toolhost_artifact WHERE expires_at <= $1",
                    &[&to_i64(now)],
                )
                .map_err(map_err)?;
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolhost::tools::artifact::conformance;

    fn backend() -> Arc<dyn ArtifactBackend> {
        let url = std::env::var("TOOLHOST_TEST_POSTGRES")
            .unwrap_or_else(|_| "postgres://toolhost:toolhost@127.0.0.1:5432/toolhost".into());
        let store = PostgresStore::connect(&url, std::time::Duration::from_secs(3600))
            .unwrap_or_else(|e| {
                panic!(
                    "PostgreSQL unreachable at {url}: {e}\n\
                     start it with: export TOOLHOST_TEST_POSTGRES=\"$(bash .ci/postgres.sh)\""
                )
            });
        Arc::new(PgArtifacts::new(Arc::new(store)))
    }

    #[test]
    #[ignore = "needs PostgreSQL: export TOOLHOST_TEST_POSTGRES=\"$(bash .ci/postgres.sh)\", then --ignored (CI does)"]
    fn postgres_artifacts_behave() {
        conformance::suite(backend());
        conformance::one_quota_across_handles(&backend);
    }
}
