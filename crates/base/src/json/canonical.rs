//! Canonical JSON: RFC 8785, the JSON Canonicalization Scheme (JCS).
//!
//! Two argument objects that mean the same thing must produce the same bytes,
//! so that the idempotency key of a call (see `toolhost::effects::idempotency`) does not
//! depend on whitespace, key order or how a number was spelled. JCS fixes all
//! three:
//!
//! - no insignificant whitespace;
//! - object members sorted by their names compared as arrays of **UTF-16 code
//!   units** (which differs from code-point order for characters beyond the
//!   BMP: U+1F600 is `D83D DE00` and sorts before U+FB01);
//! - numbers written as ECMAScript's `Number.prototype.toString` writes them
//!   (`1.0` → `1`, `1e2` → `100`, `-0` → `0`, `1e21` → `1e+21`,
//!   `1e-7` → `1e-7`);
//! - strings with the minimal escaping of ECMAScript's `JSON.stringify`
//!   (`\"`, `\\`, `\b \f \n \r \t`, other controls as lowercase `\u00XX`,
//!   everything else, `/` and non-ASCII included, written literally).
//!
//! The serialization is this module's own walk over the [`Value`]: every
//! call's arguments and every journaled output are canonicalized, and the
//! generic serializer of the [`serde_json_canonicalizer`] crate (which
//! buffers and re-sorts each object through serde's formatter hooks and
//! writes every integer through its float formatter) was most of the
//! journal's work; this walk writes the common cases directly. The crate
//! still formats non-integer numbers (ECMAScript's
//! shortest round trip) and is the oracle the tests hold this walk to.
//! This module adds what JCS leaves to the caller: the input must be I-JSON.
//! [`canonicalize`] refuses a [`Value`] holding an integer beyond ±2^53 (it
//! would be rounded and two different calls would canonicalize alike) or
//! nested deeper than [`crate::json::MAX_DEPTH`]; [`canonicalize_str`] parses
//! text with [`crate::json::parse_strict`] first, which also refuses duplicate
//! keys (serde_json would silently keep the last one).
//!
//! A `serde_json::Value` cannot hold NaN, infinities or lone surrogates, so
//! those JCS failure cases cannot arise here.

use std::fmt;

use serde::Serialize;
use serde_json::Value;

use sha2::{Digest, Sha256};

use super::strict::{self as json, JsonError, MAX_DEPTH, MAX_SAFE_INTEGER};

mod text;
pub use text::canonical_sha256_text;

/// The class of a canonicalization failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CanonErrorKind {
    /// The text was not strict JSON (see [`crate::json::JsonErrorKind`]).
    InvalidJson,
    /// An integer lies beyond ±2^53 and would be rounded.
    IntegerOutOfRange,
    /// Arrays and objects nest deeper than [`MAX_DEPTH`].
    TooDeep,
    /// The serializer failed (not expected for a `serde_json::Value`).
    Serialize,
}

impl CanonErrorKind {
    /// Stable snake_case identifier of the kind.
    pub fn as_str(self) -> &'static str {
        match self {
            CanonErrorKind::InvalidJson => "invalid_json",
            CanonErrorKind::IntegerOutOfRange => "integer_out_of_range",
            CanonErrorKind::TooDeep => "too_deep",
            CanonErrorKind::Serialize => "serialize",
        }
    }
}

impl fmt::Display for CanonErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a value could not be canonicalized.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CanonError {
    /// [`canonicalize_str`] was given text that is not strict JSON.
    // The message includes the JSON error's, so it is not also a `source`
    // (a chain printer would say it twice).
    #[error("not canonicalizable: {0}")]
    InvalidJson(JsonError),
    /// An integer beyond ±2^53 (I-JSON's exact range).
    #[error("integer {value} at {} lies beyond ±2^53 and cannot be canonicalized exactly", pointer_text(.pointer))]
    IntegerOutOfRange {
        /// JSON Pointer (RFC 6901) of the number; `""` is the root.
        pointer: String,
        /// The integer as written by serde_json.
        value: String,
    },
    /// Nesting deeper than [`MAX_DEPTH`].
    #[error("value at {} nests deeper than {max} levels", pointer_text(.pointer))]
    TooDeep {
        /// JSON Pointer of the first array or object past the limit.
        pointer: String,
        /// The limit.
        max: usize,
    },
    /// The underlying serializer failed.
    #[error("canonical serialization failed: {0}")]
    Serialize(String),
}

