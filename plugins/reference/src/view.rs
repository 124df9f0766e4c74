//! `file_view`: numbered lines of a text file, one page at a time.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use toolhost_sdk::{Context, SideEffect, Tool, ToolError};

use crate::text::{clip_line, json_str_len, normalize_rel, read_text_file, sha256_hex};

/// Longest line returned unclipped, in characters.
const MAX_LINE_CHARS: usize = 2000;
/// Line text (as escaped JSON) after which a page stops early.
const PAGE_TEXT_BUDGET_BYTES: usize = 192 * 1024;

const DESCRIPTION: &str = "\
Reads part of a UTF-8 text file in the workspace and returns numbered lines plus the SHA-256 of \
the whole file (its version, to pass to file_edit as expected_sha256).
When to use: to look at code or text before editing it, or to page through a long file. \
When not to: to search for text (use grep_search), to list a directory, or for binary files.
Inputs: path = workspace-relative file path (1-1024 chars; absolute paths and '..' are refused); \
offset = first line to return, 1-based (1-10000000, default 1); \
limit = most lines to return (1-500, default 200).
Output: {path, offset, lines: [{number, text}], total_lines, has_more, sha256}. Lines are split \
at '\\n' and a '\\r' before it is removed. A line longer than 2000 characters is cut after 2000 \
characters and ends with the marker ' [...clipped, line has N chars]'. A page also stops early \
once its text reaches about 192 KiB; has_more is then true and the next page starts at the last \
returned number + 1. An offset past the end is not an error: lines is empty and total_lines \
gives the length. The output is at most about 256 KiB.
Errors: not_found (no such file), is_directory (path is a directory), not_text (the file \
contains a NUL byte or is not valid UTF-8), file_too_large (over 4 MiB = 4194304 bytes; details \
give size_bytes and max_bytes), permission_denied, io_error, invalid_path, invalid_arguments.
Side effect: none (read-only); safe to retry and to run in parallel.";

/// Arguments of `file_view`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ViewArgs {
    /// File to read, relative to the workspace root (e.g. `src/main.rs`).
    #[schemars(length(min = 1, max = 1024), extend("x-toolhost-path" = "read"))]
    pub path: String,
    /// First line to return, 1-based.
    #[serde(default = "default_offset")]
    #[schemars(range(min = 1, max = 10_000_000))]
    pub offset: u32,
    /// Most lines to return.
    #[serde(default = "default_limit")]
    #[schemars(range(min = 1, max = 500))]
    pub limit: u32,
}

fn default_offset() -> u32 {
    1
}

fn default_limit() -> u32 {
    200
}

/// A page of a text file.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ViewOutput {
    /// The file, relative to the workspace root.
    pub path: String,
    /// Number of the first line asked for (1-based).
    pub offset: u64,
    /// The lines of this page, in order.
    pub lines: Vec<Line>,
    /// Number of lines in the whole file.
    pub total_lines: u64,
    /// True when lines after the last returned one exist.
    pub has_more: bool,
    /// Lowercase hex SHA-256 of the whole file: its version.
    pub sha256: String,
}

/// One numbered line.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Line {
    /// Line number, 1-based.
    pub number: u64,
    /// The line without its line ending, clipped at 2000 characters.
    pub text: String,
}

/// The `file_view` tool.
pub fn tool() -> Tool {
    Tool::new("file_view", view)
        .title("View file")
        .description(DESCRIPTION)
        .side_effect(SideEffect::ReadOnly)
        .reads_files()
        .error_codes(&[
            "not_found",
            "is_directory",
            "not_text",
            "file_too_large",
            "permission_denied",
            "io_error",
        ])
        .timeout_ms(10_000)
        .max_output_bytes(256 * 1024)
}

