//! The embedded idempotency store: one SQLite file shared by every host
//! process on a machine.
//!
//! - Each [`SqliteStore`] owns one connection behind a mutex; several host
//!   processes (or several stores in one process) open the same file, and
//!   SQLite's file locks serialize their writes.
//! - The file is in WAL mode, with a busy timeout (5 s by default) so a
//!   writer waits for another instead of failing.
//! - [`Store::claim`] runs inside `BEGIN IMMEDIATE` (the write lock is taken
//!   before anything is read) and claims with one statement:
//!   `INSERT … ON CONFLICT(key) DO UPDATE … WHERE <the old record has expired>
//!   RETURNING fence`. A row comes back only if this caller created or took
//!   over the record; otherwise the existing record is read under the same
//!   lock and answered (moving an expired lease to in-doubt).
//! - A fence is never reused for a key: a takeover goes above the old
//!   record's fence, and `idempotency_meta` keeps the highest fence of any
//!   deleted record (release, settle not-done, purge), which every new record
//!   starts above. Claims read that floor but never write it, so a claim
//!   writes one row. (Delete records only through the store.)
//! - The file is private to its owner (mode 0600, as the root key): it is
//!   created so, an existing one is narrowed to it, and SQLite gives its
//!   `-wal` and `-shm` files the database's mode (existing ones are
//!   narrowed too).
//! - Times are the host's clock, in unix milliseconds.
//! - Durability: `synchronous=NORMAL` by default, which in WAL mode survives
//!   a crash of any process but may lose the last commits on power loss;
//!   [`Durability::Full`] syncs every commit.
//!
//! Schema (version 1, `PRAGMA user_version`):
//!
//! ```sql
//! CREATE TABLE idempotency (
//!     key            TEXT    PRIMARY KEY NOT NULL,
//!     tool           TEXT    NOT NULL,
//!     args_digest    TEXT    NOT NULL,
//!     state          TEXT    NOT NULL CHECK (state IN ('in_flight', 'completed', 'in_doubt')),
//!     fence          INTEGER NOT NULL,
//!     created_ms     INTEGER NOT NULL,
//!     updated_ms     INTEGER NOT NULL,
//!     lease_until_ms INTEGER,
//!     expires_ms     INTEGER,
//!     observation    BLOB,
//!     reason         TEXT,
//!     CHECK (state <> 'in_flight' OR lease_until_ms IS NOT NULL),
//!     CHECK (state <> 'completed' OR (expires_ms IS NOT NULL AND observation IS NOT NULL))
//! ) STRICT;
//! CREATE INDEX idempotency_by_expiry ON idempotency (expires_ms) WHERE expires_ms IS NOT NULL;
//! CREATE TABLE idempotency_meta (
//!     name  TEXT    PRIMARY KEY NOT NULL,
//!     value INTEGER NOT NULL
//! ) STRICT;  -- one row: ('fence', <highest fence of a deleted record>)
//! ```

mod approval;
mod journal;
mod ledger;

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rusqlite::{
    params, Connection, ErrorCode, OptionalExtension, Transaction, TransactionBehavior,
};

use crate::rows::duration_ms;
use crate::stored::{self, answer_existing, settleable, to_fence, Existing, StoredRow};
use toolhost::effects::idempotency::{DEFAULT_RETENTION, REASON_LEASE_EXPIRED};
use toolhost::{Claim, KeyRecord, Settlement, State, Store, StoreError};

/// Schema version written to `PRAGMA user_version`.
const SCHEMA_VERSION: i64 = 1;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS idempotency (
    key            TEXT    PRIMARY KEY NOT NULL,
    tool           TEXT    NOT NULL,
    args_digest    TEXT    NOT NULL,
    state          TEXT    NOT NULL CHECK (state IN ('in_flight', 'completed', 'in_doubt')),
    fence          INTEGER NOT NULL,
    created_ms     INTEGER NOT NULL,
    updated_ms     INTEGER NOT NULL,
    lease_until_ms INTEGER,
    expires_ms     INTEGER,
    observation    BLOB,
    reason         TEXT,
    CHECK (state <> 'in_flight' OR lease_until_ms IS NOT NULL),
    CHECK (state <> 'completed' OR (expires_ms IS NOT NULL AND observation IS NOT NULL))
) STRICT;
CREATE INDEX IF NOT EXISTS idempotency_by_expiry ON idempotency (expires_ms)
    WHERE expires_ms IS NOT NULL;
