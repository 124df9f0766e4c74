//! Resource keys and locks: parallel edits of one file through threads,
//! processes and one MCP server all land; a call that waits past its
//! deadline runs nothing; a killed lock holder blocks no one; batches.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use toolhost::{Allow, BatchOptions, BatchStatus, CallOptions, Host, Locks, Source};

use crate::mcp::{observation_of, Setup, StdioServer};
use crate::support::*;

const N: usize = 16;

/// `line 00` … `line 15`, one per line.
fn numbered_lines(n: usize) -> String {
    (0..n).map(|i| format!("line {i:02}\n")).collect()
}

fn edit_args(path: &str, i: usize) -> String {
    json!({"path": path, "old_str": format!("line {i:02}\n"), "new_str": format!("LINE {i:02} edited\n")})
        .to_string()
}

/// Every edit reported ok is in the file, and there are `n` of them.
#[track_caller]
fn assert_all_edits_landed(text: &str, ok: &[bool]) {
    for (i, ok) in ok.iter().enumerate() {
        assert!(*ok, "edit {i} did not report ok");
        assert!(
            text.contains(&format!("LINE {i:02} edited\n")),
            "edit {i} reported ok but is not in the file:\n{text}"
        );
    }
    assert_eq!(ok.len(), text.lines().count());
}

fn scope_call(host: &Host, root: &Path, tool: &str, args: &str, opts: &CallOptions) -> Value {
    let session = session_at(
        root,
        &Allow {
            write: &["."],
            ..Allow::default()
        },
    );
    run_in(host, &session, tool, args, &keyed(opts))
}

#[test]
fn parallel_edits_of_one_file_in_threads_all_land() {
    let locks = tempfile::tempdir().unwrap();
    let host =
        Arc::new(host_with(&[Source::reference()]).with_locks(Locks::with_dir(locks.path())));
    let ws = Ws::new();
    ws.write("src/lines.txt", numbered_lines(N));
    let root = ws.dir.path().to_path_buf();
    let handles: Vec<_> = (0..N)
        .map(|i| {
            let (host, root) = (host.clone(), root.clone());
            std::thread::spawn(move || {
                scope_call(
                    &host,
                    &root,
                    "file_edit",
                    &edit_args("src/lines.txt", i),
                    &CallOptions::default(),
                )
            })
        })
        .collect();
    let obs: Vec<Value> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let ok: Vec<bool> = obs.iter().map(|o| o["status"] == "ok").collect();
    let text = String::from_utf8(ws.read("src/lines.txt")).unwrap();
    assert_all_edits_landed(&text, &ok);
    for o in &obs {
        assert!(o["usage"]["wait_us"].is_u64(), "{o}");
    }
}

