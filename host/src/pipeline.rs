//! The call pipeline: every call, whatever happens, becomes one
//! [`Observation`].
//!
//! ```text
//! 1 name      is the tool in the catalog?                 unknown_tool
//!             (or refused at load by the trust policy)    plugin_changed, …
//! 2 parse     strict JSON: no duplicate keys, no int > 2^53 invalid_json
//! 3 schema    the tool's compiled input schema            invalid_arguments
//!   secrets   no secret in a network tool's arguments     secret_in_arguments
//! 4 objects   each path argument inside the workspace,    invalid_arguments
//!             a file or directory (no FIFO, device…)
//!             and inside a grant with the right access;   denied
//!             each grant opened beneath the root          denied
//! 6 sandbox   fresh instance; mounts = grants ∩ needs     timeout, fuel_exhausted, …
//! 7 normalize output JSON, output schema, clipped text    invalid_output, output_too_large
//!   redact    secrets in output and logs → [REDACTED:rule], listed in `redactions`
//!             (and the key body lines of the files the call read)
//!   provenance files read, URLs requested → `provenance`, `untrusted`,
//!             the content marked as data in `text`
//! ```
//!
//! Between 4 and 5 the call takes the locks of its resource keys
//! ([`crate::effects::resource`]): a call that conflicts with a running one waits
//! there, within its deadline.
//!
//! A caller whose capability carries the `secrets` right skips both secret
//! steps: its arguments may carry a secret and nothing is redacted.
//!
//! Nothing reaches the plugin before steps 1–4 pass. A failure after the
//! plugin started on a side-effecting tool is reported as `unknown`, never as
//! a plain error: the effect may have happened.

use serde_json::Value;

pub(crate) use crate::call::{limits_for, Prepared};
pub use crate::call::{
    new_call_id, ApprovalAnswer, Call, CallOptions, Mode, DEFAULT_TEXT_BYTES,
    HARD_MAX_OUTPUT_BYTES, MAX_ARGS_BYTES,
};
use crate::descriptor::SideEffect;
use crate::effects::resource::batch::{BatchItem, BatchOptions, BatchResult};
use crate::json::{self, JsonError};
use crate::observation::{ErrorCode, ErrorInfo, Logs, Observation, SourceKind, Usage};
use crate::paths::Access;
use crate::plugin::catalog::{Catalog, Tool};
pub(crate) use crate::policy::session::denial_error;
pub(crate) use crate::policy::session::Scope;
use crate::policy::session::Session;
use crate::sandbox::{CancelToken, Failure, Limits, Mount, Sandbox};
use crate::text::clip_bytes;
use crate::tools::host_tool::HostTool;
use std::sync::Arc;

/// The catalog plus the sandbox that runs it.
pub struct Host {
    sandbox: Sandbox,
    catalog: Catalog,
    records: Option<crate::effects::EffectGuard>,
    /// Where the `max_calls` caveats of session calls are counted.
    budgets: std::sync::Arc<dyn crate::policy::budget::BudgetLedger>,
    /// Where conflicting calls wait for each other ([`crate::effects::resource`]).
    locks: crate::effects::resource::Locks,
    /// Runs the native programs of calls ([`crate::exec_call`]).
    executor: Arc<toolhost_exec::Executor>,
    /// Where outputs over their limit are spilled ([`crate::tools::artifact`]);
    /// without it such an output is `output_too_large`.
    artifacts: Option<Arc<crate::tools::artifact::Artifacts>>,
    /// Step 8: journal, circuit breaker, metrics ([`crate::record`]).
    recorder: crate::record::Recorder,
    /// How a sub-agent reaches this host: with it, sessions whose token
    /// holds the `delegate` right may call the host's `delegate` tool
    /// ([`crate::policy::delegation`]).
    delegation: Option<crate::policy::delegation::ClientConfig>,
}

