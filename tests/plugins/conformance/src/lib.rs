//! `tp-conformance`: the fixture tools the official MCP conformance suite
//! (`@modelcontextprotocol/conformance`, server scenarios) calls by name,
//! as real sandboxed tools.
//!
//! Content blocks follow toolhost's output convention: a tool whose output
//! object has a `content` array of MCP content blocks gets those blocks in
//! the `tools/call` result (ahead of the observation text block). Progress
//! and logging come from the host: it reports progress for any call that
//! carries a progress token, and forwards a call's stderr lines as log
//! messages.
//!
//! | tool | what it does |
//! |---|---|
//! | `test_simple_text` | one text block |
//! | `test_image_content` | one PNG image block |
//! | `test_audio_content` | one WAV audio block |
//! | `test_embedded_resource` | one embedded text resource |
//! | `test_multiple_content_types` | text, image and resource blocks |
//! | `test_error_handling` | always fails (`intentional_error`) |
//! | `test_tool_with_progress` | sleeps 150 ms (the host reports progress) |
//! | `test_tool_with_logging` | writes three lines to stderr, 50 ms apart |
//! | `test_logging_tool` | same, for the 2026-07-28 scenarios |
//! | `json_schema_2020_12_tool` | an input schema with `$defs`/`$anchor`, `allOf`/`anyOf`, `if`/`then`/`else` |
//! | `test_reconnection` | answers after 100 ms |
//! | `echo_region` | echoes `region`, an `x-mcp-header` argument (SEP-2243) |
//! | `test_sleep_ms` | sleeps `ms` milliseconds (cancellation tests) |
//! | `test_elicitation` | asks `message` with a username/email form |
//! | `test_elicitation_sep1034_defaults` | asks a form whose fields have defaults (SEP-1034) |
//! | `test_elicitation_sep1330_enums` | asks a form with the five enum shapes (SEP-1330) |
//! | `test_input_required_result_elicitation` | asks for a name, greets it |
//! | `test_input_required_result_request_state` | asks for a confirmation |
//! | `test_input_required_result_multi_round` | asks for a name, then a colour |
//! | `test_input_required_result_tampered_state` | asks for a confirmation |
//! | `test_streaming_elicitation` | asks for a name (its question is an `input_required` result, never a request on the stream) |
//!
//! The asking tools put their questions through the host
//! (`toolhost_sdk::ask`): within the call on a 2025-11-25 session, as an
//! `input_required` result on a 2026-07-28 request.

use std::borrow::Cow;
use std::io::Write;
use std::time::Duration;

use schemars::{json_schema, Schema, SchemaGenerator};
use toolhost_sdk::ask::{ask, Reply};
use toolhost_sdk::{
    json, Context, Deserialize, JsonSchema, Serialize, SideEffect, Tool, ToolError, Value,
};

/// A 1x1 red PNG.
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8/5+hHgAHggJ/PchI7wAAAABJRU5ErkJggg==";
/// A WAV header with no samples.
const WAV: &str = "UklGRiQAAABXQVZFZm10IBAAAAABAAEARKwAAIhYAQACABAAZGF0YQAAAAA=";

/// No arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct NoArgs {}

/// An embedded resource.
#[derive(Serialize, JsonSchema)]
struct Resource {
    /// Resource URI.
    uri: String,
    /// MIME type of `text`.
    #[serde(rename = "mimeType")]
    mime_type: String,
    /// The resource's text.
    text: String,
}

/// One MCP content block.
#[derive(Serialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block {
    /// Plain text.
    Text {
        /// The text.
        text: String,
    },
    /// Base64 image data.
    Image {
        /// Base64 data.
        data: String,
        /// MIME type.
        #[serde(rename = "mimeType")]
        mime_type: String,
    },
    /// Base64 audio data.
    Audio {
        /// Base64 data.
        data: String,
        /// MIME type.
        #[serde(rename = "mimeType")]
        mime_type: String,
    },
    /// An embedded resource.
    Resource {
        /// The resource.
        resource: Resource,
    },
}

/// Output: MCP content blocks (toolhost's content convention).
#[derive(Serialize, JsonSchema)]
struct Content {
    /// Blocks the MCP adapter puts in the result's `content`.
    content: Vec<Block>,
}

fn text(s: &str) -> Block {
    Block::Text { text: s.into() }
}

fn one(block: Block) -> Result<Content, ToolError> {
    Ok(Content {
        content: vec![block],
    })
}

