//! The sandbox's dry-run and probe (`planner` and `prober` exports): the
//! reference `file_delete`, the `tp-effects` test tools, and a plugin that
//! exports only `tools`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use toolhost::{Catalog, Limits, Mount, Source, Tool};
use toolhost_sandbox::{CallRequest, Failure, ProbeOutcome};

use crate::network::{ok_text, Server};
use crate::support::*;

/// The reference tools, `tp_effects` and `tp_bad_output` (no effects
/// exports), in one catalog.
fn catalog() -> &'static Catalog {
    static C: OnceLock<Catalog> = OnceLock::new();
    C.get_or_init(|| {
        let catalog = Catalog::load(
            sandbox(),
            &[
                Source::reference(),
                Source::File(test_plugin("tp_effects")),
                Source::File(test_plugin("tp_bad_output")),
            ],
            &|_, _| {},
        );
        // Only this test's tools and plugins: the other reference tools are
        // checked elsewhere.
        let ours = [
            "file_delete",
            "append_line",
            "append_line_no_probe",
            "count_calls",
            "sneaky_append",
            "sneaky_get",
        ];
        let problems: Vec<_> = catalog
            .problems()
            .iter()
            .filter(|p| p.tool.as_deref().is_none_or(|t| ours.contains(&t)))
            .collect();
        assert!(problems.is_empty(), "{problems:?}");
        catalog
    })
}

fn tool(name: &str) -> &'static Tool {
    catalog()
        .get(name)
        .unwrap_or_else(|| panic!("no tool {name}"))
}

/// Answers every question with yes, and counts them.
#[derive(Debug, Default)]
struct WouldAnswer {
    asked: AtomicUsize,
}

impl toolhost::Asker for WouldAnswer {
    fn ask(&self, _: &toolhost::Question) -> toolhost::Asked {
        self.asked.fetch_add(1, Ordering::SeqCst);
        toolhost::Asked::Answer(toolhost::Answer::Accepted(json!({"ok": true})))
    }
}

/// The workspace mounted at `/workspace`.
fn mounts(ws: &Ws, writable: bool) -> Vec<Mount> {
    vec![Mount::open(ws.dir.path(), "/workspace", writable).unwrap()]
}

fn request<'a>(tool: &'a str, args: &'a str, mounts: &'a [Mount]) -> CallRequest<'a> {
    CallRequest {
        tool,
        args_json: args,
        call_id: "effects-test",
        workspace_root: "/workspace",
        idempotency_key: Some("key-1"),
        mounts,
        net_origins: &[],
        exec: None,
        limits: Limits::default(),
        reveal_secrets: false,
        asker: None,
        script: None,
    }
}

fn sha(b: &[u8]) -> String {
    hex::encode(Sha256::digest(b))
}

/// Asserts that `output` is valid against the tool's output schema.
#[track_caller]
fn assert_valid_output(t: &Tool, output: &Value) {
    let validator = t.output.as_ref().expect("an output schema");
    let errors: Vec<String> = validator
        .iter_errors(output)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{errors:?}: {output}");
}

#[test]
fn sdk_plugins_export_planner_and_prober_and_say_which_tools_use_them() {
    assert!(tool("file_delete").plugin.supports_effects());
    assert!(tool("append_line").plugin.supports_effects());
    assert!(!tool("bad_output_json").plugin.supports_effects());
    let flags = |name: &str| {
        let d = &tool(name).descriptor;
        (d.supports_dry_run, d.supports_probe)
    };
    assert_eq!(flags("file_delete"), (true, true));
    assert_eq!(flags("file_view"), (false, false));
    assert_eq!(flags("file_edit"), (false, false));
    assert_eq!(flags("append_line"), (true, true));
    assert_eq!(flags("append_line_no_probe"), (false, false));
    assert_eq!(flags("count_calls"), (false, false));
    assert_eq!(flags("sneaky_append"), (true, true));
    assert_eq!(flags("sneaky_get"), (true, true));
    assert_eq!(flags("bad_output_json"), (false, false));
    let d = &tool("file_delete").descriptor;
    assert_eq!(d.side_effect.as_str(), "irreversible");
    assert!(d.needs.fs_read && d.needs.fs_write);
    assert_eq!(
        d.input_schema["properties"]["path"]["x-toolhost-path"],
        "write"
    );
}

