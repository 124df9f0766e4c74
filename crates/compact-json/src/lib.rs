//! The compact JSON text of a value, written fast.
//!
//! serde_json's writer escapes strings one byte and one table lookup at a
//! time. That was the guest's single largest cost on a page of a file
//! inside Wasm (about a tenth of a 500-line `file_view` call), and the
//! largest entry on the host's runtime thread when it wrote that page's
//! MCP answer (~50 KB of strings: the page as text and as lines).
//! [`to_string`] and [`to_vec`] write the same text, byte for byte what
//! serde_json writes (the tests hold them to that), but scan strings eight
//! bytes at a time for the next byte that needs an escape and copy each
//! clean word whole. Anything this writer does not handle itself (a map
//! key that is not a string, a number or a bool; serde_json's own raw-value
//! and arbitrary-precision types; an error from a `Serialize` impl) is
//! handed to serde_json whole, so the result never differs.
//!
//! One crate for both sides: the guest SDK (`toolhost-sdk`) writes every
//! tool output with it, and `toolhost serve --stdio` every answer. It is
//! also the one escape scan of the workspace: the host measures compact
//! text without writing it ([`compact_len`], [`escaped_len`]) and its
//! canonical JSON finds the next byte to escape with [`skip_clean_words`],
//! all on the eight-byte masks of [`swar`].
//!
//! ```
//! let v = serde_json::json!({"path": "a.rs", "lines": ["fn main() {", "\t\"hi\""]});
//! assert_eq!(
//!     toolhost_compact_json::to_vec(&v).unwrap(),
//!     serde_json::to_vec(&v).unwrap(),
//! );
//! ```

use std::fmt::Display;

use serde::ser::{self, Impossible, Serialize};

mod len;
pub mod swar;

pub use len::{compact_len, escaped_len};

/// `value` as compact JSON, exactly as `serde_json::to_string` writes it.
///
/// # Errors
///
/// Those of `serde_json::to_string`.
pub fn to_string<T: Serialize + ?Sized>(value: &T) -> serde_json::Result<String> {
    let mut out = Vec::with_capacity(128);
    match value.serialize(Writer { out: &mut out }) {
        // Only whole UTF-8 strings and ASCII were written.
        Ok(()) => Ok(String::from_utf8(out).unwrap_or_default()),
        Err(Unsupported) => serde_json::to_string(value),
    }
}

/// `value` as compact JSON, exactly as `serde_json::to_vec` writes it (the
/// text of [`to_string`], without checking again that it is UTF-8).
///
/// # Errors
///
/// Those of `serde_json::to_vec`.
pub fn to_vec<T: Serialize + ?Sized>(value: &T) -> serde_json::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(256);
    match value.serialize(Writer { out: &mut out }) {
        Ok(()) => Ok(out),
        Err(Unsupported) => serde_json::to_vec(value),
    }
}

/// Something [`to_string`] leaves to serde_json.
#[derive(Debug)]
struct Unsupported;

impl Display for Unsupported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("left to serde_json")
    }
}

impl std::error::Error for Unsupported {}

impl ser::Error for Unsupported {
    fn custom<T: Display>(_: T) -> Self {
        Unsupported
    }
}

type Result<T = ()> = std::result::Result<T, Unsupported>;

/// Names serde_json gives its own types that it writes specially.
const SERDE_JSON_PRIVATE: &str = "$serde_json::private::";

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = 0x8080_8080_8080_8080;

/// The bytes of `word` (eight bytes of a string, little-endian; see
/// [`swar::word`]) that need an escape: a quote, a backslash or a control
/// character (below 0x20). Only the lowest set bit is exact (a borrow can
/// mark bytes above it): it finds the first byte to escape, which is all
/// the writer and [`skip_clean_words`] ask of it. To count escapes, use the
/// exact masks of [`swar`].
pub fn escape_mask(word: u64) -> u64 {
    let below = |x: u64, n: u64| x.wrapping_sub(ONES * n) & !x & HIGH;
    below(word, 0x20)
        | below(word ^ (ONES * u64::from(b'"')), 1)
        | below(word ^ (ONES * u64::from(b'\\')), 1)
}

