//! A warm thread for the calls of a stdio session.
//!
//! A stdio session runs its calls off the runtime thread, so that the
//! session stays responsive while one runs (cancellation, progress, other
//! requests). Handing a call to a parked thread and the result back costs
//! two wake-ups, and on a virtual machine with an idle second CPU each can
//! take tens of microseconds, more than a trivial call itself. So the
//! session keeps one thread that, after each call, spins for a short while
//! ([`SPIN`]) before it parks: a client calling in a loop finds it awake.
//! The runtime side spins briefly on the result in the same way
//! ([`take_result`]). Both spins are bounded, so an idle session costs
//! nothing; a call that arrives while the thread is busy goes to the
//! blocking pool as before.
//!
//! Both spins are also learned, since a spin that ends without what it
//! waited for only takes a CPU from the threads that have work (the
//! runtime writing the answer, the client parsing it, the journal): the
//! thread stays awake after a call only if the last call was handed to it
//! within [`SPIN_WORTH`] of the one before it ending, and the runtime waits awake
//! for a result only if the last call ran shorter than [`RESULT_SPIN`]. A
//! client calling in a tight loop keeps both; a client that takes longer
//! than that between calls, or calls that run longer (a page of a file,
//! whose answer takes the client longer to read), get parked threads and
//! pay the wake-ups instead of the spins.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::Thread;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

/// How long the thread stays awake for the next call after one ends.
pub const SPIN: Duration = Duration::from_micros(300);
/// How long the runtime thread waits awake for a result before it yields.
pub const RESULT_SPIN: Duration = Duration::from_micros(100);
/// The thread stays awake after a call only if the last call came within
/// this long of the one before it ending: about what a wake-up costs on
/// this kind of machine, so a longer spin would cost more than it saves.
pub const SPIN_WORTH: Duration = Duration::from_micros(100);

type Job = Box<dyn FnOnce() + Send>;

struct Shared {
    /// The job and when it was handed over.
    job: Mutex<Option<(Job, Instant)>>,
    /// A job is in `job`.
    ready: AtomicBool,
    /// The thread has a job, queued or running.
    busy: AtomicBool,
    /// How long the last job ran, in microseconds.
    last_run_us: AtomicU64,
    /// The thread stays awake after its current or last job.
    spins: AtomicBool,
}

/// One warm thread (see the module docs).
pub(crate) struct WarmThread {
    shared: Arc<Shared>,
    thread: Thread,
}

impl WarmThread {
    pub(crate) fn spawn() -> std::io::Result<WarmThread> {
        let shared = Arc::new(Shared {
            job: Mutex::new(None),
            ready: AtomicBool::new(false),
            busy: AtomicBool::new(false),
            last_run_us: AtomicU64::new(0),
            spins: AtomicBool::new(true),
        });
        let worker = shared.clone();
        let handle = std::thread::Builder::new()
            .name("toolhost-call".into())
            .spawn(move || {
                // Whether to stay awake after a call (see the module docs).
                let mut spin = SPIN;
                loop {
                    let idle_since = Instant::now();
                    while !worker.ready.swap(false, Ordering::Acquire) {
                        if idle_since.elapsed() < spin {
                            std::hint::spin_loop();
                        } else {
                            std::thread::park();
                        }
                    }
                    let job = worker.job.lock().unwrap_or_else(|e| e.into_inner()).take();
                    let started = Instant::now();
                    if let Some((job, handed)) = job {
                        // The gap as the client made it: until the job was
                        // handed over, not until this thread woke for it
                        // (a wake-up alone can take longer than SPIN_WORTH,
                        // and would then keep the spin off for good).
                        let worth = handed.saturating_duration_since(idle_since) < SPIN_WORTH;
                        spin = if worth { SPIN } else { Duration::ZERO };
                        worker.spins.store(worth, Ordering::Relaxed);
                        // A panicking call drops its result sender: the
                        // caller sees a failed call, the thread lives on.
                        let _ = catch_unwind(AssertUnwindSafe(job));
                    }
                    let ran = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
                    worker.last_run_us.store(ran, Ordering::Relaxed);
                    worker.busy.store(false, Ordering::Release);
                }
            })?;
        Ok(WarmThread {
            shared,
            thread: handle.thread().clone(),
        })
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
        let job: Job = Box::new(move || {
            let _ = tx.send(f());
        });
        *self.shared.job.lock().unwrap_or_else(|e| e.into_inner()) = Some((job, Instant::now()));
        self.shared.ready.store(true, Ordering::Release);
        self.thread.unpark();
        Ok(rx)
    }
}

