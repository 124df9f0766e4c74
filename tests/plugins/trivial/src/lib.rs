//! `tp-trivial`: the smallest useful plugin, for benchmarks and catalog
//! tests. One read-only tool, `echo_value`, that returns its argument; it
//! needs nothing from the sandbox.

use toolhost_sdk::{Context, Deserialize, JsonSchema, Serialize, SideEffect, Tool, ToolError};

/// Arguments of `echo_value`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct EchoArgs {
    /// The number to echo back.
    #[schemars(range(min = 0, max = 1_000_000))]
    value: u32,
}

/// Result of `echo_value`.
#[derive(Serialize, JsonSchema)]
struct EchoOutput {
    /// The number given.
    value: u32,
}

fn echo(_: &Context, args: EchoArgs) -> Result<EchoOutput, ToolError> {
    Ok(EchoOutput { value: args.value })
}

fn tools() -> Vec<Tool> {
    vec![
        Tool::new("echo_value", echo)
            .title("Echo a number")
            .description(
                "Returns the number it is given, unchanged. Use it to measure call overhead or to \
             check that the host works; never for real work. Input: value = integer \
             0-1000000. Output: {value} (under 32 bytes). Errors: invalid_arguments only. \
             Side effect: none (read-only); needs no files or network.",
            )
            .side_effect(SideEffect::ReadOnly)
            .timeout_ms(1_000)
            .max_output_bytes(64),
        Tool::new("echo_value_idempotent", echo)
            .title("Echo a number, declared idempotent")
            .description(
                "The same as echo_value, but declared idempotent, so the host keys and \
                 records every call. Use it to measure the cost of the idempotency path; \
                 never for real work. Input: value = integer 0-1000000. Output: {value}. \
                 Errors: invalid_arguments only. Side effect: idempotent (none in fact).",
            )
            .side_effect(SideEffect::Idempotent)
            .timeout_ms(1_000)
            .max_output_bytes(64),
    ]
}

toolhost_sdk::plugin!(tools);
