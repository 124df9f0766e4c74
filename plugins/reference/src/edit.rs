//! `file_edit`: exact string replacement in a text file, written atomically.

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use toolhost_sdk::{Context, SideEffect, Tool, ToolError};

use crate::text::{
    file_error, normalize_rel, read_text_file, sha256_hex, too_large, MAX_FILE_BYTES,
};

const DESCRIPTION: &str = "\
Replaces exact text in an existing UTF-8 file, atomically; nothing else changes.
Use it on text you have viewed: copy old_str exactly, with context enough to occur once. Not \
for creating or deleting files.
Reversible, not idempotent: pass expected_sha256 so a retry fails with conflict. Returns the \
new sha256 (under 1 KiB).
Errors: no_match, multiple_matches (add context), conflict (view again), not_text, \
file_too_large, not_found, is_directory, is_symlink, permission_denied.";

/// Arguments of `file_edit`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditArgs {
    /// Existing file, workspace-relative.
    #[schemars(length(min = 1, max = 1024), extend("x-toolhost-path" = "write"))]
    pub path: String,
    /// Exact text to replace.
    #[schemars(length(min = 1, max = 65536))]
    pub old_str: String,
    /// Replacement; empty deletes.
    #[schemars(length(max = 65536))]
    pub new_str: String,
    /// Replace every occurrence.
    #[serde(default)]
    pub allow_multiple: bool,
    /// SHA-256 the file must still have.
    #[schemars(length(min = 64, max = 64), pattern(r"^[0-9a-f]{64}$"))]
    pub expected_sha256: Option<String>,
}

/// What an edit did.
#[derive(Debug, Serialize, JsonSchema)]
pub struct EditOutput {
    /// Workspace-relative path.
    pub path: String,
    /// Occurrences replaced.
    pub replacements: u64,
    /// Hex SHA-256 before the edit.
    pub sha256_before: String,
    /// Hex SHA-256 after the edit: the new version.
    pub sha256_after: String,
}

/// The `file_edit` tool.
pub fn tool() -> Tool {
    Tool::new("file_edit", edit)
        .title("Edit file")
        .description(DESCRIPTION)
        .keywords(&[
            "edit",
            "fix",
            "replace",
            "change",
            "patch",
            "modify",
            "rename",
            "update",
            "rewrite",
            "refactor",
            "correct",
            "substitute",
        ])
        .examples(&[
            "fix the typo in the README",
            "replace the old function name with the new one in lib.rs",
            "rename the variable count to total",
            "change the default port in the config to 8080",
            "patch the off-by-one error in the loop",
            "update the version number in Cargo.toml",
            "comment out the failing assertion",
        ])
        .side_effect(SideEffect::Reversible)
        .reads_files()
        .writes_files()
        .error_codes(&[
            "not_found",
            "is_directory",
            "is_symlink",
            "no_match",
            "multiple_matches",
            "conflict",
            "not_text",
            "file_too_large",
            "permission_denied",
            "io_error",
        ])
        .timeout_ms(10_000)
        .max_output_bytes(4 * 1024)
}

fn edit(ctx: &Context, args: EditArgs) -> Result<EditOutput, ToolError> {
    let guest = ctx.guest_path(&args.path).map_err(|e| e.field("/path"))?;
    let rel = normalize_rel(&args.path);

    let link = fs::symlink_metadata(&guest).map_err(|e| file_error(&e, &rel))?;
    if link.file_type().is_symlink() {
        let target = fs::read_link(&guest)
            .map(|t| t.to_string_lossy().into_owned())
            .unwrap_or_default();
        return Err(ToolError::new(
            "is_symlink",
            format!("{rel} is a symbolic link; edit the file it points to instead"),
        )
        .field("/path")
        .correctable()
        .details(json!({ "target": target })));
    }

    let before = read_text_file(&guest, &rel)?;
    let sha256_before = sha256_hex(before.as_bytes());
    if let Some(expected) = &args.expected_sha256 {
        if *expected != sha256_before {
            return Err(ToolError::new(
                "conflict",
                format!(
                    "{rel} changed since it was read: its SHA-256 is {sha256_before}, not \
                     {expected}; view it again and redo the edit"
                ),
            )
            .field("/expected_sha256")
            .correctable()
            .details(json!({ "expected": expected, "actual": sha256_before })));
        }
    }

    let count = before.matches(args.old_str.as_str()).count();
    if count == 0 {
        return Err(ToolError::new(
            "no_match",
            format!("old_str does not occur in {rel}; view the file and copy the text exactly"),
        )
        .field("/old_str")
        .correctable());
    }
    if count > 1 && !args.allow_multiple {
        return Err(ToolError::new(
            "multiple_matches",
            format!(
                "old_str occurs {count} times in {rel}; add surrounding text to make it \
                 unique, or set allow_multiple"
            ),
        )
        .field("/old_str")
        .correctable()
        .details(json!({ "count": count })));
    }

    let after = before.replace(args.old_str.as_str(), &args.new_str);
    if after.len() as u64 > MAX_FILE_BYTES {
        return Err(too_large(&rel, after.len() as u64));
    }
    if after != before {
        write_atomic(&guest, after.as_bytes(), ctx.call_id()).map_err(|e| file_error(&e, &rel))?;
    }
    Ok(EditOutput {
        path: rel,
        replacements: count as u64,
        sha256_before,
        sha256_after: sha256_hex(after.as_bytes()),
    })
}

