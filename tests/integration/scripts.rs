//! `run_script`: a JavaScript program whose inner tool calls go through the
//! host under the caller's token — checked, budgeted and journaled like
//! direct calls — and whose engine has no ambient authority.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde_json::{json, Value};
use toolhost::journal::Filter;
use toolhost::{
    Allow, CallOptions, Caveat, Host, Journal, JournalOptions, Recorder, RootKey, Session, Source,
    Store, Token, Workspace,
};
use toolhost_store::SqliteStore;

use crate::support::*;

/// A host with the reference tools and the script engine.
fn script_host() -> &'static Host {
    static H: OnceLock<Host> = OnceLock::new();
    H.get_or_init(|| host_with(&[Source::reference(), Source::script()]))
}

/// A session of `ws` that reads all of `read` and may run scripts.
fn scripting(ws: &Ws, read: &[&str]) -> Session {
    session_allowing(
        ws,
        &Allow {
            read,
            script: true,
            ..Allow::default()
        },
    )
}

/// A session of `ws` that writes `src` and may run scripts.
fn writing_scripts(ws: &Ws) -> Session {
    session_allowing(
        ws,
        &Allow {
            write: &["src"],
            script: true,
            ..Allow::default()
        },
    )
}

/// Runs `source` as a script in `session` under an idempotency key, as a
/// script that writes must.
fn run_keyed(session: &Session, source: &str) -> Value {
    run_in(
        script_host(),
        session,
        "run_script",
        &script_args(source),
        &keyed(&CallOptions::default()),
    )
}

fn script_args(source: &str) -> String {
    json!({ "source": source }).to_string()
}

/// Runs `source` as a script in `session`.
fn run(session: &Session, source: &str) -> Value {
    run_in(
        script_host(),
        session,
        "run_script",
        &script_args(source),
        &CallOptions::default(),
    )
}

/// The value a script returned.
fn value(obs: &Value) -> &Value {
    &expect_ok(obs)["value"]
}

fn fixture() -> Ws {
    let ws = Ws::new();
    ws.write("src/a.rs", "fn a() {}\n// TODO one\n// TODO two\n");
    ws.write("src/b.rs", "fn b() {}\n// TODO three\n");
    ws.write("src/c.rs", "fn c() {}\n");
    ws.write("secret/key.txt", "nothing to see\n");
    ws
}

