//! Private-key blocks that one string does not hold whole.
//!
//! The `private_key` rule matches a block from its `-----BEGIN … PRIVATE
//! KEY-----` line on, within one string. A block also reaches an output in
//! other shapes, and each is found here:
//!
//! - **headless**: a text that starts inside a block (a page of a file
//!   read from below the BEGIN line) and holds its END line. The run of
//!   body lines just above the END line is the secret ([`headless`]).
//! - **across strings**: a file's lines as the items of an array
//!   (`["-----BEGIN …", "MIIE…", …]`), or as one member of each object
//!   of an array (`[{"line": …}, …]`). The items after a BEGIN item, and
//!   the items before a headless END item, are body lines of the block
//!   ([`across_items`]).
//! - **known lines**: a page that holds neither the BEGIN nor the END line
//!   (a window in the middle of a key). Nothing in the text says it is a
//!   key; what the host knows is which file the call read. [`KeyLines`]
//!   are the body lines of every block in that file, and any output string
//!   holding one of them has it replaced ([`crate::redact::FileSecrets`]
//!   finds and caches them per file version).
//!
//! A body line is base64 (the PEM and OpenSSH alphabet, `=` padding); the
//! lines of a run above an END line, save the last, are at least
//! [`MIN_FULL_LINE`] characters (PEM and OpenSSH wrap at 64 and 70). An
//! encrypted PEM key's `Proc-Type:`/`DEK-Info:` headers and the blank line
//! under them are part of the block too. A run of base64 lines with no
//! BEGIN or END line near it is not recognised as a key.

use std::sync::LazyLock;

use aho_corasick::{AhoCorasick, MatchKind};
use regex::Regex;

/// A block's first line.
static BEGIN_RX: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"-----BEGIN[ A-Z0-9]{0,24}PRIVATE KEY(?: BLOCK)?-----").expect("BEGIN compiles")
});

/// A block's last line.
static END_RX: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"-----END[ A-Z0-9]{0,24}PRIVATE KEY(?: BLOCK)?-----").expect("END compiles")
});

/// A line number in front of a line of a numbered listing (`cat -n`,
/// `file_view`'s text): spaces, digits, a tab.
static NUMBER_PREFIX_RX: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[ ]*[0-9]+\t").expect("prefix compiles"));

/// Shortest full body line of a block (every line but the last one).
pub const MIN_FULL_LINE: usize = 40;

/// Shortest body line [`KeyLines`] looks for: shorter ones (the last line
/// of a body can be a few characters) are too common to replace anywhere.
pub const MIN_KNOWN_LINE: usize = 4;

fn is_base64(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='))
}

/// A PEM header line of an encrypted key (`Proc-Type: 4,ENCRYPTED`,
/// `DEK-Info: …`).
fn is_pem_header(s: &str) -> bool {
    s.starts_with("Proc-Type:") || s.starts_with("DEK-Info:")
}

/// What a line of a key block above its END line can be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Body {
    /// Base64 of at least [`MIN_FULL_LINE`] characters.
    Full,
    /// Shorter base64: only as the last line before END.
    Short,
    /// A blank line or a PEM header: only above the base64 lines.
    Header,
    /// Anything else: the block starts below it.
    Not,
}

fn classify(line: &str) -> Body {
    let line = line.trim_end_matches('\r').trim();
    if line.is_empty() || is_pem_header(line) {
        Body::Header
    } else if is_base64(line) {
        if line.len() >= MIN_FULL_LINE {
            Body::Full
        } else {
            Body::Short
        }
    } else {
        Body::Not
    }
}

/// How many of `lines` (the lines above an END line, nearest last) are the
/// block's: a run of full base64 lines (the nearest may be short), then
/// headers and blank lines above them only when the run is not empty.
fn run_above<'a>(lines: impl DoubleEndedIterator<Item = &'a str>) -> usize {
    let mut n = 0;
    let mut base64 = 0;
    // `n` without the blank lines counted last (a blank line belongs to
    // the block only below a header).
    let mut kept = 0;
    for line in lines.rev() {
        match classify(line) {
            Body::Full if base64 == n => {}
            Body::Short if n == 0 => {}
            Body::Header if base64 > 0 => {
                n += 1;
                if !line.trim().is_empty() {
                    kept = n;
                }
                continue;
            }
            _ => break,
        }
        n += 1;
        base64 += 1;
        kept = n;
    }
    kept
}

