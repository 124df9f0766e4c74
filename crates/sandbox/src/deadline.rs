//! Deadlines and cancellation: what stops a guest, whether it computes or
//! waits inside a host call.
//!
//! 1. **The epoch, advanced on demand.** Every store's epoch deadline is
//!    the next epoch, and its epoch callback ends the guest with the trap
//!    of a timeout once the call's deadline has passed (or with the
//!    cancellation error once its [`CancelToken`] is cancelled); at any
//!    other epoch it lets the guest go on. Nothing ticks: the
//!    [watchdog](watch) advances an engine's epoch when one of its calls
//!    reaches its deadline, and [`cancel`] when a running call's token is
//!    cancelled, so a guest running wasm code stops at its next epoch
//!    check right then, and a host running calls back to back spends no
//!    thread wake-ups on them (a 1 ms ticker, used before, woke about a
//!    thousand times a second while calls ran).
//! 2. **Bounded waits.** Epoch checks happen only in wasm code: a guest
//!    blocked in a host call is not stopped by them. Every host function
//!    through which a guest waits on a pollable, `wasi:io/poll.poll` and
//!    `[method]pollable.block` (what a `std::thread::sleep`, wasi-libc's
//!    `poll`/`nanosleep`, and any wait on a stream or HTTP response come
//!    down to), is shadowed in the linker by a version that races the
//!    same wait against the call's deadline and its [`CancelToken`]: at
//!    the deadline the wait ends with the trap of a timeout, on
//!    cancellation with the cancellation error. wasmtime-wasi's blocking
//!    stream methods wait only on sources that are themselves bounded
//!    (files and captured stdio are always ready; HTTP bodies end at the
//!    call's deadline, see [`super::http`]).
//! 3. **Interrupted system calls.** A system call that blocks the thread
//!    itself (with `allow_blocking_current_thread`, file I/O runs inline:
//!    opening a FIFO that [`super::fsguard`] did not catch, because it was
//!    swapped in after the check) is interrupted: the watchdog sends
//!    `SIGURG` (handled by an empty handler installed without
//!    `SA_RESTART`) to a call's thread while it is more than [`GRACE`]
//!    past its deadline. The system call fails with `EINTR`, the guest
//!    gets an error back, and its next epoch check ends it. The handler is
//!    installed only if `SIGURG` has no other handler (the host's own
//!    binaries never use it); otherwise no signal is sent and the rest
//!    still holds.
//!
//! All of it stays on the caller's thread (a hand-off per call would cost
//! more than the whole of a trivial call). A call that ends this way is a
//! `timeout` (or `cancelled`) like any other: the deadline is the call's,
//! whatever it was waiting on.

use std::future::Future;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use wasmtime::component::{Linker, Resource};
use wasmtime::{Engine, StoreContextMut, Trap};
use wasmtime_wasi::p2::DynPollable;
use wasmtime_wasi_io::bindings::wasi::io::poll::{Host as PollHost, HostPollable};

use super::{CancelToken, SandboxError, State, CANCELLED};

/// The `wasi:io` package version wasmtime-wasi 48 links (and we shadow).
const WASI_IO: &str = "wasi:io/poll@0.2.12";

/// How often a bounded wait looks at the call's cancel token.
const CANCEL_CHECK: Duration = Duration::from_millis(10);

/// How long past its deadline a call may stay in a system call before the
/// watchdog interrupts it.
pub(super) const GRACE: Duration = Duration::from_millis(100);

/// How often the watchdog interrupts a call that stays overdue.
const WATCH_PERIOD: Duration = Duration::from_millis(20);

/// Shadows the waiting functions of `wasi:io/poll` in `linker` (after
/// wasmtime-wasi added its own) with deadline-bounded ones.
pub(super) fn add_to_linker(linker: &mut Linker<State>) -> Result<(), SandboxError> {
    let engine = |e: wasmtime::Error| SandboxError::Engine(format!("{e:#}"));
    linker.allow_shadowing(true);
    let mut poll = linker.instance(WASI_IO).map_err(engine)?;
    poll.func_wrap(
        "poll",
        |mut store: StoreContextMut<'_, State>, (list,): (Vec<Resource<DynPollable>>,)| {
            let (deadline, cancel) = limits(&store);
            let table = &mut store.data_mut().table;
            bounded(deadline, cancel, PollHost::poll(table, list)).map(|ready| (ready,))
        },
    )
    .map_err(engine)?;
    poll.func_wrap(
        "[method]pollable.block",
        |mut store: StoreContextMut<'_, State>, (pollable,): (Resource<DynPollable>,)| {
            let (deadline, cancel) = limits(&store);
            let table = &mut store.data_mut().table;
            bounded(deadline, cancel, HostPollable::block(table, pollable))
        },
    )
    .map_err(engine)?;
    linker.allow_shadowing(false);
    Ok(())
}

