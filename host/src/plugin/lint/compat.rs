//! Provider strict-mode reports: whether the input schema fits OpenAI's and
//! Anthropic's strict tool schemas, and if not, why (grouped by reason, with
//! the pointers where it applies).

use std::collections::HashSet;

use serde_json::Value;

use super::Compat;
use crate::descriptor::ToolDescriptor;
use crate::json::push_pointer_token;
use crate::plugin::schema::walk::{
    for_each_subschema, is_object_schema, resolve_ref, schema_types, walk_children,
};

/// `^[a-zA-Z0-9_-]{1,64}$` (provider tool names).
fn is_provider_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-')
}

/// Reasons grouped by kind: `kind → pointers`.
#[derive(Default)]
struct Reasons {
    groups: Vec<(String, Vec<String>)>,
}

impl Reasons {
    fn add(&mut self, kind: &str, pointer: &str) {
        let shown = if pointer.is_empty() {
            "(root)"
        } else {
            pointer
        };
        match self.groups.iter_mut().find(|(k, _)| k == kind) {
            Some((_, ps)) => {
                if !ps.iter().any(|p| p == shown) {
                    ps.push(shown.to_owned());
                }
            }
            None => self.groups.push((kind.to_owned(), vec![shown.to_owned()])),
        }
    }

    fn add_plain(&mut self, kind: &str) {
        if !self.groups.iter().any(|(k, _)| k == kind) {
            self.groups.push((kind.to_owned(), Vec::new()));
        }
    }

    fn finish(self) -> Vec<String> {
        self.groups
            .into_iter()
            .map(|(kind, pointers)| {
                if pointers.is_empty() {
                    kind
                } else {
                    let n = pointers.len();
                    let mut shown: Vec<String> = pointers.into_iter().take(5).collect();
                    if n > 5 {
                        shown.push(format!("and {} more", n - 5));
                    }
                    format!("{kind} at {}", shown.join(", "))
                }
            })
            .collect()
    }
}

pub(super) fn compat(desc: &ToolDescriptor) -> Compat {
    let schema = &desc.input_schema;
    let mut openai = Reasons::default();
    let mut anthropic = Reasons::default();
    if !is_provider_name(&desc.name) {
        let r = "tool name must match ^[a-zA-Z0-9_-]{1,64}$";
        openai.add_plain(r);
        anthropic.add_plain(r);
    }
    if schema_types(schema) != ["object"] {
        openai.add_plain("root must be \"type\": \"object\"");
        anthropic.add_plain("root must be \"type\": \"object\"");
    }
    for k in ["anyOf", "oneOf", "allOf", "enum", "not"] {
        if schema.get(k).is_some() {
            openai.add_plain(&format!("root must be a plain object, not {k}"));
        }
    }
    compat_walk(schema, &mut String::new(), &mut openai, &mut anthropic, 0);
    if is_recursive(schema) {
        anthropic.add_plain("recursive schemas ($ref cycles) are not supported");
    }
    Compat {
        openai: openai.finish(),
        anthropic: anthropic.finish(),
    }
}

fn compat_walk(
    schema: &Value,
    pointer: &mut String,
    openai: &mut Reasons,
    anthropic: &mut Reasons,
    depth: usize,
) {
    if depth > 200 {
        return;
    }
    if schema == &Value::Bool(true) {
        openai.add("open schema `true` (objects must be closed)", pointer);
        anthropic.add("open schema `true` (objects must be closed)", pointer);
    }
    if let Some(map) = schema.as_object() {
        if is_object_schema(schema) {
            if map.get("additionalProperties") != Some(&Value::Bool(false)) {
                openai.add("object without \"additionalProperties\": false", pointer);
                anthropic.add("object without \"additionalProperties\": false", pointer);
            }
            let required: Vec<&str> = map
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            if let Some(props) = map.get("properties").and_then(Value::as_object) {
                for name in props.keys() {
                    if !required.contains(&name.as_str()) {
                        let mut p = pointer.clone();
                        push_pointer_token(&mut p, "properties");
                        push_pointer_token(&mut p, name);
                        openai.add(
                            "optional property (strict mode needs every property in \"required\"; use a null union)",
                            &p,
                        );
                    }
                }
            }
        }
        for k in [
            "allOf",
            "not",
            "if",
            "then",
            "else",
            "dependentRequired",
            "dependentSchemas",
        ] {
            if map.contains_key(k) {
                openai.add(&format!("unsupported keyword {k}"), pointer);
            }
        }
        for k in [
            "minimum",
            "maximum",
            "exclusiveMinimum",
            "exclusiveMaximum",
            "multipleOf",
        ] {
            if map.contains_key(k) {
                anthropic.add(&format!("numeric bound {k}"), pointer);
            }
        }
        for k in ["minLength", "maxLength"] {
            if map.contains_key(k) {
                anthropic.add(&format!("string length bound {k}"), pointer);
            }
        }
        if map
            .get("minItems")
            .and_then(Value::as_u64)
            .is_some_and(|n| n > 1)
        {
            anthropic.add("minItems above 1", pointer);
        }
    }
    walk_children(schema, pointer, &mut |_, _, sub, pointer| {
        compat_walk(sub, pointer, openai, anthropic, depth + 1);
    });
}

/// Whether following local `$ref`s can lead back into a schema already
/// being expanded.
pub(super) fn is_recursive(root: &Value) -> bool {
    fn refs_in<'s>(schema: &'s Value, out: &mut Vec<&'s str>) {
        if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
            out.push(r);
        }
        if schema.get("$dynamicRef").is_some() {
            out.push("#");
        }
        for_each_subschema(schema, &mut |keyword, _, sub| {
            // `$defs` are only reached through references.
            if keyword != "$defs" && keyword != "definitions" {
                refs_in(sub, out);
            }
        });
    }
    fn within(inner: &str, outer: &str) -> bool {
        inner == outer || inner.starts_with(&format!("{outer}/")) || outer.is_empty()
    }
    fn visit(
        root: &Value,
        at: &str,
        schema: &Value,
        active: &mut Vec<String>,
        done: &mut HashSet<String>,
    ) -> bool {
        let mut refs = Vec::new();
        refs_in(schema, &mut refs);
        for r in refs {
            let Some((target, pointer)) = resolve_ref(r, root) else {
                continue;
            };
            if active.iter().any(|a| within(a, &pointer)) || within(at, &pointer) {
                return true;
            }
            if done.contains(&pointer) {
                continue;
            }
            active.push(pointer.clone());
            let cyclic = visit(root, &pointer, target, active, done);
            active.pop();
            if cyclic {
                return true;
            }
            done.insert(pointer);
        }
        false
    }
    visit(
        root,
        "",
        root,
        &mut vec![String::new()],
        &mut HashSet::new(),
    )
}
