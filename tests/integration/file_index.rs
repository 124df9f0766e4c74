//! The `toolhost:plugin/files` import: `file_view` pages through
//! the host's native, cached index, and the import reads nothing the call
//! could not read itself.
//!
//! - pages of a 1 MiB file reassemble to exactly the file, each carrying
//!   the whole file's SHA-256, at a fraction of the whole-file fuel;
//! - a same-size rewrite with the mtime set back is never answered from a
//!   stale index (the racy rule for a fresh file; the ctime in the key for
//!   a settled, cached one);
//! - the hostile `index_attempt` tool asks to index and to `read` paths
//!   outside its mount (`..`, an absolute host path, a link out of the
//!   mount, another grant's file, a FIFO, no grant at all) and gets the
//!   exact refusal from both; a grant swapped for a link after it was opened
//!   is still the opened directory;
//! - a component that does not import `files` still loads and runs.

use std::time::{Duration, SystemTime};

use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use toolhost::{Allow, CallOptions, Catalog, Host, Limits, Mount, Sandbox, SandboxConfig, Source};
use toolhost_sandbox::CallRequest;

use crate::support::*;

fn sha_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// About 1 MiB of text: numbered lines of varying length, some with CRLF,
/// non-ASCII characters, and no final line ending.
fn one_mib_text() -> String {
    let mut s = String::with_capacity(1 << 20);
    let mut i = 0u64;
    while s.len() < (1 << 20) {
        i += 1;
        let pad = "xyzé".repeat((i % 23) as usize);
        let end = if i % 7 == 0 { "\r\n" } else { "\n" };
        s.push_str(&format!("line {i} {pad}{end}"));
    }
    s.push_str("tail without newline");
    s
}

fn view(host: &Host, ws: &Ws, path: &str, offset: u64, limit: u64) -> Value {
    let args = json!({"path": path, "offset": offset, "limit": limit}).to_string();
    call(host, ws, "file_view", &args, &READ_ALL)
}

#[test]
fn file_view_pages_of_a_one_mib_file_reassemble_to_exactly_the_file() {
    let ws = Ws::new();
    let body = one_mib_text();
    ws.write("big.txt", &body);
    let sha = sha_hex(body.as_bytes());
    let want: Vec<&str> = body.lines().collect();
    let mut got: Vec<String> = Vec::new();
    let mut offset = 1u64;
    let mut pages = 0;
    loop {
        let obs = view(reference_host(), &ws, "big.txt", offset, 500);
        let out = expect_ok(&obs);
        pages += 1;
        assert_eq!(out["sha256"], sha.as_str(), "page {pages}");
        assert_eq!(out["total_lines"], want.len() as u64);
        // `lines[i]` is line `offset + i`.
        assert_eq!(out["offset"], got.len() as u64 + 1);
        for line in out["lines"].as_array().unwrap() {
            got.push(line.as_str().unwrap().to_owned());
        }
        if out["has_more"] == false {
            break;
        }
        offset = got.len() as u64 + 1;
    }
    assert_eq!(got, want);
    assert!(pages > 10, "{pages}");
    // Rebuilt with the line endings the file has, it is the file.
    let mut rebuilt = String::new();
    let mut rest = body.as_str();
    for line in &got {
        rest = rest.strip_prefix(line.as_str()).unwrap();
        for end in ["\r\n", "\n", ""] {
            if let Some(r) = rest.strip_prefix(end) {
                rebuilt.push_str(line);
                rebuilt.push_str(end);
                rest = r;
                break;
            }
        }
    }
    assert_eq!(rebuilt, body);
}

