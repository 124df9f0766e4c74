//! The host's own messages, as a person on the command line and a model
//! over MCP read them: each leads to the fix, says each thing once, and is
//! not fenced as untrusted when the host wrote it.

use std::process::Output;

use serde_json::{json, Value};

use crate::mcp::{observation_of, Setup, StdioServer};
use crate::support::*;

fn toolhost(args: &[&str], cwd: &std::path::Path) -> Output {
    toolhost_command(args, cwd)
        .output()
        .expect("running toolhost")
}

/// The observation `call` printed (JSON: stdout is a pipe).
fn observation(out: &Output) -> Value {
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON observation ({e}): {out:?}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert_valid_observation(&v);
    v
}

fn text(obs: &Value) -> &str {
    obs["text"].as_str().unwrap()
}

/// A workspace with `src/a.rs` and `top.txt`, and a record store of its own.
fn workspace() -> (Ws, tempfile::TempDir) {
    let ws = Ws::new();
    ws.write("src/a.rs", "fn main() {}\n");
    ws.write("top.txt", "top\n");
    (ws, tempfile::tempdir().unwrap())
}

#[test]
fn a_cli_denial_names_the_flag_and_the_token_caveat_that_grant_it() {
    let (ws, _state) = workspace();
    let dir = ws.dir.path();
    ws.write("other/x", "");
    let cases: [(&[&str], &str, &str); 3] = [
        // No grant at all: the directory that holds the file.
        (
            &["call", "file_view", r#"{"path":"src/a.rs"}"#],
            "`--allow-read src`",
            "`toolhost cap mint --read src`",
        ),
        (
            &["call", "file_view", r#"{"path":"top.txt"}"#],
            "`--allow-read .`",
            "`toolhost cap mint --read .`",
        ),
        // A grant elsewhere: the path's own caveat.
        (
            &[
                "call",
                "grep_search",
                r#"{"pattern":"main","path":"src"}"#,
                "--allow-read",
                "other",
            ],
            "`--allow-read src`",
            "`toolhost cap mint --read src`",
        ),
    ];
    for (args, flag, caveat) in cases {
        let out = toolhost(args, dir);
        assert_eq!(out.status.code(), Some(3), "{args:?}: {out:?}");
        let obs = observation(&out);
        let t = text(&obs);
        assert_eq!(obs["status"], "denied", "{obs}");
        assert!(t.contains(flag), "{args:?}: {t}");
        assert!(t.contains(caveat), "{args:?}: {t}");
        assert!(!t.contains("ask the user"), "{args:?}: {t}");
    }
}

#[test]
fn a_cli_refusal_of_a_program_or_an_origin_names_its_flag() {
    let (ws, state) = workspace();
    let dir = ws.dir.path();
    let store = state.path().join("records.sqlite");
    let store = store.to_str().unwrap();
    let out = toolhost(
        &[
            "call",
            "run_command",
            r#"{"argv":["cargo","--version"]}"#,
            "--idempotency-key",
            "k1",
            "--store",
            store,
        ],
        dir,
    );
    let obs = observation(&out);
    assert_eq!(obs["status"], "denied", "{obs}");
    assert!(text(&obs).contains("`--allow-exec cargo`"), "{obs}");
    assert!(!text(&obs).contains("ask the user"), "{obs}");
    let out = toolhost(
        &["call", "http_get", r#"{"url":"http://127.0.0.1:9/x"}"#],
        dir,
    );
    let obs = observation(&out);
    assert_eq!(obs["error"]["code"], "denied_origin", "{obs}");
    assert!(
        text(&obs).contains("`--allow-net http://127.0.0.1:9`"),
        "{obs}"
    );
}

#[test]
fn an_mcp_denial_tells_the_model_to_ask_the_user_for_what_is_missing() {
    let setup = Setup::new(&[]);
    let mut s = StdioServer::initialized(&setup, &[]);
    let obs = observation_of(&s.call(1, "file_view", json!({"path": "secret/b.txt"})));
    assert_eq!(obs["status"], "denied", "{obs}");
    let t = text(&obs);
    assert!(
        t.contains("ask the user to grant read access to `secret/b.txt` if you need it"),
        "{t}"
    );
    // The model cannot pass flags: none is named to it.
    assert!(!t.contains("--allow"), "{t}");
    assert!(!t.contains("cap mint"), "{t}");
}

#[test]
fn the_server_instructions_have_no_doubled_phrase() {
    let setup = Setup::new(&[]);
    let mut s = StdioServer::start(&setup, &[]);
    let init = s.request(
        0,
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}),
    );
    let instructions = init["result"]["instructions"].as_str().unwrap();
    assert!(
        !instructions.contains("result's result's"),
        "{instructions}"
    );
    assert!(
        instructions.contains("The last text block of every tools/call result is what to read"),
        "{instructions}"
    );
}

#[test]
fn a_missing_field_says_what_is_expected_once() {
    let (ws, _state) = workspace();
    let obs = observation(&toolhost(
        &["call", "file_view", "{}", "--allow-read", "."],
        ws.dir.path(),
    ));
    assert_eq!(
        text(&obs),
        "invalid_arguments at /path: missing required field; expected a string. Fix the \
         argument and call again."
    );
    // The details keep the whole violation.
    assert_eq!(obs["error"]["expected"], "a string (required)", "{obs}");
    assert_eq!(obs["error"]["actual"], "missing", "{obs}");
}

#[test]
fn not_found_on_a_missing_path_is_not_fenced_but_content_still_is() {
    let (ws, _state) = workspace();
    let dir = ws.dir.path();
    let obs = observation(&toolhost(
        &[
            "call",
            "file_view",
            r#"{"path":"nope.txt"}"#,
            "--allow-read",
            ".",
        ],
        dir,
    ));
    assert_eq!(obs["error"]["code"], "not_found", "{obs}");
    assert!(!text(&obs).contains("[untrusted data"), "{obs}");
    assert_eq!(obs["untrusted"], false, "{obs}");
    assert_eq!(obs["provenance"], json!([]), "{obs}");
    assert!(
        text(&obs).starts_with("not_found at /path: nope.txt"),
        "{obs}"
    );
    // A tool's error on a path that exists may quote it: still fenced.
    let obs = observation(&toolhost(
        &[
            "call",
            "file_view",
            r#"{"path":"src"}"#,
            "--allow-read",
            ".",
        ],
        dir,
    ));
    assert_eq!(obs["status"], "error", "{obs}");
    assert!(text(&obs).starts_with("[untrusted data"), "{obs}");
    assert_eq!(obs["untrusted"], true, "{obs}");
    // And a file read is fenced, as ever.
    let obs = observation(&toolhost(
        &[
            "call",
            "file_view",
            r#"{"path":"top.txt"}"#,
            "--allow-read",
            ".",
        ],
        dir,
    ));
    assert!(text(&obs).starts_with("[untrusted data"), "{obs}");
}

#[test]
fn approval_required_says_how_to_get_approval() {
    let (ws, state) = workspace();
    let store = state.path().join("records.sqlite");
    let obs = observation(&toolhost(
        &[
            "call",
            "file_delete",
            r#"{"path":"top.txt"}"#,
            "--allow-write",
            ".",
            "--self-approve",
            "--idempotency-key",
            "k1",
            "--store",
            store.to_str().unwrap(),
        ],
        ws.dir.path(),
    ));
    assert_eq!(obs["error"]["code"], "approval_required", "{obs}");
    let t = text(&obs);
    assert!(!t.contains("Fix the argument"), "{t}");
    assert!(
        t.contains("the call runs only once the user has confirmed its plan"),
        "{t}"
    );
    assert!(
        t.contains("`toolhost plan`") && t.contains("--plan-token"),
        "{t}"
    );
}

#[test]
fn catalog_alone_counts_the_tokens() {
    let out = toolhost(&["catalog"], &repo_root());
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.contains("tokens (o200k_base)"), "{stdout}");
    assert!(stdout.contains("file_view"), "{stdout}");
    // The same report as with --cost.
    let cost = toolhost(&["catalog", "--cost"], &repo_root());
    assert_eq!(String::from_utf8(cost.stdout).unwrap(), stdout);
}