/// One of the host's own tools, as [`Host::run`] dispatches it.
enum Served<'a> {
    /// `find_tools` ([`crate::tools::discovery`]).
    FindTools,
    /// `artifact_view` over this store ([`crate::tools::artifact`]).
    ArtifactView(&'a crate::tools::artifact::Artifacts),
    /// `delegate`, telling the sub-agent how to reach this host.
    Delegate(&'a crate::policy::delegation::ClientConfig),
}

impl Host {
    /// A host without idempotency records: it runs read-only tools only,
    /// and refuses every side-effecting call (`denied`, naming the missing
    /// store) until [`with_records`](Self::with_records) gives it one; the
    /// CLI and the MCP server always do.
    pub fn new(sandbox: Sandbox, catalog: Catalog) -> Host {
        Host {
            sandbox,
            catalog,
            records: None,
            budgets: crate::policy::budget::process_ledger(),
            locks: crate::effects::resource::Locks::process_default(),
            executor: crate::exec_call::default_executor(),
            artifacts: None,
            recorder: crate::record::Recorder::default(),
            delegation: None,
        }
    }

    /// Serves the host's `delegate` tool to sessions whose token holds the
    /// `delegate` right; `client` is what its results tell a sub-agent
    /// (the request's own URL, [`CallOptions::request_url`], fills in a
    /// missing HTTP address).
    pub fn with_delegation(mut self, client: crate::policy::delegation::ClientConfig) -> Host {
        self.delegation = Some(client);
        self
    }

    /// Runs native programs with `executor` instead of the process-wide
    /// default (bubblewrap on `PATH`).
    pub fn with_executor(mut self, executor: Arc<toolhost_exec::Executor>) -> Host {
        self.executor = executor;
        self
    }

    /// Spills outputs over their call's limit to `artifacts` instead of
    /// failing them: the call is `ok` with a head and tail and a follow-up
    /// `artifact_view` call ([`crate::tools::artifact`]).
    pub fn with_artifacts(mut self, artifacts: Arc<crate::tools::artifact::Artifacts>) -> Host {
        self.artifacts = Some(artifacts);
        self
    }

    /// The artifact store, when outputs spill.
    pub fn artifacts(&self) -> Option<&crate::tools::artifact::Artifacts> {
        self.artifacts.as_deref()
    }

    /// Journals, breaks and counts calls with `recorder` ([`crate::record`]).
    pub fn with_recorder(mut self, recorder: crate::record::Recorder) -> Host {
        self.recorder = recorder;
        self
    }

    /// The journal, breaker and metrics of this host.
    pub fn recorder(&self) -> &crate::record::Recorder {
        &self.recorder
    }

    /// Takes resource locks with `locks` instead of the process default
    /// ([`crate::effects::resource::Locks::process_default`]).
    pub fn with_locks(mut self, locks: crate::effects::resource::Locks) -> Host {
        self.locks = locks;
        self
    }

    pub fn locks(&self) -> &crate::effects::resource::Locks {
        &self.locks
    }

    /// Counts the `max_calls` caveats of session calls in `ledger` instead
    /// of the process-wide [`crate::policy::budget::process_ledger`].
    pub fn with_budgets(
        mut self,
        ledger: std::sync::Arc<dyn crate::policy::budget::BudgetLedger>,
    ) -> Host {
        self.budgets = ledger;
        self
    }

    pub fn budgets(&self) -> &dyn crate::policy::budget::BudgetLedger {
        &*self.budgets
    }

    /// Turns on the side-effect policy: idempotent and reversible calls need
    /// an idempotency key and go through the record store; irreversible
    /// calls also need an approved plan.
    /// Budgets and revocations then live in the store's ledger, if it
    /// keeps one ([`crate::policy::ledger`]).
    pub fn with_records(mut self, records: crate::effects::EffectGuard) -> Host {
        if let Some(ledger) = records.ledger() {
            self.budgets = ledger.clone();
        }
        self.records = Some(records);
        self
    }

    pub(crate) fn records(&self) -> Option<&crate::effects::EffectGuard> {
        self.records.as_ref()
    }

    /// The approvals of this host's record store, if it keeps them: where a
    /// client that can ask a person records the answer.
    pub fn approvals(&self) -> Option<&crate::effects::approval::Approvals> {
        self.records.as_ref().and_then(|r| r.approvals())
    }

    /// The side-effect guard, if this host has a record store: where the
    /// request state of a multi round-trip call is sealed and spent
    /// ([`crate::effects::approval::request_state`]).
    pub fn effect_guard(&self) -> Option<&crate::effects::EffectGuard> {
        self.records.as_ref()
    }

    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    pub fn sandbox(&self) -> &Sandbox {
        &self.sandbox
    }

    /// Steps 1–7 of one call, without step 8 ([`crate::record`]).
    pub(crate) fn call_unrecorded(
        &self,
        tool: &str,
        args: &str,
        scope: &Scope<'_>,
        opts: &CallOptions,
        cancel: Option<&CancelToken>,
    ) -> Observation {
        let mut prepared = match self.prepare(tool, args, scope, opts) {
            Ok(p) => p,
            Err(obs) => return *obs,
        };
        // Resource locks: a call conflicting with a running one waits here,
        // within its own deadline.
        let held = match crate::effects::resource::hold(&self.locks, &mut prepared, cancel) {
            Ok(held) => held,
            Err(obs) => return *obs,
        };
        // 5. Side effects, at the call's effective level: a call whose
        // sandbox can change nothing runs as read-only.
        let obs = match &self.records {
            Some(records) if prepared.level != SideEffect::ReadOnly => {
                let p = &prepared;
                let runner = crate::effects::Runner {
                    run: &|key| self.execute(p, Some(key), cancel),
                    normalize: &|out| self.normalize_output(p, out, None),
                    plan: &|| self.dry_run(p).map(|(plan, _, _)| plan),
                };
                records.guard(p, opts, &runner)
            }
            // Deny by default: a side effect nobody records is refused,
            // as the sandbox refuses what was not granted.
            None if prepared.level != SideEffect::ReadOnly => {
                let level = prepared.level;
                let info = ErrorCode::Denied.info(format!(
                    "`{tool}` is {} and this host has no record store (idempotency records), so it runs only read-only tools; build the host with Host::with_records (the CLI and `serve` always do)",
                    level.as_str()
                ));
                Observation::failure(&prepared.call_id, tool, level, info)
            }
            _ => self.execute(&prepared, None, cancel),
        };
        held.finish(obs)
    }

    /// Steps 1–4: name, strict parse, schema, objects; then the mounts and
    /// limits of the sandbox.
    pub(crate) fn prepare(
        &self,
        tool: &str,
        args: &str,
        scope: &Scope<'_>,
        opts: &CallOptions,
    ) -> Result<Prepared<'_>, Box<Observation>> {
        let call_id = opts.call_id.clone().unwrap_or_else(new_call_id);
        let text_bytes = opts.max_text_bytes.unwrap_or(DEFAULT_TEXT_BYTES);

        // 1. Name.
        if let (None, Some(problem)) = (self.catalog.get(tool), self.catalog.refusal(tool)) {
            // Refused at load by the trust policy: say why, not "unknown".
            let code = problem
                .code
                .as_deref()
                .and_then(ErrorCode::from_code)
                .unwrap_or(ErrorCode::PluginUnavailable);
            let info = code.info(format!(
                "tool `{tool}` was refused when {} was loaded: {}",
                problem.plugin, problem.reason
            ));
            return Err(Box::new(Observation::failure(
                &call_id,
                tool,
                SideEffect::ReadOnly,
                info,
            )));
        }
        let Some(t) = self.catalog.get(tool) else {
            let hint = self.catalog.suggestions(tool);
            let names: Vec<&str> = self
                .catalog
                .tools()
                .map(|t| t.descriptor.name.as_str())
                .collect();
            let mut message = format!("no tool named `{tool}`");
            if !hint.is_empty() {
                message.push_str(&format!("; did you mean {}?", quote_list(&hint)));
            }
            message.push_str(&format!(" Available tools: {}.", names.join(", ")));
            let info = ErrorCode::UnknownTool.info(message);
            return Err(Box::new(Observation::failure(
                &call_id,
                tool,
                SideEffect::ReadOnly,
                info,
            )));
        };
        let level = t.descriptor.side_effect;
        let fail =
            |info: ErrorInfo| Err(Box::new(Observation::failure(&call_id, tool, level, info)));

        // 2. Strict parse.
        if args.len() > MAX_ARGS_BYTES {
            let info = ErrorCode::InvalidArguments
                .info(format!(
                    "the arguments are {} bytes; the limit is {MAX_ARGS_BYTES}",
                    args.len()
                ))
                .with_field("")
                .with_expected(format!("at most {MAX_ARGS_BYTES} bytes of JSON"))
                .with_actual(format!("{} bytes", args.len()));
            return fail(info);
        }
        let mut value = match json::parse_strict(args) {
            Ok(v) => v,
            Err(e) => return fail(json_error(&e)),
        };

        // 3. Schema.
        if let Err(violations) = t.input.validate(&value) {
            return fail(violation_error(&violations));
        }
        // The exfiltration half of redaction: a tool that can reach the
        // network gets no argument that carries a secret.
        let secrets = scope.capability.sees_secrets();
        if !secrets && !t.descriptor.needs.network_hosts.is_empty() {
            if let Some(found) = crate::redact::contains_secret(&value).first() {
                let info = ErrorCode::SecretInArguments
                    .info(format!(
                        "the arguments carry what looks like a secret ({}) and `{tool}` can reach the network; the call was refused so the secret cannot leave. Remove it from the arguments.",
                        found.rule.id()
                    ))
                    .with_field(found.field.clone())
                    .with_expected("no credential or key in the arguments".to_string())
                    .with_actual(format!("[REDACTED:{}]", found.rule.id()));
                return fail(info);
            }
        }

        // 4. Objects: every path argument, before the plugin runs.
        let mut rewrites = Vec::new();
        let mut inputs = crate::provenance::Inputs::default();
        let mut has_path_args = false;
        // A write under an `ask_write` prefix: allowed once approved.
        let mut asks = false;
        for arg in t.input.path_args(&value) {
            has_path_args = true;
            let access = arg.access;
            // What the tool may read is where its output may come from.
            let read = access == Access::Read || t.descriptor.needs.fs_read;
            // A path that is no workspace path at all (absolute, leaving
            // the root, malformed) is a correctable argument, whatever the
            // token grants: say so before any permission matter.
            if let Err(e) = crate::paths::RelPath::parse(arg.value) {
                return fail(e.to_error_info(Some(&arg.pointer)));
            }
            let ask_grants = scope
                .ask_grants
                .filter(|_| access == Access::Write && scope.capability.asks_for_write(arg.value));
            let denied = scope.capability.check_path(arg.value, access);
            let grants = match (&denied, ask_grants) {
                (Err(_), Some(elevated)) => {
                    asks = true;
                    elevated
                }
                _ => scope.grants,
            };
            if let (Err(d), None) = (&denied, ask_grants) {
                // The path, so that the advice can name what grants it.
                let mut info = denial_error(d).with_field(arg.pointer.clone());
                if let Some(Value::Object(details)) = &mut info.details {
                    details.insert("path".into(), Value::from(arg.value));
                }
                return fail(info);
            }
            match scope.workspace.resolve(arg.value, access, grants) {
                Ok(resolved) => {
                    if read {
                        inputs.add_file(resolved.rel.as_str());
                    }
                    if resolved.rel.as_str() != arg.value {
                        rewrites.push((arg.pointer.to_string(), resolved.rel.as_str().to_string()));
                    }
                }
                Err(e) => return fail(e.to_error_info(Some(&arg.pointer))),
            }
        }
        for (pointer, rel) in rewrites {
            if let Some(slot) = value.pointer_mut(&pointer) {
                *slot = Value::String(rel);
            }
        }
        // The plugin gets what was validated (and what an idempotency key is
        // derived from): the canonical text (RFC 8785) of the arguments, so
        // `"offset": 1.0`, an integer under JSON Schema, arrives as `1`.
        let args = match crate::json::canonical::canonicalize(&value) {
            Ok(text) => text,
            Err(e) => {
                let info = ErrorCode::InvalidArguments
                    .info(format!("the arguments cannot be canonicalized: {e}"));
                return fail(info);
            }
        };

        // The sandbox this call gets.
        let needs = &t.descriptor.needs;
        // Each grant is opened now, for this call, beneath the workspace
        // root without following a link; the open directory is the mount.
        let mut mounts: Vec<Mount> = Vec::new();
        if needs.fs_read || needs.fs_write {
            let may_write = needs.fs_write && level != SideEffect::ReadOnly;
            let grants = match scope.ask_grants {
                Some(elevated) if asks => elevated,
                _ => scope.grants,
            };
            for p in grants.preopens() {
                if !has_path_args {
                    // No path argument says what it reads: anything mounted.
                    inputs.add_file(p.rel.as_str());
                }
                match scope.workspace.open_grant(&p.rel) {
                    Ok(dir) => mounts.push(Mount {
                        dir,
                        guest: p.guest,
                        writable: p.writable && may_write,
                    }),
                    Err(e) => return fail(e.to_error_info(None)),
                }
            }
        }
        let mut limits = limits_for(t, opts);
        if self.artifacts.is_some() {
            limits.spill_output_bytes = HARD_MAX_OUTPUT_BYTES;
        }
        limits.fuel = scope.capability.fuel(limits.fuel);
        limits.timeout = scope
            .capability
            .deadline(limits.timeout, std::time::SystemTime::now());
        if !inputs.files.is_empty() {
            inputs.root = Some(scope.workspace.dir().clone());
        }
        let net = match crate::sandbox::net_grant(&needs.network_hosts, &scope.net) {
            Ok(net) => net,
            Err(e) => return fail(ErrorCode::Denied.info(format!("the network grant {e}"))),
        };
        let writable = mounts.iter().any(|m| m.writable);
        // Programs: those both declared and granted, resolved when the
        // plugin first asks; run with exactly the call's mounts.
        let exec = (!needs.exec.is_empty()).then(|| {
            Arc::new(crate::exec_call::CallExec::new(
                self.executor.clone(),
                &t.descriptor.name,
                &needs.exec,
                &scope.exec,
                mounts
                    .iter()
                    .map(|m| (m.dir.clone(), m.guest.clone(), m.writable))
                    .collect(),
                limits.max_output_bytes / 8,
            ))
        });
        Ok(Prepared {
            tool: t,
            level: crate::call::effective_level(level, writable, !net.is_empty()),
            call_id,
            text_bytes,
            value,
            args,
            mounts,
            net,
            exec,
            limits,
            workspace_root: scope.workspace.root().to_path_buf(),
            secrets,
            inputs,
            capability: Some(scope.capability.binding_hex()),
            self_approve: scope.capability.self_approves(),
            asks,
            chain: scope.chain.iter().map(ToString::to_string).collect(),
            asker: opts.asker.clone(),
            // Only the script runner gets a link, whatever the caller set.
            script: opts.script.clone().filter(|_| crate::script::is_runner(t)),
        })
    }

    /// Steps 6–7: a fresh instance runs the call; its outcome becomes the
    /// observation.
    pub(crate) fn execute(
        &self,
        p: &Prepared<'_>,
        key: Option<&str>,
        cancel: Option<&CancelToken>,
    ) -> Observation {
        let t = p.tool;
        let (call_id, tool, level, limits) =
            (&p.call_id, t.descriptor.name.as_str(), p.level, p.limits);
        let outcome = t.plugin.call_cancellable(&p.request(key), cancel);

        // 7. Normalize.
        let usage = Usage {
            fuel_consumed: outcome.usage.fuel_consumed,
            wall_time_us: outcome.usage.wall_time.as_micros() as u64,
            peak_memory_bytes: outcome.usage.peak_memory_bytes,
            output_bytes: outcome.usage.output_bytes,
            wait_us: 0,
        };
        let mut logs = Logs::capture(
            &outcome.logs.stdout,
            &outcome.logs.stderr,
            limits.max_log_bytes,
        );
        logs.stdout_omitted_bytes += outcome.logs.stdout_omitted;
        logs.stderr_omitted_bytes += outcome.logs.stderr_omitted;
        let mut hidden = Vec::new();
        for (text, field) in [
            (&mut logs.stdout, "logs/stdout"),
            (&mut logs.stderr, "logs/stderr"),
        ] {
            if text.is_empty() || p.secrets {
                continue;
            }
            let (clean, found) = crate::redact::redact_text(text, field);
            if !found.is_empty() {
                *text = clean.into_owned();
                hidden.extend(found.into_iter().map(|r| note(r, "")));
            }
        }
        let mut over_limit = None;
        let obs = match outcome.result {
            Ok(Ok(out)) if out.json.len() > limits.max_output_bytes => {
                over_limit = Some(out.json.len());
                self.normalize_output(p, &out.json, None)
            }
            Ok(Ok(out)) => self.normalize_output(p, &out.json, out.text.as_deref()),
            Ok(Err(e)) => {
                let declared = t.descriptor.error_codes.contains(&e.code);
                let mut details =
                    crate::observation::tool_details(e.details, limits.max_output_bytes);
                // A tool's error text can quote what it read, secrets too.
                let message = if p.secrets {
                    e.message
                } else {
                    let (message, found) = crate::redact::redact_text(&e.message, "");
                    hidden.extend(found.into_iter().map(|r| note(r, "error/message")));
                    message.into_owned()
                };
                if let Some(d) = details.as_mut().filter(|d| !p.secrets && has_string(d)) {
                    let found = crate::redact::redact_json(d);
                    hidden.extend(found.into_iter().map(|r| note(r, "error/details")));
                }
                let field = crate::observation::tool_field(
                    e.field,
                    &p.args_value(),
                    &p.tool.descriptor.input_schema,
                    tool,
                );
                let info = if declared {
                    ErrorInfo::from_tool(e.code, message, field, e.correctable, details)
                } else {
                    ErrorCode::InvalidOutput.info(format!(
                        "the tool returned an undeclared error code `{}`: {}",
                        clip_bytes(&e.code, 64),
                        message
                    ))
                };
                // A tool error is the tool's own answer: it ran to the end.
                Observation::failure(call_id, tool, level, info)
            }
            // The failure paths mark side-effecting calls `unknown`.
            Err(failure) => {
                Observation::failure(call_id, tool, level, failure_error(&failure, &limits))
            }
        };
        let mut obs = obs.with_usage(usage).with_logs(logs);
        obs.redactions.extend(hidden);
        let obs = self.with_sources(obs, p, &outcome.net_requested, &outcome.questions);
        let obs = match over_limit {
            Some(bytes) => self.spill(p, obs, bytes),
            None => obs,
        };
        match key {
            Some(k) => obs.with_idempotency_key(k),
            None => obs,
        }
    }

    /// An `ok` observation whose output was over the call's limit, spilled
    /// to an artifact owned by the call's token; `output_too_large` when
    /// the host keeps no artifacts or the store fails.
    fn spill(&self, p: &Prepared<'_>, obs: Observation, bytes: usize) -> Observation {
        if !obs.is_ok() {
            return obs;
        }
        let (tool, level) = (&p.tool.descriptor.name, p.tool.descriptor.side_effect);
        let too_large = |why: String| {
            let info = failure_error(&Failure::OutputTooLarge { bytes }, &p.limits);
            let info = ErrorInfo {
                message: format!("{} ({why})", info.message),
                ..info
            };
            Observation::failure(&p.call_id, tool, level, info)
                .with_usage(obs.usage)
                .with_logs(obs.logs.clone())
        };
        let Some(store) = &self.artifacts else {
            return too_large("this host keeps no artifacts".into());
        };
        let content = match obs.output.as_ref().map(serde_json::to_string) {
            Some(Ok(c)) => c,
            _ => return too_large("the output could not be serialized".into()),
        };
        let owner = p
            .capability
            .as_deref()
            .unwrap_or(crate::tools::artifact::NO_TOKEN);
        match store.put(owner, tool, content.as_bytes(), &obs.provenance) {
            Ok(id) => obs.spilled(
                &content,
                &id,
                crate::tools::artifact::TOOL_NAME,
                p.text_bytes,
            ),
            Err(e @ crate::tools::artifact::ArtifactError::OverQuota { .. }) => {
                tracing::warn!(tool = %tool, reason = %e, "a spill was not kept");
                obs.clipped_unkept(&content, &e.to_string(), p.text_bytes)
            }
            Err(e) => too_large(e.to_string()),
        }
    }

    /// The guest's output JSON as an `ok` observation (or why it is not
    /// one): parsed, checked against the output schema, secrets redacted
    /// unless the caller may see them. `text` is the plugin's model-facing
    /// rendering, if it gave one (redacted like the output).
    pub(crate) fn normalize_output(
        &self,
        p: &Prepared<'_>,
        out: &str,
        text: Option<&str>,
    ) -> Observation {
        let (t, call_id, text_bytes) = (p.tool, p.call_id.as_str(), p.text_bytes);
        let level = p.level;
        let mut value: Value = match serde_json::from_str(out) {
            Ok(v) => v,
            Err(e) => {
                let info = ErrorCode::InvalidOutput
                    .info(format!("the tool's output is not valid JSON: {e}"));
                return Observation::failure(call_id, &t.descriptor.name, level, info);
            }
        };
        if let Some(validator) = &t.output {
            if let Some(err) = validator.iter_errors(&value).next() {
                let info = ErrorCode::InvalidOutput
                    .info(format!(
                        "the tool's output does not match its output schema: {err}"
                    ))
                    .with_field(err.instance_path().to_string());
                return Observation::failure(call_id, &t.descriptor.name, level, info);
            }
        }
        // Secrets go before the text is rendered from the output, so the
        // structured output and the model-facing text agree. An output
        // without strings (the trivial call) is not scanned at all, nor
        // one whose JSON text holds no trigger of any rule (one pass over
        // it instead of one per string).
        let redactions = if !p.secrets
            && has_string(&value)
            && crate::redact::redactor().json_may_hold_secret(out)
        {
            crate::redact::redact_json(&mut value)
        } else {
            Vec::new()
        };
        // Unredacted, the value is the parse of `out`: a journal hashes
        // the text (see `Observation::with_output_text`). No journal, no
        // copy.
        // Key body lines of the files the call read, which a window into
        // a key (neither its BEGIN nor its END line) shows without a sign
        // of what they are ([`crate::redact::files`]).
        let known = match &p.inputs.root {
            Some(root) if !p.secrets && has_string(&value) => {
                crate::redact::files::key_lines(root, &p.inputs.files)
            }
            _ => Vec::new(),
        };
        let mut redactions = redactions;
        redactions.extend(crate::redact::files::hide_in_json(&known, &mut value));
        let journaled = self.recorder.journal.is_some();
        let output_text = (journaled && redactions.is_empty()).then(|| out.to_owned());
        let mut notes: Vec<_> = redactions.into_iter().map(|r| note(r, "output")).collect();
        let name = &t.descriptor.name;
        let mut obs = match text {
            Some(text) => {
                let (mut text, mut found) = if p.secrets {
                    (std::borrow::Cow::Borrowed(text), Vec::new())
                } else {
                    crate::redact::redact_text(text, "")
                };
                if let Some((clean, count)) = crate::redact::files::hide_in_text(&known, &text) {
                    text = std::borrow::Cow::Owned(clean);
                    found.push(crate::redact::Redaction {
                        rule: crate::redact::SecretRule::PrivateKey,
                        field: String::new(),
                        count,
                    });
                }
                notes.extend(found.into_iter().map(|r| note(r, "text")));
                Observation::ok_with_text(call_id, name, level, value, &text, text_bytes)
            }
            None => Observation::ok(call_id, name, level, value, text_bytes),
        };
        obs.redactions = notes;
        match output_text {
            Some(text) => obs.with_output_text(text),
            None => obs,
        }
    }
}

