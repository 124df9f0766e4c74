//! Capturing one output stream in bounded memory: its head, the lines that
//! look like errors, and its tail (keep the head, the key error lines and
//! the tail; say explicitly what was left out).
//!
//! [`StreamClip`] is fed the raw bytes as they arrive. It keeps the first
//! 2/5 of the budget, a window holding the rest of the budget of the latest
//! bytes, and, from the bytes that scroll out of that window, whole lines
//! with one of the [`KEY_WORDS`] up to 1/5 of the budget. Memory stays within about
//! the budget however much the program writes. [`StreamClip::finish`]
//! renders the kept pieces in order with a marker for each gap,
//! `[… N bytes omitted …]`, and cleans each piece with
//! [`strip_control`](crate::text::strip_control) (ANSI escapes,
//! `\r` progress rewrites, backspaces, other control characters).
//!
//! Byte counts are of the raw stream: `omitted_bytes` is what the text does
//! not show; control sequences removed from the shown pieces are not
//! counted as omitted.

use std::collections::VecDeque;

use crate::text::strip_control;

/// Lines worth keeping from the middle of a long output: those containing
/// one of these words (ASCII case-insensitive). A word marked `true` must
/// start a word (`error`, not `terror`); the others may sit inside one
/// (`AssertionError`, `NullPointerException`).
pub(crate) const KEY_WORDS: &[(&str, bool)] = &[
    ("error", true),
    ("fail", true),
    ("panic", true),
    ("fatal", true),
    ("abort", true),
    ("exception", false),
    ("traceback", false),
    ("assert", false),
    ("segmentation fault", false),
    ("undefined reference", false),
];

/// Longest key line kept whole; longer ones are cut (the rest is omitted).
const MAX_KEY_LINE: usize = 512;

/// What was kept of one stream.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Captured {
    /// The text for the model: head, key lines and tail, with a marker
    /// line for each gap; ANSI escapes and control characters removed.
    pub text: String,
    /// Bytes the program wrote.
    pub total_bytes: u64,
    /// Bytes of those not in `text`.
    pub omitted_bytes: u64,
    /// Lines kept from the middle because they look like errors.
    pub key_lines: usize,
}

/// A line kept from the middle: its raw offset and (possibly cut) bytes.
#[derive(Debug)]
struct KeyLine {
    start: u64,
    bytes: Vec<u8>,
}

/// Scans the bytes that leave the tail window for key lines.
#[derive(Debug)]
struct Middle {
    /// Offset of the next byte to arrive.
    offset: u64,
    line: Vec<u8>,
    line_start: u64,
    /// The current line is longer than [`MAX_KEY_LINE`].
    line_cut: bool,
    keys: Vec<KeyLine>,
    key_bytes: usize,
    key_cap: usize,
}

/// Whether a raw line looks like an error (see [`KEY_WORDS`]).
pub(crate) fn is_key_line(raw: &[u8]) -> bool {
    let line = strip_control(&String::from_utf8_lossy(raw)).to_ascii_lowercase();
    let b = line.as_bytes();
    KEY_WORDS.iter().any(|&(word, at_word_start)| {
        line.match_indices(word).any(|(i, _)| {
            !at_word_start || i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')
        })
    })
}

impl Middle {
    fn scan(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            if self.line.is_empty() && !self.line_cut {
                self.line_start = self.offset;
            }
            let (piece, ends_line) = match bytes.iter().position(|&b| b == b'\n') {
                Some(i) => (&bytes[..=i], true),
                None => (bytes, false),
            };
            let room = MAX_KEY_LINE - self.line.len();
            if piece.len() > room {
                self.line.extend_from_slice(&piece[..room]);
                self.line_cut = true;
            } else {
                self.line.extend_from_slice(piece);
            }
            self.offset += piece.len() as u64;
            bytes = &bytes[piece.len()..];
            if ends_line {
                self.end_line();
            }
        }
    }

    fn end_line(&mut self) {
        let line = std::mem::take(&mut self.line);
        self.line_cut = false;
        if self.key_bytes + line.len() <= self.key_cap && is_key_line(&line) {
            self.key_bytes += line.len();
            self.keys.push(KeyLine {
                start: self.line_start,
                bytes: line,
            });
        }
    }
}

