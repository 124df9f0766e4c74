//! The `toolhost` command line.
//!
//! ```text
//! toolhost list                                  tools the host would serve
//! toolhost describe TOOL                         one tool's full descriptor
//! toolhost call TOOL 'ARGS_JSON' [grants, limits] run one call, print the observation
//! toolhost batch [FILE|-] [grants, limits]        run a batch of calls, print one envelope
//! toolhost lint PLUGIN.wasm                      check a plugin's descriptors
//! toolhost serve --stdio | --http ADDR            serve the tools over MCP
//! toolhost cap mint|attenuate|inspect|revoke|list capability tokens
//! toolhost approvals list|show|approve|deny   calls waiting for a person
//! toolhost plugin lock|verify|list|add|remove|push third-party plugins
//! ```
//!
//! Third-party plugins (`--plugin`, `--plugins-dir`) are judged at load by
//! the trust policy: `--lock FILE` (default: `toolhost.lock` in the plugins
//! directory, when present), `--require-lock`, `--trusted-signers FILE`,
//! `--require-signature`, `--strict-descriptions` (see
//! `toolhost::plugin::trust::policy`). A refused plugin is reported with its code;
//! a plugin named with `--plugin` that cannot be loaded is an error.
//!
//! Every call runs under a capability token: `--token` (or `TOOLHOST_TOKEN`),
//! or, as a convenience, one minted for that call from the `--allow-*` flags.
//!
//! By default the embedded reference tools are loaded; add components with
//! `--plugin FILE` or `--plugins-dir DIR`. `call` exits 0 when the
//! observation's status is `ok`, 1 for `error`, 3 for `denied`, 4 for
//! `unknown` and `partial`; 2 means the command itself was wrong. `batch`
//! exits 0 when every item is ok, 4 when some are, 1 when none is.

use std::io::{IsTerminal, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::{Args, CommandFactory, Parser, Subcommand};

use toolhost::observation::Status;
use toolhost::plugin::catalog;
use toolhost::sandbox::{InstanceAllocation, LoadEvent};
use toolhost::{
    Call, CallOptions, Catalog, Host, KeySource, Keyring, Mode, RootKey, Sandbox, SandboxConfig,
    Session, Source, TrustPolicy, Workspace,
};

/// The process's allocator: a call builds and drops many small JSON values
/// (an object per line of a page), and glibc's malloc and free were about a
/// fifth of a busy server's CPU.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Sets the allocator's options before its first allocation, which happens
/// before `main`: this runs among the executable's constructors.
///
/// mimalloc commits each arena it reserves (1 GiB of address space) eagerly
/// on Linux by default, and the pages it then hands out and frees stay
/// resident; committed as used, a server of a few thousand small calls
/// holds about a third of the heap memory (see docs/performance.md).
#[cfg(target_os = "linux")]
#[used]
#[link_section = ".init_array"]
static ALLOCATOR_OPTIONS: extern "C" fn() = {
    extern "C" fn set() {
        // `mi_option_arena_eager_commit` (not among the crate's constants).
        const ARENA_EAGER_COMMIT: libmimalloc_sys::mi_option_t = 4;
        // SAFETY: sets one option's value; callable at any time, before
        // initialisation too.
        unsafe { libmimalloc_sys::mi_option_set(ARENA_EAGER_COMMIT, 0) };
    }
    set
};

mod approvals_cmd;
mod cap_cmd;
mod config;
mod cost;
mod log_cmd;
mod logging;
mod plugin_cmd;
#[cfg(test)]
mod reference;
mod render;
mod serve_args;
mod serve_failure;
mod signals;
mod warmup;

use serve_args::ServeArgs;

/// `--instance-allocation`: see [`InstanceAllocation`].
#[derive(Clone, Copy, clap::ValueEnum)]
enum Allocation {
    Pooling,
    OnDemand,
}

#[derive(Parser)]
#[command(
    name = "toolhost",
    version,
    about = "A WebAssembly tool host for AI agents"
)]
struct Cli {
    #[command(flatten)]
    plugins: PluginArgs,
    #[command(subcommand)]
    command: Command,
}

