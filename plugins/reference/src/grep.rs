//! `grep_search`: regex search over workspace text files, paged by cursor.

use std::fs::{self, File};
use std::io::Read;
use std::path::{Path, PathBuf};

use globset::{GlobBuilder, GlobMatcher};
use regex::{Regex, RegexBuilder};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use toolhost_sdk::files::{self, FileError};
use toolhost_sdk::{Context, SideEffect, Tool, ToolError};

use crate::text::{
    clip_line, file_error, into_text, normalize_rel, sha256_hex, MAX_FILE_BYTES, TEXT_BUDGET_BYTES,
};

/// Most files read in one search.
const MAX_FILES_SCANNED: u64 = 20_000;
/// Most bytes read in one search: 256 MiB.
const MAX_BYTES_SCANNED: u64 = 256 * 1024 * 1024;
/// Most directory entries looked at in one search.
const MAX_ENTRIES_VISITED: u64 = 200_000;
/// Longest line returned unclipped, in characters.
const MAX_LINE_CHARS: usize = 500;
/// Leading bytes checked for NUL before a file is read whole.
const SNIFF_BYTES: u64 = 8 * 1024;
/// A directory holding this file is a cache (Cargo's `target/`, ...).
const CACHE_TAG: &str = "CACHEDIR.TAG";
/// Version tag of the cursor format.
const CURSOR_PREFIX: &str = "g1";
/// Room kept in the text budget for the totals line, besides the cursor.
const FOOTER_BYTES: usize = 192;

const DESCRIPTION: &str = "\
Finds lines matching a Rust regex ((?i): any case) in the text files under a path, up to limit \
(or ~15 KiB) a page (next_cursor: the next).
Use it to locate code; not to read a file (file_view).
Read-only. Skips .git, caches, binary and over-4-MiB files; stops at 20000 files or 256 MiB \
(truncated).
Errors: invalid_regex, invalid_glob, invalid_cursor, not_found, permission_denied.";

/// Arguments of `grep_search`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GrepArgs {
    /// Regex, matched per line.
    #[schemars(length(min = 1, max = 512))]
    pub pattern: String,
    /// Workspace-relative file or directory (`.`: all).
    #[schemars(length(min = 1, max = 1024), extend("x-toolhost-path" = "read"))]
    pub path: String,
    /// Glob filter, e.g. `src/**/*.rs`.
    #[schemars(length(min = 1, max = 256))]
    pub glob: Option<String>,
    /// Matches per page.
    #[serde(default = "default_limit")]
    #[schemars(range(min = 1, max = 200))]
    pub limit: u32,
    /// `next_cursor` of the previous page.
    #[schemars(length(min = 1, max = 16384))]
    pub cursor: Option<String>,
}

fn default_limit() -> u32 {
    50
}

/// One page of search results.
#[derive(Debug, Serialize, JsonSchema)]
pub struct GrepOutput {
    /// This page's matches, by path then line.
    pub matches: Vec<Match>,
    /// Matches in all pages.
    pub total: u64,
    /// `cursor` of the next page; null on the last.
    pub next_cursor: Option<String>,
    /// Text files read.
    pub files_scanned: u64,
    /// Binary, non-UTF-8, over-4-MiB or unreadable files.
    pub files_skipped: u64,
    /// A scan limit stopped the search early.
    pub truncated: bool,
}

// One matching line.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Match {
    /// Workspace-relative path.
    pub path: String,
    /// 1-based.
    pub line_number: u64,
    /// Without its line ending; clipped at 500 characters.
    pub line: String,
}

/// The `grep_search` tool.
pub fn tool() -> Tool {
    Tool::new("grep_search", grep)
        .title("Search files")
        .description(DESCRIPTION)
        .keywords(&[
            "search",
            "find",
            "grep",
            "locate",
            "where defined",
            "where used",
            "usages",
            "references",
            "occurrences",
            "look for",
            "callers",
            "mentions",
        ])
        .examples(&[
            "find where the function parse_config is defined",
            "where is this struct used",
            "search the code for TODO comments",
            "which files mention the old API name",
            "list every call of the deprecated helper",
            "grep the sources for the error message",
            "locate the definition of the Settings type",
        ])
        .side_effect(SideEffect::ReadOnly)
        .reads_files()
        .error_codes(&[
            "invalid_regex",
            "invalid_glob",
            "invalid_cursor",
            "not_found",
            "permission_denied",
            "io_error",
        ])
        .timeout_ms(30_000)
        .max_output_bytes(1024 * 1024)
        .text(render)
}

