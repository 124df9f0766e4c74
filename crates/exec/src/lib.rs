//! Running one native program safely: an OS sandbox built with bubblewrap.
//!
//! Wasm tools cannot run `cargo`, `pytest` or `make`; this crate lets the
//! host run such a program on their behalf, inside a sandbox derived from the
//! same grants as the Wasm preopens. Given an [`ExecRequest`] (argv, the
//! allowed programs, the mounts, the environment, the limits) an
//! [`Executor`] checks it, builds the `bwrap` command line (mounts from open
//! directory descriptors, a minimal `/etc`, fresh namespaces), installs a
//! seccomp filter, bounds the process tree (a pids cgroup or rlimits, CPU,
//! memory, files, niceness, a wall-clock deadline, [`Cancel`]), captures
//! stdout and stderr within a budget ([`Captured`]: head, error-looking
//! lines, tail, control sequences stripped with [`text::strip_control`]) and
//! reaps every process before it returns an [`ExecOutcome`] or a typed
//! [`ExecError`].
//!
//! What it does not do: it knows nothing of wasmtime, capability tokens,
//! descriptors or observations. Deciding *what* a call is granted (which
//! programs, which directories, read-only or writable) is the caller's job;
//! in toolhost the host's `exec` import of the plugin contract turns a
//! call's grant into an [`ExecRequest`] and the [`ExecOutcome`] into the
//! tool's answer. It is plain Rust over Linux system calls and the `bwrap`
//! binary (Debian package `bubblewrap`), and runs on Linux only.
//!
//! ```no_run
//! use std::time::Duration;
//! use toolhost_exec::{ExecMount, ExecRequest, Executor};
//!
//! let exec = Executor::default();
//! let mut req = ExecRequest::new(["cargo", "test", "--quiet"]);
//! req.programs = exec.resolve_programs(["cargo"])?;
//! req.mounts.push(ExecMount::path("/home/me/project", "/workspace", true));
//! req.cwd = "/workspace".into();
//! req.timeout = Duration::from_secs(300);
//! let out = exec.run(&req, None)?;
//! println!("exit {:?}\n{}", out.exit_code, out.stdout.text);
//! # Ok::<(), toolhost_exec::ExecError>(())
//! ```
//!
//! # Checks before anything starts
//!
//! [`Executor::run`] refuses, before any process exists:
//! - an empty `argv`, NUL bytes, an `argv[0]` that is neither a bare name nor
//!   a normalized absolute path ([`ExecError::InvalidRequest`]);
//! - an `argv[0]` that does not resolve, on the host's `PATH`, to one of
//!   [`ExecRequest::programs`] ([`ExecError::Denied`], naming the program).
//!   Names resolve to the first executable on `PATH`, and the comparison is
//!   on that path, **not** on the symlink-resolved file: allowing `ls` on a
//!   busybox system must not allow `sh`, though both are links to the same
//!   file. A shell is just a program: `sh -c …` runs only if `sh` is allowed;
//! - an environment variable whose name is not in
//!   [`ExecRequest::env_allowed`] ([`ExecError::Denied`]);
//! - a working directory outside the mounts and the private `/tmp`, a mount
//!   point that is not a normalized absolute path or that would cover a
//!   system directory ([`ExecError::InvalidRequest`]).
//!
//! The allow-list governs what the *caller* may start. What that program
//! starts in turn (`make` running `cc`) is bounded by the sandbox, not by
//! the list.
//!
//! # The sandbox: deny by default
//!
//! Every run is a fresh `bwrap` sandbox. What a program gets, and nothing
//! else of the host:
//!
//! | resource | default |
//! |---|---|
//! | filesystem root | an empty tmpfs, read-only after setup |
//! | `/usr` | host's, read-only; `/bin`, `/sbin`, `/lib*` as the host has them (symlinks or read-only binds) |
//! | `/etc` | minimal: `passwd`, `group`, `hosts` synthesized; `ld.so.cache`, `ld.so.conf(.d)`, `nsswitch.conf`, `alternatives`, `localtime`, `protocols`, `services` read-only if present. No `shadow`, no `ssl`, no `resolv.conf` |
//! | workspace | only [`ExecRequest::mounts`], read-only or read-write each, from an open directory descriptor (`--bind-fd`) |
//! | `$HOME`, `/root`, other host paths | absent |
//! | `/tmp` | private tmpfs, [`ExecLimits::scratch_bytes`]; `HOME=/tmp/home` |
//! | `/dev` | `null`, `zero`, `full`, `random`, `urandom`, `tty`, `pts`; read-only except a private `/dev/shm` tmpfs |
//! | `/proc` | the sandbox's own PID namespace only |
//! | `/sys`, `/run`, `/var`, `/home` | absent |
//! | user | uid/gid 1000 (user `sandbox`) in a new user namespace, no capabilities, no further user namespaces (`--disable-userns` where bubblewrap has it), `no_new_privs` |
//! | system calls | a seccomp filter (`seccomp`): `symlink`/`symlinkat` fail with `EPERM`; another calling convention (i386, x32) kills the program |
//! | namespaces | new PID, IPC, UTS (`hostname` = `sandbox`), network, cgroup (if possible) and user |
//! | network | none: a loopback device of its own, no route out |
//! | environment | cleared; `PATH=/usr/local/bin:/usr/bin:/bin`, `HOME=/tmp/home`, `LANG=C.UTF-8`, plus allowed variables |
//! | stdin | [`ExecRequest::stdin`] (a sealed in-memory file), else `/dev/null` |
//! | stdout, stderr | captured; head, error-looking lines and tail kept ([`Captured`]), ANSI and progress rewrites stripped |
//! | terminal | none: a new session (`--new-session`) when the host has a controlling terminal; without one there is none to inherit, and no session is made (`setsid` costs 3–7 ms here: the kernel makes a scheduler autogroup per session) |
//! | CPU time, address space, file size, open files, core size | `RLIMIT_CPU`, `RLIMIT_AS`, `RLIMIT_FSIZE`, `RLIMIT_NOFILE`, `RLIMIT_CORE`=0 ([`ExecLimits`]) |
//! | processes | [`ExecLimits::processes`]: a pids cgroup, else `RLIMIT_NPROC` (see below) |
//! | scheduling | niceness [`ExecLimits::nice`] (10): the host's own work comes first |
//! | wall clock | [`ExecRequest::timeout`]; then the whole tree is killed |
//!
//! # Processes, deadline and cancellation
//!
//! A fork bomb is bounded by one of, in order of preference:
//! 1. a **pids cgroup** (v2 where the controller is delegated to us, else
//!    v1) created per run, its `pids.max` set and the sandbox's first
//!    process moved into it before that process may start the program;
//! 2. **`RLIMIT_NPROC`** set on that first process from outside (while
//!    bubblewrap waits on `--block-fd`). Since Linux 5.14 it counts the
//!    tasks of a uid *in a user namespace*, so in the sandbox's fresh user
//!    namespace it counts only the sandbox. It does not hold for a host
//!    running as root: the kernel exempts uid 0 from it.
//!
//! If neither is possible (root without a writable pids cgroup), every run
//! fails with [`ExecError::Unavailable`] rather than run unbounded.
//!
//! The deadline and [`Cancel`] kill the sandbox's PID namespace through a
//! pidfd of its init (killing a namespace's init kills every process in
//! it, whatever their process group or signal mask). Every run waits for
//! that init to end and reaps both it and bubblewrap, so no process of a
//! run survives the call and none is left a zombie. For that, the first
//! run makes the host process a child subreaper (`PR_SET_CHILD_SUBREAPER`):
//! bubblewrap's monitor exits as soon as the program does, orphaning the
//! init while it empties the namespace, and the host must inherit it
//! instead of pid 1. A side effect: any other orphaned descendant of the
//! host is reparented to it too (toolhost starts no other process).
//!
//! # Why not Landlock as a second wall
//!
//! bubblewrap has no Landlock option, and a Landlock domain applied in the
//! host before `bwrap` starts forbids the mounts bwrap has to make. A
//! ruleset would have to be applied by a helper *inside* the sandbox
//! between setup and the program: a second executable to ship and trust.
//! The walls here are the mount namespace (nothing else of the host is
//! there to reach), the user namespace without capabilities, and
//! `no_new_privs`.

