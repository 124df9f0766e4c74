//! Resource keys and the locks that keep conflicting calls apart.
//!
//! Before a call runs, the host derives the **resource keys** it touches,
//! each with an access mode, from what it already knows:
//!
//! - every `x-toolhost-path` argument, as resolved and normalised by the
//!   pipeline (`read` or `write` as the schema declares; a directory covers
//!   everything beneath it);
//! - every network origin granted to a side-effecting tool (`write`: a
//!   request to it may change something there);
//! - every argument its schema annotates `"x-toolhost-resource": "read"` or
//!   `"write"`: a resource the plugin names (a table, a queue, an account),
//!   compared by its exact value.
//!
//! Two calls **conflict** when one writes a key the other reads or writes,
//! paths overlapping by prefix (`src` overlaps `src/a.rs`, not `srcx`).
//! Conflicting calls never run at the same time; calls that do not conflict
//! run in parallel. The serialisation holds at two levels:
//!
//! - **threads of one process** (`table.rs`): a lock table with a condition
//!   variable; a waiter is served in arrival order among the calls it
//!   conflicts with, so a stream of readers cannot starve a writer;
//! - **processes on one machine** (`ofd.rs`): open-file-description byte
//!   locks on one lock file per workspace under the host's lock directory
//!   (see [`Locks::with_dir`]), which the kernel releases when the process
//!   dies, however it dies;
//! - **hosts sharing a store** ([`SharedLocks`], given with
//!   [`Locks::with_shared`]): the PostgreSQL store's advisory locks, keyed by
//!   a hash of the workspace and the node, on a connection the call holds
//!   while it runs (`toolhost-store`).
//!
//! Both levels lock a tree with *intention modes*: a call that reads or
//! writes `a/b/c` also holds an intention on `.`, `a` and `a/b`, so a read of
//! the directory `a` waits for a write to `a/b/c` and the other way round,
//! while writes to `a/x` and `a/y` do not wait for each other (`NodeMode`).
//!
//! A call waits for its locks within its own deadline: the wait is taken
//! from its timeout, and a call whose deadline passes while waiting ends
//! `timeout` with nothing run. The observation reports the wait in
//! `usage.wait_us`.
//!
//! What the keys do not see: two different names of one file (a hard link)
//! are two keys, and effects a tool causes outside its declared paths,
//! origins and resources are not keyed. Plans (dry runs) take no locks: a
//! plan pins its targets' digests, and the call it approves is refused if
//! they changed. Reads that are not keyed against a write still see whole
//! files, because the writing tools rename a complete temporary file over
//! the old one.

pub mod batch;
mod ofd;
mod table;

pub use ofd::jitter;

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::sandbox::CancelToken;

/// What a call does with a resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    Read,
    Write,
}

/// A resource a call touches.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "name")]
pub enum Resource {
    /// A workspace-relative, normalised path (`.` for the root); it covers
    /// everything beneath it.
    Path(String),
    /// A network origin, `scheme://host:port`; `*` stands for any origin.
    Origin(String),
    /// A resource a plugin names in an `x-toolhost-resource` argument.
    Declared(String),
}

/// One resource key of a call.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Key {
    pub resource: Resource,
    pub mode: Mode,
}

impl Key {
    pub fn path(rel: impl Into<String>, mode: Mode) -> Key {
        Key {
            resource: Resource::Path(rel.into()),
            mode,
        }
    }

    pub fn origin(origin: impl Into<String>, mode: Mode) -> Key {
        Key {
            resource: Resource::Origin(origin.into()),
            mode,
        }
    }

    /// Whether the two keys name overlapping resources.
    pub fn overlaps(&self, other: &Key) -> bool {
        match (&self.resource, &other.resource) {
            (Resource::Path(a), Resource::Path(b)) => path_overlap(a, b),
            (Resource::Origin(a), Resource::Origin(b)) => a == b || a == "*" || b == "*",
            (Resource::Declared(a), Resource::Declared(b)) => a == b,
            _ => false,
        }
    }