/// Replaces the file at `target` with `content`: writes a temporary file in
/// the same directory, then renames it over `target`. The temporary file is
/// removed on every failure, so `target` is either untouched or complete.
fn write_atomic(target: &Path, content: &[u8], call_id: &str) -> io::Result<()> {
    let dir = target.parent().unwrap_or(Path::new("."));
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tag: String = call_id
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
        .take(32)
        .collect();
    for attempt in 0..100u32 {
        let path = dir.join(format!(
            ".{}.{tag}.{attempt}.toolhost-tmp",
            truncate_chars(&name, 100)
        ));
        let mut file = match OpenOptions::new().write(true).create_new(true).open(&path) {
            Ok(file) => file,
            // Someone else's file: leave it alone and pick another name.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        };
        let temp = TempFile(Some(path));
        file.write_all(content)?;
        file.flush()?;
        match file.sync_all() {
            Err(e) if e.kind() != io::ErrorKind::Unsupported => return Err(e),
            _ => {}
        }
        drop(file);
        fs::rename(temp.path(), target)?;
        temp.keep();
        return Ok(());
    }
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        "could not create a temporary file next to the target",
    ))
}

/// A temporary file that is removed when dropped, unless kept.
struct TempFile(Option<PathBuf>);

impl TempFile {
    fn path(&self) -> &Path {
        self.0.as_deref().expect("temporary file already kept")
    }

    /// The file was renamed into place: nothing to clean up.
    fn keep(mut self) {
        self.0 = None;
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if let Some(path) = &self.0 {
            let _ = fs::remove_file(path);
        }
    }
}

fn truncate_chars(s: &str, max: usize) -> &str {
    s.char_indices().nth(max).map_or(s, |(cut, _)| &s[..cut])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::Workspace;

    fn args(path: &str, old: &str, new: &str) -> EditArgs {
        EditArgs {
            path: path.into(),
            old_str: old.into(),
            new_str: new.into(),
            allow_multiple: false,
            expected_sha256: None,
        }
    }

    #[test]
    fn replaces_once_and_keeps_bytes() {
        let ws = Workspace::new();
        ws.write("a.txt", "alpha\r\nbeta\r\ngamma");
        let out = edit(&ws.ctx(), args("a.txt", "beta", "BETA")).unwrap();
        assert_eq!(out.replacements, 1);
        assert_eq!(ws.read("a.txt"), "alpha\r\nBETA\r\ngamma");
        assert_eq!(out.sha256_before, sha256_hex(b"alpha\r\nbeta\r\ngamma"));
        assert_eq!(out.sha256_after, sha256_hex(b"alpha\r\nBETA\r\ngamma"));
        assert_eq!(ws.entries(), ["a.txt"], "no temporary file left");
    }

    #[test]
    fn multiple_matches_and_allow_multiple() {
        let ws = Workspace::new();
        ws.write("a.txt", "x x x");
        let err = edit(&ws.ctx(), args("a.txt", "x", "y")).unwrap_err();
        assert_eq!(err.code, "multiple_matches");
        assert_eq!(err.details.unwrap()["count"], 3);
        assert_eq!(ws.read("a.txt"), "x x x");
        let mut all = args("a.txt", "x", "yy");
        all.allow_multiple = true;
        assert_eq!(edit(&ws.ctx(), all).unwrap().replacements, 3);
        assert_eq!(ws.read("a.txt"), "yy yy yy");
    }

    #[test]
    fn conflict_writes_nothing() {
        let ws = Workspace::new();
        ws.write("a.txt", "v1");
        let mut stale = args("a.txt", "v1", "v2");
        stale.expected_sha256 = Some("0".repeat(64));
        let err = edit(&ws.ctx(), stale).unwrap_err();
        assert_eq!(err.code, "conflict");
        assert_eq!(err.details.unwrap()["actual"], sha256_hex(b"v1"));
        assert_eq!(ws.read("a.txt"), "v1");
        let mut fresh = args("a.txt", "v1", "v2");
        fresh.expected_sha256 = Some(sha256_hex(b"v1"));
        edit(&ws.ctx(), fresh).unwrap();
        assert_eq!(ws.read("a.txt"), "v2");
    }

    #[test]
    fn errors() {
        let ws = Workspace::new();
        ws.write("a.txt", "abc");
        ws.write("bin", "a\0b");
        ws.mkdir("dir");
        let code = |p: &str, old: &str| edit(&ws.ctx(), args(p, old, "z")).unwrap_err().code;
        assert_eq!(code("a.txt", "nope"), "no_match");
        assert_eq!(code("missing", "a"), "not_found");
        assert_eq!(code("dir", "a"), "is_directory");
        assert_eq!(code("bin", "a"), "not_text");
        assert_eq!(code("../a.txt", "a"), "invalid_path");
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink("a.txt", ws.root().join("link")).unwrap();
            assert_eq!(code("link", "a"), "is_symlink");
        }
        let mut grow = args("a.txt", "b", &"w".repeat(65536));
        grow.allow_multiple = true;
        ws.write("many", &"b".repeat(100));
        grow.path = "many".into();
        assert_eq!(edit(&ws.ctx(), grow).unwrap_err().code, "file_too_large");
        assert_eq!(ws.read("many"), "b".repeat(100));
    }

    #[test]
    fn failed_write_leaves_no_temp_file() {
        let ws = Workspace::new();
        ws.write("a.txt", "abc");
        // Renaming a file over a non-empty directory fails after the
        // temporary file was written.
        ws.mkdir("d");
        ws.write("d/x", "");
        let err = write_atomic(&ws.root().join("d"), b"new", "call-1").unwrap_err();
        assert_ne!(err.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(ws.entries(), ["a.txt", "d"]);
    }
}
