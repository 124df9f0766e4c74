//! Running native programs: the `toolhost:plugin/exec` import.
//!
//! [`Program`] builds one run (argv, never a command line; working
//! directory; stdin; allowed environment variables; timeout) and
//! [`Program::run`] hands it to the host, which runs it in its OS sandbox
//! and returns how it ended ([`Completed`]). Only programs the tool
//! declares ([`Tool::runs_program`](crate::Tool::runs_program)) *and* the
//! caller grants run; the host checks `argv[0]` before anything starts.
//! A non-zero exit is a [`Completed`] run, not an error.
//!
//! ```no_run
//! use toolhost_sdk::exec::Program;
//! # fn f() -> Result<(), toolhost_sdk::ToolError> {
//! let done = Program::new(["cargo", "test", "--quiet"])
//!     .cwd("/workspace")
//!     .env("CARGO_TERM_COLOR", "never")
//!     .timeout_ms(300_000)
//!     .run()?;
//! let passed = done.exit_code == Some(0);
//! # Ok(()) }
//! ```
//!
//! The raw import is here too ([`run`], [`Command`], [`ExecError`]) for a
//! tool that wants to map its errors itself.

pub use crate::bindings::toolhost::plugin::exec::{run, Command, Completed, ExecError};

use crate::ToolError;

/// The tool error codes [`Program::run`] can return: list them in the
/// tool's [`error_codes`](crate::Tool::error_codes).
pub const ERROR_CODES: &[&str] = &["denied", "exec_unavailable", "invalid_command"];

/// One program to run.
#[derive(Debug, Clone)]
pub struct Program {
    cmd: Command,
}

impl Program {
    /// The program `argv[0]` (a name looked up on the host's `PATH`, or an
    /// absolute path) with its arguments. Defaults: the workspace root as
    /// working directory, no stdin, no extra environment, the rest of the
    /// call's deadline.
    pub fn new<I, S>(argv: I) -> Program
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Program {
            cmd: Command {
                argv: argv.into_iter().map(Into::into).collect(),
                cwd: None,
                stdin: Vec::new(),
                env: Vec::new(),
                timeout_ms: None,
            },
        }
    }

    /// Working directory: a guest path under the workspace root (e.g. from
    /// [`Context::guest_path`](crate::Context::guest_path)) or a path
    /// relative to it.
    pub fn cwd(mut self, dir: impl Into<String>) -> Program {
        self.cmd.cwd = Some(dir.into());
        self
    }

    /// Bytes written to the program's stdin (then closed).
    pub fn stdin(mut self, bytes: impl Into<Vec<u8>>) -> Program {
        self.cmd.stdin = bytes.into();
        self
    }

    /// Adds a variable to the program's cleared environment. The host
    /// allows only a fixed list of names (e.g. `RUST_BACKTRACE`, `NO_COLOR`,
    /// `PYTEST_ADDOPTS`); any other makes the run `denied`.
    pub fn env(mut self, name: impl Into<String>, value: impl Into<String>) -> Program {
        self.cmd.env.push((name.into(), value.into()));
        self
    }

    /// Wall-clock limit in milliseconds (never past the call's deadline).
    pub fn timeout_ms(mut self, ms: u32) -> Program {
        self.cmd.timeout_ms = Some(ms);
        self
    }

    /// The command as the import takes it.
    pub fn command(&self) -> &Command {
        &self.cmd
    }

    /// Runs the program; a host refusal becomes a [`ToolError`] with one of
    /// [`ERROR_CODES`] (see [`error_of`]).
    pub fn run(&self) -> Result<Completed, ToolError> {
        self.run_as("invalid_command")
    }

    /// [`run`](Self::run), with `invalid_code` as the code of a malformed
    /// command (for a tool that has its own name for it).
    pub fn run_as(&self, invalid_code: &str) -> Result<Completed, ToolError> {
        run(&self.cmd).map_err(|e| error_of(e, invalid_code))
    }
}

/// A host refusal as a tool error: `denied` (the program, a variable or the
/// working directory was not granted; not correctable by retrying),
/// `exec_unavailable` (the host cannot run programs; says what to install),
/// or `invalid_code` (a malformed command: correctable).
pub fn error_of(e: ExecError, invalid_code: &str) -> ToolError {
    match e {
        ExecError::Denied(m) => ToolError::new("denied", m),
        ExecError::Unavailable(m) => ToolError::new("exec_unavailable", m),
        ExecError::Invalid(m) => ToolError::new(invalid_code, m).correctable(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builder_fills_the_command_and_errors_map_to_codes() {
        let p = Program::new(["sh", "-c", "echo hi"])
            .cwd("/workspace/src")
            .stdin("x")
            .env("NO_COLOR", "1")
            .timeout_ms(5);
        let c = p.command();
        assert_eq!(c.argv, ["sh", "-c", "echo hi"]);
        assert_eq!(c.cwd.as_deref(), Some("/workspace/src"));
        assert_eq!(c.stdin, b"x");
        assert_eq!(c.env, [("NO_COLOR".to_string(), "1".to_string())]);
        assert_eq!(c.timeout_ms, Some(5));
        let e = error_of(ExecError::Denied("`sh` is not allowed".into()), "bad");
        assert_eq!((e.code.as_str(), e.correctable), ("denied", false));
        let e = error_of(ExecError::Unavailable("install bubblewrap".into()), "bad");
        assert_eq!(e.code, "exec_unavailable");
        let e = error_of(ExecError::Invalid("empty argv".into()), "bad");
        assert_eq!((e.code.as_str(), e.correctable), ("bad", true));
    }
}