/// From `at`, past every whole eight-byte word of `bytes` that needs no
/// escape: the first byte that needs one (when the next word holds it), or
/// where fewer than eight bytes are left (the caller looks at those one by
/// one), or the end. Writers of other JSON forms (the host's canonical
/// JSON) use it to find the next byte they must escape.
pub fn skip_clean_words(bytes: &[u8], mut at: usize) -> usize {
    while let Some(word) = swar::word(bytes, at) {
        match escape_mask(word) {
            0 => at += 8,
            mask => return at + swar::first(mask),
        }
    }
    at
}

/// Writes `s` as a JSON string: `\"`, `\\`, the five short control escapes,
/// other control characters as `\u00xx`, everything else literal. Eight
/// bytes at a time: each word is copied whole (a fixed-size copy, no call
/// into the host's `memory.copy`) and cut back at its first byte that
/// needs an escape.
fn write_str(out: &mut Vec<u8>, s: &str) {
    let bytes = s.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    let mut at = 0;
    while let Some(word) = bytes.get(at..at + 8) {
        let word: [u8; 8] = word.try_into().unwrap_or_default();
        out.extend_from_slice(&word);
        match escape_mask(u64::from_le_bytes(word)) {
            0 => at += 8,
            mask => {
                let clean = swar::first(mask);
                out.truncate(out.len() - 8 + clean);
                write_escape(out, word[clean]);
                at += clean + 1;
            }
        }
    }
    for &byte in &bytes[at..] {
        if byte < 0x20 || byte == b'"' || byte == b'\\' {
            write_escape(out, byte);
        } else {
            out.push(byte);
        }
    }
    out.push(b'"');
}

/// The escape of `byte`, a quote, backslash or control character.
fn write_escape(out: &mut Vec<u8>, byte: u8) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let short = match byte {
        b'\n' => b'n',
        b'\r' => b'r',
        b'\t' => b't',
        0x08 => b'b',
        0x0c => b'f',
        b'"' | b'\\' => byte,
        _ => {
            out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[usize::from(byte >> 4)],
                HEX[usize::from(byte & 0xf)],
            ]);
            return;
        }
    };
    out.extend_from_slice(&[b'\\', short]);
}

fn write_display(out: &mut Vec<u8>, v: impl Display) {
    use std::io::Write as _;
    let _ = write!(out, "{v}");
}

/// `v` in decimal, without the formatting machinery (line numbers, sizes
/// and counts are in most outputs).
fn write_u64(out: &mut Vec<u8>, mut v: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
}

/// The serializer: compact JSON into `out`.
struct Writer<'a> {
    out: &'a mut Vec<u8>,
}

impl<'a> Writer<'a> {
    fn reborrow(&mut self) -> Writer<'_> {
        Writer { out: self.out }
    }

    /// Opens `{"variant":` of an externally tagged enum variant.
    fn open_variant(&mut self, variant: &str) {
        self.out.push(b'{');
        write_str(self.out, variant);
        self.out.push(b':');
    }

    /// Opens an enum variant's `{"variant":` and its content's bracket.
    fn variant(mut self, variant: &str, open: u8, close: u8) -> Compound<'a> {
        self.open_variant(variant);
        Compound::open(self.out, open, close, true)
    }

    fn float(self, v: impl Serialize) -> Result {
        // Shortest round trip, and `null` for NaN and infinities, exactly
        // as serde_json writes them.
        serde_json::to_writer(&mut *self.out, &v).map_err(|_| Unsupported)
    }
}

/// A sequence or map being written; `close` ends it, `outer` also closes
/// an enum variant's wrapping object.
struct Compound<'a> {
    out: &'a mut Vec<u8>,
    first: bool,
    close: u8,
    outer: bool,
}

