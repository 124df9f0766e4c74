//! `toolhost cap`: minting, attenuating, inspecting, revoking and listing
//! capability tokens (part of the `toolhost` binary; the tokens themselves
//! are `toolhost::policy::capability`).
//!
//! ```text
//! toolhost cap mint [--tool T] [--read P] [--write P] [--ask-write P] [--net O] [--fuel N] [--max-calls N] [--expires WHEN] [--audience DIR] [--delegate] [--self-approve]
//! toolhost cap mint --console [--expires WHEN]
//! toolhost cap attenuate TOKEN [same caveat flags: each can only narrow]
//! toolhost cap inspect TOKEN
//! toolhost cap revoke TOKEN|ID
//! toolhost cap list
//! ```
//!
//! `mint` needs the root key; `attenuate` needs no key. Tokens minted or
//! attenuated with the host's record store named are listed by `cap list`
//! with their calls, and `revoke` takes effect in every process sharing
//! that store within a second.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};

use toolhost::policy::capability::TokenId;
use toolhost::{Caveat, Token};

use crate::{default_store_file, emit, open_store, root_key, root_ring, PluginArgs};

/// Caveats, as flags (each repeatable).
#[derive(Args, Default)]
pub(crate) struct CaveatArgs {
    /// Tools the token may call: a name (`file_view`, `ns.view`), a prefix
    /// ending in `_` or `.` then `*` (`file_*`, `ns.*`), or `*`.
    #[arg(long = "tool", value_name = "NAME")]
    tools: Vec<String>,
    /// Rights: read, write, net, exec, delegate, secrets (implied by
    /// --read/--write/--net/--exec/--secrets when minting), metrics (read
    /// the HTTP server's /metrics); console only through `--console`.
    #[arg(long = "right", value_name = "RIGHT")]
    rights: Vec<String>,
    /// Mint with the `secrets` right: outputs are not redacted and a network
    /// tool's arguments may carry a secret.
    #[arg(long)]
    secrets: bool,
    /// A workspace path prefix the token may read.
    #[arg(long = "read", value_name = "PREFIX")]
    read: Vec<String>,
    /// A workspace path prefix the token may write (and read).
    #[arg(long = "write", value_name = "PREFIX")]
    write: Vec<String>,
    /// A workspace path prefix the token may write once a person approved
    /// the call (needs the write right; repeatable).
    #[arg(long = "ask-write", value_name = "PREFIX")]
    ask_write: Vec<String>,
    /// A network origin, scheme://host:port.
    #[arg(long = "net", value_name = "ORIGIN")]
    net: Vec<String>,
    /// A native program the token may run: a name looked up on the host's
    /// PATH, or an absolute path.
    #[arg(long = "exec", value_name = "PROGRAM")]
    exec: Vec<String>,
    /// Fuel ceiling per call.
    #[arg(long, value_name = "N")]
    fuel: Option<u64>,
    /// Calls the token and every token derived from it may make together
    /// (counted in the record store).
    #[arg(long, value_name = "N")]
    max_calls: Option<u64>,
    /// Fuel the calls of the token and every token derived from it may
    /// consume together (counted in the record store).
    #[arg(long, value_name = "N")]
    budget_fuel: Option<u64>,
    /// Expiry: a duration from now (30s, 10m, 2h) or an RFC 3339 time.
    #[arg(long, value_name = "WHEN")]
    expires: Option<String>,
    /// A workspace the token is for (repeatable): a host serving another
    /// workspace refuses it, even with the same root key.
    #[arg(long = "audience", value_name = "DIR")]
    audience: Vec<PathBuf>,
}

impl CaveatArgs {
    /// Whether the flags grant or budget anything (every flag but
    /// `--expires` and `--audience`).
    fn grants_any(&self) -> bool {
        !(self.tools.is_empty()
            && self.rights.is_empty()
            && !self.secrets
            && self.read.is_empty()
            && self.write.is_empty()
            && self.ask_write.is_empty()
            && self.net.is_empty()
            && self.exec.is_empty()
            && self.fuel.is_none()
            && self.max_calls.is_none()
            && self.budget_fuel.is_none())
    }