mod bound;
mod bwrap;
mod output;
mod program;
mod run;
mod seccomp;
pub mod text;

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

pub use bound::ProcessBound;
pub use bwrap::BwrapInfo;
pub use output::Captured;

/// The uid and gid programs run as inside the sandbox (user `sandbox`).
pub(crate) const SANDBOX_UID: u32 = 1000;

/// `HOME` inside the sandbox (on the private `/tmp`).
pub(crate) const SANDBOX_HOME: &str = "/tmp/home";

/// `PATH` inside the sandbox.
pub(crate) const SANDBOX_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// How to install bubblewrap, quoted in [`ExecError::Unavailable`].
pub(crate) const INSTALL_HINT: &str = "apt-get install bubblewrap";

/// Why a run did not happen, or could not be completed.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// The request is malformed (`invalid_arguments`): correct it.
    #[error("{field}: {message}")]
    InvalidRequest { field: String, message: String },
    /// The request asks for something the caller was not granted
    /// (`denied`): nothing was started.
    #[error("{message}")]
    Denied {
        /// The program or variable refused, as given.
        subject: String,
        message: String,
    },
    /// Programs cannot be run on this host (`exec_unavailable`): bubblewrap
    /// is missing or too old, namespaces are disabled, or no process-count
    /// bound is possible. Says what to install or change.
    #[error("exec is unavailable: {0}")]
    Unavailable(String),
    /// The sandbox could not be set up for this request (bubblewrap's own
    /// message, e.g. a working directory that does not exist).
    #[error("the sandbox could not start the program: {0}")]
    Setup(String),
    /// An operating-system call failed.
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