impl Compound<'_> {
    fn open(out: &mut Vec<u8>, open: u8, close: u8, outer: bool) -> Compound<'_> {
        out.push(open);
        Compound {
            out,
            first: true,
            close,
            outer,
        }
    }

    fn comma(&mut self) {
        if !self.first {
            self.out.push(b',');
        }
        self.first = false;
    }

    fn element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result {
        self.comma();
        value.serialize(Writer { out: self.out })
    }

    fn member<T: Serialize + ?Sized>(&mut self, key: &str, value: &T) -> Result {
        self.comma();
        write_str(self.out, key);
        self.out.push(b':');
        value.serialize(Writer { out: self.out })
    }

    fn finish(self) -> Result {
        self.out.push(self.close);
        if self.outer {
            self.out.push(b'}');
        }
        Ok(())
    }
}

/// The narrower integers, written as the 64-bit ones.
macro_rules! widen {
    ($($method:ident($narrow:ty) => $wide:ident),* $(,)?) => {$(
        fn $method(self, v: $narrow) -> Result {
            self.$wide(v.into())
        }
    )*};
}

/// What a value and a map key write alike: a string, a char, a unit
/// variant (its name) and a newtype struct (its content), serde_json's own
/// newtypes left to it.
macro_rules! same_as_a_string {
    () => {
        fn serialize_str(self, v: &str) -> Result {
            write_str(self.out, v);
            Ok(())
        }
        fn serialize_char(self, v: char) -> Result {
            self.serialize_str(v.encode_utf8(&mut [0; 4]))
        }
        fn serialize_unit_variant(
            self,
            _name: &'static str,
            _index: u32,
            variant: &'static str,
        ) -> Result {
            self.serialize_str(variant)
        }
        fn serialize_newtype_struct<T: Serialize + ?Sized>(
            self,
            name: &'static str,
            value: &T,
        ) -> Result {
            if name.starts_with(SERDE_JSON_PRIVATE) {
                return Err(Unsupported);
            }
            value.serialize(self)
        }
    };
}

impl<'a> ser::Serializer for Writer<'a> {
    type Ok = ();
    type Error = Unsupported;
    type SerializeSeq = Compound<'a>;
    type SerializeTuple = Compound<'a>;
    type SerializeTupleStruct = Compound<'a>;
    type SerializeTupleVariant = Compound<'a>;
    type SerializeMap = Compound<'a>;
    type SerializeStruct = Compound<'a>;
    type SerializeStructVariant = Compound<'a>;

