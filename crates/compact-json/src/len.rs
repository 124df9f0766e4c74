//! Compact JSON text, measured without being written.
//!
//! The host reports an output's size as compact JSON without writing it.
//! [`compact_len`] is exactly `serde_json::to_string(value).len()` (the
//! tests hold it to that over values of every kind); strings are measured
//! eight bytes at a time on the exact masks of [`crate::swar`].

use serde_json::Value;

use crate::swar;

/// The length of `s` as a JSON string, quotes included, as serde_json's
/// compact writer writes it.
pub fn escaped_len(s: &str) -> usize {
    let bytes = s.as_bytes();
    let mut len = bytes.len() + 2;
    let mut words = bytes.chunks_exact(8);
    for word in &mut words {
        let word = u64::from_le_bytes(word.try_into().unwrap_or_default());
        len += (swar::eq(word, b'"') | swar::eq(word, b'\\')).count_ones() as usize;
        if swar::below(word, 0x20) != 0 {
            len += word
                .to_le_bytes()
                .iter()
                .filter(|&&b| b < 0x20)
                .map(|&b| control_extra(b))
                .sum::<usize>();
        }
    }
    for &b in words.remainder() {
        len += match b {
            b'"' | b'\\' => 1,
            0..=0x1f => control_extra(b),
            _ => 0,
        };
    }
    len
}

/// The bytes a control character's escape adds to it: `\n` is two bytes
/// for one, `\u001b` six.
fn control_extra(b: u8) -> usize {
    match b {
        0x08 | b'\t' | b'\n' | 0x0c | b'\r' => 1,
        _ => 5,
    }
}

/// The number of decimal digits of `n`.
fn decimal_len(mut n: u64) -> usize {
    let mut digits = 1;
    while n >= 10 {
        n /= 10;
        digits += 1;
    }
    digits
}

/// The length of `value`'s compact JSON text (`serde_json::to_string`).
pub fn compact_len(value: &Value) -> usize {
    match value {
        Value::Null => 4,
        Value::Bool(true) => 4,
        Value::Bool(false) => 5,
        Value::Number(n) => {
            if let Some(u) = n.as_u64() {
                decimal_len(u)
            } else if let Some(i) = n.as_i64() {
                usize::from(i < 0) + decimal_len(i.unsigned_abs())
            } else {
                n.to_string().len()
            }
        }
        Value::String(s) => escaped_len(s),
        Value::Array(items) => {
            2 + items.len().saturating_sub(1) + items.iter().map(compact_len).sum::<usize>()
        }
        Value::Object(members) => {
            2 + members.len().saturating_sub(1)
                + members
                    .iter()
                    .map(|(k, v)| escaped_len(k) + 1 + compact_len(v))
                    .sum::<usize>()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn serde_len(v: &Value) -> usize {
        serde_json::to_string(v).unwrap().len()
    }

    /// Every byte that needs an escape, at every offset of strings around
    /// the word size, beside ASCII and multi-byte characters.
    #[test]
    fn escaped_len_is_serde_jsons_for_every_special_byte_at_every_offset() {
        let specials = (0u8..0x20).chain([b'"', b'\\', b'/', 0x7f]).map(char::from);
        for special in specials {
            for filler in ["a", "é", "\u{1F600}", "\u{7f}", "~", "\u{2028}"] {
                for len in 0..20 {
                    for at in 0..=len {
                        let mut s = filler.repeat(len);
                        let byte_at = s.char_indices().nth(at).map_or(s.len(), |(i, _)| i);
                        s.insert(byte_at, special);
                        s.insert(0, special);
                        let v = Value::String(s);
                        assert_eq!(escaped_len(v.as_str().unwrap()), serde_len(&v), "{v}");
                    }
                }
            }
        }
    }

    #[test]
    fn compact_len_is_serde_jsons_for_values_of_every_kind() {
        let lines: Vec<Value> = (0..300)
            .map(|n| json!({"number": n, "text": format!("line {n}: \"q\" \\ \t end")}))
            .collect();
        for v in [
            json!(null),
            json!(true),
            json!(false),
            json!(0),
            json!(-7),
            json!(u64::MAX),
            json!(i64::MIN),
            json!(1.5),
            json!(-0.0),
            json!(1e300),
            json!(2.5e-8),
            json!(""),
            json!([]),
            json!({}),
            json!([[], {}, [null]]),
            json!({"a\"b": {"c\n": [1, "x", false]}, "": ""}),
            json!({"path": "a.txt", "lines": lines, "has_more": true}),
        ] {
            assert_eq!(compact_len(&v), serde_len(&v), "{v}");
        }
    }
}