#[test]
fn serve_alone_names_both_transports() {
    let out = toolhost(&["serve"], &repo_root());
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--stdio"), "{stderr}");
    assert!(stderr.contains("--http ADDR"), "{stderr}");
    assert!(out.stdout.is_empty(), "{out:?}");
}

#[test]
fn call_help_shows_its_own_options_then_the_global_ones_then_examples() {
    let out = toolhost(&["call", "--help"], &repo_root());
    assert!(out.status.success(), "{out:?}");
    let help = String::from_utf8(out.stdout).unwrap();
    let at = |s: &str| {
        help.find(s)
            .unwrap_or_else(|| panic!("`{s}` not in help:\n{help}"))
    };
    // Own options first, together: --json and --pretty side by side.
    assert!(at("--allow-read") < at("Global options:"), "{help}");
    assert!(at("--pretty") < at("Global options:"), "{help}");
    let own = &help[at("--json")..at("--pretty")];
    assert!(!own.contains("--trusted-signers"), "{help}");
    for global in [
        "--plugin",
        "--trusted-signers",
        "--cache-dir",
        "--no-journal",
    ] {
        assert!(at(global) > at("Global options:"), "{global}: {help}");
    }
    assert!(at("Examples:") > at("--trusted-signers"), "{help}");
    assert!(help.contains("toolhost call file_view '{\"path\":\"src/main.rs\"}' --allow-read src"));
}