/// The model-facing text of a page: one `path:line: text` row per match,
/// then one line of totals and how to get the next page.
pub fn render(out: &GrepOutput) -> String {
    use std::fmt::Write as _;
    let bytes: usize = out
        .matches
        .iter()
        .map(|m| m.path.len() + m.line.len() + 12)
        .sum();
    let mut s = String::with_capacity(bytes + 200);
    for m in &out.matches {
        let _ = writeln!(s, "{}:{}: {}", m.path, m.line_number, m.line);
    }
    let _ = write!(
        s,
        "{} of {} matching lines shown; {} files searched, {} skipped",
        out.matches.len(),
        out.total,
        out.files_scanned,
        out.files_skipped
    );
    if out.truncated {
        s.push_str("; scan limit reached, results are incomplete");
    }
    match &out.next_cursor {
        Some(c) => {
            let _ = write!(s, ". Next page: cursor {c}");
        }
        None => s.push_str(". Last page."),
    }
    s
}

/// Where a page starts: after this match.
#[derive(Debug, PartialEq, Eq)]
struct Cursor {
    path: String,
    line_number: u64,
}

fn grep(ctx: &Context, args: GrepArgs) -> Result<GrepOutput, ToolError> {
    let regex = build_regex(&args.pattern)?;
    let guest_root = ctx.guest_path(&args.path).map_err(|e| e.field("/path"))?;
    let base = normalize_rel(&args.path);
    let glob = args.glob.as_deref().map(build_glob).transpose()?;
    let fingerprint = fingerprint(&args.pattern, &base, args.glob.as_deref());
    let after = args
        .cursor
        .as_deref()
        .map(|c| decode_cursor(c, &fingerprint))
        .transpose()?;

    let meta = fs::metadata(&guest_root).map_err(|e| file_error(&e, display(&base)))?;
    let mut truncated = false;
    let files = if meta.is_dir() {
        let walk = walk(&guest_root, &base, glob.as_ref());
        truncated |= walk.truncated;
        walk.files
    } else {
        vec![(base.clone(), guest_root)]
    };

    let limit = args.limit.clamp(1, 200) as usize;
    let mut out = GrepOutput {
        matches: Vec::new(),
        total: 0,
        next_cursor: None,
        files_scanned: 0,
        files_skipped: 0,
        truncated,
    };
    let mut more_after_page = false;
    // The page holds all it may (its limit, or the text budget).
    let mut full = false;
    // Bytes of the text rows of the page's matches.
    let mut rows = 0usize;
    let mut bytes_scanned = 0u64;
    for (rel, guest) in files {
        if out.files_scanned >= MAX_FILES_SCANNED || bytes_scanned >= MAX_BYTES_SCANNED {
            out.truncated = true;
            break;
        }
        let (text, bytes_read) = read_text(&guest);
        bytes_scanned += bytes_read;
        let Some(text) = text else {
            out.files_skipped += 1;
            continue;
        };
        out.files_scanned += 1;
        for (line_number, line) in (1u64..).zip(text.lines()) {
            if !regex.is_match(line) {
                continue;
            }
            out.total += 1;
            let on_page = after
                .as_ref()
                .is_none_or(|c| (rel.as_str(), line_number) > (c.path.as_str(), c.line_number));
            if !on_page {
                continue;
            }
            if full {
                more_after_page = true;
                continue;
            }
            let line = clip_line(line, MAX_LINE_CHARS);
            // The page ends before a match whose row (and the totals line
            // with a cursor after it) would not fit the text budget: the
            // cursor then starts the next page at that match.
            let row = row_bytes(&rel, line_number, &line);
            if !out.matches.is_empty() && rows + row + footer_bytes(&rel) > TEXT_BUDGET_BYTES {
                full = true;
                more_after_page = true;
                continue;
            }
            rows += row;
            out.matches.push(Match {
                path: rel.clone(),
                line_number,
                line: line.into_owned(),
            });
            full = out.matches.len() >= limit;
        }
    }
    if more_after_page {
        let last = out.matches.last().expect("a full page is not empty");
        out.next_cursor = Some(encode_cursor(&fingerprint, &last.path, last.line_number));
    }
    Ok(out)
}

