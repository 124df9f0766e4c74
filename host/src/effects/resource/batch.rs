//! Batches: many calls in one request, one result envelope.
//!
//! A batch is a JSON array of items `{"call_id", "tool", "arguments",
//! "idempotency_key"?}`. The answer is one object:
//!
//! ```json
//! {"schema_version": 1, "status": "ok" | "partial" | "error",
//!  "items": [observation, …],
//!  "summary": {"completed", "failed", "wall_time_us", "sum_time_us"}}
//! ```
//!
//! `items` are in input order, each a full observation carrying the
//! `call_id` it was given and its own error: one item's success is never the
//! batch's. `status` is `ok` when every item is ok, `error` when none is,
//! `partial` otherwise.
//!
//! Scheduling: an item waits for every earlier item it conflicts with
//! ([`declared_keys`]: its path arguments normalised lexically and, for a
//! side-effecting tool, its declared origins), so conflicting writes run in
//! input order; the others run in parallel on at most `max_parallel`
//! threads (default: the cores). Every item still takes its locks as a
//! single call does, so a batch is also kept apart from other callers.
//!
//! `sum_time_us` adds up each item's own time (its whole call, less any
//! wait for locks); `wall_time_us` is the batch's. With independent items
//! on several cores, wall < sum.

use std::sync::{Condvar, Mutex};
use std::time::Instant;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::{conflict, declared_keys, Key};
use crate::call::CallOptions;
use crate::call::KeySource;
use crate::descriptor::SideEffect;
use crate::observation::{ErrorCode, Observation, Status};
use crate::plugin::catalog::Catalog;

/// Version of the batch result shape.
pub const BATCH_SCHEMA_VERSION: u32 = 1;
/// Most items one batch may hold.
pub const MAX_ITEMS: usize = 1024;

/// One call of a batch.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BatchItem {
    /// The caller's id for this call; unique within the batch.
    pub call_id: String,
    pub tool: String,
    /// The arguments, kept as sent (they are parsed strictly per call).
    pub arguments: Box<RawValue>,
    /// The idempotency key of a side-effecting call.
    #[serde(default)]
    pub idempotency_key: Option<String>,
}

/// Why a batch was refused as a whole (nothing ran).
#[derive(Debug, thiserror::Error)]
pub enum BatchError {
    #[error("the batch is not a JSON array of {{\"call_id\", \"tool\", \"arguments\", \"idempotency_key\"?}} objects: {0}")]
    Shape(serde_json::Error),
    #[error("the batch has {0} items; at most {MAX_ITEMS} are allowed")]
    TooLarge(usize),
    #[error("item {index} has an empty call_id; every item needs its own")]
    EmptyCallId { index: usize },
    #[error("call_id {call_id:?} is used by items {first} and {second}; each item needs its own")]
    DuplicateCallId {
        call_id: String,
        first: usize,
        second: usize,
    },
}

/// Parses and checks a batch's items.
pub fn parse(text: &str) -> Result<Vec<BatchItem>, BatchError> {
    let items: Vec<BatchItem> = serde_json::from_str(text).map_err(BatchError::Shape)?;
    if items.len() > MAX_ITEMS {
        return Err(BatchError::TooLarge(items.len()));
    }
    let mut seen = std::collections::HashMap::new();
    for (i, item) in items.iter().enumerate() {
        if item.call_id.is_empty() {
            return Err(BatchError::EmptyCallId { index: i });
        }
        if let Some(first) = seen.insert(item.call_id.as_str(), i) {
            return Err(BatchError::DuplicateCallId {
                call_id: item.call_id.clone(),
                first,
                second: i,
            });
        }
    }
    Ok(items)
}

/// How a batch runs.
#[derive(Debug, Clone, Default)]
pub struct BatchOptions {
    /// Most items running at once; 0 means the number of cores. Never more
    /// than the cores.
    pub max_parallel: usize,
    /// Options every item starts from. Its `call_id` is replaced by the
    /// item's; its idempotency source applies only when it is
    /// [`KeySource::Derived`] (with the item's call id); an item's own
    /// `idempotency_key` wins.
    pub call: CallOptions,
}

impl BatchOptions {
    /// Most items one batch may hold ([`MAX_ITEMS`]).
    pub const MAX_ITEMS: usize = MAX_ITEMS;
}

/// `ok`, `partial` or `error`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BatchStatus {
    Ok,
    Partial,
    Error,
}

/// Counts and times of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    /// Items with status `ok`.
    pub completed: usize,
    /// Items with any other status.
    pub failed: usize,
    /// Wall time of the whole batch, in microseconds.
    pub wall_time_us: u64,
    /// Sum of the items' own times (less lock waits), in microseconds.
    pub sum_time_us: u64,
}

/// The answer to a batch.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BatchResult {
    pub schema_version: u32,
    pub status: BatchStatus,
    pub items: Vec<Observation>,
    pub summary: Summary,
}

