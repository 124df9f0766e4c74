//! The canonical hash of JSON *text*, without building a [`Value`].
//!
//! The journal hashes every call's output in canonical form
//! ([`super::canonical_sha256`]); it gets the output as the tool's JSON text
//! and used to parse it into a [`Value`] first. For a page of a file that
//! parse (some 2,000 allocations for 500 lines) was as much of the journal
//! thread's work as the hashing, on a machine whose two cores the call, the
//! answer and the client also need. [`canonical_sha256_text`] reads the text
//! once and writes its canonical form as it goes: strings without escapes
//! are borrowed, an object whose names come in order (every line of a page)
//! is written as it is read, and only an object whose names do not is
//! re-ordered in place once it ends.
//!
//! It answers only where the answer is certain to be
//! `canonical_sha256(&serde_json::from_str(text)?)`, and `None` for anything
//! else: text that is not JSON, a number with a fraction or an exponent (or
//! `-0`), an integer beyond ±2^53, nesting deeper than 64 levels, a
//! duplicate member name. The caller then takes the parsing way, which
//! decides those as it always did.
//!
//! [`Value`]: serde_json::Value

use std::borrow::Cow;

use sha2::{Digest, Sha256};

use super::{utf16_order, write_string};
use crate::json::strict::{MAX_DEPTH, MAX_SAFE_INTEGER};

/// Nesting beyond which this pass leaves the text to the parsing way
/// (serde_json's own recursion limit sits near [`MAX_DEPTH`], and where
/// exactly is serde_json's to decide).
const FAST_DEPTH: usize = if MAX_DEPTH < 64 { MAX_DEPTH } else { 64 };

/// The SHA-256 of the canonical JSON of the value `text` spells (see the
/// module docs), or `None` where this pass does not decide.
pub fn canonical_sha256_text(text: &str) -> Option<[u8; 32]> {
    let mut w = Writer {
        src: text,
        at: 0,
        out: String::with_capacity(text.len()),
        members: Vec::new(),
    };
    w.value(0)?;
    w.skip_ws();
    if w.at != text.len() {
        return None;
    }
    Some(Sha256::digest(w.out.as_bytes()).into())
}

struct Writer<'a> {
    src: &'a str,
    /// The next byte of `src` to read.
    at: usize,
    /// The canonical text so far.
    out: String,
    /// The members of the objects being written, innermost last: the name
    /// and where `"name":value` lies in `out`.
    members: Vec<(Cow<'a, str>, usize, usize)>,
}

