//! What an idle `toolhost serve` costs: `cargo bench --bench idle`.
//!
//! Starts the real binary (stdio, and HTTP) with the reference tools and a
//! watched plugin directory holding one plugin, makes one call so every
//! thread has started, then reads the process's user + system CPU time
//! from `/proc/PID/stat` before and after 10 s of doing nothing. Target:
//! at most 0.3% of a core. Then it replaces the plugin, to show that the
//! watched directory is still noticed while nothing polls it.

#[allow(dead_code)]
#[path = "../../tests/integration/support.rs"]
mod support;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::*;

const IDLE: Duration = Duration::from_secs(10);

/// User + system CPU time of a process, from /proc.
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name (which may hold spaces) start at ")".
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    // utime and stime are fields 14 and 15 of stat, 12 and 13 here.
    let ticks: u64 = f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    Duration::from_secs_f64(ticks as f64 / hz as f64)
}

fn serve(plugins: &std::path::Path, transport: &[&str]) -> Child {
    let ws = tempfile::tempdir().unwrap();
    Command::new(env!("CARGO_BIN_EXE_toolhost"))
        .args(["serve", "--allow-read", "."])
        .args(transport)
        .arg("--workspace")
        .arg(ws.keep())
        .arg("--plugins-dir")
        .arg(plugins)
        .arg("--cache-dir")
        .arg(repo_root().join("target/test-compile-cache"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting toolhost serve")
}

fn idle_share(pid: u32) -> f64 {
    let before = cpu_time(pid);
    let start = Instant::now();
    std::thread::sleep(IDLE);
    let used = cpu_time(pid) - before;
    used.as_secs_f64() / start.elapsed().as_secs_f64() * 100.0
}

fn main() {
    let plugins = tempfile::tempdir().unwrap();
    std::fs::copy(test_plugin("tp_trivial"), plugins.path().join("t.wasm")).unwrap();

    // stdio: a session that made one call and then waits.
    let mut child = serve(plugins.path(), &["--stdio"]);
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut send = |msg: Value| {
        stdin.write_all(format!("{msg}\n").as_bytes()).unwrap();
        stdin.flush().unwrap();
    };
    send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "idle", "version": "1"}}}),
    );
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "echo_value", "arguments": {"value": 1}}}));
    let mut line = String::new();
    loop {
        line.clear();
        out.read_line(&mut line).unwrap();
        let v: Value = serde_json::from_str(&line).unwrap();
        if v["id"] == 2 {
            assert_eq!(v["result"]["structuredContent"]["status"], "ok", "{v}");
            break;
        }
    }
    let stdio = idle_share(child.id());
    println!("idle serve --stdio, 10 s: {stdio:.3}% of a core (target ≤ 0.3%)");

    // The watched directory still works without polling: replace the
    // plugin and wait for the list_changed notification.
    let start = Instant::now();
    let tmp = plugins.path().join(".incoming");
    std::fs::copy(test_plugin("tp_conformance"), &tmp).unwrap();
    std::fs::rename(&tmp, plugins.path().join("t.wasm")).unwrap();
    loop {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "server exited");
        if line.contains("notifications/tools/list_changed") {
            break;
        }
    }
    println!(
        "plugin replaced → list_changed after {:.2} s (--watch-ms 1000 of quiet, then one more look)",
        start.elapsed().as_secs_f64()
    );
    let _ = child.kill();
    let _ = child.wait();

    // HTTP: a server nobody talks to.
    let mut child = serve(plugins.path(), &["--http", "127.0.0.1:0"]);
    let err = BufReader::new(child.stderr.take().unwrap());
    let (up, listening) = std::sync::mpsc::channel();
    // Keeps reading stderr, so the server never writes to a closed pipe.
    std::thread::spawn(move || {
        for l in err.lines().map_while(Result::ok) {
            if l.contains("serving MCP on") {
                let _ = up.send(());
            }
        }
    });
    listening
        .recv_timeout(Duration::from_secs(60))
        .expect("serve --http did not start");
    std::thread::sleep(Duration::from_secs(2));
    let http = idle_share(child.id());
    println!("idle serve --http, 10 s: {http:.3}% of a core (target ≤ 0.3%)");
    let _ = child.kill();
    let _ = child.wait();
}