fn limits(store: &StoreContextMut<'_, State>) -> (Instant, Option<CancelToken>) {
    let state = store.data();
    (state.deadline, state.cancel.clone())
}

/// Runs `wait` (a host function's future) on wasmtime-wasi's runtime until
/// it finishes, the deadline passes (→ the epoch trap, `timeout`) or
/// `cancel` is cancelled (→ `cancelled`).
fn bounded<T>(
    deadline: Instant,
    cancel: Option<CancelToken>,
    wait: impl Future<Output = wasmtime::Result<T>>,
) -> wasmtime::Result<T> {
    wasmtime_wasi::runtime::in_tokio(async move {
        let end = tokio::time::Instant::from_std(deadline);
        let mut wait = std::pin::pin!(wait);
        loop {
            let until = match &cancel {
                Some(_) => end.min(tokio::time::Instant::now() + CANCEL_CHECK),
                None => end,
            };
            if let Ok(done) = tokio::time::timeout_at(until, wait.as_mut()).await {
                return done;
            }
            if cancel.as_ref().is_some_and(CancelToken::is_cancelled) {
                return Err(wasmtime::Error::msg(CANCELLED));
            }
            if tokio::time::Instant::now() >= end {
                return Err(Trap::Interrupt.into());
            }
        }
    })
}

/// A running call the watchdog looks after; dropping it ends the watch.
pub(super) struct Watch {
    id: u64,
}

struct Watched {
    id: u64,
    thread: libc::pthread_t,
    deadline: Instant,
    /// The engine whose epoch stops the call's guest.
    engine: Engine,
    cancel: Option<CancelToken>,
    /// The epoch was advanced for this call's deadline.
    expired: bool,
}

struct Watchdog {
    calls: Mutex<Calls>,
    /// Signalled when a call is watched whose deadline comes before the
    /// thread would wake by itself.
    watched: std::sync::Condvar,
    /// `SIGURG` is ours to send (see [`install_handler`]).
    signals: bool,
}

struct Calls {
    /// The last id given out.
    last_id: u64,
    running: Vec<Watched>,
    /// When the thread wakes next by itself (`None`: it waits to be
    /// woken). A call whose deadline is later needs no wake-up: a stream
    /// of calls wakes the thread only once per timeout, at the first
    /// call's deadline, to find that call gone.
    wakes_at: Option<Instant>,
}

/// The watchdog, started (and its signal handler installed, if `SIGURG`
/// has no other handler) on first use.
fn watchdog() -> &'static Watchdog {
    static DOG: OnceLock<&'static Watchdog> = OnceLock::new();
    DOG.get_or_init(|| {
        let dog: &'static Watchdog = Box::leak(Box::new(Watchdog {
            calls: Mutex::new(Calls {
                last_id: 0,
                running: Vec::new(),
                wakes_at: None,
            }),
            watched: std::sync::Condvar::new(),
            signals: install_handler(),
        }));
        std::thread::Builder::new()
            .name("toolhost-watchdog".into())
            .spawn(move || dog.run())
            .expect("spawning the deadline watchdog");
        dog
    })
}

/// Starts the watchdog now (so the first call does not pay for it).
pub(super) fn start() {
    let _ = watchdog();
}

/// Watches the current thread's call on `engine` until the returned guard
/// is dropped: at `deadline` the engine's epoch advances (the guest's
/// epoch check then ends it), and past `deadline` + [`GRACE`] its blocking
/// system calls are interrupted. [`cancel`] advances the epoch when
/// `cancel` is cancelled.
pub(super) fn watch(deadline: Instant, engine: &Engine, cancel: Option<&CancelToken>) -> Watch {
    let dog = watchdog();
    let mut calls = dog.calls.lock().unwrap_or_else(|e| e.into_inner());
    calls.last_id += 1;
    let id = calls.last_id;
    calls.running.push(Watched {
        id,
        // SAFETY: pthread_self has no preconditions.
        thread: unsafe { libc::pthread_self() },
        deadline,
        engine: engine.clone(),
        cancel: cancel.cloned(),
        expired: false,
    });
    // A token cancelled before the call was watched: [`cancel`] did not
    // see the call, so its epoch advances here (the flag is set before
    // `cancel` takes this lock, and read after this call took it).
    if cancel.is_some_and(CancelToken::is_cancelled) {
        engine.increment_epoch();
    }
    let wake = calls.wakes_at.is_none_or(|at| deadline < at);
    if wake {
        // The thread sets it again before it waits.
        calls.wakes_at = Some(deadline);
    }
    drop(calls);
    if wake {
        dog.watched.notify_one();
    }
    Watch { id }
}

