//! `file_view`: numbered lines of a text file, one page at a time.

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Serialize, Serializer};
use toolhost_sdk::files::{self, FileBytes, FileIndex};
use toolhost_sdk::{Context, SideEffect, Tool, ToolError};

use crate::text::{
    floor_boundary, into_text, lines as split_lines, normalize_rel, read_text_file, sha256_hex,
    MAX_FILE_BYTES, TEXT_BUDGET_BYTES,
};

/// Room kept in the text budget for the header line, besides the path.
const HEADER_BYTES: usize = 256;
/// Room kept for the note under a clipped line.
const CLIP_NOTE_BYTES: usize = 192;

const DESCRIPTION: &str = "\
Shows numbered lines of one UTF-8 text file, a page at a time, with its SHA-256 (for \
file_edit's expected_sha256).
Use it to read code before editing, or to page through a long file (offset = next offset while \
has_more). Not for searching (grep_search), directories or binary files.
Read-only. A page is whole lines: at most limit, about 15 KiB; a longer line comes in parts.
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
    /// Byte of line `offset` to start at (the next column of a long line).
    #[serde(default)]
    #[schemars(range(min = 0, max = 4_194_304))]
    pub column: u32,
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
    /// Byte of line `offset` where `lines[0]` starts (0 unless a column was asked for).
    pub column: u64,
    /// `lines[i]` is line `offset + i`, without its line ending; only the last can be part of a line (see `clipped`).
    pub lines: Lines,
    /// Lines in the whole file.
    pub total_lines: u64,
    /// More of the file follows this page.
    pub has_more: bool,
    /// Where the next page starts (pass as `offset` and `column`); null on the last page.
    pub next: Option<Resume>,
    /// Set when the last of `lines` is only part of a line too long for a page.
    pub clipped: Option<Clip>,
    /// Hex SHA-256 of the whole file (its version).
    pub sha256: String,
}

/// Where the next page starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Resume {
    /// Line, 1-based: the first line not shown whole.
    pub offset: u64,
    /// Byte in that line to start at (0: its start).
    pub column: u64,
}

/// The part of a long line a page shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Clip {
    /// The line, 1-based.
    pub line: u64,
    /// Its length in bytes, without the line ending.
    pub line_bytes: u64,
    /// First byte shown.
    pub from_byte: u64,
    /// Bytes shown.
    pub shown_bytes: u64,
    /// Bytes after them, not shown (read them at `next`).
    pub omitted_bytes: u64,
}

