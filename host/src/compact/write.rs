//! [`to_vec`]: serde_json's compact text, with strings escaped eight
//! bytes at a time.
//!
//! A serde [`Serializer`](ser::Serializer) that writes what `serde_json::to_vec` writes,
//! byte for byte, for every value it accepts: numbers through `itoa` and
//! serde_json itself (floats), strings through
//! [`push_escaped`](super::push_escaped), serde_json's `RawValue` as its
//! text. What serde_json would write in a way this writer does not copy
//! (a map key that is not a string, a number or a bool, and whatever a
//! type's own `Serialize` refuses) is [`Unsupported`]: nothing half-written
//! is returned, and the caller writes the value with serde_json instead.

use std::fmt;

use serde::ser::{self, Serialize};

use super::push_escaped;

/// serde_json's name for the struct a `RawValue` serializes as (and for
/// its one field): its text is written as it is.
const RAW_VALUE: &str = "$serde_json::private::RawValue";

/// Compact JSON text of `value`, exactly as `serde_json::to_vec` writes
/// it; [`Unsupported`] when this writer would not write it the same way
/// (or the value's own `Serialize` fails).
///
/// ```
/// let v = serde_json::json!({"path": "a.rs", "lines": ["fn main() {", "\t\"hi\""]});
/// assert_eq!(
///     toolhost::compact::to_vec(&v).unwrap(),
///     serde_json::to_vec(&v).unwrap(),
/// );
/// ```
pub fn to_vec<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, Unsupported> {
    let mut out = Writer(Vec::with_capacity(256));
    value.serialize(&mut out)?;
    Ok(out.0)
}

/// Why [`to_vec`] wrote nothing: what it met that it does not write as
/// serde_json would, or the error a value's `Serialize` raised.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unsupported(String);

impl fmt::Display for Unsupported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "not written as compact JSON: {}", self.0)
    }
}

impl std::error::Error for Unsupported {}

impl ser::Error for Unsupported {
    fn custom<T: fmt::Display>(msg: T) -> Unsupported {
        Unsupported(msg.to_string())
    }
}

fn unsupported<T>(what: &str) -> Result<T, Unsupported> {
    Err(Unsupported(what.to_owned()))
}

/// The text written so far (UTF-8: every piece is).
struct Writer(Vec<u8>);

impl Writer {
    fn push_str(&mut self, s: &str) {
        self.0.extend_from_slice(s.as_bytes());
    }

    fn push(&mut self, c: u8) {
        self.0.push(c);
    }

    fn str(&mut self, s: &str) {
        push_escaped(s, &mut self.0);
    }

    fn int(&mut self, n: impl itoa::Integer) {
        self.push_str(itoa::Buffer::new().format(n));
    }

    /// A float as serde_json writes it (`null` when not finite).
    fn float<F: Serialize>(&mut self, f: F) -> Result<(), Unsupported> {
        let text = serde_json::to_string(&f).map_err(|e| Unsupported(e.to_string()))?;
        self.push_str(&text);
        Ok(())
    }

    /// `{"variant":` before a variant's content.
    fn open_variant(&mut self, variant: &str) {
        self.push(b'{');
        self.str(variant);
        self.push(b':');
    }
}

/// An array or object being written: whether the next element is its
/// first, and what closes it (`]`, `}`, or either followed by the `}` of
/// an enum variant's wrapping object).
struct Compound<'a> {
    w: &'a mut Writer,
    first: bool,
    close: &'static str,
}

impl<'a> Compound<'a> {
    fn open(w: &'a mut Writer, open: u8, close: &'static str) -> Compound<'a> {
        w.push(open);
        Compound {
            w,
            first: true,
            close,
        }
    }

    fn comma(&mut self) {
        if !self.first {
            self.w.push(b',');
        }
        self.first = false;
    }

    fn element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Unsupported> {
        self.comma();
        value.serialize(&mut *self.w)
    }

    fn field<T: Serialize + ?Sized>(&mut self, key: &str, value: &T) -> Result<(), Unsupported> {
        self.comma();
        self.w.str(key);
        self.w.push(b':');
        value.serialize(&mut *self.w)
    }

    fn end(self) -> Result<(), Unsupported> {
        self.w.push_str(self.close);
        Ok(())
    }
}

