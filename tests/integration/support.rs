//! Shared helpers: building guests, a shared sandbox, workspaces, calls.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::Value;
use toolhost::{
    Allow, Call, CallOptions, Catalog, Host, RootKey, Sandbox, SandboxConfig, Session, Source,
    Workspace,
};

#[path = "../guests.rs"]
mod guests;

pub use guests::{repo_root, test_plugin};

/// The `toolhost` binary as the CLI tests run it: in `cwd`, with the shared
/// compile cache, a fixed root key and no token from the environment.
pub fn toolhost_command(args: &[&str], cwd: &std::path::Path) -> std::process::Command {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_toolhost"));
    cmd.args(args)
        .current_dir(cwd)
        .env(
            "TOOLHOST_CACHE_DIR",
            repo_root().join("target/test-compile-cache"),
        )
        .env("TOOLHOST_ROOT_KEY", "ab".repeat(32))
        .env_remove("TOOLHOST_TOKEN");
    cmd
}

/// One sandbox for the whole test binary, with a cache under `target/`.
pub fn sandbox() -> &'static Sandbox {
    static S: OnceLock<Sandbox> = OnceLock::new();
    S.get_or_init(|| {
        Sandbox::new(&SandboxConfig {
            cache_dir: Some(repo_root().join("target/test-compile-cache")),
            ..SandboxConfig::default()
        })
        .expect("sandbox")
    })
}

/// The host's tool names in catalog order, after checking that every
/// plugin loaded without a problem.
#[track_caller]
pub fn loaded_tool_names(h: &Host) -> Vec<String> {
    assert!(
        h.catalog().problems().is_empty(),
        "{:?}",
        h.catalog().problems()
    );
    h.catalog()
        .tools()
        .map(|t| t.descriptor.name.clone())
        .collect()
}

/// A host with the embedded reference tools.
pub fn reference_host() -> &'static Host {
    static H: OnceLock<Host> = OnceLock::new();
    H.get_or_init(|| host_with(&[Source::reference()]))
}

/// A host with the hostile test tools.
pub fn hostile_host() -> &'static Host {
    static H: OnceLock<Host> = OnceLock::new();
    H.get_or_init(|| host_with(&[Source::File(test_plugin("tp_hostile"))]))
}

/// A host over the given sources. A host without a record store refuses
/// side-effecting tools, so each gets its own SQLite store (in a directory
/// kept for the run) and, like a host without one, counts budgets
/// process-wide.
pub fn host_with(sources: &[Source]) -> Host {
    let catalog = Catalog::load(sandbox(), sources, &|_, _| {});
    let dir = tempfile::tempdir().unwrap().keep();
    let store =
        toolhost_store::SqliteStore::open(dir.join("records.sqlite"), Duration::from_secs(3600))
            .unwrap();
    let records = toolhost::EffectGuard::new(std::sync::Arc::new(store), b"support-host");
    Host::new(sandbox().clone(), catalog)
        .with_records(records)
        .with_budgets(toolhost::process_ledger())
}

/// `opts` with an idempotency key of its own when it has none, so a
/// side-effecting call runs through the record store once.
pub fn keyed(opts: &CallOptions) -> CallOptions {
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut opts = opts.clone();
    if opts.idempotency.is_none() {
        let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        opts.idempotency = Some(toolhost::KeySource::Explicit(format!(
            "support-{}-{n}",
            std::process::id()
        )));
    }
    opts
}

/// A temporary workspace with helpers to make files.
pub struct Ws {
    pub dir: tempfile::TempDir,
}

