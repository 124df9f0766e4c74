//! Text hygiene for guest bytes: lossy UTF-8 ([`guest_text`]) and
//! [`strip_control`], which removes ANSI escapes, progress-bar rewrites and
//! other control sequences before anything reaches a model. `strip_control`
//! is the exec sandbox's (`toolhost_exec::text`), which cleans a program's
//! output the same way; it is re-exported here.
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

pub use toolhost_exec::text::strip_control;

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
