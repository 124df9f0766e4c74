//! Step 8, record: what happens around every call once, whatever entry
//! point it came through.
//!
//! `Recorder::around` wraps a call: before it runs, the circuit breaker
//! ([`crate::record::breaker`]) may answer `circuit_open` instead; once its
//! observation is final, the breaker counts it (`consecutive_failures`),
//! the metrics ([`crate::record::metrics`]) count it and the journal
//! ([`crate::record::journal`]) gets its entry. The call path pays for copies and a
//! channel send; hashing and writing happen on the journal's thread.
//!
//! A call's conversation (whose failures the breaker counts together) is
//! [`CallOptions::conversation`] (an MCP session) or else the trajectory
//! of its key source under the token that makes the call; a call with
//! neither is not held by the breaker (its failures say
//! `consecutive_failures: 1`).
//!
//! What the recorder writes to sits beside it: [`breaker`], [`journal`]
//! (entries, the batched writer, statistics, the backend trait) and
//! [`metrics`] (Prometheus).

pub mod breaker;
pub mod journal;
pub mod metrics;

use std::sync::Arc;
use std::time::{Instant, SystemTime};

use crate::call::CallOptions;
use crate::call::KeySource;
use crate::observation::{Observation, Status};
use crate::plugin::catalog::Catalog;
use crate::record::breaker::Breaker;
use crate::record::journal::{Journal, Pending};
use crate::record::metrics::Metrics;

/// The journal, breaker and metrics of a host; cheap to clone, so every
/// generation of a server's host shares one.
/// How long a side-effecting call's answer waits for its journal entry to
/// be written.
const DURABLE_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

#[derive(Clone, Default, Debug)]
pub struct Recorder {
    pub journal: Option<Journal>,
    pub breaker: Arc<Breaker>,
    pub metrics: Option<Arc<Metrics>>,
}

/// Who is calling, as the record needs it.
pub struct Caller<'a> {
    pub tool: &'a str,
    pub args: &'a str,
    pub opts: &'a CallOptions,
    /// The token chain's ids, oldest first (a session's call).
    pub chain: &'a [crate::policy::capability::TokenId],
}

impl Caller<'_> {
    fn trajectory(&self) -> Option<(&str, u64)> {
        match &self.opts.idempotency {
            Some(KeySource::Derived {
                trajectory_id,
                turn,
                ..
            }) => Some((trajectory_id, *turn)),
            _ => None,
        }
    }

    /// The conversation and whether it is a trajectory (which the journal
    /// can seed the breaker from).
    fn conversation(&self) -> Option<(String, bool)> {
        if let Some(c) = &self.opts.conversation {
            return Some((format!("session:{c}"), false));
        }
        // A trajectory's failures count per token: one token's failures
        // never open the breaker for another token's identical call.
        self.trajectory()
            .map(|(t, _)| (format!("trajectory:{}:{t}", self.token_chain()), true))
    }

    /// The token chain's ids, oldest first, separated by one space (as the
    /// journal keeps it).
    fn token_chain(&self) -> String {
        let ids: Vec<String> = self.chain.iter().map(ToString::to_string).collect();
        ids.join(" ")
    }
}

impl Recorder {
    /// Runs `run` (one call of a tool of `catalog`) between the breaker and
    /// the record (see the module docs).
    pub(crate) fn around(
        &self,
        catalog: &Catalog,
        c: &Caller<'_>,
        run: impl FnOnce() -> Observation,
    ) -> Observation {
        let started = SystemTime::now();
        let clock = Instant::now();
        let r = self;
        let conversation = c.conversation();
        if let Some((conv, is_trajectory)) = &conversation {
            if *is_trajectory {
                self.seed_breaker(conv, c);
            }
        }
        let refused = conversation.as_ref().and_then(|(conv, _)| {
            if !r.breaker.is_open(conv, c.tool) {
                return None;
            }
            r.breaker.check(conv, c.tool, &journal::args_sha256(c.args))
        });
        let mut obs = match refused {
            Some(info) => {
                let count = info
                    .details
                    .as_ref()
                    .and_then(|d| d["consecutive_failures"].as_u64())
                    .unwrap_or(0);
                let call_id = c
                    .opts
                    .call_id
                    .clone()
                    .unwrap_or_else(crate::call::new_call_id);
                let level = catalog
                    .get(c.tool)
                    .map_or(crate::descriptor::SideEffect::ReadOnly, |t| {
                        t.descriptor.side_effect
                    });
                let mut obs = Observation::failure(&call_id, c.tool, level, info);
                obs.consecutive_failures = u32::try_from(count).unwrap_or(u32::MAX);
                obs
            }
            None => {
                let mut obs = run();
                let failure = obs.error.as_ref().map(|e| e.code.clone());
                obs.consecutive_failures = match (&conversation, failure) {
                    (_, None) if obs.status == Status::Ok => {
                        if let Some((conv, _)) = &conversation {
                            r.breaker.record(conv, c.tool, None);
                        }
                        0
                    }
                    (Some((conv, _)), Some(code)) => {
                        let digest = journal::args_sha256(c.args);
                        r.breaker.record(conv, c.tool, Some((&code, &digest)))
                    }
                    _ => 1,
                };
                obs
            }
        };
        if obs.status == Status::Ok {
            obs.consecutive_failures = 0;
        }
        let elapsed = clock.elapsed();
        if let Some(m) = &r.metrics {
            let known = catalog.get(c.tool).is_some()
                || crate::plugin::catalog::is_host_tool(c.tool)
                || catalog.refusal(c.tool).is_some();
            m.observe(&obs, elapsed, known);
        }
        if let Some(j) = &r.journal {
            j.append(pending(catalog, c, &obs, started, elapsed));
            // The entry of a call that may have acted is written before its
            // answer leaves the host, so a host killed right after answering
            // has it. A read-only call's entry is written with the next batch
            // (within the writer's batching window).
            let level = catalog
                .get(c.tool)
                .map_or(crate::descriptor::SideEffect::ReadOnly, |t| {
                    t.descriptor.side_effect
                });
            if level != crate::descriptor::SideEffect::ReadOnly && !j.flush(DURABLE_WAIT) {
                tracing::warn!(
                    "toolhost: the journal entry of {} was not written within {:?}",
                    c.tool,
                    DURABLE_WAIT
                );
            }
        }
        obs
    }

