//! Plugins of the previous contract keep loading: a component built against
//! `toolhost:plugin@0.1.0` (the committed fixture
//! `tests/fixtures/plugin-0.1.0/plugin-0.1.0.wasm`, built from the source
//! beside it by its `build.sh`, and loaded here as it is) describes, runs,
//! fails, plans and probes through the host's adapter; `plugin list` and
//! `lint` say which contract it uses. Components of any other version are
//! refused with a message naming the supported ones.

use std::path::PathBuf;
use std::sync::OnceLock;

use serde_json::{json, Value};
use toolhost::{CallOptions, Catalog, Host, Limits, Mount, Source};
use toolhost_sandbox::{
    CallRequest, Contract, Plugin, ProbeOutcome, SandboxError, SUPPORTED_CONTRACTS,
};

use crate::support::*;

/// The committed 0.1.0 component.
fn fixture() -> PathBuf {
    repo_root().join("tests/fixtures/plugin-0.1.0/plugin-0.1.0.wasm")
}

fn fixture_bytes() -> Vec<u8> {
    std::fs::read(fixture()).expect("the committed 0.1.0 fixture")
}

/// The fixture's bytes with every `toolhost:plugin` interface name moved
/// from version 0.1.0 to `version` (as long: the names are length-prefixed,
/// so the component stays well-formed; only the version it claims changes).
fn claiming(version: &str) -> Vec<u8> {
    assert_eq!(version.len(), "0.1.0".len());
    let mut bytes = fixture_bytes();
    let mut patched = 0;
    for iface in ["types", "tools", "planner", "prober"] {
        let from = format!("toolhost:plugin/{iface}@0.1.0");
        let to = format!("toolhost:plugin/{iface}@{version}");
        let mut at = 0;
        while let Some(i) = bytes[at..]
            .windows(from.len())
            .position(|w| w == from.as_bytes())
        {
            let i = at + i;
            bytes[i..i + to.len()].copy_from_slice(to.as_bytes());
            at = i + to.len();
            patched += 1;
        }
    }
    assert!(patched >= 4, "the fixture names its interfaces");
    bytes
}

fn previous_host() -> &'static Host {
    static H: OnceLock<Host> = OnceLock::new();
    H.get_or_init(|| host_with(&[Source::File(fixture())]))
}

fn previous_plugin() -> &'static Plugin {
    static P: OnceLock<Plugin> = OnceLock::new();
    P.get_or_init(|| sandbox().load(&fixture_bytes(), &|_| {}).unwrap())
}

#[test]
fn a_plugin_of_the_previous_contract_loads_and_lists_its_tools() {
    let host = previous_host();
    assert_eq!(loaded_tool_names(host), ["echo_args", "fail_always"]);
    let plugins = host.catalog().plugins();
    assert_eq!(plugins.len(), 1);
    assert_eq!(plugins[0].contract, Some(Contract::Previous));
    assert!(plugins[0].refused.is_none());
    let echo = host.catalog().get("echo_args").unwrap();
    assert_eq!(echo.plugin.contract(), Contract::Previous);
    // 0.1.0 cannot declare programs: its tools get none.
    assert!(echo.descriptor.needs.exec.is_empty());
    assert!(echo.descriptor.supports_dry_run && echo.descriptor.supports_probe);
    assert!(echo.output.is_some(), "its output schema was read");
}

