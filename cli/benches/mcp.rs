//! MCP round trips through the real `toolhost serve`, each figure beside
//! its floor: `cargo bench --bench mcp [-- FILTER]`.
//!
//! The *floor* is a trivial MCP server in Python (written by this bench to a
//! temporary file: it answers every `tools/call` with a fixed text): what
//! any server costs with this client on this machine at this minute.
//! Absolute figures drift by half on a shared machine, ratios much less, so
//! toolhost and the floor are measured interleaved (toolhost, floor,
//! toolhost, floor, …) and each figure is printed as a ratio to the floor.
//! Two clients call both servers: a small Python client the bench writes
//! (`json.dumps` a request, write it, read the answer line, `json.loads`
//! it), which defines the targets, and this bench itself in Rust, whose floor is lower (a
//! stricter ratio, beside it). Each writes a request line and reads and
//! parses the answer line, as any client must, for toolhost and floor
//! alike.
//!
//! Figures (a FILTER argument runs the ones whose name contains it):
//!
//! - `trivial`: `tools/call echo_value` (test plugin), target ≤ 1.3× floor;
//! - `view3`: `file_view` of a 3-byte file;
//! - `view4k`: `file_view` of a 4 KiB file (64 lines), targets ≤ 2.2× the
//!   floor's median, p90 ≤ 2.5× the floor's p90;
//! - `onecpu`: `view4k` with the Python client and every server bound to
//!   one CPU (`taskset -c 0`), as in a one-CPU container;
//! - `page1m`: a 1 MiB text file read whole through `file_view`'s paging
//!   (`offset` = next line while `has_more`), in MB/s of file content,
//!   target ≥ 100 MB/s, beside the *paging floor*: a Python server that
//!   replays toolhost's own answers, so the client parses the same bytes;
//! - `start`: spawn to the first `file_view` answer, with an empty compile
//!   cache (target ≤ 300 ms, 3 starts) and with a warm one (≤ 20 ms, 15
//!   starts), beside the floor's spawn to first answer (15); medians with
//!   the fastest and slowest;
//! - `idle`: CPU time `serve` uses while no call comes (it must sleep);
//! - `http`: the trivial call over one keep-alive HTTP connection and 8
//!   clients' throughput, each as stateless 2026-07-28 requests and in
//!   2025-11-25 sessions, interleaved; then `file_view` of the 4 KiB file over one
//!   connection beside a Python HTTP floor (`http.server`, keep-alive),
//!   interleaved, target ≤ 2× the floor, and 8 clients' throughput beside
//!   the floor's, target ≥ 1.5× the 2,058 calls/s at filing.
//!
//! Beside each of `trivial`, `view3` and `view4k`, the *answer floor*: a
//! Python server that replays toolhost's own answer to that call, so the
//! client reads and parses the same bytes (the `page1m` figure's *paging
//! floor* does the same for its pages). Its distance from the floor is the
//! answer's cost to the client alone; toolhost's ratio to it, the server's
//! own.
//!
//! Every toolhost answer is checked (`status: ok`) so a fast error cannot
//! pass for a fast call.

#[allow(dead_code)]
#[path = "../../tests/integration/support.rs"]
mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::*;

const ROUNDS: usize = 3;
const WARMUP: usize = 100;
const PER_ROUND: usize = 1000;
const CLIENTS: usize = 8;
const LOAD_SECS: u64 = 4;

/// The floor: answers `initialize` and every other request at once, with
/// a fixed text. Given a file, it is the *answer floor* (or *paging
/// floor*): each other request gets the next line of that file of
/// toolhost's own answers (from the first again after the last), under the
/// request's id, so the client reads and parses exactly the bytes toolhost
/// sent, and what is left is what any server costs to deliver these
/// answers to this client.
const FLOOR_PY: &str = r#"import json, sys
answers = []
if len(sys.argv) > 1:
    for line in open(sys.argv[1], "rb"):
        answers.append(line[line.index(b',"result":'):])
n = 0
out = sys.stdout
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    if msg.get("method") == "initialize":
        result = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                  "serverInfo": {"name": "floor", "version": "0"}}
    elif answers:
        out.flush()
        out.buffer.write(b'{"jsonrpc":"2.0","id":' + json.dumps(msg["id"]).encode()
                         + answers[n % len(answers)])
        out.buffer.flush()
        n += 1
        continue
    else:
        result = {"content": [{"type": "text", "text": "ok"}]}
    out.write(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}) + "\n")
    out.flush()
