//! The `run_script` engine: a JavaScript interpreter (Boa) in a Wasm
//! component, whose only way out is the host.
//!
//! The script is the body of an async function. Its globals are the
//! language's built-ins plus three names:
//!
//! - `input`: the call's `input` argument (JSON), or `null`;
//! - `tools`: `tools.<name>(args)` starts a call of tool `<name>` and
//!   returns a promise of the tool's output, or rejects with an `Error`
//!   carrying the observation's `code`, `field`, `expected`, `actual` and
//!   `retry`;
//! - `console`: `log`, `info`, `warn` and `error` append a line to the
//!   captured console output, clipped at [`CONSOLE_BYTES`].
//!
//! Calls run when the script waits: once the job queue is empty, every
//! call started since the last wait goes to the host in one `call-tools`
//! request (the host runs them in parallel where they do not conflict),
//! their promises settle, and the queue runs again. So
//! `await Promise.all([tools.a(x), tools.b(y)])` is one round trip to the
//! host, and `await tools.a(x)` in a loop is one per call.
//!
//! There is nothing else: no `fetch`, no `require`, no file system, no
//! timers. The component has no preopens and no network; the host runs it
//! under the call's fuel, memory and deadline, which bound every inner call
//! too.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use boa_engine::builtins::promise::PromiseState;
use boa_engine::object::builtins::JsPromise;
use boa_engine::{js_string, Context, JsResult, JsValue, NativeFunction, Source};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use toolhost_sdk::{Context as CallContext, SideEffect, Tool, ToolError, Value};

/// Most bytes of console output kept; the rest is counted.
pub const CONSOLE_BYTES: usize = 16 * 1024;

/// Longest script, in bytes.
const MAX_SOURCE_BYTES: u32 = 65_536;

const DESCRIPTION: &str = "\
Runs a JavaScript async function body that calls tools and returns only its result: chain \
several calls (search, read, filter, count) in one round trip.
Globals: input, tools.<name>(args) (a promise of that tool's output; rejects with an Error \
carrying code, field, expected, actual, retry), console.log. No fetch, require, files or timers.
Calls started together (Promise.all) run in parallel. \
Inner calls are checked, budgeted and journaled like direct ones, under your grants.
Output: {value, console, calls}. Errors: script_error (threw, did not parse, never settled).";

/// Arguments of `run_script`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScriptArgs {
    /// JavaScript, the body of an async function; `return` the answer.
    #[schemars(length(min = 1, max = 65536))]
    pub source: String,
    /// JSON text the script reads, parsed, as `input` (default null).
    #[serde(default)]
    #[schemars(length(max = 65536))]
    pub input: Option<String>,
    /// Deadline of the whole script in ms (only ever shortens the call's).
    #[serde(default)]
    #[schemars(range(min = 1, max = 3_600_000))]
    pub timeout_ms: Option<u64>,
}

/// What the inner calls did.
#[derive(Debug, Default, Serialize, JsonSchema)]
pub struct CallSummary {
    /// Inner calls made.
    pub total: u32,
    /// Inner calls per tool name.
    pub by_tool: BTreeMap<String, u32>,
    /// Inner calls that ended in an error.
    pub failures: u32,
    /// Wall time spent in inner calls, in milliseconds.
    pub wall_time_ms: u64,
}

/// Result of `run_script`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ScriptOutput {
    /// The script's return value (`null` for none).
    pub value: Value,
    /// What the script wrote with `console.*`, one line each, clipped.
    pub console: String,
    /// Bytes of console output left out.
    pub console_omitted_bytes: u64,
    /// The inner calls.
    pub calls: CallSummary,
}

/// What the native functions record while the script runs.
#[derive(Default)]
struct Run {
    console: String,
    console_omitted: u64,
    calls: CallSummary,
    call_time: Duration,
    /// Calls started since the last flush: `(id, tool, arguments)`.
    pending: Vec<(u32, String, String)>,
    next_id: u32,
}