/// Options every command takes, shown under their own heading after a
/// command's own.
#[derive(Args)]
#[command(next_help_heading = "Global options")]
struct PluginArgs {
    /// Settings file (default: ~/.config/toolhost/config.toml, when it
    /// exists; a workspace's toolhost.toml is read only when named here):
    /// the long flags as keys, `allow_read = ["src"]`; flags win.
    #[arg(long, value_name = "FILE", env = "TOOLHOST_CONFIG", global = true)]
    config: Option<PathBuf>,
    /// Load this component (repeatable); `NS=FILE` loads its tools under
    /// the namespace NS, named `NS.tool`.
    #[arg(long = "plugin", value_name = "[NS=]FILE", global = true)]
    plugins: Vec<toolhost::toolname::PluginSpec>,
    /// Load every *.wasm in this directory.
    #[arg(long, value_name = "DIR", env = "TOOLHOST_PLUGINS_DIR", global = true)]
    plugins_dir: Option<PathBuf>,
    /// Do not load the embedded reference tools.
    #[arg(long, global = true)]
    no_builtin: bool,
    /// Compiled-code cache directory (default: ~/.cache/toolhost).
    #[arg(long, value_name = "DIR", env = "TOOLHOST_CACHE_DIR", global = true)]
    cache_dir: Option<PathBuf>,
    /// Do not read or write the compiled-code cache.
    #[arg(long, global = true)]
    no_cache: bool,
    /// How sandbox instances get memory: `pooling` reserves address space
    /// for every slot at start and reuses it (fast per call); `on-demand`
    /// maps each instance's memory when it is made, for a bounded address
    /// space (`ulimit -v`) or a run under valgrind.
    #[arg(long, value_name = "HOW", env = "TOOLHOST_INSTANCE_ALLOCATION", global = true,
          value_enum, default_value_t = Allocation::Pooling)]
    instance_allocation: Allocation,
    /// How the host's own log lines on stderr are written: `text`, or
    /// `json` (one object per line: time, level, host, message, fields).
    /// `RUST_LOG` filters them.
    #[arg(long, value_name = "FORMAT", env = "TOOLHOST_LOG_FORMAT", global = true,
          value_enum, default_value_t = logging::LogFormat::Text)]
    log_format: logging::LogFormat,
    /// The host's root key file, created owner-only on first use
    /// (default: ~/.local/share/toolhost/root.key). A keyring for rotation:
    /// one key of 64 hex digits per line, the first signs, every one
    /// verifies. `TOOLHOST_ROOT_KEY` (hex, comma-separated) takes precedence.
    #[arg(long, value_name = "FILE", env = "TOOLHOST_KEY_FILE", global = true)]
    key_file: Option<PathBuf>,
    /// Idempotency record store: a SQLite file path or a postgres:// URL
    /// (default: records.sqlite beside the root key).
    #[arg(long, value_name = "PATH|URL", env = "TOOLHOST_STORE", global = true)]
    store: Option<String>,
    /// How long completed records are kept, in hours.
    #[arg(long, value_name = "N", default_value_t = 24, global = true)]
    retention_hours: u64,
    /// How much longer than a call's deadline its record lease lasts.
    #[arg(long, value_name = "MS", default_value_t = 30_000, global = true)]
    lease_margin_ms: u64,
    /// How long a plan token (from `toolhost plan`) approves its call.
    #[arg(long, value_name = "MS", default_value_t = 300_000, global = true)]
    plan_ttl_ms: u64,
    /// How long a call waiting for a person's approval waits, and how
    /// long an approved one may then be run.
    #[arg(long, value_name = "MS", default_value_t = 900_000, global = true)]
    approval_ttl_ms: u64,
    /// Where results over their output limit are kept for the token that
    /// made them, read back with `artifact_view` (default: `artifacts`
    /// beside the root key file, ~/.local/share/toolhost/artifacts). With a
    /// PostgreSQL `--store` they are kept there instead, for every host.
    #[arg(long, value_name = "DIR", env = "TOOLHOST_ARTIFACT_DIR", global = true)]
    artifact_dir: Option<PathBuf>,
    /// How long a spilled result is kept: `30m`, `2h`, … (default 1h).
    #[arg(long, value_name = "DURATION", default_value = "1h", global = true, value_parser = humantime::parse_duration)]
    artifact_retention: std::time::Duration,
    /// Bytes of kept results one token may hold at once; an output over a
    /// cap is answered clipped, with no artifact, saying which cap.
    #[arg(long, value_name = "BYTES", default_value_t = toolhost::tools::artifact::Quota::default().token_bytes, global = true)]
    artifact_quota_token_bytes: u64,
    /// Kept results one token may hold at once.
    #[arg(long, value_name = "N", default_value_t = toolhost::tools::artifact::Quota::default().token_count, global = true)]
    artifact_quota_token_count: u64,
    /// Bytes of kept results in the artifact directory, all tokens.
    #[arg(long, value_name = "BYTES", default_value_t = toolhost::tools::artifact::Quota::default().total_bytes, global = true)]
    artifact_quota_bytes: u64,
    /// Kept results in the artifact directory, all tokens.
    #[arg(long, value_name = "N", default_value_t = toolhost::tools::artifact::Quota::default().total_count, global = true)]
    artifact_quota_count: u64,
    /// Where calls take the resource locks that keep conflicting calls of
    /// all toolhost processes apart (default: ~/.local/share/toolhost/locks).
    #[arg(long, value_name = "DIR", env = "TOOLHOST_LOCK_DIR", global = true)]
    lock_dir: Option<PathBuf>,
    #[command(flatten)]
    trust: TrustArgs,
    #[command(flatten)]
    journal: log_cmd::JournalArgs,
}

/// The trust policy for third-party plugins.
#[derive(Args, Clone)]
#[command(next_help_heading = "Global options")]
struct TrustArgs {
    /// The lock file in effect (default: toolhost.lock in the plugins
    /// directory, when it exists). A plugin not in it, or changed since it
    /// was locked, is refused.
    #[arg(long, value_name = "FILE", env = "TOOLHOST_LOCK", global = true)]
    lock: Option<PathBuf>,
    /// Refuse every third-party plugin when no lock is in effect.
    #[arg(
        long,
        env = "TOOLHOST_REQUIRE_LOCK",
        global = true,
        value_parser = clap::builder::BoolishValueParser::new()
    )]
    require_lock: bool,
    /// An ssh allowed_signers file: NAME.wasm.sig files are verified
    /// against it.
    #[arg(
        long,
        value_name = "FILE",
        env = "TOOLHOST_TRUSTED_SIGNERS",
        global = true
    )]
    trusted_signers: Option<PathBuf>,
    /// Refuse unsigned plugins and signatures by keys not trusted.
    #[arg(
        long,
        env = "TOOLHOST_REQUIRE_SIGNATURE",
        global = true,
        value_parser = clap::builder::BoolishValueParser::new()
    )]
    require_signature: bool,
    /// Refuse a tool whose descriptions address the model (default: warn).
    #[arg(
        long,
        env = "TOOLHOST_STRICT_DESCRIPTIONS",
        global = true,
        value_parser = clap::builder::BoolishValueParser::new()
    )]
    strict_descriptions: bool,
}

impl PluginArgs {
    fn trust_policy(&self) -> TrustPolicy {
        TrustPolicy {
            lock: self.trust.lock.clone(),
            plugins_dir: self.plugins_dir.clone(),
            require_lock: self.trust.require_lock,
            trusted_signers: self.trust.trusted_signers.clone(),
            require_signature: self.trust.require_signature,
            strict_descriptions: self.trust.strict_descriptions,
            clean_memo: self.cache_dir().map(|d| d.join("poison-clean")),
        }
    }

    /// The compile-cache directory, unless `--no-cache`.
    fn cache_dir(&self) -> Option<PathBuf> {
        if self.no_cache {
            return None;
        }
        self.cache_dir
            .clone()
            .or_else(toolhost::sandbox::CompileCache::default_dir)
    }
}

/// How a side-effecting call names itself.
#[derive(Args, Default, Clone)]
struct KeyArgs {
    /// Trajectory id of the logical call (with --turn and --call-id).
    #[arg(long, value_name = "ID", requires = "turn")]
    trajectory: Option<String>,
    /// Turn number of the logical call.
    #[arg(long, value_name = "N", requires = "trajectory")]
    turn: Option<u64>,
    /// An explicit idempotency key instead of a derived one (not empty).
    #[arg(
        long,
        value_name = "KEY",
        conflicts_with = "trajectory",
        value_parser = clap::builder::NonEmptyStringValueParser::new()
    )]
    idempotency_key: Option<String>,
    /// The plan token that approves an irreversible call (from `toolhost plan`).
    #[arg(long, value_name = "TOKEN")]
    plan_token: Option<String>,
    /// The id of the approval a person gave (`toolhost approvals approve`)
    /// to the call an `approval_pending` result named.
    #[arg(long, value_name = "ID", conflicts_with = "plan_token")]
    approval: Option<String>,
}