impl Host {
    /// The tool's dry run of a prepared call: its plan (secrets in it
    /// hidden like an output's, unless the caller may see them), what was
    /// hidden, and the URLs it requested. `null` for a tool without a dry
    /// run.
    #[allow(clippy::type_complexity)]
    pub(crate) fn dry_run(
        &self,
        p: &Prepared<'_>,
    ) -> Result<(Value, Vec<crate::redact::Redaction>, Vec<String>), Box<Observation>> {
        let t = p.tool;
        let tool = t.descriptor.name.as_str();
        let level = t.descriptor.side_effect;
        let fail = |code: ErrorCode, msg: String| {
            Box::new(Observation::failure(
                &p.call_id,
                tool,
                level,
                code.info(msg),
            ))
        };
        if !t.descriptor.supports_dry_run {
            return Ok((Value::Null, Vec::new(), Vec::new()));
        }
        let outcome = t.plugin.dry_run(&p.request(None));
        let mut plan = match outcome.result {
            Ok(Ok(text)) => match serde_json::from_str::<Value>(&text) {
                Ok(v) => v,
                Err(e) => {
                    return Err(fail(
                        ErrorCode::InvalidOutput,
                        format!("the plan is not JSON: {e}"),
                    ))
                }
            },
            Ok(Err(e)) => {
                let details =
                    crate::observation::tool_details(e.details, p.limits.max_output_bytes);
                let field = crate::observation::tool_field(
                    e.field,
                    &p.args_value(),
                    &p.tool.descriptor.input_schema,
                    tool,
                );
                let info = crate::observation::ErrorInfo::from_tool(
                    e.code,
                    e.message,
                    field,
                    e.correctable,
                    details,
                );
                return Err(Box::new(Observation::failure(
                    &p.call_id,
                    tool,
                    SideEffect::ReadOnly,
                    info,
                )));
            }
            Err(f) => {
                return Err(fail(
                    ErrorCode::PluginCrashed,
                    format!("the dry-run failed: {f:?}"),
                ))
            }
        };
        // The plan is the plugin's words about the workspace: secrets in it
        // are hidden like an output's. (Only the plan: a plan token is the
        // host's own and must stay intact.)
        let hidden = if p.secrets {
            Vec::new()
        } else {
            crate::redact::redact_json(&mut plan)
        };
        Ok((plan, hidden, outcome.net_requested))
    }

