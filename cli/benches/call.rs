//! Call latency benchmark: `cargo bench --bench call`.
//!
//! Measures, in one run, the median wall time of
//!
//! - (a) bare wasmtime: fresh store + instantiate from `InstancePre` + call
//!   of the trivial tool, no toolhost pipeline;
//! - (b) toolhost's whole in-process call of the same trivial tool in a
//!   session under a one-off token, as `toolhost call` runs it (gates +
//!   strict parse + schema + sandbox + observation + serialization);
//! - (c) `file_view` of a 4 KiB file through the whole pipeline, and (c2)
//!   the same with the thread asleep 1 ms before each call (untimed), as
//!   `serve`'s call thread is between a client's calls: on this virtual
//!   machine a call that follows an idle millisecond costs more than one
//!   in a tight loop, and (c2)/(c) says how much;
//! - (d) a trivial idempotent call through the SQLite record store;
//! - (e) the trivial call in a session bound to a 5-caveat token, and (f)
//!   the same with a `max_calls` caveat, counted host-wide on every call;
//! - (g) the token call of (e) on a host whose budgets and revocations live
//!   in a SQLite record store (the revocation check, cached), and (h) the
//!   call of (f) there: its `max_calls` counted in the store, one
//!   transaction per call;
//! - (i) the trivial call of (b) on a host that journals every call into a
//!   SQLite record store, measured between two runs of (b) (the machine's
//!   speed drifts): the journal's cost on the call path, target ≤ 10%;
//! - (j) an infinite loop (`spin_forever` of the hostile test plugin)
//!   under the default limits: the wall time until it ends as
//!   `fuel_exhausted`, target ≤ 200 ms;
//!
//! and prints the ratio (b)/(a). The targets (on a 2-core machine) are
//! (b) ≤ 20 µs and ≤ 3× (a), (c) ≤ 100 µs.

#[allow(dead_code)]
#[path = "../../tests/integration/support.rs"]
mod support;

#[path = "../../host/benches/stats/mod.rs"]
mod stats;

/// The allocator of the `toolhost` binary (see `src/main.rs`), so that these
/// figures are the binary's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::time::Duration;

use stats::{measure, us};
use support::*;
use toolhost::{Allow, Call, CallOptions, Session, Source, Workspace};