thread_local! {
    static RUN: RefCell<Run> = RefCell::new(Run::default());
}

/// The globals the script sees, made from the two native functions, which
/// are then removed from the global object. Evaluates to the function that
/// settles a started call: `settle(id, envelope)`.
const PRELUDE: &str = r#"
(() => {
  const start = globalThis.__toolhost_call;
  const log = globalThis.__toolhost_log;
  const fastParse = globalThis.__toolhost_parse;
  delete globalThis.__toolhost_call;
  delete globalThis.__toolhost_log;
  delete globalThis.__toolhost_parse;
  // JSON.parse without a reviver builds its value natively; a reviver, and
  // text the native parser refuses (syntax errors, out-of-range numbers,
  // lone surrogates), go to the engine's own parser.
  const slowParse = JSON.parse;
  Object.defineProperty(JSON, 'parse', {
    value: { parse(text, reviver) {
      if (reviver === undefined) {
        const v = fastParse(String(text));
        if (v !== undefined) return v;
      }
      return slowParse(text, reviver);
    } }.parse,
    writable: true, configurable: true, enumerable: false,
  });
  const show = (v) => {
    if (typeof v === 'string') return v;
    try { const s = JSON.stringify(v); return s === undefined ? String(v) : s; }
    catch (_) { return String(v); }
  };
  const line = (...a) => log(a.map(show).join(' '));
  globalThis.console = Object.freeze({ log: line, info: line, warn: line, error: line, debug: line });
  const waiting = new Map();
  globalThis.tools = new Proxy(Object.freeze({}), {
    get(_, name) {
      if (typeof name !== 'string' || name === 'then') return undefined;
      return (args) => new Promise((resolve, reject) => {
        const json = JSON.stringify(args === undefined ? {} : args);
        waiting.set(start(name, json === undefined ? 'null' : json), { resolve, reject });
      });
    },
  });
  return (id, ok, value) => {
    const w = waiting.get(id);
    waiting.delete(id);
    if (ok) return w.resolve(value);
    const e = new Error(value.message);
    e.name = 'ToolError';
    for (const k of ['code', 'field', 'expected', 'actual', 'retry', 'details']) {
      if (value[k] !== undefined && value[k] !== null) e[k] = value[k];
    }
    w.reject(e);
  };
})();
"#;

/// The script, wrapped so that its outcome is one JSON string.
fn wrap(source: &str, input: &str) -> String {
    format!(
        r#"globalThis.input = JSON.parse({input});
(async () => {{
  try {{
    const value = await (async () => {{
{source}
    }})();
    return JSON.stringify({{ ok: value === undefined ? null : value }});
  }} catch (e) {{
    const err = (e instanceof Error)
      ? {{ name: e.name, message: String(e.message), code: e.code, field: e.field,
          expected: e.expected, actual: e.actual, retry: e.retry, details: e.details }}
      : {{ name: 'Error', message: String(e) }};
    return JSON.stringify({{ err }});
  }}
}})()"#,
        input = serde_json::to_string(input).unwrap_or_else(|_| "\"null\"".into()),
    )
}

fn text_of(v: &JsValue, ctx: &mut Context) -> JsResult<String> {
    Ok(v.to_string(ctx)?.to_std_string_escaped())
}

/// `__toolhost_call(name, argsJson)`: starts one inner call (it runs at
/// the next [`flush`]); answers its id.
fn native_call(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let name = text_of(args.first().unwrap_or(&JsValue::undefined()), ctx)?;
    let json = text_of(args.get(1).unwrap_or(&JsValue::undefined()), ctx)?;
    let id = RUN.with_borrow_mut(|run| {
        run.next_id += 1;
        run.pending.push((run.next_id, name, json));
        run.next_id
    });
    Ok(JsValue::from(id))
}

