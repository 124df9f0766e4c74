//! Capability verification benchmark: `cargo bench -p toolhost --bench capability`.
//!
//! Verifies a decoded token with 5 caveats (a minted token of 4 caveats
//! attenuated with 1 more, so the chain is 1 + 5 HMACs) ~100k times, timing
//! each call with `Instant`, and prints the median and p90. Also prints the
//! mean over one loop without a per-call timer (no `Instant` overhead, but
//! every preemption on a busy machine counts), and, for reference, decode +
//! verify, the caveat fold alone (no HMAC) and one attenuation.
//! Target: verify median ≤ 2 µs.

use std::hint::black_box;
use std::time::{Duration, Instant, UNIX_EPOCH};

use toolhost::policy::capability::{Caveat, RootKey, Token};

const WARMUP: usize = 10_000;
const ITERS: usize = 100_000;

fn caveats(list: &[&str]) -> Vec<Caveat> {
    list.iter()
        .map(|s| Caveat::parse(s).expect("caveat"))
        .collect()
}

struct Stats {
    median: Duration,
    p90: Duration,
}

fn measure(mut f: impl FnMut()) -> Stats {
    for _ in 0..WARMUP {
        f();
    }
    let mut samples = Vec::with_capacity(ITERS);
    for _ in 0..ITERS {
        let start = Instant::now();
        f();
        samples.push(start.elapsed());
    }
    samples.sort_unstable();
    Stats {
        median: samples[ITERS / 2],
        p90: samples[ITERS * 9 / 10],
    }
}

fn main() {
    let key = RootKey::from_bytes([42; 32]);
    let now = UNIX_EPOCH + Duration::from_secs(1_767_225_600);
    let minted = Token::mint(
        &key,
        &caveats(&[
            "tool=file_*,git_*",
            "right=read,write",
            "read=src,docs",
            "write=src/gen",
        ]),
    )
    .expect("mint");
    let token = minted
        .attenuate(&caveats(&["expires=1767229200"]))
        .expect("attenuate");
    let text = token.encode();
    let token = Token::decode(&text).expect("decode");
    assert_eq!(token.caveats().len(), 5);
    assert!(key.verify(&token, now).is_ok());

    let verify = measure(|| {
        black_box(
            key.verify(black_box(&token), black_box(now))
                .expect("verify"),
        );
    });

    let start = Instant::now();
    for _ in 0..ITERS {
        black_box(
            key.verify(black_box(&token), black_box(now))
                .expect("verify"),
        );
    }
    let mean = start.elapsed() / ITERS as u32;

    let decode_verify = measure(|| {
        let t = Token::decode(black_box(&text)).expect("decode");
        black_box(key.verify(&t, black_box(now)).expect("verify"));
    });
    let fold_only = measure(|| {
        black_box(black_box(&token).grant_unverified().expect("fold"));
    });
    let more = caveats(&["tool=file_view"]);
    let attenuate = measure(|| {
        black_box(black_box(&token).attenuate(&more).expect("attenuate"));
    });

    println!(
        "capability verify, 5-caveat token ({} chars), {ITERS} iterations:",
        text.len()
    );
    println!(
        "  verify:          median {:>8.2?}  p90 {:>8.2?}  (mean without per-call timer {:.2?})",
        verify.median, verify.p90, mean
    );
    println!(
        "  decode + verify: median {:>8.2?}  p90 {:>8.2?}",
        decode_verify.median, decode_verify.p90
    );
    println!(
        "  fold only:       median {:>8.2?}  p90 {:>8.2?}  (caveats → grant, no HMAC)",
        fold_only.median, fold_only.p90
    );
    println!(
        "  attenuate (+1):  median {:>8.2?}  p90 {:>8.2?}",
        attenuate.median, attenuate.p90
    );
    let target = Duration::from_micros(2);
    println!(
        "  target: verify median <= {target:?}: {}",
        if verify.median <= target {
            "met"
        } else {
            "MISSED"
        }
    );
}
