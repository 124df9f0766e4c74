//! `toolhost serve` under abuse: a flood of `initialize` requests, sessions
//! left idle, clients that stall half-way through a request, sleeping calls
//! in every call slot, and a client that reuses a request id. Real server
//! processes, raw sockets.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::mcp::{observation_of, stateless_as, HttpServer, Response, Setup, StdioServer};
use crate::support::{expect_error, expect_ok};

fn initialize_body(id: i64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "flood", "version": "1"}}})
}

fn initialize(server: &HttpServer, id: i64) -> Response {
    server.post_json(&[], &initialize_body(id))
}

/// Resident memory of a process, from /proc.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/PID/status")
}

/// A request on an open session: its status (404 once the session is gone).
fn list_on(server: &HttpServer, session: &str, id: i64) -> u16 {
    server
        .post_json(
            &[
                ("Mcp-Session-Id", session),
                ("MCP-Protocol-Version", "2025-11-25"),
            ],
            &json!({"jsonrpc": "2.0", "id": id, "method": "tools/list", "params": {}}),
        )
        .status
}

#[test]
fn http_an_initialize_flood_is_capped_and_memory_stays_flat() {
    let setup = Setup::new(&[]);
    let server = HttpServer::start(&setup, &[]);
    let pid = server.child.id();
    // Warm up: the catalog, the runtime, the allocator's first arenas.
    for i in 0..20 {
        let r = initialize(&server, i);
        assert_eq!(r.status, 200, "{}", r.body);
    }
    let before = rss_kib(pid);
    let (mut opened, mut refused) = (20, 0);
    for i in 0..5000 {
        let r = initialize(&server, 100 + i);
        match r.status {
            200 => {
                assert!(r.header("mcp-session-id").is_some());
                opened += 1;
            }
            429 => {
                assert!(r.header("retry-after").is_some());
                let error = r.reply();
                assert_eq!(error["id"], 100 + i, "{error}");
                assert!(
                    error["error"]["message"]
                        .as_str()
                        .unwrap()
                        .contains("sessions open"),
                    "{error}"
                );
                refused += 1;
            }
            other => panic!("initialize {i}: {other} {}", r.body),
        }
    }
    let after = rss_kib(pid);
    eprintln!(
        "RSS {before} KiB -> {after} KiB after 5,000 initialize requests ({opened} opened, {refused} refused)"
    );
    assert_eq!(
        opened,
        toolhost_mcp::DEFAULT_MAX_SESSIONS_PER_TOKEN,
        "clients without a token share one allowance"
    );
    assert!(
        after < before + 48 * 1024,
        "RSS grew from {before} KiB to {after} KiB"
    );
}

#[test]
fn http_idle_sessions_expire_and_free_their_place() {
    let setup = Setup::new(&["tp_hostile"]);
    let server = HttpServer::start(
        &setup,
        &[
            "--session-idle-ms",
            "1000",
            "--max-sessions-per-token",
            "2",
            "--timeout-ms",
            "2500",
            "--fuel",
            "1000000000000000",
        ],
    );
    let session = |r: &Response| r.header("mcp-session-id").unwrap().to_string();
    let first = session(&initialize(&server, 1));
    let second = session(&initialize(&server, 2));
    let full = initialize(&server, 3);
    assert_eq!(full.status, 429, "{}", full.body);

    // A call longer than the idle timeout keeps its session.
    let headers = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("Mcp-Session-Id", second.as_str()),
        ("MCP-Protocol-Version", "2025-11-25"),
    ];
    let reply = server
        .post(
            &headers,
            json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                "params": {"name": "spin_forever", "arguments": {}}})
            .to_string()
            .as_bytes(),
        )
        .reply();
    assert_eq!(
        observation_of(&reply)["error"]["code"],
        "timeout",
        "{reply}"
    );
    assert_eq!(list_on(&server, &second, 5), 200, "closed during a call");

    // Left alone, a session goes: 404, like any unknown session. (Each
    // look is activity, so look less often than the idle timeout.)
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        std::thread::sleep(Duration::from_millis(2000));
        if list_on(&server, &first, 6) == 404 {
            break;
        }
        assert!(Instant::now() < deadline, "the idle session never expired");
    }
    // Its place is free again.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let r = initialize(&server, 7);
        if r.status == 200 {
            break;
        }
        assert_eq!(r.status, 429, "{}", r.body);
        assert!(Instant::now() < deadline, "no place freed");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Waits until the server closes `s` (EOF or reset); returns what it sent.
fn read_until_closed(mut s: TcpStream) -> (String, Duration) {
    let started = Instant::now();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!(
                "the server kept a stalled connection open for {:?}: {e}",
                started.elapsed()
            ),
        }
    }
    (
        String::from_utf8_lossy(&got).into_owned(),
        started.elapsed(),
    )
}

