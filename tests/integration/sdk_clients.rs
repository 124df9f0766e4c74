//! One scripted session, run by each official MCP client SDK over each
//! transport: the Python SDK (`tests/mcp_client/sdk_client.py`) and the
//! TypeScript SDK (`tests/mcp_client/ts/client.mjs`), over stdio and over
//! Streamable HTTP, against the real `toolhost serve`.
//!
//! The session lists the tools; calls every reference tool (writes, a
//! command, a fetch from a loopback server and an approved delete
//! included); reads a ~1 MB file by following `next` with default
//! arguments and compares the pages with the file byte for byte; sends
//! three bad inputs; spills a result and reads its `resource_link`; and, in
//! lazy mode, finds a tool with `find_tools` and calls it. Each SDK parses
//! every answer and checks every `ok` answer's `structuredContent` against
//! the tool's `outputSchema`, so an answer it refuses fails the test.
//!
//! The SDKs come from `.ci/py-mcp-client.sh` and `.ci/ts-mcp-client.sh`; on
//! a developer machine the tests run them when an SDK is missing, under CI
//! (`CI` set) they fail with a message instead.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use serde_json::{json, Value};

use crate::mcp::{HttpServer, Setup};
use crate::support::*;

const TS_DIR: &str = "tests/mcp_client/ts";

#[derive(Clone, Copy, Debug)]
pub(crate) enum Sdk {
    Python,
    TypeScript,
}

#[derive(Clone, Copy, Debug)]
enum Transport {
    Stdio,
    Http,
}

/// The TypeScript SDK's version pinned in its package.json, and the one
/// installed (None when missing or node cannot run).
fn ts_versions() -> (String, Option<String>) {
    let dir = repo_root().join(TS_DIR);
    let pkg: Value =
        serde_json::from_slice(&std::fs::read(dir.join("package.json")).unwrap()).unwrap();
    let want = pkg["dependencies"]["@modelcontextprotocol/sdk"]
        .as_str()
        .unwrap()
        .to_owned();
    let have = Command::new("node")
        .args([
            "-p",
            "require('./node_modules/@modelcontextprotocol/sdk/package.json').version",
        ])
        .current_dir(&dir)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
    (want, have)
}