/// Pages that start and end anywhere against the index's groups of 64
/// lines (the page's region is read in one piece from the group start at
/// or before its first line to the group start after its last): the first
/// and last lines of a group, one line, a page across groups, the file's
/// last line (no line ending), and past the end.
#[test]
fn pages_starting_and_ending_anywhere_in_the_index_groups_are_the_files_lines() {
    let ws = Ws::new();
    let body = one_mib_text();
    ws.write("big.txt", &body);
    let want: Vec<&str> = body.lines().collect();
    let n = want.len() as u64;
    for (offset, limit) in [
        (1, 1),
        (37, 1),
        (64, 1),
        (64, 2),
        (65, 64),
        (129, 500),
        (1000, 63),
        (n - 1, 5),
        (n, 1),
    ] {
        let obs = view(reference_host(), &ws, "big.txt", offset, limit);
        let out = expect_ok(&obs);
        assert_eq!(out["offset"], offset);
        let got: Vec<(u64, &str)> = (offset..)
            .zip(out["lines"].as_array().unwrap())
            .map(|(k, l)| (k, l.as_str().unwrap()))
            .collect();
        // Whole lines from `offset`: all `limit` of them, or as many as
        // fit a page's text, the next page starting at the first not shown.
        let end = offset + got.len() as u64 - 1;
        assert!(
            end <= (offset + limit - 1).min(n),
            "offset {offset}, limit {limit}"
        );
        if limit <= 64 || end == n {
            assert_eq!(
                end,
                (offset + limit - 1).min(n),
                "offset {offset}, limit {limit}"
            );
        }
        let expected: Vec<(u64, &str)> =
            (offset..=end).map(|k| (k, want[k as usize - 1])).collect();
        assert_eq!(got, expected, "offset {offset}, limit {limit}");
        assert_eq!(out["has_more"], end < n, "offset {offset}, limit {limit}");
        if end < n {
            assert_eq!(out["next"], json!({"offset": end + 1, "column": 0}));
        }
    }
    let past = view(reference_host(), &ws, "big.txt", n + 1, 10);
    assert_eq!(expect_ok(&past)["lines"], json!([]));
}

#[test]
fn a_page_of_a_large_file_costs_about_what_the_same_page_of_a_small_one_does() {
    // Deterministic (fuel, not time): with the host's index the guest
    // neither hashes nor scans the rest of the file.
    let ws = Ws::new();
    let body = one_mib_text();
    let head: String = body.split_inclusive('\n').take(600).collect();
    ws.write("big.txt", &body);
    ws.write("head.txt", &head);
    let fuel = |path: &str, offset: u64| {
        let obs = view(reference_host(), &ws, path, offset, 500);
        expect_ok(&obs);
        obs["usage"]["fuel_consumed"].as_u64().unwrap()
    };
    let small = fuel("head.txt", 1);
    let big = fuel("big.txt", 1);
    assert!(big < small * 2, "big {big}, small {small}");
    // Deep in the file too.
    let deep = fuel("big.txt", 20_001);
    assert!(deep < small * 2, "deep {deep}, small {small}");
}

/// A host of its own (its own sandbox and index cache), to count what the
/// cache did.
fn private_reference_host() -> Host {
    let sandbox = Sandbox::new(&SandboxConfig {
        cache_dir: None,
        ..SandboxConfig::default()
    })
    .unwrap();
    let catalog = Catalog::load(&sandbox, &[Source::reference()], &|_, _| {});
    assert!(catalog.problems().is_empty(), "{:?}", catalog.problems());
    Host::new(sandbox, catalog)
}

/// Rewrites `rel` with `content` (the same size) and sets its mtime back to
/// what it was: a rewrite in the same clock tick, as far as size and mtime
/// can tell.
fn rewrite_keeping_mtime(ws: &Ws, rel: &str, content: &str) {
    let path = ws.path(rel);
    let before = std::fs::metadata(&path).unwrap();
    assert_eq!(before.len(), content.len() as u64);
    let mtime = before.modified().unwrap();
    std::fs::write(&path, content).unwrap();
    std::fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    let after = std::fs::metadata(&path).unwrap();
    assert_eq!(
        (after.len(), after.modified().unwrap()),
        (before.len(), mtime)
    );
}

fn numbered(tag: &str, n: usize) -> String {
    (1..=n).map(|i| format!("{tag} {i:04}\n")).collect()
}

