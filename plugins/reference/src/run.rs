//! `run_command`: runs one native program through the host's `exec` import.
//!
//! The host decides everything that matters before a process exists: the
//! program must be granted to the call (`argv[0]` against the token's
//! `exec` programs: the tool declares `any`), the working directory is a
//! path argument checked like any other, and the program runs in an OS
//! sandbox built from the call's grant (the granted workspace paths only,
//! no network, a cleared environment, a process-count bound), killed with
//! its whole tree at the deadline. This tool only shapes the answer: a
//! non-zero exit is a successful call with that `exit_code` (a failing test
//! run is a result, not a tool error).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use toolhost_sdk::exec::Program;
use toolhost_sdk::{Context, SideEffect, Tool, ToolError};

const DESCRIPTION: &str = "\
Runs one program (argv, no shell) in an OS sandbox: exit code and output.
For builds and tests (cargo test, pytest, make). Only programs the caller granted run (sh -c \
needs sh); it sees only the granted workspace paths, no network, a private /tmp.
A non-zero exit is a success with that exit_code. Output clipped head and tail.
Errors: denied, exec_unavailable, invalid_command.";

/// Most arguments in `argv`.
const MAX_ARGS: usize = 256;

/// Arguments of `run_command`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunArgs {
    /// Program then its arguments, e.g. ["cargo", "test"]; no shell
    /// interprets them.
    #[schemars(length(min = 1, max = 256), inner(length(min = 1, max = 4096)))]
    pub argv: Vec<String>,
    /// Working directory, relative to the workspace root.
    #[schemars(length(min = 1, max = 1024), extend("x-toolhost-path" = "read"))]
    pub cwd: Option<String>,
    /// Text written to the program's standard input.
    #[schemars(length(max = 1_048_576))]
    pub stdin: Option<String>,
    /// Wall-clock limit, ms (default and ceiling: the call's deadline).
    #[schemars(range(min = 1, max = 3_600_000))]
    pub timeout_ms: Option<u32>,
}

/// Result of `run_command`.
#[derive(Debug, Serialize, JsonSchema, PartialEq, Eq)]
pub struct RunOutput {
    /// Exit status; null when a signal ended the program.
    pub exit_code: Option<i32>,
    /// The signal that ended the program, if one did (9 after a timeout).
    pub signal: Option<i32>,
    /// The timeout or the call's deadline ended it.
    pub timed_out: bool,
    pub duration_ms: u64,
    /// Standard output, clipped head and tail (markers show the cuts).
    pub stdout: String,
    pub stderr: String,
    /// Bytes of stdout left out.
    pub stdout_omitted_bytes: u64,
    pub stderr_omitted_bytes: u64,
}

pub fn tool() -> Tool {
    Tool::new("run_command", run_command)
        .title("Run a program")
        .description(DESCRIPTION)
        .keywords(&[
            "run",
            "build",
            "compile",
            "test",
            "lint",
            "execute",
            "make",
            "check",
            "format",
            "benchmark",
            "type check",
            "script",
        ])
        .examples(&[
            "run the tests",
            "build the project",
            "compile the crate and show the errors",
            "run the linter on the code",
            "check that the code type checks",
            "format the code",
            "run cargo test for the parser module",
            "execute the script with python",
            "run make and report what fails",
            "show the git log of the last commits",
        ])
        .side_effect(SideEffect::Reversible)
        .reads_files()
        .writes_files()
        .runs_program("any")
        .error_codes(&["denied", "exec_unavailable", "invalid_command"])
        .timeout_ms(120_000)
        .max_output_bytes(512 * 1024)
        .text(render)
}

