//! Compiled input schemas, model-correctable violations and path arguments.
//!
//! A tool's input schema (JSON Schema draft 2020-12) is compiled **once** into
//! a [`CompiledSchema`]. Per call the pipeline asks it two things:
//!
//! 1. [`CompiledSchema::validate`]: do the arguments conform? The fast path is a
//!    plain `is_valid` check; only invalid arguments pay for error collection.
//!    Each failure becomes a [`Violation`] — the JSON Pointer of the argument,
//!    what was expected, what was sent, and a one-line message — precise
//!    enough for a model to correct its call. Unions are resolved the way a
//!    model thinks about them: a nullable field reports the errors of its
//!    non-null branch, and a tagged union reports the errors of the branch the
//!    tag selects (or that the tag itself is wrong).
//! 2. [`CompiledSchema::path_args`]: which arguments name workspace paths?
//!    String properties annotated `"x-toolhost-path": "read"` or `"write"` do.
//!    The annotated locations are found at compile time by walking
//!    `properties`, `additionalProperties`, `items`, `prefixItems`,
//!    `anyOf`/`oneOf`/`allOf`, `then`/`else`, `dependentSchemas` and local
//!    `$ref`s (recursion included), so extraction per call is a walk over the
//!    relevant part of the arguments only.
//!
//! Path extraction fails **closed**: an annotation the walker could not track
//! (inside `patternProperties`, `not`, `if`, `contains`, … or behind a `$ref`
//! it cannot follow) is a compile error, never a silently unchecked path.
//! When several schema branches describe the same argument, `write` wins over
//! `read`.
//!
//! Compilation also:
//! - refuses a `$schema` other than draft 2020-12 (the WIT contract's draft),
//! - turns on `format` validation (`date-time`, `uuid`, `email`, …; unknown
//!   formats such as schemars' `uint64` are ignored),
//! - enforces the ranges implied by schemars' integer formats (`uint8`,
//!   `int32`, `uint64`, …) by adding the missing `minimum`/`maximum`, so a
//!   `u32` argument of 5000000000 is refused here and not inside the plugin.

use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};
use std::fmt;

use jsonschema::error::{TypeKind, ValidationErrorKind};
use jsonschema::ValidationError;
use serde::Serialize;
use serde_json::{Map, Value};

pub(crate) use crate::json::clip;
use crate::json::push_pointer_token;

/// The annotation naming workspace-path arguments.
pub const PATH_ANNOTATION: &str = "x-toolhost-path";

/// The only `$schema` accepted (with or without a trailing `#`).
pub const DRAFT_2020_12: &str = "https://json-schema.org/draft/2020-12/schema";

/// Longest rendering of an actual value in a [`Violation`], in characters.
pub const MAX_ACTUAL_CHARS: usize = 80;

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
    fn new(kind: SchemaErrorKind, message: impl Into<String>, pointer: Option<String>) -> Self {
        SchemaError {
            kind,
            message: message.into(),
            pointer,
        }
    }
}

/// One reason arguments do not conform, phrased so a model can fix its call.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct Violation {
    /// JSON Pointer of the argument at fault (`""` for the whole arguments).
    pub field: String,
    /// What the schema asks for, e.g. `integer ≥ 1` or `a string (required)`.
    pub expected: String,
    /// What was sent, clipped to about [`MAX_ACTUAL_CHARS`] characters;
    /// `missing` for an absent required field.
    pub actual: String,
    /// One line for people and models.
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// How a tool uses a path argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PathAccess {
    /// The tool reads the path.
    Read,
    /// The tool writes (creates, changes or deletes) the path.
    Write,
}

impl PathAccess {
    /// `read` or `write`.
    pub fn as_str(self) -> &'static str {
        match self {
            PathAccess::Read => "read",
            PathAccess::Write => "write",
        }
    }
}

/// A workspace path named by one argument of one call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PathArg<'a> {
    /// JSON Pointer of the argument, e.g. `/path` or `/files/2/dest`.
    pub pointer: String,
    /// The path as sent (not yet resolved or normalized).
    pub value: &'a str,
    /// What the tool does with it.
    pub access: PathAccess,
}

/// An annotated location in the schema (for lint and for display).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PathField {
    /// JSON Pointer into the schema of the annotated subschema.
    pub schema_pointer: String,
    /// The declared access.
    pub access: PathAccess,
}

/// A compiled draft 2020-12 schema. Cheap to share: `Send + Sync`.
pub struct CompiledSchema {
    validator: jsonschema::Validator,
    /// The schema as compiled (with format-implied bounds added).
    schema: Value,
    paths: PathIndex,
}

