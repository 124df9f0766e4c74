//! Hostile plugins: every attack ends in a structured observation, the host
//! keeps running, and no grant is exceeded.

use crate::support::*;
use serde_json::Value;
use toolhost::{Call, CallOptions, Catalog, Caveat, RootKey, Session, Source, Token};

fn opts(timeout_ms: u64, fuel: u64) -> CallOptions {
    CallOptions {
        timeout_ms: Some(timeout_ms),
        fuel: Some(fuel),
        ..CallOptions::default()
    }
}

/// Calls a hostile tool with `args` in a fresh workspace, with no grant.
fn attack(tool: &str, args: &str) -> Value {
    attack_with(tool, args, &CallOptions::default())
}

/// [`attack`] with explicit call options.
fn attack_with(tool: &str, args: &str, options: &CallOptions) -> Value {
    call_with(hostile_host(), &Ws::new(), tool, args, &NOTHING, options)
}

#[test]
fn infinite_loop_is_stopped_by_fuel() {
    let obs = attack_with("spin_forever", "{}", &opts(30_000, 50_000_000));
    expect_error(&obs, "error", "fuel_exhausted");
    assert!(obs["usage"]["fuel_consumed"].as_u64().unwrap() >= 50_000_000 - 10);
}

#[test]
fn infinite_loop_is_stopped_by_the_deadline() {
    let started = std::time::Instant::now();
    let obs = attack_with("spin_forever", "{}", &opts(200, u64::MAX / 2));
    expect_error(&obs, "error", "timeout");
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    assert!(obs["usage"]["wall_time_us"].as_u64().unwrap() >= 200_000);
}

#[test]
fn a_spinning_call_is_cancelled_at_once() {
    let ws = Ws::new();
    let after = std::time::Duration::from_millis(200);
    let took = cancelled_after(
        hostile_host(),
        &session(&ws, &NOTHING),
        "spin_forever",
        "{}",
        &opts(60_000, u64::MAX / 2),
        after,
    );
    // Stopped by the epoch its cancellation advanced, not by a deadline.
    assert!(took < std::time::Duration::from_secs(10), "{took:?}");
}

