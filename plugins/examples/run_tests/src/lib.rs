//! `run_tests`: runs the project's tests with a command fixed by this
//! plugin's own configuration (`run_tests.json`, compiled in), never by
//! the model. See README.md.

use std::sync::OnceLock;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use toolhost_sdk::exec::{Program, ERROR_CODES};
use toolhost_sdk::{Context, SideEffect, Tool, ToolError};

/// The configuration, as built into the component.
const CONFIG_JSON: &str = include_str!("../run_tests.json");

/// Longest filter, in bytes.
const MAX_FILTER: usize = 200;

/// What `run_tests.json` says.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The test command: program, then its fixed arguments.
    pub argv: Vec<String>,
    /// A variable the filter is passed in (`NAME=filter`, as make takes
    /// it); without it the filter is appended as one argument, or refused
    /// when `filter_as_argument` is false too.
    #[serde(default)]
    pub filter_variable: Option<String>,
    #[serde(default)]
    pub filter_as_argument: bool,
    /// Environment variables set for every run (the host allows only its
    /// own list of names).
    #[serde(default)]
    pub env: Vec<(String, String)>,
    pub timeout_ms: u32,
}

/// The configuration, parsed once. A malformed file is a bug of this
/// build, caught by its unit tests.
pub fn config() -> &'static Config {
    static C: OnceLock<Config> = OnceLock::new();
    C.get_or_init(|| parse_config(CONFIG_JSON).expect("run_tests.json is valid"))
}

/// Parses and checks a configuration.
pub fn parse_config(text: &str) -> Result<Config, String> {
    let c: Config = serde_json::from_str(text).map_err(|e| e.to_string())?;
    if c.argv.first().is_none_or(|p| p.is_empty()) {
        return Err("argv must name a program".into());
    }
    Ok(c)
}

/// Arguments of `run_tests`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunTestsArgs {
    /// Run only the tests matching this name (letters, digits, `_:./-`;
    /// not starting with `-`). Omit to run them all.
    #[schemars(
        length(min = 1, max = 200),
        pattern(r"^[A-Za-z0-9_][A-Za-z0-9_:./-]*$")
    )]
    pub filter: Option<String>,
}

/// Result of `run_tests`.
#[derive(Debug, Serialize, JsonSchema, PartialEq, Eq)]
pub struct RunTestsOutput {
    /// Exit status 0.
    pub passed: bool,
    pub exit_code: Option<i32>,
    pub timed_out: bool,
    /// The command that ran (from the configuration).
    pub command: Vec<String>,
    pub duration_ms: u64,
    /// The runner's output, clipped head and tail by the host.
    pub stdout: String,
    pub stderr: String,
    pub stdout_omitted_bytes: u64,
    pub stderr_omitted_bytes: u64,
}

/// The command for `filter`: the configured one, the filter added as the
/// configuration says. Refuses a filter outside the pattern (the schema
/// says the same; this is the tool's own wall).
pub fn command_for(config: &Config, filter: Option<&str>) -> Result<Vec<String>, ToolError> {
    let mut argv = config.argv.clone();
    let Some(f) = filter else { return Ok(argv) };
    let ok = f.len() <= MAX_FILTER
        && f.chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
        && f.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_:./-".contains(c));
    if !ok {
        return Err(ToolError::new(
            "invalid_command",
            format!("filter `{f}`: use letters, digits and _:./- only, not starting with -"),
        )
        .field("/filter")
        .correctable());
    }
    match (&config.filter_variable, config.filter_as_argument) {
        (Some(var), _) => argv.push(format!("{var}={f}")),
        (None, true) => argv.push(f.to_owned()),
        (None, false) => {
            return Err(ToolError::new(
                "invalid_command",
                "this test runner takes no filter: omit it to run every test",
            )
            .field("/filter")
            .correctable())
        }
    }
    Ok(argv)
}

fn run_tests(_ctx: &Context, args: RunTestsArgs) -> Result<RunTestsOutput, ToolError> {
    let c = config();
    let argv = command_for(c, args.filter.as_deref())?;
    let mut program = Program::new(argv.clone()).timeout_ms(c.timeout_ms);
    for (k, v) in &c.env {
        program = program.env(k.clone(), v.clone());
    }
    let done = program.run()?;
    Ok(RunTestsOutput {
        passed: done.exit_code == Some(0) && !done.timed_out,
        exit_code: done.exit_code,
        timed_out: done.timed_out,
        command: argv,
        duration_ms: done.duration_ms,
        stdout: String::from_utf8_lossy(&done.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&done.stderr).into_owned(),
        stdout_omitted_bytes: done.stdout_omitted_bytes,
        stderr_omitted_bytes: done.stderr_omitted_bytes,
    })
}

