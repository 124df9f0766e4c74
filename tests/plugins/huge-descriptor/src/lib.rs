//! `tp-huge-descriptor`: `describe()` returns about 20 MB.
//!
//! Built with `wit-bindgen` directly. One otherwise valid tool,
//! `huge_description`, whose description is 20 MiB of text; a host must
//! refuse the plugin's descriptors rather than keep them in memory.

wit_bindgen::generate!({
    world: "plugin",
    path: "../../../wit",
});

use exports::toolhost::plugin::tools::Guest;
use toolhost::plugin::types::{
    CallContext, Needs, SideEffect, ToolDescriptor, ToolError, ToolOutput,
};

/// Size of the description: 20 MiB.
const DESCRIPTION_BYTES: usize = 20 * 1024 * 1024;

struct Plugin;

impl Guest for Plugin {
    fn describe() -> Vec<ToolDescriptor> {
        let sentence = "This description goes on and on. ";
        let mut description = sentence.repeat(DESCRIPTION_BYTES / sentence.len() + 1);
        description.truncate(DESCRIPTION_BYTES);
        vec![ToolDescriptor {
            name: "huge_description".to_string(),
            title: Some("Huge description".to_string()),
            description,
            input_schema: r#"{"type":"object","properties":{},"additionalProperties":false}"#
                .to_string(),
            output_schema: Some(r#"{"type":"object"}"#.to_string()),
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
        }]
    }

    fn call(
        name: String,
        _args_json: String,
        _context: CallContext,
    ) -> Result<ToolOutput, ToolError> {
        if name == "huge_description" {
            return Ok(json("{}".to_string()));
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