/// Runs the calls started since the last flush in one `call-tools`
/// request and settles their promises with `settle`; false when there
/// were none.
fn flush(settle: &JsValue, ctx: &mut Context) -> JsResult<bool> {
    let pending = RUN.with_borrow_mut(|run| std::mem::take(&mut run.pending));
    if pending.is_empty() {
        return Ok(false);
    }
    let (ids, calls): (Vec<u32>, Vec<(String, String)>) = pending
        .into_iter()
        .map(|(id, name, json)| (id, (name, json)))
        .unzip();
    let start = Instant::now();
    let answers = toolhost_sdk::script::call_tools(&calls);
    let elapsed = start.elapsed();
    RUN.with_borrow_mut(|run| {
        run.call_time += elapsed;
        for ((name, _), answer) in calls.iter().zip(&answers) {
            run.calls.total += 1;
            *run.calls.by_tool.entry(name.clone()).or_default() += 1;
            run.calls.failures += u32::from(answer.is_err());
        }
    });
    let settle = settle
        .as_callable()
        .ok_or_else(|| boa_engine::JsNativeError::typ().with_message("no settle function"))?;
    for (id, answer) in ids.into_iter().zip(answers) {
        let ok = answer.is_ok();
        let value = answer_value(answer.unwrap_or_else(|e| e), ctx)?;
        settle.call(
            &JsValue::undefined(),
            &[JsValue::from(id), JsValue::from(ok), value],
            ctx,
        )?;
    }
    Ok(true)
}

/// An inner call's answer (JSON text from the host) as a script value,
/// built natively: the engine's `JSON.parse` would parse the text twice
/// and compile it to bytecode.
fn answer_value(json: String, ctx: &mut Context) -> JsResult<JsValue> {
    let value: Value = serde_json::from_str(&json).map_err(|e| {
        boa_engine::JsNativeError::syntax().with_message(format!("the host's answer: {e}"))
    })?;
    JsValue::from_json(&value, ctx)
}

/// `__toolhost_parse(text)`: `JSON.parse(text)` built natively, or
/// `undefined` (which JSON never is) when the text is not JSON that
/// serde_json takes, for the engine's own parser to answer.
fn native_parse(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let text = args
        .first()
        .unwrap_or(&JsValue::undefined())
        .to_string(ctx)?;
    let Ok(text) = text.to_std_string() else {
        return Ok(JsValue::undefined()); // a lone surrogate
    };
    match serde_json::from_str::<Value>(&text) {
        Ok(value) => JsValue::from_json(&value, ctx),
        Err(_) => Ok(JsValue::undefined()),
    }
}

/// `__toolhost_log(line)`: appends one console line, within the cap.
fn native_log(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let line = text_of(args.first().unwrap_or(&JsValue::undefined()), ctx)?;
    RUN.with_borrow_mut(|run| {
        let room = CONSOLE_BYTES.saturating_sub(run.console.len());
        if line.len() < room {
            run.console.push_str(&line);
            run.console.push('\n');
        } else {
            let mut cut = room;
            while cut > 0 && !line.is_char_boundary(cut) {
                cut -= 1;
            }
            run.console.push_str(&line[..cut]);
            run.console_omitted += (line.len() - cut + 1) as u64;
        }
    });
    Ok(JsValue::undefined())
}

fn script_error(message: impl Into<String>) -> ToolError {
    ToolError::new("script_error", message).correctable()
}

