//! Dry-run and probe: the optional `planner` and `prober` exports of the
//! `plugin-with-effects` world (of either supported contract version, see
//! `compat`).
//!
//! A plugin built with the Rust SDK exports both for every tool (a tool
//! without a dry-run answers `dry_run_unsupported`, one without a probe
//! answers `unknown`); a component that exports only `tools` loads and runs
//! exactly as before, and [`Plugin::dry_run`] and [`Plugin::probe`] answer
//! for it as for such a tool, without instantiating anything.
//!
//! Each dry-run or probe runs on the same path as a call (`run_fresh`): a
//! fresh store and instance with the request's
//! [`Limits`](super::Limits) (fuel, deadline, memory, output size), and
//! every trap maps to the same [`Failure`](super::Failure) as in
//! [`Plugin::call`]. But the WIT promises that neither has an effect, so
//! neither gets the means to cause one: every mount of the request is
//! mounted **read-only** and the network is **closed** (no origin is
//! granted), whatever the request says. A dry-run that tries to write
//! fails like any write to a read-only mount (`not-permitted`).

use super::compat::{Planner, Prober};
use super::{context, within_limit, CallRequest, Mount, Plugin, RunOutcome, ToolError};

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

impl Plugin {
    /// Whether the component exports both `planner` and `prober` (at its
    /// contract's version). One that exports only `tools` still loads and runs;
    /// its dry-runs fail with `dry_run_unsupported` and its probes answer
    /// [`ProbeOutcome::Unknown`].
    pub fn supports_effects(&self) -> bool {
        self.planner().is_some() && self.prober().is_some()
    }

    fn planner(&self) -> Option<Planner> {
        Planner::new(&self.pre, self.contract)
    }

    fn prober(&self) -> Option<Prober> {
        Prober::new(&self.pre, self.contract)
    }

    /// Plans `req` without performing it: the plugin's `dry-run` in a fresh
    /// instance with the same sandbox as [`Plugin::call`], except that every
    /// mount is read-only and the network closed. `Ok(Ok(plan))`
    /// carries the plan as JSON text (checked against `max_output_bytes`,
    /// not parsed); a tool (or plugin) without dry-run gives the tool error
    /// `dry_run_unsupported`.
    pub fn dry_run(&self, req: &CallRequest<'_>) -> RunOutcome<Result<String, ToolError>> {
        let Some(planner) = self.planner() else {
            return RunOutcome::without_run(Ok(Err(ToolError {
                code: DRY_RUN_UNSUPPORTED.into(),
                message: format!(
                    "tool {:?} cannot plan a call without performing it: its plugin exports \
                     no planner",
                    req.tool
                ),
                field: None,
                correctable: false,
                details: None,
            })));
        };
        let ctx = context(req, req.idempotency_key);
        let mounts = read_only(req.mounts);
        let req = &without_effects(req, &mounts);
        self.run_fresh(req, None, |store, fresh| {
            planner.dry_run(store, &fresh.instance, req.tool, req.args_json, &ctx)
        })
        .map(|answer, usage| match answer {
            Ok(plan) => within_limit(plan, req, usage),
            Err(e) => Ok(Err(e)),
        })
    }

    /// Asks the plugin whether a call of `req` with idempotency key `key`
    /// took effect: its `probe` in a fresh instance with the same sandbox as
    /// [`Plugin::call`], except that every mount is read-only and the
    /// network closed (the context's key is `key`, whatever
    /// `req.idempotency_key` says). A tool (or plugin) without probe answers
    /// [`ProbeOutcome::Unknown`]. A `Done` output larger than
    /// `max_output_bytes` is [`Failure::OutputTooLarge`](super::Failure::OutputTooLarge).
    pub fn probe(
        &self,
        req: &CallRequest<'_>,
        key: &str,
    ) -> RunOutcome<Result<ProbeOutcome, ToolError>> {
        let Some(prober) = self.prober() else {
            return RunOutcome::without_run(Ok(Ok(ProbeOutcome::Unknown)));
        };
        let ctx = context(req, Some(key));
        let mounts = read_only(req.mounts);
        let req = &without_effects(req, &mounts);
        self.run_fresh(req, None, |store, fresh| {
            prober.probe(store, &fresh.instance, req.tool, req.args_json, key, &ctx)
        })
        .map(|answer, usage| match answer {
            Ok(ProbeOutcome::Done(output)) => {
                Ok(within_limit(output, req, usage)?.map(ProbeOutcome::Done))
            }
            Ok(outcome) => Ok(Ok(outcome)),
            Err(e) => Ok(Err(e)),
        })
    }
}

/// `mounts`, every one read-only.
fn read_only(mounts: &[Mount]) -> Vec<Mount> {
    mounts
        .iter()
        .map(|m| Mount {
            writable: false,
            ..m.clone()
        })
        .collect()
}

/// `req` with `mounts` (read-only ones) and no network: what a dry-run or
/// probe runs with.
fn without_effects<'a>(req: &CallRequest<'a>, mounts: &'a [Mount]) -> CallRequest<'a> {
    CallRequest {
        mounts,
        net_origins: &[],
        // No native program runs for a plan or a probe, nobody is asked,
        // and no inner call is made.
        exec: None,
        asker: None,
        script: None,
        ..req.clone()
    }
}
