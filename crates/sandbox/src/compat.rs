//! The contract versions a component may be built against, and the
//! adapter that runs a component of the previous one on the current call
//! path.
//!
//! Policy: the host implements the current contract, [`CONTRACT`]
//! (`toolhost:plugin@0.2.0`), and the previous minor one,
//! [`PREVIOUS_CONTRACT`] (`toolhost:plugin@0.1.0`, `wit/v0.1.0/`), so a
//! plugin keeps loading for one contract bump after it was built. A
//! component of any other version, older or newer, is refused at load
//! with a message that names both supported versions ([`contract_of`]).
//!
//! What a `0.1.0` component differs in, and how the host adapts it:
//!
//! | 0.1.0                                  | on the current call path       |
//! |----------------------------------------|--------------------------------|
//! | `call` returns the output JSON only    | a [`ToolOutput`] without text: |
//! |                                        | the host renders the text, as  |
//! |                                        | for a current tool without one |
//! | `needs` has no `exec`                  | `exec` empty: no programs      |
//! | no `exec` or `files` import            | nothing to link: a component   |
//! |                                        | that imports either at 0.1.0   |
//! |                                        | does not link                  |
//! | `planner`, `prober`, `types`           | unchanged but for the package  |
//! |                                        | version: answered the same way |
//!
//! Each version's worlds get their own bindings (`bindings` for the
//! current one, [`v0_1`] here); [`Exports`], [`Loaded`], [`Planner`] and
//! [`Prober`] pick the one the component's exports name and turn its
//! answers into the host's own types, so everything past them (limits,
//! output checks, rendering) is one path for both versions.

use wasmtime::component::{Instance, InstancePre};
use wasmtime::Store;

use super::bindings;
use super::{
    read_descriptor, read_wit_descriptor, ProbeOutcome, SandboxError, State, ToolError, ToolOutput,
    CONTRACT, CONTRACT_PACKAGE, CONTRACT_VERSION,
};
use toolhost_base::descriptor::{Described, Needs, SideEffect, ToolDescriptor};

/// The previous contract (package and version, `wit/v0.1.0/toolhost.wit`),
/// which this host still implements.
pub const PREVIOUS_CONTRACT: &str = "toolhost:plugin@0.1.0";

/// The version part of [`PREVIOUS_CONTRACT`].
pub const PREVIOUS_CONTRACT_VERSION: &str = "0.1.0";

/// The supported contracts, for messages.
pub const SUPPORTED_CONTRACTS: &str =
    "toolhost:plugin@0.2.0 (current) and toolhost:plugin@0.1.0 (previous)";

/// The host side of `wit/v0.1.0/toolhost.wit`, for the two worlds a plugin
/// of that version can target.
pub(super) mod v0_1 {
    pub mod plugin {
        wasmtime::component::bindgen!({
            path: "../../wit/v0.1.0",
            world: "plugin",
        });
    }

    pub mod with_effects {
        wasmtime::component::bindgen!({
            path: "../../wit/v0.1.0",
            world: "plugin-with-effects",
        });
    }
}

/// The contract a loaded component was built against. Serialized as
/// `{"name": "toolhost:plugin@0.1.0", "standing": "previous"}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Contract {
    /// [`CONTRACT`].
    Current,
    /// [`PREVIOUS_CONTRACT`], run through this module's adapter.
    Previous,
}

impl Contract {
    /// The package and version, e.g. `toolhost:plugin@0.1.0`.
    pub fn name(self) -> &'static str {
        match self {
            Contract::Current => CONTRACT,
            Contract::Previous => PREVIOUS_CONTRACT,
        }
    }

    /// `current`, or `previous; supported`.
    pub fn standing(self) -> &'static str {
        match self {
            Contract::Current => "current",
            Contract::Previous => "previous; supported",
        }
    }
}

impl serde::Serialize for Contract {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("Contract", 2)?;
        st.serialize_field("name", self.name())?;
        st.serialize_field(
            "standing",
            match self {
                Contract::Current => "current",
                Contract::Previous => "previous",
            },
        )?;
        st.end()
    }
}

