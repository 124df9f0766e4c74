//! Strict JSON parsing for tool arguments.
//!
//! [`parse_strict`] accepts exactly the JSON that `serde_json::from_str`
//! accepts and builds the same [`serde_json::Value`], except that it refuses
//! inputs that `serde_json` would silently rewrite or that are unsafe to
//! process:
//!
//! - a **duplicate object key** anywhere (serde_json keeps the last one, so two
//!   different texts would mean, and hash, the same),
//! - an **integer literal beyond ±2^53** (`9007199254740993` would otherwise be
//!   rounded to `…992`; a literal too big for `u64` would become a float),
//! - a **float literal outside the range of `f64`** (`1e400` would become
//!   infinite) or a non-zero one that would round to zero (`1e-400`),
//! - nesting deeper than [`MAX_DEPTH`] levels,
//! - and, with [`parse_strict_limited`], a text longer than a byte budget.
//!
//! Every error carries a [`JsonErrorKind`], a message, the JSON Pointer of the
//! value at fault (RFC 6901, `""` for the root) and the line and column
//! (1-based, columns in characters) where the problem was detected.
//!
//! The parser is a small hand-written recursive-descent parser: it sees the raw
//! number tokens (so integer and float literals are told apart exactly), it
//! checks duplicates with the same map lookup that inserts the key, and it
//! builds pointers and positions only when an error unwinds, so a valid
//! argument object costs about as much as `serde_json::from_str`.
//!
//! Float literals are rounded to the nearest `f64` exactly as in every JSON
//! parser (`0.1` stays `0.1`); only integer literals are held to exactness.

use std::borrow::Cow;
use std::fmt;

use serde::Serialize;
use serde_json::{Map, Number, Value};

/// Deepest nesting of arrays and objects [`parse_strict`] accepts. The root
/// array or object is level 1.
pub const MAX_DEPTH: usize = 128;

/// Largest integer magnitude accepted: 2^53 = 9007199254740992, the last
/// integer every JSON implementation (and an `f64`) represents exactly.
pub const MAX_SAFE_INTEGER: u64 = 1 << 53;

/// What went wrong while parsing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum JsonErrorKind {
    /// The text is not JSON.
    Syntax,
    /// An object holds the same key twice.
    DuplicateKey,
    /// An integer literal lies beyond ±2^53.
    IntegerOutOfRange,
    /// A float literal overflows `f64` or underflows to zero.
    NumberOutOfRange,
    /// Arrays and objects nest deeper than allowed.
    TooDeep,
    /// The text is longer than the byte budget.
    TooLarge,
}

impl JsonErrorKind {
    /// Stable snake_case identifier of the kind.
    pub fn as_str(self) -> &'static str {
        match self {
            JsonErrorKind::Syntax => "syntax",
            JsonErrorKind::DuplicateKey => "duplicate_key",
            JsonErrorKind::IntegerOutOfRange => "integer_out_of_range",
            JsonErrorKind::NumberOutOfRange => "number_out_of_range",
            JsonErrorKind::TooDeep => "too_deep",
            JsonErrorKind::TooLarge => "too_large",
        }
    }
}

impl fmt::Display for JsonErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A strict-parsing failure.
///
/// `Display` renders `message`, followed by the line and column when known.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[error("{message}{}", position_suffix(.line, .column))]
pub struct JsonError {
    /// The class of failure.
    pub kind: JsonErrorKind,
    /// What went wrong, naming the key, literal or pointer involved.
    pub message: String,
    /// JSON Pointer of the value at fault (`""` is the root). For
    /// [`JsonErrorKind::DuplicateKey`] this is the object holding the key.
    /// `None` when the failure concerns the whole text.
    pub pointer: Option<String>,
    /// 1-based line where the problem was detected.
    pub line: Option<usize>,
    /// 1-based column (in characters) where the problem was detected.
    pub column: Option<usize>,
}

fn position_suffix(line: &Option<usize>, column: &Option<usize>) -> String {
    match (line, column) {
        (Some(l), Some(c)) => format!(" (line {l}, column {c})"),
        _ => String::new(),
    }
}

