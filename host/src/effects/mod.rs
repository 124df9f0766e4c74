//! Side effects that are safe to retry: the policy each level gets.
//!
//! | level        | key needed | record store | approval |
//! |--------------|------------|--------------|----------|
//! | read-only    | no         | no           | no       |
//! | idempotent   | yes        | yes          | no       |
//! | reversible   | yes        | yes          | no       |
//! | irreversible | yes        | yes          | a plan token from a [`Mode::Plan`](crate::call::Mode::Plan) call |
//!
//! A side-effecting call claims its key in the [`Store`] before it runs:
//!
//! - **acquired** → it runs; an outcome that ran to the end (success or the
//!   tool's own error) completes the record; one that may have acted
//!   (trap, timeout, crash: status `unknown`) marks it in doubt; one where
//!   nothing started (the sandbox could not be built) releases it;
//! - **completed** → the stored observation is returned, `replayed: true`,
//!   its output byte for byte;
//! - **in flight** → `in_flight`, retry later; **conflict** (same key, other
//!   arguments) → `idempotency_conflict`;
//! - **in doubt** → the plugin's `probe` is asked first: done settles the
//!   record with the probed result, not-done settles it and the call runs;
//!   unknown (or no probe) → `in_doubt` until an operator settles it
//!   (`toolhost settle`);
//! - the store cannot be reached → `store_unavailable`; nothing runs.
//!
//! Nothing is recorded for a call rejected before execution (steps 1–4).
//!
//! Plans bind a tool, its canonical arguments and a digest of every target
//! path as it was when planned (a file's SHA-256; for a directory, a digest
//! of its sorted listing — names, types, sizes and file digests, bounded:
//! see [`target_digest`]; `null` for a path that does not exist); the token
//! is an HMAC under the host key. Running the irreversible call needs that
//! token, and it is refused with `stale_plan` and nothing runs when
//!
//! - a target changed since the plan;
//! - the plan expired (a plan lives [`DEFAULT_PLAN_TTL`] unless
//!   [`EffectGuard::with_plan_ttl`] says otherwise);
//! - the call is made under another capability token than the plan (a plan
//!   is bound to the exact token that planned it, by a hash of its final
//!   signature, or to no token);
//! - the plan already approved a call under another idempotency key: a plan
//!   approves one logical call. Its first use is recorded in the store
//!   (under `plan-use:` and the token's signature, with the call's key in
//!   place of an argument digest), so a second call with another key is
//!   refused while a retry of the same call (the same key, e.g. after an
//!   in-doubt record was settled as not done) is still approved.
//!
//! Beside the guard, this folder holds what it keeps and takes:
//! [`approval`] (the calls a person approves), [`idempotency`] (keys, the
//! record under a key, and the [`Store`] trait through which a store hands
//! out its other tables) and [`resource`] (resource keys, the locks that
//! keep conflicting calls apart, and batches).

pub mod approval;
pub mod idempotency;
pub mod resource;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::call::KeySource;
use crate::call::{CallOptions, Prepared};
use crate::descriptor::SideEffect;
use crate::effects::approval::{Approval, Approvals};
use crate::effects::idempotency::{Claim, Settlement, Store};
use crate::observation::{ErrorCode, Observation};
use crate::sandbox::ProbeOutcome;

/// Extra lease time beyond a call's deadline.
pub const LEASE_MARGIN: Duration = Duration::from_secs(30);

/// Longest explicit idempotency key, in characters.
pub const MAX_KEY_CHARS: usize = 256;

/// How long a plan token approves its call by default: 5 minutes.
pub const DEFAULT_PLAN_TTL: Duration = Duration::from_secs(5 * 60);

/// Most entries (files, directories, links) a directory target may hold to
/// be planned: a bigger tree cannot be pinned, so it is refused.
pub const MAX_DIGEST_ENTRIES: usize = 100_000;

/// File bytes a directory target's digest reads; beyond that, files are
/// pinned by size, modification and change times and inode instead.
pub const MAX_DIGEST_BYTES: u64 = 64 << 20;

/// The side-effect guard: the record store and the host key that derives
/// idempotency keys and signs plans. A host given one runs side-effecting
/// tools ([`Host::with_records`](crate::pipeline::Host::with_records)).
#[derive(Clone)]
pub struct EffectGuard {
    store: Arc<dyn Store>,
    host_key: Arc<[u8]>,
    lease_margin: Duration,
    plan_ttl: Duration,
    /// The store's capability ledger (budgets, revocations), if it keeps one.
    ledger: Option<Arc<dyn crate::policy::budget::BudgetLedger>>,
    /// The store's approvals ([`crate::effects::approval`]), if it keeps them.
    approvals: Option<Approvals>,
}

impl EffectGuard {
    pub fn new(store: Arc<dyn Store>, host_key: &[u8]) -> EffectGuard {
        EffectGuard {
            ledger: store.clone().capability_ledger(),
            approvals: store
                .clone()
                .approvals()
                .map(|b| Approvals::new(b).with_journal(store.clone().journal())),
            store,
            host_key: host_key.into(),
            lease_margin: LEASE_MARGIN,
            plan_ttl: DEFAULT_PLAN_TTL,
        }
    }

