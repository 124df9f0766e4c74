//! The `toolhost:plugin/files` import, linked for every component.
//!
//! `index(path, max-bytes)` lets a plugin learn a file's SHA-256, size,
//! line count and line starts from the host instead of reading and hashing
//! the whole file in Wasm on every request ([`toolhost_base::file_index`] computes
//! and caches them). The host reads only what the guest itself could read:
//!
//! - `path` is a guest path, absolute and lexically plain (no `..`, no NUL);
//!   anything else is `invalid` before any lookup;
//! - it must lie inside one of the call's mounts (the longest matching
//!   mount wins, as the guest's own preopen lookup does); any other path,
//!   and every path of a call without mounts (no read grant, `describe`),
//!   is `denied`;
//! - the file is opened beneath that mount's open directory, the very
//!   descriptor the guest's preopen is, with `openat2(RESOLVE_BENEATH)`: a
//!   symbolic link is followed only while it stays inside the mount, so a
//!   link out of it (or to another grant) is `denied`, and a grant swapped
//!   for a link on the host after the call started is not followed;
//! - where the kernel offers no `openat2` (before Linux 5.6, under some
//!   seccomp policies, under valgrind), a path is opened one plain step at
//!   a time with `O_NOFOLLOW`; a path through any symbolic link is then
//!   `unavailable`, and the plugin opens it itself through its preopen;
//! - only a regular file is read (non-blocking, so a FIFO swapped in cannot
//!   stall the host); FIFOs, sockets and devices are `denied` unopened;
//! - at most the smaller of `max-bytes` and [`HOST_MAX_BYTES`] is read.
//!
//! `read(path, offset, len)` opens the file the same way, with the same
//! refusals (a path the call's last `index` or `read` opened is read
//! through that descriptor, without a second lookup and open), and
//! answers at most `len` bytes from `offset` (a `len` over
//! [`HOST_MAX_BYTES`] or over the call's memory limit is `too-large`) with
//! the size and mtime of the descriptor read through: a plugin
//! that pages through an indexed file reads its page in one host call
//! instead of the guest's own open, seek, read and stat.
//!
//! `redacted-text(path, max-bytes)` opens the file the same way and
//! answers its text with every secret replaced by its marker, line by line
//! ([`toolhost_base::redact::Redactor::redact_lines`]), or as it is for a caller
//! with the `secrets` right; `none` for a file that is not text. A search
//! tool that matches this text cannot be made to say, by its matches or
//! its counts, anything of what a marker hides.

use std::io::{self, Read as _};

use rustix::io::Errno;
use wasmtime::component::{HasSelf, Linker};

use super::bindings::plugin::toolhost::plugin::files as wit;
use super::{SandboxError, State};
use toolhost_base::file_index::{self, IndexError, HOST_MAX_BYTES};
use toolhost_base::opendir::{self, Kind, OpenDir};

/// Leading bytes `redacted-text` checks for NUL before it reads a file whole.
const SNIFF_BYTES: u64 = 8 * 1024;

/// The answer to every `index` of a call without mounts.
pub(super) const NO_MOUNTS: &str =
    "this call may read no file (its tool declares no fs-read, or the caller granted none)";

/// Adds `toolhost:plugin/files` to `linker`.
pub(super) fn add_to_linker(linker: &mut Linker<State>) -> Result<(), SandboxError> {
    wit::add_to_linker::<State, HasSelf<State>>(linker, |s| s)
        .map_err(|e| SandboxError::Engine(format!("{e:#}")))
}

impl wit::Host for State {
    fn index(&mut self, path: String, max_bytes: u64) -> Result<wit::FileIndex, wit::FileError> {
        let (dir, rel) = resolve(&self.mounts, &path)?;
        let mut file = open(dir, &rel, &path)?;
        let limit = max_bytes.min(HOST_MAX_BYTES);
        let indexed = self.files.index(&mut file, limit);
        self.opened = Some((path.clone(), file));
        match indexed {
            Ok(ix) => Ok(wit::FileIndex {
                sha256: ix.sha256.clone(),
                size: ix.size,
                lines: ix.lines,
                is_text: ix.is_text,
                stride: ix.stride,
                line_starts: ix.line_starts.clone(),
                mtime_ns: ix.mtime_ns,
            }),
            Err(IndexError::TooLarge(limit)) => Err(wit::FileError::TooLarge(limit)),
            Err(IndexError::Io(e)) => Err(io_error(&e, &path)),
        }
    }

