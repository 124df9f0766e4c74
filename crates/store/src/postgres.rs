//! The shared idempotency store: a PostgreSQL table used by every host that
//! shares work.
//!
//! - One connection per [`PostgresStore`] (the synchronous `postgres`
//!   client) behind a mutex; a connection that was lost is re-opened on the
//!   next call, and a call that cannot reach the server fails with
//!   [`StoreError::Unavailable`] (so the caller does not run).
//! - **Leases, retention and all timestamps use the database's clock**
//!   (`now()`), so hosts with skewed clocks agree on when a lease runs out.
//! - [`Store::claim`] is `INSERT … ON CONFLICT (key) DO NOTHING RETURNING
//!   fence`; if no row comes back the existing record is read and answered.
//!   Only a transition writes, with a guarded `UPDATE … WHERE <still in that
//!   state>`: an expired completed record is taken over (`SET fence =
//!   nextval(…)`), an expired lease is moved to in-doubt. Each step is one
//!   atomic statement; if the record changed between steps the claim starts
//!   over. A replay is two reads and no commit.
//! - Fences come from the sequence `toolhost_idempotency_fence`: they only
//!   grow, across keys and across hosts.
//! - The schema is created if absent, under an advisory lock so that hosts
//!   starting together do not race.
//! - Observations are stored as `BYTEA`, so the replayed text is the stored
//!   bytes whatever they are (PostgreSQL `TEXT` cannot hold NUL).
//!
//! Schema:
//!
//! ```sql
//! CREATE SEQUENCE IF NOT EXISTS toolhost_idempotency_fence;
//! CREATE TABLE IF NOT EXISTS toolhost_idempotency (
//!     key          TEXT        PRIMARY KEY,
//!     tool         TEXT        NOT NULL,
//!     args_digest  TEXT        NOT NULL,
//!     state        TEXT        NOT NULL CHECK (state IN ('in_flight', 'completed', 'in_doubt')),
//!     fence        BIGINT      NOT NULL,
//!     created_at   TIMESTAMPTZ NOT NULL,
//!     updated_at   TIMESTAMPTZ NOT NULL,
//!     lease_until  TIMESTAMPTZ,
//!     expires_at   TIMESTAMPTZ,
//!     observation  BYTEA,
//!     reason       TEXT,
//!     CHECK (state <> 'in_flight' OR lease_until IS NOT NULL),
//!     CHECK (state <> 'completed' OR (expires_at IS NOT NULL AND observation IS NOT NULL))
//! );
//! CREATE INDEX IF NOT EXISTS toolhost_idempotency_by_state
//!     ON toolhost_idempotency (state, created_at);
//! CREATE INDEX IF NOT EXISTS toolhost_idempotency_by_expiry
//!     ON toolhost_idempotency (expires_at) WHERE expires_at IS NOT NULL;
//! ```

mod approval;
pub mod artifact;
pub mod fleet;
mod journal;
mod ledger;

use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use postgres::{Client, Config, NoTls, Row, Statement};

use crate::rows::duration_ms;
use crate::stored::{self, answer_existing, settleable, to_fence, Existing, StoredRow};
use toolhost::effects::idempotency::REASON_LEASE_EXPIRED;
use toolhost::{Claim, KeyRecord, Settlement, State, Store, StoreError};

/// How long [`PostgresStore::connect`] waits for the server when the URL
/// does not say (`connect_timeout=`).
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Advisory-lock id guarding schema creation ("toolhost" in ASCII).
const SCHEMA_LOCK: i64 = 0x746f_6f6c_686f_7374;

const SCHEMA: &str = "
CREATE SEQUENCE IF NOT EXISTS toolhost_idempotency_fence;
CREATE TABLE IF NOT EXISTS toolhost_idempotency (
    key          TEXT        PRIMARY KEY,
    tool         TEXT        NOT NULL,
    args_digest  TEXT        NOT NULL,
    state        TEXT        NOT NULL CHECK (state IN ('in_flight', 'completed', 'in_doubt')),
    fence        BIGINT      NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL,
    updated_at   TIMESTAMPTZ NOT NULL,
    lease_until  TIMESTAMPTZ,
    expires_at   TIMESTAMPTZ,
    observation  BYTEA,
    reason       TEXT,
    CHECK (state <> 'in_flight' OR lease_until IS NOT NULL),
    CHECK (state <> 'completed' OR (expires_at IS NOT NULL AND observation IS NOT NULL))
);
CREATE INDEX IF NOT EXISTS toolhost_idempotency_by_state
    ON toolhost_idempotency (state, created_at);
