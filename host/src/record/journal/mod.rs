//! The call journal: one entry per call, in the record store.
//!
//! Every call the host answers — read-only or side-effecting, run or
//! rejected before it ran — appends one [`Entry`] (the audit
//! fields): who called (`trajectory`, `turn`, `call_id`, the token and its
//! parent chain), when (`started_at`, `ended_at`, RFC 3339 with µs), what
//! (`tool`, `args_sha256` of the canonical arguments and an
//! [args summary](summarize_args) that holds paths and sizes, never
//! content), how it ended (`status`, `error_code`, `result_sha256`,
//! `output_bytes`) and which try it was: `attempt` is the retry ordinal of
//! the logical call (the same trajectory, turn and call id, or the same
//! idempotency key), `first_try` is `attempt == 1`.
//!
//! # Off the hot path
//!
//! The call path only copies what the entry needs ([`Pending`]) into a
//! queue, waking the writer thread only for the first call of a batch. The
//! writer turns pending calls into entries (hashing, summarizing,
//! redacting) and appends them in batches, one transaction per batch,
//! [`LINGER`] after the first one queued. The attempt
//! ordinal is assigned in that transaction (SQLite's write lock, a
//! PostgreSQL advisory lock per logical call), so hosts sharing a store
//! count one sequence per logical call.
//!
//! No entry of a call that ran is dropped: a batch the store refuses stays
//! queued and is tried again ([`RETRY_EVERY`]); [`Journal::flush`] waits
//! for everything queued so far, and dropping the last handle flushes and
//! joins the writer (the CLI does so before it exits).
//!
//! The bound on what a crash loses: the entry of a call that may have
//! acted (any level but read-only) is written before its answer leaves the
//! host ([`Journal::flush`] right after [`Journal::append`], in
//! [`crate::record`]; calls finishing together share the transaction).
//! Only read-only calls' entries wait for a batch, so a process killed by
//! `SIGKILL` loses at most the entries of the read-only calls it answered
//! in the last [`LINGER`] (plus, while the store refuses writes, those
//! kept for a retry).
//!
//! # Retention
//!
//! Entries older than the journal's retention are deleted by the writer
//! (at start and hourly) and by `toolhost prune`; `None` keeps them.
//!
//! Tables (created on first use; `toolhost_`-prefixed in PostgreSQL):
//!
//! ```sql
//! call_journal (seq, call_id, trajectory, turn, tool, token_id, token_chain,
//!               started_us, ended_us, status, error_code, args_sha256,
//!               args_summary, result_sha256, output_bytes, logical_key,
//!               attempt, first_try, idempotency_key, host)
//! ```

pub mod stats;

use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use crate::plugin::catalog::Tool;
use crate::store_error::StoreError;

/// Longest a queued entry waits for others to share its transaction.
pub const LINGER: Duration = Duration::from_millis(50);

/// How long the writer waits before retrying a batch the store refused.
pub const RETRY_EVERY: Duration = Duration::from_secs(1);

/// How many more times a closing writer tries a refused batch.
const FINAL_TRIES: usize = 5;

/// How often the writer deletes entries past the retention.
const PRUNE_EVERY: Duration = Duration::from_secs(3600);

/// Most entries one transaction appends.
const MAX_BATCH: usize = 512;

/// Longest string of an args summary (a path), in bytes.
const MAX_SUMMARY_STRING: usize = 256;

/// Most members an args summary lists.
const MAX_SUMMARY_MEMBERS: usize = 32;

