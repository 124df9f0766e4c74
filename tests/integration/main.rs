//! Integration tests: real components built from source, real files, the
//! real `toolhost` binary. Every observation any test sees is validated
//! against the published schema (`schemas/observation.schema.json`).
//!
//! The test-only guest components in `tests/plugins` are built once per test
//! run (see `support::test_plugin`).

mod support;

mod bad_input;
mod cache;
mod capability;
mod cli;
mod effects;
mod hostile;
mod idempotency;
mod languages;
mod lint;
mod mcp;
mod network;
mod reference_tools;
mod trust;
