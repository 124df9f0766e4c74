//! The `toolhost` binary, as a user runs it.

use crate::support::*;
use serde_json::Value;
use std::process::{Command, Output};

fn toolhost(args: &[&str], cwd: &std::path::Path) -> Output {
    toolhost_command(args, cwd)
        .output()
        .expect("running toolhost")
}

fn observation(out: &Output) -> Value {
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON observation ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    assert_valid_observation(&v);
    v
}

#[test]
fn list_shows_the_reference_tools() {
    let out = toolhost(&["list"], &repo_root());
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    for name in ["file_view", "file_edit", "grep_search"] {
        assert!(text.contains(name), "{text}");
    }
}

#[test]
fn call_on_the_repository_readme_like_the_readme_says() {
    let out = toolhost(
        &[
            "call",
            "file_view",
            r#"{"path":"README.md","offset":1,"limit":3}"#,
            "--allow-read",
            ".",
        ],
        &repo_root(),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let obs = observation(&out);
    assert_eq!(obs["output"]["offset"], 1);
    assert!(obs["output"]["lines"][0].is_string(), "{obs}");
}

#[test]
fn exit_codes_follow_the_status() {
    let ws = Ws::new();
    ws.write("a.txt", "x\n");
    let dir = ws.dir.path();
    let denied = toolhost(
        &[
            "call",
            "file_view",
            r#"{"path":"a.txt","offset":1,"limit":1}"#,
        ],
        dir,
    );
    assert_eq!(denied.status.code(), Some(3));
    assert_eq!(observation(&denied)["status"], "denied");
    let invalid = toolhost(
        &[
            "call",
            "file_view",
            r#"{"path":"a.txt","offset":0,"limit":1}"#,
            "--allow-read",
            ".",
        ],
        dir,
    );
    assert_eq!(invalid.status.code(), Some(1));
    assert_eq!(observation(&invalid)["error"]["code"], "invalid_arguments");
    let usage = toolhost(&["call", "file_view", "{}", "--allow-read", "../.."], dir);
    assert_eq!(usage.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&usage.stderr).contains("toolhost:"));
}

#[test]
fn describe_prints_the_contract() {
    let out = toolhost(&["describe", "file_edit"], &repo_root());
    assert!(out.status.success());
    let d: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(d["side_effect"], "reversible");
    assert_eq!(d["input_schema"]["additionalProperties"], false);
    assert_eq!(
        d["input_schema"]["properties"]["path"]["x-toolhost-path"],
        "write"
    );
    assert!(d["error_codes"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c == "multiple_matches"));
}

#[test]
fn lint_reports_refusals_and_provider_compatibility() {
    let out = toolhost(
        &[
            "lint",
            "--json",
            test_plugin("tp_open_object").to_str().unwrap(),
        ],
        &repo_root(),
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let tools = report["tools"].as_array().unwrap();
    assert!(tools.iter().any(|t| t["refused"] == true));
    assert!(tools.iter().any(|t| t["refused"] == false));
    for t in tools {
        assert!(
            t["compat"]["openai"].is_array() && t["compat"]["anthropic"].is_array(),
            "{t}"
        );
    }
    let ok = toolhost(
        &["lint", test_plugin("tp_trivial").to_str().unwrap()],
        &repo_root(),
    );
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stdout)
    );
}

#[test]
fn a_plugins_dir_adds_tools() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(test_plugin("tp_trivial"), dir.path().join("trivial.wasm")).unwrap();
    let out = toolhost(
        &[
            "--plugins-dir",
            dir.path().to_str().unwrap(),
            "call",
            "echo_value",
            r#"{"value":7}"#,
        ],
        &repo_root(),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(observation(&out)["output"]["value"], 7);
}

fn stdout_line(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = String::from_utf8(out.stdout.clone()).unwrap();
    assert_eq!(s.lines().count(), 1, "a token alone on stdout: {s}");
    s.trim().to_string()
}

