//! `tp-slow-describe`: a plugin whose `describe()` sleeps for an hour (one
//! `std::thread::sleep`: a monotonic-clock pollable and `pollable.block`).
//! Loading it must end in a load problem after the host's describe
//! deadline, not hold `toolhost list` (or a server's start) for an hour.

use std::time::Duration;

use toolhost_sdk::{Context, Deserialize, JsonSchema, Serialize, SideEffect, Tool, ToolError};

/// No arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct NoArgs {}

/// Never produced.
#[derive(Serialize, JsonSchema)]
struct Nothing {}

fn nothing(_: &Context, _: NoArgs) -> Result<Nothing, ToolError> {
    Ok(Nothing {})
}

fn tools() -> Vec<Tool> {
    std::thread::sleep(Duration::from_secs(3600));
    vec![Tool::new("never_listed", nothing)
        .title("Never listed")
        .description(
            "Test tool that is never listed: its plugin's describe() sleeps for an hour \
             first. No inputs. Output: {}. Errors: none of its own. Side effect: none.",
        )
        .side_effect(SideEffect::ReadOnly)
        .timeout_ms(1_000)
        .max_output_bytes(64)]
}

toolhost_sdk::plugin!(tools);