/// One journaled call.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Entry {
    pub call_id: String,
    pub trajectory: Option<String>,
    pub turn: Option<u64>,
    pub tool: String,
    /// Id of the capability token the call ran under (hex).
    pub token_id: Option<String>,
    /// Its chain, oldest first (the token itself last).
    pub token_chain: Vec<String>,
    /// Unix microseconds.
    #[serde(serialize_with = "rfc3339")]
    pub started_at: i64,
    #[serde(serialize_with = "rfc3339")]
    pub ended_at: i64,
    pub status: String,
    pub error_code: Option<String>,
    /// SHA-256 of the canonical arguments (of the raw text when they are
    /// not JSON).
    pub args_sha256: String,
    /// Paths and sizes, never content ([`summarize_args`]).
    pub args_summary: Value,
    /// SHA-256 of the canonical output (the result's version).
    pub result_sha256: Option<String>,
    pub output_bytes: u64,
    /// The retry ordinal of this logical call (1 for the first try).
    pub attempt: u32,
    pub first_try: bool,
    pub idempotency_key: Option<String>,
    /// The machine that ran the call.
    pub host: String,
    /// What names the logical call: the same key, the same call.
    #[serde(skip)]
    pub logical_key: Option<String>,
}

impl Entry {
    /// How long the call took.
    pub fn duration_us(&self) -> i64 {
        (self.ended_at - self.started_at).max(0)
    }
}

/// Unix microseconds as RFC 3339 with microseconds, UTC.
pub fn format_us(us: i64) -> String {
    chrono::DateTime::from_timestamp_micros(us)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Micros, true))
        .unwrap_or_else(|| us.to_string())
}

fn rfc3339<S: serde::Serializer>(us: &i64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format_us(*us))
}

/// Which entries to read.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub tool: Option<String>,
    pub trajectory: Option<String>,
    /// Only calls made with exactly this token chain (its ids, oldest
    /// first, separated by one space).
    pub token_chain: Option<String>,
    /// Only calls started at or after this (unix µs).
    pub since_us: Option<i64>,
    pub status: Option<String>,
    /// The newest this many (all when `None`), returned oldest first.
    pub limit: Option<usize>,
}

/// One database's side of the journal. Each method is atomic.
pub trait JournalBackend: Send + Sync {
    /// Creates the table if absent.
    fn init(&self) -> Result<(), StoreError>;
    /// Appends the entries in order, in one transaction, setting each one's
    /// `attempt` and `first_try` from the entries already journaled under
    /// its logical key.
    fn append(&self, entries: &mut [Entry]) -> Result<(), StoreError>;
    /// Entries matching `filter`, by start time, oldest first.
    fn query(&self, filter: &Filter) -> Result<Vec<Entry>, StoreError>;
    /// Deletes entries started before `before_us`; returns how many.
    fn prune(&self, before_us: i64) -> Result<u64, StoreError>;
}

/// What the call path hands the journal: copies, no work.
pub struct Pending {
    pub call_id: String,
    pub trajectory: Option<String>,
    pub turn: Option<u64>,
    pub logical_key: Option<String>,
    pub tool: String,
    /// The tool called, when it is in the catalog (its schema finds the
    /// path arguments for the summary).
    pub tool_ref: Option<Arc<Tool>>,
    pub token_chain: Vec<String>,
    pub started_us: i64,
    pub ended_us: i64,
    pub status: &'static str,
    pub error_code: Option<String>,
    /// The argument text as the caller sent it.
    pub args: String,
    /// Whether the arguments passed validation (else only their size is
    /// kept).
    pub args_valid: bool,
    /// The output of an `ok` call, for `result_sha256`.
    pub output: Option<ResultOutput>,
    pub output_bytes: u64,
    pub idempotency_key: Option<String>,
    /// The questions the person answered for the tool: key and the
    /// SHA-256 of the answer (kept in the summary as `questions`).
    pub questions: Vec<(String, String)>,
}

/// A call's output as the journal gets it: the JSON text the tool wrote
/// when the output is exactly its parse (one copy of the bytes on the call
/// path; the journal's thread parses it), else a copy of the value.
#[derive(Debug, Clone)]
pub enum ResultOutput {
    /// The output's JSON text.
    Text(String),
    /// The output itself.
    Value(Value),
}

