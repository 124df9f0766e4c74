//! Value rules over the input schema (`closed_objects`, `typed_values`,
//! `required_fields`, `required_unknown`, `bounded_values`,
//! `units_in_names`, `tagged_unions`, `max_properties`,
//! `property_descriptions`, `root_object`, `input_schema`,
//! `output_schema`), applied while walking the schema with
//! [`crate::plugin::schema::walk`].

use serde_json::Value;

use super::descriptor::is_hidden_char;
use super::names::unit_needed;
use super::{Linter, Rule, Severity, Target, MAX_TOP_LEVEL_PROPERTIES};
use crate::json::{clip, push_pointer_token};
use crate::plugin::schema::format_integer_bounds;
use crate::plugin::schema::walk::{
    deref, discriminator, fixed_value, is_null_only, is_nullable, is_object_schema, schema_types,
    walk_children,
};
use crate::plugin::schema::CompiledSchema;

/// How a subschema is reached.
#[derive(Clone, Copy)]
struct Ctx<'a> {
    /// It describes a value (not a constraint fragment).
    value: bool,
    /// It is `properties/<name>` of an object schema.
    property: Option<PropertyCtx<'a>>,
}

#[derive(Clone, Copy)]
struct PropertyCtx<'a> {
    name: &'a str,
}

/// Keywords whose subschemas describe values.
fn is_value_keyword(keyword: &str) -> bool {
    matches!(
        keyword,
        "properties"
            | "items"
            | "prefixItems"
            | "additionalProperties"
            | "patternProperties"
            | "anyOf"
            | "oneOf"
            | "$defs"
            | "definitions"
    )
}

impl Linter {
    pub(super) fn input_schema(&mut self, schema: &Value) -> Option<CompiledSchema> {
        let t = Target::InputSchema;
        if schema_types(schema) != ["object"] {
            let got = match schema {
                Value::Object(_) if schema.get("type").is_none() => "no type".to_owned(),
                Value::Object(_) => format!("type {}", schema["type"]),
                other => format!("{other}"),
            };
            self.push(
                Rule::RootObject,
                Severity::Error,
                t,
                "",
                format!(
                    "the input schema's root must be \"type\": \"object\" (arguments are an object), not {}",
                    clip(&got, 60)
                ),
            );
        }
        let compiled = match CompiledSchema::compile(schema) {
            Ok(c) => Some(c),
            Err(e) => {
                self.push(
                    Rule::InputSchema,
                    Severity::Error,
                    t,
                    e.pointer.clone().unwrap_or_default(),
                    e.message.clone(),
                );
                None
            }
        };
        if let Some(props) = schema.get("properties").and_then(Value::as_object) {
            if props.len() > MAX_TOP_LEVEL_PROPERTIES {
                self.push(
                    Rule::MaxProperties,
                    Severity::Warning,
                    t,
                    "/properties",
                    format!(
                        "{} top-level properties; more than {MAX_TOP_LEVEL_PROPERTIES} suggests the tool does more than one thing — split it",
                        props.len()
                    ),
                );
            }
        }
        let mut pointer = String::new();
        self.walk(
            schema,
            schema,
            &mut pointer,
            Ctx {
                value: true,
                property: None,
            },
            0,
        );
        compiled
    }

    pub(super) fn output_schema(&mut self, schema: &Value) {
        let t = Target::OutputSchema;
        if schema_types(schema) != ["object"] {
            self.push(
                Rule::OutputSchema,
                Severity::Error,
                t,
                "",
                "the output schema's root must be \"type\": \"object\" (structured content is an object)",
            );
        }
        if let Err(e) = CompiledSchema::compile(schema) {
            self.push(
                Rule::OutputSchema,
                Severity::Error,
                t,
                e.pointer.clone().unwrap_or_default(),
                e.message.clone(),
            );
        }
        self.hidden_texts(schema, &mut String::new(), 0);
    }

