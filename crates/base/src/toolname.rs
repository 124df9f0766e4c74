//! Tool names and namespaces: one grammar for the whole host.
//!
//! A plugin declares plain names (the `tool_name` lint rule):
//! `^[a-z][a-z0-9_]{0,63}$`, e.g. `file_view`. A plugin loaded under a
//! namespace (`--plugin fs=PATH`, or `plugin = ["fs=PATH"]` in
//! `toolhost.toml`) has its tools called `fs.file_view` everywhere the host
//! names a tool: `tools/list`, `tools/call`, `toolhost call`, `find_tools`,
//! the journal, plans, and a token's `tool` caveat. The plugin itself still
//! sees the name it declared. A namespace is `^[a-z][a-z0-9_]{0,31}$` (no
//! dot: one level), so a host tool name is
//!
//! ```text
//! name      = [namespace "."] tool
//! namespace = [a-z][a-z0-9_]{0,31}
//! tool      = [a-z][a-z0-9_]{0,63}
//! ```
//!
//! MCP allows `.` in tool names; provider APIs that do not (OpenAI's and
//! Anthropic's `^[a-zA-Z0-9_-]{1,64}$`) see such names only through a
//! client that maps them.
//!
//! A token's `tool` caveat (`toolhost::policy::capability::ToolPattern`) speaks the
//! same grammar: an exact `name`, `*`, or a prefix of a name ending in `_`
//! or `.` followed by `*`: `fs.*` is every tool of the namespace `fs` (and
//! never `fsx.read`), `fs.file_*` the `file_` tools of that namespace,
//! `file_*` the plain `file_` tools (never `fs.file_view`: the namespace is
//! part of the name).
//!
//! ```
//! use toolhost_base::toolname::{is_name, PluginSpec};
//! assert!(is_name("fs.file_view") && is_name("file_view"));
//! assert!(!is_name("fs.x.y") && !is_name("Fs.view") && !is_name("fs."));
//! let spec: PluginSpec = "fs=plugins/files.wasm".parse().unwrap();
//! assert_eq!(spec.namespace.as_deref(), Some("fs"));
//! assert_eq!(spec.qualify("file_view"), "fs.file_view");
//! ```

use std::path::PathBuf;

/// Longest namespace, in bytes.
pub const MAX_NAMESPACE: usize = 32;
/// Longest tool name a plugin declares, in bytes.
pub const MAX_TOOL: usize = 64;

/// Why a namespace or plugin spec was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error(
        "`{0}` is not a namespace: a namespace is 1 to {MAX_NAMESPACE} characters of a-z, 0-9 \
         and `_`, starting with a letter (e.g. `fs`)"
    )]
    BadNamespace(String),
    #[error("`{0}` names no plugin file after its `NAMESPACE=`")]
    NoPath(String),
}

/// `^[a-z][a-z0-9_]{0,max-1}$`.
fn is_segment(s: &str, max: usize) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= max
        && b[0].is_ascii_lowercase()
        && b[1..]
            .iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'_')
}

/// Whether `s` is a namespace: `^[a-z][a-z0-9_]{0,31}$`.
pub fn is_namespace(s: &str) -> bool {
    is_segment(s, MAX_NAMESPACE)
}

/// Whether `s` is a plain tool name, as a plugin declares it:
/// `^[a-z][a-z0-9_]{0,63}$`.
pub fn is_tool(s: &str) -> bool {
    is_segment(s, MAX_TOOL)
}

/// Whether `s` is a host tool name: a plain tool name, or
/// `namespace.tool`.
pub fn is_name(s: &str) -> bool {
    match s.split_once('.') {
        Some((ns, tool)) => is_namespace(ns) && is_tool(tool),
        None => is_tool(s),
    }
}

/// Whether `s` is what may stand before the `*` of a tool pattern: a
/// non-empty start of a host tool name that ends in `_` or `.` (`file_`,
/// `fs.`, `fs.file_`).
pub fn is_pattern_prefix(s: &str) -> bool {
    let Some(body) = s.strip_suffix('_').or_else(|| s.strip_suffix('.')) else {
        return false;
    };
    if s.ends_with('.') {
        return is_namespace(body);
    }
    // `body_` starts a name when `body_x` is one.
    is_name(&format!("{s}x"))
}

