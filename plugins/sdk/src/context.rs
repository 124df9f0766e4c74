//! [`Context`]: the per-call facts the host passes in.

use std::path::{Component, Path, PathBuf};

use crate::bindings::toolhost::plugin::types::CallContext;
use crate::error::ToolError;

/// Per-call facts: call id, workspace mount point, idempotency key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Context {
    call_id: String,
    workspace_root: String,
    idempotency_key: Option<String>,
}

impl Context {
    /// A context for calling tools directly, e.g. from native unit tests.
    /// Inside a plugin the SDK builds it from the host's `call-context`.
    pub fn new(call_id: impl Into<String>, workspace_root: impl Into<String>) -> Self {
        Context {
            call_id: call_id.into(),
            workspace_root: workspace_root.into(),
            idempotency_key: None,
        }
    }

    /// Sets the idempotency key (see [`Context::idempotency_key`]).
    #[must_use]
    pub fn with_idempotency_key(mut self, key: impl Into<String>) -> Self {
        self.idempotency_key = Some(key.into());
        self
    }

    /// Unique id of this call, for logs and unique temporary names.
    pub fn call_id(&self) -> &str {
        &self.call_id
    }

    /// Guest path under which the workspace is mounted, e.g. `/workspace`.
    pub fn workspace_root(&self) -> &Path {
        Path::new(&self.workspace_root)
    }

    /// The idempotency key of a side-effecting call, if the caller gave one.
    pub fn idempotency_key(&self) -> Option<&str> {
        self.idempotency_key.as_deref()
    }

    /// Turns a workspace-relative path argument into the guest path to open.
    ///
    /// The host has already normalized and authorized path arguments; this
    /// is defence in depth. An absolute path or one with a `..` component
    /// fails with code `invalid_path` (correctable; add the field with
    /// [`ToolError::field`]). `.` components are dropped, so `""` and `"."`
    /// both name the workspace root itself.
    ///
    /// ```
    /// use toolhost_sdk::Context;
    ///
    /// let ctx = Context::new("call-1", "/workspace");
    /// assert_eq!(ctx.guest_path("./src/lib.rs").unwrap(), std::path::Path::new("/workspace/src/lib.rs"));
    /// assert_eq!(ctx.guest_path("../etc/passwd").unwrap_err().code, "invalid_path");
    /// assert_eq!(ctx.guest_path("/etc/passwd").unwrap_err().code, "invalid_path");
    /// ```
    pub fn guest_path(&self, relative: &str) -> Result<PathBuf, ToolError> {
        let mut path = PathBuf::from(&self.workspace_root);
        for component in Path::new(relative).components() {
            match component {
                Component::Normal(part) => path.push(part),
                Component::CurDir => {}
                Component::ParentDir => {
                    return Err(invalid_path(relative, "it contains a `..` component"))
                }
                Component::RootDir | Component::Prefix(_) => {
                    return Err(invalid_path(
                        relative,
                        "it is absolute; paths are relative to the workspace root",
                    ))
                }
            }
        }
        Ok(path)
    }
}

fn invalid_path(relative: &str, why: &str) -> ToolError {
    ToolError::new(
        "invalid_path",
        format!("path {relative:?} is not allowed: {why}"),
    )
    .correctable()
}

impl From<CallContext> for Context {
    fn from(ctx: CallContext) -> Self {
        Context {
            call_id: ctx.call_id,
            workspace_root: ctx.workspace_root,
            idempotency_key: ctx.idempotency_key,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joins_relative_paths() {
        let ctx = Context::new("c", "/workspace");
        assert_eq!(
            ctx.guest_path("a/b.txt").unwrap(),
            Path::new("/workspace/a/b.txt")
        );
        assert_eq!(ctx.guest_path(".").unwrap(), Path::new("/workspace"));
        assert_eq!(ctx.guest_path("").unwrap(), Path::new("/workspace"));
        assert_eq!(
            ctx.guest_path("a/./b/").unwrap(),
            Path::new("/workspace/a/b")
        );
    }

    #[test]
    fn refuses_escapes() {
        let ctx = Context::new("c", "/workspace");
        for bad in ["..", "a/../b", "a/b/..", "/abs", "/workspace/a"] {
            let err = ctx.guest_path(bad).unwrap_err();
            assert_eq!(err.code, "invalid_path", "{bad}");
            assert!(err.correctable);
        }
    }
}
