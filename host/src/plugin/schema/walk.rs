//! Walking JSON Schema documents: the one place that knows which keywords
//! hold subschemas, how local `$ref`s resolve, and what a subschema says
//! about its values (types, nullability, fixed values, discriminators).
//!
//! Shared by compilation (format bounds, the path index), violations and
//! the descriptor lint ([`crate::plugin::lint`]), so they agree on what a
//! subschema is. [`for_each_subschema`] visits the direct subschemas of
//! one schema; [`walk_children`] does the same while keeping a JSON Pointer
//! to each child up to date.

use serde_json::{Map, Value};

use crate::json::push_pointer_token;

/// Keywords whose value is one subschema.
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
/// Keywords whose value is an array of subschemas.
const LISTS: &[&str] = &["prefixItems", "allOf", "anyOf", "oneOf"];
/// Keywords whose value maps names to subschemas.
const MAPS: &[&str] = &[
    "$defs",
    "definitions",
    "properties",
    "patternProperties",
    "dependentSchemas",
];

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
    walk_children(schema, pointer, &mut |_, _, sub, pointer| {
        if found.is_none() {
            found = find_anchor(sub, anchor, pointer);
        }
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

/// A visitor of [`walk_children`]: `(keyword, token, subschema, pointer)`.
pub(crate) type ChildVisitor<'s, 'f> =
    dyn FnMut(&'static str, Option<&str>, &'s Value, &mut String) + 'f;

/// Like [`for_each_subschema`], with `pointer` (the JSON Pointer of
/// `schema`) extended to each child while `f` runs on it.
pub(crate) fn walk_children<'s>(
    schema: &'s Value,
    pointer: &mut String,
    f: &mut ChildVisitor<'s, '_>,
) {
    for_each_subschema(schema, &mut |keyword, token, sub| {
        let len = pointer.len();
        push_pointer_token(pointer, keyword);
        if let Some(t) = token {
            push_pointer_token(pointer, t);
        }
        f(keyword, token, sub, pointer);
        pointer.truncate(len);
    });
}

/// Calls `f` on every direct subschema of the schema object `map`, mutably
/// (schema-valued keywords only; tuple `items` arrays are left alone).
pub(crate) fn for_each_subschema_mut(map: &mut Map<String, Value>, f: &mut dyn FnMut(&mut Value)) {
    for (key, value) in map.iter_mut() {
        let key = key.as_str();
        if SINGLE.contains(&key) {
            f(value);
        } else if LISTS.contains(&key) {
            if let Value::Array(list) = value {
                list.iter_mut().for_each(&mut *f);
            }
        } else if MAPS.contains(&key) {
            if let Value::Object(entries) = value {
                entries.values_mut().for_each(&mut *f);
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
}