"#;

/// The HTTP floor: a trivial MCP server over HTTP/1.1 keep-alive in Python
/// (`http.server`, a thread per connection), answering every POST at once;
/// prints its port.
const FLOOR_HTTP_PY: &str = r#"import json, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    def do_POST(self):
        msg = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        result = {"content": [{"type": "text", "text": "ok"}]}
        body = json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}).encode()
        # Head and body in one write: two small writes would wait on the
        # client's delayed ACK.
        head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
        self.wfile.write((head % len(body)).encode() + body)
    def log_message(self, *args):
        pass
server = ThreadingHTTPServer(("127.0.0.1", 0), H)
server.daemon_threads = True
print(server.server_address[1], flush=True)
server.serve_forever()
"#;

/// The Python client: spawns each server of a spec, initializes it, then
/// calls them in turn (`rounds` rounds of `per_round` calls, the first
/// round after `warmup` untimed calls, later ones after 10) and prints the
/// latencies in µs per server and the last answer's length, as one JSON
/// line. A toolhost answer whose observation is not `ok` stops it.
const CLIENT_PY: &str = r#"import json, subprocess, sys, time
spec = json.loads(sys.argv[1])
procs = []
for s in spec["servers"]:
    p = subprocess.Popen(s["cmd"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True, bufsize=1)
    procs.append([p, 0, s, 0])

def rpc(c, method, params):
    p = c[0]
    c[1] += 1
    p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": c[1], "method": method, "params": params}) + "\n")
    p.stdin.flush()
    line = p.stdout.readline()
    m = json.loads(line)
    assert m.get("id") == c[1], line
    c[3] = len(line)
    return m

for c in procs:
    rpc(c, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                          "clientInfo": {"name": "bench", "version": "1"}})
    c[0].stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
    c[0].stdin.flush()
times = [[] for _ in procs]
for r in range(spec["rounds"]):
    for c, t in zip(procs, times):
        s = c[2]
        params = {"name": s["tool"], "arguments": s["args"]}
        warm = spec["warmup"] if r == 0 else 10
        for i in range(warm + spec["per_round"]):
            start = time.perf_counter()
            m = rpc(c, "tools/call", params)
            took = time.perf_counter() - start
            if s["check"]:
                status = m["result"]["_meta"]["dev.toolhost/observation"]["status"]
                assert status == "ok", m
            if i >= warm:
                t.append(took * 1e6)
for c in procs:
    c[0].kill()
print(json.dumps({"times": times, "answer": procs[0][3]}))
"#;

struct Stats {
    median: Duration,
    p90: Duration,
}

fn stats(mut t: Vec<Duration>) -> Stats {
    t.sort();
    Stats {
        median: t[t.len() / 2],
        p90: t[t.len() * 9 / 10],
    }
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// Everything the bench runs against: the plugins, the workspace, the
/// floor script.
struct Setup {
    _dir: tempfile::TempDir,
    plugins: PathBuf,
    workspace: PathBuf,
    floor: PathBuf,
    client: PathBuf,
    cache: PathBuf,
}

impl Setup {
    fn new() -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let plugins = dir.path().join("plugins");
        let workspace = dir.path().join("ws");
        std::fs::create_dir_all(&plugins).unwrap();
        std::fs::create_dir_all(&workspace).unwrap();
        std::fs::copy(test_plugin("tp_trivial"), plugins.join("tp_trivial.wasm")).unwrap();
        let line = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde\n";
        std::fs::write(workspace.join("four_k.txt"), line.repeat(4096 / line.len())).unwrap();
        std::fs::write(workspace.join("three.txt"), "ab\n").unwrap();
        std::fs::write(workspace.join("one_m.txt"), one_mib_text()).unwrap();
        let floor = dir.path().join("floor.py");
        std::fs::write(&floor, FLOOR_PY).unwrap();
        let client = dir.path().join("client.py");
        std::fs::write(&client, CLIENT_PY).unwrap();
        Setup {
            plugins,
            workspace,
            floor,
            client,
            cache: repo_root().join("target/test-compile-cache"),
            _dir: dir,
        }
    }

    /// The `serve` command line (stdio when `transport` is `--stdio`).
    fn toolhost_args(&self, cache: &Path, transport: &[&str]) -> Vec<String> {
        let path = |p: &Path| p.to_str().expect("a UTF-8 temporary path").to_string();
        let mut args = vec![env!("CARGO_BIN_EXE_toolhost").to_string(), "serve".into()];
        args.extend(transport.iter().map(|t| t.to_string()));
        args.extend([
            "--plugins-dir".into(),
            path(&self.plugins),
            "--cache-dir".into(),
            path(cache),
            "--workspace".into(),
            path(&self.workspace),
            "--allow-read".into(),
            ".".into(),
        ]);
        args
    }

    fn toolhost(&self, cache: &Path, transport: &[&str]) -> Child {
        let args = self.toolhost_args(cache, transport);
        Command::new(&args[0])
            .args(&args[1..])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting toolhost serve")
    }

    /// The answer floor, replaying the answer lines in `answers`.
    fn replay(&self, answers: &Path) -> Child {
        Command::new("python3")
            .arg(&self.floor)
            .arg(answers)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting the Python paging floor (python3)")
    }

    fn floor(&self) -> Child {
        Command::new("python3")
            .arg(&self.floor)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting the Python floor server (python3)")
    }
}

