//! Prometheus metrics of the calls a host answers, served on `/metrics` by
//! `toolhost serve --http` in the Prometheus text format (0.0.4), through
//! the `prometheus-client` crate:
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `toolhost_calls_total` | counter | `tool`, `status`, `error_code` (`""` for ok) |
//! | `toolhost_call_duration_seconds` | histogram | `tool` |
//! | `toolhost_first_tries_total` | counter | `tool` |
//! | `toolhost_first_try_valid_total` | counter | `tool` |
//! | `toolhost_fuel_consumed_total` | counter | `tool` |
//! | `toolhost_output_bytes_total` | counter | `tool` |
//! | `toolhost_records` | gauge | `state` (idempotency records) |
//! | `toolhost_compile_cache_hits_total`, `_misses_total` | counter | |
//! | `toolhost_precompiled_loads_total` | counter | |
//! | `toolhost_journal_entries_total` | counter | |
//!
//! The first-try counters are fed by the journal writer, which alone knows
//! a call's attempt ordinal (so they lag a call by at most the journal's
//! linger, and stay at zero without a journal).
//!
//! The `tool` label is a name of the catalog (a loaded or refused tool, or
//! a host tool). A name a client made up is counted under
//! [`OTHER_TOOL`], so no client can grow the page by calling names.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use crate::observation::Observation;
use crate::record::journal::Entry;
use crate::sandbox::LoadEvent;

/// The `Content-Type` of [`Metrics::render`]'s text.
pub const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

