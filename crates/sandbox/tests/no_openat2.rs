//! The `toolhost:plugin/files` import on a kernel without `openat2`
//! (forced for this test binary, which runs in a process of its own):
//!
//! - a path without symbolic links is still indexed and read by the host,
//!   so a plugin pages through a long file without reading it whole;
//! - a path through a symbolic link is `unavailable`, whether the link
//!   stays inside the mount or leads out: the host follows no link; the
//!   plugin opens such a path itself, through its preopen, which keeps it
//!   inside the mount;
//! - FIFOs, directories and missing files are refused as with `openat2`.

use serde_json::{json, Value};
use toolhost_sandbox::embedded::REFERENCE;
use toolhost_sandbox::{CallOutcome, Limits, Mount, Sandbox, SandboxConfig};

mod support;
use support::*;

fn sandbox() -> Sandbox {
    toolhost_base::opendir::assume_no_openat2();
    Sandbox::new(&SandboxConfig {
        cache_dir: Some(repo_root().join("target/test-compile-cache")),
        ..SandboxConfig::default()
    })
    .unwrap()
}

fn output(outcome: &CallOutcome) -> Value {
    let json = &outcome.result.as_ref().unwrap().as_ref().unwrap().json;
    serde_json::from_str(json).unwrap()
}

/// A workspace with a file, a FIFO, a directory, a link to a directory
/// inside it and links out of it.
fn workspace() -> (tempfile::TempDir, tempfile::TempDir) {
    let ws = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let root = ws.path();
    std::fs::create_dir(root.join("sub")).unwrap();
    let body: String = (0..5000).map(|i| format!("line {i:05}\n")).collect();
    std::fs::write(root.join("sub/f.txt"), &body).unwrap();
    std::fs::write(outside.path().join("secret.txt"), "outside the mount\n").unwrap();
    std::os::unix::fs::symlink("sub", root.join("alias")).unwrap();
    std::os::unix::fs::symlink(outside.path(), root.join("out")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret.txt"), root.join("leak.txt")).unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        root.join("p"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    (ws, outside)
}

#[test]
fn plain_paths_are_indexed_and_links_are_left_to_the_plugin() {
    let sandbox = sandbox();
    let (ws, _outside) = workspace();
    let mounts = [Mount::open(ws.path(), "/workspace", false).unwrap()];
    let hostile = sandbox
        .load(&std::fs::read(test_plugin("tp_hostile")).unwrap(), &|_| {})
        .unwrap();
    let attempt = |path: &str| {
        let out = output(&call(
            &hostile,
            "index_attempt",
            json!({"path": path}),
            &mounts,
            Limits::default(),
        ));
        (
            out["outcome"].as_str().unwrap().to_owned(),
            out["read_outcome"].as_str().unwrap().to_owned(),
            out,
        )
    };

    let (ix, read, out) = attempt("/workspace/sub/f.txt");
    assert_eq!((ix.as_str(), read.as_str()), ("indexed", "read"), "{out}");
    assert_eq!(out["lines"], 5000);
    let body = std::fs::read_to_string(ws.path().join("sub/f.txt")).unwrap();
    assert_eq!(out["read_text"].as_str().unwrap(), &body[1..65]);

    for path in [
        "/workspace/alias/f.txt",
        "/workspace/out/secret.txt",
        "/workspace/leak.txt",
    ] {
        let (ix, read, out) = attempt(path);
        assert_eq!(
            (ix.as_str(), read.as_str()),
            ("unavailable", "unavailable"),
            "{path}: {out}"
        );
        assert!(out["read_text"].is_null(), "{path}: {out}");
        assert!(
            !out.to_string().contains("outside the mount"),
            "{path}: {out}"
        );
    }
    assert_eq!(attempt("/workspace/p").0, "denied");
    assert_eq!(attempt("/workspace/sub").0, "is_directory");
    assert_eq!(attempt("/workspace").0, "is_directory");
    assert_eq!(attempt("/workspace/nope.txt").0, "not_found");
}

#[test]
fn file_view_pages_through_the_index_and_reads_links_itself() {
    let sandbox = sandbox();
    let (ws, _outside) = workspace();
    let mounts = [Mount::open(ws.path(), "/workspace", false).unwrap()];
    let reference = sandbox.load_embedded(&REFERENCE, &|_| {}).unwrap();
    let view = |path: &str| {
        let outcome = call(
            &reference,
            "file_view",
            json!({"path": path, "offset": 4000, "limit": 3}),
            &mounts,
            Limits::default(),
        );
        (output(&outcome), outcome.usage.fuel_consumed)
    };
    let before = sandbox.file_indexes().stats();
    let (plain, plain_fuel) = view("sub/f.txt");
    let after = sandbox.file_indexes().stats();
    assert_eq!(
        plain["lines"],
        json!(["line 03999", "line 04000", "line 04001"])
    );
    let looked_up = |s: &toolhost_base::file_index::CacheStats| s.hits + s.misses;
    assert!(
        looked_up(&after) > looked_up(&before),
        "the host indexed the plain path"
    );

    // Through the link inside the mount: the same page, read whole by the
    // plugin (the host indexes nothing).
    let (linked, linked_fuel) = view("alias/f.txt");
    let later = sandbox.file_indexes().stats();
    assert_eq!(linked["lines"], plain["lines"]);
    assert_eq!(linked["sha256"], plain["sha256"]);
    assert_eq!(
        later.hits + later.misses + later.uncached,
        after.hits + after.misses + after.uncached
    );
    assert!(
        plain_fuel * 3 < linked_fuel,
        "a page through the index costs less than a whole-file read: {plain_fuel} vs {linked_fuel}"
    );
}
