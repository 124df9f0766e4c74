//! The seeds' bad-input list: each is answered by a structured error, the
//! plugin never runs for input the host can reject, and no file changes.

use crate::support::*;
use serde_json::Value;

/// Calls `file_edit`/`file_view` with bad input and checks the workspace is
/// unchanged afterwards.
fn bad(tool: &str, args: &str) -> Value {
    let ws = Ws::new();
    ws.write("src/a.txt", "alpha\nbeta\n");
    ws.write("secret/key.txt", "hunter2\n");
    let before = ws.snapshot();
    let obs = call(
        reference_host(),
        &ws,
        tool,
        args,
        &Grant {
            read: &["src"],
            write: &["src"],
        },
    );
    assert_eq!(
        ws.snapshot(),
        before,
        "a bad call changed the workspace: {obs:#}"
    );
    assert_ne!(obs["status"], "ok", "{obs:#}");
    obs
}

/// Rejected by the host: the plugin never ran.
fn rejected_before_running(obs: &Value) {
    assert_eq!(obs["usage"]["fuel_consumed"], 0, "{obs:#}");
}

/// Rejected by the host with error `code` blaming the argument at `field`;
/// returns the error.
#[track_caller]
fn rejected_at<'a>(obs: &'a Value, code: &str, field: &str) -> &'a Value {
    let err = expect_error(obs, "error", code);
    assert_eq!(err["field"], field, "{obs:#}");
    rejected_before_running(obs);
    err
}