/// `contract toolhost:plugin@0.1.0 (previous; supported)`.
impl std::fmt::Display for Contract {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "contract {} ({})", self.name(), self.standing())
    }
}

/// The contract a component with these import and export names was built
/// against: the version every `toolhost:plugin/…` name carries. A
/// component that names none is taken as current (it then fails to link
/// for want of `tools`, which says what is missing). Versions other than
/// the two supported ones, and components that mix versions, are refused.
pub(super) fn contract_of<'a>(
    names: impl IntoIterator<Item = &'a str>,
) -> Result<Contract, SandboxError> {
    let mut found: Option<&str> = None;
    for name in names {
        let Some(version) = contract_version_of(name) else {
            continue;
        };
        match found {
            None => found = Some(version),
            Some(first) if first != version => {
                let (a, b) = (shown(first), shown(version));
                return Err(SandboxError::MixedContracts {
                    versions: format!("{a} and {b}"),
                });
            }
            Some(_) => {}
        }
    }
    match found {
        None | Some(CONTRACT_VERSION) => Ok(Contract::Current),
        Some(PREVIOUS_CONTRACT_VERSION) => Ok(Contract::Previous),
        Some(other) if newer_than_current(other) => Err(SandboxError::ContractTooNew {
            found: other.to_string(),
        }),
        Some(other) => Err(SandboxError::ContractVersion {
            found: shown(other).to_string(),
        }),
    }
}

/// A version as a message shows it.
fn shown(version: &str) -> &str {
    if version.is_empty() {
        "(no version)"
    } else {
        version
    }
}

/// The version of a `toolhost:plugin/<interface>@<version>` import or
/// export name (`None` for any other name; `""` for one without a version).
pub(super) fn contract_version_of(name: &str) -> Option<&str> {
    let rest = name.strip_prefix(CONTRACT_PACKAGE)?.strip_prefix('/')?;
    Some(rest.split_once('@').map_or("", |(_, v)| v))
}

/// Whether `version` (`major.minor.patch`, numbers) is later than
/// [`CONTRACT_VERSION`]; false for anything that does not parse.
fn newer_than_current(version: &str) -> bool {
    fn parse(v: &str) -> Option<(u64, u64, u64)> {
        // A pre-release or build suffix orders with its numbers here: close
        // enough to tell an author which way to go.
        let core = v.split(['-', '+']).next()?;
        let mut parts = core.split('.').map(|p| p.parse::<u64>().ok());
        let v = (parts.next()??, parts.next()??, parts.next()??);
        parts.next().is_none().then_some(v)
    }
    match (parse(version), parse(CONTRACT_VERSION)) {
        (Some(v), Some(current)) => v > current,
        _ => false,
    }
}

/// The per-call facts both versions pass as their `call-context`.
pub(super) struct Context {
    pub call_id: String,
    pub workspace_root: String,
    pub idempotency_key: Option<String>,
}

/// Conversions shared by every world's copy of the `types` interface,
/// whose call context and tool error have not changed between versions.
macro_rules! same_types {
    ($($types:ident)::+) => {
        impl From<$($types)::+::ToolError> for ToolError {
            fn from(e: $($types)::+::ToolError) -> Self {
                ToolError {
                    code: e.code,
                    message: e.message,
                    field: e.field,
                    correctable: e.correctable,
                    details: e.details,
                }
            }
        }

        impl From<&Context> for $($types)::+::CallContext {
            fn from(c: &Context) -> Self {
                $($types)::+::CallContext {
                    call_id: c.call_id.clone(),
                    workspace_root: c.workspace_root.clone(),
                    idempotency_key: c.idempotency_key.clone(),
                }
            }
        }
    };
}

same_types!(bindings::plugin::toolhost::plugin::types);
same_types!(bindings::with_effects::toolhost::plugin::types);
same_types!(v0_1::plugin::toolhost::plugin::types);
same_types!(v0_1::with_effects::toolhost::plugin::types);

