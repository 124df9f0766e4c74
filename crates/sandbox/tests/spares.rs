//! Instances made ahead of calls (`spare`): on a
//! thread that runs idle work between its calls (`defer_to_idle`, as a
//! stdio session's warm call thread does), a plugin's call asks for the
//! next instance, `idle_work` instantiates it under a neutral state, and
//! the next call puts its own state in.
//!
//! - on a thread without `defer_to_idle` (or with it for another sandbox)
//!   nothing is made ahead and nothing is left waiting (calls instantiate
//!   and drop inline);
//! - a call that runs in a spare sees only its own mount (not the first
//!   call's, not none), and pays the same fuel and memory as a call that
//!   instantiated;
//! - a spare's call is still bounded by its own deadline (the epoch ticks
//!   for it, and a wait in a host call ends at it) and memory limit;
//! - a call whose memory limit is below what the spare already holds does
//!   not take it, and fails as it does without spares.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use toolhost_sandbox::{
    CallOutcome, Failure, Limits, Mount, Plugin, Sandbox, SandboxConfig, SpareStats,
};

mod support;
use support::*;

/// A sandbox of this test's own, so that its counts are this test's, with
/// a pool for `calls` calls at a time.
fn sandbox_for(calls: u32) -> Sandbox {
    Sandbox::new(&SandboxConfig {
        cache_dir: Some(repo_root().join("target/test-compile-cache")),
        max_concurrent_instances: calls,
        ..SandboxConfig::default()
    })
    .unwrap()
}

/// A sandbox of this test's own (the default pool); the calls of this
/// test's thread leave their work to its idle time.
fn private_sandbox() -> Sandbox {
    let sandbox = sandbox_for(SandboxConfig::default().max_concurrent_instances);
    sandbox.defer_to_idle();
    sandbox
}

fn hostile(sandbox: &Sandbox) -> Plugin {
    sandbox
        .load(&std::fs::read(test_plugin("tp_hostile")).unwrap(), &|_| {})
        .unwrap()
}

/// Runs the idle work (what a warm thread does after answering), which
/// makes `plugin` the spare its last call asked for.
fn make_spare(sandbox: &Sandbox, plugin: &Plugin) {
    sandbox.idle_work();
    assert!(plugin.spare_ready(), "the idle work made no spare");
}

/// `index_attempt`'s answer for `/workspace/f.txt` under `mounts`.
fn index(plugin: &Plugin, mounts: &[Mount]) -> (Value, CallOutcome) {
    let outcome = call(
        plugin,
        "index_attempt",
        json!({"path": "/workspace/f.txt"}),
        mounts,
        Limits::default(),
    );
    let json = &outcome.result.as_ref().unwrap().as_ref().unwrap().json;
    (serde_json::from_str(json).unwrap(), outcome)
}

#[test]
fn a_call_in_an_instance_made_ahead_sees_only_its_own_grant_and_pays_the_same() {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in [("a", "first grant\n"), ("b", "second grant\nsecond line\n")] {
        std::fs::create_dir(dir.path().join(name)).unwrap();
        std::fs::write(dir.path().join(name).join("f.txt"), text).unwrap();
    }
    let mount = |name: &str| [Mount::open(&dir.path().join(name), "/workspace", false).unwrap()];
    let sandbox = private_sandbox();
    let plugin = hostile(&sandbox);
    assert!(!plugin.spare_ready(), "nothing is made before a first call");

    sandbox.idle_work();
    assert!(
        !plugin.spare_ready(),
        "nothing is asked for before a first call"
    );
    let (first, instantiated) = index(&plugin, &mount("a"));
    assert_eq!(first["outcome"], "indexed", "{first:#}");
    assert_eq!(first["lines"], 1, "{first:#}");
    assert_eq!(sandbox.spare_stats().taken, 0);

    // The next call runs in the spare made after the first, with the other
    // grant: it sees that one's file.
    make_spare(&sandbox, &plugin);
    let (second, _) = index(&plugin, &mount("b"));
    assert_eq!(second["outcome"], "indexed", "{second:#}");
    assert_eq!(second["lines"], 2, "{second:#}");
    assert_eq!(sandbox.spare_stats().taken, 1);

    // In a spare with no mount at all, nothing is there.
    make_spare(&sandbox, &plugin);
    let (none, _) = index(&plugin, &[]);
    assert_ne!(none["outcome"], "indexed", "{none:#}");
    assert_eq!(sandbox.spare_stats().taken, 2);

    // The first call again, now in a spare: the same answer, fuel and
    // memory as when it instantiated for itself.
    make_spare(&sandbox, &plugin);
    let (again, in_spare) = index(&plugin, &mount("a"));
    assert_eq!(again, first);
    assert_eq!(sandbox.spare_stats().taken, 3);
    assert_eq!(
        in_spare.usage.fuel_consumed,
        instantiated.usage.fuel_consumed
    );
    assert_eq!(
        in_spare.usage.peak_memory_bytes,
        instantiated.usage.peak_memory_bytes
    );
    let stats = sandbox.spare_stats();
    assert!(stats.made >= stats.taken, "{stats:?}");
}