fn view(ctx: &Context, args: ViewArgs) -> Result<ViewOutput, ToolError> {
    let guest = ctx.guest_path(&args.path).map_err(|e| e.field("/path"))?;
    let rel = normalize_rel(&args.path);
    let text = read_text_file(&guest, &rel)?;
    let sha256 = sha256_hex(text.as_bytes());

    let offset = u64::from(args.offset.max(1));
    let mut lines = Vec::new();
    let mut budget = PAGE_TEXT_BUDGET_BYTES;
    let mut total_lines = 0u64;
    let mut stopped_early = false;
    for (number, line) in (1u64..).zip(text.lines()) {
        total_lines = number;
        if number < offset || stopped_early || lines.len() >= args.limit as usize {
            continue;
        }
        let clipped = clip_line(line, MAX_LINE_CHARS);
        let cost = json_str_len(&clipped);
        if !lines.is_empty() && cost > budget {
            stopped_early = true;
            continue;
        }
        budget = budget.saturating_sub(cost);
        lines.push(Line {
            number,
            text: clipped.into_owned(),
        });
    }
    let last = lines.last().map_or(offset.saturating_sub(1), |l| l.number);
    Ok(ViewOutput {
        path: rel,
        offset,
        has_more: last < total_lines,
        lines,
        total_lines,
        sha256,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::Workspace;

    fn args(path: &str, offset: u32, limit: u32) -> ViewArgs {
        ViewArgs {
            path: path.into(),
            offset,
            limit,
        }
    }

    #[test]
    fn pages_through_a_file() {
        let ws = Workspace::new();
        ws.write("a.txt", "one\r\ntwo\nthree");
        let out = view(&ws.ctx(), args("./a.txt", 2, 1)).unwrap();
        assert_eq!(out.path, "a.txt");
        assert_eq!(out.lines.len(), 1);
        assert_eq!(
            (out.lines[0].number, out.lines[0].text.as_str()),
            (2, "two")
        );
        assert_eq!(out.total_lines, 3);
        assert!(out.has_more);
        assert_eq!(out.sha256, sha256_hex(b"one\r\ntwo\nthree"));

        let out = view(&ws.ctx(), args("a.txt", 1, 500)).unwrap();
        assert_eq!(out.lines[0].text, "one");
        assert_eq!(out.lines.len(), 3);
        assert!(!out.has_more);
    }

    #[test]
    fn past_the_end_is_empty_success() {
        let ws = Workspace::new();
        ws.write("a.txt", "x\ny\n");
        let out = view(&ws.ctx(), args("a.txt", 10, 5)).unwrap();
        assert!(out.lines.is_empty());
        assert_eq!(out.total_lines, 2);
        assert!(!out.has_more);
    }

    #[test]
    fn defaults_apply_through_json() {
        let ws = Workspace::new();
        ws.write("a.txt", "x\n");
        let json = tool().call_json(&ws.ctx(), r#"{"path":"a.txt"}"#).unwrap();
        let out: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(out["offset"], 1);
        assert_eq!(out["lines"][0]["text"], "x");
    }

    #[test]
    fn clips_long_lines_and_limits_page_size() {
        let ws = Workspace::new();
        let long = "x".repeat(5000);
        ws.write("long.txt", &format!("{long}\n").repeat(200));
        let out = view(&ws.ctx(), args("long.txt", 1, 500)).unwrap();
        assert!(out.lines[0]
            .text
            .ends_with("[...clipped, line has 5000 chars]"));
        assert!(out.has_more);
        let json = serde_json::to_string(&out).unwrap();
        assert!(json.len() < 256 * 1024, "{}", json.len());
    }

    #[test]
    fn errors() {
        let ws = Workspace::new();
        ws.write("bin", "a\0b");
        ws.write_bytes("latin1", b"caf\xe9");
        ws.mkdir("dir");
        let code = |p: &str| view(&ws.ctx(), args(p, 1, 10)).unwrap_err().code;
        assert_eq!(code("missing.txt"), "not_found");
        assert_eq!(code("dir"), "is_directory");
        assert_eq!(code("bin"), "not_text");
        assert_eq!(code("latin1"), "not_text");
        assert_eq!(code("../x"), "invalid_path");
        assert_eq!(code("/etc/passwd"), "invalid_path");
        ws.write("big", &"y".repeat(4 * 1024 * 1024 + 1));
        let err = view(&ws.ctx(), args("big", 1, 10)).unwrap_err();
        assert_eq!(err.code, "file_too_large");
        assert_eq!(err.details.unwrap()["max_bytes"], 4 * 1024 * 1024);
    }
}
