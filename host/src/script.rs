//! `run_script`: a JavaScript program that calls tools, each inner call
//! through the host's one call path.
//!
//! The tool itself is the embedded script engine (`plugins/script`,
//! [`Source::script`](crate::plugin::catalog::Source::script)), a plugin like any
//! other: its call is validated, sandboxed (no preopens, no network),
//! bounded by fuel, memory and deadline, journaled and redacted. What makes
//! it the script runner is the `toolhost:plugin/script` import, which the
//! pipeline links for its calls only (`serve`), under a token holding the
//! `script` right ([`Right::Script`](crate::policy::capability::Right::Script)).
//!
//! An inner call is a [`Host::run`](crate::pipeline::Host::run) of the
//! same session, so it meets every
//! gate a direct call meets: the token's tools, paths and rights, its
//! `max_calls` and `budget_fuel` (charged to the chain), resource locks,
//! the idempotency records of side effects, approvals, redaction and the
//! journal. Its call id is `<parent>.<n>`, naming the call that made it,
//! and its idempotency key derives from the parent's the same way. Its
//! deadline is what is left of the script's. A script cannot call
//! `run_script` (depth one).
//!
//! The script runs on the caller's thread, and so do its inner calls,
//! nested below the engine's host call when the thread has the stack for
//! it (`lend`: a hand-off to another thread per request costs more than a
//! small call). The engine hands over the calls a script started together
//! (`Promise.all([...])`) in one `call-tools` request, which runs as a
//! batch
//! ([`run_batch`](crate::effects::resource::batch)): in parallel on at most as many
//! threads as cores, each after the earlier calls of the request it
//! conflicts with, so reads overlap and writes to one resource run in the
//! order the script started them, one at a time. A request of more than a
//! batch's items ([`MAX_ITEMS`]) runs as several batches, one after the
//! other.
//!
//! The run's level ([`Effects::level`](crate::observation::Effects)) is
//! the highest level of the inner calls that ran (`run_script` itself
//! only reads).

use std::time::{Duration, Instant};

use crate::call::{Call, CallOptions, KeySource};
use crate::descriptor::{SideEffect, ToolDescriptor};
use crate::effects::resource::batch::{run_batch, BatchItem, BatchOptions, MAX_ITEMS};
use crate::observation::{ErrorCode, ErrorInfo, Observation};
use crate::plugin::catalog::{Catalog, Tool};
use serde_json::Value;

mod lend;
pub use lend::{CALL_THREAD_STACK, INLINE_ROOM};

/// How the script runner's inner calls are run: the pipeline's
/// [`Host::run`](crate::pipeline::Host::run) for the script's session.
pub(crate) type RunInner<'a> = dyn Fn(Call<'_>) -> Observation + Sync + 'a;

/// The script runner's tool name.
pub const TOOL_NAME: &str = crate::policy::capability::SCRIPT_TOOL;

/// Whether `tool` is the host's script runner: `run_script` of the engine
/// embedded in this binary, and no other plugin's tool of that name.
pub fn is_runner(tool: &Tool) -> bool {
    tool.descriptor.name == TOOL_NAME
        && tool.plugin.digest() == crate::plugin::catalog::SCRIPT.blake3.to_hex().as_str()
}

/// Runs `outer`, the script's own call, with options that carry a
/// [`ScriptLink`](crate::sandbox::ScriptLink) whose inner calls `run`
/// runs, within `timeout` of now; `catalog` gives each inner tool's own
/// deadline and resource keys. Answers `outer`'s result and what its inner
/// calls did.
pub(crate) fn serve<R>(
    catalog: &Catalog,
    run: &RunInner<'_>,
    opts: &CallOptions,
    timeout: Duration,
    outer: impl FnOnce(&CallOptions) -> R,
) -> (R, Inner) {
    let deadline = Instant::now() + timeout;
    // Inner calls made so far, and what they did.
    let did = std::sync::Mutex::new((0u64, Inner::default()));
    let handler = |calls: Vec<(String, String)>| {
        let first = {
            let mut did = did.lock().unwrap_or_else(|e| e.into_inner());
            did.0 += calls.len() as u64;
            did.0 - calls.len() as u64 + 1
        };
        // At most a batch's worth at a time: the scheduler compares each
        // call with every earlier one.
        let mut observations = Vec::with_capacity(calls.len());
        for chunk in calls.chunks(MAX_ITEMS) {
            let from = first + observations.len() as u64;
            observations.extend(inner_batch(catalog, run, opts, from, deadline, chunk));
        }
        let mut did = did.lock().unwrap_or_else(|e| e.into_inner());
        for obs in &observations {
            if ran(obs) {
                did.1.level = did.1.level.max(obs.effects.level);
            }
        }
        // The threshold `inner` refuses at.
        did.1.out_of_time |= deadline.saturating_duration_since(Instant::now()) < LAST_MS;
        observations.into_iter().map(answer).collect()
    };
    let lent = lend::Lent::new(&handler);
    let with_link = CallOptions {
        script: Some(lent.link(|n| {
            let gone = ErrorCode::PluginUnavailable.info("the script's call is over");
            vec![Err(error_json(&gone)); n]
        })),
        ..opts.clone()
    };
    let out = outer(&with_link);
    drop(lent);
    let did = did.into_inner().unwrap_or_else(|e| e.into_inner()).1;
    (out, did)
}

