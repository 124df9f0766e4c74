//! Dry-run and probe: the optional `planner` and `prober` exports of the
//! `plugin-with-effects` world.
//!
//! A plugin built with the Rust SDK exports both for every tool (a tool
//! without a dry-run answers `dry_run_unsupported`, one without a probe
//! answers `unknown`); a component that exports only `tools` loads and runs
//! exactly as before, and [`Plugin::dry_run`] and [`Plugin::probe`] answer
//! for it as for such a tool, without instantiating anything.
//!
//! Each dry-run or probe runs like a call: a fresh store and instance with
//! the request's mounts, network origins and [`Limits`](super::Limits)
//! (fuel, deadline, memory, output size), and every trap maps to the same
//! [`Failure`] as in [`Plugin::call`].

use std::time::Instant;

use wasmtime::component::Instance;
use wasmtime::Store;

use super::http::NetPolicy;
use super::{
    classify_trap, collect_logs, CallRequest, Failure, Logs, Plugin, State, ToolError, Usage,
};

use super::bindings::with_effects as bindings;
use bindings::exports::toolhost::plugin::{planner, prober};
use bindings::toolhost::plugin::types as wit;

/// The error code of a dry-run of a tool that cannot plan.
pub const DRY_RUN_UNSUPPORTED: &str = "dry_run_unsupported";

/// What a probe found out about a call whose outcome was unknown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeOutcome {
    /// The call took effect; the output JSON (still to be checked against
    /// the tool's output schema, like a call's).
    Done(String),
    /// The call did not take effect: retrying is safe.
    NotDone,
    /// The plugin cannot tell (or has no probe for this tool).
    Unknown,
}

/// How a dry-run or probe ended: the guest's answer or tool error, or a
/// [`Failure`] naming the limit or fault, as for a call.
#[derive(Debug, Clone)]
pub struct EffectOutcome<T> {
    pub result: Result<T, Failure>,
    pub usage: Usage,
    /// Captured output; the host's lines about refused network requests
    /// come first in `stderr`, as for a call.
    pub logs: Logs,
}

impl<T> EffectOutcome<T> {
    /// An answer the host gives itself, without running the guest.
    fn answered(result: T) -> Self {
        EffectOutcome {
            result: Ok(result),
            usage: Usage::default(),
            logs: Logs::default(),
        }
    }
}

impl Plugin {
    /// Whether the component exports both `planner` and `prober` (at this
    /// package version). One that exports only `tools` still loads and runs;
    /// its dry-runs fail with `dry_run_unsupported` and its probes answer
    /// [`ProbeOutcome::Unknown`].
    pub fn supports_effects(&self) -> bool {
        self.planner().is_some() && self.prober().is_some()
    }

    fn planner(&self) -> Option<planner::GuestIndices> {
        planner::GuestIndices::new(self.pre.instance_pre()).ok()
    }

    fn prober(&self) -> Option<prober::GuestIndices> {
        prober::GuestIndices::new(self.pre.instance_pre()).ok()
    }

    /// Plans `req` without performing it: the plugin's `dry-run` in a fresh
    /// instance with the same sandbox as [`Plugin::call`]. `Ok(Ok(plan))`
    /// carries the plan as JSON text (checked against `max_output_bytes`,
    /// not parsed); a tool (or plugin) without dry-run gives the tool error
    /// `dry_run_unsupported`.
    pub fn dry_run(&self, req: &CallRequest<'_>) -> EffectOutcome<Result<String, ToolError>> {
        let Some(indices) = self.planner() else {
            return EffectOutcome::answered(Err(ToolError {
                code: DRY_RUN_UNSUPPORTED.into(),
                message: format!(
                    "tool {:?} cannot plan a call without performing it: its plugin exports \
                     no planner",
                    req.tool
                ),
                field: None,
                correctable: false,
                details: None,
            }));
        };
        let mut outcome = self.run_effect(req, req.idempotency_key, |store, instance, ctx| {
            let planner = indices.load(&mut *store, instance)?;
            planner.call_dry_run(&mut *store, req.tool, req.args_json, ctx)
        });
        let result = outcome.result.and_then(|r| match r {
            Ok(plan) => within_limit(plan, req, &mut outcome.usage),
            Err(e) => Ok(Err(tool_error(e))),
        });
        EffectOutcome {
            result,
            usage: outcome.usage,
            logs: outcome.logs,
        }
    }