#[test]
fn a_script_composes_file_tools_and_returns_only_its_value() {
    let ws = fixture();
    let s = scripting(&ws, &["."]);
    let obs = run(
        &s,
        r#"
        const found = await tools.grep_search({ path: "src", pattern: "TODO" });
        const perFile = {};
        for (const m of found.matches) perFile[m.path] = (perFile[m.path] ?? 0) + 1;
        const heads = await Promise.all(
          Object.keys(perFile).sort().map(p => tools.file_view({ path: p, limit: 1 })));
        console.log("files", Object.keys(perFile).length);
        return { perFile, first: heads.map(h => h.lines[0]) };
        "#,
    );
    assert_eq!(
        value(&obs),
        &json!({
            "perFile": {"src/a.rs": 2, "src/b.rs": 1},
            "first": ["fn a() {}", "fn b() {}"],
        }),
        "{obs:#}"
    );
    let out = &obs["output"];
    assert_eq!(out["console"], "files 2\n");
    assert_eq!(out["calls"]["total"], 3);
    assert_eq!(
        out["calls"]["by_tool"],
        json!({"grep_search": 1, "file_view": 2})
    );
    assert_eq!(out["calls"]["failures"], 0);
    // The model reads the value, the console and one line of calls.
    let text = obs["text"].as_str().unwrap();
    assert!(text.starts_with(r#"{"perFile""#), "{text}");
    assert!(
        text.contains("calls: 3 (file_view 2, grep_search 1), 0 failed"),
        "{text}"
    );
}

#[test]
fn run_script_needs_the_script_right() {
    let ws = fixture();
    let plain = session(&ws, &READ_ALL);
    let visible: Vec<&str> = script_host()
        .visible_tools(&plain)
        .map(|t| t.descriptor.name.as_str())
        .collect();
    assert!(visible.contains(&"file_view"), "{visible:?}");
    assert!(!visible.contains(&"run_script"), "{visible:?}");
    // Outside the token, it is not in the caller's catalog at all.
    let obs = run(&plain, "return 1");
    let err = expect_error(&obs, "error", "unknown_tool");
    assert!(
        !err["message"].as_str().unwrap().contains("run_script,"),
        "{err}"
    );

    let s = scripting(&ws, &["."]);
    assert!(script_host()
        .visible_tools(&s)
        .any(|t| t.descriptor.name == "run_script"));
    assert_eq!(value(&run(&s, "return 1 + 1")), &json!(2));
}

#[test]
fn a_path_the_token_cannot_read_is_denied_inside_as_outside() {
    let ws = fixture();
    let s = scripting(&ws, &["src"]);
    let direct = run_in(
        script_host(),
        &s,
        "file_view",
        &view_args("secret/key.txt"),
        &CallOptions::default(),
    );
    expect_error(&direct, "denied", "denied");
    let obs = run(
        &s,
        r#"
        try { await tools.file_view({ path: "secret/key.txt" }); return "read it"; }
        catch (e) { return { name: e.name, code: e.code, retry: e.retry }; }
        "#,
    );
    assert_eq!(
        value(&obs),
        &json!({"name": "ToolError", "code": "denied", "retry": "never"})
    );
    assert_eq!(obs["output"]["calls"]["failures"], 1);
    // A tool outside the token is not reachable either.
    let obs = run(
        &s,
        r#"try { await tools.file_edit({ path: "src/a.rs", old_str: "a", new_str: "b" }); }
           catch (e) { return e.code; }"#,
    );
    assert_eq!(value(&obs), "denied", "{obs:#}");
}

#[test]
fn a_thrown_tool_error_reaches_the_script_with_its_fields() {
    let ws = fixture();
    let s = scripting(&ws, &["."]);
    let obs = run(
        &s,
        r#"
        try { await tools.file_view({ path: "src/a.rs", offset: 0 }); }
        catch (e) {
          return { isError: e instanceof Error, code: e.code, field: e.field,
                   expected: e.expected, actual: e.actual, retry: e.retry };
        }
        "#,
    );
    let v = value(&obs);
    assert_eq!(v["isError"], true);
    assert_eq!(v["code"], "invalid_arguments");
    assert_eq!(v["field"], "/offset");
    assert_eq!(v["actual"], "0");
    assert_eq!(v["retry"], "after_correction");
    assert!(v["expected"].as_str().unwrap().contains('1'), "{v}");

    // Uncaught, it ends the script as `script_error`, the tool's error in
    // the details.
    let obs = run(
        &s,
        r#"await tools.file_view({ path: "src/a.rs", offset: 0 });"#,
    );
    let err = expect_error(&obs, "error", "script_error");
    assert_eq!(err["details"]["code"], "invalid_arguments", "{err}");
    assert_eq!(err["details"]["field"], "/offset", "{err}");
}

#[test]
fn the_engine_has_no_ambient_authority() {
    let ws = fixture();
    let s = scripting(&ws, &["."]);
    let obs = run(
        &s,
        r#"return [typeof fetch, typeof require, typeof process, typeof Deno,
                   typeof XMLHttpRequest, typeof WebSocket, typeof setTimeout,
                   typeof globalThis.__toolhost_call];"#,
    );
    assert_eq!(value(&obs), &json!(vec!["undefined"; 8]));
    let obs = run(
        &s,
        r#"return require("fs").readFileSync("/etc/passwd", "utf8");"#,
    );
    let err = expect_error(&obs, "error", "script_error");
    assert!(
        err["message"].as_str().unwrap().contains("require"),
        "{err}"
    );
    // A script that does not parse points at the source.
    let obs = run(&s, "return (;");
    let err = expect_error(&obs, "error", "script_error");
    assert_eq!(err["field"], "/source", "{err}");
}

#[test]
fn a_script_cannot_start_a_script() {
    let ws = fixture();
    let s = scripting(&ws, &["."]);
    let obs = run(
        &s,
        r#"try { await tools.run_script({ source: "return 1" }); return "ran"; }
           catch (e) { return [e.code, e.message]; }"#,
    );
    let v = value(&obs);
    assert_eq!(v[0], "denied", "{v}");
    assert!(
        v[1].as_str().unwrap().contains("cannot start a script"),
        "{v}"
    );
}

#[test]
fn an_infinite_loop_ends_in_fuel_or_timeout() {
    let ws = fixture();
    let s = scripting(&ws, &["."]);
    let opts = CallOptions {
        timeout_ms: Some(1_500),
        ..CallOptions::default()
    };
    let started = std::time::Instant::now();
    let obs = run_in(
        script_host(),
        &s,
        "run_script",
        &script_args("while (true) {}"),
        &opts,
    );
    let code = obs["error"]["code"].as_str().unwrap_or_default();
    assert!(code == "timeout" || code == "fuel_exhausted", "{obs:#}");
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[test]
fn a_memory_bomb_ends_at_the_memory_limit() {
    let ws = fixture();
    let s = scripting(&ws, &["."]);
    let opts = CallOptions {
        memory_mb: Some(64),
        timeout_ms: Some(20_000),
        ..CallOptions::default()
    };
    let obs = run_in(
        script_host(),
        &s,
        "run_script",
        &script_args("const a = []; while (true) a.push('x'.repeat(1 << 20) + a.length);"),
        &opts,
    );
    let code = obs["error"]["code"].as_str().unwrap_or_default();
    assert!(
        code == "memory_exhausted" || code == "fuel_exhausted",
        "{obs:#}"
    );
    assert!(obs["usage"]["peak_memory_bytes"].as_u64().unwrap() <= 64 << 20);
}

fn key() -> RootKey {
    RootKey::from_hex(&"3c".repeat(32)).unwrap()
}

fn caveats(list: &[&str]) -> Vec<Caveat> {
    list.iter().map(|c| c.parse().unwrap()).collect()
}

#[test]
fn a_loop_of_calls_stops_at_max_calls_and_charges_the_parent() {
    let ws = fixture();
    let token = Token::mint(
        &key(),
        &caveats(&["tool=*", "right=read,script", "read=.", "max_calls=6"]),
    )
    .unwrap();
    let open = || {
        Session::open(
            &key(),
            &token.encode(),
            Workspace::open(ws.dir.path()).unwrap(),
        )
        .unwrap()
    };
    let obs = run(
        &open(),
        r#"
        let ok = 0;
        for (let i = 0; i < 10000; i++) {
          try { await tools.file_view({ path: "src/c.rs" }); ok++; }
          catch (e) { return { ok, code: e.code, caveat: e.details && e.details.caveat }; }
        }
        return { ok };
        "#,
    );
    // The script's own call is one of the six.
    assert_eq!(
        value(&obs),
        &json!({"ok": 5, "code": "denied", "caveat": "max_calls"})
    );
    assert_eq!(obs["output"]["calls"]["total"], 6);
    // Nothing is left for a direct call either.
    let direct = run_in(
        script_host(),
        &open(),
        "file_view",
        &view_args("src/c.rs"),
        &CallOptions::default(),
    );
    let err = expect_error(&direct, "denied", "denied");
    assert_eq!(err["details"]["caveat"], "max_calls", "{err}");
}

#[test]
fn journal_entries_of_inner_calls_name_their_parent() {
    let ws = fixture();
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(
        SqliteStore::open(dir.path().join("j.sqlite"), Duration::from_secs(3600)).unwrap(),
    );
    let journal = Journal::start(
        store.journal().unwrap(),
        JournalOptions {
            host: "h".into(),
            ..JournalOptions::default()
        },
    )
    .unwrap();
    let host = host_with(&[Source::reference(), Source::script()]).with_recorder(Recorder {
        journal: Some(journal.clone()),
        ..Recorder::default()
    });
    let s = scripting(&ws, &["src"]);
    let opts = CallOptions {
        call_id: Some("outer-1".into()),
        ..CallOptions::default()
    };
    let obs = run_in(
        &host,
        &s,
        "run_script",
        &script_args(
            r#"await tools.file_view({ path: "src/a.rs" });
               try { await tools.file_view({ path: "secret/key.txt" }); } catch (_) {}
               return "done";"#,
        ),
        &opts,
    );
    assert_eq!(value(&obs), "done");
    assert!(journal.flush(Duration::from_secs(60)));
    let entries = journal.backend().query(&Filter::default()).unwrap();
    let mut seen: Vec<(String, String, String)> = entries
        .iter()
        .map(|e| (e.call_id.clone(), e.tool.clone(), e.status.clone()))
        .collect();
    seen.sort();
    assert_eq!(
        seen,
        [
            ("outer-1".into(), "run_script".into(), "ok".into()),
            ("outer-1.1".into(), "file_view".into(), "ok".into()),
            ("outer-1.2".into(), "file_view".into(), "denied".into()),
        ]
    );
    // Every entry ran under the same token chain.
    assert!(entries
        .windows(2)
        .all(|w| w[0].token_chain == w[1].token_chain));
}

#[test]
fn inner_writes_run_through_the_record_store_one_at_a_time() {
    let ws = fixture();
    let s = writing_scripts(&ws);
    let obs = run_keyed(
        &s,
        r#"
            const files = ["src/a.rs", "src/b.rs", "src/c.rs"];
            const done = await Promise.all(files.map(path =>
              tools.file_edit({ path, old_str: "fn ", new_str: "pub fn " })));
            return done.map(d => d.replacements);
            "#,
    );
    assert_eq!(value(&obs), &json!([1, 1, 1]), "{obs:#}");
    assert_eq!(
        String::from_utf8(ws.read("src/b.rs")).unwrap(),
        "pub fn b() {}\n// TODO three\n"
    );
}

/// The TypeScript declaration of the reference tools, as a script calls
/// them: generated from their schemas, compared with the committed
/// snapshot (`TOOLHOST_WRITE_REFERENCE=1` rewrites it).
#[test]
fn the_typescript_declaration_of_the_reference_tools_matches_its_snapshot() {
    let host = script_host();
    let decl = toolhost::script_declarations(host.catalog().tools().map(|t| &t.descriptor));
    assert!(decl.starts_with("declare const tools: {\n"), "{decl}");
    assert!(decl.contains("  file_view(args: { path: string; offset?: number; limit?: number; column?: number }): Promise<{ "), "{decl}");
    assert!(!decl.contains("run_script("), "{decl}");
    let path = repo_root().join("docs/reference/script-tools.d.ts");
    if std::env::var_os("TOOLHOST_WRITE_REFERENCE").is_some() {
        std::fs::write(&path, &decl).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert_eq!(
        committed, decl,
        "docs/reference/script-tools.d.ts is stale: run with TOOLHOST_WRITE_REFERENCE=1"
    );
}

/// Over MCP (stdio): `run_script` is listed only with the `script` right,
/// its description declares the tools the session may call, and a call of
/// it runs its inner calls under the session's grants.
#[test]
fn over_mcp_run_script_is_listed_with_its_declaration_and_runs() {
    use crate::mcp::{observation_of, Setup, StdioServer};
    let setup = Setup::new(&[]);
    let mut plain = StdioServer::initialized(&setup, &[]);
    let list = plain.request(1, "tools/list", json!({}));
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"file_view"), "{names:?}");
    assert!(!names.contains(&"run_script"), "{names:?}");
    drop(plain);

    let mut s = StdioServer::initialized(&setup, &["--allow-script"]);
    let list = s.request(1, "tools/list", json!({}));
    let def = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "run_script")
        .unwrap_or_else(|| panic!("{list}"))
        .clone();
    let description = def["description"].as_str().unwrap();
    assert!(
        description.contains("declare const tools: {"),
        "{description}"
    );
    assert!(
        description.contains("  file_view(args: { path: string;"),
        "{description}"
    );
    assert!(!description.contains("run_script(args"), "{description}");

    let r = s.call(
        2,
        "run_script",
        json!({"source": r#"
            const a = await tools.file_view({ path: "pub/a.txt" });
            let denied;
            try { await tools.file_view({ path: "secret/b.txt" }); } catch (e) { denied = e.code; }
            return { lines: a.lines, denied };"#}),
    );
    let obs = observation_of(&r);
    assert_eq!(
        obs["output"]["value"],
        json!({"lines": ["hello", "world"], "denied": "denied"}),
        "{obs:#}"
    );
}

/// A script sees inner outputs as a direct caller does, secrets redacted;
/// one it writes itself is redacted in what it returns.
#[test]
fn redaction_applies_to_what_a_script_reads_and_returns() {
    let ws = fixture();
    let id = format!("{}{}", ["AK", "IA"].concat(), "Q7XK2M4PZR5T3WNB");
    ws.write(
        "src/aws.ini",
        format!("[default]\naws_access_key_id = {id}\n"),
    );
    let s = scripting(&ws, &["."]);
    let obs = run(
        &s,
        r#"const v = await tools.file_view({ path: "src/aws.ini" }); return v.lines[1];"#,
    );
    let line = value(&obs).as_str().unwrap();
    assert!(line.contains("[REDACTED:aws_access_key_id]"), "{obs:#}");
    assert!(!obs.to_string().contains(&id), "{obs:#}");
    // Rebuilt inside the script, it is caught on the way out.
    let obs = run(&s, r#"return ["AK", "IA"].join("") + "Q7XK2M4PZR5T3WNB";"#);
    assert!(!obs.to_string().contains(&id), "{obs:#}");
    assert!(!obs["redactions"].as_array().unwrap().is_empty(), "{obs:#}");
}

/// A host with the reference tools, the script engine and the
/// conformance plugin (`test_sleep_ms`).
fn sleepy_host() -> &'static Host {
    static H: OnceLock<Host> = OnceLock::new();
    H.get_or_init(|| {
        host_with(&[
            Source::reference(),
            Source::script(),
            Source::File(test_plugin("tp_conformance")),
        ])
    })
}

#[test]
fn calls_started_together_run_in_parallel_and_awaited_ones_in_turn() {
    let ws = fixture();
    let s = scripting(&ws, &["."]);
    let script = |source: &str| {
        run_in(
            sleepy_host(),
            &s,
            "run_script",
            &script_args(source),
            &CallOptions::default(),
        )
    };
    let together = script(
        r#"const r = await Promise.all([tools.test_sleep_ms({ ms: 700 }),
                                        tools.test_sleep_ms({ ms: 700 })]);
           return r.length;"#,
    );
    assert_eq!(value(&together), 2, "{together:#}");
    let in_turn = script(
        r#"for (let i = 0; i < 2; i++) await tools.test_sleep_ms({ ms: 700 });
           return 2;"#,
    );
    assert_eq!(value(&in_turn), 2, "{in_turn:#}");
    let wall = |obs: &Value| obs["output"]["calls"]["wall_time_ms"].as_u64().unwrap();
    assert!(wall(&in_turn) >= 1_400, "{in_turn:#}");
    // The batch scheduler runs at most as many calls at once as cores.
    if std::thread::available_parallelism().map_or(1, |n| n.get()) >= 2 {
        assert!(wall(&together) < 1_300, "{together:#}");
    }
}