#[test]
fn a_same_tick_rewrite_of_a_fresh_file_gives_the_new_sha256_on_the_next_page() {
    // The file was written just now: the racy rule keeps it out of the
    // cache, so every page indexes it afresh.
    let host = private_reference_host();
    let ws = Ws::new();
    let old = numbered("old", 300);
    let new = numbered("NEW", 300);
    ws.write("a.txt", &old);
    let out = expect_ok(&view(&host, &ws, "a.txt", 1, 100)).clone();
    assert_eq!(out["sha256"], sha_hex(old.as_bytes()));
    rewrite_keeping_mtime(&ws, "a.txt", &new);
    let out = expect_ok(&view(&host, &ws, "a.txt", 101, 100)).clone();
    assert_eq!(out["sha256"], sha_hex(new.as_bytes()));
    assert_eq!(out["lines"][0], "NEW 0101");
    let stats = host.sandbox().file_index_stats();
    assert_eq!((stats.hits, stats.entries), (0, 0), "{stats:?}");
    assert!(stats.uncached >= 2, "{stats:?}");
}

#[test]
fn a_same_tick_rewrite_of_a_cached_file_gives_the_new_sha256_on_the_next_page() {
    // The file settles past the racy window, so its index is cached (the
    // second page is a hit). The rewrite keeps size and mtime but moves the
    // ctime, which is in the key: the next page misses and reads the new
    // content.
    let host = private_reference_host();
    let ws = Ws::new();
    let old = numbered("old", 300);
    let new = numbered("NEW", 300);
    ws.write("a.txt", &old);
    let settled = SystemTime::now() + Duration::from_millis(2_300);
    while SystemTime::now() < settled {
        std::thread::sleep(Duration::from_millis(100));
    }
    let first = expect_ok(&view(&host, &ws, "a.txt", 1, 100)).clone();
    let second = expect_ok(&view(&host, &ws, "a.txt", 101, 100)).clone();
    assert_eq!(first["sha256"], sha_hex(old.as_bytes()));
    assert_eq!(second["sha256"], first["sha256"]);
    let stats = host.sandbox().file_index_stats();
    assert_eq!(
        (stats.misses, stats.hits, stats.entries),
        (1, 1, 1),
        "{stats:?}"
    );

    rewrite_keeping_mtime(&ws, "a.txt", &new);
    let third = expect_ok(&view(&host, &ws, "a.txt", 201, 100)).clone();
    assert_eq!(third["sha256"], sha_hex(new.as_bytes()));
    assert_eq!(third["lines"][0], "NEW 0201");
    let stats = host.sandbox().file_index_stats();
    assert_eq!((stats.misses, stats.hits), (2, 1), "{stats:?}");
}

/// A workspace `ws/` with `sub/` (granted), `other/` (not granted) and a
/// sibling `outside/` that no call may read.
struct Site {
    dir: tempfile::TempDir,
}

const SECRET: &str = "INDEX-SECRET-91c2";

impl Site {
    fn new() -> Site {
        let dir = tempfile::tempdir().unwrap();
        let p = |r: &str| dir.path().join(r);
        for d in ["ws/sub/dir", "ws/other", "outside"] {
            std::fs::create_dir_all(p(d)).unwrap();
        }
        std::fs::write(p("ws/sub/f.txt"), "inside\nlines\n").unwrap();
        std::fs::write(p("ws/other/secret.txt"), SECRET).unwrap();
        std::fs::write(p("outside/secret.txt"), SECRET).unwrap();
        std::os::unix::fs::symlink("../../outside/secret.txt", p("ws/sub/link_out")).unwrap();
        std::os::unix::fs::symlink("../other/secret.txt", p("ws/sub/link_other")).unwrap();
        std::os::unix::fs::symlink(p("outside/secret.txt"), p("ws/sub/link_abs")).unwrap();
        std::os::unix::fs::symlink("f.txt", p("ws/sub/link_in")).unwrap();
        let status = std::process::Command::new("mkfifo")
            .arg(p("ws/sub/fifo"))
            .status()
            .expect("running mkfifo");
        assert!(status.success());
        Site { dir }
    }

