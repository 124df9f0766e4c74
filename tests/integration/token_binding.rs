//! Where a token may be used: an `aud` caveat binds it to workspaces, a
//! `store` caveat (added by `cap mint` to every budgeted token, and to
//! every token minted with a named store) binds it to the record store that
//! counts its budgets and keeps its revocations. A delegated child expires
//! within an hour unless it asks for another expiry.

use std::path::Path;
use std::process::Output;

use serde_json::{json, Value};

use crate::mcp::{observation_of, Setup, StdioServer};
use crate::support::*;

fn toolhost(args: &[&str], cwd: &Path) -> Output {
    toolhost_command(args, cwd)
        .env_remove("TOOLHOST_STORE")
        .output()
        .expect("running toolhost")
}

fn minted(args: &[&str], cwd: &Path) -> String {
    let out = toolhost(&[&["cap", "mint"], args].concat(), cwd);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

fn view(token: &str, ws: &Path, store: &Path, cwd: &Path) -> (Value, String) {
    let out = toolhost(
        &[
            "call",
            "file_view",
            r#"{"path":"a.txt"}"#,
            "--token",
            token,
            "--workspace",
            &ws.display().to_string(),
            "--store",
            &store.display().to_string(),
        ],
        cwd,
    );
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let obs = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (obs, stderr)
}

/// A token minted for one workspace is refused by a host serving another,
/// though the key is the same; attenuating an unbound token binds it.
#[test]
fn a_token_for_one_workspace_is_refused_by_another() {
    let a = Ws::new();
    let b = Ws::new();
    a.write("a.txt", "in a\n");
    b.write("a.txt", "in b\n");
    let state = tempfile::tempdir().unwrap();
    let store = state.path().join("records.sqlite");
    let here = state.path();
    let a_dir = a.dir.path().display().to_string();
    let s = store.display().to_string();
    let token = minted(
        &[
            "--tool",
            "*",
            "--read",
            ".",
            "--audience",
            &a_dir,
            "--store",
            &s,
        ],
        here,
    );
    let (obs, _) = view(&token, a.dir.path(), &store, here);
    assert_eq!(obs["status"], "ok", "{obs}");
    let (obs, err) = view(&token, b.dir.path(), &store, here);
    assert!(obs["status"] != "ok", "{obs}");
    assert!(
        err.contains("is for the workspace") || obs.to_string().contains("is for the workspace"),
        "{obs} {err}"
    );
    // Unbound, it works in both; an appended audience binds it.
    let open = minted(&["--tool", "*", "--read", ".", "--store", &s], here);
    assert_eq!(view(&open, b.dir.path(), &store, here).0["status"], "ok");
    let out = toolhost(&["cap", "attenuate", &open, "--audience", &a_dir], here);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bound = String::from_utf8(out.stdout).unwrap().trim().to_string();
    assert_eq!(view(&bound, a.dir.path(), &store, here).0["status"], "ok");
    assert!(view(&bound, b.dir.path(), &store, here).0["status"] != "ok");
    // A bound token cannot be re-bound elsewhere.
    let b_dir = b.dir.path().display().to_string();
    let out = toolhost(&["cap", "attenuate", &token, "--audience", &b_dir], here);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("audience"));
}

/// A budgeted token is bound to the store it was minted on: deleting the
/// store, or pointing `--store` at another one, refuses it instead of
/// resetting its budget.
#[test]
fn a_budgeted_token_is_refused_by_another_or_a_recreated_store() {
    let ws = Ws::new();
    ws.write("a.txt", "x\n");
    let state = tempfile::tempdir().unwrap();
    let store = state.path().join("records.sqlite");
    let here = state.path();
    let token = minted(
        &[
            "--tool",
            "*",
            "--read",
            ".",
            "--max-calls",
            "2",
            "--store",
            &store.display().to_string(),
        ],
        here,
    );
    let inspect = toolhost(&["cap", "inspect", &token], here);
    assert!(String::from_utf8_lossy(&inspect.stdout).contains("store="));
    for _ in 0..2 {
        assert_eq!(view(&token, ws.dir.path(), &store, here).0["status"], "ok");
    }
    let (obs, _) = view(&token, ws.dir.path(), &store, here);
    assert_eq!(obs["error"]["details"]["caveat"], "max_calls", "{obs}");
    // Another store: refused, not a fresh budget.
    let other = state.path().join("other.sqlite");
    let (obs, _) = view(&token, ws.dir.path(), &other, here);
    let err = expect_error(&obs, "denied", "denied");
    assert_eq!(err["details"]["caveat"], "store", "{err}");
    // The store deleted and recreated: refused too.
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", store.display()));
    }
    let (obs, _) = view(&token, ws.dir.path(), &store, here);
    let err = expect_error(&obs, "denied", "denied");
    assert_eq!(err["details"]["caveat"], "store", "{err}");
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains("bound to the record store"),
        "{err}"
    );
}

/// A revoked token stays refused when the store is swapped: minted with a
/// named store, it is bound to it.
#[test]
fn a_revocation_is_not_forgotten_by_swapping_the_store() {
    let ws = Ws::new();
    ws.write("a.txt", "x\n");
    let state = tempfile::tempdir().unwrap();
    let store = state.path().join("records.sqlite");
    let s = store.display().to_string();
    let here = state.path();
    let token = minted(&["--tool", "*", "--read", ".", "--store", &s], here);
    let out = toolhost(&["cap", "revoke", &token, "--store", &s], here);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (obs, _) = view(&token, ws.dir.path(), &store, here);
    assert_eq!(
        expect_error(&obs, "denied", "denied")["details"]["caveat"],
        "id"
    );
    let fresh = state.path().join("fresh.sqlite");
    let (obs, _) = view(&token, ws.dir.path(), &fresh, here);
    assert_eq!(
        expect_error(&obs, "denied", "denied")["details"]["caveat"],
        "store"
    );
}

/// `delegate` without `expires_in_s`: the child expires within the hour.
#[test]
fn a_delegated_child_expires_within_an_hour_by_default() {
    let setup = Setup::new(&[]);
    let mut s = StdioServer::initialized(&setup, &["--allow-delegate"]);
    let reply = s.call(
        1,
        "delegate",
        json!({"tools": ["file_view"], "read": ["pub"]}),
    );
    let obs = observation_of(&reply);
    assert_eq!(obs["status"], "ok", "{obs}");
    let expires = obs["output"]["grant"]["expires_at"]
        .as_u64()
        .unwrap_or_else(|| panic!("the child expires: {obs}"));
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert!(
        expires > now && expires <= now + 3_600,
        "{expires} vs {now}"
    );
}