#[test]
fn writes_started_together_to_one_file_run_one_at_a_time_in_order() {
    let ws = fixture();
    ws.write("src/steps.txt", "step0\n");
    let s = writing_scripts(&ws);
    // Each edit needs the one before it: interleaved or reordered, one
    // would find nothing to replace.
    let obs = run_keyed(
        &s,
        r#"
            const edits = [0, 1, 2, 3, 4, 5].map(i => tools.file_edit(
              { path: "src/steps.txt", old_str: `step${i}`, new_str: `step${i + 1}` }));
            const done = await Promise.all(edits);
            return done.map(d => d.replacements);
            "#,
    );
    assert_eq!(value(&obs), &json!([1, 1, 1, 1, 1, 1]), "{obs:#}");
    assert_eq!(
        String::from_utf8(ws.read("src/steps.txt")).unwrap(),
        "step6\n"
    );
}

#[test]
fn timeout_ms_shortens_the_deadline_and_never_lengthens_it() {
    let ws = fixture();
    let s = scripting(&ws, &["."]);
    let host = sleepy_host();
    let timed = |timeout_ms: u64, caller_ms: u64| {
        let started = std::time::Instant::now();
        let obs = run_in(
            host,
            &s,
            "run_script",
            &json!({
                "source": "for (;;) await tools.test_sleep_ms({ ms: 50 });",
                "timeout_ms": timeout_ms,
            })
            .to_string(),
            &CallOptions {
                timeout_ms: Some(caller_ms),
                ..CallOptions::default()
            },
        );
        (obs, started.elapsed())
    };
    // Shorter than the caller's deadline: the script stops at it.
    let (obs, took) = timed(600, 60_000);
    assert_eq!(obs["error"]["code"], "timeout", "{obs:#}");
    assert!(took < Duration::from_secs(10), "{took:?}");
    // Longer: the caller's deadline still holds.
    let (obs, took) = timed(60_000, 600);
    assert_eq!(obs["error"]["code"], "timeout", "{obs:#}");
    assert!(took < Duration::from_secs(10), "{took:?}");
    // An infinite loop with no inner call stops at it too.
    let started = std::time::Instant::now();
    let obs = run_in(
        script_host(),
        &s,
        "run_script",
        &json!({"source": "while (true) {}", "timeout_ms": 500}).to_string(),
        &CallOptions {
            timeout_ms: Some(60_000),
            ..CallOptions::default()
        },
    );
    let code = obs["error"]["code"].as_str().unwrap_or_default();
    assert!(code == "timeout" || code == "fuel_exhausted", "{obs:#}");
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[test]
fn the_run_reports_the_highest_level_of_the_inner_calls_that_ran() {
    let ws = fixture();
    let writer = writing_scripts(&ws);
    let reader = scripting(&ws, &["src"]);
    let level = |s: &Session, source: &str| {
        let obs = run_keyed(s, source);
        assert_eq!(obs["status"], "ok", "{obs:#}");
        obs["effects"]["level"].as_str().unwrap().to_owned()
    };
    let edit = r#"await tools.file_view({ path: "src/a.rs" });
                  try { await tools.file_edit({ path: "src/a.rs", old_str: "fn a", new_str: "fn z" }); }
                  catch (_) {}
                  return 1;"#;
    let direct = run_in(
        script_host(),
        &writer,
        "file_edit",
        &json!({"path": "src/b.rs", "old_str": "fn b", "new_str": "fn y"}).to_string(),
        &keyed(&CallOptions::default()),
    );
    // A script that edits is at the edit's level.
    assert_eq!(
        level(&writer, edit),
        direct["effects"]["level"],
        "{direct:#}"
    );
    assert_ne!(direct["effects"]["level"], "read-only");
    // Only reads, or a write the token refused before it ran: read-only.
    assert_eq!(
        level(
            &writer,
            r#"return (await tools.file_view({ path: "src/c.rs" })).path;"#
        ),
        "read-only"
    );
    assert_eq!(level(&reader, edit), "read-only");
}

#[test]
fn a_tool_or_write_outside_the_token_is_refused_inside_as_outside() {
    let ws = fixture();
    let token = Token::mint(
        &key(),
        &caveats(&[
            "tool=file_view,file_edit,run_script",
            "right=read,script",
            "read=src",
        ]),
    )
    .unwrap();
    let s = Session::open(
        &key(),
        &token.encode(),
        Workspace::open(ws.dir.path()).unwrap(),
    )
    .unwrap();
    let direct = |tool: &str, args: Value| {
        let obs = run_in(
            script_host(),
            &s,
            tool,
            &args.to_string(),
            &keyed(&CallOptions::default()),
        );
        obs["error"]["code"].as_str().unwrap_or_default().to_owned()
    };
    let grep_outside = direct("grep_search", json!({"pattern": "TODO", "path": "src"}));
    let edit_outside = direct(
        "file_edit",
        json!({"path": "src/c.rs", "old_str": "fn c", "new_str": "fn x"}),
    );
    assert_ne!(grep_outside, "");
    assert_ne!(edit_outside, "");
    let obs = run_keyed(
        &s,
        r#"const code = async (p) => { try { await p; return null; } catch (e) { return e.code; } };
               return [await code(tools.grep_search({ pattern: "TODO", path: "src" })),
                       await code(tools.file_edit({ path: "src/c.rs", old_str: "fn c", new_str: "fn x" }))];"#,
    );
    assert_eq!(value(&obs), &json!([grep_outside, edit_outside]), "{obs:#}");
    assert_eq!(
        String::from_utf8(ws.read("src/c.rs")).unwrap(),
        "fn c() {}\n"
    );
    assert_eq!(obs["effects"]["level"], "read-only");
}

#[test]
fn find_tools_declares_what_it_found_for_a_session_that_may_run_scripts() {
    let ws = fixture();
    let find = |s: &Session| {
        run_in(
            script_host(),
            s,
            "find_tools",
            &json!({"query": "view the lines of a file", "limit": 2}).to_string(),
            &CallOptions::default(),
        )
    };
    let obs = find(&scripting(&ws, &["."]));
    let output = expect_ok(&obs);
    let found: Vec<&str> = output["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(found.contains(&"file_view"), "{obs:#}");
    let decl = output["script_declarations"].as_str().unwrap();
    assert!(decl.starts_with("declare const tools: {\n"), "{decl}");
    assert!(decl.contains("  file_view(args: { path: string"), "{decl}");
    // Only what was found is declared.
    for name in ["file_edit", "grep_search", "run_script"] {
        assert!(
            found.contains(&name) || !decl.contains(&format!("  {name}(")),
            "{decl}"
        );
    }
    assert!(obs["text"].as_str().unwrap().contains("In run_script:\n"));
    // Without the script right: no declaration.
    let plain = session_allowing(
        &ws,
        &Allow {
            read: &["."],
            ..Allow::default()
        },
    );
    let obs = find(&plain);
    assert!(
        expect_ok(&obs).get("script_declarations").is_none(),
        "{obs:#}"
    );
}

#[test]
fn more_calls_started_together_than_a_batch_holds_all_run() {
    let ws = fixture();
    let s = scripting(&ws, &["."]);
    let n = toolhost::BatchOptions::MAX_ITEMS + 76;
    let obs = run(
        &s,
        &format!(
            r#"const all = [];
               for (let i = 0; i < {n}; i++) all.push(tools.find_tools({{ query: "read a file", limit: 1 }}));
               const found = await Promise.all(all);
               return found.filter(f => f.tools.length === 1).length;"#
        ),
    );
    assert_eq!(value(&obs), n, "{obs:#}");
    assert_eq!(obs["output"]["calls"]["total"], n);
    assert_eq!(obs["output"]["calls"]["failures"], 0);
}

/// An inner call whose guest exhausts its Wasm stack, made by a script on
/// a thread with a call thread's stack (the inner call nests below the
/// engine on that thread) and on a thread too small for that (it moves to
/// a thread of its own): either way that call alone fails, the script
/// sees its error and the host goes on.
#[test]
fn an_inner_call_that_exhausts_its_stack_fails_alone_nested_or_not() {
    static H: OnceLock<Host> = OnceLock::new();
    let host = H.get_or_init(|| {
        host_with(&[
            Source::reference(),
            Source::script(),
            Source::File(test_plugin("tp_hostile")),
        ])
    });
    let ws = fixture();
    let s = Arc::new(scripting(&ws, &["."]));
    let source = r#"
      let code;
      try { await tools.deep_recursion({}); } catch (e) { code = e.code; }
      const after = await tools.file_view({ path: "src/c.rs" });
      return [code, after.lines];"#;
    for stack in [toolhost::CALL_THREAD_STACK, 1 << 20] {
        let s = s.clone();
        let obs = std::thread::Builder::new()
            .stack_size(stack)
            .spawn(move || {
                run_in(
                    host,
                    &s,
                    "run_script",
                    &script_args(source),
                    &CallOptions::default(),
                )
            })
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(
            value(&obs),
            &json!(["plugin_crashed", ["fn c() {}"]]),
            "stack {stack}: {obs}"
        );
    }
}

/// `JSON.parse` in a script answers as the standard says, whether the
/// native parser or the engine's own takes the text.
#[test]
fn json_parse_in_a_script_follows_the_standard() {
    let ws = fixture();
    let s = scripting(&ws, &["."]);
    let obs = run(
        &s,
        r#"
        const err = (f) => { try { f(); return null; } catch (e) { return e.name; } };
        const o = JSON.parse('{"b": [1, 2.5, "x", null, true, {"c": {}}], "a": -0, "__proto__": 7, "b": 2}');
        return [
          Object.keys(o), o.b, Object.is(o.a, -0), Object.getPrototypeOf(o) === Object.prototype,
          o.__proto__,
          JSON.parse('9007199254740993'), JSON.parse('[1, 2]', (k, v) => typeof v === 'number' ? v * 10 : v),
          err(() => JSON.parse('{"a": 1,}')), err(() => JSON.parse('')), err(() => JSON.parse(undefined)),
          JSON.parse(42), JSON.parse('"\u00e9\\n"'), typeof JSON.parse, JSON.parse.name,
        ];"#,
    );
    assert_eq!(
        value(&obs),
        &json!([
            ["b", "a", "__proto__"],
            2,
            true,
            true,
            7,
            9007199254740992u64,
            [10, 20],
            "SyntaxError",
            "SyntaxError",
            "SyntaxError",
            42,
            "é\n",
            "function",
            "parse"
        ])
    );
}