/// About 1 MiB of source-like text: lines of 10 to 100 characters.
fn one_mib_text() -> String {
    let mut s = String::with_capacity(1 << 20);
    let mut x = 0x2545_f491_4f6c_dd1du64;
    while s.len() < 1 << 20 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let len = 10 + (x % 91) as usize;
        for i in 0..len {
            s.push(b"abcdefghij klmnop(){};=\"\\"[(x as usize >> (i % 40)) % 25] as char);
        }
        s.push('\n');
    }
    s
}

/// One MCP stdio client session.
struct Client {
    child: Reaped,
    stdin: ChildStdin,
    out: BufReader<ChildStdout>,
    line: String,
    next_id: u64,
}

impl Client {
    /// Spawned and initialized.
    fn start(mut child: Child) -> Client {
        if let Some(err) = child.stderr.take() {
            std::thread::spawn(move || BufReader::new(err).lines().for_each(drop));
        }
        let mut c = Client {
            stdin: child.stdin.take().unwrap(),
            out: BufReader::new(child.stdout.take().unwrap()),
            child: Reaped(child),
            line: String::new(),
            next_id: 1,
        };
        c.request(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "bench", "version": "1"}}),
        );
        c.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        c
    }

    fn send(&mut self, msg: &Value) {
        let mut bytes = msg.to_string().into_bytes();
        bytes.push(b'\n');
        self.stdin.write_all(&bytes).unwrap();
        self.stdin.flush().unwrap();
    }

    /// Sends a request and returns the parsed answer.
    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        self.line.clear();
        self.out.read_line(&mut self.line).unwrap();
        let v: Value = serde_json::from_str(&self.line).unwrap_or_else(|e| {
            panic!("not a JSON-RPC answer ({e}): {:?}", self.line);
        });
        assert_eq!(v["id"], id, "{}", self.line);
        v
    }

    fn call(&mut self, tool: &str, args: &Value) -> Value {
        self.request("tools/call", json!({"name": tool, "arguments": args}))
    }

    /// Bytes of the last answer line.
    fn last_len(&self) -> usize {
        self.line.len()
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }
}

fn check_ok(v: &Value) {
    assert_eq!(
        v["result"]["_meta"]["dev.toolhost/observation"]["status"], "ok",
        "unexpected answer: {v}"
    );
}

/// `n` timed calls after `warmup` untimed ones.
fn round(
    c: &mut Client,
    tool: &str,
    args: &Value,
    warmup: usize,
    n: usize,
    toolhost: bool,
) -> Vec<Duration> {
    let mut t = Vec::with_capacity(n);
    for i in 0..warmup + n {
        let start = Instant::now();
        let v = c.call(tool, args);
        let took = start.elapsed();
        if toolhost {
            check_ok(&v);
        }
        if i >= warmup {
            t.push(took);
        }
    }
    t
}