/// Limits for [`parse_with`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParseOptions {
    /// Largest accepted text, in bytes; `None` for no limit.
    pub max_bytes: Option<usize>,
    /// Deepest accepted nesting of arrays and objects (root = 1).
    pub max_depth: usize,
}

impl Default for ParseOptions {
    fn default() -> Self {
        ParseOptions {
            max_bytes: None,
            max_depth: MAX_DEPTH,
        }
    }
}

/// Parses `text` strictly (see the module docs), with no byte limit and a
/// nesting limit of [`MAX_DEPTH`].
pub fn parse_strict(text: &str) -> Result<Value, JsonError> {
    parse_with(text, &ParseOptions::default())
}

/// Like [`parse_strict`], but a text longer than `max_bytes` bytes is refused
/// with [`JsonErrorKind::TooLarge`] before any parsing.
pub fn parse_strict_limited(text: &str, max_bytes: usize) -> Result<Value, JsonError> {
    parse_with(
        text,
        &ParseOptions {
            max_bytes: Some(max_bytes),
            max_depth: MAX_DEPTH,
        },
    )
}

/// Parses `text` strictly with explicit limits.
pub fn parse_with(text: &str, options: &ParseOptions) -> Result<Value, JsonError> {
    if let Some(max) = options.max_bytes {
        if text.len() > max {
            return Err(JsonError {
                kind: JsonErrorKind::TooLarge,
                message: format!(
                    "JSON text is {} bytes; the limit is {max} bytes",
                    text.len()
                ),
                pointer: None,
                line: None,
                column: None,
            });
        }
    }
    let mut parser = Parser {
        text,
        bytes: text.as_bytes(),
        pos: 0,
        depth: 0,
        max_depth: options.max_depth,
    };
    let result = parser.parse_value().and_then(|value| {
        parser.skip_ws();
        if parser.pos < parser.bytes.len() {
            Err(Fail::new(
                JsonErrorKind::Syntax,
                parser.pos,
                Detail::Msg("trailing characters after the JSON value".into()),
            ))
        } else {
            Ok(value)
        }
    });
    result.map_err(|fail| fail.finish(text))
}

/// Escapes one JSON Pointer reference token (RFC 6901: `~` → `~0`, `/` → `~1`).
pub fn escape_pointer_token(token: &str) -> Cow<'_, str> {
    if token.contains(['~', '/']) {
        Cow::Owned(token.replace('~', "~0").replace('/', "~1"))
    } else {
        Cow::Borrowed(token)
    }
}

/// Appends `/token` (escaped) to a JSON Pointer.
pub fn push_pointer_token(pointer: &mut String, token: &str) {
    pointer.push('/');
    pointer.push_str(&escape_pointer_token(token));
}

/// Renders a pointer for a message: the root is called "the root".
fn pointer_for_message(pointer: &str) -> &str {
    if pointer.is_empty() {
        "the root"
    } else {
        pointer
    }
}

/// Clips `s` to at most `max` characters, marking the cut with `…`.
pub fn clip(s: &str, max: usize) -> Cow<'_, str> {
    match s.char_indices().nth(max) {
        None => Cow::Borrowed(s),
        Some(_) => {
            let end = s
                .char_indices()
                .nth(max.saturating_sub(1))
                .map_or(s.len(), |(i, _)| i);
            Cow::Owned(format!("{}…", &s[..end]))
        }
    }
}

enum Segment {
    Key(String),
    Index(usize),
}

enum Detail {
    Msg(String),
    DuplicateKey(String),
    Integer(String),
    Float(String, &'static str),
    TooDeep(usize),
}

/// An error while unwinding: the path is collected innermost-first.
struct Fail {
    kind: JsonErrorKind,
    offset: usize,
    detail: Detail,
    segments: Vec<Segment>,
}

impl Fail {
    fn new(kind: JsonErrorKind, offset: usize, detail: Detail) -> Box<Fail> {
        Box::new(Fail {
            kind,
            offset,
            detail,
            segments: Vec::new(),
        })
    }