/// Bytes of a match's row in the text: `path:line: text` and a newline.
fn row_bytes(path: &str, line_number: u64, line: &str) -> usize {
    path.len() + line.len() + 24 + line_number.checked_ilog10().unwrap_or(0) as usize
}

/// Bytes the totals line can take with a cursor after a match in `path`
/// (the cursor spells the path in hex).
fn footer_bytes(path: &str) -> usize {
    FOOTER_BYTES + 2 * path.len()
}

fn build_regex(pattern: &str) -> Result<Regex, ToolError> {
    RegexBuilder::new(pattern)
        .size_limit(8 * 1024 * 1024)
        .dfa_size_limit(4 * 1024 * 1024)
        .build()
        .map_err(|e| {
            ToolError::new(
                "invalid_regex",
                format!("pattern is not a valid regex: {e}"),
            )
            .field("/pattern")
            .correctable()
        })
}

fn build_glob(glob: &str) -> Result<GlobMatcher, ToolError> {
    GlobBuilder::new(glob)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map(|g| g.compile_matcher())
        .map_err(|e| {
            ToolError::new("invalid_glob", format!("glob is not valid: {e}"))
                .field("/glob")
                .correctable()
        })
}

/// Reads a file for searching: its text, or `None` when it is skipped,
/// and the number of bytes read. In a component the host reads it, with
/// every secret it redacts replaced by its marker line by line
/// ([`files::redacted_text`]): the search then matches what an output may
/// show, and neither its matches nor its counts can tell a right guess at
/// a redacted value from a wrong one. A file the host does not answer for
/// is skipped, never read raw. Outside a component (native tests) the file
/// is read as it is ([`read_raw`]).
fn read_text(path: &Path) -> (Option<String>, u64) {
    match files::redacted_text(&path.to_string_lossy(), MAX_FILE_BYTES) {
        Ok(Some(text)) => {
            let read = text.len() as u64;
            (Some(text), read)
        }
        Ok(None) => (None, fs::metadata(path).map_or(0, |m| m.len())),
        Err(FileError::Unavailable(_)) if cfg!(not(target_family = "wasm")) => read_raw(path),
        Err(_) => (None, 0),
    }
}

/// Reads a file for searching as it is. Files over the cap are skipped
/// unread; a NUL in the first 8 KiB marks a binary file, skipped without
/// reading the rest.
fn read_raw(path: &Path) -> (Option<String>, u64) {
    let Ok(mut file) = File::open(path) else {
        return (None, 0);
    };
    if file.metadata().map_or(true, |m| m.len() > MAX_FILE_BYTES) {
        return (None, 0);
    }
    let mut bytes = Vec::new();
    let sniffed = (&mut file).take(SNIFF_BYTES).read_to_end(&mut bytes);
    if sniffed.is_err() || bytes.contains(&0) {
        return (None, bytes.len() as u64);
    }
    if bytes.len() as u64 == SNIFF_BYTES {
        let rest = file
            .take(MAX_FILE_BYTES + 1 - SNIFF_BYTES)
            .read_to_end(&mut bytes);
        if rest.is_err() || bytes.len() as u64 > MAX_FILE_BYTES {
            return (None, bytes.len() as u64);
        }
    }
    let read = bytes.len() as u64;
    (into_text(bytes).ok(), read)
}

/// The files to search, sorted bytewise by workspace-relative path.
struct Walk {
    files: Vec<(String, PathBuf)>,
    truncated: bool,
}

