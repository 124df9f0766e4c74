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
//! Module map (arrows point down; only `sandbox` imports wasmtime):
//!
//! - [`pipeline`]: the call pipeline, over
//! - [`catalog`]: loaded plugins and their tools, over
//! - [`sandbox`]: wasmtime engine, compile cache, per-call stores, limits,
//! - [`lint`] and [`schema`]: descriptor rules and argument validation,
//! - [`json`]: strict JSON parsing,
//! - [`paths`]: workspace paths and grants,
//! - [`capability`]: capability tokens (chained HMAC, caveats, grants),
//! - [`observation`]: the one result shape,
//! - [`trust`]: lock file, signatures, OCI distribution, poisoning rules,
//! - [`redact`]: secret redaction in outputs and arguments,
//! - [`descriptor`]: tool descriptors as plain Rust.

pub mod canonical;
pub mod capability;
pub mod catalog;
pub mod descriptor;
pub mod effects;
pub mod idempotency;
pub mod json;
pub mod lint;
pub mod mcp;
pub mod observation;
pub mod paths;
pub mod pipeline;
pub mod redact;
pub mod sandbox;
pub mod schema;
pub mod session;
mod text;
pub mod trust;