impl<'a> Writer<'a> {
    fn peek(&self) -> Option<u8> {
        self.src.as_bytes().get(self.at).copied()
    }

    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.at += 1;
        }
    }

    /// Consumes `word` (a literal) if the text goes on with it.
    fn literal(&mut self, word: &str) -> Option<()> {
        let end = self.at + word.len();
        (self.src.as_bytes().get(self.at..end)? == word.as_bytes()).then(|| self.at = end)
    }

    /// Reads one value at nesting `depth` (the root at 0) and writes it.
    fn value(&mut self, depth: usize) -> Option<()> {
        self.skip_ws();
        match self.peek()? {
            b'n' => self.literal("null").map(|()| self.out.push_str("null")),
            b't' => self.literal("true").map(|()| self.out.push_str("true")),
            b'f' => self.literal("false").map(|()| self.out.push_str("false")),
            b'"' => {
                if let Some(spelled) = self.canonical_token() {
                    self.out.push_str(spelled);
                    return Some(());
                }
                let s = self.string()?;
                self.write_str(&s, matches!(s, Cow::Borrowed(_)));
                Some(())
            }
            b'-' | b'0'..=b'9' => self.integer(),
            b'[' if depth < FAST_DEPTH => self.array(depth),
            b'{' if depth < FAST_DEPTH => self.object(depth),
            _ => None,
        }
    }

    /// Writes a string read by [`Writer::string`]: as it was `spelled`
    /// (borrowed) when it held no escape (then it holds no quote, backslash or control
    /// character either, and JCS writes it as it is), else escaped anew.
    fn write_str(&mut self, s: &str, spelled: bool) {
        if spelled {
            self.out.push('"');
            self.out.push_str(s);
            self.out.push('"');
        } else {
            write_string(s, &mut self.out);
        }
    }

    /// An integer within ±2^53, written as it is spelled (valid JSON has
    /// no leading zero, so that is how `itoa` writes its value too).
    fn integer(&mut self) -> Option<()> {
        let start = self.at;
        if self.peek() == Some(b'-') {
            self.at += 1;
        }
        let digits = self.at;
        while let Some(b'0'..=b'9') = self.peek() {
            self.at += 1;
        }
        let spelled = &self.src[digits..self.at];
        let plain = match spelled.as_bytes() {
            [] => false,
            // `0` alone, never `-0` (serde_json reads that as a float).
            [b'0', rest @ ..] => rest.is_empty() && digits == start,
            _ => spelled.len() <= 16,
        };
        if !plain || matches!(self.peek(), Some(b'.' | b'e' | b'E')) {
            return None;
        }
        if spelled.parse::<u64>().ok()? > MAX_SAFE_INTEGER {
            return None;
        }
        self.out.push_str(&self.src[start..self.at]);
        Some(())
    }

    fn array(&mut self, depth: usize) -> Option<()> {
        self.at += 1;
        self.out.push('[');
        self.skip_ws();
        if self.peek() == Some(b']') {
            self.at += 1;
        } else {
            loop {
                self.value(depth + 1)?;
                self.skip_ws();
                match self.peek()? {
                    b',' => {
                        self.at += 1;
                        self.out.push(',');
                    }
                    b']' => {
                        self.at += 1;
                        break;
                    }
                    _ => return None,
                }
            }
        }
        self.out.push(']');
        Some(())
    }

    /// An object, written as read; re-ordered in place at its end if its
    /// names did not come in order. A repeated name gives `None`.
    fn object(&mut self, depth: usize) -> Option<()> {
        self.at += 1;
        self.out.push('{');
        let body = self.out.len();
        let base = self.members.len();
        let mut in_order = true;
        self.skip_ws();
        if self.peek() == Some(b'}') {
            self.at += 1;
        } else {
            loop {
                self.skip_ws();
                if self.peek()? != b'"' {
                    return None;
                }
                let name = self.string()?;
                self.skip_ws();
                if self.peek()? != b':' {
                    return None;
                }
                self.at += 1;
                if self.members.len() > base {
                    self.out.push(',');
                }
                let start = self.out.len();
                self.write_str(&name, matches!(name, Cow::Borrowed(_)));
                self.out.push(':');
                self.value(depth + 1)?;
                if let Some((last, _, _)) = self.members[base..].last() {
                    match utf16_order(last, &name) {
                        std::cmp::Ordering::Less => {}
                        std::cmp::Ordering::Equal => return None,
                        std::cmp::Ordering::Greater => in_order = false,
                    }
                }
                self.members.push((name, start, self.out.len()));
                self.skip_ws();
                match self.peek()? {
                    b',' => self.at += 1,
                    b'}' => {
                        self.at += 1;
                        break;
                    }
                    _ => return None,
                }
            }
        }
        if !in_order {
            let members = &mut self.members[base..];
            members.sort_unstable_by(|a, b| utf16_order(&a.0, &b.0));
            if members
                .windows(2)
                .any(|w| utf16_order(&w[0].0, &w[1].0).is_eq())
            {
                return None;
            }
            let written = self.out.split_off(body);
            for (i, (_, start, end)) in members.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                self.out.push_str(&written[start - body..end - body]);
            }
        }
        self.members.truncate(base);
        self.out.push('}');
        Some(())
    }

    /// The string token at `at` (its opening quote), quotes included, when
    /// it is already spelled as JCS writes its value: every escape one JCS
    /// writes (`\"`, `\\`, `\b`, `\f`, `\n`, `\r`, `\t`, or `\u00xx` in
    /// lower case for the other controls), as serde_json (and the SDK's
    /// writer) spell them. Consumes it; else `None`, consuming nothing,
    /// and the string is decoded and written anew. A page of text with a
    /// quote or backslash on every line is copied instead of decoded and
    /// escaped again.
    fn canonical_token(&mut self) -> Option<&'a str> {
        let src = self.src;
        let bytes = src.as_bytes();
        let mut at = self.at + 1;
        loop {
            at = next_special(bytes, at);
            match *bytes.get(at)? {
                b'"' => break,
                b'\\' => match *bytes.get(at + 1)? {
                    b'"' | b'\\' | b'b' | b'f' | b'n' | b'r' | b't' => at += 2,
                    b'u' => {
                        let hex = bytes.get(at + 2..at + 6)?;
                        let lower = |b: u8| b.is_ascii_digit() || (b'a'..=b'f').contains(&b);
                        if hex[..2] != *b"00" || !lower(hex[2]) || !lower(hex[3]) || hex[2] > b'1' {
                            return None;
                        }
                        // JCS writes these five short.
                        if matches!(&hex[2..], b"08" | b"09" | b"0a" | b"0c" | b"0d") {
                            return None;
                        }
                        at += 6;
                    }
                    _ => return None,
                },
                _ => return None,
            }
        }
        let token = src.get(self.at..=at)?;
        self.at = at + 1;
        Some(token)
    }

    /// A string's value (the text at `at` is its opening quote): borrowed
    /// when it holds no escape, else decoded. `None` for a raw control
    /// character, a bad escape or a lone surrogate.
    fn string(&mut self) -> Option<Cow<'a, str>> {
        let src = self.src;
        let bytes = src.as_bytes();
        self.at += 1;
        let start = self.at;
        let mut at = next_special(bytes, start);
        match *bytes.get(at)? {
            b'"' => {
                self.at = at + 1;
                return Some(Cow::Borrowed(&src[start..at]));
            }
            b'\\' => {}
            _ => return None,
        }
        let mut s = String::from(&src[start..at]);
        loop {
            match *bytes.get(at)? {
                b'"' => {
                    self.at = at + 1;
                    return Some(Cow::Owned(s));
                }
                b'\\' => {
                    let (c, next) = unescape(bytes, at)?;
                    s.push(c);
                    at = next;
                }
                0..=0x1f => return None,
                _ => {
                    let run = next_special(bytes, at);
                    s.push_str(src.get(at..run)?);
                    at = run;
                }
            }
        }
    }
}