    /// The revealed tools kept in the store ([`Store::reveals`]), if it
    /// shares them between hosts.
    pub fn reveals(&self) -> Option<Arc<dyn crate::tools::reveal::RevealBackend>> {
        self.store.clone().reveals()
    }

    /// The capability ledger kept in the store ([`Store::capability_ledger`]):
    /// a host with these records counts `max_calls`/`budget_fuel` and
    /// checks revocations there.
    pub fn ledger(&self) -> Option<&Arc<dyn crate::policy::budget::BudgetLedger>> {
        self.ledger.as_ref()
    }

    /// How long a plan token approves its call (default
    /// [`DEFAULT_PLAN_TTL`]). Keep it below the store's retention, which
    /// keeps the record of a plan's use.
    pub fn with_plan_ttl(mut self, ttl: Duration) -> EffectGuard {
        self.plan_ttl = ttl;
        self
    }

    /// How long a pending approval waits for a person, and an approved one
    /// for the agent's retry (default
    /// [`DEFAULT_APPROVAL_TTL`](crate::effects::approval::DEFAULT_APPROVAL_TTL)).
    pub fn with_approval_ttl(mut self, ttl: Duration) -> EffectGuard {
        self.approvals = self.approvals.map(|a| a.with_ttl(ttl));
        self
    }

    /// The store's approvals, if it keeps them.
    pub fn approvals(&self) -> Option<&Approvals> {
        self.approvals.as_ref()
    }

    /// How much longer than a call's deadline its lease lasts (default
    /// [`LEASE_MARGIN`]). After the lease, a record whose host died reads
    /// as in doubt.
    pub fn with_lease_margin(mut self, margin: Duration) -> EffectGuard {
        self.lease_margin = margin;
        self
    }

    pub fn store(&self) -> &dyn Store {
        &*self.store
    }

    /// The store's records by state, for a metrics gauge (a store that
    /// cannot list them counts none).
    pub fn counts_by_state(&self) -> Vec<(&'static str, i64)> {
        idempotency::counts_by_state(self.store())
    }

    fn key_for(&self, p: &Prepared<'_>, source: &KeySource, canonical_args: &str) -> String {
        match source {
            KeySource::Explicit(k) => k.clone(),
            KeySource::Derived {
                trajectory_id,
                turn,
                call_id,
            } => idempotency::derive_key(
                &self.host_key,
                trajectory_id,
                *turn,
                call_id,
                &p.tool.descriptor.name,
                canonical_args,
            ),
        }
    }

    fn sign(&self, payload: &[u8]) -> String {
        let mut mac =
            <Hmac<Sha256> as Mac>::new_from_slice(&self.host_key).expect("any key length");
        mac.update(b"toolhost/plan/v1\0");
        mac.update(payload);
        hex::encode(mac.finalize().into_bytes())
    }
}

/// The request state of a multi round-trip call
/// ([`crate::effects::approval::request_state`]).
impl EffectGuard {
    /// The signed request state of pending approval `id`, accepted until
    /// the approval expires or `max_ttl` from now, whichever comes first.
    pub fn seal_request_state(
        &self,
        id: &str,
        max_ttl: Duration,
    ) -> Result<String, (ErrorCode, String)> {
        let approvals = self.approvals.as_ref().ok_or((
            ErrorCode::ApprovalRequired,
            "this host's record store keeps no approvals".to_string(),
        ))?;
        let a = approvals
            .backend()
            .and_then(|b| b.get(id))
            .map_err(|e| (ErrorCode::StoreUnavailable, e.to_string()))?
            .ok_or((ErrorCode::Internal, format!("no approval {id}")))?;
        let state = approval::request_state::RequestState {
            approval_id: a.id,
            capability: a.capability,
            tool: a.tool,
            args_digest: a.args_digest,
            targets: a.targets,
            plan_digest: a.plan_digest,
            expires_at_ms: a.expires_ms.min(unix_ms(SystemTime::now() + max_ttl)),
        };
        Ok(approval::request_state::seal(&self.host_key, &state))
    }

    /// Opens request state `text` that came back with a call of `tool`
    /// with canonical arguments `canonical_args` by the capability token
    /// of binding `capability`, and spends it: a state is accepted once,
    /// by every host sharing this store (its use is recorded under
    /// `request-state:` and its signature). Refused with
    /// `invalid_request_state` (or `store_unavailable`).
    pub fn spend_request_state(
        &self,
        text: &str,
        capability: &str,
        tool: &str,
        canonical_args: &str,
    ) -> Result<approval::request_state::RequestState, (ErrorCode, String)> {
        use approval::request_state::{open, StateError};
        let refused = |e: StateError| (ErrorCode::InvalidRequestState, e.to_string());
        let (state, sig) = open(&self.host_key, text).map_err(refused)?;
        state
            .check(
                capability,
                tool,
                &idempotency::args_digest(canonical_args),
                unix_ms(SystemTime::now()),
            )
            .map_err(refused)?;
        let use_key = format!("request-state:{sig}");
        let unavailable = |e: idempotency::StoreError| {
            (
                ErrorCode::StoreUnavailable,
                format!("the record store cannot be reached, so the call did not run: {e}"),
            )
        };
        match self
            .store
            .claim(
                &use_key,
                "request-state",
                &state.approval_id,
                Duration::from_secs(30),
            )
            .map_err(unavailable)?
        {
            Claim::Acquired { fence } => {
                self.store
                    .complete(&use_key, fence, "{}")
                    .map_err(unavailable)?;
                Ok(state)
            }
            _ => Err(refused(StateError::Used)),
        }
    }
}

