//! `file_delete`: removes one regular file; irreversible, with a dry-run
//! plan and a probe.

use std::fs::{self, File};
use std::io::{self, Read};
use std::path::Path;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use sha2::{Digest, Sha256};
use toolhost_sdk::{Change, Context, Plan, Probe, SideEffect, Tool, ToolError};

use crate::text::{file_error, normalize_rel};

/// Size above which the plan warns that the file is large: 1 MiB.
const LARGE_FILE_BYTES: u64 = 1024 * 1024;

const DESCRIPTION: &str = "\
Deletes one regular file in the workspace. IRREVERSIBLE: it cannot be restored.
Use it to remove a file no longer needed, after viewing it. Not for changing a file \
(file_edit), directories or symbolic links.
Irreversible: runs only with an approved plan from its dry-run, which warns about non-empty or \
large files. Pass expected_sha256 so a changed file is kept. A repeat fails with not_found. \
Result under 1 KiB.
Errors: not_found, is_directory, is_symlink, conflict, permission_denied, io_error, invalid_path.";

/// Arguments of `file_delete`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeleteArgs {
    /// Regular file, workspace-relative.
    #[schemars(length(min = 1, max = 1024), extend("x-toolhost-path" = "write"))]
    pub path: String,
    /// SHA-256 the file must still have.
    #[schemars(length(min = 64, max = 64), pattern(r"^[0-9a-f]{64}$"))]
    pub expected_sha256: Option<String>,
}

/// What a delete did.
#[derive(Debug, PartialEq, Eq, Serialize, JsonSchema)]
pub struct DeleteOutput {
    /// Workspace-relative path.
    pub path: String,
    /// Always true.
    #[schemars(extend("const" = true))]
    pub deleted: bool,
    /// Hex SHA-256 of the deleted file; null when a probe found it gone.
    pub sha256_before: Option<String>,
    /// Size in bytes; null when a probe found the file gone.
    pub bytes: Option<u64>,
}

/// The `file_delete` tool.
pub fn tool() -> Tool {
    Tool::new("file_delete", delete)
        .title("Delete file")
        .description(DESCRIPTION)
        .keywords(&[
            "delete",
            "remove",
            "clean up",
            "erase",
            "discard",
            "get rid of",
            "purge",
            "unlink",
            "trash",
        ])
        .examples(&[
            "delete the temporary file left by the build",
            "remove the old backup of the config",
            "clean up the stale lock file",
            "get rid of the unused module file",
            "erase the generated output file",
        ])
        .side_effect(SideEffect::Irreversible)
        .reads_files()
        .writes_files()
        .error_codes(&[
            "not_found",
            "is_directory",
            "is_symlink",
            "conflict",
            "permission_denied",
            "io_error",
        ])
        .timeout_ms(10_000)
        .max_output_bytes(1024)
        .dry_run(plan)
        .probe(probe)
}

/// The file a delete would remove, checked as the call checks it.
struct Target {
    rel: String,
    guest: std::path::PathBuf,
    sha256: String,
    bytes: u64,
    lines: u64,
}

/// Resolves and checks the target: a regular file, not a link, with the
/// expected SHA-256 if one was given.
fn check(ctx: &Context, args: &DeleteArgs) -> Result<Target, ToolError> {
    let guest = ctx.guest_path(&args.path).map_err(|e| e.field("/path"))?;
    let rel = normalize_rel(&args.path);

    let meta = fs::symlink_metadata(&guest).map_err(|e| file_error(&e, &rel))?;
    let file_type = meta.file_type();
    if file_type.is_symlink() {
        let target = fs::read_link(&guest)
            .map(|t| t.to_string_lossy().into_owned())
            .unwrap_or_default();
        return Err(ToolError::new(
            "is_symlink",
            format!("{rel} is a symbolic link; file_delete removes regular files only"),
        )
        .field("/path")
        .correctable()
        .details(json!({ "target": target })));
    }
    if file_type.is_dir() {
        return Err(ToolError::new(
            "is_directory",
            format!("{rel} is a directory; file_delete removes regular files only"),
        )
        .field("/path")
        .correctable());
    }
    if !file_type.is_file() {
        return Err(ToolError::new(
            "io_error",
            format!("{rel} is not a regular file; file_delete removes regular files only"),
        )
        .field("/path"));
    }

    let (sha256, bytes, lines) = digest(&guest).map_err(|e| file_error(&e, &rel))?;
    if let Some(expected) = &args.expected_sha256 {
        if *expected != sha256 {
            return Err(ToolError::new(
                "conflict",
                format!(
                    "{rel} changed since it was read: its SHA-256 is {sha256}, not {expected}; \
                     view it again before deleting it"
                ),
            )
            .field("/expected_sha256")
            .correctable()
            .details(json!({ "expected": expected, "actual": sha256 })));
        }
    }
    Ok(Target {
        rel,
        guest,
        sha256,
        bytes,
        lines,
    })
}

