//! `file_view`: numbered lines of a text file, one page at a time.

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Serialize, Serializer};
use toolhost_sdk::files::{self, FileBytes, FileIndex};
use toolhost_sdk::{Context, SideEffect, Tool, ToolError};

use crate::text::{
    clip_line, into_text, json_str_len, lines as split_lines, normalize_rel, read_text_file,
    sha256_hex, MAX_FILE_BYTES,
};

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

// A line's number is not spelled out per line: the lines are consecutive
// from `offset`. A 500-line page as `{"number", "text"}` objects took a
// client about three times as long to parse as the same page as strings.
/// A page of a text file.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ViewOutput {
    /// Workspace-relative path.
    pub path: String,
    /// First line asked for, 1-based: the number of `lines[0]`.
    pub offset: u64,
    /// `lines[i]` is line `offset + i`, without its line ending, clipped at 2000 characters.
    pub lines: Lines,
    /// Lines in the whole file.
    pub total_lines: u64,
    /// More lines follow this page.
    pub has_more: bool,
    /// Hex SHA-256 of the whole file (its version).
    pub sha256: String,
}

/// A page's lines, kept in one buffer (a page of short lines is not an
/// allocation and a copy per line). In the output, and in its schema, an
/// array of strings.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Lines {
    text: String,
    /// Where each line ends in `text`; each starts where the one before
    /// ends.
    ends: Vec<usize>,
}

impl Lines {
    fn with_capacity(bytes: usize) -> Lines {
        Lines {
            text: String::with_capacity(bytes),
            ends: Vec::new(),
        }
    }

    fn push(&mut self, line: &str) {
        self.text.push_str(line);
        self.ends.push(self.text.len());
    }

    /// How many lines.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The lines in order.
    pub fn iter(&self) -> impl Iterator<Item = &str> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts
            .zip(&self.ends)
            .map(|(start, &end)| &self.text[start..end])
    }

    /// The text of all lines, without line endings.
    fn bytes(&self) -> usize {
        self.text.len()
    }
}

impl<const N: usize> PartialEq<[&str; N]> for Lines {
    fn eq(&self, other: &[&str; N]) -> bool {
        self.len() == N && self.iter().eq(other.iter().copied())
    }
}

impl Serialize for Lines {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.iter())
    }
}

impl JsonSchema for Lines {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        <Vec<String>>::schema_name()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        <Vec<String>>::json_schema(generator)
    }
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
    let bytes = out.lines.bytes() + 8 * out.lines.len();
    let mut s = String::with_capacity(bytes + 160);
    // The line after the page; its last line is the one before.
    let next = out.offset + out.lines.len() as u64;
    if out.lines.is_empty() {
        let _ = write!(
            s,
            "{} no lines at offset {} (file has {} lines)",
            out.path, out.offset, out.total_lines
        );
    } else {
        let _ = write!(
            s,
            "{} lines {}-{} of {}",
            out.path,
            out.offset,
            next - 1,
            out.total_lines
        );
    }
    let _ = write!(s, ", has_more {}", out.has_more);
    if out.has_more {
        let _ = write!(s, " (next offset {next})");
    }
    let _ = writeln!(s, ", sha256 {}", out.sha256);
    // Numbers right-aligned to the widest, written without the formatting
    // machinery: this loop runs once per line of every page.
    let width = decimal(next.saturating_sub(1).max(1), &mut [0; 20]).len();
    let mut digits = [0u8; 20];
    for (number, line) in (out.offset..).zip(out.lines.iter()) {
        let number = decimal(number, &mut digits);
        s.extend(std::iter::repeat_n(' ', width.saturating_sub(number.len())));
        s.push_str(number);
        s.push('\t');
        s.push_str(line);
        s.push('\n');
    }
    s
}

/// `n` in decimal, written into the end of `buf`.
fn decimal(mut n: u64, buf: &mut [u8; 20]) -> &str {
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    // Only ASCII digits were written.
    std::str::from_utf8(&buf[at..]).unwrap_or("0")
}

fn view(ctx: &Context, args: ViewArgs) -> Result<ViewOutput, ToolError> {
    let guest = ctx.guest_path(&args.path).map_err(|e| e.field("/path"))?;
    let rel = normalize_rel(&args.path);
    let offset = u64::from(args.offset.max(1));

    // The host's index (hash, line count, line starts): read only the page.
    // Any refusal, a file that is not text, or one that changed since it
    // was indexed goes the whole-file way below, which gives every error
    // its usual code and message.
    let path = guest.to_string_lossy();
    if let Ok(ix) = files::index(&path, MAX_FILE_BYTES) {
        if ix.is_text && ix.size <= MAX_FILE_BYTES {
            let read = |start, len| files::read(&path, start, len).ok();
            if let Some(lines) = indexed_page(read, &ix, offset, args.limit) {
                return Ok(output(rel, offset, lines, ix.lines, ix.sha256));
            }
        }
    }

    let text = read_text_file(&guest, &rel)?;
    let sha256 = sha256_hex(text.as_bytes());
    let total_lines = split_lines(&text).count() as u64;
    let from = split_lines(&text).skip((offset - 1) as usize);
    let lines = page(from, args.limit, text.len());
    Ok(output(rel, offset, lines, total_lines, sha256))
}