/// The input state of a stateless call whose tool asks
/// ([`crate::ask::InputState`]), signed under the host key.
impl EffectGuard {
    /// The signed text of `state`.
    pub fn seal_input_state(&self, state: &crate::ask::InputState) -> String {
        state.seal(&self.host_key)
    }

    /// The input state `text` carries, checked against the call it came
    /// back with.
    pub fn open_input_state(
        &self,
        text: &str,
        tool: &str,
        args_digest: &str,
        capability: &str,
    ) -> Result<crate::ask::InputState, crate::ask::StateError> {
        crate::ask::InputState::open(&self.host_key, text, tool, args_digest, capability)
    }
}

/// What the guard calls back into the pipeline for: running a call it let
/// through under its key (steps 6–7), and turning a probe's output into an
/// observation (step 7).
pub(crate) struct Runner<'r> {
    pub run: &'r dyn Fn(&str) -> Observation,
    pub normalize: &'r dyn Fn(&str) -> Observation,
    /// The tool's dry run, as a plan a person reads (`null` for a tool
    /// without one), or the observation of its failure.
    pub plan: &'r dyn Fn() -> Result<Value, Box<Observation>>,
}

impl EffectGuard {
    /// The record-store path of a side-effecting call (step 5): the guard
    /// the pipeline calls; `runner` runs what it lets through.
    pub(crate) fn guard(
        &self,
        p: &Prepared<'_>,
        opts: &CallOptions,
        runner: &Runner<'_>,
    ) -> Observation {
        let records = self;
        let t = p.tool;
        let (name, level) = (t.descriptor.name.as_str(), t.descriptor.side_effect);
        let fail = |code: ErrorCode, msg: String| {
            Observation::failure(&p.call_id, name, level, code.info(msg))
        };
        // The pipeline made `p.args` the canonical text of the arguments.
        let canonical_args = p.args.as_str();
        let Some(source) = &opts.idempotency else {
            return fail(
                ErrorCode::IdempotencyKeyRequired,
                format!(
                    "`{name}` is {} and runs only with an idempotency key: pass the trajectory id, turn and call id (or an explicit key; over MCP in `_meta`, see docs/mcp.md) so a retry of the same logical call is recognised",
                    level.as_str()
                ),
            );
        };
        if let KeySource::Explicit(k) = source {
            if k.trim().is_empty() || k.chars().count() > MAX_KEY_CHARS {
                return Observation::failure(
                    &p.call_id,
                    name,
                    level,
                    ErrorCode::IdempotencyKeyRequired
                        .info(format!(
                            "the idempotency key must be 1-{MAX_KEY_CHARS} characters and not blank; a blank key would name every call alike"
                        ))
                        .with_expected(format!("a key of 1-{MAX_KEY_CHARS} characters"))
                        .with_actual(if k.is_empty() {
                            "an empty key".to_string()
                        } else {
                            format!("{} characters", k.chars().count())
                        }),
                );
            }
        }
        let key = records.key_for(p, source, canonical_args);
        let digest = idempotency::args_digest(canonical_args);
        let lease = p.limits.timeout + records.lease_margin;
        for _attempt in 0..2 {
            let claim = match records.store.claim(&key, name, &digest, lease) {
                Ok(c) => c,
                Err(e) => {
                    return fail(
                        ErrorCode::StoreUnavailable,
                        format!(
                            "the idempotency store cannot be reached, so the call did not run: {e}"
                        ),
                    )
                    .with_idempotency_key(&key)
                }
            };
            match claim {
                Claim::Acquired { fence } => {
                    // The approval is checked once the key is ours, so a
                    // repeat of a completed call still replays.
                    if p.needs_approval() {
                        if let Err(obs) = self.approve(p, opts, canonical_args, &key, runner) {
                            // Nothing ran: free the key.
                            let _ = records.store.release(&key, fence);
                            return *obs;
                        }
                    }
                    return self.run_claimed(&key, fence, runner);
                }
                Claim::Completed { observation } => return replay(&observation, &p.call_id, name, level, &key),
                Claim::InFlight { .. } => {
                    return fail(ErrorCode::InFlight, "a call with this idempotency key is still running; retry in a moment".into())
                        .with_idempotency_key(&key)
                }
                Claim::Conflict { .. } => {
                    return fail(
                        ErrorCode::IdempotencyConflict,
                        "this idempotency key was already used with other arguments; a different call needs a different key".into(),
                    )
                    .with_idempotency_key(&key)
                }
                Claim::InDoubt { reason } => match self.settle_by_probe(p, &key, runner) {
                    Some(Settled::Done(obs)) => return *obs,
                    Some(Settled::NotDone) => continue,
                    None => {
                        return fail(
                            ErrorCode::InDoubt,
                            format!("an earlier call with this key may have taken effect ({reason}) and the tool cannot tell; it is not retried until an operator settles it (toolhost settle KEY --done | --not-done)"),
                        )
                        .with_idempotency_key(&key)
                    }
                },
            }
        }
        fail(ErrorCode::InDoubt, "the record could not be settled".into())
            .with_idempotency_key(&key)
    }