/// One figure: toolhost, the floor and the answer floor interleaved,
/// `ROUNDS` rounds each, with the Python client, then with this
/// bench's Rust client. The *answer floor* replays toolhost's own answer
/// to this call ([`FLOOR_PY`] given a file): what any server costs this client when it
/// answers with these bytes.
fn beside_floor(setup: &Setup, label: &str, tool: &str, args: Value, target: &str) {
    let recorded = record_answer(setup, tool, &args);
    let (figures, answer) = python_client(setup, tool, &args, recorded.path(), None);
    let [a, b, c] = figures;
    print_beside(label, "Python", [a, b], Some(c), answer, target);

    let mut th = Client::start(setup.toolhost(&setup.cache, &["--stdio"]));
    let mut floor = Client::start(setup.floor());
    let mut replay = Client::start(setup.replay(recorded.path()));
    let (mut a, mut b, mut c) = (Vec::new(), Vec::new(), Vec::new());
    for r in 0..ROUNDS {
        let warm = if r == 0 { WARMUP } else { 10 };
        a.extend(round(&mut th, tool, &args, warm, PER_ROUND, true));
        b.extend(round(&mut floor, "t", &json!({}), warm, PER_ROUND, false));
        c.extend(round(&mut replay, "t", &json!({}), warm, PER_ROUND, false));
    }
    let answer = th.last_len();
    print_beside(
        label,
        "Rust",
        [stats(a), stats(b)],
        Some(stats(c)),
        answer,
        "(stricter)",
    );
}

/// Toolhost's answer to one call of `tool`, in a file for the answer
/// floor.
fn record_answer(setup: &Setup, tool: &str, args: &Value) -> tempfile::NamedTempFile {
    let recorded = tempfile::NamedTempFile::new().unwrap();
    let mut th = Client::start(setup.toolhost(&setup.cache, &["--stdio"]));
    check_ok(&th.call(tool, args));
    std::fs::write(recorded.path(), th.line.as_bytes()).unwrap();
    recorded
}

/// The Python client on toolhost, the floor and the answer floor
/// (replaying `recorded`), in turns; with `cpu`, the client and every
/// server are bound to that one CPU (`taskset -c`). Their figures in that
/// order, and the length of toolhost's last answer.
fn python_client(
    setup: &Setup,
    tool: &str,
    args: &Value,
    recorded: &Path,
    cpu: Option<&str>,
) -> ([Stats; 3], usize) {
    let pinned = |cmd: Vec<String>| -> Vec<String> {
        match cpu {
            Some(cpu) => ["taskset", "-c", cpu]
                .into_iter()
                .map(String::from)
                .chain(cmd)
                .collect(),
            None => cmd,
        }
    };
    let path = |p: &Path| p.to_str().expect("a UTF-8 temporary path").to_string();
    let spec = json!({
        "rounds": ROUNDS, "per_round": PER_ROUND, "warmup": WARMUP,
        "servers": [
            {"cmd": pinned(setup.toolhost_args(&setup.cache, &["--stdio"])), "tool": tool,
             "args": args, "check": true},
            {"cmd": pinned(vec!["python3".into(), path(&setup.floor)]), "tool": "t",
             "args": {}, "check": false},
            {"cmd": pinned(vec!["python3".into(), path(&setup.floor), path(recorded)]),
             "tool": "t", "args": {}, "check": false},
        ],
    });
    let client = pinned(vec![
        "python3".into(),
        path(&setup.client),
        spec.to_string(),
    ]);
    let out = Command::new(&client[0])
        .args(&client[1..])
        .stderr(Stdio::inherit())
        .output()
        .expect("running the Python client (python3)");
    assert!(out.status.success(), "the Python client failed");
    let v: Value = serde_json::from_slice(&out.stdout).expect("the Python client's figures");
    let times = |i: usize| -> Vec<Duration> {
        v["times"][i]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| Duration::from_secs_f64(t.as_f64().unwrap() / 1e6))
            .collect()
    };
    let answer = v["answer"].as_u64().unwrap() as usize;
    ([stats(times(0)), stats(times(1)), stats(times(2))], answer)
}

/// The 4 KiB `file_view` with the Python client, toolhost and both floors
/// all bound to CPU 0: a one-CPU container or machine, where a thread
/// spinning for another only keeps it from running (see `mcp::warm`).
fn one_cpu(setup: &Setup) {
    let label = "file_view, 4 KiB file, one CPU";
    let taskset = Command::new("taskset")
        .args(["-c", "0", "true"])
        .status()
        .is_ok_and(|s| s.success());
    if !taskset {
        println!("{label:<34} not measured: `taskset -c 0` does not run here");
        return;
    }
    let tool = "file_view";
    let args = json!({"path": "four_k.txt", "offset": 1, "limit": 200});
    let recorded = record_answer(setup, tool, &args);
    let ([a, b, c], answer) = python_client(setup, tool, &args, recorded.path(), Some("0"));
    print_beside(label, "Python", [a, b], Some(c), answer, "");
}

