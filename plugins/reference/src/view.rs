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
Shows numbered lines of one UTF-8 text file, a page at a time, with its SHA-256 (for \
file_edit's expected_sha256).
Use it to read code before editing, or to page through a long file (offset = next line while \
has_more). Not for searching (grep_search), directories or binary files.
Read-only. A page is at most 500 lines (each cut at 2000 characters) or about 192 KiB.
Errors: not_found, is_directory, not_text, file_too_large (over 4 MiB), permission_denied, \
io_error, invalid_path.";

/// Arguments of `file_view`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ViewArgs {
    /// Workspace-relative file, e.g. `src/main.rs`.
    #[schemars(length(min = 1, max = 1024), extend("x-toolhost-path" = "read"))]
    pub path: String,
    /// First line, 1-based.
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
    /// Workspace-relative path.
    pub path: String,
    /// First line asked for.
    pub offset: u64,
    /// This page's lines.
    pub lines: Vec<Line>,
    /// Lines in the whole file.
    pub total_lines: u64,
    /// More lines follow this page.
    pub has_more: bool,
    /// Hex SHA-256 of the whole file (its version).
    pub sha256: String,
}

// One numbered line.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Line {
    /// 1-based.
    pub number: u64,
    /// Without its line ending; clipped at 2000 characters.
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
        .text(render)
}

/// The model-facing text of a page: one header line (path, range, total
/// lines, has_more, sha256), then each line as `NUMBER<tab>TEXT`, numbers
/// right-aligned: about the size of the page's text itself.
pub fn render(out: &ViewOutput) -> String {
    use std::fmt::Write as _;
    let bytes: usize = out.lines.iter().map(|l| l.text.len() + 8).sum();
    let mut s = String::with_capacity(bytes + 160);
    match (out.lines.first(), out.lines.last()) {
        (Some(first), Some(last)) => {
            let _ = write!(
                s,
                "{} lines {}-{} of {}",
                out.path, first.number, last.number, out.total_lines
            );
        }
        _ => {
            let _ = write!(
                s,
                "{} no lines at offset {} (file has {} lines)",
                out.path, out.offset, out.total_lines
            );
        }
    }
    let _ = write!(s, ", has_more {}", out.has_more);
    if out.has_more {
        let next = out.lines.last().map_or(out.offset, |l| l.number + 1);
        let _ = write!(s, " (next offset {next})");
    }
    let _ = writeln!(s, ", sha256 {}", out.sha256);
    let width = out.lines.last().map_or(1, |l| l.number.to_string().len());
    for line in &out.lines {
        let _ = writeln!(s, "{:>width$}\t{}", line.number, line.text);
    }
    s
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
    fn text_is_a_header_then_numbered_lines() {
        let ws = Workspace::new();
        let body: String = (1..=12).map(|i| format!("line {i}\n")).collect();
        ws.write("a.txt", &body);
        let sha = sha256_hex(body.as_bytes());
        let out = view(&ws.ctx(), args("a.txt", 9, 3)).unwrap();
        assert_eq!(
            render(&out),
            format!(
                "a.txt lines 9-11 of 12, has_more true (next offset 12), sha256 {sha}\n \
                 9\tline 9\n10\tline 10\n11\tline 11\n"
            )
        );
        let out = view(&ws.ctx(), args("a.txt", 1, 500)).unwrap();
        let text = render(&out);
        assert!(text.starts_with(&format!(
            "a.txt lines 1-12 of 12, has_more false, sha256 {sha}\n"
        )));
        // About the size of the file: a header and a number per line.
        assert!(text.len() <= body.len() + 120 + 3 * 12, "{}", text.len());
        let out = view(&ws.ctx(), args("a.txt", 20, 5)).unwrap();
        assert_eq!(
            render(&out),
            format!(
                "a.txt no lines at offset 20 (file has 12 lines), has_more false, sha256 {sha}\n"
            )
        );
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
