//! The documented commands run as written.
//!
//! Every ` ```sh ` block of `README.md` and `docs/*.md` is a command a user
//! would paste, so each one runs here: with `bash -euo pipefail`, the real
//! `toolhost` binary first on `PATH`, a fresh `HOME` (so a fresh root key
//! and record store), in a fresh temporary copy of the repository's tracked
//! files (the guides say "run every command from the repository root").
//! The blocks of one page run in order in the same copy and home, as a
//! reader follows the page.
//! Every command must exit 0; a block may also name text its output must
//! contain. Synopses with placeholders are ` ```text ` blocks, not `sh`.
//!
//! A block is steered by HTML comments on the lines right above its fence
//! (invisible on GitHub):
//!
//! - `<!-- doctest: expect TEXT -->`: stdout contains TEXT (repeatable);
//! - `<!-- doctest: plugin DIR/NAME.wasm -->`: the test plugin `tp_trivial`
//!   is copied there first (the block is about plugins a user already has);
//! - `<!-- doctest: languages -->`: the Python and JavaScript examples are
//!   built first (by `languages.rs`, with the guides' own commands) and put
//!   where the guides build them;
//! - `<!-- doctest: skip REASON -->`: not run, and REASON says why (an
//!   OCI registry, or commands another test runs verbatim).
//!
//! What the harness changes, all in one place ([`rewrite`]): the build
//! steps (`cargo test`, `cargo build --release`, `cargo install --locked
//! --path cli`) are what built this binary and are not repeated, `cargo run
//! --release --` is that binary, `target/release/toolhost` links to it, and
//! the fixed port 8080 of the examples becomes a free one, and
//! `/path/to/project` a fresh directory holding a README.md. A line that
//! starts `toolhost serve --http` runs in the background; the block goes on
//! once the port accepts connections and fails if the server exits first.
//!
//! The MCP client snippets (the `mcpServers` JSON of the README and
//! docs/mcp.md) are started exactly as configured: the stdio entry's
//! `command` and `args` (with `/path/to/...` replaced by real directories),
//! an HTTP entry against the `serve --http` command the same page gives,
//! each then listed and called over MCP.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::mcp::{lines_of, write_request, Response};
use crate::support::*;

/// One fenced block of a Markdown file.
#[derive(Debug, Clone)]
struct Block {
    file: String,
    /// 1-based line of the opening fence.
    line: usize,
    lang: String,
    body: String,
    directives: Vec<(String, String)>,
}

impl Block {
    fn directive(&self, name: &str) -> Option<&str> {
        self.directives
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
    fn all(&self, name: &str) -> Vec<&str> {
        self.directives
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
            .collect()
    }
    fn at(&self) -> String {
        format!("{}:{}", self.file, self.line)
    }
}

/// The fenced blocks of `file` (relative to the repository root), with the
/// `<!-- doctest: ... -->` comments right above each.
fn blocks(file: &str) -> Vec<Block> {
    let text = std::fs::read_to_string(repo_root().join(file)).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let trimmed = lines[i].trim_start();
        let Some(info) = trimmed.strip_prefix("```") else {
            i += 1;
            continue;
        };
        let indent = lines[i].len() - trimmed.len();
        let fence_line = i;
        let mut body = String::new();
        i += 1;
        while i < lines.len() && !lines[i].trim_start().starts_with("```") {
            let l = lines[i];
            body.push_str(
                l.get(indent.min(l.len() - l.trim_start().len())..)
                    .unwrap_or(""),
            );
            body.push('\n');
            i += 1;
        }
        i += 1;
        let mut directives = Vec::new();
        let mut j = fence_line;
        while j > 0 {
            let above = lines[j - 1].trim();
            let Some(d) = above
                .strip_prefix("<!-- doctest:")
                .and_then(|d| d.strip_suffix("-->"))
            else {
                break;
            };
            let d = d.trim();
            let (name, value) = d.split_once(' ').unwrap_or((d, ""));
            directives.insert(0, (name.to_string(), value.trim().to_string()));
            j -= 1;
        }
        out.push(Block {
            file: file.to_string(),
            line: fence_line + 1,
            lang: info.trim().to_string(),
            body,
            directives,
        });
    }
    out
}

