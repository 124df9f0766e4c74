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
//! [`Observation`], returned by [`Host::run`]. Beside them, at the root
//! too, are what builds them:
//!
//! - a catalog: [`Source`]s of plugins (each [`Inspected`] before it
//!   loads), giving [`Tool`]s with their [`ToolDescriptor`] and
//!   [`SideEffect`], under a [`TrustPolicy`]; a load reports
//!   [`LoadEvent`]s;
//! - a host: the [`Sandbox`] and its [`SandboxConfig`], a call's
//!   [`Limits`] and [`Mount`]s, and the parts `Host::with_*` takes: an
//!   [`EffectGuard`] over a record [`Store`], a [`Recorder`] writing a
//!   [`Journal`] ([`JournalOptions`]) and counting [`Metrics`], shared
//!   [`Locks`], spilled results' [`Artifacts`] ([`ArtifactError`]), a
//!   [`BudgetLedger`] ([`process_ledger`]), the [`ClientConfig`] of
//!   delegation, a shared store's [`RevealBackend`];
//! - a session: a [`Workspace`] and its [`Grants`], a [`RootKey`] (a
//!   [`Verifier`]) and a [`Token`] ([`TokenId`]) with its [`Caveat`]s
//!   ([`CaveatKind`], [`Right`], [`ToolPattern`]), or plain lists
//!   ([`Allow`]), or `serve`'s [`CommandLineGrants`] ([`SetupError`]);
//!   a session that is no longer live says why ([`NotLive`]); revocations
//!   elsewhere show within [`REVOCATION_STALENESS`];
//! - a call: [`CallOptions`] ([`new_call_id`]), its [`Mode`], where its
//!   idempotency key comes from ([`KeySource`]), a person's
//!   [`ApprovalAnswer`], a [`CancelToken`], the [`Caller`] a recorder
//!   sees; several at once: [`BatchItem`]s, [`BatchOptions`],
//!   [`BatchStatus`]; arguments are parsed as [`parse_strict`] does;
//! - what a call asks: an [`Asker`] answers a tool's [`Question`]
//!   ([`Asked`], [`Answer`]; a stateless call's [`InputState`] and
//!   [`AnswersAtHand`]); a person settles [`Approvals`] ([`Decided`]);
//! - what a call answers: the [`Observation`] ([`OBSERVATION_SCHEMA_ID`]),
//!   its [`Status`], [`ErrorCode`] and [`ErrorInfo`], a spill's
//!   [`Truncation`] and [`FollowUp`], text from outside between
//!   [`UNTRUSTED_OPEN`] and [`UNTRUSTED_CLOSE`]; what a store keeps of it:
//!   a [`KeyRecord`] in a [`State`], a [`Claim`] on it, a [`Settlement`]
//!   of it, a [`StoreError`];
//! - the host's own tools: [`HostTool`] (`artifact_view`, `find_tools`,
//!   `delegate`), which [`Host::host_tools`] serves a session, with their
//!   definitions; the script runner [`SCRIPT_TOOL`] and the
//!   [`script_declarations`] of the tools a script may call.
//!
//! Four facade modules group what reads right only under their name:
//! [`discovery`] (ranking tools for a task), [`journal`] (reading the
//! journal back), [`trust`] (lock, signatures, OCI, the poisoning scan)
//! and [`messages`] (the host's own texts). The
//! integration tests and the MCP server use only the root and these
//! (`.ci/crate-rules.py` checks it).
//!
//! The modules below are the host's insides, public for the binary and
//! the store crate that implement or drive parts of them.
//!
//! Around this crate: `toolhost-base` (descriptors, observations, paths,
//! JSON, redaction) and `toolhost-sandbox` (the only crate that imports
//! wasmtime) below it, re-exported here under their module names;
//! `toolhost-store` (SQLite and PostgreSQL behind this crate's store
//! traits), `toolhost-mcp` (the MCP server; the only crate that imports
//! rmcp) and `toolhost-cli` (the `toolhost` binary; the only crate that
//! imports clap) above it.
//!
//! Module map: one folder per concept, each importing only from those
//! listed after it.
//!
//! - [`pipeline`]: [`Host`], every `impl Host`, and its one entry point
//!   [`Host::run`]: the gates of a call, then the steps from name to
//!   observation, over
//! - [`script`]: `run_script`'s inner calls, handed back to `Host::run`
//!   through the batch scheduler, and the TypeScript declaration of the
//!   tools a script can call, over
//! - [`effects`]: the side-effect guard ([`EffectGuard`]: keys, records,
//!   plans), approvals, idempotency records and the [`Store`] trait,
//!   resource locks and batches, over
//! - [`record`]: one [`Recorder`] around every call (circuit breaker,
//!   journal, metrics), and [`tools`]: the host's own tools
//!   (`artifact_view`, `find_tools`; [`HostTool`] names them and
//!   `delegate`) and their state, over
//! - [`policy`]: who may call what: capability tokens, the [`Session`] a
//!   caller holds, budgets and the ledger, delegation, over
//! - [`call`]: the types of one call ([`Call`], [`Mode`], [`CallOptions`],
//!   [`KeySource`], a prepared call), over
//! - [`plugin`]: the catalog of loaded plugins, descriptor lint, argument
//!   schemas, trust (lock file, signatures, OCI, poisoning rules); and
//!   [`store_error`]: the error every store trait returns.