/// SHA-256 (lowercase hex), size and line count of a file, read in chunks.
/// Lines are counted as `str::lines` would: a final line without a newline
/// counts.
fn digest(path: &Path) -> io::Result<(String, u64, u64)> {
    let mut file = File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    let (mut bytes, mut newlines, mut last) = (0u64, 0u64, b'\n');
    loop {
        let n = match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let chunk = &buf[..n];
        hasher.update(chunk);
        bytes += n as u64;
        newlines += chunk.iter().filter(|&&b| b == b'\n').count() as u64;
        last = chunk[n - 1];
    }
    let lines = newlines + u64::from(last != b'\n');
    let hex = hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    Ok((hex, bytes, lines))
}

fn delete(ctx: &Context, args: DeleteArgs) -> Result<DeleteOutput, ToolError> {
    let target = check(ctx, &args)?;
    fs::remove_file(&target.guest).map_err(|e| file_error(&e, &target.rel))?;
    Ok(DeleteOutput {
        path: target.rel,
        deleted: true,
        sha256_before: Some(target.sha256),
        bytes: Some(target.bytes),
    })
}

/// The dry-run: every check of the call, then the plan instead of the
/// deletion.
fn plan(ctx: &Context, args: DeleteArgs) -> Result<Plan, ToolError> {
    let target = check(ctx, &args)?;
    let mut plan = Plan::new(format!(
        "delete {} ({} lines, {} bytes); this cannot be undone",
        target.rel, target.lines, target.bytes
    ))
    .change(Change::delete(&target.rel, target.lines, target.bytes).sha256_before(&target.sha256));
    if target.bytes > 0 {
        plan = plan.warning(format!("file is not empty ({} bytes)", target.bytes));
    }
    if target.bytes > LARGE_FILE_BYTES {
        plan = plan.warning("file is larger than 1 MiB");
    }
    Ok(plan)
}

