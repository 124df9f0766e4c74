//! Where a window of a spilled output may end, so that no record is cut
//! across two windows.
//!
//! A spilled output (`toolhost::tools::artifact`) is read back in windows: the
//! head shown with the spill, then each `artifact_view` window. Each ends
//! on a boundary of the content when one falls inside it:
//!
//! - **JSON** (an object or array, as the pipeline keeps outputs): the end
//!   of an element of the largest array (by bytes), the records a large
//!   output is made of (a search's matches, a file's lines), and the end of
//!   the content;
//! - **anything else** (text): the end of a line (just after its `\n`) and
//!   the end of the content.
//!
//! A window with no boundary in it (one element larger than the window)
//! ends on a character boundary as before, so every window moves on.
//! Windows start where the one before ended: offsets stay exact, and the
//! windows laid end to end are the content byte for byte.

/// The boundaries of one content, in increasing order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Boundaries {
    /// Offsets just after a record (never 0); the content's length last.
    ends: Vec<usize>,
}

impl Boundaries {
    /// The boundaries of `content`.
    pub fn of(content: &[u8]) -> Boundaries {
        let mut ends = match largest_array(content) {
            Some(start) => element_ends(content, start),
            None if looks_like_json(content) => Vec::new(),
            None => content
                .iter()
                .enumerate()
                .filter(|&(_, &b)| b == b'\n')
                .map(|(i, _)| i + 1)
                .collect(),
        };
        if ends.last() != Some(&content.len()) && !content.is_empty() {
            ends.push(content.len());
        }
        Boundaries { ends }
    }

    /// The last boundary in `from + 1 ..= to`, if any.
    pub fn last_within(&self, from: usize, to: usize) -> Option<usize> {
        let after = self.ends.partition_point(|&e| e <= to);
        self.ends[..after].last().copied().filter(|&e| e > from)
    }
}

/// Whether `content` is a JSON object or array whose brackets balance
/// (strings skipped): the shape of every output the pipeline keeps.
fn looks_like_json(content: &[u8]) -> bool {
    matches!(
        content.iter().find(|b| !b.is_ascii_whitespace()),
        Some(b'{' | b'[')
    ) && walk(content, 0, |_, _, _| {}).is_some()
}

/// Walks the JSON structure of `content` from `start`, calling
/// `on(byte, at, depth)` for every bracket, brace and comma outside
/// strings (`depth` counted before an opening and after a closing one).
/// `None` when the brackets do not balance or a string is not closed.
fn walk(content: &[u8], start: usize, mut on: impl FnMut(u8, usize, usize)) -> Option<()> {
    let mut depth = 0usize;
    let mut stack: Vec<u8> = Vec::new();
    let mut i = start;
    while i < content.len() {
        let b = content[i];
        match b {
            b'"' => {
                i += 1;
                // To the closing quote, over escapes.
                loop {
                    match content.get(i)? {
                        b'\\' => i += 2,
                        b'"' => break,
                        _ => i += 1,
                    }
                }
            }
            b'[' | b'{' => {
                on(b, i, depth);
                stack.push(if b == b'[' { b']' } else { b'}' });
                depth += 1;
            }
            b']' | b'}' => {
                if stack.pop()? != b {
                    return None;
                }
                depth -= 1;
                on(b, i, depth);
            }
            b',' => on(b, i, depth),
            _ => {}
        }
        i += 1;
    }
    stack.is_empty().then_some(())
}

/// Where the largest array of JSON `content` starts (its `[`), when the
/// content is JSON and holds an array.
fn largest_array(content: &[u8]) -> Option<usize> {
    if !looks_like_json(content) {
        return None;
    }
    let mut open: Vec<Option<usize>> = Vec::new();
    let mut best: Option<(usize, usize)> = None;
    walk(content, 0, |b, at, _| match b {
        b'[' => open.push(Some(at)),
        b'{' => open.push(None),
        b']' | b'}' => {
            if let Some(Some(start)) = open.pop() {
                let len = at + 1 - start;
                if best.is_none_or(|(_, l)| len > l) {
                    best = Some((start, len));
                }
            }
        }
        _ => {}
    })?;
    best.map(|(start, _)| start)
}

/// The ends of the elements of the array starting at `start` (each just
/// after the element's last byte, before its `,` or the closing `]`).
fn element_ends(content: &[u8], start: usize) -> Vec<usize> {
    let mut ends = Vec::new();
    // Depths from the array's `[` (depth 0): its elements' commas are at
    // depth 1, its `]` closes back to 0. The walk stops at the first
    // closing bracket after it, which has no opening one in the walk.
    let _ = walk(content, start, |b, at, depth| match b {
        b',' if depth == 1 => ends.push(at),
        // Not after `[]`: an empty array has no element.
        b']' if depth == 0
            && content[start + 1..at]
                .iter()
                .any(|c| !c.is_ascii_whitespace()) =>
        {
            ends.push(at)
        }
        _ => {}
    });
    // Whitespace before a `,` or `]` is not part of the element.
    for e in &mut ends {
        while content[*e - 1].is_ascii_whitespace() {
            *e -= 1;
        }
    }
    ends
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ends(s: &str) -> Vec<usize> {
        Boundaries::of(s.as_bytes()).ends
    }

    #[test]
    fn json_ends_after_each_element_of_the_largest_array() {
        let s = r#"{"a":[1,2],"matches":[{"x":"],[,"},{"y":[3]}],"n":1}"#;
        let first = s.find(r#"{"x""#).unwrap();
        let second = s.find(r#"{"y""#).unwrap();
        assert_eq!(
            ends(s),
            vec![second - 1, s.find("],\"n\"").unwrap(), s.len()],
            "{s}"
        );
        assert_eq!(&s[first..second - 1], r#"{"x":"],[,"}"#);
        // Escaped quotes inside strings do not end them.
        let s = r#"["a\"],[","b"]"#;
        assert_eq!(ends(s), vec![9, 13, 14]);
        // An empty largest array has no element end; objects only.
        assert_eq!(ends("[]"), vec![2]);
        assert_eq!(ends(r#"{"a":{"b":1}}"#), vec![13]);
    }

    #[test]
    fn text_ends_after_each_line() {
        assert_eq!(ends("a\nbc\n"), vec![2, 5]);
        assert_eq!(ends("a\nbc"), vec![2, 4]);
        // Unbalanced JSON-looking text is text.
        assert_eq!(ends("{\"a\":[1,\n2"), vec![9, 10]);
        assert_eq!(ends(""), Vec::<usize>::new());
    }

    #[test]
    fn last_within_is_strictly_after_the_start() {
        let b = Boundaries {
            ends: vec![3, 7, 10],
        };
        assert_eq!(b.last_within(0, 9), Some(7));
        assert_eq!(b.last_within(3, 6), None);
        assert_eq!(b.last_within(3, 7), Some(7));
        assert_eq!(b.last_within(7, 100), Some(10));
        assert_eq!(b.last_within(10, 100), None);
    }
}
