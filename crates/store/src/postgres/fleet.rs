//! Per-conversation state a fleet shares through its PostgreSQL store: the
//! circuit breaker's runs ([`BreakerBackend`]) and the tools revealed to a
//! token or session ([`RevealBackend`]). Every write is one statement
//! (`INSERT … ON CONFLICT DO UPDATE`), atomic across hosts; expiry uses the
//! database's clock.
//!
//! Schema:
//!
//! ```sql
//! CREATE TABLE IF NOT EXISTS toolhost_breaker (
//!     conversation TEXT        NOT NULL,
//!     tool         TEXT        NOT NULL,
//!     code         TEXT        NOT NULL,
//!     count        INTEGER     NOT NULL,
//!     args         TEXT[]      NOT NULL,
//!     updated_at   TIMESTAMPTZ NOT NULL,
//!     PRIMARY KEY (conversation, tool)
//! );
//! CREATE TABLE IF NOT EXISTS toolhost_revealed (
//!     key        TEXT        NOT NULL,
//!     tool       TEXT        NOT NULL,
//!     expires_at TIMESTAMPTZ NOT NULL,
//!     PRIMARY KEY (key, tool)
//! );
//! ```
//!
//! Runs not updated for [`BREAKER_KEEP`] and expired reveals are deleted
//! now and then by the writes.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use super::{map_err, PostgresStore};
use toolhost::record::breaker::{BreakerBackend, StoredRun};
use toolhost::store_error::StoreError;
use toolhost::tools::reveal::RevealBackend;

/// How long a run of failures is kept after its last failure.
pub const BREAKER_KEEP: Duration = Duration::from_secs(24 * 3600);

/// Most argument digests one run keeps.
const MAX_ARGS: i32 = 64;

/// Advisory-lock id guarding the tables' creation.
const SCHEMA_LOCK: i64 = 0x746f_6f6c_666c_7474;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS toolhost_breaker (
    conversation TEXT        NOT NULL,
    tool         TEXT        NOT NULL,
    code         TEXT        NOT NULL,
    count        INTEGER     NOT NULL,
    args         TEXT[]      NOT NULL,
    updated_at   TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (conversation, tool)
);
CREATE INDEX IF NOT EXISTS toolhost_breaker_by_age ON toolhost_breaker (updated_at);
CREATE TABLE IF NOT EXISTS toolhost_revealed (
    key        TEXT        NOT NULL,
    tool       TEXT        NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (key, tool)
);
CREATE INDEX IF NOT EXISTS toolhost_revealed_by_expiry ON toolhost_revealed (expires_at);
";

/// The breaker runs and reveals of a PostgreSQL store (on its connection).
pub struct PgFleetState {
    store: Arc<PostgresStore>,
    init: OnceLock<()>,
}

fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

impl PgFleetState {
    pub fn new(store: Arc<PostgresStore>) -> PgFleetState {
        PgFleetState {
            store,
            init: OnceLock::new(),
        }
    }

    fn with<T: Send>(
        &self,
        f: impl FnOnce(&mut postgres::Client) -> Result<T, StoreError> + Send,
    ) -> Result<T, StoreError> {
        if self.init.get().is_none() {
            self.store.create_tables(SCHEMA_LOCK, SCHEMA)?;
            let _ = self.init.set(());
        }
        self.store.with_client(f)
    }

    /// Deletes old runs and expired reveals, on about one write in 256.
    fn purge_now_and_then(client: &mut postgres::Client) -> Result<(), StoreError> {
        let mut b = [0u8; 1];
        if getrandom::fill(&mut b).is_err() || b[0] != 0 {
            return Ok(());
        }
        client
            .execute(
                "DELETE FROM toolhost_breaker
                 WHERE updated_at < now() - make_interval(secs => $1::BIGINT / 1000.0)",
                &[&ms(BREAKER_KEEP)],
            )
            .map_err(map_err)?;
        client
            .execute(
                "DELETE FROM toolhost_revealed WHERE expires_at <= now()",
                &[],
            )
            .map_err(map_err)?;
        Ok(())
    }
}

impl BreakerBackend for PgFleetState {
    fn run(&self, conversation: &str, tool: &str) -> Result<Option<StoredRun>, StoreError> {
        self.with(|client| {
            let row = client
                .query_opt(
                    "SELECT code, count, args FROM toolhost_breaker
                     WHERE conversation = $1 AND tool = $2",
                    &[&conversation, &tool],
                )
                .map_err(map_err)?;
            Ok(row.map(|r| StoredRun {
                code: r.get(0),
                count: u32::try_from(r.get::<_, i32>(1)).unwrap_or(0),
                args: r.get(2),
            }))
        })
    }

