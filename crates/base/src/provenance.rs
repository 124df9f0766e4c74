//! Provenance: where the content of an observation came from, derived by
//! the host from what it saw, never from what the plugin says.
//!
//! A call's output can carry content from outside the host — a workspace
//! file, a network response, a native program's output — and that content
//! may be written to steer a model ("ignore your instructions and …"). The
//! observation lists each source ([`Source`]) and sets `untrusted`, and its
//! `text` puts the content between fixed markers
//! ([`crate::observation::UNTRUSTED_OPEN`]), so whoever reads it knows it is
//! data.
//!
//! The sources, as the host knows them:
//!
//! - **file**: each path argument of the call that the tool may read (a
//!   schema property annotated `x-toolhost-path: read`, or `write` for a
//!   tool that also declares `fs-read`: an edit reads its target), as the
//!   host resolved it (workspace-relative, links resolved). A tool that gets
//!   file-system mounts but takes no path argument is listed by its granted
//!   directories instead: it could read anything in them. A regular file up
//!   to [`MAX_HASHED_FILE_BYTES`] carries its SHA-256, read when the call
//!   has ended (beneath the workspace root, following no link): for a
//!   read-only call that is the file it read, unless something else wrote
//!   it meanwhile; for an edit, the file as it left it. Directories, larger
//!   files and files gone by then carry no hash. A file the host's index
//!   cache ([`crate::file_index`]) holds for what the file is now (same
//!   device, inode, size, mtime and ctime) takes its hash from there
//!   instead of being read again: paging through a file with `file_view`
//!   hashes it once, not once per page.
//!   A tool's own error on a call with no output does not count a path
//!   that names nothing when the call ended: there was no content for the
//!   error (`not_found`) to quote, so it is not fenced as untrusted.
//! - **network**: each URL the guest requested that the host let through to
//!   a granted origin, recorded by the outgoing-HTTP hook
//!   (`toolhost::sandbox`). Refused requests brought nothing back and are not
//!   listed (the logs name them).
//! - **process**: each native program the guest ran through the `exec`
//!   import (its `argv[0]` as given), recorded by the host
//!   ([`crate::exec_call`]) when the program started. A refused program
//!   brought nothing back and is not listed.
//!
//! A call that reads no file and requests nothing (the trivial call) has no
//! source and costs nothing here.

use std::io::Read;

use sha2::{Digest, Sha256};

use crate::file_index::IndexCache;
use crate::observation::{Source, SourceKind, MAX_HASHED_FILE_BYTES};
use crate::opendir::OpenDir;

/// Where a prepared call may take content from, as the host resolved it.
#[derive(Debug, Clone, Default)]
pub struct Inputs {
    /// Workspace-relative paths (`.` for the root) the call may read.
    pub files: Vec<String>,
    /// The open workspace root, to hash files beneath it (set when `files`
    /// is not empty).
    pub root: Option<OpenDir>,
}

impl Inputs {
    /// Adds a path once.
    pub fn add_file(&mut self, rel: &str) {
        if !self.files.iter().any(|f| f == rel) {
            self.files.push(rel.to_string());
        }
    }
}

/// The sources of a finished run: `inputs`' files (hashed when small
/// regular files, from `indexes` when it holds one), then the URLs the
/// guest requested, then the programs it ran, then the questions the
/// person answered (with the digest of each answer).
pub fn sources(
    inputs: &Inputs,
    requested: &[String],
    programs: &[String],
    questions: &[(String, String)],
    indexes: Option<&IndexCache>,
) -> Vec<Source> {
    let mut out = Vec::with_capacity(inputs.files.len() + requested.len() + programs.len());
    for rel in &inputs.files {
        let sha256 = inputs
            .root
            .as_ref()
            .and_then(|root| hash_file(root, rel, indexes));
        out.push(Source {
            kind: SourceKind::File,
            reference: rel.clone(),
            sha256,
        });
    }
    out.extend(requested.iter().map(|url| Source {
        kind: SourceKind::Network,
        reference: url.clone(),
        sha256: None,
    }));
    out.extend(programs.iter().map(|program| Source {
        kind: SourceKind::Process,
        reference: program.clone(),
        sha256: None,
    }));
    out.extend(questions.iter().map(|(key, answer)| Source {
        kind: SourceKind::Person,
        reference: key.clone(),
        sha256: Some(answer.clone()),
    }));
    out
}

/// Whether nothing is at `rel` beneath `root` (a missing name on the way
/// or at the end); any other failure to look counts as present.
pub fn absent(root: &OpenDir, rel: &str) -> bool {
    matches!(
        crate::opendir::kind_beneath(root, rel, false),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound
    )
}

