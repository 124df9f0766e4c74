//! A warm thread for a server's calls.
//!
//! A server runs its calls off the runtime's threads, so that its sessions
//! stay responsive while one runs (cancellation, progress, other
//! requests). A stdio session has its own; an HTTP server shares one among
//! its requests. Handing a call to a parked thread and the result back
//! costs two wake-ups, and on a virtual machine with an idle second CPU
//! each can take tens of microseconds, more than a trivial call itself. So
//! the server keeps one thread that, after each call, spins for a short
//! while ([`SPIN`]) before it parks: a client calling in a loop finds it
//! awake. It spins only while recent calls came within that while
//! ([`Gaps`]): for a client that comes later anyway it would only burn a
//! core. The runtime side spins briefly on the result in the same way
//! ([`take_result`]), unless the tool's recent calls took longer than that
//! spin ([`WarmThread::result_spin`]), other calls are running or the
//! runtime has several workers (HTTP; the caller decides): spinning for a
//! result that comes later anyway only takes the CPU the rest of the
//! server needs (the client, the journal, the other calls). Both spins are bounded, so an idle server costs
//! nothing; a call that arrives while the thread is busy goes to the
//! blocking pool.
//!
//! Neither spins in a process that may run on one CPU only ([`may_spin`]:
//! a one-CPU affinity mask, cpuset or CPU quota). There the thread waited
//! for runs on the same CPU as the one spinning, so every spin only delays
//! what it waits for, until the scheduler takes the CPU back (the `mcp`
//! bench's `onecpu` figure measures it).
//!
//! Between answering a call and spinning, the thread runs its idle work
//! (for a session, the sandbox's: dropping used stores and making the next
//! call's instance, see `sandbox::spare`), so that work is off the path
//! from request to answer and needs no other thread woken.

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::Thread;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

/// How long the thread stays awake for the next call after one ends. The
/// next call comes after the answer is serialised and written, the client
/// has parsed it and sent its next request: with the `mcp` bench's
/// Python client and a 4 KiB `file_view` that is often more than 300 µs,
/// and a parked thread costs a cross-CPU wake-up on a virtual machine;
/// longer spins measured no better (docs/performance.md). The price:
/// a client calling less often than this keeps a core busy for up to 1 ms
/// after each call; an idle session still takes no CPU.
pub const SPIN: Duration = Duration::from_millis(1);
/// How long the runtime thread waits awake for a result before it yields.
/// A result that comes after it parked costs a wake-up on a virtual
/// machine, and a small call takes a few hundred microseconds; spinning
/// much longer competes with the client's own work on two cores
/// (docs/performance.md).
pub const RESULT_SPIN: Duration = Duration::from_micros(400);
/// Whether this process may run on more than one CPU, so that a thread
/// spinning for another leaves that one a CPU to run on. Read once (the
/// standard library's count honours the affinity mask and the cgroup CPU
/// quota); an error counts as one CPU.
pub(crate) fn may_spin() -> bool {
    static MAY: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *MAY.get_or_init(|| std::thread::available_parallelism().is_ok_and(|n| n.get() > 1))
}

/// How many tools' recent waits a session remembers (it forgets them all
/// when one more comes).
const REMEMBERED_TOOLS: usize = 64;

type Job = Box<dyn FnOnce() + Send>;

struct Shared {
    job: Mutex<Option<Job>>,
    /// A job is in `job`.
    ready: AtomicBool,
    /// The thread has a job, queued or running.
    busy: AtomicBool,
}

/// One warm thread (see the module docs).
pub(crate) struct WarmThread {
    shared: Arc<Shared>,
    thread: Thread,
    /// Per tool, a running mean of how long its results took, in µs.
    waits: Mutex<HashMap<String, u64>>,
}