impl fmt::Debug for CompiledSchema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompiledSchema")
            .field("schema", &self.schema)
            .field("path_fields", &self.paths.fields)
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
        Ok(CompiledSchema {
            validator,
            schema,
            paths,
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
        let mut out = Vec::new();
        for error in self.validator.iter_errors(args) {
            self.convert(&error, &mut out);
        }
        if out.is_empty() {
            out.push(violation(
                "",
                "arguments matching the input schema".into(),
                render(args),
            ));
        }
        out.sort_by(|a, b| compare_pointers(&a.field, &b.field));
        let mut seen = HashSet::new();
        out.retain(|v| seen.insert(v.clone()));
        Err(out)
    }

    /// Whether the schema names any workspace path.
    pub fn has_path_fields(&self) -> bool {
        self.paths.root_relevant
    }

    /// Every annotated location the path extraction tracks, in schema order.
    pub fn path_fields(&self) -> &[PathField] {
        &self.paths.fields
    }

    /// The path arguments in `args` (normally already validated), in the
    /// order they appear. A pointer appears once; if schema branches disagree
    /// on its access, `write` wins.
    pub fn path_args<'a>(&self, args: &'a Value) -> Vec<PathArg<'a>> {
        let mut out = Vec::new();
        if self.paths.root_relevant {
            let mut pointer = String::new();
            self.paths.visit(0, args, &mut pointer, &mut out);
        }
        if out.len() > 16 {
            let mut index: HashMap<String, usize> = HashMap::with_capacity(out.len());
            let mut merged: Vec<PathArg<'a>> = Vec::with_capacity(out.len());
            for arg in out {
                match index.get(&arg.pointer) {
                    Some(&i) => merged[i].access = merged[i].access.max(arg.access),
                    None => {
                        index.insert(arg.pointer.clone(), merged.len());
                        merged.push(arg);
                    }
                }
            }
            return merged;
        }
        if out.len() > 1 {
            // Few arguments: a quadratic scan beats hashing.
            let mut i = 1;
            while i < out.len() {
                if let Some(j) = (0..i).find(|&j| out[j].pointer == out[i].pointer) {
                    let dup = out.remove(i);
                    out[j].access = out[j].access.max(dup.access);
                } else {
                    i += 1;
                }
            }
        }
        out
    }

    // ----- violations -------------------------------------------------

    fn convert(&self, error: &ValidationError<'_>, out: &mut Vec<Violation>) {
        let field = error.instance_path().as_str();
        let instance: &Value = error.instance();
        let schema_path = error.schema_path().as_str();
        let keyword_parent = parent_pointer(schema_path);
        let subschema = self.schema.pointer(keyword_parent);
        let root = &self.schema;
        match error.kind() {
            ValidationErrorKind::Required { property } => {
                let name = property
                    .as_str()
                    .map_or_else(|| property.to_string(), str::to_owned);
                let mut f = field.to_owned();
                push_pointer_token(&mut f, &name);
                let prop_schema = subschema
                    .and_then(|s| s.get("properties"))
                    .and_then(|p| p.get(&name));
                let noun = prop_schema.map_or_else(|| "a value".to_owned(), |s| describe(s, root));
                out.push(Violation {
                    message: format!("{}: missing required field; expected {noun}", show(&f)),
                    expected: format!("{noun} (required)"),
                    actual: "missing".into(),
                    field: f,
                });
            }
            ValidationErrorKind::AdditionalProperties { unexpected }
            | ValidationErrorKind::UnevaluatedProperties { unexpected } => {
                let allowed = subschema
                    .and_then(|s| s.get("properties"))
                    .and_then(Value::as_object)
                    .map(|p| p.keys().map(String::as_str).collect::<Vec<_>>().join(", "))
                    .unwrap_or_default();
                let detail = if allowed.is_empty() {
                    "this object takes no fields".to_owned()
                } else {
                    format!("allowed: {allowed}")
                };
                let expected = format!("no such field; {detail}");
                for name in unexpected {
                    let mut f = field.to_owned();
                    push_pointer_token(&mut f, name);
                    let actual = instance.get(name).map_or_else(|| "present".into(), render);
                    out.push(Violation {
                        message: format!("{}: unknown field; {detail}", show(&f)),
                        expected: expected.clone(),
                        actual,
                        field: f,
                    });
                }
            }
            ValidationErrorKind::Type { kind } => {
                let expected = match subschema.and_then(|s| s.get("type")) {
                    Some(Value::String(t)) => t.clone(),
                    Some(Value::Array(ts)) => join_or(ts.iter().filter_map(Value::as_str)),
                    _ => match kind {
                        TypeKind::Single(t) => t.as_str().to_owned(),
                        TypeKind::Multiple(set) => join_or(set.iter().map(|t| t.as_str())),
                    },
                };
                out.push(violation(field, expected, typed(instance)));
            }
            ValidationErrorKind::Minimum { .. }
            | ValidationErrorKind::Maximum { .. }
            | ValidationErrorKind::ExclusiveMinimum { .. }
            | ValidationErrorKind::ExclusiveMaximum { .. } => {
                let s = subschema.unwrap_or(&Value::Null);
                out.push(violation(
                    field,
                    numeric_range(s, instance),
                    render(instance),
                ));
            }
            ValidationErrorKind::MultipleOf { .. } => {
                let m = subschema
                    .and_then(|s| s.get("multipleOf"))
                    .map_or_else(|| "?".into(), Value::to_string);
                out.push(violation(
                    field,
                    format!("a multiple of {m}"),
                    render(instance),
                ));
            }
            ValidationErrorKind::MinLength { .. } | ValidationErrorKind::MaxLength { .. } => {
                let s = subschema.unwrap_or(&Value::Null);
                let n = instance.as_str().map_or(0, |t| t.chars().count());
                let expected = match (uint(s, "minLength"), uint(s, "maxLength")) {
                    (Some(lo), Some(hi)) => format!("string of {lo} to {hi} characters"),
                    (Some(lo), None) => format!("string of at least {lo} character{}", plural(lo)),
                    (None, Some(hi)) => format!("string of at most {hi} character{}", plural(hi)),
                    (None, None) => "string of another length".into(),
                };
                let shown = clip(&render(instance), 40).into_owned();
                out.push(violation(
                    field,
                    expected,
                    format!("{n} character{}: {shown}", plural(n as u64)),
                ));
            }
            ValidationErrorKind::MinItems { .. } | ValidationErrorKind::MaxItems { .. } => {
                let s = subschema.unwrap_or(&Value::Null);
                let n = instance.as_array().map_or(0, Vec::len) as u64;
                let expected = match (uint(s, "minItems"), uint(s, "maxItems")) {
                    (Some(lo), Some(hi)) => format!("array of {lo} to {hi} items"),
                    (Some(lo), None) => format!("array of at least {lo} item{}", plural(lo)),
                    (None, Some(hi)) => format!("array of at most {hi} item{}", plural(hi)),
                    (None, None) => "array of another length".into(),
                };
                out.push(violation(
                    field,
                    expected,
                    format!("array of {n} item{}", plural(n)),
                ));
            }
            ValidationErrorKind::MinProperties { limit } => {
                let n = instance.as_object().map_or(0, Map::len) as u64;
                out.push(violation(
                    field,
                    format!("object with at least {limit} field{}", plural(*limit)),
                    format!("object with {n} field{}", plural(n)),
                ));
            }
            ValidationErrorKind::MaxProperties { limit } => {
                let n = instance.as_object().map_or(0, Map::len) as u64;
                out.push(violation(
                    field,
                    format!("object with at most {limit} field{}", plural(*limit)),
                    format!("object with {n} field{}", plural(n)),
                ));
            }
            ValidationErrorKind::UniqueItems => {
                out.push(violation(
                    field,
                    "array without duplicate items".into(),
                    clip(&render(instance), MAX_ACTUAL_CHARS).into_owned(),
                ));
            }
            ValidationErrorKind::Enum { options } => {
                out.push(violation(field, one_of(options), render(instance)));
            }
            ValidationErrorKind::Constant { expected_value } => {
                out.push(violation(
                    field,
                    format!("exactly {}", render(expected_value)),
                    render(instance),
                ));
            }
            ValidationErrorKind::Pattern { pattern } => {
                out.push(violation(
                    field,
                    format!("string matching {}", clip(pattern, 120)),
                    render(instance),
                ));
            }
            ValidationErrorKind::Format { format } => {
                out.push(violation(
                    field,
                    format!("string in {format} format"),
                    render(instance),
                ));
            }
            ValidationErrorKind::FalseSchema => {
                let expected = match field.rsplit('/').next() {
                    Some(last) if !field.is_empty() && last.parse::<usize>().is_ok() => {
                        "no item at this position".to_owned()
                    }
                    _ if !field.is_empty() => "no such field".to_owned(),
                    _ => "nothing (no value is accepted)".to_owned(),
                };
                out.push(violation(field, expected, render(instance)));
            }
            ValidationErrorKind::PropertyNames { error } => {
                let mut inner = Vec::new();
                self.convert(error, &mut inner);
                for v in inner {
                    out.push(violation(
                        field,
                        format!("field names that are {}", v.expected),
                        v.actual,
                    ));
                }
            }
            ValidationErrorKind::AnyOf { context }
            | ValidationErrorKind::OneOfNotValid { context } => {
                self.convert_union(error, field, instance, schema_path, context, out);
            }
            ValidationErrorKind::OneOfMultipleValid { context } => {
                let n = context.iter().filter(|b| b.is_empty()).count();
                out.push(violation(
                    field,
                    "a value matching exactly one alternative".into(),
                    format!("{} (matches {n} alternatives)", render(instance)),
                ));
            }
            _ => {
                let keyword = error.kind().keyword().to_owned();
                let mut v = violation(
                    field,
                    format!("a value satisfying `{keyword}`"),
                    render(instance),
                );
                v.message = format!("{}: {}", show(field), clip(&error.to_string(), 200));
                out.push(v);
            }
        }
    }

    fn convert_union(
        &self,
        error: &ValidationError<'_>,
        field: &str,
        instance: &Value,
        schema_path: &str,
        context: &[Vec<ValidationError<'static>>],
        out: &mut Vec<Violation>,
    ) {
        let root = &self.schema;
        let branches: Vec<&Value> = match root.pointer(schema_path) {
            Some(Value::Array(b)) if b.len() == context.len() => {
                b.iter().map(|s| deref(s, root)).collect()
            }
            _ => {
                let mut v = violation(
                    field,
                    "a value matching one of the alternatives".into(),
                    typed(instance),
                );
                v.message = format!("{}: {}", show(field), clip(&error.to_string(), 200));
                out.push(v);
                return;
            }
        };
        // A tagged union: let the tag choose the branch.
        if let (Some(obj), Some((tag, values))) =
            (instance.as_object(), discriminator(&branches, root))
        {
            let mut f = field.to_owned();
            push_pointer_token(&mut f, &tag);
            match obj.get(&tag) {
                Some(sent) => {
                    if let Some(i) = values.iter().position(|v| v.as_ref() == Some(sent)) {
                        for e in &context[i] {
                            self.convert(e, out);
                        }
                    } else {
                        let options =
                            Value::Array(values.iter().flatten().cloned().collect::<Vec<_>>());
                        out.push(violation(&f, one_of(&options), render(sent)));
                    }
                }
                None => {
                    let options = Value::Array(values.iter().flatten().cloned().collect());
                    let noun = one_of(&options);
                    out.push(Violation {
                        message: format!("{}: missing required field; expected {noun}", show(&f)),
                        expected: format!("{noun} (required)"),
                        actual: "missing".into(),
                        field: f,
                    });
                }
            }
            return;
        }
        // Otherwise the branches that accept this kind of value.
        let candidates: Vec<usize> = (0..branches.len())
            .filter(|&i| accepts_type(branches[i], instance, root))
            .collect();
        match candidates.as_slice() {
            [] => {
                let expected = join_or(branches.iter().map(|b| noun(b, root)));
                out.push(violation(field, expected, typed(instance)));
            }
            _ => {
                let best = candidates
                    .iter()
                    .copied()
                    .min_by_key(|&i| context[i].len())
                    .unwrap_or(0);
                let before = out.len();
                for e in &context[best] {
                    self.convert(e, out);
                }
                if out.len() == before {
                    out.push(violation(
                        field,
                        "a value matching one of the alternatives".into(),
                        typed(instance),
                    ));
                }
            }
        }
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

fn violation(field: &str, expected: String, actual: String) -> Violation {
    Violation {
        message: format!("{}: expected {expected}, got {actual}", show(field)),
        field: field.to_owned(),
        expected,
        actual,
    }
}

/// A field for messages: the root is "arguments".
fn show(field: &str) -> &str {
    if field.is_empty() {
        "arguments"
    } else {
        field
    }
}

/// The pointer without its last token (`""` stays `""`).
fn parent_pointer(pointer: &str) -> &str {
    pointer.rfind('/').map_or("", |i| &pointer[..i])
}

/// Orders JSON Pointers token by token, numeric tokens numerically.
pub fn compare_pointers(a: &str, b: &str) -> Ordering {
    let mut xs = a.split('/');
    let mut ys = b.split('/');
    loop {
        match (xs.next(), ys.next()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(x), Some(y)) => {
                let ord = match (x.parse::<u64>(), y.parse::<u64>()) {
                    (Ok(m), Ok(n)) => m.cmp(&n),
                    _ => x.cmp(y),
                };
                if ord != Ordering::Equal {
                    return ord;
                }
            }
        }
    }
}

fn plural(n: u64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

fn uint(schema: &Value, key: &str) -> Option<u64> {
    schema.get(key).and_then(Value::as_u64)
}

/// Compact JSON, clipped to [`MAX_ACTUAL_CHARS`].
fn render(value: &Value) -> String {
    let text = value.to_string();
    clip(&text, MAX_ACTUAL_CHARS).into_owned()
}

/// `string "5"`, `integer 3`, `null`, `object {"a":1}`…
fn typed(value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        other => format!("{} {}", type_name(other), render(other)),
    }
}

/// The JSON Schema type name of a value.
pub(crate) fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn join_or<S: AsRef<str>>(items: impl IntoIterator<Item = S>) -> String {
    let mut seen: Vec<String> = Vec::new();
    for item in items {
        let s = item.as_ref().to_owned();
        if !seen.contains(&s) {
            seen.push(s);
        }
    }
    seen.join(" or ")
}

fn one_of(options: &Value) -> String {
    match options.as_array() {
        Some(list) if list.len() == 1 => format!("exactly {}", render(&list[0])),
        Some(list) => {
            let text = list.iter().map(render).collect::<Vec<_>>().join(", ");
            format!("one of {}", clip(&text, 200))
        }
        None => format!("one of {}", render(options)),
    }
}

/// `integer ≥ 1`, `number > 0 and ≤ 1`…
fn numeric_range(schema: &Value, instance: &Value) -> String {
    let is_integer = match schema.get("type") {
        Some(Value::String(t)) => t == "integer",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "integer"),
        _ => type_name(instance) == "integer",
    };
    let noun = if is_integer { "integer" } else { "number" };
    let mut parts = Vec::new();
    if let Some(v) = schema.get("minimum").filter(|v| v.is_number()) {
        parts.push(format!("≥ {v}"));
    }
    if let Some(v) = schema.get("exclusiveMinimum").filter(|v| v.is_number()) {
        parts.push(format!("> {v}"));
    }
    if let Some(v) = schema.get("maximum").filter(|v| v.is_number()) {
        parts.push(format!("≤ {v}"));
    }
    if let Some(v) = schema.get("exclusiveMaximum").filter(|v| v.is_number()) {
        parts.push(format!("< {v}"));
    }
    if parts.is_empty() {
        noun.to_owned()
    } else {
        format!("{noun} {}", parts.join(" and "))
    }
}

