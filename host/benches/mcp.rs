//! MCP round trips through the real `toolhost serve`: `cargo bench --bench mcp`.
//!
//! - stdio: median of sequential `tools/call echo_value` round trips
//!   (client writes a line, reads the response line); target ≤ 150 µs;
//! - HTTP: the same over one keep-alive loopback connection (stateless
//!   2026-07-28 requests, JSON responses); target ≤ 300 µs;
//! - HTTP throughput: 8 clients, one connection each, calling as fast as
//!   they can for a few seconds; target ≥ 5,000 calls/s.
//!
//! Every response is checked (`status: ok`) so a fast error cannot pass for
//! a fast call.

#[allow(dead_code)]
#[path = "../../tests/integration/support.rs"]
mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::*;

const WARMUP: usize = 300;
const SAMPLES: usize = 3000;
const CLIENTS: usize = 8;
const LOAD_SECS: u64 = 4;

fn stats(mut t: Vec<Duration>) -> (Duration, Duration, Duration) {
    t.sort();
    (t[t.len() / 2], t[t.len() * 9 / 10], t[t.len() * 99 / 100])
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn serve(plugins: &std::path::Path, extra: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_toolhost"))
        .args(["serve", "--no-builtin", "--plugins-dir"])
        .arg(plugins)
        .arg("--cache-dir")
        .arg(repo_root().join("target/test-compile-cache"))
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting toolhost serve")
}

fn check_ok(line: &str) {
    let v: Value = serde_json::from_str(line).expect("a JSON-RPC message");
    assert_eq!(
        v["result"]["_meta"]["dev.toolhost/observation"]["status"], "ok",
        "unexpected response: {line}"
    );
}

fn bench_stdio(plugins: &std::path::Path) -> Duration {
    let mut child = serve(plugins, &["--stdio"]);
    let err = BufReader::new(child.stderr.take().unwrap());
    std::thread::spawn(move || err.lines().for_each(drop));
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    let mut rpc = |msg: &Value, line: &mut String| {
        stdin.write_all(msg.to_string().as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
        if msg.get("id").is_some() {
            line.clear();
            out.read_line(line).unwrap();
        }
    };
    rpc(
        &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "bench", "version": "1"}}}),
        &mut line,
    );
    rpc(
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        &mut line,
    );
    // The transport and rmcp alone: `ping` round trips.
    let mut pings = Vec::with_capacity(SAMPLES);
    for i in 0..WARMUP + SAMPLES {
        let msg = json!({"jsonrpc": "2.0", "id": 1_000_000 + i, "method": "ping"});
        let start = Instant::now();
        rpc(&msg, &mut line);
        if i >= WARMUP {
            pings.push(start.elapsed());
        }
    }
    let (ping, _, _) = stats(pings);
    println!(
        "stdio ping round trip:         median {:>7.1} µs   (transport + rmcp, no tool)",
        us(ping)
    );
    let mut samples = Vec::with_capacity(SAMPLES);
    for i in 0..WARMUP + SAMPLES {
        let msg = json!({"jsonrpc": "2.0", "id": i + 1, "method": "tools/call",
            "params": {"name": "echo_value", "arguments": {"value": i}}});
        let start = Instant::now();
        rpc(&msg, &mut line);
        let took = start.elapsed();
        check_ok(&line);
        if i >= WARMUP {
            samples.push(took);
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    let (median, p90, p99) = stats(samples);
    println!(
        "stdio tools/call round trip:   median {:>7.1} µs   p90 {:>7.1} µs   p99 {:>7.1} µs   (target ≤ 150 µs)",
        us(median),
        us(p90),
        us(p99)
    );
    median
}

/// A keep-alive HTTP/1.1 client for stateless `tools/call`.
struct HttpClient {
    write: TcpStream,
    read: BufReader<TcpStream>,
    body: Vec<u8>,
}

impl HttpClient {
    fn connect(port: u16) -> HttpClient {
        let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_nodelay(true).unwrap();
        HttpClient {
            write: s.try_clone().unwrap(),
            read: BufReader::new(s),
            body: Vec::new(),
        }
    }

    fn call(&mut self, id: u64, value: u64) -> &[u8] {
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": "echo_value", "arguments": {"value": value},
            "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientCapabilities": {}}}})
        .to_string();
        let req = format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n\
             Mcp-Method: tools/call\r\nMcp-Name: echo_value\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        self.write.write_all(req.as_bytes()).unwrap();
        let mut length = None;
        let mut line = String::new();
        loop {
            line.clear();
            self.read.read_line(&mut line).unwrap();
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((k, v)) = l.split_once(':') {
                if k.eq_ignore_ascii_case("content-length") {
                    length = Some(v.trim().parse::<usize>().unwrap());
                }
            }
        }
        let n = length.expect("a Content-Length (JSON response)");
        self.body.resize(n, 0);
        self.read.read_exact(&mut self.body).unwrap();
        &self.body
    }
}

fn bench_http(plugins: &std::path::Path) -> (Duration, f64) {
    let mut child = serve(plugins, &["--http", "127.0.0.1:0"]);
    let mut err = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut port = 0;
    for line in err.by_ref() {
        let line = line.unwrap();
        if let Some(rest) = line.split("serving MCP on http://").nth(1) {
            port = rest
                .trim_end_matches("/mcp")
                .rsplit(':')
                .next()
                .unwrap()
                .parse()
                .unwrap();
            break;
        }
    }
    assert!(port != 0, "toolhost serve --http did not start");
    // Keep draining stderr: a closed pipe would fail the server's logging.
    std::thread::spawn(move || err.for_each(drop));

    let mut client = HttpClient::connect(port);
    let mut samples = Vec::with_capacity(SAMPLES);
    for i in 0..(WARMUP + SAMPLES) as u64 {
        let start = Instant::now();
        let body = client.call(i, i);
        let took = start.elapsed();
        check_ok(std::str::from_utf8(body).unwrap());
        if i as usize >= WARMUP {
            samples.push(took);
        }
    }
    let (median, p90, p99) = stats(samples);
    println!(
        "HTTP tools/call round trip:    median {:>7.1} µs   p90 {:>7.1} µs   p99 {:>7.1} µs   (target ≤ 300 µs)",
        us(median),
        us(p90),
        us(p99)
    );

    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let workers: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let stop = stop.clone();
            let done = done.clone();
            std::thread::spawn(move || {
                let mut c = HttpClient::connect(port);
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let body = c.call(i, i % 1000);
                    check_ok(std::str::from_utf8(body).unwrap());
                    done.fetch_add(1, Ordering::Relaxed);
                    i += 1;
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500)); // warm up
    let start_count = done.load(Ordering::Relaxed);
    let start = Instant::now();
    std::thread::sleep(Duration::from_secs(LOAD_SECS));
    let calls = done.load(Ordering::Relaxed) - start_count;
    let rate = calls as f64 / start.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.join().unwrap();
    }
    println!(
        "HTTP sustained, {CLIENTS} clients:    {rate:>9.0} calls/s ({calls} calls in {LOAD_SECS} s; target ≥ 5,000/s)"
    );
    let _ = child.kill();
    let _ = child.wait();
    (median, rate)
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument is accepted and ignored.
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        test_plugin("tp_trivial"),
        dir.path().join("tp_trivial.wasm"),
    )
    .unwrap();
    bench_stdio(dir.path());
    bench_http(dir.path());
}
