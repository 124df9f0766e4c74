//! Running `serve` for others: health endpoints, JSON log lines, and
//! stopping without cutting off calls (the first SIGTERM lets running
//! calls answer, refuses new work and exits 0; a second one stops at once).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Child;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::mcp::{stateless_as, HttpServer, Setup, StdioServer};

fn signal(child: &Child, sig: i32) {
    // SAFETY: sending a signal to our own child process.
    assert_eq!(unsafe { libc::kill(child.id() as i32, sig) }, 0);
}

/// Waits up to `limit` for the child to exit; its exit code.
fn exit_code(child: &mut Child, limit: Duration) -> Option<i32> {
    let end = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code();
        }
        if Instant::now() > end {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `GET path` on `s` (kept alive); status and body.
fn get_on(s: &mut TcpStream, path: &str) -> (u16, String) {
    write!(s, "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = s.read(&mut chunk).unwrap();
        assert!(n > 0, "the connection closed before an answer");
        buf.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&buf).to_string();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let len: usize = head
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse().ok())?
                })
                .unwrap_or(0);
            if body.len() >= len {
                let status = head.split(' ').nth(1).unwrap().parse().unwrap();
                return (status, body[..len].to_string());
            }
        }
    }
}

fn get(server: &HttpServer, path: &str) -> (u16, String) {
    get_on(&mut server.connect(), path)
}

fn sleep_call(server: &HttpServer, id: i64, ms: u64) -> crate::mcp::Response {
    stateless_as(
        server,
        None,
        id,
        "tools/call",
        json!({"name": "test_sleep_ms", "arguments": {"ms": ms}}),
    )
}

#[test]
fn http_healthz_and_readyz_answer_and_other_paths_name_them() {
    let setup = Setup::new(&[]);
    let server = HttpServer::start(&setup, &[]);
    assert_eq!(get(&server, "/healthz"), (200, "ok".to_string()));
    assert_eq!(get(&server, "/readyz"), (200, "ready".to_string()));
    let (status, body) = get(&server, "/status");
    assert_eq!(status, 404);
    assert!(
        body.contains("/healthz") && body.contains("/readyz"),
        "{body}"
    );
}

#[test]
fn http_sigterm_lets_a_running_call_answer_refuses_new_work_and_exits_0() {
    let setup = Setup::new(&["tp_conformance"]);
    let mut server = HttpServer::start(&setup, &[]);
    // A connection opened before the signal, for a request after it.
    let mut open = server.connect();
    assert_eq!(get_on(&mut open, "/readyz").0, 200);
    let running = std::thread::scope(|scope| {
        let call = scope.spawn(|| sleep_call(&server, 1, 1500));
        std::thread::sleep(Duration::from_millis(400));
        signal(&server.child, libc::SIGTERM);
        std::thread::sleep(Duration::from_millis(200));
        // Draining: not ready, and no new call starts.
        let (status, body) = get_on(&mut open, "/readyz");
        assert_eq!((status, body.as_str()), (503, "draining: shutting down"));
        assert!(
            TcpStream::connect(("127.0.0.1", server.port)).is_err(),
            "the listener is closed"
        );
        call.join().unwrap()
    });
    // The call that was running answered in full.
    assert_eq!(running.status, 200, "{}", running.body);
    let reply = running.reply();
    assert_eq!(reply["result"]["isError"], false, "{reply}");
    assert_eq!(
        exit_code(&mut server.child, Duration::from_secs(10)),
        Some(0)
    );
}

#[test]
fn http_a_request_let_in_before_sigterm_runs_its_call() {
    let setup = Setup::new(&["tp_conformance"]);
    let mut server = HttpServer::start(&setup, &[]);
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "test_sleep_ms", "arguments": {"ms": 1}, "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}}}})
    .to_string();
    // The headers arrive before the signal, the body after it: the request
    // was let in, so its call runs instead of being refused.
    let mut s = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    write!(
        s,
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n\
         Mcp-Method: tools/call\r\nMcp-Name: test_sleep_ms\r\nConnection: close\r\n\
         Content-Length: {}\r\n\r\n",
        body.len()
    )
    .unwrap();
    s.flush().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    signal(&server.child, libc::SIGTERM);
    std::thread::sleep(Duration::from_millis(300));
    s.write_all(body.as_bytes()).unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        answer.contains(r#""isError":false"#) && !answer.contains("shutting down"),
        "{answer}"
    );
    assert_eq!(
        exit_code(&mut server.child, Duration::from_secs(10)),
        Some(0)
    );
}

#[test]
fn http_a_second_sigterm_stops_at_once() {
    let setup = Setup::new(&["tp_conformance"]);
    let mut server = HttpServer::start(&setup, &[]);
    let port = server.port;
    std::thread::scope(|scope| {
        scope.spawn(move || {
            // Cut off by the second signal: no answer, or a broken one.
            let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
            let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "test_sleep_ms", "arguments": {"ms": 20000}, "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {}}}});
            let _ = write!(
                s,
                "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
                 Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n\
                 Mcp-Method: tools/call\r\nMcp-Name: test_sleep_ms\r\nContent-Length: {}\r\n\r\n{body}",
                body.to_string().len()
            );
            let mut sink = Vec::new();
            let _ = s.read_to_end(&mut sink);
        });
        std::thread::sleep(Duration::from_millis(400));
        let started = Instant::now();
        signal(&server.child, libc::SIGTERM);
        std::thread::sleep(Duration::from_millis(200));
        assert!(server.child.try_wait().unwrap().is_none(), "still draining");
        signal(&server.child, libc::SIGTERM);
        let code = exit_code(&mut server.child, Duration::from_secs(5));
        assert_eq!(code, Some(128 + libc::SIGTERM));
        assert!(started.elapsed() < Duration::from_secs(5));
    });
}

