//! `tp-old-contract`: a plugin built against `toolhost:plugin@0.1.0`, the
//! contract before `call` returned a `tool-output` (`wit/` here is a copy
//! of that version of the repository's `wit/toolhost.wit`). The host must
//! refuse it at load and tell its author to rebuild against 0.2.0.

wit_bindgen::generate!({
    world: "plugin",
    path: "wit",
});

use exports::toolhost::plugin::tools::Guest;
use toolhost::plugin::types::{CallContext, Needs, SideEffect, ToolDescriptor, ToolError};

struct Plugin;

impl Guest for Plugin {
    fn describe() -> Vec<ToolDescriptor> {
        vec![ToolDescriptor {
            name: "old_tool".to_string(),
            title: None,
            description: "Test tool built against the 0.1.0 contract. No inputs; returns {}. \
                          Read-only."
                .to_string(),
            input_schema: r#"{"type":"object","properties":{},"additionalProperties":false}"#
                .to_string(),
            output_schema: None,
            side_effect: SideEffect::ReadOnly,
            needs: Needs {
                fs_read: false,
                fs_write: false,
                network_hosts: Vec::new(),
            },
            error_codes: Vec::new(),
            default_timeout_ms: 1_000,
            max_output_bytes: 256,
            supports_dry_run: false,
            supports_probe: false,
        }]
    }

    fn call(_name: String, _args_json: String, _context: CallContext) -> Result<String, ToolError> {
        Ok("{}".to_string())
    }
}

export!(Plugin);
