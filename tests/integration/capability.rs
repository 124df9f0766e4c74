//! Capabilities end to end: a session bound to a token decides what the
//! caller sees and what each call's sandbox holds.

use crate::support::*;
use serde_json::Value;
use toolhost::{Call, CallOptions, Caveat, Host, RootKey, Session, Token, Workspace};

fn key() -> RootKey {
    RootKey::from_hex(&"ab".repeat(32)).unwrap()
}

fn caveats(list: &[&str]) -> Vec<Caveat> {
    list.iter().map(|c| c.parse().unwrap()).collect()
}

fn session(ws: &Ws, token: &Token) -> Session {
    Session::open(
        &key(),
        &token.encode(),
        Workspace::open(ws.dir.path()).unwrap(),
    )
    .unwrap()
}

fn call_in(host: &Host, s: &Session, tool: &str, args: &str) -> Value {
    run_in(host, s, tool, args, &keyed(&CallOptions::default()))
}

fn visible(host: &Host, s: &Session) -> Vec<String> {
    host.visible_tools(s)
        .map(|t| t.descriptor.name.clone())
        .collect()
}

#[test]
fn three_level_delegation_each_level_sees_exactly_its_tools() {
    let ws = Ws::new();
    ws.write("src/a.txt", "alpha\n");
    ws.write("src/gen/b.txt", "beta\n");
    let h = reference_host();
    let agent = Token::mint(
        &key(),
        &caveats(&[
            "tool=file_view,file_edit,grep_search",
            "right=read,write",
            "read=src",
            "write=src",
        ]),
    )
    .unwrap();
    let a = session(&ws, &agent);
    assert_eq!(visible(h, &a), ["file_edit", "file_view", "grep_search"]);

    let (sub, sub_text) = a
        .delegate(&caveats(&["tool=file_view,grep_search", "right=read"]))
        .unwrap();
    assert_eq!(visible(h, &sub), ["file_view", "grep_search"]);
    // The delegated token verifies with the host key on its own.
    let sub_again =
        Session::open(&key(), &sub_text, Workspace::open(ws.dir.path()).unwrap()).unwrap();
    assert_eq!(visible(h, &sub_again), ["file_view", "grep_search"]);

    let (subsub, _) = sub
        .delegate(&caveats(&["tool=file_view", "read=src/gen"]))
        .unwrap();
    assert_eq!(visible(h, &subsub), ["file_view"]);

    // Each level can do exactly what it holds.
    expect_ok(&call_in(
        h,
        &a,
        "file_edit",
        r#"{"path":"src/a.txt","old_str":"alpha","new_str":"ALPHA"}"#,
    ));
    let obs = call_in(
        h,
        &sub,
        "file_edit",
        r#"{"path":"src/a.txt","old_str":"ALPHA","new_str":"x"}"#,
    );
    expect_error(&obs, "error", "unknown_tool");
    expect_ok(&call_in(
        h,
        &subsub,
        "file_view",
        r#"{"path":"src/gen/b.txt","offset":1,"limit":1}"#,
    ));
    let obs = call_in(
        h,
        &subsub,
        "file_view",
        r#"{"path":"src/a.txt","offset":1,"limit":1}"#,
    );
    let err = expect_error(&obs, "denied", "denied");
    assert_eq!(err["details"]["caveat"], "read", "{err}");
    assert_eq!(ws.read("src/a.txt"), b"ALPHA\n");
}

#[test]
fn widening_is_refused_naming_the_component() {
    let ws = Ws::new();
    std::fs::create_dir_all(ws.path("src")).unwrap();
    let t = Token::mint(
        &key(),
        &caveats(&[
            "tool=file_view",
            "right=read",
            "read=src",
            "fuel=1000",
            "expires=4000000000",
        ]),
    )
    .unwrap();
    let s = session(&ws, &t);
    for (c, component) in [
        ("tool=file_edit", "tool"),
        ("right=write", "right"),
        ("read=docs", "read"),
        ("fuel=2000", "fuel"),
        ("expires=4000000001", "expires"),
    ] {
        let err = s
            .delegate(&caveats(&[c]))
            .err()
            .unwrap_or_else(|| panic!("{c} widened the token"));
        assert_eq!(
            err.component().map(|k| k.as_str()),
            Some(component),
            "{c}: {err}"
        );
    }
}