fn run_command(ctx: &Context, args: RunArgs) -> Result<RunOutput, ToolError> {
    if args.argv.len() > MAX_ARGS {
        return Err(ToolError::new(
            "invalid_command",
            format!("argv has {} items; at most {MAX_ARGS}", args.argv.len()),
        )
        .field("/argv")
        .correctable());
    }
    let mut program = Program::new(args.argv);
    if let Some(cwd) = &args.cwd {
        let guest = ctx.guest_path(cwd).map_err(|e| e.field("/cwd"))?;
        program = program.cwd(guest.to_string_lossy());
    }
    if let Some(stdin) = args.stdin {
        program = program.stdin(stdin.into_bytes());
    }
    if let Some(ms) = args.timeout_ms {
        program = program.timeout_ms(ms);
    }
    let done = program.run_as("invalid_command")?;
    Ok(RunOutput {
        exit_code: done.exit_code,
        signal: done.signal,
        timed_out: done.timed_out,
        duration_ms: done.duration_ms,
        stdout: String::from_utf8_lossy(&done.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&done.stderr).into_owned(),
        stdout_omitted_bytes: done.stdout_omitted_bytes,
        stderr_omitted_bytes: done.stderr_omitted_bytes,
    })
}

/// The model-facing text: one header line (how it ended, how long), then
/// each non-empty stream under its name and omitted count.
pub fn render(out: &RunOutput) -> String {
    use std::fmt::Write as _;
    let mut s = String::with_capacity(out.stdout.len() + out.stderr.len() + 128);
    let ended = match (out.timed_out, out.exit_code, out.signal) {
        (true, _, _) => "timed out (killed)".to_owned(),
        (false, Some(code), _) => format!("exit {code}"),
        (false, None, Some(sig)) => format!("killed by signal {sig}"),
        (false, None, None) => "ended".to_owned(),
    };
    let _ = writeln!(s, "{ended} after {} ms", out.duration_ms);
    for (name, text, omitted) in [
        ("stdout", &out.stdout, out.stdout_omitted_bytes),
        ("stderr", &out.stderr, out.stderr_omitted_bytes),
    ] {
        if text.is_empty() && omitted == 0 {
            continue;
        }
        if omitted > 0 {
            let _ = writeln!(s, "--- {name} ({omitted} bytes omitted) ---");
        } else {
            let _ = writeln!(s, "--- {name} ---");
        }
        s.push_str(text);
        if !text.ends_with('\n') {
            s.push('\n');
        }
    }
    if out.stdout.is_empty() && out.stderr.is_empty() {
        s.push_str("(no output)\n");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn out() -> RunOutput {
        RunOutput {
            exit_code: Some(0),
            signal: None,
            timed_out: false,
            duration_ms: 12,
            stdout: String::new(),
            stderr: String::new(),
            stdout_omitted_bytes: 0,
            stderr_omitted_bytes: 0,
        }
    }

    #[test]
    fn text_says_how_it_ended_and_what_was_cut() {
        assert_eq!(render(&out()), "exit 0 after 12 ms\n(no output)\n");
        let failed = RunOutput {
            exit_code: Some(101),
            stdout: "running 2 tests\n".into(),
            stderr: "error[E0308]: mismatched types".into(),
            stderr_omitted_bytes: 4096,
            ..out()
        };
        assert_eq!(
            render(&failed),
            "exit 101 after 12 ms\n--- stdout ---\nrunning 2 tests\n\
             --- stderr (4096 bytes omitted) ---\nerror[E0308]: mismatched types\n"
        );
        let killed = RunOutput {
            exit_code: None,
            signal: Some(9),
            timed_out: true,
            ..out()
        };
        assert!(render(&killed).starts_with("timed out (killed) after 12 ms"));
        let signalled = RunOutput {
            exit_code: None,
            signal: Some(11),
            ..out()
        };
        assert!(render(&signalled).starts_with("killed by signal 11"));
    }

    #[test]
    fn too_many_arguments_are_refused_before_the_host_is_asked() {
        let ctx = toolhost_sdk::Context::new("test-call", "/workspace");
        let e = run_command(
            &ctx,
            RunArgs {
                argv: vec!["true".into(); MAX_ARGS + 1],
                cwd: None,
                stdin: None,
                timeout_ms: None,
            },
        )
        .unwrap_err();
        assert_eq!(e.code, "invalid_command");
    }
}
