//! `tp-dup-names`: two tools with the same name, `same_name`.
//!
//! Built with `wit-bindgen` directly. Both descriptors are valid on their
//! own and differ only in their title; a host must not load both.

wit_bindgen::generate!({
    world: "plugin",
    path: "../../../wit",
});

use exports::toolhost::plugin::tools::Guest;
use toolhost::plugin::types::{
    CallContext, Needs, SideEffect, ToolDescriptor, ToolError, ToolOutput,
};

const INPUT_SCHEMA: &str = r#"{"type":"object","properties":{},"additionalProperties":false}"#;
const OUTPUT_SCHEMA: &str =
    r#"{"type":"object","properties":{"which":{"type":"integer"}},"required":["which"]}"#;

struct Plugin;

fn descriptor(title: &str) -> ToolDescriptor {
    ToolDescriptor {
        name: "same_name".to_string(),
        title: Some(title.to_string()),
        description: "Test tool: returns {which: 1}. No inputs. Errors: invalid_arguments. \
                      Side effect: none (read-only)."
            .to_string(),
        input_schema: INPUT_SCHEMA.to_string(),
        output_schema: Some(OUTPUT_SCHEMA.to_string()),
        side_effect: SideEffect::ReadOnly,
        needs: Needs {
            fs_read: false,
            fs_write: false,
            network_hosts: Vec::new(),
            exec: Vec::new(),
        },
        error_codes: vec!["invalid_arguments".to_string()],
        default_timeout_ms: 1_000,
        max_output_bytes: 64,
        supports_dry_run: false,
        supports_probe: false,
    }
}

impl Guest for Plugin {
    fn describe() -> Vec<ToolDescriptor> {
        vec![
            descriptor("First same_name"),
            descriptor("Second same_name"),
        ]
    }

    fn call(
        name: String,
        _args_json: String,
        _context: CallContext,
    ) -> Result<ToolOutput, ToolError> {
        if name == "same_name" {
            return Ok(json(r#"{"which":1}"#.to_string()));
        }
        Err(ToolError {
            code: "unknown_tool".to_string(),
            message: format!("no tool named {name:?}"),
            field: None,
            correctable: false,
            details: None,
        })
    }
}

/// An answer without a model-facing text: the host shows compact JSON.
fn json(json: String) -> ToolOutput {
    ToolOutput { json, text: None }
}

export!(Plugin);