/// One line: toolhost's median and p90 beside the floor's, the ratios,
/// and (when measured) the answer floor's median with toolhost's ratio to
/// it.
fn print_beside(
    label: &str,
    client: &str,
    [a, b]: [Stats; 2],
    answer_floor: Option<Stats>,
    answer: usize,
    target: &str,
) {
    let replayed = answer_floor.map_or(String::new(), |c| {
        format!(
            " | answer floor {:>6.1} µs, ratio {:>4.2}×",
            us(c.median),
            us(a.median) / us(c.median)
        )
    });
    println!(
        "{label:<34} {client:<6} median {:>7.1} µs  p90 {:>7.1} µs | floor {:>6.1} / {:>6.1} µs | ratio {:>4.2}× (p90 {:>4.2}×)  {answer} B answer  {target}{replayed}",
        us(a.median),
        us(a.p90),
        us(b.median),
        us(b.p90),
        us(a.median) / us(b.median),
        us(a.p90) / us(b.p90),
    );
}

/// A 1 MiB file read whole through `file_view`'s pages, three times (after
/// a warm-up), in two settings: right after the file is written, then once
/// it has settled for 2.5 s (the index is cached: what paging through a
/// file nobody is writing costs). The host's file index caches no file
/// changed in the last 50 ms (2 s where timestamps may be whole seconds),
/// so on a file system with fine timestamps only the warm-up's first pages
/// index the fresh file afresh and the two figures agree.
///
/// Beside each, the paging floor: the same client paging the same way
/// through a server that replays toolhost's answers of the warm-up
/// ([`FLOOR_PY`] given a file), interleaved with toolhost's passes.
fn page_one_mib(setup: &Setup) {
    let file = setup.workspace.join("one_m.txt");
    std::fs::write(&file, one_mib_text()).unwrap();
    let written = Instant::now();
    page_one_mib_runs(setup, "1 MiB file read whole, just written");
    let settle = Duration::from_millis(2_500);
    std::thread::sleep(settle.saturating_sub(written.elapsed()));
    page_one_mib_runs(setup, "1 MiB file read whole, settled    ");
}

/// One pass through the file: its time, its pages and (when `record` is
/// given) each answer line appended to it.
fn page_pass(
    c: &mut Client,
    size: u64,
    toolhost: bool,
    mut record: Option<&mut Vec<u8>>,
) -> (Duration, usize) {
    let start = Instant::now();
    let (mut offset, mut content, mut n) = (1u64, 0usize, 0);
    loop {
        let v = c.call(
            "file_view",
            &json!({"path": "one_m.txt", "offset": offset, "limit": 500}),
        );
        if toolhost {
            check_ok(&v);
        }
        if let Some(r) = record.as_deref_mut() {
            r.extend_from_slice(c.line.as_bytes());
        }
        let out = &v["result"]["structuredContent"];
        let lines = out["lines"].as_array().unwrap();
        // `lines[i]` is line `offset + i`.
        content += lines
            .iter()
            .map(|l| l.as_str().unwrap().len() + 1)
            .sum::<usize>();
        n += 1;
        if !out["has_more"].as_bool().unwrap() {
            break;
        }
        offset += lines.len() as u64;
    }
    assert_eq!(content as u64, size, "the pages cover the file");
    (start.elapsed(), n)
}

fn page_one_mib_runs(setup: &Setup, label: &str) {
    let size = std::fs::metadata(setup.workspace.join("one_m.txt"))
        .unwrap()
        .len();
    let mut th = Client::start(setup.toolhost(&setup.cache, &["--stdio"]));
    // The warm-up pass records the answers the floor replays.
    let mut answers = Vec::new();
    let (_, pages) = page_pass(&mut th, size, true, Some(&mut answers));
    let recorded = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(recorded.path(), &answers).unwrap();
    let mut floor = Client::start(setup.replay(recorded.path()));
    page_pass(&mut floor, size, false, None);
    let (mut runs, mut floors) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        runs.push(page_pass(&mut th, size, true, None).0);
        floors.push(page_pass(&mut floor, size, false, None).0);
    }
    runs.sort();
    floors.sort();
    let mbps = |d: Duration| size as f64 / d.as_secs_f64() / 1e6;
    println!(
        "{label} {pages} pages, median {:>6.1} ms ({:.0} MB/s; range {:.0}-{:.0} MB/s) | paging floor {:.1} ms ({:.0} MB/s) | ratio {:.2}×  target ≥ 100 MB/s",
        runs[1].as_secs_f64() * 1e3,
        mbps(runs[1]),
        mbps(runs[2]),
        mbps(runs[0]),
        floors[1].as_secs_f64() * 1e3,
        mbps(floors[1]),
        runs[1].as_secs_f64() / floors[1].as_secs_f64(),
    );
}