// ----- schema inspection helpers (shared with lint) ---------------------

/// Resolves a `$ref` inside the document: `#`, `#/json/pointer` (also
/// percent-encoded) and `#anchor` (`$anchor`). Returns the target and its
/// pointer.
pub(crate) fn resolve_ref<'s>(reference: &str, root: &'s Value) -> Option<(&'s Value, String)> {
    let fragment = reference.strip_prefix('#')?;
    if fragment.is_empty() {
        return Some((root, String::new()));
    }
    if fragment.starts_with('/') {
        let pointer = percent_decode(fragment)?;
        return root.pointer(&pointer).map(|s| (s, pointer));
    }
    find_anchor(root, fragment, &mut String::new())
}

fn percent_decode(s: &str) -> Option<String> {
    if !s.contains('%') {
        return Some(s.to_owned());
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

fn find_anchor<'s>(
    schema: &'s Value,
    anchor: &str,
    pointer: &mut String,
) -> Option<(&'s Value, String)> {
    if schema.get("$anchor").and_then(Value::as_str) == Some(anchor) {
        return Some((schema, pointer.clone()));
    }
    let mut found = None;
    for_each_subschema(schema, &mut |keyword, token, sub| {
        if found.is_some() {
            return;
        }
        let len = pointer.len();
        push_pointer_token(pointer, keyword);
        if let Some(t) = token {
            push_pointer_token(pointer, t);
        }
        found = find_anchor(sub, anchor, pointer);
        pointer.truncate(len);
    });
    found
}

/// Follows local `$ref`s (a few hops) for inspection; otherwise `schema`.
pub(crate) fn deref<'s>(schema: &'s Value, root: &'s Value) -> &'s Value {
    let mut current = schema;
    for _ in 0..8 {
        match current.get("$ref").and_then(Value::as_str) {
            Some(r) => match resolve_ref(r, root) {
                Some((target, _)) => current = target,
                None => return current,
            },
            None => return current,
        }
    }
    current
}

/// Calls `f(keyword, token, subschema)` for every direct subschema of
/// `schema` (`token` is the property name or index under the keyword).
pub(crate) fn for_each_subschema<'s>(
    schema: &'s Value,
    f: &mut dyn FnMut(&'static str, Option<&str>, &'s Value),
) {
    const SINGLE: &[&str] = &[
        "additionalProperties",
        "items",
        "contains",
        "propertyNames",
        "not",
        "if",
        "then",
        "else",
        "unevaluatedProperties",
        "unevaluatedItems",
        "additionalItems",
        "contentSchema",
    ];
    const LISTS: &[&str] = &["prefixItems", "allOf", "anyOf", "oneOf"];
    const MAPS: &[&str] = &[
        "$defs",
        "definitions",
        "properties",
        "patternProperties",
        "dependentSchemas",
    ];
    let Some(map) = schema.as_object() else {
        return;
    };
    for (key, value) in map {
        let key = key.as_str();
        if let Some(&k) = SINGLE.iter().find(|&&k| k == key) {
            if value.is_object() || value.is_boolean() {
                f(k, None, value);
            } else if k == "items" {
                // Draft 2019-09 style tuple `items`.
                if let Value::Array(list) = value {
                    for (i, sub) in list.iter().enumerate() {
                        f(k, Some(&i.to_string()), sub);
                    }
                }
            }
        } else if let Some(&k) = LISTS.iter().find(|&&k| k == key) {
            if let Value::Array(list) = value {
                for (i, sub) in list.iter().enumerate() {
                    f(k, Some(&i.to_string()), sub);
                }
            }
        } else if let Some(&k) = MAPS.iter().find(|&&k| k == key) {
            if let Value::Object(entries) = value {
                for (name, sub) in entries {
                    f(k, Some(name), sub);
                }
            }
        }
    }
}