CREATE INDEX IF NOT EXISTS toolhost_idempotency_by_expiry
    ON toolhost_idempotency (expires_at) WHERE expires_at IS NOT NULL;
";

/// Columns read into a [`KeyRecord`].
const COLUMNS: &str = "key, tool, args_digest, state, fence, created_at, updated_at, \
                       lease_until, expires_at, observation, reason";

/// An idempotency [`Store`] in PostgreSQL (see the module docs).
pub struct PostgresStore {
    config: Config,
    conn: Mutex<Option<Connection>>,
    retention: Duration,
    retention_ms: i64,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The config holds the password: show only where it points.
        f.debug_struct("PostgresStore")
            .field("hosts", &self.config.get_hosts())
            .field("dbname", &self.config.get_dbname())
            .field("retention", &self.retention)
            .finish_non_exhaustive()
    }
}

/// A live connection and its prepared statements.
struct Connection {
    client: Client,
    sql: Statements,
}

struct Statements {
    insert: Statement,
    select: Statement,
    select_for_update: Statement,
    take_over: Statement,
    expire_lease: Statement,
    expire_all_leases: Statement,
    complete: Statement,
    mark_in_doubt: Statement,
    release: Statement,
    owner_row: Statement,
    settle_done: Statement,
    delete: Statement,
    get: Statement,
    list: Statement,
    purge: Statement,
}

impl Statements {
    fn prepare(client: &mut Client) -> Result<Statements, postgres::Error> {
        let live = "NOT (state = 'completed' AND expires_at IS NOT NULL AND expires_at <= now())";
        let select = format!(
            "SELECT {COLUMNS},
                    coalesce(state = 'completed' AND expires_at <= now(), false) AS expired,
                    coalesce(state = 'in_flight' AND lease_until <= now(), false) AS lease_over
             FROM toolhost_idempotency"
        );
        Ok(Statements {
            insert: client.prepare(
                "INSERT INTO toolhost_idempotency
                     (key, tool, args_digest, state, fence, created_at, updated_at, lease_until)
                 VALUES ($1, $2, $3, 'in_flight', nextval('toolhost_idempotency_fence'),
                         now(), now(), now() + $4::bigint * interval '1 millisecond')
                 ON CONFLICT (key) DO NOTHING
                 RETURNING fence",
            )?,
            select: client.prepare(&format!("{select} WHERE key = $1"))?,
            select_for_update: client.prepare(&format!("{select} WHERE key = $1 FOR UPDATE"))?,
            take_over: client.prepare(
                "UPDATE toolhost_idempotency
                 SET tool = $2, args_digest = $3, state = 'in_flight',
                     fence = nextval('toolhost_idempotency_fence'),
                     created_at = now(), updated_at = now(),
                     lease_until = now() + $4::bigint * interval '1 millisecond',
                     expires_at = NULL, observation = NULL, reason = NULL
                 WHERE key = $1 AND state = 'completed' AND expires_at <= now()
                 RETURNING fence",
            )?,
            expire_lease: client.prepare(
                "UPDATE toolhost_idempotency
                 SET state = 'in_doubt', reason = $2, updated_at = now()
                 WHERE key = $1 AND state = 'in_flight' AND lease_until <= now()",
            )?,
            expire_all_leases: client.prepare(
                "UPDATE toolhost_idempotency
                 SET state = 'in_doubt', reason = $1, updated_at = now()
                 WHERE state = 'in_flight' AND lease_until <= now()",
            )?,
            complete: client.prepare(
                "UPDATE toolhost_idempotency
                 SET state = 'completed', observation = $3, updated_at = now(),
                     expires_at = now() + $4::bigint * interval '1 millisecond'
                 WHERE key = $1 AND fence = $2 AND state IN ('in_flight', 'in_doubt')",
            )?,
            mark_in_doubt: client.prepare(
                "UPDATE toolhost_idempotency
                 SET state = 'in_doubt', reason = $3, updated_at = now()
                 WHERE key = $1 AND fence = $2 AND state IN ('in_flight', 'in_doubt')",
            )?,
            release: client.prepare(
                "DELETE FROM toolhost_idempotency
                 WHERE key = $1 AND fence = $2 AND state IN ('in_flight', 'in_doubt')",
            )?,
            owner_row: client
                .prepare("SELECT state, fence FROM toolhost_idempotency WHERE key = $1")?,
            settle_done: client.prepare(
                "UPDATE toolhost_idempotency
                 SET state = 'completed', observation = $2, updated_at = now(),
                     expires_at = now() + $3::bigint * interval '1 millisecond'
                 WHERE key = $1",
            )?,
            delete: client.prepare("DELETE FROM toolhost_idempotency WHERE key = $1")?,
            get: client.prepare(&format!(
                "SELECT {COLUMNS} FROM toolhost_idempotency WHERE key = $1 AND {live}"
            ))?,
            list: client.prepare(&format!(
                "SELECT {COLUMNS} FROM toolhost_idempotency
                 WHERE {live} AND ($1::text IS NULL OR state = $1::text)
                 ORDER BY created_at, key"
            ))?,
            purge: client.prepare(
                "DELETE FROM toolhost_idempotency
                 WHERE state = 'completed' AND expires_at <= now()",
            )?,
        })
    }
}