    /// Plans a call without performing it (the tool's `dry-run`): steps 1–4
    /// run as for a call, then the plan comes back as the output with a
    /// `plan_token` that approves exactly this call while its targets stay
    /// as they are ([`Mode::Plan`] of [`Host::run`]).
    fn plan_unrecorded(
        &self,
        tool: &str,
        args: &str,
        scope: &Scope<'_>,
        opts: &CallOptions,
    ) -> Observation {
        let p = match self.prepare(tool, args, scope, opts) {
            Ok(p) => p,
            Err(obs) => return *obs,
        };
        let t = p.tool;
        let level = t.descriptor.side_effect;
        let fail = |code: ErrorCode, msg: String| {
            Observation::failure(&p.call_id, tool, level, code.info(msg))
        };
        let Some(records) = self.records() else {
            return fail(
                ErrorCode::Internal,
                "plans need the host's record store and key".into(),
            );
        };
        if !t.descriptor.supports_dry_run {
            return fail(
                ErrorCode::InvalidArguments,
                format!("`{tool}` cannot plan (it has no dry-run)"),
            );
        }
        // `p.args` is the canonical text (RFC 8785) of the arguments.
        let canonical_args = p.args.as_str();
        let (plan, hidden, net_requested) = match self.dry_run(&p) {
            Ok(done) => done,
            Err(obs) => return *obs,
        };
        let issued = match records.issue_plan(&p, canonical_args) {
            Ok(issued) => issued,
            Err((code, msg)) => return fail(code, msg),
        };
        let output = serde_json::json!({
            "plan": plan,
            "plan_token": issued.token,
            "targets": issued.targets,
            "expires_at_ms": issued.expires_at_ms,
        });
        let obs = Observation::ok(&p.call_id, tool, SideEffect::ReadOnly, output, p.text_bytes);
        let mut obs = self.with_sources(obs, &p, &net_requested, &[]);
        obs.redactions
            .extend(hidden.into_iter().map(|r| crate::observation::Redaction {
                rule: r.rule.id().to_string(),
                field: format!("output/plan{}", r.field),
                count: r.count as u64,
            }));
        obs
    }
}