/// The probe: the call took effect if and only if the file is gone.
fn probe(ctx: &Context, args: DeleteArgs, _key: &str) -> Result<Probe<DeleteOutput>, ToolError> {
    let guest = ctx.guest_path(&args.path).map_err(|e| e.field("/path"))?;
    let rel = normalize_rel(&args.path);
    match fs::symlink_metadata(&guest) {
        Ok(_) => Ok(Probe::NotDone),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Probe::Done(DeleteOutput {
            path: rel,
            deleted: true,
            sha256_before: None,
            bytes: None,
        })),
        Err(e) => Err(file_error(&e, &rel)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::Workspace;
    use crate::text::sha256_hex;
    use toolhost_sdk::ChangeAction;

    fn args(path: &str) -> DeleteArgs {
        DeleteArgs {
            path: path.into(),
            expected_sha256: None,
        }
    }

    #[test]
    fn deletes_one_file() {
        let ws = Workspace::new();
        ws.write("a.txt", "one\ntwo");
        ws.write("b.txt", "keep");
        let out = delete(&ws.ctx(), args("./a.txt")).unwrap();
        assert_eq!(
            out,
            DeleteOutput {
                path: "a.txt".into(),
                deleted: true,
                sha256_before: Some(sha256_hex(b"one\ntwo")),
                bytes: Some(7),
            }
        );
        assert_eq!(ws.entries(), ["b.txt"]);
        assert_eq!(
            delete(&ws.ctx(), args("a.txt")).unwrap_err().code,
            "not_found"
        );
    }

    #[test]
    fn plan_deletes_nothing() {
        let ws = Workspace::new();
        ws.write("a.txt", "one\ntwo\n");
        let plan = plan(&ws.ctx(), args("a.txt")).unwrap();
        assert_eq!(ws.read("a.txt"), "one\ntwo\n");
        assert_eq!(plan.changes.len(), 1);
        let change = &plan.changes[0];
        assert_eq!(change.action, ChangeAction::Delete);
        assert_eq!((change.lines_removed, change.bytes_before), (2, 8));
        assert_eq!(
            change.sha256_before.as_deref(),
            Some(sha256_hex(b"one\ntwo\n").as_str())
        );
        assert_eq!((plan.counts.files, plan.counts.deleted), (1, 1));
        assert_eq!(plan.warnings, ["file is not empty (8 bytes)"]);

        ws.write("empty", "");
        let empty = super::plan(&ws.ctx(), args("empty")).unwrap();
        assert!(empty.warnings.is_empty());
        assert_eq!(empty.changes[0].lines_removed, 0);

        ws.write_bytes("big", &vec![b'x'; LARGE_FILE_BYTES as usize + 1]);
        let big = super::plan(&ws.ctx(), args("big")).unwrap();
        assert_eq!(big.warnings.len(), 2);
        assert_eq!(big.warnings[1], "file is larger than 1 MiB");
        assert_eq!(big.changes[0].lines_removed, 1);
    }

    #[test]
    fn conflict_deletes_nothing() {
        let ws = Workspace::new();
        ws.write("a.txt", "v1");
        let mut stale = args("a.txt");
        stale.expected_sha256 = Some("0".repeat(64));
        let err = delete(&ws.ctx(), stale).unwrap_err();
        assert_eq!(err.code, "conflict");
        assert_eq!(err.details.unwrap()["actual"], sha256_hex(b"v1"));
        let mut stale = args("a.txt");
        stale.expected_sha256 = Some("0".repeat(64));
        assert_eq!(plan(&ws.ctx(), stale).unwrap_err().code, "conflict");
        assert_eq!(ws.read("a.txt"), "v1");
        let mut fresh = args("a.txt");
        fresh.expected_sha256 = Some(sha256_hex(b"v1"));
        delete(&ws.ctx(), fresh).unwrap();
        assert!(ws.entries().is_empty());
    }

    #[test]
    fn refuses_directories_and_links() {
        let ws = Workspace::new();
        ws.mkdir("dir");
        ws.write("a.txt", "x");
        let code = |p: &str| delete(&ws.ctx(), args(p)).unwrap_err().code;
        assert_eq!(code("dir"), "is_directory");
        assert_eq!(code("missing"), "not_found");
        assert_eq!(code("../a.txt"), "invalid_path");
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink("a.txt", ws.root().join("link")).unwrap();
            assert_eq!(code("link"), "is_symlink");
            assert_eq!(ws.entries(), ["a.txt", "dir", "link"]);
        }
        assert_eq!(ws.read("a.txt"), "x");
    }

    #[test]
    fn probe_reports_done_when_the_file_is_gone() {
        let ws = Workspace::new();
        ws.write("a.txt", "x");
        assert_eq!(
            probe(&ws.ctx(), args("a.txt"), "k").unwrap(),
            Probe::NotDone
        );
        fs::remove_file(ws.root().join("a.txt")).unwrap();
        assert_eq!(
            probe(&ws.ctx(), args("a.txt"), "k").unwrap(),
            Probe::Done(DeleteOutput {
                path: "a.txt".into(),
                deleted: true,
                sha256_before: None,
                bytes: None,
            })
        );
    }

    #[test]
    fn output_schema_allows_what_the_probe_returns() {
        let schema = tool().output_schema();
        assert_eq!(schema["properties"]["deleted"]["const"], true);
        assert_eq!(
            schema["properties"]["sha256_before"]["type"],
            json!(["string", "null"])
        );
        assert_eq!(
            schema["properties"]["bytes"]["type"],
            json!(["integer", "null"])
        );
    }
}