/// Drops `value` (which holds blocking PostgreSQL clients) where a client
/// may close: a client closes by blocking on a runtime of its own, which
/// tokio refuses on a thread that drives one (a store dropped by an async
/// server at shutdown), so there it is dropped on a thread of its own.
pub(crate) fn drop_off_runtime<T: Send>(value: T) {
    if tokio::runtime::Handle::try_current().is_ok() {
        std::thread::scope(|scope| {
            let _ = scope.spawn(move || drop(value)).join();
        });
    } else {
        drop(value);
    }
}

impl Drop for PostgresStore {
    fn drop(&mut self) {
        let conn = self
            .conn
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        drop_off_runtime(conn);
    }
}

impl PostgresStore {
    /// Connects to the database at `url` (a `postgres://` URL or a
    /// `key=value` string), creates the schema if absent and prepares the
    /// statements. Completed records are kept for `retention`.
    ///
    /// # Errors
    ///
    /// [`StoreError::InvalidArgument`] for a malformed URL or a zero
    /// retention; [`StoreError::Unavailable`] if the server cannot be
    /// reached, refuses the login, or the schema cannot be created.
    pub fn connect(url: &str, retention: Duration) -> Result<PostgresStore, StoreError> {
        let config: Config = url.parse().map_err(|e| StoreError::InvalidArgument {
            message: format!("invalid PostgreSQL URL: {e}"),
        })?;
        PostgresStore::connect_with(config, retention)
    }