/// The `type` keyword as a list of names (empty when absent).
pub(crate) fn schema_types(schema: &Value) -> Vec<&str> {
    match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

/// Whether a schema admits `null`: `type` includes "null", `const: null`,
/// `enum` with null, or a union with a null branch.
pub(crate) fn is_nullable(schema: &Value, root: &Value) -> bool {
    let schema = deref(schema, root);
    if schema_types(schema).contains(&"null") {
        return true;
    }
    if schema.get("const") == Some(&Value::Null) {
        return true;
    }
    if let Some(Value::Array(list)) = schema.get("enum") {
        if list.contains(&Value::Null) {
            return true;
        }
    }
    ["anyOf", "oneOf"].iter().any(|k| {
        schema
            .get(*k)
            .and_then(Value::as_array)
            .is_some_and(|bs| bs.iter().any(|b| is_nullable(b, root)))
    })
}

/// A branch that only admits null.
pub(crate) fn is_null_only(schema: &Value) -> bool {
    schema_types(schema) == ["null"]
        || schema.get("const") == Some(&Value::Null)
        || schema.get("enum") == Some(&Value::Array(vec![Value::Null]))
}

/// The single value a property schema fixes (`const` or a one-value `enum`).
pub(crate) fn fixed_value(schema: &Value) -> Option<&Value> {
    if let Some(c) = schema.get("const") {
        return Some(c);
    }
    match schema.get("enum") {
        Some(Value::Array(list)) if list.len() == 1 => Some(&list[0]),
        _ => None,
    }
}

/// Whether a schema describes objects (by `type` or by object keywords).
pub(crate) fn is_object_schema(schema: &Value) -> bool {
    let types = schema_types(schema);
    if !types.is_empty() {
        return types.contains(&"object");
    }
    schema.is_object()
        && ["properties", "required", "additionalProperties"]
            .iter()
            .any(|k| schema.get(*k).is_some())
}

/// The discriminator of a union of object branches: a property every
/// non-null branch fixes to a distinct value. Returns the property name and,
/// per branch, the value (None for null branches).
pub(crate) fn discriminator(
    branches: &[&Value],
    root: &Value,
) -> Option<(String, Vec<Option<Value>>)> {
    let objects: Vec<&Value> = branches
        .iter()
        .map(|b| deref(b, root))
        .filter(|b| !is_null_only(b))
        .collect();
    if objects.len() < 2 || !objects.iter().all(|b| is_object_schema(b)) {
        return None;
    }
    let first = objects[0].get("properties")?.as_object()?;
    'candidates: for name in first.keys() {
        let mut values: Vec<&Value> = Vec::new();
        for branch in &objects {
            let Some(prop) = branch.get("properties").and_then(|p| p.get(name)) else {
                continue 'candidates;
            };
            let Some(v) = fixed_value(deref(prop, root)) else {
                continue 'candidates;
            };
            if values.contains(&v) {
                continue 'candidates;
            }
            values.push(v);
        }
        let per_branch = branches
            .iter()
            .map(|b| {
                let b = deref(b, root);
                if is_null_only(b) {
                    None
                } else {
                    b.get("properties")
                        .and_then(|p| p.get(name))
                        .and_then(|p| fixed_value(deref(p, root)))
                        .cloned()
                }
            })
            .collect();
        return Some((name.clone(), per_branch));
    }
    None
}

/// Whether `schema` admits values of `instance`'s JSON type (ignoring all
/// other constraints).
fn accepts_type(schema: &Value, instance: &Value, root: &Value) -> bool {
    let schema = deref(schema, root);
    match schema {
        Value::Bool(b) => return *b,
        Value::Object(_) => {}
        _ => return false,
    }
    if let Some(c) = schema.get("const") {
        return type_name(c) == type_name(instance) || (c.is_number() && instance.is_number());
    }
    if let Some(Value::Array(list)) = schema.get("enum") {
        return list.iter().any(|c| {
            type_name(c) == type_name(instance) || (c.is_number() && instance.is_number())
        });
    }
    let types = schema_types(schema);
    if types.is_empty() {
        for k in ["anyOf", "oneOf"] {
            if let Some(Value::Array(bs)) = schema.get(k) {
                return bs.iter().any(|b| accepts_type(b, instance, root));
            }
        }
        return true;
    }
    let t = type_name(instance);
    types.iter().any(|&ty| {
        ty == t
            || (ty == "number" && t == "integer")
            || (ty == "integer"
                && instance
                    .as_f64()
                    .is_some_and(|f| f.fract() == 0.0 && t == "number"))
    })
}

/// A bare noun for a schema: `string`, `integer or null`, `one of "a", "b"`.
fn noun(schema: &Value, root: &Value) -> String {
    noun_at(schema, root, 0)
}

fn noun_at(schema: &Value, root: &Value, depth: usize) -> String {
    let schema = deref(schema, root);
    match schema {
        Value::Bool(true) => return "value".into(),
        Value::Bool(false) => return "nothing".into(),
        Value::Object(_) => {}
        _ => return "value".into(),
    }
    if let Some(c) = schema.get("const") {
        return format!("exactly {}", render(c));
    }
    if let Some(options @ Value::Array(_)) = schema.get("enum") {
        return one_of(options);
    }
    let types = schema_types(schema);
    if !types.is_empty() {
        return join_or(types);
    }
    if depth < 4 {
        for k in ["anyOf", "oneOf"] {
            if let Some(Value::Array(bs)) = schema.get(k) {
                return join_or(bs.iter().map(|b| noun_at(b, root, depth + 1)));
            }
        }
    }
    if schema.get("properties").is_some() {
        return "object".into();
    }
    if schema.get("items").is_some() || schema.get("prefixItems").is_some() {
        return "array".into();
    }
    "value".into()
}

/// A noun with its article: `a string`, `an integer or null`, `one of …`.
fn describe(schema: &Value, root: &Value) -> String {
    let n = noun(schema, root);
    if n.starts_with("exactly ") || n.starts_with("one of ") || n.starts_with("null") {
        return n;
    }
    if n.starts_with(['a', 'e', 'i', 'o', 'u']) {
        format!("an {n}")
    } else {
        format!("a {n}")
    }
}

// ----- format-implied integer bounds -----------------------------------

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
    for (key, value) in map.iter_mut() {
        match key.as_str() {
            "additionalProperties"
            | "items"
            | "contains"
            | "propertyNames"
            | "not"
            | "if"
            | "then"
            | "else"
            | "unevaluatedProperties"
            | "unevaluatedItems" => {
                add_format_bounds(value);
            }
            "prefixItems" | "allOf" | "anyOf" | "oneOf" => {
                if let Value::Array(list) = value {
                    list.iter_mut().for_each(add_format_bounds);
                }
            }
            "$defs" | "definitions" | "properties" | "patternProperties" | "dependentSchemas" => {
                if let Value::Object(entries) = value {
                    entries.values_mut().for_each(add_format_bounds);
                }
            }
            _ => {}
        }
    }
}

// ----- path index ---------------------------------------------------------

/// Compile-time graph of the schema locations that can lead to an annotated
/// path argument. Node 0 is the root.
#[derive(Debug, Default)]
struct PathIndex {
    nodes: Vec<PathNode>,
    fields: Vec<PathField>,
    root_relevant: bool,
}

#[derive(Debug, Default, Clone)]
struct PathNode {
    access: Option<PathAccess>,
    props: Vec<(String, usize)>,
    /// Children for keys not listed in `props` of their own schema.
    additional: Vec<usize>,
    /// `prefix[i]`: children for array index i.
    prefix: Vec<Vec<usize>>,
    /// `(first index, child)`: children for indices ≥ first index.
    items: Vec<(usize, usize)>,
    /// Same-instance links (`$ref`, `anyOf`, …); flattened away after build.
    also: Vec<usize>,
    /// Names this node's own schema lists in `properties` (for `additional`).
    own_props: Vec<String>,
}

struct PathBuilder<'s> {
    root: &'s Value,
    memo: HashMap<String, usize>,
    nodes: Vec<PathNode>,
    fields: Vec<PathField>,
    unresolved: Vec<(String, String)>,
}

impl PathIndex {
    fn build(root: &Value) -> Result<PathIndex, SchemaError> {
        // Cheap exit: no annotation anywhere in the document.
        if !contains_key_deep(root, PATH_ANNOTATION) {
            return Ok(PathIndex::default());
        }
        if has_nested_id(root, true) {
            return Err(SchemaError::new(
                SchemaErrorKind::PathAnnotation,
                format!("{PATH_ANNOTATION} is not supported in schemas that embed resources with their own $id"),
                None,
            ));
        }
        let mut b = PathBuilder {
            root,
            memo: HashMap::new(),
            nodes: Vec::new(),
            fields: Vec::new(),
            unresolved: Vec::new(),
        };
        b.node(root, String::new())?;
        // Every annotation must be one the walker reached.
        let mut stray = Vec::new();
        scan_untracked(
            root,
            &mut String::new(),
            None,
            root,
            &mut HashSet::new(),
            &mut stray,
        );
        if let Some((pointer, keyword)) = stray.into_iter().next() {
            return Err(SchemaError::new(
                SchemaErrorKind::PathAnnotation,
                format!(
                    "{PATH_ANNOTATION} under `{keyword}` cannot be tracked; put path fields under properties, items, prefixItems, additionalProperties, anyOf/oneOf/allOf or a local $ref"
                ),
                Some(pointer),
            ));
        }
        if !b.fields.is_empty() {
            if let Some((pointer, reference)) = b.unresolved.first() {
                return Err(SchemaError::new(
                    SchemaErrorKind::PathAnnotation,
                    format!("cannot follow $ref {reference:?} while looking for {PATH_ANNOTATION} fields; use a local reference (#/$defs/...)"),
                    Some(pointer.clone()),
                ));
            }
        }
        let PathBuilder { nodes, fields, .. } = b;
        let mut index = PathIndex {
            nodes,
            fields,
            root_relevant: false,
        };
        index.flatten();
        index.prune();
        Ok(index)
    }

