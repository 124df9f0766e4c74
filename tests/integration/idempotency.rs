//! Side effects end to end: levels decide the policy, records make retries
//! safe, plans approve irreversible calls, probes and operators settle what
//! is in doubt.

use crate::support::*;
use serde_json::{json, Value};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;
use toolhost::{
    CallOptions, Claim, EffectGuard, Host, KeyRecord, KeySource, Settlement, Source, State, Store,
    StoreError,
};
use toolhost_store::SqliteStore;

fn records_at(path: &std::path::Path) -> EffectGuard {
    let store = SqliteStore::open(path, Duration::from_secs(3600)).unwrap();
    EffectGuard::new(Arc::new(store), b"test-host-key")
        .with_lease_margin(Duration::from_millis(300))
}

fn effects_host(records: EffectGuard) -> Host {
    host_with(&[Source::File(test_plugin("tp_effects")), Source::reference()]).with_records(records)
}

fn derived(call: &str) -> CallOptions {
    CallOptions {
        idempotency: Some(KeySource::Derived {
            trajectory_id: "traj-1".into(),
            turn: 3,
            call_id: call.into(),
        }),
        ..CallOptions::default()
    }
}

fn lines(ws: &Ws, rel: &str) -> usize {
    std::fs::read_to_string(ws.path(rel))
        .map(|s| s.lines().count())
        .unwrap_or(0)
}

#[test]
fn side_effecting_calls_need_a_key_and_repeats_replay() {
    let db = tempfile::tempdir().unwrap();
    let h = effects_host(records_at(&db.path().join("r.sqlite")));
    let ws = Ws::new();
    std::fs::create_dir_all(ws.path("data")).unwrap();
    let args = r#"{"path":"data/log.txt","line":"hello","hold_ms":0}"#;

    let obs = call_unkeyed(&h, &ws, "append_line", args, &WRITE_ALL);
    expect_error(&obs, "error", "idempotency_key_required");
    assert_eq!(obs["usage"]["fuel_consumed"], 0);
    assert_eq!(lines(&ws, "data/log.txt"), 0);

    let first = call_with(&h, &ws, "append_line", args, &WRITE_ALL, &derived("c1"));
    expect_ok(&first);
    assert_eq!(first["effects"]["replayed"], false);
    let key = first["effects"]["idempotency_key"]
        .as_str()
        .unwrap()
        .to_string();
    let again = call_with(&h, &ws, "append_line", args, &WRITE_ALL, &derived("c1"));
    assert_eq!(again["effects"]["replayed"], true);
    assert_eq!(again["effects"]["idempotency_key"], key.as_str());
    assert_eq!(again["output"].to_string(), first["output"].to_string());
    assert_eq!(lines(&ws, "data/log.txt"), 1, "the effect happened twice");

    // Key order and number forms do not change the key (JCS).
    let reordered = r#"{"hold_ms":0.0,"line":"hello","path":"data/log.txt"}"#;
    let obs = call_with(
        &h,
        &ws,
        "append_line",
        reordered,
        &WRITE_ALL,
        &derived("c1"),
    );
    assert_eq!(obs["effects"]["replayed"], true, "{obs:#}");

    // Same explicit key, other arguments: a conflict, nothing runs.
    let explicit = CallOptions {
        idempotency: Some(KeySource::Explicit(key.clone())),
        ..CallOptions::default()
    };
    let obs = call_with(
        &h,
        &ws,
        "append_line",
        r#"{"path":"data/log.txt","line":"other","hold_ms":0}"#,
        &WRITE_ALL,
        &explicit,
    );
    expect_error(&obs, "error", "idempotency_conflict");
    assert_eq!(lines(&ws, "data/log.txt"), 1);

    // A new logical call (another call id) runs.
    expect_ok(&call_with(
        &h,
        &ws,
        "append_line",
        args,
        &WRITE_ALL,
        &derived("c2"),
    ));
    assert_eq!(lines(&ws, "data/log.txt"), 2);
}

