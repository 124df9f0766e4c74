//! The reference tools: happy paths and every error code.

use crate::support::*;
use serde_json::json;
use sha2::{Digest, Sha256};

fn sha(b: &[u8]) -> String {
    hex::encode(Sha256::digest(b))
}

#[test]
fn file_view_returns_a_numbered_window_and_version() {
    let ws = Ws::new();
    let text = (1..=20).map(|i| format!("line {i}\n")).collect::<String>();
    ws.write("src/a.txt", &text);
    let obs = call(
        reference_host(),
        &ws,
        "file_view",
        r#"{"path":"src/a.txt","offset":3,"limit":2}"#,
        &READ_ALL,
    );
    let out = expect_ok(&obs);
    assert_eq!(out["total_lines"], 20);
    assert_eq!(out["has_more"], true);
    assert_eq!(out["offset"], 3);
    assert_eq!(out["lines"], json!(["line 3", "line 4"]));
    assert_eq!(out["sha256"], sha(text.as_bytes()));
    assert_eq!(obs["effects"]["level"], "read-only");
    assert!(obs["text"].as_str().unwrap().contains("line 3"));
}

#[test]
fn file_view_takes_integers_written_as_floats() {
    // `1.0` and `2e0` are integers under JSON Schema: the host validates
    // them as such and hands the plugin the canonical text (`1`, `2`), so
    // the call runs instead of failing inside the plugin at `field: null`.
    let ws = Ws::new();
    ws.write("a.txt", "one\ntwo\nthree\n");
    let obs = call(
        reference_host(),
        &ws,
        "file_view",
        r#"{"path":"a.txt","offset":1.0,"limit":2e0}"#,
        &READ_ALL,
    );
    let out = expect_ok(&obs);
    assert_eq!(out["offset"], 1);
    assert_eq!(out["lines"], json!(["one", "two"]));
    assert_eq!(out["has_more"], true);
}

#[test]
fn file_view_past_the_end_is_success_with_no_lines() {
    let ws = Ws::new();
    ws.write("a.txt", "one\ntwo\n");
    let obs = call(
        reference_host(),
        &ws,
        "file_view",
        r#"{"path":"a.txt","offset":50,"limit":10}"#,
        &READ_ALL,
    );
    let out = expect_ok(&obs);
    assert_eq!(out["lines"], json!([]));
    assert_eq!(out["total_lines"], 2);
    assert_eq!(out["has_more"], false);
}

#[test]
fn file_view_errors() {
    let ws = Ws::new();
    ws.write("bin.dat", b"abc\0def");
    ws.write("latin1.txt", b"caf\xe9\n");
    ws.write("big.txt", vec![b'a'; 5 * 1024 * 1024]);
    std::fs::create_dir_all(ws.path("dir")).unwrap();
    let h = reference_host();
    let v = |p: &str| {
        call(
            h,
            &ws,
            "file_view",
            &json!({"path": p, "offset": 1, "limit": 10}).to_string(),
            &READ_ALL,
        )
    };
    expect_error(&v("missing.txt"), "error", "not_found");
    expect_error(&v("dir"), "error", "is_directory");
    expect_error(&v("bin.dat"), "error", "not_text");
    expect_error(&v("latin1.txt"), "error", "not_text");
    expect_error(&v("big.txt"), "error", "file_too_large");
}

