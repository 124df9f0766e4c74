//! Model-correctable violations: why arguments do not conform.
//!
//! Each failure the validator reports becomes a [`Violation`] — the JSON
//! Pointer of the argument, what was expected, what was sent, and a
//! one-line message — precise enough for a model to correct its call.
//! Unions are resolved the way a model thinks about them: a nullable field
//! reports the errors of its non-null branch, and a tagged union reports the
//! errors of the branch the tag selects (or that the tag itself is wrong).

use std::cmp::Ordering;
use std::collections::HashSet;
use std::fmt;

use jsonschema::error::{TypeKind, ValidationErrorKind};
use jsonschema::ValidationError;
use serde::Serialize;
use serde_json::{Map, Value};

use super::walk::{deref, discriminator, schema_types};
use crate::json::{clip, push_pointer_token};

/// Longest rendering of an actual value in a [`Violation`], in characters.
pub const MAX_ACTUAL_CHARS: usize = 80;

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

/// Every violation behind `errors`, ordered by field (array indices
/// numerically), without duplicates, never empty.
pub(super) fn explain<'a>(
    root: &Value,
    errors: impl Iterator<Item = ValidationError<'a>>,
    args: &Value,
) -> Vec<Violation> {
    let explainer = Explainer { root };
    let mut out = Vec::new();
    for error in errors {
        explainer.convert(&error, &mut out);
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
    out
}

/// Turns validator errors into violations, against the compiled schema.
struct Explainer<'r> {
    root: &'r Value,
}

impl Explainer<'_> {
    fn convert(&self, error: &ValidationError<'_>, out: &mut Vec<Violation>) {
        let field = error.instance_path().as_str();
        let instance: &Value = error.instance();
        let schema_path = error.schema_path().as_str();
        let keyword_parent = parent_pointer(schema_path);
        let subschema = self.root.pointer(keyword_parent);
        let root = self.root;
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
        let root = self.root;
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
        // An enum spelled as alternatives of constants (schemars writes one
        // for an enum whose variants carry doc comments): every branch
        // accepts a string, so name all the allowed values, not the first.
        if let Some(values) = branches
            .iter()
            .map(|b| constants(b))
            .collect::<Option<Vec<Vec<Value>>>>()
        {
            let options = Value::Array(values.into_iter().flatten().collect());
            out.push(violation(field, one_of(&options), render(instance)));
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

/// The values a branch allows when it is only a `const` or an `enum`.
fn constants(branch: &Value) -> Option<Vec<Value>> {
    let obj = branch.as_object()?;
    let only = |key: &str| {
        obj.keys()
            .all(|k| k == key || matches!(k.as_str(), "description" | "title" | "type"))
    };
    match (obj.get("const"), obj.get("enum")) {
        (Some(c), None) if only("const") => Some(vec![c.clone()]),
        (None, Some(Value::Array(list))) if only("enum") => Some(list.clone()),
        _ => None,
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugin::schema::CompiledSchema;
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
    fn an_enum_of_constant_alternatives_names_every_value() {
        let s = compile(json!({"type": "object", "properties": {"mode": {"oneOf": [
            {"const": "fast", "description": "Quick."},
            {"type": "string", "const": "slow"},
            {"enum": ["auto", "off"]}
        ]}}}));
        let v = only(&s, json!({"mode": "medium"}));
        assert_eq!(v.field, "/mode");
        assert_eq!(v.expected, r#"one of "fast", "slow", "auto", "off""#);
        assert_eq!(v.actual, r#""medium""#);
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
    fn pointer_ordering() {
        let mut v = vec!["/b", "/a/10", "", "/a/2", "/a", "/a/x"];
        v.sort_by(|a, b| compare_pointers(a, b));
        assert_eq!(v, ["", "/a", "/a/2", "/a/10", "/a/x", "/b"]);
    }
}