    /// Merges every node with the nodes it links to through `also`.
    fn flatten(&mut self) {
        let n = self.nodes.len();
        let mut merged = Vec::with_capacity(n);
        for start in 0..n {
            let mut seen = vec![false; n];
            let mut stack = vec![start];
            let mut node = PathNode::default();
            while let Some(i) = stack.pop() {
                if std::mem::replace(&mut seen[i], true) {
                    continue;
                }
                let src = &self.nodes[i];
                node.access = node.access.max(src.access);
                node.props.extend(src.props.iter().cloned());
                if !src.additional.is_empty() {
                    // `additional` of a linked schema applies to keys that
                    // schema does not list itself.
                    node.own_props.extend(src.own_props.iter().cloned());
                    node.additional.extend(src.additional.iter().copied());
                }
                for (k, children) in src.prefix.iter().enumerate() {
                    if node.prefix.len() <= k {
                        node.prefix.resize(k + 1, Vec::new());
                    }
                    node.prefix[k].extend(children.iter().copied());
                }
                node.items.extend(src.items.iter().copied());
                stack.extend(src.also.iter().copied());
            }
            merged.push(node);
        }
        self.nodes = merged;
    }

    /// Drops children that cannot lead to an annotated string.
    fn prune(&mut self) {
        let n = self.nodes.len();
        let mut relevant: Vec<bool> = self.nodes.iter().map(|x| x.access.is_some()).collect();
        loop {
            let mut changed = false;
            for i in 0..n {
                if relevant[i] {
                    continue;
                }
                let x = &self.nodes[i];
                let any = x.props.iter().any(|(_, c)| relevant[*c])
                    || x.additional.iter().any(|c| relevant[*c])
                    || x.prefix.iter().flatten().any(|c| relevant[*c])
                    || x.items.iter().any(|(_, c)| relevant[*c]);
                if any {
                    relevant[i] = true;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        for x in &mut self.nodes {
            x.props.retain(|(_, c)| relevant[*c]);
            x.additional.retain(|c| relevant[*c]);
            for p in &mut x.prefix {
                p.retain(|c| relevant[*c]);
            }
            x.items.retain(|(_, c)| relevant[*c]);
            x.also.clear();
        }
        self.root_relevant = n > 0 && relevant[0];
    }

    fn visit<'a>(
        &self,
        node: usize,
        value: &'a Value,
        pointer: &mut String,
        out: &mut Vec<PathArg<'a>>,
    ) {
        let x = &self.nodes[node];
        match value {
            Value::String(s) => {
                if let Some(access) = x.access {
                    out.push(PathArg {
                        pointer: pointer.clone(),
                        value: s,
                        access,
                    });
                }
            }
            Value::Object(map) => {
                for (name, child) in &x.props {
                    if let Some(v) = map.get(name) {
                        let len = pointer.len();
                        push_pointer_token(pointer, name);
                        self.visit(*child, v, pointer, out);
                        pointer.truncate(len);
                    }
                }
                if !x.additional.is_empty() {
                    for (key, v) in map {
                        if x.own_props.iter().any(|p| p == key) {
                            continue;
                        }
                        for child in &x.additional {
                            let len = pointer.len();
                            push_pointer_token(pointer, key);
                            self.visit(*child, v, pointer, out);
                            pointer.truncate(len);
                        }
                    }
                }
            }
            Value::Array(list) => {
                if x.prefix.is_empty() && x.items.is_empty() {
                    return;
                }
                for (i, v) in list.iter().enumerate() {
                    let len = pointer.len();
                    pointer.push('/');
                    pointer.push_str(&i.to_string());
                    if let Some(children) = x.prefix.get(i) {
                        for child in children {
                            self.visit(*child, v, pointer, out);
                        }
                    }
                    for &(first, child) in &x.items {
                        if i >= first {
                            self.visit(child, v, pointer, out);
                        }
                    }
                    pointer.truncate(len);
                }
            }
            _ => {}
        }
    }
}

impl<'s> PathBuilder<'s> {
    fn node(&mut self, schema: &'s Value, pointer: String) -> Result<usize, SchemaError> {
        if let Some(&id) = self.memo.get(&pointer) {
            return Ok(id);
        }
        let id = self.nodes.len();
        self.nodes.push(PathNode::default());
        self.memo.insert(pointer.clone(), id);
        let Some(map) = schema.as_object() else {
            return Ok(id);
        };
        let mut node = PathNode::default();
        if let Some(annotation) = map.get(PATH_ANNOTATION) {
            let access = match annotation.as_str() {
                Some("read") => PathAccess::Read,
                Some("write") => PathAccess::Write,
                _ => {
                    return Err(SchemaError::new(
                        SchemaErrorKind::PathAnnotation,
                        format!(
                            "{PATH_ANNOTATION} must be \"read\" or \"write\", not {annotation}"
                        ),
                        Some(format!("{pointer}/{PATH_ANNOTATION}")),
                    ))
                }
            };
            let types = schema_types(schema);
            if !types.contains(&"string") {
                return Err(SchemaError::new(
                    SchemaErrorKind::PathAnnotation,
                    format!("{PATH_ANNOTATION} belongs on a string schema (\"type\": \"string\")"),
                    Some(pointer.clone()),
                ));
            }
            node.access = Some(access);
            self.fields.push(PathField {
                schema_pointer: pointer.clone(),
                access,
            });
        }
        let child = |kw: &str, token: Option<&str>| {
            let mut p = pointer.clone();
            push_pointer_token(&mut p, kw);
            if let Some(t) = token {
                push_pointer_token(&mut p, t);
            }
            p
        };
        if let Some(Value::Object(props)) = map.get("properties") {
            for (name, sub) in props {
                let c = self.node(sub, child("properties", Some(name)))?;
                node.props.push((name.clone(), c));
                node.own_props.push(name.clone());
            }
        }
        if let Some(sub @ (Value::Object(_) | Value::Bool(_))) = map.get("additionalProperties") {
            let c = self.node(sub, child("additionalProperties", None))?;
            node.additional.push(c);
        }
        let mut first_item = 0;
        if let Some(Value::Array(list)) = map.get("prefixItems") {
            first_item = list.len();
            for (i, sub) in list.iter().enumerate() {
                let c = self.node(sub, child("prefixItems", Some(&i.to_string())))?;
                node.prefix.push(vec![c]);
            }
        }
        if let Some(sub @ (Value::Object(_) | Value::Bool(_))) = map.get("items") {
            let c = self.node(sub, child("items", None))?;
            node.items.push((first_item, c));
        }
        for kw in ["anyOf", "oneOf", "allOf"] {
            if let Some(Value::Array(list)) = map.get(kw) {
                for (i, sub) in list.iter().enumerate() {
                    let c = self.node(sub, child(kw, Some(&i.to_string())))?;
                    node.also.push(c);
                }
            }
        }
        for kw in ["then", "else"] {
            if let Some(sub) = map.get(kw) {
                let c = self.node(sub, child(kw, None))?;
                node.also.push(c);
            }
        }
        if let Some(Value::Object(deps)) = map.get("dependentSchemas") {
            for (name, sub) in deps {
                let c = self.node(sub, child("dependentSchemas", Some(name)))?;
                node.also.push(c);
            }
        }
        for kw in ["$ref", "$dynamicRef"] {
            if let Some(reference) = map.get(kw).and_then(Value::as_str) {
                match (kw, resolve_ref(reference, self.root)) {
                    ("$ref", Some((target, target_pointer))) => {
                        let c = self.node(target, target_pointer)?;
                        node.also.push(c);
                    }
                    _ => self
                        .unresolved
                        .push((child(kw, None), reference.to_owned())),
                }
            }
        }
        self.nodes[id] = node;
        Ok(id)
    }
}

fn contains_key_deep(value: &Value, key: &str) -> bool {
    match value {
        Value::Object(map) => {
            map.contains_key(key) || map.values().any(|v| contains_key_deep(v, key))
        }
        Value::Array(list) => list.iter().any(|v| contains_key_deep(v, key)),
        _ => false,
    }
}

fn has_nested_id(schema: &Value, is_root: bool) -> bool {
    if !is_root && schema.get("$id").is_some_and(Value::is_string) {
        return true;
    }
    let mut found = false;
    for_each_subschema(schema, &mut |_, _, sub| {
        found = found || has_nested_id(sub, false);
    });
    found
}

/// Collects annotations under keywords the path walker does not follow
/// (`under` names the first such keyword on the way down). Inside such a
/// keyword, local `$ref`s are followed too.
fn scan_untracked(
    schema: &Value,
    pointer: &mut String,
    under: Option<&'static str>,
    root: &Value,
    visited: &mut HashSet<String>,
    stray: &mut Vec<(String, &'static str)>,
) {
    if let Some(keyword) = under {
        if schema.get(PATH_ANNOTATION).is_some() {
            stray.push((pointer.clone(), keyword));
        }
        if let Some((target, target_pointer)) = schema
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| resolve_ref(r, root))
        {
            if visited.insert(target_pointer.clone()) {
                let mut p = target_pointer;
                scan_untracked(target, &mut p, under, root, visited, stray);
            }
        }
    }
    for_each_subschema(schema, &mut |keyword, token, sub| {
        let untracked = matches!(
            keyword,
            "patternProperties"
                | "not"
                | "if"
                | "contains"
                | "propertyNames"
                | "unevaluatedProperties"
                | "unevaluatedItems"
                | "additionalItems"
                | "contentSchema"
        ) || (keyword == "items" && token.is_some());
        let next = under.or(if untracked { Some(keyword) } else { None });
        let len = pointer.len();
        push_pointer_token(pointer, keyword);
        if let Some(t) = token {
            push_pointer_token(pointer, t);
        }
        scan_untracked(sub, pointer, next, root, visited, stray);
        pointer.truncate(len);
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// What schemars 1.x emits for
    /// `struct ReadFile { path: String, offset: Option<u64>, limit: Option<u32> }`
    /// (plus bounds and a path annotation).
    fn read_file_schema() -> Value {
        json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "ReadFileArgs",
            "type": "object",
            "properties": {
                "path": {
                    "description": "Workspace-relative path.",
                    "type": "string",
                    "maxLength": 1024,
                    "x-toolhost-path": "read"
                },
                "offset": {
                    "description": "First line, 1-based.",
                    "type": ["integer", "null"],
                    "format": "uint64",
                    "minimum": 1,
                    "maximum": 1000000
                },
                "limit": {
                    "type": ["integer", "null"],
                    "format": "uint32",
                    "minimum": 1,
                    "maximum": 2000,
                    "default": 200
                }
            },
            "required": ["path"],
            "additionalProperties": false
        })
    }

    fn compile(schema: Value) -> CompiledSchema {
        CompiledSchema::compile(&schema).unwrap_or_else(|e| panic!("{e}"))
    }

    fn violations(schema: &CompiledSchema, args: Value) -> Vec<Violation> {
        schema.validate(&args).expect_err("should be invalid")
    }

    fn only(schema: &CompiledSchema, args: Value) -> Violation {
        let mut v = violations(schema, args);
        assert_eq!(v.len(), 1, "{v:#?}");
        v.remove(0)
    }

    #[test]
    fn valid_arguments_pass() {
        let s = compile(read_file_schema());
        assert!(s.validate(&json!({"path": "src/lib.rs"})).is_ok());
        assert!(s
            .validate(&json!({"path": "a", "offset": null, "limit": 10}))
            .is_ok());
        assert!(s.is_valid(&json!({"path": "a", "offset": 5})));
    }

    #[test]
    fn missing_required_field() {
        let s = compile(read_file_schema());
        let v = only(&s, json!({"offset": 3}));
        assert_eq!(v.field, "/path");
        assert_eq!(v.expected, "a string (required)");
        assert_eq!(v.actual, "missing");
        assert!(v.message.contains("/path"), "{}", v.message);
    }

    #[test]
    fn extra_field_lists_allowed_fields() {
        let s = compile(read_file_schema());
        let v = only(&s, json!({"path": "a", "verbose": true}));
        assert_eq!(v.field, "/verbose");
        assert_eq!(v.expected, "no such field; allowed: path, offset, limit");
        assert_eq!(v.actual, "true");
        assert_eq!(
            v.message,
            "/verbose: unknown field; allowed: path, offset, limit"
        );
    }

    #[test]
    fn wrong_type() {
        let s = compile(read_file_schema());
        let v = only(&s, json!({"path": "a", "offset": "5"}));
        assert_eq!(v.field, "/offset");
        assert_eq!(v.expected, "integer or null");
        assert_eq!(v.actual, "string \"5\"");
        let v = only(&s, json!({"path": 7}));
        assert_eq!(
            (v.expected.as_str(), v.actual.as_str()),
            ("string", "integer 7")
        );
        let v = only(&s, json!([1, 2]));
        assert_eq!(v.field, "");
        assert_eq!(v.expected, "object");
        assert_eq!(v.actual, "array [1,2]");
        assert!(
            v.message.starts_with("arguments: expected object"),
            "{}",
            v.message
        );
    }

    #[test]
    fn out_of_range() {
        let s = compile(read_file_schema());
        let v = only(&s, json!({"path": "a", "offset": 0}));
        assert_eq!(v.field, "/offset");
        assert_eq!(v.expected, "integer ≥ 1 and ≤ 1000000");
        assert_eq!(v.actual, "0");
        let s = compile(json!({"type": "object", "properties": {
            "n": {"type": "integer", "minimum": 1},
            "x": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
            "m": {"type": "integer", "multipleOf": 5}
        }}));
        let v = only(&s, json!({"n": 0}));
        assert_eq!(v.expected, "integer ≥ 1");
        let v = only(&s, json!({"x": 1}));
        assert_eq!(v.expected, "number > 0 and < 1");
        let v = only(&s, json!({"m": 7}));
        assert_eq!(v.expected, "a multiple of 5");
    }

    #[test]
    fn integer_formats_imply_ranges() {
        let s = compile(read_file_schema());
        // uint32 limit with an explicit maximum keeps the explicit one.
        let v = only(&s, json!({"path": "a", "limit": 5000}));
        assert_eq!(v.expected, "integer ≥ 1 and ≤ 2000");
        let s = compile(json!({"type": "object", "properties": {
            "a": {"type": "integer", "format": "uint8"},
            "b": {"type": ["integer", "null"], "format": "int32"},
            "c": {"type": "integer", "format": "uint64"},
            "d": {"type": "string", "format": "uint8"}
        }}));
        assert!(s.is_valid(&json!({"a": 255, "b": -2147483648i64, "c": 0, "d": "x"})));
        assert_eq!(
            only(&s, json!({"a": 256})).expected,
            "integer ≥ 0 and ≤ 255"
        );
        assert_eq!(
            only(&s, json!({"b": 2147483648i64})).expected,
            "integer ≥ -2147483648 and ≤ 2147483647"
        );
        assert_eq!(only(&s, json!({"c": -1})).expected, "integer ≥ 0");
        assert_eq!(s.schema()["properties"]["a"]["maximum"], 255);
        assert!(s.schema()["properties"]["d"].get("maximum").is_none());
    }

    #[test]
    fn enum_pattern_length_const_format() {
        let s = compile(json!({
            "type": "object",
            "properties": {
                "mode": {"enum": ["fast", "slow"]},
                "name": {"type": "string", "pattern": "^[a-z]+$", "minLength": 2, "maxLength": 5},
                "kind": {"const": "file"},
                "when": {"type": "string", "format": "date-time"},
                "id": {"type": "string", "format": "uuid"},
                "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2, "uniqueItems": true}
            },
            "additionalProperties": false
        }));
        let v = only(&s, json!({"mode": "medium"}));
        assert_eq!(v.expected, "one of \"fast\", \"slow\"");
        assert_eq!(v.actual, "\"medium\"");
        let v = only(&s, json!({"name": "ABC"}));
        assert_eq!(v.expected, "string matching ^[a-z]+$");
        let v = only(&s, json!({"name": "abcdefgh"}));
        assert_eq!(v.expected, "string of 2 to 5 characters");
        assert_eq!(v.actual, "8 characters: \"abcdefgh\"");
        let v = only(&s, json!({"kind": "dir"}));
        assert_eq!(v.expected, "exactly \"file\"");
        let v = only(&s, json!({"when": "yesterday"}));
        assert_eq!(v.expected, "string in date-time format");
        let v = only(&s, json!({"id": "nope"}));
        assert_eq!(v.expected, "string in uuid format");
        assert!(s.is_valid(&json!({"when": "2024-01-02T03:04:05Z"})));
        let v = only(&s, json!({"tags": ["a", "b", "c"]}));
        assert_eq!(v.expected, "array of at most 2 items");
        assert_eq!(v.actual, "array of 3 items");
        let v = only(&s, json!({"tags": ["a", "a"]}));
        assert_eq!(v.expected, "array without duplicate items");
    }

    #[test]
    fn long_actual_values_are_clipped() {
        let s = compile(json!({"type": "object", "properties": {"n": {"type": "integer"}}}));
        let v = only(&s, json!({"n": "x".repeat(10_000)}));
        assert!(
            v.actual.chars().count() <= MAX_ACTUAL_CHARS + 8,
            "{}",
            v.actual
        );
        assert!(v.actual.ends_with('…'));
        assert!(v.message.chars().count() < 200);
    }

    #[test]
    fn violations_are_ordered_and_complete() {
        let s = compile(json!({
            "type": "object",
            "properties": {
                "items": {"type": "array", "items": {"type": "integer"}},
                "a": {"type": "string"},
                "b": {"type": "string"}
            },
            "required": ["a", "b"],
            "additionalProperties": false
        }));
        let args = json!({"zz": 1, "items": [1, "x", 3, 4, 5, 6, 7, 8, 9, 10, "y"]});
        let v = violations(&s, args.clone());
        let fields: Vec<&str> = v.iter().map(|v| v.field.as_str()).collect();
        assert_eq!(fields, ["/a", "/b", "/items/1", "/items/10", "/zz"]);
        // Deterministic.
        assert_eq!(v, violations(&s, args));
    }

    #[test]
    fn nested_objects_report_nested_pointers() {
        let s = compile(json!({
            "type": "object",
            "properties": {
                "opts": {
                    "type": "object",
                    "properties": {"depth": {"type": "integer", "minimum": 0, "maximum": 5}},
                    "required": ["depth"],
                    "additionalProperties": false
                }
            },
            "additionalProperties": false
        }));
        let v = only(&s, json!({"opts": {}}));
        assert_eq!(v.field, "/opts/depth");
        assert_eq!(v.expected, "an integer (required)");
        let v = only(&s, json!({"opts": {"depth": 1, "x/y": 2}}));
        assert_eq!(v.field, "/opts/x~1y");
        assert_eq!(v.expected, "no such field; allowed: depth");
    }

    #[test]
    fn refs_and_nullable_unions() {
        // schemars 1.x: Option<Struct> is anyOf [{$ref}, {type: null}].
        let s = compile(json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {
                "range": {"anyOf": [{"$ref": "#/$defs/Range"}, {"type": "null"}]}
            },
            "additionalProperties": false,
            "$defs": {
                "Range": {
                    "type": "object",
                    "properties": {
                        "start": {"type": "integer", "minimum": 1},
                        "end": {"type": "integer", "minimum": 1}
                    },
                    "required": ["start", "end"],
                    "additionalProperties": false
                }
            }
        }));
        assert!(s.is_valid(&json!({"range": null})));
        assert!(s.is_valid(&json!({"range": {"start": 1, "end": 2}})));
        let v = only(&s, json!({"range": {"start": 0, "end": 2}}));
        assert_eq!(v.field, "/range/start");
        assert_eq!(v.expected, "integer ≥ 1");
        let v = only(&s, json!({"range": {"start": 1}}));
        assert_eq!(v.field, "/range/end");
        assert_eq!(v.expected, "an integer (required)");
        let v = only(&s, json!({"range": 5}));
        assert_eq!(v.field, "/range");
        assert_eq!(v.expected, "object or null");
        assert_eq!(v.actual, "integer 5");
    }

