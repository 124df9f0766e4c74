//! Units in names: a numeric field named like a duration or a size
//! (`timeout`, `delay`, `size`, `memory`, …) must carry its unit
//! (`timeout_ms`, `max_size_bytes`).

const DURATION_WORDS: &[&str] = &[
    "timeout",
    "delay",
    "interval",
    "duration",
    "ttl",
    "age",
    "wait",
    "period",
    "elapsed",
    "latency",
    "sleep",
    "backoff",
    "deadline",
    "cooldown",
    "expiry",
    "expiration",
    "lifetime",
    "retention",
    "time",
    "timestamp",
];
const SIZE_WORDS: &[&str] = &["size", "memory", "mem", "capacity", "quota", "bandwidth"];
const UNIT_WORDS: &[&str] = &[
    "ms",
    "msec",
    "msecs",
    "millis",
    "millisecond",
    "milliseconds",
    "s",
    "sec",
    "secs",
    "second",
    "seconds",
    "us",
    "usec",
    "micros",
    "microseconds",
    "ns",
    "nanos",
    "nanoseconds",
    "min",
    "mins",
    "minute",
    "minutes",
    "h",
    "hr",
    "hrs",
    "hour",
    "hours",
    "day",
    "days",
    "week",
    "weeks",
    "b",
    "byte",
    "bytes",
    "kb",
    "kib",
    "mb",
    "mib",
    "gb",
    "gib",
    "tb",
    "tib",
    "kilobytes",
    "megabytes",
    "gigabytes",
    "pages",
    "chars",
    "characters",
    "lines",
    "items",
    "entries",
    "rows",
    "tokens",
    "count",
];

/// Splits `snake_case`, `kebab-case` and `camelCase` into lowercase words.
pub(super) fn name_words(name: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut current = String::new();
    let mut prev_lower = false;
    for c in name.chars() {
        if c == '_' || c == '-' || c == '.' || c == ' ' {
            if !current.is_empty() {
                words.push(std::mem::take(&mut current));
            }
            prev_lower = false;
            continue;
        }
        if c.is_uppercase() && prev_lower && !current.is_empty() {
            words.push(std::mem::take(&mut current));
        }
        prev_lower = c.is_lowercase() || c.is_ascii_digit();
        current.extend(c.to_lowercase());
    }
    if !current.is_empty() {
        words.push(current);
    }
    words
}

/// `Some((kind, example))` when a numeric field name needs a unit.
pub(super) fn unit_needed(name: &str) -> Option<(&'static str, String)> {
    let words = name_words(name);
    if words.iter().any(|w| UNIT_WORDS.contains(&w.as_str())) {
        return None;
    }
    let base = name.to_owned();
    if words.iter().any(|w| DURATION_WORDS.contains(&w.as_str())) {
        return Some(("duration", format!("{base}_ms or {base}_s")));
    }
    if words.iter().any(|w| SIZE_WORDS.contains(&w.as_str())) {
        return Some(("size", format!("{base}_bytes")));
    }
    None
}
