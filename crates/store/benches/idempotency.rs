//! Throughput of the idempotency stores.
//!
//! Measures, per backend, records per second for the hot path of a call with
//! side effects: `claim` (acquired) followed by `complete`; then the replay
//! path (`claim` answering `Completed`). Also the cost of deriving keys
//! (JCS + HMAC-SHA256), and SQLite under contention (two stores, i.e. two
//! connections as two host processes would have, four threads each).
//!
//! ```text
//! cargo bench -p toolhost-store --bench idempotency
//! TOOLHOST_BENCH_RECORDS=50000 cargo bench -p toolhost-store --bench idempotency
//! ```
//!
//! PostgreSQL is measured when `TOOLHOST_TEST_POSTGRES` (or the default URL
//! printed by `.ci/postgres.sh`) reaches a server. The target for SQLite with
//! default options is at least 5,000 claim+complete records per second.

use std::hint::black_box;
use std::time::{Duration, Instant};

use serde_json::json;
use toolhost::effects::idempotency::{args_digest, call_key, DEFAULT_RETENTION};
use toolhost::{Claim, Store};
use toolhost_store::sqlite::{Durability, SqliteOptions};
use toolhost_store::{PostgresStore, SqliteStore};

const TARGET_PER_SECOND: f64 = 5_000.0;
const LEASE: Duration = Duration::from_secs(300);
const DEFAULT_POSTGRES_URL: &str = "postgres://toolhost:toolhost@127.0.0.1:5432/toolhost";

fn main() {
    let records: usize = std::env::var("TOOLHOST_BENCH_RECORDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let run_id = format!(
        "bench-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    );
    let observation =
        json!({"ok": true, "content": [{"type": "text", "text": "wrote 42 bytes"}]}).to_string();

    // Key derivation.
    let started = Instant::now();
    for i in 0..records {
        let args = json!({"path": format!("notes/{i}.md"), "content": "hello", "append": false});
        black_box(
            call_key(
                b"host-key",
                "trajectory",
                i as u64,
                "call",
                "fs.write",
                &args,
            )
            .unwrap(),
        );
    }
    report("key derivation (JCS + HMAC)", records, started.elapsed());

    let dir = tempfile::tempdir().expect("temporary directory");

    // SQLite, default options (WAL, synchronous=NORMAL).
    let store = SqliteStore::open(dir.path().join("normal.sqlite3"), DEFAULT_RETENTION)
        .expect("open SQLite store");
    let rate = claim_complete(&store, &format!("{run_id}-normal"), records, &observation);
    replay(&store, &format!("{run_id}-normal"), records, &observation);
    println!(
        "SQLite target: >= {TARGET_PER_SECOND:.0} records/s: {}",
        if rate >= TARGET_PER_SECOND {
            "met"
        } else {
            "NOT MET"
        }
    );

    // SQLite, synchronous=FULL (every commit synced).
    let full = SqliteStore::open_with(
        dir.path().join("full.sqlite3"),
        &SqliteOptions {
            durability: Durability::Full,
            ..SqliteOptions::default()
        },
    )
    .expect("open SQLite store");
    println!("-- SQLite, synchronous=FULL");
    claim_complete(&full, &format!("{run_id}-full"), records / 4, &observation);

    // SQLite under contention: two connections, four threads each.
    let path = dir.path().join("shared.sqlite3");
    let stores = [
        SqliteStore::open(&path, DEFAULT_RETENTION).expect("open SQLite store"),
        SqliteStore::open(&path, DEFAULT_RETENTION).expect("open SQLite store"),
    ];
    let threads = 8;
    let per_thread = records / threads;
    let started = Instant::now();
    std::thread::scope(|scope| {
        for t in 0..threads {
            let store = &stores[t % stores.len()];
            let prefix = format!("{run_id}-shared-{t}");
            let observation = &observation;
            scope.spawn(move || {
                claim_complete_loop(store, &prefix, per_thread, observation);
            });
        }
    });
    report(
        "SQLite claim+complete, 2 connections x 4 threads",
        per_thread * threads,
        started.elapsed(),
    );

    // PostgreSQL, when a server is reachable.
    let url =
        std::env::var("TOOLHOST_TEST_POSTGRES").unwrap_or_else(|_| DEFAULT_POSTGRES_URL.into());
    match PostgresStore::connect(&url, DEFAULT_RETENTION) {
        Ok(store) => {
            println!("-- PostgreSQL");
            let prefix = format!("{run_id}-pg");
            let n = records / 4;
            claim_complete(&store, &prefix, n, &observation);
            replay(&store, &prefix, n, &observation);
        }
        Err(e) => println!("PostgreSQL skipped ({url}): {e}"),
    }
}

fn key(prefix: &str, i: usize) -> String {
    format!("{prefix}-{i:08}")
}

fn claim_complete_loop(store: &dyn Store, prefix: &str, n: usize, observation: &str) {
    let digest = args_digest("{}");
    for i in 0..n {
        let key = key(prefix, i);
        match store.claim(&key, "fs.write", &digest, LEASE).unwrap() {
            Claim::Acquired { fence } => store.complete(&key, fence, observation).unwrap(),
            other => panic!("{key}: {other:?}"),
        }
    }
}

fn claim_complete(store: &dyn Store, prefix: &str, n: usize, observation: &str) -> f64 {
    let started = Instant::now();
    claim_complete_loop(store, prefix, n, observation);
    report("claim+complete", n, started.elapsed())
}

fn replay(store: &dyn Store, prefix: &str, n: usize, observation: &str) -> f64 {
    let digest = args_digest("{}");
    let started = Instant::now();
    for i in 0..n {
        let key = key(prefix, i);
        match store.claim(&key, "fs.write", &digest, LEASE).unwrap() {
            Claim::Completed { observation: got } => assert_eq!(got, observation),
            other => panic!("{key}: {other:?}"),
        }
    }
    report("replay (claim -> Completed)", n, started.elapsed())
}

fn report(what: &str, n: usize, elapsed: Duration) -> f64 {
    let rate = n as f64 / elapsed.as_secs_f64();
    println!(
        "{what}: {n} records in {:.3} s = {rate:.0} records/s ({:.1} µs each)",
        elapsed.as_secs_f64(),
        elapsed.as_secs_f64() * 1e6 / n as f64
    );
    rate
}
