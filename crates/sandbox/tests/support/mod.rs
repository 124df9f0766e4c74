//! Helpers of the sandbox's tests: the test guests of `tests/plugins`,
//! built as the integration tests build them.

// Each test binary uses some of these.
#![allow(dead_code, unused_imports)]

#[path = "../../../../tests/guests.rs"]
mod guests;

pub use guests::{repo_root, test_plugin};
