//! Exec sandbox benchmark: `cargo bench -p toolhost --bench exec`.
//!
//! Runs `true` through the whole exec path (checks, bubblewrap with every
//! namespace, the pids cgroup or rlimits, the handshake, capture, reaping)
//! and, interleaved in the same loop so both see the same machine load, a
//! bare fork+exec of `true` with `std::process::Command`. Prints the median
//! and p90 of both and the overhead (difference of the medians, and the
//! median of the per-pair differences). Also times a run with a read-only
//! and a writable workspace mount, as a real call would have, and one at
//! niceness 0 (the default 10 yields the CPU to any competing work, which
//! on a busy machine is scheduling delay rather than sandbox cost).
//! And the whole tool path: `run_command ["true"]` through `Host::run`
//! (a session under a token granting `true` and reading the workspace:
//! token gates, schema, a fresh Wasm instance of the reference tools, the
//! `exec` import, the sandbox, the observation), interleaved with the rest.
//! Target: sandbox overhead ≤ 10 ms median.
//!
//! `EXEC_BENCH_ITERS` sets the number of pairs (default 300).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use toolhost::pipeline::{Call, CallOptions, Host};
use toolhost::plugin::catalog::{Catalog, Source};
use toolhost::policy::capability::{Caveat, RootKey, Token};
use toolhost::policy::session::Session;
use toolhost::sandbox::{Sandbox, SandboxConfig};
use toolhost_exec::{ExecMount, ExecRequest, Executor};

const WARMUP: usize = 20;

struct Stats {
    median: Duration,
    p90: Duration,
}

fn stats(mut samples: Vec<Duration>) -> Stats {
    samples.sort_unstable();
    Stats {
        median: samples[samples.len() / 2],
        p90: samples[samples.len() * 9 / 10],
    }
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

fn main() {
    let iters: usize = std::env::var("EXEC_BENCH_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let exec = Executor::default();
    let info = match exec.probe() {
        Ok(i) => i,
        Err(e) => {
            eprintln!("cannot benchmark: {e}");
            std::process::exit(1);
        }
    };
    let programs = exec.resolve_programs(["true"]).expect("true is on PATH");
    let toolhost_exec::AllowedPrograms::Only(set) = &programs else {
        unreachable!()
    };
    let true_path = set.iter().next().expect("one program").clone();
    let mut req = ExecRequest::new([true_path.to_string_lossy().into_owned()]);
    req.programs = programs.clone();

    // The same at niceness 0, like the bare process: the default niceness
    // 10 adds scheduling delay when other work competes for the CPU.
    let mut at_nice0 = ExecRequest::new([true_path.to_string_lossy().into_owned()]);
    at_nice0.programs = programs.clone();
    at_nice0.limits.nice = 0;

    let ws = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(ws.path().join("out")).expect("mkdir");
    let mut with_mounts = ExecRequest::new([true_path.to_string_lossy().into_owned()]);
    with_mounts.programs = programs;
    with_mounts.mounts = vec![
        ExecMount::path(ws.path(), "/workspace", false),
        ExecMount::path(ws.path().join("out"), "/workspace/out", true),
    ];
    with_mounts.cwd = "/workspace".into();

    let sandboxed = |r: &ExecRequest| {
        let t = Instant::now();
        let o = exec.run(r, None).expect("run");
        let d = t.elapsed();
        assert_eq!(o.exit_code, Some(0), "{}", o.stderr.text);
        d
    };
    let bare = || {
        let t = Instant::now();
        let s = Command::new(&true_path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("spawn true");
        let d = t.elapsed();
        assert!(s.success());
        d
    };

    // The tool path: the reference tools, a session granting `true`.
    let sandbox = Sandbox::new(&SandboxConfig::default()).expect("sandbox");
    let catalog = Catalog::load(&sandbox, &[Source::reference()], &|_, _| {});
    let host = Host::new(sandbox, catalog);
    let key = RootKey::from_bytes([5; 32]);
    let caveats: Vec<Caveat> = ["tool=run_command", "right=read,exec", "read=.", "exec=true"]
        .iter()
        .map(|c| c.parse().expect("caveat"))
        .collect();
    let token = Token::mint(&key, &caveats).expect("token");
    let session = Session::open(
        &key,
        &token.encode(),
        toolhost::paths::Workspace::open(ws.path()).expect("workspace"),
    )
    .expect("session");
    let opts = CallOptions::default();
    let tool_call = || {
        let t = Instant::now();
        let obs = host.run(
            &session,
            Call::new("run_command", r#"{"argv":["true"]}"#, &opts),
        );
        let d = t.elapsed();
        assert!(obs.is_ok(), "{}", serde_json::to_string(&obs).unwrap());
        d
    };

    for _ in 0..WARMUP {
        sandboxed(&req);
        bare();
        tool_call();
    }
    let mut sb = Vec::with_capacity(iters);
    let mut raw = Vec::with_capacity(iters);
    let mut mounted = Vec::with_capacity(iters);
    let mut nice0 = Vec::with_capacity(iters);
    let mut diffs = Vec::with_capacity(iters);
    let mut tool = Vec::with_capacity(iters);
    let mut tool_diffs = Vec::with_capacity(iters);
    for _ in 0..iters {
        let a = sandboxed(&req);
        let b = bare();
        let c = sandboxed(&with_mounts);
        let n = sandboxed(&at_nice0);
        let w = tool_call();
        tool_diffs.push(w.saturating_sub(b));
        tool.push(w);
        diffs.push(a.saturating_sub(b));
        sb.push(a);
        raw.push(b);
        mounted.push(c);
        nice0.push(n);
    }
    let (s, r, m, d) = (stats(sb), stats(raw), stats(mounted), stats(diffs));
    let n0 = stats(nice0);
    let (w, wd) = (stats(tool), stats(tool_diffs));

    println!(
        "{} ({:?}), {iters} interleaved samples each",
        info.version, info.bound
    );
    println!("{:<48} {:>10} {:>10}", "", "median", "p90");
    println!(
        "{:<48} {:>10} {:>10}",
        "bare fork+exec of `true`",
        ms(r.median),
        ms(r.p90)
    );
    println!(
        "{:<48} {:>10} {:>10}",
        "sandboxed `true` (no mounts)",
        ms(s.median),
        ms(s.p90)
    );
    println!(
        "{:<48} {:>10} {:>10}",
        "sandboxed `true` (ro + rw workspace mounts)",
        ms(m.median),
        ms(m.p90)
    );
    println!(
        "{:<48} {:>10} {:>10}",
        "sandboxed `true` at niceness 0 (no mounts)",
        ms(n0.median),
        ms(n0.p90)
    );
    println!(
        "{:<48} {:>10} {:>10}",
        "run_command [\"true\"] round trip (Host::run)",
        ms(w.median),
        ms(w.p90)
    );
    println!(
        "run_command overhead over bare fork+exec: median difference {} (per-pair median {}, \
         p90 {}); target ≤ 10 ms",
        ms(w.median.saturating_sub(r.median)),
        ms(wd.median),
        ms(wd.p90)
    );
    println!(
        "overhead: median difference {} (per-pair median {}, p90 {}); at niceness 0 {}; \
         target ≤ 10 ms",
        ms(s.median.saturating_sub(r.median)),
        ms(d.median),
        ms(d.p90),
        ms(n0.median.saturating_sub(r.median))
    );
}