    #[test]
    fn tagged_union_reports_the_selected_branch() {
        let s = compile(json!({
            "type": "object",
            "properties": {
                "target": {
                    "oneOf": [
                        {"type": "object", "properties": {
                            "kind": {"const": "file"}, "path": {"type": "string"}},
                         "required": ["kind", "path"], "additionalProperties": false},
                        {"type": "object", "properties": {
                            "kind": {"const": "dir"}, "path": {"type": "string"},
                            "recursive": {"type": "boolean"}},
                         "required": ["kind", "path", "recursive"], "additionalProperties": false},
                        {"type": "object", "properties": {
                            "kind": {"enum": ["url"]}, "url": {"type": "string"}},
                         "required": ["kind", "url"], "additionalProperties": false}
                    ]
                }
            },
            "required": ["target"],
            "additionalProperties": false
        }));
        assert!(s.is_valid(&json!({"target": {"kind": "file", "path": "a"}})));
        let v = only(&s, json!({"target": {"kind": "dir", "path": "a"}}));
        assert_eq!(v.field, "/target/recursive");
        assert_eq!(v.expected, "a boolean (required)");
        let v = only(
            &s,
            json!({"target": {"kind": "file", "path": "a", "recursive": true}}),
        );
        assert_eq!(v.field, "/target/recursive");
        assert_eq!(v.expected, "no such field; allowed: kind, path");
        let v = only(&s, json!({"target": {"kind": "link"}}));
        assert_eq!(v.field, "/target/kind");
        assert_eq!(v.expected, "one of \"file\", \"dir\", \"url\"");
        assert_eq!(v.actual, "\"link\"");
        let v = only(&s, json!({"target": {"path": "a"}}));
        assert_eq!(v.field, "/target/kind");
        assert_eq!(v.actual, "missing");
        let v = only(&s, json!({"target": "a"}));
        assert_eq!(v.field, "/target");
        assert_eq!(v.expected, "object");
    }