    fn record(
        &self,
        conversation: &str,
        tool: &str,
        failure: Option<(&str, &str)>,
    ) -> Result<u32, StoreError> {
        self.with(|client| {
            let Some((code, digest)) = failure else {
                client
                    .execute(
                        "DELETE FROM toolhost_breaker WHERE conversation = $1 AND tool = $2",
                        &[&conversation, &tool],
                    )
                    .map_err(map_err)?;
                return Ok(0);
            };
            let row = client
                .query_one(
                    "INSERT INTO toolhost_breaker AS b (conversation, tool, code, count, args, updated_at)
                     VALUES ($1, $2, $3, 1, ARRAY[$4::TEXT], now())
                     ON CONFLICT (conversation, tool) DO UPDATE SET
                       count = CASE WHEN b.code = EXCLUDED.code THEN b.count + 1 ELSE 1 END,
                       args = CASE
                         WHEN b.code <> EXCLUDED.code THEN EXCLUDED.args
                         WHEN $4 = ANY (b.args) OR cardinality(b.args) >= $5 THEN b.args
                         ELSE array_append(b.args, $4::TEXT) END,
                       code = EXCLUDED.code,
                       updated_at = now()
                     RETURNING count",
                    &[&conversation, &tool, &code, &digest, &MAX_ARGS],
                )
                .map_err(map_err)?;
            Self::purge_now_and_then(client)?;
            Ok(u32::try_from(row.get::<_, i32>(0)).unwrap_or(0))
        })
    }
}

impl RevealBackend for PgFleetState {
    fn add(&self, key: &str, tools: &[String], keep: Duration) -> Result<bool, StoreError> {
        self.with(|client| {
            // xmax = 0 on the rows this statement inserted (not updated).
            let rows = client
                .query(
                    "INSERT INTO toolhost_revealed AS r (key, tool, expires_at)
                     SELECT $1, t, now() + make_interval(secs => $3::BIGINT / 1000.0)
                     FROM unnest($2::TEXT[]) AS t
                     ON CONFLICT (key, tool) DO UPDATE SET expires_at = EXCLUDED.expires_at
                     RETURNING (xmax = 0) AS fresh, (r.expires_at IS NULL) AS unused",
                    &[&key, &tools, &ms(keep)],
                )
                .map_err(map_err)?;
            // Extend what was shown before, too.
            client
                .execute(
                    "UPDATE toolhost_revealed
                     SET expires_at = now() + make_interval(secs => $2::BIGINT / 1000.0)
                     WHERE key = $1 AND expires_at > now()",
                    &[&key, &ms(keep)],
                )
                .map_err(map_err)?;
            Self::purge_now_and_then(client)?;
            Ok(rows.iter().any(|r| r.get::<_, bool>(0)))
        })
    }

    fn revealed(&self, key: &str) -> Result<Vec<String>, StoreError> {
        self.with(|client| {
            Ok(client
                .query(
                    "SELECT tool FROM toolhost_revealed
                     WHERE key = $1 AND expires_at > now() ORDER BY tool",
                    &[&key],
                )
                .map_err(map_err)?
                .iter()
                .map(|r| r.get(0))
                .collect())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> Arc<PgFleetState> {
        let url = std::env::var("TOOLHOST_TEST_POSTGRES")
            .unwrap_or_else(|_| "postgres://toolhost:toolhost@127.0.0.1:5432/toolhost".into());
        let store = PostgresStore::connect(&url, Duration::from_secs(3600)).unwrap_or_else(|e| {
            panic!(
                "PostgreSQL unreachable at {url}: {e}\n\
                 start it with: export TOOLHOST_TEST_POSTGRES=\"$(bash .ci/postgres.sh)\""
            )
        });
        Arc::new(PgFleetState::new(Arc::new(store)))
    }

    #[test]
    #[ignore = "needs PostgreSQL: export TOOLHOST_TEST_POSTGRES=\"$(bash .ci/postgres.sh)\", then --ignored (CI does)"]
    fn postgres_reveals_behave() {
        toolhost::tools::reveal::conformance(&*store());
    }

    #[test]
    #[ignore = "needs PostgreSQL: export TOOLHOST_TEST_POSTGRES=\"$(bash .ci/postgres.sh)\", then --ignored (CI does)"]
    fn postgres_breaker_counts_behave() {
        toolhost::record::breaker::conformance(store());
    }
}