/// The client script of the TypeScript SDK, with the SDK installed.
fn ts_client() -> PathBuf {
    static READY: OnceLock<()> = OnceLock::new();
    READY.get_or_init(|| {
        let (want, have) = ts_versions();
        if have.as_deref() == Some(want.as_str()) {
            return;
        }
        assert!(
            std::env::var_os("CI").is_none(),
            "the MCP TypeScript SDK {want} is missing (installed: {have:?}): CI must run \
             `bash .ci/ts-mcp-client.sh` before `cargo test`"
        );
        let _ = writeln!(
            std::io::stderr(),
            "\ncargo test: the SDK client tests need the official MCP TypeScript SDK, which is \
             missing; installing it now with .ci/ts-mcp-client.sh into {TS_DIR}/node_modules \
             (from the npm registry, once; nothing outside this repository is touched)\n"
        );
        let out = Command::new("bash")
            .arg(repo_root().join(".ci/ts-mcp-client.sh"))
            .current_dir(repo_root())
            .output()
            .expect("running .ci/ts-mcp-client.sh");
        assert!(
            out.status.success(),
            ".ci/ts-mcp-client.sh failed (it needs node and npm):\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(ts_versions().1, Some(want), "the SDK is still missing");
    });
    repo_root().join(TS_DIR).join("client.mjs")
}

/// The command that starts `sdk`'s client script.
pub(crate) fn client(sdk: Sdk) -> Command {
    let mut c = match sdk {
        Sdk::Python => {
            let mut c = Command::new(crate::python_sdk::python());
            c.arg(repo_root().join("tests/mcp_client/sdk_client.py"));
            c
        }
        Sdk::TypeScript => {
            let mut c = Command::new("node");
            c.arg(ts_client());
            c
        }
    };
    c.args(["--steps", "-"]);
    c
}

/// Runs the client `cmd` (its target given) on `steps`; each step's report.
/// Fails when the client itself fails or leaves a step out.
pub(crate) fn run_client(sdk: Sdk, mut cmd: Command, steps: &Value) -> Vec<Value> {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("starting the {sdk:?} client: {e}"));
    child
        .stdin
        .take()
        .unwrap()
        .write_all(steps.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the {sdk:?} client failed:\n{stderr}");
    let reports: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(
        reports.len(),
        steps.as_array().unwrap().len(),
        "a step is missing:\n{stderr}"
    );
    reports
}

/// Runs `steps` in one session of `sdk` over `transport` with the server
/// of `setup` (and `extra` options); returns each step's report. Fails on
/// any step the SDK refused. With a `token`, the client runs under that
/// capability token: over HTTP the server requires one and the client
/// sends it as `Authorization: Bearer`, over stdio the server is given it.
fn session(
    sdk: Sdk,
    transport: Transport,
    setup: &Setup,
    extra: &[&str],
    token: Option<&str>,
    steps: &Value,
) -> Vec<Value> {
    let mut cmd = client(sdk);
    // Kept alive until the client is done.
    let _http = match transport {
        Transport::Stdio => {
            let mut args = vec!["--stdio"];
            args.extend_from_slice(extra);
            args.extend(token.into_iter().flat_map(|t| ["--token", t]));
            let server = setup.command(&args);
            cmd.arg("--")
                .arg(server.get_program())
                .args(server.get_args());
            None
        }
        Transport::Http => {
            let required: &[&str] = if token.is_some() {
                &["--require-token"]
            } else {
                &[]
            };
            let server = HttpServer::start(setup, &[extra, required].concat());
            cmd.arg("--url")
                .arg(format!("http://127.0.0.1:{}/mcp", server.port));
            if let Some(t) = token {
                cmd.arg("--header")
                    .arg(format!("Authorization: Bearer {t}"));
            }
            Some(server)
        }
    };
    let reports = run_client(sdk, cmd, steps);
    for r in &reports {
        assert_eq!(
            r["ok"], true,
            "the {sdk:?} SDK ({transport:?}) refused step {}: {}",
            r["step"], r["error"]
        );
    }
    reports
}

/// A loopback HTTP server answering every GET with `body`; its origin.
fn serve_text(body: &'static str) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let origin = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for mut s in listener.incoming().flatten() {
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && s.read(&mut byte).is_ok_and(|n| n == 1) {
                head.push(byte[0]);
            }
            let _ = write!(
                s,
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\
                 Connection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    origin
}

/// A capability token from `toolhost cap mint ARGS` with the setup's key.
fn mint(setup: &Setup, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_toolhost"))
        .arg("--key-file")
        .arg(setup.state.path().join("root.key"))
        .args(["cap", "mint"])
        .args(args)
        .env_remove("TOOLHOST_ROOT_KEY")
        .env_remove("TOOLHOST_TOKEN")
        .output()
        .expect("running toolhost cap mint");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// toolhost's envelope of a `tools/call` result, as the SDK passed it on.
fn envelope(result: &Value) -> &Value {
    &result["_meta"]["dev.toolhost/observation"]
}

/// The whole session for `sdk` over `transport`: three server runs (every
/// tool, paging and bad inputs; a spill; lazy discovery).
fn full_session(sdk: Sdk, transport: Transport) {
    let setup = Setup::new(&[]);
    let big: String = (1..=11_000)
        .map(|i| format!("{i:05} {}\n", "abcdefghij".repeat(9)))
        .collect();
    setup.ws.write("pub/big.txt", &big);
    setup.ws.write("pub/edit.txt", "status: draft\n");
    setup.ws.write("pub/gone.txt", "delete me\n");
    let origin = serve_text("fetched over http\n");
    let url = format!("{origin}/notes.txt");

    // Every reference tool, a large read by pages, three bad inputs.
    let steps = json!([
        {"op": "list"},
        {"op": "call", "tool": "file_view", "arguments": {"path": "pub/a.txt"}},
        {"op": "call", "tool": "file_edit",
         "arguments": {"path": "pub/edit.txt", "old_str": "draft", "new_str": "final"}},
        {"op": "call", "tool": "grep_search", "arguments": {"pattern": "wor.d", "path": "pub/a.txt"}},
        {"op": "call", "tool": "run_command", "arguments": {"argv": ["wc", "-l", "a.txt"], "cwd": "pub"}},
        {"op": "call", "tool": "http_get", "arguments": {"url": url}},
        {"op": "call", "tool": "file_delete", "arguments": {"path": "pub/gone.txt"},
         "meta": {"dev.toolhost/dry_run": true}},
        {"op": "approve", "of": 6},
        {"op": "pages", "tool": "file_view", "arguments": {"path": "pub/big.txt"}, "next": "next"},
        {"op": "bad", "tool": "file_view", "arguments": {}},
        {"op": "bad", "tool": "file_view", "arguments": {"path": 5}},
        {"op": "bad", "tool": "no_such_tool", "arguments": {}},
    ]);
    let r = session(
        sdk,
        transport,
        &setup,
        &[
            "--allow-write",
            "pub",
            "--self-approve",
            "--allow-exec",
            "wc",
            "--allow-net",
            &origin,
        ],
        None,
        &steps,
    );
    let listed: Vec<&str> = r[0]["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    for tool in [
        "file_view",
        "file_edit",
        "grep_search",
        "run_command",
        "http_get",
        "file_delete",
    ] {
        assert!(listed.contains(&tool), "{tool} not listed: {listed:?}");
    }
    for (step, report) in r.iter().enumerate().take(8).skip(1) {
        let a = &report["result"];
        assert_eq!(a["isError"], false, "step {step}: {a}");
        assert!(a["structuredContent"].is_object(), "step {step}: {a}");
        assert_eq!(envelope(a)["status"], "ok", "step {step}: {a}");
    }
    assert_eq!(
        r[1]["result"]["structuredContent"]["lines"],
        json!(["hello", "world"])
    );
    assert_eq!(setup.ws.read("pub/edit.txt"), b"status: final\n");
    assert!(
        r[3]["result"]["structuredContent"]
            .to_string()
            .contains("world"),
        "{}",
        r[3]["result"]
    );
    assert!(
        r[4]["result"]["structuredContent"]
            .to_string()
            .contains("2 a.txt"),
        "{}",
        r[4]["result"]
    );
    assert_eq!(
        r[5]["result"]["structuredContent"]["body"],
        "fetched over http\n"
    );
    assert!(r[6]["result"]["structuredContent"]["plan_token"].is_string());
    assert!(
        !setup.ws.dir.path().join("pub/gone.txt").exists(),
        "the approved delete ran"
    );

    // The pages are the file, byte for byte, no line skipped.
    let answers = r[8]["result"]["answers"].as_array().unwrap();
    let mut lines: Vec<String> = Vec::new();
    for a in answers {
        let out = &a["structuredContent"];
        assert_eq!(out["offset"], lines.len() as u64 + 1, "no line skipped");
        lines.extend(
            out["lines"]
                .as_array()
                .unwrap()
                .iter()
                .map(|l| l.as_str().unwrap().to_owned()),
        );
    }
    let whole = lines.join("\n") + "\n";
    assert!(whole.as_bytes() == big.as_bytes(), "the pages are the file");

    // The bad inputs: errors the SDK accepted, each saying what was wrong.
    for (step, field) in [(9, "/path"), (10, "/path")] {
        let e = &r[step]["result"];
        assert_eq!(e["isError"], true, "{e}");
        assert_eq!(envelope(e)["error"]["code"], "invalid_arguments", "{e}");
        assert_eq!(envelope(e)["error"]["field"], field, "{e}");
    }
    let unknown = &r[11]["result"]["jsonrpc_error"];
    assert_eq!(unknown["code"], -32602, "{}", r[11]);
    assert!(
        unknown["message"]
            .as_str()
            .unwrap()
            .contains("no_such_tool"),
        "{unknown}"
    );

    // A spill, and its resource_link read back whole, under a capability
    // token (sent as a bearer token over HTTP).
    let token = mint(&setup, &["--tool", "file_view", "--read", "pub"]);
    let steps_spill = json!([
        {"op": "call", "tool": "file_view", "arguments": {"path": "pub/big.txt"}},
        {"op": "read_links", "of": 0},
    ]);
    let s = session(
        sdk,
        transport,
        &setup,
        &["--max-output-bytes", "4000"],
        Some(&token),
        &steps_spill,
    );
    let spilled = &s[0]["result"];
    assert_eq!(spilled["isError"], false, "{spilled}");
    let uri = spilled["structuredContent"]["artifact"]["uri"]
        .as_str()
        .unwrap_or_else(|| panic!("a spill: {spilled}"));
    let reads = s[1]["result"]["reads"].as_array().unwrap();
    assert_eq!(reads.len(), 1, "{}", s[1]);
    assert_eq!(reads[0]["contents"][0]["uri"], uri);
    let output: Value =
        serde_json::from_str(reads[0]["contents"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(output["path"], "pub/big.txt");
    assert_eq!(output["lines"][0], big.lines().next().unwrap());

    // Lazy discovery: find_tools alone, then what it found, called.
    let steps_lazy = json!([
        {"op": "list"},
        {"op": "find", "query": "show me what a text file in the project says",
         "calls": {"file_view": {"path": "pub/a.txt"}, "grep_search": {"pattern": "hello", "path": "pub"}}},
    ]);
    let l = session(sdk, transport, &setup, &["--lazy-tools"], None, &steps_lazy);
    let first: Vec<&str> = l[0]["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(first, ["find_tools"]);
    let found = &l[1]["result"];
    let called = found["called"].as_str().unwrap();
    assert!(
        found["listed"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n == called),
        "{found}"
    );
    assert_eq!(found["result"]["isError"], false, "{found}");
    assert!(found["result"]["structuredContent"].is_object(), "{found}");

    eprintln!(
        "sdk_clients: {sdk:?} over {transport:?}: {} steps accepted, {} B reassembled from {} pages",
        r.len() + s.len() + l.len(),
        big.len(),
        answers.len()
    );
}

#[test]
fn python_sdk_session_over_stdio() {
    full_session(Sdk::Python, Transport::Stdio);
}

#[test]
fn python_sdk_session_over_http() {
    full_session(Sdk::Python, Transport::Http);
}

#[test]
fn typescript_sdk_session_over_stdio() {
    full_session(Sdk::TypeScript, Transport::Stdio);
}

#[test]
fn typescript_sdk_session_over_http() {
    full_session(Sdk::TypeScript, Transport::Http);
}

/// `run_script` through `sdk` over `transport`: listed with its output
/// schema, its answer (parallel reads, an inner refusal) accepted by the
/// SDK's check of `structuredContent` against that schema.
fn script_session(sdk: Sdk, transport: Transport) {
    let setup = Setup::new(&[]);
    setup.ws.write("pub/c.txt", "third\n");
    let steps = json!([
        {"op": "list"},
        {"op": "call", "tool": "run_script", "arguments": {
            "source": r#"
                const [a, c] = await Promise.all([tools.file_view({ path: "pub/a.txt" }),
                                                  tools.file_view({ path: "pub/c.txt" })]);
                let denied;
                try { await tools.file_view({ path: "secret/b.txt" }); } catch (e) { denied = e.code; }
                return { lines: a.lines.concat(c.lines), denied };"#,
            "timeout_ms": 20000,
        }},
        {"op": "bad", "tool": "run_script", "arguments": {"source": "throw new Error('no')"}},
    ]);
    let r = session(sdk, transport, &setup, &["--allow-script"], None, &steps);
    let tools = r[0]["result"]["tools"].as_array().unwrap();
    let def = tools
        .iter()
        .find(|t| t["name"] == "run_script")
        .unwrap_or_else(|| panic!("{tools:#?}"));
    assert!(def["outputSchema"].is_object(), "{def:#}");
    let structured = &r[1]["result"]["structuredContent"];
    assert_eq!(
        structured["value"],
        json!({"lines": ["hello", "world", "third"], "denied": "denied"}),
        "{:#}",
        r[1]
    );
    assert_eq!(structured["calls"]["total"], 3, "{:#}", r[1]);
    let obs = envelope(&r[1]["result"]);
    assert_eq!(obs["effects"]["level"], "read-only", "{obs:#}");
    assert_eq!(r[2]["result"]["isError"], true, "{:#}", r[2]);
}

#[test]
fn python_sdk_runs_a_script_over_stdio() {
    script_session(Sdk::Python, Transport::Stdio);
}

#[test]
fn python_sdk_runs_a_script_over_http() {
    script_session(Sdk::Python, Transport::Http);
}

#[test]
fn typescript_sdk_runs_a_script_over_stdio() {
    script_session(Sdk::TypeScript, Transport::Stdio);
}

#[test]
fn typescript_sdk_runs_a_script_over_http() {
    script_session(Sdk::TypeScript, Transport::Http);
}

/// The clients do check: a server whose answer breaks its tool's declared
/// `outputSchema` (`tests/mcp_client/nonconforming_server.py`) is refused
/// by each SDK, whether or not the session listed the tools first, and the
/// refusal is reported as a failed step. Without this, a client with its
/// validation off would let every session above pass.
#[test]
fn each_sdk_refuses_an_answer_that_breaks_the_output_schema() {
    let steps = json!([
        {"op": "call", "tool": "count", "arguments": {}},
        {"op": "list"},
        {"op": "call", "tool": "count", "arguments": {}},
    ]);
    for sdk in [Sdk::Python, Sdk::TypeScript] {
        let mut cmd = client(sdk);
        cmd.args(["--", "python3"])
            .arg(repo_root().join("tests/mcp_client/nonconforming_server.py"));
        let r = run_client(sdk, cmd, &steps);
        assert_eq!(r[1]["ok"], true, "{sdk:?}: {}", r[1]);
        for step in [0, 2] {
            assert_eq!(r[step]["ok"], false, "{sdk:?} accepted it: {}", r[step]);
            let error = r[step]["error"].as_str().unwrap().to_lowercase();
            assert!(
                error.contains("structured content") && error.contains("integer"),
                "{sdk:?}: {error}"
            );
        }
    }
}