#[test]
fn file_edit_replaces_exactly_one_block_atomically() {
    let ws = Ws::new();
    ws.write("src/lib.rs", "fn a() {}\nfn b() {}\n");
    let before = sha(&ws.read("src/lib.rs"));
    let args = json!({"path":"src/lib.rs","old_str":"fn b() {}","new_str":"fn b() { todo!() }","expected_sha256": before});
    let obs = call(
        reference_host(),
        &ws,
        "file_edit",
        &args.to_string(),
        &WRITE_ALL,
    );
    let out = expect_ok(&obs);
    assert_eq!(out["replacements"], 1);
    assert_eq!(ws.read("src/lib.rs"), b"fn a() {}\nfn b() { todo!() }\n");
    assert_eq!(out["sha256_after"], sha(&ws.read("src/lib.rs")));
    assert_eq!(obs["effects"]["level"], "reversible");
    // No temporary file is left behind.
    let names: Vec<_> = std::fs::read_dir(ws.path("src"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
}

#[test]
fn file_edit_outcomes_leave_the_file_untouched() {
    let ws = Ws::new();
    ws.write("f.txt", "x = 1\nx = 1\n");
    let h = reference_host();
    let before = ws.snapshot();

    let obs = call(
        h,
        &ws,
        "file_edit",
        r#"{"path":"f.txt","old_str":"y = 2","new_str":"z"}"#,
        &WRITE_ALL,
    );
    expect_error(&obs, "error", "no_match");

    let obs = call(
        h,
        &ws,
        "file_edit",
        r#"{"path":"f.txt","old_str":"x = 1","new_str":"z"}"#,
        &WRITE_ALL,
    );
    let err = expect_error(&obs, "error", "multiple_matches");
    assert_eq!(err["details"]["count"], 2);

    let stale = "0".repeat(64);
    let obs = call(
        h,
        &ws,
        "file_edit",
        &json!({"path":"f.txt","old_str":"x = 1","new_str":"z","allow_multiple":true,"expected_sha256":stale}).to_string(),
        &WRITE_ALL,
    );
    expect_error(&obs, "error", "conflict");

    let obs = call(
        h,
        &ws,
        "file_edit",
        r#"{"path":"nope.txt","old_str":"a","new_str":"b"}"#,
        &WRITE_ALL,
    );
    expect_error(&obs, "error", "not_found");
    assert_eq!(ws.snapshot(), before);

    let obs = call(
        h,
        &ws,
        "file_edit",
        r#"{"path":"f.txt","old_str":"x = 1","new_str":"y","allow_multiple":true}"#,
        &WRITE_ALL,
    );
    assert_eq!(expect_ok(&obs)["replacements"], 2);
    assert_eq!(ws.read("f.txt"), b"y\ny\n");
}

#[test]
fn file_edit_through_a_read_grant_is_denied_before_the_plugin_runs() {
    let ws = Ws::new();
    ws.write("f.txt", "hello");
    let obs = call(
        reference_host(),
        &ws,
        "file_edit",
        r#"{"path":"f.txt","old_str":"hello","new_str":"bye"}"#,
        &READ_ALL,
    );
    let err = expect_error(&obs, "denied", "denied");
    assert_eq!(err["field"], "/path");
    assert_eq!(err["correctable"], false);
    assert_eq!(ws.read("f.txt"), b"hello");
    // Nothing ran: no fuel was used.
    assert_eq!(obs["usage"]["fuel_consumed"], 0);
}

#[test]
fn grep_search_pages_with_stable_order() {
    let ws = Ws::new();
    ws.write("b.rs", "fn main() {}\n// TODO two\n");
    ws.write("a.rs", "// TODO one\nlet x;\n// TODO three\n");
    ws.write("c.txt", "TODO not rust\n");
    ws.write("sub/d.rs", "TODO deep\n");
    let h = reference_host();
    let obs = call(
        h,
        &ws,
        "grep_search",
        r#"{"pattern":"TODO","path":".","glob":"*.rs","limit":2}"#,
        &READ_ALL,
    );
    let out = expect_ok(&obs).clone();
    assert_eq!(out["total"], 4);
    assert_eq!(
        out["matches"],
        json!([{"path":"a.rs","line_number":1,"line":"// TODO one"},{"path":"a.rs","line_number":3,"line":"// TODO three"}])
    );
    let cursor = out["next_cursor"].as_str().expect("a cursor").to_string();
    let obs = call(
        h,
        &ws,
        "grep_search",
        &json!({"pattern":"TODO","path":".","glob":"*.rs","limit":2,"cursor":cursor}).to_string(),
        &READ_ALL,
    );
    let out = expect_ok(&obs);
    assert_eq!(
        out["matches"],
        json!([{"path":"b.rs","line_number":2,"line":"// TODO two"},{"path":"sub/d.rs","line_number":1,"line":"TODO deep"}])
    );
    assert!(out["next_cursor"].is_null());
}

#[test]
fn grep_search_errors() {
    let ws = Ws::new();
    ws.write("a.rs", "x\n");
    let h = reference_host();
    let obs = call(
        h,
        &ws,
        "grep_search",
        r#"{"pattern":"(unclosed","path":"."}"#,
        &READ_ALL,
    );
    let err = expect_error(&obs, "error", "invalid_regex");
    assert_eq!(err["correctable"], true);
    assert_eq!(err["field"], "/pattern");
    let obs = call(
        h,
        &ws,
        "grep_search",
        r#"{"pattern":"x","path":".","glob":"[z"}"#,
        &READ_ALL,
    );
    expect_error(&obs, "error", "invalid_glob");
    let obs = call(
        h,
        &ws,
        "grep_search",
        r#"{"pattern":"x","path":".","cursor":"garbage!"}"#,
        &READ_ALL,
    );
    expect_error(&obs, "error", "invalid_cursor");
    let obs = call(
        h,
        &ws,
        "grep_search",
        r#"{"pattern":"x","path":"nowhere"}"#,
        &READ_ALL,
    );
    expect_error(&obs, "error", "not_found");
}
