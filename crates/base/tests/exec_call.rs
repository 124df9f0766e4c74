//! The bridge from a call's grant to the exec sandbox
//! (`toolhost_base::exec_call::CallExec`), with real programs under bubblewrap:
//! what is checked before anything starts (programs as the intersection of
//! the tool's and the caller's, working directory, environment) and the
//! call's deadline bounding a run. The same checks through a plugin are in
//! `tests/integration/run_command.rs`.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use toolhost_base::exec_call::{CallExec, Command, CommandError};
use toolhost_base::opendir::OpenDir;
use toolhost_exec::Executor;

fn executor() -> Arc<Executor> {
    let e = toolhost_base::exec_call::default_executor();
    if let Err(err) = e.probe() {
        panic!("the exec sandbox cannot run on this machine: {err}");
    }
    e
}

/// A workspace under `CARGO_TARGET_TMPDIR` (the sandbox's `/tmp` is its own).
fn workspace() -> tempfile::TempDir {
    let d = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    std::fs::create_dir(d.path().join("sub")).unwrap();
    d
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// A call whose tool declares `declared`, whose caller grants `granted`,
/// with the workspace root mounted (writable or not).
fn call_exec(ws: &Path, declared: &[&str], granted: &[&str], writable: bool) -> CallExec {
    let root = OpenDir::open(ws).unwrap();
    CallExec::new(
        executor(),
        "test_tool",
        &strings(declared),
        &strings(granted),
        vec![(root, "/workspace".to_string(), writable)],
        16 * 1024,
    )
}

fn cmd(argv: &[&str]) -> Command {
    Command {
        argv: strings(argv),
        ..Command::default()
    }
}

fn soon() -> Instant {
    Instant::now() + Duration::from_secs(30)
}

#[test]
fn only_programs_both_declared_and_granted_start() {
    let ws = workspace();
    // The tool runs anything the caller grants: `sh` is not granted.
    let c = call_exec(ws.path(), &["any"], &["true"], true);
    let e = c
        .run(cmd(&["sh", "-c", "touch /workspace/made"]), soon(), None)
        .unwrap_err();
    match &e {
        CommandError::Denied(m) => assert!(m.contains("`sh`"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert!(!ws.path().join("made").exists(), "nothing started");
    assert_eq!(
        c.run(cmd(&["true"]), soon(), None).unwrap().exit_code,
        Some(0)
    );
    // The caller grants sh, the tool declares only true: no sh either.
    let c = call_exec(ws.path(), &["true"], &["sh", "true"], true);
    assert!(matches!(
        c.run(cmd(&["sh", "-c", "true"]), soon(), None),
        Err(CommandError::Denied(_))
    ));
    assert_eq!(
        c.run(cmd(&["true"]), soon(), None).unwrap().exit_code,
        Some(0)
    );
    assert_eq!(c.programs_run(), ["true"]);
    // A tool that declares nothing, a caller that grants nothing.
    let e = call_exec(ws.path(), &[], &["true"], false)
        .run(cmd(&["true"]), soon(), None)
        .unwrap_err();
    assert!(e.to_string().contains("declares no programs"), "{e}");
    let e = call_exec(ws.path(), &["any"], &[], false)
        .run(cmd(&["true"]), soon(), None)
        .unwrap_err();
    assert!(e.to_string().contains("granted no programs"), "{e}");
    // The same program by absolute path is the same program.
    let c = call_exec(ws.path(), &["any"], &["/usr/bin/true"], false);
    assert_eq!(
        c.run(cmd(&["true"]), soon(), None).unwrap().exit_code,
        Some(0)
    );
}

#[test]
fn the_working_directory_is_a_checked_workspace_path() {
    let ws = workspace();
    let c = call_exec(ws.path(), &["any"], &["sh"], false);
    let pwd = |cwd: Option<&str>| {
        c.run(
            Command {
                cwd: cwd.map(str::to_string),
                ..cmd(&["sh", "-c", "pwd"])
            },
            soon(),
            None,
        )
    };
    assert_eq!(pwd(None).unwrap().stdout, b"/workspace\n");
    assert_eq!(pwd(Some("sub")).unwrap().stdout, b"/workspace/sub\n");
    assert_eq!(
        pwd(Some("/workspace/sub")).unwrap().stdout,
        b"/workspace/sub\n"
    );
    assert_eq!(
        pwd(Some("sub/../sub/.")).unwrap().stdout,
        b"/workspace/sub\n"
    );
    for outside in ["..", "../x", "sub/../../etc", "/etc", "/tmp"] {
        assert!(
            matches!(pwd(Some(outside)), Err(CommandError::Invalid(_))),
            "{outside}"
        );
    }
    // Only `sub` mounted: the root is not the call's.
    let sub = OpenDir::open(&ws.path().join("sub")).unwrap();
    let c = CallExec::new(
        executor(),
        "t",
        &strings(&["any"]),
        &strings(&["sh"]),
        vec![(sub, "/workspace/sub".to_string(), false)],
        4096,
    );
    let e = c
        .run(
            Command {
                cwd: Some(".".into()),
                ..cmd(&["sh", "-c", "pwd"])
            },
            soon(),
            None,
        )
        .unwrap_err();
    assert!(
        matches!(&e, CommandError::Denied(m) if m.contains("outside the call's granted paths (sub)")),
        "{e:?}"
    );
    // Without a cwd it starts in the one mount.
    let out = c.run(cmd(&["sh", "-c", "pwd"]), soon(), None).unwrap();
    assert_eq!(out.stdout, b"/workspace/sub\n");
}

#[test]
fn only_allow_listed_variables_reach_the_program() {
    let ws = workspace();
    let c = call_exec(ws.path(), &["any"], &["sh"], false);
    let run = |env: &[(&str, &str)]| {
        c.run(
            Command {
                env: env
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                ..cmd(&["sh", "-c", "echo \"$NO_COLOR\""])
            },
            soon(),
            None,
        )
    };
    assert_eq!(run(&[("NO_COLOR", "1")]).unwrap().stdout, b"1\n");
    for name in ["LD_PRELOAD", "PATH", "BASH_ENV", "PYTHONPATH"] {
        let e = run(&[(name, "/workspace/x")]).unwrap_err();
        assert!(
            matches!(&e, CommandError::Denied(m) if m.contains(name)),
            "{name}: {e:?}"
        );
    }
}

#[test]
fn the_calls_deadline_bounds_every_run() {
    let ws = workspace();
    let c = call_exec(ws.path(), &["any"], &["sleep"], false);
    let start = Instant::now();
    let out = c
        .run(
            Command {
                timeout: Some(Duration::from_secs(60)),
                ..cmd(&["sleep", "30"])
            },
            Instant::now() + Duration::from_secs(1),
            None,
        )
        .unwrap();
    assert!(out.timed_out, "{out:?}");
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
    // A past deadline starts nothing that could outlive it.
    let out = c.run(cmd(&["sleep", "30"]), Instant::now(), None).unwrap();
    assert!(out.timed_out);
}