/// The first quote, backslash or control character of `bytes` at or after
/// `at` (eight bytes at a time), or the end.
fn next_special(bytes: &[u8], mut at: usize) -> usize {
    loop {
        at = crate::json::compact::skip_clean_words(bytes, at);
        match bytes.get(at) {
            Some(b'"' | b'\\' | 0..=0x1f) | None => return at,
            Some(_) => at += 1,
        }
    }
}

/// The character of the escape at `bytes[at]` (a backslash) and the index
/// after it; a surrogate pair takes both of its escapes.
fn unescape(bytes: &[u8], at: usize) -> Option<(char, usize)> {
    let c = match *bytes.get(at + 1)? {
        b'"' => '"',
        b'\\' => '\\',
        b'/' => '/',
        b'b' => '\u{8}',
        b'f' => '\u{c}',
        b'n' => '\n',
        b'r' => '\r',
        b't' => '\t',
        b'u' => {
            let high = hex4(bytes, at + 2)?;
            if !(0xD800..0xE000).contains(&high) {
                return Some((char::from_u32(high)?, at + 6));
            }
            if high >= 0xDC00 || bytes.get(at + 6..at + 8)? != b"\\u" {
                return None;
            }
            let low = hex4(bytes, at + 8)?;
            if !(0xDC00..0xE000).contains(&low) {
                return None;
            }
            let c = 0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00);
            return Some((char::from_u32(c)?, at + 12));
        }
        _ => return None,
    };
    Some((c, at + 2))
}