#[test]
fn http_stalled_requests_are_cut_off() {
    let setup = Setup::new(&[]);
    let server = HttpServer::start(&setup, &["--request-timeout-ms", "1000"]);

    // Connected, nothing sent.
    let (_, waited) = read_until_closed(server.connect());
    assert!(waited < Duration::from_secs(20), "{waited:?}");

    // Half the headers, then silence.
    let mut s = server.connect();
    s.write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: appl")
        .unwrap();
    let (_, waited) = read_until_closed(s);
    assert!(waited < Duration::from_secs(20), "{waited:?}");

    // The headers, then part of the body.
    let mut s = server.connect();
    s.write_all(
        b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
          Accept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\r\n{\"jsonrpc\":",
    )
    .unwrap();
    let (answer, waited) = read_until_closed(s);
    assert!(waited < Duration::from_secs(20), "{waited:?}");
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");

    // The server still serves complete requests.
    let r = initialize(&server, 1);
    assert_eq!(r.status, 200, "{}", r.body);
}

/// Every call slot of an HTTP server held by a call that sleeps for ten
/// minutes: an unrelated call waits for the sleepers' deadline, not for
/// their sleep. (Before deadlines held inside host calls, the sleeps kept
/// their slots to the end and the unrelated call waited with them.)
#[test]
fn http_sleeping_calls_free_their_slots_at_the_deadline() {
    const DEADLINE: Duration = Duration::from_secs(8);
    const SLEEP_MS: u64 = 600_000;
    let setup = Setup::new(&["tp_hostile"]);
    let server = HttpServer::start(&setup, &["--timeout-ms", &DEADLINE.as_millis().to_string()]);
    // The server's own count (it runs on this machine, with our CPU set).
    let slots = toolhost_mcp::call_slots();
    let call = |id: i64, name: &str, arguments: Value| {
        let reply = stateless_as(
            &server,
            None,
            id,
            "tools/call",
            json!({"name": name, "arguments": arguments}),
        )
        .reply();
        observation_of(&reply)
    };
    let started = Instant::now();
    std::thread::scope(|s| {
        let sleepers: Vec<_> = (0..slots)
            .map(|i| {
                let call = &call;
                s.spawn(move || {
                    let obs = call(100 + i as i64, "sleep", json!({ "ms": SLEEP_MS }));
                    (obs, started.elapsed())
                })
            })
            .collect();
        // Time for every sleeper to take its slot before the next call
        // queues behind them.
        std::thread::sleep(Duration::from_secs(3));
        let (tx, rx) = mpsc::channel();
        let call = &call;
        s.spawn(move || {
            let obs = call(1, "file_view", json!({"path": "pub/a.txt"}));
            let _ = tx.send((obs, started.elapsed()));
        });
        let limit = DEADLINE + Duration::from_secs(40);
        let (obs, at) = rx.recv_timeout(limit).unwrap_or_else(|_| {
            panic!(
                "file_view still waited for a call slot {limit:?} after {slots} sleeping calls \
                 (deadline {DEADLINE:?}) took them all"
            )
        });
        eprintln!("{slots} call slots; file_view ended {at:?} after the sleepers started");
        expect_ok(&obs);
        assert!(obs.to_string().contains("hello"), "{obs:#}");
        // It did wait: every slot was taken (else this test proves nothing).
        assert!(
            at >= DEADLINE,
            "file_view ended {at:?} after the sleepers started, before their \
             {DEADLINE:?} deadline: {slots} sleeping calls did not fill every slot"
        );
        for sleeper in sleepers {
            let (obs, at) = sleeper.join().unwrap();
            expect_error(&obs, "error", "timeout");
            assert!(at >= DEADLINE, "{at:?}");
            assert!(at < limit, "a sleeper ended only after {at:?}");
        }
    });
}

#[test]
fn stdio_a_reused_request_id_gets_its_own_error_answer() {
    let setup = Setup::new(&["tp_hostile"]);
    let mut server = StdioServer::initialized(
        &setup,
        &["--timeout-ms", "3000", "--fuel", "1000000000000000"],
    );
    // A call that runs until its deadline, then a second request with the
    // same id while it runs.
    server.send(&json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
        "params": {"name": "spin_forever", "arguments": {}}}));
    std::thread::sleep(Duration::from_millis(300));
    server.send(&json!({"jsonrpc": "2.0", "id": 5, "method": "tools/list", "params": {}}));
    let refusal = server.response(5);
    assert_eq!(refusal["error"]["code"], -32600, "{refusal}");
    assert!(
        refusal["error"]["message"]
            .as_str()
            .unwrap()
            .contains("already in use"),
        "{refusal}"
    );
    // The first request still gets its own answer.
    let answer = server.response(5);
    assert_eq!(
        observation_of(&answer)["error"]["code"],
        "timeout",
        "{answer}"
    );
    // Answered: the id is free again.
    let list = server.request(5, "tools/list", json!({}));
    assert!(list["result"]["tools"].is_array(), "{list}");
}
