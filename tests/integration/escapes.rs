//! Regression tests for sandbox escapes: a grant swapped for a symbolic
//! link after it was checked, deadlines that stopped at host calls,
//! dry-runs and probes that could write or reach the network.
//!
//! Each of these failed on the code before the fix: the swapped grant was
//! mounted through the link, sleeps and FIFO opens ignored the deadline,
//! and a plan's dry-run wrote the file and reached the granted server. Tests that would hang on such code
//! run the call on a helper thread and fail after a generous wait instead.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use serde_json::Value;
use toolhost::{
    Allow, Call, CallOptions, Catalog, EffectGuard, Host, KeySource, Limits, Mount, Session, Source,
};
use toolhost_sandbox::{CallRequest, DESCRIBE_TIMEOUT};
use toolhost_store::SqliteStore;

use crate::support::*;

/// A workspace `ws/` with a sibling `outside/` holding a secret that no
/// call may ever read, and a place where no call may ever write.
struct Site {
    dir: tempfile::TempDir,
}

const SECRET: &str = "OUTSIDE-SECRET-7f3a";

impl Site {
    fn new() -> Site {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("ws/sub")).unwrap();
        std::fs::create_dir_all(dir.path().join("outside")).unwrap();
        std::fs::write(dir.path().join("ws/sub/secret.txt"), "inside\n").unwrap();
        std::fs::write(dir.path().join("ws/sub/f.txt"), "inside line\n").unwrap();
        std::fs::write(dir.path().join("outside/secret.txt"), SECRET).unwrap();
        std::fs::write(dir.path().join("outside/f.txt"), format!("{SECRET}\n")).unwrap();
        Site { dir }
    }

    fn ws(&self) -> std::path::PathBuf {
        self.dir.path().join("ws")
    }

    fn outside(&self, name: &str) -> std::path::PathBuf {
        self.dir.path().join("outside").join(name)
    }

    /// Moves `ws/sub` away and puts a relative link to `../outside` in its
    /// place.
    fn swap(&self) {
        std::fs::rename(self.ws().join("sub"), self.ws().join("sub.real")).unwrap();
        std::os::unix::fs::symlink("../outside", self.ws().join("sub")).unwrap();
    }

    fn unswap(&self) {
        std::fs::remove_file(self.ws().join("sub")).unwrap();
        std::fs::rename(self.ws().join("sub.real"), self.ws().join("sub")).unwrap();
    }
}

fn call_in(host: &Host, session: &Session, tool: &str, args: &str) -> Value {
    call_opts(host, session, tool, args, &CallOptions::default())
}

fn call_opts(host: &Host, session: &Session, tool: &str, args: &str, opts: &CallOptions) -> Value {
    run_in(host, session, tool, args, &keyed(opts))
}

/// Runs `f` on a helper thread and returns its result, or fails the test
/// if it has not returned after `limit` (the thread is left behind: this
/// is the failure of a call that never ends).
fn within<T: Send + 'static>(
    limit: Duration,
    what: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(limit) {
        Ok(value) => value,
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("{what} did not return within {limit:?}"),
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("{what} panicked"),
    }
}

fn timeout_ms(ms: u64) -> CallOptions {
    CallOptions {
        timeout_ms: Some(ms),
        ..CallOptions::default()
    }
}

// ---- grants are opened beneath the root, never through a link ----