fn output(path: String, offset: u64, lines: Lines, total_lines: u64, sha256: String) -> ViewOutput {
    let last = offset - 1 + lines.len() as u64;
    ViewOutput {
        path,
        offset,
        has_more: last < total_lines,
        lines,
        total_lines,
        sha256,
    }
}

/// The page from `from` (the lines from the first one asked for): at most `limit` lines, each clipped, stopping before the
/// line that would overrun the text budget. Takes no line past the page.
///
/// Escaping at most sextuples a line (a control character becomes
/// `\u00XX`), so while six times the page's text could not overrun the
/// budget, no line's escaped length is counted (a page of 500 lines of up
/// to ~60 bytes never is); from the line that could, the lines taken are
/// counted once and every later one as it comes: the page ends where
/// counting every line would have ended it.
///
/// `capacity`: bytes to make room for at once (the text the lines come
/// from; a page takes at most that much, clipping aside).
fn page<'a>(from: impl Iterator<Item = &'a str>, limit: u32, capacity: usize) -> Lines {
    let mut lines = Lines::with_capacity(capacity.min(PAGE_TEXT_BUDGET_BYTES));
    let mut budget = PAGE_TEXT_BUDGET_BYTES;
    // An upper bound of the escaped length of the lines taken, until one
    // more line could overrun the budget.
    let mut worst = Some(0usize);
    if limit == 0 {
        return lines;
    }
    for line in from {
        let text = clip_line(line, MAX_LINE_CHARS);
        if let Some(w) = worst {
            let bound = w + 6 * text.len() + 2;
            if bound <= PAGE_TEXT_BUDGET_BYTES {
                worst = Some(bound);
            } else {
                worst = None;
                let taken: usize = lines.iter().map(json_str_len).sum();
                budget = budget.saturating_sub(taken);
            }
        }
        if worst.is_none() {
            let cost = json_str_len(&text);
            if !lines.is_empty() && cost > budget {
                break;
            }
            budget = budget.saturating_sub(cost);
        }
        lines.push(&text);
        if lines.len() >= limit as usize {
            break;
        }
    }
    lines
}