#[test]
fn file_delete_dry_run_returns_a_plan_and_deletes_nothing() {
    let ws = Ws::new();
    ws.write("notes/a.txt", "one\ntwo\n").write("b.txt", "keep");
    let before = ws.snapshot();
    let m = mounts(&ws, true);
    let t = tool("file_delete");
    let out = t
        .plugin
        .dry_run(&request("file_delete", r#"{"path":"notes/a.txt"}"#, &m));
    let plan: Value = serde_json::from_str(&out.result.unwrap().unwrap()).unwrap();
    assert_eq!(ws.snapshot(), before, "a dry-run changes nothing");
    assert_eq!(
        plan["changes"],
        json!([{
            "path": "notes/a.txt",
            "action": "delete",
            "lines_added": 0,
            "lines_removed": 2,
            "bytes_before": 8,
            "bytes_after": 0,
            "sha256_before": sha(b"one\ntwo\n"),
        }])
    );
    assert_eq!(plan["counts"]["files"], 1);
    assert_eq!(plan["counts"]["deleted"], 1);
    assert_eq!(plan["warnings"], json!(["file is not empty (8 bytes)"]));
    assert!(plan["summary"].as_str().unwrap().contains("notes/a.txt"));
    assert!(out.usage.fuel_consumed > 0);
    assert!(out.usage.output_bytes > 0);

    // The plan's digest is a precondition the call accepts.
    let args =
        json!({"path": "notes/a.txt", "expected_sha256": plan["changes"][0]["sha256_before"]})
            .to_string();
    let called = t.plugin.call(&request("file_delete", &args, &m));
    let output: Value = serde_json::from_str(&called.result.unwrap().unwrap().json).unwrap();
    assert_eq!(
        output,
        json!({"path": "notes/a.txt", "deleted": true, "sha256_before": sha(b"one\ntwo\n"), "bytes": 8})
    );
    assert_valid_output(t, &output);
    assert!(!ws.path("notes/a.txt").exists());
    assert_eq!(ws.read("b.txt"), b"keep");
}

#[test]
fn file_delete_dry_run_fails_as_the_call_would() {
    let ws = Ws::new();
    ws.write("a.txt", "v1");
    std::fs::create_dir(ws.path("dir")).unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink("a.txt", ws.path("link")).unwrap();
    let before = ws.snapshot();
    let m = mounts(&ws, true);
    let code = |args: Value| {
        let args = args.to_string();
        let out = tool("file_delete")
            .plugin
            .dry_run(&request("file_delete", &args, &m));
        out.result.unwrap().unwrap_err().code
    };
    assert_eq!(code(json!({"path": "missing.txt"})), "not_found");
    assert_eq!(code(json!({"path": "dir"})), "is_directory");
    #[cfg(unix)]
    assert_eq!(code(json!({"path": "link"})), "is_symlink");
    assert_eq!(
        code(json!({"path": "a.txt", "expected_sha256": "0".repeat(64)})),
        "conflict"
    );
    assert_eq!(ws.snapshot(), before);
}

#[test]
fn file_delete_probe_is_not_done_until_the_file_is_gone() {
    let ws = Ws::new();
    ws.write("a.txt", "x\n");
    let m = mounts(&ws, false);
    let t = tool("file_delete");
    let args = r#"{"path":"a.txt"}"#;
    let probe = || {
        t.plugin
            .probe(&request("file_delete", args, &m), "key-1")
            .result
            .unwrap()
            .unwrap()
    };
    assert_eq!(probe(), ProbeOutcome::NotDone);
    assert_eq!(ws.read("a.txt"), b"x\n", "a probe changes nothing");
    std::fs::remove_file(ws.path("a.txt")).unwrap();
    let ProbeOutcome::Done(output) = probe() else {
        panic!("expected done")
    };
    let output: Value = serde_json::from_str(&output).unwrap();
    assert_eq!(
        output,
        json!({"path": "a.txt", "deleted": true, "sha256_before": null, "bytes": null})
    );
    assert_valid_output(t, &output);
}

#[test]
fn append_line_probe_finds_the_line() {
    let ws = Ws::new();
    let m = mounts(&ws, true);
    let t = tool("append_line");
    let args = r#"{"path":"log.txt","line":"hello"}"#;
    let probe = || {
        t.plugin
            .probe(&request("append_line", args, &m), "key-1")
            .result
            .unwrap()
            .unwrap()
    };
    assert_eq!(probe(), ProbeOutcome::NotDone, "no file yet");
    ws.write("log.txt", "other\n");
    assert_eq!(probe(), ProbeOutcome::NotDone, "the line is not there");

    let plan = t.plugin.dry_run(&request("append_line", args, &m));
    let plan: Value = serde_json::from_str(&plan.result.unwrap().unwrap()).unwrap();
    assert_eq!(plan["changes"][0]["action"], "modify");
    assert_eq!(plan["changes"][0]["lines_added"], 1);
    assert_eq!(ws.read("log.txt"), b"other\n");

    let called = t.plugin.call(&request("append_line", args, &m));
    assert_eq!(
        called.result.unwrap().unwrap().json,
        r#"{"path":"log.txt","lines":2}"#
    );
    let ProbeOutcome::Done(output) = probe() else {
        panic!("expected done")
    };
    assert_eq!(output, r#"{"path":"log.txt","lines":2}"#);
    assert_valid_output(t, &serde_json::from_str(&output).unwrap());
}

/// The WIT promises that a dry-run and a probe have no effect: they run
/// with every mount read-only (and no network), even when the request's
/// mounts are writable, as the call's are.
#[test]
fn dry_run_and_probe_cannot_write_through_writable_mounts() {
    let ws = Ws::new();
    ws.write("log.txt", "first\n");
    let m = mounts(&ws, true);
    assert!(m[0].writable);
    let t = tool("sneaky_append");
    let args = r#"{"path":"log.txt","line":"second"}"#;

    // A person who would say yes is at hand; the dry-run still may not ask.
    let asker = Arc::new(WouldAnswer::default());
    let plan = t.plugin.dry_run(&CallRequest {
        asker: Some(asker.clone()),
        ..request("sneaky_append", args, &m)
    });
    let plan: Value = serde_json::from_str(&plan.result.unwrap().unwrap()).unwrap();
    let warnings = plan["warnings"].to_string();
    assert!(warnings.contains("write attempt: failed"), "{plan:#}");
    assert!(
        warnings.contains("ask attempt: failed: ask_unavailable"),
        "{plan:#}"
    );
    assert_eq!(asker.asked.load(Ordering::SeqCst), 0, "the dry-run asked");
    assert_eq!(plan["changes"][0]["action"], "modify");
    assert_eq!(ws.read("log.txt"), b"first\n", "the dry-run wrote");

    let probe = t.plugin.probe(&request("sneaky_append", args, &m), "key-1");
    assert_eq!(probe.result.unwrap().unwrap(), ProbeOutcome::NotDone);
    assert_eq!(ws.read("log.txt"), b"first\n", "the probe wrote");

    // The call, with the same mounts, writes.
    let called = t.plugin.call(&request("sneaky_append", args, &m));
    assert_eq!(
        called.result.unwrap().unwrap().json,
        r#"{"path":"log.txt","lines":2}"#
    );
    assert_eq!(ws.read("log.txt"), b"first\nsecond\n");
}

/// Nor can they reach the network: the request's granted origin is gone
/// for a dry-run and a probe, and the server never sees them.
#[test]
fn dry_run_and_probe_cannot_reach_a_granted_origin() {
    let server = Server::start(ok_text("hi"), 4);
    let origin = [server.origin()];
    let authority = origin[0].trim_start_matches("http://").to_string();
    let args = json!({ "authority": authority }).to_string();
    let t = tool("sneaky_get");
    let req = CallRequest {
        net_origins: &origin,
        ..request("sneaky_get", &args, &[])
    };

    let plan = t.plugin.dry_run(&req);
    let plan: Value = serde_json::from_str(&plan.result.unwrap().unwrap()).unwrap();
    let warnings = plan["warnings"].to_string();
    assert!(
        warnings.contains("network attempt: failed: ErrorCode::HttpRequestDenied"),
        "{plan:#}"
    );
    let probe = t.plugin.probe(&req, "key-1");
    assert_eq!(probe.result.unwrap().unwrap(), ProbeOutcome::Unknown);
    assert_eq!(server.hits(), 0, "a dry-run or probe reached the server");

    // The call, with the same grant, does.
    let called = t.plugin.call(&req);
    assert_eq!(called.result.unwrap().unwrap().json, r#"{"status":200}"#);
    assert_eq!(server.hits(), 1);
}

/// The in-doubt case the tools exist for: the effect happens, then the call
/// runs out of time; the probe settles it.
#[test]
fn an_append_interrupted_after_its_effect_is_settled_by_the_probe() {
    let ws = Ws::new();
    let m = mounts(&ws, true);
    let args = r#"{"path":"log.txt","line":"once","hold_ms":60000}"#;
    let mut req = request("append_line", args, &m);
    req.limits.timeout = Duration::from_millis(300);
    let start = Instant::now();
    let called = tool("append_line").plugin.call(&req);
    assert_eq!(called.result.unwrap_err(), Failure::Timeout);
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "the hold is interruptible"
    );
    assert_eq!(ws.read("log.txt"), b"once\n", "the effect happened");
    let probed = tool("append_line").plugin.probe(&req, "key-1");
    assert_eq!(
        probed.result.unwrap().unwrap(),
        ProbeOutcome::Done(r#"{"path":"log.txt","lines":1}"#.into())
    );

    // Without a probe, the same situation stays unknown.
    let called = tool("append_line_no_probe").plugin.call(&CallRequest {
        tool: "append_line_no_probe",
        ..req.clone()
    });
    assert_eq!(called.result.unwrap_err(), Failure::Timeout);
    let probed = tool("append_line_no_probe").plugin.probe(
        &CallRequest {
            tool: "append_line_no_probe",
            ..req.clone()
        },
        "key-1",
    );
    assert_eq!(probed.result.unwrap().unwrap(), ProbeOutcome::Unknown);
}

#[test]
fn tools_without_dry_run_or_probe_say_so() {
    let ws = Ws::new();
    let m = mounts(&ws, true);
    for name in ["append_line_no_probe", "count_calls", "file_view"] {
        let args = match name {
            "file_view" => r#"{"path":"c.txt"}"#,
            "count_calls" => r#"{"path":"c.txt"}"#,
            _ => r#"{"path":"c.txt","line":"x"}"#,
        };
        let plugin = &tool(name).plugin;
        let err = plugin
            .dry_run(&request(name, args, &m))
            .result
            .unwrap()
            .unwrap_err();
        assert_eq!(err.code, "dry_run_unsupported", "{name}");
        let probed = plugin.probe(&request(name, args, &m), "k");
        assert_eq!(
            probed.result.unwrap().unwrap(),
            ProbeOutcome::Unknown,
            "{name}"
        );
    }
    assert!(!ws.path("c.txt").exists());
    let err = tool("file_delete")
        .plugin
        .dry_run(&request("no_such_tool", "{}", &m))
        .result
        .unwrap()
        .unwrap_err();
    assert_eq!(err.code, "unknown_tool");
}

#[test]
fn a_plugin_that_exports_only_tools_still_works() {
    let ws = Ws::new();
    let m = mounts(&ws, false);
    let plugin = &tool("bad_output_json").plugin;
    assert!(!plugin.supports_effects());
    let called = plugin.call(&request("bad_output_json", "{}", &m));
    assert_eq!(called.result.unwrap().unwrap().json, r#"{"value": 1,"#);
    let planned = plugin.dry_run(&request("bad_output_json", "{}", &m));
    assert_eq!(
        planned.result.unwrap().unwrap_err().code,
        "dry_run_unsupported"
    );
    assert_eq!(planned.usage.fuel_consumed, 0, "nothing ran");
    let probed = plugin.probe(&request("bad_output_json", "{}", &m), "k");
    assert_eq!(probed.result.unwrap().unwrap(), ProbeOutcome::Unknown);
}

#[test]
fn dry_run_and_probe_run_under_the_call_limits() {
    let ws = Ws::new();
    ws.write("a.txt", "x");
    let m = mounts(&ws, true);
    let t = tool("file_delete");
    let args = r#"{"path":"a.txt"}"#;

    let mut req = request("file_delete", args, &m);
    req.limits.max_output_bytes = 16;
    let planned = t.plugin.dry_run(&req);
    assert!(
        matches!(planned.result, Err(Failure::OutputTooLarge { bytes }) if bytes > 16),
        "{:?}",
        planned.result
    );

    let mut req = request("file_delete", args, &m);
    req.limits.fuel = 1_000;
    assert_eq!(
        t.plugin.dry_run(&req).result.unwrap_err(),
        Failure::FuelExhausted
    );
    assert_eq!(
        t.plugin.probe(&req, "k").result.unwrap_err(),
        Failure::FuelExhausted
    );

    // No mounts: the guest sees no workspace, as in a call.
    let none = request("file_delete", args, &[]);
    let err = t.plugin.dry_run(&none).result.unwrap().unwrap_err();
    assert_eq!(err.code, "not_found");
    assert_eq!(ws.read("a.txt"), b"x");
}

#[test]
fn count_calls_counts_every_execution() {
    let ws = Ws::new();
    let m = mounts(&ws, true);
    let plugin = &tool("count_calls").plugin;
    for n in 1..=3 {
        let out = plugin.call(&request("count_calls", r#"{"path":"n"}"#, &m));
        assert_eq!(
            out.result.unwrap().unwrap().json,
            format!(r#"{{"path":"n","count":{n}}}"#)
        );
    }
    assert_eq!(ws.read("n"), b"...");
}
