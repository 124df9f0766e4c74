//! `run_command` through the whole path: a capability token, `Host::run`,
//! the reference plugin (Wasm), its `exec` import, the host's checks and a
//! real program under bubblewrap. What a caller is granted decides what
//! may start (before anything does), what it sees and writes, and the
//! call's effective side-effect level; the deadline and cancellation end
//! the whole process tree.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use toolhost::{Call, CallOptions, CancelToken, Caveat, CaveatKind, RootKey, Session, Token};

use crate::exec::{assert_nothing_left, processes_with, unique};
use crate::support::{assert_valid_observation, expect_error, expect_ok, keyed, reference_host};

fn key() -> RootKey {
    RootKey::from_bytes([13; 32])
}

/// A workspace under `CARGO_TARGET_TMPDIR` (the sandbox's `/tmp` is its own).
fn workspace() -> tempfile::TempDir {
    let d = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    std::fs::create_dir(d.path().join("src")).unwrap();
    std::fs::write(d.path().join("src/data.txt"), "data\n").unwrap();
    d
}

fn caveats(list: &[&str]) -> Vec<Caveat> {
    list.iter()
        .map(|c| c.parse().unwrap_or_else(|e| panic!("{c}: {e}")))
        .collect()
}

/// A session on `ws` under a token minted with `list`.
fn session(ws: &Path, list: &[&str]) -> Session {
    let token = Token::mint(&key(), &caveats(list)).unwrap();
    Session::open(
        &key(),
        &token.encode(),
        toolhost::Workspace::open(ws).unwrap(),
    )
    .unwrap()
}

/// Reads the workspace, runs `programs`.
fn reader(ws: &Path, programs: &str) -> Session {
    session(
        ws,
        &[
            "tool=run_command",
            "right=read,exec",
            "read=.",
            &format!("exec={programs}"),
        ],
    )
}

/// Writes the workspace, runs `programs`.
fn writer(ws: &Path, programs: &str) -> Session {
    session(
        ws,
        &[
            "tool=run_command",
            "right=read,write,exec",
            "write=.",
            &format!("exec={programs}"),
        ],
    )
}

fn run_with(s: &Session, args: Value, opts: &CallOptions) -> Value {
    let args = args.to_string();
    let obs = reference_host().run(s, Call::new("run_command", &args, opts));
    let v = serde_json::to_value(&obs).unwrap();
    assert_valid_observation(&v);
    v
}

fn run(s: &Session, args: Value) -> Value {
    run_with(s, args, &CallOptions::default())
}

#[test]
fn echo_and_exit_codes_a_failing_program_is_an_ok_call() {
    let ws = workspace();
    let s = reader(ws.path(), "sh");
    let obs = run(
        &s,
        json!({"argv": ["sh", "-c", "cat src/data.txt; echo err >&2; exit 3"]}),
    );
    let out = expect_ok(&obs);
    assert_eq!(out["exit_code"], 3, "{obs:#}");
    assert_eq!(out["signal"], Value::Null);
    assert_eq!(out["timed_out"], false);
    assert_eq!(out["stdout"], "data\n");
    assert_eq!(out["stderr"], "err\n");
    assert_eq!(out["stdout_omitted_bytes"], 0);
    // Nothing writable, no network: read-only, no idempotency key needed.
    assert_eq!(obs["effects"]["level"], "read-only", "{obs:#}");
    // The program is the observation's provenance; the text says how it
    // ended.
    let sources = obs["provenance"].as_array().unwrap();
    assert!(
        sources
            .iter()
            .any(|p| p["kind"] == "process" && p["ref"] == "sh"),
        "{obs:#}"
    );
    assert!(obs["text"].as_str().unwrap().contains("exit 3"), "{obs:#}");
    // stdin and cwd.
    let obs = run(
        &s,
        json!({"argv": ["sh", "-c", "pwd; cat"], "cwd": "src", "stdin": "piped"}),
    );
    assert_eq!(
        expect_ok(&obs)["stdout"],
        "/workspace/src\npiped",
        "{obs:#}"
    );
}

#[test]
fn a_program_outside_the_grant_is_denied_before_it_starts() {
    let ws = workspace();
    // `true` is granted; `sh` is not, and whatever it would do never happens.
    let s = writer(ws.path(), "true");
    let obs = run_with(
        &s,
        json!({"argv": ["sh", "-c", "touch made"]}),
        &keyed(&CallOptions::default()),
    );
    let e = expect_error(&obs, "denied", "denied");
    assert!(e["message"].as_str().unwrap().contains("`sh`"), "{obs:#}");
    assert!(!ws.path().join("made").exists());
    // A token without the exec right runs nothing, whatever it lists.
    let s = session(
        ws.path(),
        &["tool=run_command", "right=read", "read=.", "exec=sh"],
    );
    let obs = run(&s, json!({"argv": ["sh", "-c", "true"]}));
    let e = expect_error(&obs, "denied", "denied");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("granted no programs"),
        "{obs:#}"
    );
    // A program name that is a path is checked as one.
    let obs = run(
        &reader(ws.path(), "true"),
        json!({"argv": ["/bin/../usr/bin/sh"]}),
    );
    assert_eq!(obs["status"], "error", "{obs:#}");
}