    fn attempt(&self, allow: &Allow<'_>, path: &str) -> Value {
        let session = session_at(&self.dir.path().join("ws"), allow);
        let args = json!({ "path": path }).to_string();
        let obs = run_in(
            hostile_host(),
            &session,
            "index_attempt",
            &args,
            &CallOptions::default(),
        );
        assert!(!obs.to_string().contains(SECRET), "{obs:#}");
        expect_ok(&obs).clone()
    }
}

/// Both `index` and `read` of the path were refused the same way.
#[track_caller]
fn refused(out: &Value, outcome: &str, says: &str) {
    assert_eq!(out["outcome"], outcome, "{out:#}");
    assert!(out["detail"].as_str().unwrap().contains(says), "{out:#}");
    assert!(out["sha256"].is_null(), "{out:#}");
    assert_eq!(out["read_outcome"], outcome, "{out:#}");
    assert!(
        out["read_detail"].as_str().unwrap().contains(says),
        "{out:#}"
    );
    assert!(out["read_text"].is_null(), "{out:#}");
}

/// `index` and `read` (bytes 1–64) of the path both answered, from the
/// mount's `sub/f.txt`.
#[track_caller]
fn indexed_and_read_inside(out: &Value) {
    assert_eq!(out["outcome"], "indexed", "{out:#}");
    assert_eq!(out["sha256"], sha_hex(b"inside\nlines\n"), "{out:#}");
    assert_eq!(out["read_outcome"], "read", "{out:#}");
    assert_eq!(out["read_text"], "nside\nlines\n", "{out:#}");
}

#[test]
fn the_files_import_reads_only_what_the_calls_mounts_let_the_guest_read() {
    let site = Site::new();
    let sub = Allow {
        read: &["sub"],
        ..Allow::default()
    };
    let out = site.attempt(&sub, "/workspace/sub/f.txt");
    indexed_and_read_inside(&out);
    assert_eq!(
        (out["size"].as_u64(), out["lines"].as_u64()),
        (Some(13), Some(2))
    );
    // A link that stays in the mount is followed, as the guest's open does.
    indexed_and_read_inside(&site.attempt(&sub, "/workspace/sub/link_in"));

    let links = ["link_out", "link_other", "link_abs"].map(|l| format!("/workspace/sub/{l}"));
    let cases = [
        ("../outside/secret.txt", "invalid", "absolute"),
        ("/workspace/sub/../other/secret.txt", "invalid", "`..`"),
        ("/etc/passwd", "denied", "outside the call's mounts"),
        (
            "/workspace/other/secret.txt",
            "denied",
            "outside the call's mounts (/workspace/sub)",
        ),
        (&links[0], "denied", "leads out of its mount"),
        (&links[1], "denied", "leads out of its mount"),
        (&links[2], "denied", "leads out of its mount"),
        ("/workspace/sub/fifo", "denied", "named pipe (FIFO)"),
        ("/workspace/sub/missing", "not_found", ""),
        ("/workspace/sub/dir", "is_directory", ""),
    ];
    for (path, outcome, says) in cases {
        refused(&site.attempt(&sub, path), outcome, says);
    }

    // With the whole workspace granted, `other/` is readable: the same
    // path was refused only for lack of that grant.
    let all = Allow {
        read: &["."],
        ..Allow::default()
    };
    let out = site.attempt(&all, "/workspace/other/secret.txt");
    assert_eq!(out["outcome"], "indexed", "{out:#}");
    assert_eq!(out["read_text"], &SECRET[1..], "{out:#}");
    // …but never through a link out of the workspace.
    refused(
        &site.attempt(&all, "/workspace/sub/link_out"),
        "denied",
        "leads out of its mount",
    );

    // No read grant: no mounts, every path denied.
    let out = site.attempt(&Allow::default(), "/workspace/sub/f.txt");
    refused(&out, "denied", "may read no file");
}

