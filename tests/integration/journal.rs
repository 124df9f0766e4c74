//! The call journal, first-try figures, the circuit breaker and `/metrics`:
//! real hosts over real record stores (SQLite files, PostgreSQL), the real
//! `toolhost` binary and `serve`.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Output;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use crate::mcp::{observation_of, stateless_call, HttpServer, Setup, StdioServer};
use crate::support::*;
use toolhost::journal::{self, stats, Filter};
use toolhost::{CallOptions, Host, Journal, JournalOptions, KeySource, Recorder, Source, Store};
use toolhost_store::{PostgresStore, SqliteStore};

const FLUSH: Duration = Duration::from_secs(60);

/// A reference host journaling into `store`.
fn journaled_host(store: Arc<dyn Store>, host_name: &str) -> (Host, Journal) {
    let journal = Journal::start(
        store.journal().expect("the store keeps a journal"),
        JournalOptions {
            host: host_name.into(),
            ..JournalOptions::default()
        },
    )
    .unwrap();
    let host = host_with(&[Source::reference()]).with_recorder(Recorder {
        journal: Some(journal.clone()),
        ..Recorder::default()
    });
    (host, journal)
}

fn sqlite(path: &std::path::Path) -> Arc<dyn Store> {
    Arc::new(SqliteStore::open(path, Duration::from_secs(3600)).unwrap())
}

fn in_trajectory(trajectory: &str, turn: u64, call_id: &str) -> CallOptions {
    CallOptions {
        idempotency: Some(KeySource::Derived {
            trajectory_id: trajectory.into(),
            turn,
            call_id: call_id.into(),
        }),
        call_id: Some(call_id.into()),
        ..CallOptions::default()
    }
}

fn toolhost_cli(args: &[&str], cwd: &std::path::Path) -> Output {
    toolhost_command(args, cwd)
        .output()
        .expect("running toolhost")
}

fn stdout_json(out: &Output) -> Value {
    assert!(out.status.success(), "{out:?}");
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)))
}