#[test]
fn a_grant_swapped_for_a_symlink_after_the_check_mounts_nothing_outside() {
    let site = Site::new();
    // The check: `sub` is a directory inside the workspace, granted for
    // reading and writing (as a cached session holds it).
    let session = session_at(
        &site.ws(),
        &Allow {
            write: &["sub"],
            ..Allow::default()
        },
    );
    site.swap();
    let obs = call_in(hostile_host(), &session, "mount_escape", r#"{"dir":"sub"}"#);
    let text = obs.to_string();
    assert!(
        !text.contains(SECRET),
        "read outside the workspace: {obs:#}"
    );
    assert!(
        !site.outside("planted.txt").exists(),
        "wrote outside the workspace: {obs:#}"
    );
    let err = expect_error(&obs, "denied", "denied");
    let message = err["message"].as_str().unwrap();
    assert!(message.contains("`sub`"), "{message}");
    assert!(message.contains("symbolic link"), "{message}");

    // Restored, the same grant works again (and sees the real directory).
    site.unswap();
    let obs = call_in(hostile_host(), &session, "mount_escape", r#"{"dir":"sub"}"#);
    let out = expect_ok(&obs);
    assert_eq!(out["read"], "inside\n", "{out:#}");
    assert_eq!(out["wrote"], true, "{out:#}");
    assert!(site.ws().join("sub/planted.txt").exists());
}

/// The race the fix closes, frozen at its worst moment: the grant is
/// swapped for a link after the host opened it and before the guest runs.
/// The guest works in the directory that was opened (now `sub.real`),
/// never through the link.
#[test]
fn a_grant_swapped_between_its_open_and_the_call_stays_the_opened_directory() {
    let site = Site::new();
    let mounts = [Mount::open(&site.ws().join("sub"), "/workspace/sub", true).unwrap()];
    site.swap();
    let plugin = sandbox()
        .load(&std::fs::read(test_plugin("tp_hostile")).unwrap(), &|_| {})
        .unwrap();
    let outcome = plugin.call(&CallRequest {
        tool: "mount_escape",
        args_json: r#"{"dir":"sub"}"#,
        call_id: "swap-between-open-and-call",
        workspace_root: "/workspace",
        idempotency_key: None,
        mounts: &mounts,
        net_origins: &[],
        exec: None,
        limits: Limits::default(),
        reveal_secrets: false,
        asker: None,
        script: None,
    });
    let out: Value = serde_json::from_str(&outcome.result.unwrap().unwrap().json).unwrap();
    assert_eq!(out["read"], "inside\n", "{out:#}");
    assert_eq!(out["wrote"], true, "{out:#}");
    assert!(!out.to_string().contains(SECRET), "{out:#}");
    assert!(site.ws().join("sub.real/planted.txt").exists());
    assert!(
        !site.outside("planted.txt").exists(),
        "wrote through the link"
    );
}

#[test]
fn a_read_only_grant_swapped_for_a_symlink_reads_nothing_outside() {
    let site = Site::new();
    let session = session_at(
        &site.ws(),
        &Allow {
            read: &["sub"],
            write: &[],
            ..Allow::default()
        },
    );
    site.swap();
    for args in [
        r#"{"path":"sub/f.txt","offset":1,"limit":5}"#,
        r#"{"path":"sub/secret.txt","offset":1,"limit":5}"#,
    ] {
        let obs = call_in(reference_host(), &session, "file_view", args);
        assert!(!obs.to_string().contains(SECRET), "{obs:#}");
        assert_eq!(obs["status"], "denied", "{obs:#}");
    }
}

#[test]
fn reference_tools_never_read_outside_while_a_grant_is_flipped() {
    let site = Arc::new(Site::new());
    let session = session_at(
        &site.ws(),
        &Allow {
            read: &["sub"],
            write: &[],
            ..Allow::default()
        },
    );
    let stop = Arc::new(AtomicBool::new(false));
    let flipper = {
        let (site, stop) = (site.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut flips = 0u64;
            while !stop.load(Ordering::Relaxed) {
                site.swap();
                site.unswap();
                flips += 1;
            }
            flips
        })
    };
    let h = reference_host();
    let (mut ok, mut leaked) = (0, Vec::new());
    let started = Instant::now();
    let mut calls = 0;
    while calls < 10_000 && started.elapsed() < Duration::from_secs(40) {
        let (tool, args) = if calls % 2 == 0 {
            ("file_view", r#"{"path":"sub/f.txt","offset":1,"limit":5}"#)
        } else {
            ("grep_search", r#"{"pattern":"line|SECRET","path":"sub"}"#)
        };
        let obs = call_in(h, &session, tool, args);
        calls += 1;
        if obs["status"] == "ok" {
            ok += 1;
        }
        if obs.to_string().contains(SECRET) {
            leaked.push(obs);
        }
    }
    stop.store(true, Ordering::Relaxed);
    let flips = flipper.join().unwrap();
    assert!(
        leaked.is_empty(),
        "{} of {calls} calls saw a file outside the workspace; first: {:#}",
        leaked.len(),
        leaked[0]
    );
    assert!(flips > 10, "the grant was flipped only {flips} times");
    assert!(
        ok > 0,
        "no call of {calls} succeeded: the race was not exercised"
    );
}

#[test]
fn a_guest_cannot_create_symbolic_links() {
    let ws = Ws::new();
    ws.write("data/secret.txt", "x");
    let obs = call(
        hostile_host(),
        &ws,
        "symlink_attempts",
        r#"{"dir":"data"}"#,
        &WRITE_ALL,
    );
    let out = expect_ok(&obs);
    let attempts = out["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 3, "{out:#}");
    for a in attempts {
        assert_eq!(a["ok"], false, "a guest created a symbolic link: {a}");
        assert!(
            a["error"].as_str().unwrap().contains("PermissionDenied"),
            "{a}"
        );
    }
    for name in ["l_inside", "l_up", "l_abs"] {
        assert!(std::fs::symlink_metadata(ws.path(&format!("data/{name}"))).is_err());
    }
}

#[test]
fn symlinks_already_in_the_workspace_still_resolve_inside_it() {
    let ws = Ws::new();
    ws.write("docs/a.md", "alpha\n");
    std::os::unix::fs::symlink("../docs/a.md", ws.path("docs2")).ok();
    std::fs::create_dir_all(ws.path("src")).unwrap();
    std::os::unix::fs::symlink("../docs/a.md", ws.path("src/alias.md")).unwrap();
    let obs = call(
        reference_host(),
        &ws,
        "file_view",
        &view_args("src/alias.md"),
        &READ_ALL,
    );
    let out = expect_ok(&obs);
    assert!(out.to_string().contains("alpha"), "{out:#}");
}

// ---- deadlines hold whatever the guest waits on ----

fn assert_timeout_soon(obs: &Value, started: Instant) {
    expect_error(obs, "error", "timeout");
    // 1 s deadline; generous for a loaded 2-core machine, far below 30 s.
    assert!(
        started.elapsed() < Duration::from_secs(6),
        "took {:?}",
        started.elapsed()
    );
}

#[test]
fn a_sleep_ends_at_the_deadline() {
    let started = Instant::now();
    let obs = call_with(
        hostile_host(),
        &Ws::new(),
        "sleep",
        r#"{"ms":30000}"#,
        &NOTHING,
        &timeout_ms(1000),
    );
    assert_timeout_soon(&obs, started);
    assert!(obs["usage"]["wall_time_us"].as_u64().unwrap() >= 1_000_000);
}

#[test]
fn a_poll_ends_at_the_deadline() {
    let started = Instant::now();
    let obs = call_with(
        hostile_host(),
        &Ws::new(),
        "poll_sleep",
        r#"{"ms":30000}"#,
        &NOTHING,
        &timeout_ms(1000),
    );
    assert_timeout_soon(&obs, started);
}

#[test]
fn short_sleeps_still_work() {
    let obs = call_with(
        hostile_host(),
        &Ws::new(),
        "sleep",
        r#"{"ms":50}"#,
        &NOTHING,
        &timeout_ms(5000),
    );
    assert!(expect_ok(&obs)["slept_ms"].as_u64().unwrap() >= 50);
    let obs = call_with(
        hostile_host(),
        &Ws::new(),
        "poll_sleep",
        r#"{"ms":50}"#,
        &NOTHING,
        &timeout_ms(5000),
    );
    assert!(expect_ok(&obs)["slept_ms"].as_u64().unwrap() >= 50);
}

#[test]
fn a_sleeping_call_is_cancelled_promptly() {
    let ws = Ws::new();
    let session = session_at(
        ws.dir.path(),
        &Allow {
            read: &[],
            write: &[],
            ..Allow::default()
        },
    );
    let took = cancelled_after(
        hostile_host(),
        &session,
        "sleep",
        r#"{"ms":30000}"#,
        &timeout_ms(30_000),
        Duration::from_millis(300),
    );
    assert!(took < Duration::from_secs(5), "{took:?}");
}

#[test]
fn a_describe_that_sleeps_is_a_load_problem_within_seconds() {
    let started = Instant::now();
    let (names, problems) = within(Duration::from_secs(90), "loading tp_slow_describe", || {
        let catalog = Catalog::load(
            sandbox(),
            &[Source::File(test_plugin("tp_slow_describe"))],
            &|_, _| {},
        );
        let names: Vec<String> = catalog.tools().map(|t| t.descriptor.name.clone()).collect();
        let problems: Vec<String> = catalog.problems().iter().map(|p| p.to_string()).collect();
        (names, problems)
    });
    let elapsed = started.elapsed();
    assert!(names.is_empty(), "{names:?}");
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].contains(&format!(
            "did not answer within {} s",
            DESCRIBE_TIMEOUT.as_secs()
        )),
        "{problems:?}"
    );
    assert!(elapsed >= DESCRIBE_TIMEOUT, "{elapsed:?}");
    assert!(elapsed < DESCRIBE_TIMEOUT * 3, "{elapsed:?}");
}

fn mkfifo(path: &std::path::Path) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let status = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("running mkfifo");
    assert!(status.success());
}

#[test]
fn file_view_of_a_fifo_is_refused_before_it_is_opened() {
    let ws = Ws::new();
    mkfifo(&ws.path("src/fifo"));
    std::os::unix::fs::symlink("fifo", ws.path("src/to_fifo")).unwrap();
    let dir = ws.dir.path().to_path_buf();
    let started = Instant::now();
    let observations = within(Duration::from_secs(60), "file_view of a FIFO", move || {
        ["src/fifo", "src/to_fifo"].map(|path| {
            let session = session_at(
                &dir,
                &Allow {
                    read: &["."],
                    write: &[],
                    ..Allow::default()
                },
            );
            call_opts(
                reference_host(),
                &session,
                "file_view",
                &view_args(path),
                &timeout_ms(2000),
            )
        })
    });
    for obs in &observations {
        let err = expect_error(obs, "error", "invalid_arguments");
        let message = err["message"].as_str().unwrap();
        assert!(message.contains("named pipe (FIFO)"), "{message}");
        assert_eq!(err["field"], "/path");
        assert_eq!(err["correctable"], true);
    }
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn a_guest_open_of_a_fifo_is_refused_not_blocked() {
    let ws = Ws::new();
    mkfifo(&ws.path("src/fifo"));
    let dir = ws.dir.path().to_path_buf();
    let started = Instant::now();
    let obs = within(Duration::from_secs(60), "open_raw of a FIFO", move || {
        let session = session_at(
            &dir,
            &Allow {
                read: &["."],
                write: &[],
                ..Allow::default()
            },
        );
        call_opts(
            hostile_host(),
            &session,
            "open_raw",
            r#"{"path":"src/fifo"}"#,
            &timeout_ms(1000),
        )
    });
    let out = expect_ok(&obs);
    assert_eq!(out["data"], Value::Null, "{out:#}");
    assert!(
        out["error"].as_str().unwrap().contains("PermissionDenied"),
        "{out:#}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    // A regular file through the same tool still opens.
    ws.write("src/plain.txt", "plain");
    let obs = call(
        hostile_host(),
        &ws,
        "open_raw",
        r#"{"path":"src/plain.txt"}"#,
        &READ_ALL,
    );
    assert_eq!(expect_ok(&obs)["data"], "plain");
}

// ---- dry-runs and probes have no effect ----

#[test]
fn a_plan_cannot_write_even_with_a_write_grant() {
    let db = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(db.path().join("r.sqlite"), Duration::from_secs(3600)).unwrap();
    let host = host_with(&[Source::File(test_plugin("tp_effects"))])
        .with_records(EffectGuard::new(Arc::new(store), b"test-host-key"));
    let ws = Ws::new();
    ws.write("data/log.txt", "first\n");
    let before = ws.snapshot();
    let session = session_at(
        ws.dir.path(),
        &Allow {
            read: &[],
            write: &["."],
            ..Allow::default()
        },
    );
    let args = r#"{"path":"data/log.txt","line":"second"}"#;
    let plan = serde_json::to_value(host.run(
        &session,
        Call::new("sneaky_append", args, &CallOptions::default()).plan(),
    ))
    .unwrap();
    assert_valid_observation(&plan);
    let out = expect_ok(&plan);
    let warnings = out["plan"]["warnings"].to_string();
    assert!(warnings.contains("write attempt: failed"), "{out:#}");
    assert_eq!(ws.snapshot(), before, "the dry-run wrote");

    // The call itself, with the same grant, does write.
    let opts = CallOptions {
        idempotency: Some(KeySource::Explicit("sneaky-1".into())),
        ..CallOptions::default()
    };
    let obs =
        serde_json::to_value(host.run(&session, Call::new("sneaky_append", args, &opts))).unwrap();
    expect_ok(&obs);
    assert_eq!(ws.read("data/log.txt"), b"first\nsecond\n");
}

#[test]
fn a_plan_cannot_reach_the_network_even_with_a_granted_origin() {
    let server = crate::network::Server::start(crate::network::ok_text("hi"), 4);
    let db = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(db.path().join("r.sqlite"), Duration::from_secs(3600)).unwrap();
    let host = host_with(&[Source::File(test_plugin("tp_effects"))])
        .with_records(EffectGuard::new(Arc::new(store), b"test-host-key"));
    let ws = Ws::new();
    let origin = server.origin();
    let session = session_allowing(
        &ws,
        &Allow {
            net: &[origin.as_str()],
            ..Allow::default()
        },
    );
    let args = serde_json::json!({
        "authority": server.origin().trim_start_matches("http://")
    })
    .to_string();
    let plan = serde_json::to_value(host.run(
        &session,
        Call::new("sneaky_get", &args, &CallOptions::default()).plan(),
    ))
    .unwrap();
    assert_valid_observation(&plan);
    let out = expect_ok(&plan);
    let warnings = out["plan"]["warnings"].to_string();
    assert!(
        warnings.contains("network attempt: failed: ErrorCode::HttpRequestDenied"),
        "{out:#}"
    );
    assert_eq!(server.hits(), 0, "the dry-run reached the server");

    // The call itself, with the same grant, does reach it.
    let opts = CallOptions {
        idempotency: Some(KeySource::Explicit("get-1".into())),
        ..CallOptions::default()
    };
    let obs =
        serde_json::to_value(host.run(&session, Call::new("sneaky_get", &args, &opts))).unwrap();
    assert_eq!(expect_ok(&obs)["status"], 200, "{obs:#}");
    assert_eq!(server.hits(), 1);
}