/// Spawn to the first `file_view` answer (after `initialize`).
fn first_answer(
    child: impl FnOnce() -> Child,
    tool: &str,
    args: &Value,
    toolhost: bool,
) -> Duration {
    let start = Instant::now();
    let mut c = Client::start(child());
    let v = c.call(tool, args);
    let took = start.elapsed();
    if toolhost {
        check_ok(&v);
    }
    took
}

/// Warm starts (and the floor's) measured after each of the three cold ones:
/// a single spawn moves by tens of milliseconds on a shared machine.
const WARM_STARTS: usize = 5;

fn start_times(setup: &Setup) {
    let args = json!({"path": "four_k.txt"});
    let (mut cold, mut warm, mut floor) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..3 {
        let empty = tempfile::tempdir().unwrap();
        cold.push(first_answer(
            || setup.toolhost(empty.path(), &["--stdio"]),
            "file_view",
            &args,
            true,
        ));
        for _ in 0..WARM_STARTS {
            warm.push(first_answer(
                || setup.toolhost(empty.path(), &["--stdio"]),
                "file_view",
                &args,
                true,
            ));
            floor.push(first_answer(|| setup.floor(), "t", &json!({}), false));
        }
    }
    // Median (fastest-slowest).
    let ms = |mut v: Vec<Duration>| {
        v.sort();
        format!(
            "{:>6.1} ms ({:.1}-{:.1})",
            v[v.len() / 2].as_secs_f64() * 1e3,
            v[0].as_secs_f64() * 1e3,
            v[v.len() - 1].as_secs_f64() * 1e3
        )
    };
    println!(
        "first answer after spawn            empty cache {}  warm cache {} | floor {}  targets ≤ 300 / ≤ 20 ms",
        ms(cold),
        ms(warm),
        ms(floor)
    );
}

/// CPU time (user + system) of a process so far, from /proc.
fn cpu_time(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = stat.rsplit_once(')')?.1;
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    // Linux reports these in USER_HZ, 100 per second.
    Some(Duration::from_millis(ticks * 10))
}

fn idle(setup: &Setup) {
    let mut th = Client::start(setup.toolhost(&setup.cache, &["--stdio"]));
    for _ in 0..200 {
        check_ok(&th.call("file_view", &json!({"path": "four_k.txt"})));
    }
    std::thread::sleep(Duration::from_millis(200));
    let (Some(before), window) = (cpu_time(th.pid()), Duration::from_secs(3)) else {
        println!("idle serve: /proc not readable here; not measured");
        return;
    };
    std::thread::sleep(window);
    let used = cpu_time(th.pid()).unwrap() - before;
    println!(
        "idle serve (3 s after 200 calls)    {:.0} ms CPU ({:.1}% of a core)  target: sleeps (≈ 0)",
        used.as_secs_f64() * 1e3,
        used.as_secs_f64() / window.as_secs_f64() * 100.0
    );
}

/// The protocol era an HTTP client speaks.
#[derive(Clone, Copy, PartialEq)]
enum Era {
    /// 2026-07-28: every request stands alone (`_meta`, `Mcp-*` headers).
    Stateless,
    /// 2025-11-25: `initialize`, then requests naming the session.
    Session,
}

/// A keep-alive HTTP/1.1 client for `tools/call`.
struct HttpClient {
    write: TcpStream,
    read: BufReader<TcpStream>,
    body: Vec<u8>,
    /// The session's id, for [`Era::Session`].
    session: Option<String>,
}

impl HttpClient {
    fn connect(port: u16) -> HttpClient {
        let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_nodelay(true).unwrap();
        HttpClient {
            write: s.try_clone().unwrap(),
            read: BufReader::new(s),
            body: Vec::new(),
            session: None,
        }
    }

