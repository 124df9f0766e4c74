//! Descriptor lint: the schema and contract rules a tool must meet to load.
//!
//! [`lint_tool`] checks one [`ToolDescriptor`]; [`lint_catalog`] checks a
//! whole catalog (every tool, plus names defined twice). Each problem is a
//! [`Finding`] with a stable [`Rule`] id, a [`Severity`], where it is, and a
//! message that says how to fix it. A tool with any [`Severity::Error`]
//! finding is **refused**; warnings are advice.
//!
//! The rules (schema rules and the tool contract):
//!
//! | rule | severity | what |
//! |---|---|---|
//! | `closed_objects` | error | every object schema, at every level (properties, items, `$defs`, union branches), has `"additionalProperties": false` (or `"unevaluatedProperties": false`) |
//! | `typed_values` | error | every value schema has a `type`, `const`, `enum`, `$ref` or union: an untyped `{}`/`true` is an open parameter bag |
//! | `required_fields` | warning | every property is in `required`, or is nullable, or has a `default` |
//! | `required_unknown` | error / warning | `required` names a property that `properties` lacks: an error when the object is closed (no value can pass), a warning otherwise |
//! | `bounded_values` | warning | strings have `maxLength` (or `enum`/`const`, an anchored pattern without unbounded repetition, or a fixed-size format), numbers have a minimum and a maximum (or an integer format that implies them), arrays have `maxItems` |
//! | `units_in_names` | warning | numeric fields named like durations or sizes (`timeout`, `delay`, `ttl`, `size`, `memory`, …) carry a unit (`timeout_ms`, `max_size_bytes`) |
//! | `tagged_unions` | error | an `anyOf`/`oneOf` with two or more object branches has a discriminator: a property every object branch fixes (`const` or one-value `enum`) to a distinct value and lists in `required`; `anyOf [X, {"type": "null"}]` is fine |
//! | `max_properties` | warning | at most 7 top-level properties: more means the tool does more than one thing |
//! | `property_descriptions` | warning | every property has a `description` (the model reads it) |
//! | `tool_name` | error / warning | the name matches `^[a-z][a-z0-9_]{0,63}$` (error) and reads `verb_object` (warning when it has no `_`) |
//! | `description` | error / warning | the description is not empty (error), not over 4096 characters (warning) nor over 64 KiB (error) |
//! | `hidden_text` | error | no invisible, bidirectional or control characters in the title, description, keywords, examples, schema texts or property names (hidden instructions) |
//! | `root_object` | error | the input schema's root is `"type": "object"` |
//! | `input_schema` | error | the input schema compiles (draft 2020-12, local `$ref`s, trackable `x-toolhost-path`) |
//! | `output_schema` | error | the output schema, if any, compiles and its root is `"type": "object"` |
//! | `error_codes` | error / warning | every error code matches `^[a-z][a-z0-9_]{0,63}$` (error); no duplicates (warning) |
//! | `needs_consistency` | error | side effect, needs and path annotations agree (a read-only tool writes nothing; a `write` path needs `fs_write`; a `read` path needs file access; network hosts are `http(s)` origins in the one grammar of [`crate::origin`]) |
//! | `limits` | warning | `default_timeout_ms` and `max_output_bytes` are not 0 |
//! | `task_words` | error / warning | the declared keywords and examples are within bounds: at most 24 keywords of 40 bytes and three words, at most 12 examples of 200 bytes, one line each, none twice (error); the description or an example names a task, a verb such as read, search, edit, rename, build, test, run, fetch or delete in any inflection (warning) |
//! | `duplicate_tool` | error | (catalog) no two tools share a name |
//!
//! Value rules (`closed_objects`, `typed_values`, `bounded_values`, …) apply
//! to schemas that describe a value: the root, `properties`, `items`,
//! `prefixItems`, `additionalProperties`, `patternProperties`, `anyOf` and
//! `oneOf` branches and `$defs`. Fragments that only add constraints (`allOf`
//! branches, `not`, `if`/`then`/`else`, `contains`, `propertyNames`,
//! `dependentSchemas`) are exempt.
//!
//! Each [`ToolReport`] also says whether the input schema fits the strict
//! modes of two providers ([`Compat`]; an empty list means compatible):
//! OpenAI strict (closed everywhere, every property required, root an object
//! and not a union, no `allOf`/`not`/`if`/`dependent*`, names
//! `^[a-zA-Z0-9_-]{1,64}$`) and Anthropic strict (closed, no recursion, no
//! numeric bounds, no string length bounds, `minItems` 0 or 1, same names).
//!
//! Finding pointers are JSON Pointers into the schema named by
//! [`Finding::target`]; for [`Target::Descriptor`] they point into the
//! descriptor (`/name`, `/error_codes/2`).
//!
//! The modules: [`report`] (rules, findings and reports), `descriptor`
//! (name, description, error codes, limits, needs), `task` (keywords,
//! examples and the verbs of tasks), `values` (the value
//! rules over the input schema: closed, typed, required, bounded, tagged),
//! `names` (units in numeric field names) and `compat` (provider
//! strict-mode reports). Schema walking is shared with [`crate::plugin::schema`].

