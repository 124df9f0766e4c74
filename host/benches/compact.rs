//! The stdio answer writer: `cargo bench -p toolhost --bench compact`.
//!
//! Writes the MCP answer to a `file_view` page (the page as the
//! model-facing text, the same lines as `structuredContent`, and the
//! observation envelope in `_meta`) with serde_json and with
//! `toolhost_compact_json::to_vec`, which `serve --stdio` uses, and checks
//! that both wrote the same bytes. Two pages: 500 lines of the `mcp`
//! bench's escape-dense 1 MiB file (a quote or backslash every ~12 bytes),
//! and 500 lines of this repository's own source. Each writer runs in
//! turn, twice; prints the median and best of each, and the ratio.

#[allow(dead_code)]
mod stats;

use std::path::Path;

use serde_json::{json, Value};
use stats::{measure, us};

/// 500 lines of the `mcp` bench's `one_m.txt`: lines of 10 to 100
/// characters of which two in 25 are a quote or a backslash.
fn escape_dense_lines() -> Vec<String> {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    (0..500)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let len = 10 + (x % 91) as usize;
            (0..len)
                .map(|i| b"abcdefghij klmnop(){};=\"\\"[(x as usize >> (i % 40)) % 25] as char)
                .collect()
        })
        .collect()
}

/// 500 lines of this crate's sources.
fn source_lines() -> Vec<String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/pipeline.rs");
    let text = std::fs::read_to_string(src).expect("reading src/pipeline.rs");
    text.lines().cycle().take(500).map(str::to_owned).collect()
}

/// The answer `serve` sends for a page of `lines`.
fn answer(lines: &[String]) -> Value {
    let text: String = lines
        .iter()
        .enumerate()
        .map(|(i, l)| format!("{}\t{l}\n", i + 1))
        .collect();
    json!({
        "jsonrpc": "2.0",
        "id": 42,
        "result": {
            "content": [{"type": "text", "text": text}],
            "structuredContent": {
                "path": "one_m.txt",
                "offset": 1,
                "lines": lines,
                "total_lines": 19_000,
                "has_more": true,
                "sha256": "3795c5079a755375e79388c3a1093512b63d0940d9c7733279c27cd08ec04a1a",
            },
            "isError": false,
            "_meta": {"dev.toolhost/observation": {
                "schema_version": 1, "call_id": "call-1a23b9314f3-4e2e-1", "tool": "file_view",
                "status": "ok", "untrusted": true, "truncated": null, "error": null,
                "usage": {"fuel_consumed": 1_360_000, "wall_time_us": 397, "output_bytes": 30_000},
                "redactions": [],
                "provenance": [{"kind": "file", "ref": "one_m.txt", "sha256": "3795c507"}],
            }},
        },
    })
}

fn main() {
    for (name, lines) in [
        ("escape-dense page", escape_dense_lines()),
        ("source page      ", source_lines()),
    ] {
        let message = answer(&lines);
        let want = serde_json::to_vec(&message).unwrap();
        assert_eq!(toolhost_compact_json::to_vec(&message).unwrap(), want);
        let bytes = want.len();
        let (mut serde, mut compact) = (Vec::new(), Vec::new());
        for _ in 0..2 {
            serde.push(measure(|| {
                std::hint::black_box(serde_json::to_vec(&message).unwrap());
            }));
            compact.push(measure(|| {
                std::hint::black_box(toolhost_compact_json::to_vec(&message).unwrap());
            }));
        }
        let median = |s: &[stats::Stats]| s.iter().map(|s| us(s.median)).fold(f64::MAX, f64::min);
        let best = |s: &[stats::Stats]| s.iter().map(|s| us(s.min)).fold(f64::MAX, f64::min);
        let (sm, cm) = (median(&serde), median(&compact));
        println!(
            "{name} {bytes:>6} B: serde_json median {sm:6.1} µs (best {:6.1}, {:4.0} MB/s) | compact median {cm:6.1} µs (best {:6.1}, {:4.0} MB/s) | {:.2}× faster",
            best(&serde),
            bytes as f64 / sm,
            best(&compact),
            bytes as f64 / cm,
            sm / cm,
        );
    }
}
