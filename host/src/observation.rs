//! The observation: the one result shape for every outcome of a call.
//!
//! Whatever happens to a call (it succeeds, its arguments are rejected, it is
//! denied, it times out half-way through an irreversible write), the host
//! answers with one [`Observation`]. Its JSON form is published as
//! `schemas/observation.schema.json` ([`SCHEMA_ID`]); every field is always
//! present and is `null` where it does not apply, so consumers never have to
//! guess between "missing" and "empty".
//!
//! The pieces:
//!
//! - [`Status`]: `ok`, `error`, `denied`, `partial` or `unknown`. `unknown`
//!   means an effect may have happened; it is never reported as `error`.
//! - [`ErrorInfo`] with a [`Retry`] advice, and [`ErrorCode`], the host's own
//!   codes with their defaults (tool-defined codes pass through as strings).
//! - `text`, the model-facing rendering: the output as JSON, clipped head and
//!   tail with an explicit marker ([`clip_head_tail`]), or one actionable
//!   paragraph for a failure.
//! - Text hygiene for guest bytes: [`strip_control`] (ANSI escapes, progress
//!   bars) and [`guest_text`] (lossy UTF-8).
//!
//! Typical use in the pipeline:
//!
//! ```
//! use serde_json::json;
//! use toolhost::descriptor::SideEffect;
//! use toolhost::observation::{ErrorCode, Observation, Status};
//!
//! let ok = Observation::ok("c1", "read_file", SideEffect::ReadOnly, json!({"lines": 3}), 4096);
//! assert_eq!(ok.status, Status::Ok);
//!
//! let bad = Observation::failure(
//!     "c2",
//!     "read_file",
//!     SideEffect::ReadOnly,
//!     ErrorCode::InvalidArguments
//!         .info("offset must be at least 1")
//!         .with_field("/offset")
//!         .with_expected("integer ≥ 1")
//!         .with_actual("0"),
//! );
//! assert!(bad.text.starts_with("invalid_arguments at /offset:"));
//! ```
//!
//! Output ordering is the tool's own: `serde_json` is built with
//! `preserve_order`, so object keys keep the order the tool emitted.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::descriptor::SideEffect;

/// Version of the observation shape; bumped on any incompatible change.
pub const SCHEMA_VERSION: u32 = 1;

/// `$id` of the published JSON Schema of this version.
pub const SCHEMA_ID: &str = "https://toolhost.dev/schemas/observation-1.json";

/// The published JSON Schema (draft 2020-12) of an observation.
pub const SCHEMA_JSON: &str = include_str!("../../schemas/observation.schema.json");

/// Longest error message kept, in bytes (guest messages are untrusted).
pub const MAX_MESSAGE_BYTES: usize = 2048;

/// Longest `expected` / `actual` value kept, in bytes.
pub const MAX_DETAIL_BYTES: usize = 512;

/// Longest tool name echoed back, in bytes (the name may come from a model).
pub const MAX_TOOL_NAME_BYTES: usize = 128;

/// Longest `call_id` kept, in bytes.
pub const MAX_CALL_ID_BYTES: usize = 128;

/// Outcome of a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// The tool ran and returned its output.
    Ok,
    /// The call failed and had no effect (or is read-only).
    Error,
    /// The call is outside what the caller may do; nothing ran.
    Denied,
    /// Part of the work succeeded; `output` has it, `error` says what is missing.
    Partial,
    /// An effect may or may not have happened; settle before retrying.
    Unknown,
}

impl Status {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Error => "error",
            Status::Denied => "denied",
            Status::Partial => "partial",
            Status::Unknown => "unknown",
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

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
}

impl ErrorCode {
    /// Every host code, in declaration order.
    pub const ALL: [ErrorCode; 19] = [
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
                | ErrorCode::StalePlan
        )
    }

    /// Default retry advice, for a call that left no effect.
    ///
    /// [`Observation::failure`] turns it into [`Retry::AfterSettlement`] when
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
            | ErrorCode::StalePlan => Retry::AfterCorrection,
            ErrorCode::Timeout
            | ErrorCode::PluginUnavailable
            | ErrorCode::InFlight
            | ErrorCode::StoreUnavailable => Retry::Safe,
            ErrorCode::InDoubt => Retry::AfterSettlement,
            ErrorCode::IdempotencyConflict => Retry::Never,
            ErrorCode::UnknownTool
            | ErrorCode::Denied
            | ErrorCode::InvalidOutput
            | ErrorCode::PluginCrashed
            | ErrorCode::Internal => Retry::Never,
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
    /// [`Observation::failure`] reports these as [`Status::Unknown`] for any
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
    /// that is not a JSON Pointer turned into one.
    fn sanitize(&mut self) {
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
        self.message = clip_short(&strip_control(&self.message), MAX_MESSAGE_BYTES);
        if let Some(field) = &self.field {
            self.field = Some(to_json_pointer(&clip_short(field, MAX_DETAIL_BYTES)));
        }
        for s in [&mut self.expected, &mut self.actual].into_iter().flatten() {
            *s = clip_short(&strip_control(s), MAX_DETAIL_BYTES);
        }
    }
}

/// Turns a field name a tool reported into a JSON Pointer: valid pointers are
/// kept, `offset` becomes `/offset`, stray `~` are escaped.
fn to_json_pointer(field: &str) -> String {
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

/// What the `text` rendering left out, and how to get it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Truncation {
    /// Size of the full text, in bytes.
    pub original_bytes: u64,
    /// Bytes of the original kept (head plus tail, without the marker).
    pub kept_bytes: u64,
    /// Bytes left out (`original_bytes - kept_bytes`).
    pub omitted_bytes: u64,
    /// How to see the part left out.
    pub hint: String,
}

/// The call's side-effect facts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Effects {
    /// The tool's declared level.
    pub level: SideEffect,
    /// The idempotency key the call ran under, if any.
    pub idempotency_key: Option<String>,
    /// True when this is a stored result replayed for a repeated key.
    pub replayed: bool,
}

/// Resources the call consumed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Usage {
    /// Wasm fuel consumed.
    pub fuel_consumed: u64,
    /// Wall-clock time of the call, in microseconds.
    pub wall_time_us: u64,
    /// Peak linear memory across all memories, in bytes.
    pub peak_memory_bytes: u64,
    /// Size of the tool's output JSON, in bytes.
    pub output_bytes: u64,
}

/// Captured guest output, already sanitized and clipped.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Logs {
    /// Guest stdout.
    pub stdout: String,
    /// Guest stderr.
    pub stderr: String,
    /// Bytes of stdout not shown.
    pub stdout_omitted_bytes: u64,
    /// Bytes of stderr not shown.
    pub stderr_omitted_bytes: u64,
}

impl Logs {
    /// Builds logs from raw guest bytes: lossy UTF-8, [`strip_control`], then
    /// [`clip_head_tail`] each stream to `max_bytes_each`.
    ///
    /// The omitted counts are bytes of the sanitized text left out by the
    /// clip; if the sandbox already dropped bytes beyond its capture buffer,
    /// add them to the `*_omitted_bytes` fields.
    pub fn capture(stdout: &[u8], stderr: &[u8], max_bytes_each: usize) -> Logs {
        let (stdout, out_t) = clip_head_tail(&guest_text(stdout), max_bytes_each);
        let (stderr, err_t) = clip_head_tail(&guest_text(stderr), max_bytes_each);
        Logs {
            stdout,
            stderr,
            stdout_omitted_bytes: out_t.map_or(0, |t| t.omitted_bytes),
            stderr_omitted_bytes: err_t.map_or(0, |t| t.omitted_bytes),
        }
    }
}