    /// The caveats these flags name. `imply_rights` adds the rights the
    /// prefixes and origins need (for minting).
    pub(crate) fn caveats(&self, imply_rights: bool) -> Result<Vec<Caveat>> {
        let now = std::time::SystemTime::now();
        // One flag, one value: a comma would silently split it in two (the
        // caveat syntax separates list values with commas).
        for (flag, values) in [
            ("--tool", &self.tools),
            ("--right", &self.rights),
            ("--read", &self.read),
            ("--write", &self.write),
            ("--ask-write", &self.ask_write),
            ("--net", &self.net),
            ("--exec", &self.exec),
        ] {
            if let Some(v) = values.iter().find(|v| v.contains(',')) {
                bail!(
                    "{flag} `{v}`: one value per flag, without commas (repeat {flag} for several; a path with a comma in its name cannot be granted)"
                );
            }
        }
        let mut texts = Vec::new();
        if !self.tools.is_empty() {
            texts.push(format!("tool={}", self.tools.join(",")));
        }
        let mut rights = self.rights.clone();
        if imply_rights && rights.iter().any(|r| r == "console") {
            bail!("the console right is minted alone, with --console");
        }
        if imply_rights {
            if !self.read.is_empty() || !self.write.is_empty() || !self.ask_write.is_empty() {
                rights.push("read".into());
            }
            if !self.write.is_empty() || !self.ask_write.is_empty() {
                rights.push("write".into());
            }
            if !self.net.is_empty() {
                rights.push("net".into());
            }
            if !self.exec.is_empty() {
                rights.push("exec".into());
            }
            if self.secrets {
                rights.push("secrets".into());
            }
            rights.dedup();
        } else if self.secrets {
            bail!("--secrets grants the right and attenuation can only drop rights; list the rights to keep with --right");
        }
        if !rights.is_empty() {
            texts.push(format!("right={}", rights.join(",")));
        }
        if !self.read.is_empty() {
            texts.push(format!("read={}", self.read.join(",")));
        }
        if !self.write.is_empty() {
            texts.push(format!("write={}", self.write.join(",")));
        }
        if !self.ask_write.is_empty() {
            texts.push(format!("ask_write={}", self.ask_write.join(",")));
        }
        if !self.net.is_empty() {
            texts.push(format!("net={}", self.net.join(",")));
        }
        if !self.exec.is_empty() {
            texts.push(format!("exec={}", self.exec.join(",")));
        }
        if let Some(f) = self.fuel {
            texts.push(format!("fuel={f}"));
        }
        if let Some(m) = self.max_calls {
            texts.push(format!("max_calls={m}"));
        }
        if let Some(f) = self.budget_fuel {
            texts.push(format!("budget_fuel={f}"));
        }
        if let Some(e) = &self.expires {
            texts.push(format!("expires={e}"));
        }
        if !self.audience.is_empty() {
            let dirs = self
                .audience
                .iter()
                .map(|d| {
                    let canon = d
                        .canonicalize()
                        .with_context(|| format!("--audience {}", d.display()))?;
                    if !canon.is_dir() {
                        bail!("--audience {}: not a directory", d.display());
                    }
                    canon
                        .to_str()
                        .map(str::to_owned)
                        .with_context(|| format!("--audience {}: not UTF-8", d.display()))
                })
                .collect::<Result<Vec<_>>>()?;
            texts.push(format!("aud={}", dirs.join(",")));
        }
        texts
            .iter()
            .map(|t| Caveat::parse_at(t, now).with_context(|| format!("caveat `{t}`")))
            .collect()
    }
}