    /// `hidden_text` over every `title`/`description` and property name.
    fn hidden_texts(&mut self, schema: &Value, pointer: &mut String, depth: usize) {
        if depth > 64 {
            return;
        }
        for key in ["title", "description"] {
            if let Some(text) = schema.get(key).and_then(Value::as_str) {
                let p = format!("{pointer}/{key}");
                self.hidden(Target::OutputSchema, &p, text);
            }
        }
        walk_children(schema, pointer, &mut |_, _, sub, pointer| {
            self.hidden_texts(sub, pointer, depth + 1);
        });
    }

    fn walk(&mut self, schema: &Value, root: &Value, pointer: &mut String, ctx: Ctx, depth: usize) {
        // The strict parser caps nesting at 128; stay well within the stack.
        if depth > 200 {
            return;
        }
        let t = Target::InputSchema;
        for key in ["title", "description"] {
            if let Some(text) = schema.get(key).and_then(Value::as_str) {
                let p = format!("{pointer}/{key}");
                self.hidden(t, &p, text);
            }
        }
        if ctx.value {
            self.value_rules(schema, root, pointer, ctx);
        }
        walk_children(schema, pointer, &mut |keyword, token, sub, pointer| {
            if keyword == "properties" {
                if let Some(name) = token {
                    if name.chars().any(is_hidden_char) {
                        self.hidden(t, pointer, name);
                    }
                }
            }
            let property = match (keyword, token) {
                ("properties", Some(name)) => Some(PropertyCtx { name }),
                // A union branch keeps the property it describes.
                ("anyOf" | "oneOf", _) => ctx.property,
                _ => None,
            };
            let next = Ctx {
                value: ctx.value && is_value_keyword(keyword),
                property,
            };
            self.walk(sub, root, pointer, next, depth + 1);
        });
    }

    fn value_rules(&mut self, schema: &Value, root: &Value, pointer: &str, ctx: Ctx) {
        let t = Target::InputSchema;
        let Some(map) = schema.as_object() else {
            if schema == &Value::Bool(true) {
                self.push(
                    Rule::TypedValues,
                    Severity::Error,
                    t,
                    pointer,
                    "schema `true` accepts any value, including objects with arbitrary fields; give it a type",
                );
            }
            return;
        };
        let types = schema_types(schema);
        let has_ref = map.contains_key("$ref") || map.contains_key("$dynamicRef");
        let has_union = ["anyOf", "oneOf", "allOf"]
            .iter()
            .any(|k| map.contains_key(*k));
        let fixed = map.contains_key("const") || map.contains_key("enum");

        // typed_values
        if types.is_empty()
            && !has_ref
            && !has_union
            && !fixed
            && !map.contains_key("not")
            && !is_object_schema(schema)
        {
            self.push(
                Rule::TypedValues,
                Severity::Error,
                t,
                pointer,
                "schema accepts any value (no type, const, enum, $ref or union); give it a type",
            );
        }

        // closed_objects
        if is_object_schema(schema) {
            let closed = map.get("additionalProperties") == Some(&Value::Bool(false))
                || map.get("unevaluatedProperties") == Some(&Value::Bool(false));
            if !closed {
                let msg = match map.get("additionalProperties") {
                    Some(Value::Object(_)) => "object is a map with arbitrary keys (additionalProperties is a schema); use named properties and \"additionalProperties\": false",
                    _ => "object allows extra properties; add \"additionalProperties\": false",
                };
                self.push(Rule::ClosedObjects, Severity::Error, t, pointer, msg);
            }
            self.required_rules(schema, root, pointer, closed);
        }

        // bounded_values
        if !fixed {
            if let Some(msg) = unbounded(schema, &types) {
                self.push(Rule::BoundedValues, Severity::Warning, t, pointer, msg);
            }
        }

        // tagged_unions
        for keyword in ["anyOf", "oneOf"] {
            if let Some(Value::Array(branches)) = map.get(keyword) {
                self.union_rule(keyword, branches, root, pointer);
            }
        }

        // Property-level rules, once per property (not per union branch).
        if let Some(prop) = ctx.property {
            let is_property_node = pointer
                .rsplit_once('/')
                .is_some_and(|(parent, _)| parent.ends_with("/properties"));
            if is_property_node {
                self.property_rules(schema, root, pointer, prop);
            }
        }
    }