/// The one result shape for every outcome of a call.
///
/// Build it with [`ok`](Self::ok), [`partial`](Self::partial) or
/// [`failure`](Self::failure); the constructors keep `status`, `text` and
/// `error` consistent with each other and with the published schema. Field
/// order here is the serialized order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Observation {
    /// Always [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The call this answers.
    pub call_id: String,
    /// The tool name as called.
    pub tool: String,
    pub status: Status,
    /// The tool's structured output (`ok` and `partial` only).
    pub output: Option<Value>,
    /// Model-facing rendering.
    pub text: String,
    /// What `text` left out; `null` when nothing was.
    pub truncated: Option<Truncation>,
    /// Why the call failed (`null` for `ok`).
    pub error: Option<ErrorInfo>,
    pub effects: Effects,
    pub usage: Usage,
    pub logs: Logs,
}

impl Observation {
    fn base(call_id: &str, tool: &str, level: SideEffect, status: Status) -> Observation {
        Observation {
            schema_version: SCHEMA_VERSION,
            call_id: clip_short(call_id, MAX_CALL_ID_BYTES),
            tool: clip_short(tool, MAX_TOOL_NAME_BYTES),
            status,
            output: None,
            text: String::new(),
            truncated: None,
            error: None,
            effects: Effects {
                level,
                idempotency_key: None,
                replayed: false,
            },
            usage: Usage::default(),
            logs: Logs::default(),
        }
    }

    /// A successful call.
    ///
    /// `text` is the output as pretty JSON when that fits in
    /// `max_text_bytes`, otherwise compact JSON clipped head and tail (see
    /// [`clip_head_tail`]); `truncated` then says what was left out. The
    /// structured `output` is always kept whole. `usage.output_bytes` is set
    /// to the compact JSON size (replaced by [`with_usage`](Self::with_usage)).
    pub fn ok(
        call_id: &str,
        tool: &str,
        level: SideEffect,
        output: Value,
        max_text_bytes: usize,
    ) -> Observation {
        let mut obs = Observation::base(call_id, tool, level, Status::Ok);
        let (text, truncated, compact_len) = render_json(&output, max_text_bytes);
        obs.text = text;
        obs.truncated = truncated;
        obs.usage.output_bytes = compact_len as u64;
        obs.output = Some(output);
        obs
    }

    /// A call that did part of its work: `output` holds what was done,
    /// `error` what was not. `text` leads with the error paragraph, then the
    /// output JSON, within `max_text_bytes` (the paragraph itself is never
    /// cut).
    pub fn partial(
        call_id: &str,
        tool: &str,
        level: SideEffect,
        output: Value,
        mut error: ErrorInfo,
        max_text_bytes: usize,
    ) -> Observation {
        error.sanitize();
        let mut obs = Observation::base(call_id, tool, level, Status::Partial);
        let mut text = String::from(PARTIAL_PREFIX);
        render_error_paragraph(&mut text, Status::Partial, level, &error);
        text.push('\n');
        let (json, truncated, compact_len) =
            render_json(&output, max_text_bytes.saturating_sub(text.len()));
        text.push_str(&json);
        obs.text = text;
        obs.truncated = truncated;
        obs.usage.output_bytes = compact_len as u64;
        obs.output = Some(output);
        obs.error = Some(error);
        obs
    }

    /// A call that failed.
    ///
    /// The status is derived: `denied` for the `denied` code; `unknown` when
    /// the error is a host code that arises while the guest runs
    /// ([`ErrorCode::during_execution`]) and the level is not read-only;
    /// otherwise `error`. When the caller knows an effect may have happened
    /// for another reason (a tool error after a partial write, a host fault
    /// after the guest ran), chain [`effect_unknown`](Self::effect_unknown).
    ///
    /// The error is sanitized to fit the schema: control characters are
    /// stripped, the message is clipped to [`MAX_MESSAGE_BYTES`], a malformed
    /// code becomes `invalid_output`, a bare field name becomes a pointer.
    ///
    /// For calls rejected before any tool is known (`unknown_tool`), pass
    /// [`SideEffect::ReadOnly`]: nothing ran.
    pub fn failure(
        call_id: &str,
        tool: &str,
        level: SideEffect,
        mut error: ErrorInfo,
    ) -> Observation {
        error.sanitize();
        let host = error.host_code();
        if host == Some(ErrorCode::Denied) {
            // A denial is never fixed by editing arguments or by waiting.
            error.correctable = false;
            error.retry = Retry::Never;
        }
        let status = match host {
            Some(code) if code.during_execution() && level != SideEffect::ReadOnly => {
                Status::Unknown
            }
            Some(code) => code.status(),
            None => Status::Error,
        };
        let mut obs = Observation::base(call_id, tool, level, status);
        obs.error = Some(error);
        obs.settle_retry_and_render();
        obs
    }

    /// Marks the outcome as unknown: the call may have taken effect.
    ///
    /// No-op for read-only calls (they cannot have an effect) and for `ok`
    /// and `denied` observations. Otherwise the status becomes `unknown`,
    /// and for reversible or irreversible calls the retry advice becomes
    /// [`Retry::AfterSettlement`] (an idempotent call may be repeated).
    #[must_use]
    pub fn effect_unknown(mut self) -> Observation {
        if self.effects.level == SideEffect::ReadOnly
            || matches!(self.status, Status::Ok | Status::Denied)
            || self.error.is_none()
        {
            return self;
        }
        if self.status == Status::Partial {
            // The partial output stays; the unknown part is in the error.
            let level = self.effects.level;
            if let Some(e) = &mut self.error {
                if matches!(level, SideEffect::Reversible | SideEffect::Irreversible) {
                    // Swap the paragraph, keep the rendered output after it.
                    let mut old = String::from(PARTIAL_PREFIX);
                    render_error_paragraph(&mut old, Status::Partial, level, e);
                    e.retry = Retry::AfterSettlement;
                    e.correctable = false;
                    if let Some(rest) = self.text.strip_prefix(old.as_str()) {
                        let mut text = String::from(PARTIAL_PREFIX);
                        render_error_paragraph(&mut text, Status::Partial, level, e);
                        text.push_str(rest);
                        self.text = text;
                    }
                }
            }
            return self;
        }
        self.status = Status::Unknown;
        self.settle_retry_and_render();
        self
    }

    /// Sets the retry advice implied by an unknown outcome and re-renders
    /// the failure text.
    fn settle_retry_and_render(&mut self) {
        let level = self.effects.level;
        let status = self.status;
        if let Some(e) = &mut self.error {
            if status == Status::Unknown
                && matches!(level, SideEffect::Reversible | SideEffect::Irreversible)
            {
                // Editing the arguments and calling again could repeat the
                // effect: settle first.
                e.retry = Retry::AfterSettlement;
                e.correctable = false;
            }
            let mut text = String::with_capacity(e.message.len() + 160);
            render_error_paragraph(&mut text, status, level, e);
            self.text = text;
        }
    }

    /// Replaces the usage figures.
    #[must_use]
    pub fn with_usage(mut self, usage: Usage) -> Observation {
        self.usage = usage;
        self
    }

    /// Attaches the captured guest output.
    #[must_use]
    pub fn with_logs(mut self, logs: Logs) -> Observation {
        self.logs = logs;
        self
    }

