//! One run: start bubblewrap, bound the sandbox before the program starts,
//! feed and drain the pipes, enforce the deadline and cancellation, kill the
//! whole tree, reap everything.
//!
//! The start is a handshake. `bwrap` writes the host pid of the sandbox's
//! first process (the PID namespace's init) on `--info-fd`, sets the
//! sandbox up, and waits on `--block-fd`. Meanwhile this side opens a pidfd
//! of that process (and checks it is bwrap's child, so a recycled pid can
//! never be hit), moves it into the run's pids cgroup, sets its rlimits, and
//! only then lets it go on to start the program. The pidfd is also how the
//! tree is killed: SIGKILL to a PID namespace's init kills every process in
//! the namespace. bwrap exits when the program does (its init may still be
//! tearing the namespace down); [`run`] reaps bwrap, then waits for the
//! init to end and reaps it too: this process is a child subreaper, so the
//! orphaned init is its child rather than pid 1's (see
//! [`become_subreaper`]).
//!
//! One thread does everything with `poll(2)`: the two output pipes, a pidfd
//! of `bwrap`, and a timeout (the deadline, or [`CANCEL_POLL`] when a
//! [`Cancel`] may fire).

use std::ffi::OsStr;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use rustix::event::{poll, PollFd, PollFlags, Timespec};
use rustix::fs::{Mode, OFlags};
use rustix::io::{fcntl_dupfd_cloexec, fcntl_setfd, Errno, FdFlags};
use rustix::process::{pidfd_open, pidfd_send_signal, Pid, PidfdFlags, Signal};

use super::bound::{self, ProcessBound, RunCgroup};
use super::bwrap::{self, BwrapInfo, Fds, GROUP, HOSTS, PASSWD};
use super::output::StreamClip;
use super::program::{self, Plan};
use super::{
    AllowedPrograms, Cancel, ExecConfig, ExecError, ExecOutcome, ExecRequest, MountSource,
    CANCEL_POLL,
};

/// After the kill, how long bwrap gets to exit before it is killed too.
const ESCALATE_AFTER: Duration = Duration::from_secs(2);

/// After bwrap exits, how long the pipes may take to reach end-of-file.
const DRAIN_GRACE: Duration = Duration::from_secs(2);

/// Largest read from a pipe at once.
const READ_CHUNK: usize = 64 * 1024;

/// `fd` moved above the standard descriptors (so `Command` cannot clobber
/// it when it sets up stdin/stdout/stderr), close-on-exec.
fn above_stdio(fd: OwnedFd) -> io::Result<OwnedFd> {
    if fd.as_raw_fd() > 2 {
        Ok(fd)
    } else {
        Ok(fcntl_dupfd_cloexec(&fd, 3)?)
    }
}

/// Marks every descriptor from 3 up close-on-exec, in the child between
/// fork and exec: descriptors the host holds without `O_CLOEXEC` (a
/// library's, a jobserver pipe inherited from `make` or `cargo`) must not
/// reach the sandbox. Async-signal-safe: system calls only.
fn close_on_exec_from_3() {
    // SAFETY: close_range(2) with CLOSE_RANGE_CLOEXEC only sets flags.
    let r = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3 as libc::c_uint,
            libc::c_uint::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    };
    if r == 0 {
        return;
    }
    // Kernels before 5.11: one fcntl per possible descriptor.
    let max = rustix::process::getrlimit(rustix::process::Resource::Nofile)
        .current
        .unwrap_or(1 << 16)
        .min(1 << 20) as RawFd;
    for fd in 3..max {
        // SAFETY: a descriptor number; fcntl on a closed one fails harmlessly.
        let _ = fcntl_setfd(unsafe { BorrowedFd::borrow_raw(fd) }, FdFlags::CLOEXEC);
    }
}

