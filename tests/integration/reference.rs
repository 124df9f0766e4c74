//! The generated reference pages: `docs/reference/errors.md` (every host
//! error code, from [`ErrorCode::ALL`] and the code's own documentation)
//! and `docs/reference/observation.md` (every field of the published
//! observation schema). Each test renders its page and fails when the
//! committed one differs; `TOOLHOST_WRITE_REFERENCE=1` rewrites them.

use serde_json::Value;
use toolhost::messages::{advice, Reader};
use toolhost::{ErrorCode, SideEffect};

use crate::support::repo_root;

/// Compares `page` with the committed `docs/reference/NAME`, or writes it.
fn check(name: &str, page: &str) {
    let path = repo_root().join("docs/reference").join(name);
    if std::env::var_os("TOOLHOST_WRITE_REFERENCE").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, page).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == page,
        "docs/reference/{name} is out of date; run TOOLHOST_WRITE_REFERENCE=1 cargo test \
         --test integration reference and commit it"
    );
}

/// The `///` lines above each variant of `pub enum ErrorCode`, by variant
/// name: the one place the codes' meanings are written.
fn variant_docs() -> Vec<(String, String)> {
    let src =
        std::fs::read_to_string(repo_root().join("crates/base/src/observation/error.rs")).unwrap();
    let body = src
        .split_once("pub enum ErrorCode {")
        .expect("the enum")
        .1
        .split_once("\n}")
        .unwrap()
        .0;
    let mut out = Vec::new();
    let mut doc: Vec<&str> = Vec::new();
    for line in body.lines().map(str::trim) {
        if let Some(text) = line.strip_prefix("///") {
            doc.push(text.trim());
        } else if let Some(name) = line.strip_suffix(',') {
            out.push((name.to_string(), doc.join(" ")));
            doc.clear();
        }
    }
    out
}

/// `UnknownTool` for `unknown_tool`.
fn variant_name(code: ErrorCode) -> String {
    code.as_str()
        .split('_')
        .map(|w| w[..1].to_uppercase() + &w[1..])
        .collect()
}

fn one_line(s: &str) -> String {
    s.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}

fn errors_page() -> String {
    let docs = variant_docs();
    let mut out = String::from(
        "# Error codes\n\n\
         The codes the host itself puts in an observation's `error.code`. A tool's own codes \
         (for example `no_match`) travel the same way and are documented by the tool. \
         `retry` and `correctable` are each code's defaults: a side-effecting call whose \
         effect is unknown gets `status: unknown` and `retry: after_settlement` instead. \
         \"Next step\" is what the observation's text tells a model.\n\n\
         Generated from the host's definitions (`ErrorCode`); a test keeps this page current.\n\n\
         | Code | Status | Correctable | Retry | Meaning | Next step |\n\
         |---|---|---|---|---|---|\n",
    );
    for code in ErrorCode::ALL {
        let name = variant_name(code);
        let meaning = docs
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, d)| d.as_str())
            .unwrap_or_else(|| panic!("no documentation for ErrorCode::{name}"));
        assert!(!meaning.is_empty(), "ErrorCode::{name} has no doc comment");
        let info = code.info("");
        let next = advice(code.status(), SideEffect::ReadOnly, &info, Reader::Model);
        out.push_str(&format!(
            "| `{}` | {} | {} | `{}` | {} | {} |\n",
            code.as_str(),
            serde_json::to_value(code.status())
                .unwrap()
                .as_str()
                .unwrap(),
            if code.correctable() { "yes" } else { "no" },
            code.retry().as_str(),
            one_line(&meaning.replace("[`crate::breaker`]", "the circuit breaker")),
            one_line(&next),
        ));
    }
    out
}

/// The type of a schema node, as a reader names it.
fn type_of(node: &Value) -> String {
    if let Some(c) = node.get("const") {
        return format!("`{c}`");
    }
    if let Some(e) = node.get("enum").and_then(Value::as_array) {
        let v: Vec<String> = e.iter().map(|v| format!("`{v}`")).collect();
        return v.join(", ");
    }
    if let Some(r) = node.get("$ref").and_then(Value::as_str) {
        let name = r.rsplit('/').next().unwrap();
        return format!("[{name}](#{name})");
    }
    let mut parts: Vec<String> = match node.get("type") {
        Some(Value::String(t)) => vec![t.clone()],
        Some(Value::Array(ts)) => ts.iter().map(|t| t.as_str().unwrap().to_string()).collect(),
        _ => Vec::new(),
    };
    for key in ["anyOf", "oneOf"] {
        if let Some(alts) = node.get(key).and_then(Value::as_array) {
            parts.extend(alts.iter().map(type_of));
        }
    }
    if let Some(items) = node.get("items") {
        if let Some(p) = parts.iter_mut().find(|p| *p == "array") {
            *p = format!("array of {}", type_of(items));
        }
    }
    if parts.is_empty() {
        "any JSON value".into()
    } else {
        parts.join(" or ")
    }
}

fn fields_table(object: &Value) -> String {
    let required: Vec<&str> = object["required"]
        .as_array()
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut out =
        String::from("| Field | Type | Always present | Description |\n|---|---|---|---|\n");
    for (name, node) in object["properties"].as_object().unwrap() {
        out.push_str(&format!(
            "| `{name}` | {} | {} | {} |\n",
            type_of(node),
            if required.contains(&name.as_str()) {
                "yes"
            } else {
                "no"
            },
            one_line(node["description"].as_str().unwrap_or("")),
        ));
    }
    out
}

fn observation_page() -> String {
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(repo_root().join("schemas/observation.schema.json")).unwrap(),
    )
    .unwrap();
    let mut out = format!(
        "# The observation\n\n\
         Every call ends in one JSON object of this shape, whatever the tool, the transport or \
         the outcome. The machine-readable form is \
         [`schemas/observation.schema.json`](../../schemas/observation.schema.json) \
         (`{}`); this page is generated from it, and a test keeps the two the same.\n\n\
         {}\n\n## Fields\n\n{}",
        schema["$id"].as_str().unwrap(),
        one_line(schema["description"].as_str().unwrap()),
        fields_table(&schema),
    );
    for (name, def) in schema["$defs"].as_object().unwrap() {
        out.push_str(&format!("\n## {name}\n\n"));
        if let Some(d) = def["description"].as_str() {
            out.push_str(&format!("{}\n\n", one_line(d)));
        }
        if def.get("properties").is_some() {
            out.push_str(&fields_table(def));
        } else {
            out.push_str(&format!("Type: {}.\n", type_of(def)));
        }
    }
    out
}

#[test]
fn the_error_code_reference_is_current() {
    let page = errors_page();
    for code in ErrorCode::ALL {
        assert!(page.contains(&format!("| `{}` |", code.as_str())));
    }
    check("errors.md", &page);
}

#[test]
fn the_observation_reference_is_current() {
    let page = observation_page();
    for field in ["`status`", "`error`", "`provenance`", "`untrusted`"] {
        assert!(page.contains(&format!("| {field} |")), "{field}");
    }
    check("observation.md", &page);
}
