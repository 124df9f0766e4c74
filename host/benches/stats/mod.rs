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
    for _ in 0..WARMUP {
        f();
    }
    let mut t: Vec<Duration> = (0..SAMPLES)
        .map(|_| {
            let s = Instant::now();
            f();
            s.elapsed()
        })
        .collect();
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
