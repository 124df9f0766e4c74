//! The `toolhost` command line.
//!
//! ```text
//! toolhost list                                  tools the host would serve
//! toolhost describe TOOL                         one tool's full descriptor
//! toolhost call TOOL 'ARGS_JSON' [grants, limits] run one call, print the observation
//! toolhost lint PLUGIN.wasm                      check a plugin's descriptors
//! ```
//!
//! By default the embedded reference tools are loaded; add components with
//! `--plugin FILE` or `--plugins-dir DIR`. `call` exits 0 when the
//! observation's status is `ok`, 1 for `error`, 3 for `denied`, 4 for
//! `unknown` and `partial`; 2 means the command itself was wrong.

use std::io::{IsTerminal, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};

use toolhost::catalog::{self, Catalog, Source};
use toolhost::observation::Status;
use toolhost::paths::{Grants, Workspace};
use toolhost::pipeline::{CallOptions, Host, Scope};
use toolhost::sandbox::{LoadEvent, Sandbox, SandboxConfig};

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

#[derive(Args)]
struct PluginArgs {
    /// Load this component (repeatable).
    #[arg(long = "plugin", value_name = "FILE", global = true)]
    plugins: Vec<PathBuf>,
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
}

#[derive(Subcommand)]
enum Command {
    /// List the tools (name, side effect, title).
    List {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Print one tool's descriptor as JSON.
    Describe { tool: String },
    /// Call a tool and print the observation as JSON.
    Call(CallArgs),
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
    /// Wall-clock limit (default: the tool's own).
    #[arg(long, value_name = "N")]
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
    /// Call id to record (default: generated).
    #[arg(long)]
    call_id: Option<String>,
    /// Pretty-print the observation.
    #[arg(long)]
    pretty: bool,
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("toolhost: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> Result<ExitCode> {
    let config = SandboxConfig {
        cache_dir: if cli.plugins.no_cache {
            None
        } else {
            cli.plugins
                .cache_dir
                .clone()
                .or_else(toolhost::sandbox::CompileCache::default_dir)
        },
        ..SandboxConfig::default()
    };
    let sandbox = Sandbox::new(&config).context("starting the sandbox")?;
    match cli.command {
        Command::Lint { plugin, json } => lint(&sandbox, plugin, json),
        Command::List { json } => {
            let host = load(sandbox, &cli.plugins)?;
            list(&host, json)
        }
        Command::Describe { tool } => {
            let host = load(sandbox, &cli.plugins)?;
            let Some(t) = host.catalog().get(&tool) else {
                bail!("no tool named `{tool}` (try `toolhost list`)");
            };
            let mut out = serde_json::to_value(&t.descriptor)?;
            out["plugin"] = serde_json::Value::String(t.plugin_name.clone());
            out["lint"] = serde_json::to_value(&t.report)?;
            println!("{}", serde_json::to_string_pretty(&out)?);
            Ok(ExitCode::SUCCESS)
        }
        Command::Call(args) => {
            let host = load(sandbox, &cli.plugins)?;
            call(&host, args)
        }
    }
}

fn sources(p: &PluginArgs) -> Result<Vec<Source>> {
    let mut sources = Vec::new();
    if !p.no_builtin {
        sources.push(Source::reference());
    }
    if let Some(dir) = &p.plugins_dir {
        sources.extend(Source::dir(dir).with_context(|| format!("reading {}", dir.display()))?);
    }
    sources.extend(p.plugins.iter().cloned().map(Source::File));
    Ok(sources)
}

fn load(sandbox: Sandbox, p: &PluginArgs) -> Result<Host> {
    let catalog = Catalog::load(&sandbox, &sources(p)?, &show_progress);
    for problem in catalog.problems() {
        eprintln!("toolhost: warning: {problem}");
    }
    Ok(Host::new(sandbox, catalog))
}

fn show_progress(plugin: &str, event: LoadEvent) {
    match event {
        LoadEvent::Compiling { bytes } => eprintln!(
            "toolhost: compiling {plugin} ({:.1} MB); the result is cached for the next start",
            bytes as f64 / 1e6
        ),
        LoadEvent::Compiled { elapsed } => {
            eprintln!(
                "toolhost: compiled {plugin} in {:.2} s",
                elapsed.as_secs_f64()
            )
        }
        LoadEvent::CacheCorrupt => {
            eprintln!("toolhost: discarded a damaged cache entry for {plugin}; recompiling")
        }
        LoadEvent::CacheHit => {}
    }
}

fn list(host: &Host, json: bool) -> Result<ExitCode> {
    if json {
        let tools: Vec<_> = host
            .catalog()
            .tools()
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
        println!("{}", serde_json::to_string_pretty(&tools)?);
    } else {
        let mut out = std::io::stdout().lock();
        for t in host.catalog().tools() {
            writeln!(
                out,
                "{:<20} {:<13} {}",
                t.descriptor.name,
                t.descriptor.side_effect.as_str(),
                t.descriptor.title.as_deref().unwrap_or("")
            )?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn call(host: &Host, a: CallArgs) -> Result<ExitCode> {
    let args = if a.args == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .context("reading arguments from stdin")?;
        s
    } else {
        a.args.clone()
    };
    let workspace = Workspace::open(&a.workspace)
        .with_context(|| format!("opening workspace {}", a.workspace.display()))?;
    let read: Vec<&str> = a.allow_read.iter().map(String::as_str).collect();
    let write: Vec<&str> = a.allow_write.iter().map(String::as_str).collect();
    let grants =
        Grants::new(&workspace, &read, &write).context("checking --allow-read/--allow-write")?;
    let opts = CallOptions {
        call_id: a.call_id.clone(),
        timeout_ms: a.timeout_ms,
        fuel: a.fuel,
        memory_mb: a.memory_mb,
        max_output_bytes: a.max_output_bytes,
        max_text_bytes: None,
    };
    let scope = Scope {
        workspace: &workspace,
        grants: &grants,
    };
    let obs = host.call(&a.tool, &args, &scope, &opts);
    let text = if a.pretty || std::io::stdout().is_terminal() {
        serde_json::to_string_pretty(&obs)?
    } else {
        serde_json::to_string(&obs)?
    };
    println!("{text}");
    Ok(ExitCode::from(match obs.status {
        Status::Ok => 0,
        Status::Error => 1,
        Status::Denied => 3,
        Status::Unknown | Status::Partial => 4,
    }))
}

fn lint(sandbox: &Sandbox, plugin: PathBuf, json: bool) -> Result<ExitCode> {
    let source = Source::File(plugin.clone());
    let inspected = catalog::inspect(sandbox, &source, &|e| show_progress(&source.name(), e))
        .map_err(|e| anyhow::anyhow!("{}: {e}", plugin.display()))?;
    let names: Vec<(String, toolhost::descriptor::ToolDescriptor)> = inspected
        .descriptors
        .iter()
        .filter_map(|d| d.as_ref().ok())
        .map(|d| (source.name(), d.clone()))
        .collect();
    let catalog_report = toolhost::lint::lint_catalog(&names);
    let refused = inspected.reports.iter().any(|r| r.refused) || catalog_report.has_errors();
    if json {
        let out = serde_json::json!({ "plugin": source.name(), "tools": inspected.reports, "catalog": catalog_report });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        for r in &inspected.reports {
            println!("{r}");
        }
        print!("{catalog_report}");
    }
    Ok(if refused {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
