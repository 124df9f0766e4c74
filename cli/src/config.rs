//! `toolhost.toml`: the command line's settings in a file.
//!
//! A server started by an MCP client carries its grants, plugins, store,
//! limits and policies in the client's JSON; a file is easier to read,
//! review and share. Which file is read:
//!
//! - `--config FILE` (or `TOOLHOST_CONFIG`), when the user names one;
//! - else the user's own `$XDG_CONFIG_HOME/toolhost/config.toml` (default
//!   `~/.config/toolhost/config.toml`), when it exists;
//! - else none. A `toolhost.toml` in the workspace (or the current
//!   directory) is never read implicitly: a repository the user opens does
//!   not get to configure its own sandbox. When one is there and not named,
//!   one line on stderr says it was not read.
//!
//! A file that lies inside the workspace (the one the command line names,
//! else the current directory, or the one the file itself names) is a
//! *workspace file*, even when it is named. It may only set the keys in
//! [`WORKSPACE_KEYS`], which tighten policy or change presentation; a key
//! that grants authority (grants, limits, tokens, listening, delegation) or
//! moves a trusted path (root key, store, cache, artifacts, locks, plugins,
//! signers, the journal) is refused with an error naming it, and its
//! `workspace` may only narrow the command line's. The user's own file is
//! never a workspace file.
//!
//! Keys are the long flags with `_` for `-` (`allow_read = ["src"]`,
//! `workspace = "."`, `timeout_ms = 5000`, `require_lock = true`):
//!
//! - the global options apply to every command; the options of `call`,
//!   `plan`, `batch` and `serve` apply to those that have them (a key of
//!   `serve` is ignored by `call`);
//! - a flag on the command line, or its environment variable, wins over the
//!   file (a repeatable flag given once replaces the file's whole list, and
//!   a setting that conflicts with a flag given, like the file's grants with
//!   `--token`, is left out);
//! - a key that is no such flag is an error naming the keys there are;
//! - paths (`workspace`, `plugin`, `plugins_dir`, `store`, `key_file`, …)
//!   are relative to the file's directory (`plugin = ["fs=plugins/a.wasm"]`
//!   loads `a.wasm` under the namespace `fs`, see `toolhost::toolname`); grants (`allow_read`,
//!   `allow_write`) are relative to the workspace, as on the command line.
//!
//! The file is turned into the flags it stands for and the command line is
//! parsed again with them, so a value in the file is checked exactly as the
//! same flag would be.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use clap::parser::ValueSource;
use clap::{ArgMatches, CommandFactory, FromArgMatches};

/// The file name a project keeps its settings in. It is read only when
/// named; one found in the workspace unnamed is reported, not read.
pub const FILE_NAME: &str = "toolhost.toml";

/// The only keys a workspace file may set: each tightens policy or changes
/// presentation, none grants authority or moves a trusted path. `workspace`
/// is also accepted when it lies inside the command line's workspace.
pub const WORKSPACE_KEYS: [&str; 9] = [
    "workspace",
    "no_builtin",
    "no_cache",
    "require_lock",
    "require_signature",
    "strict_descriptions",
    "require_token",
    "lazy_tools",
    "page_size",
];

/// The subcommands whose own options may be set in the file.
const COMMANDS: [&str; 4] = ["call", "plan", "batch", "serve"];

/// Keys that name paths, resolved against the file's directory.
const PATH_KEYS: [&str; 10] = [
    "workspace",
    "plugin",
    "plugins_dir",
    "cache_dir",
    "key_file",
    "store",
    "lock",
    "trusted_signers",
    "lock_dir",
    "artifact_dir",
];

/// Flags that are not settings: the file's own, and those that name one
/// call or its output format.
const NOT_SETTINGS: [&str; 11] = [
    "config",
    "help",
    "version",
    "call_id",
    "trajectory",
    "turn",
    "idempotency_key",
    "plan_token",
    "approval",
    "json",
    "pretty",
];

