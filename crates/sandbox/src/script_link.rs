//! The `toolhost:plugin/script` import, linked for every component.
//!
//! This is the one place a guest's request to call another tool enters the
//! host: [`State`]'s `script::Host::call_tool` hands it to the call's
//! [`ScriptLink`], which the pipeline gives only to the host's script
//! runner (`toolhost::tools::script`). Every other call answers `denied`.

use std::sync::Arc;

use wasmtime::component::{HasSelf, Linker};

use super::bindings::plugin::toolhost::plugin::script as wit;
use super::{SandboxError, State};

/// What a call without a link answers: the error object of a `denied`
/// observation, as JSON text.
pub(super) const NO_LINK: &str = r#"{"code":"denied","message":"this call may call no tool (only the host's run_script may)","correctable":false,"retry":"never"}"#;

/// The host side of one call's `script` import: runs an inner call by tool
/// name and arguments (JSON text) and answers the tool's output (`Ok`) or
/// the observation's error (`Err`), both as JSON text.
#[derive(Clone)]
pub struct ScriptLink(Arc<InnerCall>);

/// One inner call: tool name and arguments in, output or error out (JSON
/// text both ways).
type InnerCall = dyn Fn(&str, &str) -> Result<String, String> + Send + Sync;

impl ScriptLink {
    /// A link that runs inner calls with `call`.
    pub fn new(
        call: impl Fn(&str, &str) -> Result<String, String> + Send + Sync + 'static,
    ) -> Self {
        ScriptLink(Arc::new(call))
    }

    /// Runs one inner call.
    pub fn call(&self, tool: &str, args_json: &str) -> Result<String, String> {
        (self.0)(tool, args_json)
    }
}

impl std::fmt::Debug for ScriptLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ScriptLink")
    }
}

/// Adds `toolhost:plugin/script` to `linker`.
pub(super) fn add_to_linker(linker: &mut Linker<State>) -> Result<(), SandboxError> {
    wit::add_to_linker::<State, HasSelf<State>>(linker, |s| s)
        .map_err(|e| SandboxError::Engine(format!("{e:#}")))
}

impl wit::Host for State {
    fn call_tool(&mut self, name: String, arguments_json: String) -> Result<String, String> {
        match self.script.clone() {
            Some(link) => link.call(&name, &arguments_json),
            None => Err(NO_LINK.to_string()),
        }
    }
}
