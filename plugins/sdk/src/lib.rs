//! Guest SDK for toolhost plugins.
//!
//! A plugin is a Wasm component (target `wasm32-wasip2`) that exports the
//! `toolhost:plugin/tools` interface of `wit/toolhost.wit` (and, with this
//! crate, `planner`, `prober` and `discovery` too: the
//! `plugin-with-effects-and-discovery` world). With this crate a
//! tool author writes a typed argument struct, a typed output struct and a
//! function; the SDK does the rest:
//!
//! - the input and output JSON Schemas (draft 2020-12) are generated from the
//!   Rust types with [`schemars`], so schema and code cannot drift;
//! - schemas are generated only in `describe()`, which the host calls once
//!   per plugin load. `call()` runs in a fresh instance every time and only
//!   deserializes the arguments, runs the function and serializes the output;
//! - failures are [`ToolError`]s with a machine-readable code, an optional
//!   JSON Pointer to the argument at fault and optional structured details;
//! - [`Context`] carries the per-call facts and turns workspace-relative
//!   paths into guest paths;
//! - [`files::index`] asks the host for a readable file's SHA-256, line
//!   count and line starts, so a tool can seek to a page instead of reading
//!   and hashing the whole file in Wasm, and [`files::read`] reads that page
//!   in one host call;
//! - a tool can render its output for a model ([`Tool::text`]): the
//!   compact text the model reads, while the JSON stays the exact data;
//! - a side-effecting tool can add a dry-run ([`Tool::dry_run`], returning a
//!   [`Plan`]) and a probe ([`Tool::probe`], returning a [`Probe`]), which
//!   the host uses to approve irreversible calls and to settle calls whose
//!   outcome is unknown;
//! - a tool can declare the words of the tasks it is for
//!   ([`Tool::keywords`], [`Tool::examples`]), which the host's
//!   `find_tools` indexes beside its name and description.
//!
//! # Example
//!
//! ```no_run
//! use toolhost_sdk::{Context, Deserialize, JsonSchema, Serialize, SideEffect, Tool, ToolError};
//!
//! /// Arguments of `line_count`.
//! #[derive(Deserialize, JsonSchema)]
//! #[serde(deny_unknown_fields)]
//! struct CountArgs {
//!     /// File to count, relative to the workspace root.
//!     #[schemars(length(min = 1, max = 1024), extend("x-toolhost-path" = "read"))]
//!     path: String,
//! }
//!
//! /// Result of `line_count`.
//! #[derive(Serialize, JsonSchema)]
//! struct CountOutput {
//!     /// Number of lines in the file.
//!     lines: u64,
//! }
//!
//! fn count(ctx: &Context, args: CountArgs) -> Result<CountOutput, ToolError> {
//!     let path = ctx.guest_path(&args.path).map_err(|e| e.field("/path"))?;
//!     let text = std::fs::read_to_string(path)?; // io::Error -> not_found / permission_denied / io_error
//!     Ok(CountOutput { lines: text.lines().count() as u64 })
//! }
//!
//! fn tools() -> Vec<Tool> {
//!     vec![Tool::new("line_count", count)
//!         .title("Count lines")
//!         .description("Counts the lines of one UTF-8 text file. ...")
//!         .side_effect(SideEffect::ReadOnly)
//!         .reads_files()
//!         .error_codes(&["not_found", "permission_denied", "io_error"])
//!         .timeout_ms(5_000)
//!         .max_output_bytes(1024)
//!         // Words of the tasks it is for, for `find_tools`.
//!         .keywords(&["count", "lines", "length"])
//!         .examples(&["how many lines does main.rs have"])
//!         // What the model reads; the JSON output stays the exact data.
//!         .text(|out: &CountOutput| format!("{} lines", out.lines))]
//! }
//!
//! toolhost_sdk::plugin!(tools);
//! ```
//!
//! The plugin crate is a `cdylib` and needs `serde` and `schemars` as direct
//! dependencies too (their derive macros name those crates); everything else
//! comes from this crate.
//!
//! # Schema rules
//!
//! - Put `#[serde(deny_unknown_fields)]` on every argument struct: it makes
//!   the schema a closed object (`"additionalProperties": false`).
//! - Non-`Option` fields without `#[serde(default)]` are listed in
//!   `required`. An `Option<T>` field is optional and also accepts `null`;
//!   a field with `#[serde(default = "...")]` is optional and its schema
//!   carries the `default`.
//! - Bounds come from `#[schemars(length(..), range(..), pattern(..))]`,
//!   doc comments become `description`s, and
//!   `#[schemars(extend("x-toolhost-path" = "read"))]` (or `"write"`) marks a
//!   workspace-relative path the host authorizes before the call.
//! - Subschemas are inlined (no `$ref`), so every schema is self-contained.
//!
//! # Error codes
//!
//! The SDK adds the codes it can return itself to every descriptor:
//! `invalid_arguments` always, and `invalid_path` for tools that read or
//! write files (from [`Context::guest_path`]). A call of a tool name the
//! plugin does not have fails with `unknown_tool`. A dry-run of a tool without
//! one fails with `dry_run_unsupported` (not listed in the descriptor: its
//! `supports-dry-run` is false). A panicking tool aborts
//! the instance, which the host reports as a trap; so does an output value
//! that cannot be serialized to JSON (a bug in the tool).