/// The four hex digits at `bytes[at..]`.
fn hex4(bytes: &[u8], at: usize) -> Option<u32> {
    let digits = std::str::from_utf8(bytes.get(at..at + 4)?).ok()?;
    if !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u32::from_str_radix(digits, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    /// What the journal computed before: parse, then hash the value.
    fn by_value(text: &str) -> Option<[u8; 32]> {
        let value: Value = serde_json::from_str(text).ok()?;
        super::super::canonical_sha256(&value).ok()
    }

    #[test]
    fn agrees_with_hashing_the_parsed_value() {
        let texts = [
            r#"{"path":"a.txt","offset":1,"lines":[{"number":1,"text":"x \"q\" \\ \t"}],"total_lines":1,"has_more":false,"sha256":"ab"}"#,
            r#" { "b" : [ 1 , -2 , 0 , true , false , null , [ ] , { } ] , "a" : "" } "#,
            r#"{"z":{"y":1,"x":{"d":1,"c":2}},"é":1,"\u00e8":2,"a\/b":"\u0041\n\ud83d\ude00"}"#,
            r#"{"😀":1,"ﬁ":2,"\ud83d\ude01":3,"a":{"ﬂ":1,"😀":2}}"#,
            r#"[9007199254740992,-9007199254740992,123456789]"#,
            r#""just a string with \u0001 and \b""#,
            "[\"tab\\tnewline\\n\",\"\\u001f\\u007f\"]",
            // Spelled as JCS spells them, and each escape JCS spells
            // otherwise (short, upper case, `\/`, beyond the controls).
            r#"["\u0000\u001f\u000b \"\\\b\f\n\r\t","\u0008","\u000A","\u001F","\/","\u0020","\u00e9"]"#,
            "42",
        ];
        for text in texts {
            let fast = canonical_sha256_text(text);
            assert!(fast.is_some(), "undecided: {text}");
            assert_eq!(fast, by_value(text), "{text}");
        }
    }

    #[test]
    fn leaves_to_the_parsing_way_what_it_does_not_decide() {
        for text in [
            r#"{"a":1,"a":2}"#,
            r#"{"b":1,"a":2,"b":3}"#,
            r#"{"a":1,"\u0061":2}"#,
            "1.5",
            "1e3",
            "-0",
            "9007199254740993",
            "-9007199254740993",
            "12345678901234567890",
            "01",
            r#""\ud800""#,
            r#""\udc00\ud800""#,
            "\"raw \u{1} control\"",
            r#""\x""#,
            "[1,]",
            "{\"a\":1,}",
            "[1] 2",
            "nul",
            "",
        ] {
            assert_eq!(canonical_sha256_text(text), None, "{text}");
        }
        let deep = "[".repeat(FAST_DEPTH + 1) + &"]".repeat(FAST_DEPTH + 1);
        assert_eq!(canonical_sha256_text(&deep), None);
        let limit = "[".repeat(FAST_DEPTH) + &"]".repeat(FAST_DEPTH);
        assert!(canonical_sha256_text(&limit).is_some());
        assert_eq!(canonical_sha256_text(&limit), by_value(&limit));
    }

    /// A tool's output is whatever its plugin wrote: every prefix of some
    /// JSON texts and every one-byte change of them either is left to the
    /// parsing way or hashes as the parsed value does, and nothing panics.
    #[test]
    fn truncated_and_mangled_text_is_decided_right_or_left_alone() {
        let texts = [
            r#"{"b":[1,-2,{"y":"\u00e9\ud83d\ude00","x":null}],"a":"q\"\\\n"}"#,
            r#"[{"number":1,"text":"a"},{"text":"b","number":2},true,false]"#,
        ];
        let replacements = b"\"\\{}[],:0-9eEuUdD \x01\xff";
        for text in texts {
            assert!(canonical_sha256_text(text).is_some(), "{text}");
            for end in 0..=text.len() {
                if let Some(prefix) = text.get(..end) {
                    let fast = canonical_sha256_text(prefix);
                    assert!(fast.is_none() || fast == by_value(prefix), "{prefix}");
                }
            }
            for at in 0..text.len() {
                for &b in replacements {
                    let mut bytes = text.as_bytes().to_vec();
                    bytes[at] = b;
                    let Ok(mangled) = String::from_utf8(bytes) else {
                        continue;
                    };
                    let fast = canonical_sha256_text(&mangled);
                    assert!(fast.is_none() || fast == by_value(&mangled), "{mangled}");
                }
            }
        }
    }

    /// Generated values (nested, names out of order and beyond the BMP,
    /// strings with every kind of escape), compact and pretty.
    #[test]
    fn agrees_on_generated_values() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let pieces = [
            "a", "Z", "é", "ﬁ", "😀", "\"", "\\", "/", "\n", "\u{1}", " ", "0",
        ];
        fn gen(next: &mut dyn FnMut() -> u64, pieces: &[&str], depth: u32) -> Value {
            let word = |next: &mut dyn FnMut() -> u64| -> String {
                (0..next() % 4)
                    .map(|_| pieces[(next() % pieces.len() as u64) as usize])
                    .collect()
            };
            match next() % if depth > 3 { 4 } else { 6 } {
                0 => Value::Null,
                1 => Value::Bool(next() % 2 == 0),
                2 => json!((next() % (1 << 54)) as i64 - (1 << 53)),
                3 => Value::String(word(next)),
                4 => Value::Array(
                    (0..next() % 4)
                        .map(|_| gen(next, pieces, depth + 1))
                        .collect(),
                ),
                _ => Value::Object(
                    (0..next() % 5)
                        .map(|_| (word(next), gen(next, pieces, depth + 1)))
                        .collect(),
                ),
            }
        }
        for _ in 0..2_000 {
            let value = gen(&mut next, &pieces, 0);
            let want = super::super::canonical_sha256(&value).ok();
            for text in [
                serde_json::to_string(&value).unwrap(),
                serde_json::to_string_pretty(&value).unwrap(),
            ] {
                assert_eq!(canonical_sha256_text(&text), want, "{text}");
            }
        }
    }
}