#[test]
fn a_call_in_an_instance_made_ahead_keeps_its_deadline_and_memory_limit() {
    let sandbox = private_sandbox();
    let plugin = hostile(&sandbox);
    let (_, _) = index(&plugin, &[]);

    // Its deadline: the epoch ticks for a spare once a call takes it, and
    // a wait inside a host call (`poll`) ends at it too.
    // Fuel for far longer than the deadline (the default's 2e9 lasts
    // ~130 ms of this spin on a fast machine).
    let limits = Limits {
        timeout: Duration::from_millis(200),
        fuel: 1 << 50,
        ..Limits::default()
    };
    let waits = [
        ("spin_forever", json!({})),
        ("poll_sleep", json!({"ms": 60_000})),
    ];
    for (taken, (tool, args)) in (1..).zip(waits) {
        make_spare(&sandbox, &plugin);
        let started = Instant::now();
        let outcome = call(&plugin, tool, args, &[], limits);
        assert!(
            matches!(outcome.result, Err(Failure::Timeout)),
            "{tool}: {:?}",
            outcome.result
        );
        assert!(started.elapsed() < Duration::from_secs(5), "{tool}");
        assert_eq!(sandbox.spare_stats().taken, taken, "{tool}");
    }

    // Its memory limit, counted from what instantiating it took.
    make_spare(&sandbox, &plugin);
    let limits = Limits {
        memory_bytes: 8 << 20,
        ..Limits::default()
    };
    let bomb = call(&plugin, "memory_bomb", json!({}), &[], limits);
    assert!(
        matches!(bomb.result, Err(Failure::MemoryExhausted)),
        "{:?}",
        bomb.result
    );
    assert!(bomb.usage.peak_memory_bytes <= 8 << 20, "{:?}", bomb.usage);
    assert_eq!(sandbox.spare_stats().taken, 3);
}

#[test]
fn a_call_allowed_less_memory_than_the_instance_made_ahead_holds_does_not_take_it() {
    // What a call allowed 64 KiB gets without spares: its instantiation
    // fails under its own limit.
    let sandbox = private_sandbox();
    let fresh = hostile(&sandbox);
    let tiny = Limits {
        memory_bytes: 64 << 10,
        ..Limits::default()
    };
    let without = call(&fresh, "index_attempt", json!({"path": "/x"}), &[], tiny);
    assert!(without.result.is_err(), "{:?}", without.result);

    let plugin = hostile(&sandbox);
    let _ = index(&plugin, &[]);
    make_spare(&sandbox, &plugin);
    let taken = sandbox.spare_stats().taken;
    let with = call(&plugin, "index_attempt", json!({"path": "/x"}), &[], tiny);
    assert_eq!(
        format!("{:?}", with.result),
        format!("{:?}", without.result)
    );
    assert_eq!(sandbox.spare_stats().taken, taken, "the spare was not used");
}

#[test]
fn without_idle_work_nothing_is_made_ahead_and_nothing_waits() {
    // This thread runs the idle work of another sandbox: not this one's.
    let _other = private_sandbox();
    let sandbox = sandbox_for(1);
    let plugin = hostile(&sandbox);
    // More calls than the pool has slots for stores left waiting: each
    // drops its own store inline.
    for _ in 0..20 {
        let (answer, _) = index(&plugin, &[]);
        assert_ne!(answer["outcome"], "indexed", "{answer:#}");
    }
    sandbox.idle_work();
    assert!(!plugin.spare_ready());
    assert_eq!(sandbox.spare_stats(), SpareStats::default());
}

#[test]
fn calls_faster_than_the_idle_work_never_run_out_of_instance_slots() {
    // A pool for 2 calls at a time: stores waiting to be dropped, spares and
    // the calls themselves share it. Back-to-back calls from 2 threads that
    // leave their work to idle time outpace a third that runs it (drops
    // the stores, makes the spares) only now and then; none may fail for
    // want of a slot.
    let sandbox = sandbox_for(2);
    let plugin = sandbox
        .load(&std::fs::read(test_plugin("tp_trivial")).unwrap(), &|_| {})
        .unwrap();
    let done = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        s.spawn(|| {
            while done.load(std::sync::atomic::Ordering::SeqCst) < 2 {
                sandbox.idle_work();
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        for _ in 0..2 {
            s.spawn(|| {
                sandbox.defer_to_idle();
                for n in 0..1500 {
                    let outcome = call(
                        &plugin,
                        "echo_value",
                        json!({ "value": n }),
                        &[],
                        Limits::default(),
                    );
                    let out = outcome.result.unwrap().unwrap();
                    assert_eq!(out.json, json!({ "value": n }).to_string());
                }
                done.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            });
        }
    });
    assert!(
        sandbox.spare_stats().taken > 0,
        "{:?}",
        sandbox.spare_stats()
    );
}