/// The Markdown files whose commands are checked.
fn doc_files() -> Vec<String> {
    let mut files = vec!["README.md".to_string()];
    let mut docs: Vec<String> = std::fs::read_dir(repo_root().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md"))
        .map(|n| format!("docs/{n}"))
        .collect();
    docs.sort();
    files.extend(docs);
    files
}

/// A free loopback port (bound and released: the server binds it next).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Commands that build what the tests run: done already.
const BUILD_STEPS: [&str; 3] = [
    "cargo test",
    "cargo build --release",
    "cargo install --locked --path cli",
];

/// The one place the harness changes what a block says (see the module
/// documentation).
fn rewrite(body: &str, port: u16, project: &Path) -> String {
    let mut out = String::new();
    let body = body
        .replace(":8080", &format!(":{port}"))
        .replace("/path/to/project", &project.display().to_string());
    for line in body.lines() {
        let t = line.trim();
        let command = t.split(" #").next().unwrap_or("").trim();
        if BUILD_STEPS.contains(&command) {
            out.push_str(&format!(": built already: {t}\n"));
        } else if let Some(rest) = t.strip_prefix("cargo run --release -- ") {
            out.push_str(&format!("toolhost {rest}\n"));
        } else if t.starts_with("toolhost serve --http") {
            out.push_str(&format!("{t} & doctest_wait_http $! {port}\n"));
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

const PRELUDE: &str = r#"set -euo pipefail
doctest_wait_http() {
  local pid=$1 port=$2
  for _ in $(seq 1 600); do
    kill -0 "$pid" 2>/dev/null || { echo "doctest: the server exited before it listened" >&2; exit 1; }
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return 0
    sleep 0.1
  done
  echo "doctest: the server did not listen within 60 s" >&2; exit 1
}
doctest_servers_alive() {
  for pid in $(jobs -p); do
    kill -0 "$pid" 2>/dev/null || { echo "doctest: a server exited during the block" >&2; exit 1; }
  done
}
trap 'doctest_servers_alive; kill $(jobs -p) 2>/dev/null || true' EXIT
"#;

/// A fresh copy of the repository's tracked files (what a clone holds).
fn fresh_clone() -> tempfile::TempDir {
    let root = repo_root();
    let out = Command::new("git")
        .args(["ls-files", "-z"])
        .current_dir(&root)
        .output()
        .expect("git ls-files (the harness copies the tracked files)");
    assert!(out.status.success(), "git ls-files failed");
    let dir = tempfile::tempdir().unwrap();
    for name in out.stdout.split(|b| *b == 0).filter(|n| !n.is_empty()) {
        let rel = Path::new(std::str::from_utf8(name).unwrap());
        let from = root.join(rel);
        // A file deleted in the working tree but still tracked.
        if !from.is_file() {
            continue;
        }
        let to = dir.path().join(rel);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(&from, &to).unwrap();
    }
    dir
}

/// A `bin/` directory with `toolhost` in it, for `PATH`.
fn bin_dir(home: &Path) -> PathBuf {
    let bin = home.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_toolhost"), bin.join("toolhost")).unwrap();
    bin
}

/// The environment of a block or a started server: a fresh home, no
/// toolhost settings from the caller's environment, and a compile cache
/// shared by the documentation tests.
fn doc_env(cmd: &mut Command, home: &Path, cache: &Path) {
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("TOOLHOST_") {
            cmd.env_remove(&k);
        }
    }
    let path = format!(
        "{}:{}",
        bin_dir_of(home).display(),
        std::env::var("PATH").unwrap_or_default()
    );
    // The toolchain stays where it is when HOME moves.
    let real_home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    for (var, default) in [("CARGO_HOME", ".cargo"), ("RUSTUP_HOME", ".rustup")] {
        let dir = std::env::var_os(var)
            .map(PathBuf::from)
            .unwrap_or_else(|| real_home.join(default));
        cmd.env(var, dir);
    }
    cmd.env("HOME", home)
        .env_remove("XDG_DATA_HOME")
        .env_remove("XDG_CONFIG_HOME")
        .env("PATH", path)
        .env("TOOLHOST_CACHE_DIR", cache);
}

fn bin_dir_of(home: &Path) -> PathBuf {
    home.join("bin")
}

fn shared_cache() -> PathBuf {
    repo_root().join("target/docs-compile-cache")
}

/// Where the blocks of one page run: a fresh clone and a fresh home, shared
/// by the page's blocks in order (a reader follows a page from the top).
struct Reader {
    clone: tempfile::TempDir,
    home: tempfile::TempDir,
}

impl Reader {
    fn new() -> Reader {
        let clone = fresh_clone();
        let home = tempfile::tempdir().unwrap();
        bin_dir(home.path());
        let release = clone.path().join("target/release");
        std::fs::create_dir_all(&release).unwrap();
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_toolhost"), release.join("toolhost"))
            .unwrap();
        // `/path/to/project` in a command is the reader's own project.
        let project = home.path().join("project");
        std::fs::create_dir_all(&project).unwrap();
        std::fs::write(project.join("README.md"), "# A project\n").unwrap();
        Reader { clone, home }
    }
}

/// Runs one `sh` block; panics with its output unless it passes.
fn run_block(block: &Block, reader: &Reader) {
    let clone = &reader.clone;
    let home = &reader.home;
    let mut cache = shared_cache();
    let mut _cache_copy = None;
    for dest in block.all("plugin") {
        let to = clone.path().join(dest);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(test_plugin("tp_trivial"), to).unwrap();
    }
    if block.directive("languages").is_some() {
        let built = crate::languages::built();
        let _ = crate::languages::host(); // compiled into its cache
        let to = clone.path().join("target/languages");
        std::fs::create_dir_all(&to).unwrap();
        for wasm in [&built.python, &built.js] {
            std::fs::copy(wasm, to.join(wasm.file_name().unwrap())).unwrap();
        }
        // The components compile in tens of seconds: start from the
        // compiled code the language tests made (a copy: the CLI adds the
        // reference tools' entry).
        let copy = tempfile::tempdir().unwrap();
        for e in std::fs::read_dir(crate::languages::cache_dir()).unwrap() {
            let p = e.unwrap().path();
            if p.is_file() {
                std::fs::copy(&p, copy.path().join(p.file_name().unwrap())).unwrap();
            }
        }
        cache = copy.path().to_path_buf();
        _cache_copy = Some(copy);
    }
    let project = home.path().join("project");
    let script = format!("{PRELUDE}{}", rewrite(&block.body, free_port(), &project));
    let mut cmd = Command::new("bash");
    cmd.arg("-c").arg(&script).current_dir(clone.path());
    doc_env(&mut cmd, home.path(), &cache);
    // Its own process group: what the block starts is ended and reaped with it.
    let child = std::os::unix::process::CommandExt::process_group(&mut cmd, 0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("bash");
    let out = wait_bounded(child, Duration::from_secs(300), &block.at());
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{}: the block failed ({}):\n--- script\n{script}\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        block.at(),
        out.status
    );
    for want in block.all("expect") {
        assert!(
            stdout.contains(want),
            "{}: the output lacks `{want}`:\n{stdout}\n--- stderr\n{stderr}",
            block.at()
        );
    }
}

/// Kills what is left of process group `pgid` and reaps every process of
/// it that is (or becomes) a child of this one. Once an exec test has run,
/// this process is a child subreaper (see `toolhost_exec`): an orphan of a
/// block (a server it started in the background, `cargo` under a killed
/// `bash`) is reparented here and, unreaped, stays a zombie child that the
/// exec tests' "nothing left" checks would count.
fn end_group(pgid: u32) {
    let Some(pg) = rustix::process::Pid::from_raw(pgid as i32) else {
        return;
    };
    let _ = rustix::process::kill_process_group(pg, rustix::process::Signal::KILL);
    let until = Instant::now() + Duration::from_secs(10);
    while Instant::now() < until {
        match rustix::process::waitpgid(pg, rustix::process::WaitOptions::NOHANG) {
            Ok(Some(_)) => continue,
            Ok(None) => {}
            Err(_) => {
                // No child of the group now: done unless a member is still
                // dying (and may yet be reparented here).
                if !group_alive(pgid) {
                    return;
                }
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Whether any process is in process group `pgid`.
fn group_alive(pgid: u32) -> bool {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| {
            std::fs::read_to_string(e.path().join("stat"))
                .ok()
                .and_then(|stat| {
                    let rest = &stat[stat.rfind(')')? + 1..];
                    // state, ppid, pgrp
                    rest.split_whitespace().nth(2)?.parse::<u32>().ok()
                })
                == Some(pgid)
        })
}

/// Waits for `child` (the leader of its own process group) at most
/// `limit`, killing it after that; either way, what it started in the
/// background is killed and reaped ([`end_group`]).
fn wait_bounded(
    mut child: std::process::Child,
    limit: Duration,
    what: &str,
) -> std::process::Output {
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out_t = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = stdout.read_to_end(&mut v);
        v
    });
    let err_t = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = stderr.read_to_end(&mut v);
        v
    });
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            end_group(child.id());
            panic!("{what}: still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    end_group(child.id());
    std::process::Output {
        status,
        stdout: out_t.join().unwrap(),
        stderr: err_t.join().unwrap(),
    }
}

/// Runs every `sh` block of `file` that is not skipped.
fn run_file(file: &str) {
    let blocks: Vec<Block> = blocks(file)
        .into_iter()
        .filter(|b| b.lang == "sh" && b.directive("skip").is_none())
        .collect();
    assert!(!blocks.is_empty(), "{file}: no sh blocks to run");
    let reader = Reader::new();
    for b in &blocks {
        run_block(b, &reader);
    }
}

#[test]
fn every_shell_block_runs_or_says_why_not() {
    let mut skipped = Vec::new();
    let mut run = 0;
    for file in doc_files() {
        for b in blocks(&file) {
            assert!(
                !["bash", "shell", "console", "shell-session"].contains(&b.lang.as_str()),
                "{}: use ```sh for commands to paste (they are run) or ```text for synopses",
                b.at()
            );
            for (name, value) in &b.directives {
                assert!(
                    ["expect", "plugin", "languages", "skip"].contains(&name.as_str()),
                    "{}: unknown doctest directive `{name}`",
                    b.at()
                );
                if name == "skip" {
                    assert!(value.len() > 10, "{}: a skipped block says why", b.at());
                }
            }
            if b.lang != "sh" {
                assert!(
                    b.directives.is_empty(),
                    "{}: directives on a block that is not sh",
                    b.at()
                );
                continue;
            }
            match b.directive("skip") {
                Some(why) => skipped.push(format!("{}: {why}", b.at())),
                None => run += 1,
            }
        }
    }
    eprintln!("docs: {run} sh blocks run; skipped: {skipped:#?}");
    // Skipping is the exception: registries, and commands run verbatim by
    // the language tests.
    assert!(run >= 10, "only {run} blocks run");
    assert!(skipped.len() <= 6, "{skipped:#?}");
}

/// Blocks skipped because another test runs them must really be there.
#[test]
fn blocks_run_elsewhere_are_run_there() {
    let languages =
        std::fs::read_to_string(repo_root().join("tests/integration/languages.rs")).unwrap();
    for file in doc_files() {
        for b in blocks(&file) {
            let Some(why) = b.directive("skip") else {
                continue;
            };
            if !why.contains("languages.rs") {
                continue;
            }
            for line in b.body.lines().map(str::trim).filter(|l| !l.is_empty()) {
                if line == "cargo build --release" {
                    continue;
                }
                assert!(
                    languages.contains(&format!("\"{line}\"")),
                    "{}: `{line}` is not run by tests/integration/languages.rs",
                    b.at()
                );
            }
        }
    }
}

#[test]
fn readme_commands_run() {
    run_file("README.md");
}

#[test]
fn mcp_guide_commands_run() {
    run_file("docs/mcp.md");
}

#[test]
fn python_guide_commands_run() {
    run_file("docs/python.md");
}

#[test]
fn js_guide_commands_run() {
    run_file("docs/js.md");
}

#[test]
fn rust_guide_commands_run() {
    run_file("docs/rust.md");
}

#[test]
fn console_guide_commands_run() {
    run_file("docs/console.md");
}

#[test]
fn capabilities_guide_commands_run() {
    run_file("docs/capabilities.md");
}

#[test]
fn side_effects_guide_commands_run() {
    run_file("docs/side-effects.md");
}

#[test]
fn parallel_calls_guide_commands_run() {
    run_file("docs/parallel-calls.md");
}

#[test]
fn programs_guide_commands_run() {
    run_file("docs/programs.md");
}

#[test]
fn plugins_guide_commands_run() {
    run_file("docs/plugins-and-trust.md");
}

#[test]
fn operations_guide_commands_run() {
    run_file("docs/operations.md");
}

/// The pages a `*_commands_run` test above runs.
const RUN_PAGES: &[&str] = &[
    "README.md",
    "docs/mcp.md",
    "docs/python.md",
    "docs/js.md",
    "docs/rust.md",
    "docs/capabilities.md",
    "docs/side-effects.md",
    "docs/parallel-calls.md",
    "docs/programs.md",
    "docs/plugins-and-trust.md",
    "docs/operations.md",
    "docs/console.md",
];

/// A page with commands to run has a test that runs them (a new guide
/// cannot slip past the harness), and a listed page still has commands.
#[test]
fn every_guide_with_commands_is_run() {
    for file in doc_files() {
        let runnable = blocks(&file)
            .iter()
            .any(|b| b.lang == "sh" && b.directive("skip").is_none());
        assert_eq!(
            runnable,
            RUN_PAGES.contains(&file.as_str()),
            "{file}: a page with sh blocks needs a `*_commands_run` test in docs.rs (and RUN_PAGES), and only such a page"
        );
    }
}

/// GitHub's anchor of a Markdown heading: lower case, spaces to `-`,
/// punctuation other than `-` and `_` dropped.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// Every relative link of the documents names a file of the repository,
/// and a `#fragment` into a Markdown page names one of its headings.
#[test]
fn relative_links_name_files_and_headings_that_exist() {
    let root = repo_root();
    let mut pages = doc_files();
    pages.extend(["CHANGELOG.md".to_string(), "CONTRIBUTING.md".to_string()]);
    let headings = |path: &Path| -> Vec<String> {
        let text = std::fs::read_to_string(path).unwrap();
        let mut fence = false;
        let mut out = Vec::new();
        for line in text.lines() {
            if line.trim_start().starts_with("```") {
                fence = !fence;
            }
            if !fence && line.starts_with('#') {
                out.push(anchor(line.trim_start_matches('#')));
            }
        }
        out
    };
    let mut checked = 0;
    for page in &pages {
        let path = root.join(page);
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{page}: {e}"));
        let dir = path.parent().unwrap().to_path_buf();
        for piece in text.split("](").skip(1) {
            let Some(end) = piece.find(')') else { continue };
            let target = &piece[..end];
            if target.contains("://") || target.starts_with("mailto:") || target.contains(' ') {
                continue;
            }
            let (file, fragment) = target.split_once('#').unwrap_or((target, ""));
            let file_path = if file.is_empty() {
                path.clone()
            } else {
                dir.join(file)
            };
            assert!(
                file_path.exists(),
                "{page}: link to `{target}`: no such file"
            );
            if !fragment.is_empty() && file_path.extension().is_some_and(|e| e == "md") {
                assert!(
                    headings(&file_path).iter().any(|h| h == fragment),
                    "{page}: link to `{target}`: no such heading"
                );
            }
            checked += 1;
        }
    }
    assert!(checked > 30, "only {checked} links checked");
}

// ---- MCP client snippets -------------------------------------------------------

/// Every `mcpServers` entry of the JSON blocks of `file`.
fn client_entries(file: &str) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for b in blocks(file).into_iter().filter(|b| b.lang == "json") {
        if !b.body.contains("\"mcpServers\"") {
            continue;
        }
        let v: Value =
            serde_json::from_str(&b.body).unwrap_or_else(|e| panic!("{}: not JSON ({e})", b.at()));
        for (name, entry) in v["mcpServers"].as_object().unwrap() {
            out.push((format!("{} ({name})", b.at()), entry.clone()));
        }
    }
    out
}

/// What a client's placeholders stand for.
struct Places {
    project: tempfile::TempDir,
    plugins: tempfile::TempDir,
    home: tempfile::TempDir,
}

impl Places {
    fn new() -> Places {
        let project = tempfile::tempdir().unwrap();
        std::fs::write(project.path().join("README.md"), "# A project\n\nHello.\n").unwrap();
        let plugins = tempfile::tempdir().unwrap();
        std::fs::copy(
            test_plugin("tp_trivial"),
            plugins.path().join("trivial.wasm"),
        )
        .unwrap();
        let home = tempfile::tempdir().unwrap();
        bin_dir(home.path());
        Places {
            project,
            plugins,
            home,
        }
    }

    fn fill(&self, s: &str) -> String {
        s.replace("/path/to/toolhost", env!("CARGO_BIN_EXE_toolhost"))
            .replace(
                "/path/to/project",
                &self.project.path().display().to_string(),
            )
            .replace(
                "/path/to/plugins",
                &self.plugins.path().display().to_string(),
            )
    }

    fn command(&self, program: &str, args: &[String]) -> Command {
        let mut cmd = Command::new(program);
        cmd.args(args).current_dir(self.home.path());
        doc_env(&mut cmd, self.home.path(), &shared_cache());
        cmd
    }
}

/// Lists the tools and reads README.md through `send` (one JSON-RPC
/// request, its reply).
fn list_and_call(what: &str, mut send: impl FnMut(Value) -> Value) {
    let init = send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "docs-test", "version": "1"}}}),
    );
    assert!(init["result"]["serverInfo"].is_object(), "{what}: {init}");
    let list = send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}));
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{what}: {list}"))
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"file_view"), "{what}: {names:?}");
    let call = send(
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "file_view", "arguments": {"path": "README.md", "offset": 1, "limit": 3}}}),
    );
    let obs = crate::mcp::observation_of(&call);
    assert_eq!(obs["status"], "ok", "{what}: {obs:#}");
}