impl ResultOutput {
    /// Lowercase hex SHA-256 of the canonical output (of its compact text
    /// when it cannot be canonicalized, as a number beyond ±2^53).
    pub fn sha256(&self) -> String {
        let parsed;
        let value = match self {
            ResultOutput::Value(v) => v,
            // Read and hashed in one pass where that is certain to give
            // the same hash (see `canonical::text`), else parsed first.
            ResultOutput::Text(text) => match crate::json::canonical::canonical_sha256_text(text) {
                Some(digest) => return hex::encode(digest),
                None => match serde_json::from_str::<Value>(text) {
                    Ok(v) => {
                        parsed = v;
                        &parsed
                    }
                    Err(_) => return hex::encode(Sha256::digest(text.as_bytes())),
                },
            },
        };
        let digest = crate::json::canonical::canonical_sha256(value)
            .unwrap_or_else(|_| Sha256::digest(value.to_string().as_bytes()).into());
        hex::encode(digest)
    }
}

/// Unix microseconds of `t`.
pub fn unix_us(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

/// Lowercase hex SHA-256 of the canonical form of `args` (of the text
/// itself when it is not JSON).
pub fn args_sha256(args: &str) -> String {
    let canonical = serde_json::from_str::<Value>(args)
        .ok()
        .and_then(|v| crate::json::canonical::canonicalize(&v).ok());
    let bytes = canonical.as_deref().unwrap_or(args).as_bytes();
    hex::encode(Sha256::digest(bytes))
}

/// A summary of the arguments that holds no content: for valid arguments,
/// each top-level member as its path (for a path argument, secrets
/// redacted, clipped), number, boolean or null, or as its type and size
/// (`"<string, 12 bytes>"`, `"<array, 3 items>"`); for arguments that were
/// refused, only their size.
pub fn summarize_args(args: &str, tool: Option<&Tool>, valid: bool) -> Value {
    let mut out = Map::new();
    out.insert("bytes".into(), json!(args.len()));
    let value = match (valid, serde_json::from_str::<Value>(args)) {
        (true, Ok(v)) => v,
        _ => return Value::Object(out),
    };
    let paths: Vec<String> = tool
        .map(|t| {
            t.input
                .path_args(&value)
                .into_iter()
                .map(|a| a.pointer)
                .collect()
        })
        .unwrap_or_default();
    let Value::Object(members) = &value else {
        return Value::Object(out);
    };
    let mut summary = Map::new();
    for (name, v) in members.iter().take(MAX_SUMMARY_MEMBERS) {
        let pointer = format!("/{}", name.replace('~', "~0").replace('/', "~1"));
        let s = match v {
            Value::String(s) if paths.contains(&pointer) => {
                let (clean, _) = crate::redact::redact_text(s, "");
                Value::String(crate::text::clip_bytes(&clean, MAX_SUMMARY_STRING).to_string())
            }
            Value::String(s) => json!(format!("<string, {} bytes>", s.len())),
            Value::Array(a) => json!(format!("<array, {} items>", a.len())),
            Value::Object(o) => json!(format!("<object, {} members>", o.len())),
            other => other.clone(),
        };
        summary.insert(clip_name(name), s);
    }
    if members.len() > MAX_SUMMARY_MEMBERS {
        out.insert("members".into(), json!(members.len()));
    }
    out.insert("args".into(), Value::Object(summary));
    Value::Object(out)
}

fn clip_name(name: &str) -> String {
    crate::text::clip_bytes(name, 64).to_string()
}

/// The variable that names this host when several run on one machine.
pub const HOST_NAME_ENV: &str = "TOOLHOST_HOST_NAME";

/// This host's name, for the `host` column: `TOOLHOST_HOST_NAME` when
/// set (several hosts on one machine), else the machine's name.
pub fn host_name() -> String {
    if let Some(name) = std::env::var(HOST_NAME_ENV)
        .ok()
        .map(|n| n.trim().chars().take(64).collect::<String>())
        .filter(|n| !n.is_empty())
    {
        return name;
    }
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname writes at most
    // that many bytes.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "unknown".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

impl Pending {
    /// The entry, with the work the call path left out: hashes, the args
    /// summary. `attempt` is set when it is appended.
    pub fn into_entry(self, host: &str) -> Entry {
        let args_sha256 = args_sha256(&self.args);
        let mut args_summary =
            summarize_args(&self.args, self.tool_ref.as_deref(), self.args_valid);
        if let (false, Value::Object(summary)) = (self.questions.is_empty(), &mut args_summary) {
            let asked = self
                .questions
                .iter()
                .map(|(key, answer)| json!({"key": key, "answer_sha256": answer}));
            summary.insert("questions".into(), Value::Array(asked.collect()));
        }
        let result_sha256 = self.output.as_ref().map(ResultOutput::sha256);
        Entry {
            call_id: self.call_id,
            trajectory: self.trajectory,
            turn: self.turn,
            tool: self.tool,
            token_id: self.token_chain.last().cloned(),
            token_chain: self.token_chain,
            started_at: self.started_us,
            ended_at: self.ended_us,
            status: self.status.to_string(),
            error_code: self.error_code,
            args_sha256,
            args_summary,
            result_sha256,
            output_bytes: self.output_bytes,
            attempt: 1,
            first_try: true,
            idempotency_key: self.idempotency_key,
            host: host.to_string(),
            logical_key: self.logical_key,
        }
    }
}

/// What the call path and the writer share.
#[derive(Default)]
struct Queue {
    calls: Vec<Pending>,
    flushes: Vec<mpsc::SyncSender<()>>,
    closing: bool,
    /// The writer waits for a first call (and must be woken for it).
    idle: bool,
}

/// Hooks run by the writer for each entry it appended (the metrics'
/// first-try counters).
pub type OnAppend = Box<dyn Fn(&Entry) + Send + Sync>;

/// The journal: a handle on the writer thread (cheap to clone).
#[derive(Clone)]
pub struct Journal {
    inner: Arc<Inner>,
}

struct Shared {
    queue: Mutex<Queue>,
    wake: Condvar,
}

struct Inner {
    shared: Arc<Shared>,
    backend: Arc<dyn JournalBackend>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl std::fmt::Debug for Journal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Journal").finish_non_exhaustive()
    }
}

/// Settings of a [`Journal`].
pub struct JournalOptions {
    /// Entries older than this are deleted; `None` keeps them.
    pub retention: Option<Duration>,
    /// The `host` column (default: this machine's name).
    pub host: String,
    /// Called by the writer for each appended entry.
    pub on_append: Option<OnAppend>,
}

impl Default for JournalOptions {
    fn default() -> Self {
        JournalOptions {
            retention: None,
            host: host_name(),
            on_append: None,
        }
    }
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Journal {
    /// Starts a writer over `backend` (creating its table first).
    ///
    /// # Errors
    ///
    /// The store's, when the table cannot be created.
    pub fn start(
        backend: Arc<dyn JournalBackend>,
        options: JournalOptions,
    ) -> Result<Journal, StoreError> {
        backend.init()?;
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue::default()),
            wake: Condvar::new(),
        });
        let writer = Writer {
            backend: backend.clone(),
            options,
            queue: Vec::new(),
            pruned: None,
        };
        let for_writer = shared.clone();
        let thread = std::thread::Builder::new()
            .name("toolhost-journal".into())
            .spawn(move || writer.run(&for_writer))
            .map_err(|e| StoreError::unavailable(format!("starting the journal writer: {e}")))?;
        Ok(Journal {
            inner: Arc::new(Inner {
                shared,
                backend,
                thread: Mutex::new(Some(thread)),
            }),
        })
    }

    /// Queues one call's entry. Never waits for the store, and wakes the
    /// writer only for the first call of a batch.
    pub fn append(&self, pending: Pending) {
        let shared = &self.inner.shared;
        let mut q = shared.lock();
        q.calls.push(pending);
        if q.idle {
            q.idle = false;
            drop(q);
            shared.wake.notify_one();
        }
    }

    /// Waits until everything queued before this call is written (or the
    /// store refused it and it is kept for a retry), at most `timeout`.
    /// Returns whether the writer answered in time.
    pub fn flush(&self, timeout: Duration) -> bool {
        let (ack, done) = mpsc::sync_channel(1);
        {
            let mut q = self.inner.shared.lock();
            if q.closing {
                return false;
            }
            q.flushes.push(ack);
        }
        self.inner.shared.wake.notify_one();
        done.recv_timeout(timeout).is_ok()
    }

    /// The store the journal writes to (for reading it back).
    pub fn backend(&self) -> &Arc<dyn JournalBackend> {
        &self.inner.backend
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // The writer writes what is queued and stops.
        self.shared.lock().closing = true;
        self.shared.wake.notify_one();
        if let Some(t) = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = t.join();
        }
    }
}