CREATE TABLE IF NOT EXISTS idempotency_meta (
    name  TEXT    PRIMARY KEY NOT NULL,
    value INTEGER NOT NULL
) STRICT;
INSERT OR IGNORE INTO idempotency_meta (name, value) VALUES ('fence', 0);
";

/// Columns read into a [`KeyRecord`], in order.
const COLUMNS: &str = "key, tool, args_digest, state, fence, created_ms, updated_ms, \
                       lease_until_ms, expires_ms, observation, reason";

/// Creates the record, or takes over one whose retention has passed (?4 is
/// now). Returns the new fence only when this caller owns the record.
const CLAIM_SQL: &str = "
INSERT INTO idempotency (key, tool, args_digest, state, fence, created_ms, updated_ms,
                         lease_until_ms, expires_ms, observation, reason)
VALUES (?1, ?2, ?3, 'in_flight',
        (SELECT value + 1 FROM idempotency_meta WHERE name = 'fence'),
        ?4, ?4, ?5, NULL, NULL, NULL)
ON CONFLICT (key) DO UPDATE SET
    tool = excluded.tool,
    args_digest = excluded.args_digest,
    state = 'in_flight',
    fence = max(idempotency.fence + 1, excluded.fence),
    created_ms = excluded.created_ms,
    updated_ms = excluded.updated_ms,
    lease_until_ms = excluded.lease_until_ms,
    expires_ms = NULL,
    observation = NULL,
    reason = NULL
WHERE idempotency.state = 'completed' AND idempotency.expires_ms <= excluded.created_ms
RETURNING fence";

/// Raises the fence floor to at least ?1 (the fence of a deleted record).
const RAISE_FLOOR_SQL: &str =
    "UPDATE idempotency_meta SET value = max(value, ?1) WHERE name = 'fence'";

/// Moves in-flight records whose lease ran out to in-doubt (?1 now, ?2
/// reason, ?3 a key or NULL for all).
const EXPIRE_LEASES_SQL: &str = "
UPDATE idempotency SET state = 'in_doubt', reason = ?2, updated_ms = ?1
WHERE state = 'in_flight' AND lease_until_ms <= ?1 AND (?3 IS NULL OR key = ?3)";

/// Condition for a record that has not expired (?1 is now).
const LIVE: &str = "NOT (state = 'completed' AND expires_ms IS NOT NULL AND expires_ms <= ?1)";

/// How hard SQLite syncs commits to disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// `synchronous=NORMAL`: survives process crashes; the last commits may
    /// be lost on power failure. The usual choice for WAL mode.
    #[default]
    Normal,
    /// `synchronous=FULL`: every commit is synced; slower.
    Full,
}

/// Settings for [`SqliteStore::open_with`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqliteOptions {
    /// How long completed records are kept.
    pub retention: Duration,
    /// How long a writer waits for another process's lock before failing.
    pub busy_timeout: Duration,
    /// Commit durability.
    pub durability: Durability,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        SqliteOptions {
            retention: DEFAULT_RETENTION,
            busy_timeout: Duration::from_secs(5),
            durability: Durability::Normal,
        }
    }
}

/// An idempotency [`Store`] in a SQLite file (see the module docs).
#[derive(Debug)]
pub struct SqliteStore {
    conn: Mutex<Connection>,
    path: PathBuf,
    retention: Duration,
    retention_ms: i64,
}

impl SqliteStore {
    /// Opens (creating if needed) the store at `path` with default options
    /// and the given retention.
    ///
    /// # Errors
    ///
    /// [`StoreError::Unavailable`] if the file cannot be opened or created
    /// (missing or unwritable directory), cannot use WAL, or holds a newer
    /// schema; [`StoreError::InvalidArgument`] for a zero retention.
    pub fn open(path: impl AsRef<Path>, retention: Duration) -> Result<SqliteStore, StoreError> {
        SqliteStore::open_with(
            path,
            &SqliteOptions {
                retention,
                ..SqliteOptions::default()
            },
        )
    }