/// Less than this left of the script's deadline and no inner call starts.
const LAST_MS: Duration = Duration::from_millis(1);

/// What a script's inner calls did.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Inner {
    /// The highest level of the inner calls that ran (read-only for none).
    pub level: SideEffect,
    /// An inner call answered after the script's deadline had passed: a
    /// failure of the script is then its timeout, whatever it made of the
    /// inner call's `timeout` error in the moment before the host stopped
    /// it.
    pub out_of_time: bool,
}

impl Default for Inner {
    fn default() -> Self {
        Inner {
            level: SideEffect::ReadOnly,
            out_of_time: false,
        }
    }
}

/// Whether an inner call ran (or replayed a call that ran): a call refused
/// before its tool started consumed no fuel and had no effect.
fn ran(obs: &Observation) -> bool {
    obs.usage.fuel_consumed > 0 || obs.effects.replayed
}

/// The calls of one request, numbered from `first` among the script's
/// inner calls: run as a batch (see the module overview), answered in
/// order.
fn inner_batch(
    catalog: &Catalog,
    run: &RunInner<'_>,
    parent: &CallOptions,
    first: u64,
    deadline: Instant,
    calls: &[(String, String)],
) -> Vec<Observation> {
    let parent_id = parent.call_id.clone().unwrap_or_default();
    let id_of = |i: usize| format!("{parent_id}.{}", first + i as u64);
    // Arguments that are not JSON cannot be keyed: such a call runs
    // alone (and fails its validation like a direct call).
    let mut items = Vec::with_capacity(calls.len());
    let mut loose = Vec::new();
    for (i, (tool, args)) in calls.iter().enumerate() {
        match serde_json::value::RawValue::from_string(args.clone()) {
            Ok(arguments) => items.push((
                i,
                BatchItem {
                    call_id: id_of(i),
                    tool: tool.clone(),
                    arguments,
                    idempotency_key: None,
                },
            )),
            Err(_) => loose.push(i),
        }
    }
    let one = |i: usize, tool: &str, args: &str| {
        inner(catalog, run, parent, first + i as u64, deadline, tool, args)
    };
    let mut out: Vec<Option<Observation>> = vec![None; calls.len()];
    for i in loose {
        out[i] = Some(one(i, &calls[i].0, &calls[i].1));
    }
    let (index, batch): (Vec<usize>, Vec<BatchItem>) = items.into_iter().unzip();
    let result = run_batch(catalog, &batch, &BatchOptions::default(), |item, _| {
        let i = index[batch
            .iter()
            .position(|b| std::ptr::eq(b, item))
            .unwrap_or_default()];
        one(i, &item.tool, item.arguments.get())
    });
    for (i, obs) in index.into_iter().zip(result.items) {
        out[i] = Some(obs);
    }
    out.into_iter()
        .enumerate()
        .map(|(i, obs)| {
            obs.unwrap_or_else(|| {
                Observation::failure(
                    &id_of(i),
                    &calls[i].0,
                    SideEffect::ReadOnly,
                    ErrorCode::Internal.info("the inner call was not run"),
                )
            })
        })
        .collect()
}