/// A sealed in-memory file holding `data`, positioned at its start: the
/// program reading it (stdin) cannot write to it or grow it.
fn data_fd(name: &str, data: &[u8]) -> io::Result<OwnedFd> {
    use rustix::fs::{MemfdFlags, SealFlags};
    let fd = rustix::fs::memfd_create(name, MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING)?;
    let mut f = std::fs::File::from(fd);
    f.write_all(data)?;
    rustix::fs::seek(&f, rustix::fs::SeekFrom::Start(0))?;
    rustix::fs::fcntl_add_seals(
        &f,
        SealFlags::WRITE | SealFlags::GROW | SealFlags::SHRINK | SealFlags::SEAL,
    )?;
    Ok(OwnedFd::from(f))
}

/// The directory of a mount, as a descriptor to hand to bwrap.
fn mount_fd(i: usize, source: &MountSource) -> Result<OwnedFd, ExecError> {
    let field = format!("mounts[{i}]");
    let fd = match source {
        MountSource::Fd(fd) => fcntl_dupfd_cloexec(fd, 3)
            .map_err(|e| ExecError::io(format!("{field}: dup"), e.into()))?,
        MountSource::Path(p) => {
            let fd = rustix::fs::open(
                p,
                OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .map_err(|e| {
                ExecError::invalid(
                    field.clone(),
                    format!("cannot open host directory `{}`: {e}", p.display()),
                )
            })?;
            above_stdio(fd).map_err(|e| ExecError::io(format!("{field}: dup"), e))?
        }
    };
    let st =
        rustix::fs::fstat(&fd).map_err(|e| ExecError::io(format!("{field}: fstat"), e.into()))?;
    if rustix::fs::FileType::from_raw_mode(st.st_mode) != rustix::fs::FileType::Directory {
        return Err(ExecError::invalid(
            field,
            "the host side of a mount is not a directory",
        ));
    }
    Ok(fd)
}

/// Whether this process has a controlling terminal. The sandbox's
/// `/dev/tty` is that terminal: with one, the program must run in a new
/// session (else it could, e.g., push input into the user's shell with
/// `TIOCSTI`); without one it has none either, and the session — which
/// costs 3–7 ms per run here, the kernel making a scheduler autogroup for
/// it — protects nothing.
fn has_controlling_terminal() -> bool {
    match rustix::fs::open(
        "/dev/tty",
        OFlags::RDWR | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(_) => true,
        // ENXIO: "no controlling terminal". Anything else: assume one.
        Err(e) => e != Errno::NXIO,
    }
}

/// The parent pid of `pid`, from `/proc/PID/stat`.
fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state ppid …`; comm may contain spaces and parentheses.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// Whether the process behind `pidfd` has exited (without waiting).
fn has_exited(pidfd: &OwnedFd) -> bool {
    let mut fds = [PollFd::new(pidfd, PollFlags::IN)];
    matches!(poll(&mut fds, Some(&Timespec { tv_sec: 0, tv_nsec: 0 })), Ok(n) if n > 0)
}

/// A started sandbox. Dropping it unfinished kills and reaps everything.
struct Sandbox {
    child: Child,
    /// pidfd of the sandbox's init, once known.
    init: Option<OwnedFd>,
    /// Our end of `--block-fd`: closing it lets the sandbox go on, so it
    /// outlives the kill in `drop`.
    block: Option<UnixStream>,
    cgroup: Option<RunCgroup>,
    status: Option<ExitStatus>,
}

impl Sandbox {
    fn kill_tree(&self) {
        if let Some(init) = &self.init {
            let _ = pidfd_send_signal(init, Signal::KILL);
        }
    }
}

/// Waits up to `limit` for `child` to exit, without reaping it.
fn exits_within(child: &Child, limit: Duration) -> bool {
    let Ok(fd) = pidfd_open(Pid::from_child(child), PidfdFlags::empty()) else {
        return false;
    };
    let mut fds = [PollFd::new(&fd, PollFlags::IN)];
    matches!(poll(&mut fds, Some(&timespec(limit))), Ok(n) if n > 0)
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        if self.status.is_none() {
            // Kill the namespace and let bwrap reap its init; kill bwrap
            // itself only if it does not exit (or there is no init).
            self.kill_tree();
            if self.init.is_none() || !exits_within(&self.child, ESCALATE_AFTER) {
                let _ = self.child.kill();
            }
            let _ = self.child.wait();
        }
        if let Some(init) = &self.init {
            reap_init(init);
        }
    }
}

/// Waits until the process behind `pidfd` has exited, up to `limit`.
fn exited_within(pidfd: &OwnedFd, limit: Duration) -> bool {
    let mut fds = [PollFd::new(pidfd, PollFlags::IN)];
    matches!(poll(&mut fds, Some(&timespec(limit))), Ok(n) if n > 0)
}

/// Makes this process the reaper of its orphaned descendants, once.
///
/// bwrap's monitor exits as soon as the program does, while the sandbox's
/// init is still tearing the namespace down; the init is then orphaned.
/// As a subreaper, this process inherits it (rather than pid 1) and
/// [`reap_init`] collects it before the run returns.
fn become_subreaper() -> Result<(), ExecError> {
    static DONE: std::sync::OnceLock<Result<(), Errno>> = std::sync::OnceLock::new();
    DONE.get_or_init(|| rustix::process::set_child_subreaper(Pid::from_raw(1)))
        .map_err(|e| ExecError::io("prctl(PR_SET_CHILD_SUBREAPER)", e.into()))
}

/// Waits for the sandbox's init to end (the namespace is empty then) and
/// reaps it if it was left to this process. Called once bwrap is reaped.
fn reap_init(init: &OwnedFd) {
    if !exited_within(init, ESCALATE_AFTER) {
        let _ = pidfd_send_signal(init, Signal::KILL);
        exited_within(init, ESCALATE_AFTER);
    }
    // ECHILD when bwrap reaped it itself.
    let _ = rustix::process::waitid(
        rustix::process::WaitId::PidFd(init.as_fd()),
        rustix::process::WaitIdOptions::EXITED,
    );
}

/// Reads what is available from a non-blocking pipe. Returns false at
/// end-of-file or on an error.
fn drain(fd: BorrowedFd<'_>, clip: &mut StreamClip, buf: &mut [u8]) -> bool {
    loop {
        match rustix::io::read(fd, &mut *buf) {
            Ok(0) => return false,
            Ok(n) => clip.push(&buf[..n]),
            Err(Errno::AGAIN) => return true,
            Err(Errno::INTR) => continue,
            Err(_) => return false,
        }
    }
}

fn timespec(d: Duration) -> Timespec {
    Timespec {
        tv_sec: d.as_secs() as _,
        tv_nsec: d.subsec_nanos() as _,
    }
}

/// Runs a checked request in a sandbox described by `info`.
pub(super) fn run(
    info: &BwrapInfo,
    cfg: &ExecConfig,
    req: &ExecRequest,
    plan: &Plan,
    cancel: Option<&Cancel>,
) -> Result<ExecOutcome, ExecError> {
    // Everything the sandbox is handed, as descriptors ≥ 3.
    let mut passed: Vec<OwnedFd> = Vec::new();
    let mut mounts = Vec::with_capacity(plan.mount_order.len());
    for &i in &plan.mount_order {
        let fd = mount_fd(i, &req.mounts[i].source)?;
        mounts.push(fd.as_raw_fd());
        passed.push(fd);
    }
    let io_err = |what: &str| {
        let what = what.to_owned();
        move |e: io::Error| ExecError::io(what, e)
    };
    let mut data = |name: &str, text: &str| -> Result<RawFd, ExecError> {
        let fd = data_fd(name, text.as_bytes())
            .and_then(above_stdio)
            .map_err(io_err("in-memory file"))?;
        let raw = fd.as_raw_fd();
        passed.push(fd);
        Ok(raw)
    };
    let passwd = data("passwd", PASSWD)?;
    let group = data("group", GROUP)?;
    let hosts = data("hosts", HOSTS)?;
    let filter = super::seccomp::filter().ok_or_else(|| {
        ExecError::Unavailable(
            "no seccomp filter for this architecture: programs cannot be sandboxed here".into(),
        )
    })?;
    let seccomp = {
        let fd = data_fd("seccomp", &filter)
            .and_then(above_stdio)
            .map_err(io_err("in-memory file"))?;
        let raw = fd.as_raw_fd();
        passed.push(fd);
        raw
    };
    let (info_ours, info_theirs) = UnixStream::pair().map_err(io_err("socketpair"))?;
    let (block_ours, block_theirs) = UnixStream::pair().map_err(io_err("socketpair"))?;
    let info_theirs = above_stdio(info_theirs.into()).map_err(io_err("dup"))?;
    let block_theirs = above_stdio(block_theirs.into()).map_err(io_err("dup"))?;
    let fds = Fds {
        new_session: has_controlling_terminal(),
        info: info_theirs.as_raw_fd(),
        block: block_theirs.as_raw_fd(),
        passwd,
        group,
        hosts,
        seccomp,
        mounts,
    };
    passed.push(info_theirs);
    passed.push(block_theirs);
    let stdin = if req.stdin.is_empty() {
        Stdio::null()
    } else {
        Stdio::from(data_fd("stdin", &req.stdin).map_err(io_err("stdin"))?)
    };

    become_subreaper()?;
    let mut cmd = Command::new(&info.path);
    cmd.args(bwrap::args(info, cfg, req, plan, &fds))
        .env_clear()
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let inherit: Vec<RawFd> = passed.iter().map(AsRawFd::as_raw_fd).collect();
    // SAFETY: the closure runs in the forked child before exec; it makes
    // only system calls (close_range, getrlimit, fcntl) on this process's
    // descriptor table, and allocates nothing. The descriptors in `inherit`
    // are open: `passed` lives until after spawn.
    unsafe {
        cmd.pre_exec(move || {
            close_on_exec_from_3();
            for &fd in &inherit {
                fcntl_setfd(BorrowedFd::borrow_raw(fd), FdFlags::empty())?;
            }
            Ok(())
        });
    }
    let start = Instant::now();
    let deadline = start + req.timeout;
    let child = cmd.spawn().map_err(|e| {
        if e.kind() == io::ErrorKind::NotFound {
            ExecError::Unavailable(format!(
                "{} disappeared; install bubblewrap with `{}`",
                info.path.display(),
                super::INSTALL_HINT
            ))
        } else {
            ExecError::io("starting bwrap", e)
        }
    })?;
    drop(passed);
    let mut sb = Sandbox {
        child,
        init: None,
        block: Some(block_ours),
        cgroup: None,
        status: None,
    };

    // The handshake: the init's pid, then the bounds, then go.
    let init_pid = read_init_pid(info_ours, deadline);
    if let Some(pid) = init_pid {
        let init = Pid::from_raw(pid)
            .ok_or_else(|| ExecError::Setup(format!("bwrap reported pid {pid}")))?;
        let pidfd = pidfd_open(init, PidfdFlags::empty())
            .map_err(|e| ExecError::io("pidfd_open(sandbox init)", e.into()))?;
        // The pid is bwrap's child (not a recycled number) if it still is
        // after the pidfd pins it.
        if parent_of(pid) != Some(sb.child.id() as i32) && !has_exited(&pidfd) {
            return Err(ExecError::Setup(format!(
                "pid {pid} reported by bwrap is not its child"
            )));
        }
        sb.init = Some(pidfd);
        if let ProcessBound::Cgroup { parent, .. } = &info.bound {
            let cg = RunCgroup::create(parent, req.limits.processes + 1).map_err(|e| {
                ExecError::io(format!("creating a pids cgroup in {}", parent.display()), e)
            })?;
            match cg.attach(pid) {
                Ok(()) => {}
                Err(e) if sb.init.as_ref().is_some_and(has_exited) => drop(e),
                Err(e) => return Err(ExecError::io("moving the sandbox into its cgroup", e)),
            }
            sb.cgroup = Some(cg);
        }
        let limited = bound::apply_rlimits(init, &bound::rlimits(&req.limits, req.timeout))
            .and_then(|()| bound::apply_nice(init, req.limits.nice));
        match limited {
            Ok(()) => {}
            Err(e) if sb.init.as_ref().is_some_and(has_exited) => drop(e),
            Err(e) => return Err(ExecError::io("setting the sandbox's rlimits", e)),
        }
        // Had the init died and its pid been reused, it would show here:
        // the limits went to the right process if it is still alive.
        if let Some(mut b) = sb.block.take() {
            let _ = b.write_all(b"g");
        }
    }

    let outcome = supervise(&mut sb, req, deadline, cancel, start);
    if let Some(init) = &sb.init {
        reap_init(init);
    }
    let peak = sb.cgroup.as_ref().and_then(RunCgroup::peak);
    drop(sb); // reaps bwrap if `supervise` failed; removes the cgroup
    let mut outcome = outcome?;
    outcome.peak_processes = peak;
    if init_pid.is_none() || looks_like_setup_failure(&outcome) {
        let msg = outcome
            .stderr
            .text
            .trim()
            .trim_start_matches("bwrap: ")
            .to_owned();
        return Err(ExecError::Setup(if msg.is_empty() {
            format!(
                "bwrap exited with {:?} before starting the program",
                outcome.exit_code
            )
        } else {
            msg
        }));
    }
    Ok(outcome)
}

/// Reads bwrap's `{"child-pid": N}` from the info descriptor. `None` if
/// bwrap ended (or the deadline passed) without sending it.
fn read_init_pid(mut sock: UnixStream, deadline: Instant) -> Option<i32> {
    let wait = deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_millis(100));
    sock.set_read_timeout(Some(wait)).ok()?;
    let mut buf = Vec::new();
    // bwrap closes its end right after writing.
    (&mut sock).take(4096).read_to_end(&mut buf).ok()?;
    let v: serde_json::Value = serde_json::from_slice(&buf).ok()?;
    v.get("child-pid")?.as_i64()?.try_into().ok()
}

/// bwrap's own failure (bad cwd, exec failure): status 1, one `bwrap:` line
/// on stderr, nothing on stdout. A program that prints exactly that and
/// exits 1 is misreported as a setup failure; nothing worse.
fn looks_like_setup_failure(o: &ExecOutcome) -> bool {
    o.exit_code == Some(1)
        && !o.timed_out
        && !o.cancelled
        && o.stdout.total_bytes == 0
        && o.stderr.omitted_bytes == 0
        && o.stderr.text.starts_with("bwrap: ")
        && o.stderr.text.trim_end().lines().count() == 1
}

fn supervise(
    sb: &mut Sandbox,
    req: &ExecRequest,
    deadline: Instant,
    cancel: Option<&Cancel>,
    start: Instant,
) -> Result<ExecOutcome, ExecError> {
    let stdout: OwnedFd = sb.child.stdout.take().expect("piped").into();
    let stderr: OwnedFd = sb.child.stderr.take().expect("piped").into();
    for fd in [&stdout, &stderr] {
        rustix::io::ioctl_fionbio(fd, true).map_err(|e| ExecError::io("pipe", e.into()))?;
    }
    let bwrap_fd = pidfd_open(Pid::from_child(&sb.child), PidfdFlags::empty())
        .map_err(|e| ExecError::io("pidfd_open(bwrap)", e.into()))?;
    let mut out = StreamClip::new(req.max_stdout_bytes);
    let mut err = StreamClip::new(req.max_stderr_bytes);
    let mut buf = vec![0u8; READ_CHUNK];
    let (mut out_open, mut err_open) = (true, true);
    let mut killed_at: Option<Instant> = None;
    let mut exited_at: Option<Instant> = None;
    let (mut timed_out, mut cancelled) = (false, false);
    let mut escalated = false;

    loop {
        let now = Instant::now();
        if killed_at.is_none() && exited_at.is_none() {
            if cancel.is_some_and(Cancel::is_cancelled) {
                cancelled = true;
            } else if now >= deadline {
                timed_out = true;
            }
            if cancelled || timed_out {
                sb.kill_tree();
                if sb.init.is_none() {
                    let _ = sb.child.kill();
                }
                killed_at = Some(now);
            }
        }
        if let Some(k) = killed_at {
            if exited_at.is_none() && !escalated && now >= k + ESCALATE_AFTER {
                let _ = sb.child.kill();
                escalated = true;
            }
        }
        if let Some(e) = exited_at {
            if (!out_open && !err_open) || now >= e + DRAIN_GRACE {
                break;
            }
        }

        // Sleep until something happens or a timer is due.
        let mut wake = if let Some(e) = exited_at {
            e + DRAIN_GRACE
        } else if let Some(k) = killed_at {
            k + ESCALATE_AFTER
        } else {
            deadline
        };
        if cancel.is_some() && killed_at.is_none() {
            wake = wake.min(now + CANCEL_POLL);
        }
        let timeout = timespec(wake.saturating_duration_since(now));
        let mut set: Vec<PollFd<'_>> = Vec::with_capacity(3);
        if out_open {
            set.push(PollFd::new(&stdout, PollFlags::IN));
        }
        if err_open {
            set.push(PollFd::new(&stderr, PollFlags::IN));
        }
        if exited_at.is_none() {
            set.push(PollFd::new(&bwrap_fd, PollFlags::IN));
        }
        match poll(&mut set, Some(&timeout)) {
            Ok(_) | Err(Errno::INTR) => {}
            Err(e) => return Err(ExecError::io("poll", e.into())),
        }
        drop(set);
        if out_open {
            out_open = drain(stdout.as_fd(), &mut out, &mut buf);
        }
        if err_open {
            err_open = drain(stderr.as_fd(), &mut err, &mut buf);
        }
        if exited_at.is_none() {
            if let Some(status) = sb
                .child
                .try_wait()
                .map_err(|e| ExecError::io("waiting for bwrap", e))?
            {
                sb.status = Some(status);
                exited_at = Some(Instant::now());
            }
        }
    }
    let duration = exited_at.unwrap_or_else(Instant::now) - start;
    let status = match sb.status {
        Some(s) => s,
        None => {
            let s = sb
                .child
                .wait()
                .map_err(|e| ExecError::io("waiting for bwrap", e))?;
            sb.status = Some(s);
            s
        }
    };
    let (exit_code, signal) = match (status.code(), status.signal()) {
        (Some(c), _) if (129..=192).contains(&c) => (None, Some(c - 128)),
        (Some(c), _) => (Some(c), None),
        (None, sig) => (None, sig),
    };
    Ok(ExecOutcome {
        exit_code,
        signal,
        timed_out,
        cancelled,
        duration,
        stdout: out.finish(),
        stderr: err.finish(),
        peak_processes: None,
    })
}

/// Runs `true` in a sandbox: proves that namespaces can be made here.
pub(super) fn trial_run(
    info: &BwrapInfo,
    cfg: &ExecConfig,
    search_path: &OsStr,
) -> Result<(), String> {
    let Ok(t) = program::resolve("true", search_path) else {
        return Ok(()); // nothing to try with; the first real run will tell
    };
    let mut req = ExecRequest::new([t.to_string_lossy().into_owned()]);
    req.programs = AllowedPrograms::Any;
    req.timeout = Duration::from_secs(20);
    let plan = program::plan(&req, search_path).map_err(|e| e.to_string())?;
    match run(info, cfg, &req, &plan, None) {
        Ok(o) if o.exit_code == Some(0) => Ok(()),
        Ok(o) => Err(format!(
            "a trial sandbox running `true` ended with {:?}/{:?}: {}",
            o.exit_code,
            o.signal,
            o.stderr.text.trim()
        )),
        Err(e) => Err(format!("a trial sandbox failed ({}): {e}", info.version)),
    }
}
