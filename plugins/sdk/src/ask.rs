//! Asking the person behind the client: the `toolhost:plugin/client`
//! import.
//!
//! [`ask`] puts one question (a message and the JSON Schema of a flat form)
//! to the person and returns what they did. The host checks the question
//! and the answer, asks only during a call (never a dry-run or a probe),
//! and at most four times per call. Over a stateless MCP request the call
//! is stopped at a question without an answer and run again from the
//! start once the person answered, so a tool asks before it acts, and asks
//! the same keys in the same order on every run.
//!
//! ```no_run
//! use toolhost_sdk::ask::{ask, Reply};
//! use toolhost_sdk::json;
//! # fn f() -> Result<(), toolhost_sdk::ToolError> {
//! let schema = json!({
//!     "type": "object",
//!     "properties": {"name": {"type": "string"}},
//!     "required": ["name"]
//! });
//! match ask("user_name", "What is your name?", &schema)? {
//!     Reply::Accepted(content) => { let _name = content["name"].as_str(); }
//!     Reply::Declined | Reply::Cancelled => {}
//! }
//! # Ok(()) }
//! ```

pub use crate::bindings::toolhost::plugin::client::{Answer, AskError, Question};

use crate::ToolError;

/// The tool error codes [`ask`] can return: list them in the tool's
/// [`error_codes`](crate::Tool::error_codes).
pub const ERROR_CODES: &[&str] = &["ask_unavailable", "invalid_question"];

/// What the person did, with an accepted form parsed.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// Accepted; the form's content, valid against the schema.
    Accepted(serde_json::Value),
    Declined,
    Cancelled,
}

/// Asks `message` under `key` with a form of `schema` and waits for the
/// person. Nobody to ask is `ask_unavailable`; a malformed question (or an
/// answer the host found invalid) is `invalid_question`.
pub fn ask(key: &str, message: &str, schema: &serde_json::Value) -> Result<Reply, ToolError> {
    let q = Question {
        key: key.to_string(),
        message: message.to_string(),
        schema: schema.to_string(),
    };
    match crate::bindings::toolhost::plugin::client::ask(&q) {
        Ok(Answer::Accepted(json)) => Ok(Reply::Accepted(
            serde_json::from_str(&json).unwrap_or(serde_json::Value::Null),
        )),
        Ok(Answer::Declined) => Ok(Reply::Declined),
        Ok(Answer::Cancelled) => Ok(Reply::Cancelled),
        Err(AskError::Unavailable(m)) => Err(ToolError::new("ask_unavailable", m)),
        Err(AskError::Invalid(m)) => Err(ToolError::new("invalid_question", m)),
    }
}
