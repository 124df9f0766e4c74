//! Helpers of the sandbox's tests: the test guests of `tests/plugins`,
//! built as the integration tests build them.

// Each test binary uses some of these.
#![allow(dead_code, unused_imports)]

#[path = "../../../../tests/guests.rs"]
mod guests;

pub use guests::{repo_root, test_plugin};

use serde_json::Value;
use toolhost_sandbox::{CallOutcome, CallRequest, Limits, Mount, Plugin};

/// Calls `tool` of `plugin` with `args` under `mounts` and `limits`, as the
/// workspace `/workspace`, with nothing else granted.
pub fn call(
    plugin: &Plugin,
    tool: &str,
    args: Value,
    mounts: &[Mount],
    limits: Limits,
) -> CallOutcome {
    plugin.call(&CallRequest {
        tool,
        args_json: &args.to_string(),
        call_id: "test",
        workspace_root: "/workspace",
        idempotency_key: None,
        mounts,
        net_origins: &[],
        exec: None,
        limits,
        reveal_secrets: false,
        asker: None,
        script: None,
    })
}