/// Reads a descriptor of the previous contract ([`super::read_descriptor`]).
fn read_v0_1_descriptor(
    d: v0_1::plugin::toolhost::plugin::types::ToolDescriptor,
) -> (Described, usize) {
    use v0_1::plugin::toolhost::plugin::types::SideEffect as Wit;
    let desc = ToolDescriptor {
        name: d.name,
        title: d.title,
        description: d.description,
        input_schema: serde_json::Value::Null,
        output_schema: None,
        side_effect: match d.side_effect {
            Wit::ReadOnly => SideEffect::ReadOnly,
            Wit::Idempotent => SideEffect::Idempotent,
            Wit::Reversible => SideEffect::Reversible,
            Wit::Irreversible => SideEffect::Irreversible,
        },
        needs: Needs {
            fs_read: d.needs.fs_read,
            fs_write: d.needs.fs_write,
            network_hosts: d.needs.network_hosts,
            // 0.1.0 cannot declare programs: its tools run none.
            exec: Vec::new(),
        },
        error_codes: d.error_codes,
        default_timeout_ms: d.default_timeout_ms,
        max_output_bytes: d.max_output_bytes,
        supports_dry_run: d.supports_dry_run,
        supports_probe: d.supports_probe,
        keywords: Vec::new(),
        examples: Vec::new(),
    };
    read_descriptor(desc, d.input_schema, d.output_schema)
}

/// The `plugin` world's exports, looked up once in the pre-linked
/// component, for the version it was built against.
#[derive(Clone)]
pub(super) enum Exports {
    Current(bindings::plugin::PluginIndices),
    Previous(v0_1::plugin::PluginIndices),
}

impl Exports {
    pub fn new(pre: &InstancePre<State>, contract: Contract) -> Result<Exports, SandboxError> {
        let link = |e: wasmtime::Error| SandboxError::Link {
            contract: contract.name(),
            reason: format!("{e:#}"),
        };
        Ok(match contract {
            Contract::Current => {
                Exports::Current(bindings::plugin::PluginIndices::new(pre).map_err(link)?)
            }
            Contract::Previous => {
                Exports::Previous(v0_1::plugin::PluginIndices::new(pre).map_err(link)?)
            }
        })
    }

    /// The exports of `instance`, an instance of the component.
    pub fn load(&self, store: &mut Store<State>, instance: &Instance) -> wasmtime::Result<Loaded> {
        Ok(match self {
            Exports::Current(i) => Loaded::Current(i.load(store, instance)?),
            Exports::Previous(i) => Loaded::Previous(i.load(store, instance)?),
        })
    }
}

/// One instance's `tools` export, of either version.
pub(super) enum Loaded {
    Current(bindings::plugin::Plugin),
    Previous(v0_1::plugin::Plugin),
}

impl Loaded {
    /// The plugin's `describe`, its descriptors as the host reads them,
    /// each with the bytes of text the plugin sent for it.
    pub fn describe(&self, store: &mut Store<State>) -> wasmtime::Result<Vec<(Described, usize)>> {
        Ok(match self {
            Loaded::Current(p) => p
                .toolhost_plugin_tools()
                .call_describe(store)?
                .into_iter()
                .map(read_wit_descriptor)
                .collect(),
            Loaded::Previous(p) => p
                .toolhost_plugin_tools()
                .call_describe(store)?
                .into_iter()
                .map(read_v0_1_descriptor)
                .collect(),
        })
    }

    /// The plugin's `call`. A 0.1.0 answer is the output JSON alone: it
    /// becomes a [`ToolOutput`] without text, which the host renders.
    pub fn call(
        &self,
        store: &mut Store<State>,
        tool: &str,
        args_json: &str,
        ctx: &Context,
    ) -> wasmtime::Result<Result<ToolOutput, ToolError>> {
        Ok(match self {
            Loaded::Current(p) => p
                .toolhost_plugin_tools()
                .call_call(store, tool, args_json, &ctx.into())?
                .map(|out| ToolOutput {
                    json: out.json,
                    text: out.text,
                })
                .map_err(ToolError::from),
            Loaded::Previous(p) => p
                .toolhost_plugin_tools()
                .call_call(store, tool, args_json, &ctx.into())?
                .map(|json| ToolOutput { json, text: None })
                .map_err(ToolError::from),
        })
    }
}