#[test]
fn stdio_sigterm_lets_the_running_call_answer_and_exits_0() {
    let setup = Setup::new(&["tp_conformance"]);
    let mut server = StdioServer::initialized(&setup, &[]);
    server.send(&json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "test_sleep_ms", "arguments": {"ms": 1200}}}));
    std::thread::sleep(Duration::from_millis(400));
    signal(&server.child, libc::SIGTERM);
    std::thread::sleep(Duration::from_millis(150));
    // A call sent during the drain does not run.
    let refused = server.request(
        8,
        "tools/call",
        json!({"name": "test_sleep_ms", "arguments": {"ms": 1}}),
    );
    assert!(
        refused["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("shutting down")),
        "{refused}"
    );
    let answer = server.response(7);
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    assert_eq!(
        exit_code(&mut server.child, Duration::from_secs(10)),
        Some(0)
    );
}

#[test]
fn json_log_lines_carry_time_level_host_and_message() {
    let setup = Setup::new(&[]);
    let mut child = setup
        .command(&["--http", "127.0.0.1:0", "--log-format", "json"])
        .spawn()
        .unwrap();
    let err = crate::mcp::lines_of(child.stderr.take().unwrap());
    // Every line is one JSON object; the one of interest says where it serves.
    let v = loop {
        let line = err
            .recv_timeout(Duration::from_secs(60))
            .expect("a log line");
        let v: serde_json::Value =
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        if line.contains("serving MCP") {
            break v;
        }
    };
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(v["level"], "INFO", "{v}");
    assert!(
        v["message"]
            .as_str()
            .is_some_and(|m| m.contains("serving MCP on http://127.0.0.1:")),
        "{v}"
    );
    assert!(v["host"].as_str().is_some_and(|h| !h.is_empty()), "{v}");
    let time = v["time"].as_str().unwrap();
    assert!(chrono::DateTime::parse_from_rfc3339(time).is_ok(), "{time}");
}

/// Runs `toolhost EXTRA… call CALL` in a workspace holding `a.txt`, inside
/// a shell whose virtual address space is bounded to 16 GB (`ulimit -v`).
fn bounded(extra: &str, call: &str) -> std::process::Output {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "hi\n").unwrap();
    let bin = env!("CARGO_BIN_EXE_toolhost");
    std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -v 16000000 && exec '{bin}' {extra} --no-cache call {call}"
        ))
        .current_dir(ws.path())
        .env("TOOLHOST_KEY_FILE", ws.path().join("root.key"))
        .env("TOOLHOST_STORE", ws.path().join("records.sqlite"))
        .env_remove("TOOLHOST_TOKEN")
        .env_remove("TOOLHOST_INSTANCE_ALLOCATION")
        .output()
        .unwrap()
}

#[test]
fn a_bounded_address_space_runs_calls_with_on_demand_allocation() {
    // The pooling allocator reserves address space for every slot at
    // start; under a 16 GB bound that fails, and the error names the way out.
    let view = r#"file_view '{"path":"a.txt"}' --allow-read ."#;
    let pooled = bounded("", view);
    assert!(!pooled.status.success());
    let err = String::from_utf8_lossy(&pooled.stderr);
    assert!(err.contains("starting the sandbox"), "{err}");
    assert!(err.contains("--instance-allocation on-demand"), "{err}");

    let on_demand = bounded("--instance-allocation on-demand", view);
    let out = String::from_utf8_lossy(&on_demand.stdout);
    assert!(
        on_demand.status.success(),
        "{out}\n{}",
        String::from_utf8_lossy(&on_demand.stderr)
    );
    let obs: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(obs["status"], "ok", "{obs}");
    assert_eq!(obs["output"]["lines"], json!(["hi"]));
}

#[test]
fn on_demand_allocation_keeps_the_memory_limit_and_the_deadline() {
    let plugin = crate::support::test_plugin("tp_hostile");
    let extra = format!(
        "--instance-allocation on-demand --plugin '{}'",
        plugin.display()
    );
    let parse = |out: std::process::Output| -> serde_json::Value {
        serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)))
    };
    let bomb = parse(bounded(&extra, "memory_bomb '{}' --memory-mb 64 --json"));
    assert_eq!(bomb["error"]["code"], "memory_exhausted", "{bomb}");
    assert!(
        bomb["usage"]["peak_memory_bytes"].as_u64().unwrap() <= 64 << 20,
        "{bomb}"
    );
    let spin = parse(bounded(
        &extra,
        "spin_forever '{}' --timeout-ms 200 --fuel 1000000000000000 --json",
    ));
    assert_eq!(spin["error"]["code"], "timeout", "{spin}");
}