    fn serialize_bool(self, v: bool) -> Result {
        self.out
            .extend_from_slice(if v { b"true" } else { b"false" });
        Ok(())
    }
    widen!(
        serialize_i8(i8) => serialize_i64,
        serialize_i16(i16) => serialize_i64,
        serialize_i32(i32) => serialize_i64,
        serialize_u8(u8) => serialize_u64,
        serialize_u16(u16) => serialize_u64,
        serialize_u32(u32) => serialize_u64,
    );
    fn serialize_i64(self, v: i64) -> Result {
        if v < 0 {
            self.out.push(b'-');
        }
        write_u64(self.out, v.unsigned_abs());
        Ok(())
    }
    fn serialize_i128(self, v: i128) -> Result {
        write_display(self.out, v);
        Ok(())
    }
    fn serialize_u64(self, v: u64) -> Result {
        write_u64(self.out, v);
        Ok(())
    }
    fn serialize_u128(self, v: u128) -> Result {
        write_display(self.out, v);
        Ok(())
    }
    fn serialize_f32(self, v: f32) -> Result {
        self.float(v)
    }
    fn serialize_f64(self, v: f64) -> Result {
        self.float(v)
    }
    fn serialize_bytes(self, v: &[u8]) -> Result {
        let mut seq = Compound::open(self.out, b'[', b']', false);
        for b in v {
            seq.element(b)?;
        }
        seq.finish()
    }
    fn serialize_none(self) -> Result {
        self.serialize_unit()
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result {
        self.out.extend_from_slice(b"null");
        Ok(())
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result {
        self.serialize_unit()
    }
    same_as_a_string!();
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        mut self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result {
        self.open_variant(variant);
        value.serialize(self.reborrow())?;
        self.out.push(b'}');
        Ok(())
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Compound<'a>> {
        Ok(Compound::open(self.out, b'[', b']', false))
    }
    fn serialize_tuple(self, _len: usize) -> Result<Compound<'a>> {
        Ok(Compound::open(self.out, b'[', b']', false))
    }
    fn serialize_tuple_struct(self, _name: &'static str, _len: usize) -> Result<Compound<'a>> {
        Ok(Compound::open(self.out, b'[', b']', false))
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Compound<'a>> {
        Ok(self.variant(variant, b'[', b']'))
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Compound<'a>> {
        Ok(Compound::open(self.out, b'{', b'}', false))
    }
    fn serialize_struct(self, name: &'static str, _len: usize) -> Result<Compound<'a>> {
        if name.starts_with(SERDE_JSON_PRIVATE) {
            return Err(Unsupported);
        }
        Ok(Compound::open(self.out, b'{', b'}', false))
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Compound<'a>> {
        Ok(self.variant(variant, b'{', b'}'))
    }
}

/// The element-by-element compounds: sequences, tuples and their struct
/// and variant forms all write `[a,b,…]` (a variant inside its object).
macro_rules! elements {
    ($($trait:ident :: $method:ident),*) => {$(
        impl ser::$trait for Compound<'_> {
            type Ok = ();
            type Error = Unsupported;
            fn $method<T: Serialize + ?Sized>(&mut self, value: &T) -> Result {
                self.element(value)
            }
            fn end(self) -> Result {
                self.finish()
            }
        }
    )*};
}

elements!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
    SerializeTupleVariant::serialize_field
);

impl ser::SerializeMap for Compound<'_> {
    type Ok = ();
    type Error = Unsupported;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result {
        self.comma();
        key.serialize(KeyWriter { out: self.out })?;
        self.out.push(b':');
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result {
        value.serialize(Writer { out: self.out })
    }
    fn end(self) -> Result {
        self.finish()
    }
}

/// Structs and struct variants write `{"field":value,…}`.
macro_rules! fields {
    ($($trait:ident),*) => {$(
        impl ser::$trait for Compound<'_> {
            type Ok = ();
            type Error = Unsupported;
            fn serialize_field<T: Serialize + ?Sized>(
                &mut self,
                key: &'static str,
                value: &T,
            ) -> Result {
                self.member(key, value)
            }
            fn end(self) -> Result {
                self.finish()
            }
        }
    )*};
}

fields!(SerializeStruct, SerializeStructVariant);

/// A map key: a string as itself, an integer or a bool in quotes (as
/// serde_json writes them); anything else is left to serde_json.
struct KeyWriter<'a> {
    out: &'a mut Vec<u8>,
}

impl KeyWriter<'_> {
    fn quoted(self, v: impl Display) -> Result {
        self.out.push(b'"');
        write_display(self.out, v);
        self.out.push(b'"');
        Ok(())
    }
}