#[test]
fn cap_mint_attenuate_inspect_and_token_scoped_calls() {
    let ws = Ws::new();
    ws.write("src/a.txt", "alpha\n");
    ws.write("docs/b.txt", "beta\n");
    let dir = ws.dir.path();
    let parent = stdout_line(&toolhost(
        &[
            "cap",
            "mint",
            "--tool",
            "file_view",
            "--tool",
            "grep_search",
            "--read",
            "src",
            "--read",
            "docs",
            "--expires",
            "1h",
        ],
        dir,
    ));
    let child = stdout_line(&toolhost(
        &[
            "cap",
            "attenuate",
            &parent,
            "--tool",
            "file_view",
            "--read",
            "src",
        ],
        dir,
    ));

    // Widening is refused, naming the component.
    let wide = toolhost(&["cap", "attenuate", &parent, "--write", "src"], dir);
    assert_eq!(wide.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&wide.stderr).contains("write"),
        "{wide:?}"
    );

    let inspect = toolhost(&["cap", "inspect", &child], dir);
    let info: Value = serde_json::from_slice(&inspect.stdout).unwrap();
    assert_eq!(info["verification"]["valid"], true, "{info}");
    assert!(info["caveats"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c == "read=src"));

    // `list` shows only what the token allows.
    let list = toolhost(&["list", "--token", &child], dir);
    let text = String::from_utf8(list.stdout).unwrap();
    assert!(
        text.contains("file_view") && !text.contains("grep_search") && !text.contains("file_edit"),
        "{text}"
    );

    let ok = toolhost(
        &[
            "call",
            "--token",
            &child,
            "file_view",
            r#"{"path":"src/a.txt","offset":1,"limit":1}"#,
        ],
        dir,
    );
    assert_eq!(observation(&ok)["status"], "ok");
    let denied = toolhost(
        &[
            "call",
            "--token",
            &child,
            "file_view",
            r#"{"path":"docs/b.txt","offset":1,"limit":1}"#,
        ],
        dir,
    );
    assert_eq!(denied.status.code(), Some(3));
    assert_eq!(observation(&denied)["error"]["details"]["caveat"], "read");

    // A tampered token does not verify.
    let mut bad = child.clone().into_bytes();
    let i = bad.len() - 5;
    bad[i] = if bad[i] == b'A' { b'B' } else { b'A' };
    let bad = String::from_utf8(bad).unwrap();
    let refused = toolhost(
        &[
            "call",
            "--token",
            &bad,
            "file_view",
            r#"{"path":"src/a.txt","offset":1,"limit":1}"#,
        ],
        dir,
    );
    assert_eq!(refused.status.code(), Some(2));
}

/// Runs `toolhost ARGS` with its stdout a pipe whose reading end is closed
/// before the command writes (as `toolhost describe X | head -c 100` does
/// once `head` has its bytes).
fn toolhost_into_a_closed_pipe(args: &[&str], cwd: &std::path::Path) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolhost"))
        .args(args)
        .current_dir(cwd)
        .env(
            "TOOLHOST_CACHE_DIR",
            repo_root().join("target/test-compile-cache"),
        )
        .env("TOOLHOST_ROOT_KEY", "ab".repeat(32))
        .env_remove("TOOLHOST_TOKEN")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("running toolhost");
    // Closing the only reading end: every later write gets EPIPE.
    drop(child.stdout.take());
    child.wait_with_output().expect("waiting for toolhost")
}

#[test]
fn a_closed_stdout_is_a_clean_exit_not_a_panic() {
    let ws = Ws::new();
    ws.write("a.txt", "one\n");
    let dir = ws.dir.path();
    let token = stdout_line(&toolhost(&["cap", "mint", "--tool", "file_view"], dir));
    let plugin = test_plugin("tp_open_object");
    let plugin = plugin.to_str().unwrap();
    let cases: [(&[&str], i32); 6] = [
        (&["describe", "file_view"], 0),
        (&["list"], 0),
        (&["list", "--json"], 0),
        (&["lint", plugin], 1),
        (&["cap", "inspect", &token], 0),
        (
            &[
                "call",
                "file_view",
                r#"{"path":"a.txt"}"#,
                "--allow-read",
                ".",
            ],
            0,
        ),
    ];
    for (args, code) in cases {
        let out = toolhost_into_a_closed_pipe(args, dir);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert_eq!(out.status.code(), Some(code), "{args:?}: {stderr}");
    }
}

#[test]
fn errors_say_each_thing_once() {
    let ws = Ws::new();
    ws.write("a.txt", "one\n");
    let dir = ws.dir.path();
    // A bad token: the session's message includes the token error's; it is
    // not printed a second time as its cause.
    let out = toolhost(&["call", "--token", "not-a-token", "file_view", "{}"], dir);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let reason = "malformed capability";
    assert_eq!(stderr.matches(reason).count(), 1, "{stderr}");
    // A schema violation: the text says `expected …, got …` once, and names
    // the field once.
    let out = toolhost(
        &[
            "call",
            "file_view",
            r#"{"path":"a.txt","offset":0}"#,
            "--allow-read",
            ".",
        ],
        dir,
    );
    let obs = observation(&out);
    let text = obs["text"].as_str().unwrap();
    assert!(
        text.starts_with("invalid_arguments at /offset: expected integer"),
        "{text}"
    );
    assert_eq!(text.matches("expected").count(), 1, "{text}");
    assert_eq!(text.matches("got 0").count(), 1, "{text}");
    assert_eq!(text.matches("/offset").count(), 1, "{text}");
}

#[test]
fn origins_the_sandbox_cannot_honour_are_refused_when_minted() {
    let ws = Ws::new();
    let dir = ws.dir.path();
    for bad in [
        "wss://stream.example.com",
        "http://127.1:8080",
        "ftp://a.example:21",
    ] {
        let out = toolhost(&["cap", "mint", "--tool", "http_get", "--net", bad], dir);
        assert_eq!(out.status.code(), Some(2), "{bad}: {out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(&format!("`{bad}` is not a network origin")),
            "{bad}: {stderr}"
        );
        assert!(out.stdout.is_empty(), "{bad}: a token was printed");
    }
}