    fn finish(&self, text: &str) -> JsonError {
        let mut pointer = String::new();
        for segment in self.segments.iter().rev() {
            match segment {
                Segment::Key(k) => push_pointer_token(&mut pointer, k),
                Segment::Index(i) => {
                    pointer.push('/');
                    pointer.push_str(&i.to_string());
                }
            }
        }
        let at = pointer_for_message(&pointer);
        let message = match &self.detail {
            Detail::Msg(m) => format!("{m} at {at}"),
            Detail::DuplicateKey(key) => {
                format!("duplicate key {:?} in the object at {at}", clip(key, 64))
            }
            Detail::Integer(lit) => format!(
                "integer {} at {at} is outside ±2^53 ({MAX_SAFE_INTEGER}) and cannot be represented exactly; send it as a string",
                clip(lit, 40)
            ),
            Detail::Float(lit, why) => format!("number {} at {at} is {why}", clip(lit, 40)),
            Detail::TooDeep(max) => {
                format!("arrays and objects nest deeper than {max} levels at {at}")
            }
        };
        let (line, column) = line_column(text, self.offset);
        JsonError {
            kind: self.kind,
            message,
            pointer: Some(pointer),
            line: Some(line),
            column: Some(column),
        }
    }
}

/// 1-based line and character column of byte `offset` in `text`.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.bytes().filter(|&b| b == b'\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

type PResult<T> = Result<T, Box<Fail>>;

/// The two bracketed values, for [`Parser::parse_container`].
#[derive(Clone, Copy)]
enum Container {
    Object,
    Array,
}

impl Container {
    fn close(self) -> u8 {
        match self {
            Container::Object => b'}',
            Container::Array => b']',
        }
    }

    fn trailing_comma(self) -> &'static str {
        match self {
            Container::Object => "trailing comma in object",
            Container::Array => "trailing comma in array",
        }
    }

    fn after_member(self) -> &'static str {
        match self {
            Container::Object => "`,` or `}` after an object member",
            Container::Array => "`,` or `]` after an array element",
        }
    }
}

struct Parser<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
    depth: usize,
    max_depth: usize,
}