/// Byte ranges in `text` of blocks that start above it: from the first
/// body line of the run above an END line (after its line-number prefix,
/// if the listing is numbered) to the end of the END marker. An END line
/// with nothing that looks like a body above it in `text` is a range of
/// its own (the block's tail).
pub fn headless(text: &str) -> Vec<(usize, usize)> {
    let mut out: Vec<(usize, usize)> = Vec::new();
    for end in END_RX.find_iter(text) {
        let line_start = text[..end.start()].rfind('\n').map_or(0, |i| i + 1);
        // Everything above the END line, as lines; a line number in front
        // of each is not part of the line.
        let above = &text[..line_start];
        let lines: Vec<(usize, &str)> = lines_with_starts(above)
            .map(|(at, l)| match NUMBER_PREFIX_RX.find(l) {
                Some(p) => (at + p.end(), &l[p.end()..]),
                None => (at, l),
            })
            .collect();
        let n = run_above(lines.iter().map(|(_, l)| *l));
        let start = if n == 0 {
            end.start()
        } else {
            lines[lines.len() - n].0
        };
        if out.last().is_some_and(|&(_, e)| start < e) {
            continue;
        }
        out.push((start, end.end()));
    }
    out
}

/// The lines of `text` (no final empty line for a trailing `\n`) and the
/// byte each starts at.
fn lines_with_starts(text: &str) -> impl DoubleEndedIterator<Item = (usize, &str)> {
    let mut starts = Vec::new();
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        starts.push((at, line.trim_end_matches('\n')));
        at += line.len();
    }
    starts.into_iter()
}

/// Whether `s` holds a BEGIN line with no END line after it: a block that
/// goes on past the end of `s`.
fn opens_block(s: &str) -> bool {
    BEGIN_RX
        .find_iter(s)
        .last()
        .is_some_and(|b| !END_RX.is_match(&s[b.end()..]))
}

/// An END line of a block that `s` does not open: where its marker ends.
fn closes_block(s: &str) -> Option<usize> {
    let end = END_RX.find(s)?;
    (!BEGIN_RX.is_match(&s[..end.start()])).then_some(end.end())
}

/// The items of a sequence of strings (`None`: not a string) that are
/// lines of a block whose BEGIN or END line is another item, each with
/// the byte where its secret part ends (from its start): the whole item
/// for a body line, through the marker for an END item. The BEGIN item
/// itself is the `private_key` rule's (it matches to the end of a string).
pub fn across_items(items: &[Option<&str>]) -> Vec<(usize, usize)> {
    let mut out: Vec<(usize, usize)> = Vec::new();
    let mut open = false;
    for (i, item) in items.iter().enumerate() {
        let Some(s) = *item else {
            open = false;
            continue;
        };
        if open {
            if let Some(end) = END_RX.find(s) {
                out.push((i, end.end()));
                open = opens_block(&s[end.end()..]);
            } else if classify(s) != Body::Not {
                out.push((i, s.len()));
            } else {
                open = opens_block(s);
            }
            continue;
        }
        if let Some(end) = closes_block(s) {
            // The run of body items just above, back to the first item or
            // one that is not a string or not a body line.
            let first = out.last().map_or(0, |&(j, _)| j + 1);
            let run: Vec<&str> = items[first..i]
                .iter()
                .rev()
                .map_while(|x| *x)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            let n = run_above(run.iter().copied());
            out.extend((i - n..i).map(|j| (j, items[j].map_or(0, str::len))));
            out.push((i, end));
        }
        open = opens_block(s);
    }
    out
}

/// The body lines of the blocks in a text (a file's content): what a
/// window of the file that shows neither a block's BEGIN nor its END line
/// may still show of it.
#[derive(Debug)]
pub struct KeyLines {
    lines: Vec<String>,
    automaton: AhoCorasick,
}

