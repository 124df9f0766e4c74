//! What a new user meets in the first hour: `call` on a
//! terminal, `toolhost.toml`, shell completions, a grant naming a file, and
//! a `serve --stdio` that cannot start telling its client why.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

use crate::support::*;

fn toolhost(args: &[&str], cwd: &Path) -> Output {
    command(args, cwd).output().expect("running toolhost")
}

fn command(args: &[&str], cwd: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_toolhost"));
    cmd.args(args)
        .current_dir(cwd)
        .env(
            "TOOLHOST_CACHE_DIR",
            repo_root().join("target/test-compile-cache"),
        )
        .env("TOOLHOST_ROOT_KEY", "ab".repeat(32))
        .env("TOOLHOST_STORE", cwd.join("records.sqlite"))
        .env("TOOLHOST_LOCK_DIR", cwd.join("locks"))
        .env("XDG_CONFIG_HOME", repo_root().join("target/no-user-config"));
    for var in ["TOOLHOST_TOKEN", "TOOLHOST_CONFIG", "TOOLHOST_PLUGINS_DIR"] {
        cmd.env_remove(var);
    }
    cmd
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn project() -> Ws {
    let ws = Ws::new();
    ws.write("src/a.txt", "alpha\nbeta\n");
    ws.write("notes/b.txt", "gamma\n");
    ws
}

// ---- call on a terminal ----------------------------------------------------------

/// Runs `toolhost ARGS` with stdout on a pseudo-terminal (util-linux
/// `script`, as on every Debian system).
fn on_a_terminal(args: &[&str], cwd: &Path) -> String {
    let quoted: Vec<String> = std::iter::once(env!("CARGO_BIN_EXE_toolhost"))
        .chain(args.iter().copied())
        .map(|a| format!("'{}'", a.replace('\'', r"'\''")))
        .collect();
    let template = command(&[], cwd);
    let mut cmd = Command::new("script");
    cmd.args(["-qec", &quoted.join(" "), "/dev/null"])
        .current_dir(cwd)
        .stdin(Stdio::null());
    for (k, v) in template.get_envs() {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    let out = cmd
        .output()
        .expect("util-linux `script` (a pseudo-terminal for the test)");
    text(&out.stdout).replace("\r\n", "\n")
}

#[test]
fn call_on_a_terminal_shows_the_status_and_the_text_and_json_when_piped() {
    let ws = project();
    let args = r#"{"path":"src/a.txt"}"#;
    let shown = on_a_terminal(
        &["call", "file_view", args, "--allow-read", "src"],
        ws.dir.path(),
    );
    let first = shown.lines().next().unwrap_or_default();
    assert!(first.starts_with("ok · file_view ("), "{shown}");
    assert!(first.contains(" fuel"), "{shown}");
    assert!(shown.contains("beta"), "{shown}");
    assert!(shown.contains("(the whole observation: --json)"), "{shown}");
    assert!(serde_json::from_str::<Value>(&shown).is_err(), "{shown}");

    // The same on a terminal with --json: the observation, indented.
    let json = on_a_terminal(
        &["call", "file_view", args, "--allow-read", "src", "--json"],
        ws.dir.path(),
    );
    let obs: Value = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {json}"));
    assert_valid_observation(&obs);
    assert!(json.contains("\n  \"status\": \"ok\""), "{json}");

    // Piped: one line of JSON, whatever the status.
    let out = toolhost(
        &[
            "call",
            "file_view",
            r#"{"path":"notes/b.txt"}"#,
            "--allow-read",
            "src",
        ],
        ws.dir.path(),
    );
    assert_eq!(out.status.code(), Some(3));
    let stdout = text(&out.stdout);
    assert_eq!(stdout.trim_end().lines().count(), 1, "{stdout}");
    let obs: Value = serde_json::from_str(&stdout).unwrap();
    assert_valid_observation(&obs);
    assert_eq!(obs["status"], "denied");

    // A denial on a terminal: the status line and the model-facing text.
    let shown = on_a_terminal(
        &[
            "call",
            "file_view",
            r#"{"path":"notes/b.txt"}"#,
            "--allow-read",
            "src",
        ],
        ws.dir.path(),
    );
    assert!(shown.starts_with("denied · file_view ("), "{shown}");
    assert!(shown.contains("read prefixes"), "{shown}");
}

// ---- toolhost.toml -------------------------------------------------------------

#[test]
fn the_users_config_file_sets_the_flags_and_flags_win() {
    let ws = project();
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join("toolhost")).unwrap();
    std::fs::write(
        home.path().join("toolhost/config.toml"),
        "allow_read = [\"src\"]\ntimeout_ms = 5000\n",
    )
    .unwrap();
    let read = |path: &str, extra: &[&str]| {
        let args = format!(r#"{{"path":"{path}"}}"#);
        let out = command(
            &[&["call", "file_view", &args], extra].concat(),
            ws.dir.path(),
        )
        .env("XDG_CONFIG_HOME", home.path())
        .output()
        .unwrap();
        let obs: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", text(&out.stderr)));
        obs["status"].as_str().unwrap().to_string()
    };
    // The user's own file is read without being named.
    assert_eq!(read("src/a.txt", &[]), "ok");
    assert_eq!(read("notes/b.txt", &[]), "denied");
    // A token on the command line: the file's grants give way to it.
    let token = toolhost(
        &["cap", "mint", "--tool", "*", "--read", "notes"],
        ws.dir.path(),
    );
    assert!(token.status.success(), "{}", text(&token.stderr));
    let token = text(&token.stdout).trim().to_string();
    assert_eq!(read("notes/b.txt", &["--token", &token]), "ok");
    assert_eq!(read("src/a.txt", &["--token", &token]), "denied");
    // A flag replaces the file's list.
    assert_eq!(read("notes/b.txt", &["--allow-read", "notes"]), "ok");
    assert_eq!(read("src/a.txt", &["--allow-read", "notes"]), "denied");

    // --config names a file outside the workspace; its relative paths are
    // relative to the file, and it may grant.
    let elsewhere = tempfile::tempdir().unwrap();
    let conf = tempfile::tempdir().unwrap();
    std::fs::write(
        conf.path().join("server.toml"),
        format!(
            "workspace = \"{}\"\nallow_read = [\"notes\"]\n",
            pathdiff(ws.dir.path(), conf.path())
        ),
    )
    .unwrap();
    let conf_arg = conf.path().join("server.toml").display().to_string();
    let out = toolhost(
        &[
            "call",
            "file_view",
            r#"{"path":"notes/b.txt"}"#,
            "--config",
            &conf_arg,
        ],
        elsewhere.path(),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
}

/// A repository's own `toolhost.toml` is not read unless named: its grants,
/// store and plugins do not apply, and stderr says once that it was not
/// read. Found in the current directory or beside `--workspace`.
#[test]
fn a_workspace_toolhost_toml_is_not_read_unless_named() {
    let ws = project();
    ws.write(
        "toolhost.toml",
        "allow_read = [\".\"]\nallow_write = [\".\"]\nno_builtin = true\n",
    );
    let elsewhere = tempfile::tempdir().unwrap();
    let ws_arg = ws.dir.path().display().to_string();
    for (cwd, extra) in [
        (ws.dir.path(), vec![]),
        (elsewhere.path(), vec!["--workspace", ws_arg.as_str()]),
    ] {
        let args = [
            vec![
                "call",
                "file_edit",
                r#"{"path":"src/a.txt","old_str":"alpha","new_str":"planted"}"#,
                "--allow-read",
                "src",
            ],
            extra.clone(),
        ]
        .concat();
        let out = toolhost(&args, cwd);
        let obs: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", text(&out.stderr)));
        assert_eq!(obs["status"], "denied", "{obs}");
        assert_eq!(ws.read("src/a.txt"), b"alpha\nbeta\n");
        let err = text(&out.stderr);
        assert_eq!(err.matches("not reading").count(), 1, "{err}");
        assert!(err.contains("toolhost.toml"), "{err}");
        // Its grants did not apply to reads either.
        let args = [
            vec!["call", "file_view", r#"{"path":"notes/b.txt"}"#],
            extra,
        ]
        .concat();
        let out = toolhost(&args, cwd);
        let obs: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(obs["status"], "denied", "{obs}");
    }
}

/// Named or not, a file inside the workspace may not grant, raise a limit
/// or move a trusted path; it may tighten policy and narrow the workspace.
#[test]
fn a_named_workspace_file_may_not_grant_or_move_trusted_paths() {
    let ws = project();
    let outside = tempfile::tempdir().unwrap();
    let o = outside.path().display().to_string();
    for (key, value) in [
        ("allow_read", "[\".\"]".to_string()),
        ("allow_write", "[\".\"]".to_string()),
        ("allow_exec", "[\"sh\"]".to_string()),
        ("allow_net", "[\"https://example.com\"]".to_string()),
        ("allow_delegate", "true".to_string()),
        ("self_approve", "true".to_string()),
        ("allow_remote", "true".to_string()),
        ("timeout_ms", "86400000".to_string()),
        ("store", format!("\"{o}/revived.sqlite\"")),
        ("key_file", format!("\"{o}/root.key\"")),
        ("cache_dir", "\".cache\"".to_string()),
        ("artifact_dir", format!("\"{o}/artifacts\"")),
        ("lock_dir", format!("\"{o}/locks\"")),
        ("plugin", "[\"evil.wasm\"]".to_string()),
        ("plugins_dir", "\"plugins\"".to_string()),
        ("trusted_signers", "\"signers\"".to_string()),
        ("no_journal", "true".to_string()),
    ] {
        ws.write("toolhost.toml", format!("{key} = {value}\n"));
        let out = toolhost(
            &[
                "call",
                "file_view",
                r#"{"path":"src/a.txt"}"#,
                "--allow-read",
                "src",
                "--config",
                "toolhost.toml",
            ],
            ws.dir.path(),
        );
        assert_eq!(out.status.code(), Some(2), "{key}: {}", text(&out.stdout));
        let err = text(&out.stderr);
        assert!(
            err.contains(&format!("may not set `{key}`")),
            "{key}: {err}"
        );
        assert!(err.contains("inside the workspace"), "{err}");
        assert!(out.stdout.is_empty(), "{key}: nothing ran");
    }
    // Also when it names itself another workspace that holds it.
    ws.write(
        "sub/toolhost.toml",
        "workspace = \".\"\nallow_write = [\".\"]\n",
    );
    let sub_conf = ws.path("sub/toolhost.toml").display().to_string();
    let out = toolhost(
        &["--config", &sub_conf, "call", "file_view", "{}"],
        outside.path(),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("may not set `allow_write`"));
    // Its `workspace` may narrow the command line's, not widen it.
    ws.write("toolhost.toml", "workspace = \"..\"\n");
    let out = toolhost(
        &["call", "file_view", "{}", "--config", "toolhost.toml"],
        ws.dir.path(),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("may only narrow"),
        "{}",
        text(&out.stderr)
    );
    ws.write(
        "toolhost.toml",
        "workspace = \"src\"\nrequire_lock = true\nstrict_descriptions = true\n",
    );
    let out = toolhost(
        &[
            "call",
            "file_view",
            r#"{"path":"a.txt"}"#,
            "--allow-read",
            ".",
            "--config",
            "toolhost.toml",
        ],
        ws.dir.path(),
    );
    let obs: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", text(&out.stderr)));
    assert_eq!(obs["status"], "ok", "{obs}");
    assert!(obs.to_string().contains("alpha"), "{obs}");
}

/// `to` relative to `from` (both absolute), with `..` segments.
fn pathdiff(to: &Path, from: &Path) -> String {
    let to: Vec<_> = to.components().collect();
    let from: Vec<_> = from.components().collect();
    let common = to.iter().zip(&from).take_while(|(a, b)| a == b).count();
    let mut parts: Vec<String> = vec!["..".into(); from.len() - common];
    parts.extend(
        to[common..]
            .iter()
            .map(|c| c.as_os_str().to_string_lossy().into_owned()),
    );
    parts.join("/")
}

#[test]
fn a_bad_config_file_is_refused_naming_the_key() {
    let ws = project();
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("toolhost.toml");
    let conf_arg = conf.display().to_string();
    for (content, want) in [
        ("alow_read = [\"src\"]\n", "unknown key `alow_read`"),
        ("allow-read = [\"src\"]\n", "did you mean `allow_read`?"),
        ("timeout_ms = [1, 2]\n", "`timeout_ms`: takes one value"),
        ("no_builtin = \"yes\"\n", "`no_builtin`: true or false"),
        ("allow_read = [\"src\"\n", "not valid TOML"),
        ("call_id = \"c1\"\n", "unknown key `call_id`"),
    ] {
        std::fs::write(&conf, content).unwrap();
        let out = toolhost(
            &["call", "file_view", "{}", "--config", &conf_arg],
            ws.dir.path(),
        );
        assert_eq!(out.status.code(), Some(2), "{content}");
        let err = text(&out.stderr);
        assert!(err.contains(want), "{content}: {err}");
        assert!(err.contains("toolhost.toml"), "{err}");
    }
    // A value the flag refuses is refused the same way, naming the file.
    std::fs::write(&conf, "timeout_ms = 0\n").unwrap();
    let out = toolhost(
        &["call", "file_view", "{}", "--config", &conf_arg],
        ws.dir.path(),
    );
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains("with the settings of"), "{err}");
    assert!(err.contains("--timeout-ms"), "{err}");
    // A key of another command is not an error (`http` is serve's).
    std::fs::write(&conf, "http = \"127.0.0.1:9\"\nallow_read = [\"src\"]\n").unwrap();
    let out = toolhost(
        &[
            "call",
            "file_view",
            r#"{"path":"src/a.txt"}"#,
            "--config",
            &conf_arg,
        ],
        ws.dir.path(),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
}

#[test]
fn completions_are_printed_for_each_shell() {
    let ws = Ws::new();
    for (shell, marker) in [
        ("bash", "complete -F _toolhost"),
        ("zsh", "#compdef toolhost"),
        ("fish", "complete -c toolhost"),
    ] {
        let out = toolhost(&["completions", shell], ws.dir.path());
        assert!(out.status.success(), "{}", text(&out.stderr));
        let script = text(&out.stdout);
        assert!(script.contains(marker), "{shell}: {script}");
        assert!(script.contains("allow-read"), "{shell}");
    }
    let out = toolhost(&["completions", "tcsh"], ws.dir.path());
    assert_eq!(out.status.code(), Some(2));
}

// ---- grants ------------------------------------------------------------------

#[test]
fn a_grant_naming_a_file_says_how_to_grant_it() {
    let ws = project();
    let out = toolhost(
        &[
            "call",
            "file_view",
            r#"{"path":"src/a.txt"}"#,
            "--allow-read",
            "src/a.txt",
        ],
        ws.dir.path(),
    );
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains("`src/a.txt` is a file"), "{err}");
    assert!(err.contains("the directory that holds it (`src`)"), "{err}");
}

// ---- serve that cannot start -------------------------------------------------------

#[test]
fn serve_stdio_that_cannot_start_answers_the_client_with_the_reason() {
    let ws = Ws::new();
    ws.write("README.md", "# hi\n");
    let mut child = command(
        &[
            "serve",
            "--stdio",
            "--allow-read",
            ".",
            "--allow-write",
            "src",
        ],
        ws.dir.path(),
    )
    .stdin(Stdio::piped())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(
            br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
        )
        .unwrap();
    stdin.write_all(b"\n").unwrap();
    stdin.flush().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let reply: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
    assert_eq!(reply["id"], 1, "{reply}");
    let message = reply["error"]["message"].as_str().unwrap();
    assert!(message.starts_with("toolhost could not start"), "{message}");
    assert!(message.contains("grant `src` does not exist"), "{message}");
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains("toolhost serve: not started"), "{err}");
    assert!(err.contains("grant `src` does not exist"), "{err}");
}

// ---- idle cost -------------------------------------------------------------------

/// Voluntary context switches of each named thread of process `pid`.
fn wakeups(pid: u32) -> std::collections::BTreeMap<String, u64> {
    let mut out = std::collections::BTreeMap::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let dir = task.unwrap().path();
        let name = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        let status = std::fs::read_to_string(dir.join("status")).unwrap_or_default();
        let n: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
            .map_or(0, |v| v.trim().parse().unwrap_or(0));
        *out.entry(name.trim().to_string()).or_default() += n;
    }
    out
}

/// An idle `serve` does not wake up: the epoch ticker and the deadline
/// watchdog sleep while no guest runs, and the plugin directory is watched
/// by the OS, not polled (its CPU share is in `cargo bench --bench idle`).
#[test]
fn an_idle_server_does_not_wake_up() {
    let ws = project();
    let plugins = tempfile::tempdir().unwrap();
    std::fs::copy(test_plugin("tp_trivial"), plugins.path().join("t.wasm")).unwrap();
    let mut child = command(
        &[
            "serve",
            "--stdio",
            "--allow-read",
            "src",
            "--watch-ms",
            "50",
        ],
        ws.dir.path(),
    )
    .arg("--plugins-dir")
    .arg(plugins.path())
    .stdin(Stdio::piped())
    .stdout(Stdio::piped())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    for msg in [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo_value","arguments":{"value":1}}}"#,
    ] {
        stdin.write_all(msg.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
    }
    stdin.flush().unwrap();
    let mut line = String::new();
    loop {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "the server exited");
        if line.contains(r#""id":2"#) {
            break;
        }
    }
    // Let the call's thread park and its spin end.
    std::thread::sleep(std::time::Duration::from_millis(500));
    let before = wakeups(child.id());
    std::thread::sleep(std::time::Duration::from_secs(2));
    let after = wakeups(child.id());
    for thread in ["toolhost-epoch", "toolhost-watchd", "toolhost-watch"] {
        let n = after.get(thread).copied().unwrap_or(0) - before.get(thread).copied().unwrap_or(0);
        // Polling would be 2,000 (epoch, 1 ms), 100 (watchdog) or 40
        // (the directory at 50 ms) in 2 s; asleep is 0.
        assert!(n <= 2, "{thread} woke {n} times in 2 s idle: {after:?}");
    }
    // The watched directory still works: a new plugin is noticed.
    let tmp = plugins.path().join(".incoming");
    std::fs::copy(test_plugin("tp_conformance"), &tmp).unwrap();
    std::fs::rename(&tmp, plugins.path().join("c.wasm")).unwrap();
    loop {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "the server exited");
        if line.contains("notifications/tools/list_changed") {
            break;
        }
    }
    drop(stdin);
    let _ = child.wait();
}