/// Hex SHA-256 of the regular file `rel` beneath `root`, if it is one, is
/// at most [`MAX_HASHED_FILE_BYTES`] long and can be read (or `indexes`
/// holds its index).
fn hash_file(root: &OpenDir, rel: &str, indexes: Option<&IndexCache>) -> Option<String> {
    if rel == "." || rel.is_empty() {
        return None;
    }
    let (file, size) = root.open_file_beneath(rel).ok()?;
    if size > MAX_HASHED_FILE_BYTES {
        return None;
    }
    if let Some(index) = indexes.and_then(|c| c.peek(&file)) {
        return Some(index.sha256.clone());
    }
    let mut hasher = Sha256::new();
    let mut buf = [0u8; 16 * 1024];
    let mut reader = file.take(MAX_HASHED_FILE_BYTES + 1);
    let mut seen = 0u64;
    loop {
        match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                seen += n as u64;
                hasher.update(&buf[..n]);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return None,
        }
    }
    // It grew past the bound while being read: no hash rather than a hash
    // of a part.
    (seen <= MAX_HASHED_FILE_BYTES).then(|| hex::encode(hasher.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_hashed_when_small_and_regular() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "hello\n").unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(
            dir.path().join("big"),
            vec![b'x'; MAX_HASHED_FILE_BYTES as usize + 1],
        )
        .unwrap();
        std::os::unix::fs::symlink("a.txt", dir.path().join("link")).unwrap();
        let root = OpenDir::open(dir.path()).unwrap();
        let mut inputs = Inputs {
            root: Some(root),
            ..Inputs::default()
        };
        for f in ["a.txt", "sub", "big", "link", "gone", "a.txt"] {
            inputs.add_file(f);
        }
        let s = sources(
            &inputs,
            &["http://127.0.0.1:9/x?q=1".to_string()],
            &["cargo".to_string()],
            &[("confirm".to_string(), "ab".repeat(32))],
            None,
        );
        let by = |r: &str| s.iter().find(|x| x.reference == r).unwrap();
        assert_eq!(s.len(), 8, "{s:?}");
        let person = by("confirm");
        assert_eq!(person.kind, SourceKind::Person);
        assert_eq!(person.sha256.as_deref(), Some("ab".repeat(32).as_str()));
        assert_eq!(
            by("a.txt").sha256.as_deref(),
            Some("5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03")
        );
        for r in ["sub", "big", "link", "gone"] {
            assert_eq!(by(r).sha256, None, "{r}");
            assert_eq!(by(r).kind, SourceKind::File);
        }
        let net = by("http://127.0.0.1:9/x?q=1");
        assert_eq!((net.kind, &net.sha256), (SourceKind::Network, &None));
        let program = by("cargo");
        assert_eq!(
            (program.kind, &program.sha256),
            (SourceKind::Process, &None)
        );
        assert_eq!(s[s.len() - 2].reference, "cargo");
        assert_eq!(s.last().unwrap().reference, "confirm");
        assert!(sources(&Inputs::default(), &[], &[], &[], None).is_empty());
    }

    #[test]
    fn an_indexed_file_takes_its_hash_from_the_index_while_it_is_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.txt");
        std::fs::write(&path, "hello\n").unwrap();
        let inputs = Inputs {
            root: Some(OpenDir::open(dir.path()).unwrap()),
            files: vec!["a.txt".into()],
        };
        let cache = IndexCache::new();
        // An index that says otherwise than the file: only the cache can
        // be where the hash then comes from.
        let planted = "f".repeat(64);
        cache.remember(
            &std::fs::File::open(&path).unwrap(),
            crate::file_index::FileIndex {
                sha256: planted.clone(),
                ..crate::file_index::index_bytes(b"hello\n", 0)
            },
        );
        let hash = |cache| sources(&inputs, &[], &[], &[], cache)[0].sha256.clone();
        assert_eq!(hash(Some(&cache)), Some(planted));
        assert_eq!(
            hash(None).as_deref(),
            Some("5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03")
        );
        // Any write changes the key: the file is read and hashed again.
        std::fs::write(&path, "hello\n").unwrap();
        let later = std::time::SystemTime::now() + std::time::Duration::from_secs(1);
        std::fs::File::open(&path)
            .unwrap()
            .set_modified(later)
            .unwrap();
        assert_eq!(
            hash(Some(&cache)).as_deref(),
            Some("5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03")
        );
    }
}
