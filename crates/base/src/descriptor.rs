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
