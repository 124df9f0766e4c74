//! One call's native programs: the bridge from a call's grant to the OS
//! sandbox of [`toolhost_exec`].
//!
//! The `exec` import of the plugin contract (linked in `crate::sandbox`)
//! hands every `run` to [`CallExec::run`], which holds what the call was
//! granted and nothing else:
//!
//! - **programs**: those the tool declares in `needs.exec` *and* the
//!   caller's token grants (`exec` caveat with the `exec` right), compared
//!   after both are resolved on the host's `PATH` (`any` in `needs.exec`:
//!   whatever the token grants). `argv[0]` is checked against them before
//!   any process starts; anything else is `denied`, naming the program. A
//!   shell is a program like any other: `sh -c …` runs only if `sh` is
//!   granted;
//! - **mounts**: exactly the call's Wasm preopens (the same open directory,
//!   the same guest path under `/workspace`, read-only or read-write alike);
//! - **working directory**: a guest path under `/workspace` or relative to
//!   it, normalized lexically (no `..` out of the workspace) and inside one
//!   of the mounts, else `invalid` / `denied`. Inside the sandbox only the
//!   mounts exist, so a link that points out of them leads nowhere;
//! - **environment**: the sandbox's cleared one plus variables whose names
//!   are in [`ENV_ALLOWED`]; any other name is `denied`;
//! - **time**: the command's timeout, never past the call's deadline; the
//!   deadline and the call's cancellation kill the whole process tree;
//! - **output**: each stream clipped (head, key lines, tail) to a share of
//!   the call's output limit, ANSI escapes and progress rewrites stripped.
//!
//! Each program run is remembered ([`CallExec::programs_run`]) for the
//! observation's `process` provenance.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::opendir::OpenDir;
use crate::paths::GUEST_ROOT;
use toolhost_exec::{
    AllowedPrograms, Cancel, ExecError, ExecMount, ExecRequest, Executor, DEFAULT_MAX_OUTPUT_BYTES,
};

/// Names of the environment variables a plugin may add to a program's
/// cleared environment: knobs of test runners and build tools that change
/// output or verbosity, not what runs or where it looks for code
/// (`LD_PRELOAD`, `PATH`, `PYTHONPATH`, `BASH_ENV` and the like are not
/// here).
pub const ENV_ALLOWED: &[&str] = &[
    "CI",
    "NO_COLOR",
    "TERM",
    "TZ",
    "LC_ALL",
    "RUST_BACKTRACE",
    "RUST_LOG",
    "RUST_TEST_THREADS",
    "CARGO_TERM_COLOR",
    "CARGO_INCREMENTAL",
    "PYTHONDONTWRITEBYTECODE",
    "PYTHONUNBUFFERED",
    "PYTHONHASHSEED",
    "PYTEST_ADDOPTS",
    "NODE_ENV",
];

use crate::descriptor::ANY_PROGRAM;

/// One program a plugin asks to run (the `exec` import's `command`).
#[derive(Debug, Clone, Default)]
pub struct Command {
    /// The program and its arguments: never a command line.
    pub argv: Vec<String>,
    /// Guest path under the workspace root, or relative to it; `None`: the
    /// workspace root (or, when the root is not mounted, the first mount;
    /// with no mount, the sandbox's private `/tmp`).
    pub cwd: Option<String>,
    pub stdin: Vec<u8>,
    pub env: Vec<(String, String)>,
    /// `None`: the rest of the call's deadline.
    pub timeout: Option<Duration>,
}

/// How a program ended. A non-zero exit is a completed run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completed {
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    /// The command's timeout, the call's deadline or its cancellation
    /// ended it.
    pub timed_out: bool,
    /// The call's deadline (not a shorter timeout of the command) ended it:
    /// the call itself has run out of time.
    pub deadline_reached: bool,
    pub duration: Duration,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub stdout_omitted_bytes: u64,
    pub stderr_omitted_bytes: u64,
}

/// Why a program did not run (the `exec` import's `exec-error`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommandError {
    /// Not granted (the message names the program, variable or path).
    #[error("{0}")]
    Denied(String),
    /// Programs cannot run on this host; says what to install.
    #[error("{0}")]
    Unavailable(String),
    /// The command is malformed.
    #[error("{0}")]
    Invalid(String),
}

