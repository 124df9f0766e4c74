//! A tool's own error is held to the same limits as its output: a hostile
//! plugin returning a huge message, field and details gets them clipped,
//! with an explicit marker, in the library, on the command line and over
//! MCP.

use serde_json::{json, Value};

use crate::mcp::{observation_of, Setup, StdioServer};
use crate::support::*;

/// Bytes of the hostile message and details: far beyond `huge_error`'s
/// declared output limit of 64 KiB.
const HUGE: u64 = 20_000_000;
/// What a clipped error may weigh at most, serialized (output limit plus
/// the small fields and the JSON around them).
const BOUND: usize = 80 * 1024;

#[track_caller]
fn assert_clipped(obs: &Value) {
    let err = expect_error(obs, "error", "huge_failure");
    let details = &err["details"];
    assert_eq!(
        details["clipped"]["original_bytes"].as_u64().unwrap() as f64,
        // {"blob":"ddd…","end":"tail-marker"}
        (HUGE + 31) as f64,
        "{details:.300}"
    );
    let text = details["text"].as_str().unwrap();
    assert!(text.len() <= 64 * 1024, "{}", text.len());
    assert!(text.contains(" bytes omitted …]"), "{text:.200}");
    assert!(text.starts_with(r#"{"blob":"ddd"#), "{text:.200}");
    assert!(
        text.ends_with(r#""end":"tail-marker"}"#),
        "the tail is kept"
    );
    let message = err["message"].as_str().unwrap();
    assert!(message.len() <= 2048, "{}", message.len());
    assert!(message.contains(" bytes omitted …]"), "{message:.200}");
    // `/fff…` resolves into nothing in the arguments: dropped.
    assert!(err["field"].is_null(), "{:.300}", err["field"]);
    let total = obs.to_string().len();
    assert!(total < BOUND, "the observation is {total} bytes");
}

#[test]
fn huge_error_details_are_clipped_in_the_library() {
    let obs = call(
        hostile_host(),
        &Ws::new(),
        "huge_error",
        &format!(r#"{{"bytes":{HUGE}}}"#),
        &NOTHING,
    );
    assert_clipped(&obs);
}

#[test]
fn huge_error_details_are_clipped_on_the_command_line() {
    let state = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_toolhost"))
        .arg("--no-builtin")
        .arg("--plugin")
        .arg(test_plugin("tp_hostile"))
        .arg("--cache-dir")
        .arg(repo_root().join("target/test-compile-cache"))
        .arg("--key-file")
        .arg(state.path().join("root.key"))
        .arg("--store")
        .arg(state.path().join("records.sqlite"))
        .args(["call", "huge_error", &format!(r#"{{"bytes":{HUGE}}}"#)])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        out.stdout.len() < BOUND,
        "{} bytes on stdout",
        out.stdout.len()
    );
    let obs: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_valid_observation(&obs);
    assert_clipped(&obs);
}

#[test]
fn huge_error_details_are_clipped_over_mcp_stdio() {
    let setup = Setup::new(&["tp_hostile"]);
    let mut server = StdioServer::initialized(&setup, &[]);
    let reply = server.call(7, "huge_error", json!({ "bytes": HUGE }));
    // The error is in the envelope (`_meta`) and its paragraph in the
    // text block: the whole message stays bounded all the same.
    let size = reply.to_string().len();
    assert!(
        size < 2 * BOUND + 4096,
        "the JSON-RPC message is {size} bytes"
    );
    assert_eq!(reply["result"]["isError"], true);
    assert_clipped(&observation_of(&reply));
}