fn simple_text(_: &Context, _: NoArgs) -> Result<Content, ToolError> {
    one(text("This is a simple text response for testing."))
}

fn image(_: &Context, _: NoArgs) -> Result<Content, ToolError> {
    one(Block::Image {
        data: PNG.into(),
        mime_type: "image/png".into(),
    })
}

fn audio(_: &Context, _: NoArgs) -> Result<Content, ToolError> {
    one(Block::Audio {
        data: WAV.into(),
        mime_type: "audio/wav".into(),
    })
}

fn embedded(_: &Context, _: NoArgs) -> Result<Content, ToolError> {
    one(Block::Resource {
        resource: Resource {
            uri: "test://embedded-resource".into(),
            mime_type: "text/plain".into(),
            text: "This is an embedded resource content.".into(),
        },
    })
}

fn mixed(_: &Context, _: NoArgs) -> Result<Content, ToolError> {
    Ok(Content {
        content: vec![
            text("Multiple content types test:"),
            Block::Image {
                data: PNG.into(),
                mime_type: "image/png".into(),
            },
            Block::Resource {
                resource: Resource {
                    uri: "test://mixed-content-resource".into(),
                    mime_type: "application/json".into(),
                    text: r#"{"test":"data","value":123}"#.into(),
                },
            },
        ],
    })
}

fn error_handling(_: &Context, _: NoArgs) -> Result<Content, ToolError> {
    Err(ToolError::new(
        "intentional_error",
        "This tool intentionally returns an error for testing",
    ))
}

fn with_progress(_: &Context, _: NoArgs) -> Result<Content, ToolError> {
    std::thread::sleep(Duration::from_millis(150));
    one(text("Progress test completed"))
}

fn with_logging(_: &Context, _: NoArgs) -> Result<Content, ToolError> {
    let mut err = std::io::stderr();
    for line in [
        "Tool execution started",
        "Tool processing data",
        "Tool execution completed",
    ] {
        let _ = writeln!(err, "{line}");
        std::thread::sleep(Duration::from_millis(50));
    }
    one(text("Logging test completed"))
}

/// Arguments of `test_sleep_ms`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SleepArgs {
    /// How long to sleep, in milliseconds.
    #[schemars(range(min = 0, max = 60_000))]
    ms: u32,
}

fn sleep_ms(_: &Context, args: SleepArgs) -> Result<Content, ToolError> {
    std::thread::sleep(Duration::from_millis(args.ms.into()));
    one(text("slept"))
}

fn reconnection(_: &Context, _: NoArgs) -> Result<Content, ToolError> {
    std::thread::sleep(Duration::from_millis(100));
    one(text("Reconnection test completed"))
}

/// Arguments of `echo_region`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RegionArgs {
    /// A region name; HTTP clients mirror it in the `Mcp-Param-Region` header.
    #[schemars(length(min = 1, max = 64), extend("x-mcp-header" = "Region"))]
    region: String,
}

fn echo_region(_: &Context, args: RegionArgs) -> Result<Content, ToolError> {
    one(text(&args.region))
}

/// Arguments of `json_schema_2020_12_tool`; the schema is written by hand.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct RichArgs {
    name: Option<String>,
    address: Option<Address>,
    #[serde(rename = "contactMethod")]
    contact_method: Option<String>,
    phone: Option<String>,
    email: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct Address {
    street: Option<String>,
    city: Option<String>,
}

impl JsonSchema for RichArgs {
    fn schema_name() -> Cow<'static, str> {
        "RichArgs".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "object",
            "$defs": {
                "address": {
                    "$anchor": "addressDef",
                    "type": "object",
                    "description": "A postal address.",
                    "properties": {
                        "street": {"type": "string", "maxLength": 200, "description": "Street and number."},
                        "city": {"type": "string", "maxLength": 100, "description": "City."}
                    },
                    "required": [],
                    "additionalProperties": false
                }
            },
            "properties": {
                "name": {"type": "string", "maxLength": 100, "description": "Who to greet."},
                "address": {"$ref": "#/$defs/address", "description": "Where they live."},
                "contactMethod": {"type": "string", "enum": ["phone", "email"], "description": "How to reach them."},
                "phone": {"type": "string", "maxLength": 40, "description": "Phone number."},
                "email": {"type": "string", "maxLength": 200, "description": "Email address."}
            },
            "required": [],
            "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
            "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
            "then": {"required": ["phone"]},
            "else": {"required": ["email"]},
            "additionalProperties": false
        })
    }
}