impl ExecError {
    /// The observation error code this maps to.
    pub fn code(&self) -> &'static str {
        match self {
            ExecError::InvalidRequest { .. } => "invalid_arguments",
            ExecError::Denied { .. } => "denied",
            ExecError::Unavailable(_) => "exec_unavailable",
            ExecError::Setup(_) | ExecError::Io { .. } => "internal",
        }
    }

    pub(crate) fn invalid(field: impl Into<String>, message: impl Into<String>) -> ExecError {
        ExecError::InvalidRequest {
            field: field.into(),
            message: message.into(),
        }
    }

    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> ExecError {
        ExecError::Io {
            context: context.into(),
            source,
        }
    }
}

/// The programs a request may start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AllowedPrograms {
    /// Any program the sandbox can see (a general runner).
    Any,
    /// Exactly these absolute paths, as resolved on the host's `PATH` (see
    /// [`Executor::resolve_programs`]). Empty: nothing may run.
    Only(BTreeSet<PathBuf>),
}

impl AllowedPrograms {
    /// Nothing may run: the default.
    pub fn none() -> AllowedPrograms {
        AllowedPrograms::Only(BTreeSet::new())
    }

    /// Whether `path` (a resolved `argv[0]`) is allowed.
    pub fn allows(&self, path: &std::path::Path) -> bool {
        match self {
            AllowedPrograms::Any => true,
            AllowedPrograms::Only(set) => set.contains(path),
        }
    }

    /// The programs left after intersecting with `other` (attenuation only
    /// removes programs).
    pub fn intersect(&self, other: &AllowedPrograms) -> AllowedPrograms {
        match (self, other) {
            (AllowedPrograms::Any, x) | (x, AllowedPrograms::Any) => x.clone(),
            (AllowedPrograms::Only(a), AllowedPrograms::Only(b)) => {
                AllowedPrograms::Only(a.intersection(b).cloned().collect())
            }
        }
    }
}

/// Where a mount's host directory comes from.
#[derive(Debug)]
pub enum MountSource {
    /// A host path, opened (following symlinks) when the run starts.
    Path(PathBuf),
    /// An already-open directory (an `O_PATH` or read descriptor, e.g. one
    /// opened beneath the workspace root without following symlinks). The
    /// sandbox binds exactly that directory, whatever its path says now.
    Fd(OwnedFd),
}

/// One host directory the program may see, as the Wasm preopens are.
#[derive(Debug)]
pub struct ExecMount {
    pub source: MountSource,
    /// Mount point inside the sandbox, e.g. `/workspace` or
    /// `/workspace/src`: absolute, normalized, not a system directory.
    pub target: String,
    /// Bound read-write; otherwise read-only.
    pub writable: bool,
}

impl ExecMount {
    /// A mount from a host path.
    pub fn path(host: impl Into<PathBuf>, target: impl Into<String>, writable: bool) -> ExecMount {
        ExecMount {
            source: MountSource::Path(host.into()),
            target: target.into(),
            writable,
        }
    }

