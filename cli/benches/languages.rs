//! Loading and calling tools written in Rust, Python and JavaScript:
//! `cargo bench --bench languages`.
//!
//! For each language's component (Rust: `tests/plugins` `tp_trivial`;
//! Python and JavaScript: the examples of `plugins/python` and `plugins/js`
//! built by `tests/integration/languages.rs`, which carry the kits' hidden
//! `kit_*_echo` tool), it measures
//!
//! - **cold load**: a new sandbox over an empty cache directory, then
//!   `Catalog::load` (compile, cache write, pre-link, `describe()`, lint);
//! - **cached load**: a new sandbox over the same directory (what a restart
//!   sees), median of 5: `Sandbox::load` alone (component digest, entry
//!   check, mapping the artifact, pre-link) and the whole `Catalog::load`;
//! - **trivial call**: the median of a whole `Host::call` of the echo tool
//!   (strict parse, schema, fresh instance, call, output check, observation).
//!
//! Targets (2-core machine): Python cached `Sandbox::load` ≤ 50 ms, Python
//! trivial call ≤ 1.5 ms median.

#[allow(dead_code)]
#[path = "../../tests/integration/support.rs"]
mod support;

#[allow(dead_code, unused_imports)]
#[path = "../../tests/integration/languages.rs"]
mod languages;

use std::path::Path;
use std::time::{Duration, Instant};

use support::*;
use toolhost::sandbox::CompileCache;
use toolhost::{Allow, Call, CallOptions, Catalog, Host, Sandbox, SandboxConfig, Source};

fn sandbox_over(dir: &Path) -> Sandbox {
    Sandbox::new(&SandboxConfig {
        cache_dir: Some(dir.to_path_buf()),
        ..SandboxConfig::default()
    })
    .unwrap()
}

fn median(mut t: Vec<Duration>) -> Duration {
    t.sort();
    t[t.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

struct Row {
    language: &'static str,
    bytes: usize,
    cold: Duration,
    cached_sandbox_load: Duration,
    cached_catalog_load: Duration,
    call: Duration,
    call_p90: Duration,
    artifact_bytes: u64,
    entry_check: Duration,
    component_hash: Duration,
}

fn measure(language: &'static str, wasm: &Path, tool: &str) -> Row {
    let bytes = std::fs::read(wasm).unwrap();
    let cache = tempfile::tempdir().unwrap();
    let sources = [Source::File(wasm.to_path_buf())];

    let start = Instant::now();
    let catalog = Catalog::load(&sandbox_over(cache.path()), &sources, &|_, _| {});
    let cold = start.elapsed();
    assert!(catalog.problems().is_empty(), "{:?}", catalog.problems());

    // Where the cached load's time goes: checking the entry, and hashing
    // the component (the cache key).
    let entry = std::fs::read_dir(cache.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "cwasm"))
        .unwrap();
    let cc = CompileCache::open(cache.path()).unwrap();
    let mut checks = Vec::new();
    let mut hashes = Vec::new();
    for _ in 0..5 {
        let start = Instant::now();
        cc.check(&entry).unwrap();
        checks.push(start.elapsed());
        let start = Instant::now();
        std::hint::black_box(blake3::hash(&bytes));
        hashes.push(start.elapsed());
    }
    let artifact_bytes = std::fs::metadata(&entry).unwrap().len();

    let mut sandbox_loads = Vec::new();
    let mut catalog_loads = Vec::new();
    for _ in 0..5 {
        let s = sandbox_over(cache.path());
        let start = Instant::now();
        s.load(&bytes, &|e| {
            assert_eq!(e, toolhost::sandbox::LoadEvent::CacheHit, "{language}")
        })
        .unwrap();
        sandbox_loads.push(start.elapsed());
        let s = sandbox_over(cache.path());
        let start = Instant::now();
        let c = Catalog::load(&s, &sources, &|_, _| {});
        catalog_loads.push(start.elapsed());
        assert!(c.get(tool).is_some());
    }

    let sandbox = sandbox_over(cache.path());
    let catalog = Catalog::load(&sandbox, &sources, &|_, _| {});
    let host = Host::new(sandbox, catalog);
    let ws = Ws::new();
    let scope = session_allowing(&ws, &Allow::default());
    let opts = CallOptions::default();
    let args = r#"{"value":7}"#;
    let one = || {
        let obs = host.run(&scope, Call::new(tool, args, &opts));
        let text = serde_json::to_string(&obs).unwrap();
        assert!(text.contains(r#""status":"ok""#), "{text}");
    };
    for _ in 0..50 {
        one();
    }
    let mut calls: Vec<Duration> = (0..500)
        .map(|_| {
            let s = Instant::now();
            one();
            s.elapsed()
        })
        .collect();
    calls.sort();
    Row {
        language,
        bytes: bytes.len(),
        cold,
        cached_sandbox_load: median(sandbox_loads),
        cached_catalog_load: median(catalog_loads),
        call: calls[calls.len() / 2],
        call_p90: calls[calls.len() * 9 / 10],
        artifact_bytes,
        entry_check: median(checks),
        component_hash: median(hashes),
    }
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument is accepted and ignored.
    // TOOLHOST_BENCH_PREBUILT=1 reuses the components in target/languages/.
    let prebuilt;
    let built = if std::env::var_os("TOOLHOST_BENCH_PREBUILT").is_some() {
        let root = repo_root();
        prebuilt = languages::Built {
            python: root.join("target/languages/csv_summary.wasm"),
            js: root.join("target/languages/markdown_outline.wasm"),
        };
        &prebuilt
    } else {
        languages::built()
    };
    let rows = [
        measure("Rust", &test_plugin("tp_trivial"), "echo_value"),
        measure("Python", &built.python, "kit_py_echo"),
        measure("JavaScript", &built.js, "kit_js_echo"),
    ];
    println!(
        "{:<11} {:>9} {:>12} {:>16} {:>16} {:>10} {:>10}",
        "component", "MB", "cold load s", "cached load ms", "+describe ms", "call ms", "p90 ms"
    );
    for r in &rows {
        println!(
            "{:<11} {:>9.1} {:>12.2} {:>16.1} {:>16.1} {:>10.3} {:>10.3}",
            r.language,
            r.bytes as f64 / 1e6,
            r.cold.as_secs_f64(),
            ms(r.cached_sandbox_load),
            ms(r.cached_catalog_load),
            ms(r.call),
            ms(r.call_p90),
        );
    }
    println!("(cached load = Sandbox::load from the cache of a restarted host; +describe = the whole Catalog::load)");
    println!();
    println!(
        "{:<11} {:>12} {:>16} {:>20}",
        "component", "entry MB", "entry check ms", "component digest ms"
    );
    for r in &rows {
        println!(
            "{:<11} {:>12.1} {:>16.1} {:>20.1}",
            r.language,
            r.artifact_bytes as f64 / 1e6,
            ms(r.entry_check),
            ms(r.component_hash),
        );
    }
}
