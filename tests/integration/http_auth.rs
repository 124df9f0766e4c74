//! Who may reach `serve --http`: `/metrics` behind the same header checks
//! as `/mcp` and the `metrics` right, revoked tokens refused on every
//! request, and session allowances a delegated child cannot take from its
//! root. Real server processes, raw sockets.

use std::io::{Read, Write};
use std::time::Duration;

use serde_json::{json, Value};

use crate::mcp::{mint, observation_of, open_session, stateless_as, HttpServer, Response, Setup};

/// A GET of `path` with these headers (a `Host` among them, or
/// `127.0.0.1`): the whole response.
fn get(server: &HttpServer, path: &str, headers: &[(&str, &str)]) -> Response {
    let mut s = server.connect();
    let mut req = format!("GET {path} HTTP/1.1\r\nConnection: close\r\n");
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        req.push_str("Host: 127.0.0.1\r\n");
    }
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    Response::parse(&raw)
}

fn metrics_as(server: &HttpServer, token: Option<&str>) -> Response {
    let auth = token.map(|t| format!("Bearer {t}"));
    let headers: Vec<(&str, &str)> = auth.iter().map(|a| ("Authorization", a.as_str())).collect();
    get(server, "/metrics", &headers)
}

fn initialize_as(server: &HttpServer, token: &str, id: i64) -> Response {
    let auth = format!("Bearer {token}");
    server.post_json(
        &[("Authorization", &auth)],
        &json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "auth", "version": "1"}}}),
    )
}

