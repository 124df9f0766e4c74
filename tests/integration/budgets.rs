//! `max_calls` budgets belong to the token chain, not to a session or to a
//! token's text: attenuating a token, opening a new session on it, or
//! pushing it out of the MCP server's session cache cannot reset them, and
//! plans count as calls.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use toolhost::{
    Call, CallOptions, Caveat, EffectGuard, Host, RootKey, Session, Source, Token, Workspace,
};
use toolhost_store::SqliteStore;

use crate::mcp::{mint, observation_of, stateless_as, HttpServer, Setup};
use crate::support::*;

fn key() -> RootKey {
    RootKey::from_hex(&"5a".repeat(32)).unwrap()
}

fn caveats(list: &[&str]) -> Vec<Caveat> {
    list.iter().map(|c| c.parse().unwrap()).collect()
}

fn open(ws: &Ws, token: &str) -> Session {
    Session::open(&key(), token, Workspace::open(ws.dir.path()).unwrap()).unwrap()
}

fn view(host: &Host, s: &Session) -> Value {
    let obs = serde_json::to_value(host.run(
        s,
        Call::new(
            "file_view",
            r#"{"path":"a/x.txt","offset":1,"limit":1}"#,
            &CallOptions::default(),
        ),
    ))
    .unwrap();
    assert_valid_observation(&obs);
    obs
}

#[track_caller]
fn assert_out_of_calls(obs: &Value) -> &Value {
    let err = expect_error(obs, "denied", "denied");
    assert_eq!(err["details"]["caveat"], "max_calls", "{err}");
    assert_eq!(err["details"]["left"], 0, "{err}");
    assert!(
        err["message"].as_str().unwrap().contains("none is left"),
        "{err}"
    );
    err
}

#[test]
fn max_calls_covers_the_token_and_everything_derived_from_it() {
    let ws = Ws::new();
    ws.write("a/x.txt", "one\n");
    let h = reference_host();
    let token = Token::mint(
        &key(),
        &caveats(&["tool=file_view", "right=read", "read=a", "max_calls=2"]),
    )
    .unwrap();
    let text = token.encode();

    // Two sessions on the same text share the budget.
    expect_ok(&view(h, &open(&ws, &text)));
    expect_ok(&view(h, &open(&ws, &text)));
    assert_out_of_calls(&view(h, &open(&ws, &text)));

    // A re-attenuated token (new text, no key needed) carries the spent
    // caveat: it is out of calls too, even with a fresh max_calls of its own.
    let again = token.attenuate(&caveats(&["max_calls=2"])).unwrap();
    let err = assert_out_of_calls(&view(h, &open(&ws, &again.encode()))).clone();
    assert_eq!(err["details"]["allowed"], "2");
    assert_eq!(
        err["details"]["position"], 4,
        "the spent caveat is the 4th of the chain: {err}"
    );

    // A delegated session too.
    let parent = open(&ws, &text);
    let (child, _) = parent.delegate(&caveats(&["max_calls=1"])).unwrap();
    assert_out_of_calls(&view(h, &child));
}

#[test]
fn a_child_budget_counts_against_its_parent_and_not_the_reverse() {
    let ws = Ws::new();
    ws.write("a/x.txt", "one\n");
    let h = reference_host();
    let parent = Token::mint(
        &key(),
        &caveats(&["tool=file_view", "right=read", "read=a", "max_calls=3"]),
    )
    .unwrap();
    let child = parent.attenuate(&caveats(&["max_calls=1"])).unwrap();
    let (p, c) = (open(&ws, &parent.encode()), open(&ws, &child.encode()));
    expect_ok(&view(h, &c));
    // The child's own caveat is spent; the refused call counted nothing.
    let err = assert_out_of_calls(&view(h, &c)).clone();
    assert_eq!(err["details"]["allowed"], "1", "{err}");
    // The parent had 3: one went to the child, two are left.
    expect_ok(&view(h, &p));
    expect_ok(&view(h, &p));
    assert_out_of_calls(&view(h, &p));
}

#[test]
fn plans_count_against_max_calls_like_calls() {
    let ws = Ws::new();
    ws.write("old.txt", "bye\n");
    let db = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(db.path().join("r.sqlite"), Duration::from_secs(3600)).unwrap();
    let h = host_with(&[Source::reference()]).with_records(EffectGuard::new(Arc::new(store), b"k"));
    let token = Token::mint(
        &key(),
        &caveats(&[
            "tool=file_delete",
            "right=read,write",
            "write=.",
            "max_calls=1",
        ]),
    )
    .unwrap();
    let s = open(&ws, &token.encode());
    let plan = serde_json::to_value(
        h.run(
            &s,
            Call::new(
                "file_delete",
                r#"{"path":"old.txt"}"#,
                &CallOptions::default(),
            )
            .plan(),
        ),
    )
    .unwrap();
    expect_ok(&plan);
    // The plan used the only call: the approved call itself is refused.
    let obs = serde_json::to_value(h.run(
        &s,
        Call::new(
            "file_delete",
            r#"{"path":"old.txt"}"#,
            &CallOptions {
                idempotency: Some(toolhost::KeySource::Explicit("del-1".into())),
                plan_token: plan["output"]["plan_token"].as_str().map(str::to_string),
                ..CallOptions::default()
            },
        ),
    ))
    .unwrap();
    assert_out_of_calls(&obs);
    assert!(ws.path("old.txt").exists());
}

/// Over `serve --http`: a token re-attenuated with `toolhost cap attenuate`
/// (no key) and a full session cache both leave the budget as it was.
#[test]
fn http_max_calls_survive_attenuation_and_a_full_session_cache() {
    let setup = Setup::new(&[]);
    let key_file = setup.state.path().join("root.key");
    let limited = mint(
        &key_file,
        &["--tool", "file_view", "--read", "pub", "--max-calls", "2"],
    );
    let broad = mint(&key_file, &["--tool", "file_view", "--read", "pub"]);
    let server = HttpServer::start(&setup, &["--require-token"]);
    let attenuate = |token: &str| -> String {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_toolhost"))
            .args(["cap", "attenuate", token, "--max-calls", "2"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    let mut id = 0;
    let mut call = |token: &str| -> Value {
        id += 1;
        let reply = stateless_as(
            &server,
            Some(token),
            id,
            "tools/call",
            json!({"name": "file_view", "arguments": {"path": "pub/a.txt"}}),
        )
        .reply();
        observation_of(&reply)
    };
    expect_ok(&call(&limited));
    expect_ok(&call(&attenuate(&limited)));
    // Eight more attempts, each under fresh text: all refused.
    for _ in 0..8 {
        assert_out_of_calls(&call(&attenuate(&limited)));
    }

    // Push the limited token out of the session cache with more distinct
    // tokens than it holds (1,024); its budget stays spent.
    let broad = Token::decode(&broad).unwrap();
    for i in 0..1100 {
        let other = broad
            .attenuate(&caveats(&[&format!("fuel={}", 1_000_000_000 + i)]))
            .unwrap();
        let list = stateless_as(
            &server,
            Some(&other.encode()),
            100_000 + i as i64,
            "tools/list",
            json!({}),
        );
        assert_eq!(list.status, 200, "{}", list.body);
    }
    assert_out_of_calls(&call(&limited));
}
