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
//! - `text`, the model-facing rendering: the plugin's own rendering of its
//!   output ([`Observation::with_plugin_text`], control characters
//!   stripped) or else compact JSON, clipped head and tail with an explicit
//!   marker ([`clip_head_tail`]); or one actionable paragraph for a failure. Content from outside the host (see
//!   [`Source`]) goes between [`UNTRUSTED_OPEN`] and [`UNTRUSTED_CLOSE`].
//! - Text hygiene for guest bytes: [`strip_control`] (ANSI escapes, progress
//!   bars) and [`guest_text`] (lossy UTF-8).
//!
//! Typical use in the pipeline:
//!
//! ```
//! use serde_json::json;
//! use toolhost_base::descriptor::SideEffect;
//! use toolhost_base::observation::{ErrorCode, Observation, Status};
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
//!
//! The modules: `error` (codes, retry advice, [`ErrorInfo`]), `render`
//! (the model-facing `text`: JSON within a budget, the error paragraph,
//! [`clip_head_tail`]) and `hygiene` (guest bytes made safe to show). This
//! file holds the shape itself.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::descriptor::SideEffect;

mod clip;
mod error;
mod hygiene;
pub mod messages;
mod render;

pub use clip::clip_bounds;
use clip::clip_short;
pub use clip::{clip_head_tail, DEFAULT_TRUNCATION_HINT};
pub use error::{
    is_json_pointer, is_valid_code, tool_details, tool_field, ErrorCode, ErrorInfo, Retry,
};
pub use hygiene::{
    escape_invisible, escape_invisible_json, guest_text, is_invisible, strip_control,
};
use render::{
    render_error_paragraph, render_error_paragraph_for, render_json, render_plugin_text,
    wrap_untrusted, PARTIAL_PREFIX,
};
pub use render::{UNTRUSTED_CLOSE, UNTRUSTED_OPEN};

/// Version of the observation shape; bumped on any incompatible change.
pub const SCHEMA_VERSION: u32 = 1;

/// `$id` of the published JSON Schema of this version.
pub const SCHEMA_ID: &str = "https://toolhost.dev/schemas/observation-1.json";

/// The published JSON Schema (draft 2020-12) of an observation.
pub const SCHEMA_JSON: &str = include_str!("../../../../schemas/observation.schema.json");

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
    /// For a result spilled because it was over the call's output limit
    /// (see [`Observation::spilled`]): the id of the artifact that holds
    /// the whole output; `null` when only the text was clipped.
    #[serde(default)]
    pub artifact: Option<String>,
    /// The call that returns the next part left out; `null` when nothing
    /// can be fetched (only the text was clipped: the output is whole) or
    /// nothing is left.
    #[serde(default)]
    pub follow_up: Option<FollowUp>,
}

/// A call that fetches what an observation left out: a tool and its
/// arguments, ready to send as they are.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FollowUp {
    pub tool: String,
    pub arguments: Value,
}

/// The call's side-effect facts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Effects {
    /// The call's effective level: the tool's declared one, or read-only
    /// when the call's sandbox had no writable mount and no network
    /// (`toolhost::call::effective_level`); for `run_script`, the highest
    /// level of the inner calls that ran (`toolhost::script`).
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
    /// Time the call waited for conflicting calls to release its resources
    /// (see `toolhost::effects::resource`), in microseconds; part of its deadline. 0
    /// when they were free.
    #[serde(default)]
    pub wait_us: u64,
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
    /// Secrets hidden from `output`, `text`, `logs` and a tool's `error` (each replaced by
    /// `[REDACTED:<rule>]`): which rule, where, how many. Empty when
    /// nothing was hidden. (Absent in records stored before it existed.)
    #[serde(default)]
    pub redactions: Vec<Redaction>,
    /// Where content from outside the host in this observation came from,
    /// as the host itself saw it (never the plugin's word): the files the
    /// call's path arguments name, the URLs its guest requested, the
    /// programs it ran. Empty when nothing came from outside.
    #[serde(default)]
    pub provenance: Vec<Source>,
    /// True exactly when `provenance` is not empty: `output`, `logs` and a
    /// tool's `error` may quote that content, which is data, never
    /// instructions; `text` marks it so.
    #[serde(default)]
    pub untrusted: bool,
    /// How many times in a row this tool has now failed with this error
    /// code in this session or trajectory, this call included (0 for a
    /// success; see `toolhost::record::breaker`).
    #[serde(default)]
    pub consecutive_failures: u32,
    /// The plugin's rendering of `output` before clipping (control
    /// characters already stripped), kept so that `text` can be rendered
    /// again in a smaller budget. Not part of the published shape.
    #[serde(skip)]
    plugin_text: Option<String>,
    /// The JSON text `output` was parsed from, while `output` is exactly
    /// that parse (see [`with_output_text`](Self::with_output_text)). Not
    /// part of the published shape.
    #[serde(skip)]
    output_text: Option<String>,
}