    /// Whether a call holding `self` and one holding `other` conflict: they
    /// overlap and at least one writes.
    pub fn conflicts(&self, other: &Key) -> bool {
        (self.mode == Mode::Write || other.mode == Mode::Write) && self.overlaps(other)
    }
}

/// Whether two sets of keys conflict (any pair does).
pub fn conflict(a: &[Key], b: &[Key]) -> bool {
    a.iter().any(|x| b.iter().any(|y| x.conflicts(y)))
}

/// Whether one path is the other or lies beneath it, by whole segments.
fn path_overlap(a: &str, b: &str) -> bool {
    let below = |long: &str, short: &str| {
        short == "."
            || long == short
            || (long.len() > short.len()
                && long.starts_with(short)
                && long.as_bytes()[short.len()] == b'/')
    };
    below(a, b) || below(b, a)
}

/// The ancestors of a normalised relative path, root first, without the
/// path itself: `a/b/c` → `.`, `a`, `a/b`.
fn ancestors(rel: &str) -> impl Iterator<Item = &str> {
    let root = (rel != ".").then_some(".");
    root.into_iter()
        .chain(rel.match_indices('/').map(move |(i, _)| &rel[..i]))
}

/// How a call holds one node of the resource tree (multiple-granularity
/// locking). `IS`/`IX`: something beneath is read/written; `S`/`X`: the
/// node and all beneath it is read/written.
///
/// | held \ wanted | IS | IX | S  | X  |
/// |---------------|----|----|----|----|
/// | IS            | ok | ok | ok | –  |
/// | IX            | ok | ok | –  | –  |
/// | S             | ok | –  | ok | –  |
/// | X             | –  | –  | –  | –  |
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum NodeMode {
    IntentRead,
    IntentWrite,
    Read,
    Write,
}

impl NodeMode {
    /// Whether a holder in `self` lets another take `other` (the table above).
    pub fn compatible(self, other: NodeMode) -> bool {
        use NodeMode::*;
        !matches!(
            (self, other),
            (Write, _) | (_, Write) | (IntentWrite, Read) | (Read, IntentWrite)
        )
    }

    /// One call's two needs on one node, as one mode: reading a directory
    /// while writing beneath it (SIX) is held as a write.
    fn join(self, other: NodeMode) -> NodeMode {
        use NodeMode::*;
        match (self.max(other), self.min(other)) {
            (Read, IntentWrite) => Write,
            (hi, _) => hi,
        }
    }
}

/// The nodes a call locks, in a fixed order, each with its mode.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    /// The workspace root, as text (part of every node's identity).
    workspace: String,
    /// `(node, mode)`, sorted by node, one entry per node. A node is the
    /// workspace, a NUL, then `p:` and a relative path or `n:` and an
    /// origin.
    nodes: Vec<(String, NodeMode)>,
}