    #[test]
    fn untagged_union_picks_branch_by_type() {
        let s = compile(json!({
            "type": "object",
            "properties": {"v": {"anyOf": [{"type": "string", "maxLength": 3}, {"type": "integer", "minimum": 0}]}}
        }));
        let v = only(&s, json!({"v": "abcd"}));
        assert_eq!(v.expected, "string of at most 3 characters");
        let v = only(&s, json!({"v": -1}));
        assert_eq!(v.expected, "integer ≥ 0");
        let v = only(&s, json!({"v": true}));
        assert_eq!(v.expected, "string or integer");
        assert_eq!(v.actual, "boolean true");
    }

    #[test]
    fn one_of_matching_several() {
        let s = compile(json!({"oneOf": [{"type": "integer"}, {"type": "number"}]}));
        let v = only(&s, json!(3));
        assert_eq!(v.expected, "a value matching exactly one alternative");
    }

    #[test]
    fn tuple_and_false_schemas() {
        let s = compile(json!({
            "type": "object",
            "properties": {
                "pair": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": false},
                "gone": false
            }
        }));
        let v = only(&s, json!({"pair": ["a", 1, 2]}));
        assert_eq!(v.field, "/pair/2");
        assert_eq!(v.expected, "no item at this position");
        let v = only(&s, json!({"gone": 1}));
        assert_eq!(v.expected, "no such field");
        let s = compile(json!(false));
        assert_eq!(
            only(&s, json!({})).expected,
            "nothing (no value is accepted)"
        );
    }

    #[test]
    fn property_names_and_counts() {
        let s = compile(json!({
            "type": "object",
            "propertyNames": {"pattern": "^[a-z]+$"},
            "maxProperties": 2,
            "minProperties": 1
        }));
        let v = only(&s, json!({"A": 1}));
        assert_eq!(v.expected, "field names that are string matching ^[a-z]+$");
        let v = only(&s, json!({"a": 1, "b": 2, "c": 3}));
        assert_eq!(v.expected, "object with at most 2 fields");
        assert_eq!(v.actual, "object with 3 fields");
        let v = only(&s, json!({}));
        assert_eq!(v.expected, "object with at least 1 field");
    }

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

    // ----- path arguments -------------------------------------------------

