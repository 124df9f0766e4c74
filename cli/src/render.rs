//! How `toolhost call` and `toolhost plan` print an observation.
//!
//! A program reading the output gets the observation as JSON: when stdout
//! is not a terminal, or with `--json` (`--pretty` indents it). A person at
//! a terminal gets what the model would read instead: one status line
//! (status, tool, error code, time, fuel, what else happened) and then the
//! observation's model-facing `text`, whatever the host or the plugin put
//! there. The observation is rendered from its JSON form, so a field added
//! to it later is never lost from the `--json` output and a change to the
//! text shows without a change here.

use serde_json::Value;

/// What the caller asked for and where the output goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// The observation as one line of JSON.
    Json,
    /// The observation as indented JSON.
    PrettyJson,
    /// The status line and the model-facing text, for a person.
    Readable,
}

impl Format {
    /// `--json` and `--pretty` decide when given; otherwise a terminal gets
    /// [`Format::Readable`] and anything else compact JSON.
    pub fn choose(json: bool, pretty: bool, terminal: bool) -> Format {
        match (json, pretty, terminal) {
            (_, true, _) => Format::PrettyJson,
            (true, false, true) => Format::PrettyJson,
            (true, false, false) => Format::Json,
            (false, false, true) => Format::Readable,
            (false, false, false) => Format::Json,
        }
    }
}

/// The observation (as JSON) in the chosen format, without a final line
/// break.
pub fn observation(obs: &Value, format: Format) -> String {
    match format {
        Format::Json => obs.to_string(),
        Format::PrettyJson => serde_json::to_string_pretty(obs).unwrap_or_else(|_| obs.to_string()),
        Format::Readable => readable(obs),
    }
}

fn readable(obs: &Value) -> String {
    let str_of = |v: &Value| v.as_str().unwrap_or("").to_string();
    let status = str_of(&obs["status"]);
    let mut head = format!("{status} · {}", str_of(&obs["tool"]));
    if let Some(code) = obs["error"]["code"].as_str().filter(|c| *c != status) {
        head.push_str(&format!(" · {code}"));
    }
    let mut facts = Vec::new();
    if let Some(us) = obs["usage"]["wall_time_us"].as_u64() {
        facts.push(format!("{:.1} ms", us as f64 / 1000.0));
    }
    if let Some(fuel) = obs["usage"]["fuel_consumed"].as_u64() {
        facts.push(format!("{} fuel", thousands(fuel)));
    }
    if let Some(wait) = obs["usage"]["wait_us"].as_u64().filter(|w| *w > 0) {
        facts.push(format!("waited {:.1} ms", wait as f64 / 1000.0));
    }
    if obs["effects"]["replayed"] == Value::Bool(true) {
        facts.push("replayed".into());
    }
    if let Some(n) = obs["redactions"]
        .as_array()
        .map(Vec::len)
        .filter(|n| *n > 0)
    {
        facts.push(format!("{n} redacted"));
    }
    if !obs["truncated"].is_null() {
        facts.push("text clipped".into());
    }
    if !facts.is_empty() {
        head.push_str(&format!(" ({})", facts.join(", ")));
    }
    let mut out = head;
    let text = str_of(&obs["text"]);
    if !text.is_empty() {
        out.push('\n');
        out.push_str(text.trim_end_matches('\n'));
    }
    for stream in ["stdout", "stderr"] {
        let log = str_of(&obs["logs"][stream]);
        if !log.trim().is_empty() {
            out.push_str(&format!("\n--- the tool's {stream}:\n{}", log.trim_end()));
        }
    }
    if let Some(key) = obs["effects"]["idempotency_key"].as_str() {
        out.push_str(&format!("\nidempotency key: {key}"));
    }
    out.push_str("\n(the whole observation: --json)");
    out
}

/// `1234567` → `1,234,567`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_terminal_gets_the_readable_form_and_a_pipe_json() {
        assert_eq!(Format::choose(false, false, true), Format::Readable);
        assert_eq!(Format::choose(false, false, false), Format::Json);
        assert_eq!(Format::choose(true, false, true), Format::PrettyJson);
        assert_eq!(Format::choose(true, false, false), Format::Json);
        assert_eq!(Format::choose(false, true, false), Format::PrettyJson);
        assert_eq!(Format::choose(true, true, true), Format::PrettyJson);
    }

    #[test]
    fn the_readable_form_is_the_status_line_then_the_text() {
        let obs = json!({
            "status": "error", "tool": "file_view", "text": "not_found at /path: x\n",
            "error": {"code": "not_found"},
            "usage": {"wall_time_us": 1260, "fuel_consumed": 27061, "wait_us": 0},
            "effects": {"replayed": false, "idempotency_key": null},
            "logs": {"stdout": "", "stderr": "warn: one\n"},
            "redactions": [], "truncated": null,
        });
        let out = observation(&obs, Format::Readable);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines[0],
            "error · file_view · not_found (1.3 ms, 27,061 fuel)"
        );
        assert_eq!(lines[1], "not_found at /path: x");
        assert!(out.contains("--- the tool's stderr:\nwarn: one"), "{out}");
        assert!(!out.contains("stdout"), "{out}");
        assert!(out.ends_with("(the whole observation: --json)"), "{out}");
    }

    #[test]
    fn json_forms_keep_every_field() {
        let obs = json!({"status": "ok", "tool": "t", "text": "x", "new_field": [1]});
        let compact: Value = serde_json::from_str(&observation(&obs, Format::Json)).unwrap();
        let pretty: Value = serde_json::from_str(&observation(&obs, Format::PrettyJson)).unwrap();
        assert_eq!(compact, obs);
        assert_eq!(pretty, obs);
        assert!(!observation(&obs, Format::Json).contains('\n'));
    }

    #[test]
    fn thousands_are_separated() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(2_000_000_000), "2,000,000,000");
    }
}