impl From<JsonError> for CanonError {
    fn from(e: JsonError) -> Self {
        CanonError::InvalidJson(e)
    }
}

impl CanonError {
    /// The class of failure.
    pub fn kind(&self) -> CanonErrorKind {
        match self {
            CanonError::InvalidJson(_) => CanonErrorKind::InvalidJson,
            CanonError::IntegerOutOfRange { .. } => CanonErrorKind::IntegerOutOfRange,
            CanonError::TooDeep { .. } => CanonErrorKind::TooDeep,
            CanonError::Serialize(_) => CanonErrorKind::Serialize,
        }
    }
}

fn pointer_text(pointer: &str) -> &str {
    if pointer.is_empty() {
        "the root"
    } else {
        pointer
    }
}

/// Serializes `value` as RFC 8785 canonical JSON.
///
/// Object members are emitted in UTF-16 code-unit order whatever order the
/// `Value` holds them in (this crate builds serde_json with
/// `preserve_order`).
///
/// # Errors
///
/// [`CanonError::IntegerOutOfRange`] for an integer beyond ±2^53 and
/// [`CanonError::TooDeep`] for nesting beyond [`MAX_DEPTH`]; both are checked
/// before anything is written.
pub fn canonicalize(value: &Value) -> Result<String, CanonError> {
    check_i_json(value)?;
    let mut out = String::new();
    write_canonical(value, &mut out)?;
    Ok(out)
}

/// The SHA-256 of `value`'s canonical JSON ([`canonicalize`]), hashed as it
/// is written: a large output (a page of a file, a long listing) is never
/// held whole a second time.
///
/// # Errors
///
/// Those of [`canonicalize`].
pub fn canonical_sha256(value: &Value) -> Result<[u8; 32], CanonError> {
    check_i_json(value)?;
    let mut sink = HashSink {
        buf: String::with_capacity(HashSink::CHUNK + 256),
        hasher: Sha256::new(),
    };
    write_canonical(value, &mut sink)?;
    sink.hasher.update(sink.buf.as_bytes());
    Ok(sink.hasher.finalize().into())
}

/// Where canonical text goes: a `String`, or a hash fed in chunks.
trait Sink {
    fn push_str(&mut self, s: &str);
    fn push(&mut self, c: char) {
        self.push_str(c.encode_utf8(&mut [0; 4]));
    }
}

impl Sink for String {
    fn push_str(&mut self, s: &str) {
        String::push_str(self, s);
    }
    fn push(&mut self, c: char) {
        String::push(self, c);
    }
}

/// A [`Sink`] that hashes what it is given, 16 KiB at a time.
struct HashSink {
    buf: String,
    hasher: Sha256,
}

impl HashSink {
    const CHUNK: usize = 16 * 1024;
}

impl Sink for HashSink {
    fn push_str(&mut self, s: &str) {
        if self.buf.len() + s.len() > Self::CHUNK {
            self.hasher.update(self.buf.as_bytes());
            self.buf.clear();
            if s.len() > Self::CHUNK {
                self.hasher.update(s.as_bytes());
                return;
            }
        }
        self.buf.push_str(s);
    }
}