#[test]
fn prefixes_match_whole_segments_and_symlinks_cannot_leave_them() {
    let ws = Ws::new();
    ws.write("src/a.txt", "in\n");
    ws.write("src2/b.txt", "out\n");
    ws.write("etc/c.txt", "out\n");
    std::os::unix::fs::symlink(ws.path("etc/c.txt"), ws.path("src/link")).unwrap();
    let h = reference_host();
    let s = session(
        &ws,
        &Token::mint(&key(), &caveats(&["tool=*", "right=read", "read=src"])).unwrap(),
    );
    expect_ok(&call_in(
        h,
        &s,
        "file_view",
        r#"{"path":"src/a.txt","offset":1,"limit":1}"#,
    ));
    for p in ["src2/b.txt", "src/../etc/c.txt", "src/link"] {
        let obs = call_in(
            h,
            &s,
            "file_view",
            &format!(r#"{{"path":"{p}","offset":1,"limit":1}}"#),
        );
        expect_error(&obs, "denied", "denied");
        assert_eq!(obs["usage"]["fuel_consumed"], 0, "{p}: the plugin ran");
    }
}

#[test]
fn a_read_only_tool_cannot_write_even_with_a_write_granting_token() {
    let ws = Ws::new();
    ws.write("data/f.txt", "original");
    let h = hostile_host();
    let s = session(
        &ws,
        &Token::mint(
            &key(),
            &caveats(&["tool=*", "right=read,write", "write=data"]),
        )
        .unwrap(),
    );
    let obs = call_in(
        h,
        &s,
        "write_attempts_read_only",
        r#"{"path":"data/f.txt"}"#,
    );
    let out = expect_ok(&obs);
    for a in out["attempts"].as_array().unwrap() {
        assert_eq!(a["ok"], false, "a read-only tool wrote: {a}");
    }
    assert_eq!(ws.read("data/f.txt"), b"original");
    // The same token lets a tool that declares writes write.
    let obs = call_in(h, &s, "write_attempts", r#"{"path":"data/f.txt"}"#);
    assert!(expect_ok(&obs)["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .any(|a| a["ok"] == true));
}

#[test]
fn expired_tokens_and_used_up_sessions_are_denied_before_running() {
    let ws = Ws::new();
    ws.write("a/x.txt", "x\n");
    let h = reference_host();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    // Expired at mint time: verification refuses it.
    let expired = Token::mint(
        &key(),
        &caveats(&["tool=*", &format!("expires={}", now - 10)]),
    )
    .unwrap();
    assert!(Session::open(
        &key(),
        &expired.encode(),
        Workspace::open(ws.dir.path()).unwrap()
    )
    .is_err());

    // Expires while the session is open: the call is denied, naming expiry.
    let soon = Token::mint(
        &key(),
        &caveats(&[
            "tool=*",
            "right=read",
            "read=a",
            &format!("expires={}", now + 2),
        ]),
    )
    .unwrap();
    let s = session(&ws, &soon);
    let (child, _) = s.delegate(&caveats(&["tool=file_view"])).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(3100));
    for sess in [&s, &child] {
        let obs = call_in(
            h,
            sess,
            "file_view",
            r#"{"path":"a/x.txt","offset":1,"limit":1}"#,
        );
        let err = expect_error(&obs, "denied", "denied");
        assert_eq!(err["details"]["caveat"], "expires", "{err}");
    }

    let limited = Token::mint(
        &key(),
        &caveats(&["tool=*", "right=read", "read=a", "max_calls=2"]),
    )
    .unwrap();
    let s = session(&ws, &limited);
    for _ in 0..2 {
        expect_ok(&call_in(
            h,
            &s,
            "file_view",
            r#"{"path":"a/x.txt","offset":1,"limit":1}"#,
        ));
    }
    let obs = call_in(
        h,
        &s,
        "file_view",
        r#"{"path":"a/x.txt","offset":1,"limit":1}"#,
    );
    assert_eq!(
        expect_error(&obs, "denied", "denied")["details"]["caveat"],
        "max_calls"
    );
}

#[test]
fn the_token_fuel_ceiling_caps_the_call() {
    let ws = Ws::new();
    let s = session(
        &ws,
        &Token::mint(&key(), &caveats(&["tool=*", "fuel=2000000"])).unwrap(),
    );
    let obs = serde_json::to_value(hostile_host().run(
        &s,
        Call::new(
            "spin_forever",
            "{}",
            &CallOptions {
                fuel: Some(u64::MAX / 2),
                timeout_ms: Some(20_000),
                ..CallOptions::default()
            },
        ),
    ))
    .unwrap();
    expect_error(&obs, "error", "fuel_exhausted");
    assert!(obs["usage"]["fuel_consumed"].as_u64().unwrap() <= 2_000_000);
}

#[test]
fn forged_and_tampered_tokens_are_rejected() {
    let ws = Ws::new();
    let good = Token::mint(
        &key(),
        &caveats(&["tool=file_view", "right=read", "read=src"]),
    )
    .unwrap()
    .encode();
    let other_key = RootKey::from_hex(&"cd".repeat(32)).unwrap();
    let forged = Token::mint(
        &other_key,
        &caveats(&["tool=*", "right=read,write", "write=."]),
    )
    .unwrap()
    .encode();
    let open = |t: &str| Session::open(&key(), t, Workspace::open(ws.dir.path()).unwrap());
    assert!(open(&good).is_ok());
    assert!(open(&forged).is_err());
    let mut bytes = good.clone().into_bytes();
    let mid = bytes.len() / 2;
    bytes[mid] = if bytes[mid] == b'A' { b'B' } else { b'A' };
    assert!(open(&String::from_utf8(bytes).unwrap()).is_err());
    assert!(open("").is_err());
}