impl Ws {
    pub fn new() -> Ws {
        Ws {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    pub fn write(&self, rel: &str, content: impl AsRef<[u8]>) -> &Self {
        let p = self.path(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
        self
    }

    pub fn read(&self, rel: &str) -> Vec<u8> {
        std::fs::read(self.path(rel)).unwrap()
    }

    /// Every file under the workspace with its content, for "nothing
    /// changed" checks.
    pub fn snapshot(&self) -> Vec<(PathBuf, Vec<u8>)> {
        fn walk(dir: &Path, out: &mut Vec<(PathBuf, Vec<u8>)>) {
            let mut entries: Vec<_> = std::fs::read_dir(dir)
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
            entries.sort();
            for p in entries {
                let meta = std::fs::symlink_metadata(&p).unwrap();
                if meta.is_dir() {
                    walk(&p, out);
                } else if meta.is_file() {
                    out.push((p.clone(), std::fs::read(&p).unwrap()));
                } else {
                    out.push((
                        p.clone(),
                        std::fs::read_link(&p)
                            .unwrap()
                            .into_os_string()
                            .into_encoded_bytes(),
                    ));
                }
            }
        }
        let mut out = Vec::new();
        walk(self.dir.path(), &mut out);
        out
    }
}

/// Grants for a call: read and write prefixes.
pub struct Grant<'a> {
    pub read: &'a [&'a str],
    pub write: &'a [&'a str],
}

pub const READ_ALL: Grant<'static> = Grant {
    read: &["."],
    write: &[],
};
pub const WRITE_ALL: Grant<'static> = Grant {
    read: &[],
    write: &["."],
};
pub const NOTHING: Grant<'static> = Grant {
    read: &[],
    write: &[],
};

/// The root key the library-level tests mint their sessions with.
pub fn test_key() -> &'static RootKey {
    static KEY: OnceLock<RootKey> = OnceLock::new();
    KEY.get_or_init(|| RootKey::from_hex(&"7e".repeat(32)).unwrap())
}

/// A session of the workspace at `dir` under a token minted for exactly
/// `allow`, as the CLI mints one for its `--allow-*` flags.
pub fn session_at(dir: &Path, allow: &Allow<'_>) -> Session {
    Session::allowing(test_key(), Workspace::open(dir).unwrap(), allow).unwrap()
}

/// [`session_at`] of a test workspace.
pub fn session_allowing(ws: &Ws, allow: &Allow<'_>) -> Session {
    session_at(ws.dir.path(), allow)
}

/// A session of `ws` allowed `grant`'s paths.
pub fn session(ws: &Ws, grant: &Grant<'_>) -> Session {
    session_allowing(
        ws,
        &Allow {
            read: grant.read,
            write: grant.write,
            ..Allow::default()
        },
    )
}

/// A session of `ws` that may write all of it and approve its own plans
/// (the `self_approve` right): the plan-token flow of unattended pipelines.
pub fn self_approving(ws: &Ws) -> Session {
    session_allowing(
        ws,
        &Allow {
            write: &["."],
            self_approve: true,
            ..Allow::default()
        },
    )
}

/// [`call_with`] under [`self_approving`].
pub fn call_self_approving(
    host: &Host,
    ws: &Ws,
    tool: &str,
    args: &str,
    opts: &CallOptions,
) -> Value {
    run_in(host, &self_approving(ws), tool, args, &keyed(opts))
}

/// Runs one call in `session` and returns the observation as JSON, after
/// checking it against the published observation schema.
pub fn run_in(host: &Host, session: &Session, tool: &str, args: &str, opts: &CallOptions) -> Value {
    let obs = host.run(session, Call::new(tool, args, opts));
    let value = serde_json::to_value(&obs).unwrap();
    assert_valid_observation(&value);
    value
}

/// Plans one call in `session` (the tool's dry-run) and returns the
/// observation as JSON, checked like [`run_in`]'s.
pub fn plan_in(
    host: &Host,
    session: &Session,
    tool: &str,
    args: &str,
    opts: &CallOptions,
) -> Value {
    let obs = host.run(session, Call::new(tool, args, opts).plan());
    let value = serde_json::to_value(&obs).unwrap();
    assert_valid_observation(&value);
    value
}

/// Calls a tool and returns the observation as JSON, after checking it
/// against the published observation schema.
pub fn call_with(
    host: &Host,
    ws: &Ws,
    tool: &str,
    args: &str,
    grant: &Grant<'_>,
    opts: &CallOptions,
) -> Value {
    run_in(host, &session(ws, grant), tool, args, &keyed(opts))
}