    /// A client of `era`: for a session, after its handshake.
    fn open(port: u16, era: Era) -> HttpClient {
        let mut c = HttpClient::connect(port);
        if era == Era::Session {
            let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "bench", "version": "1"}}});
            let head = c.post(&init.to_string(), "");
            let id = head
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("mcp-session-id")
                        .then(|| v.trim().to_string())
                })
                .unwrap_or_else(|| panic!("no session id in {head:?}"));
            c.session = Some(id);
            let done = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
            c.post(&done.to_string(), "");
        }
        c
    }

    fn call(&mut self, id: u64, value: u64) -> &[u8] {
        self.call_tool(id, "echo_value", &json!({"value": value}))
    }

    /// One `tools/call` of `tool`; the answer's body.
    fn call_tool(&mut self, id: u64, tool: &str, args: &Value) -> &[u8] {
        let head = if self.session.is_some() {
            let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
                "name": tool, "arguments": args}});
            self.post(&body.to_string(), "")
        } else {
            let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
                "name": tool, "arguments": args,
                "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                          "io.modelcontextprotocol/clientCapabilities": {}}}});
            let headers = format!(
                "MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: {tool}\r\n"
            );
            self.post(&body.to_string(), &headers)
        };
        if !head
            .to_ascii_lowercase()
            .contains("content-type: application/json")
        {
            panic!("not a JSON answer: {head:?}");
        }
        &self.body
    }

    /// POSTs `body` with the extra header lines `headers`; the answer's
    /// head (its body is left in `self.body`; an SSE answer is read to its
    /// end).
    fn post(&mut self, body: &str, headers: &str) -> String {
        let session = match &self.session {
            Some(id) => format!("Mcp-Session-Id: {id}\r\nMCP-Protocol-Version: 2025-11-25\r\n"),
            None => String::new(),
        };
        let req = format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\n{session}{headers}\
             Content-Length: {}\r\n\r\n{body}",
            body.len()
        );
        self.write.write_all(req.as_bytes()).unwrap();
        let (mut length, mut chunked) = (None, false);
        let mut head = String::new();
        loop {
            let at = head.len();
            self.read.read_line(&mut head).unwrap();
            let l = head[at..].trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((k, v)) = l.split_once(':') {
                if k.eq_ignore_ascii_case("content-length") {
                    length = Some(v.trim().parse::<usize>().unwrap());
                }
                if k.eq_ignore_ascii_case("transfer-encoding") {
                    chunked = v.trim().eq_ignore_ascii_case("chunked");
                }
            }
        }
        self.body.clear();
        if chunked {
            // An SSE answer (the handshake's): read the chunks to the last.
            loop {
                let mut size = String::new();
                self.read.read_line(&mut size).unwrap();
                let n = usize::from_str_radix(size.trim(), 16).unwrap();
                let at = self.body.len();
                self.body.resize(at + n + 2, 0);
                self.read.read_exact(&mut self.body[at..]).unwrap();
                self.body.truncate(at + n);
                if n == 0 {
                    break;
                }
            }
        } else {
            let n = length.unwrap_or_else(|| panic!("no Content-Length in {head:?}"));
            self.body.resize(n, 0);
            self.read.read_exact(&mut self.body).unwrap();
        }
        head
    }
}

fn check_ok_bytes(body: &[u8]) {
    check_ok(&serde_json::from_slice(body).expect("a JSON-RPC message"));
}