    fn paths<'a>(s: &CompiledSchema, args: &'a Value) -> Vec<(String, &'a str, PathAccess)> {
        s.path_args(args)
            .into_iter()
            .map(|p| (p.pointer, p.value, p.access))
            .collect()
    }

    #[test]
    fn top_level_path_fields() {
        let s = compile(json!({
            "type": "object",
            "properties": {
                "src": {"type": "string", "x-toolhost-path": "read"},
                "dst": {"type": ["string", "null"], "x-toolhost-path": "write"},
                "note": {"type": "string"}
            }
        }));
        assert!(s.has_path_fields());
        assert_eq!(
            s.path_fields(),
            [
                PathField {
                    schema_pointer: "/properties/src".into(),
                    access: PathAccess::Read
                },
                PathField {
                    schema_pointer: "/properties/dst".into(),
                    access: PathAccess::Write
                },
            ]
        );
        let args = json!({"note": "n", "dst": "out.txt", "src": "in.txt"});
        assert_eq!(
            paths(&s, &args),
            [
                ("/src".to_owned(), "in.txt", PathAccess::Read),
                ("/dst".to_owned(), "out.txt", PathAccess::Write),
            ]
        );
        assert!(paths(&s, &json!({"dst": null})).is_empty());
        assert!(paths(&s, &json!({})).is_empty());
    }

    #[test]
    fn nested_items_refs_and_recursion() {
        let s = compile(json!({
            "type": "object",
            "properties": {
                "files": {"type": "array", "items": {"$ref": "#/$defs/Copy"}},
                "pair": {"type": "array", "prefixItems": [
                    {"type": "string", "x-toolhost-path": "read"},
                    {"type": "integer"}
                ], "items": {"type": "string", "x-toolhost-path": "write"}},
                "tree": {"$ref": "#/$defs/Node"},
                "env": {"type": "object", "additionalProperties": {"type": "string", "x-toolhost-path": "read"}}
            },
            "$defs": {
                "Copy": {"type": "object", "properties": {
                    "from": {"type": "string", "x-toolhost-path": "read"},
                    "to": {"type": "string", "x-toolhost-path": "write"}
                }},
                "Node": {"type": "object", "properties": {
                    "path": {"type": "string", "x-toolhost-path": "read"},
                    "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}
                }}
            }
        }));
        let args = json!({
            "files": [{"from": "a", "to": "b"}, {"from": "c/d", "to": "e"}],
            "pair": ["p0", 1, "p2", "p3"],
            "tree": {"path": "t", "children": [{"path": "t/1", "children": [{"path": "t/1/x"}]}]},
            "env": {"HOME": "h", "x~y": "z"}
        });
        assert_eq!(
            paths(&s, &args),
            [
                ("/files/0/from".to_owned(), "a", PathAccess::Read),
                ("/files/0/to".to_owned(), "b", PathAccess::Write),
                ("/files/1/from".to_owned(), "c/d", PathAccess::Read),
                ("/files/1/to".to_owned(), "e", PathAccess::Write),
                ("/pair/0".to_owned(), "p0", PathAccess::Read),
                ("/pair/2".to_owned(), "p2", PathAccess::Write),
                ("/pair/3".to_owned(), "p3", PathAccess::Write),
                ("/tree/path".to_owned(), "t", PathAccess::Read),
                ("/tree/children/0/path".to_owned(), "t/1", PathAccess::Read),
                (
                    "/tree/children/0/children/0/path".to_owned(),
                    "t/1/x",
                    PathAccess::Read
                ),
                ("/env/HOME".to_owned(), "h", PathAccess::Read),
                ("/env/x~0y".to_owned(), "z", PathAccess::Read),
            ]
        );
    }

    #[test]
    fn union_branches_merge_and_write_wins() {
        let s = compile(json!({
            "type": "object",
            "properties": {
                "op": {"oneOf": [
                    {"type": "object", "properties": {"kind": {"const": "read"}, "path": {"type": "string", "x-toolhost-path": "read"}}},
                    {"type": "object", "properties": {"kind": {"const": "write"}, "path": {"type": "string", "x-toolhost-path": "write"}}}
                ]},
                "maybe": {"anyOf": [{"$ref": "#/$defs/P"}, {"type": "null"}]}
            },
            "$defs": {"P": {"type": "string", "x-toolhost-path": "read"}}
        }));
        let args = json!({"op": {"kind": "read", "path": "x"}, "maybe": "m"});
        assert_eq!(
            paths(&s, &args),
            [
                ("/op/path".to_owned(), "x", PathAccess::Write),
                ("/maybe".to_owned(), "m", PathAccess::Read),
            ]
        );
    }

    #[test]
    fn additional_properties_skip_listed_keys() {
        let s = compile(json!({
            "type": "object",
            "properties": {"name": {"type": "string"}},
            "additionalProperties": {"type": "string", "x-toolhost-path": "read"}
        }));
        assert_eq!(
            paths(&s, &json!({"name": "n", "other": "o"})),
            [("/other".to_owned(), "o", PathAccess::Read)]
        );
    }

    #[test]
    fn self_recursive_root_terminates() {
        let s = compile(json!({
            "type": "object",
            "properties": {
                "p": {"type": "string", "x-toolhost-path": "read"},
                "next": {"$ref": "#"}
            },
            "allOf": [{"$ref": "#"}]
        }));
        let args = json!({"p": "a", "next": {"p": "b", "next": {}}});
        assert_eq!(
            paths(&s, &args),
            [
                ("/p".to_owned(), "a", PathAccess::Read),
                ("/next/p".to_owned(), "b", PathAccess::Read),
            ]
        );
    }

    #[test]
    fn schemas_without_paths_are_cheap() {
        let s = compile(json!({"type": "object", "properties": {"q": {"type": "string"}}}));
        assert!(!s.has_path_fields());
        assert!(s.path_fields().is_empty());
        assert!(paths(&s, &json!({"q": "x"})).is_empty());
        // An annotation in an unused $def is harmless.
        let s = compile(
            json!({"type": "object", "$defs": {"U": {"type": "string", "x-toolhost-path": "read"}}}),
        );
        assert!(!s.has_path_fields());
    }

    #[test]
    fn bad_path_annotations_fail_closed() {
        let cases = [
            json!({"type": "object", "properties": {"p": {"type": "string", "x-toolhost-path": "rw"}}}),
            json!({"type": "object", "properties": {"p": {"type": "integer", "x-toolhost-path": "read"}}}),
            json!({"type": "object", "properties": {"p": {"x-toolhost-path": "read"}}}),
            json!({"type": "object", "patternProperties": {"^f": {"type": "string", "x-toolhost-path": "read"}}}),
            json!({"type": "object", "properties": {"p": {"not": {"type": "string", "x-toolhost-path": "read"}}}}),
            json!({"type": "array", "contains": {"$ref": "#/$defs/P"}, "$defs": {"P": {"type": "string", "x-toolhost-path": "write"}}}),
            json!({"type": "object", "properties": {
                "p": {"type": "string", "x-toolhost-path": "read"},
                "q": {"$dynamicRef": "#meta"}
            }, "$defs": {"M": {"$dynamicAnchor": "meta", "type": "string"}}}),
            json!({"type": "object", "properties": {
                "p": {"$id": "https://example.com/p", "type": "string", "x-toolhost-path": "read"}
            }}),
        ];
        for schema in cases {
            let e = CompiledSchema::compile(&schema).expect_err(&schema.to_string());
            assert_eq!(e.kind, SchemaErrorKind::PathAnnotation, "{schema}: {e}");
        }
    }

    #[test]
    fn ref_resolution_helpers() {
        let root = json!({
            "$defs": {"a b": {"type": "string"}, "T": {"$anchor": "top", "type": "integer"}, "x/y": {"type": "null"}}
        });
        assert_eq!(resolve_ref("#/$defs/a%20b", &root).unwrap().1, "/$defs/a b");
        assert_eq!(resolve_ref("#top", &root).unwrap().1, "/$defs/T");
        assert_eq!(
            resolve_ref("#/$defs/x~1y", &root).unwrap().0,
            &json!({"type": "null"})
        );
        assert_eq!(resolve_ref("#", &root).unwrap().1, "");
        assert!(resolve_ref("other.json#/a", &root).is_none());
        assert!(resolve_ref("#/$defs/none", &root).is_none());
        assert!(resolve_ref("#/bad%zz", &root).is_none());
    }

    #[test]
    fn pointer_ordering() {
        let mut v = vec!["/b", "/a/10", "", "/a/2", "/a", "/a/x"];
        v.sort_by(|a, b| compare_pointers(a, b));
        assert_eq!(v, ["", "/a", "/a/2", "/a/10", "/a/x", "/b"]);
    }

    #[test]
    fn compiled_schema_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<CompiledSchema>();
    }
}