    fn run_claimed(&self, key: &str, fence: u64, runner: &Runner<'_>) -> Observation {
        let records = self;
        let obs = (runner.run)(key);
        // Nothing started, or the tool stopped at a question for the
        // person: the call runs again under this key with the answer.
        let nothing_started = obs.error.as_ref().is_some_and(|e| {
            e.code == ErrorCode::PluginUnavailable.as_str()
                || e.code == ErrorCode::InputRequired.as_str()
        });
        let recorded = if nothing_started {
            records.store.release(key, fence)
        } else if obs.status == crate::observation::Status::Unknown {
            let reason = obs
                .error
                .as_ref()
                .map_or("unknown", |e| e.code.as_str())
                .to_string();
            records.store.mark_in_doubt(key, fence, &reason)
        } else {
            match serde_json::to_string(&obs) {
                Ok(text) => records.store.complete(key, fence, &text),
                Err(_) => records
                    .store
                    .mark_in_doubt(key, fence, "unserializable observation"),
            }
        };
        if let Err(e) = recorded {
            // The effect happened (or may have); only the record is missing.
            let mut obs = obs;
            if let Some(err) = &mut obs.error {
                err.message
                    .push_str(&format!(" (recording the outcome failed: {e})"));
            }
            return obs;
        }
        obs
    }

    fn settle_by_probe(&self, p: &Prepared<'_>, key: &str, runner: &Runner<'_>) -> Option<Settled> {
        let records = self;
        let t = p.tool;
        if !t.descriptor.supports_probe {
            return None;
        }
        let outcome = t.plugin.probe(&p.request(Some(key)), key);
        match outcome.result {
            Ok(Ok(ProbeOutcome::Done(out))) => {
                let obs = (runner.normalize)(&out).with_idempotency_key(key);
                if !obs.is_ok() {
                    return None;
                }
                let text = serde_json::to_string(&obs).ok()?;
                records.store.settle(key, Settlement::Done(text)).ok()?;
                Some(Settled::Done(Box::new(obs.with_replayed(true))))
            }
            Ok(Ok(ProbeOutcome::NotDone)) => {
                records.store.settle(key, Settlement::NotDone).ok()?;
                Some(Settled::NotDone)
            }
            _ => None,
        }
    }

    /// A plan token for a prepared call whose dry-run succeeded: an HMAC
    /// under the host key over the tool, a digest of its canonical
    /// arguments, its targets' digests, an expiry and the capability token
    /// that planned it.
    pub(crate) fn issue_plan(
        &self,
        p: &Prepared<'_>,
        canonical_args: &str,
    ) -> Result<IssuedPlan, (ErrorCode, String)> {
        let targets = match target_digests(p) {
            Ok(t) => t,
            Err(e) => return Err((ErrorCode::InvalidArguments, e)),
        };
        let mut nonce = [0u8; 16];
        if getrandom::fill(&mut nonce).is_err() {
            return Err((
                ErrorCode::Internal,
                "no randomness for the plan token's nonce".into(),
            ));
        }
        let expires_at_ms = unix_ms(SystemTime::now() + self.plan_ttl);
        let payload = json!({
            "tool": p.tool.descriptor.name,
            "args_digest": idempotency::args_digest(canonical_args),
            "targets": targets,
            "expires_at_ms": expires_at_ms,
            "nonce": hex::encode(nonce),
            "capability": p.capability,
        });
        let payload_text = payload.to_string();
        let token = format!(
            "{}.{}",
            base64_url(payload_text.as_bytes()),
            self.sign(payload_text.as_bytes())
        );
        Ok(IssuedPlan {
            token,
            targets: payload["targets"].clone(),
            expires_at_ms,
        })
    }

    /// Whether this call, which needs an approval and holds idempotency
    /// `key`, may run: with an approval id, that approval decides; a token
    /// with `self_approve` approves with its own plan token; any other call
    /// is asked of a person and ends `approval_pending`.
    fn approve(
        &self,
        p: &Prepared<'_>,
        opts: &CallOptions,
        canonical_args: &str,
        key: &str,
        runner: &Runner<'_>,
    ) -> Result<(), Box<Observation>> {
        if let Some(answer) = &opts.answer {
            let id = self.take_answer(p, answer, canonical_args)?;
            return self.check_approval(p, &id, canonical_args, key);
        }
        if let Some(id) = opts.approval.as_deref() {
            return self.check_approval(p, id.trim(), canonical_args, key);
        }
        if p.self_approve {
            return self.check_plan(p, canonical_args, opts.plan_token.as_deref(), key);
        }
        Err(self.ask_person(p, opts, canonical_args, runner))
    }