/// The cores this process may use, read once: the standard library reads
/// the cgroup's quota files on every ask, which costs more than a small
/// call.
fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Runs `items` with `run`, each after the earlier items it conflicts
/// with (see the module overview), on at most `opts.max_parallel` threads.
pub(crate) fn run_batch(
    catalog: &Catalog,
    items: &[BatchItem],
    opts: &BatchOptions,
    run: impl Fn(&BatchItem, &CallOptions) -> Observation + Sync,
) -> BatchResult {
    let start = Instant::now();
    let keys: Vec<Vec<Key>> = items
        .iter()
        .map(|item| {
            catalog
                .get(&item.tool)
                .map(|t| declared_keys(t, item.arguments.get()))
                .unwrap_or_default()
        })
        .collect();
    let after: Vec<Vec<usize>> = (0..items.len())
        .map(|j| (0..j).filter(|&i| conflict(&keys[i], &keys[j])).collect())
        .collect();
    let cores = cores();
    let workers = match opts.max_parallel {
        0 => cores,
        n => n.min(cores),
    }
    .clamp(1, items.len().max(1));

    let sched = Sched {
        state: Mutex::new(State {
            started: vec![false; items.len()],
            done: vec![false; items.len()],
            results: vec![None; items.len()],
        }),
        wake: Condvar::new(),
    };
    let one = |i: usize| {
        let item = &items[i];
        let call = item_options(&opts.call, item);
        let t = Instant::now();
        // A host fault on one item is that item's error, not a hung
        // batch.
        let obs = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(item, &call)))
            .unwrap_or_else(|_| {
                let level = catalog
                    .get(&item.tool)
                    .map_or(SideEffect::ReadOnly, |t| t.descriptor.side_effect);
                Observation::failure(
                    &item.call_id,
                    &item.tool,
                    level,
                    ErrorCode::Internal.info("the host failed while running this item"),
                )
                .effect_unknown()
            });
        let own = (t.elapsed().as_micros() as u64).saturating_sub(obs.usage.wait_us);
        (obs, own)
    };
    // The calling thread is one of the workers: a batch of one item (a
    // script's awaited call) starts no thread.
    std::thread::scope(|s| {
        for _ in 1..workers {
            s.spawn(|| sched.work(&after, &one));
        }
        sched.work(&after, &one);
    });
    let results = sched
        .state
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .results;
    let mut out = Vec::with_capacity(items.len());
    let mut sum = 0u64;
    for r in results {
        let (obs, own) = r.expect("every item ran");
        sum += own;
        out.push(obs);
    }
    let completed = out.iter().filter(|o| o.status == Status::Ok).count();
    let failed = out.len() - completed;
    let status = if failed == 0 {
        BatchStatus::Ok
    } else if completed == 0 {
        BatchStatus::Error
    } else {
        BatchStatus::Partial
    };
    BatchResult {
        schema_version: BATCH_SCHEMA_VERSION,
        status,
        items: out,
        summary: Summary {
            completed,
            failed,
            wall_time_us: start.elapsed().as_micros() as u64,
            sum_time_us: sum,
        },
    }
}

fn item_options(base: &CallOptions, item: &BatchItem) -> CallOptions {
    let idempotency = match (&item.idempotency_key, &base.idempotency) {
        (Some(k), _) => Some(KeySource::Explicit(k.clone())),
        (
            None,
            Some(KeySource::Derived {
                trajectory_id,
                turn,
                ..
            }),
        ) => Some(KeySource::Derived {
            trajectory_id: trajectory_id.clone(),
            turn: *turn,
            call_id: item.call_id.clone(),
        }),
        // One explicit key cannot name several calls.
        _ => None,
    };
    CallOptions {
        call_id: Some(item.call_id.clone()),
        idempotency,
        ..base.clone()
    }
}

struct State {
    started: Vec<bool>,
    done: Vec<bool>,
    results: Vec<Option<(Observation, u64)>>,
}

struct Sched {
    state: Mutex<State>,
    wake: Condvar,
}

impl Sched {
    /// One worker: takes the first item whose earlier conflicting items are
    /// done, runs it, until every item has started.
    fn work(&self, after: &[Vec<usize>], one: &(impl Fn(usize) -> (Observation, u64) + Sync)) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            let next =
                (0..after.len()).find(|&i| !st.started[i] && after[i].iter().all(|&d| st.done[d]));
            match next {
                Some(i) => {
                    st.started[i] = true;
                    drop(st);
                    let r = one(i);
                    st = self.state.lock().unwrap_or_else(|e| e.into_inner());
                    st.done[i] = true;
                    st.results[i] = Some(r);
                    self.wake.notify_all();
                }
                None if st.started.iter().all(|&s| s) => return,
                None => st = self.wake.wait(st).unwrap_or_else(|e| e.into_inner()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_input_errors_are_named() {
        for (text, want) in [
            ("{}", "not a JSON array"),
            (r#"[{"call_id":"a","tool":"t"}]"#, "arguments"),
            (
                r#"[{"call_id":"","tool":"t","arguments":{}}]"#,
                "empty call_id",
            ),
            (
                r#"[{"call_id":"a","tool":"t","arguments":{},"extra":1}]"#,
                "unknown field",
            ),
        ] {
            let e = parse(text).unwrap_err().to_string();
            assert!(e.contains(want), "{text}: {e}");
        }
    }
}