/// One inner call: the `n`th of the script whose call has `parent`'s
/// options, ending by `deadline`.
fn inner(
    catalog: &Catalog,
    run: &RunInner<'_>,
    parent: &CallOptions,
    n: u64,
    deadline: Instant,
    tool: &str,
    args: &str,
) -> Observation {
    let parent_id = parent.call_id.clone().unwrap_or_default();
    let call_id = format!("{parent_id}.{n}");
    if tool == TOOL_NAME {
        return Observation::failure(
            &call_id,
            tool,
            SideEffect::ReadOnly,
            ErrorCode::Denied.info(
                "a script cannot start a script: run_script is not callable from inside run_script",
            ),
        );
    }
    let left = deadline.saturating_duration_since(Instant::now());
    if left < LAST_MS {
        return Observation::failure(
            &call_id,
            tool,
            SideEffect::ReadOnly,
            ErrorCode::Timeout.info("the script's deadline has passed"),
        );
    }
    let own = catalog
        .get(tool)
        .map_or(u64::MAX, |t| u64::from(t.descriptor.default_timeout_ms));
    let idempotency = parent.idempotency.as_ref().map(|k| match k {
        KeySource::Explicit(key) => KeySource::Explicit(format!("{key}.{n}")),
        KeySource::Derived {
            trajectory_id,
            turn,
            ..
        } => KeySource::Derived {
            trajectory_id: trajectory_id.clone(),
            turn: *turn,
            call_id: call_id.clone(),
        },
    });
    let opts = CallOptions {
        call_id: Some(call_id),
        timeout_ms: Some(own.min(left.as_millis() as u64).max(1)),
        memory_mb: parent.memory_mb,
        max_text_bytes: parent.max_text_bytes,
        idempotency,
        requested_by: parent.requested_by.clone(),
        conversation: parent.conversation.clone(),
        ..CallOptions::default()
    };
    run(Call::new(tool, args, &opts))
}

/// The `timeout_ms` argument of a `run_script` call, if it has one (the
/// engine validates it; here it only shortens the call's deadline).
pub(crate) fn requested_timeout(args: &str) -> Option<Duration> {
    #[derive(serde::Deserialize)]
    struct Args {
        timeout_ms: Option<u64>,
    }
    serde_json::from_str::<Args>(args)
        .ok()?
        .timeout_ms
        .map(|ms| Duration::from_millis(ms.max(1)))
}

/// What the script sees of an inner call's observation: its output, or its
/// error.
fn answer(obs: Observation) -> Result<String, String> {
    match (obs.error, obs.output) {
        (None, Some(output)) => Ok(output.to_string()),
        (None, None) => Ok("null".to_string()),
        (Some(e), _) => Err(error_json(&e)),
    }
}

/// An error as the script's `call-tool` and `call-tools` answer it.
fn error_json(e: &ErrorInfo) -> String {
    serde_json::to_string(e)
        .unwrap_or_else(|_| serde_json::json!({"code": e.code, "message": e.message}).to_string())
}

/// The TypeScript declaration of `tools` a script can call: one method per
/// tool, its argument and result types read from the tool's input and
/// output schemas, its title as a comment. `run_script` itself is left out.
pub fn declarations<'a>(tools: impl IntoIterator<Item = &'a ToolDescriptor>) -> String {
    let mut out = String::from("declare const tools: {\n");
    for d in tools {
        if d.name == TOOL_NAME || !is_identifier(&d.name) {
            continue;
        }
        if let Some(title) = &d.title {
            out.push_str(&format!("  /** {} */\n", title.replace("*/", "* /")));
        }
        let args = ts_type(&d.input_schema, &d.input_schema, 0);
        let result = d
            .output_schema
            .as_ref()
            .map_or_else(|| "unknown".to_string(), |s| ts_type(s, s, 0));
        out.push_str(&format!("  {}(args: {args}): Promise<{result}>;\n", d.name));
    }
    out.push_str("};\n");
    out
}

/// Whether `name` can be written `tools.name` (a namespaced tool,
/// `fs.read`, is called `tools["fs.read"]` and left out).
fn is_identifier(name: &str) -> bool {
    name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && name.chars().next().is_some_and(|c| !c.is_ascii_digit())
}

/// Deepest nesting written out; deeper values are `unknown`.
const MAX_TS_DEPTH: usize = 8;

