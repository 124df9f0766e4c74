//! Clipping text to a byte budget: head and tail kept around a marker line
//! ([`clip_head_tail`]), or a short string cut with `…` ([`clip_short`]),
//! every cut on a char boundary.

use super::Truncation;

/// The hint [`clip_head_tail`] gives when nothing more specific is known.
pub const DEFAULT_TRUNCATION_HINT: &str = "The middle of the text was left out; the head and \
     tail are shown. Ask for a narrower part (an offset and limit, a page, or a more specific \
     query) to see the rest.";

/// Fixed bytes of the marker `\n[… N bytes omitted …]\n` besides the number.
pub(super) const MARKER_FIXED_BYTES: usize = "\n[… ".len() + " bytes omitted …]\n".len();

/// Largest char boundary ≤ `i`.
pub(super) fn floor_boundary(s: &str, mut i: usize) -> usize {
    if i >= s.len() {
        return s.len();
    }
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// Smallest char boundary ≥ `i`.
pub(super) fn ceil_boundary(s: &str, mut i: usize) -> usize {
    if i >= s.len() {
        return s.len();
    }
    while !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

pub(super) fn decimal_digits(mut n: usize) -> usize {
    let mut d = 1;
    while n >= 10 {
        n /= 10;
        d += 1;
    }
    d
}

/// Clips `s` to at most `max_bytes`, keeping its head and tail and putting a
/// marker line in the middle, e.g. `\n[… 12345 bytes omitted …]\n`.
///
/// Cuts fall on char boundaries and, when a line break is near (within a
/// quarter of the kept part), on line boundaries. The result is at most
/// `max_bytes` long, except that the marker is always present: for a
/// `max_bytes` smaller than the marker, the result is the marker alone.
/// Returns `None` as truncation when `s` already fits (and is returned as is).
pub fn clip_head_tail(s: &str, max_bytes: usize) -> (String, Option<Truncation>) {
    let len = s.len();
    let Some((head_end, tail_start)) = clip_bounds(s, max_bytes) else {
        return (s.to_owned(), None);
    };
    let omitted = tail_start - head_end;
    let out = join_head_tail(s, head_end, tail_start);
    let truncation = Truncation {
        original_bytes: len as u64,
        kept_bytes: (len - omitted) as u64,
        omitted_bytes: omitted as u64,
        hint: DEFAULT_TRUNCATION_HINT.to_owned(),
        artifact: None,
        follow_up: None,
    };
    (out, Some(truncation))
}

/// `s[..head_end]`, the marker line for the bytes up to `tail_start`,
/// then `s[tail_start..]` (both cuts on char boundaries).
pub(super) fn join_head_tail(s: &str, head_end: usize, tail_start: usize) -> String {
    let head = &s[..head_end];
    let tail = &s[tail_start..];
    let mut out = String::with_capacity(head.len() + tail.len() + MARKER_FIXED_BYTES + 20);
    out.push_str(head);
    if !head.is_empty() && !head.ends_with('\n') {
        out.push('\n');
    }
    out.push_str("[… ");
    out.push_str(&(tail_start - head_end).to_string());
    out.push_str(" bytes omitted …]");
    if !tail.is_empty() {
        out.push('\n');
    }
    out.push_str(tail);
    out
}

/// Where [`clip_head_tail`] cuts `s` for `max_bytes`: the end of the head
/// and the start of the tail (both on char boundaries, `head_end <=
/// tail_start`), or `None` when `s` fits whole.
pub fn clip_bounds(s: &str, max_bytes: usize) -> Option<(usize, usize)> {
    let len = s.len();
    if len <= max_bytes {
        return None;
    }
    let budget = max_bytes.saturating_sub(MARKER_FIXED_BYTES + decimal_digits(len));
    let head_budget = budget / 2;
    let tail_budget = budget - head_budget;

    let mut head_end = floor_boundary(s, head_budget);
    if let Some(nl) = s[..head_end].rfind('\n') {
        if nl + 1 >= head_end - head_end / 4 {
            head_end = nl + 1;
        }
    }
    let mut tail_start = ceil_boundary(s, len - tail_budget);
    if tail_start < len {
        if let Some(nl) = s[tail_start..].find('\n') {
            if nl < (len - tail_start) / 4 {
                tail_start += nl + 1;
            }
        }
    }
    Some((head_end, tail_start.max(head_end)))
}

/// Clips a short string to `max_bytes` on a char boundary, ending it with `…`
/// when cut.
pub(super) fn clip_short(s: &str, max_bytes: usize) -> String {
    if s.len() <= max_bytes {
        return s.to_owned();
    }
    let end = floor_boundary(s, max_bytes.saturating_sub('…'.len_utf8()));
    let mut out = String::with_capacity(end + 3);
    out.push_str(&s[..end]);
    out.push('…');
    out
}
