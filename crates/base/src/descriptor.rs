//! Tool descriptors as plain Rust values: the one [`ToolDescriptor`] shape
//! the sandbox reads, the catalog and lint work on, and the lock file pins.
//!
//! The sandbox layer reads a plugin's `describe()` export and turns the WIT
//! records into these types (parsing the schemas it sends as text with
//! [`parse_schema_texts`]), so every other module (lint, schema, catalog,
//! pipeline, MCP, trust) works without touching wasmtime.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// How much a tool can change the world (A0–A3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SideEffect {
    /// A0: observes only.
    ReadOnly,
    /// A1: repeating the call has no further effect.
    Idempotent,
    /// A2: a change that can be undone or replayed.
    Reversible,
    /// A3: deletes, overwrites or sends.
    Irreversible,
}

impl SideEffect {
    /// The name used in observations and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            SideEffect::ReadOnly => "read-only",
            SideEffect::Idempotent => "idempotent",
            SideEffect::Reversible => "reversible",
            SideEffect::Irreversible => "irreversible",
        }
    }
}

/// What a tool needs from its sandbox.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Needs {
    pub fs_read: bool,
    pub fs_write: bool,
    pub network_hosts: Vec<String>,
    /// Native programs the tool may run through the `exec` import: names
    /// looked up on `PATH`, absolute paths, or [`ANY_PROGRAM`]. Checked by
    /// [`check_program`] (the lint refuses anything else). Left out of the
    /// JSON form when empty, so descriptors of tools that run nothing read
    /// as they did before the field existed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exec: Vec<String>,
}

/// The `needs.exec` entry meaning "whatever programs the caller grants".
pub const ANY_PROGRAM: &str = "any";

/// Longest `needs.exec` entry, in bytes.
pub const MAX_PROGRAM_BYTES: usize = 4096;

/// Whether `program` is a valid `needs.exec` entry: [`ANY_PROGRAM`], a bare
/// program name (no `/`, not `.` or `..`), or an absolute path without `.`
/// or `..` components; no control characters, no NUL, at most
/// [`MAX_PROGRAM_BYTES`]. The error says what is wrong.
pub fn check_program(program: &str) -> Result<(), String> {
    if program == ANY_PROGRAM {
        return Ok(());
    }
    if program.is_empty() {
        return Err("is empty".into());
    }
    if program.len() > MAX_PROGRAM_BYTES {
        return Err(format!("is longer than {MAX_PROGRAM_BYTES} bytes"));
    }
    if program.chars().any(char::is_control) {
        return Err("contains a control character".into());
    }
    if program.chars().any(char::is_whitespace) && !program.starts_with('/') {
        return Err(format!(
            "{program:?} contains whitespace: name one program, not a command line"
        ));
    }
    if let Some(rest) = program.strip_prefix('/') {
        if rest
            .split('/')
            .any(|c| c.is_empty() || c == "." || c == "..")
        {
            return Err(format!(
                "{program:?} is not a normalized absolute path (no empty, `.` or `..` components)"
            ));
        }
        return Ok(());
    }
    if program.contains('/') {
        return Err(format!(
            "{program:?} is a relative path; name a program on PATH (`cargo`) or an absolute path"
        ));
    }
    if program == "." || program == ".." {
        return Err(format!("{program:?} is not a program name"));
    }
    Ok(())
}

/// One tool, as its plugin describes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDescriptor {
    pub name: String,
    pub title: Option<String>,
    pub description: String,
    /// Parsed JSON Schema of the arguments.
    pub input_schema: Value,
    /// Parsed JSON Schema of a successful output.
    pub output_schema: Option<Value>,
    pub side_effect: SideEffect,
    pub needs: Needs,
    pub error_codes: Vec<String>,
    pub default_timeout_ms: u32,
    pub max_output_bytes: u32,
    /// The plugin can plan a call of this tool without performing it
    /// (`planner.dry-run`).
    #[serde(default)]
    pub supports_dry_run: bool,
    /// The plugin can tell whether a call of this tool took effect
    /// (`prober.probe`).
    #[serde(default)]
    pub supports_probe: bool,
    /// Short words of the tasks the tool is for (`rename`, `move`), from
    /// the plugin's optional `discovery` export: indexed by `find_tools`
    /// like the name. Left out of the JSON form when empty, so a tool
    /// without them reads (and is locked) as before the field existed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub keywords: Vec<String>,
    /// Whole task phrasings a user would write ("move the old logs into
    /// archive/"), from the same export; indexed by `find_tools`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub examples: Vec<String>,
}