/// `toolhost` with the test cache, a fixed root key and `lock_dir`.
fn toolhost(args: &[&str], cwd: &Path, lock_dir: &Path, state: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_toolhost"));
    cmd.args(args)
        .current_dir(cwd)
        .env(
            "TOOLHOST_CACHE_DIR",
            repo_root().join("target/test-compile-cache"),
        )
        .env("TOOLHOST_ROOT_KEY", "ab".repeat(32))
        .env("TOOLHOST_LOCK_DIR", lock_dir)
        .env("TOOLHOST_STORE", state.join("records.sqlite"))
        .env_remove("TOOLHOST_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

fn observation(out: &Output) -> Value {
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON observation ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert_valid_observation(&v);
    v
}

#[test]
fn parallel_edits_of_one_file_by_processes_all_land() {
    let ws = Ws::new();
    ws.write("lines.txt", numbered_lines(N));
    let state = tempfile::tempdir().unwrap();
    let locks = state.path().join("locks");
    let children: Vec<_> = (0..N)
        .map(|i| {
            let args = edit_args("lines.txt", i);
            let key = format!("edit-{i}");
            toolhost(
                &[
                    "call",
                    "file_edit",
                    &args,
                    "--allow-write",
                    ".",
                    "--idempotency-key",
                    &key,
                    "--timeout-ms",
                    "60000",
                ],
                ws.dir.path(),
                &locks,
                state.path(),
            )
            .spawn()
            .unwrap()
        })
        .collect();
    let ok: Vec<bool> = children
        .into_iter()
        .map(|c| {
            let out = c.wait_with_output().unwrap();
            let obs = observation(&out);
            assert_eq!(out.status.code(), Some(0), "{obs}");
            obs["status"] == "ok"
        })
        .collect();
    let text = String::from_utf8(ws.read("lines.txt")).unwrap();
    assert_all_edits_landed(&text, &ok);
}

#[test]
fn parallel_edits_of_one_file_pipelined_over_mcp_stdio_all_land() {
    let setup = Setup::new(&[]);
    setup.ws.write("pub/lines.txt", numbered_lines(N));
    let lock_dir = setup.state.path().join("locks");
    let mut server = StdioServer::initialized(
        &setup,
        &[
            "--allow-write",
            "pub",
            "--lock-dir",
            lock_dir.to_str().unwrap(),
        ],
    );
    // All requests first, then the answers: the server runs them at once.
    for i in 0..N {
        let args: Value = serde_json::from_str(&edit_args("pub/lines.txt", i)).unwrap();
        server.send(&json!({
            "jsonrpc": "2.0", "id": 100 + i, "method": "tools/call",
            "params": {"name": "file_edit", "arguments": args},
        }));
    }
    let ok: Vec<bool> = (0..N)
        .map(|i| {
            let reply = server.response(100 + i as i64);
            let obs = observation_of(&reply);
            obs["status"] == "ok"
        })
        .collect();
    let text = String::from_utf8(setup.ws.read("pub/lines.txt")).unwrap();
    assert_all_edits_landed(&text, &ok);
}

#[test]
fn parallel_edits_of_one_file_over_mcp_http_all_land() {
    use crate::mcp::{stateless_call, HttpServer};
    let setup = Setup::new(&[]);
    setup.ws.write("pub/lines.txt", numbered_lines(N));
    let lock_dir = setup.state.path().join("locks");
    let server = HttpServer::start(
        &setup,
        &[
            "--allow-write",
            "pub",
            "--lock-dir",
            lock_dir.to_str().unwrap(),
        ],
    );
    let ok: Vec<bool> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..N)
            .map(|i| {
                let server = &server;
                s.spawn(move || {
                    let args: Value = serde_json::from_str(&edit_args("pub/lines.txt", i)).unwrap();
                    let obs = observation_of(&stateless_call(
                        server,
                        i as i64,
                        "file_edit",
                        args,
                        json!({}),
                    ));
                    obs["status"] == "ok"
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let text = String::from_utf8(setup.ws.read("pub/lines.txt")).unwrap();
    assert_all_edits_landed(&text, &ok);
}

fn effects_host() -> Host {
    host_with(&[Source::File(test_plugin("tp_effects"))])
}

#[test]
fn a_call_that_waits_past_its_deadline_ends_timeout_with_nothing_run() {
    let host = Arc::new(effects_host());
    let ws = Ws::new();
    let root = ws.dir.path().to_path_buf();
    let holder = {
        let (host, root) = (host.clone(), root.clone());
        std::thread::spawn(move || {
            scope_call(
                &host,
                &root,
                "count_calls",
                r#"{"path":"c.txt","hold_ms":3000}"#,
                &CallOptions::default(),
            )
        })
    };
    // The holder is running once its count is in the file.
    let t = Instant::now();
    while !ws.path("c.txt").exists() {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "the holder never ran"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let opts = CallOptions {
        timeout_ms: Some(300),
        ..CallOptions::default()
    };
    let waited = scope_call(&host, &root, "count_calls", r#"{"path":"c.txt"}"#, &opts);
    let err = expect_error(&waited, "error", "timeout");
    assert_eq!(err["retry"], "safe", "nothing ran: {err}");
    assert!(
        err["message"].as_str().unwrap().contains("nothing ran"),
        "{err}"
    );
    // The deadline counts from the call's start, the wait from the lock.
    assert!(
        waited["usage"]["wait_us"].as_u64().unwrap() >= 200_000,
        "{waited}"
    );
    assert_eq!(waited["usage"]["fuel_consumed"], 0);
    // Another file does not wait. (Its own deadline is longer: what is
    // checked is that it did not wait, and a debug build on a loaded
    // machine has taken more than 300 ms to run it.)
    let free_opts = CallOptions {
        timeout_ms: Some(10_000),
        ..CallOptions::default()
    };
    let free = scope_call(
        &host,
        &root,
        "count_calls",
        r#"{"path":"d.txt"}"#,
        &free_opts,
    );
    expect_ok(&free);
    assert!(
        free["usage"]["wait_us"].as_u64().unwrap() < 300_000,
        "{free}"
    );
    expect_ok(&holder.join().unwrap());
    assert_eq!(ws.read("c.txt"), b".", "the timed-out call ran");
    // With a longer deadline the second call waits, then runs.
    let holder = {
        let (host, root) = (host.clone(), root.clone());
        std::thread::spawn(move || {
            scope_call(
                &host,
                &root,
                "count_calls",
                r#"{"path":"c.txt","hold_ms":500}"#,
                &CallOptions::default(),
            )
        })
    };
    while ws.read("c.txt").len() < 2 {
        std::thread::sleep(Duration::from_millis(5));
    }
    let later = scope_call(
        &host,
        &root,
        "count_calls",
        r#"{"path":"c.txt"}"#,
        &CallOptions {
            timeout_ms: Some(60_000),
            ..CallOptions::default()
        },
    );
    expect_ok(&holder.join().unwrap());
    assert_eq!(expect_ok(&later)["count"], 3, "{later}");
    assert!(later["usage"]["wait_us"].as_u64().unwrap() > 0, "{later}");
}

#[test]
fn a_lock_holder_killed_by_sigkill_does_not_block_the_next_caller() {
    let ws = Ws::new();
    let state = tempfile::tempdir().unwrap();
    let locks = state.path().join("locks");
    let plugin = test_plugin("tp_effects");
    let count = |hold_ms: u32, key: &str, timeout_ms: &str| {
        let args = format!(r#"{{"path":"c.txt","hold_ms":{hold_ms}}}"#);
        toolhost(
            &[
                "--plugin",
                plugin.to_str().unwrap(),
                "call",
                "count_calls",
                &args,
                "--allow-write",
                ".",
                "--idempotency-key",
                key,
                "--timeout-ms",
                timeout_ms,
            ],
            ws.dir.path(),
            &locks,
            state.path(),
        )
    };
    let mut holder = count(60_000, "holder", "120000").spawn().unwrap();
    let t = Instant::now();
    while !ws.path("c.txt").exists() {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "the holder never ran"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    // While it lives, another process waits and gives up at its deadline.
    let out = count(0, "blocked", "500").output().unwrap();
    let obs = observation(&out);
    let err = expect_error(&obs, "error", "timeout");
    assert_eq!(err["retry"], "safe", "nothing ran: {err}");
    assert_eq!(out.status.code(), Some(1));
    // The deadline counts from the call's start, the wait from when it
    // reached the lock: the wait is most of the 500 ms, not all of it.
    assert!(obs["usage"]["wait_us"].as_u64().unwrap() > 0, "{obs}");
    assert_eq!(
        err["details"]["waited_for"][0]["resource"]["name"], "c.txt",
        "{obs}"
    );
    assert_eq!(ws.read("c.txt"), b".");

    rustix_kill(holder.id());
    holder.wait().unwrap();
    let t = Instant::now();
    let out = count(0, "next", "60000").output().unwrap();
    let obs = observation(&out);
    assert_eq!(expect_ok(&obs)["count"], 2, "{obs}");
    assert!(
        t.elapsed() < Duration::from_secs(30),
        "the next caller waited {:?}",
        t.elapsed()
    );
}

fn rustix_kill(pid: u32) {
    let status = Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

fn items(v: Value) -> Vec<toolhost::BatchItem> {
    // Through the text: an item keeps its arguments as sent.
    serde_json::from_str(&v.to_string()).unwrap()
}

#[test]
fn a_batch_with_one_failing_item_is_partial_and_keeps_input_order() {
    let ws = Ws::new();
    ws.write("a.txt", "alpha\n");
    ws.write("b.txt", "beta\n");
    let state = tempfile::tempdir().unwrap();
    let input = json!([
        {"call_id": "first", "tool": "file_view", "arguments": {"path": "a.txt"}},
        {"call_id": "missing", "tool": "file_view", "arguments": {"path": "nope.txt"}},
        {"call_id": "third", "tool": "file_view", "arguments": {"path": "b.txt"}},
    ]);
    let file = state.path().join("batch.json");
    std::fs::write(&file, input.to_string()).unwrap();
    let out = toolhost(
        &["batch", file.to_str().unwrap(), "--allow-read", "."],
        ws.dir.path(),
        &state.path().join("locks"),
        state.path(),
    )
    .output()
    .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}", String::from_utf8_lossy(&out.stderr));
    });
    assert_eq!(out.status.code(), Some(4), "{v:#}");
    assert_eq!(v["schema_version"], 1);
    assert_eq!(v["status"], "partial");
    let got: Vec<&str> = v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["call_id"].as_str().unwrap())
        .collect();
    assert_eq!(got, ["first", "missing", "third"]);
    for o in v["items"].as_array().unwrap() {
        assert_valid_observation(o);
    }
    expect_ok(&v["items"][0]);
    expect_error(&v["items"][1], "error", "not_found");
    expect_ok(&v["items"][2]);
    assert_eq!(v["summary"]["completed"], 2);
    assert_eq!(v["summary"]["failed"], 1);

    // A malformed batch is refused as a whole: exit 2, a clear message.
    let dup = json!([
        {"call_id": "x", "tool": "file_view", "arguments": {"path": "a.txt"}},
        {"call_id": "x", "tool": "file_view", "arguments": {"path": "b.txt"}},
    ]);
    std::fs::write(&file, dup.to_string()).unwrap();
    let out = toolhost(
        &["batch", file.to_str().unwrap(), "--allow-read", "."],
        ws.dir.path(),
        &state.path().join("locks"),
        state.path(),
    )
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("call_id \"x\" is used by items 0 and 1"),
        "{err}"
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn a_batch_of_independent_reads_runs_in_parallel() {
    let host = host_with(&[Source::reference()]);
    let ws = Ws::new();
    let body = "needle in a haystack line\nother text\n".repeat(200);
    for i in 0..300 {
        ws.write(&format!("tree/d{}/f{i}.txt", i % 10), &body);
    }
    let session = session(&ws, &READ_ALL);
    let list = items(Value::Array(
        (0..8)
            .map(|i| {
                json!({"call_id": format!("g{i}"), "tool": "grep_search",
                       "arguments": {"pattern": format!("needle|{i}"), "path": "tree"}})
            })
            .collect(),
    ));
    let result = host.batch(&session, &list, &BatchOptions::default());
    assert_eq!(result.status, BatchStatus::Ok, "{:#?}", result.items[0]);
    let s = result.summary;
    assert_eq!((s.completed, s.failed), (8, 0));
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cores > 1 {
        assert!(
            s.wall_time_us < s.sum_time_us,
            "wall {} µs, sum of items {} µs",
            s.wall_time_us,
            s.sum_time_us
        );
    }
    // One worker: no overlap, wall ≥ the items' own time.
    let serial = host.batch(
        &session,
        &list,
        &BatchOptions {
            max_parallel: 1,
            ..BatchOptions::default()
        },
    );
    assert!(serial.summary.wall_time_us >= serial.summary.sum_time_us);
}

#[test]
fn conflicting_writes_in_a_batch_run_in_input_order() {
    let host = effects_host();
    let ws = Ws::new();
    let session = session(&ws, &WRITE_ALL);
    // Six appends to one file and six to others, the first with a hold so
    // that a later item would overtake it if it could.
    let mut list = Vec::new();
    for i in 0..6 {
        let hold = if i == 0 { 200 } else { 0 };
        list.push(
            json!({"call_id": format!("same-{i}"), "tool": "append_line",
            "arguments": {"path": "log.txt", "line": format!("item {i}"), "hold_ms": hold}}),
        );
        list.push(
            json!({"call_id": format!("other-{i}"), "tool": "append_line",
            "arguments": {"path": format!("other-{i}.txt"), "line": "x"}}),
        );
    }
    let result = host.batch(
        &session,
        &items(Value::Array(list)),
        &BatchOptions {
            max_parallel: 4,
            // Each item's key: derived from its own call id.
            call: CallOptions {
                idempotency: Some(toolhost::KeySource::Derived {
                    trajectory_id: "batch-test".into(),
                    turn: 0,
                    call_id: String::new(),
                }),
                ..CallOptions::default()
            },
        },
    );
    assert_eq!(result.status, BatchStatus::Ok, "{:#?}", result.items);
    let text = String::from_utf8(ws.read("log.txt")).unwrap();
    let want: String = (0..6).map(|i| format!("item {i}\n")).collect();
    assert_eq!(text, want);
}

/// Two `serve --http` processes with separate lock directories, as on two
/// machines, sharing only PostgreSQL: its advisory locks keep their edits of
/// one file apart.
#[test]
#[ignore = "needs PostgreSQL: export TOOLHOST_TEST_POSTGRES=\"$(bash .ci/postgres.sh)\", then --ignored (CI does)"]
fn pg_edits_through_two_http_servers_sharing_only_postgres_all_land() {
    use crate::mcp::{stateless_call, HttpServer};
    let url = crate::support::postgres_url();
    let mut setup = Setup::new(&[]);
    setup.store = Some(url);
    setup.ws.write("pub/lines.txt", numbered_lines(N));
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let servers: Vec<HttpServer> = dirs
        .iter()
        .map(|d| {
            HttpServer::start(
                &setup,
                &[
                    "--allow-write",
                    "pub",
                    "--lock-dir",
                    d.path().to_str().unwrap(),
                ],
            )
        })
        .collect();
    let nonce = format!("{:?}", std::time::SystemTime::now());
    let ok: Vec<bool> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..N)
            .map(|i| {
                let (server, nonce) = (&servers[i % 2], nonce.clone());
                s.spawn(move || {
                    let args: Value = serde_json::from_str(&edit_args("pub/lines.txt", i)).unwrap();
                    let meta = json!({"dev.toolhost/trajectory_id": nonce,
                                      "dev.toolhost/call_id": format!("edit-{i}")});
                    let obs =
                        observation_of(&stateless_call(server, i as i64, "file_edit", args, meta));
                    obs["status"] == "ok"
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let text = String::from_utf8(setup.ws.read("pub/lines.txt")).unwrap();
    assert_all_edits_landed(&text, &ok);
}

#[test]
fn plugin_declared_resources_keep_read_modify_writes_apart() {
    // `bump_counter` reads a counter, waits, writes it plus one; its
    // counter is declared `x-toolhost-resource: write`, not a path.
    let host = Arc::new(effects_host());
    let ws = Ws::new();
    ws.write("counters/.keep", "");
    let root = ws.dir.path().to_path_buf();
    let handles: Vec<_> = (0..8)
        .map(|i| {
            let (host, root) = (host.clone(), root.clone());
            std::thread::spawn(move || {
                let counter = if i % 2 == 0 { "even" } else { "odd" };
                let args = json!({"counter": counter, "hold_ms": 20}).to_string();
                scope_call(&host, &root, "bump_counter", &args, &CallOptions::default())
            })
        })
        .collect();
    for h in handles {
        expect_ok(&h.join().unwrap());
    }
    assert_eq!(ws.read("counters/even"), b"4");
    assert_eq!(ws.read("counters/odd"), b"4");
}