fn bench_http(setup: &Setup) {
    let mut child = Reaped(setup.toolhost(&setup.cache, &["--http", "127.0.0.1:0"]));
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

    // The trivial call in both eras, one client each, interleaved by
    // round; then 8 clients of each era in turn, twice.
    let eras = [("stateless", Era::Stateless), ("session", Era::Session)];
    let mut clients = eras.map(|(_, era)| HttpClient::open(port, era));
    let mut samples = [Vec::new(), Vec::new()];
    for r in 0..ROUNDS {
        let warm = if r == 0 { WARMUP } else { 10 };
        for (client, samples) in clients.iter_mut().zip(&mut samples) {
            for i in 0..(warm + PER_ROUND) as u64 {
                let start = Instant::now();
                let body = client.call(i, i);
                let took = start.elapsed();
                check_ok_bytes(body);
                if i as usize >= warm {
                    samples.push(took);
                }
            }
        }
    }
    for ((name, _), samples) in eras.iter().zip(samples) {
        let s = stats(samples);
        println!(
            "HTTP tools/call (trivial), {name:<9}  median {:>7.1} µs  p90 {:>7.1} µs",
            us(s.median),
            us(s.p90)
        );
    }
    for _ in 0..2 {
        for (name, era) in eras {
            let rate = sustained(port, era, "echo_value", &json!({"value": 7}), true);
            println!("HTTP sustained, {CLIENTS} clients (trivial), {name:<9} {rate:>9.0} calls/s");
        }
    }

    // The HTTP figures: `file_view` of the 4 KiB file beside the
    // Python HTTP floor, one client interleaved, then 8 clients each.
    let mut floor = Reaped(
        Command::new("python3")
            .arg("-c")
            .arg(FLOOR_HTTP_PY)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting the Python HTTP floor (python3)"),
    );
    let mut first = String::new();
    BufReader::new(floor.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let floor_port: u16 = first.trim().parse().expect("the HTTP floor's port");
    let view = json!({"path": "four_k.txt", "offset": 1, "limit": 200});
    let mut th = HttpClient::connect(port);
    let mut fl = HttpClient::connect(floor_port);
    let (mut a, mut b) = (Vec::new(), Vec::new());
    let mut answer = 0;
    for r in 0..ROUNDS {
        let warm = if r == 0 { WARMUP } else { 10 };
        for i in 0..warm + PER_ROUND {
            let start = Instant::now();
            let body = th.call_tool(i as u64, "file_view", &view);
            let took = start.elapsed();
            answer = body.len();
            check_ok_bytes(body);
            if i >= warm {
                a.push(took);
            }
        }
        for i in 0..warm + PER_ROUND {
            let start = Instant::now();
            fl.call_tool(i as u64, "t", &json!({}));
            if i >= warm {
                b.push(start.elapsed());
            }
        }
    }
    print_beside(
        "HTTP file_view 4 KiB, 1 client",
        "Rust",
        [stats(a), stats(b)],
        None,
        answer,
        "target ≤ 2×",
    );
    let toolhost = sustained(port, Era::Stateless, "file_view", &view, true);
    let floor_rate = sustained(floor_port, Era::Stateless, "t", &json!({}), false);
    println!(
        "HTTP file_view 4 KiB, {CLIENTS} clients      {toolhost:>9.0} calls/s | floor {floor_rate:.0} calls/s  target ≥ 3,087 calls/s (1.5× the 2,058 at filing)"
    );
}

/// A child process killed and reaped when dropped, a failed bench
/// included (a panic must not leave a server running).
struct Reaped(Child);

impl std::ops::Deref for Reaped {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for Reaped {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Calls per second of [`CLIENTS`] keep-alive clients of `era` calling
/// `tool` in a loop for [`LOAD_SECS`] (after half a second of warm-up);
/// `check`: each answer must be an `ok` observation.
fn sustained(port: u16, era: Era, tool: &'static str, args: &Value, check: bool) -> f64 {
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let workers: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let (stop, done, args) = (stop.clone(), done.clone(), args.clone());
            std::thread::spawn(move || {
                let mut c = HttpClient::open(port, era);
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let body = c.call_tool(i, tool, &args);
                    if check {
                        check_ok_bytes(body);
                    }
                    done.fetch_add(1, Ordering::Relaxed);
                    i += 1;
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let start_count = done.load(Ordering::Relaxed);
    let start = Instant::now();
    std::thread::sleep(Duration::from_secs(LOAD_SECS));
    let calls = done.load(Ordering::Relaxed) - start_count;
    let rate = calls as f64 / start.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.join().unwrap();
    }
    rate
}

fn main() {
    // `cargo bench` passes `--bench`; the first other argument filters.
    let filter = std::env::args().skip(1).find(|a| !a.starts_with("--"));
    let run = |name: &str| filter.as_deref().is_none_or(|f| name.contains(f));
    let setup = Setup::new();
    if run("trivial") {
        beside_floor(
            &setup,
            "trivial call (echo_value)",
            "echo_value",
            json!({"value": 7}),
            "target ≤ 1.3×",
        );
    }
    if run("view3") {
        beside_floor(
            &setup,
            "file_view, 3 B file",
            "file_view",
            json!({"path": "three.txt"}),
            "",
        );
    }
    if run("view4k") {
        beside_floor(
            &setup,
            "file_view, 4 KiB file (64 lines)",
            "file_view",
            json!({"path": "four_k.txt", "offset": 1, "limit": 200}),
            "target ≤ 2.2× (p90 ≤ 2.5×)",
        );
    }
    if run("onecpu") {
        one_cpu(&setup);
    }
    if run("page1m") {
        page_one_mib(&setup);
    }
    if run("start") {
        start_times(&setup);
    }
    if run("idle") {
        idle(&setup);
    }
    if run("http") {
        bench_http(&setup);
    }
}