/// Why the file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: not valid TOML: {message}")]
    Toml { path: String, message: String },
    #[error(
        "{path}: unknown key `{key}`{hint}; the keys are the long flags with `_` for `-`: {known}"
    )]
    UnknownKey {
        path: String,
        key: String,
        hint: String,
        known: String,
    },
    #[error("{path}: `{key}`: {message}")]
    BadValue {
        path: String,
        key: String,
        message: String,
    },
    #[error(
        "{path} lies inside the workspace {workspace}, so it may not set {keys}: \
         a workspace's own file may not grant access or move the key, store, \
         cache, artifacts, locks or plugins. Give these on the command line \
         or in your own {user_file}; a workspace file may set only {allowed}"
    )]
    NotFromWorkspace {
        path: String,
        workspace: String,
        keys: String,
        user_file: String,
        allowed: String,
    },
    #[error(
        "{path} lies inside the workspace {workspace}, so its `workspace` \
         may only narrow it, not name {named}"
    )]
    WidensWorkspace {
        path: String,
        workspace: String,
        named: String,
    },
}

/// Parses the command line with the settings of the config file in effect
/// added. Exits like clap on a usage error, and with status 2 and the
/// reason on a config error.
pub fn parse<T: CommandFactory + FromArgMatches>() -> T {
    let argv: Vec<OsString> = std::env::args_os().collect();
    match with_config::<T>(argv) {
        Ok(t) => t,
        Err(Exit::Clap(e, file)) => {
            if let Some(file) = file {
                eprintln!("toolhost: (with the settings of {})", file.display());
            }
            e.exit()
        }
        Err(Exit::Config(e)) => {
            eprintln!("toolhost: config {e}");
            std::process::exit(2)
        }
    }
}

enum Exit {
    Clap(clap::Error, Option<PathBuf>),
    Config(ConfigError),
}

fn with_config<T: CommandFactory + FromArgMatches>(argv: Vec<OsString>) -> Result<T, Exit> {
    let cmd = T::command();
    let matches = cmd
        .clone()
        .try_get_matches_from(&argv)
        .map_err(|e| Exit::Clap(e, None))?;
    let parse = |m: &ArgMatches| T::from_arg_matches(m).map_err(|e| Exit::Clap(e, None));
    let (names, deepest) = subcommand_path(&matches);
    let workspace = given_workspace(deepest);
    let found = find(&matches);
    report_unread(&workspace, found.as_ref());
    let Some(found) = found else {
        return parse(&matches);
    };
    let file = found.path.clone();
    let extra = flags(&cmd, &names, deepest, &found, &workspace).map_err(Exit::Config)?;
    if names.first().map(String::as_str) == Some("serve") {
        eprintln!("toolhost: settings from {}", file.display());
    }
    if extra.is_empty() {
        return parse(&matches);
    }
    let mut argv = argv;
    let at = argv.iter().position(|a| a == "--").unwrap_or(argv.len());
    argv.splice(at..at, extra);
    let matches = cmd
        .try_get_matches_from(&argv)
        .map_err(|e| Exit::Clap(e, Some(file.clone())))?;
    T::from_arg_matches(&matches).map_err(|e| Exit::Clap(e, Some(file)))
}

/// The subcommand names in use (`["plugin", "lock"]`) and the matches of
/// the innermost one.
fn subcommand_path(matches: &ArgMatches) -> (Vec<String>, &ArgMatches) {
    let mut names = Vec::new();
    let mut m = matches;
    while let Some((name, sub)) = m.subcommand() {
        names.push(name.to_string());
        m = sub;
    }
    (names, m)
}

/// Where the file in effect came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Origin {
    /// `--config` or `TOOLHOST_CONFIG`.
    Named,
    /// The user's own config directory.
    User,
}

/// The config file in effect.
#[derive(Debug, Clone)]
struct Found {
    path: PathBuf,
    origin: Origin,
}

/// The config file in effect, if any: the one named, else the user's own.
fn find(top: &ArgMatches) -> Option<Found> {
    if let Ok(Some(path)) = top.try_get_one::<PathBuf>("config") {
        return Some(Found {
            path: path.clone(),
            origin: Origin::Named,
        });
    }
    let path = user_file()?;
    path.is_file().then_some(Found {
        path,
        origin: Origin::User,
    })
}

/// The user's own file: `$XDG_CONFIG_HOME/toolhost/config.toml`, else
/// `~/.config/toolhost/config.toml`.
pub fn user_file() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    Some(base.join("toolhost").join("config.toml"))
}