impl Plan {
    /// The nodes `keys` lock in `workspace`, with their intentions.
    pub fn new(workspace: &Path, keys: &[Key]) -> Plan {
        let ws = workspace.to_string_lossy().into_owned();
        let mut nodes: Vec<(String, NodeMode)> = Vec::new();
        let mut add = |node: std::fmt::Arguments<'_>, intent: NodeMode| {
            let node = format!("{ws}\0{node}");
            match nodes.iter_mut().find(|(n, _)| *n == node) {
                Some((_, held)) => *held = held.join(intent),
                None => nodes.push((node, intent)),
            }
        };
        for key in keys {
            match &key.resource {
                Resource::Path(rel) => {
                    let (inner, whole) = match key.mode {
                        Mode::Read => (NodeMode::IntentRead, NodeMode::Read),
                        Mode::Write => (NodeMode::IntentWrite, NodeMode::Write),
                    };
                    for a in ancestors(rel) {
                        add(format_args!("p:{a}"), inner);
                    }
                    add(format_args!("p:{rel}"), whole);
                }
                Resource::Origin(o) => {
                    // Any origin: an intention on the origin root, and the
                    // whole of it for `*`.
                    let (inner, whole) = match key.mode {
                        Mode::Read => (NodeMode::IntentRead, NodeMode::Read),
                        Mode::Write => (NodeMode::IntentWrite, NodeMode::Write),
                    };
                    if o == "*" {
                        add(format_args!("n:"), whole);
                    } else {
                        add(format_args!("n:"), inner);
                        add(format_args!("n:{o}"), whole);
                    }
                }
                Resource::Declared(name) => add(
                    format_args!("d:{name}"),
                    match key.mode {
                        Mode::Read => NodeMode::Read,
                        Mode::Write => NodeMode::Write,
                    },
                ),
            }
        }
        nodes.sort();
        Plan {
            workspace: ws,
            nodes,
        }
    }

    /// `(node, mode)`, sorted by node, one entry per node.
    pub fn nodes(&self) -> &[(String, NodeMode)] {
        &self.nodes
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Whether a call holding `self` and one holding `other` may run at the
    /// same time.
    pub(crate) fn compatible(&self, other: &Plan) -> bool {
        self.workspace != other.workspace
            || self.nodes.iter().all(|(n, a)| {
                other
                    .nodes
                    .iter()
                    .filter(|(m, _)| m == n)
                    .all(|(_, b)| a.compatible(*b))
            })
    }
}

/// Where a host takes its locks.
#[derive(Debug, Clone, Default)]
pub struct Locks {
    /// The lock directory, for locks between processes; without it, locks
    /// hold between the threads of this process only.
    dir: Option<PathBuf>,
    /// Advisory locks in PostgreSQL, for locks between hosts.
    shared: Option<Arc<dyn SharedLocks>>,
}

static DEFAULT: OnceLock<Locks> = OnceLock::new();

/// Sets the locks of every [`Host`](crate::pipeline::Host) built afterwards
/// in this process (the CLI: `--lock-dir`, and PostgreSQL when it is the
/// record store). The first call wins.
pub fn set_process_default(locks: Locks) {
    let _ = DEFAULT.set(locks);
}

impl Locks {
    /// Locks between the threads of this process only.
    pub fn in_process() -> Locks {
        Locks::default()
    }

    /// Locks between threads and, through lock files in `dir`, between
    /// processes.
    pub fn with_dir(dir: impl Into<PathBuf>) -> Locks {
        Locks {
            dir: Some(dir.into()),
            shared: None,
        }
    }

    /// Also takes `shared`'s locks (for example a PostgreSQL store's
    /// advisory locks), so that hosts on other machines sharing it keep
    /// apart too. They are taken after this process's own.
    pub fn with_shared(mut self, shared: Arc<dyn SharedLocks>) -> Locks {
        self.shared = Some(shared);
        self
    }

    /// The process default ([`set_process_default`]); in-process locks
    /// only when it was not set.
    pub fn process_default() -> Locks {
        DEFAULT.get().cloned().unwrap_or_default()
    }

    /// The lock directory, if locks hold between processes.
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// Takes the locks of `keys` in `workspace`, waiting at most `timeout`
    /// (and not past a cancellation). The locks are held until the returned
    /// value is dropped.
    pub fn acquire(
        &self,
        workspace: &Path,
        keys: &[Key],
        timeout: Duration,
        cancel: Option<&CancelToken>,
    ) -> Result<Held, WaitError> {
        self.acquire_plan(Plan::new(workspace, keys), timeout, cancel)
    }

