//! Terminal text for a model: [`strip_control`] removes ANSI escapes,
//! progress-bar rewrites, backspaces and other control characters from a
//! program's output. The exec sandbox cleans what it captures with it, and
//! the host cleans Wasm guests' text with the same function.

use toolhost_compact_json::swar;

/// Whether `s` holds anything [`strip_control`] would change.
fn needs_cleaning(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        // Eight bytes at a time past words with no candidate: a control
        // character other than a line feed or a tab, DEL, or the lead
        // byte of a C1 control.
        if let Some(w) = swar::word(b, i) {
            let controls = swar::below(w, 0x20) & !swar::eq(w, b'\n') & !swar::eq(w, b'\t');
            if (controls | swar::eq(w, 0x7f) | swar::eq(w, 0xc2)) == 0 {
                i += 8;
                continue;
            }
        }
        let c = b[i];
        if (c < 0x20 && c != b'\n' && c != b'\t') || c == 0x7f {
            return true;
        }
        // C1 controls U+0080..U+009F are encoded C2 80..C2 9F.
        if c == 0xc2 && matches!(b.get(i + 1), Some(0x80..=0x9f)) {
            return true;
        }
        i += 1;
    }
    false
}

/// Cleans terminal output for a model: removes ANSI escape sequences (CSI,
/// OSC, DCS/SOS/PM/APC strings, two-byte escapes, and their 8-bit C1 forms),
/// resolves carriage-return and backspace overwriting, and drops every other
/// control character except `\n` and `\t`.
///
/// - `\r` followed by more text on the same line discards the line so far,
///   so a progress bar collapses to its final state (`10%\r50%\r100%` →
///   `100%`); `\r\n` is a plain line end and a trailing `\r` changes nothing.
/// - `\b` deletes the previous character of the current line.
/// - An escape string (OSC…) missing its terminator ends at the next line
///   break, so a stray `ESC ]` cannot swallow the rest of the output.
pub fn strip_control(s: &str) -> String {
    if !needs_cleaning(s) {
        return s.to_owned();
    }
    let mut out = String::with_capacity(s.len());
    let mut line_start = 0usize;
    let mut pending_cr = false;
    let mut it = s.chars().peekable();
    while let Some(c) = it.next() {
        match c {
            '\n' => {
                out.push('\n');
                line_start = out.len();
                pending_cr = false;
            }
            '\r' => pending_cr = true,
            '\u{8}' => {
                if !pending_cr && out.len() > line_start {
                    out.pop();
                }
            }
            '\u{1b}' => skip_escape(&mut it),
            '\u{9b}' => skip_csi(&mut it),
            '\u{90}' | '\u{98}' | '\u{9d}' | '\u{9e}' | '\u{9f}' => skip_string(&mut it),
            '\t' => {
                if pending_cr {
                    out.truncate(line_start);
                    pending_cr = false;
                }
                out.push('\t');
            }
            c if c.is_control() => {}
            c => {
                if pending_cr {
                    out.truncate(line_start);
                    pending_cr = false;
                }
                out.push(c);
            }
        }
    }
    out
}

type Chars<'a> = std::iter::Peekable<std::str::Chars<'a>>;

/// Skips what follows an ESC.
fn skip_escape(it: &mut Chars<'_>) {
    match it.peek().copied() {
        Some('[') => {
            it.next();
            skip_csi(it);
        }
        Some(']' | 'P' | 'X' | '^' | '_') => {
            it.next();
            skip_string(it);
        }
        // nF: intermediates, then one final byte (e.g. `ESC ( B`).
        Some('\u{20}'..='\u{2f}') => {
            while matches!(it.peek(), Some('\u{20}'..='\u{2f}')) {
                it.next();
            }
            if matches!(it.peek(), Some('\u{30}'..='\u{7e}')) {
                it.next();
            }
        }
        // Fp, Fe, Fs: one byte (e.g. `ESC 7`, `ESC =`, `ESC M`).
        Some('\u{30}'..='\u{7e}') => {
            it.next();
        }
        // A lone ESC: drop it alone.
        _ => {}
    }
}

