//! [`ToolError`]: the failure a tool reports itself.

use std::fmt;
use std::io;

use serde_json::Value;

use crate::bindings::toolhost::plugin::types::ToolError as WitToolError;

/// A failure the tool reports itself (the WIT `tool-error`).
///
/// ```
/// use toolhost_sdk::{json, ToolError};
///
/// let err = ToolError::new("multiple_matches", "old_str occurs 3 times")
///     .field("/old_str")
///     .correctable()
///     .details(json!({ "count": 3 }));
/// assert_eq!(err.code, "multiple_matches");
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct ToolError {
    /// Machine-readable code, one of the tool's declared error codes
    /// (`^[a-z][a-z0-9_]{0,63}$`).
    pub code: String,
    /// What went wrong, for the model and for people.
    pub message: String,
    /// JSON Pointer of the argument at fault, e.g. `/offset`.
    pub field: Option<String>,
    /// True when the caller can fix the call by changing its arguments.
    pub correctable: bool,
    /// Extra structured detail; sent to the host as JSON text. (Boxed to
    /// keep `Result<_, ToolError>` small.)
    pub details: Option<Box<Value>>,
}

impl ToolError {
    /// A non-correctable error with `code` and `message` and nothing else.
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Self {
        ToolError {
            code: code.into(),
            message: message.into(),
            field: None,
            correctable: false,
            details: None,
        }
    }

    /// Names the argument at fault by JSON Pointer (`/path`, `/edits/0`).
    /// The host passes it on only when it resolves into the call's
    /// arguments, or names a top-level argument the input schema declares
    /// and the call left out; it drops any other (a bare `path` too).
    #[must_use]
    pub fn field(mut self, pointer: impl Into<String>) -> Self {
        self.field = Some(pointer.into());
        self
    }

    /// Marks the error as fixable by changing the arguments.
    #[must_use]
    pub fn correctable(mut self) -> Self {
        self.correctable = true;
        self
    }

    /// Attaches structured details (serialized to the WIT `details` text).
    #[must_use]
    pub fn details(mut self, details: Value) -> Self {
        self.details = Some(Box::new(details));
        self
    }

    /// Maps an I/O error: `NotFound` → `not_found` (correctable),
    /// `PermissionDenied` → `permission_denied`, anything else → `io_error`.
    /// `what` says what was being done, e.g. `"reading src/lib.rs"`.
    pub fn io(err: &io::Error, what: impl fmt::Display) -> Self {
        let code = io_error_code(err.kind());
        let error = ToolError::new(code, format!("{what}: {}", io_message(err)));
        if err.kind() == io::ErrorKind::NotFound {
            error.correctable()
        } else {
            error
        }
    }

    /// The error the SDK returns when the arguments do not deserialize.
    pub(crate) fn invalid_arguments(err: &serde_json::Error) -> Self {
        ToolError::new(
            "invalid_arguments",
            format!("arguments do not match the tool's input schema: {err}"),
        )
        .correctable()
    }
}

/// The text of an I/O error without the raw errno Rust appends to OS errors
/// (`No such file or directory (os error 44)`): under WASI that number is a
/// WASI errno, meaningless to the model and to the user.
fn io_message(err: &io::Error) -> String {
    let text = err.to_string();
    match err.raw_os_error() {
        Some(code) => match text.strip_suffix(&format!(" (os error {code})")) {
            Some(meaningful) => meaningful.to_owned(),
            None => text,
        },
        None => text,
    }
}

/// The error code for an I/O error kind (see [`ToolError::io`]).
fn io_error_code(kind: io::ErrorKind) -> &'static str {
    match kind {
        io::ErrorKind::NotFound => "not_found",
        io::ErrorKind::PermissionDenied => "permission_denied",
        _ => "io_error",
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)?;
        if let Some(field) = &self.field {
            write!(f, " (at {field})")?;
        }
        Ok(())
    }
}

impl std::error::Error for ToolError {}

impl From<io::Error> for ToolError {
    /// Same mapping as [`ToolError::io`], without a description of the step.
    fn from(err: io::Error) -> Self {
        ToolError::io(&err, "I/O error")
    }
}

impl From<ToolError> for WitToolError {
    fn from(err: ToolError) -> Self {
        WitToolError {
            code: err.code,
            message: err.message,
            field: err.field,
            correctable: err.correctable,
            details: err.details.map(|d| d.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_kinds_map_to_codes() {
        let nf = io::Error::new(io::ErrorKind::NotFound, "gone");
        let e = ToolError::io(&nf, "reading a.txt");
        assert_eq!(e.code, "not_found");
        assert!(e.correctable);
        assert_eq!(e.message, "reading a.txt: gone");
        let pd: ToolError = io::Error::new(io::ErrorKind::PermissionDenied, "no").into();
        assert_eq!(pd.code, "permission_denied");
        assert!(!pd.correctable);
        let other: ToolError = io::Error::other("boom").into();
        assert_eq!(other.code, "io_error");
    }

    #[test]
    fn os_errors_lose_the_raw_errno() {
        let os = io::Error::from_raw_os_error(2);
        let e = ToolError::io(&os, "reading a.txt");
        assert!(e.message.starts_with("reading a.txt: "), "{}", e.message);
        assert!(!e.message.contains("os error"), "{}", e.message);
        assert!(e.message.len() > "reading a.txt: ".len(), "{}", e.message);
    }

    #[test]
    fn details_become_json_text() {
        let wit: WitToolError = ToolError::new("multiple_matches", "3 matches")
            .field("/old_str")
            .correctable()
            .details(serde_json::json!({"count": 3}))
            .into();
        assert_eq!(wit.details.as_deref(), Some(r#"{"count":3}"#));
        assert_eq!(wit.field.as_deref(), Some("/old_str"));
        assert!(wit.correctable);
    }
}
