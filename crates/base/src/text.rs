//! Small helpers for the text of messages.

use std::borrow::Cow;

/// `s` cut to at most `max` bytes on a character boundary, the cut marked
/// with `…` (which comes on top of `max`).
pub fn clip_bytes(s: &str, max: usize) -> Cow<'_, str> {
    if s.len() <= max {
        return Cow::Borrowed(s);
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    Cow::Owned(format!("{}…", &s[..end]))
}

/// Formats unix seconds as RFC 3339 UTC (`2026-01-01T00:00:00Z`); a time
/// beyond what a calendar date can hold is written as unix seconds.
pub fn format_rfc3339(secs: u64) -> String {
    i64::try_from(secs)
        .ok()
        .and_then(|s| chrono::DateTime::from_timestamp(s, 0))
        .map_or_else(
            || format!("unix time {secs}"),
            |t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clips_on_a_char_boundary() {
        assert_eq!(clip_bytes("short", 10), "short");
        assert_eq!(clip_bytes("abcdef", 3), "abc…");
        // "é" is two bytes: a cut inside it moves back before it.
        assert_eq!(clip_bytes("aé", 2), "a…");
    }
}