/// What one call may run, and where: built by the pipeline for a call
/// whose tool declares `needs.exec`, shared with the sandbox for the
/// call's duration.
#[derive(Debug)]
pub struct CallExec {
    executor: Arc<Executor>,
    tool: String,
    /// The tool's `needs.exec`.
    declared: Vec<String>,
    /// The caller's programs (the token's `exec` caveat).
    granted: Vec<String>,
    mounts: Vec<(OpenDir, String, bool)>,
    max_stream_bytes: usize,
    programs: Mutex<Option<AllowedPrograms>>,
    runs: Mutex<Vec<String>>,
}

impl CallExec {
    /// The programs of one call: `declared` (the tool's `needs.exec`) ∩
    /// `granted` (the caller's), run with `mounts` (`(dir, guest path,
    /// writable)`, the call's preopens). Each stream keeps at most
    /// `max_stream_bytes`.
    pub fn new(
        executor: Arc<Executor>,
        tool: &str,
        declared: &[String],
        granted: &[String],
        mounts: Vec<(OpenDir, String, bool)>,
        max_stream_bytes: usize,
    ) -> CallExec {
        CallExec {
            executor,
            tool: tool.to_owned(),
            declared: declared.to_vec(),
            granted: granted.to_vec(),
            mounts,
            max_stream_bytes: max_stream_bytes.clamp(1024, DEFAULT_MAX_OUTPUT_BYTES * 4),
            programs: Mutex::new(None),
            runs: Mutex::new(Vec::new()),
        }
    }

    /// Whether any mount is writable.
    pub fn writes(&self) -> bool {
        self.mounts.iter().any(|(_, _, w)| *w)
    }

    /// The programs this call ran (`argv[0]` as given), in order, once each.
    pub fn programs_run(&self) -> Vec<String> {
        self.runs.lock().map(|r| r.clone()).unwrap_or_default()
    }

    /// The call's allowed programs, resolved once. A name that is not on
    /// the host's `PATH` (or a path that is not an executable) allows
    /// nothing.
    fn allowed(&self) -> AllowedPrograms {
        let mut slot = self.programs.lock().unwrap_or_else(|e| e.into_inner());
        slot.get_or_insert_with(|| {
            let resolve = |names: &[String]| {
                let mut set = BTreeSet::new();
                for n in names {
                    if let Ok(AllowedPrograms::Only(one)) = self.executor.resolve_programs([n]) {
                        set.extend(one);
                    }
                }
                AllowedPrograms::Only(set)
            };
            let granted = resolve(&self.granted);
            if self.declared.iter().any(|d| d == ANY_PROGRAM) {
                granted
            } else {
                granted.intersect(&resolve(&self.declared))
            }
        })
        .clone()
    }