/// `toolhost cap …` with the setup's key and store: its stdout.
fn cap(setup: &Setup, args: &[&str]) -> String {
    let out = setup.cap(args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

fn key(setup: &Setup) -> std::path::PathBuf {
    setup.state.path().join("root.key")
}

fn is_metrics_page(r: &Response) -> bool {
    r.status == 200 && r.body.contains("toolhost_journal_entries_total")
}

/// A DNS-rebinding page (a foreign name resolving to 127.0.0.1) or a
/// foreign origin cannot read `/metrics`, any more than `/mcp`.
#[test]
fn http_metrics_refuses_a_rebinding_host_and_a_foreign_origin() {
    let setup = Setup::new(&[]);
    let server = HttpServer::start(&setup, &[]);
    let port = server.port.to_string();
    for host in [
        "evil.example",
        &format!("evil.example:{port}"),
        "127.0.0.1.nip.io",
    ] {
        let r = get(&server, "/metrics", &[("Host", host)]);
        assert_eq!(r.status, 403, "Host {host}: {}", r.body);
        assert!(!r.body.contains("toolhost_"), "{}", r.body);
    }
    for origin in ["http://evil.example", "null", "http://localhost.evil:80"] {
        let r = get(&server, "/metrics", &[("Origin", origin)]);
        assert_eq!(r.status, 403, "Origin {origin}: {}", r.body);
    }
    // The same page from this machine's names and origins.
    let local = format!("localhost:{port}");
    for headers in [
        vec![],
        vec![("Host", local.as_str())],
        vec![("Host", "[::1]")],
        vec![("Origin", "http://localhost:3000")],
    ] {
        let r = get(&server, "/metrics", &headers);
        assert!(is_metrics_page(&r), "{headers:?}: {} {}", r.status, r.body);
    }
    // /mcp is refused the same way (before any other check).
    let r = get(&server, "/mcp", &[("Host", "evil.example")]);
    assert_eq!(r.status, 403, "{}", r.body);
}

/// `/metrics` shows every token's calls: only a token with the `metrics`
/// right reads it; tokens without it get 403, and so does a client
/// without a token under `--require-token`.
#[test]
fn http_metrics_needs_the_metrics_right() {
    let setup = Setup::new(&[]);
    let plain = mint(&key(&setup), &["--tool", "*", "--read", "pub"]);
    let watcher = mint(&key(&setup), &["--right", "metrics"]);
    let both = mint(
        &key(&setup),
        &["--tool", "*", "--read", "pub", "--right", "metrics"],
    );
    // Attenuating away the right drops it.
    let dropped = cap(&setup, &["attenuate", &both, "--right", "read"]);
    let server = HttpServer::start(&setup, &["--require-token"]);
    for (what, token) in [("no right", &plain), ("dropped", &dropped)] {
        let r = metrics_as(&server, Some(token));
        assert_eq!(r.status, 403, "{what}: {}", r.body);
        assert!(r.body.contains("metrics"), "{}", r.body);
    }
    assert_eq!(metrics_as(&server, None).status, 401);
    assert_eq!(metrics_as(&server, Some("not-a-token")).status, 401);
    assert!(is_metrics_page(&metrics_as(&server, Some(&watcher))));
    assert!(is_metrics_page(&metrics_as(&server, Some(&both))));
    // The metrics-only token sees no tool.
    let list = stateless_as(&server, Some(&watcher), 1, "tools/list", json!({})).reply();
    assert_eq!(list["result"]["tools"], json!([]), "{list}");
    drop(server);

    // Without --require-token on loopback, a client without a token reads
    // it (it gets the command-line grants anyway); a token without the
    // right still does not.
    let server = HttpServer::start(&setup, &[]);
    assert!(is_metrics_page(&metrics_as(&server, None)));
    assert_eq!(metrics_as(&server, Some(&plain)).status, 403);
    assert!(is_metrics_page(&metrics_as(&server, Some(&watcher))));
}

/// A revoked token is refused at the door: `initialize`, `tools/list`,
/// a request on a session it opened before, and `/metrics`.
#[test]
fn http_a_revoked_token_is_refused_on_every_request() {
    let setup = Setup::new(&[]);
    let token = mint(
        &key(&setup),
        &["--tool", "*", "--read", "pub", "--right", "metrics"],
    );
    let server = HttpServer::start(&setup, &["--require-token"]);
    let opened = initialize_as(&server, &token, 1);
    assert_eq!(opened.status, 200, "{}", opened.body);
    let session = opened.header("mcp-session-id").unwrap().to_string();
    let list = stateless_as(&server, Some(&token), 2, "tools/list", json!({}));
    assert_eq!(list.status, 200, "{}", list.body);
    assert!(is_metrics_page(&metrics_as(&server, Some(&token))));

    let out: Value = serde_json::from_str(&cap(&setup, &["revoke", &token])).unwrap();
    assert_eq!(out["already_revoked"], false, "{out}");
    std::thread::sleep(toolhost::REVOCATION_STALENESS + Duration::from_millis(200));

    let check = |what: &str, r: Response| {
        assert_eq!(r.status, 401, "{what}: {}", r.body);
        assert!(r.body.contains("revoked"), "{what}: {}", r.body);
        assert!(r.header("www-authenticate").is_some(), "{what}");
    };
    check("initialize", initialize_as(&server, &token, 3));
    check(
        "tools/list",
        stateless_as(&server, Some(&token), 4, "tools/list", json!({})),
    );
    check(
        "tools/call",
        stateless_as(
            &server,
            Some(&token),
            5,
            "tools/call",
            json!({"name": "file_view", "arguments": {"path": "pub/a.txt"}}),
        ),
    );
    let auth = format!("Bearer {token}");
    check(
        "the open session",
        server.post_json(
            &[
                ("Authorization", &auth),
                ("Mcp-Session-Id", &session),
                ("MCP-Protocol-Version", "2025-11-25"),
            ],
            &json!({"jsonrpc": "2.0", "id": 6, "method": "tools/list", "params": {}}),
        ),
    );
    check("/metrics", metrics_as(&server, Some(&token)));
    // Another token of the same key is untouched.
    let other = mint(&key(&setup), &["--tool", "*", "--read", "pub"]);
    assert_eq!(initialize_as(&server, &other, 7).status, 200);
}

/// A delegated child with `max_calls 1` opens every session it may: the
/// root (the orchestrator) still gets its own, and the child's own
/// children get none beyond the child's.
#[test]
fn http_a_child_using_up_its_sessions_leaves_the_root_its_own() {
    let setup = Setup::new(&[]);
    let root = mint(&key(&setup), &["--tool", "*", "--read", "pub"]);
    let child = cap(&setup, &["attenuate", &root, "--max-calls", "1"]);
    let grandchild = cap(&setup, &["attenuate", &child, "--tool", "file_view"]);
    let server = HttpServer::start(
        &setup,
        &["--require-token", "--max-sessions-per-token", "2"],
    );
    for i in 0..2 {
        let r = initialize_as(&server, &child, i);
        assert_eq!(r.status, 200, "child session {i}: {}", r.body);
    }
    let full = initialize_as(&server, &child, 9);
    assert_eq!(full.status, 429, "{}", full.body);
    // The orchestrator's allowance is its own.
    for i in 10..12 {
        let r = initialize_as(&server, &root, i);
        assert_eq!(r.status, 200, "root session {i}: {}", r.body);
    }
    assert_eq!(initialize_as(&server, &root, 12).status, 429);
    // An id appended below the child gets no fresh allowance: the tokens
    // delegated from one root share theirs.
    let r = initialize_as(&server, &grandchild, 13);
    assert_eq!(r.status, 429, "{}", r.body);
    assert!(r.body.contains("delegated"), "{}", r.body);
    // Another root is untouched.
    let other = mint(&key(&setup), &["--tool", "*", "--read", "pub"]);
    assert_eq!(initialize_as(&server, &other, 14).status, 200);
}

/// A session's calls run under the token each request carries. Its owner's
/// plain calls take toolhost's own route; another token naming the same
/// session is left to rmcp's route and gets only its own grant there.
#[test]
fn http_a_session_used_by_another_token_gets_that_tokens_grant_only() {
    let setup = Setup::new(&["tp_conformance"]);
    let owner = mint(&key(&setup), &["--tool", "file_view", "--read", "pub"]);
    let other = mint(&key(&setup), &["--tool", "test_simple_text"]);
    let server = HttpServer::start(&setup, &["--require-token"]);
    let owner_auth = format!("Bearer {owner}");
    let session = open_session(&server, &[("Authorization", &owner_auth)]);
    let view = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "file_view", "arguments": {"path": "pub/a.txt"}}});
    let as_token = |token: &str| {
        let auth = format!("Bearer {token}");
        server.post_json(
            &[
                ("Authorization", &auth),
                ("Mcp-Session-Id", &session),
                ("MCP-Protocol-Version", "2025-11-25"),
            ],
            &view,
        )
    };
    let mine = as_token(&owner);
    assert_eq!(mine.header("content-type"), Some("application/json"));
    assert_eq!(
        observation_of(&mine.reply())["status"],
        "ok",
        "{}",
        mine.body
    );
    let theirs = as_token(&other);
    assert_eq!(theirs.header("content-type"), Some("text/event-stream"));
    let reply = theirs.reply();
    assert_eq!(reply["error"]["code"], -32602, "{reply}");
    assert!(!theirs.body.contains("hello"), "{}", theirs.body);
}

