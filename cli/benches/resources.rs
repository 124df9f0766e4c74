//! Resource locks and batches: `cargo bench --bench resources`.
//!
//! Measures, in one run,
//!
//! - (a) the trivial call (no path argument: no resource key), for
//!   reference, and (b) the same with a lock directory set: what an
//!   unkeyed call pays for the resource step;
//! - (c) taking and releasing the locks of one call that writes one file
//!   (`src/a/b.rs`: an intention on three directories and the file) in the
//!   in-process table, and (d) the same with a lock directory (table + lock
//!   file: open, fcntl, close): what a keyed, uncontended call adds
//!   (target ≤ 5 µs);
//! - (e) a batch of 8 independent `grep_search` calls over a tree of 1,000
//!   files: wall time vs the sum of the items' own times (target ≤ 0.6× on
//!   2 cores), and the same batch on one thread.

#[allow(dead_code)]
#[path = "../../tests/integration/support.rs"]
mod support;

#[path = "../../host/benches/stats/mod.rs"]
mod stats;

use std::time::Duration;

use serde_json::json;
use stats::{measure, us};
use support::*;
use toolhost::effects::resource::{batch, Key, Mode};
use toolhost::{Allow, BatchOptions, BatchStatus, Call, CallOptions, Locks, Source};

fn main() {
    let trivial = test_plugin("tp_trivial");
    let ws = Ws::new();
    let opts = CallOptions::default();
    let scope = session_allowing(&ws, &Allow::default());
    let lock_dir = tempfile::tempdir().unwrap();

    let plain = host_with(&[Source::File(trivial.clone())]).with_locks(Locks::in_process());
    let a = measure(|| {
        let obs = plain.run(&scope, Call::new("echo_value", r#"{"value":7}"#, &opts));
        assert_eq!(obs.status, toolhost::observation::Status::Ok);
    });
    let with_dir = host_with(&[Source::File(trivial)]).with_locks(Locks::with_dir(lock_dir.path()));
    let b = measure(|| {
        let obs = with_dir.run(&scope, Call::new("echo_value", r#"{"value":7}"#, &opts));
        assert_eq!(obs.status, toolhost::observation::Status::Ok);
    });

    let keys = [Key::path("src/a/b.rs", Mode::Write)];
    let root = ws.dir.path();
    let local = Locks::in_process();
    let c = measure(|| {
        let held = local
            .acquire(root, &keys, Duration::from_secs(1), None)
            .unwrap();
        drop(held);
    });
    let files = Locks::with_dir(lock_dir.path());
    let d = measure(|| {
        let held = files
            .acquire(root, &keys, Duration::from_secs(1), None)
            .unwrap();
        drop(held);
    });

    // (e) 8 greps over 1,000 files (10 directories of 100 files, 4 KiB
    // each), every item its own pattern.
    let tree = Ws::new();
    let body: String = (0..64)
        .map(|i| format!("line {i:02} of some text, fn item_{i}() {{ value }}\n"))
        .collect();
    for i in 0..1000 {
        tree.write(&format!("src/d{}/f{i}.rs", i % 10), &body);
    }
    let tree_scope = session(&tree, &READ_ALL);
    let host = host_with(&[Source::reference()]).with_locks(Locks::with_dir(lock_dir.path()));
    let items = batch::parse(
        &json!((0..8)
            .map(|i| json!({"call_id": format!("g{i}"), "tool": "grep_search",
                "arguments": {"pattern": format!("item_{}\\(", 10 + i), "path": "src", "limit": 20}}))
            .collect::<Vec<_>>())
        .to_string(),
    )
    .unwrap();
    let run = |max_parallel: usize| {
        let mut ratios = Vec::new();
        let mut walls = Vec::new();
        let mut sums = Vec::new();
        for _ in 0..7 {
            let r = host.batch(
                &tree_scope,
                &items,
                &BatchOptions {
                    max_parallel,
                    ..BatchOptions::default()
                },
            );
            assert_eq!(r.status, BatchStatus::Ok, "{:#?}", r.items[0]);
            assert!(r
                .items
                .iter()
                .all(|o| o.output.as_ref().unwrap()["total"] == 1000));
            walls.push(r.summary.wall_time_us);
            sums.push(r.summary.sum_time_us);
            ratios.push(r.summary.wall_time_us as f64 / r.summary.sum_time_us as f64);
        }
        ratios.sort_by(f64::total_cmp);
        walls.sort();
        sums.sort();
        (walls[3], sums[3], ratios[3], ratios[0], ratios[6])
    };
    let parallel = run(0);
    let serial = run(1);

    println!(
        "{:<60} {:>10} {:>10} {:>10}",
        "benchmark", "median µs", "p90 µs", "min µs"
    );
    for (name, s) in [
        ("(a) trivial call, no key, in-process locks", &a),
        ("(b) trivial call, no key, with a lock directory", &b),
        ("(c) locks of a one-file write, in-process table", &c),
        ("(d) locks of a one-file write, table + lock file", &d),
    ] {
        println!(
            "{name:<60} {:>10.1} {:>10.1} {:>10.1}",
            us(s.median),
            us(s.p90),
            us(s.min)
        );
    }
    println!(
        "unkeyed call, lock directory vs none (b)-(a): {:.1} µs",
        us(b.median) - us(a.median)
    );
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    for (name, (wall, sum, ratio, lo, hi)) in [
        (
            "(e) batch of 8 grep_search, 1,000 files, parallel",
            parallel,
        ),
        ("    the same batch on one thread", serial),
    ] {
        println!(
            "{name:<52} wall {:>8.1} ms, sum of items {:>8.1} ms, wall/sum median {ratio:.2} (runs {lo:.2}-{hi:.2}; {cores} cores)",
            wall as f64 / 1e3,
            sum as f64 / 1e3
        );
    }
}