#[test]
fn stdio_client_snippets_start_the_server_as_written() {
    let mut seen = 0;
    for file in ["README.md", "docs/mcp.md"] {
        for (what, entry) in client_entries(file) {
            let Some(command) = entry["command"].as_str() else {
                continue;
            };
            seen += 1;
            let places = Places::new();
            let args: Vec<String> = entry["args"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| places.fill(a.as_str().unwrap()))
                .collect();
            let mut child = places
                .command(&places.fill(command), &args)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            let mut stdin = child.stdin.take().unwrap();
            let out = lines_of(child.stdout.take().unwrap());
            let err = lines_of(child.stderr.take().unwrap());
            list_and_call(&what, |msg| {
                stdin.write_all(format!("{msg}\n").as_bytes()).unwrap();
                stdin.flush().unwrap();
                let id = msg["id"].clone();
                loop {
                    let Ok(line) = out.recv_timeout(Duration::from_secs(60)) else {
                        let log: Vec<String> = err.try_iter().collect();
                        panic!("{what}: no reply to {msg}; stderr:\n{}", log.join("\n"));
                    };
                    let v: Value = serde_json::from_str(&line).unwrap();
                    if v["id"] == id {
                        if msg["id"] == 1 {
                            stdin
                                .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
                                .unwrap();
                        }
                        return v;
                    }
                }
            });
            drop(stdin);
            let status = child.wait().unwrap();
            assert!(status.success(), "{what}: exit {status}");
        }
    }
    assert!(seen >= 2, "stdio snippets found: {seen}");
}