#[test]
fn the_plugin_gets_the_canonical_arguments_the_key_was_derived_from() {
    // `hold_ms` is a u32: `0.0` is an integer under JSON Schema, so it passes
    // validation and keys the call like `0`. The plugin must receive it as
    // `0` too; had it received the raw text, it would fail to deserialize,
    // the error would be recorded under the key, and the corrected retry
    // below would replay that stale error.
    let db = tempfile::tempdir().unwrap();
    let h = effects_host(records_at(&db.path().join("r.sqlite")));
    let ws = Ws::new();
    std::fs::create_dir_all(ws.path("data")).unwrap();
    let spelled = r#"{"path":"data/count.bin","hold_ms":0.0}"#;
    let first = call_with(&h, &ws, "count_calls", spelled, &WRITE_ALL, &derived("k1"));
    assert_eq!(expect_ok(&first)["count"], 1, "{first:#}");
    assert_eq!(first["effects"]["replayed"], false);

    let corrected = r#"{"hold_ms":0,"path":"data/count.bin"}"#;
    let retry = call_with(
        &h,
        &ws,
        "count_calls",
        corrected,
        &WRITE_ALL,
        &derived("k1"),
    );
    assert_eq!(retry["effects"]["replayed"], true, "{retry:#}");
    assert_eq!(
        retry["effects"]["idempotency_key"],
        first["effects"]["idempotency_key"]
    );
    assert_eq!(expect_ok(&retry)["count"], 1);
    assert_eq!(std::fs::read(ws.path("data/count.bin")).unwrap().len(), 1);
}

#[test]
fn a_call_stopped_after_its_effect_is_in_doubt_and_the_probe_settles_it() {
    let db = tempfile::tempdir().unwrap();
    let h = effects_host(records_at(&db.path().join("r.sqlite")));
    let ws = Ws::new();
    std::fs::create_dir_all(ws.path("data")).unwrap();
    let args = r#"{"path":"data/log.txt","line":"once","hold_ms":60000}"#;
    let opts = CallOptions {
        timeout_ms: Some(300),
        ..derived("c1")
    };
    let obs = call_with(&h, &ws, "append_line", args, &WRITE_ALL, &opts);
    assert_eq!(obs["status"], "unknown", "{obs:#}");
    assert_eq!(obs["error"]["retry"], "after_settlement");
    assert_eq!(lines(&ws, "data/log.txt"), 1);
    // The repeat asks the probe: done, so the effect is not repeated.
    let obs = call_with(&h, &ws, "append_line", args, &WRITE_ALL, &opts);
    assert_eq!(obs["status"], "ok", "{obs:#}");
    assert_eq!(obs["effects"]["replayed"], true);
    assert_eq!(lines(&ws, "data/log.txt"), 1);
}

#[test]
fn without_a_probe_in_doubt_waits_for_an_operator() {
    let db = tempfile::tempdir().unwrap();
    let records = records_at(&db.path().join("r.sqlite"));
    let h = effects_host(records.clone());
    let ws = Ws::new();
    std::fs::create_dir_all(ws.path("data")).unwrap();
    let args = r#"{"path":"data/log.txt","line":"x","hold_ms":60000}"#;
    let opts = CallOptions {
        timeout_ms: Some(300),
        ..derived("c1")
    };
    let obs = call_with(&h, &ws, "append_line_no_probe", args, &WRITE_ALL, &opts);
    assert_eq!(obs["status"], "unknown");
    let key = obs["effects"]["idempotency_key"]
        .as_str()
        .unwrap()
        .to_string();
    let obs = call_with(&h, &ws, "append_line_no_probe", args, &WRITE_ALL, &opts);
    expect_error(&obs, "error", "in_doubt");
    assert_eq!(lines(&ws, "data/log.txt"), 1);
    // The operator says it did not happen: the next repeat runs.
    records.store().settle(&key, Settlement::NotDone).unwrap();
    let quick = CallOptions {
        timeout_ms: Some(5000),
        ..derived("c1")
    };
    let args0 = r#"{"path":"data/log.txt","line":"x","hold_ms":0}"#;
    // Other arguments are a different logical call; the same arguments rerun.
    let obs = call_with(
        &h,
        &ws,
        "append_line_no_probe",
        args,
        &WRITE_ALL,
        &CallOptions {
            timeout_ms: Some(300),
            ..quick.clone()
        },
    );
    assert_eq!(obs["status"], "unknown", "it ran again: {obs:#}");
    assert_eq!(lines(&ws, "data/log.txt"), 2);
    let _ = args0;
}