    /// Opens the store at `path` with explicit options.
    ///
    /// # Errors
    ///
    /// As [`SqliteStore::open`].
    pub fn open_with(
        path: impl AsRef<Path>,
        options: &SqliteOptions,
    ) -> Result<SqliteStore, StoreError> {
        let path = path.as_ref().to_path_buf();
        let retention_ms = duration_ms(options.retention, "retention")?;
        let unavailable =
            |e: rusqlite::Error| StoreError::unavailable(format!("{}: {e}", path.display()));
        make_private(&path)
            .map_err(|e| StoreError::unavailable(format!("{}: {e}", path.display())))?;
        let conn = Connection::open(&path).map_err(unavailable)?;
        conn.busy_timeout(options.busy_timeout)
            .map_err(unavailable)?;
        let deadline = std::time::Instant::now() + options.busy_timeout;
        // Switching to WAL needs a moment of exclusive access; another
        // process opening the file at the same time may hold it briefly.
        let mode = loop {
            match conn
                .pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get::<_, String>(0))
            {
                Ok(mode) => break mode,
                Err(e) if is_busy(&e) && std::time::Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(e) => return Err(unavailable(e)),
            }
        };
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::unavailable(format!(
                "{}: cannot use WAL journal mode (got {mode})",
                path.display()
            )));
        }
        let synchronous = match options.durability {
            Durability::Normal => "NORMAL",
            Durability::Full => "FULL",
        };
        conn.pragma_update(None, "synchronous", synchronous)
            .map_err(unavailable)?;
        let mut store = SqliteStore {
            conn: Mutex::new(conn),
            path,
            retention: options.retention,
            retention_ms,
        };
        store.init_schema()?;
        Ok(store)
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How long completed records are kept.
    pub fn retention(&self) -> Duration {
        self.retention
    }

    fn init_schema(&mut self) -> Result<(), StoreError> {
        let path = self.path.display().to_string();
        let conn = self.conn.get_mut().unwrap_or_else(PoisonError::into_inner);
        let unavailable = |e: rusqlite::Error| StoreError::unavailable(format!("{path}: {e}"));
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(unavailable)?;
        let version: i64 = tx
            .pragma_query_value(None, "user_version", |row| row.get(0))
            .map_err(unavailable)?;
        if version > SCHEMA_VERSION {
            return Err(StoreError::unavailable(format!(
                "{path}: schema version {version} is newer than this host's {SCHEMA_VERSION}"
            )));
        }
        tx.execute_batch(SCHEMA).map_err(unavailable)?;
        if version < SCHEMA_VERSION {
            tx.pragma_update(None, "user_version", SCHEMA_VERSION)
                .map_err(unavailable)?;
        }
        tx.commit().map_err(unavailable)
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Connection> {
        // A panic while holding the lock drops (rolls back) any transaction,
        // so the connection is still usable.
        self.conn.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `f` in a `BEGIN IMMEDIATE` transaction (the write lock is taken
    /// before anything is read) with the clock read once the lock is held,
    /// and commits if `f` succeeds; an error rolls everything back.
    pub(crate) fn write<T>(
        &self,
        f: impl FnOnce(&Transaction<'_>, i64) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let mut conn = self.lock();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(map_err)?;
        let value = f(&tx, now_ms())?;
        tx.commit().map_err(map_err)?;
        Ok(value)
    }

    /// Checks an owner's fence after a guarded write touched no row, and
    /// explains why.
    fn owner_failure(
        conn: &Connection,
        key: &str,
        fence: u64,
        operation: &'static str,
    ) -> StoreError {
        let row = conn
            .prepare_cached("SELECT state, fence FROM idempotency WHERE key = ?1")
            .and_then(|mut stmt| {
                stmt.query_row([key], |row| {
                    Ok((row.get::<_, String>(0)?, row.get::<_, i64>(1)?))
                })
                .optional()
            });
        match row {
            Err(e) => map_err(e),
            Ok(current) => stored::owner_failure(key, fence, operation, current),
        }
    }
}

impl Store for SqliteStore {
    fn claim(
        &self,
        key: &str,
        tool: &str,
        args_digest: &str,
        lease: Duration,
    ) -> Result<Claim, StoreError> {
        let lease_ms = duration_ms(lease, "lease")?;
        self.write(|tx, now| {
            let acquired: Option<i64> = tx
                .prepare_cached(CLAIM_SQL)
                .and_then(|mut stmt| {
                    stmt.query_row(
                        params![key, tool, args_digest, now, now + lease_ms],
                        |row| row.get(0),
                    )
                    .optional()
                })
                .map_err(map_err)?;
            if let Some(fence) = acquired {
                return Ok(Claim::Acquired {
                    fence: to_fence(key, fence)?,
                });
            }
            let record = select_record(tx, key, i64::MIN)?
                .ok_or_else(|| StoreError::backend(format!("claim of {key} found no record")))?;
            Ok(match answer_existing(record, args_digest) {
                Existing::Answer(claim) => claim,
                Existing::InFlight { until } if until > from_ms(now) => Claim::InFlight { until },
                Existing::InFlight { .. } => {
                    expire_leases(tx, now, Some(key))?;
                    Claim::InDoubt {
                        reason: REASON_LEASE_EXPIRED.to_owned(),
                    }
                }
            })
        })
    }

    fn complete(&self, key: &str, fence: u64, observation: &str) -> Result<(), StoreError> {
        let conn = self.lock();
        let now = now_ms();
        let changed = conn
            .prepare_cached(
                "UPDATE idempotency
                 SET state = 'completed', observation = ?3, updated_ms = ?4, expires_ms = ?5
                 WHERE key = ?1 AND fence = ?2 AND state IN ('in_flight', 'in_doubt')",
            )
            .and_then(|mut stmt| {
                stmt.execute(params![
                    key,
                    fence_param(fence),
                    observation.as_bytes(),
                    now,
                    now + self.retention_ms
                ])
            })
            .map_err(map_err)?;
        if changed == 1 {
            Ok(())
        } else {
            Err(Self::owner_failure(&conn, key, fence, "complete"))
        }
    }

    fn mark_in_doubt(&self, key: &str, fence: u64, reason: &str) -> Result<(), StoreError> {
        let conn = self.lock();
        let changed = conn
            .prepare_cached(
                "UPDATE idempotency SET state = 'in_doubt', reason = ?3, updated_ms = ?4
                 WHERE key = ?1 AND fence = ?2 AND state IN ('in_flight', 'in_doubt')",
            )
            .and_then(|mut stmt| stmt.execute(params![key, fence_param(fence), reason, now_ms()]))
            .map_err(map_err)?;
        if changed == 1 {
            Ok(())
        } else {
            Err(Self::owner_failure(&conn, key, fence, "mark in doubt"))
        }
    }

    fn release(&self, key: &str, fence: u64) -> Result<(), StoreError> {
        self.write(|tx, _| {
            let deleted: Option<i64> = tx
                .prepare_cached(
                    "DELETE FROM idempotency
                     WHERE key = ?1 AND fence = ?2 AND state IN ('in_flight', 'in_doubt')
                     RETURNING fence",
                )
                .and_then(|mut stmt| {
                    stmt.query_row(params![key, fence_param(fence)], |row| row.get(0))
                        .optional()
                })
                .map_err(map_err)?;
            let Some(deleted) = deleted else {
                return Err(Self::owner_failure(tx, key, fence, "release"));
            };
            raise_floor(tx, deleted)
        })
    }

    fn settle(&self, key: &str, settlement: Settlement) -> Result<(), StoreError> {
        self.write(|tx, now| {
            expire_leases(tx, now, Some(key))?;
            let record = settleable(key, select_record(tx, key, now)?)?;
            match settlement {
                Settlement::Done(observation) => tx.execute(
                    "UPDATE idempotency
                     SET state = 'completed', observation = ?2, updated_ms = ?3, expires_ms = ?4
                     WHERE key = ?1",
                    params![key, observation.as_bytes(), now, now + self.retention_ms],
                ),
                Settlement::NotDone => tx
                    .execute("DELETE FROM idempotency WHERE key = ?1", [key])
                    .and_then(|_| tx.execute(RAISE_FLOOR_SQL, [fence_param(record.fence)])),
            }
            .map(drop)
            .map_err(map_err)
        })
    }

    fn get(&self, key: &str) -> Result<Option<KeyRecord>, StoreError> {
        self.write(|tx, now| {
            expire_leases(tx, now, Some(key))?;
            select_record(tx, key, now)
        })
    }

    fn list(&self, state: Option<State>) -> Result<Vec<KeyRecord>, StoreError> {
        self.write(|tx, now| {
            expire_leases(tx, now, None)?;
            let sql = format!(
                "SELECT {COLUMNS} FROM idempotency WHERE {LIVE} AND (?2 IS NULL OR state = ?2)
                 ORDER BY created_ms, key"
            );
            let mut stmt = tx.prepare(&sql).map_err(map_err)?;
            let rows = stmt
                .query_map(params![now, state.map(State::as_str)], stored_row)
                .map_err(map_err)?;
            let mut records = Vec::new();
            for row in rows {
                records.push(row.map_err(map_err)?.into_record()?);
            }
            Ok(records)
        })
    }

    fn purge_expired(&self) -> Result<u64, StoreError> {
        self.write(|tx, now| {
            tx.execute(
                "UPDATE idempotency_meta SET value = max(value, coalesce(
                     (SELECT max(fence) FROM idempotency
                      WHERE state = 'completed' AND expires_ms <= ?1), 0))
                 WHERE name = 'fence'",
                [now],
            )
            .map_err(map_err)?;
            let deleted = tx
                .execute(
                    "DELETE FROM idempotency WHERE state = 'completed' AND expires_ms <= ?1",
                    [now],
                )
                .map_err(map_err)?;
            Ok(deleted as u64)
        })
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
}

/// Reads the [`COLUMNS`] of a row.
fn stored_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<StoredRow> {
    Ok(StoredRow {
        key: row.get(0)?,
        tool: row.get(1)?,
        args_digest: row.get(2)?,
        state: row.get(3)?,
        fence: row.get(4)?,
        created_at: from_ms(row.get(5)?),
        updated_at: from_ms(row.get(6)?),
        lease_until: row.get::<_, Option<i64>>(7)?.map(from_ms),
        expires_at: row.get::<_, Option<i64>>(8)?.map(from_ms),
        observation: row.get(9)?,
        reason: row.get(10)?,
    })
}

/// The record under `key` unless it expired before `now` (pass `i64::MIN`
/// to read it regardless).
fn select_record(conn: &Connection, key: &str, now: i64) -> Result<Option<KeyRecord>, StoreError> {
    let sql = format!("SELECT {COLUMNS} FROM idempotency WHERE key = ?2 AND {LIVE}");
    let row = conn
        .prepare_cached(&sql)
        .and_then(|mut stmt| stmt.query_row(params![now, key], stored_row).optional())
        .map_err(map_err)?;
    row.map(StoredRow::into_record).transpose()
}

fn expire_leases(conn: &Connection, now: i64, key: Option<&str>) -> Result<usize, StoreError> {
    conn.prepare_cached(EXPIRE_LEASES_SQL)
        .and_then(|mut stmt| stmt.execute(params![now, REASON_LEASE_EXPIRED, key]))
        .map_err(map_err)
}

fn raise_floor(conn: &Connection, fence: i64) -> Result<(), StoreError> {
    conn.prepare_cached(RAISE_FLOOR_SQL)
        .and_then(|mut stmt| stmt.execute([fence]))
        .map(drop)
        .map_err(map_err)
}

/// A fence as an SQL integer; fences beyond `i64::MAX` never exist, so such a
/// value simply matches no row.
fn fence_param(fence: u64) -> i64 {
    i64::try_from(fence).unwrap_or(-1)
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

fn from_ms(ms: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

/// Creates the database file owner-only (0600) if it is missing, and
/// narrows an existing one, with its `-wal` and `-shm` files, to that mode
/// (when this process may):
/// the records hold observations (file contents, tool outputs). SQLite
/// creates the `-wal` and `-shm` files with the database file's mode.
fn make_private(path: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        if path.as_os_str().is_empty() || path.as_os_str() == ":memory:" {
            return Ok(());
        }
        // Create the file private, but never open an existing one: closing
        // any descriptor of a file drops every POSIX lock this process holds
        // on it, and another connection of this process (the journal's, the
        // ledger's) may hold SQLite's locks on it right now. Losing them lets
        // another process write under it: a corrupt database.
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
        {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
        let mut files = vec![path.to_path_buf()];
        for suffix in ["-wal", "-shm"] {
            let mut name = path.as_os_str().to_owned();
            name.push(suffix);
            files.push(name.into());
        }
        for file in files {
            match std::fs::metadata(&file) {
                Ok(meta) if meta.permissions().mode() & 0o077 != 0 => {
                    // Best effort: a file of another owner keeps its mode.
                    let mode = meta.permissions().mode() & 0o700;
                    let _ = std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode));
                }
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
    }
    Ok(())
}

fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
    )
}

/// Failures that mean "the store cannot be used right now" are
/// [`StoreError::Unavailable`]; the rest are [`StoreError::Backend`].
pub(crate) fn map_err(e: rusqlite::Error) -> StoreError {
    match e.sqlite_error_code() {
        Some(
            ErrorCode::DatabaseBusy
            | ErrorCode::DatabaseLocked
            | ErrorCode::CannotOpen
            | ErrorCode::SystemIoFailure
            | ErrorCode::ReadOnly
            | ErrorCode::DiskFull
            | ErrorCode::NotADatabase
            | ErrorCode::DatabaseCorrupt
            | ErrorCode::PermissionDenied
            | ErrorCode::FileLockingProtocolFailed,
        ) => StoreError::unavailable(e),
        _ => StoreError::backend(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conformance;
    use toolhost::effects::idempotency::StoreErrorKind;

    struct Fixture {
        dir: tempfile::TempDir,
    }

    impl Fixture {
        fn new() -> Fixture {
            Fixture {
                dir: tempfile::tempdir().unwrap(),
            }
        }

        fn path(&self) -> PathBuf {
            self.dir.path().join("idempotency.sqlite3")
        }

        fn store(&self, retention: Duration) -> SqliteStore {
            SqliteStore::open(self.path(), retention).unwrap()
        }
    }

    /// Runs one conformance case on a fresh file.
    fn run(case: fn(&conformance::Backend)) {
        let fixture = Fixture::new();
        let backend = conformance::Backend {
            name: "sqlite",
            open: Box::new(move |retention| Box::new(fixture.store(retention)) as Box<dyn Store>),
        };
        case(&backend);
    }

    conformance::suite!(run);

    #[test]
    fn open_in_missing_directory_is_unavailable() {
        let fixture = Fixture::new();
        let path = fixture.dir.path().join("no/such/dir/store.sqlite3");
        let err = SqliteStore::open(&path, DEFAULT_RETENTION).unwrap_err();
        assert_eq!(err.kind(), StoreErrorKind::Unavailable, "{err}");
        assert!(err.to_string().contains("no/such/dir"), "{err}");
    }

    #[test]
    fn open_on_a_directory_is_unavailable() {
        let fixture = Fixture::new();
        let err = SqliteStore::open(fixture.dir.path(), DEFAULT_RETENTION).unwrap_err();
        assert_eq!(err.kind(), StoreErrorKind::Unavailable, "{err}");
    }

    #[test]
    fn open_on_a_file_that_is_not_a_database_is_unavailable() {
        let fixture = Fixture::new();
        std::fs::write(fixture.path(), vec![b'x'; 4096]).unwrap();
        let err = SqliteStore::open(fixture.path(), DEFAULT_RETENTION).unwrap_err();
        assert_eq!(err.kind(), StoreErrorKind::Unavailable, "{err}");
    }

    #[test]
    fn open_in_unwritable_directory_is_unavailable() {
        use std::os::unix::fs::PermissionsExt;
        let fixture = Fixture::new();
        let dir = fixture.dir.path().join("ro");
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o555)).unwrap();
        // As root (CI) mode bits are not enforced; /proc/self is a directory
        // nobody may create files in, so the check runs either way.
        let dir = if std::fs::write(dir.join("probe"), b"").is_ok() {
            std::path::PathBuf::from("/proc/self")
        } else {
            dir
        };
        let err = SqliteStore::open(dir.join("s.sqlite3"), DEFAULT_RETENTION).unwrap_err();
        assert_eq!(err.kind(), StoreErrorKind::Unavailable, "{err}");
    }

    #[test]
    fn zero_retention_is_invalid() {
        let fixture = Fixture::new();
        let err = SqliteStore::open(fixture.path(), Duration::ZERO).unwrap_err();
        assert_eq!(err.kind(), StoreErrorKind::InvalidArgument);
    }

    #[test]
    fn file_uses_wal_and_schema_version() {
        let fixture = Fixture::new();
        let store = fixture.store(DEFAULT_RETENTION);
        assert_eq!(store.path(), fixture.path());
        assert_eq!(store.retention(), DEFAULT_RETENTION);
        let conn = store.lock();
        let mode: String = conn
            .pragma_query_value(None, "journal_mode", |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
        let version: i64 = conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .unwrap();
        assert_eq!(version, SCHEMA_VERSION);
    }

    #[test]
    fn records_and_fence_floor_survive_reopening() {
        let fixture = Fixture::new();
        let lease = Duration::from_secs(60);
        let released = {
            let store = fixture.store(DEFAULT_RETENTION);
            let Claim::Acquired { fence } = store.claim("k", "t", "d", lease).unwrap() else {
                panic!("not acquired")
            };
            store.complete("k", fence, "{\"ok\":true}").unwrap();
            let Claim::Acquired { fence } = store.claim("r", "t", "d", lease).unwrap() else {
                panic!("not acquired")
            };
            store.release("r", fence).unwrap();
            fence
        };
        let store = fixture.store(DEFAULT_RETENTION);
        assert_eq!(
            store.claim("k", "t", "d", lease).unwrap(),
            Claim::Completed {
                observation: "{\"ok\":true}".into()
            }
        );
        // The floor persists: the released key is claimed above its old fence.
        let Claim::Acquired { fence } = store.claim("r", "t", "d", lease).unwrap() else {
            panic!("not acquired")
        };
        assert!(fence > released, "{fence} after {released}");
    }

    #[test]
    fn newer_schema_is_refused() {
        let fixture = Fixture::new();
        drop(fixture.store(DEFAULT_RETENTION));
        let conn = Connection::open(fixture.path()).unwrap();
        conn.pragma_update(None, "user_version", SCHEMA_VERSION + 1)
            .unwrap();
        drop(conn);
        let err = SqliteStore::open(fixture.path(), DEFAULT_RETENTION).unwrap_err();
        assert_eq!(err.kind(), StoreErrorKind::Unavailable);
        assert!(err.to_string().contains("newer"), "{err}");
    }

    #[test]
    fn corrupt_rows_are_reported() {
        let fixture = Fixture::new();
        let store = fixture.store(DEFAULT_RETENTION);
        store
            .lock()
            .execute(
                "INSERT INTO idempotency (key, tool, args_digest, state, fence, created_ms,
                 updated_ms, expires_ms, observation)
                 VALUES ('bad', 't', 'd', 'completed', 1, 0, 0, 1000000000000000, x'ff')",
                [],
            )
            .unwrap();
        let err = store
            .claim("bad", "t", "d", Duration::from_secs(1))
            .unwrap_err();
        assert_eq!(err.kind(), StoreErrorKind::Corrupt, "{err}");
    }

    #[test]
    fn two_connections_see_each_others_records() {
        let fixture = Fixture::new();
        let a = fixture.store(DEFAULT_RETENTION);
        let b = fixture.store(DEFAULT_RETENTION);
        let lease = Duration::from_secs(60);
        let Claim::Acquired { fence } = a.claim("k", "t", "d", lease).unwrap() else {
            panic!("not acquired")
        };
        assert!(matches!(
            b.claim("k", "t", "d", lease).unwrap(),
            Claim::InFlight { .. }
        ));
        a.complete("k", fence, "obs").unwrap();
        assert_eq!(
            b.claim("k", "t", "d", lease).unwrap(),
            Claim::Completed {
                observation: "obs".into()
            }
        );
    }
}