#[test]
fn the_help_examples_of_call_run() {
    let (ws, _state) = workspace();
    ws.write("src/main.rs", "fn main() {} // TODO\n");
    let dir = ws.dir.path();
    let out = toolhost(
        &[
            "call",
            "file_view",
            r#"{"path":"src/main.rs"}"#,
            "--allow-read",
            "src",
        ],
        dir,
    );
    assert_eq!(observation(&out)["status"], "ok", "{out:?}");
    let out = toolhost(
        &[
            "call",
            "grep_search",
            r#"{"pattern":"TODO","path":"."}"#,
            "--allow-read",
            ".",
            "--json",
        ],
        dir,
    );
    assert_eq!(observation(&out)["status"], "ok", "{out:?}");
}

#[test]
fn a_first_load_prints_a_plain_compiling_line_once() {
    let cache = tempfile::tempdir().unwrap();
    let plugin = test_plugin("tp_trivial");
    let run = || {
        toolhost_command(
            &["--plugin", plugin.to_str().unwrap(), "list"],
            &repo_root(),
        )
        .env("TOOLHOST_CACHE_DIR", cache.path())
        .env_remove("RUST_LOG")
        .output()
        .unwrap()
    };
    let first = run();
    assert!(first.status.success(), "{first:?}");
    let stderr = String::from_utf8_lossy(&first.stderr);
    let line = format!(
        "toolhost: compiling {} (first load; cached after)",
        plugin.display()
    );
    assert!(stderr.lines().any(|l| l == line), "{stderr}");
    assert!(!stderr.contains("INFO"), "{stderr}");
    let second = run();
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(!stderr.contains("compiling"), "{stderr}");
}

#[test]
fn a_batch_on_the_cli_names_the_flag_too() {
    use std::io::Write;
    let (ws, _state) = workspace();
    let mut child = toolhost_command(&["batch", "-"], ws.dir.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let items = json!([{"call_id": "a", "tool": "file_view", "arguments": {"path": "src/a.rs"}}]);
    child
        .stdin
        .take()
        .unwrap()
        .write_all(items.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let result: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out:?}"));
    let item = &result["items"][0];
    assert_valid_observation(item);
    assert_eq!(item["status"], "denied", "{result}");
    assert!(text(item).contains("`--allow-read src`"), "{result}");
    assert!(!text(item).contains("ask the user"), "{result}");
}