/// A `RawValue`'s one field: its text, written as it is.
struct Raw<'a>(&'a mut Writer);

impl<'a> ser::Serializer for &'a mut Writer {
    type Ok = ();
    type Error = Unsupported;
    type SerializeSeq = Compound<'a>;
    type SerializeTuple = Compound<'a>;
    type SerializeTupleStruct = Compound<'a>;
    type SerializeTupleVariant = Compound<'a>;
    type SerializeMap = Compound<'a>;
    type SerializeStruct = Either<'a>;
    type SerializeStructVariant = Compound<'a>;

    fn serialize_bool(self, v: bool) -> Result<(), Unsupported> {
        self.push_str(if v { "true" } else { "false" });
        Ok(())
    }
    fn serialize_i8(self, v: i8) -> Result<(), Unsupported> {
        self.int(v);
        Ok(())
    }
    fn serialize_i16(self, v: i16) -> Result<(), Unsupported> {
        self.int(v);
        Ok(())
    }
    fn serialize_i32(self, v: i32) -> Result<(), Unsupported> {
        self.int(v);
        Ok(())
    }
    fn serialize_i64(self, v: i64) -> Result<(), Unsupported> {
        self.int(v);
        Ok(())
    }
    fn serialize_i128(self, v: i128) -> Result<(), Unsupported> {
        self.int(v);
        Ok(())
    }
    fn serialize_u8(self, v: u8) -> Result<(), Unsupported> {
        self.int(v);
        Ok(())
    }
    fn serialize_u16(self, v: u16) -> Result<(), Unsupported> {
        self.int(v);
        Ok(())
    }
    fn serialize_u32(self, v: u32) -> Result<(), Unsupported> {
        self.int(v);
        Ok(())
    }
    fn serialize_u64(self, v: u64) -> Result<(), Unsupported> {
        self.int(v);
        Ok(())
    }
    fn serialize_u128(self, v: u128) -> Result<(), Unsupported> {
        self.int(v);
        Ok(())
    }
    fn serialize_f32(self, v: f32) -> Result<(), Unsupported> {
        self.float(v)
    }
    fn serialize_f64(self, v: f64) -> Result<(), Unsupported> {
        self.float(v)
    }
    fn serialize_char(self, v: char) -> Result<(), Unsupported> {
        self.str(v.encode_utf8(&mut [0; 4]));
        Ok(())
    }
    fn serialize_str(self, v: &str) -> Result<(), Unsupported> {
        self.str(v);
        Ok(())
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<(), Unsupported> {
        let mut seq = Compound::open(self, b'[', "]");
        for b in v {
            seq.element(b)?;
        }
        seq.end()
    }
    fn serialize_none(self) -> Result<(), Unsupported> {
        self.serialize_unit()
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Unsupported> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), Unsupported> {
        self.push_str("null");
        Ok(())
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), Unsupported> {
        self.serialize_unit()
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<(), Unsupported> {
        self.str(variant);
        Ok(())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<(), Unsupported> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), Unsupported> {
        self.open_variant(variant);
        value.serialize(&mut *self)?;
        self.push(b'}');
        Ok(())
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Compound<'a>, Unsupported> {
        Ok(Compound::open(self, b'[', "]"))
    }
    fn serialize_tuple(self, _len: usize) -> Result<Compound<'a>, Unsupported> {
        Ok(Compound::open(self, b'[', "]"))
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Compound<'a>, Unsupported> {
        Ok(Compound::open(self, b'[', "]"))
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Compound<'a>, Unsupported> {
        self.open_variant(variant);
        Ok(Compound::open(self, b'[', "]}"))
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Compound<'a>, Unsupported> {
        Ok(Compound::open(self, b'{', "}"))
    }
    fn serialize_struct(self, name: &'static str, _len: usize) -> Result<Either<'a>, Unsupported> {
        if name == RAW_VALUE {
            Ok(Either::Raw(Raw(self)))
        } else {
            Ok(Either::Object(Compound::open(self, b'{', "}")))
        }
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Compound<'a>, Unsupported> {
        self.open_variant(variant);
        Ok(Compound::open(self, b'{', "}}"))
    }
}

impl ser::SerializeSeq for Compound<'_> {
    type Ok = ();
    type Error = Unsupported;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Unsupported> {
        self.element(value)
    }
    fn end(self) -> Result<(), Unsupported> {
        Compound::end(self)
    }
}

impl ser::SerializeTuple for Compound<'_> {
    type Ok = ();
    type Error = Unsupported;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Unsupported> {
        self.element(value)
    }
    fn end(self) -> Result<(), Unsupported> {
        Compound::end(self)
    }
}