fn main() {
    // `cargo bench` passes `--bench`; a filter argument is accepted and ignored.
    let trivial = test_plugin("tp_trivial");
    let host = host_with(&[Source::File(trivial.clone()), Source::reference()]);
    let bytes = std::fs::read(&trivial).unwrap();
    let plugin = sandbox().load(&bytes, &|_| {}).unwrap();

    let ws = Ws::new();
    let line = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde\n";
    ws.write("data/four_kib.txt", line.repeat(4096 / line.len()));
    // Every call runs under a token: (b)–(d) under one minted for exactly
    // their grant, as `toolhost call --allow-read` mints one.
    let key = toolhost::RootKey::from_hex(&"ab".repeat(32)).unwrap();
    let allowing = |read: &[&str]| {
        let allow = Allow {
            read,
            ..Allow::default()
        };
        Session::allowing(&key, Workspace::open(ws.dir.path()).unwrap(), &allow).unwrap()
    };
    let none = allowing(&[]);
    let read = allowing(&["data"]);
    let opts = CallOptions::default();

    let a = measure(|| {
        let out = plugin.bare_call("echo_value", r#"{"value":7}"#);
        assert!(out.contains('7'));
    });
    let scope = &none;
    let b = measure(|| {
        let obs = host.run(scope, Call::new("echo_value", r#"{"value":7}"#, &opts));
        let text = serde_json::to_string(&obs).unwrap();
        assert!(text.contains(r#""status":"ok""#), "{text}");
    });
    let scope = &read;
    let view = || {
        let obs = host.run(
            scope,
            Call::new(
                "file_view",
                r#"{"path":"data/four_kib.txt","offset":1,"limit":100}"#,
                &opts,
            ),
        );
        let text = serde_json::to_string(&obs).unwrap();
        assert!(text.contains(r#""status":"ok""#), "{text}");
    };
    let c = measure(view);
    // (c2) the same after 1 ms asleep before each call: what `serve`'s call
    // thread meets between a client's calls (it parks when they come more
    // than ~0.5 ms apart, see `mcp::warm`).
    let c2 = stats::measure_after_sleep(Duration::from_millis(1), view);

    // (d) the same trivial tool declared idempotent: key + SQLite claim +
    // complete on every call (a fresh key each time).
    let db = tempfile::tempdir().unwrap();
    let store = toolhost_store::SqliteStore::open(
        db.path().join("bench.sqlite"),
        Duration::from_secs(3600),
    )
    .unwrap();
    let recorded = host_with(&[Source::File(trivial.clone())]).with_records(
        toolhost::EffectGuard::new(std::sync::Arc::new(store), b"bench-key"),
    );
    let scope = &none;
    let mut n = 0u64;
    let d = measure(|| {
        n += 1;
        let o = CallOptions {
            idempotency: Some(toolhost::KeySource::Explicit(format!("k{n}"))),
            ..CallOptions::default()
        };
        let obs = recorded.run(
            scope,
            Call::new("echo_value_idempotent", r#"{"value":7}"#, &o),
        );
        let text = serde_json::to_string(&obs).unwrap();
        assert!(text.contains(r#""status":"ok""#), "{text}");
    });

    // (e) the trivial call under a capability token: a session bound to a
    // verified token; every call checks tool, expiry and limits.
    let caveats: Vec<toolhost::Caveat> = [
        "tool=echo_value",
        "right=read",
        "read=data",
        "fuel=1000000000",
        "expires=4000000000",
    ]
    .iter()
    .map(|c| c.parse().unwrap())
    .collect();
    let token = toolhost::Token::mint(&key, &caveats).unwrap().encode();
    let session =
        toolhost::Session::open(&key, &token, Workspace::open(ws.dir.path()).unwrap()).unwrap();
    let e = measure(|| {
        let obs = host.run(&session, Call::new("echo_value", r#"{"value":7}"#, &opts));
        let text = serde_json::to_string(&obs).unwrap();
        assert!(text.contains(r#""status":"ok""#), "{text}");
    });

    // (f) the same with a `max_calls` caveat: every call is also counted
    // against the caveat's host-wide budget.
    let counted = toolhost::Token::mint(
        &key,
        &[
            caveats.as_slice(),
            &["max_calls=1000000000".parse().unwrap()],
        ]
        .concat(),
    )
    .unwrap()
    .encode();
    let counted =
        toolhost::Session::open(&key, &counted, Workspace::open(ws.dir.path()).unwrap()).unwrap();
    let f = measure(|| {
        let obs = host.run(&counted, Call::new("echo_value", r#"{"value":7}"#, &opts));
        let text = serde_json::to_string(&obs).unwrap();
        assert!(text.contains(r#""status":"ok""#), "{text}");
    });

    // (g), (h): a host with a SQLite record store keeps budgets and
    // revocations there.
    let ledger_db = tempfile::tempdir().unwrap();
    let ledger_store = toolhost_store::SqliteStore::open(
        ledger_db.path().join("ledger.sqlite"),
        Duration::from_secs(3600),
    )
    .unwrap();
    let stored = host_with(&[Source::File(trivial.clone())]).with_records(
        toolhost::EffectGuard::new(std::sync::Arc::new(ledger_store), b"bench-key"),
    );
    let g = measure(|| {
        let obs = stored.run(&session, Call::new("echo_value", r#"{"value":7}"#, &opts));
        let text = serde_json::to_string(&obs).unwrap();
        assert!(text.contains(r#""status":"ok""#), "{text}");
    });
    let h = measure(|| {
        let obs = stored.run(&counted, Call::new("echo_value", r#"{"value":7}"#, &opts));
        let text = serde_json::to_string(&obs).unwrap();
        assert!(text.contains(r#""status":"ok""#), "{text}");
    });

    // (i): (b) with the call journal on, between two runs of
    // (b) without it.
    let journal_db = tempfile::tempdir().unwrap();
    let journal_store = std::sync::Arc::new(
        toolhost_store::SqliteStore::open(
            journal_db.path().join("journal.sqlite"),
            Duration::from_secs(3600),
        )
        .unwrap(),
    );
    let journal = toolhost::Journal::start(journal_store, Default::default()).unwrap();
    let journaled = host_with(&[Source::File(trivial.clone())]).with_recorder(toolhost::Recorder {
        journal: Some(journal.clone()),
        ..Default::default()
    });
    let scope = &none;
    let trivial_call = |h: &toolhost::Host| {
        let obs = h.run(scope, Call::new("echo_value", r#"{"value":7}"#, &opts));
        let text = serde_json::to_string(&obs).unwrap();
        assert!(text.contains(r#""status":"ok""#), "{text}");
    };
    let b1 = measure(|| trivial_call(&host));
    let i = measure(|| trivial_call(&journaled));
    let b2 = measure(|| trivial_call(&host));
    assert!(journal.flush(Duration::from_secs(120)));
    let written = journal
        .backend()
        .query(&toolhost::record::journal::Filter::default())
        .unwrap()
        .len();
    assert_eq!(written, 3300, "every journaled call has its entry");

    // (j): a few runs only, each burns the whole default fuel.
    let hostile = host_with(&[Source::File(test_plugin("tp_hostile"))]);
    let mut spins: Vec<Duration> = (0..9)
        .map(|_| {
            let started = std::time::Instant::now();
            let obs = hostile.run(&none, Call::new("spin_forever", "{}", &opts));
            let took = started.elapsed();
            let text = serde_json::to_string(&obs).unwrap();
            assert!(text.contains(r#""code":"fuel_exhausted""#), "{text}");
            took
        })
        .collect();
    spins.sort();

    println!(
        "{:<52} {:>10} {:>10} {:>10}",
        "benchmark", "median µs", "p90 µs", "min µs"
    );
    for (name, s) in [
        ("(a) bare wasmtime: store + instantiate + call", &a),
        ("(b) toolhost call, trivial tool", &b),
        ("(c) toolhost file_view, 4 KiB file", &c),
        ("(c2) (c), each call after 1 ms asleep", &c2),
        ("(d) toolhost call, trivial idempotent tool (SQLite)", &d),
        ("(e) toolhost call, trivial tool, with a 5-caveat token", &e),
        ("(f) the same, plus a max_calls caveat (counted)", &f),
        ("(g) (e) on a host with a SQLite ledger", &g),
        ("(h) (f) on a host with a SQLite ledger", &h),
        ("(b) again, before (i)", &b1),
        ("(i) (b) with every call journaled (SQLite)", &i),
        ("(b) again, after (i)", &b2),
    ] {
        println!(
            "{name:<52} {:>10.1} {:>10.1} {:>10.1}",
            us(s.median),
            us(s.p90),
            us(s.min)
        );
    }
    println!("ratio (b)/(a): {:.2}", us(b.median) / us(a.median));
    println!(
        "idle penalty (c2)/(c): {:.2} (the same call, its thread asleep 1 ms before it)",
        us(c2.median) / us(c.median)
    );
    println!("token call (e)/(b): {:.2}", us(e.median) / us(b.median));
    println!(
        "max_calls overhead (f)-(e): {:.1} µs",
        us(f.median) - us(e.median)
    );
    println!(
        "store ledger, no budget (g)-(e): {:.1} µs (target <= 30)",
        us(g.median) - us(e.median)
    );
    println!(
        "store ledger, max_calls counted (h)-(e): {:.1} µs (target <= 30)",
        us(h.median) - us(e.median)
    );
    println!(
        "idempotency overhead (d)-(b): {:.1} µs",
        us(d.median) - us(b.median)
    );
    println!(
        "(j) infinite loop, default limits, until fuel_exhausted: median {:.0} ms, min {:.0}, max {:.0} (9 runs; target <= 200)",
        spins[4].as_secs_f64() * 1e3,
        spins[0].as_secs_f64() * 1e3,
        spins[8].as_secs_f64() * 1e3
    );
    let around = (us(b1.median) + us(b2.median)) / 2.0;
    println!(
        "journal overhead (i)/(b around it): {:.3} ({:+.1} µs; target <= 1.10)",
        us(i.median) / around,
        us(i.median) - around
    );
}