impl WarmThread {
    /// How long to wait awake for the result of a call handed to this
    /// thread: [`RESULT_SPIN`] if the last call ran shorter than that, else
    /// nothing (see the module docs).
    pub(crate) fn result_spin(&self) -> Duration {
        let last = Duration::from_micros(self.shared.last_run_us.load(Ordering::Relaxed));
        if last < RESULT_SPIN {
            RESULT_SPIN
        } else {
            Duration::ZERO
        }
    }
}

/// The result if it arrives within `spin`; else the receiver, to be
/// awaited.
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

    /// `try_run` once the thread is free: it frees itself just after it
    /// sends a result, so a caller that got one may find it busy a moment.
    fn run_when_free<T: Send + 'static>(
        warm: &WarmThread,
        mut f: impl FnOnce() -> T + Send + 'static,
    ) -> oneshot::Receiver<T> {
        let until = Instant::now() + Duration::from_secs(10);
        loop {
            match warm.try_run(f) {
                Ok(rx) => return rx,
                Err(back) if Instant::now() < until => {
                    f = back;
                    std::thread::yield_now();
                }
                Err(_) => panic!("the warm thread stayed busy"),
            }
        }
    }

    #[test]
    fn runs_jobs_one_at_a_time_and_refuses_while_busy() {
        let warm = WarmThread::spawn().unwrap();
        assert_eq!(wait(warm.try_run(|| 1 + 1).ok().unwrap()), Ok(2));
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let slow = run_when_free(&warm, move || go_rx.recv().map(|_| "done"));
        // Busy: the next job comes back to the caller.
        let refused = warm.try_run(|| 3);
        assert!(refused.is_err());
        go_tx.send(()).unwrap();
        assert_eq!(wait(slow), Ok(Ok("done")));
        // Free again, also after parking.
        std::thread::sleep(SPIN * 10);
        assert_eq!(wait(run_when_free(&warm, || 4)), Ok(4));
    }

    #[test]
    fn a_panicking_job_closes_its_channel_and_the_thread_goes_on() {
        let warm = WarmThread::spawn().unwrap();
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
    fn the_thread_stops_spinning_after_a_call_that_came_late() {
        let warm = WarmThread::spawn().unwrap();
        assert!(warm.shared.spins.load(Ordering::Relaxed), "it starts awake");
        assert_eq!(wait(run_when_free(&warm, || 1)), Ok(1));
        // The next call comes long after (the client took its time): the
        // thread learns not to stay awake for the one after.
        std::thread::sleep(SPIN_WORTH * 20);
        assert_eq!(wait(run_when_free(&warm, || 2)), Ok(2));
        assert!(!warm.shared.spins.load(Ordering::Relaxed));
    }

    #[test]
    fn the_result_spin_follows_the_last_call() {
        let warm = WarmThread::spawn().unwrap();
        assert_eq!(wait(run_when_free(&warm, || 1)), Ok(1));
        let until = Instant::now() + Duration::from_secs(10);
        while warm.shared.busy.load(Ordering::Acquire) && Instant::now() < until {
            std::thread::yield_now();
        }
        assert_eq!(warm.result_spin(), RESULT_SPIN, "a short call: wait awake");
        let slow = run_when_free(&warm, || std::thread::sleep(RESULT_SPIN * 3));
        assert_eq!(wait(slow), Ok(()));
        while warm.shared.busy.load(Ordering::Acquire) && Instant::now() < until {
            std::thread::yield_now();
        }
        assert_eq!(warm.result_spin(), Duration::ZERO, "a long call: do not");
    }
}
