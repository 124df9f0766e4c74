//! Reading workspace files as text: the size cap, UTF-8, hashing, clipping.

use std::borrow::Cow;
use std::fs;
use std::io::{self, Read};
use std::path::{Component, Path};

use serde_json::json;
use sha2::{Digest, Sha256};
use toolhost_sdk::ToolError;

/// Largest file the tools read or write: 4 MiB.
pub const MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;

/// The text a paging tool's page must fit: the host's text budget (16 KiB,
/// what a model reads of one call, the same for every call) less 1 KiB for
/// what the host adds to a tool's text (the untrusted-data markers,
/// redaction markers longer than what they replace). A page cut to it
/// reaches the model whole, so its "next" is the first line not read; one
/// the host had to clip would lose its middle.
pub const TEXT_BUDGET_BYTES: usize = 15 * 1024;

/// Why a file cannot be used as text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotText {
    /// The file contains a NUL byte.
    Nul,
    /// The file is not valid UTF-8 (first bad byte at this offset).
    InvalidUtf8(usize),
}

impl NotText {
    /// The `not_text` error for workspace path `rel`.
    pub fn error(self, rel: &str) -> ToolError {
        let (reason, offset) = match self {
            NotText::Nul => ("contains a NUL byte", None),
            NotText::InvalidUtf8(at) => ("is not valid UTF-8", Some(at)),
        };
        ToolError::new(
            "not_text",
            format!("{rel} {reason}; only text files are supported"),
        )
        .field("/path")
        .details(json!({ "reason": reason, "byte_offset": offset }))
    }
}

/// Checks that `bytes` are text (no NUL, valid UTF-8) and returns them as a
/// string without copying.
pub fn into_text(bytes: Vec<u8>) -> Result<String, NotText> {
    if bytes.contains(&0) {
        return Err(NotText::Nul);
    }
    String::from_utf8(bytes).map_err(|e| NotText::InvalidUtf8(e.utf8_error().valid_up_to()))
}

/// Reads the file at guest path `path` (workspace path `rel`) as text.
///
/// Errors (all with field `/path` where the caller can act on them):
/// `not_found`, `is_directory`, `file_too_large`, `not_text`,
/// `permission_denied`, `io_error`.
pub fn read_text_file(path: &Path, rel: &str) -> Result<String, ToolError> {
    let meta = fs::metadata(path).map_err(|e| file_error(&e, rel))?;
    if meta.is_dir() {
        return Err(
            ToolError::new("is_directory", format!("{rel} is a directory, not a file"))
                .field("/path")
                .correctable(),
        );
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(too_large(rel, meta.len()));
    }
    let bytes = read_capped(path).map_err(|e| file_error(&e, rel))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        // The file grew between the size check and the read.
        return Err(too_large(rel, bytes.len() as u64));
    }
    into_text(bytes).map_err(|e| e.error(rel))
}

/// Reads at most `MAX_FILE_BYTES + 1` bytes of the file, so that an
/// oversized file is detected without reading all of it.
pub fn read_capped(path: &Path) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    fs::File::open(path)?
        .take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// The `file_too_large` error for a file (or edit result) of `size` bytes.
pub fn too_large(rel: &str, size: u64) -> ToolError {
    ToolError::new(
        "file_too_large",
        format!("{rel} has {size} bytes; the limit is {MAX_FILE_BYTES} bytes (4 MiB)"),
    )
    .field("/path")
    .details(json!({ "size_bytes": size, "max_bytes": MAX_FILE_BYTES }))
}

/// Maps an I/O error on workspace path `rel` (see [`ToolError::io`]),
/// naming `/path` as the field at fault.
pub fn file_error(err: &io::Error, rel: &str) -> ToolError {
    ToolError::io(err, rel).field("/path")
}

/// Lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let digest = Sha256::digest(bytes);
    let mut hex = String::with_capacity(64);
    for byte in digest {
        hex.push(HEX[usize::from(byte >> 4)] as char);
        hex.push(HEX[usize::from(byte & 0xf)] as char);
    }
    hex
}

