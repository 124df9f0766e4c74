//! Secret redaction benchmark: `cargo bench -p toolhost --bench redact`.
//!
//! Scans 1 MiB of ordinary text (this repository's own Rust sources and
//! README, repeated) with the compiled rule set, with and without planted
//! secrets (one every ~16 KiB), and redacts a JSON output whose text member
//! holds that MiB, and a `file_view`-sized output (64 lines of this
//! repository's source, about 4.5 KiB: the per-string cost a call pays).
//! Prints the median and the best of 20 runs each, and the
//! throughput. The first use builds the trigger automata and a pattern is
//! compiled when a text first holds its trigger; both one-time costs are
//! printed separately. Also: the page as the model-facing text, and the
//! JSON guard that lets an output without triggers skip the walk.

use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use toolhost::redact::{redact_json, redactor};

const MIB: usize = 1024 * 1024;
const RUNS: usize = 20;

fn corpus() -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files: Vec<_> = std::fs::read_dir(root.join("src"))
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .collect();
    files.sort();
    files.push(root.join("../README.md"));
    let mut text = String::new();
    for f in &files {
        text.push_str(&std::fs::read_to_string(f).unwrap());
    }
    let mut out = String::with_capacity(MIB + text.len());
    while out.len() < MIB {
        out.push_str(&text);
    }
    let mut end = MIB;
    while !out.is_char_boundary(end) {
        end -= 1;
    }
    out.truncate(end);
    out
}

/// Plants a secret of a few kinds every `every` bytes (on line starts).
fn with_secrets(text: &str, every: usize) -> (String, usize) {
    let secrets = [
        format!(
            "aws_secret_access_key = {}",
            "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEZ"
        ),
        format!(
            "token: {}_{}",
            "ghp", "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3z5A"
        ),
        format!("{}{}", "AKIA", "QWERTYUIOP234567"),
    ];
    let mut out = String::with_capacity(text.len() + 4096);
    let mut planted = 0;
    let mut next = every;
    for line in text.split_inclusive('\n') {
        if out.len() >= next {
            out.push_str(&secrets[planted % secrets.len()]);
            out.push('\n');
            planted += 1;
            next += every;
        }
        out.push_str(line);
    }
    (out, planted)
}

fn measure(mut f: impl FnMut()) -> (Duration, Duration) {
    f();
    let mut samples: Vec<Duration> = (0..RUNS)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed()
        })
        .collect();
    samples.sort_unstable();
    (samples[RUNS / 2], samples[0])
}

fn report(name: &str, bytes: usize, (median, best): (Duration, Duration)) {
    let mb = bytes as f64 / MIB as f64;
    println!(
        "{name:<44} median {:>8.2} ms  best {:>8.2} ms  ({:.0} MiB/s at the median)",
        median.as_secs_f64() * 1e3,
        best.as_secs_f64() * 1e3,
        mb / median.as_secs_f64()
    );
}

fn main() {
    let start = Instant::now();
    let r = redactor();
    r.find("warm up");
    println!(
        "build the trigger automata (first scan)      {:.2} ms",
        start.elapsed().as_secs_f64() * 1e3
    );
    let start = Instant::now();
    r.compile_all();
    println!(
        "compile every rule's pattern (once, lazily)  {:.2} ms",
        start.elapsed().as_secs_f64() * 1e3
    );

    let clean = corpus();
    let found = r.find(&clean).len();
    println!("1 MiB of source text: {found} secrets found (expected 0)");
    report(
        "find, 1 MiB, no secrets",
        clean.len(),
        measure(|| {
            black_box(r.find(black_box(&clean)));
        }),
    );

    let (dirty, planted) = with_secrets(&clean, 16 * 1024);
    let found = r.find(&dirty).len();
    println!("1 MiB with {planted} planted secrets: {found} found");
    report(
        "redact_text, 1 MiB, secret every 16 KiB",
        dirty.len(),
        measure(|| {
            black_box(r.redact_text(black_box(&dirty), "/text"));
        }),
    );

    let value = serde_json::json!({
        "path": "src/lib.rs",
        "sha256": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        "offset": 1,
        "lines": dirty.lines().take(20_000).collect::<Vec<_>>(),
    });
    let bytes = serde_json::to_string(&value).unwrap().len();
    report(
        &format!("redact_json, {} lines", 20_000.min(dirty.lines().count())),
        bytes,
        measure(|| {
            let mut v = value.clone();
            black_box(redact_json(&mut v));
        }),
    );

    // What a file_view call of 64 source lines pays: many short strings.
    let lines: Vec<&str> = clean.lines().take(64).collect();
    let small = serde_json::json!({
        "path": "src/pipeline.rs", "total_lines": 600, "has_more": true,
        "sha256": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        "offset": 1, "lines": lines,
    });
    let bytes = serde_json::to_string(&small).unwrap().len();
    let runs = 3000;
    let per_call = |f: &mut dyn FnMut()| {
        let mut samples: Vec<Duration> = (0..runs)
            .map(|_| {
                let start = Instant::now();
                f();
                start.elapsed()
            })
            .collect();
        samples.sort_unstable();
        samples[runs / 2]
    };
    let with = per_call(&mut || {
        let mut v = small.clone();
        black_box(redact_json(&mut v));
    });
    let clone = per_call(&mut || {
        black_box(small.clone());
    });
    println!(
        "redact_json, file_view output of 64 lines ({bytes} bytes): median {:.1} µs (of which {:.1} µs cloning the value)",
        with.as_secs_f64() * 1e6,
        clone.as_secs_f64() * 1e6
    );

    // The same page as the model-facing text (one string of ~4.6 KiB).
    let text: String = lines
        .iter()
        .enumerate()
        .map(|(i, l)| format!("{:>2}\t{l}\n", i + 1))
        .collect();
    let find_text = per_call(&mut || {
        black_box(r.find(black_box(&text)));
    });
    println!(
        "find, that page as text ({} bytes): median {:.1} µs",
        text.len(),
        find_text.as_secs_f64() * 1e6
    );

    // The guard over the output's JSON text, which lets a page with no
    // trigger skip the walk: 64 lines of hex (the call bench's file) and
    // the 64 source lines above (triggers present: the walk runs).
    let hex = "0123456789abcdef".repeat(4);
    let hex_page = serde_json::json!({
        "path": "data/four_kib.txt", "total_lines": 64, "has_more": false,
        "sha256": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        "offset": 1, "lines": vec![hex.as_str(); 64],
    });
    for (name, page) in [("hex", &hex_page), ("source", &small)] {
        let raw = serde_json::to_string(page).unwrap();
        let guard = per_call(&mut || {
            black_box(r.json_may_hold_secret(black_box(&raw)));
        });
        let walk = per_call(&mut || {
            let mut v = page.clone();
            black_box(redact_json(&mut v));
        });
        println!(
            "json guard, 64-line {name} page ({} bytes): may hold a secret: {}; guard {:.1} µs, walk {:.1} µs",
            raw.len(),
            r.json_may_hold_secret(&raw),
            guard.as_secs_f64() * 1e6,
            walk.as_secs_f64() * 1e6
        );
    }
}