/// `PASSED` or `FAILED` with the command, then the output.
pub fn render(out: &RunTestsOutput) -> String {
    let verdict = match (out.passed, out.timed_out) {
        (true, _) => "PASSED".to_owned(),
        (false, true) => "FAILED (timed out)".to_owned(),
        (false, false) => match out.exit_code {
            Some(code) => format!("FAILED (exit {code})"),
            None => "FAILED (killed)".to_owned(),
        },
    };
    let mut s = format!(
        "{verdict}: {} ({} ms)\n",
        out.command.join(" "),
        out.duration_ms
    );
    for (name, text, omitted) in [
        ("stdout", &out.stdout, out.stdout_omitted_bytes),
        ("stderr", &out.stderr, out.stderr_omitted_bytes),
    ] {
        if text.is_empty() {
            continue;
        }
        s.push_str(&format!("--- {name}"));
        if omitted > 0 {
            s.push_str(&format!(" ({omitted} bytes omitted)"));
        }
        s.push_str(" ---\n");
        s.push_str(text);
        if !text.ends_with('\n') {
            s.push('\n');
        }
    }
    s
}

/// The plugin's one tool. Its `needs.exec` is the configured program only.
pub fn tools() -> Vec<Tool> {
    let c = config();
    vec![Tool::new("run_tests", run_tests)
        .title("Run the project's tests")
        .description(format!(
            "Runs the project's test command, fixed by this tool's configuration: `{}`. \
             Optionally only the tests matching `filter`. Returns passed, the exit code and the \
             runner's output (clipped head and tail). A failing test run is a result \
             (passed: false), not an error. Reversible; read-only when nothing is writable.\n\
             Errors: denied (the program is not granted), exec_unavailable, invalid_command.",
            c.argv.join(" ")
        ))
        .side_effect(SideEffect::Reversible)
        .reads_files()
        .writes_files()
        .runs_program(c.argv[0].clone())
        .error_codes(ERROR_CODES)
        .timeout_ms(c.timeout_ms.saturating_add(5_000))
        .max_output_bytes(256 * 1024)
        .text(render)]
}

toolhost_sdk::plugin!(tools);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_in_configuration_is_valid() {
        let c = config();
        assert_eq!(c.argv[0], "make");
        assert_eq!(tools()[0].name(), "run_tests");
    }

    #[test]
    fn the_filter_cannot_become_an_option_or_a_command() {
        let c = config();
        assert_eq!(
            command_for(c, Some("unit/parser")).unwrap(),
            ["make", "--no-print-directory", "test", "TESTS=unit/parser"]
        );
        assert_eq!(command_for(c, None).unwrap(), c.argv);
        for bad in ["-j", "--eval=x", "a b", "a;rm", "$(x)", "a|b", ""] {
            let e = command_for(c, Some(bad)).unwrap_err();
            assert_eq!(e.code, "invalid_command", "{bad}");
        }
        let plain = parse_config(r#"{"argv":["cargo","test"],"timeout_ms":1}"#).unwrap();
        assert!(command_for(&plain, Some("x")).is_err());
        let arg =
            parse_config(r#"{"argv":["cargo","test"],"filter_as_argument":true,"timeout_ms":1}"#)
                .unwrap();
        assert_eq!(
            command_for(&arg, Some("x")).unwrap(),
            ["cargo", "test", "x"]
        );
        assert!(parse_config(r#"{"argv":[],"timeout_ms":1}"#).is_err());
    }

    #[test]
    fn text_leads_with_the_verdict() {
        let out = RunTestsOutput {
            passed: false,
            exit_code: Some(2),
            timed_out: false,
            command: vec!["make".into(), "test".into()],
            duration_ms: 5,
            stdout: "FAIL: test_x".into(),
            stderr: String::new(),
            stdout_omitted_bytes: 0,
            stderr_omitted_bytes: 0,
        };
        assert_eq!(
            render(&out),
            "FAILED (exit 2): make test (5 ms)\n--- stdout ---\nFAIL: test_x\n"
        );
    }
}
