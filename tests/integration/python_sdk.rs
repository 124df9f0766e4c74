//! The official MCP Python SDK client (`mcp`, pinned in
//! `tests/mcp_client/requirements.txt`) against the real
//! `toolhost serve --stdio`, through `tests/mcp_client/sdk_client.py`: the
//! SDK parses every answer and checks each `ok` answer's
//! `structuredContent` against the tool's published `outputSchema` (it
//! raises when a tool with an output schema answers without one), so a step
//! it refuses fails the test.
//!
//! The SDK comes from `.ci/py-mcp-client.sh` (a virtual environment in
//! `target/py-mcp/venv`); on a developer machine the tests run it when the
//! SDK is missing, under CI (`CI` set) they fail with a message instead.

use std::io::Write;
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

use serde_json::{json, Value};

use crate::mcp::Setup;
use crate::support::*;

const PYTHON: &str = "target/py-mcp/venv/bin/python";
const CLIENT: &str = "tests/mcp_client/sdk_client.py";

fn sdk_present() -> bool {
    Command::new(repo_root().join(PYTHON))
        .args(["-c", "import mcp.client.session, mcp.client.stdio"])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The virtual environment's Python, with the SDK installed.
pub(crate) fn python() -> PathBuf {
    static READY: OnceLock<()> = OnceLock::new();
    READY.get_or_init(|| {
        if sdk_present() {
            return;
        }
        assert!(
            std::env::var_os("CI").is_none(),
            "the MCP Python SDK is missing: CI must run `bash .ci/py-mcp-client.sh` \
             before `cargo test`"
        );
        let _ = writeln!(
            std::io::stderr(),
            "\ncargo test: the Python SDK tests need the official MCP Python SDK, which is \
             missing; installing it now with .ci/py-mcp-client.sh into target/py-mcp/venv \
             (from PyPI, once; nothing outside this repository is touched)\n"
        );
        let out = Command::new("bash")
            .arg(repo_root().join(".ci/py-mcp-client.sh"))
            .current_dir(repo_root())
            .output()
            .expect("running .ci/py-mcp-client.sh");
        assert!(
            out.status.success(),
            ".ci/py-mcp-client.sh failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(sdk_present(), "the SDK is still missing");
    });
    repo_root().join(PYTHON)
}

/// Runs `steps` in one SDK session with the server of `setup` (and
/// `extra` options); returns each step's report. Fails on any step the
/// SDK refused.
fn session(setup: &Setup, extra: &[&str], steps: &Value) -> Vec<Value> {
    let server = setup.command(&[&["--stdio"], extra].concat());
    let mut cmd = Command::new(python());
    cmd.arg(repo_root().join(CLIENT))
        .args(["--steps", "-", "--"])
        .arg(server.get_program())
        .args(server.get_args());
    let reports = crate::sdk_clients::run_client(crate::sdk_clients::Sdk::Python, cmd, steps);
    for r in &reports {
        assert_eq!(
            r["ok"], true,
            "the SDK refused step {}: {}",
            r["step"], r["error"]
        );
    }
    reports
}

/// toolhost's envelope of a `tools/call` result, as the SDK passed it on.
fn envelope(result: &Value) -> &Value {
    &result["_meta"]["dev.toolhost/observation"]
}

#[test]
fn the_sdk_accepts_a_spilled_answer_and_reads_its_resource_link() {
    let setup = Setup::new(&[]);
    let big: String = (0..400)
        .map(|i| format!("line {i:03} \"quoted\" \\ {}\n", "ab".repeat(40)))
        .collect();
    setup.ws.write("pub/big.txt", &big);
    let steps = json!([
        {"op": "list"},
        {"op": "call", "tool": "file_view", "arguments": {"path": "pub/big.txt"}},
        {"op": "read_links", "of": 1},
        {"op": "follow_ups", "of": 1},
        {"op": "call", "tool": "grep_search", "arguments": {"pattern": "line", "path": "pub", "limit": 200}},
        {"op": "call", "tool": "file_view", "arguments": {"path": "pub/a.txt"}},
        // Errors: the SDK checks no schema, the answer says isError.
        {"op": "call", "tool": "file_view", "arguments": {"path": "pub/missing.txt"}},
        {"op": "call", "tool": "file_view", "arguments": {"path": "pub/a.txt", "limit": 0}},
        // A dry run's answer is the plan, which the schema admits too.
        {"op": "call", "tool": "file_delete", "arguments": {"path": "pub/a.txt"},
         "meta": {"dev.toolhost/dry_run": true}},
    ]);
    let r = session(
        &setup,
        &["--max-output-bytes", "4000", "--allow-write", "pub"],
        &steps,
    );

    // Every tool's outputSchema admits its own output and the spill object.
    for tool in r[0]["result"]["tools"].as_array().unwrap() {
        let schema = &tool["outputSchema"];
        assert_eq!(schema["type"], "object", "{tool}");
        assert_eq!(schema["anyOf"][1]["title"], "dev.toolhost/spill", "{tool}");
    }

    // The spill: ok, its structuredContent the spill object.
    let spilled = &r[1]["result"];
    assert_eq!(spilled["isError"], false, "{spilled}");
    let spill = &spilled["structuredContent"];
    let id = spill["artifact"]["id"].as_str().expect("an artifact id");
    assert_eq!(envelope(spilled)["truncated"]["artifact"], id);
    assert_eq!(
        spill["artifact"]["uri"],
        format!("toolhost://artifacts/{id}")
    );
    let link = spilled["content"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["type"] == "resource_link")
        .expect("a resource_link");
    assert_eq!(link["uri"], spill["artifact"]["uri"]);

    // The resource_link reads as the whole output, and the follow-ups from
    // the spill's head read the rest of it.
    let reads = r[2]["result"]["reads"].as_array().unwrap();
    assert_eq!(reads.len(), 1);
    let whole = reads[0]["contents"][0]["text"].as_str().unwrap();
    let output: Value = serde_json::from_str(whole).expect("the output as JSON");
    assert_eq!(output["path"], "pub/big.txt");
    let head = spill["follow_up"]["arguments"]["offset"].as_u64().unwrap() as usize;
    let rest: String = r[3]["result"]["answers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["structuredContent"]["content"].as_str().unwrap())
        .collect();
    assert_eq!(format!("{}{rest}", &whole[..head]), whole);

    // Another spill, and a plain ok answer: structured content either way.
    assert!(r[4]["result"]["structuredContent"]["artifact"]["uri"].is_string());
    assert_eq!(
        r[5]["result"]["structuredContent"]["lines"],
        json!(["hello", "world"])
    );
    let plan = &r[8]["result"];
    assert_eq!(plan["isError"], false, "{plan}");
    assert!(
        plan["structuredContent"]["plan_token"].is_string(),
        "{plan}"
    );
    assert_eq!(
        setup.ws.read("pub/a.txt"),
        b"hello\nworld\n",
        "only planned"
    );
    for (step, code) in [(6, "not_found"), (7, "invalid_arguments")] {
        let e = &r[step]["result"];
        assert_eq!(e["isError"], true, "{e}");
        assert_eq!(envelope(e)["error"]["code"], code, "{e}");
    }
}

#[test]
fn the_sdk_reads_a_one_mb_file_whole_by_following_next_with_default_arguments() {
    let setup = Setup::new(&[]);
    let body: String = (1..=10_000)
        .map(|i| format!("{i:05} {}\n", "abcdefghij".repeat(9)))
        .collect();
    setup.ws.write("pub/big.txt", &body);
    let steps = json!([
        {"op": "pages", "tool": "file_view", "arguments": {"path": "pub/big.txt"}, "next": "next"},
    ]);
    let r = session(&setup, &[], &steps);
    let answers = r[0]["result"]["answers"].as_array().unwrap();
    let mut lines: Vec<String> = Vec::new();
    for a in answers {
        let out = &a["structuredContent"];
        let text = a["content"].as_array().unwrap().last().unwrap()["text"]
            .as_str()
            .unwrap();
        assert!(!text.contains(" bytes omitted …]"), "{text}");
        assert_eq!(out["offset"], lines.len() as u64 + 1, "no line skipped");
        lines.extend(
            out["lines"]
                .as_array()
                .unwrap()
                .iter()
                .map(|l| l.as_str().unwrap().to_owned()),
        );
    }
    eprintln!(
        "python_sdk: {} B read in {} default pages",
        body.len(),
        answers.len()
    );
    assert!(lines.join("\n") + "\n" == body, "the pages are the file");
}