/// Clips `line` to `max_chars` characters, appending a marker that gives
/// the full length.
pub fn clip_line(line: &str, max_chars: usize) -> Cow<'_, str> {
    // A line of at most `max_chars` bytes has at most that many characters.
    if line.len() <= max_chars {
        return Cow::Borrowed(line);
    }
    match line.char_indices().nth(max_chars) {
        None => Cow::Borrowed(line),
        Some((cut, _)) => {
            let total = max_chars + line[cut..].chars().count();
            Cow::Owned(format!(
                "{} [...clipped, line has {total} chars]",
                &line[..cut]
            ))
        }
    }
}

/// The largest character boundary of `s` at or below `at` (`s.len()` when
/// `at` is past the end).
pub fn floor_boundary(s: &str, at: usize) -> usize {
    if at >= s.len() {
        return s.len();
    }
    let mut at = at;
    while !s.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// The lines of `text` exactly as [`str::lines`] gives them (split after
/// each `\n`, the `\r` of a `\r\n` dropped, no empty line after a final
/// line ending), each line's end found eight bytes at a time instead of
/// through a character search per line.
pub fn lines(text: &str) -> impl Iterator<Item = &str> {
    let bytes = text.as_bytes();
    let mut at = 0;
    std::iter::from_fn(move || {
        if at >= bytes.len() {
            return None;
        }
        let start = at;
        let line = match newline(bytes, at) {
            Some(end) => {
                at = end + 1;
                let line = &text[start..end];
                line.strip_suffix('\r').unwrap_or(line)
            }
            None => {
                at = bytes.len();
                &text[start..]
            }
        };
        Some(line)
    })
}

/// The offset of the first `\n` in `bytes` at or after `at`.
fn newline(bytes: &[u8], mut at: usize) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    while let Some(chunk) = bytes.get(at..at + 8) {
        let word = u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8]));
        let x = word ^ (ONES * u64::from(b'\n'));
        // The lowest marked byte is the first zero byte of `x` (a borrow
        // can only mark bytes above it).
        let zero = x.wrapping_sub(ONES) & !x & HIGH;
        if zero != 0 {
            return Some(at + (zero.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    bytes[at..].iter().position(|&b| b == b'\n').map(|i| at + i)
}

/// The canonical form of a workspace-relative path: `.` components and
/// empty segments dropped, `/`-separated; `""` is the workspace root.
/// Callers have already refused absolute paths and `..` via
/// `Context::guest_path`.
pub fn normalize_rel(rel: &str) -> String {
    let parts: Vec<&str> = Path::new(rel)
        .components()
        .filter_map(|c| match c {
            Component::Normal(part) => part.to_str(),
            _ => None,
        })
        .collect();
    parts.join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clips_long_lines_on_char_boundaries() {
        assert_eq!(clip_line("short", 10), "short");
        assert_eq!(clip_line("ééééé", 5), "ééééé");
        assert_eq!(
            clip_line("éééééé", 5),
            "ééééé [...clipped, line has 6 chars]"
        );
    }

    #[test]
    fn lines_are_strs_lines() {
        let pieces = [
            "",
            "a",
            "é",
            "\r",
            "\n",
            "\r\n",
            "\n\n",
            "0123456",
            "01234567",
            "\u{1F600}",
        ];
        // Every sequence of three pieces, and lines of every length around
        // the word size with each kind of ending.
        let mut texts: Vec<String> = Vec::new();
        for a in pieces {
            for b in pieces {
                for c in pieces {
                    texts.push(format!("{a}{b}{c}"));
                }
            }
        }
        for len in 0..20 {
            for end in ["", "\n", "\r\n", "\r", "\n\r"] {
                texts.push(format!(
                    "{}{end}{}{end}",
                    "x".repeat(len),
                    "é".repeat(len / 2)
                ));
            }
        }
        for t in &texts {
            assert_eq!(
                lines(t).collect::<Vec<_>>(),
                t.lines().collect::<Vec<_>>(),
                "{t:?}"
            );
        }
    }

    #[test]
    fn text_detection() {
        assert_eq!(into_text(b"ok\n".to_vec()).unwrap(), "ok\n");
        assert_eq!(into_text(b"a\0b".to_vec()), Err(NotText::Nul));
        assert_eq!(into_text(b"ab\xff".to_vec()), Err(NotText::InvalidUtf8(2)));
    }

    #[test]
    fn sha256_of_empty() {
        assert_eq!(
            sha256_hex(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn normalizes() {
        assert_eq!(normalize_rel("./a//b/./c/"), "a/b/c");
        assert_eq!(normalize_rel("."), "");
    }
}