    /// The approval a multi round-trip retry answers: its request state is
    /// opened, checked against this call and spent (once, across hosts);
    /// then the person's decision, if they made one, is recorded.
    fn take_answer(
        &self,
        p: &Prepared<'_>,
        answer: &crate::call::ApprovalAnswer,
        canonical_args: &str,
    ) -> Result<String, Box<Observation>> {
        let name = p.tool.descriptor.name.as_str();
        let fail = |(code, msg): (ErrorCode, String)| {
            Box::new(Observation::failure(
                &p.call_id,
                name,
                p.level,
                code.info(msg),
            ))
        };
        let state = self
            .spend_request_state(
                &answer.request_state,
                p.capability.as_deref().unwrap_or_default(),
                name,
                canonical_args,
            )
            .map_err(fail)?;
        if let (Some(approve), Some(approvals)) = (answer.approve, &self.approvals) {
            // An approval decided meanwhile (at a terminal) keeps that
            // decision; the check that follows reads it.
            approvals
                .decide(
                    &state.approval_id,
                    approve,
                    &answer.by,
                    answer.note.as_deref(),
                )
                .map_err(|e| {
                    fail((
                        ErrorCode::StoreUnavailable,
                        format!("the answer could not be recorded, so the call did not run: {e}"),
                    ))
                })?;
        }
        Ok(state.approval_id)
    }

    /// Runs the dry run, keeps the plan as a pending [`Approval`] and
    /// answers `approval_pending` with its id and the follow-up.
    fn ask_person(
        &self,
        p: &Prepared<'_>,
        opts: &CallOptions,
        canonical_args: &str,
        runner: &Runner<'_>,
    ) -> Box<Observation> {
        let name = p.tool.descriptor.name.as_str();
        let fail = |code: ErrorCode, msg: String| {
            Box::new(Observation::failure(
                &p.call_id,
                name,
                p.level,
                code.info(msg),
            ))
        };
        let Some(approvals) = &self.approvals else {
            return fail(
                ErrorCode::ApprovalRequired,
                crate::messages::approval_unavailable(name),
            );
        };
        let plan = match (runner.plan)() {
            Ok(plan) => plan,
            Err(obs) => return obs,
        };
        let targets = match target_digests(p) {
            Ok(t) => t,
            Err(e) => return fail(ErrorCode::InvalidArguments, e),
        };
        let Ok(id) = approval::new_id() else {
            return fail(
                ErrorCode::Internal,
                "the system gave no randomness for the approval id".into(),
            );
        };
        let args_digest = idempotency::args_digest(canonical_args);
        let created_ms = approval::now_ms();
        let record = Approval {
            plan_digest: approval::plan_digest(name, &args_digest, &targets, &plan),
            id,
            state: approval::State::Pending,
            tool: name.to_string(),
            args: canonical_args.to_string(),
            args_digest,
            targets,
            plan,
            capability: p.capability.clone().unwrap_or_default(),
            token_chain: p.chain.clone(),
            requested_by: opts.requested_by.clone(),
            created_ms,
            expires_ms: created_ms.saturating_add(approvals.ttl().as_millis() as u64),
            decided_ms: None,
            decided_by: None,
            note: None,
            used_by: None,
        };
        if let Err(e) = approvals.ask(&record) {
            return fail(
                ErrorCode::StoreUnavailable,
                format!("the approval could not be recorded, so the call did not run: {e}"),
            );
        }
        Box::new(pending(p, &record, false))
    }

    /// Whether approval `id` approves this call; on success it is spent on
    /// `key`.
    fn check_approval(
        &self,
        p: &Prepared<'_>,
        id: &str,
        canonical_args: &str,
        key: &str,
    ) -> Result<(), Box<Observation>> {
        let name = p.tool.descriptor.name.as_str();
        let fail = |code: ErrorCode, msg: String| {
            Err(Box::new(Observation::failure(
                &p.call_id,
                name,
                p.level,
                code.info(msg),
            )))
        };
        let unavailable = |e: idempotency::StoreError| {
            fail(
                ErrorCode::StoreUnavailable,
                format!("the approvals cannot be read, so the call did not run: {e}"),
            )
        };
        let Some(approvals) = &self.approvals else {
            return fail(
                ErrorCode::ApprovalRequired,
                crate::messages::approval_unavailable(name),
            );
        };
        let found = match approvals.backend().and_then(|b| b.get(id)) {
            Ok(found) => found,
            Err(e) => return unavailable(e),
        };
        let Some(a) = found.filter(|_| approval::is_id(id)) else {
            return fail(ErrorCode::Denied, crate::messages::approval_unknown(id));
        };
        // An approval approves a call by the token that asked for it.
        if Some(&a.capability) != p.capability.as_ref() {
            return fail(
                ErrorCode::Denied,
                format!("approval {id} was asked for under another capability token; an approval approves only calls by the token that asked for it. Nothing ran"),
            );
        }
        if a.tool != name || a.args_digest != idempotency::args_digest(canonical_args) {
            return fail(
                ErrorCode::Denied,
                format!("approval {id} approves a different call (another tool or other arguments); nothing ran"),
            );
        }
        let now = approval::now_ms();
        match a.state {
            approval::State::Denied => {
                return Err(Box::new(Observation::failure(
                    &p.call_id,
                    name,
                    p.level,
                    ErrorCode::ApprovalDeclined
                        .info(crate::messages::approval_declined(
                            &a.id,
                            a.decided_by.as_deref(),
                            a.note.as_deref(),
                        ))
                        .with_details(json!({
                            "approval_id": a.id,
                            "decided_by": a.decided_by,
                            "note": a.note,
                        })),
                )))
            }
            _ if a.expired(now) && a.used_by.as_deref() != Some(key) => {
                return fail(
                    ErrorCode::StalePlan,
                    crate::messages::approval_expired(
                        &a.id,
                        a.expires_ms,
                        a.state == approval::State::Pending,
                    ),
                )
            }
            approval::State::Pending => return Err(Box::new(pending(p, &a, true))),
            approval::State::Approved => {}
        }
        match target_digests(p) {
            Ok(now) if now == a.targets => {}
            _ => {
                return fail(
                    ErrorCode::StalePlan,
                    format!("a target changed since approval {id} was asked for; nothing ran. Call again without the approval id to ask for the new plan to be approved"),
                )
            }
        }
        match approvals.backend().and_then(|b| b.take(id, key)) {
            Ok(approval::Take::Taken) => Ok(()),
            Ok(approval::Take::UsedBy(_)) => fail(
                ErrorCode::StalePlan,
                format!("approval {id} already approved another call (another idempotency key); an approval approves one call. Nothing ran"),
            ),
            Ok(approval::Take::NotApproved) => fail(
                ErrorCode::StalePlan,
                format!("approval {id} is no longer approved; nothing ran"),
            ),
            Err(e) => unavailable(e),
        }
    }