/// The page at `offset` read from the file through its index `ix`: one
/// `read(start, len)` (the host's [`files::read`] in a component) from the
/// recorded start at or before the line to the recorded start after the
/// page's last line (at most one group of lines more than the page),
/// checked as UTF-8 and for NUL once, then split into lines. `None` when
/// the file no longer matches the index (its size or mtime differ, the
/// region ends early, is not UTF-8 or holds a NUL) or cannot be read: the
/// caller then reads it whole.
fn indexed_page(
    read: impl FnOnce(u64, u64) -> Option<FileBytes>,
    ix: &FileIndex,
    offset: u64,
    limit: u32,
) -> Option<Lines> {
    if offset > ix.lines {
        return Some(Lines::default());
    }
    let (start, skip) = ix.line_start(offset)?;
    // The group after the one holding the page's last possible line starts
    // where the read can stop (the file's end when there is none).
    let last = (offset + u64::from(limit.max(1)) - 1).min(ix.lines);
    let next_group = usize::try_from((last - 1) / u64::from(ix.stride.max(1)) + 1).ok()?;
    let end = ix.line_starts.get(next_group).copied().unwrap_or(ix.size);
    let len = end.checked_sub(start)?;
    let region = read(start, len)?;
    // Still the file that was indexed (same size, same mtime), and all of
    // the region there.
    if region.size != ix.size || region.mtime_ns != ix.mtime_ns || region.bytes.len() as u64 != len
    {
        return None;
    }
    let text = into_text(region.bytes).ok()?;
    let mut lines = split_lines(&text);
    for _ in 0..skip {
        lines.next()?;
    }
    let mut failed = false;
    let mut number = offset;
    let from = std::iter::from_fn(|| {
        if number > ix.lines {
            return None;
        }
        match lines.next() {
            Some(line) => {
                number += 1;
                Some(line)
            }
            None => {
                failed = true;
                None
            }
        }
    });
    let lines = page(from, limit, text.len());
    (!failed).then_some(lines)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::Workspace;
    use std::path::Path;
    use std::time::UNIX_EPOCH;

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
        assert_eq!(out.offset, 2);
        assert_eq!(out.lines, ["two"]);
        assert_eq!(out.total_lines, 3);
        assert!(out.has_more);
        assert_eq!(out.sha256, sha256_hex(b"one\r\ntwo\nthree"));

        let out = view(&ws.ctx(), args("a.txt", 1, 500)).unwrap();
        assert_eq!(out.lines, ["one", "two", "three"]);
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
        assert_eq!(out["lines"], serde_json::json!(["x"]));
    }

    #[test]
    fn clips_long_lines_and_limits_page_size() {
        let ws = Workspace::new();
        let long = "x".repeat(5000);
        ws.write("long.txt", &format!("{long}\n").repeat(200));
        let out = view(&ws.ctx(), args("long.txt", 1, 500)).unwrap();
        let first = out.lines.iter().next().unwrap();
        assert!(first.ends_with("[...clipped, line has 5000 chars]"));
        assert!(out.has_more);
        let json = serde_json::to_string(&out).unwrap();
        assert!(json.len() < 256 * 1024, "{}", json.len());
    }

    /// The index the host would give for `bytes` (its line starts every
    /// `stride` lines), with the file's current mtime.
    fn index_of(ws: &Workspace, rel: &str, stride: u32) -> FileIndex {
        let path = ws.ctx().guest_path(rel).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let mut line_starts = vec![0u64];
        let mut newlines = 0u64;
        for (at, &b) in bytes.iter().enumerate() {
            if b == b'\n' {
                newlines += 1;
                if newlines.is_multiple_of(u64::from(stride)) && at + 1 < bytes.len() {
                    line_starts.push(at as u64 + 1);
                }
            }
        }
        let text = String::from_utf8(bytes.clone()).unwrap();
        let mtime = std::fs::metadata(&path).unwrap().modified().unwrap();
        FileIndex {
            sha256: sha256_hex(&bytes),
            size: bytes.len() as u64,
            lines: text.lines().count() as u64,
            is_text: true,
            stride,
            line_starts,
            mtime_ns: mtime.duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64,
        }
    }

    /// What the host's `files::read` answers, read natively.
    fn native_read(path: &Path, start: u64, len: u64) -> Option<FileBytes> {
        let bytes = std::fs::read(path).ok()?;
        let meta = std::fs::metadata(path).ok()?;
        let from = (start as usize).min(bytes.len());
        let to = from.saturating_add(len as usize).min(bytes.len());
        Some(FileBytes {
            bytes: bytes[from..to].to_vec(),
            size: meta.len(),
            mtime_ns: meta
                .modified()
                .ok()?
                .duration_since(UNIX_EPOCH)
                .ok()?
                .as_nanos() as u64,
        })
    }

    #[test]
    fn indexed_pages_equal_whole_file_pages() {
        let ws = Workspace::new();
        let body: String = (1..=100)
            .map(|i| match i % 3 {
                0 => format!("crlf {i}\r\n"),
                1 => format!("{}\n", "é".repeat(i)),
                _ => "\n".to_string(),
            })
            .collect::<String>()
            + "last\r";
        ws.write("a.txt", &body);
        let path = ws.ctx().guest_path("a.txt").unwrap();
        let read = |start, len| native_read(&path, start, len);
        let ix = index_of(&ws, "a.txt", 8);
        let whole = view(&ws.ctx(), args("a.txt", 1, 500)).unwrap();
        assert_eq!(whole.total_lines, ix.lines);
        for offset in [1u64, 2, 8, 9, 10, 64, 100, 101, 102, 500] {
            for limit in [1u32, 3, 8, 500] {
                let got = indexed_page(read, &ix, offset, limit).unwrap();
                let want = view(&ws.ctx(), args("a.txt", offset as u32, limit)).unwrap();
                assert_eq!(got, want.lines, "{offset} {limit}");
            }
        }
        // Changed since indexed (same size, other mtime): not used.
        ws.write("a.txt", &body.replace("crlf", "CRLF"));
        let old = UNIX_EPOCH + std::time::Duration::from_nanos(ix.mtime_ns + 1_000_000_000);
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(old)
            .unwrap();
        assert!(indexed_page(read, &ix, 1, 10).is_none());
        // Shrunk: a line ends early.
        ws.write("a.txt", "x\n");
        assert!(indexed_page(read, &ix, 50, 10).is_none());
    }

    /// `page` as it was, counting every line's escaped length.
    fn page_counting_every_line(lines: &[String], limit: u32) -> usize {
        let (mut taken, mut budget) = (0, PAGE_TEXT_BUDGET_BYTES);
        for line in lines {
            let cost = json_str_len(&clip_line(line, MAX_LINE_CHARS));
            if taken > 0 && cost > budget {
                break;
            }
            budget = budget.saturating_sub(cost);
            taken += 1;
            if taken >= limit as usize {
                break;
            }
        }
        taken
    }

    #[test]
    fn a_page_ends_where_counting_every_line_ends_it() {
        let kinds = ["plain text ", "q\"\\", "\u{1}\t", "é"];
        for len in [0usize, 1, 60, 64, 65, 100, 400, 1999, 2000, 2001, 5000] {
            for (k, kind) in kinds.iter().enumerate() {
                let lines: Vec<String> = (0..600)
                    .map(|i| kind.repeat((len + i % 7) / kind.len() + usize::from(i % 5 == k)))
                    .collect();
                for limit in [1u32, 7, 500] {
                    let from = lines.iter().map(String::as_str);
                    let got = page(from, limit, 0);
                    assert_eq!(
                        got.len(),
                        page_counting_every_line(&lines, limit),
                        "len {len} kind {k} limit {limit}"
                    );
                }
            }
        }
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
