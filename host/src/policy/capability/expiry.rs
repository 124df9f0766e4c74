//! Token expiries: durations (`30s`, `1h30m`, via `humantime`), RFC 3339
//! times (via `chrono`) and unix seconds, and how an expiry is shown.

use super::*;

pub(super) fn unix_secs(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// What an expiry may be, for error messages.
pub(super) const EXPIRY_FORMS: &str = "use a duration (30s, 10m, 2h, 7d, 1h30m), an RFC 3339 time \
     (2026-01-01T00:00:00Z, 2026-01-01T02:00:00+02:00) or unix seconds";

/// Parses an expiry into unix seconds: a duration from `now` (`30s`, `10m`,
/// `2h`, `7d`, or a sequence such as `1h30m`; read by [`humantime`], which
/// also knows `w`, `M` (30.44 days) and `y`), an RFC 3339 time
/// (`2026-01-01T00:00:00Z`, `2026-01-01T02:00:00+02:00`; read by
/// [`chrono`]; fractions of a second are dropped and a leap second counts as
/// `:59`), or bare unix seconds (`1767225600`). Durations are counted in
/// whole seconds from the whole second of `now`.
pub fn parse_expiry(s: &str, now: SystemTime) -> Result<u64, CapError> {
    let s = s.trim();
    if s.contains(':') || s.bytes().all(|b| b.is_ascii_digit()) {
        return parse_absolute_expiry(s);
    }
    let span = humantime::parse_duration(s)
        .map_err(|e| malformed(format!("`{s}` is not an expiry ({e}): {EXPIRY_FORMS}")))?;
    unix_secs(now)
        .checked_add(span.as_secs())
        .ok_or_else(|| malformed(format!("expiry `{s}` is too far in the future")))
}

/// An absolute expiry: unix seconds or RFC 3339.
pub(super) fn parse_absolute_expiry(s: &str) -> Result<u64, CapError> {
    let s = s.trim();
    if s.is_empty() {
        return Err(malformed(format!("an empty expiry: {EXPIRY_FORMS}")));
    }
    if s.bytes().all(|b| b.is_ascii_digit()) {
        return s
            .parse()
            .map_err(|_| malformed(format!("expiry `{s}` is too large")));
    }
    let time = chrono::DateTime::parse_from_rfc3339(s)
        .map_err(|e| malformed(format!("`{s}` is not an expiry ({e}): {EXPIRY_FORMS}")))?;
    u64::try_from(time.timestamp()).map_err(|_| malformed(format!("expiry `{s}` lies before 1970")))
}

pub use crate::text::format_rfc3339;