impl Host {
    /// The tools this session may see, in name order.
    pub fn visible_tools<'a>(
        &'a self,
        session: &'a Session,
    ) -> impl Iterator<Item = &'a Arc<Tool>> {
        self.catalog()
            .tools()
            .filter(move |t| session.grant().allows_tool(&t.descriptor.name))
    }

    /// The one entry point: runs (or plans) `call` for `session`.
    ///
    /// Every gate is checked here, before anything of the tool runs: the
    /// tool is one the session's token allows, the token has not expired
    /// and no id of its chain is revoked, every `max_calls` and
    /// `budget_fuel` caveat of its chain has something left (then charged),
    /// and the call's fuel is capped by the token's ceiling (and by what its
    /// fuel budgets have left). A refusal is a `denied` (or `unknown_tool`)
    /// observation naming the caveat. Then the pipeline runs steps 1–7
    /// ([`Mode::Run`]) or the dry-run ([`Mode::Plan`]); fuel a call did not
    /// consume is given back to its budgets.
    pub fn run(&self, session: &Session, call: Call<'_>) -> Observation {
        let Call {
            tool,
            args,
            options,
            mode,
            cancel,
        } = call;
        let call_id = options.call_id.clone().unwrap_or_else(new_call_id);
        let opts = CallOptions {
            call_id: Some(call_id.clone()),
            ..options.clone()
        };
        // Step 8 around every call that runs (a plan is not journaled).
        let caller = crate::record::Caller {
            tool,
            args,
            opts: &opts,
            chain: session.chain_ids(),
        };
        match mode {
            Mode::Run => self.recorder.around(&self.catalog, &caller, || {
                self.run_unrecorded(session, tool, args, opts.clone(), mode, cancel)
            }),
            Mode::Plan => self.run_unrecorded(session, tool, args, opts.clone(), mode, cancel),
        }
    }

    /// Whether `tool` is one of the host's own tools for `session`: a call
    /// of it runs through [`run`](Self::run) like any other, but no plugin
    /// is involved.
    pub fn serves_host_tool(&self, session: &Session, tool: &str) -> bool {
        self.host_tool_of(session, tool).is_some()
    }

    /// The host's own tools this host serves `session`
    /// ([`serves_host_tool`](Self::serves_host_tool)), for a front end to
    /// list with their [definitions](HostTool::definition).
    pub fn host_tools<'a>(&'a self, session: &'a Session) -> impl Iterator<Item = HostTool> + 'a {
        HostTool::ALL
            .into_iter()
            .filter(move |t| self.serves_host_tool(session, t.name()))
    }

    /// The host's own tool `tool` names for `session`, if any: `delegate`
    /// when this host delegates and the session's token may (it shadows a
    /// plugin tool of that name), else `find_tools` and `artifact_view`
    /// when no plugin tool of that name shadows them.
    fn host_tool_of(&self, session: &Session, tool: &str) -> Option<Served<'_>> {
        if tool == crate::policy::delegation::TOOL_NAME {
            if let Some(client) = self.delegation.as_ref() {
                if crate::policy::delegation::may_delegate(Some(session)) {
                    return Some(Served::Delegate(client));
                }
            }
        }
        if self.catalog().get(tool).is_some() {
            return None;
        }
        match tool {
            crate::tools::discovery::TOOL_NAME => Some(Served::FindTools),
            crate::tools::artifact::TOOL_NAME => {
                self.artifacts.as_deref().map(Served::ArtifactView)
            }
            _ => None,
        }
    }

    /// Runs one of the host's own tools ([`host_tool_of`](Self::host_tool_of)).
    /// No plugin runs, so no budget is charged, but the token must be
    /// live. `None`: a catalog tool.
    fn host_tool(
        &self,
        session: &Session,
        tool: &str,
        args: &str,
        opts: &CallOptions,
        mode: Mode,
    ) -> Option<Observation> {
        let which = self.host_tool_of(session, tool)?;
        let call_id = opts.call_id.clone().unwrap_or_default();
        let text_bytes = opts.max_text_bytes.unwrap_or(DEFAULT_TEXT_BYTES);
        if let Err(info) = session.check_live(self.budgets()) {
            return Some(Observation::failure(
                &call_id,
                tool,
                SideEffect::ReadOnly,
                *info,
            ));
        }
        Some(match which {
            Served::ArtifactView(store) => crate::tools::artifact::view(
                store,
                &session.grant().binding_hex(),
                args,
                &call_id,
                text_bytes,
            ),
            Served::FindTools => {
                let index = crate::tools::discovery::index_of(
                    self.visible_tools(session).map(|t| &t.descriptor),
                );
                // A session that may run scripts reads how a script calls
                // each tool found.
                let may_script = self
                    .visible_tools(session)
                    .any(|t| crate::script::is_runner(t));
                let declare = |names: &[String]| {
                    crate::script::declarations(
                        self.visible_tools(session)
                            .filter(|t| names.contains(&t.descriptor.name))
                            .map(|t| &t.descriptor),
                    )
                };
                let declare: Option<&crate::tools::discovery::Declare<'_>> =
                    may_script.then_some(&declare);
                crate::tools::discovery::find_tools(&index, args, &call_id, text_bytes, declare)
            }
            // A dry run hands out no token.
            Served::Delegate(_) if mode == Mode::Plan => Observation::failure(
                &call_id,
                tool,
                SideEffect::ReadOnly,
                ErrorCode::InvalidArguments
                    .info("`delegate` has no dry run: call it without dry_run to make the token"),
            ),
            Served::Delegate(client) => {
                let mut client = client.clone();
                if client.http_url.is_none() {
                    client.http_url = opts.request_url.clone();
                }
                if client.workspace.is_none() {
                    client.workspace = Some(session.workspace().root().display().to_string());
                }
                crate::policy::delegation::delegate(
                    session,
                    self.budgets(),
                    args,
                    &client,
                    &call_id,
                )
            }
        })
    }

    /// [`run`](Self::run) without step 8: the gates, then steps 1–7.
    fn run_unrecorded(
        &self,
        session: &Session,
        tool: &str,
        args: &str,
        mut opts: CallOptions,
        mode: Mode,
        cancel: Option<&CancelToken>,
    ) -> Observation {
        let call_id = opts.call_id.clone().unwrap_or_default();
        if let Some(obs) = self.host_tool(session, tool, args, &opts, mode) {
            return obs;
        }
        let admission = match session.admit(
            self.budgets(),
            self.catalog(),
            tool,
            session.fuel_wanted(&opts),
        ) {
            Ok(a) => a,
            Err(info) => {
                // A tool outside the token is not in this caller's catalog:
                // its level is not shown either; a plan is read-only.
                let level = match (mode, info.host_code()) {
                    (Mode::Plan, _) | (_, Some(ErrorCode::UnknownTool)) => SideEffect::ReadOnly,
                    (Mode::Run, _) => self.level_of(tool),
                };
                return Observation::failure(&call_id, tool, level, *info);
            }
        };
        if session.fuel_budgeted() {
            opts.fuel = Some(admission.fuel);
        }
        let scope = session.scope();
        let runner = self
            .catalog()
            .get(tool)
            .filter(|t| crate::script::is_runner(t));
        let obs = match (mode, runner) {
            // The script runner's inner calls run for this session
            // ([`crate::script`]), within the script's own deadline.
            // Its `timeout_ms` argument can shorten the call's deadline,
            // never lengthen it; the run's level is the highest of the
            // inner calls that ran.
            (Mode::Run, Some(t)) => {
                let limit = crate::call::limits_for(t, &opts).timeout;
                let timeout =
                    crate::script::requested_timeout(args).map_or(limit, |t| t.min(limit));
                let opts = CallOptions {
                    timeout_ms: Some(timeout.as_millis() as u64),
                    ..opts.clone()
                };
                let inner = |call: Call<'_>| self.run(session, call);
                let (obs, did) =
                    crate::script::serve(self.catalog(), &inner, &opts, timeout, |opts| {
                        self.call_unrecorded(tool, args, &scope, opts, cancel)
                    });
                let failed_otherwise = obs
                    .error
                    .as_ref()
                    .is_some_and(|e| e.host_code() != Some(ErrorCode::Timeout));
                let mut obs = if did.out_of_time && failed_otherwise {
                    let mut t = Observation::failure(
                        &call_id,
                        tool,
                        SideEffect::ReadOnly,
                        ErrorCode::Timeout.info(format!(
                            "the script ran past its deadline of {} ms (its timeout_ms or the call's own)",
                            timeout.as_millis()
                        )),
                    );
                    t.usage = obs.usage;
                    t.logs = obs.logs;
                    t
                } else {
                    obs
                };
                obs.effects.level = obs.effects.level.max(did.level);
                obs
            }
            (Mode::Run, None) => self.call_unrecorded(tool, args, &scope, &opts, cancel),
            (Mode::Plan, _) => self.plan_unrecorded(tool, args, &scope, &opts),
        };
        session.settle_fuel(self.budgets(), admission, &obs);
        obs
    }

    fn level_of(&self, tool: &str) -> SideEffect {
        self.catalog()
            .get(tool)
            .map_or(SideEffect::ReadOnly, |t| t.descriptor.side_effect)
    }

    /// Runs a batch for a session: each item is admitted (and counted) as
    /// one [`run`](Host::run).
    pub fn batch(
        &self,
        session: &Session,
        items: &[BatchItem],
        opts: &BatchOptions,
    ) -> BatchResult {
        crate::effects::resource::batch::run_batch(self.catalog(), items, opts, |item, call| {
            self.run(session, Call::new(&item.tool, item.arguments.get(), call))
        })
    }
}

