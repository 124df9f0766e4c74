//! Compiling an input schema once, and asking it about arguments per call.
//!
//! [`CompiledSchema::compile`] checks the draft (only 2020-12, the WIT
//! contract's), turns on `format` validation (`date-time`, `uuid`, `email`,
//! …; unknown formats such as schemars' `uint64` are ignored), adds the
//! `minimum`/`maximum` implied by schemars' integer formats (`uint8`,
//! `int32`, `uint64`, …) so a `u32` argument of 5000000000 is refused here and
//! not inside the plugin, and builds the path index ([`super::paths`]).
//! A schema that cannot be compiled is a [`SchemaError`] with a
//! [`SchemaErrorKind`] and, when known, a pointer into the schema.
//!
//! Per call, [`CompiledSchema::validate`] takes the fast path (`is_valid`)
//! and only invalid arguments pay for the [`Violation`]s
//! ([`super::violations`]); [`CompiledSchema::path_args`] lists the
//! workspace paths the arguments name.

use std::fmt;

use jsonschema::error::ValidationErrorKind;
use jsonschema::ValidationError;
use serde_json::Value;

pub use super::error::{SchemaError, SchemaErrorKind};
use super::paths::{PathArg, PathField, PathIndex};
use super::violations::{self, type_name, Violation};
use super::walk::for_each_subschema_mut;
use crate::json::clip;

/// The only `$schema` accepted (with or without a trailing `#`).
pub const DRAFT_2020_12: &str = "https://json-schema.org/draft/2020-12/schema";

/// A compiled draft 2020-12 schema. Cheap to share: `Send + Sync`.
pub struct CompiledSchema {
    validator: jsonschema::Validator,
    /// The schema as compiled (with format-implied bounds added).
    schema: Value,
    paths: PathIndex,
    /// Arguments annotated `x-toolhost-resource`.
    resources: PathIndex,
}

impl fmt::Debug for CompiledSchema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompiledSchema")
            .field("schema", &self.schema)
            .field("path_fields", &self.paths.fields())
            .finish_non_exhaustive()
    }
}

impl CompiledSchema {
    /// Compiles `schema`. Call once per tool and keep the result.
    pub fn compile(schema: &Value) -> Result<Self, SchemaError> {
        match schema {
            Value::Object(map) => {
                if let Some(draft) = map.get("$schema") {
                    let ok = draft
                        .as_str()
                        .is_some_and(|d| d.trim_end_matches('#') == DRAFT_2020_12);
                    if !ok {
                        return Err(SchemaError::new(
                            SchemaErrorKind::UnsupportedDraft,
                            format!(
                                "$schema is {draft}; toolhost schemas are JSON Schema draft 2020-12 (\"{DRAFT_2020_12}\")"
                            ),
                            Some("/$schema".into()),
                        ));
                    }
                }
            }
            Value::Bool(_) => {}
            other => {
                return Err(SchemaError::new(
                    SchemaErrorKind::NotASchema,
                    format!(
                        "a schema must be an object or a boolean, not {}",
                        type_name(other)
                    ),
                    Some(String::new()),
                ))
            }
        }
        let mut schema = schema.clone();
        add_format_bounds(&mut schema);
        let validator = jsonschema::draft202012::options()
            .should_validate_formats(true)
            .build(&schema)
            .map_err(compile_error)?;
        let paths = PathIndex::build(&schema)?;
        let resources = PathIndex::build_for(&schema, super::paths::RESOURCE_ANNOTATION)?;
        Ok(CompiledSchema {
            validator,
            schema,
            paths,
            resources,
        })
    }

    /// The schema as compiled: the input plus the bounds implied by integer
    /// formats.
    pub fn schema(&self) -> &Value {
        &self.schema
    }

    /// Whether `args` conform, without building any error.
    pub fn is_valid(&self, args: &Value) -> bool {
        self.validator.is_valid(args)
    }

    /// Checks `args`; on failure returns every violation, ordered by field
    /// (array indices numerically), never an empty list.
    pub fn validate(&self, args: &Value) -> Result<(), Vec<Violation>> {
        if self.validator.is_valid(args) {
            return Ok(());
        }
        Err(violations::explain(
            &self.schema,
            self.validator.iter_errors(args),
            args,
        ))
    }

    /// Whether the schema names any workspace path.
    pub fn has_path_fields(&self) -> bool {
        self.paths.is_relevant()
    }

    /// Every annotated location the path extraction tracks, in schema order.
    pub fn path_fields(&self) -> &[PathField] {
        self.paths.fields()
    }

    /// The path arguments in `args` (normally already validated), in the
    /// order they appear. A pointer appears once; if schema branches disagree
    /// on its access, `write` wins.
    pub fn path_args<'a>(&self, args: &'a Value) -> Vec<PathArg<'a>> {
        self.paths.args(args)
    }

    /// The arguments in `args` annotated `x-toolhost-resource`, as
    /// [`path_args`](Self::path_args) finds paths: each names a
    /// plugin-declared resource the call reads or writes.
    pub fn resource_args<'a>(&self, args: &'a Value) -> Vec<PathArg<'a>> {
        self.resources.args(args)
    }
}