impl ser::SerializeTupleStruct for Compound<'_> {
    type Ok = ();
    type Error = Unsupported;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Unsupported> {
        self.element(value)
    }
    fn end(self) -> Result<(), Unsupported> {
        Compound::end(self)
    }
}

impl ser::SerializeTupleVariant for Compound<'_> {
    type Ok = ();
    type Error = Unsupported;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Unsupported> {
        self.element(value)
    }
    fn end(self) -> Result<(), Unsupported> {
        Compound::end(self)
    }
}

impl ser::SerializeMap for Compound<'_> {
    type Ok = ();
    type Error = Unsupported;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Unsupported> {
        self.comma();
        key.serialize(Key(&mut *self.w))
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Unsupported> {
        self.w.push(b':');
        value.serialize(&mut *self.w)
    }
    fn end(self) -> Result<(), Unsupported> {
        Compound::end(self)
    }
}

impl ser::SerializeStructVariant for Compound<'_> {
    type Ok = ();
    type Error = Unsupported;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), Unsupported> {
        self.field(key, value)
    }
    fn end(self) -> Result<(), Unsupported> {
        Compound::end(self)
    }
}

/// A struct: an object, or a `RawValue`'s text.
enum Either<'a> {
    Object(Compound<'a>),
    Raw(Raw<'a>),
}

impl ser::SerializeStruct for Either<'_> {
    type Ok = ();
    type Error = Unsupported;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), Unsupported> {
        match self {
            Either::Object(c) => c.field(key, value),
            Either::Raw(Raw(w)) => value.serialize(RawText(w)),
        }
    }
    fn end(self) -> Result<(), Unsupported> {
        match self {
            Either::Object(c) => c.end(),
            Either::Raw(_) => Ok(()),
        }
    }
}

/// Writes the one thing a `RawValue` hands its struct: its text.
struct RawText<'a, 'b>(&'a mut &'b mut Writer);

/// A map key: a string as it is, a number or a bool in quotes (as
/// serde_json writes them); anything else is [`Unsupported`].
struct Key<'a>(&'a mut Writer);

impl Key<'_> {
    fn quoted(self, text: &str) -> Result<(), Unsupported> {
        self.0.push(b'"');
        self.0.push_str(text);
        self.0.push(b'"');
        Ok(())
    }
}

/// The `Serializer` methods a narrow serializer refuses, each naming
/// what it met.
macro_rules! refuse {
    ($what:literal; $($method:ident($($arg:ty),*)),* $(,)?) => {
        $(
            fn $method(self, $(_: $arg),*) -> Result<(), Unsupported> {
                unsupported(concat!($what, ": ", stringify!($method)))
            }
        )*
    };
}