    fn required_rules(&mut self, schema: &Value, root: &Value, pointer: &str, closed: bool) {
        let t = Target::InputSchema;
        let props = schema.get("properties").and_then(Value::as_object);
        let required: Vec<&str> = schema
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if let Some(props) = props {
            for (name, sub) in props {
                if required.contains(&name.as_str()) {
                    continue;
                }
                if is_nullable(sub, root)
                    || deref(sub, root).get("default").is_some()
                    || sub.get("default").is_some()
                {
                    continue;
                }
                let mut p = pointer.to_owned();
                push_pointer_token(&mut p, "properties");
                push_pointer_token(&mut p, name);
                self.push(
                    Rule::RequiredFields,
                    Severity::Warning,
                    t,
                    p,
                    format!(
                        "property {name:?} is optional without a default; list it in \"required\", or give it a \"default\" (or a null union) and say what absence means (Rust SDK: a `#[serde(default = ...)]` field whose type does not derive `Serialize` loses its default from the schema; derive it)"
                    ),
                );
            }
        }
        for (i, name) in required.iter().enumerate() {
            let listed = props.is_some_and(|p| p.contains_key(*name));
            if listed {
                continue;
            }
            if props.is_none() && !closed {
                // An open map may legitimately require keys.
                continue;
            }
            let (severity, why) = if closed {
                (
                    Severity::Error,
                    "the object is closed, so no value can pass",
                )
            } else {
                (Severity::Warning, "probably a typo")
            };
            self.push(
                Rule::RequiredUnknown,
                severity,
                t,
                format!("{pointer}/required/{i}"),
                format!("\"required\" names {name:?}, which is not in \"properties\"; {why}"),
            );
        }
    }

    fn union_rule(&mut self, keyword: &str, branches: &[Value], root: &Value, pointer: &str) {
        let t = Target::InputSchema;
        let resolved: Vec<&Value> = branches.iter().map(|b| deref(b, root)).collect();
        let objects: Vec<&Value> = resolved
            .iter()
            .copied()
            .filter(|b| !is_null_only(b) && is_object_schema(b))
            .collect();
        if objects.len() < 2 {
            return;
        }
        let p = format!("{pointer}/{keyword}");
        match discriminator(&objects, root) {
            None => self.push(
                Rule::TaggedUnions,
                Severity::Error,
                t,
                p,
                format!(
                    "{keyword} has {} object branches and no discriminator; give every branch a property (e.g. \"kind\") with a distinct \"const\" and list it in \"required\" (serde: #[serde(tag = \"kind\")])",
                    objects.len()
                ),
            ),
            Some((tag, _)) => {
                let missing = objects.iter().any(|b| {
                    !b.get("required")
                        .and_then(Value::as_array)
                        .is_some_and(|r| r.iter().any(|x| x == tag.as_str()))
                });
                if missing {
                    self.push(
                        Rule::TaggedUnions,
                        Severity::Error,
                        t,
                        p,
                        format!("discriminator {tag:?} must be listed in \"required\" of every branch"),
                    );
                }
            }
        }
    }

    fn property_rules(&mut self, schema: &Value, root: &Value, pointer: &str, prop: PropertyCtx) {
        let t = Target::InputSchema;
        if is_numeric(schema, root) {
            if let Some((kind, example)) = unit_needed(prop.name) {
                self.push(
                    Rule::UnitsInNames,
                    Severity::Warning,
                    t,
                    pointer,
                    format!(
                        "numeric field {:?} names a {kind} without a unit; name the unit (e.g. {example})",
                        prop.name
                    ),
                );
            }
        }
        let described = |s: &Value| {
            s.get("description")
                .and_then(Value::as_str)
                .is_some_and(|d| !d.trim().is_empty())
        };
        let branch_described = ["anyOf", "oneOf"].iter().any(|k| {
            schema
                .get(*k)
                .and_then(Value::as_array)
                .is_some_and(|bs| bs.iter().any(|b| described(deref(b, root))))
        });
        // A discriminator's `const` describes itself.
        let self_describing = fixed_value(deref(schema, root)).is_some();
        if !described(schema)
            && !described(deref(schema, root))
            && !branch_described
            && !self_describing
        {
            self.push(
                Rule::PropertyDescriptions,
                Severity::Warning,
                t,
                pointer,
                format!(
                    "property {:?} has no description; say what it means, its unit and what absence means",
                    prop.name
                ),
            );
        }
    }
}