    /// Like [`PostgresStore::connect`], with a parsed client configuration.
    /// A missing connect timeout becomes [`DEFAULT_CONNECT_TIMEOUT`].
    ///
    /// # Errors
    ///
    /// As [`PostgresStore::connect`].
    pub fn connect_with(
        mut config: Config,
        retention: Duration,
    ) -> Result<PostgresStore, StoreError> {
        let retention_ms = duration_ms(retention, "retention")?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(DEFAULT_CONNECT_TIMEOUT);
        }
        let store = PostgresStore {
            config,
            conn: Mutex::new(None),
            retention,
            retention_ms,
        };
        // Connect now: an unreachable store is reported at start-up.
        drop(store.connection()?);
        Ok(store)
    }

    /// How long completed records are kept.
    pub fn retention(&self) -> Duration {
        self.retention
    }

    /// Opens a connection and makes sure the schema exists.
    fn open_connection(&self) -> Result<Connection, StoreError> {
        let mut client = self
            .config
            .connect(NoTls)
            .map_err(|e| StoreError::unavailable(format!("cannot connect to PostgreSQL: {e}")))?;
        let init = (|| {
            let mut tx = client.transaction()?;
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK])?;
            tx.batch_execute(SCHEMA)?;
            tx.commit()
        })();
        init.map_err(|e| {
            StoreError::unavailable(format!("cannot create the idempotency schema: {e}"))
        })?;
        let sql = Statements::prepare(&mut client).map_err(map_err)?;
        Ok(Connection { client, sql })
    }

    /// The live connection, re-opened if it was lost.
    fn connection(&self) -> Result<MutexGuard<'_, Option<Connection>>, StoreError> {
        let mut guard = self.conn.lock().unwrap_or_else(PoisonError::into_inner);
        if guard.as_ref().is_none_or(|c| c.client.is_closed()) {
            *guard = None;
            *guard = Some(self.open_connection()?);
        }
        Ok(guard)
    }

    /// Runs `f` on the connection; a failure that shows the connection is
    /// gone drops it so the next call reconnects.
    /// Runs `f` on the connection (as the store's own operations do), for
    /// the capability ledger's tables ([`toolhost::policy::ledger::postgres`]).
    /// Creates the tables of `schema` (statements that are no-ops when the
    /// tables exist), under the advisory lock `lock`, so hosts that start
    /// together do not race on one database.
    pub(crate) fn create_tables(&self, lock: i64, schema: &str) -> Result<(), StoreError> {
        self.with_client(|client| {
            let mut tx = client.transaction().map_err(map_err)?;
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&lock])
                .map_err(map_err)?;
            tx.batch_execute(schema).map_err(map_err)?;
            tx.commit().map_err(map_err)
        })
    }

    pub(crate) fn with_client<T: Send>(
        &self,
        f: impl FnOnce(&mut Client) -> Result<T, StoreError> + Send,
    ) -> Result<T, StoreError> {
        self.with(|client, _| f(client))
    }

    fn with<T: Send>(
        &self,
        f: impl FnOnce(&mut Client, &Statements) -> Result<T, StoreError> + Send,
    ) -> Result<T, StoreError> {
        // The blocking client drives a runtime of its own, which tokio
        // refuses to start inside another: a caller on an async thread (a
        // handler, or a value dropped there at shutdown) has the work done
        // on a thread of its own rather than panic.
        if tokio::runtime::Handle::try_current().is_ok() {
            return std::thread::scope(|scope| {
                scope
                    .spawn(|| self.with_here(f))
                    .join()
                    .unwrap_or_else(|_| {
                        Err(StoreError::unavailable(
                            "the store work failed unexpectedly".to_string(),
                        ))
                    })
            });
        }
        self.with_here(f)
    }

    fn with_here<T>(
        &self,
        f: impl FnOnce(&mut Client, &Statements) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let mut guard = self.connection()?;
        let conn = guard.as_mut().expect("connection() leaves a connection");
        let result = f(&mut conn.client, &conn.sql);
        if matches!(&result, Err(StoreError::Unavailable { .. })) {
            *guard = None;
        }
        result
    }

    fn owner_update(
        &self,
        key: &str,
        fence: u64,
        operation: &'static str,
        run: impl FnOnce(&mut Client, &Statements, i64) -> Result<u64, postgres::Error> + Send,
    ) -> Result<(), StoreError> {
        self.with(|client, sql| {
            let Some(fence_param) = fence_param(fence) else {
                return Err(owner_failure(client, sql, key, fence, operation));
            };
            if run(client, sql, fence_param).map_err(map_err)? == 1 {
                Ok(())
            } else {
                Err(owner_failure(client, sql, key, fence, operation))
            }
        })
    }
}

impl Store for PostgresStore {
    fn claim(
        &self,
        key: &str,
        tool: &str,
        args_digest: &str,
        lease: Duration,
    ) -> Result<Claim, StoreError> {
        let lease_ms = duration_ms(lease, "lease")?;
        self.with(|client, sql| {
            // Every step is one atomic statement; a step that finds the
            // record changed under it (deleted, completed, taken over by
            // another host) starts the claim over.
            for _ in 0..8 {
                if let Some(claim) = try_claim(client, sql, key, tool, args_digest, lease_ms)? {
                    return Ok(claim);
                }
            }
            Err(StoreError::backend(format!(
                "claim of {key} kept losing races with other hosts"
            )))
        })
    }