/// The workspace the command line gives (`--workspace`), else the current
/// directory.
fn given_workspace(deepest: &ArgMatches) -> PathBuf {
    match deepest.try_get_one::<PathBuf>("workspace") {
        Ok(Some(ws)) if deepest.value_source("workspace") == Some(ValueSource::CommandLine) => {
            ws.clone()
        }
        _ => PathBuf::from("."),
    }
}

/// One line on stderr when the workspace holds a `toolhost.toml` that is
/// not the file in effect: it was not read.
fn report_unread(workspace: &Path, found: Option<&Found>) {
    let there = workspace.join(FILE_NAME);
    if !there.is_file() {
        return;
    }
    if found.is_some_and(|f| same_file(&f.path, &there)) {
        return;
    }
    eprintln!(
        "toolhost: not reading {}: a workspace's own {FILE_NAME} is read only when \
         named (--config FILE or TOOLHOST_CONFIG), and even then may not grant access",
        there.display()
    );
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// Whether `path` lies inside (or is) `dir`.
fn inside(path: &Path, dir: &Path) -> bool {
    // An empty path (the parent of a bare file name) is the current
    // directory.
    let real = |p: &Path| {
        toolhost::paths::real_path_of(if p.as_os_str().is_empty() {
            Path::new(".")
        } else {
            p
        })
    };
    real(path).starts_with(real(dir))
}

/// The flags the file stands for, for the command `names`, leaving out
/// those given on the command line or in the environment.
fn flags(
    cmd: &clap::Command,
    names: &[String],
    deepest: &ArgMatches,
    found: &Found,
    workspace: &Path,
) -> Result<Vec<OsString>, ConfigError> {
    let file = found.path.as_path();
    let shown = file.display().to_string();
    let text = std::fs::read_to_string(file).map_err(|source| ConfigError::Read {
        path: shown.clone(),
        source,
    })?;
    let table: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| ConfigError::Toml {
            path: shown.clone(),
            message: e.message().to_string(),
        })?;
    let base = file.parent().unwrap_or(Path::new("."));
    check_workspace_file(&table, found, base, workspace)?;
    let current = names
        .first()
        .filter(|n| COMMANDS.contains(&n.as_str()))
        .and_then(|n| cmd.find_subcommand(n));
    let mut out = Vec::new();
    for (key, value) in &table {
        // One spelling: `allow_read`, never `allow-read`.
        if key.contains('-') || NOT_SETTINGS.contains(&key.as_str()) {
            return Err(unknown(cmd, &shown, key));
        }
        let long = key.replace('_', "-");
        let global = cmd
            .get_arguments()
            .find(|a| a.get_long() == Some(long.as_str()));
        let arg = match global {
            Some(a) => a,
            None => {
                let own = current.and_then(|c| {
                    c.get_arguments()
                        .find(|a| a.get_long() == Some(long.as_str()))
                });
                match own {
                    Some(a) => a,
                    None if known_keys(cmd).contains(key) => continue,
                    None => return Err(unknown(cmd, &shown, key)),
                }
            }
        };
        let id = arg.get_id().as_str();
        let given = |id: &str| {
            matches!(
                deepest.value_source(id),
                Some(ValueSource::CommandLine | ValueSource::EnvVariable)
            )
        };
        if given(id) {
            continue;
        }
        // A setting that conflicts with a flag given (the file's grants
        // when the command line says `--token`) gives way to it.
        if let Some(c) = current {
            let conflicts = |a: &clap::Arg, b: &clap::Arg| {
                c.get_arg_conflicts_with(a)
                    .iter()
                    .any(|x| x.get_id() == b.get_id())
            };
            if c.get_arguments().any(|a| a.get_id() == arg.get_id())
                && c.get_arguments().any(|other| {
                    given(other.get_id().as_str())
                        && (conflicts(arg, other) || conflicts(other, arg))
                })
            {
                continue;
            }
        }
        let bad = |message: String| ConfigError::BadValue {
            path: shown.clone(),
            key: key.clone(),
            message,
        };
        let flag = OsString::from(format!("--{long}"));
        if !arg.get_action().takes_values() {
            match value {
                toml::Value::Boolean(true) => out.push(flag),
                toml::Value::Boolean(false) => {}
                other => return Err(bad(format!("true or false, not {other}"))),
            }
            continue;
        }
        let values: Vec<&toml::Value> = match value {
            toml::Value::Array(items) => {
                if !matches!(arg.get_action(), clap::ArgAction::Append) {
                    return Err(bad("takes one value, not a list".into()));
                }
                items.iter().collect()
            }
            v => vec![v],
        };
        for v in values {
            let text = match v {
                toml::Value::String(s) => s.clone(),
                toml::Value::Integer(i) => i.to_string(),
                toml::Value::Float(f) => f.to_string(),
                toml::Value::Boolean(b) => b.to_string(),
                other => return Err(bad(format!("a string or a number, not {other}"))),
            };
            let text = if key == "plugin" {
                // `NS=PATH`: the path is relative to the file, the namespace
                // stays (a bad one is refused by the flag's own parser).
                match text.parse::<toolhost::toolname::PluginSpec>() {
                    Ok(spec) => toolhost::toolname::PluginSpec {
                        path: base.join(&spec.path),
                        ..spec
                    }
                    .to_string(),
                    Err(_) => text,
                }
            } else if PATH_KEYS.contains(&key.as_str()) && !text.contains("://") {
                base.join(&text).display().to_string()
            } else {
                text
            };
            out.push(flag.clone());
            out.push(OsString::from(text));
        }
    }
    Ok(out)
}