#[test]
fn a_grant_swapped_for_a_link_after_its_open_is_indexed_as_the_opened_directory() {
    // The mount is opened, then `sub` is moved away and a link to
    // `../outside` put in its place: the import resolves beneath the
    // opened directory, never through the new link.
    let site = Site::new();
    let ws = site.dir.path().join("ws");
    let mounts = [Mount::open(&ws.join("sub"), "/workspace/sub", false).unwrap()];
    std::fs::rename(ws.join("sub"), ws.join("sub.real")).unwrap();
    std::os::unix::fs::symlink("../outside", ws.join("sub")).unwrap();
    std::fs::write(site.dir.path().join("outside/f.txt"), SECRET).unwrap();
    let plugin = hostile_plugin();
    let outcome = plugin.call(&CallRequest {
        tool: "index_attempt",
        args_json: r#"{"path":"/workspace/sub/f.txt"}"#,
        call_id: "swapped-grant",
        workspace_root: "/workspace",
        idempotency_key: None,
        mounts: &mounts,
        net_origins: &[],
        exec: None,
        limits: Limits::default(),
        reveal_secrets: false,
        asker: None,
        script: None,
    });
    let out: Value = serde_json::from_str(&outcome.result.unwrap().unwrap().json).unwrap();
    indexed_and_read_inside(&out);
}

/// The hostile `index_attempt` with `args`, in a call that mounts the
/// site's `ws/sub` read-only at `/workspace/sub`, under `limits`.
fn attempt_in_sub(
    plugin: &toolhost_sandbox::Plugin,
    site: &Site,
    args: &Value,
    limits: Limits,
) -> Value {
    let ws = site.dir.path().join("ws");
    let mounts = [Mount::open(&ws.join("sub"), "/workspace/sub", false).unwrap()];
    let args = args.to_string();
    let outcome = plugin.call(&CallRequest {
        tool: "index_attempt",
        args_json: &args,
        call_id: "attempt-in-sub",
        workspace_root: "/workspace",
        idempotency_key: None,
        mounts: &mounts,
        net_origins: &[],
        exec: None,
        limits,
        reveal_secrets: false,
        asker: None,
        script: None,
    });
    serde_json::from_str(&outcome.result.unwrap().unwrap().json).unwrap()
}

/// The hostile test plugin, loaded into the shared sandbox.
fn hostile_plugin() -> toolhost_sandbox::Plugin {
    sandbox()
        .load(&std::fs::read(test_plugin("tp_hostile")).unwrap(), &|_| {})
        .unwrap()
}

#[test]
fn a_read_over_the_hosts_cap_or_the_calls_memory_is_too_large() {
    let site = Site::new();
    let plugin = hostile_plugin();
    let read = |read_len: u64, memory_bytes: usize| -> Value {
        let args = json!({"path": "/workspace/sub/f.txt", "read_len": read_len});
        let limits = Limits {
            memory_bytes,
            ..Limits::default()
        };
        attempt_in_sub(&plugin, &site, &args, limits)
    };
    // The host's own cap, 64 MiB, under the default memory limit.
    let out = read(1 << 30, Limits::default().memory_bytes);
    assert_eq!(out["read_outcome"], "too_large", "{out:#}");
    assert_eq!(out["read_detail"], (64u64 << 20).to_string(), "{out:#}");
    // The call's memory limit when it is smaller: what the guest could not
    // hold is not read.
    let out = read(32 << 20, 16 << 20);
    assert_eq!(out["read_outcome"], "too_large", "{out:#}");
    assert_eq!(out["read_detail"], (16u64 << 20).to_string(), "{out:#}");
    // A length the file does not have is fine: the bytes there are read.
    let out = read(8 << 20, 16 << 20);
    assert_eq!(out["read_text"], "nside\nlines\n", "{out:#}");
}