/// Two logical calls valid at once, two corrected on their second try:
/// first-try validity 0.5, attempts [1,1,1,1,2,2] — in the journal, in
/// `toolhost log --json` and in `toolhost stats --json`.
#[test]
fn first_try_valid_rate_and_attempts_of_a_scripted_trajectory() {
    let ws = Ws::new();
    ws.write("a.txt", "one\ntwo\n");
    let store_path = ws.path("state/records.sqlite");
    std::fs::create_dir_all(store_path.parent().unwrap()).unwrap();
    let (host, journal) = journaled_host(sqlite(&store_path), "h1");
    let good = r#"{"path":"a.txt","offset":1,"limit":1}"#;
    let script: [(u64, &str, &str, &str); 6] = [
        (1, "c1", good, "ok"),
        (2, "c2", good, "ok"),
        (
            3,
            "c3",
            r#"{"path":"a.txt","offset":0,"limit":1}"#,
            "invalid_arguments",
        ),
        (
            4,
            "c4",
            r#"{"path":"a.txt","offset":1,"limit":1,}"#,
            "invalid_json",
        ),
        (3, "c3", good, "ok"),
        (4, "c4", good, "ok"),
    ];
    let mut first_output = None;
    for (turn, call_id, args, expect) in script {
        let obs = call_with(
            &host,
            &ws,
            "file_view",
            args,
            &READ_ALL,
            &in_trajectory("T-script", turn, call_id),
        );
        match expect {
            "ok" => {
                first_output.get_or_insert_with(|| obs["output"].clone());
                expect_ok(&obs);
                assert_eq!(obs["consecutive_failures"], 0);
            }
            code => {
                expect_error(&obs, "error", code);
                assert_eq!(obs["consecutive_failures"], 1, "{obs:#}");
            }
        }
    }
    assert!(journal.flush(FLUSH));
    let entries = journal
        .backend()
        .query(&Filter {
            trajectory: Some("T-script".into()),
            token_chain: None,
            ..Filter::default()
        })
        .unwrap();
    let attempts: Vec<u32> = entries.iter().map(|e| e.attempt).collect();
    assert_eq!(attempts, [1, 1, 1, 1, 2, 2]);
    let firsts: Vec<bool> = entries.iter().map(|e| e.first_try).collect();
    assert_eq!(firsts, [true, true, true, true, false, false]);
    let e = &entries[0];
    assert_eq!(
        (e.trajectory.as_deref(), e.turn),
        (Some("T-script"), Some(1))
    );
    assert_eq!(e.call_id, "c1");
    assert_eq!(e.status, "ok");
    assert_eq!(e.args_sha256, journal::args_sha256(good));
    assert_eq!(e.args_summary["args"]["path"], "a.txt");
    assert_eq!(e.args_summary["args"]["offset"], 1);
    // The result's version: the SHA-256 of the canonical output (the
    // journal hashes it from the tool's JSON text on its own thread).
    let canonical = toolhost_base::json::canonical::canonicalize(&first_output.unwrap()).unwrap();
    let digest = <sha2::Sha256 as sha2::Digest>::digest(canonical.as_bytes());
    assert_eq!(
        e.result_sha256.as_deref(),
        Some(hex::encode(digest).as_str())
    );
    assert!(e.output_bytes > 0 && e.ended_at >= e.started_at);
    assert_eq!(e.host, "h1");
    assert_eq!(entries[2].error_code.as_deref(), Some("invalid_arguments"));
    let s = stats::compute(&entries, stats::BreakEven::default());
    assert_eq!(s.tools[0].first_try_valid_rate, Some(0.5));
    assert_eq!(s.tools[0].malformed_rate, Some(0.5));
    drop(host);
    drop(journal);

    // The same figures through the binary, from the same store file.
    let store = store_path.display().to_string();
    let log = stdout_json(&toolhost_cli(
        &[
            "log",
            "--json",
            "--store",
            &store,
            "--trajectory",
            "T-script",
        ],
        ws.dir.path(),
    ));
    let attempts: Vec<u64> = log
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["attempt"].as_u64().unwrap())
        .collect();
    assert_eq!(attempts, [1, 1, 1, 1, 2, 2]);
    let started = log[0]["started_at"].as_str().unwrap();
    assert!(
        chrono::DateTime::parse_from_rfc3339(started).is_ok() && started.len() == 27,
        "{started}"
    );
    let stats = stdout_json(&toolhost_cli(
        &["stats", "--json", "--store", &store, "--t-repair-ms", "400"],
        ws.dir.path(),
    ));
    let fv = &stats["tools"][0];
    assert_eq!(fv["name"], "file_view");
    assert_eq!(fv["calls"], 6);
    assert_eq!(fv["first_try_valid_rate"], 0.5);
    assert_eq!(fv["malformed_rate"], 0.5);
    assert_eq!(fv["errors"]["invalid_json"], 1);
    assert!(fv["p90_ms"].as_f64().unwrap() >= fv["p50_ms"].as_f64().unwrap());
    // 80 tokens · 0.5 ms / 400 ms = 10 %, below the measured 50 %.
    assert_eq!(stats["p_break"], 0.1);
    assert!(
        stats["verdict"].as_str().unwrap().starts_with("constrain"),
        "{stats}"
    );
    // The table form names the same.
    let table = toolhost_cli(&["log", "--store", &store], ws.dir.path());
    let text = String::from_utf8(table.stdout).unwrap();
    assert!(
        text.starts_with("STARTED") && text.contains("invalid_json"),
        "{text}"
    );
    let table = toolhost_cli(&["stats", "--store", &store], ws.dir.path());
    let text = String::from_utf8(table.stdout).unwrap();
    assert!(
        text.contains("file_view") && text.contains("50.0%") && text.contains("p_break"),
        "{text}"
    );
    // Pruning: nothing is a day old; everything is older than a second from now on.
    let out = toolhost_cli(
        &["prune", "--store", &store, "--older-than", "1d"],
        ws.dir.path(),
    );
    assert!(out.status.success(), "{out:?}");
    std::thread::sleep(Duration::from_millis(1100));
    let out = toolhost_cli(
        &["prune", "--store", &store, "--older-than", "1s"],
        ws.dir.path(),
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("deleted 6 journal entries"),
        "{out:?}"
    );
    let bad = toolhost_cli(
        &["log", "--store", &store, "--since", "yesterday-ish"],
        ws.dir.path(),
    );
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("--since"),
        "{bad:?}"
    );
}

