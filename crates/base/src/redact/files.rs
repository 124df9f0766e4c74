//! The key blocks of the files a call reads: what a window into a file
//! may show of a private key that holds neither its BEGIN nor its END
//! line.
//!
//! A page of a file read from the middle of a key's body is a run of
//! base64 lines; nothing in it says it is a key. The host knows which files
//! a call may read (its path arguments, `provenance::Inputs`), so
//! it reads each of them itself (beneath the workspace root, following no
//! link, at most [`MAX_SCANNED_BYTES`]) and collects the body lines of the
//! key blocks they hold ([`KeyLines`]); any output string, and the
//! model-facing text, that holds one of those lines has it replaced by the
//! `private_key` marker. What a file holds is cached by its identity and
//! version ([`FileKey`]: device, inode, size, mtime, ctime), so paging
//! through a file reads it once; a file changed within its racy window is
//! read afresh (see [`crate::file_index`]).
//!
//! The file is read when the call has ended: a file rewritten while the
//! call ran is judged by what it holds afterwards. A directory argument
//! (a search under `.`) is not walked here; a search tool reads files
//! redacted through the `files` import instead (`text`).

use std::collections::HashMap;
use std::io::Read;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::SystemTime;

use serde_json::Value;

use super::{marker, record, KeyLines, Redaction, SecretMatch, SecretRule};
use crate::file_index::FileKey;
use crate::json::push_pointer_token;
use crate::opendir::OpenDir;

/// The largest file scanned for key blocks: 4 MiB, the reference tools'
/// own limit for a text file.
pub const MAX_SCANNED_BYTES: u64 = 4 * 1024 * 1024;

/// Most files whose answer is cached.
const MAX_CACHED: usize = 1024;

/// What a file holds, by version.
type Cache = Mutex<HashMap<FileKey, Option<Arc<KeyLines>>>>;

static CACHE: LazyLock<Cache> = LazyLock::new(|| Mutex::new(HashMap::new()));

/// The key body lines of the regular file `rel` beneath `root`; `None`
/// when it holds no key block, is no regular file, is too large or cannot
/// be read.
pub fn key_lines_of(root: &OpenDir, rel: &str) -> Option<Arc<KeyLines>> {
    if rel == "." || rel.is_empty() {
        return None;
    }
    let (file, size) = root.open_file_beneath(rel).ok()?;
    if size > MAX_SCANNED_BYTES {
        return None;
    }
    let key = FileKey::of(&file).ok()?;
    let cache = || {
        CACHE
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    };
    if let Some(known) = cache().get(&key) {
        return known.clone();
    }
    let mut bytes = Vec::with_capacity(size as usize);
    file.take(MAX_SCANNED_BYTES + 1)
        .read_to_end(&mut bytes)
        .ok()?;
    if bytes.len() as u64 > MAX_SCANNED_BYTES {
        return None;
    }
    let text = String::from_utf8_lossy(&bytes);
    let found = if memchr::memmem::find(&bytes, b"PRIVATE KEY").is_some() {
        KeyLines::of(&text).map(Arc::new)
    } else {
        None
    };
    if !key.is_racy(SystemTime::now()) {
        let mut cache = cache();
        if cache.len() >= MAX_CACHED {
            cache.clear();
        }
        cache.insert(key, found.clone());
    }
    found
}

/// The key body lines of each of `files` beneath `root` that holds any.
pub fn key_lines(root: &OpenDir, files: &[String]) -> Vec<Arc<KeyLines>> {
    files
        .iter()
        .filter_map(|rel| key_lines_of(root, rel))
        .collect()
}

/// Replaces every known key body line in `text`; `None` when it holds none.
pub fn hide_in_text(known: &[Arc<KeyLines>], text: &str) -> Option<(String, usize)> {
    let mut spans: Vec<(usize, usize)> = known.iter().flat_map(|k| k.find(text)).collect();
    if spans.is_empty() {
        return None;
    }
    spans.sort_unstable();
    let mut out = String::with_capacity(text.len());
    let (mut at, mut count) = (0, 0);
    for (start, end) in spans {
        if start < at {
            continue;
        }
        out.push_str(&text[at..start]);
        out.push_str(&marker(SecretRule::PrivateKey));
        at = end;
        count += 1;
    }
    out.push_str(&text[at..]);
    Some((out, count))
}

/// Replaces every known key body line in the strings of `value`; returns
/// what was hidden where (JSON Pointers).
pub fn hide_in_json(known: &[Arc<KeyLines>], value: &mut Value) -> Vec<Redaction> {
    let mut report = Vec::new();
    if !known.is_empty() {
        walk(known, value, &mut String::new(), &mut report);
    }
    report
}

fn walk(
    known: &[Arc<KeyLines>],
    value: &mut Value,
    pointer: &mut String,
    report: &mut Vec<Redaction>,
) {
    match value {
        Value::String(s) => {
            if let Some((clean, count)) = hide_in_text(known, s) {
                *s = clean;
                let m = SecretMatch {
                    rule: SecretRule::PrivateKey,
                    start: 0,
                    end: 0,
                };
                record(report, &vec![m; count], pointer);
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                let len = pointer.len();
                pointer.push('/');
                pointer.push_str(&i.to_string());
                walk(known, item, pointer, report);
                pointer.truncate(len);
            }
        }
        Value::Object(members) => {
            for (k, item) in members.iter_mut() {
                let len = pointer.len();
                push_pointer_token(pointer, k);
                walk(known, item, pointer, report);
                pointer.truncate(len);
            }
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_in_the_middle_of_a_key_is_hidden_and_the_file_is_read_once_per_version() {
        let dir = tempfile::tempdir().unwrap();
        let body: Vec<String> = (0..5u8)
            .map(|i| {
                (0..64)
                    .map(|j| (b'A' + (i * 7 + j * 3) % 26) as char)
                    .collect()
            })
            .collect();
        let file = format!(
            "x = 1\n-----{} OPENSSH PRIVATE KEY-----\n{}\n-----{} OPENSSH PRIVATE KEY-----\n",
            "BEGIN",
            body.join("\n"),
            "END"
        );
        std::fs::write(dir.path().join("id"), &file).unwrap();
        std::fs::write(dir.path().join("plain"), "no key\n").unwrap();
        let root = OpenDir::open(dir.path()).unwrap();
        let files = ["id".to_string(), "plain".to_string(), "gone".to_string()];
        let known = key_lines(&root, &files);
        assert_eq!(known.len(), 1);
        let mut page = serde_json::json!({"lines": [body[1], body[2], "ok"], "n": 2});
        let report = hide_in_json(&known, &mut page);
        assert_eq!(page["lines"][0], "[REDACTED:private_key]");
        assert_eq!(page["lines"][2], "ok");
        assert_eq!(report.len(), 2, "{report:?}");
        let text = format!("  3\t{}\n  4\t{}\n  5\tok\n", body[1], body[2]);
        let (clean, n) = hide_in_text(&known, &text).unwrap();
        assert_eq!(n, 2);
        assert_eq!(
            clean,
            "  3\t[REDACTED:private_key]\n  4\t[REDACTED:private_key]\n  5\tok\n"
        );
        assert!(hide_in_text(&known, "nothing").is_none());
    }
}