/// The optional `planner` export, of the component's version.
pub(super) enum Planner {
    Current(bindings::with_effects::exports::toolhost::plugin::planner::GuestIndices),
    Previous(v0_1::with_effects::exports::toolhost::plugin::planner::GuestIndices),
}

impl Planner {
    /// The component's `planner`, when it exports one.
    pub fn new(pre: &InstancePre<State>, contract: Contract) -> Option<Planner> {
        use bindings::with_effects::exports::toolhost::plugin::planner as current;
        use v0_1::with_effects::exports::toolhost::plugin::planner as previous;
        match contract {
            Contract::Current => current::GuestIndices::new(pre).ok().map(Planner::Current),
            Contract::Previous => previous::GuestIndices::new(pre).ok().map(Planner::Previous),
        }
    }

    /// `dry-run` in `instance`: the plan JSON or the tool's error.
    pub fn dry_run(
        &self,
        store: &mut Store<State>,
        instance: &Instance,
        tool: &str,
        args_json: &str,
        ctx: &Context,
    ) -> wasmtime::Result<Result<String, ToolError>> {
        Ok(match self {
            Planner::Current(i) => i
                .load(&mut *store, instance)?
                .call_dry_run(store, tool, args_json, &ctx.into())?
                .map_err(ToolError::from),
            Planner::Previous(i) => i
                .load(&mut *store, instance)?
                .call_dry_run(store, tool, args_json, &ctx.into())?
                .map_err(ToolError::from),
        })
    }
}

/// The optional `prober` export, of the component's version.
pub(super) enum Prober {
    Current(bindings::with_effects::exports::toolhost::plugin::prober::GuestIndices),
    Previous(v0_1::with_effects::exports::toolhost::plugin::prober::GuestIndices),
}

/// A probe's answer whatever the version: `probe-outcome` did not change.
macro_rules! outcome {
    ($answer:expr, $($prober:ident)::+) => {
        match $answer {
            Ok($($prober)::+::ProbeOutcome::Done(json)) => Ok(ProbeOutcome::Done(json)),
            Ok($($prober)::+::ProbeOutcome::NotDone) => Ok(ProbeOutcome::NotDone),
            Ok($($prober)::+::ProbeOutcome::Unknown) => Ok(ProbeOutcome::Unknown),
            Err(e) => Err(ToolError::from(e)),
        }
    };
}

impl Prober {
    /// The component's `prober`, when it exports one.
    pub fn new(pre: &InstancePre<State>, contract: Contract) -> Option<Prober> {
        use bindings::with_effects::exports::toolhost::plugin::prober as current;
        use v0_1::with_effects::exports::toolhost::plugin::prober as previous;
        match contract {
            Contract::Current => current::GuestIndices::new(pre).ok().map(Prober::Current),
            Contract::Previous => previous::GuestIndices::new(pre).ok().map(Prober::Previous),
        }
    }