    fn read(
        &mut self,
        path: String,
        offset: u64,
        len: u64,
    ) -> Result<wit::FileBytes, wit::FileError> {
        // The file this call opened last under the same path (its `index`,
        // as a page is read) is read again as it is: it passed the same
        // checks, and it is the file that was indexed.
        let file = match self.opened.take() {
            Some((opened, file)) if opened == path => file,
            _ => {
                let (dir, rel) = resolve(&self.mounts, &path)?;
                open(dir, &rel, &path)?
            }
        };
        // No more than the guest could hold: a read over its memory limit
        // could never be handed to it.
        let cap = self.memory.limit_bytes() as u64;
        let got = file_index::read_range(&file, offset, len, cap);
        self.opened = Some((path.clone(), file));
        match got {
            Ok(got) => Ok(wit::FileBytes {
                bytes: got.bytes,
                size: got.size,
                mtime_ns: got.mtime_ns,
            }),
            Err(IndexError::TooLarge(limit)) => Err(wit::FileError::TooLarge(limit)),
            Err(IndexError::Io(e)) => Err(io_error(&e, &path)),
        }
    }

    fn redacted_text(
        &mut self,
        path: String,
        max_bytes: u64,
    ) -> Result<Option<String>, wit::FileError> {
        self.text_of(&path, max_bytes)
    }
}

impl State {
    /// `redacted-text`: the file as the call's output may show it (see
    /// the module overview).
    fn text_of(&mut self, path: &str, max_bytes: u64) -> Result<Option<String>, wit::FileError> {
        let (dir, rel) = resolve(&self.mounts, path)?;
        let file = open(dir, &rel, path)?;
        // No more than the guest could hold.
        let limit = max_bytes
            .min(HOST_MAX_BYTES)
            .min(self.memory.limit_bytes() as u64);
        // A NUL in the first 8 KiB marks a binary file: not read on.
        let mut bytes = Vec::new();
        let mut file = file.take(limit + 1);
        (&mut file)
            .take(SNIFF_BYTES)
            .read_to_end(&mut bytes)
            .map_err(|e| io_error(&e, path))?;
        if memchr::memchr(0, &bytes).is_some() {
            return Ok(None);
        }
        file.read_to_end(&mut bytes)
            .map_err(|e| io_error(&e, path))?;
        if bytes.len() as u64 > limit {
            return Err(wit::FileError::TooLarge(limit));
        }
        if memchr::memchr(0, &bytes).is_some() {
            return Ok(None);
        }
        let Ok(text) = String::from_utf8(bytes) else {
            return Ok(None);
        };
        if self.reveal_secrets {
            return Ok(Some(text));
        }
        let (clean, _) = toolhost_base::redact::redactor().redact_lines(&text);
        Ok(Some(match clean {
            std::borrow::Cow::Borrowed(_) => text,
            std::borrow::Cow::Owned(clean) => clean,
        }))
    }
}