/// A plugin file, and the namespace its tools are loaded under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginSpec {
    pub namespace: Option<String>,
    pub path: PathBuf,
}

impl PluginSpec {
    /// The host name of the plugin's tool `tool`: `ns.tool`, or `tool`
    /// without a namespace.
    pub fn qualify(&self, tool: &str) -> String {
        qualify(self.namespace.as_deref(), tool)
    }
}

/// `ns.tool`, or `tool` without a namespace.
pub fn qualify(namespace: Option<&str>, tool: &str) -> String {
    match namespace {
        Some(ns) => format!("{ns}.{tool}"),
        None => tool.to_owned(),
    }
}

impl std::str::FromStr for PluginSpec {
    type Err = NameError;

    /// `PATH`, or `NAMESPACE=PATH` when what stands before the first `=`
    /// has no `/` (a file whose name holds `=` is written `./a=b.wasm`).
    fn from_str(s: &str) -> Result<PluginSpec, NameError> {
        match s.split_once('=') {
            Some((ns, path)) if !ns.contains('/') && !ns.contains('\\') => {
                if !is_namespace(ns) {
                    return Err(NameError::BadNamespace(ns.to_owned()));
                }
                if path.is_empty() {
                    return Err(NameError::NoPath(s.to_owned()));
                }
                Ok(PluginSpec {
                    namespace: Some(ns.to_owned()),
                    path: PathBuf::from(path),
                })
            }
            _ => Ok(PluginSpec {
                namespace: None,
                path: PathBuf::from(s),
            }),
        }
    }
}

impl std::fmt::Display for PluginSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(ns) = &self.namespace {
            write!(f, "{ns}=")?;
        }
        write!(f, "{}", self.path.display())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        for ok in ["a", "file_view", "fs.file_view", "a1.b2", "x_.y_"] {
            assert!(is_name(ok), "{ok}");
        }
        let long_ns = "n".repeat(33);
        let long_tool = "t".repeat(65);
        for bad in [
            "",
            ".",
            "fs.",
            ".view",
            "fs.a.b",
            "Fs.view",
            "fs.View",
            "1fs.view",
            "fs-x.view",
            "fs.vi-ew",
            "fs view",
            &format!("{long_ns}.a"),
            &long_tool,
        ] {
            assert!(!is_name(bad), "{bad}");
        }
        assert!(is_name(&format!("{}.{}", "n".repeat(32), "t".repeat(64))));
    }

    #[test]
    fn pattern_prefixes() {
        for ok in ["file_", "fs.", "fs.file_", "a_b_"] {
            assert!(is_pattern_prefix(ok), "{ok}");
        }
        for bad in [
            "file", "fs", ".", "_", "fs..", "fs._", "Fs.", "a.b.", "fs.x.y_", "f-_",
        ] {
            assert!(!is_pattern_prefix(bad), "{bad}");
        }
    }

    #[test]
    fn specs() {
        let p = |s: &str| s.parse::<PluginSpec>();
        assert_eq!(
            p("a/b.wasm").unwrap(),
            PluginSpec {
                namespace: None,
                path: "a/b.wasm".into()
            }
        );
        let s = p("fs=a/b.wasm").unwrap();
        assert_eq!(s.namespace.as_deref(), Some("fs"));
        assert_eq!(s.path, PathBuf::from("a/b.wasm"));
        assert_eq!(s.to_string(), "fs=a/b.wasm");
        // A `=` after a `/` belongs to the path.
        assert_eq!(p("./x=y.wasm").unwrap().namespace, None);
        assert_eq!(p("dir/x=y.wasm").unwrap().namespace, None);
        assert!(matches!(p("Fs=a.wasm"), Err(NameError::BadNamespace(_))));
        assert!(matches!(p("f.s=a.wasm"), Err(NameError::BadNamespace(_))));
        assert!(matches!(p("=a.wasm"), Err(NameError::BadNamespace(_))));
        assert!(matches!(p("fs="), Err(NameError::NoPath(_))));
    }
}
