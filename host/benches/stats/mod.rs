//! Sampling shared by the in-process call benchmarks (`call`, `resources`):
//! 300 warm-up runs, then 3,000 timed ones, summarised as median, p90 and
//! minimum.

use std::time::{Duration, Instant};

const WARMUP: usize = 300;
const SAMPLES: usize = 3000;

/// The summary of one case's samples.
pub struct Stats {
    pub median: Duration,
    pub p90: Duration,
    pub min: Duration,
}

/// Runs `f` `WARMUP` times untimed, then `SAMPLES` times timed.
pub fn measure(mut f: impl FnMut()) -> Stats {
    sample(|| {
        let s = Instant::now();
        f();
        s.elapsed()
    })
}

/// Like [`measure`], but each run (warm-up and timed) comes after the
/// thread has slept `gap`, untimed: a call that finds its CPU as a parked
/// server thread does between a client's calls (on a virtual machine, its
/// caches and predictors cold), not as a tight loop leaves it.
// Only the `call` bench uses it; `resources` shares this module.
#[allow(dead_code)]
pub fn measure_after_sleep(gap: Duration, mut f: impl FnMut()) -> Stats {
    sample(|| {
        std::thread::sleep(gap);
        let s = Instant::now();
        f();
        s.elapsed()
    })
}

/// `WARMUP` untimed runs of `run`, then `SAMPLES` runs, each returning
/// its own time.
fn sample(mut run: impl FnMut() -> Duration) -> Stats {
    for _ in 0..WARMUP {
        run();
    }
    let mut t: Vec<Duration> = (0..SAMPLES).map(|_| run()).collect();
    t.sort();
    Stats {
        median: t[t.len() / 2],
        p90: t[t.len() * 9 / 10],
        min: t[0],
    }
}

/// A duration in microseconds.
pub fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}
