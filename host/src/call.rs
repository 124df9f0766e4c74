//! The types of one call, below everything that runs it: the caller's
//! [`CallOptions`], the `Scope` a call may touch, a `Prepared` call
//! (steps 1–4 passed, ready for the sandbox), its limits and its id.
//!
//! The pipeline ([`crate::pipeline`]) makes them, the side-effect guard
//! ([`crate::effects`]) and the resource locks ([`crate::effects::resource`]) read
//! them; none of those import one another for these.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;

use crate::descriptor::SideEffect;
use crate::paths::GUEST_ROOT;
use crate::plugin::catalog::Tool;
use crate::sandbox::{CallRequest, CancelToken, Limits, Mount};

/// Largest argument text accepted, in bytes.
pub const MAX_ARGS_BYTES: usize = 256 * 1024;
/// Largest output a caller may allow, in bytes.
pub const HARD_MAX_OUTPUT_BYTES: usize = 16 << 20;
/// Default size of the model-facing `text`, in bytes.
pub const DEFAULT_TEXT_BYTES: usize = 16 * 1024;

/// Per-call overrides of a tool's default limits.
#[derive(Debug, Clone, Default)]
pub struct CallOptions {
    /// Caller-chosen call id; one is generated when absent.
    pub call_id: Option<String>,
    pub timeout_ms: Option<u64>,
    pub fuel: Option<u64>,
    pub memory_mb: Option<u64>,
    pub max_output_bytes: Option<usize>,
    /// Size of the observation's `text`; default [`DEFAULT_TEXT_BYTES`].
    pub max_text_bytes: Option<usize>,
    /// Where a side-effecting call's idempotency key comes from.
    pub idempotency: Option<KeySource>,
    /// The approval of an irreversible call: the `plan_token` of a
    /// [`Mode::Plan`] call.
    pub plan_token: Option<String>,
    /// The approval of a call a person approved ([`crate::effects::approval`]): the
    /// id an `approval_pending` result gave.
    pub approval: Option<String>,
    /// A person's answer that came back with a multi round-trip retry,
    /// under the request state the `input_required` result carried
    /// ([`crate::effects::approval::request_state`]).
    pub answer: Option<ApprovalAnswer>,
    /// Who a tool's questions go to ([`crate::ask`]); `None`: nobody can
    /// be asked.
    pub asker: Option<std::sync::Arc<dyn crate::ask::Asker>>,
    /// Who asks, for a pending approval's record: an MCP client's name and
    /// version, or `cli`.
    pub requested_by: Option<String>,
    /// The conversation the call belongs to (an MCP session): the circuit
    /// breaker counts its failures together ([`crate::record`]). Default:
    /// the trajectory of `idempotency`.
    pub conversation: Option<String>,
    /// The MCP URL the request came in on (`http://host:port/mcp`), for
    /// what the host's `delegate` tool tells a sub-agent.
    pub request_url: Option<String>,
    /// Where the call's inner tool calls go: set by the host for its
    /// script runner only ([`crate::script`]); a caller's value is
    /// ignored.
    pub script: Option<crate::sandbox::ScriptLink>,
}

/// A person's answer to an approval question, as a client sent it back
/// with the signed request state it was asked under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalAnswer {
    /// The `requestState` text, exactly as the host issued it.
    pub request_state: String,
    /// `Some(true)` approved, `Some(false)` declined, `None` nothing
    /// decided (cancelled, or no answer to the question).
    pub approve: Option<bool>,
    /// The person's note, kept in the journal.
    pub note: Option<String>,
    /// Who answered: the client's name and version and the channel.
    pub by: String,
}

/// Whether a call runs or is only planned (the tool's dry-run).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    #[default]
    Run,
    /// A dry-run whose output is a plan and a plan token that approves
    /// exactly this call.
    Plan,
}

/// One proposed call, as every caller (CLI, MCP, library, batch) hands it
/// to [`Host::run`](crate::pipeline::Host::run).
#[derive(Debug, Clone, Copy)]
pub struct Call<'a> {
    /// The tool's name.
    pub tool: &'a str,
    /// The arguments, JSON text as the caller sent it.
    pub args: &'a str,
    pub options: &'a CallOptions,
    pub mode: Mode,
    /// Cancelling it stops the running instance at its next epoch check.
    pub cancel: Option<&'a CancelToken>,
}

impl<'a> Call<'a> {
    /// A call to run, not cancellable.
    pub fn new(tool: &'a str, args: &'a str, options: &'a CallOptions) -> Call<'a> {
        Call {
            tool,
            args,
            options,
            mode: Mode::Run,
            cancel: None,
        }
    }

    /// The same call, planned instead of run.
    pub fn plan(self) -> Call<'a> {
        Call {
            mode: Mode::Plan,
            ..self
        }
    }