    /// `probe` in `instance` for idempotency key `key`. A `Done` output is
    /// still unchecked against the output limit.
    pub fn probe(
        &self,
        store: &mut Store<State>,
        instance: &Instance,
        tool: &str,
        args_json: &str,
        key: &str,
        ctx: &Context,
    ) -> wasmtime::Result<Result<ProbeOutcome, ToolError>> {
        Ok(match self {
            Prober::Current(i) => outcome!(
                i.load(&mut *store, instance)?.call_probe(
                    store,
                    tool,
                    args_json,
                    key,
                    &ctx.into()
                )?,
                bindings::with_effects::exports::toolhost::plugin::prober
            ),
            Prober::Previous(i) => outcome!(
                i.load(&mut *store, instance)?.call_probe(
                    store,
                    tool,
                    args_json,
                    key,
                    &ctx.into()
                )?,
                v0_1::with_effects::exports::toolhost::plugin::prober
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contract_versions_are_read_from_interface_names() {
        assert_eq!(
            contract_version_of("toolhost:plugin/tools@0.2.0"),
            Some("0.2.0")
        );
        assert_eq!(
            contract_version_of("toolhost:plugin/exec@0.1.0"),
            Some("0.1.0")
        );
        assert_eq!(contract_version_of("toolhost:plugin/tools"), Some(""));
        assert_eq!(contract_version_of("wasi:cli/environment@0.2.6"), None);
        assert_eq!(contract_version_of("toolhost:pluginx/tools@0.2.0"), None);
    }

    #[test]
    fn the_current_and_the_previous_contract_are_supported() {
        let current = ["wasi:cli/environment@0.2.6", "toolhost:plugin/tools@0.2.0"];
        assert_eq!(contract_of(current).unwrap(), Contract::Current);
        let previous = [
            "toolhost:plugin/types@0.1.0",
            "wasi:io/streams@0.2.0",
            "toolhost:plugin/tools@0.1.0",
            "toolhost:plugin/planner@0.1.0",
        ];
        assert_eq!(contract_of(previous).unwrap(), Contract::Previous);
        assert_eq!(
            Contract::Previous.to_string(),
            "contract toolhost:plugin@0.1.0 (previous; supported)"
        );
        // Nothing of the contract: the link says what is missing.
        assert_eq!(
            contract_of(["wasi:cli/run@0.2.0"]).unwrap(),
            Contract::Current
        );
    }

    #[test]
    fn other_versions_are_refused_naming_the_supported_ones() {
        for (names, says) in [
            (
                vec!["toolhost:plugin/tools@0.0.1"],
                "built against toolhost:plugin@0.0.1",
            ),
            (
                vec!["toolhost:plugin/tools"],
                "built against toolhost:plugin@(no version)",
            ),
            (
                vec!["toolhost:plugin/tools@0.3.0"],
                "toolhost:plugin@0.3.0, a newer contract than this host's",
            ),
            (
                vec!["toolhost:plugin/tools@1.0.0"],
                "toolhost:plugin@1.0.0, a newer contract",
            ),
            (
                vec!["toolhost:plugin/tools@0.1.0", "toolhost:plugin/exec@0.2.0"],
                "several versions of toolhost:plugin (0.1.0 and 0.2.0)",
            ),
        ] {
            let e = contract_of(names.iter().copied()).unwrap_err().to_string();
            assert!(e.contains(says), "{e}");
            assert!(e.contains(SUPPORTED_CONTRACTS), "{e}");
        }
        // The whole message, as the authoring guides quote it.
        let e = contract_of(["toolhost:plugin/tools@0.0.1"])
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "the component was built against toolhost:plugin@0.0.1, which this host does not \
             support: it supports toolhost:plugin@0.2.0 (current) and toolhost:plugin@0.1.0 \
             (previous); rebuild the plugin against toolhost:plugin@0.2.0 (update toolhost-sdk, \
             the Python or JavaScript kit, or the WIT file it was built from)"
        );
        let e = contract_of(["toolhost:plugin/tools@0.3.0"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("update toolhost"), "{e}");
    }

    #[test]
    fn the_supported_contracts_are_named_from_the_constants() {
        assert_eq!(
            SUPPORTED_CONTRACTS,
            format!("{CONTRACT} (current) and {PREVIOUS_CONTRACT} (previous)")
        );
        assert_eq!(CONTRACT, format!("{CONTRACT_PACKAGE}@{CONTRACT_VERSION}"));
        assert_eq!(
            PREVIOUS_CONTRACT,
            format!("{CONTRACT_PACKAGE}@{PREVIOUS_CONTRACT_VERSION}")
        );
    }

    #[test]
    fn only_later_numbered_versions_are_newer() {
        assert!(newer_than_current("0.3.0"));
        assert!(newer_than_current("0.2.1"));
        assert!(newer_than_current("1.0.0-rc.1"));
        assert!(!newer_than_current("0.2.0"));
        assert!(!newer_than_current("0.0.9"));
        assert!(!newer_than_current("0.10"));
        assert!(!newer_than_current("banana"));
        assert!(!newer_than_current(""));
    }
}