    /// Whether `token` approves this call, which holds idempotency `key`;
    /// on success the plan's use by `key` is recorded.
    fn check_plan(
        &self,
        p: &Prepared<'_>,
        canonical_args: &str,
        token: Option<&str>,
        key: &str,
    ) -> Result<(), Box<Observation>> {
        let records = self;
        let name = p.tool.descriptor.name.as_str();
        let level = p.tool.descriptor.side_effect;
        let fail = |code: ErrorCode, msg: &str| {
            Err(Box::new(Observation::failure(
                &p.call_id,
                name,
                level,
                code.info(msg.to_string()),
            )))
        };
        let Some(token) = token else {
            return fail(
                ErrorCode::ApprovalRequired,
                "this tool is irreversible: plan the call first (a dry run: `toolhost plan`, or `_meta[\"dev.toolhost/dry_run\"]: true` over MCP), have the plan approved, then call again with its plan token (`--plan-token`, or `_meta[\"dev.toolhost/plan_token\"]`)",
            );
        };
        let Some((payload_b64, sig)) = token.split_once('.') else {
            return fail(ErrorCode::Denied, "the plan token is malformed");
        };
        let Some(payload) = base64_url_decode(payload_b64) else {
            return fail(ErrorCode::Denied, "the plan token is malformed");
        };
        let expected = records.sign(&payload);
        if !constant_time_eq(expected.as_bytes(), sig.as_bytes()) {
            return fail(
                ErrorCode::Denied,
                "the plan token was not issued by this host",
            );
        }
        let Ok(payload) = serde_json::from_slice::<Value>(&payload) else {
            return fail(ErrorCode::Denied, "the plan token is malformed");
        };
        if payload["tool"] != name
            || payload["args_digest"] != idempotency::args_digest(canonical_args)
        {
            return fail(
                ErrorCode::Denied,
                "the plan token approves a different call (another tool or other arguments)",
            );
        }
        let Some(expires_at_ms) = payload["expires_at_ms"].as_u64() else {
            return fail(ErrorCode::Denied, "the plan token is malformed");
        };
        // A plan approves a call by the capability token that planned it.
        let planned_by = payload["capability"].as_str();
        if planned_by != p.capability.as_deref() {
            return fail(
                ErrorCode::Denied,
                "the plan token was made under another capability token; a plan approves only calls by the token that planned it. Nothing ran",
            );
        }
        if unix_ms(SystemTime::now()) >= expires_at_ms {
            return fail(
                ErrorCode::StalePlan,
                "the plan token expired; nothing ran. Plan again and get the new plan approved",
            );
        }
        match target_digests(p) {
            Ok(now) if now == payload["targets"] => {}
            _ => return fail(ErrorCode::StalePlan, "a target changed since the plan was made; nothing ran. Plan again and get the new plan approved"),
        }
        // One plan, one logical call: record which key used it.
        let use_key = format!("plan-use:{sig}");
        let lease = Duration::from_secs(30);
        match records.store.claim(&use_key, "plan-use", key, lease) {
            Ok(Claim::Acquired { fence }) => {
                let note = json!({ "plan_used_by": key }).to_string();
                if let Err(e) = records.store.complete(&use_key, fence, &note) {
                    return fail(
                        ErrorCode::StoreUnavailable,
                        &format!("recording the plan's use failed, so the call did not run: {e}"),
                    );
                }
                Ok(())
            }
            // Used before by this same call (a retry after a not-done settlement).
            Ok(Claim::Completed { .. }) => Ok(()),
            Ok(Claim::Conflict { .. }) => fail(
                ErrorCode::StalePlan,
                "this plan token already approved another call (another idempotency key); a plan approves one call. Nothing ran. Plan again and get the new plan approved",
            ),
            Ok(Claim::InFlight { .. } | Claim::InDoubt { .. }) => fail(
                ErrorCode::StalePlan,
                "this plan token is being used by another call; a plan approves one call. Nothing ran. Plan again and get the new plan approved",
            ),
            Err(e) => fail(
                ErrorCode::StoreUnavailable,
                &format!("the idempotency store cannot be reached, so the call did not run: {e}"),
            ),
        }
    }
}

