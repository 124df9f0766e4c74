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
//! Over this library sit two crates: `toolhost-mcp` (the MCP server, stdio
//! and Streamable HTTP; the only one that imports rmcp) and `toolhost-cli`
//! (the `toolhost` binary; the only one that imports clap).
//!
//! Module map (arrows point down; only `sandbox` imports wasmtime):
//!
//! - [`delegation`]: the MCP `delegate` tool (narrower tokens for
//!   sub-agents), over
//! - [`pipeline`]: [`Host`](pipeline::Host), every `impl Host`, and its one
//!   entry point [`Host::run`](pipeline::Host::run): the gates of a call,
//!   then the steps from name to observation, over
//! - [`script`]: the host side of `run_script`: the inner calls of a
//!   script, each handed back to `Host::run` on a helper thread, over
//! - [`session`]: the caller's policy, a session bound to one verified
//!   capability token; [`effects`]: the side-effect guard the pipeline
//!   calls ([`EffectGuard`](effects::EffectGuard): keys, the idempotency
//!   records of the store, plans); [`approval`]: the calls a person
//!   approves, kept in the record store; [`resource`]: resource keys, the locks
//!   that keep conflicting calls apart, and batches, over
//! - [`call`]: the types of one call ([`Call`](call::Call),
//!   [`Mode`](call::Mode), [`CallOptions`](call::CallOptions), a prepared
//!   call), over
//! - [`record`]: step 8 around every call, one
//!   [`Recorder`](record::Recorder) — the [`journal`] (every call
//!   in the record store, `toolhost log`/`stats`), the circuit [`breaker`]
//!   and the Prometheus [`metrics`] — over
//! - [`catalog`]: loaded plugins and their tools, over
//! - [`sandbox`]: wasmtime engine, compile cache, per-call stores, limits,
//!   outgoing HTTP,
//! - [`lint`]: descriptor rules (`report`, `descriptor`, `values`, `names`,
//!   `compat`),
//! - [`schema`]: argument schemas (`compile`, `violations`, `paths`, and
//!   `walk`, shared with lint),
//! - [`idempotency`]: idempotency keys, the record under a key
//!   ([`KeyRecord`](idempotency::KeyRecord)) and the record stores (SQLite,
//!   PostgreSQL), which also keep the [`journal`]'s and the [`ledger`]'s
//!   tables, over
//! - [`store_error`]: the error every record-store trait returns,
//! - [`capability`]: capability tokens, one concept a file (`error`,
//!   `rights`, `relpath`, `tools`, `caveat`, `expiry`, `key`, `token`,
//!   `fold`, `grant`, `ids`),
//! - [`budget`]: the `max_calls` and `budget_fuel` counts of tokens and
//!   revoked token ids, host-wide, kept in the record store by [`ledger`],
//! - [`paths`]: workspace paths and grants, and the one read/write
//!   [`Access`](paths::Access), over
//! - [`opendir`]: open directories and lookups beneath them that follow no
//!   symbolic link,
//! - [`exec_call`]: a call's grant turned into a run of a native program in
//!   the bubblewrap sandbox of the `toolhost-exec` crate,
//! - [`observation`]: the one result shape (`error`, `clip`, `render`,
//!   `hygiene`, and [`messages`]: the host's own words),
//!   and [`provenance`]: where its content came from,
//! - [`json`]: strict parsing, canonical JSON (RFC 8785) and compact JSON
//!   (the `toolhost-compact-json` crate: one eight-byte escape scan),
//! - [`origin`]: network origins, one grammar,
//! - [`trust`]: lock file, signatures, OCI distribution, poisoning rules,
//! - [`redact`]: secret redaction in outputs and arguments,
//! - [`descriptor`]: the one tool descriptor type, which the sandbox reads,
//!   the catalog and lint work on and the lock file pins,
//! - `text`: small helpers for message text,
//! - [`discovery`]: a BM25 index of the tools, for finding one by its task,
//! - [`artifact`]: results too large to return, kept for the token that
//!   made them, and the host's `artifact_view` tool that reads them back,
//!   each window ending after a whole record ([`boundary`]),
//! - [`toolname`]: the one grammar of tool names, namespaces (`fs.read`)
//!   and the plugin specs (`--plugin fs=PATH`) that load them.

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
pub(crate) use toolhost_base::text;
pub use toolhost_base::{
    ask, boundary, descriptor, exec_call, file_index, json, observation, opendir, origin, paths,
    provenance, redact, sealed, secret, toolname,
};
pub use toolhost_sandbox as sandbox;
