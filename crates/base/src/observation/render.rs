//! The model-facing `text` of an observation: the plugin's own rendering
//! of its output ([`render_plugin_text`]), or else the output as compact
//! JSON, either one within a byte budget (clipped head and tail with an
//! explicit marker); or one actionable paragraph for a failure — what went
//! wrong, where, and what to do next. Invisible and bidi characters in any
//! of them are escaped visibly ([`super::escape_invisible`]); the
//! structured output keeps them.

use serde_json::Value;

use super::clip::clip_head_tail;
use super::messages::{advice, Reader};
use super::{ErrorInfo, Status, Truncation};
use crate::descriptor::SideEffect;

/// How the text of a partial observation starts.
pub(super) const PARTIAL_PREFIX: &str = "partial result: ";

pub use super::messages::{UNTRUSTED_CLOSE, UNTRUSTED_OPEN};

/// `head` (host text), then `data` between the untrusted markers.
pub(super) fn wrap_untrusted(head: &str, data: &str) -> String {
    let mut out = String::with_capacity(
        head.len() + UNTRUSTED_OPEN.len() + data.len() + UNTRUSTED_CLOSE.len(),
    );
    out.push_str(head);
    out.push_str(UNTRUSTED_OPEN);
    out.push_str(data);
    out.push_str(UNTRUSTED_CLOSE);
    out
}

/// Renders `output` as compact JSON within `max_bytes` (never pretty:
/// indentation is tokens a model pays for and learns nothing from),
/// clipped head and tail when it is larger. Returns the text, its
/// truncation and the compact size.
pub(super) fn render_json(output: &Value, max_bytes: usize) -> (String, Option<Truncation>, usize) {
    // Serializing a `Value` cannot fail: keys are strings, numbers finite.
    let compact = serde_json::to_string(output).unwrap_or_default();
    let len = compact.len();
    // Invisible and bidi characters as JSON escapes: the same value, seen.
    let compact = match super::escape_invisible_json(&compact) {
        std::borrow::Cow::Borrowed(_) => compact,
        std::borrow::Cow::Owned(escaped) => escaped,
    };
    if compact.len() > max_bytes {
        let (text, t) = clip_head_tail(&compact, max_bytes);
        return (text, t, len);
    }
    (compact, None, len)
}

/// Renders a plugin's own text (already cleaned of control characters by
/// [`super::strip_control`]) within `max_bytes`: as it is when it fits,
/// otherwise clipped head and tail with the explicit marker.
pub(super) fn render_plugin_text(text: &str, max_bytes: usize) -> (String, Option<Truncation>) {
    clip_head_tail(text, max_bytes)
}

/// Appends the one-paragraph, model-facing account of an error, e.g.
/// `invalid_arguments at /offset: … (expected integer ≥ 1, got 0). Fix the
/// argument and call again.`
pub(super) fn render_error_paragraph(
    out: &mut String,
    status: Status,
    level: SideEffect,
    e: &ErrorInfo,
) {
    render_error_paragraph_for(out, status, level, e, Reader::Model);
}

/// [`render_error_paragraph`] with the advice written for `reader`.
pub(super) fn render_error_paragraph_for(
    out: &mut String,
    status: Status,
    level: SideEffect,
    e: &ErrorInfo,
    reader: Reader<'_>,
) {
    // What the tool wrote (its message, expected and actual values) with
    // invisible and bidi characters made visible.
    let start = out.len();
    render_error_text(out, status, level, e, reader);
    if let std::borrow::Cow::Owned(escaped) = super::escape_invisible(&out[start..]) {
        out.truncate(start);
        out.push_str(&escaped);
    }
}

fn render_error_text(
    out: &mut String,
    status: Status,
    level: SideEffect,
    e: &ErrorInfo,
    reader: Reader<'_>,
) {
    out.push_str(&e.code);
    if let Some(field) = &e.field {
        if !field.is_empty() {
            out.push_str(" at ");
            out.push_str(field);
        }
    }
    out.push_str(": ");
    let message = without_field(e);
    // What the message says already is not said a second time.
    let already = matches!((&e.expected, &e.actual), (Some(exp), Some(act)) if says_expected_and_got(message, exp, act));
    let expected = e
        .expected
        .as_ref()
        .filter(|exp| !already && !says_expected(message, exp));
    let actual = e
        .actual
        .as_ref()
        .filter(|act| !already && !says_missing(message, act));
    match (expected, actual) {
        _ if already => {
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
    out.push_str(&advice(status, level, e, reader));
}

/// The message of `e` without a leading `FIELD: ` (`arguments: ` for the
/// root): the paragraph names the field already.
pub(super) fn without_field(e: &ErrorInfo) -> &str {
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
pub(super) fn says_expected_and_got(message: &str, exp: &str, act: &str) -> bool {
    message
        .strip_prefix("expected ")
        .and_then(|rest| rest.strip_prefix(exp))
        .and_then(|rest| rest.strip_prefix(", got "))
        .is_some_and(|rest| rest.starts_with(act))
}

/// Whether `message` states `exp` already: its words (without a final
/// ` (required)`), or what follows its `; ` (e.g. `allowed: a, b`).
pub(super) fn says_expected(message: &str, exp: &str) -> bool {
    let core = exp.strip_suffix(" (required)").unwrap_or(exp).trim();
    let tail = exp.split_once("; ").map(|(_, t)| t.trim());
    (!core.is_empty() && message.contains(core))
        || tail.is_some_and(|t| !t.is_empty() && message.contains(t))
}

/// Whether `act` is `missing` and `message` says so already.
fn says_missing(message: &str, act: &str) -> bool {
    act == "missing" && message.contains("missing")
}

/// Pushes `s` without a final period (the caller ends the sentence).
pub(super) fn push_sentence_body(out: &mut String, s: &str) {
    out.push_str(s.trim_end_matches('.'));
}