#[test]
fn irreversible_calls_need_an_approved_current_plan() {
    let db = tempfile::tempdir().unwrap();
    let h = effects_host(records_at(&db.path().join("r.sqlite")));
    let ws = Ws::new();
    ws.write("old.txt", "a\nb\n");
    ws.write("other.txt", "keep\n");
    let args = r#"{"path":"old.txt"}"#;
    let run = |token: Option<&str>, call: &str| {
        let opts = CallOptions {
            plan_token: token.map(str::to_string),
            ..derived(call)
        };
        call_self_approving(&h, &ws, "file_delete", args, &opts)
    };
    expect_error(&run(None, "d1"), "error", "approval_required");

    let session = self_approving(&ws);
    let plan = plan_in(&h, &session, "file_delete", args, &CallOptions::default());
    let out = expect_ok(&plan);
    assert_eq!(out["plan"]["changes"][0]["action"], "delete", "{out:#}");
    assert!(ws.path("old.txt").exists(), "planning deleted the file");
    let token = out["plan_token"].as_str().unwrap().to_string();

    // A token for other arguments approves nothing.
    let other = CallOptions {
        plan_token: Some(token.clone()),
        ..derived("d2")
    };
    let obs = call_self_approving(&h, &ws, "file_delete", r#"{"path":"other.txt"}"#, &other);
    expect_error(&obs, "denied", "denied");
    assert!(ws.path("other.txt").exists());

    // The target changed since the plan: stale, nothing runs.
    ws.write("old.txt", "a\nb\nc\n");
    expect_error(&run(Some(&token), "d3"), "error", "stale_plan");
    assert!(ws.path("old.txt").exists());

    // Plan again; the approved call runs once.
    let plan = plan_in(&h, &session, "file_delete", args, &CallOptions::default());
    let token = plan["output"]["plan_token"].as_str().unwrap().to_string();
    expect_ok(&run(Some(&token), "d4"));
    assert!(!ws.path("old.txt").exists());
    assert_eq!(run(Some(&token), "d4")["effects"]["replayed"], true);
}

struct Down;

impl Store for Down {
    fn claim(&self, _: &str, _: &str, _: &str, _: Duration) -> Result<Claim, StoreError> {
        Err(StoreError::Unavailable {
            message: "connection refused".into(),
        })
    }
    fn complete(&self, _: &str, _: u64, _: &str) -> Result<(), StoreError> {
        unreachable!()
    }
    fn mark_in_doubt(&self, _: &str, _: u64, _: &str) -> Result<(), StoreError> {
        unreachable!()
    }
    fn release(&self, _: &str, _: u64) -> Result<(), StoreError> {
        unreachable!()
    }
    fn settle(&self, _: &str, _: Settlement) -> Result<(), StoreError> {
        unreachable!()
    }
    fn get(&self, _: &str) -> Result<Option<KeyRecord>, StoreError> {
        unreachable!()
    }
    fn list(&self, _: Option<State>) -> Result<Vec<KeyRecord>, StoreError> {
        unreachable!()
    }
    fn purge_expired(&self) -> Result<u64, StoreError> {
        unreachable!()
    }
}

#[test]
fn when_the_store_is_down_nothing_runs() {
    let h = effects_host(EffectGuard::new(Arc::new(Down), b"k"));
    let ws = Ws::new();
    std::fs::create_dir_all(ws.path("data")).unwrap();
    let obs = call_with(
        &h,
        &ws,
        "append_line",
        r#"{"path":"data/log.txt","line":"x","hold_ms":0}"#,
        &WRITE_ALL,
        &derived("c"),
    );
    expect_error(&obs, "error", "store_unavailable");
    assert_eq!(obs["usage"]["fuel_consumed"], 0);
    assert_eq!(lines(&ws, "data/log.txt"), 0);
}

fn concurrent_duplicates(make: impl Fn() -> EffectGuard) {
    let hosts = [
        Arc::new(effects_host(make())),
        Arc::new(effects_host(make())),
    ];
    let ws = Arc::new(Ws::new());
    std::fs::create_dir_all(ws.path("data")).unwrap();
    let threads: Vec<_> = (0..50)
        .map(|i| {
            let h = hosts[i % 2].clone();
            let ws = ws.clone();
            std::thread::spawn(move || {
                call_with(
                    &h,
                    &ws,
                    "count_calls",
                    r#"{"path":"data/count","hold_ms":200}"#,
                    &WRITE_ALL,
                    &derived("dup"),
                )
            })
        })
        .collect();
    let mut ran = 0;
    for t in threads {
        let obs = t.join().unwrap();
        match (obs["status"].as_str(), obs["effects"]["replayed"].as_bool()) {
            (Some("ok"), Some(false)) => ran += 1,
            (Some("ok"), Some(true)) => assert_eq!(obs["output"]["count"], 1),
            _ => assert_eq!(obs["error"]["code"], "in_flight", "{obs:#}"),
        }
    }
    assert_eq!(ran, 1);
    assert_eq!(
        std::fs::read(ws.path("data/count")).unwrap().len(),
        1,
        "more than one execution"
    );
}

#[test]
fn fifty_concurrent_duplicates_on_two_hosts_sharing_sqlite_run_once() {
    let db = tempfile::tempdir().unwrap();
    let path = db.path().join("shared.sqlite");
    concurrent_duplicates(|| records_at(&path));
}

#[test]
#[ignore = "needs PostgreSQL: export TOOLHOST_TEST_POSTGRES=\"$(bash .ci/postgres.sh)\", then --ignored (CI does)"]
fn fifty_concurrent_duplicates_on_two_hosts_sharing_postgres_run_once() {
    let url = crate::support::postgres_url();
    // A fresh trajectory per run so old records do not replay.
    let nonce = format!("{:?}", std::time::SystemTime::now());
    concurrent_duplicates(|| {
        let store =
            toolhost_store::PostgresStore::connect(&url, Duration::from_secs(3600)).unwrap();
        EffectGuard::new(Arc::new(store), nonce.as_bytes())
    });
}

#[test]
fn a_host_killed_mid_call_leaves_an_in_doubt_record_the_probe_settles() {
    let ws = Ws::new();
    std::fs::create_dir_all(ws.path("data")).unwrap();
    let state = tempfile::tempdir().unwrap();
    let plugin = test_plugin("tp_effects");
    let run = |hold: u64| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_toolhost"));
        c.args(["--no-builtin", "--plugin"]).arg(&plugin);
        c.args(["--store"]).arg(state.path().join("records.sqlite"));
        c.args(["--lease-margin-ms", "200"]);
        c.args(["call", "append_line"]);
        c.arg(json!({"path":"data/log.txt","line":"paid","hold_ms":hold}).to_string());
        c.args([
            "--allow-write",
            "data",
            "--timeout-ms",
            "4000",
            "--trajectory",
            "t",
            "--turn",
            "1",
            "--call-id",
            "pay",
        ]);
        c.current_dir(ws.dir.path())
            .env("TOOLHOST_ROOT_KEY", "ab".repeat(32))
            .env(
                "TOOLHOST_CACHE_DIR",
                repo_root().join("target/test-compile-cache"),
            )
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    };
    let mut child = run(60_000).spawn().unwrap();
    let start = std::time::Instant::now();
    while lines(&ws, "data/log.txt") == 0 {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the call never acted"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();

    // While the lease lasts, a repeat is refused as in flight.
    let out = run(60_000).output().unwrap();
    let obs: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_valid_observation(&obs);
    assert_eq!(obs["error"]["code"], "in_flight", "{obs:#}");

    // After the lease the record is in doubt; the probe says done.
    std::thread::sleep(Duration::from_millis(4500));
    let out = run(60_000).output().unwrap();
    let obs: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_valid_observation(&obs);
    assert_eq!(obs["status"], "ok", "{obs:#}");
    assert_eq!(obs["effects"]["replayed"], true);
    assert_eq!(
        lines(&ws, "data/log.txt"),
        1,
        "the effect happened more than once"
    );

    // And after a restart the replay is byte-identical.
    let again = run(60_000).output().unwrap();
    assert_eq!(again.stdout, out.stdout);
}

/// Deny by default: a host built without a record store runs read-only
/// tools but refuses a side-effecting one (`denied`, naming the missing
/// store), key or no key, and nothing reaches the plugin.
#[test]
fn a_host_without_a_record_store_refuses_side_effecting_tools() {
    let catalog = toolhost::Catalog::load(
        sandbox(),
        &[Source::File(test_plugin("tp_effects")), Source::reference()],
        &|_, _| {},
    );
    let bare = Host::new(sandbox().clone(), catalog);
    let ws = Ws::new();
    std::fs::create_dir_all(ws.path("data")).unwrap();
    ws.write("data/a.txt", "one\n");
    let args = r#"{"path":"data/log.txt","line":"hello","hold_ms":0}"#;
    for opts in [CallOptions::default(), derived("c1")] {
        let obs = call_with(&bare, &ws, "append_line", args, &WRITE_ALL, &opts);
        let err = expect_error(&obs, "denied", "denied");
        let message = err["message"].as_str().unwrap();
        assert!(message.contains("no record store"), "{message}");
        assert!(message.contains("append_line"), "{message}");
        assert_eq!(obs["usage"]["fuel_consumed"], 0, "{obs:#}");
        assert!(!ws.path("data/log.txt").exists(), "the plugin ran");
    }
    // A read-only tool still runs.
    let obs = call_with(
        &bare,
        &ws,
        "file_view",
        r#"{"path":"data/a.txt"}"#,
        &WRITE_ALL,
        &CallOptions::default(),
    );
    expect_ok(&obs);
}
