//! `tp-bad-schema`: a plugin whose input schemas the host must refuse.
//!
//! Built with `wit-bindgen` directly (the SDK always generates valid
//! schemas). Two tools, both otherwise well described:
//!
//! - `broken_json_schema`: the input schema text is not JSON at all;
//! - `invalid_json_schema`: valid JSON, but not a valid JSON Schema
//!   (`{"type": 12}`).
//!
//! A host that loads this plugin should accept neither tool.

wit_bindgen::generate!({
    world: "plugin",
    path: "../../../wit",
});

use exports::toolhost::plugin::tools::Guest;
use toolhost::plugin::types::{
    CallContext, Needs, SideEffect, ToolDescriptor, ToolError, ToolOutput,
};

const OUTPUT_SCHEMA: &str =
    r#"{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]}"#;

struct Plugin;

fn descriptor(name: &str, input_schema: &str) -> ToolDescriptor {
    ToolDescriptor {
        name: name.to_string(),
        title: Some("Bad schema".to_string()),
        description: "Test tool with a broken input schema: returns {ok: true}. Errors: \
                      invalid_arguments. Side effect: none (read-only)."
            .to_string(),
        input_schema: input_schema.to_string(),
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
            // Cut off in the middle: not JSON.
            descriptor(
                "broken_json_schema",
                r#"{"type": "object", "properties": {"a": {"type": "#,
            ),
            // JSON, but `type` must be a string or an array of strings.
            descriptor("invalid_json_schema", r#"{"type": 12}"#),
        ]
    }

    fn call(
        name: String,
        _args_json: String,
        _context: CallContext,
    ) -> Result<ToolOutput, ToolError> {
        match name.as_str() {
            "broken_json_schema" | "invalid_json_schema" => Ok(json(r#"{"ok":true}"#.to_string())),
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
