//! What went wrong, in a form a model can act on: the host's
//! [`ErrorCode`]s with their defaults, [`Retry`] advice, and [`ErrorInfo`]
//! (code, message, field, expected/actual, details), clipped to the
//! observation's limits.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::clip::{clip_head_tail, clip_short};
use super::hygiene::strip_control;
use super::{Status, MAX_DETAIL_BYTES, MAX_MESSAGE_BYTES};

/// Whether, and when, the same call may be sent again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Retry {
    /// The same call will fail the same way (e.g. denied).
    Never,
    /// Fix the arguments, then call again.
    AfterCorrection,
    /// Transient failure of a call without effect: repeating it is safe.
    Safe,
    /// The effect is unknown: settle (probe, inspect) before any retry.
    AfterSettlement,
}

impl Retry {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Retry::Never => "never",
            Retry::AfterCorrection => "after_correction",
            Retry::Safe => "safe",
            Retry::AfterSettlement => "after_settlement",
        }
    }
}

impl fmt::Display for Retry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The host's own error codes.
///
/// Tools define their own codes (e.g. `no_match`); those travel as plain
/// strings in [`ErrorInfo::code`]. These are the ones the host itself emits,
/// each with its default [`correctable`](Self::correctable),
/// [`retry`](Self::retry) and [`status`](Self::status).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// No tool of that name in the catalog this caller may see.
    UnknownTool,
    /// The arguments are not one strict JSON object.
    InvalidJson,
    /// The arguments do not match the tool's input schema.
    InvalidArguments,
    /// The capability does not allow the call or an object it touches.
    Denied,
    /// The call exceeded its wall-clock deadline.
    Timeout,
    /// The call exceeded its compute (fuel) budget.
    FuelExhausted,
    /// The call exceeded its memory limit.
    MemoryExhausted,
    /// The tool returned more output than allowed.
    OutputTooLarge,
    /// The tool returned output that is not JSON or breaks its output schema.
    InvalidOutput,
    /// The tool trapped or panicked.
    PluginCrashed,
    /// The plugin could not be loaded or instantiated.
    PluginUnavailable,
    /// A fault in the host itself.
    Internal,
    /// A side-effecting call came without an idempotency key.
    IdempotencyKeyRequired,
    /// The same key was used with other arguments.
    IdempotencyConflict,
    /// A call with this key is still running.
    InFlight,
    /// An earlier call with this key may have acted; settle it first.
    InDoubt,
    /// The idempotency record store cannot be reached; nothing ran.
    StoreUnavailable,
    /// An irreversible call needs an approved plan token.
    ApprovalRequired,
    /// A target changed since the plan was made; plan again.
    StalePlan,
    /// The call waits for a person's approval: the error's details carry
    /// the approval id and what the person runs; call again with the id
    /// once approved.
    ApprovalPending,
    /// A person declined the call: nothing ran; do not repeat it.
    ApprovalDeclined,
    /// The tool's plugin changed since it was locked (a "rug pull"); it was
    /// not loaded.
    PluginChanged,
    /// The tool's plugin is not in the lock in effect; it was not loaded.
    PluginNotLocked,
    /// Signatures are required and the tool's plugin is not signed.
    UnsignedPlugin,
    /// The tool's plugin has a signature that does not hold or a signer
    /// that is not trusted.
    BadSignature,
    /// The tool's texts address the model (tool poisoning); refused under a
    /// strict policy.
    SuspiciousDescription,
    /// The arguments of a tool with network access carry a secret.
    SecretInArguments,
    /// The same call failed the same way too many times in a row in this
    /// session or trajectory; it was not run again (the circuit breaker).
    CircuitOpen,
    /// The `requestState` of a multi round-trip `tools/call` is not one
    /// this host issued for this call, was altered, expired or was already
    /// used: nothing ran. Call again without it to be asked anew.
    InvalidRequestState,
    /// The tool asked the person behind the client a question that this
    /// request cannot wait for: over MCP the client is asked and sends the
    /// call again with the answer. Nothing after the question ran.
    InputRequired,
}

