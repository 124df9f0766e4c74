//! Text hygiene for guest bytes: lossy UTF-8 ([`guest_text`]) and
//! [`strip_control`], which removes ANSI escapes, progress-bar rewrites and
//! other control sequences before anything reaches a model.
//!
//! [`escape_invisible`] (and [`escape_invisible_json`] for JSON text) makes
//! the characters a reader cannot see, or that reorder what they see,
//! visible in the model-facing text: bidi embeddings, overrides, isolates
//! and marks, zero-width characters, Unicode tags, invisible fillers and
//! the like ([`is_invisible`]) are written as `\u{202E}` (`\u202e` inside
//! JSON, where the escape keeps the value). The structured output keeps the
//! exact characters.

use std::borrow::Cow;
use std::fmt::Write as _;

/// Whether a reader cannot see `c` or it changes how the text around it is
/// shown: control characters other than a line feed and a tab, bidi
/// controls (U+061C, U+200E/F, U+202A–U+202E, U+2066–U+2069), zero-width
/// and invisible formatting characters (U+200B–U+200D, U+2060–U+2064, the
/// byte order mark), line and paragraph separators, invisible fillers and
/// separators (soft hyphen, U+034F, U+115F/U+1160, U+17B4/U+17B5,
/// U+180B–U+180F, U+3164, U+FFA0), interlinear annotation marks, musical
/// formatting marks, Unicode tags (U+E0000–U+E007F) and variation
/// selectors other than the text and emoji presentation ones (U+FE00–U+FE0D,
/// U+E0100–U+E01EF), which can carry hidden text.
pub fn is_invisible(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(
            c,
            '\u{00AD}'
                | '\u{034F}'
                | '\u{061C}'
                | '\u{115F}'
                | '\u{1160}'
                | '\u{17B4}'
                | '\u{17B5}'
                | '\u{180B}'..='\u{180F}'
                | '\u{200B}'..='\u{200F}'
                | '\u{2028}'..='\u{202E}'
                | '\u{2060}'..='\u{206F}'
                | '\u{3164}'
                | '\u{FE00}'..='\u{FE0D}'
                | '\u{FEFF}'
                | '\u{FFA0}'
                | '\u{FFF9}'..='\u{FFFB}'
                | '\u{1D173}'..='\u{1D17A}'
                | '\u{E0000}'..='\u{E007F}'
                | '\u{E0100}'..='\u{E01EF}'
        )
}

/// Whether `s` may hold an invisible character: every one is outside
/// printable ASCII.
fn may_hold_invisible(s: &str) -> bool {
    s.bytes()
        .any(|b| b >= 0x7f || (b < 0x20 && b != b'\n' && b != b'\t'))
}

/// `s` with each invisible character ([`is_invisible`]) written as
/// `\u{XXXX}`.
pub fn escape_invisible(s: &str) -> Cow<'_, str> {
    if !may_hold_invisible(s) || !s.chars().any(is_invisible) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        if is_invisible(c) {
            let _ = write!(out, "\\u{{{:04X}}}", c as u32);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// JSON text `s` with each invisible character written as its JSON escape
/// (`\u202e`; a surrogate pair above U+FFFF): the text still parses to
/// the same value. (Invisible characters occur only inside strings: JSON's
/// own syntax is ASCII, and serializers escape C0 controls already.)
pub fn escape_invisible_json(s: &str) -> Cow<'_, str> {
    if !may_hold_invisible(s) || !s.chars().any(is_invisible) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    let mut units = [0u16; 2];
    for c in s.chars() {
        if is_invisible(c) {
            for u in c.encode_utf16(&mut units) {
                let _ = write!(out, "\\u{:04x}", u);
            }
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Lossy-decodes raw guest bytes and strips control sequences.
pub fn guest_text(bytes: &[u8]) -> String {
    strip_control(&String::from_utf8_lossy(bytes))
}

/// Whether `s` holds anything [`strip_control`] would change.
pub(super) fn needs_cleaning(s: &str) -> bool {
    use toolhost_compact_json::swar;
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
