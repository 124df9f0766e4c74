//! Namespaces: a plugin loaded under a prefix has its tools
//! named `ns.name` in listings, calls, `find_tools`, the journal and a
//! token's `tool` caveat — one grammar ([`toolhost::toolname`]). The same
//! component loaded under two namespaces gives two sets of tools, and a
//! name without its namespace is unknown.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use crate::mcp::{observation_of, Setup, StdioServer};
use crate::support::*;
use toolhost::journal::Filter;
use toolhost::{
    CallOptions, Caveat, Host, Journal, JournalOptions, RootKey, Session, Source, Store, Token,
    Workspace,
};
use toolhost_store::SqliteStore;

fn in_ns(namespace: &str, plugin: &str) -> Source {
    Source::Namespaced {
        namespace: namespace.into(),
        path: test_plugin(plugin),
    }
}

fn key() -> RootKey {
    RootKey::from_hex(&"cd".repeat(32)).unwrap()
}

fn session(ws: &Ws, caveats: &[&str]) -> Session {
    let caveats: Vec<Caveat> = caveats.iter().map(|c| c.parse().unwrap()).collect();
    let token = Token::mint(&key(), &caveats).unwrap();
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

#[test]
fn one_component_under_two_namespaces_gives_two_sets_of_dotted_tools() {
    let h = host_with(&[
        Source::reference(),
        in_ns("a", "tp_trivial"),
        in_ns("b", "tp_trivial"),
    ]);
    let names = loaded_tool_names(&h);
    for want in [
        "a.echo_value",
        "a.echo_value_idempotent",
        "b.echo_value",
        "file_view",
    ] {
        assert!(names.iter().any(|n| n == want), "{want}: {names:?}");
    }
    assert!(!names.iter().any(|n| n == "echo_value"), "{names:?}");
    let t = h.catalog().get("a.echo_value").unwrap();
    assert_eq!(t.guest_name, "echo_value");

    let ws = Ws::new();
    // The plugin runs under the name it declared; the observation names
    // the tool as the host does.
    let obs = call(&h, &ws, "a.echo_value", r#"{"value":7}"#, &NOTHING);
    assert_eq!(expect_ok(&obs)["value"], 7, "{obs}");
    assert_eq!(obs["tool"], "a.echo_value", "{obs}");
    let obs = call(&h, &ws, "echo_value", r#"{"value":7}"#, &NOTHING);
    let err = expect_error(&obs, "error", "unknown_tool");
    assert!(
        err["message"].as_str().unwrap().contains("a.echo_value"),
        "the correction names the namespaced tools: {obs}"
    );
}

/// `tool=a.*` allows the tools of `a` and nothing else: not `b.*`, not
/// the plain reference tools (the caveat grammar itself, and attenuation,
/// are tested in `capability::tests`); `find_tools` only finds what the token may
/// call, under the names it may call them by.
#[test]
fn a_namespace_caveat_allows_that_namespace_only_and_find_tools_agrees() {
    let h = host_with(&[
        Source::reference(),
        in_ns("a", "tp_trivial"),
        in_ns("b", "tp_trivial"),
    ]);
    let ws = Ws::new();
    ws.write("x.txt", "x\n");
    let s = session(&ws, &["tool=a.*", "right=read", "read=."]);
    let visible: Vec<String> = h
        .visible_tools(&s)
        .map(|t| t.descriptor.name.clone())
        .collect();
    assert_eq!(visible, ["a.echo_value", "a.echo_value_idempotent"]);

    let obs = call_in(&h, &s, "a.echo_value", r#"{"value":3}"#);
    assert_eq!(expect_ok(&obs)["value"], 3, "{obs}");
    for refused in ["b.echo_value", "file_view"] {
        let args = if refused == "file_view" {
            view_args("x.txt")
        } else {
            r#"{"value":3}"#.to_string()
        };
        // Outside the token, a tool is not in the session's catalog at all.
        let obs = call_in(&h, &s, refused, &args);
        let err = expect_error(&obs, "error", "unknown_tool");
        assert!(
            err["message"]
                .as_str()
                .unwrap()
                .ends_with("Available tools: a.echo_value, a.echo_value_idempotent."),
            "{refused}: {obs}"
        );
    }

    let found = call_in(&h, &s, "find_tools", r#"{"query":"echo a number back"}"#);
    let names: Vec<&str> = expect_ok(&found)["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"a.echo_value"), "{found}");
    assert!(names.iter().all(|n| n.starts_with("a.")), "{found}");
}

/// The journal records the namespaced name.
#[test]
fn the_journal_records_the_namespaced_name() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(
        SqliteStore::open(dir.path().join("r.sqlite"), Duration::from_secs(3600)).unwrap(),
    );
    let journal = Journal::start(
        store.journal().expect("the store keeps a journal"),
        JournalOptions {
            host: "ns-host".into(),
            ..JournalOptions::default()
        },
    )
    .unwrap();
    let h = host_with(&[in_ns("calc", "tp_trivial")]).with_recorder(toolhost::Recorder {
        journal: Some(journal.clone()),
        ..toolhost::Recorder::default()
    });
    let ws = Ws::new();
    let obs = call(&h, &ws, "calc.echo_value", r#"{"value":1}"#, &NOTHING);
    expect_ok(&obs);
    assert!(journal.flush(Duration::from_secs(60)));
    let entries = journal.backend().query(&Filter::default()).unwrap();
    let tools: Vec<&str> = entries.iter().map(|e| e.tool.as_str()).collect();
    assert_eq!(tools, ["calc.echo_value"]);
}

/// `--plugin NS=FILE` on the command line and `plugin = ["NS=FILE"]` in
/// toolhost.toml (the path relative to the file); a bad namespace is a
/// clear usage error that names the grammar.
#[test]
fn cli_and_config_load_a_plugin_under_a_namespace() {
    let dir = tempfile::tempdir().unwrap();
    let plugin = test_plugin("tp_trivial");
    let spec = format!("calc={}", plugin.display());
    let run = |args: &[&str]| {
        toolhost_command(args, dir.path())
            .output()
            .expect("running toolhost")
    };
    let out = run(&[
        "--plugin",
        &spec,
        "call",
        "calc.echo_value",
        r#"{"value":5}"#,
    ]);
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains('5'), "{stdout}");

    let out = run(&["--plugin", &spec, "list"]);
    assert!(out.status.success(), "{out:?}");
    let listed = String::from_utf8_lossy(&out.stdout);
    assert!(listed.contains("calc.echo_value"), "{listed}");
    assert!(listed.contains("file_view"), "{listed}");

    // toolhost.toml: the path is relative to the file's directory.
    std::fs::create_dir(dir.path().join("plugins")).unwrap();
    std::fs::copy(&plugin, dir.path().join("plugins/trivial.wasm")).unwrap();
    std::fs::write(
        dir.path().join("toolhost.toml"),
        "plugin = [\"calc=plugins/trivial.wasm\"]\n",
    )
    .unwrap();
    let sub = dir.path().join("sub");
    std::fs::create_dir(&sub).unwrap();
    let out = toolhost_command(
        &[
            "--config",
            "../toolhost.toml",
            "call",
            "calc.echo_value",
            r#"{"value":6}"#,
        ],
        &sub,
    )
    .output()
    .unwrap();
    assert!(out.status.success(), "{out:?}");

    let out = run(&["--plugin", "Calc=x.wasm", "list"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("`Calc` is not a namespace"), "{err}");
}

/// Over MCP (`serve --lazy-tools`): `find_tools` returns the dotted name,
/// it joins the session's list, and a call by that name runs.
#[test]
fn stdio_lazy_session_finds_lists_and_calls_a_namespaced_tool() {
    let setup = Setup::new(&[]);
    let spec = format!("calc={}", test_plugin("tp_trivial").display());
    let mut s = StdioServer::initialized(&setup, &["--lazy-tools", "--plugin", &spec]);
    let reply = s.call(
        1,
        "find_tools",
        json!({"query": "return the number it is given", "limit": 3}),
    );
    let obs = observation_of(&reply);
    let found: Vec<&str> = obs["output"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{obs}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(found.contains(&"calc.echo_value"), "{obs}");
    s.wait_for("notifications/tools/list_changed", |m| {
        m["method"] == "notifications/tools/list_changed"
    });
    let list = s.request(2, "tools/list", json!({}));
    let listed: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(listed.contains(&"calc.echo_value"), "{list}");
    let obs = observation_of(&s.call(3, "calc.echo_value", json!({"value": 9})));
    assert_eq!(obs["status"], "ok", "{obs}");
    assert_eq!(obs["tool"], "calc.echo_value", "{obs}");
    assert_eq!(obs["output"]["value"], 9, "{obs}");
}

/// A namespace changes names, not trust: a plugin the policy refuses is
/// refused under its namespace too, and a call of `ns.tool` is answered
/// with the refusal (not `unknown_tool`). The same name twice under one
/// namespace is a load problem, not a shadowed tool.
#[test]
fn a_namespace_does_not_change_what_the_trust_policy_or_duplicates_refuse() {
    use toolhost::Catalog;
    use toolhost::TrustPolicy;
    let policy = TrustPolicy {
        require_lock: true,
        ..TrustPolicy::default()
    };
    let trust = policy.prepare().unwrap();
    let catalog = Catalog::load_trusted(
        sandbox(),
        &[Source::reference(), in_ns("calc", "tp_trivial")],
        Some(&trust),
        &|_, _| {},
    );
    assert!(catalog.get("file_view").is_some(), "built-ins are trusted");
    assert!(catalog.get("calc.echo_value").is_none());
    assert_eq!(
        catalog
            .refusal("calc.echo_value")
            .and_then(|p| p.code.as_deref()),
        Some("plugin_not_locked")
    );
    assert!(catalog.refusal("echo_value").is_none());

    let catalog = Catalog::load(
        sandbox(),
        &[in_ns("calc", "tp_trivial"), in_ns("calc", "tp_trivial")],
        &|_, _| {},
    );
    assert_eq!(catalog.tools().count(), 2, "the first load keeps its tools");
    let dup: Vec<String> = catalog
        .problems()
        .iter()
        .filter_map(|p| p.tool.clone())
        .collect();
    assert_eq!(dup, ["calc.echo_value", "calc.echo_value_idempotent"]);
    assert!(
        catalog
            .problems()
            .iter()
            .all(|p| p.reason.contains("already loaded")),
        "{:?}",
        catalog.problems()
    );
}