/// Most keywords one tool may declare.
pub const MAX_KEYWORDS: usize = 24;
/// Longest keyword, in bytes.
pub const MAX_KEYWORD_BYTES: usize = 40;
/// Most examples one tool may declare.
pub const MAX_EXAMPLES: usize = 12;
/// Longest example, in bytes.
pub const MAX_EXAMPLE_BYTES: usize = 200;

/// Where a task word breaks [`check_task_words`]: which list, which entry
/// (`None`: the list as a whole) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskWordsProblem {
    /// `keywords` or `examples`.
    pub list: &'static str,
    pub index: Option<usize>,
    pub reason: String,
}

impl std::fmt::Display for TaskWordsProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.index {
            Some(i) => write!(f, "{} entry {i} {}", self.list, self.reason),
            None => write!(f, "{} {}", self.list, self.reason),
        }
    }
}

/// Whether a tool's keywords and examples are within bounds: at most
/// [`MAX_KEYWORDS`] keywords of 1..=[`MAX_KEYWORD_BYTES`] bytes and at most
/// [`MAX_EXAMPLES`] examples of 1..=[`MAX_EXAMPLE_BYTES`] bytes, each one
/// line (no control characters), keywords of at most three words, none
/// listed twice. Every problem found, in order.
pub fn check_task_words(keywords: &[String], examples: &[String]) -> Vec<TaskWordsProblem> {
    let mut out = Vec::new();
    let lists: [(&'static str, &[String], usize, usize); 2] = [
        ("keywords", keywords, MAX_KEYWORDS, MAX_KEYWORD_BYTES),
        ("examples", examples, MAX_EXAMPLES, MAX_EXAMPLE_BYTES),
    ];
    for (list, items, max_items, max_bytes) in lists {
        if items.len() > max_items {
            out.push(TaskWordsProblem {
                list,
                index: None,
                reason: format!("has {} entries; at most {max_items}", items.len()),
            });
        }
        let mut seen = std::collections::HashSet::new();
        for (i, item) in items.iter().enumerate() {
            let problem = |reason: String| TaskWordsProblem {
                list,
                index: Some(i),
                reason,
            };
            let trimmed = item.trim();
            if trimmed.is_empty() {
                out.push(problem("is empty".into()));
            } else if item.len() > max_bytes {
                out.push(problem(format!(
                    "is {} bytes; at most {max_bytes}",
                    item.len()
                )));
            } else if item.chars().any(char::is_control) {
                out.push(problem(
                    "contains a control character or line break; write one line".into(),
                ));
            } else if list == "keywords" && trimmed.split_whitespace().count() > 3 {
                out.push(problem(format!(
                    "{trimmed:?} has more than three words; a whole phrasing is an example"
                )));
            } else if !seen.insert(trimmed.to_lowercase()) {
                out.push(problem(format!("{trimmed:?} is listed twice")));
            }
        }
    }
    out
}

/// A tool's descriptor as the host read it from its plugin, or, when a
/// schema the plugin sent as text is not JSON, the tool's name and why.
pub type Described = Result<ToolDescriptor, (String, String)>;

/// Parses the schemas a plugin sends as JSON text (the contract's
/// `input-schema` and `output-schema`). The error names the schema that is
/// not JSON.
pub fn parse_schema_texts(
    input: &str,
    output: Option<&str>,
) -> Result<(Value, Option<Value>), String> {
    let input =
        serde_json::from_str(input).map_err(|e| format!("input-schema is not valid JSON: {e}"))?;
    let output = match output {
        Some(s) => Some(
            serde_json::from_str(s).map_err(|e| format!("output-schema is not valid JSON: {e}"))?,
        ),
        None => None,
    };
    Ok((input, output))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn needs_exec_takes_names_absolute_paths_or_any() {
        for ok in [
            "any",
            "cargo",
            "python3",
            "/usr/bin/make",
            "/opt/my tools/run",
        ] {
            assert!(check_program(ok).is_ok(), "{ok}");
        }
        for (bad, says) in [
            ("", "empty"),
            ("sh -c", "command line"),
            ("bin/cargo", "relative path"),
            ("./run", "relative path"),
            ("..", "not a program name"),
            ("/usr/../bin/sh", "normalized"),
            ("/usr//bin/sh", "normalized"),
            ("/", "normalized"),
            ("ca\u{7}rgo", "control character"),
        ] {
            let e = check_program(bad).unwrap_err();
            assert!(e.contains(says), "{bad:?}: {e}");
        }
        assert!(check_program(&"x".repeat(MAX_PROGRAM_BYTES + 1)).is_err());
    }

    #[test]
    fn schema_texts_parse_or_name_the_schema_that_is_not_json() {
        let (input, output) = parse_schema_texts(r#"{"type":"object"}"#, None).unwrap();
        assert_eq!(input, serde_json::json!({"type": "object"}));
        assert_eq!(output, None);
        let (_, output) = parse_schema_texts("true", Some(r#"{"type":"string"}"#)).unwrap();
        assert_eq!(output, Some(serde_json::json!({"type": "string"})));
        // The catalog reports the failing schema by this prefix.
        let e = parse_schema_texts("{", Some("{}")).unwrap_err();
        assert!(e.starts_with("input-schema is not valid JSON"), "{e}");
        let e = parse_schema_texts("{}", Some("[1,")).unwrap_err();
        assert!(e.starts_with("output-schema is not valid JSON"), "{e}");
    }

    #[test]
    fn task_words_are_bounded_one_line_and_unique() {
        let words = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(check_task_words(
            &words(&["rename", "move file"]),
            &words(&["move the old logs into archive/"])
        )
        .is_empty());
        let many = vec!["w".to_string(); MAX_KEYWORDS + 1];
        let p = check_task_words(&many, &[]);
        assert_eq!(p[0].to_string(), "keywords has 25 entries; at most 24");
        assert_eq!(p[1].to_string(), "keywords entry 1 \"w\" is listed twice");
        for (kw, ex, says) in [
            (
                vec!["x".repeat(41)],
                vec![],
                "keywords entry 0 is 41 bytes; at most 40",
            ),
            (vec![" ".into()], vec![], "keywords entry 0 is empty"),
            (vec!["a b c d".into()], vec![], "more than three words"),
            (
                vec![],
                vec!["x".repeat(201)],
                "examples entry 0 is 201 bytes; at most 200",
            ),
            (
                vec![],
                vec!["one\ntwo".into()],
                "examples entry 0 contains a control",
            ),
        ] {
            let p = check_task_words(&kw, &ex);
            assert!(p.len() == 1 && p[0].to_string().contains(says), "{p:?}");
        }
    }

    #[test]
    fn descriptors_without_task_words_serialize_as_before() {
        let d: ToolDescriptor = serde_json::from_value(serde_json::json!({
            "name": "file_view", "title": null, "description": "Reads a file.",
            "input_schema": {"type": "object"}, "output_schema": null,
            "side_effect": "read-only",
            "needs": {"fs_read": true, "fs_write": false, "network_hosts": []},
            "error_codes": [], "default_timeout_ms": 1, "max_output_bytes": 1
        }))
        .unwrap();
        assert!(d.keywords.is_empty() && d.examples.is_empty());
        let json = serde_json::to_string(&d).unwrap();
        assert!(
            !json.contains("keywords") && !json.contains("examples"),
            "{json}"
        );
        let d = ToolDescriptor {
            keywords: vec!["show".into()],
            ..d
        };
        assert!(serde_json::to_string(&d)
            .unwrap()
            .contains(r#""keywords":["show"]"#));
    }

    #[test]
    fn needs_without_exec_read_and_write_as_before() {
        let needs: Needs =
            serde_json::from_str(r#"{"fs_read":true,"fs_write":false,"network_hosts":[]}"#)
                .unwrap();
        assert!(needs.exec.is_empty());
        assert_eq!(
            serde_json::to_string(&needs).unwrap(),
            r#"{"fs_read":true,"fs_write":false,"network_hosts":[]}"#
        );
        let needs = Needs {
            exec: vec!["cargo".into()],
            ..needs
        };
        assert!(serde_json::to_string(&needs)
            .unwrap()
            .ends_with(r#""exec":["cargo"]}"#));
    }
}