use std::collections::BTreeMap;

use crate::descriptor::ToolDescriptor;

mod compat;
mod descriptor;
mod names;
pub mod report;
mod task;
mod values;

pub use report::{
    CatalogEntry, CatalogFinding, CatalogReport, Compat, Finding, Rule, Severity, Target,
    ToolReport,
};

/// Most top-level properties before [`Rule::MaxProperties`] warns.
pub const MAX_TOP_LEVEL_PROPERTIES: usize = 7;
/// Description length (characters) above which [`Rule::Description`] warns.
pub const DESCRIPTION_WARN_CHARS: usize = 4096;
/// Description size (bytes) above which [`Rule::Description`] refuses.
pub const DESCRIPTION_MAX_BYTES: usize = 64 * 1024;

/// Lints one tool.
pub fn lint_tool(desc: &ToolDescriptor) -> ToolReport {
    let mut lint = Linter {
        findings: Vec::new(),
    };
    lint.descriptor(desc);
    lint.task_words(desc);
    let compiled = lint.input_schema(&desc.input_schema);
    if let Some(compiled) = &compiled {
        lint.needs(desc, compiled);
    }
    if let Some(output) = &desc.output_schema {
        lint.output_schema(output);
    }
    let refused = lint.findings.iter().any(|f| f.severity == Severity::Error);
    ToolReport {
        tool: desc.name.clone(),
        compat: compat::compat(desc),
        findings: lint.findings,
        refused,
    }
}

/// Lints every tool and looks for names defined more than once.
pub fn lint_catalog<S: AsRef<str>>(descs: &[(S, ToolDescriptor)]) -> CatalogReport {
    let tools = descs
        .iter()
        .map(|(plugin, desc)| CatalogEntry {
            plugin: plugin.as_ref().to_owned(),
            report: lint_tool(desc),
        })
        .collect();
    let mut by_name: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    let mut order: Vec<&str> = Vec::new();
    for (plugin, desc) in descs {
        let plugins = by_name.entry(desc.name.as_str()).or_default();
        if plugins.is_empty() {
            order.push(desc.name.as_str());
        }
        plugins.push(plugin.as_ref().to_owned());
    }
    let findings = order
        .into_iter()
        .filter_map(|name| {
            let plugins = &by_name[name];
            (plugins.len() > 1).then(|| CatalogFinding {
                rule: Rule::DuplicateTool,
                severity: Severity::Error,
                tool: name.to_owned(),
                message: format!(
                    "tool {name:?} is defined {} times (by {}); names must be unique across the catalog",
                    plugins.len(),
                    plugins.join(", ")
                ),
                plugins: plugins.clone(),
            })
        })
        .collect();
    CatalogReport { tools, findings }
}

/// Collects the findings of one tool.
struct Linter {
    findings: Vec<Finding>,
}

impl Linter {
    fn push(
        &mut self,
        rule: Rule,
        severity: Severity,
        target: Target,
        pointer: impl Into<String>,
        message: impl Into<String>,
    ) {
        self.findings.push(Finding {
            rule,
            severity,
            target,
            pointer: pointer.into(),
            message: message.into(),
        });
    }
}

#[cfg(test)]
mod tests;