fn compile_error(error: ValidationError<'static>) -> SchemaError {
    let kind = match error.kind() {
        ValidationErrorKind::Referencing(_) => SchemaErrorKind::UnresolvedRef,
        _ => SchemaErrorKind::Invalid,
    };
    let pointer = match kind {
        SchemaErrorKind::UnresolvedRef => None,
        _ => Some(error.instance_path().as_str().to_owned()),
    };
    let message = match kind {
        SchemaErrorKind::UnresolvedRef => {
            format!("{error}; only references inside the schema document are supported")
        }
        _ => format!("invalid JSON Schema: {}", clip(&error.to_string(), 300)),
    };
    SchemaError::new(kind, message, pointer)
}

/// The `(minimum, maximum)` an integer `format` implies (schemars names).
pub(crate) fn format_integer_bounds(format: &str) -> Option<(Option<i64>, Option<i64>)> {
    Some(match format {
        "int8" => (Some(i64::from(i8::MIN)), Some(i64::from(i8::MAX))),
        "int16" => (Some(i64::from(i16::MIN)), Some(i64::from(i16::MAX))),
        "int32" => (Some(i64::from(i32::MIN)), Some(i64::from(i32::MAX))),
        "uint8" => (Some(0), Some(i64::from(u8::MAX))),
        "uint16" => (Some(0), Some(i64::from(u16::MAX))),
        "uint32" => (Some(0), Some(i64::from(u32::MAX))),
        "uint64" | "uint" => (Some(0), None),
        _ => return None,
    })
}

/// Adds the `minimum`/`maximum` an integer `format` implies, wherever the
/// schema (or any subschema) lacks them.
fn add_format_bounds(schema: &mut Value) {
    let Value::Object(map) = schema else {
        return;
    };
    let integer_typed = match map.get("type") {
        Some(Value::String(t)) => t == "integer",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "integer"),
        _ => false,
    };
    if integer_typed {
        if let Some((lo, hi)) = map
            .get("format")
            .and_then(Value::as_str)
            .and_then(format_integer_bounds)
        {
            if let Some(lo) = lo {
                if !map.contains_key("minimum") && !map.contains_key("exclusiveMinimum") {
                    map.insert("minimum".into(), Value::from(lo));
                }
            }
            if let Some(hi) = hi {
                if !map.contains_key("maximum") && !map.contains_key("exclusiveMaximum") {
                    map.insert("maximum".into(), Value::from(hi));
                }
            }
        }
    }
    for_each_subschema_mut(map, &mut add_format_bounds);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugin::schema::PathAccess;
    use serde_json::json;

    #[test]
    fn compile_errors_are_typed() {
        let e = CompiledSchema::compile(&json!({"type": "strin"})).unwrap_err();
        assert_eq!(e.kind, SchemaErrorKind::Invalid);
        assert_eq!(e.pointer.as_deref(), Some("/type"));
        let e =
            CompiledSchema::compile(&json!({"properties": {"a": {"minimum": "x"}}})).unwrap_err();
        assert_eq!(e.kind, SchemaErrorKind::Invalid);
        assert_eq!(e.pointer.as_deref(), Some("/properties/a/minimum"));
        let e = CompiledSchema::compile(&json!({"$ref": "#/$defs/Missing"})).unwrap_err();
        assert_eq!(e.kind, SchemaErrorKind::UnresolvedRef, "{e}");
        let e =
            CompiledSchema::compile(&json!({"$ref": "https://example.com/s.json"})).unwrap_err();
        assert_eq!(e.kind, SchemaErrorKind::UnresolvedRef, "{e}");
        let e =
            CompiledSchema::compile(&json!({"$schema": "http://json-schema.org/draft-07/schema#"}))
                .unwrap_err();
        assert_eq!(e.kind, SchemaErrorKind::UnsupportedDraft);
        assert!(e.to_string().contains("/$schema"), "{e}");
        let e = CompiledSchema::compile(&json!([1])).unwrap_err();
        assert_eq!(e.kind, SchemaErrorKind::NotASchema);
        let e = CompiledSchema::compile(
            &json!({"type": "object", "properties": {"p": {"pattern": "("}}}),
        )
        .unwrap_err();
        assert_eq!(e.kind, SchemaErrorKind::Invalid, "{e}");
        assert!(CompiledSchema::compile(&json!(true)).is_ok());
        assert!(CompiledSchema::compile(
            &json!({"$schema": "https://json-schema.org/draft/2020-12/schema#"})
        )
        .is_ok());
    }

    #[test]
    fn error_kinds_serialize_snake_case() {
        assert_eq!(
            serde_json::to_value(SchemaErrorKind::UnresolvedRef).unwrap(),
            "unresolved_ref"
        );
        assert_eq!(serde_json::to_value(PathAccess::Write).unwrap(), "write");
        let v = Violation {
            field: "/a".into(),
            expected: "x".into(),
            actual: "y".into(),
            message: "m".into(),
        };
        assert_eq!(
            serde_json::to_value(&v).unwrap(),
            json!({"field": "/a", "expected": "x", "actual": "y", "message": "m"})
        );
    }

    #[test]
    fn compiled_schema_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<CompiledSchema>();
    }
}