type Labels = Vec<(&'static str, String)>;

/// The `tool` label of calls to a name outside the catalog.
pub const OTHER_TOOL: &str = "(not in catalog)";

static CACHE_HITS: AtomicU64 = AtomicU64::new(0);
static CACHE_MISSES: AtomicU64 = AtomicU64::new(0);
static PRECOMPILED: AtomicU64 = AtomicU64::new(0);

/// Counts a plugin load's compile-cache outcome, or a load of code
/// precompiled into the binary (process-wide).
pub fn note_load(event: &LoadEvent) {
    match event {
        LoadEvent::CacheHit => CACHE_HITS.fetch_add(1, Ordering::Relaxed),
        LoadEvent::Compiling { .. } => CACHE_MISSES.fetch_add(1, Ordering::Relaxed),
        LoadEvent::Precompiled => PRECOMPILED.fetch_add(1, Ordering::Relaxed),
        _ => 0,
    };
}

fn duration_histogram() -> Histogram {
    // 50 µs to ~100 s.
    Histogram::new(exponential_buckets(0.000_05, 2.5, 16))
}

/// One host's (or server's) metrics.
pub struct Metrics {
    registry: Mutex<Registry>,
    calls: Family<Labels, Counter>,
    duration: Family<Labels, Histogram, fn() -> Histogram>,
    first_tries: Family<Labels, Counter>,
    first_try_valid: Family<Labels, Counter>,
    fuel: Family<Labels, Counter>,
    output_bytes: Family<Labels, Counter>,
    records: Family<Labels, Gauge>,
    cache_hits: Counter,
    cache_misses: Counter,
    precompiled: Counter,
    journal_entries: Counter,
    /// The tool names counted under their own label (names of the catalog).
    known: Mutex<std::collections::HashSet<String>>,
}

impl Metrics {
    /// The `Content-Type` of [`Metrics::render`]'s text ([`CONTENT_TYPE`]).
    pub const CONTENT_TYPE: &'static str = CONTENT_TYPE;

    /// Counts a plugin load's compile-cache outcome, process-wide
    /// ([`note_load`]): a catalog's load callback passes its events here.
    pub fn note_load(event: &LoadEvent) {
        note_load(event)
    }
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let m = Metrics {
            registry: Mutex::new(Registry::default()),
            calls: Family::default(),
            duration: Family::new_with_constructor(duration_histogram),
            first_tries: Family::default(),
            first_try_valid: Family::default(),
            fuel: Family::default(),
            output_bytes: Family::default(),
            records: Family::default(),
            cache_hits: Counter::default(),
            cache_misses: Counter::default(),
            precompiled: Counter::default(),
            journal_entries: Counter::default(),
            known: Mutex::default(),
        };
        {
            let mut r = m.registry.lock().unwrap_or_else(|e| e.into_inner());
            r.register(
                "toolhost_calls",
                "Calls answered, by tool, status and error code",
                m.calls.clone(),
            );
            r.register(
                "toolhost_call_duration_seconds",
                "Wall time of a call from its arrival to its observation",
                m.duration.clone(),
            );
            r.register(
                "toolhost_first_tries",
                "Logical calls (first attempts), by tool",
                m.first_tries.clone(),
            );
            r.register(
                "toolhost_first_try_valid",
                "Logical calls whose first attempt passed validation and authorization",
                m.first_try_valid.clone(),
            );
            r.register(
                "toolhost_fuel_consumed",
                "Fuel (about one unit per Wasm instruction) consumed by calls",
                m.fuel.clone(),
            );
            r.register(
                "toolhost_output_bytes",
                "Output bytes returned by tools",
                m.output_bytes.clone(),
            );
            r.register(
                "toolhost_records",
                "Idempotency records in the store, by state",
                m.records.clone(),
            );
            r.register(
                "toolhost_compile_cache_hits",
                "Plugin loads served from the compiled-code cache",
                m.cache_hits.clone(),
            );
            r.register(
                "toolhost_compile_cache_misses",
                "Plugin loads that compiled the component",
                m.cache_misses.clone(),
            );
            r.register(
                "toolhost_precompiled_loads",
                "Plugin loads of code compiled into the binary at build time (no compile, no cache)",
                m.precompiled.clone(),
            );
            r.register(
                "toolhost_journal_entries",
                "Entries appended to the call journal",
                m.journal_entries.clone(),
            );
        }
        m
    }

    /// Counts one answered call; `known` says whether its tool is a name
    /// of the catalog (else it is counted under [`OTHER_TOOL`]).
    pub fn observe(&self, obs: &Observation, elapsed: Duration, known: bool) {
        let name = if known {
            let mut names = self.known.lock().unwrap_or_else(|e| e.into_inner());
            if !names.contains(&obs.tool) {
                names.insert(obs.tool.clone());
            }
            obs.tool.clone()
        } else {
            OTHER_TOOL.to_string()
        };
        let tool = vec![("tool", name.clone())];
        let code = obs.error.as_ref().map_or("", |e| e.code.as_str());
        self.calls
            .get_or_create(&vec![
                ("tool", name),
                ("status", obs.status.as_str().to_string()),
                ("error_code", code.to_string()),
            ])
            .inc();
        self.duration
            .get_or_create(&tool)
            .observe(elapsed.as_secs_f64());
        if obs.usage.fuel_consumed > 0 {
            self.fuel
                .get_or_create(&tool)
                .inc_by(obs.usage.fuel_consumed);
        }
        if obs.usage.output_bytes > 0 {
            self.output_bytes
                .get_or_create(&tool)
                .inc_by(obs.usage.output_bytes);
        }
    }

    /// Counts one journaled entry (its attempt ordinal is known).
    pub fn observe_entry(&self, e: &Entry) {
        self.journal_entries.inc();
        if e.first_try {
            let known = self
                .known
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .contains(&e.tool);
            let name = if known {
                e.tool.clone()
            } else {
                OTHER_TOOL.into()
            };
            let tool = vec![("tool", name)];
            self.first_tries.get_or_create(&tool).inc();
            let invalid = e
                .error_code
                .as_deref()
                .is_some_and(|c| crate::record::journal::stats::INVALID_CODES.contains(&c));
            if !invalid {
                self.first_try_valid.get_or_create(&tool).inc();
            }
        }
    }

    /// The metrics in the Prometheus text format; `records` (state, count)
    /// refreshes the records gauge first.
    pub fn render(&self, records: Option<&[(&str, i64)]>) -> String {
        if let Some(records) = records {
            for (state, n) in records {
                self.records
                    .get_or_create(&vec![("state", state.to_string())])
                    .set(*n);
            }
        }
        let hits = CACHE_HITS.load(Ordering::Relaxed);
        self.cache_hits
            .inc_by(hits.saturating_sub(self.cache_hits.get()));
        let misses = CACHE_MISSES.load(Ordering::Relaxed);
        self.cache_misses
            .inc_by(misses.saturating_sub(self.cache_misses.get()));
        let precompiled = PRECOMPILED.load(Ordering::Relaxed);
        self.precompiled
            .inc_by(precompiled.saturating_sub(self.precompiled.get()));
        let mut out = String::new();
        let registry = self.registry.lock().unwrap_or_else(|e| e.into_inner());
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::prometheus_text::encode(&mut out, &registry);
        out
    }
}