fn run_script(_: &CallContext, args: ScriptArgs) -> Result<ScriptOutput, ToolError> {
    let input = match args.input.as_deref() {
        None => "null".to_string(),
        Some(text) => match serde_json::from_str::<Value>(text) {
            Ok(v) => v.to_string(),
            Err(e) => {
                return Err(
                    ToolError::new("invalid_input", format!("`input` is not JSON: {e}"))
                        .field("/input")
                        .correctable(),
                )
            }
        },
    };
    RUN.with_borrow_mut(|run| *run = Run::default());
    let mut ctx = Context::default();
    let register = |ctx: &mut Context| -> JsResult<JsValue> {
        ctx.register_global_builtin_callable(
            js_string!("__toolhost_call"),
            2,
            NativeFunction::from_fn_ptr(native_call),
        )?;
        ctx.register_global_builtin_callable(
            js_string!("__toolhost_log"),
            1,
            NativeFunction::from_fn_ptr(native_log),
        )?;
        ctx.register_global_builtin_callable(
            js_string!("__toolhost_parse"),
            1,
            NativeFunction::from_fn_ptr(native_parse),
        )?;
        ctx.eval(Source::from_bytes(PRELUDE))
    };
    let settle =
        register(&mut ctx).map_err(|e| ToolError::new("script_error", format!("prelude: {e}")))?;
    let promise = ctx
        .eval(Source::from_bytes(&wrap(&args.source, &input)))
        .map_err(|e| script_error(format!("the script did not parse: {e}")).field("/source"))?;
    let failed = |e: boa_engine::JsError| script_error(format!("the script failed: {e}"));
    loop {
        ctx.run_jobs().map_err(failed)?;
        if !flush(&settle, &mut ctx).map_err(failed)? {
            break;
        }
    }
    let state = promise
        .as_object()
        .and_then(|o| JsPromise::from_object(o.clone()).ok())
        .map(|p| p.state());
    let outcome = match state {
        Some(PromiseState::Fulfilled(v)) => {
            text_of(&v, &mut ctx).map_err(|e| script_error(e.to_string()))?
        }
        Some(PromiseState::Rejected(e)) => {
            return Err(script_error(format!(
                "the script failed: {}",
                text_of(&e, &mut ctx).unwrap_or_default()
            )))
        }
        _ => {
            return Err(script_error(
                "the script's promise never settled (it awaited something that never resolves)",
            ))
        }
    };
    let outcome: Value = serde_json::from_str(&outcome)
        .map_err(|e| script_error(format!("the script's outcome is not JSON: {e}")))?;
    let run = RUN.with_borrow_mut(std::mem::take);
    if let Some(err) = outcome.get("err") {
        let name = err["name"].as_str().unwrap_or("Error");
        let message = err["message"].as_str().unwrap_or("");
        return Err(
            script_error(format!("the script threw {name}: {message}")).details(err.clone())
        );
    }
    let value = outcome.get("ok").cloned().unwrap_or(Value::Null);
    let mut calls = run.calls;
    calls.wall_time_ms = run.call_time.as_millis() as u64;
    Ok(ScriptOutput {
        value,
        console: run.console,
        console_omitted_bytes: run.console_omitted,
        calls,
    })
}

/// The component's one tool.
pub fn tools() -> Vec<Tool> {
    vec![Tool::new("run_script", run_script)
        .title("Run a script over tools")
        .description(DESCRIPTION)
        .side_effect(SideEffect::ReadOnly)
        .error_codes(&["script_error", "invalid_input"])
        .timeout_ms(30_000)
        .max_output_bytes(MAX_SOURCE_BYTES * 4)
        .text(render)]
}

/// What the model reads: the value as compact JSON, then the console
/// output and a one-line summary of the inner calls.
fn render(out: &ScriptOutput) -> String {
    let mut text = out.value.to_string();
    if !out.console.is_empty() {
        text.push_str("\nconsole:\n");
        text.push_str(out.console.trim_end());
        if out.console_omitted_bytes > 0 {
            text.push_str(&format!(" [+{} bytes]", out.console_omitted_bytes));
        }
    }
    let c = &out.calls;
    let per_tool: Vec<String> = c.by_tool.iter().map(|(t, n)| format!("{t} {n}")).collect();
    text.push_str(&format!(
        "\ncalls: {} ({}), {} failed, {} ms",
        c.total,
        per_tool.join(", "),
        c.failures,
        c.wall_time_ms
    ));
    text
}

toolhost_sdk::plugin!(tools);