pub mod ask;
mod context;
mod error;
pub mod exec;
pub mod files;
mod plan;
pub mod script;
mod tool;

pub use context::Context;
pub use error::ToolError;
pub use plan::{Change, ChangeAction, Counts, Plan, Probe};
pub use tool::{
    dispatch, dispatch_dry_run, dispatch_probe, Tool, ToolOutput, DEFAULT_MAX_OUTPUT_BYTES,
    DEFAULT_TIMEOUT_MS,
};

/// How much a tool can change the world; see the WIT `side-effect` enum.
pub use bindings::toolhost::plugin::types::SideEffect;

pub use schemars::{self, JsonSchema};
pub use serde::{self, Deserialize, Serialize};
pub use serde_json::{self, json, Value};

/// The `wit-bindgen` bindings of the `plugin-with-effects-and-discovery`
/// world. Used by
/// [`plugin!`].
#[doc(hidden)]
pub mod bindings {
    wit_bindgen::generate!({
        world: "plugin-with-effects-and-discovery",
        path: "../../wit",
        pub_export_macro: true,
        export_macro_name: "__export_plugin",
        default_bindings_module: "toolhost_sdk::bindings",
    });
}

/// Items used by the expansion of [`plugin!`]; not a stable API.
#[doc(hidden)]
pub mod __private {
    pub use crate::bindings::exports::toolhost::plugin::discovery::{
        Guest as DiscoveryGuest, ToolWords as WitToolWords,
    };
    pub use crate::bindings::exports::toolhost::plugin::planner::Guest as PlannerGuest;
    pub use crate::bindings::exports::toolhost::plugin::prober::{
        Guest as ProberGuest, ProbeOutcome as WitProbeOutcome,
    };
    pub use crate::bindings::exports::toolhost::plugin::tools::Guest as ToolsGuest;
    pub use crate::bindings::toolhost::plugin::types::{
        CallContext as WitCallContext, ToolDescriptor as WitToolDescriptor,
        ToolError as WitToolError, ToolOutput as WitToolOutput,
    };
    pub use crate::tool::{call_wit, describe_wit, describe_words_wit, dry_run_wit, probe_wit};
}

/// Exports the tools returned by a `fn() -> Vec<Tool>` as this component's
/// `toolhost:plugin/tools`, `planner`, `prober` and `discovery` interfaces
/// (the `plugin-with-effects-and-discovery` world).
///
/// `planner.dry-run` runs a tool's [`Tool::dry_run`] function and answers
/// `dry_run_unsupported` for a tool without one; `prober.probe` runs its
/// [`Tool::probe`] function and answers `unknown` for a tool without one;
/// `discovery.describe-words` answers the [`Tool::keywords`] and
/// [`Tool::examples`] of the tools that have some.
///
/// Use it once, at the root of the plugin crate:
///
/// ```ignore
/// toolhost_sdk::plugin!(tools);
/// ```
///
/// The function runs on every `describe()` and `call()`; keep it cheap
/// (it only builds [`Tool`] values, schemas are generated lazily).
#[macro_export]
macro_rules! plugin {
    ($tools:path) => {
        #[doc(hidden)]
        struct __ToolhostPlugin;

        impl $crate::__private::ToolsGuest for __ToolhostPlugin {
            fn describe() -> ::std::vec::Vec<$crate::__private::WitToolDescriptor> {
                $crate::__private::describe_wit($tools())
            }

            fn call(
                name: ::std::string::String,
                args_json: ::std::string::String,
                context: $crate::__private::WitCallContext,
            ) -> ::std::result::Result<$crate::__private::WitToolOutput, $crate::__private::WitToolError>
            {
                $crate::__private::call_wit($tools(), &name, &args_json, context)
            }
        }

        impl $crate::__private::PlannerGuest for __ToolhostPlugin {
            fn dry_run(
                name: ::std::string::String,
                args_json: ::std::string::String,
                context: $crate::__private::WitCallContext,
            ) -> ::std::result::Result<::std::string::String, $crate::__private::WitToolError>
            {
                $crate::__private::dry_run_wit($tools(), &name, &args_json, context)
            }
        }

        impl $crate::__private::ProberGuest for __ToolhostPlugin {
            fn probe(
                name: ::std::string::String,
                args_json: ::std::string::String,
                idempotency_key: ::std::string::String,
                context: $crate::__private::WitCallContext,
            ) -> ::std::result::Result<
                $crate::__private::WitProbeOutcome,
                $crate::__private::WitToolError,
            > {
                $crate::__private::probe_wit($tools(), &name, &args_json, &idempotency_key, context)
            }
        }

        impl $crate::__private::DiscoveryGuest for __ToolhostPlugin {
            fn describe_words() -> ::std::vec::Vec<$crate::__private::WitToolWords> {
                $crate::__private::describe_words_wit($tools())
            }
        }

        $crate::bindings::__export_plugin!(__ToolhostPlugin with_types_in $crate::bindings);
    };
}
