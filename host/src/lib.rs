//! toolhost: a WebAssembly tool host for AI agents.
//!
//! A tool is a Wasm component that declares its tools in WIT (`wit/`). The
//! host checks every proposed call before it runs and runs it in a fresh
//! sandbox that holds only what the caller was granted:
//!
//! ```text
//! name → strict JSON → schema → paths/grants → sandbox → observation
//! ```
//!
//! The facade is five types at the root: a [`Catalog`] of loaded plugins, a
//! [`Host`] over it, a [`Session`] (a caller bound to one verified
//! capability token), a [`Call`], and the one result shape, the
//! [`Observation`], returned by [`Host::run`].
//!
//! Around this crate: `toolhost-base` (descriptors, observations, paths,
//! JSON, redaction) and `toolhost-sandbox` (the only crate that imports
//! wasmtime) below it, re-exported here under their module names;
//! `toolhost-store` (SQLite and PostgreSQL behind this crate's store
//! traits), `toolhost-mcp` (the MCP server; the only crate that imports
//! rmcp) and `toolhost-cli` (the `toolhost` binary; the only crate that
//! imports clap) above it.
//!
//! Module map (arrows point down):
//!
//! - [`pipeline`]: [`Host`], every `impl Host`, and its one entry point
//!   [`Host::run`]: the gates of a call, then the steps from name to
//!   observation, over
//! - [`delegation`]: the `delegate` tool (narrower tokens for sub-agents),
//!   over
//! - [`script`]: the host side of `run_script`: the inner calls of a
//!   script, each handed back to `Host::run` on a helper thread;
//!   [`session`]: the caller's policy; [`effects`]: the side-effect guard
//!   the pipeline calls ([`EffectGuard`](effects::EffectGuard): keys, the
//!   idempotency records of the store, plans); [`record`]: one
//!   [`Recorder`](record::Recorder) around every call (journal entry,
//!   circuit breaker, metrics); [`resource`]: resource keys, the locks that
//!   keep conflicting calls apart, and batches, over
//! - [`call`]: the types of one call ([`Call`], [`Mode`](call::Mode),
//!   [`CallOptions`](call::CallOptions), a prepared call); [`metrics`]
//!   (Prometheus), over
//! - [`idempotency`]: idempotency keys, the record under a key
//!   ([`KeyRecord`](idempotency::KeyRecord)) and the
//!   [`Store`](idempotency::Store) trait, through which a store hands out
//!   its other tables: [`approval`] (the calls a person approves),
//!   [`journal`] (every call, `toolhost log`/`stats`), [`ledger`] (budgets
//!   and revocations), over
//! - [`catalog`]: loaded plugins and their tools; [`lint`]: descriptor
//!   rules; [`artifact`]: results too large to return, kept for the token
//!   that made them, and `artifact_view`; [`breaker`]; [`budget`];
//!   [`reveal`] (tools revealed to a token or session), over
//! - [`capability`]: capability tokens, one concept a file;
//!   [`schema`]: argument schemas; [`discovery`]: `find_tools`, a BM25
//!   index of the tools; [`trust`]: lock file, signatures, OCI
//!   distribution, poisoning rules; [`store_error`]: the error every
//!   store trait returns.

pub mod approval;
pub mod artifact;
pub mod breaker;
pub mod budget;
pub mod call;
pub mod capability;
pub mod catalog;
pub mod delegation;
pub mod discovery;
pub mod effects;
pub mod idempotency;
pub mod journal;
pub mod ledger;
pub mod lint;
pub mod metrics;
pub mod pipeline;
pub mod record;
pub mod resource;
pub mod reveal;
pub mod schema;
pub mod script;
pub mod session;
pub mod store_error;
pub mod trust;

/// The host's own words, kept beside the observations they explain.
pub use observation::messages;

pub use call::Call;
pub use catalog::Catalog;
pub use observation::Observation;
pub use pipeline::Host;
pub use session::Session;
pub(crate) use toolhost_base::text;
pub use toolhost_base::{
    ask, boundary, descriptor, exec_call, file_index, json, observation, opendir, origin, paths,
    provenance, redact, sealed, secret, toolname,
};
pub use toolhost_sandbox as sandbox;