/// What kind of place content came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SourceKind {
    /// A file or directory of the workspace.
    File,
    /// A network response.
    Network,
    /// The output of a native program.
    Process,
    /// The person behind the client, answering the tool's question.
    Person,
}

/// One place content in an observation came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Source {
    pub kind: SourceKind,
    /// A workspace-relative path (`.` for the root) for `file`, the
    /// requested URL for `network`, the program for `process`, the
    /// question's key for `person`.
    #[serde(rename = "ref")]
    pub reference: String,
    /// Hex SHA-256 of a `file` that is a regular file small enough to hash
    /// (see [`MAX_HASHED_FILE_BYTES`]), as it was when the call ended;
    /// `null` otherwise.
    pub sha256: Option<String>,
}

/// Largest file whose SHA-256 a `file` source carries, in bytes: hashing is
/// bounded so a call on a huge file does not pay for reading it twice.
pub const MAX_HASHED_FILE_BYTES: u64 = 1 << 20;

/// One kind of secret hidden in one place of an observation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Redaction {
    /// The rule that found it (`aws_access_key_id`, `private_key`, …).
    pub rule: String,
    /// `output/<JSON Pointer>` for the structured output, `text` for the
    /// plugin's own rendering of it, `logs/stdout` or
    /// `logs/stderr` for captured logs, `error/message` or
    /// `error/details/<JSON Pointer>` for a tool's own error.
    pub field: String,
    pub count: u64,
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
            redactions: Vec::new(),
            provenance: Vec::new(),
            untrusted: false,
            consecutive_failures: 0,
            plugin_text: None,
            output_text: None,
        }
    }

    /// A successful call.
    ///
    /// `text` is the output as compact JSON, clipped head and tail to
    /// `max_text_bytes` (see [`clip_head_tail`]) when it is larger;
    /// `truncated` then says what was left out. The structured `output` is
    /// always kept whole. A plugin's own rendering replaces the JSON with
    /// [`with_plugin_text`](Self::with_plugin_text). `usage.output_bytes` is set
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

    /// An `ok` observation whose `text` is the plugin's own rendering of
    /// its output (as [`Observation::with_plugin_text`] sets it). Same as
    /// `ok(…).with_plugin_text(text, …)`, without rendering the output as
    /// JSON first only to replace it.
    pub fn ok_with_text(
        call_id: &str,
        tool: &str,
        level: SideEffect,
        output: Value,
        text: &str,
        max_text_bytes: usize,
    ) -> Observation {
        let mut obs = Observation::base(call_id, tool, level, Status::Ok);
        obs.usage.output_bytes = crate::json::compact::compact_len(&output) as u64;
        obs.output = Some(output);
        obs.with_plugin_text(text, max_text_bytes)
    }

    /// Replaces the `text` of an `ok` observation with the plugin's own
    /// rendering of its output: control characters (ANSI escapes, `\r`
    /// rewrites, backspaces, …) stripped by [`strip_control`], invisible and
    /// bidi characters made visible by [`escape_invisible`], then clipped
    /// head and tail to `max_text_bytes` with the explicit marker. The
    /// structured `output` keeps the exact data. No-op for any other status.
    #[must_use]
    pub fn with_plugin_text(mut self, text: &str, max_text_bytes: usize) -> Observation {
        if self.status != Status::Ok || self.error.is_some() {
            return self;
        }
        let clean = strip_control(text);
        let clean = match escape_invisible(&clean) {
            std::borrow::Cow::Borrowed(_) => clean,
            std::borrow::Cow::Owned(escaped) => escaped,
        };
        let (rendered, truncated) = render_plugin_text(&clean, max_text_bytes);
        self.text = rendered;
        self.truncated = truncated;
        self.plugin_text = Some(clean);
        self
    }

    /// The plugin's rendering of the output (cleaned, before clipping), when
    /// it gave one.
    pub fn plugin_text(&self) -> Option<&str> {
        self.plugin_text.as_deref()
    }

    /// Keeps `text` as the JSON text of `output`: the caller vouches that
    /// `output` is exactly `serde_json::from_str(&text)` (as the pipeline
    /// knows when nothing was redacted from the tool's output). The journal
    /// then hashes the result from the text on its own thread instead of
    /// taking a copy of the value on the call's (500 lines of a file:
    /// ~2,000 allocations). Dropped when the output is spilled.
    pub fn with_output_text(mut self, text: String) -> Observation {
        if self.output.is_some() {
            self.output_text = Some(text);
        }
        self
    }

    /// The JSON text of `output` kept by
    /// [`with_output_text`](Self::with_output_text), while there is an
    /// output.
    pub fn output_text(&self) -> Option<&str> {
        self.output.as_ref().and(self.output_text.as_deref())
    }

    /// Turns an `ok` observation whose output was over the call's output
    /// limit into a spilled one: the whole output (compact JSON, already
    /// redacted) is `content`, kept by the host as `artifact`; `output`
    /// becomes `null` and `text` a head and tail of `content` within
    /// `max_text_bytes` (the head ending after a whole record when one ends
    /// in it, see [`crate::boundary`]), with the marker and where to read
    /// on. `truncated`
    /// names the artifact and the `follow_up` call (`tool` with
    /// `{"artifact", "offset"}`, `offset` being the first byte not in the
    /// head). No-op for any other status.
    #[must_use]
    pub fn spilled(
        self,
        content: &str,
        artifact: &str,
        tool: &str,
        max_text_bytes: usize,
    ) -> Observation {
        let total = content.len();
        let header = format!(
            "[the output is {total} bytes, over this call's output limit: kept as artifact {artifact}; head and tail below, the rest with {tool}]\n"
        );
        let hint = format!(
            "the whole output is artifact {artifact}: call {tool} with the follow_up arguments, then each window's own follow_up until none is left"
        );
        self.clipped_output(content, header, max_text_bytes, |next| {
            (
                hint,
                Some(artifact.to_owned()),
                Some(FollowUp {
                    tool: tool.to_owned(),
                    arguments: serde_json::json!({"artifact": artifact, "offset": next}),
                }),
            )
        })
    }

    /// Like [`spilled`](Self::spilled), for an output over the call's
    /// output limit that the host did not keep (`why`, e.g. a quota): the
    /// text is the head and tail, `truncated` has no artifact and no
    /// follow-up and says why, and how to see the rest (a narrower call).
    #[must_use]
    pub fn clipped_unkept(self, content: &str, why: &str, max_text_bytes: usize) -> Observation {
        let total = content.len();
        let header = format!(
            "[the output is {total} bytes, over this call's output limit, and was not kept ({why}); head and tail below: narrow the call to see the rest]\n"
        );
        let hint = format!(
            "the output was not kept ({why}); call the tool again asking for less (a smaller range, a filter or a limit)"
        );
        self.clipped_output(content, header, max_text_bytes, |_| (hint, None, None))
    }

    /// The common part of [`spilled`](Self::spilled) and
    /// [`clipped_unkept`](Self::clipped_unkept): `output` becomes `null`,
    /// `text` the header and a head and tail of `content`; `truncated`
    /// gets the hint, artifact and follow-up `after` makes from the first
    /// byte not in the head.
    fn clipped_output(
        mut self,
        content: &str,
        header: String,
        max_text_bytes: usize,
        after: impl FnOnce(usize) -> (String, Option<String>, Option<FollowUp>),
    ) -> Observation {
        if self.status != Status::Ok || self.error.is_some() {
            return self;
        }
        let total = content.len();
        let markers = if self.untrusted {
            UNTRUSTED_OPEN.len() + UNTRUSTED_CLOSE.len() + 2
        } else {
            0
        };
        let budget = max_text_bytes
            .saturating_sub(header.len() + markers)
            .max(64);
        let (body, head_end, kept) = match clip_bounds(content, budget) {
            Some((head_end, tail_start)) => {
                // The head ends after a whole record when one ends in it,
                // as every artifact_view window does (crate::boundary): the
                // first follow-up starts there.
                let head_end = crate::boundary::Boundaries::of(content.as_bytes())
                    .last_within(0, head_end)
                    .unwrap_or(head_end);
                let text = clip::join_head_tail(content, head_end, tail_start);
                (text, head_end, head_end + (total - tail_start))
            }
            None => (content.to_owned(), total, total),
        };
        let mut text = header;
        text.push_str(&escape_invisible_json(&body));
        self.text = if self.untrusted {
            wrap_untrusted("", &text)
        } else {
            text
        };
        self.output = None;
        self.plugin_text = None;
        self.output_text = None;
        let (hint, artifact, follow_up) = after(head_end.min(total));
        self.truncated = Some(Truncation {
            original_bytes: total as u64,
            kept_bytes: kept as u64,
            omitted_bytes: (total - kept) as u64,
            hint,
            artifact,
            follow_up,
        });
        self
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

    /// A call that failed before anything ran, whatever its level: never
    /// `unknown`, even for a code such as `timeout` that usually arises
    /// while the guest runs (a call that timed out waiting for its
    /// resources).
    pub fn not_started(
        call_id: &str,
        tool: &str,
        level: SideEffect,
        error: ErrorInfo,
    ) -> Observation {
        let mut obs = Observation::failure(call_id, tool, SideEffect::ReadOnly, error);
        obs.effects.level = level;
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

    /// Records where content from outside the host came from and marks it
    /// in `text` as data: the rendered output (or a tool's own error
    /// paragraph) goes between [`UNTRUSTED_OPEN`] and [`UNTRUSTED_CLOSE`],
    /// within `max_text_bytes` for `ok` (the output is re-rendered in the
    /// smaller budget). A host-written failure (a timeout, a crash) keeps
    /// its text: it quotes nothing. No sources: unchanged, at no cost.
    #[must_use]
    pub fn with_provenance(mut self, sources: Vec<Source>, max_text_bytes: usize) -> Observation {
        if sources.is_empty() {
            return self;
        }
        // The person behind the client is the caller's own principal: their
        // answers are a source, but not outside content.
        let outside = sources.iter().any(|s| s.kind != SourceKind::Person);
        self.provenance = sources;
        if !outside {
            return self;
        }
        self.untrusted = true;
        let budget = max_text_bytes.saturating_sub(UNTRUSTED_OPEN.len() + UNTRUSTED_CLOSE.len());
        match (&self.output, &self.error) {
            // What fits with the markers is what rendering in the smaller
            // budget would give: wrap it as it is.
            (Some(_), None) if self.truncated.is_none() && self.text.len() <= budget => {
                self.text = wrap_untrusted("", &self.text);
            }
            (Some(output), None) => {
                let (json, truncated) = match &self.plugin_text {
                    Some(text) => render_plugin_text(text, budget),
                    None => {
                        let (json, truncated, _) = render_json(output, budget);
                        (json, truncated)
                    }
                };
                let hint = self.truncated.take().map(|t| t.hint);
                self.truncated = truncated.map(|mut t| {
                    if let Some(h) = hint {
                        t.hint = h;
                    }
                    t
                });
                self.text = wrap_untrusted("", &json);
            }
            (Some(output), Some(error)) => {
                let mut head = String::from(PARTIAL_PREFIX);
                render_error_paragraph(&mut head, self.status, self.effects.level, error);
                head.push('\n');
                let (json, truncated, _) = render_json(output, budget.saturating_sub(head.len()));
                self.truncated = truncated;
                self.text = wrap_untrusted(&head, &json);
            }
            (None, Some(error)) if error.host_code().is_none() => {
                self.text = wrap_untrusted("", &self.text);
            }
            // A spilled result: its head and tail quote the content.
            (None, None) if self.status == Status::Ok => {
                self.text = wrap_untrusted("", &self.text);
            }
            _ => {}
        }
        self
    }

    /// The observation as a person at the command line reads it: a
    /// refusal ([`messages::is_refusal`]) ends by naming the flag or
    /// token caveat that grants what was refused, instead of telling a
    /// model to ask the user. `is_dir` says whether a workspace-relative
    /// path is a directory (a grant names one). Anything else, and a text
    /// that quotes outside content, is unchanged.
    #[must_use]
    pub fn for_person(mut self, is_dir: &dyn Fn(&str) -> bool) -> Observation {
        let Some(e) = &self.error else {
            return self;
        };
        if self.output.is_some() || self.untrusted || !messages::is_refusal(self.status, e) {
            return self;
        }
        let mut text = String::with_capacity(e.message.len() + 200);
        let reader = messages::Reader::Person { is_dir };
        render_error_paragraph_for(&mut text, self.status, self.effects.level, e, reader);
        self.text = text;
        self
    }

    /// True only for `ok`: a batch must count anything else, `partial`
    /// included, as not succeeded.
    pub fn is_ok(&self) -> bool {
        self.status == Status::Ok
    }
}

#[cfg(test)]
mod tests;