#[test]
fn a_call_returns_the_output_and_text_the_host_renders() {
    let ws = Ws::new();
    let obs = run_in(
        previous_host(),
        &session(&ws, &NOTHING),
        "echo_args",
        r#"{"message":"hello from 0.1.0"}"#,
        &CallOptions::default(),
    );
    let output = expect_ok(&obs);
    assert_eq!(
        output,
        &json!({"args": {"message": "hello from 0.1.0"}, "root": "/workspace"})
    );
    // The plugin sent no text: the host rendered the output, as it does for
    // a current tool without one (compact JSON).
    let text = obs["text"].as_str().unwrap();
    assert!(text.contains(r#""message":"hello from 0.1.0""#), "{text}");
    assert!(text.contains(r#""root":"/workspace""#), "{text}");
}

#[test]
fn arguments_are_checked_before_a_0_1_plugin_sees_them() {
    let ws = Ws::new();
    let obs = run_in(
        previous_host(),
        &session(&ws, &NOTHING),
        "echo_args",
        r#"{"message":"x","extra":1}"#,
        &CallOptions::default(),
    );
    assert_eq!(obs["status"], "error", "{obs:#}");
    assert!(obs["output"].is_null(), "{obs:#}");
}

#[test]
fn a_tool_error_comes_through_the_0_1_error_path() {
    let ws = Ws::new();
    let obs = run_in(
        previous_host(),
        &session(&ws, &NOTHING),
        "fail_always",
        r#"{"reason":"testing"}"#,
        &CallOptions::default(),
    );
    let err = expect_error(&obs, "error", "always_fails");
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains("this tool always fails"),
        "{err}"
    );
    assert_eq!(err["field"], "/reason", "{err}");
    assert_eq!(err["correctable"], true, "{err}");
}

fn request<'a>(tool: &'a str, args: &'a str, mounts: &'a [Mount]) -> CallRequest<'a> {
    CallRequest {
        tool,
        args_json: args,
        call_id: "compat-test",
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

#[test]
fn the_0_1_planner_and_prober_answer_through_the_adapter() {
    let plugin = previous_plugin();
    assert!(plugin.supports_effects());
    let ws = Ws::new();
    let mounts = [Mount::open(ws.dir.path(), "/workspace", true).unwrap()];

    let plan = plugin.dry_run(&request("echo_args", r#"{"message":"m"}"#, &mounts));
    let plan: Value = serde_json::from_str(&plan.result.unwrap().unwrap()).unwrap();
    assert_eq!(plan["summary"], "echo_args changes nothing");

    let refused = plugin.dry_run(&request("fail_always", "{}", &mounts));
    assert_eq!(refused.result.unwrap().unwrap_err().code, "always_fails");

    let done = plugin.probe(&request("echo_args", "{}", &mounts), "key-7");
    match done.result.unwrap().unwrap() {
        ProbeOutcome::Done(json) => {
            let v: Value = serde_json::from_str(&json).unwrap();
            assert_eq!(v["args"]["key"], "key-7");
        }
        other => panic!("{other:?}"),
    }
    let not_done = plugin.probe(&request("echo_args", "{}", &mounts), "");
    assert_eq!(not_done.result.unwrap().unwrap(), ProbeOutcome::NotDone);
    let failed = plugin.probe(&request("fail_always", "{}", &mounts), "k");
    assert_eq!(failed.result.unwrap().unwrap_err().code, "always_fails");
}

#[test]
fn the_0_1_output_limit_still_holds() {
    let ws = Ws::new();
    let mounts = [Mount::open(ws.dir.path(), "/workspace", false).unwrap()];
    let mut req = request(
        "echo_args",
        r#"{"message":"twenty-five bytes or more"}"#,
        &mounts,
    );
    req.limits.max_output_bytes = 16;
    let out = previous_plugin().call(&req);
    assert!(
        matches!(
            out.result,
            Err(toolhost_sandbox::Failure::OutputTooLarge { .. })
        ),
        "{:?}",
        out.result
    );
}

#[test]
fn plugin_list_and_lint_say_the_plugin_uses_the_previous_contract() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(fixture(), dir.path().join("old.wasm")).unwrap();
    let plugins = dir.path().to_str().unwrap();
    let said = "contract toolhost:plugin@0.1.0 (previous; supported)";

    let out = toolhost_command(&["--plugins-dir", plugins, "plugin", "list"], &repo_root())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    let line = stdout.lines().find(|l| l.starts_with("old  ")).unwrap();
    assert!(line.contains(said), "{stdout}");
    assert!(!line.contains("REFUSED"), "{stdout}");
    assert!(stdout.contains("    echo_args"), "{stdout}");

    let out = toolhost_command(
        &["--plugins-dir", plugins, "plugin", "list", "--json"],
        &repo_root(),
    )
    .output()
    .unwrap();
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    let plugin = |name: &str| {
        listed["plugins"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("no {name} in {listed:#}"))
            .clone()
    };
    assert_eq!(
        plugin("old")["contract"],
        json!({"name": "toolhost:plugin@0.1.0", "standing": "previous"})
    );
    // The embedded reference tools are on the current contract, and the
    // text listing says so too.
    assert_eq!(
        plugin("builtin:reference")["contract"],
        json!({"name": "toolhost:plugin@0.2.0", "standing": "current"})
    );
    let reference = stdout
        .lines()
        .find(|l| l.starts_with("builtin:reference  "))
        .unwrap();
    assert!(
        reference.contains("contract toolhost:plugin@0.2.0 (current)"),
        "{stdout}"
    );

    let fixture = fixture();
    let fixture = fixture.to_str().unwrap();
    let out = toolhost_command(&["lint", fixture], &repo_root())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.contains(said), "{stdout}");
    assert!(
        stdout.contains("rebuild it against toolhost:plugin@0.2.0"),
        "{stdout}"
    );
    let out = toolhost_command(&["lint", "--json", fixture], &repo_root())
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["contract"]["name"], "toolhost:plugin@0.1.0");
    assert_eq!(report["contract"]["standing"], "previous");

    // A plugin of the current contract: lint names it, without the advice.
    let current = test_plugin("tp_trivial");
    let out = toolhost_command(&["lint", current.to_str().unwrap()], &repo_root())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert_eq!(
        stdout.lines().next(),
        Some("contract toolhost:plugin@0.2.0 (current)"),
        "{stdout}"
    );
    assert!(!stdout.contains("rebuild"), "{stdout}");
}

#[test]
fn components_of_unsupported_contracts_are_refused_naming_the_supported_ones() {
    for (version, says) in [
        ("0.0.1", "built against toolhost:plugin@0.0.1"),
        (
            "0.3.0",
            "toolhost:plugin@0.3.0, a newer contract than this host's",
        ),
    ] {
        let bytes = claiming(version);
        let e = sandbox().load(&bytes, &|_| {}).err().unwrap();
        assert!(
            matches!(
                e,
                SandboxError::ContractVersion { .. } | SandboxError::ContractTooNew { .. }
            ),
            "{e}"
        );
        let message = e.to_string();
        assert!(message.contains(says), "{message}");
        assert!(message.contains(SUPPORTED_CONTRACTS), "{message}");

        // Through the catalog, as `serve` and `plugin list` load it.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(format!("v{version}.wasm"));
        std::fs::write(&path, &bytes).unwrap();
        let catalog = Catalog::load(sandbox(), &[Source::File(path)], &|_, _| {});
        assert_eq!(catalog.tools().count(), 0);
        let problems: Vec<String> = catalog.problems().iter().map(|p| p.to_string()).collect();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains(SUPPORTED_CONTRACTS), "{problems:?}");
        assert_eq!(catalog.plugins()[0].contract, None);
    }
}

#[test]
fn a_0_1_component_that_claims_the_current_contract_is_refused() {
    // The same code under the current version's names: its `call` returns
    // a string where 0.2.0 returns a `tool-output`, and its descriptors
    // lack `needs.exec`. Its exports' types are checked before any of its
    // code runs: it does not implement 0.2.0, whatever it names.
    let plugin = sandbox().load(&claiming("0.2.0"), &|_| {}).unwrap();
    assert_eq!(plugin.contract(), Contract::Current);
    let e = plugin.describe().err().unwrap();
    assert!(matches!(e, SandboxError::Link { .. }), "{e}");
    assert!(
        e.to_string()
            .contains("does not implement toolhost:plugin@0.2.0"),
        "{e}"
    );

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mislabelled.wasm");
    std::fs::write(&path, claiming("0.2.0")).unwrap();
    let catalog = Catalog::load(sandbox(), &[Source::File(path)], &|_, _| {});
    assert_eq!(catalog.tools().count(), 0);
    assert_eq!(catalog.problems().len(), 1);
    assert!(
        catalog.problems()[0]
            .reason
            .contains("does not implement toolhost:plugin@0.2.0"),
        "{:?}",
        catalog.problems()
    );
}
