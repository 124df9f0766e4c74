//! `tp-open-object`: descriptors that break the host's schema rules, next
//! to one that follows them, to test partial acceptance.
//!
//! Built with `wit-bindgen` directly. Tools:
//!
//! - `open_args`: input schema is an object without
//!   `"additionalProperties": false` (an open object);
//! - `union_args`: input schema is an untagged `anyOf` of two objects;
//! - `BadName!`: a valid closed schema, but the name breaks
//!   `^[a-z][a-z0-9_]{0,63}$`;
//! - `fine_tool`: valid in every respect; echoes `{text}` back.
//!
//! A host should load `fine_tool` only and report the other three.

wit_bindgen::generate!({
    world: "plugin",
    path: "../../../wit",
});

use exports::toolhost::plugin::tools::Guest;
use toolhost::plugin::types::{
    CallContext, Needs, SideEffect, ToolDescriptor, ToolError, ToolOutput,
};

/// A closed object with one bounded string property `text`.
const CLOSED_TEXT_SCHEMA: &str = r#"{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "text": {"type": "string", "minLength": 0, "maxLength": 100, "description": "Text to echo back."}
  },
  "required": ["text"],
  "additionalProperties": false
}"#;

/// Like [`CLOSED_TEXT_SCHEMA`] but without `additionalProperties: false`.
const OPEN_TEXT_SCHEMA: &str = r#"{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "text": {"type": "string", "minLength": 0, "maxLength": 100, "description": "Text to echo back."}
  },
  "required": ["text"]
}"#;

/// Either `{a: string}` or `{b: integer}`, with nothing to tell them apart.
const UNTAGGED_UNION_SCHEMA: &str = r#"{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "anyOf": [
    {"type": "object", "properties": {"a": {"type": "string", "maxLength": 10}}, "required": ["a"], "additionalProperties": false},
    {"type": "object", "properties": {"b": {"type": "integer", "minimum": 0, "maximum": 10}}, "required": ["b"], "additionalProperties": false}
  ]
}"#;

const TEXT_OUTPUT_SCHEMA: &str = r#"{"type":"object","properties":{"text":{"type":"string","description":"The text given."}},"required":["text"]}"#;
const ANY_OUTPUT_SCHEMA: &str = r#"{"type":"object"}"#;

struct Plugin;

fn descriptor(name: &str, input_schema: &str, output_schema: &str) -> ToolDescriptor {
    ToolDescriptor {
        name: name.to_string(),
        title: Some("Echo text".to_string()),
        description: "Returns the arguments it is given, unchanged. Use it to test the host; \
                      never for real work. Input: text = string of 0-100 characters. Output: \
                      {text} (under 256 bytes). Errors: invalid_arguments. Side effect: none \
                      (read-only); needs no files or network."
            .to_string(),
        input_schema: input_schema.to_string(),
        output_schema: Some(output_schema.to_string()),
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
            descriptor("open_args", OPEN_TEXT_SCHEMA, TEXT_OUTPUT_SCHEMA),
            descriptor("union_args", UNTAGGED_UNION_SCHEMA, ANY_OUTPUT_SCHEMA),
            descriptor("BadName!", CLOSED_TEXT_SCHEMA, TEXT_OUTPUT_SCHEMA),
            descriptor("fine_tool", CLOSED_TEXT_SCHEMA, TEXT_OUTPUT_SCHEMA),
        ]
    }

    /// Every tool echoes its arguments: for `fine_tool` that is exactly its
    /// output `{text}`.
    fn call(
        name: String,
        args_json: String,
        _context: CallContext,
    ) -> Result<ToolOutput, ToolError> {
        match name.as_str() {
            "open_args" | "union_args" | "BadName!" | "fine_tool" => Ok(json(args_json)),
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