    fn complete(&self, key: &str, fence: u64, observation: &str) -> Result<(), StoreError> {
        self.owner_update(key, fence, "complete", |client, sql, fence| {
            client.execute(
                &sql.complete,
                &[&key, &fence, &observation.as_bytes(), &self.retention_ms],
            )
        })
    }

    fn mark_in_doubt(&self, key: &str, fence: u64, reason: &str) -> Result<(), StoreError> {
        self.owner_update(key, fence, "mark in doubt", |client, sql, fence| {
            client.execute(&sql.mark_in_doubt, &[&key, &fence, &reason])
        })
    }

    fn release(&self, key: &str, fence: u64) -> Result<(), StoreError> {
        self.owner_update(key, fence, "release", |client, sql, fence| {
            client.execute(&sql.release, &[&key, &fence])
        })
    }

    fn settle(&self, key: &str, settlement: Settlement) -> Result<(), StoreError> {
        self.with(|client, sql| {
            let mut tx = client.transaction().map_err(map_err)?;
            tx.execute(&sql.expire_lease, &[&key, &REASON_LEASE_EXPIRED])
                .map_err(map_err)?;
            let row = tx
                .query_opt(&sql.select_for_update, &[&key])
                .map_err(map_err)?;
            let live = match row {
                Some(row) if !row.try_get::<_, bool>("expired").map_err(map_err)? => Some(row),
                _ => None,
            };
            settleable(key, live.as_ref().map(to_record).transpose()?)?;
            match settlement {
                Settlement::Done(observation) => tx.execute(
                    &sql.settle_done,
                    &[&key, &observation.as_bytes(), &self.retention_ms],
                ),
                Settlement::NotDone => tx.execute(&sql.delete, &[&key]),
            }
            .map_err(map_err)?;
            tx.commit().map_err(map_err)
        })
    }

    fn get(&self, key: &str) -> Result<Option<KeyRecord>, StoreError> {
        self.with(|client, sql| {
            client
                .execute(&sql.expire_lease, &[&key, &REASON_LEASE_EXPIRED])
                .map_err(map_err)?;
            client
                .query_opt(&sql.get, &[&key])
                .map_err(map_err)?
                .map(|row| to_record(&row))
                .transpose()
        })
    }

    fn list(&self, state: Option<State>) -> Result<Vec<KeyRecord>, StoreError> {
        self.with(|client, sql| {
            client
                .execute(&sql.expire_all_leases, &[&REASON_LEASE_EXPIRED])
                .map_err(map_err)?;
            let state = state.map(State::as_str);
            client
                .query(&sql.list, &[&state])
                .map_err(map_err)?
                .iter()
                .map(to_record)
                .collect()
        })
    }

    fn purge_expired(&self) -> Result<u64, StoreError> {
        self.with(|client, sql| client.execute(&sql.purge, &[]).map_err(map_err))
    }

    fn capability_ledger(
        self: std::sync::Arc<Self>,
    ) -> Option<std::sync::Arc<dyn toolhost::policy::budget::BudgetLedger>> {
        Some(std::sync::Arc::new(
            toolhost::policy::ledger::StoreLedger::new(self),
        ))
    }

    fn approvals(
        self: std::sync::Arc<Self>,
    ) -> Option<std::sync::Arc<dyn toolhost::effects::approval::ApprovalBackend>> {
        Some(self)
    }

    fn journal(
        self: std::sync::Arc<Self>,
    ) -> Option<std::sync::Arc<dyn toolhost::record::journal::JournalBackend>> {
        Some(self)
    }

    fn artifacts(
        self: std::sync::Arc<Self>,
    ) -> Option<std::sync::Arc<dyn toolhost::tools::artifact::ArtifactBackend>> {
        Some(std::sync::Arc::new(artifact::PgArtifacts::new(self)))
    }

    fn breaker_counts(
        self: std::sync::Arc<Self>,
    ) -> Option<std::sync::Arc<dyn toolhost::record::breaker::BreakerBackend>> {
        Some(std::sync::Arc::new(fleet::PgFleetState::new(self)))
    }