    /// Asks the plugin whether a call of `req` with idempotency key `key`
    /// took effect: its `probe` in a fresh instance with the same sandbox as
    /// [`Plugin::call`] (the context's key is `key`, whatever
    /// `req.idempotency_key` says). A tool (or plugin) without probe answers
    /// [`ProbeOutcome::Unknown`]. A `Done` output larger than
    /// `max_output_bytes` is [`Failure::OutputTooLarge`].
    pub fn probe(
        &self,
        req: &CallRequest<'_>,
        key: &str,
    ) -> EffectOutcome<Result<ProbeOutcome, ToolError>> {
        let Some(indices) = self.prober() else {
            return EffectOutcome::answered(Ok(ProbeOutcome::Unknown));
        };
        let mut outcome = self.run_effect(req, Some(key), |store, instance, ctx| {
            let prober = indices.load(&mut *store, instance)?;
            prober.call_probe(&mut *store, req.tool, req.args_json, key, ctx)
        });
        let result = outcome.result.and_then(|r| match r {
            Ok(prober::ProbeOutcome::Done(output)) => {
                Ok(within_limit(output, req, &mut outcome.usage)?.map(ProbeOutcome::Done))
            }
            Ok(prober::ProbeOutcome::NotDone) => Ok(Ok(ProbeOutcome::NotDone)),
            Ok(prober::ProbeOutcome::Unknown) => Ok(Ok(ProbeOutcome::Unknown)),
            Err(e) => Ok(Err(tool_error(e))),
        });
        EffectOutcome {
            result,
            usage: outcome.usage,
            logs: outcome.logs,
        }
    }

    /// Runs `run` on a fresh instance in a store built exactly as for a
    /// call, and measures it the same way.
    fn run_effect<T>(
        &self,
        req: &CallRequest<'_>,
        idempotency_key: Option<&str>,
        run: impl FnOnce(&mut Store<State>, &Instance, &wit::CallContext) -> wasmtime::Result<T>,
    ) -> EffectOutcome<T> {
        let start = Instant::now();
        let net = NetPolicy::new(req.net_origins, start + req.limits.timeout);
        let mut store = match self.new_store(req.mounts, net.clone(), &req.limits) {
            Ok(s) => s,
            Err(e) => {
                return EffectOutcome {
                    result: Err(Failure::Unavailable {
                        reason: format!("could not prepare the sandbox: {e}"),
                    }),
                    usage: Usage::default(),
                    logs: Logs::default(),
                }
            }
        };
        let ctx = wit::CallContext {
            call_id: req.call_id.to_string(),
            workspace_root: req.workspace_root.to_string(),
            idempotency_key: idempotency_key.map(str::to_string),
        };
        let ran = self
            .pre
            .instance_pre()
            .instantiate(&mut store)
            .and_then(|instance| run(&mut store, &instance, &ctx));
        let fuel_left = store.get_fuel().unwrap_or(0);
        let usage = Usage {
            fuel_consumed: req.limits.fuel.saturating_sub(fuel_left),
            wall_time: start.elapsed(),
            peak_memory_bytes: store.data().memory.peak_bytes() as u64,
            output_bytes: 0,
        };
        let result = ran.map_err(|e| classify_trap(&e, &store));
        let logs = collect_logs(&store, &net);
        EffectOutcome {
            result,
            usage,
            logs,
        }
    }
}

/// The guest's JSON answer, unless it is over the request's output limit.
/// Records its size in `usage`.
fn within_limit(
    json: String,
    req: &CallRequest<'_>,
    usage: &mut Usage,
) -> Result<Result<String, ToolError>, Failure> {
    usage.output_bytes = json.len() as u64;
    if json.len() > req.limits.max_output_bytes {
        Err(Failure::OutputTooLarge { bytes: json.len() })
    } else {
        Ok(Ok(json))
    }
}

fn tool_error(e: wit::ToolError) -> ToolError {
    ToolError {
        code: e.code,
        message: e.message,
        field: e.field,
        correctable: e.correctable,
        details: e.details,
    }
}