#[derive(Subcommand)]
pub(crate) enum CapCommand {
    /// Mint a token (needs the root key); prints the token alone.
    Mint {
        #[command(flatten)]
        caveats: CaveatArgs,
        /// Grant the `delegate` right: the token's MCP sessions get the
        /// `delegate` tool.
        #[arg(long)]
        delegate: bool,
        /// Grant the `self_approve` right: the holder approves its own
        /// plans of irreversible calls (and of `--ask-write` writes) with
        /// the plan token of its own dry run, no person asked. For
        /// unattended pipelines; without it such calls wait for
        /// `toolhost approvals approve`.
        #[arg(long)]
        self_approve: bool,
        /// Grant the `script` right: the holder may call `run_script`,
        /// whose inner tool calls run under this same token.
        #[arg(long)]
        script: bool,
        /// Mint a console token: the `console` right alone, which opens
        /// the operator's console of `serve --http --console` and calls no
        /// tool (only --expires and --audience may go with it).
        #[arg(long)]
        console: bool,
    },
    /// Narrow a token by appending caveats (no key needed); prints the
    /// token. The child gets an id of its own (an `id` caveat).
    Attenuate {
        token: String,
        #[command(flatten)]
        caveats: CaveatArgs,
    },
    /// Decode a token's caveats; with the root key, say whether it verifies.
    Inspect { token: String },
    /// Revoke a token (or the token id from `cap list` / `cap inspect`) and
    /// every token derived from it; calls see it within a second.
    Revoke {
        /// A token, or a token id (32 hex digits).
        token_or_id: String,
    },
    /// The tokens minted, attenuated or delegated through this host's
    /// record store (`cap mint`/`cap attenuate` with the same `--store`, or
    /// the MCP `delegate` tool), with their calls and state.
    List,
}