fn rich(_: &Context, args: RichArgs) -> Result<Content, ToolError> {
    let name = args.name.as_deref().unwrap_or("world");
    one(text(&format!("Hello, {name}!")))
}

/// Arguments of `test_elicitation`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct MessageArgs {
    /// The message shown to the person.
    #[schemars(length(min = 1, max = 1000))]
    message: String,
}

/// `action=…, content=…` of a reply, as the suite's texts write it.
fn reply_text(reply: &Reply) -> String {
    match reply {
        Reply::Accepted(content) => format!("action=accept, content={content}"),
        Reply::Declined => "action=decline, content={}".into(),
        Reply::Cancelled => "action=cancel, content={}".into(),
    }
}

fn elicitation(_: &Context, args: MessageArgs) -> Result<Content, ToolError> {
    let schema = json!({
        "type": "object",
        "properties": {
            "username": {"type": "string", "description": "User's response"},
            "email": {"type": "string", "description": "User's email address"}
        },
        "required": ["username", "email"]
    });
    let reply = ask("user_info", &args.message, &schema)?;
    one(text(&format!("User response: {}", reply_text(&reply))))
}

fn elicitation_defaults(_: &Context, _: NoArgs) -> Result<Content, ToolError> {
    let schema = json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "default": "John Doe"},
            "age": {"type": "integer", "default": 30},
            "score": {"type": "number", "default": 95.5},
            "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
            "verified": {"type": "boolean", "default": true}
        }
    });
    let reply = ask("defaults", "Please review your information", &schema)?;
    one(text(&format!(
        "Elicitation completed: {}",
        reply_text(&reply)
    )))
}

fn elicitation_enums(_: &Context, _: NoArgs) -> Result<Content, ToolError> {
    let schema = json!({
        "type": "object",
        "properties": {
            "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
            "titledSingle": {"type": "string", "oneOf": [
                {"const": "value1", "title": "First Option"},
                {"const": "value2", "title": "Second Option"},
                {"const": "value3", "title": "Third Option"}
            ]},
            "legacyEnum": {"type": "string", "enum": ["opt1", "opt2", "opt3"],
                           "enumNames": ["Option One", "Option Two", "Option Three"]},
            "untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
            "titledMulti": {"type": "array", "items": {"anyOf": [
                {"const": "value1", "title": "First Choice"},
                {"const": "value2", "title": "Second Choice"},
                {"const": "value3", "title": "Third Choice"}
            ]}}
        }
    });
    let reply = ask("enums", "Please select your options", &schema)?;
    one(text(&format!(
        "Elicitation completed: {}",
        reply_text(&reply)
    )))
}

/// The content of an accepted reply; any other reply ends the tool.
fn accepted(reply: Reply) -> Result<Value, ToolError> {
    match reply {
        Reply::Accepted(content) => Ok(content),
        other => Err(ToolError::new(
            "not_answered",
            format!("the person did not answer: {}", reply_text(&other)),
        )),
    }
}

fn one_field(key: &str, message: &str, field: &str, kind: &str) -> Result<Value, ToolError> {
    let schema = json!({
        "type": "object",
        "properties": {field: {"type": kind}},
        "required": [field]
    });
    accepted(ask(key, message, &schema)?).map(|c| c[field].clone())
}

fn input_required_elicitation(_: &Context, _: NoArgs) -> Result<Content, ToolError> {
    let name = one_field("user_name", "What is your name?", "name", "string")?;
    one(text(&format!("Hello, {}!", name.as_str().unwrap_or("?"))))
}

fn input_required_confirm(_: &Context, _: NoArgs) -> Result<Content, ToolError> {
    let ok = one_field("confirm", "Please confirm", "ok", "boolean")?;
    one(text(&format!("Confirmed: ok={ok}")))
}

fn input_required_multi_round(_: &Context, _: NoArgs) -> Result<Content, ToolError> {
    let name = one_field("step1", "Step 1: What is your name?", "name", "string")?;
    let color = one_field(
        "step2",
        "Step 2: What is your favorite color?",
        "color",
        "string",
    )?;
    one(text(&format!(
        "{} likes {}",
        name.as_str().unwrap_or("?"),
        color.as_str().unwrap_or("?")
    )))
}