struct Writer {
    backend: Arc<dyn JournalBackend>,
    options: JournalOptions,
    /// Entries taken from the queue and not yet written.
    queue: Vec<Entry>,
    pruned: Option<Instant>,
}

impl Writer {
    fn run(mut self, shared: &Shared) {
        self.prune_if_due();
        loop {
            // Wait for a first call (or a flush, or the end); with entries
            // the store refused, only until the next retry.
            let mut q = shared.lock();
            if q.calls.is_empty() && q.flushes.is_empty() && !q.closing {
                q.idle = self.queue.is_empty();
                q = if q.idle {
                    shared
                        .wake
                        .wait_while(q, |q| {
                            q.calls.is_empty() && q.flushes.is_empty() && !q.closing
                        })
                        .unwrap_or_else(|e| e.into_inner())
                } else {
                    shared
                        .wake
                        .wait_timeout(q, RETRY_EVERY)
                        .unwrap_or_else(|e| e.into_inner())
                        .0
                };
                q.idle = false;
            }
            // Let a burst share the transaction: wait LINGER after the
            // first call unless a flush or the end is asked for.
            if q.flushes.is_empty() && !q.closing && !q.calls.is_empty() {
                q = shared
                    .wake
                    .wait_timeout_while(q, LINGER, |q| q.flushes.is_empty() && !q.closing)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
            let calls = std::mem::take(&mut q.calls);
            let acks = std::mem::take(&mut q.flushes);
            let closing = q.closing;
            drop(q);
            self.queue
                .extend(calls.into_iter().map(|p| p.into_entry(&self.options.host)));
            self.write();
            for ack in acks {
                let _ = ack.send(());
            }
            self.prune_if_due();
            if closing && shared.lock().calls.is_empty() {
                break;
            }
        }
        // Closing with entries the store refused: a few more tries.
        for _ in 0..FINAL_TRIES {
            if self.queue.is_empty() {
                break;
            }
            std::thread::sleep(RETRY_EVERY);
            self.write();
        }
        if !self.queue.is_empty() {
            // The last try failed: say what is lost rather than hide it.
            tracing::error!(
                entries = self.queue.len(),
                "the call journal could not be written; these entries are lost"
            );
        }
    }

    fn write(&mut self) {
        while !self.queue.is_empty() {
            let n = self.queue.len().min(MAX_BATCH);
            match self.backend.append(&mut self.queue[..n]) {
                Ok(()) => {
                    if let Some(hook) = &self.options.on_append {
                        self.queue[..n].iter().for_each(hook);
                    }
                    self.queue.drain(..n);
                }
                Err(e) => {
                    tracing::warn!(error = %e, queued = self.queue.len(), "the call journal is not writable; retrying");
                    return;
                }
            }
        }
    }

    fn prune_if_due(&mut self) {
        let Some(retention) = self.options.retention else {
            return;
        };
        if self.pruned.is_some_and(|t| t.elapsed() < PRUNE_EVERY) {
            return;
        }
        self.pruned = Some(Instant::now());
        let before =
            unix_us(SystemTime::now()) - i64::try_from(retention.as_micros()).unwrap_or(i64::MAX);
        match self.backend.prune(before) {
            Ok(0) => {}
            Ok(n) => tracing::info!(entries = n, "pruned the call journal"),
            Err(e) => tracing::warn!(error = %e, "pruning the call journal failed"),
        }
    }
}

#[cfg(test)]
mod tests;
