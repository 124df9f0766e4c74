//! Trust in third-party plugins: what a plugin is, who vouches for it, where
//! it comes from and whether its words address the model.
//!
//! The sandbox bounds what a tool can *do*; this module bounds what a plugin
//! can *become* and *say*. Each concept is one small module with typed
//! errors, usable on its own; the catalog, the CLI and the lint command wire
//! them together:
//!
//! - [`lock`]: the lock file (`toolhost.lock`). Per plugin its source, the
//!   SHA-256 of its component bytes, its signer and each tool's definition
//!   (with a digest over its RFC 8785 canonical JSON). A loaded plugin is
//!   compared with its entry: a changed byte or definition is refused with a
//!   readable diff (the "rug pull"), an unknown plugin is refused until
//!   added.
//! - [`signature`]: SSH signatures (`ssh-keygen -Y sign -n toolhost`, the
//!   SSHSIG format git uses) checked against an `allowed_signers` file.
//! - [`oci`]: push and pull components as Wasm OCI artifacts
//!   (`oci://HOST[:PORT]/REPO[:TAG|@sha256:…]`), every digest verified, the
//!   signature carried in a manifest annotation.
//! - [`poison`]: descriptions and schema texts that address the model
//!   instead of describing the tool (hidden instructions, sensitive paths,
//!   invisible Unicode, URLs, out-of-proportion length), matched against
//!   every [`readings`] of a text: normalized, de-spaced, de-leeted, ROT13
//!   and decoded.
//!
//! - [`policy`]: the three applied together when a catalog loads a
//!   third-party plugin, with the refusal codes the catalog reports.
//!
//! The order at load time is lock → signature → lint: bytes that do not
//! match the lock never reach the signature check, and a plugin whose
//! signature fails is never described to the lint.

pub mod lock;
pub mod oci;
pub mod poison;
pub mod policy;
pub mod readings;
pub mod signature;

use sha2::{Digest, Sha256};

/// The prefix of every content digest this module writes.
pub const SHA256_PREFIX: &str = "sha256:";

/// `sha256:` followed by the lowercase hex SHA-256 of `bytes`: the form OCI
/// registries and the lock file use.
pub fn sha256_digest(bytes: &[u8]) -> String {
    format!("{SHA256_PREFIX}{}", hex::encode(Sha256::digest(bytes)))
}

/// Whether `text` is a well-formed `sha256:` digest (64 lowercase hex
/// digits after the prefix).
pub fn is_sha256_digest(text: &str) -> bool {
    text.strip_prefix(SHA256_PREFIX).is_some_and(|hex| {
        hex.len() == 64
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// A short, printable piece of `text` around the character index `at`:
/// about `radius` characters on either side, cut ends marked with `…`, and
/// invisible or control characters written as `\u{…}` so that a hidden
/// change is seen.
pub(crate) fn excerpt(text: &str, at: usize, radius: usize) -> String {
    let chars: Vec<char> = text.chars().collect();
    let at = at.min(chars.len());
    let start = at.saturating_sub(radius);
    let end = (at + radius).min(chars.len());
    let mut out = String::new();
    if start > 0 {
        out.push('…');
    }
    for &c in &chars[start..end] {
        push_visible(&mut out, c);
    }
    if end < chars.len() {
        out.push('…');
    }
    out
}

/// Appends `c`, or its `\u{…}` escape when it would not be seen.
pub(crate) fn push_visible(out: &mut String, c: char) {
    if c == '\n' {
        out.push_str("\\n");
    } else if c == '\t' {
        out.push_str("\\t");
    } else if c.is_control() || is_invisible(c) {
        out.push_str(&format!("\\u{{{:04X}}}", c as u32));
    } else {
        out.push(c);
    }
}

/// Characters that render as nothing or change the direction of the text
/// around them: zero-width characters, bidirectional controls, Unicode tag
/// characters, variation selectors of the supplement (which can encode bytes
/// one per selector), soft hyphen and other format characters a reader cannot
/// see. The ordinary variation selectors U+FE00–U+FE0F are left out: one
/// follows many emoji.
pub(crate) fn is_invisible(c: char) -> bool {
    matches!(c as u32,
        0x00AD            // soft hyphen
        | 0x034F          // combining grapheme joiner
        | 0x061C          // Arabic letter mark
        | 0x115F | 0x1160 // Hangul fillers
        | 0x17B4 | 0x17B5 // Khmer inherent vowels
        | 0x180B..=0x180F // Mongolian variation selectors and vowel separator
        | 0x200B..=0x200F // zero width space/joiners, LRM, RLM
        | 0x202A..=0x202E // bidi embeddings and overrides
        | 0x2060..=0x2064 // word joiner, invisible operators
        | 0x2066..=0x206F // bidi isolates, deprecated format characters
        | 0x3164          // Hangul filler
        | 0xFEFF          // zero width no-break space (BOM)
        | 0xFFA0          // halfwidth Hangul filler
        | 0xFFF9..=0xFFFB // interlinear annotation
        | 0x1D173..=0x1D17A // musical format characters
        | 0xE0000..=0xE007F // tag characters
        | 0xE0100..=0xE01EF // variation selectors supplement
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_have_the_oci_form() {
        let d = sha256_digest(b"");
        assert_eq!(
            d,
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert!(is_sha256_digest(&d));
        assert!(!is_sha256_digest(&d.to_uppercase()));
        assert!(!is_sha256_digest("sha256:abc"));
        assert!(!is_sha256_digest(&d.replace("sha256:", "sha512:")));
        assert!(!is_sha256_digest(&format!("{d}0")));
    }

    #[test]
    fn excerpts_are_short_and_show_hidden_characters() {
        let text = "a".repeat(100) + "\u{200B}b" + &"c".repeat(100);
        let e = excerpt(&text, 100, 5);
        assert_eq!(e, "…aaaaa\\u{200B}bccc…");
        assert_eq!(excerpt("short", 2, 10), "short");
        assert_eq!(excerpt("line\nnext", 4, 10), "line\\nnext");
        assert_eq!(excerpt("x\u{E0041}", 0, 4), "x\\u{E0041}");
    }
}