/// Writes `value` (already checked by [`check_i_json`]) as JCS.
fn write_canonical(value: &Value, out: &mut impl Sink) -> Result<(), CanonError> {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(n) => {
            // Integers within ±2^53 (checked) are written as ECMAScript
            // writes the same double: in plain decimal.
            if let Some(u) = n.as_u64() {
                out.push_str(itoa::Buffer::new().format(u));
            } else if let Some(i) = n.as_i64() {
                out.push_str(itoa::Buffer::new().format(i));
            } else {
                let text = serde_json_canonicalizer::to_string(n)
                    .map_err(|e| CanonError::Serialize(e.to_string()))?;
                out.push_str(&text);
            }
        }
        Value::String(s) => write_string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out)?;
            }
            out.push(']');
        }
        Value::Object(members) => {
            let mut sorted: Vec<(&String, &Value)> = members.iter().collect();
            sorted.sort_unstable_by(|a, b| utf16_order(a.0, b.0));
            out.push('{');
            for (i, (name, item)) in sorted.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(name, out);
                out.push(':');
                write_canonical(item, out)?;
            }
            out.push('}');
        }
    }
    Ok(())
}

/// Member names compared as UTF-16 code units. Byte order of UTF-8 is
/// code-point order, which differs from code-unit order only between
/// U+E000..U+FFFF and the supplementary planes: only names holding a byte
/// that starts such a character (0xEE and above) take the slow way.
fn utf16_order(a: &str, b: &str) -> std::cmp::Ordering {
    let high = |s: &str| s.bytes().any(|c| c >= 0xEE);
    if high(a) && high(b) {
        a.encode_utf16().cmp(b.encode_utf16())
    } else {
        a.cmp(b)
    }
}

/// `s` as `JSON.stringify` writes it: `\"`, `\\`, the five short control
/// escapes, other controls as lowercase `\u00xx`, all else literal.
fn write_string(s: &str, out: &mut impl Sink) {
    out.push('"');
    let bytes = s.as_bytes();
    let mut from = 0;
    let mut at = 0;
    loop {
        // Eight bytes at a time to the next one that needs an escape (source
        // text holds a quote or backslash every few dozen bytes at most).
        at = crate::json::compact::skip_clean_words(bytes, at);
        let Some(&byte) = bytes.get(at) else {
            break;
        };
        let escape = match byte {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x08 => "\\b",
            0x0c => "\\f",
            0..=0x1f => "",
            _ => {
                at += 1;
                continue;
            }
        };
        out.push_str(&s[from..at]);
        if escape.is_empty() {
            // Rare: the other control characters.
            out.push_str(&format!("\\u{byte:04x}"));
        } else {
            out.push_str(escape);
        }
        at += 1;
        from = at;
    }
    out.push_str(&s[from..]);
    out.push('"');
}

/// Parses `text` with [`json::parse_strict`] (refusing duplicate keys,
/// inexact integers and excessive nesting) and canonicalizes the result.
///
/// # Errors
///
/// [`CanonError::InvalidJson`] carrying the [`JsonError`], or any error of
/// [`canonicalize`].
pub fn canonicalize_str(text: &str) -> Result<String, CanonError> {
    let value = json::parse_strict(text)?;
    canonicalize(&value)
}

/// Checks the I-JSON constraints a `Value` can violate (see
/// [`canonicalize`]). The walk builds no pointer: only a violation's path
/// is collected, on the way back out.
fn check_i_json(value: &Value) -> Result<(), CanonError> {
    check_value(value, 0).map_err(|(violation, mut path)| {
        path.reverse();
        let mut pointer = String::new();
        for step in path {
            match step {
                Step::Index(i) => {
                    pointer.push('/');
                    pointer.push_str(itoa::Buffer::new().format(i));
                }
                Step::Key(name) => json::push_pointer_token(&mut pointer, name),
            }
        }
        match violation {
            Violation::Inexact(number) => CanonError::IntegerOutOfRange {
                pointer,
                value: number.to_string(),
            },
            Violation::TooDeep => CanonError::TooDeep {
                pointer,
                max: MAX_DEPTH,
            },
        }
    })
}

/// What [`check_value`] found, and where: the steps from the value found
/// back up to the root.
type Found<'a> = (Violation<'a>, Vec<Step<'a>>);

enum Violation<'a> {
    Inexact(&'a serde_json::Number),
    TooDeep,
}

enum Step<'a> {
    Index(usize),
    Key(&'a str),
}

