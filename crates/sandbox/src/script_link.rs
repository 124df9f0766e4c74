//! The `toolhost:plugin/script` import, linked for every component.
//!
//! This is the one place a guest's request to call another tool enters the
//! host: [`State`]'s `script::Host::call_tool` and `call_tools` hand it to
//! the call's [`ScriptLink`], which the pipeline gives only to the host's
//! script runner (`toolhost::script`). Every other call answers `denied`.

use std::sync::Arc;

use wasmtime::component::{HasSelf, Linker};

use super::bindings::plugin::toolhost::plugin::script as wit;
use super::{SandboxError, State};

/// What a call without a link answers: the error object of a `denied`
/// observation, as JSON text.
pub(super) const NO_LINK: &str = r#"{"code":"denied","message":"this call may call no tool (only the host's run_script may)","correctable":false,"retry":"never"}"#;

/// The host side of one call's `script` import: runs inner calls, each by
/// tool name and arguments (JSON text), and answers each with the tool's
/// output (`Ok`) or the observation's error (`Err`), both as JSON text, in
/// the order asked.
#[derive(Clone)]
pub struct ScriptLink(Arc<InnerCalls>);

/// Inner calls: `(tool name, arguments)` in, output or error out (JSON
/// text both ways), one answer per call, in order.
type InnerCalls = dyn Fn(Vec<(String, String)>) -> Vec<Result<String, String>> + Send + Sync;

impl ScriptLink {
    /// A link that runs inner calls with `calls`, which answers every call
    /// it is given, in order.
    pub fn new(
        calls: impl Fn(Vec<(String, String)>) -> Vec<Result<String, String>> + Send + Sync + 'static,
    ) -> Self {
        ScriptLink(Arc::new(calls))
    }

    /// Runs one inner call.
    pub fn call(&self, tool: &str, args_json: &str) -> Result<String, String> {
        self.call_many(vec![(tool.to_owned(), args_json.to_owned())])
            .pop()
            .unwrap_or_else(|| Err(NO_LINK.to_string()))
    }

    /// Runs several inner calls (in parallel where the link can) and
    /// answers each, in order.
    pub fn call_many(&self, calls: Vec<(String, String)>) -> Vec<Result<String, String>> {
        let n = calls.len();
        let mut out = (self.0)(calls);
        // A link that answered too few: the rest are refused, never lost.
        out.resize_with(n, || Err(NO_LINK.to_string()));
        out
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

    fn call_tools(&mut self, calls: Vec<(String, String)>) -> Vec<Result<String, String>> {
        match self.script.clone() {
            Some(link) => link.call_many(calls),
            None => calls.iter().map(|_| Err(NO_LINK.to_string())).collect(),
        }
    }
}