/// [`call_with`] as it is: no idempotency key is added (for the checks
/// that a side-effecting call without one is refused).
pub fn call_unkeyed(host: &Host, ws: &Ws, tool: &str, args: &str, grant: &Grant<'_>) -> Value {
    run_in(
        host,
        &session(ws, grant),
        tool,
        args,
        &CallOptions::default(),
    )
}

/// [`call_with`] with default options.
pub fn call(host: &Host, ws: &Ws, tool: &str, args: &str, grant: &Grant<'_>) -> Value {
    call_with(host, ws, tool, args, grant, &CallOptions::default())
}

/// Arguments of `file_view` for the first line of `path`.
pub fn view_args(path: &str) -> String {
    format!(r#"{{"path":"{path}","offset":1,"limit":1}}"#)
}

/// Panics unless `obs` matches `schemas/observation.schema.json`.
pub fn assert_valid_observation(obs: &Value) {
    static V: OnceLock<jsonschema::Validator> = OnceLock::new();
    let v = V.get_or_init(|| {
        let text =
            std::fs::read_to_string(repo_root().join("schemas/observation.schema.json")).unwrap();
        jsonschema::validator_for(&serde_json::from_str(&text).unwrap()).unwrap()
    });
    let errors: Vec<String> = v
        .iter_errors(obs)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "observation does not match the schema: {errors:?}\n{obs:#}"
    );
}

/// Asserts the observation is an error with this code and returns it.
#[track_caller]
pub fn expect_error<'a>(obs: &'a Value, status: &str, code: &str) -> &'a Value {
    assert_eq!(obs["status"], status, "{obs:#}");
    assert_eq!(obs["error"]["code"], code, "{obs:#}");
    assert!(obs["output"].is_null(), "{obs:#}");
    &obs["error"]
}

/// Asserts the observation is ok and returns its output.
#[track_caller]
pub fn expect_ok(obs: &Value) -> &Value {
    assert_eq!(obs["status"], "ok", "{obs:#}");
    assert!(obs["error"].is_null(), "{obs:#}");
    &obs["output"]
}

/// The PostgreSQL server of the tests that need one (`.ci/postgres.sh`
/// prints its URL; `TOOLHOST_TEST_POSTGRES` overrides the default). Those
/// tests are `#[ignore]`d so a plain `cargo test` reports them as ignored;
/// `.ci/run` runs them with `--ignored`. Without a server they fail, naming
/// how to start one.
pub fn postgres_url() -> String {
    let url = std::env::var("TOOLHOST_TEST_POSTGRES")
        .unwrap_or_else(|_| "postgres://toolhost:toolhost@127.0.0.1:5432/toolhost".into());
    if let Err(e) = toolhost_store::PostgresStore::connect(&url, Duration::from_secs(3600)) {
        panic!(
            "PostgreSQL unreachable at {url}: {e}\n\
             start it with: export TOOLHOST_TEST_POSTGRES=\"$(bash .ci/postgres.sh)\""
        );
    }
    url
}

/// Runs `tool` with `args` and `options` in `session` on `host`,
/// cancelling it from another thread after `after`; checks that the call
/// ended as cancelled (a `timeout` that says so) and answers how long it
/// took.
pub fn cancelled_after(
    host: &Host,
    session: &Session,
    tool: &str,
    args: &str,
    options: &CallOptions,
    after: Duration,
) -> Duration {
    let token = toolhost::CancelToken::default();
    let canceller = {
        let token = token.clone();
        std::thread::spawn(move || {
            std::thread::sleep(after);
            token.cancel();
        })
    };
    let started = std::time::Instant::now();
    let obs = host.run(session, Call::new(tool, args, options).cancellable(&token));
    let took = started.elapsed();
    canceller.join().unwrap();
    let obs = serde_json::to_value(obs).unwrap();
    let err = expect_error(&obs, "error", "timeout");
    assert!(
        err["message"].as_str().unwrap().contains("cancelled"),
        "{err}"
    );
    took
}