#[derive(Subcommand)]
enum Command {
    /// List the tools (name, side effect, title).
    List {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// List only the tools this token allows.
        #[arg(long, env = "TOOLHOST_TOKEN")]
        token: Option<String>,
    },
    /// Print one tool's descriptor as JSON.
    Describe { tool: String },
    /// What the catalog costs a model: the tokens of each tool's
    /// definition (name, description, input schema; o200k_base), per turn
    /// and over --turns turns (T = N·K·S).
    Catalog {
        /// Count tokens: the default, and the only report for now.
        #[arg(long)]
        cost: bool,
        /// N, the number of turns the catalog is sent for.
        #[arg(long, value_name = "N", default_value_t = 1)]
        turns: u64,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// Count only the tools this token allows.
        #[arg(long, env = "TOOLHOST_TOKEN")]
        token: Option<String>,
    },
    /// Call a tool and print the observation: its status and model-facing
    /// text on a terminal, JSON when piped or with --json.
    #[command(after_help = toolhost::messages::CALL_EXAMPLES)]
    Call(CallArgs),
    /// Run a batch of calls (a JSON array of {"call_id", "tool",
    /// "arguments", "idempotency_key"?}) and print one result envelope.
    Batch(BatchArgs),
    /// Serve the tools over MCP (stdio or Streamable HTTP).
    Serve(ServeArgs),
    /// Plan a side-effecting call (its dry-run) and print the plan with the
    /// plan token that approves it.
    Plan(CallArgs),
    /// Settle an in-doubt idempotency record by hand.
    Settle {
        key: String,
        /// The effect happened: repeats get a recorded "settled" result.
        #[arg(long, conflicts_with = "not_done")]
        done: bool,
        /// The effect did not happen: the next repeat runs.
        #[arg(long)]
        not_done: bool,
    },
    /// List idempotency records.
    Records {
        /// Only records in this state: in_flight, completed, in_doubt.
        #[arg(long)]
        state: Option<String>,
    },
    /// Capability tokens: mint, attenuate, inspect.
    #[command(subcommand)]
    Cap(cap_cmd::CapCommand),
    /// Calls waiting for a person's approval: list, show, approve, deny.
    #[command(subcommand)]
    Approvals(approvals_cmd::ApprovalsCommand),
    /// Third-party plugins: lock, verify, list, add, remove, push.
    #[command(subcommand)]
    Plugin(plugin_cmd::PluginCommand),
    /// The call journal: one entry per call, newest last.
    Log(log_cmd::LogArgs),
    /// Per-tool figures from the journal: first-try validity, malformed
    /// rate, errors, latency, and constrained decoding's break-even.
    Stats(log_cmd::StatsArgs),
    /// Delete journal entries past the retention.
    Prune(log_cmd::PruneArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish,
    /// powershell): e.g. `toolhost completions bash > ~/.local/share/bash-completion/completions/toolhost`.
    Completions { shell: clap_complete::Shell },
    /// Lint a plugin's descriptors and report provider compatibility.
    Lint {
        plugin: PathBuf,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Args)]
struct CallArgs {
    /// Tool name.
    tool: String,
    /// Arguments as JSON; `-` reads them from stdin.
    args: String,
    /// Workspace root; argument paths are relative to it.
    #[arg(long, default_value = ".")]
    workspace: PathBuf,
    /// Grant read access to a path under the workspace (repeatable).
    #[arg(long = "allow-read", value_name = "PATH")]
    allow_read: Vec<String>,
    /// Grant read and write access to a path under the workspace (repeatable).
    #[arg(long = "allow-write", value_name = "PATH")]
    allow_write: Vec<String>,
    /// Run under this capability token instead of the --allow-* flags.
    #[arg(long, env = "TOOLHOST_TOKEN", conflicts_with_all = ["allow_read", "allow_write", "allow_net", "allow_exec", "allow_secrets", "self_approve", "allow_script"])]
    token: Option<String>,
    /// Approve this call's own plan (the `self_approve` right of the
    /// one-call token): an irreversible call then runs on the plan token of
    /// `toolhost plan … --self-approve`, no person asked. Without it such a
    /// call ends `approval_pending` until a person runs `toolhost approvals
    /// approve`.
    #[arg(long = "self-approve")]
    self_approve: bool,
    /// Let this call see secrets: its output, logs and errors are not
    /// redacted and a network tool's arguments may carry a secret (the
    /// `secrets` right of the one-call token).
    #[arg(long = "allow-secrets")]
    allow_secrets: bool,
    /// Let this call run `run_script` (the `script` right of the one-call
    /// token): the script's inner tool calls run under the same grant.
    #[arg(long = "allow-script")]
    allow_script: bool,
    /// Grant a network origin, scheme://host[:port] (repeatable; http and
    /// https only, exact match: default ports 80/443 are filled in).
    #[arg(long = "allow-net", value_name = "ORIGIN")]
    allow_net: Vec<String>,
    /// Grant a native program, by name (looked up on PATH) or absolute path
    /// (repeatable): the tool may run it if it declares it (or `any`) in
    /// needs.exec, in an OS sandbox (bubblewrap).
    #[arg(long = "allow-exec", value_name = "PROGRAM")]
    allow_exec: Vec<String>,
    /// Wall-clock limit in milliseconds, 1 to 86400000 (default: the tool's own).
    #[arg(long, value_name = "N", value_parser = parse_timeout_ms)]
    timeout_ms: Option<u64>,
    /// Fuel limit (default: 2e9).
    #[arg(long, value_name = "N")]
    fuel: Option<u64>,
    /// Memory limit across all memories (default: 256).
    #[arg(long, value_name = "N")]
    memory_mb: Option<u64>,
    /// Output size limit (default: the tool's own).
    #[arg(long, value_name = "N")]
    max_output_bytes: Option<usize>,
    /// Call id to record (default: generated); with --trajectory and
    /// --turn it names the logical call for its idempotency key.
    #[arg(long)]
    call_id: Option<String>,
    #[command(flatten)]
    keys: KeyArgs,
    /// Print the observation as JSON (the default when stdout is not a
    /// terminal; a terminal gets the status and the model-facing text).
    #[arg(long)]
    json: bool,
    /// Print the observation as indented JSON.
    #[arg(long)]
    pretty: bool,
}

/// The longest wall-clock limit a call may ask for: one day.
const MAX_TIMEOUT_MS: u64 = 86_400_000;

/// Parses `--timeout-ms`: a whole number of milliseconds, 1 to
/// [`MAX_TIMEOUT_MS`]. Zero would make every call time out before it starts.
fn parse_timeout_ms(s: &str) -> Result<u64, String> {
    let range = format!("a whole number of milliseconds from 1 to {MAX_TIMEOUT_MS} (one day)");
    match s.trim().parse::<u64>() {
        Ok(ms) if (1..=MAX_TIMEOUT_MS).contains(&ms) => Ok(ms),
        Ok(0) => Err(format!("0 would time out every call; give {range}")),
        _ => Err(format!("give {range}")),
    }
}

#[derive(Args)]
struct BatchArgs {
    /// The batch: a JSON array of {"call_id", "tool", "arguments",
    /// "idempotency_key"?}; `-` (the default) reads it from stdin.
    #[arg(default_value = "-", value_name = "FILE|-")]
    input: String,
    /// Workspace root; argument paths are relative to it.
    #[arg(long, default_value = ".")]
    workspace: PathBuf,
    /// Grant read access to a path under the workspace (repeatable).
    #[arg(long = "allow-read", value_name = "PATH")]
    allow_read: Vec<String>,
    /// Grant read and write access to a path under the workspace (repeatable).
    #[arg(long = "allow-write", value_name = "PATH")]
    allow_write: Vec<String>,
    /// Run under this capability token instead of the --allow-* flags.
    #[arg(long, env = "TOOLHOST_TOKEN", conflicts_with_all = ["allow_read", "allow_write", "allow_net", "allow_exec"])]
    token: Option<String>,
    /// Grant a network origin, scheme://host[:port] (repeatable).
    #[arg(long = "allow-net", value_name = "ORIGIN")]
    allow_net: Vec<String>,
    /// Grant a native program, by name or absolute path (repeatable).
    #[arg(long = "allow-exec", value_name = "PROGRAM")]
    allow_exec: Vec<String>,
    /// Most items running at once (default and ceiling: the cores).
    #[arg(long, value_name = "N", default_value_t = 0)]
    max_parallel: usize,
    /// Wall-clock limit of each item in milliseconds, 1 to 86400000
    /// (default: its tool's own).
    #[arg(long, value_name = "N", value_parser = parse_timeout_ms)]
    timeout_ms: Option<u64>,
    /// Fuel limit of each item (default: 2e9).
    #[arg(long, value_name = "N")]
    fuel: Option<u64>,
    /// Memory limit of each item (default: 256).
    #[arg(long, value_name = "N")]
    memory_mb: Option<u64>,
    /// Trajectory id: with --turn, items without an idempotency_key get one
    /// derived from it, the turn and their call_id.
    #[arg(long, value_name = "ID", requires = "turn")]
    trajectory: Option<String>,
    /// Turn number of the batch.
    #[arg(long, value_name = "N", requires = "trajectory")]
    turn: Option<u64>,
    /// Pretty-print the result.
    #[arg(long)]
    pretty: bool,
}

fn main() -> ExitCode {
    let cli = config::parse::<Cli>();
    logging::init(cli.plugins.log_format);
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("toolhost: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// Writes `text` and a line break to stdout. A reader that has gone away
/// (`toolhost describe X | head -c 100`) is not an error: nobody is left to
/// read the rest, so the command ends as it would have, without the panic
/// `println!` gives on a closed pipe.
fn emit(text: impl std::fmt::Display) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match writeln!(out, "{text}").and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => Ok(other?),
    }
}

fn run(cli: Cli) -> Result<ExitCode> {
    let shutdown = std::sync::Arc::new(toolhost_mcp::Shutdown::default());
    if let Command::Serve(a) = &cli.command {
        if !a.stdio && a.http.is_none() {
            eprintln!("{}", toolhost::messages::SERVE_NEEDS_TRANSPORT);
            return Ok(ExitCode::from(2));
        }
        // Before any other thread starts (see `signals`).
        signals::install(shutdown.clone()).context("handling SIGTERM and SIGINT")?;
    }
    // The cache's secret lives beside the root key; a cache inside the
    // workspace is refused.
    let workspace = match &cli.command {
        Command::Call(a) | Command::Plan(a) => Some(a.workspace.clone()),
        Command::Batch(a) => Some(a.workspace.clone()),
        Command::Serve(a) => Some(a.workspace.clone()),
        _ => None,
    };
    let config = SandboxConfig {
        cache_dir: cli.plugins.cache_dir(),
        cache_key_file: cli
            .plugins
            .key_file
            .as_ref()
            .filter(|_| std::env::var_os("TOOLHOST_CACHE_KEY_FILE").is_none())
            .map(|k| k.with_file_name("cache.key")),
        workspace,
        allocation: match cli.plugins.instance_allocation {
            Allocation::Pooling => InstanceAllocation::Pooling,
            Allocation::OnDemand => InstanceAllocation::OnDemand,
        },
        ..SandboxConfig::default()
    };
    let p = &cli.plugins;
    match cli.command {
        Command::Cap(cmd) => return cap_cmd::run(&cmd, p),
        Command::Approvals(cmd) => return approvals_cmd::run(&cmd, p),
        Command::Log(a) => return log_cmd::log(open_store(p)?, a),
        Command::Stats(a) => return log_cmd::stats(open_store(p)?, a),
        Command::Prune(a) => return log_cmd::prune(open_store(p)?, &p.journal, a),
        _ => {}
    }
    if let Command::Completions { shell } = cli.command {
        let mut out = Vec::new();
        clap_complete::generate(shell, &mut Cli::command(), "toolhost", &mut out);
        emit(String::from_utf8_lossy(&out).trim_end())?;
        return Ok(ExitCode::SUCCESS);
    }
    // Every command below loads plugins: without a cache directory to
    // remember clean descriptors in, the poisoning rules compile beside it.
    let third_party = cli.plugins.plugins_dir.is_some() || !cli.plugins.plugins.is_empty();
    warmup::in_background(third_party && config.cache_dir.is_none());
    warmup::redactor_in_background(matches!(
        cli.command,
        Command::Call(_) | Command::Batch(_) | Command::Serve(_) | Command::Plan(_)
    ));
    toolhost::effects::resource::set_process_default(locks(&cli.plugins)?);
    let sandbox = Sandbox::new(&config).map_err(|e| {
        let hint = if config.allocation == InstanceAllocation::Pooling {
            " (where the address space is bounded, as under `ulimit -v`, \
             run with --instance-allocation on-demand)"
        } else {
            ""
        };
        anyhow::anyhow!("starting the sandbox: {e}{hint}")
    })?;
    match cli.command {
        Command::Cap(_)
        | Command::Approvals(_)
        | Command::Log(_)
        | Command::Stats(_)
        | Command::Prune(_)
        | Command::Completions { .. } => unreachable!("handled above"),
        Command::Plugin(cmd) => plugin_cmd::run(
            cmd,
            &plugin_cmd::Ctx {
                sandbox: &sandbox,
                builtin: !cli.plugins.no_builtin,
                dir: cli.plugins.plugins_dir.clone(),
                files: cli.plugins.plugins.clone(),
                policy: cli.plugins.trust_policy(),
            },
        ),
        Command::Lint { plugin, json } => lint(
            &sandbox,
            plugin,
            json,
            cli.plugins.trust.strict_descriptions,
        ),
        Command::List { json, token } => {
            let host = load(sandbox, &cli.plugins)?;
            let session = match token {
                Some(t) => Some(open_session(&cli.plugins, &t, PathBuf::from("."))?),
                None => None,
            };
            list(&host, session.as_ref(), json)
        }
        Command::Catalog {
            // The token count is the only report: `--cost` says so explicitly.
            cost: _,
            turns,
            json,
            token,
        } => {
            let host = load(sandbox, &cli.plugins)?;
            let session = match token {
                Some(t) => Some(open_session(&cli.plugins, &t, PathBuf::from("."))?),
                None => None,
            };
            let tools: Vec<_> = match &session {
                Some(s) => host.visible_tools(s).collect(),
                None => host.catalog().tools().collect(),
            };
            let cost = cost::catalog_cost(tools.iter().map(|t| &t.descriptor), turns)?;
            if json {
                emit(serde_json::to_string_pretty(&cost)?)?;
            } else {
                emit(cost.render())?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Describe { tool } => {
            let host = load(sandbox, &cli.plugins)?;
            let Some(t) = host.catalog().get(&tool) else {
                bail!("no tool named `{tool}` (try `toolhost list`)");
            };
            let mut out = serde_json::to_value(&t.descriptor)?;
            out["plugin"] = serde_json::Value::String(t.plugin_name.clone());
            out["lint"] = serde_json::to_value(&t.report)?;
            emit(serde_json::to_string_pretty(&out)?)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Call(args) => {
            let host = load(sandbox, &cli.plugins)?
                .with_records(records(&cli.plugins)?)
                .with_recorder(recorder(&cli.plugins, None)?)
                .with_artifacts(artifacts(&cli.plugins)?);
            call(&host, &cli.plugins, args, false)
        }
        Command::Batch(args) => {
            let host = load(sandbox, &cli.plugins)?
                .with_records(records(&cli.plugins)?)
                .with_recorder(recorder(&cli.plugins, None)?)
                .with_artifacts(artifacts(&cli.plugins)?);
            batch(&host, &cli.plugins, args)
        }
        Command::Plan(args) => {
            let host = load(sandbox, &cli.plugins)?
                .with_records(records(&cli.plugins)?)
                .with_recorder(recorder(&cli.plugins, None)?);
            call(&host, &cli.plugins, args, true)
        }
        Command::Settle {
            key,
            done,
            not_done,
        } => {
            if !done && !not_done {
                bail!(
                    "settle {key}: say what happened to the effect: --done (it happened; \
                     repeats of the call get a recorded \"settled\" result and do not run) \
                     or --not-done (it did not happen; the next repeat runs the call)"
                );
            }
            let r = records(&cli.plugins)?;
            let store = r.store();
            let Some(rec) = store.get(&key)? else {
                bail!("no record with key {key}");
            };
            let settlement = toolhost::Settlement::by_operator(&rec, done);
            store.settle(&key, settlement)?;
            eprintln!(
                "toolhost: settled {key} as {}",
                if done { "done" } else { "not done" }
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Records { state } => {
            let r = records(&cli.plugins)?;
            let state = match state {
                Some(s) => Some(s.parse().map_err(|e| anyhow::anyhow!("--state: {e}"))?),
                None => None,
            };
            let list: Vec<_> = r
                .store()
                .list(state)?
                .into_iter()
                .map(|rec| {
                    serde_json::json!({
                        "key": rec.key, "tool": rec.tool, "state": rec.state.as_str(),
                        "fence": rec.fence, "reason": rec.reason,
                    })
                })
                .collect();
            emit(serde_json::to_string_pretty(&list)?)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Serve(args) => {
            let stdio = args.http.is_none();
            match serve(sandbox, &cli.plugins, args, shutdown) {
                Err(e) if !toolhost_mcp::started() => {
                    let reason = format!("{e:#}");
                    eprintln!("toolhost serve: not started: {reason}");
                    if stdio {
                        serve_failure::tell_stdio_client(&reason);
                    }
                    Ok(ExitCode::from(2))
                }
                other => other,
            }
        }
    }
}

/// `toolhost serve`.
fn serve(
    sandbox: Sandbox,
    p: &PluginArgs,
    args: ServeArgs,
    shutdown: std::sync::Arc<toolhost_mcp::Shutdown>,
) -> Result<ExitCode> {
    let client = client_config(p, &args.workspace);
    let policy = p.trust_policy();
    // A lock or signers file that cannot be read stops the server before it
    // starts (a later reload that fails refuses the third-party plugins
    // instead).
    policy.prepare().context("trust policy")?;
    let plugins = toolhost_mcp::Plugins {
        builtin: !p.no_builtin,
        dir: p.plugins_dir.clone(),
        files: p.plugins.clone(),
        trust: Some(policy),
    };
    let records = records(p)?;
    let console = match args.console {
        true => Some(console_options(p, args.console_token_file.as_deref())?),
        false => None,
    };
    let args = args.into_options(artifacts(p)?, client, shutdown, console);
    let metrics = args
        .http
        .is_some()
        .then(|| std::sync::Arc::new(toolhost::record::metrics::Metrics::new()));
    toolhost_mcp::run(
        sandbox,
        plugins,
        args,
        root_ring(p).ok(),
        Some(records),
        recorder(p, metrics)?,
    )?;
    Ok(ExitCode::SUCCESS)
}

/// The operator's console on the host's record store (`serve --console`).
fn console_options(
    p: &PluginArgs,
    token_file: Option<&std::path::Path>,
) -> Result<toolhost_mcp::ConsoleOptions> {
    let token_file = match token_file {
        Some(f) => {
            let text = std::fs::read_to_string(f)
                .with_context(|| format!("--console-token-file {}", f.display()))?;
            let text = text.trim().to_string();
            if text.chars().count() < 16 {
                bail!(
                    "--console-token-file {}: the text must be at least 16 characters",
                    f.display()
                );
            }
            Some(text)
        }
        None => None,
    };
    Ok(toolhost_mcp::ConsoleOptions {
        store: open_store(p)?,
        approval_ttl: std::time::Duration::from_millis(p.approval_ttl_ms.max(1)),
        token_file,
    })
}

fn sources(p: &PluginArgs) -> Result<Vec<Source>> {
    let mut sources = Vec::new();
    if !p.no_builtin {
        sources.push(Source::reference());
        sources.push(Source::script());
    }
    if let Some(dir) = &p.plugins_dir {
        sources.extend(Source::dir(dir).with_context(|| format!("reading {}", dir.display()))?);
    }
    sources.extend(p.plugins.iter().cloned().map(Source::from));
    Ok(sources)
}

fn load(sandbox: Sandbox, p: &PluginArgs) -> Result<Host> {
    let trust = p.trust_policy().prepare().context("trust policy")?;
    let catalog = Catalog::load_trusted(&sandbox, &sources(p)?, Some(&trust), &show_progress);
    for problem in catalog.warnings() {
        tracing::warn!("{problem}");
    }
    for problem in catalog.problems() {
        match &problem.code {
            Some(_) => tracing::warn!("refused: {problem}"),
            None => tracing::warn!("{problem}"),
        }
    }
    // A plugin named on the command line that did not load is an error,
    // not a warning followed by `unknown_tool` later.
    let named: Vec<String> = p
        .plugins
        .iter()
        .map(|f| f.path.display().to_string())
        .collect();
    if let Some(problem) = catalog
        .problems()
        .iter()
        .find(|pr| pr.tool.is_none() && named.contains(&pr.plugin))
    {
        bail!("--plugin {}: not loaded", problem.plugin);
    }
    Ok(Host::new(sandbox, catalog))
}

fn show_progress(plugin: &str, event: LoadEvent) {
    match event {
        // A person waits on these: plain lines on stderr, not log records.
        LoadEvent::Compiling { .. } => eprintln!("{}", toolhost::messages::compiling(plugin)),
        LoadEvent::Compiled { elapsed } => {
            eprintln!(
                "toolhost: compiled {plugin} in {:.1} s",
                elapsed.as_secs_f64()
            )
        }
        LoadEvent::CacheCorrupt => {
            tracing::warn!("discarded a damaged cache entry for {plugin}; recompiling")
        }
        LoadEvent::CacheHit | LoadEvent::Precompiled => {}
    }
}

fn list(host: &Host, session: Option<&Session>, json: bool) -> Result<ExitCode> {
    let tools: Vec<_> = match session {
        Some(s) => host.visible_tools(s).collect(),
        None => host.catalog().tools().collect(),
    };
    if json {
        let tools: Vec<_> = tools
            .iter()
            .map(|t| {
                serde_json::json!({
                    "name": t.descriptor.name,
                    "title": t.descriptor.title,
                    "side_effect": t.descriptor.side_effect,
                    "plugin": t.plugin_name,
                    "description": t.descriptor.description,
                })
            })
            .collect();
        emit(serde_json::to_string_pretty(&tools)?)?;
    } else {
        let lines: Vec<String> = tools
            .iter()
            .map(|t| {
                format!(
                    "{:<20} {:<13} {}",
                    t.descriptor.name,
                    t.descriptor.side_effect.as_str(),
                    t.descriptor.title.as_deref().unwrap_or("")
                )
            })
            .collect();
        if !lines.is_empty() {
            emit(lines.join("\n"))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The root keyring: `TOOLHOST_ROOT_KEY` (comma-separated hex), else the
/// key file (one key, or one per line; created owner-only on first use).
/// The first key signs what this process mints; every key verifies.
fn root_ring(p: &PluginArgs) -> Result<Keyring> {
    if let Some(ring) = Keyring::from_env().context("reading TOOLHOST_ROOT_KEY")? {
        return Ok(ring);
    }
    let path = match &p.key_file {
        Some(f) => f.clone(),
        None => default_state_dir()?.join("root.key"),
    };
    Keyring::load_or_create(&path).with_context(|| format!("root key {}", path.display()))
}

/// The signing key: the keyring's first.
fn root_key(p: &PluginArgs) -> Result<RootKey> {
    root_ring(p)?
        .primary()
        .cloned()
        .context("the root keyring is empty")
}

/// What the `delegate` tool tells a sub-agent about starting a stdio server
/// on this host's store, key and plugins. Secrets stay out of it: a
/// PostgreSQL URL or a key from the environment becomes a note instead.
fn client_config(p: &PluginArgs, workspace: &std::path::Path) -> toolhost::ClientConfig {
    let abs = |path: &std::path::Path| {
        std::path::absolute(path)
            .unwrap_or_else(|_| path.to_path_buf())
            .display()
            .to_string()
    };
    let mut args: Vec<String> = Vec::new();
    let mut notes: Vec<&str> = Vec::new();
    for plugin in &p.plugins {
        let spec = toolhost::toolname::PluginSpec {
            namespace: plugin.namespace.clone(),
            path: abs(&plugin.path).into(),
        };
        args.extend(["--plugin".into(), spec.to_string()]);
    }
    if let Some(dir) = &p.plugins_dir {
        args.extend(["--plugins-dir".into(), abs(dir)]);
    }
    if p.no_builtin {
        args.push("--no-builtin".into());
    }
    if let Some(dir) = &p.cache_dir {
        args.extend(["--cache-dir".into(), abs(dir)]);
    }
    if std::env::var_os(toolhost::policy::capability::ROOT_KEY_ENV).is_some_and(|v| !v.is_empty()) {
        notes.push("set TOOLHOST_ROOT_KEY to this host's root key in the server's environment");
    } else if let Some(f) = &p.key_file {
        args.extend(["--key-file".into(), abs(f)]);
    }
    match p.store.as_deref() {
        Some(url) if url.starts_with("postgres://") || url.starts_with("postgresql://") => {
            notes.push(
                "set TOOLHOST_STORE to this host's PostgreSQL URL in the server's environment",
            );
        }
        Some(path) => {
            let path = path.strip_prefix("sqlite:").unwrap_or(path);
            args.extend(["--store".into(), abs(std::path::Path::new(path))]);
        }
        None => {}
    }
    let program = std::env::current_exe()
        .map(|e| e.display().to_string())
        .unwrap_or_else(|_| "toolhost".into());
    toolhost::ClientConfig {
        stdio: Some((program, args)),
        workspace: Some(abs(workspace)),
        http_url: None,
        note: (!notes.is_empty()).then(|| notes.join("; ")),
    }
}

/// The record store: `--store` (a SQLite path or a postgres:// URL), by
/// default records.sqlite beside the root key.
fn open_store(p: &PluginArgs) -> Result<std::sync::Arc<dyn toolhost::Store>> {
    use std::sync::Arc;
    use toolhost::Store;
    use toolhost_store::{PostgresStore, SqliteStore};
    let retention = std::time::Duration::from_secs(p.retention_hours.max(1) * 3600);
    let store: Arc<dyn Store> = match p.store.as_deref() {
        Some(url) if url.starts_with("postgres://") || url.starts_with("postgresql://") => {
            Arc::new(
                PostgresStore::connect(url, retention)
                    .context("opening the PostgreSQL record store")?,
            )
        }
        other => {
            let path = match other {
                Some(path) => PathBuf::from(path.strip_prefix("sqlite:").unwrap_or(path)),
                None => default_store_file(p)?,
            };
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("creating {}", dir.display()))?;
            }
            Arc::new(
                SqliteStore::open(&path, retention)
                    .with_context(|| format!("opening the record store {}", path.display()))?,
            )
        }
    };
    Ok(store)
}

/// The journal (on a connection of its own to the record store), the
/// circuit breaker and, for a server, its metrics.
fn recorder(
    p: &PluginArgs,
    metrics: Option<std::sync::Arc<toolhost::record::metrics::Metrics>>,
) -> Result<toolhost::Recorder> {
    log_cmd::recorder(&p.journal, || open_store(p), metrics)
}

/// The record store and the key that derives idempotency keys and signs
/// plans: the keyring's last, so hosts on different keyring versions agree
/// ([`Keyring::anchor`]).
fn records(p: &PluginArgs) -> Result<toolhost::EffectGuard> {
    let ring = root_ring(p)?;
    let key = ring.anchor().context("the root keyring is empty")?;
    let store = open_store(p)?;
    Ok(
        toolhost::EffectGuard::new(store, &key.derive("idempotency"))
            .with_lease_margin(std::time::Duration::from_millis(p.lease_margin_ms))
            .with_plan_ttl(std::time::Duration::from_millis(p.plan_ttl_ms))
            .with_approval_ttl(std::time::Duration::from_millis(p.approval_ttl_ms.max(1))),
    )
}

/// The artifact store: the PostgreSQL record store when `--store` is one,
/// else `--artifact-dir`, by default `artifacts` beside the root key;
/// keeping results for `--artifact-retention`.
fn artifacts(p: &PluginArgs) -> Result<std::sync::Arc<toolhost::Artifacts>> {
    let beside_key = p
        .key_file
        .as_deref()
        .and_then(|k| k.parent())
        .filter(|d| !d.as_os_str().is_empty());
    let dir = match (&p.artifact_dir, beside_key) {
        (Some(d), _) => d.clone(),
        (None, Some(d)) => d.join("artifacts"),
        (None, None) => default_state_dir()?.join("artifacts"),
    };
    let store = match p.store.as_deref() {
        // A shared store keeps the artifacts, so every host serves them.
        Some(url) if url.starts_with("postgres://") || url.starts_with("postgresql://") => {
            let pg = toolhost_store::PostgresStore::connect(
                url,
                std::time::Duration::from_secs(p.retention_hours.max(1) * 3600),
            )
            .context("opening the PostgreSQL artifact store")?;
            let backend = toolhost::Store::artifacts(std::sync::Arc::new(pg))
                .context("the PostgreSQL store keeps no artifacts")?;
            toolhost::Artifacts::in_backend(backend, p.artifact_retention)
        }
        _ => toolhost::Artifacts::open(&dir, p.artifact_retention)
            .with_context(|| format!("opening the artifact store {}", dir.display()))?,
    }
    .with_quota(toolhost::tools::artifact::Quota {
        token_bytes: p.artifact_quota_token_bytes,
        token_count: p.artifact_quota_token_count,
        total_bytes: p.artifact_quota_bytes,
        total_count: p.artifact_quota_count,
    });
    Ok(std::sync::Arc::new(store))
}

/// Where calls take their resource locks: the lock directory (without one,
/// locks hold within this process only) and, when the record store is
/// PostgreSQL, its advisory locks.
fn locks(p: &PluginArgs) -> Result<toolhost::Locks> {
    use toolhost::Locks;
    let dir = p
        .lock_dir
        .clone()
        .or_else(|| default_state_dir().ok().map(|d| d.join("locks")));
    let locks = dir.map_or_else(Locks::in_process, Locks::with_dir);
    Ok(match p.store.as_deref() {
        Some(url) if url.starts_with("postgres://") || url.starts_with("postgresql://") => {
            let pg = toolhost_store::PgLocks::new(url)
                .map_err(anyhow::Error::msg)
                .context("PostgreSQL advisory locks")?;
            locks.with_shared(std::sync::Arc::new(pg))
        }
        _ => locks,
    })
}

/// The record store when `--store` names none: `records.sqlite` beside the
/// root key file (a key file names the host's state), else in the state
/// directory.
fn default_store_file(p: &PluginArgs) -> Result<PathBuf> {
    match p.key_file.as_deref().and_then(|k| k.parent()) {
        Some(dir) if !dir.as_os_str().is_empty() => Ok(dir.join("records.sqlite")),
        _ => Ok(default_state_dir()?.join("records.sqlite")),
    }
}

fn default_state_dir() -> Result<PathBuf> {
    let base = std::env::var_os("XDG_DATA_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share")))
        .context("no HOME: give --key-file and --store")?;
    Ok(base.join("toolhost"))
}

fn open_session(p: &PluginArgs, token: &str, workspace: PathBuf) -> Result<Session> {
    let ring = root_ring(p)?;
    let ws = Workspace::open(&workspace)
        .with_context(|| format!("opening workspace {}", workspace.display()))?;
    Session::open(&ring, token, ws).context("--token")
}

/// The session of a `call` or `batch`: under `token`, or under one minted
/// for this command from the `--allow-read`, `--allow-write`,
/// `--allow-net` and `--allow-exec` flags.
fn grants_session(
    p: &PluginArgs,
    token: Option<&str>,
    workspace: &std::path::Path,
    [allow_read, allow_write, allow_net, allow_exec]: [&Vec<String>; 4],
    [allow_secrets, self_approve, allow_script]: [bool; 3],
) -> Result<Session> {
    if let Some(token) = token {
        return open_session(p, token, workspace.to_path_buf());
    }
    let ws = Workspace::open(workspace)
        .with_context(|| format!("opening workspace {}", workspace.display()))?;
    let read: Vec<&str> = allow_read.iter().map(String::as_str).collect();
    let write: Vec<&str> = allow_write.iter().map(String::as_str).collect();
    let net = allow_net
        .iter()
        .map(|o| toolhost::sandbox::normalize_origin(o))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| anyhow::anyhow!("checking --allow-net: {e}"))?;
    let net: Vec<&str> = net.iter().map(String::as_str).collect();
    let exec: Vec<&str> = allow_exec.iter().map(String::as_str).collect();
    let allow = toolhost::Allow {
        read: &read,
        write: &write,
        net: &net,
        exec: &exec,
        secrets: allow_secrets,
        self_approve,
        script: allow_script,
    };
    // Minted deterministically: a plan and the call it approves
    // (plans are bound to the token) can be two commands.
    Session::allowing(&root_key(p)?, ws, &allow)
        .context("checking --allow-read/--allow-write/--allow-net/--allow-exec")
}

fn call(host: &Host, p: &PluginArgs, a: CallArgs, plan: bool) -> Result<ExitCode> {
    let args = if a.args == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .context("reading arguments from stdin")?;
        s
    } else {
        a.args.clone()
    };
    let session = grants_session(
        p,
        a.token.as_deref(),
        &a.workspace,
        [&a.allow_read, &a.allow_write, &a.allow_net, &a.allow_exec],
        [a.allow_secrets, a.self_approve, a.allow_script],
    )?;
    let opts = CallOptions {
        call_id: a.call_id.clone(),
        timeout_ms: a.timeout_ms,
        fuel: a.fuel,
        memory_mb: a.memory_mb,
        max_output_bytes: a.max_output_bytes,
        idempotency: match (
            &a.keys.idempotency_key,
            &a.keys.trajectory,
            a.keys.turn,
            &a.call_id,
        ) {
            (Some(k), ..) => Some(KeySource::Explicit(k.clone())),
            (None, Some(t), Some(turn), Some(c)) => Some(KeySource::Derived {
                trajectory_id: t.clone(),
                turn,
                call_id: c.clone(),
            }),
            (None, Some(_), Some(_), None) => bail!("--trajectory and --turn need --call-id"),
            _ => None,
        },
        plan_token: a.keys.plan_token.clone(),
        approval: a.keys.approval.clone(),
        requested_by: Some("cli".into()),
        ..CallOptions::default()
    };
    let mode = if plan { Mode::Plan } else { Mode::Run };
    let obs = host.run(
        &session,
        Call {
            mode,
            ..Call::new(&a.tool, &args, &opts)
        },
    );
    // The caller here is a person (or a script it wrote): a refusal names
    // the flag that grants it, not "ask the user".
    let workspace = a.workspace.clone();
    let obs = obs.for_person(&|p: &str| workspace.join(p).is_dir());
    let format = render::Format::choose(a.json, a.pretty, std::io::stdout().is_terminal());
    emit(render::observation(&serde_json::to_value(&obs)?, format))?;
    Ok(ExitCode::from(match obs.status {
        Status::Ok => 0,
        Status::Error => 1,
        Status::Denied => 3,
        Status::Unknown | Status::Partial => 4,
    }))
}

fn lint(sandbox: &Sandbox, plugin: PathBuf, json: bool, strict: bool) -> Result<ExitCode> {
    let source = Source::File(plugin.clone());
    let inspected = catalog::inspect(sandbox, &source, &|e| show_progress(&source.name(), e))
        .map_err(|e| anyhow::anyhow!("{}: {e}", plugin.display()))?;
    let names: Vec<(String, toolhost::descriptor::ToolDescriptor)> = inspected
        .descriptors
        .iter()
        .filter_map(|d| d.as_ref().ok())
        .map(|d| (source.name(), d.clone()))
        .collect();
    let catalog_report = toolhost::plugin::lint::lint_catalog(&names);
    // Texts that address the model: warnings, refusals when strict.
    let suspicious = toolhost::plugin::trust::poison::scan_tools(names.iter().map(|(_, d)| d));
    let refused = inspected.reports.iter().any(|r| r.refused)
        || catalog_report.has_errors()
        || (strict && !suspicious.is_empty());
    let contract = inspected.plugin.contract();
    if json {
        let out = serde_json::json!({
            "plugin": source.name(), "contract": contract, "tools": inspected.reports,
            "catalog": catalog_report, "suspicious": suspicious,
        });
        emit(serde_json::to_string_pretty(&out)?)?;
    } else {
        let mut text = String::new();
        // The contract first; one of the previous contract also says it
        // runs through the adapter and what to do before the next change.
        if contract == toolhost::sandbox::Contract::Current {
            text.push_str(&format!("{contract}\n"));
        } else {
            text.push_str(&format!(
                "{contract}: it loads and runs; rebuild it against {} before the next \
                 contract change\n",
                toolhost::sandbox::CONTRACT
            ));
        }
        for r in &inspected.reports {
            text.push_str(&format!("{r}\n"));
        }
        for f in &suspicious {
            let level = if strict { "error" } else { "warning" };
            text.push_str(&format!("{level}: {f}\n"));
        }
        // The per-tool reports were printed above; the catalog adds only the
        // findings across tools (its own copy of each report would repeat them).
        for finding in &catalog_report.findings {
            text.push_str(&format!("{finding}\n"));
        }
        emit(text.trim_end_matches('\n'))?;
    }
    Ok(if refused {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn batch(host: &Host, p: &PluginArgs, a: BatchArgs) -> Result<ExitCode> {
    use toolhost::effects::resource::batch;
    use toolhost::{BatchOptions, BatchStatus};
    let text = if a.input == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .context("reading the batch from stdin")?;
        s
    } else {
        std::fs::read_to_string(&a.input).with_context(|| format!("reading {}", a.input))?
    };
    let items = batch::parse(&text)?;
    let session = grants_session(
        p,
        a.token.as_deref(),
        &a.workspace,
        [&a.allow_read, &a.allow_write, &a.allow_net, &a.allow_exec],
        [false, false, false],
    )?;
    let opts = BatchOptions {
        max_parallel: a.max_parallel,
        call: CallOptions {
            timeout_ms: a.timeout_ms,
            fuel: a.fuel,
            memory_mb: a.memory_mb,
            idempotency: match (a.trajectory, a.turn) {
                (Some(trajectory_id), Some(turn)) => Some(KeySource::Derived {
                    trajectory_id,
                    turn,
                    call_id: String::new(),
                }),
                _ => None,
            },
            ..CallOptions::default()
        },
    };
    let mut result = host.batch(&session, &items, &opts);
    // As for `call`: a refusal names the flag that grants it.
    let workspace = a.workspace.clone();
    let is_dir = |p: &str| workspace.join(p).is_dir();
    result.items = std::mem::take(&mut result.items)
        .into_iter()
        .map(|obs| obs.for_person(&is_dir))
        .collect();
    let text = if a.pretty || std::io::stdout().is_terminal() {
        serde_json::to_string_pretty(&result)?
    } else {
        serde_json::to_string(&result)?
    };
    emit(text)?;
    Ok(ExitCode::from(match result.status {
        BatchStatus::Ok => 0,
        BatchStatus::Partial => 4,
        BatchStatus::Error => 1,
    }))
}