impl WarmThread {
    /// Starts the thread; it runs `setup` first and `idle` after every job.
    pub(crate) fn spawn(
        setup: impl FnOnce() + Send + 'static,
        idle: impl Fn() + Send + 'static,
    ) -> std::io::Result<WarmThread> {
        let shared = Arc::new(Shared {
            job: Mutex::new(None),
            ready: AtomicBool::new(false),
            busy: AtomicBool::new(false),
        });
        let worker = shared.clone();
        let handle = std::thread::Builder::new()
            .name("toolhost-call".into())
            .stack_size(toolhost::CALL_THREAD_STACK)
            .spawn(move || {
                setup();
                let mut gaps = Gaps::new(may_spin());
                loop {
                    let idle_since = Instant::now();
                    let spin = gaps.spin();
                    while !worker.ready.swap(false, Ordering::Acquire) {
                        if idle_since.elapsed() < spin {
                            std::hint::spin_loop();
                        } else {
                            std::thread::park();
                        }
                    }
                    gaps.record(idle_since.elapsed());
                    let job = worker.job.lock().unwrap_or_else(|e| e.into_inner()).take();
                    // A job frees the thread itself, just before it sends
                    // its result (see `try_run`). A panicking one drops its
                    // result sender (the caller sees a failed call) and is
                    // freed here; the thread lives on.
                    let done = job.map(|job| catch_unwind(AssertUnwindSafe(job)));
                    if !matches!(done, Some(Ok(()))) {
                        worker.busy.store(false, Ordering::Release);
                    }
                    // A job handed over meanwhile waits at most this long.
                    let _ = catch_unwind(AssertUnwindSafe(&idle));
                }
            })?;
        Ok(WarmThread {
            shared,
            thread: handle.thread().clone(),
            waits: Mutex::new(HashMap::new()),
        })
    }

    /// How long to spin for the result of a call of `tool`: [`RESULT_SPIN`],
    /// or nothing when its recent results took longer than that (spinning
    /// through a long call only delays the journal and the client on two
    /// cores).
    pub(crate) fn result_spin(&self, tool: &str) -> Duration {
        let waits = self.waits.lock().unwrap_or_else(|e| e.into_inner());
        match waits.get(tool) {
            Some(&mean) if mean > RESULT_SPIN.as_micros() as u64 => Duration::ZERO,
            _ => RESULT_SPIN,
        }
    }

    /// Records that a result of `tool` took `took` from hand-over to
    /// arrival (a mean of the recent ones, each new wait counting half).
    pub(crate) fn record_wait(&self, tool: &str, took: Duration) {
        let took = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        let mut waits = self.waits.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(mean) = waits.get_mut(tool) {
            *mean = *mean / 2 + took / 2;
            return;
        }
        if waits.len() >= REMEMBERED_TOOLS {
            waits.clear();
        }
        waits.insert(tool.to_owned(), took);
    }

    /// Runs `f` on the warm thread when it is free; the result arrives on
    /// the receiver. `Err(f)` when the thread is busy.
    pub(crate) fn try_run<T, F>(&self, f: F) -> Result<oneshot::Receiver<T>, F>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        if self
            .shared
            .busy
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return Err(f);
        }
        let (tx, rx) = oneshot::channel();
        let shared = self.shared.clone();
        *self.shared.job.lock().unwrap_or_else(|e| e.into_inner()) = Some(Box::new(move || {
            let value = f();
            // Free before the result wakes the caller: on one CPU the woken
            // caller can run first, answer, and hand over the next call
            // before this thread runs again, which would then find it busy
            // and go to the blocking pool.
            shared.busy.store(false, Ordering::Release);
            let _ = tx.send(value);
        }));
        self.shared.ready.store(true, Ordering::Release);
        self.thread.unpark();
        Ok(rx)
    }
}

/// The recent gaps between one call's end (its idle work done) and the
/// next call's arrival, as a running mean (each new gap counting half,
/// capped at [`SPIN`] so one long pause is forgotten after two quick
/// calls).
///
/// A client whose next call comes later than [`SPIN`] anyway (one that
/// parses a 60 KB page before it asks for the next, or an agent that
/// thinks between calls) gains nothing from the spin, and on two cores the
/// spinning thread takes the CPU that client and the journal need: with
/// the `mcp` bench's 1 MiB read over stdio it was a quarter of the call
/// thread's CPU and a tenth of the whole run's. So the thread spins only
/// while the recent gaps were at most half the spin: gaps about as long as
/// the spin often outlast it, and a Python client paging that file (gaps
/// of ~1 ms) still kept the thread spinning for ~0.8 ms of every page.
#[derive(Debug)]
struct Gaps {
    /// Mean gap in µs; 0 (spin) until a gap is known.
    mean_us: u64,
    /// Whether spinning is allowed at all ([`may_spin`]).
    allowed: bool,
}