    fn reveals(
        self: std::sync::Arc<Self>,
    ) -> Option<std::sync::Arc<dyn toolhost::tools::reveal::RevealBackend>> {
        Some(std::sync::Arc::new(fleet::PgFleetState::new(self)))
    }
}

/// One attempt at a claim; `None` when the record changed between steps.
///
/// 1. `INSERT … ON CONFLICT (key) DO NOTHING RETURNING fence`: a row back
///    means a new record, owned by the caller.
/// 2. Otherwise read the record (a snapshot: no lock, no write, so a replay
///    costs no commit) and answer from it, writing only for a transition:
///    an expired completed record is taken over, an expired lease is moved
///    to in-doubt, each by an `UPDATE … WHERE <still in that state>`.
fn try_claim(
    client: &mut Client,
    sql: &Statements,
    key: &str,
    tool: &str,
    args_digest: &str,
    lease_ms: i64,
) -> Result<Option<Claim>, StoreError> {
    if let Some(row) = client
        .query_opt(&sql.insert, &[&key, &tool, &args_digest, &lease_ms])
        .map_err(map_err)?
    {
        let fence = to_fence(key, row.try_get("fence").map_err(map_err)?)?;
        return Ok(Some(Claim::Acquired { fence }));
    }
    let Some(row) = client.query_opt(&sql.select, &[&key]).map_err(map_err)? else {
        return Ok(None);
    };
    if row.try_get::<_, bool>("expired").map_err(map_err)? {
        let taken = client
            .query_opt(&sql.take_over, &[&key, &tool, &args_digest, &lease_ms])
            .map_err(map_err)?;
        return match taken {
            Some(row) => {
                let fence = to_fence(key, row.try_get("fence").map_err(map_err)?)?;
                Ok(Some(Claim::Acquired { fence }))
            }
            None => Ok(None),
        };
    }
    let lease_over: bool = row.try_get("lease_over").map_err(map_err)?;
    Ok(match answer_existing(to_record(&row)?, args_digest) {
        Existing::Answer(claim) => Some(claim),
        Existing::InFlight { .. } if lease_over => {
            let moved = client
                .execute(&sql.expire_lease, &[&key, &REASON_LEASE_EXPIRED])
                .map_err(map_err)?;
            // Not moved: the owner finished meanwhile; read again.
            (moved == 1).then(|| Claim::InDoubt {
                reason: REASON_LEASE_EXPIRED.to_owned(),
            })
        }
        Existing::InFlight { until } => Some(Claim::InFlight { until }),
    })
}

/// Explains why an owner's guarded write touched no row.
fn owner_failure(
    client: &mut Client,
    sql: &Statements,
    key: &str,
    fence: u64,
    operation: &'static str,
) -> StoreError {
    let row = match client.query_opt(&sql.owner_row, &[&key]) {
        Ok(row) => row,
        Err(e) => return map_err(e),
    };
    let current = row
        .map(|row| Ok::<_, postgres::Error>((row.try_get("state")?, row.try_get("fence")?)))
        .transpose();
    match current {
        Ok(current) => stored::owner_failure(key, fence, operation, current),
        Err(e) => map_err(e),
    }
}

/// Reads a row of the [`COLUMNS`] into a [`KeyRecord`].
fn to_record(row: &Row) -> Result<KeyRecord, StoreError> {
    let key: String = row.try_get("key").map_err(map_err)?;
    let corrupt = |e: postgres::Error| StoreError::corrupt(&key, e);
    let state = row.try_get("state").map_err(corrupt)?;
    let fence = row.try_get("fence").map_err(corrupt)?;
    let observation = row.try_get("observation").map_err(corrupt)?;
    StoredRow {
        tool: row.try_get("tool").map_err(corrupt)?,
        args_digest: row.try_get("args_digest").map_err(corrupt)?,
        state,
        fence,
        created_at: row.try_get("created_at").map_err(corrupt)?,
        updated_at: row.try_get("updated_at").map_err(corrupt)?,
        lease_until: row.try_get("lease_until").map_err(corrupt)?,
        expires_at: row.try_get("expires_at").map_err(corrupt)?,
        observation,
        reason: row.try_get("reason").map_err(corrupt)?,
        key,
    }
    .into_record()
}