/// Lists the files under directory `root` (workspace path `base`) that
/// pass `glob`, without entering `.git`, tagged cache directories or
/// symlinked directories.
fn walk(root: &Path, base: &str, glob: Option<&GlobMatcher>) -> Walk {
    let match_path = glob.is_some_and(|g| g.glob().glob().contains('/'));
    let mut files = Vec::new();
    let mut visited = 0u64;
    let mut truncated = false;
    // (guest directory, its path relative to `root` with a trailing '/')
    let mut stack = vec![(root.to_path_buf(), String::new())];
    'walk: while let Some((dir, prefix)) = stack.pop() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        let entries: Vec<fs::DirEntry> = entries
            .filter_map(Result::ok)
            .take(MAX_ENTRIES_VISITED as usize + 1)
            .collect();
        // A tagged cache directory below the root is skipped whole.
        if !prefix.is_empty() && entries.iter().any(|e| e.file_name() == CACHE_TAG) {
            continue;
        }
        for entry in entries {
            visited += 1;
            if visited > MAX_ENTRIES_VISITED {
                truncated = true;
                break 'walk;
            }
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            let Ok(file_type) = entry.file_type() else {
                continue;
            };
            let rel = format!("{prefix}{name}");
            let guest = entry.path();
            if file_type.is_dir() {
                if name != ".git" {
                    stack.push((guest, format!("{rel}/")));
                }
                continue;
            }
            let is_file = file_type.is_file()
                || (file_type.is_symlink() && fs::metadata(&guest).is_ok_and(|m| m.is_file()));
            if !is_file {
                continue;
            }
            if let Some(glob) = glob {
                let candidate = if match_path {
                    rel.as_str()
                } else {
                    name.as_str()
                };
                if !glob.is_match(candidate) {
                    continue;
                }
            }
            let workspace_rel = if base.is_empty() {
                rel
            } else {
                format!("{base}/{rel}")
            };
            files.push((workspace_rel, guest));
        }
    }
    files.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    Walk { files, truncated }
}

fn display(rel: &str) -> &str {
    if rel.is_empty() {
        "."
    } else {
        rel
    }
}

/// Ties a cursor to one search (pattern, path, glob), not to a page size.
fn fingerprint(pattern: &str, base: &str, glob: Option<&str>) -> String {
    let key = format!("{pattern}\0{base}\0{}", glob.unwrap_or("\0none"));
    sha256_hex(key.as_bytes())[..16].to_string()
}

/// `g1.<fingerprint>.<line>.<hex of path>`.
fn encode_cursor(fingerprint: &str, path: &str, line_number: u64) -> String {
    use std::fmt::Write;
    let mut cursor = format!("{CURSOR_PREFIX}.{fingerprint}.{line_number}.");
    for byte in path.bytes() {
        let _ = write!(cursor, "{byte:02x}");
    }
    cursor
}