/// The TypeScript type of the JSON Schema `schema` (whose `$ref`s resolve
/// in `root`).
fn ts_type(schema: &Value, root: &Value, depth: usize) -> String {
    if depth > MAX_TS_DEPTH {
        return "unknown".into();
    }
    let Some(map) = schema.as_object() else {
        return "unknown".into();
    };
    if let Some(target) = map.get("$ref").and_then(Value::as_str) {
        return match target.strip_prefix('#').and_then(|p| root.pointer(p)) {
            Some(s) => ts_type(s, root, depth + 1),
            None => "unknown".into(),
        };
    }
    if let Some(c) = map.get("const") {
        return c.to_string();
    }
    if let Some(values) = map.get("enum").and_then(Value::as_array) {
        return union(values.iter().map(Value::to_string));
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(branches) = map.get(key).and_then(Value::as_array) {
            return union(branches.iter().map(|b| ts_type(b, root, depth + 1)));
        }
    }
    let types: Vec<&str> = match map.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ if map.contains_key("properties") => vec!["object"],
        _ => return "unknown".into(),
    };
    union(types.into_iter().map(|t| match t {
        "string" => "string".to_string(),
        "integer" | "number" => "number".to_string(),
        "boolean" => "boolean".to_string(),
        "null" => "null".to_string(),
        "array" => {
            let item = map
                .get("items")
                .map_or_else(|| "unknown".to_string(), |i| ts_type(i, root, depth + 1));
            if item.contains(' ') {
                format!("Array<{item}>")
            } else {
                format!("{item}[]")
            }
        }
        "object" => ts_object(map, root, depth),
        _ => "unknown".to_string(),
    }))
}

/// `{ a: T; b?: U }` for an object schema; `Record<string, T>` for a map.
fn ts_object(map: &serde_json::Map<String, Value>, root: &Value, depth: usize) -> String {
    let required: Vec<&str> = map
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let fields: Vec<String> = map
        .get("properties")
        .and_then(Value::as_object)
        .map(|props| {
            props
                .iter()
                .map(|(name, s)| {
                    let key = if is_identifier(name) {
                        name.clone()
                    } else {
                        Value::String(name.clone()).to_string()
                    };
                    let optional = if required.contains(&name.as_str()) {
                        ""
                    } else {
                        "?"
                    };
                    format!("{key}{optional}: {}", ts_type(s, root, depth + 1))
                })
                .collect()
        })
        .unwrap_or_default();
    match (fields.is_empty(), map.get("additionalProperties")) {
        (true, Some(extra @ Value::Object(_))) => {
            format!("Record<string, {}>", ts_type(extra, root, depth + 1))
        }
        (true, _) => "{}".into(),
        (false, _) => format!("{{ {} }}", fields.join("; ")),
    }
}

/// `A | B`, each member once, in order.
fn union(members: impl Iterator<Item = String>) -> String {
    let mut seen: Vec<String> = Vec::new();
    for m in members {
        if !seen.contains(&m) {
            seen.push(m);
        }
    }
    match seen.len() {
        0 => "never".into(),
        _ => seen.join(" | "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn schema_types_become_typescript() {
        let root = json!({
            "type": "object",
            "properties": {
                "mode": {"enum": ["a", "b"]},
                "tags": {"type": "array", "items": {"type": "string"}},
                "pairs": {"type": "array", "items": {"type": "object", "properties": {"k": {"type": "string"}}, "required": ["k"]}},
                "counts": {"type": "object", "additionalProperties": {"type": "integer"}},
                "next": {"anyOf": [{"$ref": "#/$defs/Pos"}, {"type": "null"}]},
                "done": {"const": true},
                "bad-name": {"type": ["string", "null"]},
                "any": {}
            },
            "required": ["mode"],
            "$defs": {"Pos": {"type": "object", "properties": {"line": {"type": "integer"}}, "required": ["line"]}}
        });
        assert_eq!(
            ts_type(&root, &root, 0),
            "{ mode: \"a\" | \"b\"; tags?: string[]; pairs?: Array<{ k: string }>; \
             counts?: Record<string, number>; next?: { line: number } | null; done?: true; \
             \"bad-name\"?: string | null; any?: unknown }"
        );
    }

    #[test]
    fn only_identifiers_are_methods() {
        assert!(is_identifier("file_view"));
        assert!(!is_identifier("fs.read"));
        assert!(!is_identifier("1x"));
    }
}