    /// Runs `cmd` under the call's grant. `deadline` is the call's;
    /// `cancel` its cancellation. Blocks until every process has ended.
    pub fn run(
        &self,
        cmd: Command,
        deadline: Instant,
        cancel: Option<&Cancel>,
    ) -> Result<Completed, CommandError> {
        let program = cmd.argv.first().cloned().unwrap_or_default();
        if self.declared.is_empty() {
            return Err(CommandError::Denied(format!(
                "`{}` declares no programs (needs.exec), so it may run none: `{program}` was not started",
                self.tool
            )));
        }
        if self.granted.is_empty() {
            return Err(CommandError::Denied(format!(
                "this call was granted no programs (the token has no `exec` caveat, or not the `exec` right): `{program}` was not started"
            )));
        }
        let env_allowed: BTreeSet<String> = ENV_ALLOWED.iter().map(|s| s.to_string()).collect();
        if let Some((name, _)) = cmd.env.iter().find(|(n, _)| !env_allowed.contains(n)) {
            return Err(CommandError::Denied(format!(
                "environment variable `{name}` may not be set (allowed: {})",
                ENV_ALLOWED.join(", ")
            )));
        }
        let cwd = self.cwd(cmd.cwd.as_deref())?;
        let left = deadline.saturating_duration_since(Instant::now());
        let by_deadline = cmd.timeout.is_none_or(|t| t >= left);
        let timeout = if by_deadline {
            left
        } else {
            cmd.timeout.unwrap_or(left)
        };
        let mut req = ExecRequest::new(cmd.argv);
        req.cwd = cwd;
        req.stdin = cmd.stdin;
        req.env = cmd.env;
        req.env_allowed = env_allowed;
        req.timeout = timeout.max(Duration::from_millis(1));
        req.max_stdout_bytes = self.max_stream_bytes;
        req.max_stderr_bytes = self.max_stream_bytes;
        req.programs = self.allowed();
        for (dir, guest, writable) in &self.mounts {
            let fd = dir
                .try_clone_fd()
                .map_err(|e| CommandError::Unavailable(format!("a mount of the call: {e}")))?;
            req.mounts.push(ExecMount::fd(fd, guest.clone(), *writable));
        }
        let out = self.executor.run(&req, cancel).map_err(|e| match e {
            ExecError::Denied { message, .. } => CommandError::Denied(message),
            ExecError::InvalidRequest { .. } => CommandError::Invalid(e.to_string()),
            ExecError::Unavailable(_) => CommandError::Unavailable(e.to_string()),
            ExecError::Setup(_) | ExecError::Io { .. } => CommandError::Invalid(e.to_string()),
        })?;
        if let Ok(mut runs) = self.runs.lock() {
            if !runs.contains(&program) {
                runs.push(program);
            }
        }
        Ok(Completed {
            exit_code: out.exit_code,
            signal: out.signal,
            timed_out: out.timed_out || out.cancelled,
            deadline_reached: out.timed_out && by_deadline,
            duration: out.duration,
            stdout_omitted_bytes: out.stdout.omitted_bytes,
            stderr_omitted_bytes: out.stderr.omitted_bytes,
            stdout: out.stdout.text.into_bytes(),
            stderr: out.stderr.text.into_bytes(),
        })
    }

    /// The sandbox path of `cwd` (see [`Command::cwd`]), checked: under
    /// the workspace, normalized, inside a mount.
    fn cwd(&self, cwd: Option<&str>) -> Result<String, CommandError> {
        let Some(cwd) = cwd else {
            if let Some((_, guest, _)) = self
                .mounts
                .iter()
                .find(|(_, g, _)| g == GUEST_ROOT)
                .or(self.mounts.first())
            {
                return Ok(guest.clone());
            }
            return Ok("/tmp".to_owned());
        };
        let rel = if cwd == GUEST_ROOT {
            ""
        } else if let Some(rest) = cwd
            .strip_prefix(GUEST_ROOT)
            .and_then(|r| r.strip_prefix('/'))
        {
            rest
        } else if cwd.starts_with('/') {
            return Err(CommandError::Invalid(format!(
                "cwd `{cwd}` is outside the workspace: give a path relative to it or under {GUEST_ROOT}"
            )));
        } else {
            cwd
        };
        let rel =
            crate::paths::RelPath::parse(if rel.is_empty() { "." } else { rel }).map_err(|e| {
                CommandError::Invalid(format!(
                    "cwd `{cwd}` is not a workspace path: {}",
                    e.message
                ))
            })?;
        let target = rel.guest();
        let inside = |m: &str| target == m || target.starts_with(&format!("{m}/"));
        if self.mounts.iter().any(|(_, g, _)| inside(g)) {
            return Ok(target);
        }
        let shown = rel.as_str();
        let granted: Vec<String> = self
            .mounts
            .iter()
            .map(|(_, g, _)| {
                g.strip_prefix(GUEST_ROOT)
                    .map(|r| r.trim_start_matches('/'))
                    .filter(|r| !r.is_empty())
                    .unwrap_or(".")
                    .to_owned()
            })
            .collect();
        Err(CommandError::Denied(format!(
            "cwd `{shown}` is outside the call's granted paths ({})",
            if granted.is_empty() {
                "none".to_owned()
            } else {
                granted.join(", ")
            }
        )))
    }
}

/// The host-side executor shared by every call (bubblewrap is probed once).
pub fn default_executor() -> Arc<Executor> {
    static EXEC: std::sync::OnceLock<Arc<Executor>> = std::sync::OnceLock::new();
    EXEC.get_or_init(|| Arc::new(Executor::default())).clone()
}