impl Gaps {
    /// No gap known yet; `allowed`: whether to spin at all.
    fn new(allowed: bool) -> Gaps {
        Gaps {
            mean_us: 0,
            allowed,
        }
    }

    /// How long to stay awake for the next call.
    fn spin(&self) -> Duration {
        if !self.allowed || self.mean_us > SPIN.as_micros() as u64 / 2 {
            Duration::ZERO
        } else {
            SPIN
        }
    }

    /// Records the gap before a call that just arrived.
    fn record(&mut self, gap: Duration) {
        let cap = SPIN.as_micros() as u64;
        let gap = u64::try_from(gap.as_micros()).unwrap_or(u64::MAX).min(cap);
        self.mean_us = self.mean_us / 2 + gap / 2;
    }
}

/// The result if it arrives within `spin` (see
/// [`WarmThread::result_spin`]); else the receiver, to be awaited.
pub(crate) fn take_result<T>(
    mut rx: oneshot::Receiver<T>,
    spin: Duration,
) -> Result<T, oneshot::Receiver<T>> {
    let until = Instant::now() + spin;
    loop {
        match rx.try_recv() {
            Ok(v) => return Ok(v),
            Err(oneshot::error::TryRecvError::Empty) if Instant::now() < until => {
                std::hint::spin_loop()
            }
            Err(_) => return Err(rx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wait<T>(rx: oneshot::Receiver<T>) -> Result<T, oneshot::error::RecvError> {
        rx.blocking_recv()
    }

    /// `try_run` on a thread that must be free.
    fn run_free<T: Send + 'static>(
        warm: &WarmThread,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> oneshot::Receiver<T> {
        warm.try_run(f)
            .ok()
            .expect("the thread is free once the last result came")
    }

    #[test]
    fn the_thread_is_free_as_soon_as_its_result_came() {
        let warm = WarmThread::spawn(|| {}, || {}).unwrap();
        // Each result comes from a thread that has freed itself already:
        // the next call, handed over at once, is never refused.
        for n in 0..2_000u32 {
            assert_eq!(wait(run_free(&warm, move || n * 2)), Ok(n * 2));
        }
    }

    #[test]
    fn runs_jobs_one_at_a_time_and_refuses_while_busy() {
        let warm = WarmThread::spawn(|| {}, || {}).unwrap();
        assert_eq!(wait(warm.try_run(|| 1 + 1).ok().unwrap()), Ok(2));
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let slow = run_free(&warm, move || go_rx.recv().map(|_| "done"));
        // Busy: the next job comes back to the caller.
        let refused = warm.try_run(|| 3);
        assert!(refused.is_err());
        go_tx.send(()).unwrap();
        assert_eq!(wait(slow), Ok(Ok("done")));
        // Free again, also after parking.
        std::thread::sleep(SPIN * 10);
        assert_eq!(wait(run_free(&warm, || 4)), Ok(4));
    }

    #[test]
    fn setup_runs_first_and_idle_work_after_every_job_on_the_thread() {
        use std::sync::atomic::AtomicUsize;
        thread_local!(static SET_UP: std::cell::Cell<bool> = const { std::cell::Cell::new(false) });
        let idle_runs = Arc::new(AtomicUsize::new(0));
        let counted = idle_runs.clone();
        let warm = WarmThread::spawn(
            || SET_UP.with(|s| s.set(true)),
            move || {
                counted.fetch_add(1, Ordering::SeqCst);
            },
        )
        .unwrap();
        for n in 1..=3 {
            // Each job runs after the setup, on the same thread.
            let set_up = wait(run_free(&warm, || SET_UP.with(|s| s.get())));
            assert_eq!(set_up, Ok(true));
            // Then the idle work runs once, after the job.
            let until = Instant::now() + Duration::from_secs(10);
            while idle_runs.load(Ordering::SeqCst) < n {
                assert!(Instant::now() < until, "no idle work after job {n}");
                std::thread::yield_now();
            }
            assert_eq!(idle_runs.load(Ordering::SeqCst), n);
        }
    }

    #[test]
    fn a_panicking_job_closes_its_channel_and_the_thread_goes_on() {
        let warm = WarmThread::spawn(|| {}, || {}).unwrap();
        let rx = warm.try_run(|| -> u8 { panic!("boom") }).ok().unwrap();
        assert!(wait(rx).is_err());
        let rx = loop {
            // The thread frees itself right after the panic is caught.
            match warm.try_run(|| 5) {
                Ok(rx) => break rx,
                Err(_) => std::thread::yield_now(),
            }
        };
        assert_eq!(wait(rx), Ok(5));
    }

    #[test]
    fn take_result_returns_a_ready_value_or_the_receiver() {
        let (tx, rx) = oneshot::channel();
        tx.send(7).unwrap();
        assert_eq!(take_result(rx, RESULT_SPIN).ok(), Some(7));
        let (_tx, rx) = oneshot::channel::<u8>();
        assert!(take_result(rx, RESULT_SPIN).is_err());
        let (tx, rx) = oneshot::channel();
        tx.send(8).unwrap();
        assert_eq!(take_result(rx, Duration::ZERO).ok(), Some(8));
    }

    #[test]
    fn a_thread_that_may_not_spin_never_does() {
        let mut gaps = Gaps::new(false);
        assert_eq!(gaps.spin(), Duration::ZERO, "nothing known yet");
        for _ in 0..8 {
            gaps.record(SPIN / 10);
            assert_eq!(gaps.spin(), Duration::ZERO);
        }
    }

    #[test]
    fn the_thread_spins_only_while_calls_come_within_the_spin() {
        let mut gaps = Gaps::new(true);
        assert_eq!(gaps.spin(), SPIN, "nothing known yet");
        gaps.record(SPIN / 10);
        assert_eq!(gaps.spin(), SPIN);
        // Calls that come later than the spin: it would only burn a core.
        gaps.record(SPIN * 3);
        assert_eq!(gaps.spin(), Duration::ZERO);
        // Nor while the gaps are about as long as the spin.
        for _ in 0..8 {
            gaps.record(SPIN * 9 / 10);
        }
        assert_eq!(gaps.spin(), Duration::ZERO);
        for _ in 0..8 {
            gaps.record(Duration::from_secs(30));
        }
        assert_eq!(gaps.spin(), Duration::ZERO);
        // Long pauses are capped: two quick calls bring the spin back.
        gaps.record(SPIN / 10);
        assert_eq!(gaps.spin(), Duration::ZERO);
        gaps.record(SPIN / 10);
        assert_eq!(gaps.spin(), SPIN);
    }

    #[test]
    fn a_tool_whose_results_come_late_gets_no_spin_until_they_come_early() {
        let warm = WarmThread::spawn(|| {}, || {}).unwrap();
        assert_eq!(warm.result_spin("page"), RESULT_SPIN, "nothing known yet");
        warm.record_wait("page", RESULT_SPIN * 2);
        assert_eq!(warm.result_spin("page"), Duration::ZERO);
        assert_eq!(warm.result_spin("echo"), RESULT_SPIN, "another tool");
        // Each fast result halves the mean: 800 → 425 → 237 µs.
        warm.record_wait("page", Duration::from_micros(50));
        assert_eq!(warm.result_spin("page"), Duration::ZERO);
        warm.record_wait("page", Duration::from_micros(50));
        assert_eq!(warm.result_spin("page"), RESULT_SPIN);
        // Bounded: one tool too many forgets the others.
        for n in 0..REMEMBERED_TOOLS {
            warm.record_wait(&format!("t{n}"), RESULT_SPIN * 2);
        }
        assert_eq!(warm.result_spin("t0"), RESULT_SPIN);
        assert_eq!(
            warm.result_spin(&format!("t{}", REMEMBERED_TOOLS - 1)),
            Duration::ZERO
        );
    }
}