impl Host {
    /// Attaches the run's provenance: the files the call may have read, the
    /// URLs its guest requested and the native programs it ran. A URL is the guest's words and a path
    /// the caller's: secrets in either are redacted like an output's
    /// (unless the caller may see them).
    pub(crate) fn with_sources(
        &self,
        obs: Observation,
        p: &Prepared<'_>,
        requested: &[String],
        questions: &[(String, String)],
    ) -> Observation {
        let programs = p
            .exec
            .as_ref()
            .map(|e| e.programs_run())
            .unwrap_or_default();
        if p.inputs.files.is_empty()
            && requested.is_empty()
            && programs.is_empty()
            && questions.is_empty()
        {
            return obs;
        }
        let indexes = Some(self.sandbox().file_indexes());
        let mut sources =
            crate::provenance::sources(&p.inputs, requested, &programs, questions, indexes);
        // A tool's own error after no output: a path argument that names
        // nothing when the call ended brought no content for the error to
        // quote (`not_found`), so it is no source and does not fence it.
        if obs.output.is_none() && obs.error.as_ref().is_some_and(|e| e.host_code().is_none()) {
            if let Some(root) = &p.inputs.root {
                sources.retain(|s| {
                    s.kind != SourceKind::File || !crate::provenance::absent(root, &s.reference)
                });
            }
        }
        let mut hidden = Vec::new();
        if !p.secrets {
            for (i, s) in sources.iter_mut().enumerate() {
                let (clean, found) = crate::redact::redact_text(&s.reference, "");
                if !found.is_empty() {
                    s.reference = clean.into_owned();
                    let field = format!("provenance/{i}/ref");
                    hidden.extend(found.into_iter().map(|r| note(r, &field)));
                }
            }
        }
        let mut obs = obs.with_provenance(sources, p.text_bytes);
        obs.redactions.extend(hidden);
        obs
    }
}

