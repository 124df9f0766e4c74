//! A schema that cannot be compiled: [`SchemaError`], its [`SchemaErrorKind`]
//! and, when known, a pointer into the schema. Both the compiler
//! ([`super::compile`]) and the path index ([`super::paths`]) refuse schemas
//! with it.

use std::fmt;

use serde::Serialize;

/// Why a schema was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SchemaErrorKind {
    /// The schema is neither an object nor a boolean.
    NotASchema,
    /// `$schema` names a draft other than 2020-12.
    UnsupportedDraft,
    /// The schema breaks the draft 2020-12 meta-schema or cannot be compiled.
    Invalid,
    /// A `$ref` points outside the document or to nothing.
    UnresolvedRef,
    /// An `x-toolhost-path` annotation is malformed or cannot be tracked.
    PathAnnotation,
}

impl SchemaErrorKind {
    /// Stable snake_case identifier of the kind.
    pub fn as_str(self) -> &'static str {
        match self {
            SchemaErrorKind::NotASchema => "not_a_schema",
            SchemaErrorKind::UnsupportedDraft => "unsupported_draft",
            SchemaErrorKind::Invalid => "invalid",
            SchemaErrorKind::UnresolvedRef => "unresolved_ref",
            SchemaErrorKind::PathAnnotation => "path_annotation",
        }
    }
}

impl fmt::Display for SchemaErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A schema that cannot be compiled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[error("{message}{}", pointer_suffix(.pointer))]
pub struct SchemaError {
    /// The class of failure.
    pub kind: SchemaErrorKind,
    /// What is wrong.
    pub message: String,
    /// JSON Pointer into the schema where the problem is, when known.
    pub pointer: Option<String>,
}

fn pointer_suffix(pointer: &Option<String>) -> String {
    match pointer.as_deref() {
        None => String::new(),
        Some("") => " (at the schema root)".into(),
        Some(p) => format!(" (at {p})"),
    }
}

impl SchemaError {
    pub(super) fn new(
        kind: SchemaErrorKind,
        message: impl Into<String>,
        pointer: Option<String>,
    ) -> Self {
        SchemaError {
            kind,
            message: message.into(),
            pointer,
        }
    }
}