/// A fence as BIGINT; `None` for one no record can have.
fn fence_param(fence: u64) -> Option<i64> {
    i64::try_from(fence).ok()
}

/// Lost connections, refused logins and server shutdowns are
/// [`StoreError::Unavailable`]; other failures are [`StoreError::Backend`].
pub(crate) fn map_err(e: postgres::Error) -> StoreError {
    if e.is_closed() {
        return StoreError::unavailable(e);
    }
    if let Some(db) = e.as_db_error() {
        let code = db.code().code();
        // 08: connection exception; 28: invalid authorization; 53:
        // insufficient resources; 57P: operator intervention (shutdown).
        let unavailable = ["08", "28", "53", "57P"]
            .iter()
            .any(|class| code.starts_with(class));
        return if unavailable {
            StoreError::unavailable(e)
        } else {
            StoreError::backend(e)
        };
    }
    let io = std::error::Error::source(&e).is_some_and(|s| s.is::<std::io::Error>());
    if io {
        StoreError::unavailable(e)
    } else {
        StoreError::backend(e)
    }
}

#[cfg(test)]
mod tests {
    use std::time::SystemTime;

    use super::*;
    use crate::conformance;
    use toolhost::effects::idempotency::{StoreErrorKind, DEFAULT_RETENTION};

    /// The URL `.ci/postgres.sh` prints.
    const DEFAULT_TEST_URL: &str = "postgres://toolhost:toolhost@127.0.0.1:5432/toolhost";

    fn test_url() -> String {
        std::env::var("TOOLHOST_TEST_POSTGRES").unwrap_or_else(|_| DEFAULT_TEST_URL.to_owned())
    }

    /// Connects to the test server, or fails the test naming how to start
    /// one. The tests that need it are `#[ignore]`d: `cargo test` reports
    /// them as ignored, `.ci/run` runs them with `--ignored`.
    fn connect(retention: Duration) -> PostgresStore {
        let url = test_url();
        match PostgresStore::connect(&url, retention) {
            Ok(store) => {
                // Keep the shared test database small: drop what earlier
                // runs left (keys from conformance::key and the benchmark).
                store
                    .with(|client, _| {
                        client
                            .execute(
                                "DELETE FROM toolhost_idempotency
                                 WHERE (key LIKE 'test-%' OR key LIKE 'bench-%')
                                   AND updated_at < now() - interval '1 hour'",
                                &[],
                            )
                            .map_err(map_err)
                    })
                    .unwrap();
                store
            }
            Err(e) => panic!(
                "PostgreSQL test server unreachable at {url}: {e}
\
                 start it with: export TOOLHOST_TEST_POSTGRES=\"$(bash .ci/postgres.sh)\""
            ),
        }
    }

    fn run(case: fn(&conformance::Backend)) {
        connect(DEFAULT_RETENTION);
        let backend = conformance::Backend {
            name: "postgres",
            open: Box::new(|retention| {
                Box::new(PostgresStore::connect(&test_url(), retention).unwrap()) as Box<dyn Store>
            }),
        };
        case(&backend);
    }

    conformance::suite!(
        run,
        ignore = "needs PostgreSQL: export TOOLHOST_TEST_POSTGRES=\"$(bash .ci/postgres.sh)\", then --ignored (CI does)"
    );

    /// Asserts that connecting to `url` fails with `kind`.
    #[track_caller]
    fn assert_connect_fails(url: &str, kind: StoreErrorKind) {
        let err = PostgresStore::connect(url, DEFAULT_RETENTION).unwrap_err();
        assert_eq!(err.kind(), kind, "{url}: {err}");
    }

    #[test]
    fn unreachable_server_is_unavailable() {
        // Nothing listens on port 1.
        assert_connect_fails(
            "postgres://toolhost:toolhost@127.0.0.1:1/toolhost",
            StoreErrorKind::Unavailable,
        );
    }

