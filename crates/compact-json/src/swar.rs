//! Eight bytes at a time: per-byte tests on a `u64` word.
//!
//! Text that toolhost scans on every call (an output's strings, the
//! model-facing text) is mostly bytes that need nothing done; testing them
//! one at a time, with a branch or a table lookup each, costs more than the
//! rest of the scan. These masks test eight bytes with a few integer
//! operations. Each function returns a mask with the high bit (0x80) of
//! every matching byte set and every other bit clear; all are exact in
//! every byte (no carry or borrow crosses into the next byte), so the bits
//! can be counted ([`u64::count_ones`]) and the first match found
//! ([`first`]). Words are read little-endian ([`word`]), so the lowest set
//! bit is the earliest byte.

const ONES: u64 = 0x0101_0101_0101_0101;
const LOW: u64 = 0x7f7f_7f7f_7f7f_7f7f;
const HIGH: u64 = 0x8080_8080_8080_8080;

/// The eight bytes at `bytes[at..at + 8]` as a word, if there are eight.
#[inline]
pub fn word(bytes: &[u8], at: usize) -> Option<u64> {
    let eight: [u8; 8] = bytes.get(at..at + 8)?.try_into().ok()?;
    Some(u64::from_le_bytes(eight))
}

/// The bytes of `word` equal to `byte`.
#[inline]
pub fn eq(word: u64, byte: u8) -> u64 {
    let x = word ^ (ONES * u64::from(byte));
    !(((x & LOW) + LOW) | x) & HIGH
}

/// The bytes of `word` below `bound` (at most 0x80).
#[inline]
pub fn below(word: u64, bound: u8) -> u64 {
    debug_assert!(bound <= 0x80);
    !(((word & LOW) + ONES * u64::from(0x80 - bound)) | word) & HIGH
}

/// The index (0–7) of the first byte marked in a non-zero `mask`.
#[inline]
pub fn first(mask: u64) -> usize {
    (mask.trailing_zeros() / 8) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every mask agrees with the byte-by-byte test for every byte value at
    /// every position, beside every other value class.
    #[test]
    fn masks_are_exact_in_every_byte() {
        let neighbours = [0x00, 0x01, 0x1f, 0x20, b'"', b'\\', 0x7f, 0x80, 0xc2, 0xff];
        for at in 0..8 {
            for value in 0..=255u8 {
                for &fill in &neighbours {
                    let mut bytes = [fill; 8];
                    bytes[at] = value;
                    let w = word(&bytes, 0).unwrap();
                    for probe in [0u8, b'\t', b'\n', b'"', b'\\', 0x7f, 0xc2, 0xff] {
                        let expected: u64 = (0..8)
                            .filter(|&i| bytes[i] == probe)
                            .map(|i| 0x80 << (8 * i))
                            .sum();
                        assert_eq!(eq(w, probe), expected, "{bytes:?} == {probe:#x}");
                    }
                    for bound in [1u8, 0x20, 0x7f, 0x80] {
                        let expected: u64 = (0..8)
                            .filter(|&i| bytes[i] < bound)
                            .map(|i| 0x80 << (8 * i))
                            .sum();
                        assert_eq!(below(w, bound), expected, "{bytes:?} < {bound:#x}");
                    }
                }
            }
        }
        assert_eq!(first(eq(word(b"abcdefg\"", 0).unwrap(), b'"')), 7);
        assert_eq!(word(b"short", 0), None);
    }
}