/// One stream being captured.
#[derive(Debug)]
pub(super) struct StreamClip {
    max: usize,
    head_cap: usize,
    head: Vec<u8>,
    window: VecDeque<u8>,
    window_cap: usize,
    middle: Middle,
    total: u64,
}

impl StreamClip {
    /// Keeps at most about `max` bytes of the stream.
    pub(super) fn new(max: usize) -> StreamClip {
        let head_cap = max * 2 / 5;
        StreamClip {
            max,
            head_cap,
            head: Vec::new(),
            window: VecDeque::new(),
            window_cap: max - head_cap,
            middle: Middle {
                offset: head_cap as u64,
                line: Vec::new(),
                line_start: 0,
                line_cut: false,
                keys: Vec::new(),
                key_bytes: 0,
                key_cap: max / 5,
            },
            total: 0,
        }
    }

    pub(super) fn push(&mut self, mut chunk: &[u8]) {
        self.total += chunk.len() as u64;
        if self.head.len() < self.head_cap {
            let n = (self.head_cap - self.head.len()).min(chunk.len());
            self.head.extend_from_slice(&chunk[..n]);
            chunk = &chunk[n..];
        }
        if chunk.is_empty() {
            return;
        }
        let overflow = (self.window.len() + chunk.len()).saturating_sub(self.window_cap);
        let from_window = overflow.min(self.window.len());
        if from_window > 0 {
            let (a, b) = self.window.as_slices();
            if from_window <= a.len() {
                self.middle.scan(&a[..from_window]);
            } else {
                self.middle.scan(a);
                self.middle.scan(&b[..from_window - a.len()]);
            }
            self.window.drain(..from_window);
        }
        let from_chunk = overflow - from_window;
        self.middle.scan(&chunk[..from_chunk]);
        self.window.extend(&chunk[from_chunk..]);
    }

    /// Renders what was kept.
    pub(super) fn finish(self) -> Captured {
        let total = self.total;
        let window: Vec<u8> = self.window.into();
        if total <= self.max as u64 {
            // Nothing left the window: the stream is whole.
            let mut all = self.head;
            all.extend_from_slice(&window);
            return Captured {
                text: strip_control(&String::from_utf8_lossy(&all)),
                total_bytes: total,
                omitted_bytes: 0,
                key_lines: 0,
            };
        }

        // Head: cut at a line end when one is near, else at a char start.
        let mut head_end = self.head.len();
        if let Some(nl) = self.head.iter().rposition(|&b| b == b'\n') {
            if nl + 1 >= head_end - head_end / 4 {
                head_end = nl + 1;
            }
        }
        if head_end == self.head.len() {
            head_end = char_start_back(&self.head, head_end);
        }

        let keys = self.middle.keys;
        let key_bytes: usize = keys.iter().map(|k| k.bytes.len()).sum();
        let tail_budget = self.max.saturating_sub(head_end + key_bytes);
        let mut tail_start = window.len() - tail_budget.min(window.len());
        if let Some(nl) = window[tail_start..].iter().position(|&b| b == b'\n') {
            if nl < (window.len() - tail_start) / 4 {
                tail_start += nl + 1;
            }
        }
        if tail_start == window.len() - tail_budget.min(window.len()) {
            tail_start = char_start_forward(&window, tail_start);
        }
        let tail = &window[tail_start..];
        let tail_offset = total - tail.len() as u64;

        let mut text = String::new();
        let mut shown = 0u64;
        let mut at = 0u64; // raw offset reached
        let mut piece = |text: &mut String, start: u64, bytes: &[u8], at: &mut u64| {
            if start > *at {
                if !text.is_empty() && !text.ends_with('\n') {
                    text.push('\n');
                }
                text.push_str(&format!("[… {} bytes omitted …]\n", start - *at));
            }
            text.push_str(&strip_control(&String::from_utf8_lossy(bytes)));
            *at = start + bytes.len() as u64;
            shown += bytes.len() as u64;
        };
        piece(&mut text, 0, &self.head[..head_end], &mut at);
        let mut key_lines = 0;
        let head_end_offset = at;
        for k in keys
            .iter()
            .filter(|k| k.start >= head_end_offset && k.start < tail_offset)
        {
            piece(&mut text, k.start, &k.bytes, &mut at);
            key_lines += 1;
        }
        piece(&mut text, tail_offset, tail, &mut at);
        Captured {
            text,
            total_bytes: total,
            omitted_bytes: total - shown,
            key_lines,
        }
    }
}