/// Skips a CSI sequence after its introducer: parameter and intermediate
/// bytes, then the final byte. Stops early at anything else.
fn skip_csi(it: &mut Chars<'_>) {
    while let Some(&c) = it.peek() {
        match c {
            '\u{20}'..='\u{3f}' => {
                it.next();
            }
            '\u{40}'..='\u{7e}' => {
                it.next();
                return;
            }
            _ => return,
        }
    }
}

/// Skips a control string (OSC, DCS, …) up to its terminator: BEL, ST
/// (`ESC \` or U+009C), or, defensively, a line break (left in place).
fn skip_string(it: &mut Chars<'_>) {
    while let Some(&c) = it.peek() {
        match c {
            '\u{7}' | '\u{9c}' => {
                it.next();
                return;
            }
            '\u{1b}' => {
                it.next();
                if it.peek() == Some(&'\\') {
                    it.next();
                }
                return;
            }
            '\n' => return,
            _ => {
                it.next();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Asserts `strip_control(input) == expected` for each `(input, expected)`.
    fn assert_strips(cases: &[(&str, &str)]) {
        for &(input, expected) in cases {
            assert_eq!(strip_control(input), expected, "{input:?}");
        }
    }

    #[test]
    fn strip_plain_text_is_unchanged() {
        for s in ["", "hello", "a\tb\nc\n", "héllo ✓ 日本"] {
            assert_eq!(strip_control(s), s);
        }
    }

    #[test]
    fn strip_ansi_sequences() {
        assert_strips(&[
            ("\x1b[1;31merror\x1b[0m: x", "error: x"),
            ("\x1b[?25lhidden cursor\x1b[?25h", "hidden cursor"),
            ("a\x1b[2Kb", "ab"),
            // OSC 8 hyperlink with ST and an OSC title with BEL.
            (
                "\x1b]8;;https://x.dev\x1b\\link\x1b]8;;\x1b\\ done",
                "link done",
            ),
            ("\x1b]0;title\x07text", "text"),
            // Charset selection, keypad mode, save cursor.
            ("\x1b(Babc\x1b=\x1b7", "abc"),
            // DCS string.
            ("x\x1bPq#0;2;0;0;0\x1b\\y", "xy"),
            // 8-bit CSI and OSC.
            ("\u{9b}31mred\u{9b}0m", "red"),
            ("\u{9d}0;t\u{9c}ok", "ok"),
            // A lone ESC at the end, and ESC before a non-ASCII char.
            ("end\x1b", "end"),
            ("\x1bé", "é"),
            // An unterminated OSC ends at the line break.
            ("a\x1b]unterminated\nnext", "a\nnext"),
            // Truncated CSI.
            ("\x1b[31", ""),
        ]);
    }

    #[test]
    fn strip_resolves_progress_bars() {
        assert_strips(&[
            ("10%\r50%\r100%\ndone\n", "100%\ndone\n"),
            ("\r\x1b[K 10%\r\x1b[K 100%", " 100%"),
            // Shorter final state: no leftovers of the longer line.
            ("100%\r50%", "50%"),
            // CRLF is a line end; a trailing CR changes nothing.
            ("a\r\nb\r\n", "a\nb\n"),
            ("abc\r", "abc"),
            ("abc\r\r\n", "abc\n"),
            // Only the current line is rewritten.
            ("keep\nold\rnew", "keep\nnew"),
            ("x\r\tindented", "\tindented"),
        ]);
    }

    #[test]
    fn strip_backspaces() {
        assert_strips(&[
            ("abc\u{8}\u{8}X", "aX"),
            // Spinner.
            ("|\u{8}/\u{8}-\u{8}\\", "\\"),
            // Man-page overstrike.
            ("_\u{8}Bo\u{8}o", "Bo"),
            // Never crosses a line break or the start.
            ("a\n\u{8}\u{8}b", "a\nb"),
            ("\u{8}x", "x"),
            // Deletes a whole multibyte char.
            ("é\u{8}e", "e"),
        ]);
    }

    #[test]
    fn strip_other_controls() {
        assert_strips(&[("a\0b\x07c\x7fd\u{85}e\x0bf", "abcdef")]);
    }
}