/// A redaction as the observation lists it; `prefix` names the part
/// (`output`) the JSON Pointer is in.
fn note(r: crate::redact::Redaction, prefix: &str) -> crate::observation::Redaction {
    crate::observation::Redaction {
        rule: r.rule.id().to_string(),
        field: format!("{prefix}{}", r.field),
        count: r.count as u64,
    }
}

/// Whether a JSON value holds a string anywhere (member names aside).
fn has_string(v: &Value) -> bool {
    match v {
        Value::String(_) => true,
        Value::Array(a) => a.iter().any(has_string),
        Value::Object(o) => o.values().any(has_string),
        _ => false,
    }
}

fn json_error(e: &JsonError) -> ErrorInfo {
    let info = ErrorCode::InvalidJson.info(e.to_string());
    match &e.pointer {
        Some(p) => info.with_field(p.clone()),
        None => info,
    }
}

fn violation_error(v: &[crate::plugin::schema::Violation]) -> ErrorInfo {
    let first = &v[0];
    let mut message = first.message.clone();
    if v.len() > 1 {
        message.push_str(&format!(
            " ({} more problems listed in details)",
            v.len() - 1
        ));
    }
    let mut info = ErrorCode::InvalidArguments
        .info(message)
        .with_field(first.field.clone())
        .with_expected(first.expected.clone())
        .with_actual(first.actual.clone());
    if v.len() > 1 {
        info = info.with_details(serde_json::json!({
            "violations": v.iter().map(|x| serde_json::json!({
                "field": x.field, "expected": x.expected, "actual": x.actual, "message": x.message,
            })).collect::<Vec<_>>()
        }));
    }
    info
}

