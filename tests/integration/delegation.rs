//! Delegation for real: `max_calls` and `budget_fuel` counted in the record
//! store (across processes, across hosts on PostgreSQL, under concurrency),
//! revocation reaching descendants, and `cap list`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use toolhost::capability::{Caveat, RootKey, Token};
use toolhost::catalog::Source;
use toolhost::effects::Records;
use toolhost::idempotency::{postgres::PostgresStore, sqlite::SqliteStore, Store};
use toolhost::paths::Workspace;
use toolhost::pipeline::{CallOptions, Host};
use toolhost::session::Session;

use crate::support::*;

const KEY_HEX: &str = "7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e";

fn key() -> RootKey {
    RootKey::from_hex(KEY_HEX).unwrap()
}

/// The `toolhost` binary with the test key, a store and a workspace.
fn toolhost(store: &str, cwd: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_toolhost"))
        .arg("--store")
        .arg(store)
        .args(args)
        .current_dir(cwd)
        .env(
            "TOOLHOST_CACHE_DIR",
            repo_root().join("target/test-compile-cache"),
        )
        .env("TOOLHOST_ROOT_KEY", KEY_HEX)
        .env_remove("TOOLHOST_TOKEN")
        .output()
        .expect("running toolhost")
}

fn stdout(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone())
        .unwrap()
        .trim()
        .to_string()
}

/// One `toolhost call file_view` process under `token`: its observation.
fn call_process(store: &str, ws: &Ws, token: &str) -> Value {
    let out = toolhost(
        store,
        ws.dir.path(),
        &[
            "call",
            "file_view",
            r#"{"path":"a/x.txt","offset":1,"limit":1}"#,
            "--token",
            token,
        ],
    );
    let obs: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not an observation ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert_valid_observation(&obs);
    let code = out.status.code();
    match obs["status"].as_str() {
        Some("ok") => assert_eq!(code, Some(0)),
        Some("denied") => assert_eq!(code, Some(3)),
        other => panic!("unexpected status {other:?}: {obs}"),
    }
    obs
}

#[track_caller]
fn assert_spent<'a>(obs: &'a Value, caveat: &str, allowed: &str) -> &'a Value {
    let err = expect_error(obs, "denied", "denied");
    assert_eq!(err["details"]["caveat"], caveat, "{err}");
    assert_eq!(err["details"]["allowed"], allowed, "{err}");
    assert_eq!(err["details"]["left"], 0, "{err}");
    err
}

fn workspace() -> Ws {
    let ws = Ws::new();
    ws.write("a/x.txt", "one\ntwo\n");
    ws
}

fn sqlite_store(dir: &Path) -> String {
    dir.join("records.sqlite").display().to_string()
}

#[test]
fn a_child_budget_holds_across_processes_and_drains_its_parent() {
    let ws = workspace();
    let state = tempfile::tempdir().unwrap();
    let store = sqlite_store(state.path());
    let dir = ws.dir.path();
    let parent = stdout(&toolhost(
        &store,
        dir,
        &[
            "cap",
            "mint",
            "--tool",
            "file_view",
            "--read",
            "a",
            "--max-calls",
            "5",
        ],
    ));
    let child = stdout(&toolhost(
        &store,
        dir,
        &["cap", "attenuate", &parent, "--max-calls", "3"],
    ));
    // Three processes, three calls: the child's budget.
    for _ in 0..3 {
        expect_ok(&call_process(&store, &ws, &child));
    }
    // The fourth, in a fourth process, is denied naming the caveat.
    let obs = call_process(&store, &ws, &child);
    let err = assert_spent(&obs, "max_calls", "3");
    assert_eq!(err["details"]["used"], 3, "{err}");
    // The parent's count includes the child's three: two calls are left.
    expect_ok(&call_process(&store, &ws, &parent));
    expect_ok(&call_process(&store, &ws, &parent));
    let obs = call_process(&store, &ws, &parent);
    assert_spent(&obs, "max_calls", "5");
    // `cap list` shows both, with their calls (the parent's include the
    // child's) and their state.
    let list: Value =
        serde_json::from_str(&stdout(&toolhost(&store, dir, &["cap", "list"]))).unwrap();
    let list = list.as_array().unwrap();
    assert_eq!(list.len(), 2, "{list:?}");
    assert_eq!(list[0]["via"], "mint");
    assert_eq!(list[1]["via"], "attenuate");
    assert_eq!(list[1]["parent"], list[0]["id"]);
    assert_eq!(list[0]["calls"], 5, "{list:?}");
    assert_eq!(list[1]["calls"], 3, "{list:?}");
    assert_eq!(list[0]["state"], "active");
}

