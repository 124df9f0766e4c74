//! Two `serve --http` hosts sharing only PostgreSQL (their own artifact
//! and lock directories, as on two machines), one token, stateless
//! 2026-07-28 requests alternating between them: what one host learnt,
//! the other knows — the tools `find_tools` revealed and the circuit
//! breaker's counts. Real processes over real HTTP.

use serde_json::{json, Value};

use crate::mcp::{mint, observation_of, stateless_meta, HttpServer, Setup};

/// One stateless request under `token`, with `meta` beside the protocol's.
fn request(
    server: &HttpServer,
    token: &str,
    id: i64,
    method: &str,
    mut params: Value,
    meta: Value,
) -> Value {
    let mut m = stateless_meta();
    m.as_object_mut()
        .unwrap()
        .extend(meta.as_object().cloned().unwrap_or_default());
    params["_meta"] = m;
    let name = params["name"].as_str().unwrap_or_default().to_string();
    let auth = format!("Bearer {token}");
    let mut headers = vec![
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", method),
        ("Authorization", auth.as_str()),
    ];
    if method == "tools/call" {
        headers.push(("Mcp-Name", &name));
    }
    let r = server.post_json(
        &headers,
        &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    r.reply()
}

fn names(list: &Value) -> Vec<String> {
    list["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{list}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

/// Two hosts on the PostgreSQL of the tests, each with directories of its
/// own, and a token of their shared root key.
fn two_hosts(extra: &[&str]) -> (Setup, Vec<tempfile::TempDir>, Vec<HttpServer>, String) {
    let mut setup = Setup::new(&[]);
    setup.store = Some(crate::support::postgres_url());
    setup.ws.write("pub/a.txt", "one\ntwo\n");
    let dirs: Vec<_> = (0..4).map(|_| tempfile::tempdir().unwrap()).collect();
    let servers = (0..2)
        .map(|i| {
            let artifacts = dirs[2 * i].path().to_str().unwrap();
            let locks = dirs[2 * i + 1].path().to_str().unwrap();
            let args = [
                &[
                    "--require-token",
                    "--artifact-dir",
                    artifacts,
                    "--lock-dir",
                    locks,
                ],
                extra,
            ]
            .concat();
            HttpServer::start(&setup, &args)
        })
        .collect();
    let token = mint(
        &setup.state.path().join("root.key"),
        &["--tool", "*", "--read", "pub"],
    );
    (setup, dirs, servers, token)
}

#[test]
#[ignore = "needs PostgreSQL: export TOOLHOST_TEST_POSTGRES=\"$(bash .ci/postgres.sh)\", then --ignored (CI does)"]
fn pg_tools_found_through_one_host_are_listed_by_the_other() {
    let (_setup, _dirs, servers, token) = two_hosts(&["--lazy-tools"]);
    let other = mint(
        &_setup.state.path().join("root.key"),
        &["--tool", "*", "--read", "pub"],
    );
    for server in &servers {
        let list = request(server, &token, 1, "tools/list", json!({}), json!({}));
        assert_eq!(names(&list), ["find_tools"], "{list}");
    }
    let found = observation_of(&request(
        &servers[0],
        &token,
        2,
        "tools/call",
        json!({"name": "find_tools", "arguments": {"query": "search the files for a regular expression"}}),
        json!({}),
    ));
    assert_eq!(found["status"], "ok", "{found}");
    for server in &servers {
        let listed = names(&request(
            server,
            &token,
            3,
            "tools/list",
            json!({}),
            json!({}),
        ));
        assert!(listed.iter().any(|n| n == "grep_search"), "{listed:?}");
        assert!(listed.iter().any(|n| n == "find_tools"), "{listed:?}");
        // Another token was shown nothing.
        let theirs = request(server, &other, 4, "tools/list", json!({}), json!({}));
        assert_eq!(names(&theirs), ["find_tools"], "{theirs}");
    }
}

#[test]
#[ignore = "needs PostgreSQL: export TOOLHOST_TEST_POSTGRES=\"$(bash .ci/postgres.sh)\", then --ignored (CI does)"]
fn pg_failures_spread_over_two_hosts_trip_the_breaker_on_both() {
    let (setup, _dirs, servers, token) = two_hosts(&[]);
    let trajectory = format!("fleet-breaker-{:?}", std::time::SystemTime::now());
    let missing = json!({"name": "file_view", "arguments": {"path": "pub/late.txt"}});
    for (n, i) in [0usize, 1, 0].into_iter().enumerate() {
        let meta = json!({"dev.toolhost/trajectory_id": trajectory,
                          "dev.toolhost/call_id": format!("c{n}")});
        let obs = observation_of(&request(
            &servers[i],
            &token,
            n as i64,
            "tools/call",
            missing.clone(),
            meta,
        ));
        assert_eq!(obs["error"]["code"], "not_found", "{obs}");
        assert_eq!(obs["consecutive_failures"], n as u64 + 1, "{obs}");
    }
    // The file exists now: had a repeat run, it would succeed.
    setup.ws.write("pub/late.txt", "here\n");
    for (n, server) in servers.iter().enumerate() {
        let meta = json!({"dev.toolhost/trajectory_id": trajectory,
                          "dev.toolhost/call_id": format!("again{n}")});
        let obs = observation_of(&request(
            server,
            &token,
            10,
            "tools/call",
            missing.clone(),
            meta,
        ));
        assert_eq!(obs["error"]["code"], "circuit_open", "{obs}");
        assert_eq!(obs["error"]["details"]["consecutive_failures"], 3, "{obs}");
    }
    // Another trajectory is not held.
    let meta = json!({"dev.toolhost/trajectory_id": format!("{trajectory}-other"),
                      "dev.toolhost/call_id": "c0"});
    let obs = observation_of(&request(
        &servers[1],
        &token,
        20,
        "tools/call",
        missing,
        meta,
    ));
    assert_eq!(obs["status"], "ok", "{obs}");
}
