//! Locks between hosts that share a PostgreSQL record store: session
//! advisory locks, on a connection the call holds while it runs.
//!
//! Each node of the resource tree has three advisory keys (`x`, `r`, `w`),
//! each a 64-bit hash of the workspace, the node and the byte's name, and the
//! modes map onto them exactly as on the lock file (`toolhost::effects::resource`):
//! `pg_try_advisory_lock_shared` for `rd`, `pg_try_advisory_lock` for `wr`,
//! and "no one else holds it" read from `pg_locks`. One attempt is two
//! statements: take every lock of the plan, then check the other side's
//! bytes; on a conflict `pg_advisory_unlock_all()` drops them and the call
//! tries again after a pause, until its deadline. Nothing ever blocks in
//! the server, so hosts cannot deadlock; a host that dies loses its session
//! and with it its locks.
//!
//! Connections are kept in a small pool; a connection is only returned to it
//! after its locks were released.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use postgres::{Client, Config, NoTls};

use toolhost::effects::resource::{jitter, NodeMode, Plan, SharedHeld, SharedLocks, WaitError};
use toolhost::CancelToken;

const FIRST_PAUSE: Duration = Duration::from_millis(1);
const MAX_PAUSE: Duration = Duration::from_millis(20);
/// Idle connections kept for later calls.
const MAX_IDLE: usize = 8;

const TAKE: &str = "SELECT coalesce(bool_and(CASE WHEN x THEN pg_try_advisory_lock(k) \
     ELSE pg_try_advisory_lock_shared(k) END), true) \
     FROM unnest($1::bigint[], $2::bool[]) AS t(k, x)";

const OTHERS_HOLD: &str = "SELECT EXISTS (SELECT 1 FROM pg_locks \
     WHERE locktype = 'advisory' AND objsubid = 1 AND granted \
     AND pid <> pg_backend_pid() \
     AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) \
     AND ((classid::bigint << 32) | objid::bigint) = ANY($1::bigint[]))";

/// The advisory-lock side of `toolhost::Locks`, shared by every
/// host of one PostgreSQL database.
pub struct PgLocks {
    config: Config,
    idle: Mutex<Vec<Client>>,
}

impl Drop for PgLocks {
    fn drop(&mut self) {
        let idle = std::mem::take(self.idle.get_mut().unwrap_or_else(PoisonError::into_inner));
        crate::postgres::drop_off_runtime(idle);
    }
}

impl std::fmt::Debug for PgLocks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgLocks").finish_non_exhaustive()
    }
}

impl PgLocks {
    /// Locks in the database at `url`; connections are opened when calls
    /// need them.
    pub fn new(url: &str) -> Result<PgLocks, String> {
        let mut config: Config = url
            .parse()
            .map_err(|e| format!("invalid PostgreSQL URL: {e}"))?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(Duration::from_secs(5));
        }
        Ok(PgLocks {
            config,
            idle: Mutex::new(Vec::new()),
        })
    }

    fn client(&self) -> Result<Client, postgres::Error> {
        let pooled = self
            .idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        match pooled {
            Some(c) if !c.is_closed() => Ok(c),
            _ => self.config.connect(NoTls),
        }
    }
}

/// Advisory locks held on one connection; dropping releases them.
pub struct PgHeld {
    client: Option<Client>,
    pool: Arc<PgLocks>,
}

impl std::fmt::Debug for PgHeld {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgHeld").finish_non_exhaustive()
    }
}

impl Drop for PgHeld {
    fn drop(&mut self) {
        if let Some(mut c) = self.client.take() {
            // A connection whose locks could not be released is closed (the
            // server then drops them).
            if c.execute("SELECT pg_advisory_unlock_all()", &[]).is_ok() {
                let mut idle = self
                    .pool
                    .idle
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                if idle.len() < MAX_IDLE {
                    idle.push(c);
                }
            }
        }
    }
}

/// Takes `plan`'s advisory locks, waiting until `deadline`; the flag says
/// whether the first attempt failed (the call waited).
fn acquire(
    pool: &Arc<PgLocks>,
    plan: &Plan,
    deadline: Instant,
    cancel: Option<&CancelToken>,
) -> Result<(PgHeld, bool), WaitError> {
    let start = Instant::now();
    let fail = |e: postgres::Error| WaitError::LockStore {
        message: format!("PostgreSQL advisory locks: {e}"),
    };
    let (take, exclusive, check) = keys(plan);
    let mut client = pool.client().map_err(fail)?;
    let mut pause = FIRST_PAUSE;
    let mut waited = false;
    loop {
        let took: bool = client
            .query_one(TAKE, &[&take, &exclusive])
            .map_err(fail)?
            .get(0);
        let clear = took && {
            let busy: bool = client
                .query_one(OTHERS_HOLD, &[&check])
                .map_err(fail)?
                .get(0);
            !busy
        };
        if clear {
            let held = PgHeld {
                client: Some(client),
                pool: pool.clone(),
            };
            return Ok((held, waited));
        }
        waited = true;
        client
            .execute("SELECT pg_advisory_unlock_all()", &[])
            .map_err(fail)?;
        let now = Instant::now();
        let give_up = if cancel.is_some_and(CancelToken::is_cancelled) {
            Some(WaitError::Cancelled {
                waited: now - start,
            })
        } else if now >= deadline {
            Some(WaitError::Timeout {
                waited: now - start,
            })
        } else {
            None
        };
        if let Some(e) = give_up {
            // It holds nothing now: keep it for the next call.
            drop(PgHeld {
                client: Some(client),
                pool: pool.clone(),
            });
            return Err(e);
        }
        std::thread::sleep(jitter(pause).min(deadline - now));
        pause = (pause * 2).min(MAX_PAUSE);
    }
}

impl SharedHeld for PgHeld {}

impl SharedLocks for PgLocks {
    fn acquire(
        self: Arc<Self>,
        plan: &Plan,
        deadline: Instant,
        cancel: Option<&CancelToken>,
    ) -> Result<(Box<dyn SharedHeld>, bool), WaitError> {
        let (held, waited) = acquire(&self, plan, deadline, cancel)?;
        Ok((Box::new(held), waited))
    }
}

/// The keys to take (with `true` for exclusive) and the keys no one else
/// may hold.
fn keys(plan: &Plan) -> (Vec<i64>, Vec<bool>, Vec<i64>) {
    let (mut take, mut exclusive, mut check) = (Vec::new(), Vec::new(), Vec::new());
    for (node, mode) in plan.nodes() {
        let k = |b: &str| key(node, b);
        let mut add = |key: i64, ex: bool| {
            take.push(key);
            exclusive.push(ex);
        };
        match mode {
            NodeMode::IntentRead => add(k("x"), false),
            NodeMode::IntentWrite => {
                add(k("x"), false);
                add(k("w"), false);
                check.push(k("r"));
            }
            NodeMode::Read => {
                add(k("x"), false);
                add(k("r"), false);
                check.push(k("w"));
            }
            NodeMode::Write => add(k("x"), true),
        }
    }
    (take, exclusive, check)
}

/// A node's advisory key: the node already names its workspace.
fn key(node: &str, byte: &str) -> i64 {
    let mut h = blake3::Hasher::new();
    h.update(b"toolhost/resource/v1\0");
    h.update(node.as_bytes());
    h.update(b"\0");
    h.update(byte.as_bytes());
    i64::from_le_bytes(h.finalize().as_bytes()[..8].try_into().expect("8 bytes"))
}