pub mod call;
pub mod effects;
pub mod pipeline;
pub mod plugin;
pub mod policy;
pub mod record;
pub mod script;
pub mod store_error;
pub mod tools;

/// The host's own words, kept beside the observations they explain: a
/// module of its own because its items are texts and the functions that
/// phrase them (`compiling`, `advice`), not types of the facade.
pub use observation::messages;

/// The journal read back: a [`Filter`](journal::Filter) over the
/// [`Entry`](journal::Entry)s a [`JournalBackend`](journal::JournalBackend)
/// keeps, and the [`stats`](journal::stats) over them. A module of its own
/// because these names (`Entry`, `Filter`, `stats`) say what they are only
/// under `journal`; writing it is the [`Journal`] at the root.
pub mod journal {
    pub use crate::record::journal::{args_sha256, stats, Entry, Filter, JournalBackend};
}

/// Trusting third-party plugins: a [`Lock`](trust::Lock) of their digests
/// and descriptors, ssh signatures ([`AllowedSigners`](trust::AllowedSigners),
/// [`verify`](trust::verify)), plugins pushed to and pulled from an OCI
/// registry ([`push_blocking`](trust::push_blocking),
/// [`pull_blocking`](trust::pull_blocking)) and the scan of descriptions
/// for poisoning ([`scan_tools`](trust::scan_tools)). What a catalog load
/// enforces is the [`TrustPolicy`] at the root; these are the operations
/// the binary's `plugin lock|push|pull|sign` drive. A module of its own
/// because their names (`Lock`, `Change`, `verify`) say what they are only
/// under `trust`.
pub mod trust {
    pub use crate::plugin::trust::lock::{
        Change, Lock, LockViolation, PluginEntry, Signer, LOCK_FILE_NAME,
    };
    pub use crate::plugin::trust::oci::{
        pull_blocking, push_blocking, OciError, OciOptions, OciReference,
    };
    pub use crate::plugin::trust::poison::{scan_tool, scan_tools, Field, PoisonRule};
    pub use crate::plugin::trust::sha256_digest;
    pub use crate::plugin::trust::signature::{verify, AllowedSigners, Verification};
}

/// Ranking tools for a task as `find_tools` does: an [`Index`](discovery::Index)
/// of [`Doc`](discovery::Doc)s ([`index_of`](discovery::index_of) a
/// catalog's descriptors), searched into [`Hit`](discovery::Hit)s, and the
/// [`words`](discovery::words) it reads a text as. A module of its own
/// because these names say what they are only under `discovery`.
pub mod discovery {
    pub use crate::tools::discovery::{index_of, words, Doc, Hit, Index};
}

pub use ask::{Answer, AnswersAtHand, Asked, Asker, InputState, Question};
pub use call::{new_call_id, ApprovalAnswer, Call, CallOptions, KeySource, Mode};
pub use descriptor::{SideEffect, ToolDescriptor};
pub use effects::approval::{Approvals, Decided};
pub use effects::idempotency::{Claim, KeyRecord, Settlement, State, Store, StoreError};
pub use effects::resource::batch::{BatchItem, BatchOptions, BatchStatus};
pub use effects::resource::Locks;
pub use effects::EffectGuard;
pub use json::parse_strict;
pub use observation::SCHEMA_ID as OBSERVATION_SCHEMA_ID;
pub use observation::{
    ErrorCode, ErrorInfo, FollowUp, Observation, Status, Truncation, UNTRUSTED_CLOSE,
    UNTRUSTED_OPEN,
};
pub use paths::{Grants, Workspace};
pub use pipeline::Host;
pub use plugin::catalog::{Catalog, Inspected, Source, Tool};
pub use plugin::trust::policy::TrustPolicy;
pub use policy::budget::{process_ledger, BudgetLedger};
pub use policy::capability::{
    Caveat, CaveatKind, Keyring, Right, RootKey, Token, TokenId, ToolPattern,
};
pub use policy::delegation::{ClientConfig, CommandLineGrants, SetupError};
pub use policy::ledger::REVOCATION_STALENESS;
pub use policy::session::{Allow, NotLive, Session, Verifier};
pub use record::journal::{Journal, JournalOptions};
pub use record::metrics::Metrics;
pub use record::{Caller, Recorder};
pub use sandbox::{CancelToken, Limits, LoadEvent, Mount, Sandbox, SandboxConfig};
pub use script::CALL_THREAD_STACK;
pub use script::{declarations as script_declarations, TOOL_NAME as SCRIPT_TOOL};
pub(crate) use toolhost_base::text;
pub use toolhost_base::{
    ask, boundary, descriptor, exec_call, file_index, json, observation, opendir, origin, paths,
    provenance, redact, sealed, secret, toolname,
};
pub use toolhost_sandbox as sandbox;
pub use toolname::PluginSpec;
pub use tools::artifact::{ArtifactError, Artifacts};
pub use tools::host_tool::HostTool;
pub use tools::reveal::RevealBackend;