/// Why a value schema is unbounded, if it is.
fn unbounded(schema: &Value, types: &[&str]) -> Option<String> {
    let has = |k: &str| schema.get(k).is_some();
    let mut missing = Vec::new();
    for &ty in types {
        match ty {
            "string" => {
                let format_bounded = schema
                    .get("format")
                    .and_then(Value::as_str)
                    .is_some_and(is_bounded_format);
                let pattern_bounded = schema
                    .get("pattern")
                    .and_then(Value::as_str)
                    .is_some_and(is_bounded_pattern);
                if !has("maxLength") && !format_bounded && !pattern_bounded {
                    missing.push(
                        "string has no maxLength (or enum, bounded pattern or fixed-size format)"
                            .to_owned(),
                    );
                }
            }
            "integer" | "number" => {
                let (lo, hi) = schema
                    .get("format")
                    .and_then(Value::as_str)
                    .and_then(format_integer_bounds)
                    .filter(|_| ty == "integer")
                    .unwrap_or((None, None));
                let low = has("minimum") || has("exclusiveMinimum") || lo.is_some();
                let high = has("maximum") || has("exclusiveMaximum") || hi.is_some();
                match (low, high) {
                    (true, true) => {}
                    (false, true) => missing.push(format!("{ty} has no minimum")),
                    (true, false) => missing.push(format!("{ty} has no maximum")),
                    (false, false) => missing.push(format!("{ty} has no minimum and no maximum")),
                }
            }
            "array" => {
                let tuple = schema.get("items") == Some(&Value::Bool(false)) && has("prefixItems");
                if !has("maxItems") && !tuple {
                    missing.push("array has no maxItems".to_owned());
                }
            }
            _ => {}
        }
    }
    if missing.is_empty() {
        None
    } else {
        Some(format!(
            "{}; unbounded inputs let one call exceed what the tool or the context can hold",
            missing.join("; ")
        ))
    }
}

/// Formats whose valid strings have a bounded length.
fn is_bounded_format(format: &str) -> bool {
    matches!(
        format,
        "date" | "time" | "date-time" | "uuid" | "ipv4" | "ipv6" | "hostname"
    )
}

/// An anchored pattern without unbounded repetition (`*`, `+`, `{n,}`).
pub(super) fn is_bounded_pattern(pattern: &str) -> bool {
    if !pattern.starts_with('^') || !pattern.ends_with('$') || pattern.ends_with("\\$") {
        return false;
    }
    let bytes = pattern.as_bytes();
    let mut i = 0;
    let mut in_class = false;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 1,
            b'[' => in_class = true,
            b']' => in_class = false,
            b'*' | b'+' if !in_class => return false,
            b'{' if !in_class => {
                let rest = &pattern[i + 1..];
                if let Some(end) = rest.find('}') {
                    if rest[..end].ends_with(',') {
                        return false;
                    }
                }
            }
            _ => {}
        }
        i += 1;
    }
    true
}

/// Whether a schema describes numbers (directly or through a union / $ref).
fn is_numeric(schema: &Value, root: &Value) -> bool {
    let schema = deref(schema, root);
    let types = schema_types(schema);
    if types.iter().any(|t| *t == "integer" || *t == "number") {
        return true;
    }
    if let Some(v) = fixed_value(schema) {
        return v.is_number();
    }
    ["anyOf", "oneOf"].iter().any(|k| {
        schema.get(*k).and_then(Value::as_array).is_some_and(|bs| {
            bs.iter()
                .any(|b| !is_null_only(b) && is_numeric_shallow(b, root))
        })
    })
}

fn is_numeric_shallow(schema: &Value, root: &Value) -> bool {
    schema_types(deref(schema, root))
        .iter()
        .any(|t| *t == "integer" || *t == "number")
}