/// A page as cut from the file: its lines, where the first starts and
/// the clip of the last.
#[derive(Debug, Default, PartialEq, Eq)]
struct Page {
    lines: Lines,
    column: u64,
    clip: Option<Clip>,
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
        .keywords(&[
            "read",
            "show",
            "open",
            "view",
            "print",
            "display",
            "cat",
            "look at",
            "contents",
            "inspect",
            "page through",
            "lines",
        ])
        .examples(&[
            "show me the contents of src/main.rs",
            "open the config file and read it",
            "what does the README say",
            "print lines 100 to 150 of the log file",
            "look at the function that loads the settings",
            "read Cargo.toml",
        ])
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
/// lines, has_more and the next offset, sha256), then each line as
/// `NUMBER<tab>TEXT`, numbers right-aligned, and under a clipped line a
/// note of its size and where the rest starts: about the size of the
/// page's text itself, and within [`TEXT_BUDGET_BYTES`].
pub fn render(out: &ViewOutput) -> String {
    use std::fmt::Write as _;
    let bytes = out.lines.bytes() + 8 * out.lines.len();
    let mut s = String::with_capacity(bytes + 160);
    // The line after the page's last (the last one shown is the one before).
    let end = out.offset + out.lines.len() as u64;
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
            end - 1,
            out.total_lines
        );
        if out.column > 0 {
            let _ = write!(s, " (line {} from byte {})", out.offset, out.column);
        }
    }
    let _ = write!(s, ", has_more {}", out.has_more);
    if let Some(next) = out.next {
        let _ = write!(s, " (next offset {}", next.offset);
        if next.column > 0 {
            let _ = write!(s, " column {}", next.column);
        }
        s.push(')');
    }
    let _ = writeln!(s, ", sha256 {}", out.sha256);
    // Numbers right-aligned to the widest, written without the formatting
    // machinery: this loop runs once per line of every page.
    let width = decimal(end.saturating_sub(1).max(1), &mut [0; 20]).len();
    let mut digits = [0u8; 20];
    for (number, line) in (out.offset..).zip(out.lines.iter()) {
        let number = decimal(number, &mut digits);
        s.extend(std::iter::repeat_n(' ', width.saturating_sub(number.len())));
        s.push_str(number);
        s.push('\t');
        s.push_str(line);
        s.push('\n');
    }
    if let Some(c) = out.clipped {
        let to = c.from_byte + c.shown_bytes;
        let _ = writeln!(
            s,
            "[line {} is {} bytes, too long for one page: bytes {}-{to} shown, {} more omitted; \
             read on with offset {} column {to}]",
            c.line, c.line_bytes, c.from_byte, c.omitted_bytes, c.line
        );
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

/// What cuts a page: where it starts, its line count and the text
/// budget its rows share.
#[derive(Debug, Clone, Copy)]
struct Cut {
    /// First line, 1-based.
    offset: u64,
    /// Byte in the first line to start at.
    column: u64,
    limit: u32,
    /// Bytes of text for the rows (number, tab, line, newline) and the
    /// clip note.
    budget: usize,
    /// Width of the widest line number the page can show.
    width: usize,
}

impl Cut {
    /// The cut of a page of `args` in a file of `total_lines` lines, shown
    /// under a header naming `rel`.
    fn new(args: &ViewArgs, rel: &str, total_lines: u64) -> Cut {
        let offset = u64::from(args.offset.max(1));
        let last = (offset + u64::from(args.limit.max(1)) - 1).min(total_lines.max(1));
        Cut {
            offset,
            column: u64::from(args.column),
            limit: args.limit.max(1),
            budget: TEXT_BUDGET_BYTES.saturating_sub(HEADER_BYTES + rel.len()),
            width: decimal(last, &mut [0; 20]).len(),
        }
    }
}

fn view(ctx: &Context, args: ViewArgs) -> Result<ViewOutput, ToolError> {
    let guest = ctx.guest_path(&args.path).map_err(|e| e.field("/path"))?;
    let rel = normalize_rel(&args.path);

    // The host's index (hash, line count, line starts): read only the page.
    // Any refusal, a file that is not text, or one that changed since it
    // was indexed goes the whole-file way below, which gives every error
    // its usual code and message.
    let path = guest.to_string_lossy();
    if let Ok(ix) = files::index(&path, MAX_FILE_BYTES) {
        if ix.is_text && ix.size <= MAX_FILE_BYTES {
            let cut = Cut::new(&args, &rel, ix.lines);
            let read = |start, len| files::read(&path, start, len).ok();
            if let Some(page) = indexed_page(read, &ix, cut) {
                return Ok(output(rel, cut.offset, page, ix.lines, ix.sha256));
            }
        }
    }

    let text = read_text_file(&guest, &rel)?;
    let sha256 = sha256_hex(text.as_bytes());
    let total_lines = split_lines(&text).count() as u64;
    let cut = Cut::new(&args, &rel, total_lines);
    let from = split_lines(&text).skip((cut.offset - 1) as usize);
    let page = page(from, cut, text.len());
    Ok(output(rel, cut.offset, page, total_lines, sha256))
}

fn output(path: String, offset: u64, page: Page, total_lines: u64, sha256: String) -> ViewOutput {
    let end = offset + page.lines.len() as u64;
    let next = match page.clip {
        Some(c) if c.omitted_bytes > 0 => Some(Resume {
            offset: c.line,
            column: c.from_byte + c.shown_bytes,
        }),
        _ if !page.lines.is_empty() && end <= total_lines => Some(Resume {
            offset: end,
            column: 0,
        }),
        _ => None,
    };
    ViewOutput {
        path,
        offset,
        column: page.column,
        has_more: next.is_some(),
        next,
        clipped: page.clip,
        lines: page.lines,
        total_lines,
        sha256,
    }
}

/// The page from `from` (the lines from the first one asked for): whole
/// lines, at most `cut.limit`, while their rows fit the text budget; it
/// ends before the first line that does not fit. Only a line that does not
/// fit a page on its own is cut, at the budget (on a character boundary),
/// and ends the page. The first line starts at `cut.column` (rounded down
/// to a character boundary, at most the line's end). Takes no line past
/// the page.
///
/// `capacity`: bytes to make room for at once (the text the lines come
/// from; a page takes at most that much).
fn page<'a>(from: impl Iterator<Item = &'a str>, cut: Cut, capacity: usize) -> Page {
    let mut page = Page {
        lines: Lines::with_capacity(capacity.min(cut.budget)),
        ..Page::default()
    };
    let mut left = cut.budget;
    for (i, line) in from.enumerate() {
        let (line, skipped) = if i == 0 {
            let at = floor_boundary(line, usize::try_from(cut.column).unwrap_or(usize::MAX));
            page.column = at as u64;
            (&line[at..], at)
        } else {
            (line, 0)
        };
        let row = cut.width + 2 + line.len();
        if row <= left {
            page.lines.push(line);
            left -= row;
            if page.lines.len() >= cut.limit as usize {
                break;
            }
            continue;
        }
        if page.lines.is_empty() {
            let room = left.saturating_sub(cut.width + 2 + CLIP_NOTE_BYTES);
            let mut shown = floor_boundary(line, room);
            if shown == 0 {
                // At least one character, so every page moves on.
                shown = line.chars().next().map_or(0, char::len_utf8);
            }
            page.lines.push(&line[..shown]);
            page.clip = Some(Clip {
                line: cut.offset,
                line_bytes: (skipped + line.len()) as u64,
                from_byte: skipped as u64,
                shown_bytes: shown as u64,
                omitted_bytes: (line.len() - shown) as u64,
            });
        }
        break;
    }
    page
}