    /// Records the idempotency key the call ran under.
    #[must_use]
    pub fn with_idempotency_key(mut self, key: impl Into<String>) -> Observation {
        self.effects.idempotency_key = Some(key.into());
        self
    }

    /// Marks the observation as a stored result replayed for a repeated key.
    #[must_use]
    pub fn with_replayed(mut self, replayed: bool) -> Observation {
        self.effects.replayed = replayed;
        self
    }

    /// Replaces the generic truncation hint with a tool-specific one (e.g.
    /// "call read_file with offset=2001 to continue"). No-op if nothing was
    /// truncated.
    #[must_use]
    pub fn with_truncation_hint(mut self, hint: impl Into<String>) -> Observation {
        if let Some(t) = &mut self.truncated {
            t.hint = hint.into();
        }
        self
    }

    /// True only for `ok`: a batch must count anything else, `partial`
    /// included, as not succeeded.
    pub fn is_ok(&self) -> bool {
        self.status == Status::Ok
    }
}

/// How the text of a partial observation starts.
const PARTIAL_PREFIX: &str = "partial result: ";

/// Renders `output` as JSON within `max_bytes`: pretty when it fits,
/// otherwise compact and clipped. Returns the text, its truncation and the
/// compact size.
fn render_json(output: &Value, max_bytes: usize) -> (String, Option<Truncation>, usize) {
    // Serializing a `Value` cannot fail: keys are strings, numbers finite.
    let compact = serde_json::to_string(output).unwrap_or_default();
    let len = compact.len();
    if len > max_bytes {
        let (text, t) = clip_head_tail(&compact, max_bytes);
        return (text, t, len);
    }
    if matches!(output, Value::Object(m) if !m.is_empty())
        || matches!(output, Value::Array(a) if !a.is_empty())
    {
        if let Ok(pretty) = serde_json::to_string_pretty(output) {
            if pretty.len() <= max_bytes {
                return (pretty, None, len);
            }
        }
    }
    (compact, None, len)
}

/// Appends the one-paragraph, model-facing account of an error, e.g.
/// `invalid_arguments at /offset: … (expected integer ≥ 1, got 0). Fix the
/// argument and call again.`
fn render_error_paragraph(out: &mut String, status: Status, level: SideEffect, e: &ErrorInfo) {
    out.push_str(&e.code);
    if let Some(field) = &e.field {
        if !field.is_empty() {
            out.push_str(" at ");
            out.push_str(field);
        }
    }
    out.push_str(": ");
    let message = without_field(e);
    match (&e.expected, &e.actual) {
        (Some(exp), Some(act)) if says_expected_and_got(message, exp, act) => {
            push_sentence_body(out, message);
        }
        (Some(exp), Some(act)) if message.is_empty() => {
            out.push_str("expected ");
            out.push_str(exp);
            out.push_str(", got ");
            out.push_str(act);
        }
        (Some(exp), Some(act)) => {
            push_sentence_body(out, message);
            out.push_str(" (expected ");
            out.push_str(exp);
            out.push_str(", got ");
            out.push_str(act);
            out.push(')');
        }
        (Some(exp), None) => {
            push_sentence_body(
                out,
                if message.is_empty() {
                    "wrong value"
                } else {
                    message
                },
            );
            out.push_str(" (expected ");
            out.push_str(exp);
            out.push(')');
        }
        (None, Some(act)) => {
            push_sentence_body(
                out,
                if message.is_empty() {
                    "wrong value"
                } else {
                    message
                },
            );
            out.push_str(" (got ");
            out.push_str(act);
            out.push(')');
        }
        (None, None) => {
            push_sentence_body(
                out,
                if message.is_empty() {
                    "no message"
                } else {
                    message
                },
            );
        }
    }
    if out.ends_with(['.', '?', '!']) {
        out.push(' ');
    } else {
        out.push_str(". ");
    }
    out.push_str(advice(status, level, e));
}

/// The message of `e` without a leading `FIELD: ` (`arguments: ` for the
/// root): the paragraph names the field already.
fn without_field(e: &ErrorInfo) -> &str {
    let message = e.message.trim();
    let field = match e.field.as_deref() {
        None | Some("") => "arguments",
        Some(f) => f,
    };
    message
        .strip_prefix(field)
        .and_then(|rest| rest.strip_prefix(": "))
        .unwrap_or(message)
}

/// Whether `message` starts by saying `expected EXP, got ACT` (a schema
/// violation does): then the paragraph does not say it a second time.
fn says_expected_and_got(message: &str, exp: &str, act: &str) -> bool {
    message
        .strip_prefix("expected ")
        .and_then(|rest| rest.strip_prefix(exp))
        .and_then(|rest| rest.strip_prefix(", got "))
        .is_some_and(|rest| rest.starts_with(act))
}

/// Pushes `s` without a final period (the caller ends the sentence).
fn push_sentence_body(out: &mut String, s: &str) {
    out.push_str(s.trim_end_matches('.'));
}

/// What the model should do next, by status, retry advice and code.
fn advice(status: Status, level: SideEffect, e: &ErrorInfo) -> &'static str {
    if status == Status::Denied {
        return "This is a permission matter, not a missing file or a bad argument: \
                the call is outside what this session is allowed to do. Do not search \
                for alternatives or repeat the call; ask the user to grant the access \
                if you need it.";
    }
    if status == Status::Partial {
        return match e.retry {
            Retry::AfterSettlement => {
                "The output below holds what was done; the rest may or may not have \
                 taken effect, so check the current state before redoing any of it."
            }
            _ => {
                "The output below holds what was done; redo only the missing part, \
                 not the whole call."
            }
        };
    }
    if status == Status::Unknown {
        return match level {
            SideEffect::Idempotent => {
                "The outcome is unknown: the call may already have taken effect. It is \
                 idempotent, so repeating it with the same arguments is safe."
            }
            _ => {
                "The outcome is unknown: the call may already have taken effect, so do \
                 not treat it as failed and do not repeat it blindly. Check the current \
                 state first (or settle it with its idempotency key), then decide."
            }
        };
    }
    let host = e.host_code();
    match e.retry {
        Retry::Never => match host {
            Some(ErrorCode::UnknownTool) => {
                "Use one of the tools listed in the catalog; retrying this name will fail \
                 the same way."
            }
            Some(ErrorCode::InvalidOutput | ErrorCode::PluginCrashed) => {
                "The tool itself is at fault; repeating the call will fail the same way. \
                 Use another approach or report the problem to the user."
            }
            Some(ErrorCode::Internal) => {
                "This is a fault in the host, not in the call; report it to the user \
                 rather than repeating the call."
            }
            _ => "Repeating the same call will fail the same way; change approach.",
        },
        Retry::AfterCorrection => match host {
            Some(ErrorCode::InvalidJson) => {
                "Send the arguments as one valid JSON object (no duplicate keys, integers \
                 within ±2^53) and call again."
            }
            Some(
                ErrorCode::FuelExhausted | ErrorCode::MemoryExhausted | ErrorCode::OutputTooLarge,
            ) => {
                "Ask for less (a smaller range, a page, a more specific pattern) and call \
                 again."
            }
            _ if e.field.is_some() => "Fix the argument and call again.",
            _ => "Fix the arguments and call again.",
        },
        Retry::Safe => {
            "This is transient and the call had no effect; repeating it is safe, \
             possibly with a narrower request."
        }
        Retry::AfterSettlement => {
            "The call may have taken effect: check the current state before repeating it."
        }
    }
}

