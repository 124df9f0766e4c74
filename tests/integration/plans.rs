//! Plan tokens approve one irreversible call, for a limited time, while
//! every target — a directory included — stays as it was planned.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use toolhost::{CallOptions, EffectGuard, Host, KeySource, Source};
use toolhost_store::SqliteStore;

use crate::support::*;

fn records(db: &tempfile::TempDir) -> EffectGuard {
    let store = SqliteStore::open(db.path().join("r.sqlite"), Duration::from_secs(3600)).unwrap();
    EffectGuard::new(Arc::new(store), b"plan-test-key")
}

fn host(records: EffectGuard) -> Host {
    host_with(&[Source::reference(), Source::File(test_plugin("tp_effects"))]).with_records(records)
}

/// Plans `tool(args)` with write access to the whole workspace, under a
/// token that approves its own plans.
fn plan(h: &Host, ws: &Ws, tool: &str, args: &str) -> Value {
    let session = self_approving(ws);
    let obs = plan_in(h, &session, tool, args, &CallOptions::default());
    expect_ok(&obs).clone()
}

/// Runs `tool(args)` under idempotency `key` with the plan token.
fn run(h: &Host, ws: &Ws, tool: &str, args: &str, key: &str, token: &str) -> Value {
    let opts = CallOptions {
        idempotency: Some(KeySource::Explicit(key.into())),
        plan_token: Some(token.into()),
        ..CallOptions::default()
    };
    call_self_approving(h, ws, tool, args, &opts)
}

#[test]
fn one_plan_approves_one_call() {
    let db = tempfile::tempdir().unwrap();
    let h = host(records(&db));
    let ws = Ws::new();
    ws.write("old.txt", "a\n");
    let args = r#"{"path":"old.txt"}"#;
    let token = plan(&h, &ws, "file_delete", args)["plan_token"]
        .as_str()
        .unwrap()
        .to_string();
    expect_ok(&run(&h, &ws, "file_delete", args, "first", &token));
    assert!(!ws.path("old.txt").exists());

    // The same file is back, byte for byte: the plan's targets match again,
    // but the plan was spent on the first call.
    ws.write("old.txt", "a\n");
    let obs = run(&h, &ws, "file_delete", args, "second", &token);
    let err = expect_error(&obs, "error", "stale_plan");
    assert!(
        err["message"].as_str().unwrap().contains("another call"),
        "{err}"
    );
    assert!(ws.path("old.txt").exists(), "a spent plan approved a call");

    // The first call, repeated, is replayed, not run again.
    let again = run(&h, &ws, "file_delete", args, "first", &token);
    assert_eq!(again["effects"]["replayed"], true, "{again:#}");
    assert!(ws.path("old.txt").exists());
}

#[test]
fn an_expired_plan_is_refused() {
    let db = tempfile::tempdir().unwrap();
    let h = host(records(&db).with_plan_ttl(Duration::ZERO));
    let ws = Ws::new();
    ws.write("old.txt", "a\n");
    let args = r#"{"path":"old.txt"}"#;
    let planned = plan(&h, &ws, "file_delete", args);
    assert!(planned["expires_at_ms"].as_u64().is_some(), "{planned:#}");
    let token = planned["plan_token"].as_str().unwrap();
    let obs = run(&h, &ws, "file_delete", args, "k", token);
    let err = expect_error(&obs, "error", "stale_plan");
    assert!(
        err["message"].as_str().unwrap().contains("expired"),
        "{err}"
    );
    assert!(ws.path("old.txt").exists());
}

#[test]
fn a_plan_for_a_directory_goes_stale_when_the_directory_changes() {
    let db = tempfile::tempdir().unwrap();
    let h = host(records(&db));
    let ws = Ws::new();
    ws.write("box/a.txt", "alpha\n");
    ws.write("box/deep/b.txt", "beta\n");
    let args = r#"{"path":"box"}"#;
    let planned = plan(&h, &ws, "clear_dir", args);
    let digest = planned["targets"][0]["sha256"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(digest.starts_with("dir:"), "{planned:#}");
    let token = planned["plan_token"].as_str().unwrap().to_string();

    // A file added: stale, nothing deleted.
    ws.write("box/new.txt", "surprise\n");
    let obs = run(&h, &ws, "clear_dir", args, "c1", &token);
    expect_error(&obs, "error", "stale_plan");
    assert!(ws.path("box/a.txt").exists());

    // Planned again; then a nested file changes, same size: stale.
    let token = plan(&h, &ws, "clear_dir", args)["plan_token"]
        .as_str()
        .unwrap()
        .to_string();
    ws.write("box/deep/b.txt", "BETA\n");
    expect_error(
        &run(&h, &ws, "clear_dir", args, "c2", &token),
        "error",
        "stale_plan",
    );
    assert!(ws.path("box/a.txt").exists());

    // Planned again, unchanged: the approved call runs.
    let token = plan(&h, &ws, "clear_dir", args)["plan_token"]
        .as_str()
        .unwrap()
        .to_string();
    let out = run(&h, &ws, "clear_dir", args, "c3", &token);
    assert_eq!(
        expect_ok(&out)["deleted"],
        serde_json::json!(["a.txt", "new.txt"])
    );
    assert!(ws.path("box/deep/b.txt").exists());
}