impl ErrorCode {
    /// Every host code, in declaration order.
    pub const ALL: [ErrorCode; 30] = [
        ErrorCode::UnknownTool,
        ErrorCode::InvalidJson,
        ErrorCode::InvalidArguments,
        ErrorCode::Denied,
        ErrorCode::Timeout,
        ErrorCode::FuelExhausted,
        ErrorCode::MemoryExhausted,
        ErrorCode::OutputTooLarge,
        ErrorCode::InvalidOutput,
        ErrorCode::PluginCrashed,
        ErrorCode::PluginUnavailable,
        ErrorCode::Internal,
        ErrorCode::IdempotencyKeyRequired,
        ErrorCode::IdempotencyConflict,
        ErrorCode::InFlight,
        ErrorCode::InDoubt,
        ErrorCode::StoreUnavailable,
        ErrorCode::ApprovalRequired,
        ErrorCode::StalePlan,
        ErrorCode::ApprovalPending,
        ErrorCode::ApprovalDeclined,
        ErrorCode::PluginChanged,
        ErrorCode::PluginNotLocked,
        ErrorCode::UnsignedPlugin,
        ErrorCode::BadSignature,
        ErrorCode::SuspiciousDescription,
        ErrorCode::SecretInArguments,
        ErrorCode::CircuitOpen,
        ErrorCode::InvalidRequestState,
        ErrorCode::InputRequired,
    ];