/// The compound types a narrow serializer refuses.
macro_rules! refuse_compounds {
    ($what:literal) => {
        type SerializeSeq = ser::Impossible<(), Unsupported>;
        type SerializeTuple = ser::Impossible<(), Unsupported>;
        type SerializeTupleStruct = ser::Impossible<(), Unsupported>;
        type SerializeTupleVariant = ser::Impossible<(), Unsupported>;
        type SerializeMap = ser::Impossible<(), Unsupported>;
        type SerializeStruct = ser::Impossible<(), Unsupported>;
        type SerializeStructVariant = ser::Impossible<(), Unsupported>;
        fn serialize_some<T: Serialize + ?Sized>(self, _: &T) -> Result<(), Unsupported> {
            unsupported(concat!($what, ": an option"))
        }
        fn serialize_newtype_variant<T: Serialize + ?Sized>(
            self,
            _: &'static str,
            _: u32,
            _: &'static str,
            _: &T,
        ) -> Result<(), Unsupported> {
            unsupported(concat!($what, ": an enum variant with content"))
        }
        fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, Unsupported> {
            unsupported(concat!($what, ": a sequence"))
        }
        fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, Unsupported> {
            unsupported(concat!($what, ": a tuple"))
        }
        fn serialize_tuple_struct(
            self,
            _: &'static str,
            _: usize,
        ) -> Result<Self::SerializeTupleStruct, Unsupported> {
            unsupported(concat!($what, ": a tuple struct"))
        }
        fn serialize_tuple_variant(
            self,
            _: &'static str,
            _: u32,
            _: &'static str,
            _: usize,
        ) -> Result<Self::SerializeTupleVariant, Unsupported> {
            unsupported(concat!($what, ": a tuple variant"))
        }
        fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, Unsupported> {
            unsupported(concat!($what, ": a map"))
        }
        fn serialize_struct(
            self,
            _: &'static str,
            _: usize,
        ) -> Result<Self::SerializeStruct, Unsupported> {
            unsupported(concat!($what, ": a struct"))
        }
        fn serialize_struct_variant(
            self,
            _: &'static str,
            _: u32,
            _: &'static str,
            _: usize,
        ) -> Result<Self::SerializeStructVariant, Unsupported> {
            unsupported(concat!($what, ": a struct variant"))
        }
    };
}

