//! `toolhost approvals`: a person settles the calls that wait for approval
//! (part of the `toolhost` binary; the approvals themselves are
//! `toolhost::effects::approval`).
//!
//! ```text
//! toolhost approvals list [--all] [--json]
//! toolhost approvals show ID
//! toolhost approvals approve ID [--note TEXT]
//! toolhost approvals deny ID [--note TEXT]
//! ```
//!
//! The command opens the same record store as the host (`--store`, or the
//! default beside the root key). A decision names who made it (`cli:` and
//! `$USER`) and is written to the call journal, where `toolhost log` shows
//! it.

use std::io::IsTerminal;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::Subcommand;
use serde_json::{json, Value};

use toolhost::effects::approval::{self, Approval, Approvals, Decided};

use crate::{emit, open_store, PluginArgs};

#[derive(Subcommand)]
pub(crate) enum ApprovalsCommand {
    /// The approvals waiting for a person (with --all, every one kept).
    List {
        /// Also the decided, used and expired ones.
        #[arg(long)]
        all: bool,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// One approval in full: the call, its plan, its targets, its state.
    Show { id: String },
    /// Approve a pending call: the agent's retry with the id runs it once.
    Approve {
        id: String,
        /// A note kept with the decision.
        #[arg(long, value_name = "TEXT")]
        note: Option<String>,
    },
    /// Decline a pending call: the agent's retry gets `approval_declined`.
    Deny {
        id: String,
        /// Why, for the agent and the journal.
        #[arg(long, value_name = "TEXT")]
        note: Option<String>,
    },
}

/// Runs one `toolhost approvals` subcommand.
pub(crate) fn run(cmd: &ApprovalsCommand, p: &PluginArgs) -> Result<ExitCode> {
    let store = open_store(p)?;
    let backend = store
        .clone()
        .approvals()
        .context("the record store keeps no approvals")?;
    let approvals = Approvals::new(backend)
        .with_ttl(std::time::Duration::from_millis(p.approval_ttl_ms.max(1)))
        .with_journal(store.clone().journal());
    let now = approval::now_ms();
    match cmd {
        ApprovalsCommand::List { all, json } => {
            let list: Vec<Approval> = approvals
                .backend()?
                .list()?
                .into_iter()
                .filter(|a| *all || (a.state == approval::State::Pending && !a.expired(now)))
                .collect();
            if *json || !std::io::stdout().is_terminal() {
                let shown: Vec<Value> = list.iter().map(|a| shown(a, now)).collect();
                emit(serde_json::to_string_pretty(&shown)?)?;
            } else if list.is_empty() {
                emit("no approvals are waiting")?;
            } else {
                for a in &list {
                    emit(format!(
                        "{}  {:<8}  {}  {}  until {}",
                        a.id,
                        a.shown_state(now),
                        a.tool,
                        targets(a),
                        toolhost::policy::capability::format_rfc3339(a.expires_ms / 1000)
                    ))?;
                }
            }
        }
        ApprovalsCommand::Show { id } => {
            let a = find(&approvals, id)?;
            emit(serde_json::to_string_pretty(&shown(&a, now))?)?;
        }
        ApprovalsCommand::Approve { id, note } | ApprovalsCommand::Deny { id, note } => {
            let approve = matches!(cmd, ApprovalsCommand::Approve { .. });
            find(&approvals, id)?;
            let by = approval::cli_user();
            match approvals.decide(id.trim(), approve, &by, note.as_deref())? {
                Decided::Done(a) => {
                    emit(serde_json::to_string_pretty(&shown(
                        &a,
                        approval::now_ms(),
                    ))?)?;
                }
                Decided::NotFound => bail!("no approval `{id}` in this record store"),
                Decided::NotPending(a) => {
                    eprintln!(
                        "toolhost: approval {} is {}, not pending: nothing changed",
                        a.id,
                        a.shown_state(now)
                    );
                    return Ok(ExitCode::from(1));
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The approval `id`, or an error naming what is wrong with it.
fn find(approvals: &Approvals, id: &str) -> Result<Approval> {
    let id = id.trim();
    if !approval::is_id(id) {
        bail!("`{id}` is not an approval id (32 hex digits, from an `approval_pending` result)");
    }
    approvals.backend()?.get(id)?.with_context(|| {
        format!("no approval `{id}` in this record store (is --store the host's?)")
    })
}

/// What a person reads of an approval.
fn shown(a: &Approval, now: u64) -> Value {
    let mut v = serde_json::to_value(a).unwrap_or(Value::Null);
    if let Value::Object(o) = &mut v {
        o.insert("state".into(), json!(a.shown_state(now)));
        o.insert(
            "expires".into(),
            json!(toolhost::policy::capability::format_rfc3339(
                a.expires_ms / 1000
            )),
        );
        // The arguments as JSON, not as a string of it.
        if let Ok(args) = serde_json::from_str::<Value>(&a.args) {
            o.insert("args".into(), args);
        }
    }
    v
}

/// The target paths, comma-separated.
fn targets(a: &Approval) -> String {
    let paths: Vec<&str> = a
        .targets
        .as_array()
        .map(|t| t.iter().filter_map(|x| x["path"].as_str()).collect())
        .unwrap_or_default();
    if paths.is_empty() {
        "-".into()
    } else {
        paths.join(",")
    }
}