/// Lossy-decodes raw guest bytes and strips control sequences.
pub fn guest_text(bytes: &[u8]) -> String {
    strip_control(&String::from_utf8_lossy(bytes))
}

/// Whether `s` holds anything [`strip_control`] would change.
fn needs_cleaning(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if (c < 0x20 && c != b'\n' && c != b'\t') || c == 0x7f {
            return true;
        }
        // C1 controls U+0080..U+009F are encoded C2 80..C2 9F.
        if c == 0xc2 && matches!(b.get(i + 1), Some(0x80..=0x9f)) {
            return true;
        }
        i += 1;
    }
    false
}

/// Cleans terminal output for a model: removes ANSI escape sequences (CSI,
/// OSC, DCS/SOS/PM/APC strings, two-byte escapes, and their 8-bit C1 forms),
/// resolves carriage-return and backspace overwriting, and drops every other
/// control character except `\n` and `\t`.
///
/// - `\r` followed by more text on the same line discards the line so far,
///   so a progress bar collapses to its final state (`10%\r50%\r100%` →
///   `100%`); `\r\n` is a plain line end and a trailing `\r` changes nothing.
/// - `\b` deletes the previous character of the current line.
/// - An escape string (OSC…) missing its terminator ends at the next line
///   break, so a stray `ESC ]` cannot swallow the rest of the output.
pub fn strip_control(s: &str) -> String {
    if !needs_cleaning(s) {
        return s.to_owned();
    }
    let mut out = String::with_capacity(s.len());
    let mut line_start = 0usize;
    let mut pending_cr = false;
    let mut it = s.chars().peekable();
    while let Some(c) = it.next() {
        match c {
            '\n' => {
                out.push('\n');
                line_start = out.len();
                pending_cr = false;
            }
            '\r' => pending_cr = true,
            '\u{8}' => {
                if !pending_cr && out.len() > line_start {
                    out.pop();
                }
            }
            '\u{1b}' => skip_escape(&mut it),
            '\u{9b}' => skip_csi(&mut it),
            '\u{90}' | '\u{98}' | '\u{9d}' | '\u{9e}' | '\u{9f}' => skip_string(&mut it),
            '\t' => {
                if pending_cr {
                    out.truncate(line_start);
                    pending_cr = false;
                }
                out.push('\t');
            }
            c if c.is_control() => {}
            c => {
                if pending_cr {
                    out.truncate(line_start);
                    pending_cr = false;
                }
                out.push(c);
            }
        }
    }
    out
}

type Chars<'a> = std::iter::Peekable<std::str::Chars<'a>>;

/// Skips what follows an ESC.
fn skip_escape(it: &mut Chars<'_>) {
    match it.peek().copied() {
        Some('[') => {
            it.next();
            skip_csi(it);
        }
        Some(']' | 'P' | 'X' | '^' | '_') => {
            it.next();
            skip_string(it);
        }
        // nF: intermediates, then one final byte (e.g. `ESC ( B`).
        Some('\u{20}'..='\u{2f}') => {
            while matches!(it.peek(), Some('\u{20}'..='\u{2f}')) {
                it.next();
            }
            if matches!(it.peek(), Some('\u{30}'..='\u{7e}')) {
                it.next();
            }
        }
        // Fp, Fe, Fs: one byte (e.g. `ESC 7`, `ESC =`, `ESC M`).
        Some('\u{30}'..='\u{7e}') => {
            it.next();
        }
        // A lone ESC: drop it alone.
        _ => {}
    }
}

/// Skips a CSI sequence after its introducer: parameter and intermediate
/// bytes, then the final byte. Stops early at anything else.
fn skip_csi(it: &mut Chars<'_>) {
    while let Some(&c) = it.peek() {
        match c {
            '\u{20}'..='\u{3f}' => {
                it.next();
            }
            '\u{40}'..='\u{7e}' => {
                it.next();
                return;
            }
            _ => return,
        }
    }
}

/// Skips a control string (OSC, DCS, …) up to its terminator: BEL, ST
/// (`ESC \` or U+009C), or, defensively, a line break (left in place).
fn skip_string(it: &mut Chars<'_>) {
    while let Some(&c) = it.peek() {
        match c {
            '\u{7}' | '\u{9c}' => {
                it.next();
                return;
            }
            '\u{1b}' => {
                it.next();
                if it.peek() == Some(&'\\') {
                    it.next();
                }
                return;
            }
            '\n' => return,
            _ => {
                it.next();
            }
        }
    }
}

/// The hint [`clip_head_tail`] gives when nothing more specific is known.
pub const DEFAULT_TRUNCATION_HINT: &str = "The middle of the text was left out; the head and \
     tail are shown. Ask for a narrower part (an offset and limit, a page, or a more specific \
     query) to see the rest.";

/// Fixed bytes of the marker `\n[… N bytes omitted …]\n` besides the number.
const MARKER_FIXED_BYTES: usize = "\n[… ".len() + " bytes omitted …]\n".len();