impl ser::Serializer for Key<'_> {
    type Ok = ();
    type Error = Unsupported;
    refuse_compounds!("a map key");
    refuse!("a map key";
        serialize_f32(f32), serialize_f64(f64), serialize_bytes(&[u8]),
        serialize_none(), serialize_unit(), serialize_unit_struct(&'static str),
    );

    fn serialize_bool(self, v: bool) -> Result<(), Unsupported> {
        self.quoted(if v { "true" } else { "false" })
    }
    fn serialize_i8(self, v: i8) -> Result<(), Unsupported> {
        self.quoted(itoa::Buffer::new().format(v))
    }
    fn serialize_i16(self, v: i16) -> Result<(), Unsupported> {
        self.quoted(itoa::Buffer::new().format(v))
    }
    fn serialize_i32(self, v: i32) -> Result<(), Unsupported> {
        self.quoted(itoa::Buffer::new().format(v))
    }
    fn serialize_i64(self, v: i64) -> Result<(), Unsupported> {
        self.quoted(itoa::Buffer::new().format(v))
    }
    fn serialize_i128(self, v: i128) -> Result<(), Unsupported> {
        self.quoted(itoa::Buffer::new().format(v))
    }
    fn serialize_u8(self, v: u8) -> Result<(), Unsupported> {
        self.quoted(itoa::Buffer::new().format(v))
    }
    fn serialize_u16(self, v: u16) -> Result<(), Unsupported> {
        self.quoted(itoa::Buffer::new().format(v))
    }
    fn serialize_u32(self, v: u32) -> Result<(), Unsupported> {
        self.quoted(itoa::Buffer::new().format(v))
    }
    fn serialize_u64(self, v: u64) -> Result<(), Unsupported> {
        self.quoted(itoa::Buffer::new().format(v))
    }
    fn serialize_u128(self, v: u128) -> Result<(), Unsupported> {
        self.quoted(itoa::Buffer::new().format(v))
    }
    fn serialize_char(self, v: char) -> Result<(), Unsupported> {
        self.0.str(v.encode_utf8(&mut [0; 4]));
        Ok(())
    }
    fn serialize_str(self, v: &str) -> Result<(), Unsupported> {
        self.0.str(v);
        Ok(())
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<(), Unsupported> {
        self.0.str(variant);
        Ok(())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<(), Unsupported> {
        value.serialize(self)
    }
}

impl ser::Serializer for RawText<'_, '_> {
    type Ok = ();
    type Error = Unsupported;
    refuse_compounds!("a RawValue");
    refuse!("a RawValue";
        serialize_bool(bool), serialize_i8(i8), serialize_i16(i16), serialize_i32(i32),
        serialize_i64(i64), serialize_u8(u8), serialize_u16(u16), serialize_u32(u32),
        serialize_u64(u64), serialize_f32(f32), serialize_f64(f64), serialize_char(char),
        serialize_bytes(&[u8]), serialize_none(), serialize_unit(),
        serialize_unit_struct(&'static str),
    );

    fn serialize_str(self, text: &str) -> Result<(), Unsupported> {
        self.0.push_str(text);
        Ok(())
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
    ) -> Result<(), Unsupported> {
        unsupported("a RawValue: an enum variant")
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: &T,
    ) -> Result<(), Unsupported> {
        unsupported("a RawValue: a newtype struct")
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde::Serialize;
    use serde_json::{json, value::RawValue, Value};

    use super::*;

    fn same<T: Serialize + ?Sized + fmt::Debug>(v: &T) {
        let want = serde_json::to_vec(v).expect("serde_json writes it");
        assert_eq!(to_vec(v), Ok(want), "{v:?}");
    }

    /// Every byte that needs an escape, at every offset of strings around
    /// the word size, beside ASCII and multi-byte characters, as a value
    /// and as a key.
    #[test]
    fn strings_are_escaped_as_serde_json_escapes_them() {
        let specials = (0u8..0x20).chain([b'"', b'\\', b'/', 0x7f]).map(char::from);
        for special in specials {
            for filler in ["a", "é", "\u{1F600}", "\u{7f}", "~", "\u{2028}"] {
                for len in 0..20 {
                    for at in 0..=len {
                        let mut s = filler.repeat(len);
                        let byte_at = s.char_indices().nth(at).map_or(s.len(), |(i, _)| i);
                        s.insert(byte_at, special);
                        s.insert(0, special);
                        same(&json!({ s.clone(): [s] }));
                    }
                }
            }
        }
    }

    #[derive(Serialize, Debug)]
    enum Kinds {
        Unit,
        Newtype(u8),
        Tuple(i32, String),
        Struct { a: Option<bool>, b: f64 },
    }

    #[derive(Serialize, Debug)]
    struct Every {
        unit: (),
        none: Option<u8>,
        some: Option<&'static str>,
        ints: (i8, i16, i32, i64, i128, u8, u16, u32, u64, u128),
        extremes: (i64, u64, i128, u128),
        floats: Vec<f64>,
        small: f32,
        chars: (char, char),
        #[serde(with = "serde_bytes_like")]
        bytes: Vec<u8>,
        kinds: Vec<Kinds>,
        empty: (Vec<u8>, BTreeMap<String, u8>),
        keys: Keys,
        #[serde(flatten)]
        flat: BTreeMap<String, Value>,
        #[serde(skip_serializing_if = "Option::is_none")]
        skipped: Option<u8>,
        raw: Box<RawValue>,
        newtype: Newtype,
        unit_struct: UnitStruct,
    }

    /// Maps keyed by every kind of key serde_json writes in quotes.
    type Keys = (
        BTreeMap<u32, u8>,
        BTreeMap<i64, u8>,
        BTreeMap<bool, u8>,
        BTreeMap<char, u8>,
    );

    #[derive(Serialize, Debug)]
    struct Newtype(String);

    #[derive(Serialize, Debug)]
    struct UnitStruct;

    mod serde_bytes_like {
        pub fn serialize<S: serde::Serializer>(b: &[u8], s: S) -> Result<S::Ok, S::Error> {
            s.serialize_bytes(b)
        }
    }

    /// Every kind of value serde has, and serde_json's own ones (`Value`,
    /// `RawValue`, a flattened map), come out as serde_json writes them.
    #[test]
    fn every_kind_of_value_is_written_as_serde_json_writes_it() {
        let every = Every {
            unit: (),
            none: None,
            some: Some("x\u{1}"),
            ints: (-8, -16, -32, -64, -128, 8, 16, 32, 64, 128),
            extremes: (i64::MIN, u64::MAX, i128::MIN, u128::MAX),
            floats: vec![
                0.0,
                -0.0,
                1.5,
                1e300,
                1e-300,
                0.1,
                f64::NAN,
                f64::INFINITY,
                1e21,
            ],
            small: 0.1,
            chars: ('"', '\u{1F600}'),
            bytes: vec![0, 1, 255],
            kinds: vec![
                Kinds::Unit,
                Kinds::Newtype(7),
                Kinds::Tuple(-1, "t".into()),
                Kinds::Struct { a: None, b: 2.5 },
            ],
            empty: (Vec::new(), BTreeMap::new()),
            keys: (
                BTreeMap::from([(1, 1), (2, 2)]),
                BTreeMap::from([(-3, 3)]),
                BTreeMap::from([(true, 1), (false, 0)]),
                BTreeMap::from([('k', 1)]),
            ),
            flat: BTreeMap::from([("flat\"key".into(), json!([1, {"a": null}]))]),
            skipped: None,
            raw: RawValue::from_string(r#"{ "kept" : [1, 2] }"#.into()).unwrap(),
            newtype: Newtype("n".into()),
            unit_struct: UnitStruct,
        };
        same(&every);
        same(&json!({"a": [], "b": {}, "c": [[], {}], "d": -0.0, "e": 12345678901234567890u64}));
        same(&Value::Null);
        same("top-level \u{8}string");
    }

    /// What serde_json refuses, or writes in a way this writer does not
    /// copy, is refused: the caller falls back on serde_json.
    #[test]
    fn what_it_does_not_write_as_serde_json_does_is_refused() {
        let seq_keys = BTreeMap::from([(vec![1u8], 1u8)]);
        assert!(serde_json::to_vec(&seq_keys).is_err());
        assert!(to_vec(&seq_keys).is_err());
        let unit_keys = BTreeMap::from([((), 1u8)]);
        assert!(to_vec(&unit_keys).is_err());

        struct Fails;
        impl Serialize for Fails {
            fn serialize<S: serde::Serializer>(&self, _: S) -> Result<S::Ok, S::Error> {
                Err(serde::ser::Error::custom("no"))
            }
        }
        let err = to_vec(&json!([1])).and_then(|_| to_vec(&[Fails]));
        assert_eq!(err, Err(Unsupported("no".into())));
        assert_eq!(
            err.unwrap_err().to_string(),
            "not written as compact JSON: no"
        );
    }

    /// A thousand random values of every JSON kind, nested, with keys and
    /// strings drawn from pieces that need every kind of escape.
    #[test]
    fn random_values_are_written_as_serde_json_writes_them() {
        let pieces = [
            "",
            "a",
            "\"",
            "\\",
            "\n",
            "\u{0}",
            "\u{1f}",
            "é",
            "\u{1F600}",
            "plain text ",
            "\t\r",
            "0123456789abcdef",
            "/",
            "\u{7f}",
        ];
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        fn gen(next: &mut dyn FnMut() -> u64, pieces: &[&str], depth: u32) -> Value {
            let text = |next: &mut dyn FnMut() -> u64| -> String {
                (0..next() % 6)
                    .map(|_| pieces[(next() % pieces.len() as u64) as usize])
                    .collect()
            };
            match next() % if depth > 3 { 5 } else { 7 } {
                0 => Value::Null,
                1 => Value::Bool(next() % 2 == 0),
                2 => json!(next() as i64),
                3 => json!(f64::from_bits(next() >> 2)),
                4 => Value::String(text(next)),
                5 => (0..next() % 5)
                    .map(|_| gen(next, pieces, depth + 1))
                    .collect(),
                _ => Value::Object(
                    (0..next() % 5)
                        .map(|_| (text(next), gen(next, pieces, depth + 1)))
                        .collect(),
                ),
            }
        }
        for _ in 0..1_000 {
            same(&gen(&mut next, &pieces, 0));
        }
    }
}