/// Runs one `toolhost cap` subcommand.
pub(crate) fn run(cmd: &CapCommand, p: &PluginArgs) -> Result<ExitCode> {
    match cmd {
        CapCommand::Mint {
            caveats: flags,
            delegate,
            self_approve,
            script,
            console,
        } => {
            if *console && (*delegate || *self_approve || *script || flags.grants_any()) {
                bail!("--console mints a token that opens the console and nothing else; only --expires and --audience may go with it");
            }
            let mut flags_rights = flags.caveats(true)?;
            if *console {
                add_right(
                    &mut flags_rights,
                    toolhost::policy::capability::Right::Console,
                );
            }
            if *delegate {
                add_right(
                    &mut flags_rights,
                    toolhost::policy::capability::Right::Delegate,
                );
            }
            if *self_approve {
                add_right(
                    &mut flags_rights,
                    toolhost::policy::capability::Right::SelfApprove,
                );
            }
            if *script {
                add_right(
                    &mut flags_rights,
                    toolhost::policy::capability::Right::Script,
                );
            }
            let mut caveats = flags_rights;
            if caveats.is_empty() {
                bail!("a token with no caveats grants nothing; give at least --tool");
            }
            // Budgets are counted, and revocations kept, in a record store:
            // the token is bound to it, so another (or a recreated) store
            // cannot forget them.
            let budgeted = caveats
                .iter()
                .any(|c| matches!(c, Caveat::MaxCalls(_) | Caveat::BudgetFuel(_)));
            if budgeted || store_named(p) {
                let id = ledger(p)
                    .and_then(|l| Ok(l.store_id()?))
                    .context("binding the token to its record store")?
                    .context("the record store keeps no id")?;
                caveats.push(Caveat::Store(id));
            }
            let token = Token::mint(&root_key(p)?, &caveats)?;
            record_issued(p, &token, toolhost::policy::budget::Issue::Mint);
            emit(token.encode())?;
        }
        CapCommand::Attenuate { token, caveats } => {
            let parent = Token::decode(token.trim()).context("decoding the token")?;
            let child = parent.delegate(&caveats.caveats(false)?)?;
            record_issued(p, &child, toolhost::policy::budget::Issue::Attenuate);
            emit(child.encode())?;
        }
        CapCommand::Revoke { token_or_id } => {
            let ledger = ledger(p)?;
            let (id, expires_at) = match token_or_id.trim().parse::<TokenId>() {
                Ok(id) => {
                    // Known here: the revocation lives as long as the token.
                    let expires = ledger
                        .issued(now_secs())?
                        .into_iter()
                        .find(|i| i.issued.id == id)
                        .and_then(|i| i.issued.expires_at);
                    (id, expires)
                }
                Err(_) => {
                    let t = Token::decode(token_or_id.trim())
                        .context("neither a token id (32 hex digits) nor a token")?;
                    let expires = t.grant_unverified().ok().and_then(|g| g.expires_at());
                    (t.token_id(), expires)
                }
            };
            let fresh = ledger.revoke(id, expires_at)?;
            emit(serde_json::to_string_pretty(&serde_json::json!({
                "revoked": id.to_string(),
                "already_revoked": !fresh,
                "until": expires_at,
                "staleness_ms": toolhost::policy::ledger::REVOCATION_STALENESS.as_millis() as u64,
            }))?)?;
        }
        CapCommand::List => {
            let list = ledger(p)?.issued(now_secs())?;
            emit(serde_json::to_string_pretty(&list)?)?;
        }
        CapCommand::Inspect { token } => {
            let t = Token::decode(token.trim()).context("decoding the token")?;
            let verified = match root_ring(p) {
                Ok(ring) => match ring.verify(&t, std::time::SystemTime::now()) {
                    Ok(_) => serde_json::json!({"valid": true}),
                    Err(e) => serde_json::json!({"valid": false, "error": e.to_string()}),
                },
                Err(e) => serde_json::json!({"valid": null, "error": format!("{e:#}")}),
            };
            let expires_at = t.grant_unverified().ok().and_then(|g| g.expires_at());
            let out = serde_json::json!({
                "key_id": t.key_id().to_string(),
                "token_id": t.id_hex(),
                "id": t.token_id().to_string(),
                "chain_ids": t.chain_ids().iter().map(|i| i.to_string()).collect::<Vec<_>>(),
                "caveats": t.caveats().iter().map(|c| c.to_string()).collect::<Vec<_>>(),
                "minted_caveats": t.minted_len(),
                // The earliest `expires` caveat, for a person (RFC 3339, UTC)
                // and for a program (Unix seconds, as in the caveat text).
                "expires": expires_at.map(toolhost::policy::capability::format_rfc3339),
                "expires_unix": expires_at,
                "verification": verified,
            });
            emit(serde_json::to_string_pretty(&out)?)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `right` added to the minted rights (or a rights caveat of its own when
/// the flags named none).
fn add_right(caveats: &mut Vec<Caveat>, right: toolhost::policy::capability::Right) {
    use toolhost::policy::capability::Rights;
    let delegate = Rights::of(&[right]);
    match caveats.iter_mut().find_map(|c| match c {
        Caveat::Rights(r) => Some(r),
        _ => None,
    }) {
        Some(r) => *r = r.union(delegate),
        None => caveats.push(Caveat::Rights(delegate)),
    }
}

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The capability ledger of the record store (budgets, revocations,
/// issued tokens).
fn ledger(p: &PluginArgs) -> Result<std::sync::Arc<dyn toolhost::policy::budget::BudgetLedger>> {
    open_store(p)?
        .capability_ledger()
        .context("the record store keeps no capability ledger")
}

/// Whether this command names the host's store: `--store` (or
/// `TOOLHOST_STORE`), or the default store (beside `--key-file`, else in
/// the state directory) when it exists.
fn store_named(p: &PluginArgs) -> bool {
    p.store.is_some() || default_store_file(p).is_ok_and(|f| f.exists())
}

/// Notes a minted or attenuated token in the store's ledger for `cap list`
/// when this command names the host's store: `--store` (or
/// `TOOLHOST_STORE`), or the default store when it exists and no other key
/// file is named. A store that cannot be opened is a warning, not a
/// failure.
fn record_issued(p: &PluginArgs, token: &Token, via: toolhost::policy::budget::Issue) {
    if !store_named(p) {
        return;
    }
    let issued = toolhost::policy::budget::Issued {
        id: token.token_id(),
        parent: token.parent_id(),
        via,
        caveats: token
            .caveats()
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; "),
        issued_at: now_secs(),
        expires_at: token.grant_unverified().ok().and_then(|g| g.expires_at()),
    };
    if let Err(e) = ledger(p).and_then(|l| Ok(l.record_issued(&issued)?)) {
        eprintln!("toolhost: warning: the token is not listed by `cap list`: {e:#}");
    }
}