#[test]
fn a_read_after_an_index_reads_the_path_it_names_under_the_same_checks() {
    // The file an index opened is read again only under its own path.
    let site = Site::new();
    std::fs::write(site.dir.path().join("ws/sub/g.txt"), "another file\n").unwrap();
    let plugin = hostile_plugin();
    let attempt = |read_path: &str| -> Value {
        let args = json!({"path": "/workspace/sub/f.txt", "read_path": read_path});
        attempt_in_sub(&plugin, &site, &args, Limits::default())
    };
    let out = attempt("/workspace/sub/f.txt");
    assert_eq!(out["outcome"], "indexed", "{out:#}");
    assert_eq!(out["read_text"], "nside\nlines\n", "{out:#}");
    let out = attempt("/workspace/sub/g.txt");
    assert_eq!(out["outcome"], "indexed", "{out:#}");
    assert_eq!(out["read_text"], "nother file\n", "{out:#}");
    // Another path is looked up and checked as ever.
    for (path, refusal) in [
        ("/workspace/sub/link_out", "denied"),
        ("/workspace/other/secret.txt", "denied"),
        ("/workspace/sub/../f.txt", "invalid"),
        ("/workspace/sub/none.txt", "not_found"),
    ] {
        let out = attempt(path);
        assert_eq!(out["outcome"], "indexed", "{out:#}");
        assert_eq!(out["read_outcome"], refusal, "{path}: {out:#}");
        assert!(out["read_text"].is_null(), "{out:#}");
        assert!(!out.to_string().contains(SECRET), "{out:#}");
    }
}

#[test]
fn a_call_without_mounts_is_denied_every_path() {
    let plugin = hostile_plugin();
    for path in ["/workspace/a.txt", "/etc/passwd", "/"] {
        let args = json!({ "path": path }).to_string();
        let outcome = plugin.call(&CallRequest {
            tool: "index_attempt",
            args_json: &args,
            call_id: "no-mounts",
            workspace_root: "/workspace",
            idempotency_key: None,
            mounts: &[],
            net_origins: &[],
            exec: None,
            limits: Limits::default(),
            reveal_secrets: false,
            asker: None,
            script: None,
        });
        let out = outcome.result.unwrap().unwrap();
        let out: Value = serde_json::from_str(&out.json).unwrap();
        refused(&out, "denied", "may read no file");
    }
}

#[test]
fn components_without_the_files_import_still_load_and_run() {
    let bytes = std::fs::read(test_plugin("tp_trivial")).unwrap();
    let imports = component_imports(&bytes);
    assert!(
        !imports
            .iter()
            .any(|i| i.starts_with("toolhost:plugin/files")),
        "{imports:?}"
    );
    let plugin = sandbox().load(&bytes, &|_| {}).unwrap();
    let outcome = plugin.call(&CallRequest {
        tool: "echo_value",
        args_json: r#"{"value":7}"#,
        call_id: "no-files-import",
        workspace_root: "/workspace",
        idempotency_key: None,
        mounts: &[],
        net_origins: &[],
        exec: None,
        limits: Limits::default(),
        reveal_secrets: false,
        asker: None,
        script: None,
    });
    let out = outcome.result.unwrap().unwrap();
    assert_eq!(out.json, r#"{"value":7}"#);
    // The hostile plugin calls the import, so it imports it.
    let hostile = component_imports(&std::fs::read(test_plugin("tp_hostile")).unwrap());
    assert!(
        hostile.iter().any(|i| i == "toolhost:plugin/files@0.2.0"),
        "{hostile:?}"
    );
}

/// The names a component imports (its top-level import section).
fn component_imports(bytes: &[u8]) -> Vec<String> {
    let mut names = Vec::new();
    for payload in wasmparser::Parser::new(0).parse_all(bytes) {
        if let Ok(wasmparser::Payload::ComponentImportSection(reader)) = payload {
            for import in reader.into_iter().flatten() {
                names.push(import.name.name.to_string());
            }
        }
    }
    names
}