/// Key rotation over two hosts whose key files differ, as during a rolling
/// change (docs/deploy.md): a token of the new key is refused only by a
/// host that does not hold it yet; once every host holds the ring, no host
/// refuses either key's tokens, whichever key each host signs with; the
/// pinned `records` key keeps the shared records' keys the same on hosts
/// whose first keys differ, so a keyed call sent to one host and then to
/// the other runs once.
#[test]
fn http_a_keyring_rotates_across_two_hosts() {
    let (old, new) = ("a1".repeat(32), "b2".repeat(32));
    let pin = format!("records {old}");
    let mut hosts = [Setup::new(&[]), Setup::new(&[])];
    // One record store for both, as a fleet shares one.
    let store = hosts[0].state.path().join("shared.sqlite");
    for h in &mut hosts {
        h.store = Some(store.display().to_string());
    }
    let dir = tempfile::tempdir().unwrap();
    let write_ring = |path: &std::path::Path, lines: &[&str]| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::write(path, format!("{}\n", lines.join("\n"))).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
    };
    for h in &hosts {
        h.ws.write("pub/notes.txt", "hello\n");
    }
    // Tokens minted by an operator with the old key, and with the new one.
    let old_file = dir.path().join("old.key");
    let new_file = dir.path().join("new.key");
    write_ring(&old_file, &[&old]);
    write_ring(&new_file, &[&new, &old]);
    let caveats = ["--tool", "file_*", "--write", "pub"];
    let old_token = mint(&old_file, &caveats);
    let new_token = mint(&new_file, &caveats);
    let call = |server: &HttpServer, token: &str, tool: &str, args: Value, meta: Value| -> Value {
        let r = stateless_as(
            server,
            Some(token),
            1,
            "tools/call",
            json!({"name": tool, "arguments": args, "_meta": meta}),
        );
        if r.status != 200 {
            return json!({"refused": r.status, "body": r.body});
        }
        r.reply()["result"]["_meta"]["dev.toolhost/observation"].clone()
    };
    let read = |server: &HttpServer, token: &str| -> Value {
        let obs = call(
            server,
            token,
            "file_view",
            json!({"path": "pub/notes.txt"}),
            json!({}),
        );
        obs.get("status").cloned().unwrap_or(obs)
    };
    let all_read = |servers: [&HttpServer; 2]| {
        for server in servers {
            for token in [&old_token, &new_token] {
                assert_eq!(read(server, token), "ok");
            }
        }
    };
    let start = |h: &Setup, lines: &[&str]| {
        write_ring(&h.state.path().join("root.key"), lines);
        HttpServer::start(h, &["--require-token"])
    };
    // Step 1, half-way: host 0 still has the old key alone, host 1 the
    // pinned ring with the new key added (still signing with the old).
    let a = start(&hosts[0], &[&old]);
    let b = start(&hosts[1], &[&old, &new, &pin]);
    assert_eq!(read(&a, &old_token), "ok");
    assert_eq!(read(&b, &old_token), "ok");
    assert_eq!(read(&b, &new_token), "ok");
    let refused = read(&a, &new_token);
    assert_eq!(refused["refused"], 401, "{refused}");
    // Step 1 done: every host holds the ring; neither token is refused.
    drop(a);
    let a = start(&hosts[0], &[&old, &new, &pin]);
    all_read([&a, &b]);
    // Step 2, half-way: host 0 signs with the new key, host 1 still with
    // the old; both still take both tokens, and a keyed edit sent to one
    // and then to the other runs once (both key its record alike).
    drop(a);
    let a = start(&hosts[0], &[&new, &old, &pin]);
    all_read([&a, &b]);
    for h in &hosts {
        h.ws.write("pub/count.txt", "n=0\n");
    }
    let edit = json!({"path": "pub/count.txt", "old_str": "n=0", "new_str": "n=1"});
    let meta = json!({
        "dev.toolhost/trajectory_id": "rotation",
        "dev.toolhost/turn": 1,
        "dev.toolhost/call_id": "edit-1",
    });
    let first = call(&a, &new_token, "file_edit", edit.clone(), meta.clone());
    assert_eq!(first["status"], "ok", "{first}");
    assert_eq!(first["effects"]["replayed"], false, "{first}");
    let again = call(&b, &new_token, "file_edit", edit, meta);
    assert_eq!(again["status"], "ok", "{again}");
    assert_eq!(again["effects"]["replayed"], true, "{again}");
    // Step 3: the old key retired everywhere; its tokens are refused.
    drop((a, b));
    let a = start(&hosts[0], &[&new, &pin]);
    assert_eq!(read(&a, &new_token), "ok");
    assert_eq!(read(&a, &old_token)["refused"], 401);
}
