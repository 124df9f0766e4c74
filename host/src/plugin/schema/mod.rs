//! Input schemas: compiled once per tool, asked about arguments per call.
//!
//! A tool's input schema (JSON Schema draft 2020-12) is compiled **once**
//! into a [`CompiledSchema`]. Per call the pipeline asks it two things:
//!
//! 1. [`CompiledSchema::validate`]: do the arguments conform? Each failure
//!    becomes a [`Violation`] precise enough for a model to correct its call.
//! 2. [`CompiledSchema::path_args`]: which arguments name workspace paths
//!    (`"x-toolhost-path": "read"` or `"write"`)?
//!
//! The modules, one concept each:
//!
//! - [`compile`]: the draft check, format-implied integer bounds and the
//!   validator;
//! - `error`: [`SchemaError`], for a schema that cannot be compiled;
//! - [`violations`]: validator errors turned into model-correctable
//!   [`Violation`]s (unions resolved the way a model thinks about them);
//! - [`paths`]: the path-argument index, built at compile time, failing
//!   closed on annotations it cannot track;
//! - `walk`: which keywords hold subschemas, local `$ref` resolution and
//!   what a subschema says about its values — shared with [`crate::plugin::lint`].

pub mod compile;
mod error;
pub mod paths;
pub mod violations;
pub(crate) mod walk;

pub(crate) use compile::format_integer_bounds;
pub use compile::{CompiledSchema, SchemaError, SchemaErrorKind, DRAFT_2020_12};
pub use paths::{PathAccess, PathArg, PathField, PATH_ANNOTATION, RESOURCE_ANNOTATION};
pub use violations::{compare_pointers, Violation, MAX_ACTUAL_CHARS};
