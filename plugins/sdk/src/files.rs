//! Native file indexes and reads: the `toolhost:plugin/files` import.
//!
//! [`index`] asks the host for a file's SHA-256, size, line count, text
//! check and line starts (every [`FileIndex::stride`]-th line), computed
//! natively and cached by the host, so a tool that pages through a file can
//! seek to the page it needs instead of reading and hashing all of it in
//! Wasm; [`read`] then reads that page in one host call, with the size and
//! mtime that tell it is still the indexed file. The host opens the path
//! exactly as the guest's own `open` would (only inside the call's mounts),
//! so it never reveals more than the tool could read itself.
//!
//! ```no_run
//! # fn f(ctx: &toolhost_sdk::Context) -> Result<(), toolhost_sdk::ToolError> {
//! let guest = ctx.guest_path("src/main.rs")?;
//! let path = guest.to_string_lossy();
//! if let Ok(ix) = toolhost_sdk::files::index(&path, 4 << 20) {
//!     if let Some((start, _skip)) = ix.line_start(129) {
//!         if let Ok(page) = toolhost_sdk::files::read(&path, start, 4096) {
//!             let _unchanged = page.size == ix.size && page.mtime_ns == ix.mtime_ns;
//!         }
//!     }
//! }
//! # Ok(()) }
//! ```
//!
//! [`redacted_text`] reads a file whole with its secrets redacted by the
//! host: what a search tool matches.
//!
//! Outside a component (a tool's native unit tests) there is no host:
//! [`index`], [`read`] and [`redacted_text`] answer
//! [`FileError::Unavailable`], and a tool falls back to reading the file
//! itself.

pub use crate::bindings::toolhost::plugin::files::{FileBytes, FileError, FileIndex};

/// Indexes the file at guest path `path` (e.g. `/workspace/src/main.rs`),
/// reading at most `max_bytes` of it (the host applies its own cap too;
/// [`FileError::TooLarge`] carries the limit applied).
#[cfg(target_family = "wasm")]
pub fn index(path: &str, max_bytes: u64) -> Result<FileIndex, FileError> {
    crate::bindings::toolhost::plugin::files::index(path, max_bytes)
}

/// Off-wasm there is no host to ask: always [`FileError::Unavailable`].
#[cfg(not(target_family = "wasm"))]
pub fn index(path: &str, max_bytes: u64) -> Result<FileIndex, FileError> {
    let _ = (path, max_bytes);
    Err(unavailable())
}

/// Reads at most `len` bytes from byte `offset` of the file at guest path
/// `path` (fewer where it ends), with the file's size and mtime as the host
/// saw them right after: compare them with a [`FileIndex`] to know the
/// bytes are from the file it indexed. Refused as [`index`] is refused; a
/// `len` over the host's cap is [`FileError::TooLarge`].
#[cfg(target_family = "wasm")]
pub fn read(path: &str, offset: u64, len: u64) -> Result<FileBytes, FileError> {
    crate::bindings::toolhost::plugin::files::read(path, offset, len)
}

/// Off-wasm there is no host to ask: always [`FileError::Unavailable`].
#[cfg(not(target_family = "wasm"))]
pub fn read(path: &str, offset: u64, len: u64) -> Result<FileBytes, FileError> {
    let _ = (path, offset, len);
    Err(unavailable())
}

/// The text of the file at guest path `path` with every secret the host
/// redacts replaced by its marker, line by line (the file's lines stay
/// where they are); as it is for a caller with the `secrets` right.
/// `Ok(None)`: the file is not text (not UTF-8, or it holds a NUL byte).
/// A tool that searches files matches this text, so that its matches and
/// counts say nothing of a redacted value. Refused as [`index`] is
/// refused; a file over `max_bytes` is [`FileError::TooLarge`].
#[cfg(target_family = "wasm")]
pub fn redacted_text(path: &str, max_bytes: u64) -> Result<Option<String>, FileError> {
    crate::bindings::toolhost::plugin::files::redacted_text(path, max_bytes)
}

/// Off-wasm there is no host to ask: always [`FileError::Unavailable`].
#[cfg(not(target_family = "wasm"))]
pub fn redacted_text(path: &str, max_bytes: u64) -> Result<Option<String>, FileError> {
    let _ = (path, max_bytes);
    Err(unavailable())
}

#[cfg(not(target_family = "wasm"))]
fn unavailable() -> FileError {
    FileError::Unavailable("the files import exists only inside a toolhost component".into())
}

impl FileIndex {
    /// The byte offset where line `line` (1-based) starts, and how many
    /// lines after it the reader has to skip to get there: the start of
    /// the recorded line at or before it. `None` for line 0 or a line past
    /// the end.
    pub fn line_start(&self, line: u64) -> Option<(u64, u64)> {
        if line == 0 || line > self.lines || self.stride == 0 {
            return None;
        }
        let stride = u64::from(self.stride);
        let group = (line - 1) / stride;
        let start = *self.line_starts.get(usize::try_from(group).ok()?)?;
        Some((start, (line - 1) % stride))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_wasm_the_import_is_unavailable() {
        assert!(matches!(
            index("/workspace/a.txt", 1024),
            Err(FileError::Unavailable(_))
        ));
        assert!(matches!(
            read("/workspace/a.txt", 0, 1024),
            Err(FileError::Unavailable(_))
        ));
    }

    #[test]
    fn line_start_finds_the_group_and_the_lines_to_skip() {
        let ix = FileIndex {
            sha256: String::new(),
            size: 100,
            lines: 10,
            is_text: true,
            stride: 4,
            line_starts: vec![0, 40, 80],
            mtime_ns: 0,
        };
        assert_eq!(ix.line_start(1), Some((0, 0)));
        assert_eq!(ix.line_start(4), Some((0, 3)));
        assert_eq!(ix.line_start(5), Some((40, 0)));
        assert_eq!(ix.line_start(10), Some((80, 1)));
        assert_eq!(ix.line_start(0), None);
        assert_eq!(ix.line_start(11), None);
        let broken = FileIndex {
            line_starts: vec![0],
            ..ix
        };
        assert_eq!(broken.line_start(5), None);
    }
}
