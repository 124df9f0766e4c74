//! The observation shape, its text and its hygiene, end to end.

use super::error::*;
use super::hygiene::*;
use super::render::*;
use super::*;
use serde_json::json;

fn schema_validator() -> jsonschema::Validator {
    let schema: Value = serde_json::from_str(SCHEMA_JSON).expect("schema is JSON");
    jsonschema::meta::validate(&schema).expect("schema is a valid 2020-12 schema");
    jsonschema::validator_for(&schema).expect("schema compiles")
}

fn assert_valid(v: &jsonschema::Validator, obs: &Observation) -> Value {
    let value = serde_json::to_value(obs).unwrap();
    let errors: Vec<String> = v
        .iter_errors(&value)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{errors:#?}\n{value:#}");
    value
}

fn assert_invalid(v: &jsonschema::Validator, value: &Value) {
    assert!(!v.is_valid(value), "should be rejected: {value:#}");
}

/// The `/offset` argument error the failure tests share, with `message`.
fn offset_error(message: &str) -> ErrorInfo {
    ErrorCode::InvalidArguments
        .info(message)
        .with_field("/offset")
        .with_expected("integer ≥ 1")
        .with_actual("0")
}

/// A failed observation of call `c`.
fn failed(tool: &str, level: SideEffect, error: ErrorInfo) -> Observation {
    Observation::failure("c", tool, level, error)
}

fn sample_ok() -> Observation {
    Observation::ok(
        "call-1",
        "read_file",
        SideEffect::ReadOnly,
        json!({"path": "src/a.rs", "content": "fn main() {}", "lines": 1}),
        4096,
    )
}

// ---- shape and serialization ----

#[test]
fn ok_serializes_every_field_in_order() {
    let s = serde_json::to_string(&sample_ok()).unwrap();
    let keys = [
        "schema_version",
        "call_id",
        "tool",
        "status",
        "output",
        "text",
        "truncated",
        "error",
        "effects",
        "usage",
        "logs",
        "redactions",
        "provenance",
        "untrusted",
        "consecutive_failures",
    ];
    let mut last = 0;
    for k in keys {
        let pos = s
            .find(&format!("\"{k}\":"))
            .unwrap_or_else(|| panic!("{k} missing"));
        assert!(pos >= last, "{k} out of order in {s}");
        last = pos;
    }
    let v: Value = serde_json::from_str(&s).unwrap();
    assert_eq!(v["schema_version"], 1);
    assert_eq!(v["status"], "ok");
    assert_eq!(v["truncated"], Value::Null);
    assert_eq!(v["error"], Value::Null);
    assert_eq!(v["effects"]["level"], "read-only");
    assert_eq!(v["effects"]["idempotency_key"], Value::Null);
    assert_eq!(
        v["usage"]["output_bytes"],
        r#"{"path":"src/a.rs","content":"fn main() {}","lines":1}"#.len()
    );
    assert_eq!(v["logs"]["stdout"], "");
}

#[test]
fn output_keeps_the_tools_key_order() {
    let raw = r#"{"zeta":1,"alpha":2,"mid":{"b":1,"a":2}}"#;
    let output: Value = serde_json::from_str(raw).unwrap();
    let obs = Observation::ok("c", "t", SideEffect::ReadOnly, output, 10);
    let s = serde_json::to_string(&obs).unwrap();
    assert!(s.contains(raw), "{s}");
    // Text clipped (10 bytes) but still in tool order.
    let obs = Observation::ok(
        "c",
        "t",
        SideEffect::ReadOnly,
        serde_json::from_str(raw).unwrap(),
        4096,
    );
    let z = obs.text.find("zeta").unwrap();
    let a = obs.text.find("alpha").unwrap();
    assert!(z < a);
}

#[test]
fn round_trips_through_json() {
    let obs = failed(
        "write_file",
        SideEffect::Irreversible,
        ErrorCode::Timeout.info("deadline of 5000 ms exceeded"),
    )
    .with_idempotency_key("k1")
    .with_usage(Usage {
        fuel_consumed: 1,
        wall_time_us: 2,
        peak_memory_bytes: 3,
        output_bytes: 4,
        wait_us: 5,
    })
    .with_logs(Logs::capture(b"out", b"err", 100));
    let s = serde_json::to_string(&obs).unwrap();
    let back: Observation = serde_json::from_str(&s).unwrap();
    assert_eq!(back, obs);
}

#[test]
fn deserialize_rejects_unknown_fields_and_bad_enums() {
    let mut v = serde_json::to_value(sample_ok()).unwrap();
    v["extra"] = json!(1);
    assert!(serde_json::from_value::<Observation>(v).is_err());
    let mut v = serde_json::to_value(sample_ok()).unwrap();
    v["status"] = json!("failed");
    assert!(serde_json::from_value::<Observation>(v).is_err());
    let mut v = serde_json::to_value(sample_ok()).unwrap();
    v["effects"]["level"] = json!("dangerous");
    assert!(serde_json::from_value::<Observation>(v).is_err());
}

#[test]
fn serialization_is_fast() {
    let obs = Observation::ok("c", "t", SideEffect::ReadOnly, json!({"ok": true}), 1024);
    let mut buf = Vec::with_capacity(1024);
    let n = 2000;
    let start = std::time::Instant::now();
    for _ in 0..n {
        buf.clear();
        serde_json::to_writer(&mut buf, &obs).unwrap();
    }
    let per = start.elapsed() / n;
    println!("serialize trivial observation: {per:?}");
    // Generous bound for an unoptimized test build on a loaded machine;
    // a release build serializes this in about a microsecond.
    assert!(per < std::time::Duration::from_micros(200), "{per:?}");
}

// ---- ok text ----

#[test]
fn ok_text_is_compact_json_never_pretty_and_clipped() {
    let obs = sample_ok();
    assert!(obs.text.contains(r#""path":"src/a.rs""#), "{}", obs.text);
    assert!(!obs.text.contains('\n'), "{}", obs.text);
    assert_eq!(
        obs.text,
        serde_json::to_string(obs.output.as_ref().unwrap()).unwrap()
    );
    assert!(obs.truncated.is_none());

    let big: Vec<Value> = (0..2000).map(|i| json!({"i": i})).collect();
    let obs = Observation::ok("c", "t", SideEffect::ReadOnly, Value::Array(big), 500);
    assert!(obs.text.len() <= 500, "{}", obs.text.len());
    assert!(obs.text.starts_with("[{\"i\":0}"));
    assert!(obs.text.ends_with("{\"i\":1999}]"));
    assert!(obs.text.contains("bytes omitted …]"));
    let t = obs.truncated.as_ref().unwrap();
    assert_eq!(t.original_bytes, obs.usage.output_bytes);
    assert_eq!(t.kept_bytes + t.omitted_bytes, t.original_bytes);
    assert!(obs.output.as_ref().unwrap().as_array().unwrap().len() == 2000);

    let obs = obs.with_truncation_hint("use offset=100");
    assert_eq!(obs.truncated.unwrap().hint, "use offset=100");
}

#[test]
fn ok_scalars_and_empty_containers_render_compact() {
    for (v, text) in [
        (json!(null), "null"),
        (json!(3), "3"),
        (json!("hi"), "\"hi\""),
        (json!({}), "{}"),
        (json!([]), "[]"),
    ] {
        let obs = Observation::ok("c", "t", SideEffect::ReadOnly, v, 100);
        assert_eq!(obs.text, text);
    }
}

// ---- failures ----

#[test]
fn invalid_arguments_text_is_actionable() {
    let obs = failed("read_file", SideEffect::ReadOnly, offset_error(""));
    assert_eq!(obs.status, Status::Error);
    assert_eq!(
        obs.text,
        "invalid_arguments at /offset: expected integer ≥ 1, got 0. \
         Fix the argument and call again."
    );
    let e = obs.error.unwrap();
    assert!(e.correctable);
    assert_eq!(e.retry, Retry::AfterCorrection);
    assert!(obs.output.is_none());
}

#[test]
fn message_and_expected_render_together() {
    let obs = failed(
        "read_file",
        SideEffect::ReadOnly,
        offset_error("offset must be positive."),
    );
    assert_eq!(
        obs.text,
        "invalid_arguments at /offset: offset must be positive (expected integer ≥ 1, \
         got 0). Fix the argument and call again."
    );
}

#[test]
fn denied_says_it_is_a_permission_matter() {
    let obs = failed(
        "read_file",
        SideEffect::ReadOnly,
        ErrorCode::Denied
            .info("`secrets/key` is outside the granted paths (read: src)")
            .with_field("/path"),
    );
    assert_eq!(obs.status, Status::Denied);
    assert!(obs.text.starts_with("denied at /path: `secrets/key`"));
    assert!(obs.text.contains("permission matter, not a missing file"));
    assert!(!obs.text.contains("not_found"));
    let e = obs.error.unwrap();
    assert!(!e.correctable);
    assert_eq!(e.retry, Retry::Never);
}

#[test]
fn timeout_of_a_read_only_call_is_a_safe_error() {
    let obs = failed(
        "search",
        SideEffect::ReadOnly,
        ErrorCode::Timeout.info("deadline of 5000 ms exceeded"),
    );
    assert_eq!(obs.status, Status::Error);
    assert_eq!(obs.error.as_ref().unwrap().retry, Retry::Safe);
    assert!(obs.text.contains("repeating it is safe"));
}

#[test]
fn timeout_of_a_side_effecting_call_is_unknown_never_error() {
    for level in [SideEffect::Reversible, SideEffect::Irreversible] {
        for code in ErrorCode::ALL.into_iter().filter(|c| c.during_execution()) {
            let obs = failed("send_mail", level, code.info("boom"));
            assert_eq!(obs.status, Status::Unknown, "{code} {level:?}");
            assert_eq!(obs.error.as_ref().unwrap().retry, Retry::AfterSettlement);
            assert!(!obs.error.as_ref().unwrap().correctable);
            assert!(obs.text.contains("outcome is unknown"), "{}", obs.text);
            assert!(obs.text.contains("do not treat it as failed"));
        }
    }
    let obs = failed(
        "put",
        SideEffect::Idempotent,
        ErrorCode::Timeout.info("deadline"),
    );
    assert_eq!(obs.status, Status::Unknown);
    assert_eq!(obs.error.as_ref().unwrap().retry, Retry::Safe);
    assert!(obs.text.contains("idempotent"));
}

#[test]
fn effect_unknown_is_explicit_for_other_errors() {
    let e = ErrorInfo::from_tool(
        "io_failed",
        "disk full after 3 of 5 files",
        None,
        false,
        None,
    );
    let obs = failed("copy", SideEffect::Reversible, e);
    assert_eq!(obs.status, Status::Error);
    let obs = obs.effect_unknown();
    assert_eq!(obs.status, Status::Unknown);
    assert_eq!(obs.error.as_ref().unwrap().retry, Retry::AfterSettlement);
    assert!(obs.text.starts_with("io_failed: disk full"));
    assert!(obs.text.contains("outcome is unknown"));

    // Read-only calls cannot have an effect; denied and ok stay as they are.
    let ro = failed("t", SideEffect::ReadOnly, ErrorCode::Internal.info("x")).effect_unknown();
    assert_eq!(ro.status, Status::Error);
    let denied =
        failed("t", SideEffect::Irreversible, ErrorCode::Denied.info("x")).effect_unknown();
    assert_eq!(denied.status, Status::Denied);
    let ok = Observation::ok("c", "t", SideEffect::Irreversible, json!(1), 10).effect_unknown();
    assert_eq!(ok.status, Status::Ok);
}

#[test]
fn host_code_table() {
    use ErrorCode::*;
    for c in ErrorCode::ALL {
        assert_eq!(ErrorCode::from_code(c.as_str()), Some(c));
        assert!(is_valid_code(c.as_str()));
        assert_eq!(serde_json::to_value(c).unwrap(), json!(c.as_str()));
        // Correctable codes, and only they, say "fix and retry".
        assert_eq!(c.correctable(), c.retry() == Retry::AfterCorrection, "{c}");
    }
    assert_eq!(ErrorCode::from_code("no_match"), None);
    assert_eq!(Denied.status(), Status::Denied);
    assert_eq!(Timeout.status(), Status::Error);
    assert_eq!(Denied.retry(), Retry::Never);
    assert!(!Denied.correctable());
    assert_eq!(UnknownTool.retry(), Retry::Never);
    assert!(InvalidJson.correctable());
    assert!(!PluginUnavailable.during_execution());
    assert!(!InvalidArguments.during_execution());
    assert!(PluginCrashed.during_execution());
}

#[test]
fn tool_defined_codes_pass_through() {
    let e = ErrorInfo::from_tool(
        "no_match",
        "old_str not found",
        Some("/old_str".into()),
        true,
        Some(json!({"count": 0})),
    );
    let obs = failed("edit_file", SideEffect::Reversible, e);
    assert_eq!(obs.status, Status::Error);
    let e = obs.error.as_ref().unwrap();
    assert_eq!(e.code, "no_match");
    assert_eq!(e.retry, Retry::AfterCorrection);
    assert_eq!(
        obs.text,
        "no_match at /old_str: old_str not found. Fix the argument and call again."
    );
    // A host code given as a string gets the host defaults.
    let e = ErrorInfo::new("denied", "no");
    assert_eq!(e.retry, Retry::Never);
    assert!(!e.correctable);
    let e = ErrorInfo::new("weird", "no");
    assert!(!e.correctable);
    assert_eq!(e.retry, Retry::Never);
}

#[test]
fn bad_tool_errors_are_sanitized() {
    // Malformed code, ANSI in the message, bare field, huge actual.
    let e = ErrorInfo::from_tool(
        "Not-A-Code!",
        "\x1b[31mred\x1b[0m failure",
        None,
        true,
        None,
    )
    .with_field("a~b")
    .with_actual("x".repeat(10_000));
    let obs = failed("t", SideEffect::ReadOnly, e);
    let e = obs.error.as_ref().unwrap();
    assert_eq!(e.code, "invalid_output");
    assert!(!e.correctable);
    assert!(e.message.contains("malformed code `Not-A-Code!`"));
    assert!(e.message.contains("red failure"));
    assert!(!e.message.contains('\x1b'));
    assert_eq!(e.field.as_deref(), Some("/a~0b"));
    assert!(e.actual.as_ref().unwrap().len() <= MAX_DETAIL_BYTES);
    assert!(e.actual.as_ref().unwrap().ends_with('…'));

    let long = "é".repeat(5000);
    let obs = failed("t", SideEffect::ReadOnly, ErrorInfo::new("x", long));
    assert!(obs.error.as_ref().unwrap().message.len() <= MAX_MESSAGE_BYTES);
    assert!(obs.text.len() < MAX_MESSAGE_BYTES + 400);

    let obs = failed("t", SideEffect::ReadOnly, ErrorInfo::new("x", ""));
    assert!(obs.text.starts_with("x: no message."));
}

#[test]
fn huge_tool_name_and_call_id_are_clipped() {
    let name = "n".repeat(100_000);
    let obs = Observation::failure(
        &name,
        &name,
        SideEffect::ReadOnly,
        ErrorCode::UnknownTool.info("no tool named that"),
    );
    assert!(obs.tool.len() <= MAX_TOOL_NAME_BYTES);
    assert!(obs.call_id.len() <= MAX_CALL_ID_BYTES);
    assert!(obs.text.contains("Use one of the tools listed"));
    let obs = failed(
        "raed_file",
        SideEffect::ReadOnly,
        ErrorCode::UnknownTool.info("no tool `raed_file`; did you mean `read_file`?"),
    );
    assert!(
        obs.text
            .starts_with("unknown_tool: no tool `raed_file`; did you mean `read_file`? Use"),
        "{}",
        obs.text
    );
}

#[test]
fn pointers() {
    assert!(is_json_pointer(""));
    assert!(is_json_pointer("/a/0/~0~1"));
    assert!(!is_json_pointer("a"));
    assert!(!is_json_pointer("/a~2"));
    assert!(!is_json_pointer("/a~"));
    assert_eq!(to_json_pointer("offset"), "/offset");
    assert_eq!(to_json_pointer("/x~"), "/x~0");
    assert_eq!(to_json_pointer("/ok"), "/ok");
    assert!(!is_valid_code(""));
    assert!(!is_valid_code("9a"));
    assert!(!is_valid_code(&"a".repeat(65)));
    assert!(is_valid_code(&"a".repeat(64)));
}

#[test]
fn partial_leads_with_the_error_and_keeps_output() {
    let obs = Observation::partial(
        "c",
        "batch_read",
        SideEffect::ReadOnly,
        json!({"read": ["a", "b"]}),
        ErrorInfo::from_tool(
            "not_found",
            "`c` does not exist",
            Some("/paths/2".into()),
            true,
            None,
        ),
        4096,
    );
    assert_eq!(obs.status, Status::Partial);
    assert!(!obs.is_ok());
    assert!(obs
        .text
        .starts_with("partial result: not_found at /paths/2:"));
    assert!(obs.text.contains("\"read\""));
    assert!(obs.text.contains("redo only the missing part"));
    assert!(obs.output.is_some() && obs.error.is_some());

    let obs = Observation::partial(
        "c",
        "t",
        SideEffect::Irreversible,
        json!({"sent": 1}),
        ErrorInfo::new("rate_limited", "2 of 3 not sent"),
        400,
    )
    .effect_unknown();
    assert_eq!(obs.status, Status::Partial);
    assert!(
        obs.text.contains("may or may not have taken effect"),
        "{}",
        obs.text
    );
    assert!(obs.text.ends_with("{\"sent\":1}"), "{}", obs.text);
    assert_eq!(obs.error.unwrap().retry, Retry::AfterSettlement);
}

// ---- the published schema ----

#[test]
fn schema_has_the_published_id() {
    let schema: Value = serde_json::from_str(SCHEMA_JSON).unwrap();
    assert_eq!(schema["$id"], SCHEMA_ID);
    assert_eq!(
        schema["$schema"],
        "https://json-schema.org/draft/2020-12/schema"
    );
}

#[test]
fn observations_validate_against_the_schema() {
    let v = schema_validator();
    // ok
    assert_valid(&v, &sample_ok());
    // ok, truncated, with logs, usage and a replayed key
    let big: Vec<Value> = (0..500).map(|i| json!(i)).collect();
    let obs = Observation::ok("c", "t", SideEffect::Idempotent, Value::Array(big), 100)
        .with_idempotency_key("idem-1")
        .with_replayed(true)
        .with_usage(Usage {
            fuel_consumed: 10,
            wall_time_us: 20,
            peak_memory_bytes: 65536,
            output_bytes: 2000,
            wait_us: 0,
        })
        .with_logs(Logs::capture(b"\x1b[1mhello\x1b[0m", &[0xff, b'x'], 100));
    assert!(obs.truncated.is_some());
    let value = assert_valid(&v, &obs);
    assert_eq!(value["logs"]["stdout"], "hello");
    assert_eq!(value["logs"]["stderr"], "\u{fffd}x");
    // error with every field
    let obs = failed(
        "read_file",
        SideEffect::ReadOnly,
        offset_error("offset must be positive").with_details(json!({"minimum": 1})),
    );
    let value = assert_valid(&v, &obs);
    assert_eq!(value["error"]["details"]["minimum"], 1);
    // denied
    assert_valid(
        &v,
        &failed("t", SideEffect::ReadOnly, ErrorCode::Denied.info("no")),
    );
    // unknown
    let obs = failed(
        "send",
        SideEffect::Irreversible,
        ErrorCode::Timeout.info("deadline"),
    );
    assert_eq!(obs.status, Status::Unknown);
    assert_valid(&v, &obs);
    // partial
    assert_valid(
        &v,
        &Observation::partial(
            "c",
            "t",
            SideEffect::ReadOnly,
            json!([1]),
            ErrorInfo::new("some_failed", "1 of 2"),
            100,
        ),
    );
    // sanitized garbage still validates
    assert_valid(
        &v,
        &failed(
            "t",
            SideEffect::ReadOnly,
            ErrorInfo::new("BAD CODE", "m").with_field("no pointer"),
        ),
    );
}

#[test]
fn schema_rejects_inconsistent_or_open_observations() {
    let v = schema_validator();
    let ok = serde_json::to_value(sample_ok()).unwrap();
    let err = serde_json::to_value(failed(
        "t",
        SideEffect::Reversible,
        ErrorCode::Internal.info("x"),
    ))
    .unwrap();

    // `base` changed by `change` must fail the schema.
    let rejects = |base: &Value, change: &dyn Fn(&mut Value)| {
        let mut x = base.clone();
        change(&mut x);
        assert_invalid(&v, &x);
    };

    rejects(&ok, &|x| x["extra"] = json!(1));
    rejects(&ok, &|x| {
        drop(x.as_object_mut().unwrap().remove("truncated"))
    });
    rejects(&ok, &|x| x["schema_version"] = json!(2));
    rejects(&ok, &|x| x["status"] = json!("failed"));
    rejects(&ok, &|x| x["effects"]["level"] = json!("harmless"));
    rejects(&ok, &|x| x["usage"]["extra"] = json!(0));
    rejects(&ok, &|x| x["usage"]["fuel_consumed"] = json!(-1));
    // ok with an error object
    rejects(&ok, &|x| x["error"] = err["error"].clone());
    // error without error object
    rejects(&err, &|x| x["error"] = Value::Null);
    // error with output
    rejects(&err, &|x| x["output"] = json!({"a": 1}));
    // bad retry value, open error object, bad pointer, bad code
    for (k, bad) in [
        ("retry", json!("maybe")),
        ("field", json!("offset")),
        ("code", json!("Bad")),
        ("extra", json!(1)),
    ] {
        rejects(&err, &|x| x["error"][k] = bad.clone());
    }
    // unknown outcome claimed for a read-only call
    rejects(&err, &|x| {
        x["status"] = json!("unknown");
        x["effects"]["level"] = json!("read-only");
    });
    // denied must not be retryable
    rejects(&err, &|x| {
        x["status"] = json!("denied");
        x["error"]["retry"] = json!("safe");
    });
}

// ---- guest_text ----

#[test]
fn guest_text_is_lossy() {
    assert_eq!(guest_text(b"ok \xff\xfe!"), "ok \u{fffd}\u{fffd}!");
    assert_eq!(guest_text(b"\x1b[32mgreen\x1b[0m"), "green");
}

// ---- clip_head_tail ----

#[test]
fn clip_keeps_short_text() {
    let (s, t) = clip_head_tail("hello", 5);
    assert_eq!(s, "hello");
    assert!(t.is_none());
}

#[test]
fn clip_keeps_head_and_tail_with_marker() {
    let text: String = (0..1000).map(|i| format!("line {i}\n")).collect();
    let (s, t) = clip_head_tail(&text, 300);
    let t = t.unwrap();
    assert!(s.len() <= 300, "{}", s.len());
    assert!(s.starts_with("line 0\nline 1\n"));
    assert!(s.ends_with("line 999\n"));
    assert_eq!(t.original_bytes, text.len() as u64);
    assert_eq!(t.kept_bytes + t.omitted_bytes, t.original_bytes);
    assert!(s.contains(&format!("\n[… {} bytes omitted …]\n", t.omitted_bytes)));
    // Cuts fall on line boundaries here: every kept line is whole.
    for line in s.lines().filter(|l| !l.starts_with('[')) {
        assert!(line.starts_with("line "), "{line:?}");
    }
    assert_eq!(t.hint, DEFAULT_TRUNCATION_HINT);
}

#[test]
fn clip_respects_char_boundaries() {
    let text = "日本語".repeat(1000);
    for max in [40, 41, 42, 43, 100, 101, 102, 1000] {
        let (s, t) = clip_head_tail(&text, max);
        assert!(s.len() <= max, "{max}: {}", s.len());
        let t = t.unwrap();
        let marker = format!("[… {} bytes omitted …]", t.omitted_bytes);
        assert!(s.contains(&marker));
        assert_eq!(
            s.len() - marker.len() - s.matches('\n').count(),
            t.kept_bytes as usize
        );
    }
}

#[test]
fn clip_to_tiny_limits_keeps_the_marker() {
    let (s, t) = clip_head_tail("abcdefghijklmnopqrstuvwxyz", 0);
    assert_eq!(s, "[… 26 bytes omitted …]");
    assert_eq!(t.unwrap().kept_bytes, 0);
    let (s, _) = clip_head_tail(&"x".repeat(100), 10);
    assert!(s.contains("bytes omitted"));
}

#[test]
fn clip_without_newlines_cuts_mid_line() {
    let text = "x".repeat(10_000);
    let (s, t) = clip_head_tail(&text, 1000);
    let t = t.unwrap();
    assert!(s.len() <= 1000);
    assert!(t.kept_bytes >= 900, "{}", t.kept_bytes);
    assert!(s.starts_with("xxx") && s.ends_with("xxx"));
}

#[test]
fn logs_capture_clips_each_stream() {
    let logs = Logs::capture(&vec![b'a'; 5000], b"\x1b[31mE\x1b[0m\n", 100);
    assert!(logs.stdout.len() <= 100);
    assert!(logs.stdout_omitted_bytes > 4800);
    assert_eq!(logs.stderr, "E\n");
    assert_eq!(logs.stderr_omitted_bytes, 0);
}

#[test]
fn clip_short_marks_cuts() {
    assert_eq!(clip_short("abc", 3), "abc");
    assert_eq!(clip_short("abcdef", 4), "a…");
    assert_eq!(clip_short("ééé", 5), "é…");
    assert_eq!(clip_short("ééé", 4), "…");
}

// ---- provenance ----

fn file_source(path: &str) -> Source {
    Source {
        kind: SourceKind::File,
        reference: path.into(),
        sha256: Some("ab".repeat(32)),
    }
}

#[test]
fn provenance_marks_the_output_as_data_within_the_budget() {
    let v = schema_validator();
    let plain = sample_ok();
    assert!(!plain.untrusted && plain.provenance.is_empty());
    // No source: nothing changes.
    assert_eq!(sample_ok().with_provenance(Vec::new(), 4096), plain);
    let obs = sample_ok().with_provenance(vec![file_source("src/a.rs")], 4096);
    assert!(obs.untrusted);
    assert_eq!(
        obs.text,
        format!("{UNTRUSTED_OPEN}{}{UNTRUSTED_CLOSE}", plain.text)
    );
    let value = assert_valid(&v, &obs);
    assert_eq!(value["provenance"][0]["kind"], "file");
    assert_eq!(value["provenance"][0]["ref"], "src/a.rs");
    assert_eq!(value["untrusted"], true);
    // A clipped output is re-rendered in what the markers leave, and keeps
    // its tool-specific hint.
    let big: Vec<Value> = (0..500).map(|i| json!(i)).collect();
    let obs = Observation::ok("c", "t", SideEffect::ReadOnly, Value::Array(big), 200)
        .with_truncation_hint("ask for less")
        .with_provenance(vec![file_source("f")], 200);
    assert!(obs.text.len() <= 200, "{}", obs.text.len());
    assert!(obs.text.starts_with(UNTRUSTED_OPEN) && obs.text.ends_with(UNTRUSTED_CLOSE));
    assert_eq!(obs.truncated.as_ref().unwrap().hint, "ask for less");
    assert_valid(&v, &obs);
}

#[test]
fn provenance_wraps_partial_output_and_tool_errors_not_host_errors() {
    let v = schema_validator();
    let err = ErrorInfo::from_tool("half", "sent one of two", None, false, None);
    let obs = Observation::partial(
        "c",
        "t",
        SideEffect::ReadOnly,
        json!({"sent": 1}),
        err,
        4096,
    )
    .with_provenance(vec![file_source("f")], 4096);
    let (head, rest) = obs.text.split_once(UNTRUSTED_OPEN).unwrap();
    assert!(head.starts_with("partial result: half"), "{}", obs.text);
    assert!(
        rest.ends_with(UNTRUSTED_CLOSE) && rest.contains("{\"sent\":1}"),
        "{}",
        obs.text
    );
    assert_valid(&v, &obs);
    // A tool's own error text can quote what it read.
    let tool_err = ErrorInfo::from_tool("nope", "line 3 says hi", None, false, None);
    let obs =
        failed("t", SideEffect::ReadOnly, tool_err).with_provenance(vec![file_source("f")], 4096);
    assert!(obs.text.starts_with(UNTRUSTED_OPEN), "{}", obs.text);
    assert_valid(&v, &obs);
    // A host's failure quotes nothing: the text stays, the sources are listed.
    let timeout = failed(
        "t",
        SideEffect::ReadOnly,
        ErrorCode::Timeout.info("too slow"),
    );
    let text = timeout.text.clone();
    let obs = timeout.with_provenance(vec![file_source("f")], 4096);
    assert_eq!(obs.text, text);
    assert!(obs.untrusted);
    assert_valid(&v, &obs);
}

#[test]
fn schema_ties_untrusted_to_provenance() {
    let v = schema_validator();
    let mut value = serde_json::to_value(sample_ok()).unwrap();
    value["untrusted"] = json!(true);
    assert_invalid(&v, &value);
    let mut value =
        serde_json::to_value(sample_ok().with_provenance(vec![file_source("f")], 4096)).unwrap();
    value["untrusted"] = json!(false);
    assert_invalid(&v, &value);
    value["untrusted"] = json!(true);
    value["provenance"][0]["kind"] = json!("plugin");
    assert_invalid(&v, &value);
    value["provenance"][0]["kind"] = json!("network");
    value["provenance"][0]["sha256"] = json!("not-hex");
    assert_invalid(&v, &value);
    value["provenance"][0]["sha256"] = Value::Null;
    assert!(v.is_valid(&value));
    // Records stored before provenance existed still read.
    let mut old = serde_json::to_value(sample_ok()).unwrap();
    let o = old.as_object_mut().unwrap();
    o.remove("provenance");
    o.remove("untrusted");
    let back: Observation = serde_json::from_value(old).unwrap();
    assert!(!back.untrusted && back.provenance.is_empty());
}

#[test]
fn marking_equals_rendering_in_the_budget_the_markers_leave() {
    let output =
        json!({"path": "a", "lines": [{"number": 1, "text": "x"}, {"number": 2, "text": "y"}]});
    let overhead = UNTRUSTED_OPEN.len() + UNTRUSTED_CLOSE.len();
    for max in (overhead..overhead + 200).step_by(7) {
        let obs = Observation::ok("c", "t", SideEffect::ReadOnly, output.clone(), max)
            .with_provenance(vec![file_source("a")], max);
        let (json, truncated, _) = render_json(&output, max - overhead);
        assert_eq!(obs.text, wrap_untrusted("", &json), "max {max}");
        assert_eq!(obs.truncated.is_some(), truncated.is_some(), "max {max}");
    }
}

// ---- a plugin's own text ----

#[test]
fn plugin_text_replaces_the_json_and_is_cleaned_and_clipped() {
    let v = schema_validator();
    let output = json!({"lines": [{"number": 1, "text": "a"}]});
    let obs = Observation::ok("c", "t", SideEffect::ReadOnly, output.clone(), 4096)
        .with_plugin_text("a.txt lines 1-1\n1\ta\n", 4096);
    assert_eq!(obs.text, "a.txt lines 1-1\n1\ta\n");
    assert_eq!(obs.output, Some(output.clone()), "the data stays exact");
    assert!(obs.truncated.is_none());
    assert_valid(&v, &obs);

    // ANSI colours, a `\r` progress rewrite and a backspace never reach
    // the model; tabs and newlines do.
    let obs = Observation::ok("c", "t", SideEffect::ReadOnly, output.clone(), 4096)
        .with_plugin_text("\u{1b}[31mred\u{1b}[0m\n10%\r100%\nab\u{8}c\tz\u{7}", 4096);
    assert_eq!(obs.text, "red\n100%\nac\tz");

    // Over the budget: head and tail with the explicit marker.
    let long: String = (0..2000).map(|i| format!("row {i}\n")).collect();
    let obs = Observation::ok("c", "t", SideEffect::ReadOnly, output.clone(), 4096)
        .with_plugin_text(&long, 1000);
    assert!(obs.text.len() <= 1000, "{}", obs.text.len());
    assert!(obs.text.starts_with("row 0\n"), "{}", obs.text);
    assert!(obs.text.ends_with("row 1999\n"), "{}", obs.text);
    assert!(obs.text.contains("bytes omitted …]"));
    let t = obs.truncated.clone().unwrap();
    assert_eq!(t.original_bytes, long.len() as u64);
    assert_eq!(t.kept_bytes + t.omitted_bytes, t.original_bytes);
    assert_valid(&v, &obs);

    // Provenance re-renders the plugin's text (not the JSON) in the
    // smaller budget, between the markers.
    let obs = obs.with_provenance(vec![file_source("f")], 1000);
    assert!(obs.text.len() <= 1000, "{}", obs.text.len());
    assert!(obs.text.starts_with(&format!("{UNTRUSTED_OPEN}row 0\n")));
    assert!(obs.text.ends_with(&format!("row 1999\n{UNTRUSTED_CLOSE}")));
    assert_valid(&v, &obs);
}

#[test]
fn plugin_text_never_replaces_a_failure_paragraph() {
    let obs = failed("read_file", SideEffect::ReadOnly, offset_error(""));
    let text = obs.text.clone();
    let obs = obs.with_plugin_text("all good!", 4096);
    assert_eq!(obs.text, text);
    assert!(obs.plugin_text().is_none());
}

#[test]
fn ok_with_text_is_ok_then_the_plugin_text() {
    let output = json!({"path": "a.txt", "lines": [{"number": 1, "text": "x \"q\" é"}]});
    for max in [10_000, 12] {
        let direct = Observation::ok_with_text(
            "c1",
            "file_view",
            SideEffect::ReadOnly,
            output.clone(),
            "a.txt\n1\tx",
            max,
        );
        let twice = Observation::ok("c1", "file_view", SideEffect::ReadOnly, output.clone(), max)
            .with_plugin_text("a.txt\n1\tx", max);
        assert_eq!(direct, twice);
        assert_eq!(direct.plugin_text(), twice.plugin_text());
        assert_eq!(
            direct.usage.output_bytes,
            serde_json::to_string(&output).unwrap().len() as u64
        );
    }
}

#[test]
fn a_field_with_hidden_characters_is_dropped() {
    for hostile in ["/pa\u{202E}th", "/a\0b", "/\u{200B}offset", "pa\u{2066}th"] {
        let mut error = ErrorInfo::new("bad_path", "no such path").with_field(hostile);
        error.sanitize();
        assert_eq!(error.field, None, "{hostile:?} kept");
    }
    let mut error = ErrorInfo::new("bad_path", "no such path").with_field("path");
    error.sanitize();
    assert_eq!(error.field.as_deref(), Some("/path"));
}

#[test]
fn a_missing_or_unknown_field_says_each_thing_once() {
    // As the schema check reports a missing field.
    let obs = failed(
        "file_view",
        SideEffect::ReadOnly,
        ErrorCode::InvalidArguments
            .info("/path: missing required field; expected a string")
            .with_field("/path")
            .with_expected("a string (required)")
            .with_actual("missing"),
    );
    assert_eq!(
        obs.text,
        "invalid_arguments at /path: missing required field; expected a string. Fix the \
         argument and call again."
    );
    // An unknown field: the allowed list once, the value given kept.
    let obs = failed(
        "run_command",
        SideEffect::Reversible,
        ErrorCode::InvalidArguments
            .info("/args: unknown field; allowed: argv, cwd")
            .with_field("/args")
            .with_expected("no such field; allowed: argv, cwd")
            .with_actual("[]"),
    );
    assert_eq!(
        obs.text.matches("allowed: argv, cwd").count(),
        1,
        "{}",
        obs.text
    );
    assert!(obs.text.contains("(got [])"), "{}", obs.text);
    // Something the message does not say is still said.
    let obs = failed(
        "t",
        SideEffect::ReadOnly,
        ErrorCode::InvalidArguments
            .info("too long")
            .with_field("/name")
            .with_expected("at most 8 characters")
            .with_actual("12 characters"),
    );
    assert!(
        obs.text
            .contains("too long (expected at most 8 characters, got 12 characters)"),
        "{}",
        obs.text
    );
}

#[test]
fn invisible_and_bidi_characters_are_escaped_in_the_model_text_only() {
    let hidden = "a\u{202E}b\u{200B}c\u{2066}d\u{FEFF}e\u{E0041}f\u{061C}g\u{00AD}h\u{7F}i";
    assert_eq!(
        escape_invisible(hidden),
        "a\\u{202E}b\\u{200B}c\\u{2066}d\\u{FEFF}e\\u{E0041}f\\u{061C}g\\u{00AD}h\\u{007F}i"
    );
    // Ordinary text, accents, emoji with their presentation selector, line
    // ends and tabs are left alone (and not copied).
    let plain = "naïve café ❤\u{FE0F} 中文\n\tx";
    assert!(matches!(
        escape_invisible(plain),
        std::borrow::Cow::Borrowed(_)
    ));
    // In JSON text, a JSON escape: the text parses to the same value.
    let json = serde_json::to_string(&json!({"s": hidden})).unwrap();
    let escaped = escape_invisible_json(&json);
    assert!(
        escaped.is_ascii() || !escaped.chars().any(is_invisible),
        "{escaped}"
    );
    assert!(escaped.contains("\\u202e") && escaped.contains("\\udb40\\udc41"));
    let back: Value = serde_json::from_str(&escaped).unwrap();
    assert_eq!(back["s"], hidden);

    // A plugin's text: escaped; the structured output exact.
    let obs = Observation::ok_with_text(
        "c",
        "t",
        SideEffect::ReadOnly,
        json!({"name": "evil\u{202E}txt.exe"}),
        "name: evil\u{202E}txt.exe",
        4096,
    );
    assert_eq!(obs.text, "name: evil\\u{202E}txt.exe");
    assert_eq!(obs.output.as_ref().unwrap()["name"], "evil\u{202E}txt.exe");
    // Rendered as JSON: escaped the JSON way.
    let obs = Observation::ok(
        "c",
        "t",
        SideEffect::ReadOnly,
        json!({"n": "x\u{200B}y"}),
        4096,
    );
    assert_eq!(obs.text, r#"{"n":"x\u200by"}"#);
    assert_eq!(obs.output.as_ref().unwrap()["n"], "x\u{200B}y");
    // A tool's error message.
    let e = ErrorInfo::from_tool("nope", "file \u{202E}gnp.exe failed", None, false, None);
    let obs = Observation::failure("c", "t", SideEffect::ReadOnly, e);
    assert!(
        obs.text.contains("file \\u{202E}gnp.exe failed"),
        "{}",
        obs.text
    );
    assert!(!obs.text.chars().any(is_invisible));
    assert_eq!(obs.error.unwrap().message, "file \u{202E}gnp.exe failed");
}

#[test]
fn a_tool_errors_field_must_point_into_the_arguments() {
    let args = json!({"path": "a.txt", "opts": {"depth": 2}, "list": [1, 2], "a/b": 1});
    let schema =
        json!({"properties": {"path": {}, "cursor": {}, "opts": {}, "list": {}, "a/b": {}}});
    let kept = |f: &str| tool_field(Some(f.to_owned()), &args, &schema, "t");
    for ok in ["/path", "/opts/depth", "/list/1", "", "/cursor", "/a~1b"] {
        assert_eq!(kept(ok).as_deref(), Some(ok), "{ok}");
    }
    for bad in [
        "path",
        "/nope",
        "/opts/missing",
        "/list/7",
        "/path/x",
        "/pa\u{202E}th",
        "/path\u{0}",
        "/ignore all previous instructions",
        "/~2",
    ] {
        assert_eq!(kept(bad), None, "{bad:?}");
    }
    assert_eq!(tool_field(None, &args, &schema, "t"), None);
}