/// The page cut by `cut` read from the file through its index `ix`: one
/// `read(start, len)` (the host's [`files::read`] in a component) from the
/// recorded start at or before the first line to the recorded start after
/// the last line the page could hold (at most one group of lines more than
/// the page), checked as UTF-8 and for NUL once, then split into lines.
/// `None` when the file no longer matches the index (its size or mtime
/// differ, the region ends early, is not UTF-8 or holds a NUL) or cannot
/// be read: the caller then reads it whole.
fn indexed_page(
    read: impl FnOnce(u64, u64) -> Option<FileBytes>,
    ix: &FileIndex,
    cut: Cut,
) -> Option<Page> {
    let offset = cut.offset;
    if offset > ix.lines {
        return Some(Page::default());
    }
    let (start, skip) = ix.line_start(offset)?;
    // The group after the one holding the page's last possible line starts
    // where the read can stop (the file's end when there is none).
    let last = (offset + u64::from(cut.limit.max(1)) - 1).min(ix.lines);
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
    let page = page(from, cut, text.len());
    (!failed).then_some(page)
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
            column: 0,
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

    /// Pages through `rel` with the default arguments, following `next`
    /// from line 1; checks each page's text fits the budget and holds no
    /// skipped line; returns the file's lines as the pages gave them and
    /// the pages' count.
    fn follow(ws: &Workspace, rel: &str) -> (Vec<String>, usize) {
        let mut lines: Vec<String> = Vec::new();
        let (mut offset, mut column) = (1u64, 0u64);
        for pages in 1..100_000 {
            let a = ViewArgs {
                path: rel.into(),
                offset: offset as u32,
                limit: default_limit(),
                column: column as u32,
            };
            let out = view(&ws.ctx(), a).unwrap();
            let text = render(&out);
            assert!(text.len() <= TEXT_BUDGET_BYTES, "{} B", text.len());
            assert_eq!((out.offset, out.column), (offset, column));
            // The text shows every line of the page whole, numbered.
            for (n, line) in (out.offset..).zip(out.lines.iter()) {
                assert!(text.contains(&format!("{n}\t{line}\n")), "line {n}");
            }
            for (i, line) in out.lines.iter().enumerate() {
                match lines.last_mut() {
                    Some(last) if i == 0 && out.column > 0 => last.push_str(line),
                    _ => lines.push(line.to_string()),
                }
            }
            match out.next {
                Some(next) => {
                    assert!(out.has_more);
                    assert!((next.offset, next.column) > (offset, column), "moves on");
                    assert!(
                        text.lines().next().unwrap().contains(&format!(
                            "(next offset {}{})",
                            next.offset,
                            if next.column > 0 {
                                format!(" column {}", next.column)
                            } else {
                                String::new()
                            }
                        )),
                        "{text}"
                    );
                    (offset, column) = (next.offset, next.column);
                }
                None => {
                    assert!(!out.has_more);
                    return (lines, pages);
                }
            }
        }
        panic!("the pages never ended");
    }

    #[test]
    fn following_next_reads_every_byte_once() {
        let ws = Workspace::new();
        // 1 MB of ~100-byte lines: a default page of 200 would be 20 KB.
        let lines: String = (0..10_000)
            .map(|i| format!("{i:05} {}\n", "abcdefghij".repeat(9)))
            .collect();
        // Lines longer than a page, multi-byte characters at every cut,
        // an empty line and no final line ending.
        let mixed = format!(
            "short\n{}\n\n{}\n{}\nmiddle\n{}",
            "x".repeat(100_000),
            "é".repeat(40_000),
            "🦀a".repeat(9_000),
            "y".repeat(15_000)
        );
        for (rel, body) in [("big.txt", &lines), ("mixed.txt", &mixed)] {
            ws.write(rel, body);
            let (got, pages) = follow(&ws, rel);
            let joined = got.join("\n") + if body.ends_with('\n') { "\n" } else { "" };
            assert_eq!(joined, *body, "{rel}");
            eprintln!("{rel}: {} B in {pages} pages", body.len());
        }
    }

    #[test]
    fn a_default_page_is_whole_lines_within_the_budget() {
        let ws = Workspace::new();
        let body: String = (1..=10_000)
            .map(|i| format!("{i:05} {}\n", "abcdefghij".repeat(9)))
            .collect();
        ws.write("big.txt", &body);
        let json = tool()
            .call_json(&ws.ctx(), r#"{"path":"big.txt"}"#)
            .unwrap();
        let out: serde_json::Value = serde_json::from_str(&json).unwrap();
        let shown = out["lines"].as_array().unwrap().len() as u64;
        // Fewer than the 200 asked for (they would not fit), all whole.
        assert!((100..200).contains(&shown), "{shown}");
        assert_eq!(
            out["next"],
            serde_json::json!({"offset": shown + 1, "column": 0})
        );
        assert!(out["clipped"].is_null());
        assert_eq!(
            out["lines"][shown as usize - 1],
            format!("{shown:05} {}", "abcdefghij".repeat(9))
        );
        let page = view(&ws.ctx(), args("big.txt", 1, 200)).unwrap();
        let text = render(&page);
        assert!(
            text.starts_with(&format!(
                "big.txt lines 1-{shown} of 10000, has_more true (next offset {})",
                shown + 1
            )),
            "{}",
            &text[..200]
        );
        assert!(text.len() <= TEXT_BUDGET_BYTES);
        assert!(
            text.len() > TEXT_BUDGET_BYTES - 200,
            "the page is full: {}",
            text.len()
        );
    }

    #[test]
    fn a_line_longer_than_a_page_is_clipped_explicitly() {
        let ws = Workspace::new();
        let long = "0123456789".repeat(10_000);
        ws.write("one.txt", &format!("{long}\nafter\n"));
        let out = view(&ws.ctx(), args("one.txt", 1, 200)).unwrap();
        let c = out.clipped.expect("clipped");
        assert_eq!((c.line, c.line_bytes, c.from_byte), (1, 100_000, 0));
        assert_eq!(c.shown_bytes + c.omitted_bytes, 100_000);
        assert!(c.shown_bytes > 10_000, "{c:?}");
        assert_eq!(out.lines.len(), 1);
        assert_eq!(
            out.lines.iter().next().unwrap(),
            &long[..c.shown_bytes as usize]
        );
        let to = c.shown_bytes;
        assert_eq!(
            out.next,
            Some(Resume {
                offset: 1,
                column: to
            })
        );
        let text = render(&out);
        assert!(text.ends_with(&format!("[line 1 is 100000 bytes, too long for one page: bytes 0-{to} shown, {} more omitted; read on with offset 1 column {to}]\n", 100_000 - to)), "{}", &text[text.len() - 300..]);
        // The rest of the line, from that column, then the next line.
        let mut a = args("one.txt", 1, 200);
        a.column = to as u32;
        let out = view(&ws.ctx(), a).unwrap();
        assert_eq!(out.column, to);
        assert!(
            render(&out).starts_with(&format!("one.txt lines 1-1 of 2 (line 1 from byte {to})"))
        );
        // A column inside a character starts at that character.
        ws.write("e.txt", "éé\n");
        let mut a = args("e.txt", 1, 10);
        a.column = 3;
        let out = view(&ws.ctx(), a).unwrap();
        assert_eq!((out.column, out.lines.iter().next().unwrap()), (2, "é"));
        // A column past the line's end: its empty end, then what follows.
        let mut a = args("e.txt", 1, 10);
        a.column = 99;
        let out = view(&ws.ctx(), a).unwrap();
        assert_eq!(out.column, 4);
        assert_eq!(out.lines, [""]);
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
        for offset in [1u32, 2, 8, 9, 10, 64, 100, 101, 102, 500] {
            for limit in [1u32, 3, 8, 500] {
                let a = args("a.txt", offset, limit);
                let got = indexed_page(read, &ix, Cut::new(&a, "a.txt", ix.lines)).unwrap();
                let want = view(&ws.ctx(), a).unwrap();
                assert_eq!(got.lines, want.lines, "{offset} {limit}");
                assert_eq!(got.clip, want.clipped, "{offset} {limit}");
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
        let cut = |offset, limit| Cut::new(&args("a.txt", offset, limit), "a.txt", ix.lines);
        assert!(indexed_page(read, &ix, cut(1, 10)).is_none());
        // Shrunk: a line ends early.
        ws.write("a.txt", "x\n");
        assert!(indexed_page(read, &ix, cut(50, 10)).is_none());
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