impl<'a> Parser<'a> {
    #[inline]
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    #[inline]
    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.peek() {
            self.pos += 1;
        }
    }

    fn syntax<T>(&self, offset: usize, msg: impl Into<String>) -> PResult<T> {
        Err(Fail::new(
            JsonErrorKind::Syntax,
            offset,
            Detail::Msg(msg.into()),
        ))
    }

    fn unexpected<T>(&self, what: &str) -> PResult<T> {
        match self.text[self.pos.min(self.text.len())..].chars().next() {
            None => self.syntax(
                self.pos,
                format!("unexpected end of input; expected {what}"),
            ),
            Some(c) => self.syntax(self.pos, format!("unexpected {c:?}; expected {what}")),
        }
    }

    fn parse_value(&mut self) -> PResult<Value> {
        self.skip_ws();
        match self.peek() {
            Some(b'{') => self.parse_object(),
            Some(b'[') => self.parse_array(),
            Some(b'"') => Ok(Value::String(self.parse_string()?)),
            Some(b't') => self.parse_literal("true", Value::Bool(true)),
            Some(b'f') => self.parse_literal("false", Value::Bool(false)),
            Some(b'n') => self.parse_literal("null", Value::Null),
            Some(b'-' | b'0'..=b'9') => self.parse_number(),
            _ => self.unexpected("a JSON value"),
        }
    }

    fn parse_literal(&mut self, word: &str, value: Value) -> PResult<Value> {
        if self.bytes[self.pos..].starts_with(word.as_bytes()) {
            self.pos += word.len();
            Ok(value)
        } else {
            self.syntax(self.pos, format!("invalid literal; expected `{word}`"))
        }
    }

    fn enter(&mut self) -> PResult<()> {
        self.depth += 1;
        if self.depth > self.max_depth {
            return Err(Fail::new(
                JsonErrorKind::TooDeep,
                self.pos,
                Detail::TooDeep(self.max_depth),
            ));
        }
        Ok(())
    }

    /// Parses an object or an array whose opening bracket is at the cursor,
    /// through its closing bracket: the empty container, the depth budget,
    /// the commas between members and a trailing comma are handled here,
    /// and `member` parses each member (from its first byte, whitespace
    /// already skipped).
    fn parse_container(
        &mut self,
        container: Container,
        mut member: impl FnMut(&mut Self) -> PResult<()>,
    ) -> PResult<()> {
        let close = container.close();
        self.enter()?;
        self.pos += 1; // the opening bracket
        self.skip_ws();
        if self.peek() != Some(close) {
            loop {
                self.skip_ws();
                if self.peek() == Some(close) {
                    return self.syntax(self.pos, container.trailing_comma());
                }
                member(self)?;
                self.skip_ws();
                match self.peek() {
                    Some(b',') => self.pos += 1,
                    Some(b) if b == close => break,
                    _ => return self.unexpected(container.after_member()),
                }
            }
        }
        self.pos += 1; // the closing bracket
        self.depth -= 1;
        Ok(())
    }

    fn parse_object(&mut self) -> PResult<Value> {
        let mut map = Map::new();
        self.parse_container(Container::Object, |parser| {
            let key_offset = parser.pos;
            if parser.peek() != Some(b'"') {
                return parser.unexpected("a string key");
            }
            let key = parser.parse_string()?;
            parser.skip_ws();
            if parser.peek() != Some(b':') {
                return parser.unexpected("`:` after the object key");
            }
            parser.pos += 1;
            let value = match parser.parse_value() {
                Ok(v) => v,
                Err(mut fail) => {
                    fail.segments.push(Segment::Key(key));
                    return Err(fail);
                }
            };
            match map.entry(key) {
                serde_json::map::Entry::Vacant(slot) => {
                    slot.insert(value);
                    Ok(())
                }
                serde_json::map::Entry::Occupied(slot) => Err(Fail::new(
                    JsonErrorKind::DuplicateKey,
                    key_offset,
                    Detail::DuplicateKey(slot.key().clone()),
                )),
            }
        })?;
        Ok(Value::Object(map))
    }

    fn parse_array(&mut self) -> PResult<Value> {
        let mut items = Vec::new();
        self.parse_container(Container::Array, |parser| match parser.parse_value() {
            Ok(v) => {
                items.push(v);
                Ok(())
            }
            Err(mut fail) => {
                fail.segments.push(Segment::Index(items.len()));
                Err(fail)
            }
        })?;
        Ok(Value::Array(items))
    }

    /// Moves the cursor over the characters that stand for themselves in the
    /// string opened at `open`, up to its closing quote or the next escape
    /// (neither consumed).
    #[inline]
    fn skip_unescaped(&mut self, open: usize) -> PResult<()> {
        loop {
            match self.peek() {
                Some(b'"' | b'\\') => return Ok(()),
                Some(b) if b < 0x20 => {
                    return self.syntax(
                        self.pos,
                        format!("control character U+{b:04X} must be escaped in a string"),
                    )
                }
                Some(_) => self.pos += 1,
                None => return self.syntax(open, "unterminated string"),
            }
        }
    }

    /// Parses a string starting at the opening quote.
    fn parse_string(&mut self) -> PResult<String> {
        let open = self.pos;
        self.pos += 1;
        let start = self.pos;
        self.skip_unescaped(open)?;
        // Fast path: no escapes.
        if self.peek() == Some(b'"') {
            let s = self.text[start..self.pos].to_owned();
            self.pos += 1;
            return Ok(s);
        }
        let mut out = String::with_capacity(self.pos - start + 16);
        out.push_str(&self.text[start..self.pos]);
        loop {
            let run = self.pos;
            self.skip_unescaped(open)?;
            out.push_str(&self.text[run..self.pos]);
            if self.peek() == Some(b'"') {
                self.pos += 1;
                return Ok(out);
            }
            // Escape.
            let esc = self.pos;
            self.pos += 1;
            let c = match self.peek() {
                Some(b'"') => '"',
                Some(b'\\') => '\\',
                Some(b'/') => '/',
                Some(b'b') => '\u{8}',
                Some(b'f') => '\u{c}',
                Some(b'n') => '\n',
                Some(b'r') => '\r',
                Some(b't') => '\t',
                Some(b'u') => {
                    self.pos += 1;
                    let hi = self.parse_hex4(esc)?;
                    let c = if (0xD800..0xDC00).contains(&hi) {
                        if !self.bytes[self.pos..].starts_with(b"\\u") {
                            return self.syntax(esc, "lone leading surrogate in \\u escape");
                        }
                        let esc2 = self.pos;
                        self.pos += 2;
                        let lo = self.parse_hex4(esc2)?;
                        if !(0xDC00..0xE000).contains(&lo) {
                            return self.syntax(esc2, "invalid trailing surrogate in \\u escape");
                        }
                        let code = 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
                        char::from_u32(code).unwrap_or('\u{FFFD}')
                    } else if (0xDC00..0xE000).contains(&hi) {
                        return self.syntax(esc, "lone trailing surrogate in \\u escape");
                    } else {
                        char::from_u32(hi).unwrap_or('\u{FFFD}')
                    };
                    out.push(c);
                    continue;
                }
                None => return self.syntax(open, "unterminated string"),
                Some(_) => return self.syntax(esc, "invalid escape sequence"),
            };
            self.pos += 1;
            out.push(c);
        }
    }

    fn parse_hex4(&mut self, esc: usize) -> PResult<u32> {
        let Some(digits) = self.bytes.get(self.pos..self.pos + 4) else {
            return self.syntax(esc, "invalid \\u escape: expected 4 hex digits");
        };
        let mut n = 0u32;
        for &d in digits {
            let v = match d {
                b'0'..=b'9' => d - b'0',
                b'a'..=b'f' => d - b'a' + 10,
                b'A'..=b'F' => d - b'A' + 10,
                _ => return self.syntax(esc, "invalid \\u escape: expected 4 hex digits"),
            };
            n = (n << 4) | u32::from(v);
        }
        self.pos += 4;
        Ok(n)
    }

    fn digits(&mut self) -> usize {
        let start = self.pos;
        while let Some(b'0'..=b'9') = self.peek() {
            self.pos += 1;
        }
        self.pos - start
    }

    fn parse_number(&mut self) -> PResult<Value> {
        let start = self.pos;
        let negative = self.peek() == Some(b'-');
        if negative {
            self.pos += 1;
        }
        let int_start = self.pos;
        match self.peek() {
            Some(b'0') => {
                self.pos += 1;
                if let Some(b'0'..=b'9') = self.peek() {
                    return self.syntax(start, "invalid number: leading zeros are not allowed");
                }
            }
            Some(b'1'..=b'9') => {
                self.digits();
            }
            _ => return self.syntax(start, "invalid number: expected a digit"),
        }
        let int_end = self.pos;
        let mut is_float = false;
        if self.peek() == Some(b'.') {
            self.pos += 1;
            if self.digits() == 0 {
                return self.syntax(start, "invalid number: expected a digit after `.`");
            }
            is_float = true;
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.pos += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            if self.digits() == 0 {
                return self.syntax(start, "invalid number: expected a digit in the exponent");
            }
            is_float = true;
        }
        let literal = &self.text[start..self.pos];
        if !is_float {
            let digits = &self.bytes[int_start..int_end];
            // 2^53 has 16 digits; anything longer is out of range.
            let magnitude = if digits.len() <= 16 {
                digits
                    .iter()
                    .fold(0u64, |acc, &d| acc * 10 + u64::from(d - b'0'))
            } else {
                u64::MAX
            };
            if magnitude > MAX_SAFE_INTEGER {
                return Err(Fail::new(
                    JsonErrorKind::IntegerOutOfRange,
                    start,
                    Detail::Integer(literal.to_owned()),
                ));
            }
            return Ok(Value::Number(if !negative {
                Number::from(magnitude)
            } else if magnitude == 0 {
                // serde_json reads `-0` as the float -0.0; so do we.
                Number::from_f64(-0.0).expect("finite")
            } else {
                Number::from(-(magnitude as i64))
            }));
        }
        let value: f64 = match literal.parse() {
            Ok(v) => v,
            Err(_) => return self.syntax(start, "invalid number"),
        };
        if !value.is_finite() {
            return Err(Fail::new(
                JsonErrorKind::NumberOutOfRange,
                start,
                Detail::Float(literal.to_owned(), "too large for a 64-bit float"),
            ));
        }
        if value == 0.0 {
            let mantissa_end = literal.find(['e', 'E']).unwrap_or(literal.len());
            if literal[..mantissa_end]
                .bytes()
                .any(|b| matches!(b, b'1'..=b'9'))
            {
                return Err(Fail::new(
                    JsonErrorKind::NumberOutOfRange,
                    start,
                    Detail::Float(
                        literal.to_owned(),
                        "too small for a 64-bit float (it would round to 0)",
                    ),
                ));
            }
        }
        Ok(Value::Number(Number::from_f64(value).expect("finite")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn err(text: &str) -> JsonError {
        parse_strict(text).expect_err(text)
    }

    #[test]
    fn parses_like_serde_json() {
        let cases = [
            "null",
            "true",
            "false",
            "0",
            "-0",
            "-1",
            "42",
            "1.5",
            "-2.25e3",
            "1e2",
            "1E-2",
            "0.0",
            "\"\"",
            "\"hello\"",
            "\"esc \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u00e9 \\ud83d\\ude00\"",
            "\"ünïcödé 😀\"",
            "[]",
            "{}",
            " [1, 2 , [3, {\"a\": []}]] ",
            "{\"path\":\"src/main.rs\",\"offset\":1,\"limit\":200,\"opts\":{\"x\":null}}",
            "{\"b\":1,\"a\":2,\"c\":{\"z\":true,\"y\":false}}",
            "9007199254740992",
            "-9007199254740992",
            "1.7976931348623157e308",
            "5e-324",
            "\n\t{ \"k\" :\r\n [ ] }\n",
        ];
        for text in cases {
            let ours = parse_strict(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            let theirs: Value = serde_json::from_str(text).unwrap();
            assert_eq!(ours, theirs, "{text}");
            // Same number representation (u64 / i64 / f64), not just equality.
            assert_eq!(ours.to_string(), theirs.to_string(), "{text}");
        }
    }

    #[test]
    fn preserves_key_order() {
        let v = parse_strict(r#"{"z":1,"a":2,"m":3}"#).unwrap();
        let keys: Vec<_> = v.as_object().unwrap().keys().cloned().collect();
        assert_eq!(keys, ["z", "a", "m"]);
    }

    #[test]
    fn negative_zero_is_a_float_like_serde_json() {
        let v = parse_strict("-0").unwrap();
        assert!(v.is_f64());
        assert_eq!(v.as_f64(), Some(0.0));
    }

    #[test]
    fn duplicate_keys_name_the_key_the_object_and_the_position() {
        // (text, pointer of the object, quoted key, how the message names
        // the object, line and column of the second key)
        for (text, pointer, key, object, position) in [
            (r#"{"a":1,"a":2}"#, "", "\"a\"", "the root", (1, 8)),
            (
                "{\"opts\": [0, {\"x/y\": 1,\n \"x/y\": 1}]}",
                "/opts/1",
                "\"x/y\"",
                "/opts/1",
                (2, 2),
            ),
        ] {
            let e = err(text);
            assert_eq!(e.kind, JsonErrorKind::DuplicateKey, "{text}");
            assert_eq!(e.pointer.as_deref(), Some(pointer), "{text}");
            assert!(e.message.contains(key), "{}", e.message);
            assert!(e.message.contains(object), "{}", e.message);
            assert_eq!((e.line, e.column), (Some(position.0), Some(position.1)));
        }
    }

    #[test]
    fn duplicate_key_with_escapes_is_detected() {
        // "a" and "\u0061" are the same key.
        let e = err(r#"{"a":1,"\u0061":2}"#);
        assert_eq!(e.kind, JsonErrorKind::DuplicateKey);
    }

    #[test]
    fn integers_beyond_2_pow_53_are_refused() {
        for (text, ptr, lit) in [
            ("9007199254740993", "", "9007199254740993"),
            ("-9007199254740993", "", "-9007199254740993"),
            (
                r#"{"n":18446744073709551616}"#,
                "/n",
                "18446744073709551616",
            ),
            (
                r#"{"a":[1,-99999999999999999999]}"#,
                "/a/1",
                "-99999999999999999999",
            ),
            (r#"{"a~b":12345678901234567}"#, "/a~0b", "12345678901234567"),
        ] {
            let e = err(text);
            assert_eq!(e.kind, JsonErrorKind::IntegerOutOfRange, "{text}");
            assert_eq!(e.pointer.as_deref(), Some(ptr), "{text}");
            assert!(e.message.contains(lit), "{}", e.message);
        }
    }

    #[test]
    fn boundary_integers_are_exact() {
        assert_eq!(
            parse_strict("9007199254740992").unwrap(),
            json!(9007199254740992u64)
        );
        assert_eq!(
            parse_strict("-9007199254740992").unwrap(),
            json!(-9007199254740992i64)
        );
        assert_eq!(
            parse_strict("0000").unwrap_err().kind,
            JsonErrorKind::Syntax
        );
    }

    #[test]
    fn huge_literal_is_clipped_in_message() {
        let text = "1".repeat(5000);
        let e = err(&text);
        assert_eq!(e.kind, JsonErrorKind::IntegerOutOfRange);
        assert!(e.message.len() < 300, "{}", e.message);
        assert!(e.message.contains('…'));
    }

    #[test]
    fn floats_are_fine_but_out_of_range_floats_are_not() {
        assert_eq!(parse_strict("1e2").unwrap(), json!(100.0));
        assert_eq!(parse_strict("1.0e20").unwrap(), json!(1.0e20));
        assert_eq!(parse_strict("0e-999").unwrap(), json!(0.0));
        for text in ["1e400", "-1e400", "[1.5e309]", "1e-400", "-0.1e-330"] {
            let e = err(text);
            assert_eq!(e.kind, JsonErrorKind::NumberOutOfRange, "{text}");
        }
        let e = err(r#"{"x":{"y":1e400}}"#);
        assert_eq!(e.pointer.as_deref(), Some("/x/y"));
        assert!(e.message.contains("1e400"));
    }

    #[test]
    fn nesting_limit() {
        let ok = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert!(parse_strict(&ok).is_ok());
        let deep = format!("{}{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
        let e = err(&deep);
        assert_eq!(e.kind, JsonErrorKind::TooDeep);
        // A hostile depth must not overflow the stack either.
        let hostile = "[{\"a\":".repeat(100_000);
        assert_eq!(err(&hostile).kind, JsonErrorKind::TooDeep);
        let custom = ParseOptions {
            max_bytes: None,
            max_depth: 2,
        };
        assert!(parse_with(r#"{"a":[1]}"#, &custom).is_ok());
        assert_eq!(
            parse_with(r#"{"a":[{}]}"#, &custom).unwrap_err().kind,
            JsonErrorKind::TooDeep
        );
    }

    #[test]
    fn size_limit() {
        let text = r#"{"path":"a"}"#;
        assert!(parse_strict_limited(text, text.len()).is_ok());
        let e = parse_strict_limited(text, text.len() - 1).unwrap_err();
        assert_eq!(e.kind, JsonErrorKind::TooLarge);
        assert_eq!(e.pointer, None);
        assert_eq!(e.line, None);
        assert!(e.message.contains("limit"));
    }

    #[test]
    fn syntax_errors_carry_line_and_column() {
        let cases: &[(&str, usize, usize)] = &[
            ("", 1, 1),
            ("   ", 1, 4),
            ("{", 1, 2),
            ("{\"a\" 1}", 1, 6),
            ("{\"a\":1,}", 1, 8),
            ("[1,]", 1, 4),
            ("[1 2]", 1, 4),
            ("{\n  \"a\": tru\n}", 2, 8),
            ("{\"a\":1} x", 1, 9),
            ("\"abc", 1, 1),
            ("\"a\u{1}\"", 1, 3),
            ("\"\\x\"", 1, 2),
            ("\"\\u12\"", 1, 2),
            ("\"\\ud800\"", 1, 2),
            ("\"\\udc00\"", 1, 2),
            ("\"\\ud800\\u0041\"", 1, 8),
            ("01", 1, 1),
            ("1.", 1, 1),
            (".5", 1, 1),
            ("+1", 1, 1),
            ("-", 1, 1),
            ("1e", 1, 1),
            ("NaN", 1, 1),
            ("Infinity", 1, 1),
            ("{a:1}", 1, 2),
            ("{'a':1}", 1, 2),
            ("\u{feff}{}", 1, 1),
            ("[\"é\", x]", 1, 7),
            ("{\"k\": [1, {\"z\": }]}", 1, 17),
        ];
        for &(text, line, column) in cases {
            let e = err(text);
            assert_eq!(e.kind, JsonErrorKind::Syntax, "{text:?}: {e}");
            assert_eq!(
                (e.line, e.column),
                (Some(line), Some(column)),
                "{text:?}: {e}"
            );
            // serde_json agrees that it is not JSON.
            assert!(serde_json::from_str::<Value>(text).is_err(), "{text:?}");
        }
    }

    #[test]
    fn syntax_error_pointer_and_display() {
        let e = err("{\"k\": [1, {\"z\": }]}");
        assert_eq!(e.pointer.as_deref(), Some("/k/1/z"));
        let shown = e.to_string();
        assert!(shown.contains("/k/1/z"), "{shown}");
        assert!(shown.ends_with("(line 1, column 17)"), "{shown}");
        let e = parse_strict_limited("[]", 1).unwrap_err();
        assert!(!e.to_string().contains("line"));
    }

    #[test]
    fn error_serializes_with_snake_case_kind() {
        let e = err(r#"{"a":1,"a":1}"#);
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(v["kind"], "duplicate_key");
        assert_eq!(v["pointer"], "");
        assert_eq!(
            JsonErrorKind::IntegerOutOfRange.to_string(),
            "integer_out_of_range"
        );
    }

    #[test]
    fn pointer_escaping() {
        assert_eq!(escape_pointer_token("a/b~c"), "a~1b~0c");
        assert_eq!(escape_pointer_token("plain"), "plain");
        let mut p = String::new();
        push_pointer_token(&mut p, "x");
        push_pointer_token(&mut p, "~/");
        assert_eq!(p, "/x/~0~1");
    }

    #[test]
    fn clip_keeps_char_boundaries() {
        assert_eq!(clip("abc", 5), "abc");
        assert_eq!(clip("ééééé", 3), "éé…");
    }

    /// A tiny deterministic PRNG (xorshift), so the test needs no crate.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    fn random_string(rng: &mut Rng) -> String {
        const PIECES: &[&str] = &[
            "a", "Z", "0", " ", "\"", "\\", "/", "\n", "\t", "\u{1}", "\u{1f}", "é", "€", "😀",
            "\u{2028}", "~", "key",
        ];
        (0..rng.below(6))
            .map(|_| PIECES[rng.below(PIECES.len() as u64) as usize])
            .collect()
    }

    fn random_value(rng: &mut Rng, depth: u32) -> Value {
        let leaf = depth >= 4;
        match rng.below(if leaf { 6 } else { 8 }) {
            0 => Value::Null,
            1 => Value::Bool(rng.below(2) == 0),
            2 => json!(rng.below(1 << 53) as i64 - (1 << 52)),
            3 => json!((rng.below(2_000_001) as f64 - 1_000_000.0) / 64.0),
            4 => json!(rng.below(1 << 53)),
            5 => Value::String(random_string(rng)),
            6 => Value::Array(
                (0..rng.below(5))
                    .map(|_| random_value(rng, depth + 1))
                    .collect(),
            ),
            _ => {
                let mut map = Map::new();
                for _ in 0..rng.below(5) {
                    map.insert(random_string(rng), random_value(rng, depth + 1));
                }
                Value::Object(map)
            }
        }
    }

    #[test]
    fn differential_against_serde_json() {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        for _ in 0..2000 {
            let value = random_value(&mut rng, 0);
            for text in [
                serde_json::to_string(&value).unwrap(),
                serde_json::to_string_pretty(&value).unwrap(),
            ] {
                let ours = parse_strict(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
                assert_eq!(ours, value, "{text}");
                assert_eq!(ours.to_string(), value.to_string(), "{text}");
                // Any truncation is rejected by both parsers alike.
                let mut cut = rng.below(text.len() as u64) as usize;
                while !text.is_char_boundary(cut) {
                    cut -= 1;
                }
                let prefix = &text[..cut];
                let theirs = serde_json::from_str::<Value>(prefix);
                match parse_strict(prefix) {
                    Ok(v) => assert_eq!(v, theirs.expect(prefix), "{prefix}"),
                    Err(e) => assert!(theirs.is_err(), "{prefix:?}: {e}"),
                }
            }
        }
    }
}
