//! The path-argument index: which arguments name workspace paths.
//!
//! String properties annotated `"x-toolhost-path": "read"` or `"write"` name
//! workspace paths. The annotated locations are found once, at compile time,
//! by walking `properties`, `additionalProperties`, `items`, `prefixItems`,
//! `anyOf`/`oneOf`/`allOf`, `then`/`else`, `dependentSchemas` and local
//! `$ref`s (recursion included) into a small graph (`PathIndex`), so
//! extraction per call is a walk over the relevant part of the arguments
//! only.
//!
//! Path extraction fails **closed**: an annotation the walker could not track
//! (inside `patternProperties`, `not`, `if`, `contains`, … or behind a `$ref`
//! it cannot follow) is a compile error, never a silently unchecked path.
//! When several schema branches describe the same argument, `write` wins over
//! `read`.
//!
//! The same index, built for `"x-toolhost-resource": "read" | "write"`,
//! finds the string arguments that name a plugin-declared resource (a
//! database table, a queue, an account): not paths, but keys calls that
//! write them are kept apart by (see [`crate::effects::resource`]).

use std::collections::{HashMap, HashSet};

use serde::Serialize;
use serde_json::Value;

use super::error::{SchemaError, SchemaErrorKind};
use super::walk::{for_each_subschema, resolve_ref, schema_types, walk_children};
use crate::json::push_pointer_token;

/// The annotation naming workspace-path arguments.
pub const PATH_ANNOTATION: &str = "x-toolhost-path";

/// The annotation naming arguments that are plugin-declared resources.
pub const RESOURCE_ANNOTATION: &str = "x-toolhost-resource";

/// What a tool does with an annotated path: the host's one access type.
pub use crate::paths::Access as PathAccess;

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

/// Compile-time graph of the schema locations that can lead to an annotated
/// path argument. Node 0 is the root.
#[derive(Debug, Default)]
pub(super) struct PathIndex {
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
    /// The annotation indexed: [`PATH_ANNOTATION`] or
    /// [`RESOURCE_ANNOTATION`].
    annotation: &'static str,
    root: &'s Value,
    memo: HashMap<String, usize>,
    nodes: Vec<PathNode>,
    fields: Vec<PathField>,
    unresolved: Vec<(String, String)>,
}

impl PathIndex {
    /// Whether any argument can be a path.
    pub(super) fn is_relevant(&self) -> bool {
        self.root_relevant
    }

    /// Every annotated location, in schema order.
    pub(super) fn fields(&self) -> &[PathField] {
        &self.fields
    }

    /// The path arguments in `args`, in the order they appear; a pointer
    /// appears once, with `write` winning over `read`.
    pub(super) fn args<'a>(&self, args: &'a Value) -> Vec<PathArg<'a>> {
        let mut out = Vec::new();
        if self.root_relevant {
            let mut pointer = String::new();
            self.visit(0, args, &mut pointer, &mut out);
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

    /// Indexes the annotated path fields of `root`, or refuses the schema.
    pub(super) fn build(root: &Value) -> Result<PathIndex, SchemaError> {
        PathIndex::build_for(root, PATH_ANNOTATION)
    }

    /// Indexes the fields of `root` that carry `annotation`.
    pub(super) fn build_for(
        root: &Value,
        annotation: &'static str,
    ) -> Result<PathIndex, SchemaError> {
        let name = annotation;
        // Cheap exit: no annotation anywhere in the document.
        if !contains_key_deep(root, name) {
            return Ok(PathIndex::default());
        }
        if has_nested_id(root, true) {
            return Err(SchemaError::new(
                SchemaErrorKind::PathAnnotation,
                format!(
                    "{name} is not supported in schemas that embed resources with their own $id"
                ),
                None,
            ));
        }
        let mut b = PathBuilder {
            annotation,
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
            annotation,
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
                    "{name} under `{keyword}` cannot be tracked; put path fields under properties, items, prefixItems, additionalProperties, anyOf/oneOf/allOf or a local $ref"
                ),
                Some(pointer),
            ));
        }
        if !b.fields.is_empty() {
            if let Some((pointer, reference)) = b.unresolved.first() {
                return Err(SchemaError::new(
                    SchemaErrorKind::PathAnnotation,
                    format!("cannot follow $ref {reference:?} while looking for {name} fields; use a local reference (#/$defs/...)"),
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
        let name = self.annotation;
        if let Some(annotation) = map.get(name) {
            let access = match annotation.as_str() {
                Some("read") => PathAccess::Read,
                Some("write") => PathAccess::Write,
                _ => {
                    return Err(SchemaError::new(
                        SchemaErrorKind::PathAnnotation,
                        format!("{name} must be \"read\" or \"write\", not {annotation}"),
                        Some(format!("{pointer}/{name}")),
                    ))
                }
            };
            let types = schema_types(schema);
            if !types.contains(&"string") {
                return Err(SchemaError::new(
                    SchemaErrorKind::PathAnnotation,
                    format!("{name} belongs on a string schema (\"type\": \"string\")"),
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
    annotation: &'static str,
    schema: &Value,
    pointer: &mut String,
    under: Option<&'static str>,
    root: &Value,
    visited: &mut HashSet<String>,
    stray: &mut Vec<(String, &'static str)>,
) {
    if let Some(keyword) = under {
        if schema.get(annotation).is_some() {
            stray.push((pointer.clone(), keyword));
        }
        if let Some((target, target_pointer)) = schema
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| resolve_ref(r, root))
        {
            if visited.insert(target_pointer.clone()) {
                let mut p = target_pointer;
                scan_untracked(annotation, target, &mut p, under, root, visited, stray);
            }
        }
    }
    walk_children(schema, pointer, &mut |keyword, token, sub, pointer| {
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
        scan_untracked(annotation, sub, pointer, next, root, visited, stray);
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugin::schema::{CompiledSchema, SchemaErrorKind};
    use serde_json::json;

    fn compile(schema: Value) -> CompiledSchema {
        CompiledSchema::compile(&schema).unwrap_or_else(|e| panic!("{e}"))
    }

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
}
