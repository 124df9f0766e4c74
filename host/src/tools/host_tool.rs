//! [`HostTool`]: the tools the host answers itself, by name, with the
//! definitions a server lists ([`Host::host_tools`](crate::Host::host_tools)
//! says which of them a host answers), so a front end (the MCP server) lists and
//! recognises them without naming the modules that implement them.

use serde_json::Value;

use crate::policy::delegation;
use crate::tools::{artifact, discovery};

/// One of the tools the host answers itself rather than a plugin. Their
/// names are reserved: no plugin may declare one outside a namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HostTool {
    /// `artifact_view`: a window of a spilled result.
    ArtifactView,
    /// `find_tools`: a search of the catalog.
    FindTools,
    /// `delegate`: a child token narrower than the caller's.
    Delegate,
}

impl HostTool {
    /// Every host tool, in the order of their names.
    pub const ALL: [HostTool; 3] = [
        HostTool::ArtifactView,
        HostTool::FindTools,
        HostTool::Delegate,
    ];

    /// The tool's name.
    pub fn name(self) -> &'static str {
        match self {
            HostTool::ArtifactView => artifact::TOOL_NAME,
            HostTool::FindTools => discovery::TOOL_NAME,
            HostTool::Delegate => delegation::TOOL_NAME,
        }
    }

    /// The host tool named `name`, if it is one.
    pub fn of(name: &str) -> Option<HostTool> {
        HostTool::ALL.into_iter().find(|t| t.name() == name)
    }

    /// The tool's published definition, as MCP `tools/list` lists it:
    /// name, title, description, input and output schemas, annotations.
    pub fn definition(self) -> Value {
        match self {
            HostTool::ArtifactView => artifact::tool_definition(),
            HostTool::FindTools => discovery::tool_definition(),
            HostTool::Delegate => delegation::tool_definition(),
        }
    }

    /// The names a lazy session's tool list gains from the output of a
    /// `find_tools` call: its strong hits, or its first one.
    pub fn revealed_by_search(output: &Value) -> Vec<String> {
        output["tools"]
            .as_array()
            .map(|tools| discovery::to_reveal(tools))
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reserved_names_are_the_host_tools() {
        let names: Vec<&str> = HostTool::ALL.iter().map(|t| t.name()).collect();
        assert_eq!(names, crate::plugin::catalog::HOST_TOOL_NAMES);
        for t in HostTool::ALL {
            assert_eq!(HostTool::of(t.name()), Some(t));
            assert_eq!(t.definition()["name"], t.name());
        }
        assert_eq!(HostTool::of("read_file"), None);
    }

    #[test]
    fn a_search_reveals_its_first_hit_at_least() {
        let out = serde_json::json!({"tools": [{"name": "a", "score": 1.0}]});
        assert_eq!(HostTool::revealed_by_search(&out), ["a"]);
        assert!(HostTool::revealed_by_search(&Value::Null).is_empty());
    }
}
