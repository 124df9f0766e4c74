//! The `toolhost:plugin/exec` import, linked for every component so that a
//! plugin importing it loads.
//!
//! This is the one place a guest's request to run a native program enters
//! the host: [`State`]'s `exec::Host::run`. For now no call is granted any
//! program, so every request is answered `denied` before anything starts;
//! the OS sandbox that runs granted programs lives in [`crate::exec`] and
//! is wired in here.

use wasmtime::component::{HasSelf, Linker};

use super::bindings::plugin::toolhost::plugin::exec as wit;
use super::{SandboxError, State};

/// The answer to a `run` while no call carries an `exec` grant.
pub(super) const NO_PROGRAMS: &str = "this call was granted no programs";

/// Adds `toolhost:plugin/exec` to `linker`.
pub(super) fn add_to_linker(linker: &mut Linker<State>) -> Result<(), SandboxError> {
    wit::add_to_linker::<State, HasSelf<State>>(linker, |s| s)
        .map_err(|e| SandboxError::Engine(format!("{e:#}")))
}

impl wit::Host for State {
    fn run(&mut self, _cmd: wit::Command) -> Result<wit::Completed, wit::ExecError> {
        Err(wit::ExecError::Denied(NO_PROGRAMS.to_string()))
    }
}