/// `file_view` arguments for `src/a.txt` with this raw `offset` literal.
fn view_offset(offset: &str) -> String {
    format!(r#"{{"path":"src/a.txt","offset":{offset},"limit":1}}"#)
}

#[test]
fn unknown_tool_suggests_the_closest_name() {
    let obs = bad("file_veiw", &view_args("src/a.txt"));
    let err = expect_error(&obs, "error", "unknown_tool");
    assert!(
        err["message"].as_str().unwrap().contains("file_view"),
        "{err}"
    );
    // The seeds class a missing tool as not correctable by editing arguments.
    assert_eq!(err["correctable"], false);
    rejected_before_running(&obs);
}

#[test]
fn missing_field() {
    let obs = bad("file_view", r#"{"offset":1,"limit":5}"#);
    let err = rejected_at(&obs, "invalid_arguments", "/path");
    assert_eq!(err["actual"], "missing");
    assert_eq!(err["correctable"], true);
    assert_eq!(err["retry"], "after_correction");
}

#[test]
fn extra_field() {
    let obs = bad(
        "file_view",
        r#"{"path":"src/a.txt","offset":1,"limit":1,"verbose":true}"#,
    );
    rejected_at(&obs, "invalid_arguments", "/verbose");
}

#[test]
fn zero_or_negative_line() {
    for offset in ["0", "-3"] {
        let obs = bad("file_view", &view_offset(offset));
        let err = rejected_at(&obs, "invalid_arguments", "/offset");
        assert_eq!(err["actual"], offset);
    }
}

#[test]
fn integer_as_string_and_boolean_as_integer() {
    let obs = bad("file_view", &view_offset(r#""1""#));
    let err = rejected_at(&obs, "invalid_arguments", "/offset");
    assert!(
        err["expected"].as_str().unwrap().contains("integer"),
        "{err}"
    );
    let obs = bad("file_view", &view_offset("true"));
    rejected_at(&obs, "invalid_arguments", "/offset");
}

#[test]
fn dotdot_leaving_the_workspace_is_denied() {
    let obs = bad("file_view", &view_args("src/../../etc/passwd"));
    let err = expect_error(&obs, "denied", "denied");
    assert_eq!(err["field"], "/path");
    assert_eq!(err["correctable"], false);
    assert_eq!(err["retry"], "never");
    rejected_before_running(&obs);
}

#[test]
fn dotdot_inside_the_workspace_outside_the_grant_is_denied() {
    let obs = bad("file_view", &view_args("src/../secret/key.txt"));
    expect_error(&obs, "denied", "denied");
    assert!(!obs["text"].as_str().unwrap().contains("hunter2"));
    rejected_before_running(&obs);
}

#[test]
fn absolute_path_is_malformed() {
    let obs = bad("file_view", &view_args("/etc/passwd"));
    rejected_at(&obs, "invalid_arguments", "/path");
}

#[test]
fn symlink_pointing_outside_is_denied_not_not_found() {
    let ws = Ws::new();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), "top secret").unwrap();
    std::fs::create_dir_all(ws.path("src")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret"), ws.path("src/link")).unwrap();
    let obs = call(
        reference_host(),
        &ws,
        "file_view",
        r#"{"path":"src/link","offset":1,"limit":5}"#,
        &READ_ALL,
    );
    expect_error(&obs, "denied", "denied");
    assert!(!obs.to_string().contains("top secret"));
    // Also for writes.
    let obs = call(
        reference_host(),
        &ws,
        "file_edit",
        r#"{"path":"src/link","old_str":"top","new_str":"x"}"#,
        &WRITE_ALL,
    );
    expect_error(&obs, "denied", "denied");
    assert_eq!(
        std::fs::read_to_string(outside.path().join("secret")).unwrap(),
        "top secret"
    );
}

#[test]
fn non_utf8_and_oversized_files() {
    let ws = Ws::new();
    ws.write("bad.txt", b"\xff\xfe\x00x");
    ws.write("huge.txt", vec![b'x'; 5 << 20]);
    let before = ws.snapshot();
    let h = reference_host();
    let obs = call(h, &ws, "file_view", &view_args("bad.txt"), &READ_ALL);
    expect_error(&obs, "error", "not_text");
    let obs = call(h, &ws, "file_view", &view_args("huge.txt"), &READ_ALL);
    expect_error(&obs, "error", "file_too_large");
    let obs = call(
        h,
        &ws,
        "file_edit",
        r#"{"path":"bad.txt","old_str":"x","new_str":"y"}"#,
        &WRITE_ALL,
    );
    expect_error(&obs, "error", "not_text");
    assert_eq!(ws.snapshot(), before);
}

#[test]
fn oversized_argument() {
    let big = "a".repeat(300 * 1024);
    let obs = bad(
        "file_edit",
        &format!(r#"{{"path":"src/a.txt","old_str":"{big}","new_str":"b"}}"#),
    );
    let err = expect_error(&obs, "error", "invalid_arguments");
    assert!(err["message"].as_str().unwrap().contains("limit"), "{err}");
    rejected_before_running(&obs);
}

#[test]
fn duplicate_json_keys() {
    let obs = bad(
        "file_view",
        r#"{"path":"src/a.txt","path":"secret/key.txt","offset":1,"limit":1}"#,
    );
    let err = expect_error(&obs, "error", "invalid_json");
    assert!(err["message"].as_str().unwrap().contains("path"), "{err}");
    rejected_before_running(&obs);
}

#[test]
fn integer_above_2_pow_53() {
    let obs = bad("file_view", &view_offset("9007199254740993"));
    rejected_at(&obs, "invalid_json", "/offset");
}

#[test]
fn not_json_at_all() {
    let obs = bad("file_view", r#"{"path": "src/a.txt", "offset": 1,"#);
    expect_error(&obs, "error", "invalid_json");
    rejected_before_running(&obs);
}

#[test]
fn no_grant_at_all_is_denied() {
    let ws = Ws::new();
    ws.write("a.txt", "x");
    let obs = call(
        reference_host(),
        &ws,
        "file_view",
        &view_args("a.txt"),
        &NOTHING,
    );
    let err = expect_error(&obs, "denied", "denied");
    assert!(
        obs["text"]
            .as_str()
            .unwrap()
            .to_lowercase()
            .contains("permission")
            || err["message"].as_str().unwrap().contains("grant")
    );
}

#[test]
fn grant_prefixes_match_whole_segments() {
    let ws = Ws::new();
    ws.write("src/a.txt", "in");
    ws.write("src2/b.txt", "out");
    let g = Grant {
        read: &["src"],
        write: &[],
    };
    let h = reference_host();
    expect_ok(&call(h, &ws, "file_view", &view_args("src/a.txt"), &g));
    expect_error(
        &call(h, &ws, "file_view", &view_args("src2/b.txt"), &g),
        "denied",
        "denied",
    );
}