    #[test]
    fn unresolvable_host_is_unavailable() {
        assert_connect_fails(
            "postgres://u:p@no-such-host.invalid:5432/db?connect_timeout=2",
            StoreErrorKind::Unavailable,
        );
    }

    #[test]
    fn malformed_url_is_invalid() {
        for url in ["postgres://[::1", "host=localhost port=notaport"] {
            assert_connect_fails(url, StoreErrorKind::InvalidArgument);
        }
    }

    #[test]
    fn zero_retention_is_invalid() {
        let err = PostgresStore::connect(&test_url(), Duration::ZERO).unwrap_err();
        assert_eq!(err.kind(), StoreErrorKind::InvalidArgument);
    }

    #[test]
    #[ignore = "needs PostgreSQL: export TOOLHOST_TEST_POSTGRES=\"$(bash .ci/postgres.sh)\", then --ignored (CI does)"]
    fn wrong_password_is_unavailable() {
        connect(DEFAULT_RETENTION);
        let mut config: Config = test_url().parse().unwrap();
        config.password("definitely-not-the-password");
        let err = PostgresStore::connect_with(config, DEFAULT_RETENTION).unwrap_err();
        assert_eq!(err.kind(), StoreErrorKind::Unavailable, "{err}");
    }

    #[test]
    #[ignore = "needs PostgreSQL: export TOOLHOST_TEST_POSTGRES=\"$(bash .ci/postgres.sh)\", then --ignored (CI does)"]
    fn debug_output_hides_the_password() {
        let store = connect(DEFAULT_RETENTION);
        let shown = format!("{store:?}");
        assert!(shown.contains("PostgresStore"), "{shown}");
        assert!(!shown.contains("password"), "{shown}");
        assert_eq!(store.retention(), DEFAULT_RETENTION);
    }

    #[test]
    #[ignore = "needs PostgreSQL: export TOOLHOST_TEST_POSTGRES=\"$(bash .ci/postgres.sh)\", then --ignored (CI does)"]
    fn reconnects_after_the_connection_is_killed() {
        let store = connect(DEFAULT_RETENTION);
        let k = conformance::key("reconnect");
        let Claim::Acquired { fence } = store.claim(&k, "t", "d", Duration::from_secs(60)).unwrap()
        else {
            panic!("not acquired")
        };
        let pid: i32 = store
            .with(|client, _| {
                client
                    .query_one("SELECT pg_backend_pid()", &[])
                    .map_err(map_err)?
                    .try_get(0)
                    .map_err(map_err)
            })
            .unwrap();
        let mut admin = test_url()
            .parse::<Config>()
            .unwrap()
            .connect(NoTls)
            .unwrap();
        admin
            .execute("SELECT pg_terminate_backend($1)", &[&pid])
            .unwrap();
        // The first call may notice the loss (and must then say Unavailable);
        // the next one reconnects.
        if let Err(e) = store.get(&k) {
            assert_eq!(e.kind(), StoreErrorKind::Unavailable, "{e}");
        }
        store.complete(&k, fence, "after reconnect").unwrap();
        assert_eq!(
            store.claim(&k, "t", "d", Duration::from_secs(60)).unwrap(),
            Claim::Completed {
                observation: "after reconnect".into()
            }
        );
    }

    #[test]
    #[ignore = "needs PostgreSQL: export TOOLHOST_TEST_POSTGRES=\"$(bash .ci/postgres.sh)\", then --ignored (CI does)"]
    fn leases_use_the_database_clock() {
        let store = connect(DEFAULT_RETENTION);
        let k = conformance::key("dbclock");
        store.claim(&k, "t", "d", Duration::from_secs(60)).unwrap();
        let (db_now, until): (SystemTime, SystemTime) = store
            .with(|client, _| {
                let row = client
                    .query_one(
                        "SELECT now(), lease_until FROM toolhost_idempotency WHERE key = $1",
                        &[&k],
                    )
                    .map_err(map_err)?;
                Ok((row.get(0), row.get(1)))
            })
            .unwrap();
        let lease = until.duration_since(db_now).unwrap();
        assert!(
            lease > Duration::from_secs(55) && lease <= Duration::from_secs(60),
            "{lease:?}"
        );
    }
}
