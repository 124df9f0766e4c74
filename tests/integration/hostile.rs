//! Hostile plugins: every attack ends in a structured observation, the host
//! keeps running, and no grant is exceeded.

use crate::support::*;
use serde_json::Value;
use toolhost::catalog::{Catalog, Source};
use toolhost::pipeline::CallOptions;

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

#[test]
fn a_component_built_against_the_0_1_contract_is_refused_with_a_rebuild_hint() {
    let (catalog, problems) = load_problems("tp_old_contract");
    assert_eq!(catalog.tools().count(), 0);
    assert_eq!(problems.len(), 1, "{problems:?}");
    let p = &problems[0];
    assert!(p.contains("toolhost:plugin@0.1.0"), "{p}");
    assert!(
        p.contains("rebuild the plugin against toolhost:plugin@0.2.0"),
        "{p}"
    );
}

#[test]
fn a_plugin_importing_exec_loads_and_is_denied_every_program_for_now() {
    let obs = attack("exec_attempt", r#"{"argv":["echo","hi"]}"#);
    assert_eq!(obs["status"], "ok", "{obs}");
    assert_eq!(obs["output"]["outcome"], "denied", "{obs}");
    assert_eq!(obs["output"]["detail"], "this call was granted no programs");
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