    pub(crate) fn acquire_plan(
        &self,
        plan: Plan,
        timeout: Duration,
        cancel: Option<&CancelToken>,
    ) -> Result<Held, WaitError> {
        let start = Instant::now();
        if plan.is_empty() {
            return Ok(Held::default());
        }
        let deadline = start + timeout;
        let local = table::acquire(plan, deadline, cancel)?;
        let mut waited = local.waited;
        let file = match &self.dir {
            Some(dir) => {
                let (file, w) = ofd::acquire(dir, local.plan(), deadline, cancel)?;
                waited |= w;
                Some(file)
            }
            None => None,
        };
        let shared = match &self.shared {
            Some(locks) => {
                let (held, w) = locks.clone().acquire(local.plan(), deadline, cancel)?;
                waited |= w;
                Some(held)
            }
            None => None,
        };
        Ok(Held {
            _shared: shared,
            _file: file,
            _local: Some(local),
            // Taking free locks is not waiting: that cost is the call's
            // own (see the benchmark), and reports no wait.
            waited: if waited {
                start.elapsed()
            } else {
                Duration::ZERO
            },
        })
    }
}

/// Locks kept outside this process and shared with other hosts (a record
/// store's advisory locks), in the same modes as the lock table.
pub trait SharedLocks: Send + Sync + std::fmt::Debug {
    /// Takes `plan`'s locks, waiting until `deadline` (and not past a
    /// cancellation); the flag says whether the first attempt failed (the
    /// call waited). Dropping the returned value releases them.
    fn acquire(
        self: Arc<Self>,
        plan: &Plan,
        deadline: Instant,
        cancel: Option<&CancelToken>,
    ) -> Result<(Box<dyn SharedHeld>, bool), WaitError>;
}

/// Shared locks held for one call; dropping releases them.
pub trait SharedHeld: Send + std::fmt::Debug {}

/// Locks a call holds; dropping it releases them.
#[derive(Debug, Default)]
pub struct Held {
    // Fields drop in order: the table goes last, so a thread of this
    // process it wakes does not find the file or advisory locks still ours.
    _shared: Option<Box<dyn SharedHeld>>,
    _file: Option<std::fs::File>,
    _local: Option<table::Guard>,
    waited: Duration,
}

impl Held {
    /// How long the call waited for other calls to release its resources;
    /// zero when they were free.
    pub fn waited(&self) -> Duration {
        self.waited
    }
}

/// Why a call did not get its locks.
#[derive(Debug, thiserror::Error)]
pub enum WaitError {
    #[error("other calls held conflicting resources until the deadline ({waited:?} waited)")]
    Timeout { waited: Duration },
    #[error("the call was cancelled while it waited for its resources")]
    Cancelled { waited: Duration },
    #[error("the resource lock file {path} cannot be used: {source}")]
    LockFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the resource locks cannot be taken: {message}")]
    LockStore { message: String },
}

impl WaitError {
    /// How long the call waited before giving up.
    pub fn waited(&self) -> Duration {
        match self {
            WaitError::Timeout { waited } | WaitError::Cancelled { waited } => *waited,
            WaitError::LockFile { .. } | WaitError::LockStore { .. } => Duration::ZERO,
        }
    }
}

/// Takes the locks of a prepared call (the pipeline's step between 4 and
/// 5): the wait comes off its timeout. A call whose deadline passes while it
/// waits, or that is cancelled, ends `timeout` with nothing run.
pub(crate) fn hold(
    locks: &Locks,
    p: &mut crate::call::Prepared<'_>,
    cancel: Option<&CancelToken>,
) -> Result<Held, Box<crate::observation::Observation>> {
    use crate::observation::{ErrorCode, Observation};
    let keys = keys_of(p);
    if keys.is_empty() {
        return Ok(Held::default());
    }
    let timeout = p.limits.timeout;
    match locks.acquire(&p.workspace_root, &keys, timeout, cancel) {
        Ok(held) => {
            p.limits.timeout = timeout.saturating_sub(held.waited);
            Ok(held)
        }
        Err(e) => {
            let d = &p.tool.descriptor;
            let waited = e.waited();
            let info = match &e {
                WaitError::Timeout { .. } => ErrorCode::Timeout.info(format!(
                    "the call waited {} ms for other calls using the same files or origins and its {} ms deadline passed; nothing ran. Retry when they are done, or give it a longer timeout",
                    waited.as_millis(),
                    timeout.as_millis()
                )),
                WaitError::Cancelled { .. } => ErrorCode::Timeout.info(format!(
                    "the call was cancelled after waiting {} ms for other calls using the same files or origins; nothing ran",
                    waited.as_millis()
                )),
                WaitError::LockFile { .. } | WaitError::LockStore { .. } => ErrorCode::StoreUnavailable
                    .info(format!("{e}; nothing ran")),
            };
            let info = info.with_details(serde_json::json!({
                "waited_for": keys,
            }));
            let mut obs = Observation::not_started(&p.call_id, &d.name, d.side_effect, info);
            obs.usage.wait_us = waited.as_micros() as u64;
            Err(Box::new(obs))
        }
    }
}