/// A plan token and what it binds, as [`EffectGuard::issue_plan`] made it.
pub(crate) struct IssuedPlan {
    pub token: String,
    /// Each target path's digest when planned.
    pub targets: Value,
    pub expires_at_ms: u64,
}

/// The `approval_pending` observation of approval `a` (`again`: the
/// agent called with an id nobody has decided yet).
fn pending(p: &Prepared<'_>, a: &Approval, again: bool) -> Observation {
    let name = p.tool.descriptor.name.as_str();
    let why = if p.asks && p.level != SideEffect::Irreversible {
        "it writes under an `ask_write` prefix, outside the token's write prefixes"
    } else {
        "it is irreversible and this token may not approve its own plans (no `self_approve` right)"
    };
    let info = ErrorCode::ApprovalPending
        .info(crate::messages::approval_pending(name, why, &a.id, a.expires_ms, again))
        .with_details(json!({
            "approval_id": a.id,
            "expires_at_ms": a.expires_ms,
            "plan_digest": a.plan_digest,
            "targets": a.targets,
            "plan": a.plan,
            "follow_up": {
                "person": [format!("toolhost approvals show {}", a.id), format!("toolhost approvals approve {}", a.id), format!("toolhost approvals deny {} --note TEXT", a.id)],
                "agent": format!("call `{name}` again with the same arguments and the approval id: `--approval {}` on the command line, `_meta[\"dev.toolhost/approval\"]` over MCP", a.id),
            },
        }));
    Observation::failure(&p.call_id, name, p.level, info)
}

enum Settled {
    Done(Box<Observation>),
    NotDone,
}

/// A stored observation, replayed: same output bytes, `replayed: true`.
fn replay(stored: &str, call_id: &str, tool: &str, level: SideEffect, key: &str) -> Observation {
    match serde_json::from_str::<Observation>(stored) {
        Ok(obs) => obs.with_replayed(true),
        Err(e) => Observation::failure(
            call_id,
            tool,
            level,
            ErrorCode::Internal.info(format!(
                "the stored result for this key cannot be read: {e}"
            )),
        )
        .with_idempotency_key(key),
    }
}

/// The digest of each path argument's target ([`target_digest`]), or why
/// one cannot be pinned.
fn target_digests(p: &Prepared<'_>) -> Result<Value, String> {
    let mut out = Vec::new();
    for arg in p.tool.input.path_args(&p.value) {
        let path = p.workspace_root.join(arg.value);
        let digest = target_digest(&path).map_err(|e| format!("target `{}`: {e}", arg.value))?;
        out.push(json!({ "path": arg.value, "sha256": digest }));
    }
    Ok(Value::Array(out))
}

/// What a plan pins of one target, read without following a symbolic link
/// and without opening anything but regular files and directories:
///
/// - `None` when it does not exist;
/// - a regular file: the SHA-256 of its content;
/// - a directory: `dir:` and the SHA-256 of its listing, walked in name
///   order: each entry's relative path, type, size and, for a file, the
///   SHA-256 of its content (once [`MAX_DIGEST_BYTES`] were read, its size,
///   times and inode instead), for a link its target. A tree of more than
///   [`MAX_DIGEST_ENTRIES`] entries is an error: it cannot be pinned;
/// - a symbolic link: `link:` and the SHA-256 of its target path;
/// - anything else (a FIFO, a device): `other:` and its times and inode.
pub fn target_digest(path: &Path) -> Result<Option<String>, String> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot read it: {e}")),
    };
    let kind = meta.file_type();
    if kind.is_file() {
        return file_digest(path)
            .map(|d| Some(hex::encode(d)))
            .map_err(|e| format!("cannot read it: {e}"));
    }
    if kind.is_symlink() {
        let target = std::fs::read_link(path).map_err(|e| format!("cannot read it: {e}"))?;
        let digest = Sha256::digest(target.as_os_str().as_encoded_bytes());
        return Ok(Some(format!("link:{}", hex::encode(digest))));
    }
    if !kind.is_dir() {
        let digest = Sha256::digest(metadata_pin(&meta));
        return Ok(Some(format!("other:{}", hex::encode(digest))));
    }
    let mut listing = Sha256::new();
    let mut walk = DirWalk {
        entries: 0,
        bytes_read: 0,
    };
    walk.dir(path, "", &mut listing)?;
    Ok(Some(format!("dir:{}", hex::encode(listing.finalize()))))
}