/// `depth` counts the arrays and objects enclosing `value` (the root is at
/// 0; a root array or object is level 1, as in [`crate::json`]).
fn check_value(value: &Value, depth: usize) -> Result<(), Found<'_>> {
    match value {
        Value::Number(number) => {
            let exact = match (number.as_u64(), number.as_i64()) {
                (Some(u), _) => u <= MAX_SAFE_INTEGER,
                (None, Some(i)) => i.unsigned_abs() <= MAX_SAFE_INTEGER,
                // A float: always finite in a Value, formatted exactly by JCS.
                (None, None) => true,
            };
            if exact {
                Ok(())
            } else {
                Err((Violation::Inexact(number), Vec::new()))
            }
        }
        Value::Array(_) | Value::Object(_) if depth >= MAX_DEPTH => {
            Err((Violation::TooDeep, Vec::new()))
        }
        Value::Array(items) => {
            for (index, item) in items.iter().enumerate() {
                check_value(item, depth + 1).map_err(|(v, mut path)| {
                    path.push(Step::Index(index));
                    (v, path)
                })?;
            }
            Ok(())
        }
        Value::Object(members) => {
            for (name, item) in members {
                check_value(item, depth + 1).map_err(|(v, mut path)| {
                    path.push(Step::Key(name));
                    (v, path)
                })?;
            }
            Ok(())
        }
        Value::Null | Value::Bool(_) | Value::String(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::strict::JsonErrorKind;
    use serde_json::json;

    fn canon(text: &str) -> String {
        canonicalize_str(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    fn canon_f64(bits: u64) -> String {
        canonicalize(&Value::from(f64::from_bits(bits))).unwrap()
    }

    #[test]
    fn removes_whitespace_and_sorts_keys() {
        assert_eq!(
            canon("{ \"b\" : 1 ,\n \"a\" : [ 2 , 3 ] , \"c\":{ } }"),
            r#"{"a":[2,3],"b":1,"c":{}}"#
        );
    }

    #[test]
    fn sorts_regardless_of_insertion_order() {
        // serde_json is built with preserve_order: the map remembers insertion.
        let mut forward = serde_json::Map::new();
        forward.insert("a".into(), json!(1));
        forward.insert("b".into(), json!(2));
        let mut backward = serde_json::Map::new();
        backward.insert("b".into(), json!(2));
        backward.insert("a".into(), json!(1));
        let forward = canonicalize(&Value::Object(forward)).unwrap();
        let backward = canonicalize(&Value::Object(backward)).unwrap();
        assert_eq!(forward, r#"{"a":1,"b":2}"#);
        assert_eq!(forward, backward);
    }

    #[test]
    fn numbers_use_ecmascript_forms() {
        let cases = [
            ("1.0", "1"),
            ("1e2", "100"),
            ("1E2", "100"),
            ("-0", "0"),
            ("-0.0", "0"),
            ("0", "0"),
            ("1e21", "1e+21"),
            ("1e20", "100000000000000000000"),
            ("1e-7", "1e-7"),
            ("0.000001", "0.000001"),
            ("4.50", "4.5"),
            ("2e-3", "0.002"),
            ("-1.5e-10", "-1.5e-10"),
            ("0.1", "0.1"),
            ("0.30000000000000004", "0.30000000000000004"),
            ("123456789012", "123456789012"),
            ("9007199254740992", "9007199254740992"),
            ("-9007199254740992", "-9007199254740992"),
            ("1.7976931348623157e308", "1.7976931348623157e+308"),
            ("5e-324", "5e-324"),
        ];
        for (input, expected) in cases {
            assert_eq!(canon(input), expected, "input {input}");
        }
    }

    #[test]
    fn computed_floats_are_formatted_shortest_round_trip() {
        assert_eq!(
            canonicalize(&json!(0.1 + 0.2)).unwrap(),
            "0.30000000000000004"
        );
        assert_eq!(
            canonicalize(&json!(1.0 / 3.0)).unwrap(),
            "0.3333333333333333"
        );
        assert_eq!(canonicalize(&json!(-0.0)).unwrap(), "0");
        assert_eq!(canonicalize(&json!(100.0)).unwrap(), "100");
    }

    /// RFC 8785 Appendix B: IEEE 754 bit patterns and their JCS forms.
    #[test]
    fn rfc8785_appendix_b_number_vectors() {
        let vectors: [(u64, &str); 20] = [
            (0x0000000000000000, "0"),
            (0x8000000000000000, "0"),
            (0x0000000000000001, "5e-324"),
            (0x8000000000000001, "-5e-324"),
            (0x7fefffffffffffff, "1.7976931348623157e+308"),
            (0xffefffffffffffff, "-1.7976931348623157e+308"),
            (0x4340000000000000, "9007199254740992"),
            (0xc340000000000000, "-9007199254740992"),
            (0x4430000000000000, "295147905179352830000"),
            (0x44b52d02c7e14af5, "9.999999999999997e+22"),
            (0x44b52d02c7e14af6, "1e+23"),
            (0x44b52d02c7e14af7, "1.0000000000000001e+23"),
            (0x444b1ae4d6e2ef4e, "999999999999999700000"),
            (0x444b1ae4d6e2ef4f, "999999999999999900000"),
            (0x444b1ae4d6e2ef50, "1e+21"),
            (0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"),
            (0x3eb0c6f7a0b5ed8d, "0.000001"),
            (0x41b3de4355555553, "333333333.3333332"),
            (0x41b3de4355555554, "333333333.33333325"),
            (0x41b3de4355555555, "333333333.3333333"),
        ];
        for (bits, expected) in vectors {
            assert_eq!(canon_f64(bits), expected, "bits {bits:#018x}");
        }
        let more: [(u64, &str); 7] = [
            (0x41b3de4355555556, "333333333.3333334"),
            (0x41b3de4355555557, "333333333.33333343"),
            (0xbecbf647612f3696, "-0.0000033333333333333333"),
            (0x43143ff3c1cb0959, "1424953923781206.2"),
            (0x7fefffffffffffff, "1.7976931348623157e+308"),
            (0x3ff0000000000000, "1"),
            (0x4059000000000000, "100"),
        ];
        for (bits, expected) in more {
            assert_eq!(canon_f64(bits), expected, "bits {bits:#018x}");
        }
    }

    /// RFC 8785 section 3.2.2: the worked example.
    #[test]
    fn rfc8785_section_3_2_2_example() {
        let input = r#"{
  "numbers": [333333333.33333329, 1E30, 4.50,
              2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}"#;
        let expected = "{\"literals\":[null,true,false],\"numbers\":[333333333.3333333,1e+30,4.5,0.002,1e-27],\"string\":\"€$\\u000f\\nA'B\\\"\\\\\\\\\\\"/\"}";
        assert_eq!(canon(input), expected);
    }

    /// RFC 8785 section 3.2.3: sorting of properties by UTF-16 code units.
    #[test]
    fn rfc8785_section_3_2_3_sorting_example() {
        let input = r#"{
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control",
  "\u00f6": "Latin Small Letter O With Diaeresis"
}"#;
        let expected = "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u{80}\":\"Control\",\
\"ö\":\"Latin Small Letter O With Diaeresis\",\"€\":\"Euro Sign\",\
\"😀\":\"Emoji: Grinning Face\",\"\u{FB33}\":\"Hebrew Letter Dalet With Dagesh\"}";
        assert_eq!(canon(input), expected);
    }

    #[test]
    fn keys_sort_by_utf16_code_units_not_code_points() {
        // Code-point order: U+FB01 < U+1F600. UTF-16 order: D83D < FB01.
        let value = json!({ "\u{FB01}": 1, "\u{1F600}": 2 });
        assert_eq!(
            canonicalize(&value).unwrap(),
            "{\"\u{1F600}\":2,\"\u{FB01}\":1}"
        );
        let mut by_code_point: Vec<&str> = vec!["\u{1F600}", "\u{FB01}"];
        by_code_point.sort();
        assert_eq!(by_code_point, ["\u{FB01}", "\u{1F600}"], "premise");
    }

    #[test]
    fn keys_sort_by_code_units_of_the_decoded_name() {
        // "\u0061" is "a": it sorts as "a", not as a backslash.
        assert_eq!(canon(r#"{"b":1,"\u0061":2}"#), r#"{"a":2,"b":1}"#);
        // A prefix sorts first; case matters (uppercase first).
        assert_eq!(
            canon(r#"{"ab":1,"a":2,"B":3,"":4}"#),
            r#"{"":4,"B":3,"a":2,"ab":1}"#
        );
    }

    #[test]
    fn escaped_and_literal_unicode_are_identical() {
        let escaped = canon(r#"{"name":"caf\u00e9","\u00e9":true}"#);
        let literal = canon("{\"name\":\"café\",\"é\":true}");
        assert_eq!(escaped, literal);
        assert_eq!(literal, "{\"name\":\"café\",\"é\":true}");
        // Surrogate pairs decode to the literal character.
        assert_eq!(canon(r#""\ud83d\ude00""#), "\"\u{1F600}\"");
    }

    #[test]
    fn strings_use_minimal_escaping() {
        assert_eq!(
            canon(r#""\b\f\n\r\t\u0000\u001F\u007f \" \\ \/ \u2028""#),
            "\"\\b\\f\\n\\r\\t\\u0000\\u001f\u{7f} \\\" \\\\ / \u{2028}\""
        );
    }

    #[test]
    fn nested_structures_are_canonical_at_every_level() {
        let input = r#"
            {"z": [ {"y": 1.50, "x": [true, null, {"b": -0, "a": "s"}]}, [], {} ],
             "a": {"c": {"e": 1e1, "d": [3, 2, 1]}}}"#;
        assert_eq!(
            canon(input),
            r#"{"a":{"c":{"d":[3,2,1],"e":10}},"z":[{"x":[true,null,{"a":"s","b":0}],"y":1.5},[],{}]}"#
        );
    }

    #[test]
    fn scalars_and_empty_containers() {
        assert_eq!(canon("null"), "null");
        assert_eq!(canon(" true "), "true");
        assert_eq!(canon("false"), "false");
        assert_eq!(canon(r#""""#), r#""""#);
        assert_eq!(canon("[ ]"), "[]");
        assert_eq!(canon("{ }"), "{}");
    }

    #[test]
    fn canonical_output_is_a_fixed_point() {
        let inputs = [
            r#"{"b":[1.0,2e0,{"d":"\u00e9","c":null}],"a":-0}"#,
            r#"[1e21,1e-7,0.1,"x"]"#,
            "{\"\u{1F600}\":1,\"\u{FB01}\":2}",
        ];
        for input in inputs {
            let once = canon(input);
            assert_eq!(canon(&once), once, "input {input}");
        }
    }

    #[test]
    fn equivalent_spellings_canonicalize_alike() {
        let a = canon(r#"{"n": 1, "list": [1e2, 0.5], "s": "\u00e9"}"#);
        let b = canon("{\"s\":\"é\",\"list\":[100,5e-1],\"n\":1.000}");
        assert_eq!(a, b);
    }

    #[test]
    fn rejects_integers_beyond_2_pow_53_in_values() {
        let err = canonicalize(&json!({"a": [u64::MAX]})).unwrap_err();
        assert_eq!(err.kind(), CanonErrorKind::IntegerOutOfRange);
        assert_eq!(
            err,
            CanonError::IntegerOutOfRange {
                pointer: "/a/0".into(),
                value: u64::MAX.to_string(),
            }
        );
        let err = canonicalize(&json!(-9_007_199_254_740_993_i64)).unwrap_err();
        assert_eq!(err.kind(), CanonErrorKind::IntegerOutOfRange);
        assert!(err.to_string().contains("the root"), "{err}");
        assert!(canonicalize(&json!(9_007_199_254_740_993_u64)).is_err());
        assert!(canonicalize(&json!(9_007_199_254_740_992_u64)).is_ok());
        assert!(canonicalize(&json!(i64::MIN)).is_err());
    }

    #[test]
    fn pointer_escapes_member_names() {
        let err = canonicalize(&json!({"a/b": {"c~d": u64::MAX}})).unwrap_err();
        assert_eq!(
            err,
            CanonError::IntegerOutOfRange {
                pointer: "/a~1b/c~0d".into(),
                value: u64::MAX.to_string(),
            }
        );
    }

    #[test]
    fn rejects_text_that_is_not_strict_json() {
        let err = canonicalize_str(r#"{"a":1,"a":2}"#).unwrap_err();
        assert_eq!(err.kind(), CanonErrorKind::InvalidJson);
        match err {
            CanonError::InvalidJson(inner) => assert_eq!(inner.kind, JsonErrorKind::DuplicateKey),
            other => panic!("unexpected {other:?}"),
        }
        let err = canonicalize_str("9007199254740993").unwrap_err();
        match err {
            CanonError::InvalidJson(inner) => {
                assert_eq!(inner.kind, JsonErrorKind::IntegerOutOfRange)
            }
            other => panic!("unexpected {other:?}"),
        }
        assert_eq!(
            canonicalize_str("{").unwrap_err().kind(),
            CanonErrorKind::InvalidJson
        );
        assert_eq!(
            canonicalize_str("[1,]").unwrap_err().kind(),
            CanonErrorKind::InvalidJson
        );
    }

    #[test]
    fn rejects_values_nested_too_deep() {
        let mut value = json!(1);
        for _ in 0..MAX_DEPTH {
            value = json!([value]);
        }
        assert!(canonicalize(&value).is_ok(), "exactly MAX_DEPTH levels");
        let value = json!({ "k": value });
        let err = canonicalize(&value).unwrap_err();
        assert_eq!(err.kind(), CanonErrorKind::TooDeep);
        // The innermost array, the first container past the limit.
        let pointer = format!("/k{}", "/0".repeat(MAX_DEPTH - 1));
        assert_eq!(
            err,
            CanonError::TooDeep {
                pointer,
                max: MAX_DEPTH
            }
        );
        assert_eq!(canonical_sha256(&value).unwrap_err(), err);
    }

    /// The eight-bytes-at-a-time scan finds every byte that needs an
    /// escape wherever it falls in a word: each control character, quote
    /// and backslash at every offset of strings around the word size,
    /// beside ASCII and multi-byte characters, written as serde_json
    /// writes them (the same minimal escaping as JCS).
    #[test]
    fn strings_escape_every_special_byte_at_every_offset() {
        let specials = (0u8..0x20).chain([b'"', b'\\']).map(char::from);
        let fillers = ["a", "é", "\u{1F600}", "\u{7f}", "~"];
        for special in specials {
            for filler in fillers {
                for len in 0..20 {
                    for at in 0..=len {
                        let mut s = filler.repeat(len);
                        let byte_at = s.char_indices().nth(at).map_or(s.len(), |(i, _)| i);
                        s.insert(byte_at, special);
                        let mut out = String::new();
                        write_string(&s, &mut out);
                        assert_eq!(out, serde_json::to_string(&s).unwrap(), "{s:?}");
                    }
                }
            }
        }
    }

    /// The hash written as it goes is the hash of the canonical text,
    /// across the sink's chunk boundary and for a string longer than a
    /// chunk.
    #[test]
    fn canonical_sha256_hashes_the_canonical_text() {
        let long = "x\"y\\z\n".repeat(HashSink::CHUNK / 3);
        let lines: Vec<Value> = (0..2_000)
            .map(|n| json!({"text": format!("line {n} \"q\""), "number": n}))
            .collect();
        for value in [
            json!(null),
            json!({"b": 1.5, "a": [true, "s"]}),
            json!({"lines": lines, "long": long, "tail": "end"}),
            json!(long),
        ] {
            let text = canonicalize(&value).unwrap();
            let digest: [u8; 32] = Sha256::digest(text.as_bytes()).into();
            assert_eq!(canonical_sha256(&value).unwrap(), digest);
        }
        let err = canonical_sha256(&json!({"a/b": [u64::MAX]})).unwrap_err();
        assert_eq!(
            err,
            CanonError::IntegerOutOfRange {
                pointer: "/a~1b/0".into(),
                value: u64::MAX.to_string(),
            }
        );
    }

    #[test]
    fn error_kinds_have_stable_names() {
        assert_eq!(CanonErrorKind::InvalidJson.as_str(), "invalid_json");
        assert_eq!(
            CanonErrorKind::IntegerOutOfRange.to_string(),
            "integer_out_of_range"
        );
        assert_eq!(CanonErrorKind::TooDeep.as_str(), "too_deep");
        assert_eq!(CanonErrorKind::Serialize.as_str(), "serialize");
    }

    /// The module's own walk writes exactly what the crate's serializer
    /// writes, over values of every kind: names and strings across the
    /// planes (the UTF-16 order cases included), every control character,
    /// integers at the I-JSON bounds, floats of every magnitude.
    #[test]
    fn the_walk_matches_the_crate_serializer() {
        let mut state: u64 = 0x2545_F491_4F6C_DD1D;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let pieces = [
            "a",
            "B",
            "z",
            "0",
            "_",
            " ",
            "é",
            "\u{7f}",
            "\u{80}",
            "\u{7ff}",
            "\u{800}",
            "\u{d7ff}",
            "\u{e000}",
            "\u{fb01}",
            "\u{ffff}",
            "\u{10000}",
            "\u{1f600}",
            "\u{10ffff}",
            "\"",
            "\\",
            "/",
            "\n",
            "\r",
            "\t",
            "\u{8}",
            "\u{c}",
            "\u{0}",
            "\u{1}",
            "\u{1f}",
            "\u{2028}",
            "<",
            "&",
        ];
        let numbers = [
            json!(0),
            json!(-1),
            json!(9_007_199_254_740_991_u64),
            json!(-9_007_199_254_740_991_i64),
            json!(1.5),
            json!(-0.0),
            json!(1e21),
            json!(1e-7),
            json!(0.1),
            json!(123456789.125),
            json!(5e-324),
            json!(1.7976931348623157e308),
            json!(100.0),
            json!(-2.5e-10),
        ];
        fn text(next: &mut impl FnMut() -> u64, pieces: &[&str]) -> String {
            (0..next() % 6)
                .map(|_| pieces[(next() % pieces.len() as u64) as usize])
                .collect()
        }
        fn build(
            next: &mut impl FnMut() -> u64,
            pieces: &[&str],
            numbers: &[Value],
            depth: u32,
        ) -> Value {
            match next() % if depth > 3 { 4 } else { 6 } {
                0 => Value::Null,
                1 => Value::Bool(next() % 2 == 0),
                2 => numbers[(next() % numbers.len() as u64) as usize].clone(),
                3 => Value::String(text(next, pieces)),
                4 => Value::Array(
                    (0..next() % 4)
                        .map(|_| build(next, pieces, numbers, depth + 1))
                        .collect(),
                ),
                _ => Value::Object(
                    (0..next() % 6)
                        .map(|_| (text(next, pieces), build(next, pieces, numbers, depth + 1)))
                        .collect(),
                ),
            }
        }
        // How many objects had two or more names that take the UTF-16
        // comparison: the cases where code-point order would be wrong.
        fn high_pairs(v: &Value) -> usize {
            match v {
                Value::Object(m) => {
                    let high = m.keys().filter(|k| k.bytes().any(|b| b >= 0xEE)).count();
                    usize::from(high >= 2) + m.values().map(high_pairs).sum::<usize>()
                }
                Value::Array(a) => a.iter().map(high_pairs).sum(),
                _ => 0,
            }
        }
        let mut covered = 0;
        for _ in 0..3000 {
            let value = build(&mut next, &pieces, &numbers, 0);
            covered += high_pairs(&value);
            assert_eq!(
                canonicalize(&value).unwrap(),
                serde_json_canonicalizer::to_string(&value).unwrap(),
                "{value}"
            );
        }
        assert!(covered >= 100, "only {covered} objects with two high names");
    }
}