/// Largest char boundary ≤ `i`.
fn floor_boundary(s: &str, mut i: usize) -> usize {
    if i >= s.len() {
        return s.len();
    }
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// Smallest char boundary ≥ `i`.
fn ceil_boundary(s: &str, mut i: usize) -> usize {
    if i >= s.len() {
        return s.len();
    }
    while !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

fn decimal_digits(mut n: usize) -> usize {
    let mut d = 1;
    while n >= 10 {
        n /= 10;
        d += 1;
    }
    d
}

/// Clips `s` to at most `max_bytes`, keeping its head and tail and putting a
/// marker line in the middle, e.g. `\n[… 12345 bytes omitted …]\n`.
///
/// Cuts fall on char boundaries and, when a line break is near (within a
/// quarter of the kept part), on line boundaries. The result is at most
/// `max_bytes` long, except that the marker is always present: for a
/// `max_bytes` smaller than the marker, the result is the marker alone.
/// Returns `None` as truncation when `s` already fits (and is returned as is).
pub fn clip_head_tail(s: &str, max_bytes: usize) -> (String, Option<Truncation>) {
    let len = s.len();
    if len <= max_bytes {
        return (s.to_owned(), None);
    }
    let budget = max_bytes.saturating_sub(MARKER_FIXED_BYTES + decimal_digits(len));
    let head_budget = budget / 2;
    let tail_budget = budget - head_budget;

    let mut head_end = floor_boundary(s, head_budget);
    if let Some(nl) = s[..head_end].rfind('\n') {
        if nl + 1 >= head_end - head_end / 4 {
            head_end = nl + 1;
        }
    }
    let mut tail_start = ceil_boundary(s, len - tail_budget);
    if tail_start < len {
        if let Some(nl) = s[tail_start..].find('\n') {
            if nl < (len - tail_start) / 4 {
                tail_start += nl + 1;
            }
        }
    }
    let tail_start = tail_start.max(head_end);
    let omitted = tail_start - head_end;
    let head = &s[..head_end];
    let tail = &s[tail_start..];

    let mut out = String::with_capacity(head.len() + tail.len() + MARKER_FIXED_BYTES + 20);
    out.push_str(head);
    if !head.is_empty() && !head.ends_with('\n') {
        out.push('\n');
    }
    out.push_str("[… ");
    out.push_str(&omitted.to_string());
    out.push_str(" bytes omitted …]");
    if !tail.is_empty() {
        out.push('\n');
    }
    out.push_str(tail);

    let truncation = Truncation {
        original_bytes: len as u64,
        kept_bytes: (len - omitted) as u64,
        omitted_bytes: omitted as u64,
        hint: DEFAULT_TRUNCATION_HINT.to_owned(),
    };
    (out, Some(truncation))
}

/// Clips a short string to `max_bytes` on a char boundary, ending it with `…`
/// when cut.
fn clip_short(s: &str, max_bytes: usize) -> String {
    if s.len() <= max_bytes {
        return s.to_owned();
    }
    let end = floor_boundary(s, max_bytes.saturating_sub('…'.len_utf8()));
    let mut out = String::with_capacity(end + 3);
    out.push_str(&s[..end]);
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema_validator() -> jsonschema::Validator {
        let schema: Value = serde_json::from_str(SCHEMA_JSON).expect("schema is JSON");
        jsonschema::meta::validate(&schema).expect("schema is a valid 2020-12 schema");
        jsonschema::validator_for(&schema).expect("schema compiles")
    }

    fn assert_valid(v: &jsonschema::Validator, obs: &Observation) -> Value {
        let value = serde_json::to_value(obs).unwrap();
        let errors: Vec<String> = v
            .iter_errors(&value)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        assert!(errors.is_empty(), "{errors:#?}\n{value:#}");
        value
    }

    fn assert_invalid(v: &jsonschema::Validator, value: &Value) {
        assert!(!v.is_valid(value), "should be rejected: {value:#}");
    }

    /// The `/offset` argument error the failure tests share, with `message`.
    fn offset_error(message: &str) -> ErrorInfo {
        ErrorCode::InvalidArguments
            .info(message)
            .with_field("/offset")
            .with_expected("integer ≥ 1")
            .with_actual("0")
    }

    /// A failed observation of call `c`.
    fn failed(tool: &str, level: SideEffect, error: ErrorInfo) -> Observation {
        Observation::failure("c", tool, level, error)
    }

    fn sample_ok() -> Observation {
        Observation::ok(
            "call-1",
            "read_file",
            SideEffect::ReadOnly,
            json!({"path": "src/a.rs", "content": "fn main() {}", "lines": 1}),
            4096,
        )
    }

    // ---- shape and serialization ----

    #[test]
    fn ok_serializes_every_field_in_order() {
        let s = serde_json::to_string(&sample_ok()).unwrap();
        let keys = [
            "schema_version",
            "call_id",
            "tool",
            "status",
            "output",
            "text",
            "truncated",
            "error",
            "effects",
            "usage",
            "logs",
        ];
        let mut last = 0;
        for k in keys {
            let pos = s
                .find(&format!("\"{k}\":"))
                .unwrap_or_else(|| panic!("{k} missing"));
            assert!(pos >= last, "{k} out of order in {s}");
            last = pos;
        }
        let v: Value = serde_json::from_str(&s).unwrap();
        assert_eq!(v["schema_version"], 1);
        assert_eq!(v["status"], "ok");
        assert_eq!(v["truncated"], Value::Null);
        assert_eq!(v["error"], Value::Null);
        assert_eq!(v["effects"]["level"], "read-only");
        assert_eq!(v["effects"]["idempotency_key"], Value::Null);
        assert_eq!(
            v["usage"]["output_bytes"],
            r#"{"path":"src/a.rs","content":"fn main() {}","lines":1}"#.len()
        );
        assert_eq!(v["logs"]["stdout"], "");
    }

    #[test]
    fn output_keeps_the_tools_key_order() {
        let raw = r#"{"zeta":1,"alpha":2,"mid":{"b":1,"a":2}}"#;
        let output: Value = serde_json::from_str(raw).unwrap();
        let obs = Observation::ok("c", "t", SideEffect::ReadOnly, output, 10);
        let s = serde_json::to_string(&obs).unwrap();
        assert!(s.contains(raw), "{s}");
        // Text clipped (10 bytes) but still in tool order.
        let obs = Observation::ok(
            "c",
            "t",
            SideEffect::ReadOnly,
            serde_json::from_str(raw).unwrap(),
            4096,
        );
        let z = obs.text.find("zeta").unwrap();
        let a = obs.text.find("alpha").unwrap();
        assert!(z < a);
    }

    #[test]
    fn round_trips_through_json() {
        let obs = failed(
            "write_file",
            SideEffect::Irreversible,
            ErrorCode::Timeout.info("deadline of 5000 ms exceeded"),
        )
        .with_idempotency_key("k1")
        .with_usage(Usage {
            fuel_consumed: 1,
            wall_time_us: 2,
            peak_memory_bytes: 3,
            output_bytes: 4,
        })
        .with_logs(Logs::capture(b"out", b"err", 100));
        let s = serde_json::to_string(&obs).unwrap();
        let back: Observation = serde_json::from_str(&s).unwrap();
        assert_eq!(back, obs);
    }

    #[test]
    fn deserialize_rejects_unknown_fields_and_bad_enums() {
        let mut v = serde_json::to_value(sample_ok()).unwrap();
        v["extra"] = json!(1);
        assert!(serde_json::from_value::<Observation>(v).is_err());
        let mut v = serde_json::to_value(sample_ok()).unwrap();
        v["status"] = json!("failed");
        assert!(serde_json::from_value::<Observation>(v).is_err());
        let mut v = serde_json::to_value(sample_ok()).unwrap();
        v["effects"]["level"] = json!("dangerous");
        assert!(serde_json::from_value::<Observation>(v).is_err());
    }

    #[test]
    fn serialization_is_fast() {
        let obs = Observation::ok("c", "t", SideEffect::ReadOnly, json!({"ok": true}), 1024);
        let mut buf = Vec::with_capacity(1024);
        let n = 2000;
        let start = std::time::Instant::now();
        for _ in 0..n {
            buf.clear();
            serde_json::to_writer(&mut buf, &obs).unwrap();
        }
        let per = start.elapsed() / n;
        println!("serialize trivial observation: {per:?}");
        // Generous bound for an unoptimized test build on a loaded machine;
        // a release build serializes this in about a microsecond.
        assert!(per < std::time::Duration::from_micros(200), "{per:?}");
    }

    // ---- ok text ----

    #[test]
    fn ok_text_is_pretty_when_it_fits_else_compact_and_clipped() {
        let obs = sample_ok();
        assert!(
            obs.text.contains("\n  \"path\": \"src/a.rs\""),
            "{}",
            obs.text
        );
        assert!(obs.truncated.is_none());

        let big: Vec<Value> = (0..2000).map(|i| json!({"i": i})).collect();
        let obs = Observation::ok("c", "t", SideEffect::ReadOnly, Value::Array(big), 500);
        assert!(obs.text.len() <= 500, "{}", obs.text.len());
        assert!(obs.text.starts_with("[{\"i\":0}"));
        assert!(obs.text.ends_with("{\"i\":1999}]"));
        assert!(obs.text.contains("bytes omitted …]"));
        let t = obs.truncated.as_ref().unwrap();
        assert_eq!(t.original_bytes, obs.usage.output_bytes);
        assert_eq!(t.kept_bytes + t.omitted_bytes, t.original_bytes);
        assert!(obs.output.as_ref().unwrap().as_array().unwrap().len() == 2000);

        let obs = obs.with_truncation_hint("use offset=100");
        assert_eq!(obs.truncated.unwrap().hint, "use offset=100");
    }

    #[test]
    fn ok_scalars_and_empty_containers_render_compact() {
        for (v, text) in [
            (json!(null), "null"),
            (json!(3), "3"),
            (json!("hi"), "\"hi\""),
            (json!({}), "{}"),
            (json!([]), "[]"),
        ] {
            let obs = Observation::ok("c", "t", SideEffect::ReadOnly, v, 100);
            assert_eq!(obs.text, text);
        }
    }

    // ---- failures ----

    #[test]
    fn invalid_arguments_text_is_actionable() {
        let obs = failed("read_file", SideEffect::ReadOnly, offset_error(""));
        assert_eq!(obs.status, Status::Error);
        assert_eq!(
            obs.text,
            "invalid_arguments at /offset: expected integer ≥ 1, got 0. \
             Fix the argument and call again."
        );
        let e = obs.error.unwrap();
        assert!(e.correctable);
        assert_eq!(e.retry, Retry::AfterCorrection);
        assert!(obs.output.is_none());
    }

    #[test]
    fn message_and_expected_render_together() {
        let obs = failed(
            "read_file",
            SideEffect::ReadOnly,
            offset_error("offset must be positive."),
        );
        assert_eq!(
            obs.text,
            "invalid_arguments at /offset: offset must be positive (expected integer ≥ 1, \
             got 0). Fix the argument and call again."
        );
    }

    #[test]
    fn denied_says_it_is_a_permission_matter() {
        let obs = failed("read_file",
            SideEffect::ReadOnly,
            ErrorCode::Denied
                .info("`secrets/key` is outside the granted paths (read: src); ask the user for access")
                .with_field("/path"),
        );
        assert_eq!(obs.status, Status::Denied);
        assert!(obs.text.starts_with("denied at /path: `secrets/key`"));
        assert!(obs.text.contains("permission matter, not a missing file"));
        assert!(!obs.text.contains("not_found"));
        let e = obs.error.unwrap();
        assert!(!e.correctable);
        assert_eq!(e.retry, Retry::Never);
    }

    #[test]
    fn timeout_of_a_read_only_call_is_a_safe_error() {
        let obs = failed(
            "search",
            SideEffect::ReadOnly,
            ErrorCode::Timeout.info("deadline of 5000 ms exceeded"),
        );
        assert_eq!(obs.status, Status::Error);
        assert_eq!(obs.error.as_ref().unwrap().retry, Retry::Safe);
        assert!(obs.text.contains("repeating it is safe"));
    }

    #[test]
    fn timeout_of_a_side_effecting_call_is_unknown_never_error() {
        for level in [SideEffect::Reversible, SideEffect::Irreversible] {
            for code in ErrorCode::ALL.into_iter().filter(|c| c.during_execution()) {
                let obs = failed("send_mail", level, code.info("boom"));
                assert_eq!(obs.status, Status::Unknown, "{code} {level:?}");
                assert_eq!(obs.error.as_ref().unwrap().retry, Retry::AfterSettlement);
                assert!(!obs.error.as_ref().unwrap().correctable);
                assert!(obs.text.contains("outcome is unknown"), "{}", obs.text);
                assert!(obs.text.contains("do not treat it as failed"));
            }
        }
        let obs = failed(
            "put",
            SideEffect::Idempotent,
            ErrorCode::Timeout.info("deadline"),
        );
        assert_eq!(obs.status, Status::Unknown);
        assert_eq!(obs.error.as_ref().unwrap().retry, Retry::Safe);
        assert!(obs.text.contains("idempotent"));
    }

    #[test]
    fn effect_unknown_is_explicit_for_other_errors() {
        let e = ErrorInfo::from_tool(
            "io_failed",
            "disk full after 3 of 5 files",
            None,
            false,
            None,
        );
        let obs = failed("copy", SideEffect::Reversible, e);
        assert_eq!(obs.status, Status::Error);
        let obs = obs.effect_unknown();
        assert_eq!(obs.status, Status::Unknown);
        assert_eq!(obs.error.as_ref().unwrap().retry, Retry::AfterSettlement);
        assert!(obs.text.starts_with("io_failed: disk full"));
        assert!(obs.text.contains("outcome is unknown"));

        // Read-only calls cannot have an effect; denied and ok stay as they are.
        let ro = failed("t", SideEffect::ReadOnly, ErrorCode::Internal.info("x")).effect_unknown();
        assert_eq!(ro.status, Status::Error);
        let denied =
            failed("t", SideEffect::Irreversible, ErrorCode::Denied.info("x")).effect_unknown();
        assert_eq!(denied.status, Status::Denied);
        let ok = Observation::ok("c", "t", SideEffect::Irreversible, json!(1), 10).effect_unknown();
        assert_eq!(ok.status, Status::Ok);
    }

    #[test]
    fn host_code_table() {
        use ErrorCode::*;
        for c in ErrorCode::ALL {
            assert_eq!(ErrorCode::from_code(c.as_str()), Some(c));
            assert!(is_valid_code(c.as_str()));
            assert_eq!(serde_json::to_value(c).unwrap(), json!(c.as_str()));
            // Correctable codes, and only they, say "fix and retry".
            assert_eq!(c.correctable(), c.retry() == Retry::AfterCorrection, "{c}");
        }
        assert_eq!(ErrorCode::from_code("no_match"), None);
        assert_eq!(Denied.status(), Status::Denied);
        assert_eq!(Timeout.status(), Status::Error);
        assert_eq!(Denied.retry(), Retry::Never);
        assert!(!Denied.correctable());
        assert_eq!(UnknownTool.retry(), Retry::Never);
        assert!(InvalidJson.correctable());
        assert!(!PluginUnavailable.during_execution());
        assert!(!InvalidArguments.during_execution());
        assert!(PluginCrashed.during_execution());
    }

    #[test]
    fn tool_defined_codes_pass_through() {
        let e = ErrorInfo::from_tool(
            "no_match",
            "old_str not found",
            Some("/old_str".into()),
            true,
            Some(json!({"count": 0})),
        );
        let obs = failed("edit_file", SideEffect::Reversible, e);
        assert_eq!(obs.status, Status::Error);
        let e = obs.error.as_ref().unwrap();
        assert_eq!(e.code, "no_match");
        assert_eq!(e.retry, Retry::AfterCorrection);
        assert_eq!(
            obs.text,
            "no_match at /old_str: old_str not found. Fix the argument and call again."
        );
        // A host code given as a string gets the host defaults.
        let e = ErrorInfo::new("denied", "no");
        assert_eq!(e.retry, Retry::Never);
        assert!(!e.correctable);
        let e = ErrorInfo::new("weird", "no");
        assert!(!e.correctable);
        assert_eq!(e.retry, Retry::Never);
    }

    #[test]
    fn bad_tool_errors_are_sanitized() {
        // Malformed code, ANSI in the message, bare field, huge actual.
        let e = ErrorInfo::from_tool(
            "Not-A-Code!",
            "\x1b[31mred\x1b[0m failure",
            None,
            true,
            None,
        )
        .with_field("a~b")
        .with_actual("x".repeat(10_000));
        let obs = failed("t", SideEffect::ReadOnly, e);
        let e = obs.error.as_ref().unwrap();
        assert_eq!(e.code, "invalid_output");
        assert!(!e.correctable);
        assert!(e.message.contains("malformed code `Not-A-Code!`"));
        assert!(e.message.contains("red failure"));
        assert!(!e.message.contains('\x1b'));
        assert_eq!(e.field.as_deref(), Some("/a~0b"));
        assert!(e.actual.as_ref().unwrap().len() <= MAX_DETAIL_BYTES);
        assert!(e.actual.as_ref().unwrap().ends_with('…'));

        let long = "é".repeat(5000);
        let obs = failed("t", SideEffect::ReadOnly, ErrorInfo::new("x", long));
        assert!(obs.error.as_ref().unwrap().message.len() <= MAX_MESSAGE_BYTES);
        assert!(obs.text.len() < MAX_MESSAGE_BYTES + 400);

        let obs = failed("t", SideEffect::ReadOnly, ErrorInfo::new("x", ""));
        assert!(obs.text.starts_with("x: no message."));
    }

    #[test]
    fn huge_tool_name_and_call_id_are_clipped() {
        let name = "n".repeat(100_000);
        let obs = Observation::failure(
            &name,
            &name,
            SideEffect::ReadOnly,
            ErrorCode::UnknownTool.info("no tool named that"),
        );
        assert!(obs.tool.len() <= MAX_TOOL_NAME_BYTES);
        assert!(obs.call_id.len() <= MAX_CALL_ID_BYTES);
        assert!(obs.text.contains("Use one of the tools listed"));
        let obs = failed(
            "raed_file",
            SideEffect::ReadOnly,
            ErrorCode::UnknownTool.info("no tool `raed_file`; did you mean `read_file`?"),
        );
        assert!(
            obs.text
                .starts_with("unknown_tool: no tool `raed_file`; did you mean `read_file`? Use"),
            "{}",
            obs.text
        );
    }

    #[test]
    fn pointers() {
        assert!(is_json_pointer(""));
        assert!(is_json_pointer("/a/0/~0~1"));
        assert!(!is_json_pointer("a"));
        assert!(!is_json_pointer("/a~2"));
        assert!(!is_json_pointer("/a~"));
        assert_eq!(to_json_pointer("offset"), "/offset");
        assert_eq!(to_json_pointer("/x~"), "/x~0");
        assert_eq!(to_json_pointer("/ok"), "/ok");
        assert!(!is_valid_code(""));
        assert!(!is_valid_code("9a"));
        assert!(!is_valid_code(&"a".repeat(65)));
        assert!(is_valid_code(&"a".repeat(64)));
    }

    #[test]
    fn partial_leads_with_the_error_and_keeps_output() {
        let obs = Observation::partial(
            "c",
            "batch_read",
            SideEffect::ReadOnly,
            json!({"read": ["a", "b"]}),
            ErrorInfo::from_tool(
                "not_found",
                "`c` does not exist",
                Some("/paths/2".into()),
                true,
                None,
            ),
            4096,
        );
        assert_eq!(obs.status, Status::Partial);
        assert!(!obs.is_ok());
        assert!(obs
            .text
            .starts_with("partial result: not_found at /paths/2:"));
        assert!(obs.text.contains("\"read\""));
        assert!(obs.text.contains("redo only the missing part"));
        assert!(obs.output.is_some() && obs.error.is_some());

        let obs = Observation::partial(
            "c",
            "t",
            SideEffect::Irreversible,
            json!({"sent": 1}),
            ErrorInfo::new("rate_limited", "2 of 3 not sent"),
            400,
        )
        .effect_unknown();
        assert_eq!(obs.status, Status::Partial);
        assert!(
            obs.text.contains("may or may not have taken effect"),
            "{}",
            obs.text
        );
        assert!(obs.text.ends_with("\"sent\": 1\n}"), "{}", obs.text);
        assert_eq!(obs.error.unwrap().retry, Retry::AfterSettlement);
    }

    // ---- the published schema ----

    #[test]
    fn schema_has_the_published_id() {
        let schema: Value = serde_json::from_str(SCHEMA_JSON).unwrap();
        assert_eq!(schema["$id"], SCHEMA_ID);
        assert_eq!(
            schema["$schema"],
            "https://json-schema.org/draft/2020-12/schema"
        );
    }

    #[test]
    fn observations_validate_against_the_schema() {
        let v = schema_validator();
        // ok
        assert_valid(&v, &sample_ok());
        // ok, truncated, with logs, usage and a replayed key
        let big: Vec<Value> = (0..500).map(|i| json!(i)).collect();
        let obs = Observation::ok("c", "t", SideEffect::Idempotent, Value::Array(big), 100)
            .with_idempotency_key("idem-1")
            .with_replayed(true)
            .with_usage(Usage {
                fuel_consumed: 10,
                wall_time_us: 20,
                peak_memory_bytes: 65536,
                output_bytes: 2000,
            })
            .with_logs(Logs::capture(b"\x1b[1mhello\x1b[0m", &[0xff, b'x'], 100));
        assert!(obs.truncated.is_some());
        let value = assert_valid(&v, &obs);
        assert_eq!(value["logs"]["stdout"], "hello");
        assert_eq!(value["logs"]["stderr"], "\u{fffd}x");
        // error with every field
        let obs = failed(
            "read_file",
            SideEffect::ReadOnly,
            offset_error("offset must be positive").with_details(json!({"minimum": 1})),
        );
        let value = assert_valid(&v, &obs);
        assert_eq!(value["error"]["details"]["minimum"], 1);
        // denied
        assert_valid(
            &v,
            &failed("t", SideEffect::ReadOnly, ErrorCode::Denied.info("no")),
        );
        // unknown
        let obs = failed(
            "send",
            SideEffect::Irreversible,
            ErrorCode::Timeout.info("deadline"),
        );
        assert_eq!(obs.status, Status::Unknown);
        assert_valid(&v, &obs);
        // partial
        assert_valid(
            &v,
            &Observation::partial(
                "c",
                "t",
                SideEffect::ReadOnly,
                json!([1]),
                ErrorInfo::new("some_failed", "1 of 2"),
                100,
            ),
        );
        // sanitized garbage still validates
        assert_valid(
            &v,
            &failed(
                "t",
                SideEffect::ReadOnly,
                ErrorInfo::new("BAD CODE", "m").with_field("no pointer"),
            ),
        );
    }

    #[test]
    fn schema_rejects_inconsistent_or_open_observations() {
        let v = schema_validator();
        let ok = serde_json::to_value(sample_ok()).unwrap();
        let err = serde_json::to_value(failed(
            "t",
            SideEffect::Reversible,
            ErrorCode::Internal.info("x"),
        ))
        .unwrap();

        // `base` changed by `change` must fail the schema.
        let rejects = |base: &Value, change: &dyn Fn(&mut Value)| {
            let mut x = base.clone();
            change(&mut x);
            assert_invalid(&v, &x);
        };

        rejects(&ok, &|x| x["extra"] = json!(1));
        rejects(&ok, &|x| {
            drop(x.as_object_mut().unwrap().remove("truncated"))
        });
        rejects(&ok, &|x| x["schema_version"] = json!(2));
        rejects(&ok, &|x| x["status"] = json!("failed"));
        rejects(&ok, &|x| x["effects"]["level"] = json!("harmless"));
        rejects(&ok, &|x| x["usage"]["extra"] = json!(0));
        rejects(&ok, &|x| x["usage"]["fuel_consumed"] = json!(-1));
        // ok with an error object
        rejects(&ok, &|x| x["error"] = err["error"].clone());
        // error without error object
        rejects(&err, &|x| x["error"] = Value::Null);
        // error with output
        rejects(&err, &|x| x["output"] = json!({"a": 1}));
        // bad retry value, open error object, bad pointer, bad code
        for (k, bad) in [
            ("retry", json!("maybe")),
            ("field", json!("offset")),
            ("code", json!("Bad")),
            ("extra", json!(1)),
        ] {
            rejects(&err, &|x| x["error"][k] = bad.clone());
        }
        // unknown outcome claimed for a read-only call
        rejects(&err, &|x| {
            x["status"] = json!("unknown");
            x["effects"]["level"] = json!("read-only");
        });
        // denied must not be retryable
        rejects(&err, &|x| {
            x["status"] = json!("denied");
            x["error"]["retry"] = json!("safe");
        });
    }

    // ---- strip_control ----

    /// Asserts `strip_control(input) == expected` for each `(input, expected)`.
    fn assert_strips(cases: &[(&str, &str)]) {
        for &(input, expected) in cases {
            assert_eq!(strip_control(input), expected, "{input:?}");
        }
    }

    #[test]
    fn strip_plain_text_is_unchanged() {
        for s in ["", "hello", "a\tb\nc\n", "héllo ✓ 日本"] {
            assert_eq!(strip_control(s), s);
        }
    }

    #[test]
    fn strip_ansi_sequences() {
        assert_strips(&[
            ("\x1b[1;31merror\x1b[0m: x", "error: x"),
            ("\x1b[?25lhidden cursor\x1b[?25h", "hidden cursor"),
            ("a\x1b[2Kb", "ab"),
            // OSC 8 hyperlink with ST and an OSC title with BEL.
            (
                "\x1b]8;;https://x.dev\x1b\\link\x1b]8;;\x1b\\ done",
                "link done",
            ),
            ("\x1b]0;title\x07text", "text"),
            // Charset selection, keypad mode, save cursor.
            ("\x1b(Babc\x1b=\x1b7", "abc"),
            // DCS string.
            ("x\x1bPq#0;2;0;0;0\x1b\\y", "xy"),
            // 8-bit CSI and OSC.
            ("\u{9b}31mred\u{9b}0m", "red"),
            ("\u{9d}0;t\u{9c}ok", "ok"),
            // A lone ESC at the end, and ESC before a non-ASCII char.
            ("end\x1b", "end"),
            ("\x1bé", "é"),
            // An unterminated OSC ends at the line break.
            ("a\x1b]unterminated\nnext", "a\nnext"),
            // Truncated CSI.
            ("\x1b[31", ""),
        ]);
    }

    #[test]
    fn strip_resolves_progress_bars() {
        assert_strips(&[
            ("10%\r50%\r100%\ndone\n", "100%\ndone\n"),
            ("\r\x1b[K 10%\r\x1b[K 100%", " 100%"),
            // Shorter final state: no leftovers of the longer line.
            ("100%\r50%", "50%"),
            // CRLF is a line end; a trailing CR changes nothing.
            ("a\r\nb\r\n", "a\nb\n"),
            ("abc\r", "abc"),
            ("abc\r\r\n", "abc\n"),
            // Only the current line is rewritten.
            ("keep\nold\rnew", "keep\nnew"),
            ("x\r\tindented", "\tindented"),
        ]);
    }

    #[test]
    fn strip_backspaces() {
        assert_strips(&[
            ("abc\u{8}\u{8}X", "aX"),
            // Spinner.
            ("|\u{8}/\u{8}-\u{8}\\", "\\"),
            // Man-page overstrike.
            ("_\u{8}Bo\u{8}o", "Bo"),
            // Never crosses a line break or the start.
            ("a\n\u{8}\u{8}b", "a\nb"),
            ("\u{8}x", "x"),
            // Deletes a whole multibyte char.
            ("é\u{8}e", "e"),
        ]);
    }

    #[test]
    fn strip_other_controls() {
        assert_strips(&[("a\0b\x07c\x7fd\u{85}e\x0bf", "abcdef")]);
    }

    #[test]
    fn guest_text_is_lossy() {
        assert_eq!(guest_text(b"ok \xff\xfe!"), "ok \u{fffd}\u{fffd}!");
        assert_eq!(guest_text(b"\x1b[32mgreen\x1b[0m"), "green");
    }

    // ---- clip_head_tail ----

    #[test]
    fn clip_keeps_short_text() {
        let (s, t) = clip_head_tail("hello", 5);
        assert_eq!(s, "hello");
        assert!(t.is_none());
    }

    #[test]
    fn clip_keeps_head_and_tail_with_marker() {
        let text: String = (0..1000).map(|i| format!("line {i}\n")).collect();
        let (s, t) = clip_head_tail(&text, 300);
        let t = t.unwrap();
        assert!(s.len() <= 300, "{}", s.len());
        assert!(s.starts_with("line 0\nline 1\n"));
        assert!(s.ends_with("line 999\n"));
        assert_eq!(t.original_bytes, text.len() as u64);
        assert_eq!(t.kept_bytes + t.omitted_bytes, t.original_bytes);
        assert!(s.contains(&format!("\n[… {} bytes omitted …]\n", t.omitted_bytes)));
        // Cuts fall on line boundaries here: every kept line is whole.
        for line in s.lines().filter(|l| !l.starts_with('[')) {
            assert!(line.starts_with("line "), "{line:?}");
        }
        assert_eq!(t.hint, DEFAULT_TRUNCATION_HINT);
    }

    #[test]
    fn clip_respects_char_boundaries() {
        let text = "日本語".repeat(1000);
        for max in [40, 41, 42, 43, 100, 101, 102, 1000] {
            let (s, t) = clip_head_tail(&text, max);
            assert!(s.len() <= max, "{max}: {}", s.len());
            let t = t.unwrap();
            let marker = format!("[… {} bytes omitted …]", t.omitted_bytes);
            assert!(s.contains(&marker));
            assert_eq!(
                s.len() - marker.len() - s.matches('\n').count(),
                t.kept_bytes as usize
            );
        }
    }

    #[test]
    fn clip_to_tiny_limits_keeps_the_marker() {
        let (s, t) = clip_head_tail("abcdefghijklmnopqrstuvwxyz", 0);
        assert_eq!(s, "[… 26 bytes omitted …]");
        assert_eq!(t.unwrap().kept_bytes, 0);
        let (s, _) = clip_head_tail(&"x".repeat(100), 10);
        assert!(s.contains("bytes omitted"));
    }

    #[test]
    fn clip_without_newlines_cuts_mid_line() {
        let text = "x".repeat(10_000);
        let (s, t) = clip_head_tail(&text, 1000);
        let t = t.unwrap();
        assert!(s.len() <= 1000);
        assert!(t.kept_bytes >= 900, "{}", t.kept_bytes);
        assert!(s.starts_with("xxx") && s.ends_with("xxx"));
    }

    #[test]
    fn logs_capture_clips_each_stream() {
        let logs = Logs::capture(&vec![b'a'; 5000], b"\x1b[31mE\x1b[0m\n", 100);
        assert!(logs.stdout.len() <= 100);
        assert!(logs.stdout_omitted_bytes > 4800);
        assert_eq!(logs.stderr, "E\n");
        assert_eq!(logs.stderr_omitted_bytes, 0);
    }

    #[test]
    fn clip_short_marks_cuts() {
        assert_eq!(clip_short("abc", 3), "abc");
        assert_eq!(clip_short("abcdef", 4), "a…");
        assert_eq!(clip_short("ééé", 5), "é…");
        assert_eq!(clip_short("ééé", 4), "…");
    }
}