/// Largest index ≤ `i` that does not split a UTF-8 sequence.
fn char_start_back(b: &[u8], mut i: usize) -> usize {
    let floor = i.saturating_sub(3);
    while i > floor && i < b.len() && (b[i] & 0xc0) == 0x80 {
        i -= 1;
    }
    i
}

/// Smallest index ≥ `i` that does not split a UTF-8 sequence.
fn char_start_forward(b: &[u8], mut i: usize) -> usize {
    let ceil = (i + 3).min(b.len());
    while i < ceil && (b[i] & 0xc0) == 0x80 {
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    fn capture(max: usize, chunks: &[&[u8]]) -> Captured {
        let mut c = StreamClip::new(max);
        for ch in chunks {
            c.push(ch);
        }
        c.finish()
    }

    #[test]
    fn short_output_is_kept_whole_and_cleaned() {
        let c = capture(
            100,
            &[b"\x1b[31mred\x1b[0m\n10%\r50%\r100%\n", b"ab\x08c\n"],
        );
        assert_eq!(c.text, "red\n100%\nac\n");
        assert_eq!(c.total_bytes, 31);
        assert_eq!(c.omitted_bytes, 0);
        let empty = capture(100, &[]);
        assert_eq!(empty, Captured::default());
    }

    #[test]
    fn long_output_keeps_head_and_tail_with_a_counted_marker() {
        let lines: String = (0..10_000).map(|i| format!("line {i:05}\n")).collect();
        // Fed in uneven chunks, as a pipe delivers it.
        let bytes = lines.as_bytes();
        let chunks: Vec<&[u8]> = bytes.chunks(777).collect();
        let c = capture(1000, &chunks);
        assert_eq!(c.total_bytes, bytes.len() as u64);
        assert!(
            c.text.starts_with("line 00000\nline 00001\n"),
            "{}",
            &c.text[..40]
        );
        assert!(c.text.ends_with("line 09999\n"));
        let shown = bytes.len() as u64 - c.omitted_bytes;
        assert!(shown <= 1000 && shown > 800, "shown {shown}");
        let marker = format!("[… {} bytes omitted …]\n", c.omitted_bytes);
        assert!(c.text.contains(&marker), "{}", c.text);
        // Every kept line is whole.
        for l in c.text.lines().filter(|l| !l.starts_with("[…")) {
            assert!(l.len() == 10 && l.starts_with("line "), "{l:?}");
        }
        assert_eq!(c.key_lines, 0);
    }

    #[test]
    fn error_lines_from_the_middle_are_kept_in_order() {
        let mut out = String::new();
        for i in 0..5000 {
            out.push_str(&format!("ok {i}\n"));
            if i == 1000 {
                out.push_str("\x1b[1;31merror[E0308]\x1b[0m: mismatched types\n");
            }
            if i == 3000 {
                out.push_str("thread 'main' panicked at src/x.rs:3:5\n");
            }
        }
        let c = capture(2000, &[out.as_bytes()]);
        let e = c
            .text
            .find("error[E0308]: mismatched types\n")
            .expect("error kept");
        let p = c.text.find("thread 'main' panicked").expect("panic kept");
        assert!(e < p);
        assert_eq!(c.key_lines, 2);
        // Three gaps: head → error, error → panic, panic → tail.
        assert_eq!(c.text.matches(" bytes omitted …]").count(), 3, "{}", c.text);
        let gaps: u64 = c
            .text
            .lines()
            .filter_map(|l| l.strip_prefix("[… ")?.strip_suffix(" bytes omitted …]"))
            .map(|n| n.parse::<u64>().unwrap())
            .sum();
        assert_eq!(gaps, c.omitted_bytes);
        assert!(c.total_bytes - c.omitted_bytes <= 2000);
    }

    #[test]
    fn key_lines_have_a_budget_and_long_ones_are_cut() {
        let mut out = String::new();
        out.push_str(&"h".repeat(400));
        out.push('\n');
        for i in 0..2000 {
            out.push_str(&format!("FAILED test_{i}\n"));
        }
        out.push_str(&format!("error: {}\n", "x".repeat(5000)));
        out.push_str(&"t\n".repeat(2000));
        let c = capture(1000, &[out.as_bytes()]);
        let kept_keys: usize = c.text.lines().filter(|l| l.starts_with("FAILED")).count();
        assert!(kept_keys > 0 && kept_keys <= 200 / 14, "{kept_keys}");
        assert_eq!(c.key_lines, kept_keys);
        assert!(c.total_bytes - c.omitted_bytes <= 1000);

        // A single long key line is cut to MAX_KEY_LINE.
        let mut out = "a\n".repeat(3000);
        out.push_str(&format!("fatal: {}\n", "y".repeat(5000)));
        out.push_str(&"b\n".repeat(3000));
        let c = capture(4000, &[out.as_bytes()]);
        let line = c.text.lines().find(|l| l.starts_with("fatal: ")).unwrap();
        assert_eq!(line.len(), MAX_KEY_LINE);
    }

    #[test]
    fn key_line_heuristic() {
        for yes in [
            "error: could not compile `x`",
            "Error: boom",
            "FAILED tests/test_a.py::test_b",
            "test result: FAILED. 1 passed; 2 failed",
            "thread 'main' panicked at",
            "Traceback (most recent call last):",
            "AssertionError: 1 != 2",
            "java.lang.NullPointerException",
            "Segmentation fault (core dumped)",
            "\x1b[31merror\x1b[0m: red",
        ] {
            assert!(is_key_line(yes.as_bytes()), "{yes}");
        }
        for no in [
            "ok 1",
            "Compiling foo v0.1.0",
            "running 3 tests",
            "terror",
            "mirrors",
        ] {
            assert!(!is_key_line(no.as_bytes()), "{no}");
        }
    }

    #[test]
    fn cuts_do_not_split_characters() {
        let text = "é".repeat(5000); // two bytes each, no newline
        let c = capture(301, &[text.as_bytes()]);
        assert!(!c.text.contains('\u{fffd}'), "{}", c.text);
        assert!(c.omitted_bytes > 0);
    }

    #[test]
    fn tiny_budgets_still_say_what_was_left_out() {
        let c = capture(0, &[b"abcdef"]);
        assert_eq!(c.text, "[… 6 bytes omitted …]\n");
        assert_eq!(c.omitted_bytes, 6);
        let c = capture(5, &[b"0123456789"]);
        assert_eq!(c.total_bytes, 10);
        assert_eq!(c.total_bytes - c.omitted_bytes, 5);
        assert!(
            c.text.starts_with("01\n[… 5 bytes omitted …]\n"),
            "{:?}",
            c.text
        );
        assert!(c.text.ends_with("789"));
    }
}