impl ser::Serializer for KeyWriter<'_> {
    type Ok = ();
    type Error = Unsupported;
    type SerializeSeq = Impossible<(), Unsupported>;
    type SerializeTuple = Impossible<(), Unsupported>;
    type SerializeTupleStruct = Impossible<(), Unsupported>;
    type SerializeTupleVariant = Impossible<(), Unsupported>;
    type SerializeMap = Impossible<(), Unsupported>;
    type SerializeStruct = Impossible<(), Unsupported>;
    type SerializeStructVariant = Impossible<(), Unsupported>;

    same_as_a_string!();
    fn serialize_bool(self, v: bool) -> Result {
        self.quoted(v)
    }
    fn serialize_i8(self, v: i8) -> Result {
        self.quoted(v)
    }
    fn serialize_i16(self, v: i16) -> Result {
        self.quoted(v)
    }
    fn serialize_i32(self, v: i32) -> Result {
        self.quoted(v)
    }
    fn serialize_i64(self, v: i64) -> Result {
        self.quoted(v)
    }
    fn serialize_i128(self, v: i128) -> Result {
        self.quoted(v)
    }
    fn serialize_u8(self, v: u8) -> Result {
        self.quoted(v)
    }
    fn serialize_u16(self, v: u16) -> Result {
        self.quoted(v)
    }
    fn serialize_u32(self, v: u32) -> Result {
        self.quoted(v)
    }
    fn serialize_u64(self, v: u64) -> Result {
        self.quoted(v)
    }
    fn serialize_u128(self, v: u128) -> Result {
        self.quoted(v)
    }
    fn serialize_f32(self, _v: f32) -> Result {
        Err(Unsupported)
    }
    fn serialize_f64(self, _v: f64) -> Result {
        Err(Unsupported)
    }
    fn serialize_bytes(self, _v: &[u8]) -> Result {
        Err(Unsupported)
    }
    fn serialize_none(self) -> Result {
        Err(Unsupported)
    }
    fn serialize_some<T: Serialize + ?Sized>(self, _value: &T) -> Result {
        Err(Unsupported)
    }
    fn serialize_unit(self) -> Result {
        Err(Unsupported)
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result {
        Err(Unsupported)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _value: &T,
    ) -> Result {
        Err(Unsupported)
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Self::SerializeSeq> {
        Err(Unsupported)
    }
    fn serialize_tuple(self, _len: usize) -> Result<Self::SerializeTuple> {
        Err(Unsupported)
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleStruct> {
        Err(Unsupported)
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleVariant> {
        Err(Unsupported)
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Self::SerializeMap> {
        Err(Unsupported)
    }
    fn serialize_struct(self, _name: &'static str, _len: usize) -> Result<Self::SerializeStruct> {
        Err(Unsupported)
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStructVariant> {
        Err(Unsupported)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, HashMap};

    use serde::Serialize;
    use serde_json::json;

    use super::{escape_mask, skip_clean_words, to_string, to_vec};

    fn same<T: Serialize + ?Sized + std::fmt::Debug>(value: &T) {
        assert_eq!(
            to_string(value).unwrap(),
            serde_json::to_string(value).unwrap(),
            "{value:?}"
        );
        assert_eq!(
            to_vec(value).unwrap(),
            serde_json::to_vec(value).unwrap(),
            "{value:?}"
        );
    }

    #[derive(Debug, Serialize)]
    struct Line {
        number: u64,
        text: String,
    }

    #[derive(Debug, Serialize)]
    #[serde(rename_all = "snake_case")]
    enum Shape {
        Unit,
        Newtype(i32),
        Tuple(u8, String),
        Struct { a: Option<bool>, b: Vec<f64> },
    }

    #[derive(Debug, Serialize)]
    #[serde(tag = "kind")]
    enum Tagged {
        One { x: u32 },
        Two,
    }

    #[derive(Debug, Serialize)]
    struct Wrapper(Vec<Line>);

    #[derive(Debug, Serialize)]
    struct Unit;

    #[derive(Debug, Serialize)]
    struct Everything {
        lines: Vec<Line>,
        shapes: Vec<Shape>,
        tagged: Vec<Tagged>,
        wrapper: Wrapper,
        unit: Unit,
        tuple: (i8, i16, i32, i64, i128, u128, char),
        floats: Vec<f64>,
        small: f32,
        none: Option<String>,
        bytes: Vec<u8>,
        int_keys: BTreeMap<i64, &'static str>,
        bool_keys: BTreeMap<bool, u8>,
        char_keys: BTreeMap<char, u8>,
        value: serde_json::Value,
        #[serde(flatten)]
        extra: HashMap<String, u8>,
    }

    #[test]
    fn strings_are_written_as_serde_json_writes_them_with_every_special_byte_at_every_offset() {
        let specials = (0u8..0x20).chain([b'"', b'\\', b'/', 0x7f]).map(char::from);
        for special in specials {
            for filler in ["a", "é", "\u{1F600}", "~", "\u{2028}"] {
                for len in 0..20 {
                    for at in 0..=len {
                        let mut s = filler.repeat(len);
                        let byte_at = s.char_indices().nth(at).map_or(s.len(), |(i, _)| i);
                        s.insert(byte_at, special);
                        same(&s);
                    }
                }
            }
        }
    }

    #[test]
    fn every_shape_of_the_data_model_is_written_as_serde_json_writes_it() {
        let value = Everything {
            lines: (0..100)
                .map(|n| Line {
                    number: n,
                    text: format!("{n}: \"quoted\" \\ tab\tend é \u{1b}[0m"),
                })
                .collect(),
            shapes: vec![
                Shape::Unit,
                Shape::Newtype(-3),
                Shape::Tuple(7, "x".into()),
                Shape::Struct {
                    a: None,
                    b: vec![0.1, -0.0, 1e300, f64::NAN, f64::INFINITY],
                },
            ],
            tagged: vec![Tagged::One { x: 1 }, Tagged::Two],
            wrapper: Wrapper(vec![]),
            unit: Unit,
            tuple: (i8::MIN, i16::MAX, -1, i64::MIN, i128::MIN, u128::MAX, '"'),
            floats: vec![1.5, 2.5e-8, 123456789.0, f64::MAX, f64::MIN_POSITIVE],
            small: 0.1,
            none: None,
            bytes: vec![0, 255],
            int_keys: BTreeMap::from([(-1, "a"), (2, "b")]),
            bool_keys: BTreeMap::from([(true, 1), (false, 0)]),
            char_keys: BTreeMap::from([('"', 1), ('k', 2)]),
            value: json!({"n": [1, -2, 3.5, null, true], "s": "a\nb", "o": {}}),
            extra: HashMap::from([("flat".to_string(), 9)]),
        };
        same(&value);
        same(&());
        same(&Some(Shape::Unit));
        same(&Vec::<u8>::new());
        same(&BTreeMap::<String, u8>::new());
    }

    #[test]
    fn what_it_leaves_to_serde_json_comes_out_the_same() {
        // A map whose keys are not strings, numbers or bools: serde_json's
        // own error.
        let unit_keys = BTreeMap::from([((), 1)]);
        assert_eq!(
            to_string(&unit_keys).unwrap_err().to_string(),
            serde_json::to_string(&unit_keys).unwrap_err().to_string()
        );
        let float_keys = vec![(1.5f64, 1)];
        let map: HashMap<String, f64> = HashMap::from([("k".into(), 1.5)]);
        same(&float_keys);
        same(&map);
        // A Serialize impl that fails: serde_json's error.
        struct Fails;
        impl Serialize for Fails {
            fn serialize<S: serde::Serializer>(&self, _: S) -> Result<S::Ok, S::Error> {
                Err(serde::ser::Error::custom("no"))
            }
        }
        assert_eq!(to_string(&Fails).unwrap_err().to_string(), "no");
    }

    #[test]
    fn the_first_marked_byte_is_the_first_that_needs_an_escape() {
        for at in 0..8 {
            for special in [0u8, 0x1f, b'"', b'\\'] {
                for filler in [b'a', 0x80, 0xff, b' ', b'!', b']'] {
                    let mut word = [filler; 8];
                    word[at] = special;
                    // A second special byte above the first changes nothing.
                    if at < 7 {
                        word[7] = b'"';
                    }
                    let mask = escape_mask(u64::from_le_bytes(word));
                    assert_eq!(mask.trailing_zeros() / 8, at as u32, "{word:?}");
                }
                assert_eq!(escape_mask(u64::from_le_bytes([b'a'; 8])), 0);
            }
        }
    }

    #[test]
    fn clean_words_are_skipped_up_to_the_first_byte_to_escape() {
        let text = b"0123456789abcdef\"tail";
        assert_eq!(skip_clean_words(text, 0), 16);
        assert_eq!(skip_clean_words(text, 3), 16);
        assert_eq!(skip_clean_words(b"abcdefghij", 0), 8);
        assert_eq!(skip_clean_words(b"abc", 0), 0);
        assert_eq!(skip_clean_words(b"abcdefgh", 0), 8);
        assert_eq!(skip_clean_words(b"abcdefg\n", 0), 7);
    }
}