/// SHA-256 of a regular file's content, read in chunks (not opened with a
/// path that could be a FIFO: callers check the type first).
fn file_digest(path: &Path) -> std::io::Result<[u8; 32]> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    std::io::copy(&mut file, &mut hasher)?;
    Ok(hasher.finalize().into())
}

struct DirWalk {
    entries: usize,
    bytes_read: u64,
}

impl DirWalk {
    fn dir(&mut self, dir: &Path, rel: &str, out: &mut Sha256) -> Result<(), String> {
        let io = |e: std::io::Error| format!("cannot list `{rel}`: {e}");
        let mut names: Vec<std::ffi::OsString> = std::fs::read_dir(dir)
            .map_err(io)?
            .map(|e| e.map(|e| e.file_name()))
            .collect::<Result<_, _>>()
            .map_err(io)?;
        names.sort();
        for name in names {
            self.entries += 1;
            if self.entries > MAX_DIGEST_ENTRIES {
                return Err(format!(
                    "the directory holds more than {MAX_DIGEST_ENTRIES} entries, too many to pin in a plan; plan a narrower target"
                ));
            }
            let path = dir.join(&name);
            let name = name.to_string_lossy();
            let child = if rel.is_empty() {
                name.into_owned()
            } else {
                format!("{rel}/{name}")
            };
            let meta = std::fs::symlink_metadata(&path)
                .map_err(|e| format!("cannot read `{child}`: {e}"))?;
            let kind = if meta.is_dir() {
                "dir"
            } else if meta.is_file() {
                "file"
            } else if meta.file_type().is_symlink() {
                "link"
            } else {
                "other"
            };
            // Length-prefixed fields: no two listings frame alike.
            for field in [child.as_bytes(), kind.as_bytes(), &meta.len().to_be_bytes()] {
                out.update((field.len() as u64).to_be_bytes());
                out.update(field);
            }
            match kind {
                "dir" => self.dir(&path, &child, out)?,
                "file" if self.bytes_read + meta.len() <= MAX_DIGEST_BYTES => {
                    self.bytes_read += meta.len();
                    let digest =
                        file_digest(&path).map_err(|e| format!("cannot read `{child}`: {e}"))?;
                    out.update(digest);
                }
                "link" => {
                    let target = std::fs::read_link(&path)
                        .map_err(|e| format!("cannot read `{child}`: {e}"))?;
                    out.update(target.as_os_str().as_encoded_bytes());
                }
                _ => out.update(metadata_pin(&meta)),
            }
        }
        Ok(())
    }
}

/// What pins a file without reading it: modification and change times and
/// inode (the change time moves on every write and cannot be set back).
fn metadata_pin(meta: &std::fs::Metadata) -> Vec<u8> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        [
            meta.mtime(),
            meta.mtime_nsec(),
            meta.ctime(),
            meta.ctime_nsec(),
            meta.ino() as i64,
            meta.dev() as i64,
        ]
        .iter()
        .flat_map(|v| v.to_be_bytes())
        .collect()
    }
    #[cfg(not(unix))]
    {
        let t = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos());
        t.to_be_bytes().to_vec()
    }
}

fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn base64_url(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

fn base64_url_decode(text: &str) -> Option<Vec<u8>> {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(text)
        .ok()
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    use subtle::ConstantTimeEq;
    a.len() == b.len() && bool::from(a.ct_eq(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn target_digests_pin_files_directories_and_links_without_following_them() {
        let dir = tempfile::tempdir().unwrap();
        let p = |rel: &str| dir.path().join(rel);
        assert_eq!(target_digest(&p("missing")).unwrap(), None);
        std::fs::write(p("f.txt"), "abc").unwrap();
        assert_eq!(
            target_digest(&p("f.txt")).unwrap().unwrap(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        std::fs::create_dir_all(p("d/sub")).unwrap();
        std::fs::write(p("d/sub/x"), "1").unwrap();
        let before = target_digest(&p("d")).unwrap().unwrap();
        assert!(before.starts_with("dir:"), "{before}");
        assert_eq!(target_digest(&p("d")).unwrap().unwrap(), before, "stable");
        std::fs::write(p("d/sub/x"), "2").unwrap();
        let changed = target_digest(&p("d")).unwrap().unwrap();
        assert_ne!(changed, before, "a nested change");
        std::fs::rename(p("d/sub/x"), p("d/sub/y")).unwrap();
        assert_ne!(
            target_digest(&p("d")).unwrap().unwrap(),
            changed,
            "a rename"
        );

        // Links are pinned by their target path, never read through: a
        // link to a file outside, as a target or inside a directory.
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "s1").unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), p("ln")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), p("d/ln")).unwrap();
        let (link, listing) = (
            target_digest(&p("ln")).unwrap().unwrap(),
            target_digest(&p("d")).unwrap().unwrap(),
        );
        assert!(link.starts_with("link:"), "{link}");
        std::fs::write(outside.path().join("secret"), "s2").unwrap();
        assert_eq!(target_digest(&p("ln")).unwrap().unwrap(), link);
        assert_eq!(target_digest(&p("d")).unwrap().unwrap(), listing);
    }
}