    /// A mount from an open directory descriptor.
    pub fn fd(dir: OwnedFd, target: impl Into<String>, writable: bool) -> ExecMount {
        ExecMount {
            source: MountSource::Fd(dir),
            target: target.into(),
            writable,
        }
    }
}

/// Resource limits of one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExecLimits {
    /// CPU time of each process (`RLIMIT_CPU`, rounded up to seconds;
    /// SIGXCPU, then SIGKILL a second later). `None`: the timeout plus one
    /// second.
    pub cpu_time: Option<Duration>,
    /// Address space of each process (`RLIMIT_AS`), in bytes.
    pub address_space_bytes: u64,
    /// Largest file a process may write (`RLIMIT_FSIZE`), in bytes.
    pub file_size_bytes: u64,
    /// Open file descriptors of each process (`RLIMIT_NOFILE`).
    pub open_files: u64,
    /// Tasks (processes and threads) the program may have at once.
    pub processes: u64,
    /// Size of the private `/tmp` (and of `/dev/shm`), in bytes.
    pub scratch_bytes: u64,
    /// Scheduling niceness (0–19) of the program, never below the host's:
    /// under contention the host's own work comes first.
    pub nice: i32,
}

impl Default for ExecLimits {
    fn default() -> Self {
        ExecLimits {
            cpu_time: None,
            address_space_bytes: 8 << 30,
            file_size_bytes: 1 << 30,
            open_files: 1024,
            processes: 256,
            scratch_bytes: 256 << 20,
            nice: 10,
        }
    }
}

/// Default bytes kept of each of stdout and stderr.
pub const DEFAULT_MAX_OUTPUT_BYTES: usize = 16 * 1024;

/// One program to run.
#[derive(Debug)]
pub struct ExecRequest {
    /// The program and its arguments: never a command line. `argv[0]` is a
    /// bare name (looked up on the host's `PATH`) or an absolute path.
    pub argv: Vec<String>,
    /// Working directory inside the sandbox: under one of the mounts (or
    /// `/tmp`). The caller has checked it like any path argument.
    pub cwd: String,
    /// Bytes on the program's stdin (empty: `/dev/null`).
    pub stdin: Vec<u8>,
    /// Variables added to the cleared environment; every name must be in
    /// `env_allowed`.
    pub env: Vec<(String, String)>,
    /// Names the caller may set.
    pub env_allowed: BTreeSet<String>,
    /// Wall-clock deadline; then the whole process tree is killed and the
    /// outcome says `timed_out`.
    pub timeout: Duration,
    /// Bytes of stdout kept (head, key lines, tail); the rest is counted.
    pub max_stdout_bytes: usize,
    /// Bytes of stderr kept.
    pub max_stderr_bytes: usize,
    /// What may be started. Default: nothing.
    pub programs: AllowedPrograms,
    /// Host directories the program sees. Default: none.
    pub mounts: Vec<ExecMount>,
    pub limits: ExecLimits,
}

impl ExecRequest {
    /// A request for `argv` with every default: nothing allowed, no mounts,
    /// cwd `/tmp`, no stdin, 30 s, 16 KiB of each stream.
    pub fn new<I, S>(argv: I) -> ExecRequest
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        ExecRequest {
            argv: argv.into_iter().map(Into::into).collect(),
            cwd: "/tmp".to_owned(),
            stdin: Vec::new(),
            env: Vec::new(),
            env_allowed: BTreeSet::new(),
            timeout: Duration::from_secs(30),
            max_stdout_bytes: DEFAULT_MAX_OUTPUT_BYTES,
            max_stderr_bytes: DEFAULT_MAX_OUTPUT_BYTES,
            programs: AllowedPrograms::none(),
            mounts: Vec::new(),
            limits: ExecLimits::default(),
        }
    }
}