#[test]
fn a_call_whose_token_was_cancelled_before_it_ran_stops_at_once() {
    // Cancelled before the sandbox watched the call: nothing advances the
    // epoch for it later, so the watch itself must.
    let cancel = toolhost::CancelToken::default();
    cancel.cancel();
    let ws = Ws::new();
    let started = std::time::Instant::now();
    let options = opts(60_000, u64::MAX / 2);
    let obs = hostile_host().run(
        &session(&ws, &NOTHING),
        Call::new("spin_forever", "{}", &options).cancellable(&cancel),
    );
    let obs = serde_json::to_value(obs).unwrap();
    let err = expect_error(&obs, "error", "timeout");
    assert!(
        err["message"].as_str().unwrap().contains("cancelled"),
        "{err}"
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
}

#[test]
fn each_call_keeps_its_own_deadline_while_another_ones_passes() {
    // One engine, one epoch: the short call's deadline advances it while
    // the long call runs, and the long call runs on to its own.
    let spin = |timeout_ms| {
        std::thread::spawn(move || {
            attack_with("spin_forever", "{}", &opts(timeout_ms, u64::MAX / 2))
        })
    };
    let long = spin(1_500);
    std::thread::sleep(std::time::Duration::from_millis(50));
    let short = spin(200);
    let (short, long) = (short.join().unwrap(), long.join().unwrap());
    for (obs, at_least, below) in [(&short, 200_000, 1_400_000), (&long, 1_500_000, 60_000_000)] {
        expect_error(obs, "error", "timeout");
        let wall = obs["usage"]["wall_time_us"].as_u64().unwrap();
        assert!((at_least..below).contains(&wall), "wall {wall} µs: {obs}");
    }
}

#[test]
fn memory_bomb_hits_the_memory_limit() {
    let o = CallOptions {
        memory_mb: Some(64),
        ..CallOptions::default()
    };
    let obs = attack_with("memory_bomb", "{}", &o);
    expect_error(&obs, "error", "memory_exhausted");
    let peak = obs["usage"]["peak_memory_bytes"].as_u64().unwrap();
    assert!(peak <= 64 << 20, "peak {peak}");
}

#[test]
fn deep_recursion_is_a_crash_not_a_host_failure() {
    let obs = attack("deep_recursion", "{}");
    let err = expect_error(&obs, "error", "plugin_crashed");
    assert!(err["message"].as_str().unwrap().contains("stack"), "{err}");
}

#[test]
fn panic_is_a_crash() {
    let obs = attack("panic_now", "{}");
    expect_error(&obs, "error", "plugin_crashed");
    // The panic message went to the captured stderr, not the host's.
    assert!(
        obs["logs"]["stderr"].as_str().unwrap().contains("panic"),
        "{obs:#}"
    );
}

#[test]
fn stdout_flood_is_captured_and_bounded() {
    let obs = attack("stdout_flood", r#"{"bytes":50000000}"#);
    let out = expect_ok(&obs);
    assert_eq!(out["written"], 50_000_000);
    let kept = obs["logs"]["stdout"].as_str().unwrap().len() as u64;
    let omitted = obs["logs"]["stdout_omitted_bytes"].as_u64().unwrap();
    assert!(kept <= 32 * 1024, "kept {kept}");
    assert!(omitted > 49_000_000, "omitted {omitted}");
}

#[test]
fn huge_output_is_refused() {
    let obs = attack("big_output", r#"{"bytes":8000000}"#);
    let err = expect_error(&obs, "error", "output_too_large");
    assert!(err["message"].as_str().unwrap().contains("limit"));
}

#[test]
fn undeclared_error_code_is_reported_as_invalid_output() {
    let obs = attack("undeclared_error", "{}");
    expect_error(&obs, "error", "invalid_output");
}

#[test]
fn writes_through_a_read_only_grant_all_fail() {
    let ws = Ws::new();
    ws.write("data/f.txt", "original");
    let before = ws.snapshot();
    let obs = call(
        hostile_host(),
        &ws,
        "write_attempts",
        r#"{"path":"data/f.txt"}"#,
        &READ_ALL,
    );
    let out = expect_ok(&obs);
    let attempts = out["attempts"].as_array().unwrap();
    assert!(attempts.len() >= 6, "{out:#}");
    for a in attempts {
        assert_eq!(
            a["ok"], false,
            "a write through a read-only grant succeeded: {a}"
        );
    }
    assert_eq!(ws.snapshot(), before);
}

#[test]
fn a_write_grant_reaches_only_its_prefix() {
    // With a write grant on `data`, writes there work; `other/` is not even
    // mounted, so nothing there can change.
    let ws = Ws::new();
    ws.write("data/f.txt", "original");
    ws.write("other/g.txt", "untouched");
    let obs = call(
        hostile_host(),
        &ws,
        "write_attempts",
        r#"{"path":"data/f.txt"}"#,
        &Grant {
            read: &[],
            write: &["data"],
        },
    );
    let out = expect_ok(&obs);
    assert!(
        out["attempts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["ok"] == true),
        "{out:#}"
    );
    assert_eq!(ws.read("other/g.txt"), b"untouched");
}

#[test]
fn the_host_survives_everything_in_a_row() {
    for tool in ["panic_now", "deep_recursion", "undeclared_error"] {
        let obs = attack(tool, "{}");
        assert_eq!(obs["status"], "error");
    }
    let obs = attack_with("spin_forever", "{}", &opts(100, u64::MAX / 2));
    expect_error(&obs, "error", "timeout");
    // And a normal tool still works afterwards.
    let ws = Ws::new();
    ws.write("a.txt", "ok\n");
    expect_ok(&call(
        reference_host(),
        &ws,
        "file_view",
        &view_args("a.txt"),
        &READ_ALL,
    ));
}

fn load_problems(name: &str) -> (Catalog, Vec<String>) {
    let catalog = Catalog::load(sandbox(), &[Source::File(test_plugin(name))], &|_, _| {});
    let problems = catalog.problems().iter().map(|p| p.to_string()).collect();
    (catalog, problems)
}

#[test]
fn invalid_schemas_are_refused() {
    let (catalog, problems) = load_problems("tp_bad_schema");
    assert_eq!(catalog.tools().count(), 0, "{problems:?}");
    assert_eq!(problems.len(), 2, "{problems:?}");
}

#[test]
fn open_objects_untagged_unions_and_bad_names_are_refused_but_good_tools_load() {
    let (catalog, problems) = load_problems("tp_open_object");
    let names: Vec<_> = catalog.tools().map(|t| t.descriptor.name.clone()).collect();
    assert_eq!(names, ["fine_tool"], "{problems:?}");
    assert!(problems.len() >= 3, "{problems:?}");
    let all = problems.join("\n");
    assert!(all.contains("additionalProperties"), "{all}");
}

#[test]
fn duplicate_names_are_refused() {
    let (catalog, problems) = load_problems("tp_dup_names");
    assert!(catalog.tools().count() <= 1);
    assert!(
        problems.iter().any(|p| p.contains("same_name")),
        "{problems:?}"
    );
}

#[test]
fn duplicate_names_across_plugins_are_refused() {
    let trivial = Source::File(test_plugin("tp_trivial"));
    let catalog = Catalog::load(sandbox(), &[trivial.clone(), trivial], &|_, _| {});
    // The first copy's tools load; every tool of the second is refused.
    let first = catalog.tools().count();
    assert!(first >= 1);
    assert_eq!(
        catalog
            .problems()
            .iter()
            .filter(|p| p.reason.contains("already loaded"))
            .count(),
        first
    );
    assert!(catalog
        .problems()
        .iter()
        .any(|p| p.reason.contains("already loaded")));
}

#[test]
fn huge_descriptor_is_refused() {
    let (catalog, problems) = load_problems("tp_huge_descriptor");
    assert_eq!(catalog.tools().count(), 0);
    assert_eq!(problems.len(), 1, "{problems:?}");
}

#[test]
fn a_file_that_is_not_a_component_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("junk.wasm");
    std::fs::write(&p, b"this is not wasm").unwrap();
    let catalog = Catalog::load(sandbox(), &[Source::File(p)], &|_, _| {});
    assert_eq!(catalog.tools().count(), 0);
    assert_eq!(catalog.problems().len(), 1);
    assert!(catalog.problems()[0].tool.is_none());
}

const EXEC_KEY: [u8; 32] = [21; 32];

fn exec_token(caveats: &[&str]) -> Token {
    let caveats: Vec<Caveat> = caveats.iter().map(|c| c.parse().unwrap()).collect();
    Token::mint(&RootKey::from_bytes(EXEC_KEY), &caveats).unwrap()
}

/// Asks the hostile `exec_attempt` tool (which declares `any` program, so
/// the caller's grant is the only wall) to run `argv` under `token` on a
/// fresh workspace; returns its output (`outcome`, `detail`).
fn exec_attempt_with(token: &Token, argv: &[&str]) -> Value {
    let ws = Ws::new();
    let session = Session::open(
        &RootKey::from_bytes(EXEC_KEY),
        &token.encode(),
        toolhost::Workspace::open(&ws.path("")).unwrap(),
    )
    .unwrap();
    let args = serde_json::json!({ "argv": argv }).to_string();
    let obs = hostile_host().run(
        &session,
        Call::new("exec_attempt", &args, &CallOptions::default()),
    );
    let obs = serde_json::to_value(&obs).unwrap();
    assert_valid_observation(&obs);
    assert_eq!(obs["status"], "ok", "{obs:#}");
    obs["output"].clone()
}

/// [`exec_attempt_with`] a token minted with `caveats`.
fn exec_attempt(caveats: &[&str], argv: &[&str]) -> Value {
    exec_attempt_with(&exec_token(caveats), argv)
}

/// The token of [`exec_attempt`]'s caller: it may run `true` and nothing
/// else.
const ONLY_TRUE: &[&str] = &["tool=exec_attempt", "right=exec", "exec=true"];

#[test]
fn a_plugin_importing_exec_runs_only_what_the_token_grants() {
    // The grant works: the one granted program runs.
    let out = exec_attempt(ONLY_TRUE, &["true"]);
    assert_eq!(out["outcome"], "completed", "{out}");
    assert_eq!(out["detail"], "Some(0)", "{out}");

    // No `exec` caveat at all: nothing runs, whatever the plugin declares.
    let out = exec_attempt(&["tool=exec_attempt", "right=read"], &["true"]);
    assert_eq!(out["outcome"], "denied", "{out}");
    let detail = out["detail"].as_str().unwrap();
    assert!(detail.contains("granted no programs"), "{detail}");
    assert!(detail.contains("`true`"), "{detail}");

    // The `exec` caveat without the `exec` right grants nothing either.
    let out = exec_attempt(&["tool=exec_attempt", "right=read", "exec=true"], &["true"]);
    assert_eq!(out["outcome"], "denied", "{out}");

    // Attenuation removed `sh` from the parent's programs: it is gone.
    let parent = exec_token(&["tool=exec_attempt", "right=exec", "exec=true,sh"]);
    let out = exec_attempt_with(&parent, &["sh", "-c", "true"]);
    assert_eq!(out["outcome"], "completed", "{out}");
    let child = parent
        .attenuate(&["exec=true".parse::<Caveat>().unwrap()])
        .unwrap();
    let out = exec_attempt_with(&child, &["sh", "-c", "true"]);
    assert_eq!(out["outcome"], "denied", "{out}");
    assert!(
        out["detail"].as_str().unwrap().contains("program `sh`"),
        "{out}"
    );

    // A program the token does not grant is refused before it starts, by
    // name: a shell is a program like any other.
    for argv in [
        &["sh", "-c", "echo escaped"][..],
        &["echo", "escaped"],
        &["env"],
    ] {
        let out = exec_attempt(ONLY_TRUE, argv);
        assert_eq!(out["outcome"], "denied", "{argv:?}: {out}");
        let detail = out["detail"].as_str().unwrap();
        assert!(
            detail.contains(&format!("program `{}`", argv[0])),
            "{argv:?}: {detail}"
        );
        assert!(detail.contains("allowed: "), "{argv:?}: {detail}");
        assert!(!detail.contains("escaped"), "{argv:?}: {detail}");
    }
}

#[test]
fn a_plugin_cannot_escape_the_exec_grant_through_argv0() {
    // A link named like the granted program, pointing at a shell.
    let links = tempfile::tempdir().unwrap();
    let fake_true = links.path().join("true");
    std::os::unix::fs::symlink("/bin/sh", &fake_true).unwrap();
    let fake_true = fake_true.to_str().unwrap().to_owned();

    // `argv[0]` and what the host answers. An absolute path is compared as
    // given, after `PATH` resolution of the granted names: a shell or a
    // link somewhere else is not the granted program. A path that is not
    // a bare name or a normalized absolute path is malformed. Nothing in
    // here starts a process.
    let cases: &[(&str, &str)] = &[
        ("/bin/sh", "denied"),
        ("/usr/bin/sh", "denied"),
        ("/usr/bin/env", "denied"),
        (&fake_true, "denied"),
        ("..", "denied"),
        ("true ", "denied"),
        (" true", "denied"),
        ("TRUE", "denied"),
        ("true;sh", "denied"),
        ("../bin/sh", "invalid"),
        ("./true", "invalid"),
        ("bin/sh", "invalid"),
        ("/bin/../usr/bin/sh", "invalid"),
        ("/usr/bin/./true", "invalid"),
        ("//usr/bin/true", "invalid"),
        ("/usr/bin//true", "invalid"),
        ("/usr/bin/true/", "invalid"),
        ("true\0sh", "invalid"),
        ("", "invalid"),
    ];
    for (program, expected) in cases {
        let out = exec_attempt(ONLY_TRUE, &[program, "-c", "echo escaped"]);
        assert_eq!(out["outcome"], *expected, "{program:?}: {out}");
        let detail = out["detail"].as_str().unwrap();
        assert!(!detail.contains("escaped"), "{program:?}: {detail}");
        if *expected == "denied" {
            assert!(
                detail.starts_with(&format!("program `{program}`")),
                "{program:?}: {detail}"
            );
        } else if !program.is_empty() && !program.contains('\0') {
            assert!(
                detail.contains(&format!("`{program}`")),
                "{program:?}: {detail}"
            );
        }
    }
}

#[test]
fn plugin_text_reaches_the_observation_clean_and_clipped() {
    let obs = attack("noisy_text", r#"{"rows":3}"#);
    assert_eq!(
        obs["text"],
        // `\r` drops what the line had so far (`row N: 10%`), a backspace
        // the character before it.
        "NOISY\n100% ok\n100% ok\n100% ok\nend\n"
    );
    assert_eq!(obs["output"]["rows"], 3);
    // 100000 rows are far over the default 16 KiB text budget: head and
    // tail stay, with the marker, and the structured output is untouched.
    let obs = attack("noisy_text", r#"{"rows":100000}"#);
    let text = obs["text"].as_str().unwrap();
    assert!(text.len() <= 16 * 1024, "{}", text.len());
    assert!(text.starts_with("NOISY\n100% ok\n"));
    assert!(text.ends_with("100% ok\nend\n"));
    assert!(text.contains(" bytes omitted …]"));
    assert!(!text.contains('\u{1b}') && !text.contains('\r') && !text.contains('\u{8}'));
    let omitted = obs["truncated"]["omitted_bytes"].as_u64().unwrap();
    assert!(omitted > 700_000, "{omitted}");
    assert_eq!(obs["output"]["rows"], 100000);
}

/// `tp_trivial` with its tool `echo_value` renamed `find_tools` (as long,
/// so the component stays well-formed): a plugin that declares the name of
/// a tool the host answers itself.
fn claiming_find_tools() -> (tempfile::TempDir, std::path::PathBuf) {
    let mut bytes = std::fs::read(test_plugin("tp_trivial")).unwrap();
    let (from, to) = (b"echo_value", b"find_tools");
    let mut patched = 0;
    for i in 0..bytes.len() - from.len() {
        if &bytes[i..i + from.len()] == from {
            bytes[i..i + to.len()].copy_from_slice(to);
            patched += 1;
        }
    }
    assert!(patched > 0);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shadow.wasm");
    std::fs::write(&path, bytes).unwrap();
    (dir, path)
}

#[test]
fn a_plugin_declaring_a_host_tool_name_is_refused() {
    let (_dir, path) = claiming_find_tools();
    let catalog = Catalog::load(sandbox(), &[Source::File(path.clone())], &|_, _| {});
    assert_eq!(catalog.tools().count(), 0);
    let plugins = catalog.plugins();
    assert_eq!(plugins[0].refused.as_deref(), Some("reserved_name"));
    let problem = catalog.problems()[0].to_string();
    assert!(problem.contains("`find_tools`"), "{problem}");
    assert!(problem.contains("namespace"), "{problem}");
    // The host's own tool is not reported as refused.
    assert!(catalog.refusal("find_tools").is_none());
    // Under a namespace the name is its own.
    let catalog = Catalog::load(
        sandbox(),
        &[Source::Namespaced {
            namespace: "ns".into(),
            path,
        }],
        &|_, _| {},
    );
    assert!(catalog.get("ns.find_tools").is_some());
}
