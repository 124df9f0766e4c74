//! The `toolhost:plugin/exec` import, linked for every component.
//!
//! This is the one place a guest's request to run a native program enters
//! the host: [`State`]'s `exec::Host::run`. It hands the command to the
//! call's [`CallExec`](toolhost_base::exec_call::CallExec) with the call's deadline
//! and cancellation, which checks it against the call's grant before
//! anything starts and runs it in the OS sandbox of [`toolhost_exec`]. A call
//! without programs (its tool declares none, or it is a dry-run or a probe)
//! answers every `run` with `denied`.

use std::time::Duration;

use wasmtime::component::{HasSelf, Linker};

use super::bindings::plugin::toolhost::plugin::exec as wit;
use super::{SandboxError, State};
use toolhost_base::exec_call::{Command, CommandError};

/// The answer to a `run` in a call that may run no program.
pub(super) const NO_PROGRAMS: &str =
    "this call may run no program (its tool declares none in needs.exec, or it is a dry-run or a probe)";

/// Adds `toolhost:plugin/exec` to `linker`.
pub(super) fn add_to_linker(linker: &mut Linker<State>) -> Result<(), SandboxError> {
    wit::add_to_linker::<State, HasSelf<State>>(linker, |s| s)
        .map_err(|e| SandboxError::Engine(format!("{e:#}")))
}

impl wit::Host for State {
    fn run(&mut self, cmd: wit::Command) -> Result<wit::Completed, wit::ExecError> {
        let Some(exec) = self.exec.clone() else {
            return Err(wit::ExecError::Denied(NO_PROGRAMS.to_string()));
        };
        let cancel = self
            .cancel
            .as_ref()
            .map(|c| toolhost_exec::Cancel::from_flag(c.0.clone()));
        let command = Command {
            argv: cmd.argv,
            cwd: cmd.cwd,
            stdin: cmd.stdin,
            env: cmd.env,
            timeout: cmd.timeout_ms.map(|ms| Duration::from_millis(ms.into())),
        };
        match exec.run(command, self.deadline, cancel.as_ref()) {
            Ok(done) => {
                // The call's own deadline ended the program: the call ends
                // as `timeout` when the guest returns, whatever it answers
                // (the epoch may lag behind the clock under load).
                self.deadline_reached |= done.deadline_reached;
                Ok(wit::Completed {
                    exit_code: done.exit_code,
                    signal: done.signal,
                    timed_out: done.timed_out,
                    duration_ms: done.duration.as_millis() as u64,
                    stdout: done.stdout,
                    stderr: done.stderr,
                    stdout_omitted_bytes: done.stdout_omitted_bytes,
                    stderr_omitted_bytes: done.stderr_omitted_bytes,
                })
            }
            Err(CommandError::Denied(m)) => Err(wit::ExecError::Denied(m)),
            Err(CommandError::Unavailable(m)) => Err(wit::ExecError::Unavailable(m)),
            Err(CommandError::Invalid(m)) => Err(wit::ExecError::Invalid(m)),
        }
    }
}