/// A host with the reference tools whose records (and so budgets) live in
/// `store`.
fn host_on(store: Arc<dyn Store>) -> Host {
    host_with(&[Source::reference()]).with_records(Records::new(store, b"delegation-test"))
}

fn session(ws: &Ws, token: &str) -> Session {
    Session::open(&key(), token, Workspace::open(ws.dir.path()).unwrap()).unwrap()
}

fn view(host: &Host, s: &Session) -> Value {
    let obs = serde_json::to_value(host.call_in(
        s,
        "file_view",
        r#"{"path":"a/x.txt","offset":1,"limit":1}"#,
        &CallOptions::default(),
    ))
    .unwrap();
    assert_valid_observation(&obs);
    obs
}

fn caveats(list: &[&str]) -> Vec<Caveat> {
    list.iter().map(|c| c.parse().unwrap()).collect()
}

/// 50 calls from 50 threads spread over two hosts (each with its own store
/// connection) against `max_calls=10`: exactly 10 run.
fn fifty_against_ten(hosts: [Host; 2]) {
    let ws = workspace();
    let token = Token::mint(
        &key(),
        &caveats(&["tool=file_view", "right=read", "read=a", "max_calls=10"]),
    )
    .unwrap()
    .encode();
    let statuses: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..50)
            .map(|i| {
                let (host, ws, token) = (&hosts[i % 2], &ws, &token);
                s.spawn(move || {
                    let obs = view(host, &session(ws, token));
                    obs["status"].as_str().unwrap().to_string()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let ok = statuses.iter().filter(|s| *s == "ok").count();
    let denied = statuses.iter().filter(|s| *s == "denied").count();
    assert_eq!((ok, denied), (10, 40), "{statuses:?}");
}

#[test]
fn fifty_concurrent_calls_on_one_sqlite_file_against_max_calls_ten_run_ten() {
    let state = tempfile::tempdir().unwrap();
    let path = PathBuf::from(sqlite_store(state.path()));
    let open = || -> Host {
        host_on(Arc::new(
            SqliteStore::open(&path, Duration::from_secs(3600)).unwrap(),
        ))
    };
    fifty_against_ten([open(), open()]);
}

fn postgres_url() -> Option<String> {
    let url = std::env::var("TOOLHOST_TEST_POSTGRES")
        .unwrap_or_else(|_| "postgres://toolhost:toolhost@127.0.0.1:5432/toolhost".into());
    match PostgresStore::connect(&url, Duration::from_secs(3600)) {
        Ok(_) => Some(url),
        Err(e) if std::env::var_os("CI").is_some() => {
            panic!("PostgreSQL must be reachable under CI ({url}): {e}")
        }
        Err(e) => {
            eprintln!("\n!!!!! SKIPPING PostgreSQL test: {url}: {e}\n");
            None
        }
    }
}

#[test]
fn fifty_concurrent_calls_on_two_hosts_sharing_postgres_against_max_calls_ten_run_ten() {
    let Some(url) = postgres_url() else {
        return;
    };
    let open = || -> Host {
        host_on(Arc::new(
            PostgresStore::connect(&url, Duration::from_secs(3600)).unwrap(),
        ))
    };
    fifty_against_ten([open(), open()]);
}

#[test]
fn two_hosts_on_postgres_share_a_chain_budget() {
    let Some(url) = postgres_url() else {
        return;
    };
    let ws = workspace();
    let open = || -> Host {
        host_on(Arc::new(
            PostgresStore::connect(&url, Duration::from_secs(3600)).unwrap(),
        ))
    };
    let (a, b) = (open(), open());
    let parent = Token::mint(
        &key(),
        &caveats(&["tool=file_view", "right=read", "read=a", "max_calls=4"]),
    )
    .unwrap();
    let child = parent.delegate(&caveats(&["max_calls=2"])).unwrap();
    let (p, c) = (
        session(&ws, &parent.encode()),
        session(&ws, &child.encode()),
    );
    expect_ok(&view(&a, &c));
    expect_ok(&view(&b, &c));
    assert_spent(&view(&a, &c), "max_calls", "2");
    expect_ok(&view(&b, &p));
    expect_ok(&view(&a, &p));
    assert_spent(&view(&b, &p), "max_calls", "4");
}

#[test]
fn a_fuel_budget_stops_the_chain() {
    let ws = workspace();
    let state = tempfile::tempdir().unwrap();
    let path = PathBuf::from(sqlite_store(state.path()));
    let host = host_on(Arc::new(
        SqliteStore::open(&path, Duration::from_secs(3600)).unwrap(),
    ));
    // What one call consumes, measured.
    let probe = Token::mint(
        &key(),
        &caveats(&["tool=file_view", "right=read", "read=a"]),
    )
    .unwrap();
    let one = view(&host, &session(&ws, &probe.encode()));
    let per_call = one["usage"]["fuel_consumed"].as_u64().unwrap();
    assert!(per_call > 0, "{one}");
    // A parent with fuel for two and a half calls; a child of it.
    let budget = per_call * 5 / 2;
    let parent = Token::mint(
        &key(),
        &caveats(&[
            "tool=file_view",
            "right=read",
            "read=a",
            &format!("budget_fuel={budget}"),
        ]),
    )
    .unwrap();
    let child = parent.delegate(&[]).unwrap();
    let (p, c) = (
        session(&ws, &parent.encode()),
        session(&ws, &child.encode()),
    );
    expect_ok(&view(&host, &c));
    expect_ok(&view(&host, &p));
    // The third call gets only the half call of fuel left, and runs out.
    let obs = view(&host, &c);
    expect_error(&obs, "error", "fuel_exhausted");
    // Nothing is left for anyone in the chain.
    let obs = view(&host, &p);
    let err = assert_spent(&obs, "budget_fuel", &budget.to_string());
    assert!(
        err["message"].as_str().unwrap().contains("budget_fuel="),
        "{err}"
    );
    assert_spent(&view(&host, &c), "budget_fuel", &budget.to_string());
}

#[test]
fn revoking_a_parent_cuts_off_its_children_within_a_second() {
    let ws = workspace();
    let state = tempfile::tempdir().unwrap();
    let store = sqlite_store(state.path());
    let host = host_on(Arc::new(
        SqliteStore::open(&store, Duration::from_secs(3600)).unwrap(),
    ));
    let parent = Token::mint(
        &key(),
        &caveats(&["tool=file_view", "right=read", "read=a"]),
    )
    .unwrap();
    let child = parent.delegate(&[]).unwrap();
    let sibling_root = Token::mint(
        &key(),
        &caveats(&["tool=file_view", "right=read", "read=a"]),
    )
    .unwrap();
    let c = session(&ws, &child.encode());
    let other = session(&ws, &sibling_root.encode());
    expect_ok(&view(&host, &c));
    // Another process revokes the parent, by token.
    let out = stdout(&toolhost(
        &store,
        ws.dir.path(),
        &["cap", "revoke", &parent.encode()],
    ));
    let out: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(out["revoked"], parent.token_id().to_string());
    assert_eq!(out["already_revoked"], false);
    // Within the staleness bound the child is denied, naming the revoked
    // ancestor.
    std::thread::sleep(toolhost::ledger::REVOCATION_STALENESS + Duration::from_millis(100));
    let obs = view(&host, &c);
    let err = expect_error(&obs, "denied", "denied");
    assert_eq!(err["details"]["caveat"], "id", "{err}");
    assert_eq!(err["details"]["revoked"], parent.token_id().to_string());
    assert_eq!(err["details"]["token"], child.token_id().to_string());
    assert!(
        err["message"].as_str().unwrap().contains("revoked"),
        "{err}"
    );
    // A new session on the child, or a re-attenuation of it, is denied too.
    let again = child.attenuate(&caveats(&["tool=file_view"])).unwrap();
    expect_error(
        &view(&host, &session(&ws, &again.encode())),
        "denied",
        "denied",
    );
    // Unrelated tokens are not touched.
    expect_ok(&view(&host, &other));
    // Revoking by id, again: already revoked.
    let out = stdout(&toolhost(
        &store,
        ws.dir.path(),
        &["cap", "revoke", &parent.token_id().to_string()],
    ));
    assert!(out.contains("\"already_revoked\": true"), "{out}");
    // Garbage is refused clearly.
    let out = toolhost(&store, ws.dir.path(), &["cap", "revoke", "nope"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("neither a token id"),
        "{out:?}"
    );
}