/// Refuses a workspace file's keys that grant authority or move a trusted
/// path, and a `workspace` of its own that reaches outside the command
/// line's.
fn check_workspace_file(
    table: &toml::Table,
    found: &Found,
    base: &Path,
    workspace: &Path,
) -> Result<(), ConfigError> {
    if found.origin == Origin::User {
        return Ok(());
    }
    let own = table
        .get("workspace")
        .and_then(toml::Value::as_str)
        .map(|w| base.join(w));
    let mut within = vec![workspace.to_path_buf()];
    within.extend(own.clone());
    let Some(ws) = within.iter().find(|w| inside(base, w)) else {
        return Ok(());
    };
    let shown = found.path.display().to_string();
    let refused: Vec<String> = table
        .keys()
        .filter(|k| !WORKSPACE_KEYS.contains(&k.as_str()))
        .map(|k| format!("`{k}`"))
        .collect();
    if !refused.is_empty() {
        return Err(ConfigError::NotFromWorkspace {
            path: shown,
            workspace: toolhost::paths::real_path_of(ws).display().to_string(),
            keys: refused.join(", "),
            user_file: user_file()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| "config file".into()),
            allowed: WORKSPACE_KEYS.join(", "),
        });
    }
    if let Some(own) = own {
        if !inside(&own, workspace) {
            return Err(ConfigError::WidensWorkspace {
                path: shown,
                workspace: toolhost::paths::real_path_of(workspace)
                    .display()
                    .to_string(),
                named: toolhost::paths::real_path_of(&own).display().to_string(),
            });
        }
    }
    Ok(())
}

/// Every key the file may hold.
fn known_keys(cmd: &clap::Command) -> BTreeSet<String> {
    let mut keys = BTreeSet::new();
    let mut add = |c: &clap::Command| {
        for a in c.get_arguments() {
            if let Some(long) = a.get_long() {
                let key = long.replace('-', "_");
                if !NOT_SETTINGS.contains(&key.as_str()) {
                    keys.insert(key);
                }
            }
        }
    };
    add(cmd);
    for name in COMMANDS {
        if let Some(sub) = cmd.find_subcommand(name) {
            add(sub);
        }
    }
    keys
}

fn unknown(cmd: &clap::Command, path: &str, key: &str) -> ConfigError {
    let known = known_keys(cmd);
    let alt = key.replace('-', "_");
    let hint = if key.contains('-') && known.contains(&alt) {
        format!(" (did you mean `{alt}`?)")
    } else if let Some(close) = known
        .iter()
        .find(|k| k.starts_with(key) || key.starts_with(k.as_str()))
    {
        format!(" (did you mean `{close}`?)")
    } else {
        String::new()
    };
    ConfigError::UnknownKey {
        path: path.to_string(),
        key: key.to_string(),
        hint,
        known: known.into_iter().collect::<Vec<_>>().join(", "),
    }
}