#[test]
fn sh_c_runs_only_when_sh_is_granted() {
    let ws = workspace();
    let script = json!({"argv": ["sh", "-c", "echo via-shell > made.txt"]});
    let obs = run_with(
        &writer(ws.path(), "echo"),
        script.clone(),
        &keyed(&CallOptions::default()),
    );
    expect_error(&obs, "denied", "denied");
    assert!(!ws.path().join("made.txt").exists());
    let obs = run_with(
        &writer(ws.path(), "sh"),
        script,
        &keyed(&CallOptions::default()),
    );
    assert_eq!(expect_ok(&obs)["exit_code"], 0, "{obs:#}");
    assert_eq!(
        std::fs::read_to_string(ws.path().join("made.txt")).unwrap(),
        "via-shell\n"
    );
}

#[test]
fn attenuation_and_delegation_cannot_add_programs() {
    let ws = workspace();
    let parent = Token::mint(
        &key(),
        &caveats(&["tool=*", "right=read,exec", "read=.", "exec=true"]),
    )
    .unwrap();
    let e = parent.attenuate(&caveats(&["exec=sh"])).unwrap_err();
    assert_eq!(e.component(), Some(CaveatKind::Exec));
    let s = reader(ws.path(), "true");
    let Err(e) = s.delegate(&caveats(&["exec=true,sh"])) else {
        panic!("a child got a program its parent lacks")
    };
    assert_eq!(e.component(), Some(CaveatKind::Exec));
    // Removing is fine, and the child then runs only what is left.
    let (child, _) = reader(ws.path(), "true,echo")
        .delegate(&caveats(&["exec=echo"]))
        .unwrap();
    expect_ok(&run(&child, json!({"argv": ["echo", "hi"]})));
    expect_error(&run(&child, json!({"argv": ["true"]})), "denied", "denied");
}

#[test]
fn a_read_grant_runs_read_only_and_a_write_grant_is_reversible() {
    let ws = workspace();
    let touch = json!({"argv": ["sh", "-c", "touch src/new.txt"]});
    // Read grant: no key needed, the write fails inside the sandbox.
    let obs = run(&reader(ws.path(), "sh"), touch.clone());
    let out = expect_ok(&obs);
    assert_ne!(out["exit_code"], 0, "{obs:#}");
    assert!(
        out["stderr"]
            .as_str()
            .unwrap()
            .contains("Read-only file system"),
        "{obs:#}"
    );
    assert_eq!(obs["effects"]["level"], "read-only");
    assert!(!ws.path().join("src/new.txt").exists());
    // Write grant: the declared level, so a key is required…
    let w = writer(ws.path(), "sh");
    let obs = run(&w, touch.clone());
    expect_error(&obs, "error", "idempotency_key_required");
    assert!(!ws.path().join("src/new.txt").exists());
    // …and with one the write happens, once; a retry replays.
    let opts = CallOptions {
        idempotency: Some(toolhost::KeySource::Explicit(format!(
            "run-command-{}",
            unique()
        ))),
        ..CallOptions::default()
    };
    let obs = run_with(&w, touch.clone(), &opts);
    assert_eq!(expect_ok(&obs)["exit_code"], 0, "{obs:#}");
    assert_eq!(obs["effects"]["level"], "reversible");
    assert!(ws.path().join("src/new.txt").exists());
    std::fs::remove_file(ws.path().join("src/new.txt")).unwrap();
    let again = run_with(&w, touch, &opts);
    assert_eq!(again["effects"]["replayed"], true, "{again:#}");
    assert!(
        !ws.path().join("src/new.txt").exists(),
        "the retry ran again"
    );
}

#[test]
fn the_deadline_kills_the_whole_tree_and_leaves_no_process() {
    let ws = workspace();
    let marker = format!("deadline-{}", unique());
    let s = reader(ws.path(), "sh");
    let script = format!("sleep 30 & sleep 30; : {marker}");
    let opts = CallOptions {
        timeout_ms: Some(1000),
        ..CallOptions::default()
    };
    let start = Instant::now();
    let obs = run_with(&s, json!({"argv": ["sh", "-c", script]}), &opts);
    let took = start.elapsed();
    // Read-only (nothing writable): a plain timeout, not `unknown`.
    expect_error(&obs, "error", "timeout");
    assert!(took < Duration::from_secs(4), "took {took:?}");
    assert_nothing_left(&marker);
    // The command's own shorter timeout is a completed run that says so.
    let obs = run(
        &s,
        json!({"argv": ["sh", "-c", format!("sleep 30; : {marker}")], "timeout_ms": 300}),
    );
    let out = expect_ok(&obs);
    assert_eq!(out["timed_out"], true, "{obs:#}");
    assert_eq!(out["signal"], 9);
    assert_nothing_left(&marker);
}

#[test]
fn cancellation_kills_the_running_program() {
    let ws = workspace();
    let marker = format!("cancel-{}", unique());
    let s = reader(ws.path(), "sh");
    let cancel = CancelToken::default();
    let args = json!({"argv": ["sh", "-c", format!("sleep 30; : {marker}")]}).to_string();
    let opts = CallOptions::default();
    let start = Instant::now();
    let obs = std::thread::scope(|scope| {
        let running = scope.spawn(|| {
            reference_host().run(
                &s,
                Call::new("run_command", &args, &opts).cancellable(&cancel),
            )
        });
        let until = Instant::now() + Duration::from_secs(20);
        while processes_with(&marker).is_empty() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(
            !processes_with(&marker).is_empty(),
            "the program never started"
        );
        cancel.cancel();
        running.join().unwrap()
    });
    assert!(start.elapsed() < Duration::from_secs(10));
    let obs = serde_json::to_value(&obs).unwrap();
    assert_eq!(obs["status"], "error", "{obs:#}");
    assert_nothing_left(&marker);
}
