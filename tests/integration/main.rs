//! Integration tests: real components built from source, real files, the
//! real `toolhost` binary. Every observation any test sees is validated
//! against the published schema (`schemas/observation.schema.json`).
//!
//! The test-only guest components in `tests/plugins` are built once per test
//! run (see `support::test_plugin`).

mod support;

mod approvals;
mod asking;
mod bad_input;
mod budgets;
mod capability;
mod cli;
mod compat;
mod console;
mod delegation;
mod discovery;
mod docs;
mod effects;
mod error_details;
mod escapes;
mod exec;
mod file_index;
mod first_hour;
mod fleet;
mod hostile;
mod http_auth;
mod idempotency;
mod journal;
mod languages;
mod lint;
mod mcp;
mod mcp_limits;
mod messages;
mod model_text;
mod namespaces;
mod network;
mod operations;
mod paging;
mod plans;
mod provenance;
mod python_sdk;
mod redaction;
mod reference;
mod reference_tools;
mod resources;
mod run_command;
mod scripts;
mod sdk_clients;
mod spill;
mod store_and_flags;
mod task_words;
mod token_binding;
mod trust;
mod trust_load;