#[test]
fn a_zero_or_out_of_range_timeout_is_a_usage_error_naming_the_range() {
    let ws = Ws::new();
    ws.write("a.txt", "x\n");
    let dir = ws.dir.path();
    for bad in ["0", "86400001", "1.5", "soon"] {
        let out = toolhost(
            &[
                "call",
                "file_view",
                r#"{"path":"a.txt"}"#,
                "--allow-read",
                ".",
                "--timeout-ms",
                bad,
            ],
            dir,
        );
        assert_eq!(out.status.code(), Some(2), "{bad}: {out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("--timeout-ms"), "{bad}: {stderr}");
        assert!(stderr.contains("from 1 to 86400000"), "{bad}: {stderr}");
        assert!(out.stdout.is_empty(), "{bad}: nothing runs");
    }
    let batch = toolhost(&["batch", "--timeout-ms", "0"], dir);
    assert_eq!(batch.status.code(), Some(2), "{batch:?}");
    assert!(String::from_utf8_lossy(&batch.stderr).contains("0 would time out every call"));
    let ok = toolhost(
        &[
            "call",
            "file_view",
            r#"{"path":"a.txt"}"#,
            "--allow-read",
            ".",
            "--timeout-ms",
            "86400000",
        ],
        dir,
    );
    assert_eq!(ok.status.code(), Some(0), "{ok:?}");
}

#[test]
fn lint_prints_each_report_once() {
    let plugin = test_plugin("tp_open_object");
    let out = toolhost(&["lint", plugin.to_str().unwrap()], &repo_root());
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    for tool in ["open_args", "union_args", "fine_tool"] {
        let headers = stdout
            .lines()
            .filter(|l| l.contains(&format!("{tool}: ")) && !l.starts_with(' '))
            .count();
        assert_eq!(headers, 1, "{tool} reported {headers} times:\n{stdout}");
    }
    assert_eq!(
        stdout.matches("object allows extra properties").count(),
        1,
        "{stdout}"
    );
}

#[test]
fn cap_inspect_shows_expiry_as_rfc3339() {
    let ws = Ws::new();
    let dir = ws.dir.path();
    let token = stdout_line(&toolhost(
        &[
            "cap",
            "mint",
            "--tool",
            "file_view",
            "--expires",
            "2030-01-02T03:04:05Z",
        ],
        dir,
    ));
    let out = toolhost(&["cap", "inspect", &token], dir);
    assert!(out.status.success(), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["expires"], "2030-01-02T03:04:05Z", "{v}");
    assert_eq!(v["expires_unix"], 1_893_553_445u64, "{v}");
    let never = stdout_line(&toolhost(&["cap", "mint", "--tool", "file_view"], dir));
    let v: Value =
        serde_json::from_slice(&toolhost(&["cap", "inspect", &never], dir).stdout).unwrap();
    assert!(v["expires"].is_null() && v["expires_unix"].is_null(), "{v}");
}

#[test]
fn settle_without_a_choice_names_both_choices_and_what_they_mean() {
    let ws = Ws::new();
    let out = toolhost(&["settle", "some-key"], ws.dir.path());
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--done (it happened"), "{stderr}");
    assert!(stderr.contains("--not-done (it did not happen"), "{stderr}");
    assert!(stderr.contains("some-key"), "{stderr}");
    let both = toolhost(
        &["settle", "some-key", "--done", "--not-done"],
        ws.dir.path(),
    );
    assert_eq!(both.status.code(), Some(2), "{both:?}");
}

#[test]
fn a_token_grant_naming_no_directory_is_named_in_the_denial() {
    let ws = Ws::new();
    ws.write("a.txt", "x\n");
    let dir = ws.dir.path();
    let token = stdout_line(&toolhost(
        &["cap", "mint", "--tool", "file_view", "--read", "nosuch"],
        dir,
    ));
    let out = toolhost(
        &[
            "call",
            "file_view",
            r#"{"path":"nosuch/a.txt"}"#,
            "--token",
            &token,
        ],
        dir,
    );
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let obs = observation(&out);
    let message = obs["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("the grant `nosuch` names no directory in the workspace"),
        "{message}"
    );
}

#[test]
fn not_found_says_what_is_missing_without_a_raw_errno() {
    let ws = Ws::new();
    ws.write("a.txt", "x\n");
    let out = toolhost(
        &[
            "call",
            "file_view",
            r#"{"path":"nothere.txt"}"#,
            "--allow-read",
            ".",
        ],
        ws.dir.path(),
    );
    let obs = observation(&out);
    let message = obs["error"]["message"].as_str().unwrap();
    assert_eq!(obs["error"]["code"], "not_found", "{obs}");
    assert!(message.contains("nothere.txt"), "{message}");
    assert!(message.contains("No such file or directory"), "{message}");
    assert!(!message.contains("os error"), "{message}");
    assert!(!obs["text"].as_str().unwrap().contains("os error"), "{obs}");
}
