//! Text hygiene for guest bytes: lossy UTF-8 ([`guest_text`]) and
//! [`strip_control`], which removes ANSI escapes, progress-bar rewrites and
//! other control sequences before anything reaches a model.

/// Lossy-decodes raw guest bytes and strips control sequences.
pub fn guest_text(bytes: &[u8]) -> String {
    strip_control(&String::from_utf8_lossy(bytes))
}

/// Whether `s` holds anything [`strip_control`] would change.
pub(super) fn needs_cleaning(s: &str) -> bool {
    use crate::swar;
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
pub(super) fn skip_escape(it: &mut Chars<'_>) {
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
pub(super) fn skip_csi(it: &mut Chars<'_>) {
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
pub(super) fn skip_string(it: &mut Chars<'_>) {
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
