//! Locks between processes: open-file-description byte locks
//! (`F_OFD_SETLK`) on one lock file per workspace.
//!
//! The lock file of a workspace is `<lock dir>/<hash of the root>.lock`; it
//! stays empty. Each node of the resource tree owns three bytes at an offset
//! chosen by a hash of the node (46 bits: distinct nodes sharing bytes would
//! only wait for each other): `r`, `x` and `w`, in that order, so that
//! `rd x` with `rd r` or with `rd w` is one lock of two bytes. The four
//! modes of [`NodeMode`] map onto shared (`rd`) and exclusive (`wr`) byte
//! locks:
//!
//! | mode | takes             | then checks         |
//! |------|-------------------|---------------------|
//! | IS   | `rd x`            |                     |
//! | IX   | `rd x`, `rd w`    | no one holds `r`    |
//! | S    | `rd x`, `rd r`    | no one holds `w`    |
//! | X    | `wr x`            |                     |
//!
//! `x` makes a write exclude everything on its node; the `r`/`w` pair makes
//! a read of a directory and a write beneath it exclude each other while
//! reads share with reads and writes beneath with writes beneath: each side
//! registers first and then checks the other (`F_OFD_GETLK`), so of two
//! racing calls at least one sees the other and backs off.
//!
//! Every attempt is all-or-nothing and never blocks: on a conflict the file
//! is closed, which drops every lock it took, and the call tries again after
//! a short, growing, jittered pause, until its deadline. So no two calls can
//! deadlock, and a process that dies — even by `SIGKILL` — holds nothing:
//! the kernel drops the locks of a closed description.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::{NodeMode, Plan, WaitError};
use crate::sandbox::CancelToken;

/// Where the node slots start in the lock file.
const BASE: i64 = 4096;
/// First and longest pause between attempts.
const FIRST_PAUSE: Duration = Duration::from_micros(200);
const MAX_PAUSE: Duration = Duration::from_millis(10);

/// The lock file of a workspace in `dir`.
pub(crate) fn lock_file(dir: &Path, workspace: &str) -> PathBuf {
    let h = blake3::hash(workspace.as_bytes());
    dir.join(format!("{}.lock", &h.to_hex()[..32]))
}

/// Takes `plan`'s locks on the workspace's lock file, waiting until
/// `deadline`; the locks live as long as the returned file is open. The
/// flag says whether the first attempt failed (the call waited).
pub(crate) fn acquire(
    dir: &Path,
    plan: &Plan,
    deadline: Instant,
    cancel: Option<&CancelToken>,
) -> Result<(File, bool), WaitError> {
    let start = Instant::now();
    let path = lock_file(dir, &plan.workspace);
    let fail = |source: io::Error| WaitError::LockFile {
        path: path.clone(),
        source,
    };
    let mut pause = FIRST_PAUSE;
    let mut waited = false;
    loop {
        let file = open(dir, &path).map_err(fail)?;
        if try_plan(&file, plan).map_err(fail)? {
            return Ok((file, waited));
        }
        waited = true;
        drop(file);
        let now = Instant::now();
        if cancel.is_some_and(CancelToken::is_cancelled) {
            return Err(WaitError::Cancelled {
                waited: now - start,
            });
        }
        if now >= deadline {
            return Err(WaitError::Timeout {
                waited: now - start,
            });
        }
        std::thread::sleep(jitter(pause).min(deadline - now));
        pause = (pause * 2).min(MAX_PAUSE);
    }
}

fn open(dir: &Path, path: &Path) -> io::Result<File> {
    let open = || {
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(path)
    };
    match open() {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            std::fs::create_dir_all(dir)?;
            open()
        }
        other => other,
    }
}

/// A pause between `d/2` and `d`, so racing callers drift apart.
pub fn jitter(d: Duration) -> Duration {
    let mut b = [0u8; 2];
    let r = getrandom::fill(&mut b).map_or(0, |()| u16::from_le_bytes(b));
    d / 2 + d.mul_f64(f64::from(r) / f64::from(u16::MAX) / 2.0)
}

/// One attempt: `Ok(true)` when every lock of the plan is held.
fn try_plan(file: &File, plan: &Plan) -> io::Result<bool> {
    for (node, mode) in &plan.nodes {
        let at = slot(node);
        let (r, x, w) = (at, at + 1, at + 2);
        let ok = match mode {
            NodeMode::IntentRead => set(file, libc::F_RDLCK, x, 1)?,
            // rd x + rd w, then no one holds r.
            NodeMode::IntentWrite => set(file, libc::F_RDLCK, x, 2)? && free(file, r)?,
            // rd r + rd x, then no one holds w.
            NodeMode::Read => set(file, libc::F_RDLCK, r, 2)? && free(file, w)?,
            NodeMode::Write => set(file, libc::F_WRLCK, x, 1)?,
        };
        if !ok {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The first byte of a node's three.
fn slot(node: &str) -> i64 {
    let h = blake3::hash(node.as_bytes());
    let n = u64::from_le_bytes(h.as_bytes()[..8].try_into().expect("8 bytes")) >> 18;
    BASE + (n as i64) * 4
}

fn lock_at(kind: libc::c_int, at: i64, len: i64) -> libc::flock {
    // SAFETY: `flock` is plain old data; all-zero is a valid value.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = kind as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl.l_start = at as libc::off_t;
    fl.l_len = len as libc::off_t;
    fl
}

/// Takes a lock on `len` bytes without waiting; `false` when another
/// holder's lock conflicts.
fn set(file: &File, kind: libc::c_int, at: i64, len: i64) -> io::Result<bool> {
    let mut fl = lock_at(kind, at, len);
    // SAFETY: the descriptor is open for as long as `file` lives, and `fl`
    // is a valid `flock` for F_OFD_SETLK (l_pid 0).
    let r = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_SETLK, &mut fl) };
    if r == 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EAGAIN) | Some(libc::EACCES) => Ok(false),
        _ => Err(e),
    }
}

/// Whether no other open file description holds any lock on the byte.
fn free(file: &File, at: i64) -> io::Result<bool> {
    let mut fl = lock_at(libc::F_WRLCK, at, 1);
    // SAFETY: as in `set`; F_OFD_GETLK only writes into `fl`.
    let r = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_GETLK, &mut fl) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fl.l_type == libc::F_UNLCK as libc::c_short)
}
