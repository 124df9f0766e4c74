//! Plugins and what the host reads of them before a call runs.
//!
//! - [`catalog`]: the loaded plugins and their tools, by name;
//! - [`lint`]: the rules a tool's descriptor must meet to be loaded;
//! - [`schema`]: argument schemas: compiled validators, path arguments,
//!   violations as correctable errors;
//! - [`trust`]: the lock file, signatures, OCI distribution and the rules
//!   against poisoned descriptions.

pub mod catalog;
pub mod lint;
pub mod schema;
pub mod trust;