/// The `toolhost serve --http ...` commands of a page, in order.
fn serve_http_commands(file: &str) -> Vec<String> {
    let text = std::fs::read_to_string(repo_root().join(file)).unwrap();
    let mut out = Vec::new();
    for piece in text.split('`') {
        let piece = piece.trim();
        for line in piece.lines() {
            let line = line.trim();
            if line.starts_with("toolhost serve --http") && !out.contains(&line.to_string()) {
                out.push(line.to_string());
            }
        }
    }
    out
}

#[test]
fn http_client_snippets_reach_the_server_the_page_starts() {
    let mut seen = 0;
    for file in ["README.md", "docs/mcp.md"] {
        let entries: Vec<_> = client_entries(file)
            .into_iter()
            .filter(|(_, e)| e["type"] == "http")
            .collect();
        if entries.is_empty() {
            continue;
        }
        // The page's plain server command: the one with /path/to/project.
        let serve = serve_http_commands(file)
            .into_iter()
            .find(|c| c.contains("/path/to/project"))
            .unwrap_or_else(|| panic!("{file}: an HTTP client snippet but no `toolhost serve --http --workspace /path/to/project` command"));
        for (what, entry) in entries {
            seen += 1;
            let places = Places::new();
            let port = free_port();
            let line = places.fill(&serve).replace(":8080", &format!(":{port}"));
            let words: Vec<String> = line.split_whitespace().map(String::from).collect();
            let mut child = places
                .command(env!("CARGO_BIN_EXE_toolhost"), &words[1..])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            let err = lines_of(child.stderr.take().unwrap());
            let deadline = Instant::now() + Duration::from_secs(60);
            while TcpStream::connect(("127.0.0.1", port)).is_err() {
                if let Some(status) = child.try_wait().unwrap() {
                    let log: Vec<String> = err.try_iter().collect();
                    panic!("{what}: `{line}` exited ({status}):\n{}", log.join("\n"));
                }
                assert!(Instant::now() < deadline, "{what}: `{line}` did not listen");
                std::thread::sleep(Duration::from_millis(50));
            }
            let url = entry["url"]
                .as_str()
                .unwrap()
                .replace(":8080", &format!(":{port}"));
            assert_eq!(url, format!("http://127.0.0.1:{port}/mcp"), "{what}");
            // A bearer placeholder is a token minted as the page says.
            let mut headers: BTreeMap<String, String> = BTreeMap::new();
            if let Some(h) = entry["headers"].as_object() {
                for (k, v) in h {
                    let v = v.as_str().unwrap();
                    let v = if v.contains("<token") {
                        let out = places
                            .command(
                                env!("CARGO_BIN_EXE_toolhost"),
                                &["cap", "mint", "--tool", "*", "--read", "."].map(String::from),
                            )
                            .output()
                            .unwrap();
                        assert!(out.status.success());
                        format!("Bearer {}", String::from_utf8_lossy(&out.stdout).trim())
                    } else {
                        v.to_string()
                    };
                    headers.insert(k.clone(), v);
                }
            }
            let mut session: Option<String> = None;
            let post = |msg: &Value, session: Option<&str>| -> Response {
                let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
                let mut h: Vec<(&str, &str)> = vec![
                    ("Content-Type", "application/json"),
                    ("Accept", "application/json, text/event-stream"),
                ];
                for (k, v) in &headers {
                    h.push((k, v));
                }
                if let Some(id) = session {
                    h.push(("Mcp-Session-Id", id));
                    h.push(("MCP-Protocol-Version", "2025-11-25"));
                }
                write_request(&mut s, "POST", &h, msg.to_string().as_bytes());
                let mut raw = Vec::new();
                s.read_to_end(&mut raw).unwrap();
                Response::parse(&raw)
            };
            list_and_call(&what, |msg| {
                let resp = post(&msg, session.as_deref());
                assert_eq!(resp.status, 200, "{what}: {}", resp.body);
                if let Some(id) = resp.header("mcp-session-id") {
                    session = Some(id.to_string());
                }
                let reply = resp.reply();
                if msg["id"] == 1 {
                    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
                    let status = post(&note, session.as_deref()).status;
                    assert!(
                        status == 202 || status == 200,
                        "{what}: initialized: {status}"
                    );
                }
                reply
            });
            let _ = child.kill();
            let _ = child.wait();
        }
    }
    assert!(seen >= 2, "HTTP snippets found: {seen}");
}