fn decode_cursor(cursor: &str, fingerprint: &str) -> Result<Cursor, ToolError> {
    let invalid = |why: &str| {
        ToolError::new(
            "invalid_cursor",
            format!(
                "cursor {why}; pass the next_cursor of the previous page of the same search, \
                 or omit cursor to start again"
            ),
        )
        .field("/cursor")
        .correctable()
    };
    let mut parts = cursor.split('.');
    let (Some(CURSOR_PREFIX), Some(fp), Some(line), Some(hex), None) = (
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
    ) else {
        return Err(invalid("is malformed"));
    };
    if fp != fingerprint {
        return Err(invalid(
            "belongs to a different search (pattern, path or glob)",
        ));
    }
    let line_number = line.parse::<u64>().map_err(|_| invalid("is malformed"))?;
    if hex.len() % 2 != 0 {
        return Err(invalid("is malformed"));
    }
    let bytes = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect::<Option<Vec<u8>>>()
        .ok_or_else(|| invalid("is malformed"))?;
    let path = String::from_utf8(bytes).map_err(|_| invalid("is malformed"))?;
    Ok(Cursor { path, line_number })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::Workspace;

    fn args(pattern: &str, path: &str) -> GrepArgs {
        GrepArgs {
            pattern: pattern.into(),
            path: path.into(),
            glob: None,
            limit: 50,
            cursor: None,
        }
    }

    fn tree() -> Workspace {
        let ws = Workspace::new();
        ws.write("a.txt", "fn main\nnothing\nfn helper\n");
        ws.write("a/b.rs", "fn inner\n");
        ws.write("a/c/d.rs", "x\nfn deep\r\n");
        ws.write("a.rs", "fn top\n");
        ws.write("bin.dat", "fn\0binary");
        ws.write(".git/config", "fn hidden\n");
        ws.write(
            "target/CACHEDIR.TAG",
            "Signature: 8a477f597d28d172789f06886806bc55\n",
        );
        ws.write("target/debug/out.rs", "fn cached\n");
        ws
    }

    fn found(out: &GrepOutput) -> Vec<(String, u64)> {
        out.matches
            .iter()
            .map(|m| (m.path.clone(), m.line_number))
            .collect()
    }

    #[test]
    fn finds_in_bytewise_path_order() {
        let ws = tree();
        let out = grep(&ws.ctx(), args("^fn ", ".")).unwrap();
        let expected = [
            ("a.rs", 1),
            ("a.txt", 1),
            ("a.txt", 3),
            ("a/b.rs", 1),
            ("a/c/d.rs", 2),
        ];
        let expected: Vec<(String, u64)> =
            expected.iter().map(|(p, l)| (p.to_string(), *l)).collect();
        assert_eq!(found(&out), expected);
        assert_eq!(out.matches[4].line, "fn deep");
        assert_eq!(out.total, 5);
        assert_eq!(out.files_scanned, 4);
        assert_eq!(out.files_skipped, 1);
        assert!(out.next_cursor.is_none());
        assert!(!out.truncated);
    }

    #[test]
    fn text_is_rows_then_totals_and_cursor() {
        let ws = tree();
        let out = grep(&ws.ctx(), args("^fn ", ".")).unwrap();
        let text = render(&out);
        let rows: Vec<&str> = text.lines().collect();
        assert_eq!(rows.len(), 6, "{text}");
        assert_eq!(rows[4], "a/c/d.rs:2: fn deep");
        assert_eq!(
            rows[5],
            "5 of 5 matching lines shown; 4 files searched, 1 skipped. Last page."
        );
        let mut a = args("fn", ".");
        a.limit = 2;
        let out = grep(&ws.ctx(), a).unwrap();
        let text = render(&out);
        let cursor = out.next_cursor.as_deref().unwrap();
        assert!(
            text.ends_with(&format!("2 of 5 matching lines shown; 4 files searched, 1 skipped. Next page: cursor {cursor}")),
            "{text}"
        );
        // Through the SDK: the same text travels next to the JSON.
        let out = tool()
            .call_output(&ws.ctx(), r#"{"pattern":"^fn ","path":"."}"#)
            .unwrap();
        assert!(out.text.unwrap().starts_with("a.rs:1: "));
    }

    #[test]
    fn pages_with_cursor() {
        let ws = tree();
        let mut a = args("fn", "./");
        a.limit = 2;
        let mut pages = Vec::new();
        loop {
            let out = grep(&ws.ctx(), a).unwrap();
            assert_eq!(out.total, 5);
            pages.extend(found(&out));
            match out.next_cursor {
                Some(c) => {
                    a = args("fn", "./");
                    a.limit = 2;
                    a.cursor = Some(c);
                }
                None => break,
            }
        }
        assert_eq!(pages.len(), 5);
        let mut sorted = pages.clone();
        sorted.sort();
        assert_eq!(pages, sorted);
    }

    #[test]
    fn a_page_fits_the_text_budget_and_cursors_skip_nothing() {
        let ws = Workspace::new();
        // 400 matches of ~300 bytes: 200 of them would be 60 KB of text.
        let body: String = (0..400)
            .map(|i| format!("match {i:03} {}\n", "é-x".repeat(75)))
            .collect();
        ws.write("m.txt", &body);
        let mut seen = Vec::new();
        let mut cursor = None;
        let mut pages = 0;
        loop {
            let mut a = args("^match", ".");
            a.limit = 200;
            a.cursor = cursor.take();
            let out = grep(&ws.ctx(), a).unwrap();
            pages += 1;
            let text = render(&out);
            assert!(text.len() <= TEXT_BUDGET_BYTES, "{} B", text.len());
            assert_eq!(out.total, 400);
            for m in &out.matches {
                assert!(text.contains(&format!("m.txt:{}: {}\n", m.line_number, m.line)));
            }
            seen.extend(out.matches.iter().map(|m| m.line_number));
            match out.next_cursor {
                Some(c) => cursor = Some(c),
                None => break,
            }
        }
        assert_eq!(seen, (1..=400).collect::<Vec<u64>>());
        assert!(pages > 2, "{pages} pages");
    }

    #[test]
    fn globs_by_name_or_path() {
        let ws = tree();
        let mut a = args("fn", ".");
        a.glob = Some("*.rs".into());
        let out = grep(&ws.ctx(), a).unwrap();
        assert_eq!(out.total, 3);
        let mut a = args("fn", "a");
        a.glob = Some("c/**".into());
        let out = grep(&ws.ctx(), a).unwrap();
        assert_eq!(found(&out), [("a/c/d.rs".to_string(), 2)]);
        let mut a = args("fn", "a");
        a.glob = Some("*.rs".into());
        assert_eq!(grep(&ws.ctx(), a).unwrap().total, 2);
    }

    #[test]
    fn an_explicit_cache_directory_is_searched() {
        let ws = tree();
        let out = grep(&ws.ctx(), args("fn", "target")).unwrap();
        assert_eq!(found(&out), [("target/debug/out.rs".to_string(), 1)]);
    }

    #[test]
    fn binary_detection_reads_only_a_prefix() {
        let ws = Workspace::new();
        let mut big = vec![0u8; 16];
        big.extend(std::iter::repeat_n(b'a', 3 * 1024 * 1024));
        ws.write_bytes("blob", &big);
        ws.write("late-nul", &format!("{}\0", "fn x\n".repeat(3000)));
        let (text, read) = read_text(&ws.root().join("blob"));
        assert!(text.is_none());
        assert_eq!(read, SNIFF_BYTES);
        let (text, _) = read_text(&ws.root().join("late-nul"));
        assert!(text.is_none());
    }

    #[test]
    fn searches_a_single_file() {
        let ws = tree();
        let out = grep(&ws.ctx(), args("helper", "a.txt")).unwrap();
        assert_eq!(found(&out), [("a.txt".to_string(), 3)]);
    }

    #[test]
    fn errors() {
        let ws = tree();
        let err = grep(&ws.ctx(), args("fn(", ".")).unwrap_err();
        assert_eq!(
            (err.code.as_str(), err.field.as_deref()),
            ("invalid_regex", Some("/pattern"))
        );
        let mut a = args("fn", ".");
        a.glob = Some("[".into());
        assert_eq!(grep(&ws.ctx(), a).unwrap_err().code, "invalid_glob");
        let mut a = args("fn", ".");
        a.cursor = Some("junk".into());
        assert_eq!(grep(&ws.ctx(), a).unwrap_err().code, "invalid_cursor");
        let mut a = args("other", ".");
        a.cursor = Some(encode_cursor(&fingerprint("fn", "", None), "a.txt", 1));
        assert_eq!(grep(&ws.ctx(), a).unwrap_err().code, "invalid_cursor");
        assert_eq!(
            grep(&ws.ctx(), args("x", "nope")).unwrap_err().code,
            "not_found"
        );
        assert_eq!(
            grep(&ws.ctx(), args("x", "..")).unwrap_err().code,
            "invalid_path"
        );
    }

    #[test]
    fn cursor_round_trips() {
        let fp = fingerprint("p", "", None);
        let c = encode_cursor(&fp, "dir/é.rs", 42);
        assert_eq!(
            decode_cursor(&c, &fp).unwrap(),
            Cursor {
                path: "dir/é.rs".into(),
                line_number: 42
            }
        );
    }
}