fn tools() -> Vec<Tool> {
    let fixture = |tool: Tool, title: &'static str, what: &'static str| {
        tool.title(title)
            .description(what)
            .side_effect(SideEffect::ReadOnly)
            .timeout_ms(5_000)
            .max_output_bytes(4096)
    };
    vec![
        fixture(
            Tool::new("test_simple_text", simple_text),
            "Simple text",
            "Conformance fixture: returns one text block. No input; read-only.",
        ),
        fixture(
            Tool::new("test_image_content", image),
            "Image content",
            "Conformance fixture: returns one 1x1 PNG image block. No input; read-only.",
        ),
        fixture(
            Tool::new("test_audio_content", audio),
            "Audio content",
            "Conformance fixture: returns one WAV audio block. No input; read-only.",
        ),
        fixture(
            Tool::new("test_embedded_resource", embedded),
            "Embedded resource",
            "Conformance fixture: returns one embedded text resource. No input; read-only.",
        ),
        fixture(
            Tool::new("test_multiple_content_types", mixed),
            "Mixed content",
            "Conformance fixture: returns a text, an image and a resource block. No input.",
        ),
        fixture(
            Tool::new("test_error_handling", error_handling),
            "Always fails",
            "Conformance fixture: always fails with intentional_error. No input; read-only.",
        )
        .error_codes(&["intentional_error"]),
        fixture(
            Tool::new("test_tool_with_progress", with_progress),
            "Slow enough for progress",
            "Conformance fixture: sleeps 150 ms; the host reports progress. No input.",
        ),
        fixture(
            Tool::new("test_tool_with_logging", with_logging),
            "Writes log lines",
            "Conformance fixture: writes three lines to stderr, 50 ms apart. No input.",
        ),
        fixture(
            Tool::new("test_logging_tool", with_logging),
            "Writes log lines",
            "Conformance fixture: writes three lines to stderr, 50 ms apart. No input.",
        ),
        fixture(
            Tool::new("json_schema_2020_12_tool", rich),
            "JSON Schema 2020-12",
            "Conformance fixture: greets `name`; its input schema uses $defs with $anchor, \
             allOf/anyOf and if/then/else (phone or email required).",
        ),
        fixture(
            Tool::new("test_reconnection", reconnection),
            "Slow answer",
            "Conformance fixture: answers after 100 ms (SSE resumption). No input.",
        ),
        fixture(
            Tool::new("echo_region", echo_region),
            "Echo a region",
            "Conformance fixture: returns `region` as text. The argument is marked \
             x-mcp-header, so HTTP clients mirror it in Mcp-Param-Region (SEP-2243).",
        ),
        fixture(
            Tool::new("test_sleep_ms", sleep_ms),
            "Sleep",
            "Test tool: sleeps `ms` milliseconds (0-60000), then returns. For timeouts \
             and cancellation.",
        )
        .timeout_ms(60_000),
        asking(fixture(
            Tool::new("test_elicitation", elicitation),
            "Ask the user",
            "Conformance fixture: asks the person `message` with a username/email form \
                 and returns their response.",
        )),
        asking(fixture(
            Tool::new("test_elicitation_sep1034_defaults", elicitation_defaults),
            "Ask with defaults",
            "Conformance fixture: asks a form whose five fields have defaults (SEP-1034).",
        )),
        asking(fixture(
            Tool::new("test_elicitation_sep1330_enums", elicitation_enums),
            "Ask with enums",
            "Conformance fixture: asks a form with the five enum shapes (SEP-1330).",
        )),
        asking(fixture(
            Tool::new(
                "test_input_required_result_elicitation",
                input_required_elicitation,
            ),
            "Ask a name",
            "Conformance fixture: asks the person's name and greets them.",
        )),
        asking(fixture(
            Tool::new(
                "test_input_required_result_request_state",
                input_required_confirm,
            ),
            "Ask to confirm",
            "Conformance fixture: asks the person to confirm.",
        )),
        asking(fixture(
            Tool::new(
                "test_input_required_result_multi_round",
                input_required_multi_round,
            ),
            "Ask twice",
            "Conformance fixture: asks a name, then a favourite colour.",
        )),
        asking(fixture(
            Tool::new("test_streaming_elicitation", input_required_elicitation),
            "Ask a name",
            "Conformance fixture: asks the person's name and greets them.",
        )),
        asking(fixture(
            Tool::new(
                "test_input_required_result_tampered_state",
                input_required_confirm,
            ),
            "Ask to confirm",
            "Conformance fixture: asks the person to confirm (a tampered request state is \
             refused by the host).",
        )),
    ]
}

/// A fixture that asks the person: its error codes.
fn asking(tool: Tool) -> Tool {
    tool.error_codes(&["ask_unavailable", "invalid_question", "not_answered"])
        .timeout_ms(30_000)
}

toolhost_sdk::plugin!(tools);