    /// Records a call refused before it reached the pipeline (an MCP
    /// `tools/call` of a tool the session cannot see, answered with a
    /// protocol error): journaled and counted like any refusal.
    pub fn refusal(
        &self,
        catalog: &Catalog,
        c: &Caller<'_>,
        info: crate::observation::ErrorInfo,
    ) -> Observation {
        self.around(catalog, c, || {
            let call_id = c
                .opts
                .call_id
                .clone()
                .unwrap_or_else(crate::call::new_call_id);
            Observation::failure(
                &call_id,
                c.tool,
                crate::descriptor::SideEffect::ReadOnly,
                info,
            )
        })
    }

    /// A trajectory's earlier calls of the tool, from the journal, into the
    /// breaker (once per trajectory and tool): the CLI runs one call per
    /// process.
    fn seed_breaker(&self, conv: &str, c: &Caller<'_>) {
        let r = self;
        let (Some(j), Some((trajectory, _))) = (&r.journal, c.trajectory()) else {
            return;
        };
        if r.breaker.threshold() == 0 {
            return;
        }
        r.breaker.seed(conv, c.tool, || {
            let filter = journal::Filter {
                tool: Some(c.tool.to_string()),
                trajectory: Some(trajectory.to_string()),
                token_chain: Some(c.token_chain()),
                limit: Some(r.breaker.threshold() as usize * 4),
                ..journal::Filter::default()
            };
            match j.backend().query(&filter) {
                Ok(entries) => entries
                    .into_iter()
                    .map(|e| (e.error_code, e.args_sha256))
                    .collect(),
                Err(e) => {
                    tracing::warn!(error = %e, "the breaker could not read the journal");
                    Vec::new()
                }
            }
        });
    }
}

/// The journal entry of a finished call.
fn pending(
    catalog: &Catalog,
    c: &Caller<'_>,
    obs: &Observation,
    started: SystemTime,
    elapsed: std::time::Duration,
) -> Pending {
    let started_us = journal::unix_us(started);
    let code = obs.error.as_ref().map(|e| e.code.clone());
    let args_valid = !code
        .as_deref()
        .is_some_and(|c| journal::stats::INVALID_CODES.contains(&c));
    let (trajectory, turn) = match c.trajectory() {
        Some((t, n)) => (Some(t.to_string()), Some(n)),
        None => (None, None),
    };
    Pending {
        call_id: obs.call_id.clone(),
        trajectory,
        turn,
        logical_key: c.opts.idempotency.as_ref().map(KeySource::logical_key),
        tool: obs.tool.clone(),
        tool_ref: catalog.get(c.tool).cloned(),
        token_chain: c.chain.iter().map(ToString::to_string).collect(),
        started_us,
        ended_us: started_us + i64::try_from(elapsed.as_micros()).unwrap_or(i64::MAX),
        status: obs.status.as_str(),
        error_code: code,
        args: c.args.to_string(),
        args_valid,
        output: (obs.status == Status::Ok)
            .then(|| match obs.output_text() {
                Some(text) => Some(journal::ResultOutput::Text(text.to_owned())),
                None => obs.output.clone().map(journal::ResultOutput::Value),
            })
            .flatten(),
        output_bytes: obs.usage.output_bytes,
        idempotency_key: obs.effects.idempotency_key.clone(),
        questions: obs
            .provenance
            .iter()
            .filter(|s| s.kind == crate::observation::SourceKind::Person)
            .map(|s| (s.reference.clone(), s.sha256.clone().unwrap_or_default()))
            .collect(),
    }
}