    /// The same call, stoppable with `cancel`.
    pub fn cancellable(self, cancel: &'a CancelToken) -> Call<'a> {
        Call {
            cancel: Some(cancel),
            ..self
        }
    }
}

/// A call that passed steps 1–4, ready for the sandbox.
pub(crate) struct Prepared<'t> {
    pub tool: &'t Tool,
    /// The call's effective side-effect level ([`effective_level`]): the
    /// tool's declared one, or read-only when its sandbox can change
    /// nothing.
    pub level: SideEffect,
    pub call_id: String,
    pub text_bytes: usize,
    /// The validated arguments, path arguments normalized.
    pub value: Value,
    /// `value` as the text the guest receives: its canonical form (JCS).
    pub args: String,
    pub mounts: Vec<Mount>,
    pub net: Vec<String>,
    /// The native programs the call may run, when its tool declares any
    /// (`needs.exec`).
    pub exec: Option<std::sync::Arc<crate::exec_call::CallExec>>,
    pub limits: Limits,
    /// The workspace root on the host.
    pub workspace_root: std::path::PathBuf,
    /// The caller holds the `secrets` right: no redaction, no argument check.
    pub secrets: bool,
    /// The files the call may take content from (its provenance).
    pub inputs: crate::provenance::Inputs,
    /// The binding of the capability token the call runs under, if any
    /// ([`crate::policy::capability::Token::binding`], hex): a plan is bound to it.
    pub capability: Option<String>,
    /// The token holds `self_approve`: its own plan tokens approve its
    /// calls.
    pub self_approve: bool,
    /// A path argument is written under an `ask_write` prefix, outside the
    /// token's `write` prefixes: the call needs an approval whatever its
    /// level.
    pub asks: bool,
    /// The ids of the token's chain, oldest first (hex).
    pub chain: Vec<String>,
    /// Who the tool's questions go to ([`crate::ask`]).
    pub asker: Option<std::sync::Arc<dyn crate::ask::Asker>>,
    /// Where the guest's inner tool calls go: the script runner's only
    /// ([`crate::script`]).
    pub script: Option<crate::sandbox::ScriptLink>,
}

impl Prepared<'_> {
    /// Whether the call runs only once approved: it is irreversible, or it
    /// writes under an `ask_write` prefix.
    pub(crate) fn needs_approval(&self) -> bool {
        self.level == SideEffect::Irreversible || self.asks
    }

    /// The request the sandbox runs for a prepared call.
    /// The call's arguments as a value (`Null` if their canonical text
    /// does not parse, which it always does).
    pub(crate) fn args_value(&self) -> serde_json::Value {
        serde_json::from_str(&self.args).unwrap_or(serde_json::Value::Null)
    }

    pub(crate) fn request<'p>(&'p self, key: Option<&'p str>) -> CallRequest<'p> {
        let p = self;
        CallRequest {
            // The plugin is called with the name it declared, not the
            // namespaced one ([`crate::toolname`]).
            tool: &p.tool.guest_name,
            args_json: &p.args,
            call_id: &p.call_id,
            workspace_root: GUEST_ROOT,
            idempotency_key: key,
            mounts: &p.mounts,
            net_origins: &p.net,
            exec: p.exec.clone(),
            limits: p.limits,
            reveal_secrets: p.secrets,
            asker: p.asker.clone(),
            script: p.script.clone(),
        }
    }
}

/// The side-effect level a call runs at: `read-only` when its sandbox has
/// no writable mount and no network (then nothing it does — Wasm or a
/// native program — can outlive the call: writes go nowhere, programs get
/// a private `/tmp` that dies with them), otherwise the tool's `declared`
/// level. A read-only call needs no idempotency key, no record and no
/// plan; the observation reports the effective level.
pub fn effective_level(declared: SideEffect, writable_mount: bool, network: bool) -> SideEffect {
    if writable_mount || network {
        declared
    } else {
        SideEffect::ReadOnly
    }
}

/// The limits of a call: the caller's overrides over the tool's defaults
/// over the host's.
pub(crate) fn limits_for(t: &Tool, opts: &CallOptions) -> Limits {
    let d = Limits::default();
    let tool_timeout = match t.descriptor.default_timeout_ms {
        0 => d.timeout,
        ms => Duration::from_millis(ms.into()),
    };
    let tool_output = match t.descriptor.max_output_bytes {
        0 => d.max_output_bytes,
        n => n as usize,
    };
    Limits {
        fuel: opts.fuel.unwrap_or(d.fuel),
        timeout: opts
            .timeout_ms
            .map(Duration::from_millis)
            .unwrap_or(tool_timeout),
        memory_bytes: opts
            .memory_mb
            .map(|mb| (mb as usize).saturating_mul(1 << 20))
            .unwrap_or(d.memory_bytes),
        max_output_bytes: opts
            .max_output_bytes
            .unwrap_or(tool_output)
            .min(HARD_MAX_OUTPUT_BYTES),
        spill_output_bytes: 0,
        max_log_bytes: d.max_log_bytes,
    }
}

/// Where a call's idempotency key comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    /// A key the caller chose.
    Explicit(String),
    /// Derived from the logical call: the same trajectory, turn, call id,
    /// tool and canonical arguments give the same key, also after a restart.
    Derived {
        trajectory_id: String,
        turn: u64,
        call_id: String,
    },
}

impl KeySource {
    /// The logical call this source names, as the journal records it: the
    /// same trajectory, turn and call id, or the same explicit key.
    pub fn logical_key(&self) -> String {
        match self {
            KeySource::Explicit(k) => format!("key:{k}"),
            KeySource::Derived {
                trajectory_id,
                turn,
                call_id,
            } => format!(
                "call:{}:{trajectory_id}:{turn}:{}:{call_id}",
                trajectory_id.len(),
                call_id.len()
            ),
        }
    }
}

/// A fresh call id: time-ordered and unique within the process.
pub fn new_call_id() -> String {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    format!(
        "call-{:x}-{:x}-{}",
        now.as_millis(),
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_that_can_change_nothing_runs_read_only() {
        use SideEffect::*;
        for declared in [ReadOnly, Idempotent, Reversible, Irreversible] {
            assert_eq!(effective_level(declared, false, false), ReadOnly);
            assert_eq!(effective_level(declared, true, false), declared);
            assert_eq!(effective_level(declared, false, true), declared);
            assert_eq!(effective_level(declared, true, true), declared);
        }
    }
}