    /// The wire name, e.g. `invalid_arguments`.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::UnknownTool => "unknown_tool",
            ErrorCode::InvalidJson => "invalid_json",
            ErrorCode::InvalidArguments => "invalid_arguments",
            ErrorCode::Denied => "denied",
            ErrorCode::Timeout => "timeout",
            ErrorCode::FuelExhausted => "fuel_exhausted",
            ErrorCode::MemoryExhausted => "memory_exhausted",
            ErrorCode::OutputTooLarge => "output_too_large",
            ErrorCode::InvalidOutput => "invalid_output",
            ErrorCode::PluginCrashed => "plugin_crashed",
            ErrorCode::PluginUnavailable => "plugin_unavailable",
            ErrorCode::Internal => "internal",
            ErrorCode::IdempotencyKeyRequired => "idempotency_key_required",
            ErrorCode::IdempotencyConflict => "idempotency_conflict",
            ErrorCode::InFlight => "in_flight",
            ErrorCode::InDoubt => "in_doubt",
            ErrorCode::StoreUnavailable => "store_unavailable",
            ErrorCode::ApprovalRequired => "approval_required",
            ErrorCode::StalePlan => "stale_plan",
            ErrorCode::ApprovalPending => "approval_pending",
            ErrorCode::ApprovalDeclined => "approval_declined",
            ErrorCode::PluginChanged => "plugin_changed",
            ErrorCode::PluginNotLocked => "plugin_not_locked",
            ErrorCode::UnsignedPlugin => "unsigned_plugin",
            ErrorCode::BadSignature => "bad_signature",
            ErrorCode::SuspiciousDescription => "suspicious_description",
            ErrorCode::SecretInArguments => "secret_in_arguments",
            ErrorCode::CircuitOpen => "circuit_open",
            ErrorCode::InvalidRequestState => "invalid_request_state",
            ErrorCode::InputRequired => "input_required",
        }
    }

    /// The host code with this wire name, if it is one.
    pub fn from_code(code: &str) -> Option<ErrorCode> {
        ErrorCode::ALL.into_iter().find(|c| c.as_str() == code)
    }

    /// Whether the caller can fix the call by changing its arguments.
    ///
    /// Resource exhaustion (fuel, memory, output size) is deterministic for
    /// the same arguments, so it counts as correctable: ask for less.
    pub fn correctable(self) -> bool {
        matches!(
            self,
            ErrorCode::InvalidJson
                | ErrorCode::InvalidArguments
                | ErrorCode::FuelExhausted
                | ErrorCode::MemoryExhausted
                | ErrorCode::OutputTooLarge
                | ErrorCode::IdempotencyKeyRequired
                | ErrorCode::ApprovalRequired
                | ErrorCode::ApprovalPending
                | ErrorCode::StalePlan
                | ErrorCode::SecretInArguments
                | ErrorCode::CircuitOpen
                | ErrorCode::InputRequired
        )
    }

    /// Default retry advice, for a call that left no effect.
    ///
    /// [`Observation::failure`](super::Observation::failure) turns it into [`Retry::AfterSettlement`] when
    /// the effect of a side-effecting call is unknown.
    pub fn retry(self) -> Retry {
        match self {
            ErrorCode::InvalidJson
            | ErrorCode::InvalidArguments
            | ErrorCode::FuelExhausted
            | ErrorCode::MemoryExhausted
            | ErrorCode::OutputTooLarge
            | ErrorCode::IdempotencyKeyRequired
            | ErrorCode::ApprovalRequired
            | ErrorCode::ApprovalPending
            | ErrorCode::StalePlan
            | ErrorCode::SecretInArguments
            | ErrorCode::CircuitOpen
            | ErrorCode::InputRequired => Retry::AfterCorrection,
            ErrorCode::Timeout
            | ErrorCode::PluginUnavailable
            | ErrorCode::InFlight
            | ErrorCode::StoreUnavailable => Retry::Safe,
            ErrorCode::InDoubt => Retry::AfterSettlement,
            ErrorCode::IdempotencyConflict => Retry::Never,
            ErrorCode::UnknownTool
            | ErrorCode::Denied
            | ErrorCode::ApprovalDeclined
            | ErrorCode::InvalidOutput
            | ErrorCode::PluginCrashed
            | ErrorCode::Internal
            | ErrorCode::PluginChanged
            | ErrorCode::PluginNotLocked
            | ErrorCode::UnsignedPlugin
            | ErrorCode::BadSignature
            | ErrorCode::SuspiciousDescription
            | ErrorCode::InvalidRequestState => Retry::Never,
        }
    }

    /// The status a failure with this code gets when no effect is in doubt.
    pub fn status(self) -> Status {
        match self {
            ErrorCode::Denied => Status::Denied,
            _ => Status::Error,
        }
    }

    /// True for failures that only arise once the guest has started running,
    /// so a side-effecting call may already have acted.
    ///
    /// [`Observation::failure`](super::Observation::failure) reports these as [`Status::Unknown`] for any
    /// level other than read-only.
    pub fn during_execution(self) -> bool {
        matches!(
            self,
            ErrorCode::Timeout
                | ErrorCode::FuelExhausted
                | ErrorCode::MemoryExhausted
                | ErrorCode::OutputTooLarge
                | ErrorCode::InvalidOutput
                | ErrorCode::PluginCrashed
        )
    }

    /// An [`ErrorInfo`] with this code, the message and this code's defaults.
    pub fn info(self, message: impl Into<String>) -> ErrorInfo {
        ErrorInfo {
            code: self.as_str().to_owned(),
            message: message.into(),
            field: None,
            expected: None,
            actual: None,
            correctable: self.correctable(),
            retry: self.retry(),
            details: None,
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whether `code` is a well-formed error code: `^[a-z][a-z0-9_]{0,63}$`.
pub fn is_valid_code(code: &str) -> bool {
    let b = code.as_bytes();
    !b.is_empty()
        && b.len() <= 64
        && b[0].is_ascii_lowercase()
        && b.iter()
            .all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_')
}

/// Whether `ptr` is a syntactically valid JSON Pointer (RFC 6901).
pub fn is_json_pointer(ptr: &str) -> bool {
    if ptr.is_empty() {
        return true;
    }
    if !ptr.starts_with('/') {
        return false;
    }
    let b = ptr.as_bytes();
    b.iter()
        .enumerate()
        .all(|(i, &c)| c != b'~' || matches!(b.get(i + 1), Some(b'0' | b'1')))
}

/// What went wrong, in a form a model can act on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ErrorInfo {
    /// A host code ([`ErrorCode`]) or one of the tool's declared codes.
    pub code: String,
    /// What went wrong, for the model and for people.
    pub message: String,
    /// JSON Pointer of the argument at fault, e.g. `/offset`.
    pub field: Option<String>,
    /// What was expected there, e.g. `integer ≥ 1`.
    pub expected: Option<String>,
    /// What was found there, e.g. `0`.
    pub actual: Option<String>,
    /// True when changing the arguments can fix the call.
    pub correctable: bool,
    /// Whether and when to send the call again.
    pub retry: Retry,
    /// Extra structured detail.
    pub details: Option<Value>,
}

impl ErrorInfo {
    /// An error with any code (tool-defined or host), not correctable and
    /// never to be retried unless the code is a host code, whose defaults
    /// then apply.
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> ErrorInfo {
        let code = code.into();
        match ErrorCode::from_code(&code) {
            Some(host) => host.info(message),
            None => ErrorInfo {
                code,
                message: message.into(),
                field: None,
                expected: None,
                actual: None,
                correctable: false,
                retry: Retry::Never,
                details: None,
            },
        }
    }

    /// The error a tool reported itself (the WIT `tool-error`): retry advice
    /// follows `correctable`.
    pub fn from_tool(
        code: impl Into<String>,
        message: impl Into<String>,
        field: Option<String>,
        correctable: bool,
        details: Option<Value>,
    ) -> ErrorInfo {
        ErrorInfo {
            code: code.into(),
            message: message.into(),
            field,
            expected: None,
            actual: None,
            correctable,
            retry: if correctable {
                Retry::AfterCorrection
            } else {
                Retry::Never
            },
            details,
        }
    }

    /// Sets the JSON Pointer of the argument at fault.
    #[must_use]
    pub fn with_field(mut self, pointer: impl Into<String>) -> Self {
        self.field = Some(pointer.into());
        self
    }

    /// Sets what was expected.
    #[must_use]
    pub fn with_expected(mut self, expected: impl Into<String>) -> Self {
        self.expected = Some(expected.into());
        self
    }

    /// Sets what was found.
    #[must_use]
    pub fn with_actual(mut self, actual: impl Into<String>) -> Self {
        self.actual = Some(actual.into());
        self
    }

    /// Overrides `correctable`.
    #[must_use]
    pub fn with_correctable(mut self, correctable: bool) -> Self {
        self.correctable = correctable;
        self
    }

    /// Overrides the retry advice.
    #[must_use]
    pub fn with_retry(mut self, retry: Retry) -> Self {
        self.retry = retry;
        self
    }

    /// Attaches structured detail.
    #[must_use]
    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    /// The host code, if `code` is one.
    pub fn host_code(&self) -> Option<ErrorCode> {
        ErrorCode::from_code(&self.code)
    }

    /// Makes the error fit the published schema and bounded in size:
    /// control characters stripped, long strings clipped, a malformed code
    /// replaced by `invalid_output` (the tool broke its contract), a field
    /// that is not a JSON Pointer turned into one, and a field that holds a
    /// control, bidi or invisible character dropped (logged): no argument
    /// name has one, and the model would be shown text it cannot see.
    pub(super) fn sanitize(&mut self) {
        if !is_valid_code(&self.code) {
            let shown = clip_short(&strip_control(&self.code), 64);
            self.message = format!(
                "the tool reported an error with a malformed code `{shown}`: {}",
                self.message
            );
            self.code = ErrorCode::InvalidOutput.as_str().to_owned();
            self.correctable = false;
            self.retry = Retry::Never;
        }
        let message = strip_control(&self.message);
        self.message = if message.len() > MAX_MESSAGE_BYTES {
            clip_head_tail(&message, MAX_MESSAGE_BYTES).0
        } else {
            message
        };
        if let Some(field) = self.field.take() {
            if field.chars().any(is_hidden_char) {
                tracing::warn!(
                    field = %field.escape_default(),
                    "dropping a tool error's field: it holds a control, bidi or invisible character"
                );
            } else {
                self.field = Some(to_json_pointer(&clip_short(&field, MAX_DETAIL_BYTES)));
            }
        }
        for s in [&mut self.expected, &mut self.actual].into_iter().flatten() {
            *s = clip_short(&strip_control(s), MAX_DETAIL_BYTES);
        }
    }
}

/// The `details` of a tool's own error (the JSON text it returned) as an
/// observation carries them, bounded by `max_bytes` (the tool's output
/// limit): the parsed value when the text fits; otherwise the text clipped
/// head and tail with the same marker as an output's `text`
/// ([`clip_head_tail`]), as `{"clipped": {original_bytes, kept_bytes,
/// omitted_bytes, hint}, "text": "…"}`. Text that is not JSON is dropped.
/// Too-large text is never parsed.
pub fn tool_details(details: Option<String>, max_bytes: usize) -> Option<Value> {
    let text = details?;
    if text.len() <= max_bytes {
        return serde_json::from_str(&text).ok();
    }
    let (clipped, truncation) = clip_head_tail(&text, max_bytes);
    let clipped = strip_control(&clipped);
    let mut truncation = truncation?;
    truncation.hint = format!(
        "The tool's error details were {} bytes, more than its output limit of {max_bytes}; \
         the head and tail of their JSON text are shown.",
        text.len()
    );
    Some(serde_json::json!({ "clipped": truncation, "text": clipped }))
}

/// A character a reader cannot see or that reorders what they see: C0/C1
/// controls, bidi embeddings, overrides, isolates and marks, zero-width
/// characters and the byte order mark.
pub(super) fn is_hidden_char(c: char) -> bool {
    c.is_control() || super::hygiene::is_invisible(c)
}

/// A tool error's `field` as the host passes it on: only a JSON Pointer
/// (RFC 6901) that resolves into the call's arguments `args`, or that
/// names a top-level property the tool's input schema (`schema`) declares
/// and the call left out (`/cursor` for an optional argument not given).
/// Anything else (a bare name, a path into nothing, text with hidden
/// characters) is dropped, with a warning in the log: the model would be
/// pointed at an argument that is not there, by text the tool chose.
pub fn tool_field(
    field: Option<String>,
    args: &Value,
    schema: &Value,
    tool: &str,
) -> Option<String> {
    let field = field?;
    let declared = |name: &str| {
        schema
            .get("properties")
            .and_then(Value::as_object)
            .is_some_and(|p| p.contains_key(name))
    };
    let resolves = is_json_pointer(&field)
        && !field.chars().any(is_hidden_char)
        && (args.pointer(&field).is_some()
            || field.strip_prefix('/').is_some_and(|name| {
                !name.contains('/') && declared(&name.replace("~1", "/").replace("~0", "~"))
            }));
    if resolves {
        return Some(field);
    }
    tracing::warn!(
        tool,
        field = %clip_short(&field, MAX_DETAIL_BYTES).escape_default(),
        "dropping a tool error's field: it is not a JSON Pointer into the call's arguments"
    );
    None
}

/// Turns a field name a tool reported into a JSON Pointer: valid pointers are
/// kept, `offset` becomes `/offset`, stray `~` are escaped.
pub(super) fn to_json_pointer(field: &str) -> String {
    if is_json_pointer(field) {
        return field.to_owned();
    }
    let mut out = String::with_capacity(field.len() + 2);
    if !field.starts_with('/') {
        out.push('/');
    }
    let mut chars = field.chars().peekable();
    while let Some(c) = chars.next() {
        out.push(c);
        if c == '~' && !matches!(chars.peek(), Some('0' | '1')) {
            out.push('0');
        }
    }
    out
}