/// Unknown tool, invalid JSON, denied: each journaled with its code and
/// the size of its arguments, nothing of their content.
#[test]
fn rejected_calls_are_journaled_without_argument_content() {
    let ws = Ws::new();
    ws.write("pub/a.txt", "x\n");
    ws.write("secret/b.txt", "y\n");
    let store_path = ws.path("records.sqlite");
    let (host, journal) = journaled_host(sqlite(&store_path), "h");
    let grant = Grant {
        read: &["pub"],
        write: &[],
    };
    let marker = "hunter2-content-marker";
    let cases = [
        (
            "no_such_tool",
            format!(r#"{{"path":"{marker}"}}"#),
            "error",
            "unknown_tool",
        ),
        (
            "file_view",
            format!(r#"{{"path":"{marker}",,}}"#),
            "error",
            "invalid_json",
        ),
        (
            "file_view",
            r#"{"path":"secret/b.txt","offset":1,"limit":1}"#.to_string(),
            "denied",
            "denied",
        ),
        (
            "file_view",
            format!(r#"{{"path":"pub/a.txt","offset":1,"limit":1,"x":"{marker}"}}"#),
            "error",
            "invalid_arguments",
        ),
    ];
    for (i, (tool, args, status, code)) in cases.iter().enumerate() {
        let obs = call_with(
            &host,
            &ws,
            tool,
            args,
            &grant,
            &in_trajectory("T-rej", i as u64, "c"),
        );
        expect_error(&obs, status, code);
    }
    assert!(journal.flush(FLUSH));
    let entries = journal
        .backend()
        .query(&Filter {
            trajectory: Some("T-rej".into()),
            token_chain: None,
            ..Filter::default()
        })
        .unwrap();
    assert_eq!(entries.len(), cases.len());
    for (e, (tool, args, status, code)) in entries.iter().zip(&cases) {
        assert_eq!(e.tool, *tool);
        assert_eq!(e.status, *status);
        assert_eq!(e.error_code.as_deref(), Some(*code));
        assert_eq!(e.args_summary, json!({"bytes": args.len()}), "{e:?}");
        assert_eq!(e.result_sha256, None);
        let text = serde_json::to_string(e).unwrap();
        assert!(
            !text.contains(marker) && !text.contains("secret/b.txt"),
            "{text}"
        );
    }
}

/// Three identical `not_found` calls in one trajectory; the fourth is
/// `circuit_open` and does not run (the file exists by then: had it run,
/// it would have succeeded); another call of the tool runs and closes the
/// breaker.
#[test]
fn breaker_opens_after_three_identical_failures_in_a_trajectory() {
    let ws = Ws::new();
    ws.write("a.txt", "x\n");
    let (host, journal) = journaled_host(sqlite(&ws.path("r.sqlite")), "h");
    let missing = r#"{"path":"late.txt","offset":1,"limit":1}"#;
    let opts = in_trajectory("T-breaker", 1, "c");
    for n in 1..=3 {
        let obs = call_with(&host, &ws, "file_view", missing, &READ_ALL, &opts);
        expect_error(&obs, "error", "not_found");
        assert_eq!(obs["consecutive_failures"], n, "{obs:#}");
    }
    ws.write("late.txt", "now here\n");
    let obs = call_with(&host, &ws, "file_view", missing, &READ_ALL, &opts);
    let err = expect_error(&obs, "error", "circuit_open");
    assert_eq!(err["correctable"], true);
    assert_eq!(err["retry"], "after_correction");
    assert_eq!(err["details"]["consecutive_failures"], 3);
    assert_eq!(err["details"]["error_code"], "not_found");
    assert!(
        err["message"].as_str().unwrap().contains("3 times"),
        "{err}"
    );
    assert_eq!(obs["consecutive_failures"], 3);
    assert_eq!(obs["usage"]["fuel_consumed"], 0, "it did not run");
    // The same arguments written differently are the same call.
    let reordered = r#"{"limit":1,"offset":1,"path":"late.txt"}"#;
    let obs = call_with(&host, &ws, "file_view", reordered, &READ_ALL, &opts);
    expect_error(&obs, "error", "circuit_open");
    // Another trajectory is not held.
    let obs = call_with(
        &host,
        &ws,
        "file_view",
        missing,
        &READ_ALL,
        &in_trajectory("T-other", 1, "c"),
    );
    expect_ok(&obs);
    // Another call of the tool runs; its success closes the breaker.
    let obs = call_with(
        &host,
        &ws,
        "file_view",
        &view_args("a.txt"),
        &READ_ALL,
        &opts,
    );
    expect_ok(&obs);
    let obs = call_with(&host, &ws, "file_view", missing, &READ_ALL, &opts);
    expect_ok(&obs);
    assert!(journal.flush(FLUSH));
    let codes: Vec<Option<String>> = journal
        .backend()
        .query(&Filter {
            trajectory: Some("T-breaker".into()),
            token_chain: None,
            ..Filter::default()
        })
        .unwrap()
        .into_iter()
        .map(|e| e.error_code)
        .collect();
    let nf = Some("not_found".to_string());
    let open = Some("circuit_open".to_string());
    assert_eq!(
        codes,
        [nf.clone(), nf.clone(), nf, open.clone(), open, None, None]
    );
}

/// The CLI runs one call per process: the breaker's count for a
/// trajectory comes from the journal.
#[test]
fn breaker_holds_across_cli_processes_of_one_trajectory() {
    let ws = Ws::new();
    let store = ws.path("state/records.sqlite").display().to_string();
    let run = |call_id: &str| -> Value {
        let out = toolhost_cli(
            &[
                "call",
                "file_view",
                r#"{"path":"gone.txt"}"#,
                "--allow-read",
                ".",
                "--store",
                &store,
                "--trajectory",
                "T-cli",
                "--turn",
                "1",
                "--call-id",
                call_id,
            ],
            ws.dir.path(),
        );
        let obs: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_valid_observation(&obs);
        obs
    };
    for n in 1..=3 {
        let obs = run(&format!("c{n}"));
        expect_error(&obs, "error", "not_found");
        assert_eq!(obs["consecutive_failures"], n, "{obs:#}");
    }
    let obs = run("c4");
    expect_error(&obs, "error", "circuit_open");
    // With the breaker off, it runs (and fails) again.
    let out = toolhost_cli(
        &[
            "call",
            "file_view",
            r#"{"path":"gone.txt"}"#,
            "--allow-read",
            ".",
            "--store",
            &store,
            "--trajectory",
            "T-cli",
            "--turn",
            "1",
            "--call-id",
            "c5",
            "--breaker-threshold",
            "0",
        ],
        ws.dir.path(),
    );
    let obs: Value = serde_json::from_slice(&out.stdout).unwrap();
    expect_error(&obs, "error", "not_found");
}

/// The breaker of a trajectory counts per token: three failures under one
/// token do not open it for another token's identical call.
#[test]
fn breaker_of_a_trajectory_does_not_cross_tokens() {
    let ws = Ws::new();
    let store = ws.path("state/records.sqlite").display().to_string();
    let mint = toolhost_cli(
        &[
            "cap", "mint", "--tool", "*", "--read", ".", "--store", &store,
        ],
        ws.dir.path(),
    );
    assert!(mint.status.success(), "{mint:?}");
    let token = String::from_utf8(mint.stdout).unwrap().trim().to_string();
    let run = |call_id: &str, grant: &[&str]| -> Value {
        let args = [
            &[
                "call",
                "file_view",
                r#"{"path":"gone.txt"}"#,
                "--store",
                &store,
                "--trajectory",
                "T-shared",
                "--turn",
                "1",
                "--call-id",
                call_id,
            ][..],
            grant,
        ]
        .concat();
        let out = toolhost_cli(&args, ws.dir.path());
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let flags: &[&str] = &["--allow-read", "."];
    for n in 1..=3 {
        let obs = run(&format!("a{n}"), flags);
        expect_error(&obs, "error", "not_found");
        assert_eq!(obs["consecutive_failures"], n, "{obs:#}");
    }
    expect_error(&run("a4", flags), "error", "circuit_open");
    // Another token, the same trajectory and arguments: it runs.
    let other: &[&str] = &["--token", &token];
    let obs = run("b1", other);
    expect_error(&obs, "error", "not_found");
    assert_eq!(obs["consecutive_failures"], 1, "{obs:#}");
}

/// Over MCP the breaker holds per session: a stdio client repeating a
/// failing call gets `circuit_open` on the fourth try.
#[test]
fn breaker_holds_per_mcp_session() {
    let setup = Setup::new(&[]);
    let mut server = StdioServer::initialized(&setup, &[]);
    let args = json!({"path": "pub/nothere.txt"});
    for n in 1..=3 {
        let obs = observation_of(&server.call(n, "file_view", args.clone()));
        expect_error(&obs, "error", "not_found");
        assert_eq!(obs["consecutive_failures"], n, "{obs:#}");
    }
    let obs = observation_of(&server.call(4, "file_view", args.clone()));
    expect_error(&obs, "error", "circuit_open");
    let obs = observation_of(&server.call(5, "file_view", json!({"path": "pub/a.txt"})));
    expect_ok(&obs);
    // A new session starts with a closed breaker.
    let mut other = StdioServer::initialized(&setup, &[]);
    let obs = observation_of(&other.call(1, "file_view", args));
    expect_error(&obs, "error", "not_found");
    // An unknown tool is a protocol error over MCP, and journaled too
    // (read with a plain reader while the servers run).
    let reply = other.call(2, "no_such_tool", json!({"k": "hunter2-marker"}));
    assert!(reply["error"].is_object(), "{reply}");
    let db = rusqlite::Connection::open_with_flags(
        setup.state.path().join("records.sqlite"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let (code, summary): (String, String) = loop {
        let row = db.query_row(
            "SELECT error_code, args_summary FROM call_journal WHERE tool = 'no_such_tool'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        );
        if let Ok(row) = row {
            break row;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never journaled: {row:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(code, "unknown_tool");
    assert!(!summary.contains("hunter2-marker"), "{summary}");
}

fn get(port: u16, path: &str) -> (u16, String, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    let content_type = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-type: ")
                .map(String::from)
        })
        .unwrap_or_default();
    // A chunked body: drop the chunk sizes.
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        let mut out = String::new();
        let mut rest = body;
        while let Some((size, tail)) = rest.split_once("\r\n") {
            let n = usize::from_str_radix(size.trim(), 16).unwrap();
            if n == 0 {
                break;
            }
            out.push_str(&tail[..n]);
            rest = &tail[n + 2..];
        }
        out
    } else {
        body.to_string()
    };
    (status, content_type, body)
}

fn scrape(port: u16) -> prometheus_parse::Scrape {
    let (status, content_type, body) = get(port, "/metrics");
    assert_eq!(status, 200, "{body}");
    assert!(
        content_type.starts_with("text/plain; version=0.0.4"),
        "{content_type}"
    );
    prometheus_parse::Scrape::parse(body.lines().map(|l| Ok(l.to_string()))).unwrap()
}

fn sample(scrape: &prometheus_parse::Scrape, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    scrape
        .samples
        .iter()
        .find(|s| s.metric == name && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .map(|s| match s.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => v,
            ref other => panic!("{name}: {other:?}"),
        })
}

/// `/metrics` parses as Prometheus text and counts what the test did.
#[test]
fn metrics_endpoint_counts_the_calls_made() {
    let setup = Setup::new(&[]);
    let server = HttpServer::start(&setup, &[]);
    let nonce = format!("{:?}", std::time::SystemTime::now());
    for i in 0..3 {
        let meta =
            json!({"dev.toolhost/trajectory_id": nonce, "dev.toolhost/call_id": format!("ok{i}")});
        let obs = observation_of(&stateless_call(
            &server,
            i,
            "file_view",
            json!({"path": "pub/a.txt"}),
            meta,
        ));
        expect_ok(&obs);
    }
    let meta = json!({"dev.toolhost/trajectory_id": nonce, "dev.toolhost/call_id": "bad"});
    let obs = observation_of(&stateless_call(
        &server,
        9,
        "file_view",
        json!({"path": "pub/a.txt", "limit": 0}),
        meta,
    ));
    expect_error(&obs, "error", "invalid_arguments");
    // The first-try counters come from the journal writer: wait for it.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let s = loop {
        let s = scrape(server.port);
        if sample(&s, "toolhost_first_tries_total", &[("tool", "file_view")]) == Some(4.0)
            || std::time::Instant::now() > deadline
        {
            break s;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let ok = [("tool", "file_view"), ("status", "ok"), ("error_code", "")];
    assert_eq!(sample(&s, "toolhost_calls_total", &ok), Some(3.0));
    let bad = [
        ("tool", "file_view"),
        ("status", "error"),
        ("error_code", "invalid_arguments"),
    ];
    assert_eq!(sample(&s, "toolhost_calls_total", &bad), Some(1.0));
    assert_eq!(
        sample(&s, "toolhost_first_tries_total", &[("tool", "file_view")]),
        Some(4.0)
    );
    assert_eq!(
        sample(
            &s,
            "toolhost_first_try_valid_total",
            &[("tool", "file_view")]
        ),
        Some(3.0)
    );
    assert_eq!(sample(&s, "toolhost_journal_entries_total", &[]), Some(4.0));
    assert!(sample(&s, "toolhost_fuel_consumed_total", &[("tool", "file_view")]).unwrap() > 0.0);
    assert!(sample(&s, "toolhost_output_bytes_total", &[("tool", "file_view")]).unwrap() > 0.0);
    assert_eq!(
        sample(&s, "toolhost_records", &[("state", "in_doubt")]),
        Some(0.0)
    );
    let hits = sample(&s, "toolhost_compile_cache_hits_total", &[]).unwrap();
    let misses = sample(&s, "toolhost_compile_cache_misses_total", &[]).unwrap();
    let precompiled = sample(&s, "toolhost_precompiled_loads_total", &[]).unwrap();
    assert!(
        hits + misses + precompiled >= 1.0,
        "the reference plugin was loaded once"
    );
    let histogram = s
        .samples
        .iter()
        .find(|x| {
            x.metric == "toolhost_call_duration_seconds"
                && x.labels.get("tool") == Some("file_view")
        })
        .expect("the duration histogram");
    match &histogram.value {
        prometheus_parse::Value::Histogram(buckets) => {
            assert_eq!(buckets.last().unwrap().count, 4.0, "{buckets:?}");
        }
        other => panic!("not a histogram: {other:?}"),
    }
    assert_eq!(get(server.port, "/nothing").0, 404);
}

/// Names a client makes up do not become labels: 50 calls of 50 unknown
/// names are one series under the fixed label, and the page stays small.
#[test]
fn metrics_count_unknown_tool_names_under_one_label() {
    let setup = Setup::new(&[]);
    let server = HttpServer::start(&setup, &[]);
    let unknown = |i: usize| {
        let name = format!("made_up_{i}_{}", "x".repeat(i));
        let reply = stateless_call(&server, i as i64, &name, json!({}), json!({}));
        assert!(
            reply.get("error").is_some() || reply["result"]["isError"] == true,
            "{reply}"
        );
    };
    // One call of each first, so every series exists: from then on the
    // page grows by counts only.
    unknown(0);
    let obs = observation_of(&stateless_call(
        &server,
        99,
        "file_view",
        json!({"path": "pub/a.txt"}),
        json!({}),
    ));
    expect_ok(&obs);
    let before = get(server.port, "/metrics").2.len();
    for i in 1..50 {
        unknown(i);
    }
    let s = scrape(server.port);
    let tools: std::collections::BTreeSet<&str> = s
        .samples
        .iter()
        .filter(|x| x.metric == "toolhost_calls_total")
        .filter_map(|x| x.labels.get("tool"))
        .collect();
    assert_eq!(
        tools,
        ["(not in catalog)", "file_view"].into_iter().collect(),
        "{tools:?}"
    );
    let other: f64 = s
        .samples
        .iter()
        .filter(|x| {
            x.metric == "toolhost_calls_total" && x.labels.get("tool") == Some("(not in catalog)")
        })
        .map(|x| match x.value {
            prometheus_parse::Value::Counter(v) => v,
            ref v => panic!("{v:?}"),
        })
        .sum();
    assert_eq!(other, 50.0);
    let after = get(server.port, "/metrics").2.len();
    assert!(after < before + 512, "{before} -> {after} bytes");
}

/// Two hosts on one PostgreSQL store keep one journal: a logical call
/// retried on the second host is its attempt 2, and `stats` over the
/// shared table counts both hosts' calls.
#[test]
#[ignore = "needs PostgreSQL: set TOOLHOST_TEST_POSTGRES"]
fn journals_of_two_hosts_sharing_postgres_merge_into_one_stats() {
    let url = postgres_url();
    let ws = Ws::new();
    ws.write("a.txt", "x\n");
    let pg = || -> Arc<dyn Store> {
        Arc::new(PostgresStore::connect(&url, Duration::from_secs(3600)).unwrap())
    };
    let (a, ja) = journaled_host(pg(), "host-a");
    let (b, jb) = journaled_host(pg(), "host-b");
    let trajectory = format!("T-pg-{:?}", std::time::SystemTime::now());
    let good = r#"{"path":"a.txt","offset":1,"limit":1}"#;
    let bad = r#"{"path":"a.txt","offset":0,"limit":1}"#;
    // Logical call 1: bad on host a, corrected on host b.
    expect_error(
        &call_with(
            &a,
            &ws,
            "file_view",
            bad,
            &READ_ALL,
            &in_trajectory(&trajectory, 1, "c1"),
        ),
        "error",
        "invalid_arguments",
    );
    assert!(ja.flush(FLUSH));
    expect_ok(&call_with(
        &b,
        &ws,
        "file_view",
        good,
        &READ_ALL,
        &in_trajectory(&trajectory, 1, "c1"),
    ));
    // Logical call 2: good at once, on host b; 3: on host a.
    expect_ok(&call_with(
        &b,
        &ws,
        "file_view",
        good,
        &READ_ALL,
        &in_trajectory(&trajectory, 2, "c2"),
    ));
    expect_ok(&call_with(
        &a,
        &ws,
        "file_view",
        good,
        &READ_ALL,
        &in_trajectory(&trajectory, 3, "c3"),
    ));
    assert!(ja.flush(FLUSH) && jb.flush(FLUSH));
    let filter = Filter {
        trajectory: Some(trajectory.clone()),
        token_chain: None,
        ..Filter::default()
    };
    let entries = jb.backend().query(&filter).unwrap();
    let seen: Vec<(&str, &str, u32)> = entries
        .iter()
        .map(|e| (e.host.as_str(), e.call_id.as_str(), e.attempt))
        .collect();
    assert_eq!(
        seen,
        [
            ("host-a", "c1", 1),
            ("host-b", "c1", 2),
            ("host-b", "c2", 1),
            ("host-a", "c3", 1)
        ]
    );
    let s = stats::compute(&entries, stats::BreakEven::default());
    assert_eq!(s.tools[0].calls, 4);
    assert_eq!(s.tools[0].logical_calls, 3);
    assert_eq!(s.tools[0].first_try_valid_rate, Some(2.0 / 3.0));
    // `toolhost stats` on the shared store sees both hosts' entries.
    let out = toolhost_cli(
        &["stats", "--json", "--store", &url, "--since", "10m"],
        ws.dir.path(),
    );
    let all = stdout_json(&out);
    let fv = all["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "file_view")
        .unwrap()
        .clone();
    assert!(fv["calls"].as_u64().unwrap() >= 4, "{all}");
}

/// A journal backend that takes `delay` to write each batch.
struct SlowBackend {
    inner: Arc<dyn journal::JournalBackend>,
    delay: Duration,
}

impl journal::JournalBackend for SlowBackend {
    fn init(&self) -> Result<(), toolhost::StoreError> {
        self.inner.init()
    }
    fn append(&self, entries: &mut [journal::Entry]) -> Result<(), toolhost::StoreError> {
        std::thread::sleep(self.delay);
        self.inner.append(entries)
    }
    fn query(&self, filter: &Filter) -> Result<Vec<journal::Entry>, toolhost::StoreError> {
        self.inner.query(filter)
    }
    fn prune(&self, before_us: i64) -> Result<u64, toolhost::StoreError> {
        self.inner.prune(before_us)
    }
}

#[test]
fn a_side_effecting_call_is_journaled_before_it_answers() {
    let ws = Ws::new();
    ws.write("a.txt", "one\n");
    let store_path = ws.path("state/records.sqlite");
    std::fs::create_dir_all(store_path.parent().unwrap()).unwrap();
    let store = sqlite(&store_path);
    let backend: Arc<dyn journal::JournalBackend> = Arc::new(SlowBackend {
        inner: store.journal().unwrap(),
        delay: Duration::from_millis(400),
    });
    let journal = Journal::start(backend.clone(), JournalOptions::default()).unwrap();
    let host = host_with(&[Source::reference()]).with_recorder(Recorder {
        journal: Some(journal.clone()),
        ..Recorder::default()
    });
    let count = |tool: &str| {
        let all = backend.query(&Filter::default()).unwrap();
        all.iter().filter(|e| e.tool == tool).count()
    };
    // Read-only: answered before the batch is written.
    let obs = call(&host, &ws, "file_view", &view_args("a.txt"), &READ_ALL);
    expect_ok(&obs);
    assert_eq!(
        count("file_view"),
        0,
        "a read-only entry waits for its batch"
    );
    // Side-effecting: its entry is in the store when the answer is back.
    let obs = call(
        &host,
        &ws,
        "file_edit",
        r#"{"path":"a.txt","old_str":"one","new_str":"two"}"#,
        &WRITE_ALL,
    );
    expect_ok(&obs);
    assert_eq!(
        count("file_edit"),
        1,
        "the side-effecting call's entry is written"
    );
    assert!(journal.flush(FLUSH));
    assert_eq!(count("file_view"), 1);
}
