//! `tp-bad-output`: valid descriptors, invalid outputs.
//!
//! Built with `wit-bindgen` directly, since the SDK always serializes a
//! typed output. Both tools take no arguments and declare an output schema
//! `{value: integer}`:
//!
//! - `bad_output_json`: returns text that is not JSON;
//! - `output_schema_violation`: returns JSON that breaks the output schema
//!   (`{"value": "not a number"}`).

wit_bindgen::generate!({
    world: "plugin",
    path: "../../../wit",
});

use exports::toolhost::plugin::tools::Guest;
use toolhost::plugin::types::{
    CallContext, Needs, SideEffect, ToolDescriptor, ToolError, ToolOutput,
};

const INPUT_SCHEMA: &str = r#"{"type":"object","properties":{},"additionalProperties":false}"#;
const OUTPUT_SCHEMA: &str = r#"{"type":"object","properties":{"value":{"type":"integer","minimum":0,"maximum":100}},"required":["value"],"additionalProperties":false}"#;

struct Plugin;

fn descriptor(name: &str, title: &str) -> ToolDescriptor {
    ToolDescriptor {
        name: name.to_string(),
        title: Some(title.to_string()),
        description: "Test tool that claims to return {value: integer 0-100} but does not. No \
                      inputs. Errors: invalid_arguments. Side effect: none (read-only)."
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
        max_output_bytes: 256,
        supports_dry_run: false,
        supports_probe: false,
    }
}

impl Guest for Plugin {
    fn describe() -> Vec<ToolDescriptor> {
        vec![
            descriptor("bad_output_json", "Invalid JSON output"),
            descriptor("output_schema_violation", "Output breaks its schema"),
        ]
    }

    fn call(
        name: String,
        _args_json: String,
        _context: CallContext,
    ) -> Result<ToolOutput, ToolError> {
        match name.as_str() {
            "bad_output_json" => Ok(json(r#"{"value": 1,"#.to_string())),
            "output_schema_violation" => Ok(json(r#"{"value":"not a number"}"#.to_string())),
            _ => Err(ToolError {
                code: "unknown_tool".to_string(),
                message: format!("no tool named {name:?}"),
                field: None,
                correctable: false,
                details: None,
            }),
        }
    }
}

/// An answer without a model-facing text: the host shows compact JSON.
fn json(json: String) -> ToolOutput {
    ToolOutput { json, text: None }
}

export!(Plugin);