impl Held {
    /// Releases the locks and reports the wait in the observation. A
    /// replayed observation stays as it was stored, byte for byte: its usage
    /// is the original call's.
    pub(crate) fn finish(
        self,
        mut obs: crate::observation::Observation,
    ) -> crate::observation::Observation {
        if !obs.effects.replayed {
            obs.usage.wait_us = self.waited.as_micros() as u64;
        }
        drop(self);
        obs
    }
}

/// The keys of a prepared call: its path arguments (already resolved and
/// normalised by the pipeline) and, for a side-effecting tool, its granted
/// origins.
pub(crate) fn keys_of(p: &crate::call::Prepared<'_>) -> Vec<Key> {
    let t = p.tool;
    let mut keys: Vec<Key> = t
        .input
        .path_args(&p.value)
        .into_iter()
        .map(|a| Key::path(a.value, mode_of(a.access)))
        .collect();
    keys.extend(declared(t, &p.value));
    if t.descriptor.side_effect != crate::descriptor::SideEffect::ReadOnly {
        keys.extend(p.net.iter().map(|o| Key::origin(o.clone(), Mode::Write)));
    }
    keys
}

/// The `x-toolhost-resource` arguments of a call.
fn declared(t: &crate::plugin::catalog::Tool, value: &serde_json::Value) -> Vec<Key> {
    t.input
        .resource_args(value)
        .into_iter()
        .map(|a| Key {
            resource: Resource::Declared(a.value.to_string()),
            mode: mode_of(a.access),
        })
        .collect()
}

/// The keys a call would have, worked out from its arguments alone (paths
/// normalised lexically, symbolic links not followed; the tool's declared
/// origins): what a batch orders its items by. Unparsable arguments have no
/// keys (the call fails before it runs).
pub fn declared_keys(tool: &crate::plugin::catalog::Tool, args: &str) -> Vec<Key> {
    let Ok(value) = crate::json::parse_strict(args) else {
        return Vec::new();
    };
    let mut keys: Vec<Key> = tool
        .input
        .path_args(&value)
        .into_iter()
        .filter_map(|a| {
            let rel = crate::paths::RelPath::parse(a.value).ok()?;
            Some(Key::path(rel.as_str(), mode_of(a.access)))
        })
        .collect();
    keys.extend(declared(tool, &value));
    if tool.descriptor.side_effect != crate::descriptor::SideEffect::ReadOnly {
        let hosts = &tool.descriptor.needs.network_hosts;
        if hosts.iter().any(|h| h == crate::sandbox::ANY_ORIGIN) {
            keys.push(Key::origin("*", Mode::Write));
        } else {
            keys.extend(hosts.iter().map(|h| {
                let origin = crate::sandbox::normalize_origin(h).unwrap_or_else(|_| h.clone());
                Key::origin(origin, Mode::Write)
            }));
        }
    }
    keys
}

fn mode_of(a: crate::plugin::schema::PathAccess) -> Mode {
    match a {
        crate::plugin::schema::PathAccess::Read => Mode::Read,
        crate::plugin::schema::PathAccess::Write => Mode::Write,
    }
}

#[cfg(test)]
mod tests;