/// The mount directory and the path beneath it of the guest path `path`.
fn resolve<'m>(
    mounts: &'m [(OpenDir, String)],
    path: &str,
) -> Result<(&'m OpenDir, String), wit::FileError> {
    if path.contains('\0') {
        return Err(wit::FileError::Invalid(
            "the path contains a NUL byte".into(),
        ));
    }
    if !path.starts_with('/') {
        return Err(wit::FileError::Invalid(format!(
            "`{path}` is not an absolute guest path (e.g. /workspace/src/main.rs)"
        )));
    }
    let mut segs = Vec::new();
    for seg in path.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                return Err(wit::FileError::Invalid(format!(
                    "`{path}` contains `..`; give the plain path"
                )))
            }
            s => segs.push(s),
        }
    }
    if mounts.is_empty() {
        return Err(wit::FileError::Denied(NO_MOUNTS.into()));
    }
    // The longest mount whose guest path is a prefix, by whole segments.
    let mut best: Option<(&OpenDir, usize)> = None;
    for (dir, guest) in mounts {
        let mount: Vec<&str> = guest
            .split('/')
            .filter(|s| !s.is_empty() && *s != ".")
            .collect();
        if segs.len() >= mount.len()
            && segs[..mount.len()] == mount[..]
            && best.is_none_or(|(_, n)| mount.len() > n)
        {
            best = Some((dir, mount.len()));
        }
    }
    match best {
        Some((dir, n)) => Ok((dir, segs[n..].join("/"))),
        None => Err(wit::FileError::Denied(format!(
            "`{path}` is outside the call's mounts ({})",
            mounts
                .iter()
                .map(|(_, g)| g.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// Opens the regular file `rel` beneath `dir` (see the module overview).
fn open(dir: &OpenDir, rel: &str, path: &str) -> Result<std::fs::File, wit::FileError> {
    let rel = if rel.is_empty() { "." } else { rel };
    // Look before opening (O_PATH never blocks and opens no device).
    let kind = match opendir::kind_beneath(dir, rel, true) {
        Err(e) if e.raw_os_error() == Some(Errno::NOSYS.raw_os_error()) => {
            return open_plain(dir, rel, path)
        }
        other => other.map_err(|e| io_error(&e, path))?,
    };
    check_kind(kind, path)?;
    let (file, kind) = opendir::open_read_beneath(dir, rel).map_err(|e| io_error(&e, path))?;
    check_kind(kind, path)?;
    Ok(file)
}

/// [`open`] where the kernel (or a seccomp policy, or a tool such as
/// valgrind) offers no `openat2`: a path without symbolic links is opened
/// one plain step at a time. One with a link, which only `openat2` can
/// follow while keeping it beneath the mount, is `unavailable`: the plugin
/// then opens it itself, through its preopen, which resolves it safely.
fn open_plain(dir: &OpenDir, rel: &str, path: &str) -> Result<std::fs::File, wit::FileError> {
    let through_link = || {
        wit::FileError::Unavailable(format!(
            "`{path}` passes through a symbolic link, which the host follows only with openat2, \
             and this kernel has none"
        ))
    };
    let (file, kind) = dir.open_read_plain(rel).map_err(|e| {
        match e.raw_os_error().map(Errno::from_raw_os_error) {
            Some(Errno::LOOP) | Some(Errno::NOTDIR) => through_link(),
            _ => io_error(&e, path),
        }
    })?;
    if kind == Kind::Symlink {
        return Err(through_link());
    }
    check_kind(kind, path)?;
    file.ok_or_else(through_link)
}

fn check_kind(kind: Kind, path: &str) -> Result<(), wit::FileError> {
    match kind {
        Kind::File => Ok(()),
        Kind::Dir => Err(wit::FileError::IsDirectory),
        other => Err(wit::FileError::Denied(format!(
            "`{path}` is {}, not a regular file",
            other.describe()
        ))),
    }
}

/// The `file-error` of a failed lookup or read of `path`.
fn io_error(e: &io::Error, path: &str) -> wit::FileError {
    let errno = e.raw_os_error().map(Errno::from_raw_os_error);
    match errno {
        Some(Errno::NOENT) => wit::FileError::NotFound,
        Some(Errno::ISDIR) => wit::FileError::IsDirectory,
        Some(Errno::XDEV) => wit::FileError::Denied(format!(
            "`{path}` leads out of its mount through a symbolic link"
        )),
        Some(Errno::NOTDIR) => wit::FileError::NotFound,
        Some(Errno::ACCESS) | Some(Errno::PERM) => {
            wit::FileError::Denied(format!("`{path}`: permission denied"))
        }
        Some(Errno::LOOP) => wit::FileError::Denied(format!("`{path}`: too many symbolic links")),
        Some(Errno::NOSYS) => wit::FileError::Unavailable(
            "this kernel has no openat2, which the host needs to open files beneath a mount".into(),
        ),
        _ => wit::FileError::Io(format!("`{path}`: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_guest_paths_to_the_longest_mount_only() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        let root = OpenDir::open(dir.path()).unwrap();
        let sub = OpenDir::open(&dir.path().join("sub")).unwrap();
        let mounts = vec![
            (root.clone(), "/workspace".to_string()),
            (sub.clone(), "/workspace/sub".to_string()),
        ];
        let (d, rel) = resolve(&mounts, "/workspace/./a//b.txt").unwrap();
        assert!(d.same_dir(&root) && rel == "a/b.txt");
        let (d, rel) = resolve(&mounts, "/workspace/sub/c").unwrap();
        assert!(d.same_dir(&sub) && rel == "c");
        let (_, rel) = resolve(&mounts, "/workspace").unwrap();
        assert_eq!(rel, "");
        let only_sub = &mounts[1..];
        for (path, want) in [
            ("/workspace/a", "denied"),
            ("/workspacex/a", "denied"),
            ("/etc/passwd", "denied"),
            ("../outside", "invalid"),
            ("/workspace/sub/../a", "invalid"),
            ("sub/c", "invalid"),
            ("/workspace/sub/\0", "invalid"),
        ] {
            let got = match resolve(only_sub, path) {
                Err(wit::FileError::Denied(_)) => "denied",
                Err(wit::FileError::Invalid(_)) => "invalid",
                other => panic!("{path}: {:?}", other.map(|(_, r)| r)),
            };
            assert_eq!(got, want, "{path}");
        }
        assert!(matches!(
            resolve(&[], "/workspace/a"),
            Err(wit::FileError::Denied(m)) if m == NO_MOUNTS
        ));
    }
}