impl KeyLines {
    /// The body lines of every block in `text` (BEGIN to END, or to the
    /// end of the text), trimmed, at least `MIN_KNOWN_LINE` characters;
    /// `None` when it holds no block.
    pub fn of(text: &str) -> Option<KeyLines> {
        let mut lines: Vec<String> = Vec::new();
        let mut inside = false;
        for line in text.lines() {
            if inside {
                if END_RX.is_match(line) {
                    inside = opens_block(&line[END_RX.find(line).map_or(0, |m| m.end())..]);
                    continue;
                }
                let t = line.trim();
                if t.len() >= MIN_KNOWN_LINE && is_base64(t) {
                    lines.push(t.to_owned());
                }
            } else if opens_block(line) {
                inside = true;
            }
        }
        lines.sort();
        lines.dedup();
        if lines.is_empty() {
            return None;
        }
        let automaton = AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostLongest)
            .build(&lines)
            .expect("key lines compile");
        Some(KeyLines { lines, automaton })
    }

    /// How many body lines are known.
    pub fn len(&self) -> usize {
        self.lines.len()
    }

    /// Whether none are (never: [`KeyLines::of`] makes none empty).
    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    /// The byte ranges in `s` of known body lines, each standing alone: not
    /// next to another base64 character, so a known line inside a longer
    /// token is not one.
    pub fn find(&self, s: &str) -> Vec<(usize, usize)> {
        let b = s.as_bytes();
        let edge = |i: usize| {
            b.get(i)
                .is_none_or(|c| !(c.is_ascii_alphanumeric() || matches!(c, b'+' | b'/' | b'=')))
        };
        self.automaton
            .find_iter(s)
            .filter(|m| (m.start() == 0 || edge(m.start() - 1)) && edge(m.end()))
            .map(|m| (m.start(), m.end()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(seed: u8, n: usize, width: usize) -> Vec<String> {
        let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut x = u32::from(seed).wrapping_mul(2_654_435_761) | 1;
        (0..n)
            .map(|_| {
                (0..width)
                    .map(|_| {
                        x ^= x << 13;
                        x ^= x >> 17;
                        x ^= x << 5;
                        alphabet[(x % 64) as usize] as char
                    })
                    .collect()
            })
            .collect()
    }

    fn begin() -> String {
        format!("-----{} RSA PRIVATE KEY-----", "BEGIN")
    }

    fn end() -> String {
        format!("-----{} RSA PRIVATE KEY-----", "END")
    }

    #[test]
    fn a_headless_block_runs_from_the_first_body_line_to_the_end_marker() {
        let lines = body(1, 3, 64);
        let text = format!(
            "intro words\n{}\n{}\n{}\nQUJD==\n{}\nafter",
            lines[0],
            lines[1],
            lines[2],
            end()
        );
        let got = headless(&text);
        let start = text.find(&lines[0]).unwrap();
        let stop = text.find("\nafter").unwrap();
        assert_eq!(got, [(start, stop)]);
        // Numbered listings: the numbers stay, the lines go.
        let numbered = format!("  9\t{}\n 10\tQUJD==\n 11\t{}\n", lines[0], end());
        let got = headless(&numbered);
        assert_eq!(&numbered[..got[0].0], "  9\t");
        // Only an END line: the marker alone.
        let only = format!("x y\n{}", end());
        assert_eq!(headless(&only), [(4, only.len())]);
        // A short line above a full one is not a body line.
        let short_first = format!("abcd\n{}\n{}", lines[0], end());
        assert_eq!(headless(&short_first)[0].0, 5);
    }

    #[test]
    fn blocks_are_followed_across_items() {
        let lines = body(2, 4, 64);
        let (b, e) = (begin(), end());
        let items: Vec<Option<&str>> = vec![
            Some("head"),
            Some(&b),
            Some(&lines[0]),
            Some(&lines[1]),
            Some(&e),
            Some("tail"),
        ];
        assert_eq!(across_items(&items), [(2, 64), (3, 64), (4, e.len())]);
        // A window that starts in the body and holds the END line.
        let items: Vec<Option<&str>> =
            vec![Some(&lines[2]), Some(&lines[3]), Some("QUJD=="), Some(&e)];
        assert_eq!(
            across_items(&items),
            [(0, 64), (1, 64), (2, 6), (3, e.len())]
        );
        // A non-string item breaks the run; a plain line ends an open block.
        let items: Vec<Option<&str>> = vec![Some(&b), None, Some(&lines[0]), Some(&e)];
        assert_eq!(across_items(&items), [(2, 64), (3, e.len())]);
        let items: Vec<Option<&str>> = vec![Some(&b), Some("fn main() {}"), Some(&lines[0])];
        assert_eq!(across_items(&items), []);
    }

    #[test]
    fn known_lines_are_found_standing_alone() {
        let lines = body(3, 3, 70);
        let text = format!(
            "a\n{}\n{}\n{}\n{}\nQUJD\n{}\nz\n",
            lines[2],
            begin(),
            lines[0],
            lines[1],
            end()
        );
        let known = KeyLines::of(&text).unwrap();
        assert_eq!(
            known.len(),
            3,
            "two full lines and the tail, not the line above"
        );
        let s = format!("  7\t{}\n  8\tQUJD\nxQUJD", lines[1]);
        let found = known.find(&s);
        assert_eq!(found.len(), 2, "{found:?}");
        assert_eq!(&s[found[0].0..found[0].1], lines[1]);
        assert!(known.find(&lines[2]).is_empty());
        assert!(KeyLines::of("no key here\n").is_none());
    }
}