/// Stops the watched calls that run under `token` at their next epoch
/// check (the token is already cancelled).
pub(super) fn cancel(token: &CancelToken) {
    let calls = watchdog().calls.lock().unwrap_or_else(|e| e.into_inner());
    for w in &calls.running {
        if w.cancel.as_ref().is_some_and(|c| c.same(token)) {
            w.engine.increment_epoch();
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let mut calls = watchdog().calls.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = calls.running.iter().position(|w| w.id == self.id) {
            calls.running.swap_remove(i);
        }
    }
}

impl Watchdog {
    /// The thread: sleeps until the next deadline (or the next interrupt
    /// of an overdue call), advances the epoch of each call whose
    /// deadline passed, and signals each call past its grace.
    fn run(&self) {
        let mut calls = self.calls.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            let now = Instant::now();
            let mut next: Option<Instant> = None;
            let mut wake_at = |at: Instant| next = Some(next.map_or(at, |n| n.min(at)));
            // The lock is held while signalling: a call unregisters (under
            // the same lock) before its thread goes on to anything else.
            for w in calls.running.iter_mut() {
                if !w.expired {
                    if now < w.deadline {
                        wake_at(w.deadline);
                        continue;
                    }
                    w.expired = true;
                    w.engine.increment_epoch();
                }
                let overdue = w.deadline + GRACE;
                if now < overdue {
                    wake_at(overdue);
                } else if self.signals {
                    // SAFETY: the thread is alive: it is inside its call
                    // until it has removed its entry, which needs this lock.
                    unsafe { libc::pthread_kill(w.thread, libc::SIGURG) };
                    wake_at(now + WATCH_PERIOD);
                }
            }
            calls.wakes_at = next;
            calls = match next {
                None => self.watched.wait(calls).unwrap_or_else(|e| e.into_inner()),
                Some(at) => {
                    let wait = at.saturating_duration_since(now);
                    match self.watched.wait_timeout(calls, wait) {
                        Ok((calls, _)) => calls,
                        Err(e) => e.into_inner().0,
                    }
                }
            };
        }
    }
}

extern "C" fn interrupted(_: libc::c_int) {}

/// [`interrupted`] as a `sighandler_t`.
fn handler() -> libc::sighandler_t {
    interrupted as extern "C" fn(libc::c_int) as libc::sighandler_t
}

/// Installs the empty `SIGURG` handler (no `SA_RESTART`, so a blocked
/// system call returns `EINTR`), unless another handler is installed.
fn install_handler() -> bool {
    // SAFETY: plain sigaction calls with zero-initialized structs; the
    // handler is async-signal-safe (it does nothing).
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(libc::SIGURG, std::ptr::null(), &mut old) != 0 {
            return false;
        }
        if old.sa_sigaction != libc::SIG_DFL && old.sa_sigaction != libc::SIG_IGN {
            return old.sa_sigaction == handler();
        }
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = handler();
        action.sa_flags = libc::SA_ONSTACK;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(libc::SIGURG, &action, std::ptr::null_mut()) == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_watchdog_interrupts_a_blocked_system_call_after_the_deadline() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let started = Instant::now();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let engine = Engine::default();
            let _watch = watch(Instant::now() + Duration::from_millis(200), &engine, None);
            // Blocks until a writer opens the FIFO: never, here. (Not
            // `std::fs::File::open`, which retries on EINTR; wasmtime-wasi's
            // opens do not.)
            let opened =
                rustix::fs::open(&fifo, rustix::fs::OFlags::RDONLY, rustix::fs::Mode::empty());
            let _ = tx.send(opened.map(drop));
        });
        let got = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("the blocked open was not interrupted");
        assert_eq!(got, Err(rustix::io::Errno::INTR));
        assert!(started.elapsed() >= Duration::from_millis(200));
    }

    #[test]
    fn a_finished_watch_is_forgotten() {
        let w = watch(Instant::now(), &Engine::default(), None);
        let id = w.id;
        drop(w);
        let calls = watchdog().calls.lock().unwrap();
        assert!(calls.running.iter().all(|c| c.id != id));
    }
}