/// How a run ended. A non-zero exit is a normal outcome, not an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecOutcome {
    /// The program's exit status; `None` when it was killed by a signal.
    pub exit_code: Option<i32>,
    /// The signal that ended the program. bubblewrap reports a death by
    /// signal N as status 128+N, as a shell does, so an explicit
    /// `exit(128+N)` (N ≤ 64) also reads as signal N. `Some(9)` after a
    /// timeout or cancellation.
    pub signal: Option<i32>,
    /// The deadline passed and the process tree was killed.
    pub timed_out: bool,
    /// [`Cancel::cancel`] was called and the process tree was killed.
    pub cancelled: bool,
    /// Wall time from the start of the sandbox to the end of the last
    /// process.
    pub duration: Duration,
    pub stdout: Captured,
    pub stderr: Captured,
    /// Most tasks the sandbox had at once (from the pids cgroup), if known.
    pub peak_processes: Option<u64>,
}

/// A cancellation flag shared with whoever may cancel the run (the MCP
/// server, a shutdown). The running call checks it at least every 20 ms
/// (`CANCEL_POLL`).
#[derive(Debug, Clone, Default)]
pub struct Cancel(Arc<AtomicBool>);

/// Longest delay between [`Cancel::cancel`] and the kill.
pub(crate) const CANCEL_POLL: Duration = Duration::from_millis(20);

impl Cancel {
    pub fn new() -> Cancel {
        Cancel::default()
    }

    /// Uses an existing flag (e.g. the Wasm sandbox's cancel token).
    pub fn from_flag(flag: Arc<AtomicBool>) -> Cancel {
        Cancel(flag)
    }

    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// Host-wide settings.
#[derive(Debug, Clone, Default)]
pub struct ExecConfig {
    /// The `bwrap` binary; `None`: the first `bwrap` on [`Self::search_path`].
    pub bwrap: Option<PathBuf>,
    /// The `PATH` program names resolve on; `None`: the host's `PATH` when
    /// the executor is made.
    pub search_path: Option<OsString>,
    /// Host directories bound read-only at the same path in every sandbox,
    /// for toolchains outside `/usr` (e.g. `~/.rustup`, `/opt/node`).
    pub extra_ro_paths: Vec<PathBuf>,
}

/// Runs programs in sandboxes. Cheap to make; the first run (or
/// [`Executor::probe`]) checks bubblewrap once.
#[derive(Debug)]
pub struct Executor {
    config: ExecConfig,
    search_path: OsString,
    probed: OnceLock<Result<BwrapInfo, String>>,
}

impl Default for Executor {
    fn default() -> Self {
        Executor::new(ExecConfig::default())
    }
}

impl Executor {
    pub fn new(config: ExecConfig) -> Executor {
        let search_path = config
            .search_path
            .clone()
            .or_else(|| std::env::var_os("PATH"))
            .unwrap_or_else(|| OsString::from(SANDBOX_PATH));
        Executor {
            config,
            search_path,
            probed: OnceLock::new(),
        }
    }

    /// Checks, once, that sandboxes can run here: bubblewrap present and
    /// recent enough, namespaces allowed (a trial run of `true`), and a
    /// process-count bound available.
    pub fn probe(&self) -> Result<&BwrapInfo, ExecError> {
        self.probed
            .get_or_init(|| {
                let info = bwrap::probe(&self.config, &self.search_path)?;
                run::trial_run(&info, &self.config, &self.search_path)?;
                Ok(info)
            })
            .as_ref()
            .map_err(|e| ExecError::Unavailable(e.clone()))
    }

    /// Resolves program names (or absolute paths) on the search path into
    /// an allow-list. A name that does not resolve is an error.
    pub fn resolve_programs<I, S>(&self, names: I) -> Result<AllowedPrograms, ExecError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut set = BTreeSet::new();
        for name in names {
            set.insert(program::resolve(name.as_ref(), &self.search_path)?);
        }
        Ok(AllowedPrograms::Only(set))
    }

    /// Checks `req` and runs it. Blocks until every process of the run has
    /// ended and been reaped. Call it on a thread that lives until it
    /// returns: the sandbox dies with the thread that started it
    /// (`--die-with-parent` is a parent-*thread* death signal). The first
    /// run makes this process a child subreaper (see the crate docs).
    pub fn run(
        &self,
        req: &ExecRequest,
        cancel: Option<&Cancel>,
    ) -> Result<ExecOutcome, ExecError> {
        // Every check that needs no bubblewrap comes first, so a denied
        // request is denied the same way on a host without it.
        let plan = program::plan(req, &self.search_path)?;
        let info = self.probe()?;
        run::run(info, &self.config, req, &plan, cancel)
    }
}