fn failure_error(f: &Failure, limits: &Limits) -> ErrorInfo {
    match f {
        Failure::Timeout => ErrorCode::Timeout.info(format!("the call did not finish within {} ms", limits.timeout.as_millis()),
        ),
        Failure::FuelExhausted => ErrorCode::FuelExhausted.info(format!("the call used up its fuel ({} units) before finishing", limits.fuel),
        ),
        Failure::MemoryExhausted => ErrorCode::MemoryExhausted.info(format!("the call needed more than {} MiB of memory", limits.memory_bytes >> 20),
        ),
        Failure::OutputTooLarge { bytes } => ErrorCode::OutputTooLarge
            .info(format!(
                "the output was {bytes} bytes; the limit is {}. Ask for less (a smaller window or page).",
                limits.max_output_bytes
            ))
            .with_actual(format!("{bytes} bytes"))
            .with_expected(format!("at most {} bytes", limits.max_output_bytes)),
        Failure::Crashed { reason } => ErrorCode::PluginCrashed.info(format!("the plugin crashed: {reason}"),
        ),
        Failure::Unavailable { reason } => ErrorCode::PluginUnavailable.info(reason.clone()),
        Failure::Cancelled => ErrorCode::Timeout.info("the call was cancelled before it finished"),
        Failure::InputRequired { question } => {
            let mut info = ErrorCode::InputRequired.info(format!(
                "the tool asked the person a question ({}) that this request cannot wait for; send the call again with the answer",
                question.key
            ));
            info.details = Some(serde_json::json!({ "question": question }));
            info
        }
    }
}

fn quote_list(names: &[String]) -> String {
    names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(" or ")
}
