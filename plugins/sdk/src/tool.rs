//! [`Tool`]: one typed tool and how it becomes a WIT descriptor and a call.

use std::any::{type_name, Any, TypeId};
use std::borrow::Cow;
use std::fmt;

use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, Schema};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use crate::bindings::exports::toolhost::plugin::discovery::ToolWords as WitToolWords;
use crate::bindings::exports::toolhost::plugin::prober::ProbeOutcome as WitProbeOutcome;
use crate::bindings::toolhost::plugin::types::{
    CallContext as WitCallContext, Needs as WitNeeds, SideEffect,
    ToolDescriptor as WitToolDescriptor, ToolError as WitToolError, ToolOutput as WitToolOutput,
};
use crate::context::Context;
use crate::error::ToolError;
use crate::plan::{Plan, Probe};

/// Default wall-clock budget of one call: 30 s.
pub const DEFAULT_TIMEOUT_MS: u32 = 30_000;
/// Default largest output: 1 MiB of JSON.
pub const DEFAULT_MAX_OUTPUT_BYTES: u32 = 1024 * 1024;

type Handler = Box<dyn Fn(&Context, &str, Option<&TextRenderer>) -> Result<ToolOutput, ToolError>>;
/// Renders a tool's typed output (behind `&dyn Any`, checked to be the
/// tool's output type when it was set) as model-facing text.
type TextRenderer = Box<dyn Fn(&dyn Any) -> String>;

/// A call's answer: the output JSON and, when the tool renders one, its
/// model-facing text (see [`Tool::text`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    /// The output as compact JSON text.
    pub json: String,
    /// The tool's rendering for a model, if it has one.
    pub text: Option<String>,
}
type PlanHandler = Box<dyn Fn(&Context, &str) -> Result<Plan, ToolError>>;
type ProbeHandler = Box<dyn Fn(&Context, &str, &str) -> Result<Probe<String>, ToolError>>;

/// The argument and output types of a tool, to check that its dry-run and
/// probe functions take the same ones.
#[derive(Clone, Copy)]
struct Types {
    args: (TypeId, &'static str),
    output: (TypeId, &'static str),
}

impl Types {
    fn of<A: 'static, O: 'static>() -> Self {
        Types {
            args: (TypeId::of::<A>(), type_name::<A>()),
            output: (TypeId::of::<O>(), type_name::<O>()),
        }
    }
}

/// One tool: its descriptor facts and its typed function.
///
/// Build it with [`Tool::new`] and the builder methods. Defaults: no title,
/// empty description, side effect [`SideEffect::Irreversible`] (the safe
/// assumption when the author forgets to say), no needs, no error codes of
/// its own, [`DEFAULT_TIMEOUT_MS`], [`DEFAULT_MAX_OUTPUT_BYTES`], no
/// dry-run and no probe.
pub struct Tool {
    name: Cow<'static, str>,
    title: Option<Cow<'static, str>>,
    description: Cow<'static, str>,
    side_effect: SideEffect,
    fs_read: bool,
    fs_write: bool,
    network_hosts: Vec<Cow<'static, str>>,
    error_codes: Vec<Cow<'static, str>>,
    timeout_ms: u32,
    max_output_bytes: u32,
    exec: Vec<Cow<'static, str>>,
    keywords: Vec<Cow<'static, str>>,
    examples: Vec<Cow<'static, str>>,
    schemas: fn() -> (Schema, Schema),
    handler: Handler,
    text: Option<TextRenderer>,
    types: Types,
    planner: Option<PlanHandler>,
    prober: Option<ProbeHandler>,
}

impl Tool {
    /// A tool named `name` (`^[a-z][a-z0-9_]{0,63}$`, e.g. `file_view`)
    /// that runs `run`.
    ///
    /// `A` is deserialized from the call's arguments and `O` is serialized
    /// as its output; both schemas are generated from these types, lazily.
    pub fn new<A, O, F>(name: impl Into<Cow<'static, str>>, run: F) -> Self
    where
        A: DeserializeOwned + JsonSchema + 'static,
        O: Serialize + JsonSchema + 'static,
        F: Fn(&Context, A) -> Result<O, ToolError> + 'static,
    {
        let handler: Handler = Box::new(move |ctx, args_json, render| {
            let args: A =
                serde_json::from_str(args_json).map_err(|e| ToolError::invalid_arguments(&e))?;
            let output = run(ctx, args)?;
            let text = render.map(|r| r(&output as &dyn Any));
            // A failure here is a bug in the tool's output type (e.g. a map
            // with non-string keys), not something the caller can fix.
            let json = toolhost_compact_json::to_string(&output)
                .expect("tool output must serialize to JSON");
            Ok(ToolOutput { json, text })
        });
        Tool {
            name: name.into(),
            title: None,
            description: Cow::Borrowed(""),
            side_effect: SideEffect::Irreversible,
            fs_read: false,
            fs_write: false,
            network_hosts: Vec::new(),
            error_codes: Vec::new(),
            timeout_ms: DEFAULT_TIMEOUT_MS,
            max_output_bytes: DEFAULT_MAX_OUTPUT_BYTES,
            exec: Vec::new(),
            keywords: Vec::new(),
            examples: Vec::new(),
            schemas: schemas_of::<A, O>,
            handler,
            text: None,
            types: Types::of::<A, O>(),
            planner: None,
            prober: None,
        }
    }

    /// Gives the tool a model-facing rendering: `render` turns a successful
    /// output into the compact text a model reads (the WIT `tool-output.text`),
    /// e.g. numbered lines under a one-line header, or `path:line: text`
    /// rows. The JSON output stays the exact data for programs. Without it
    /// the host shows the model compact JSON.
    ///
    /// Write it for a reader with no schema at hand: say what the numbers
    /// are, keep it about the size of the data, and end with how to get
    /// more when the output is a page of something larger. The host strips
    /// control characters and clips it to the call's text budget (16 KiB),
    /// head and tail: a tool that pages cuts each page so its text fits
    /// whole (whole lines, with about 1 KiB to spare for the host's
    /// markers), so that its "next" is the first line the model did not
    /// read, as the reference `file_view` and `grep_search` do.
    ///
    /// # Panics
    ///
    /// When `O` is not the output type of the tool function.
    #[must_use]
    pub fn text<O, F>(mut self, render: F) -> Self
    where
        O: 'static,
        F: Fn(&O) -> String + 'static,
    {
        self.check_type(
            "text",
            "output",
            self.types.output,
            Types::of::<(), O>().output,
        );
        self.text = Some(Box::new(move |output| {
            render(
                output
                    .downcast_ref::<O>()
                    .expect("the output type was checked when the renderer was set"),
            )
        }));
        self
    }

    /// Lets the host plan a call without performing it: `plan` gets the
    /// same context and arguments as the tool function and returns the
    /// [`Plan`] of what a call would change. It must not change anything; it
    /// should check everything the call would (and fail with the same error
    /// codes), skipping only the final effect.
    ///
    /// Sets the descriptor's `supports-dry-run`. Without it, the plugin's
    /// `dry-run` answers this tool with code `dry_run_unsupported`.
    ///
    /// # Panics
    ///
    /// When `A` is not the argument type of the tool function: a bug the
    /// plugin's first `describe()` (and any native test) reveals.
    #[must_use]
    pub fn dry_run<A, F>(mut self, plan: F) -> Self
    where
        A: DeserializeOwned + 'static,
        F: Fn(&Context, A) -> Result<Plan, ToolError> + 'static,
    {
        self.check_type(
            "dry_run",
            "argument",
            self.types.args,
            Types::of::<A, ()>().args,
        );
        self.planner = Some(Box::new(move |ctx, args_json| {
            let args: A =
                serde_json::from_str(args_json).map_err(|e| ToolError::invalid_arguments(&e))?;
            plan(ctx, args)
        }));
        self
    }

    /// Lets the host settle a call whose outcome is unknown (the host
    /// crashed or timed out mid-call): `probe` gets the call's context,
    /// arguments and idempotency key, inspects the world without changing
    /// it, and answers [`Probe::Done`] with the output the call returned (as
    /// far as the world shows it), [`Probe::NotDone`] when the call did not
    /// take effect (retrying is safe), or [`Probe::Unknown`].
    ///
    /// Sets the descriptor's `supports-probe`. Without it, the plugin's
    /// `probe` answers this tool with `unknown`.
    ///
    /// # Panics
    ///
    /// When `A` or `O` is not the argument or output type of the tool
    /// function.
    #[must_use]
    pub fn probe<A, O, F>(mut self, probe: F) -> Self
    where
        A: DeserializeOwned + 'static,
        O: Serialize + 'static,
        F: Fn(&Context, A, &str) -> Result<Probe<O>, ToolError> + 'static,
    {
        let types = Types::of::<A, O>();
        self.check_type("probe", "argument", self.types.args, types.args);
        self.check_type("probe", "output", self.types.output, types.output);
        self.prober = Some(Box::new(move |ctx, args_json, key| {
            let args: A =
                serde_json::from_str(args_json).map_err(|e| ToolError::invalid_arguments(&e))?;
            Ok(probe(ctx, args, key)?.map(|output| {
                toolhost_compact_json::to_string(&output)
                    .expect("tool output must serialize to JSON")
            }))
        }));
        self
    }

    fn check_type(
        &self,
        method: &str,
        what: &str,
        tool: (TypeId, &'static str),
        given: (TypeId, &'static str),
    ) {
        assert!(
            tool.0 == given.0,
            "Tool::{method} of `{}`: the function's {what} type is `{}`, but the tool's is `{}`",
            self.name,
            given.1,
            tool.1
        );
    }

    /// A short human-readable title.
    #[must_use]
    pub fn title(mut self, title: impl Into<Cow<'static, str>>) -> Self {
        self.title = Some(title.into());
        self
    }

    /// The tool's contract: what it does, when to use it and when not, its
    /// inputs with bounds and units, its output and size, its error codes
    /// and its side effect.
    #[must_use]
    pub fn description(mut self, description: impl Into<Cow<'static, str>>) -> Self {
        self.description = description.into();
        self
    }

    /// How much the tool can change the world.
    #[must_use]
    pub fn side_effect(mut self, side_effect: SideEffect) -> Self {
        self.side_effect = side_effect;
        self
    }

    /// The tool reads files under the workspace.
    #[must_use]
    pub fn reads_files(mut self) -> Self {
        self.fs_read = true;
        self
    }

    /// The tool writes files under the workspace.
    #[must_use]
    pub fn writes_files(mut self) -> Self {
        self.fs_write = true;
        self
    }

    /// The tool contacts `origin` (`scheme://host:port`).
    #[must_use]
    pub fn network_host(mut self, origin: impl Into<Cow<'static, str>>) -> Self {
        self.network_hosts.push(origin.into());
        self
    }

    /// The tool runs `program` through the `exec` import (see
    /// [`crate::exec`]): a program name looked up on the host's `PATH`, an
    /// absolute path, or `any` for a general runner. The call may run the
    /// programs both declared here and granted by the caller.
    #[must_use]
    pub fn runs_program(mut self, program: impl Into<Cow<'static, str>>) -> Self {
        self.exec.push(program.into());
        self
    }

    /// Error codes the tool returns itself (appended; duplicates dropped).
    /// The SDK adds `invalid_arguments` and, for file tools, `invalid_path`.
    #[must_use]
    pub fn error_codes(mut self, codes: &[&'static str]) -> Self {
        for code in codes {
            push_unique(&mut self.error_codes, Cow::Borrowed(code));
        }
        self
    }

    /// Short words of the tasks the tool is for (`"rename"`, `"move"`,
    /// `"relocate"`), appended; duplicates dropped. `find_tools` indexes
    /// them like the tool's name. The host takes at most 24 per tool, each
    /// at most 40 bytes and three words. Exported through the `discovery`
    /// interface, so plugins that declare none look as before.
    #[must_use]
    pub fn keywords(mut self, keywords: &[&'static str]) -> Self {
        for k in keywords {
            push_unique(&mut self.keywords, Cow::Borrowed(k));
        }
        self
    }

    /// Whole task phrasings a user would write for this tool (`"move the
    /// old logs into archive/"`), appended; duplicates dropped.
    /// `find_tools` indexes their words. The host takes at most 12 per
    /// tool, each one line of at most 200 bytes.
    #[must_use]
    pub fn examples(mut self, examples: &[&'static str]) -> Self {
        for e in examples {
            push_unique(&mut self.examples, Cow::Borrowed(e));
        }
        self
    }

    /// The tool's keywords ([`Tool::keywords`]).
    pub fn task_keywords(&self) -> Vec<String> {
        self.keywords.iter().map(|k| k.to_string()).collect()
    }

    /// The tool's examples ([`Tool::examples`]).
    pub fn task_examples(&self) -> Vec<String> {
        self.examples.iter().map(|e| e.to_string()).collect()
    }

    /// Default wall-clock budget of one call, in milliseconds.
    #[must_use]
    pub fn timeout_ms(mut self, timeout_ms: u32) -> Self {
        self.timeout_ms = timeout_ms;
        self
    }

    /// Largest output the tool is expected to return, in bytes of JSON.
    #[must_use]
    pub fn max_output_bytes(mut self, max_output_bytes: u32) -> Self {
        self.max_output_bytes = max_output_bytes;
        self
    }

    /// The tool's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether the tool has a dry-run ([`Tool::dry_run`]).
    pub fn supports_dry_run(&self) -> bool {
        self.planner.is_some()
    }

    /// Whether the tool has a probe ([`Tool::probe`]).
    pub fn supports_probe(&self) -> bool {
        self.prober.is_some()
    }

    /// Generates the input schema (a closed object if the argument type
    /// uses `#[serde(deny_unknown_fields)]`).
    pub fn input_schema(&self) -> Value {
        (self.schemas)().0.to_value()
    }

    /// Generates the output schema.
    pub fn output_schema(&self) -> Value {
        (self.schemas)().1.to_value()
    }

    /// Every error code the tool may return, including the SDK's own.
    pub fn all_error_codes(&self) -> Vec<String> {
        let mut codes = self.error_codes.clone();
        push_unique(&mut codes, Cow::Borrowed("invalid_arguments"));
        if self.fs_read || self.fs_write {
            push_unique(&mut codes, Cow::Borrowed("invalid_path"));
        }
        codes.into_iter().map(Cow::into_owned).collect()
    }

    /// Runs the tool on JSON arguments and returns its JSON output (without
    /// the text): callable directly from native tests.
    pub fn call_json(&self, ctx: &Context, args_json: &str) -> Result<String, ToolError> {
        self.call_output(ctx, args_json).map(|o| o.json)
    }

    /// Runs the tool on JSON arguments and returns its output JSON and
    /// model-facing text: what the host's `call` does.
    pub fn call_output(&self, ctx: &Context, args_json: &str) -> Result<ToolOutput, ToolError> {
        (self.handler)(ctx, args_json, self.text.as_ref())
    }

    /// Whether the tool renders model-facing text ([`Tool::text`]).
    pub fn has_text(&self) -> bool {
        self.text.is_some()
    }

    /// Plans a call on JSON arguments: what the host's `dry-run` does.
    /// Fails with `dry_run_unsupported` when the tool has no dry-run.
    pub fn dry_run_json(&self, ctx: &Context, args_json: &str) -> Result<Plan, ToolError> {
        match &self.planner {
            Some(plan) => plan(ctx, args_json),
            None => Err(ToolError::new(
                "dry_run_unsupported",
                format!(
                    "tool {:?} cannot plan a call without performing it",
                    self.name
                ),
            )),
        }
    }

    /// Probes a call on JSON arguments: what the host's `probe` does. The
    /// output of [`Probe::Done`] is JSON text. [`Probe::Unknown`] when the
    /// tool has no probe.
    pub fn probe_json(
        &self,
        ctx: &Context,
        args_json: &str,
        idempotency_key: &str,
    ) -> Result<Probe<String>, ToolError> {
        match &self.prober {
            Some(probe) => probe(ctx, args_json, idempotency_key),
            None => Ok(Probe::Unknown),
        }
    }

    fn into_descriptor(self) -> WitToolDescriptor {
        let (input, output) = (self.schemas)();
        let error_codes = self.all_error_codes();
        let (supports_dry_run, supports_probe) = (self.supports_dry_run(), self.supports_probe());
        WitToolDescriptor {
            name: self.name.into_owned(),
            title: self.title.map(Cow::into_owned),
            description: self.description.into_owned(),
            input_schema: input.to_value().to_string(),
            output_schema: Some(output.to_value().to_string()),
            side_effect: self.side_effect,
            needs: WitNeeds {
                fs_read: self.fs_read,
                fs_write: self.fs_write,
                network_hosts: self
                    .network_hosts
                    .into_iter()
                    .map(Cow::into_owned)
                    .collect(),
                exec: self.exec.into_iter().map(Cow::into_owned).collect(),
            },
            error_codes,
            default_timeout_ms: self.timeout_ms,
            max_output_bytes: self.max_output_bytes,
            supports_dry_run,
            supports_probe,
        }
    }
}

impl fmt::Debug for Tool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tool")
            .field("name", &self.name)
            .field("side_effect", &self.side_effect)
            .field("fs_read", &self.fs_read)
            .field("fs_write", &self.fs_write)
            .field("error_codes", &self.error_codes)
            .field("supports_dry_run", &self.supports_dry_run())
            .field("supports_probe", &self.supports_probe())
            .finish_non_exhaustive()
    }
}

/// Finds tool `name` in `tools` and runs it: the plugin's `call` export.
/// Fails with `unknown_tool` when there is no such tool.
pub fn dispatch(
    tools: &[Tool],
    name: &str,
    args_json: &str,
    ctx: &Context,
) -> Result<ToolOutput, ToolError> {
    find(tools, name)?.call_output(ctx, args_json)
}

/// Finds tool `name` in `tools` and plans a call: the plugin's `dry-run`
/// export (see [`Tool::dry_run_json`]). Fails with `unknown_tool` when there
/// is no such tool.
pub fn dispatch_dry_run(
    tools: &[Tool],
    name: &str,
    args_json: &str,
    ctx: &Context,
) -> Result<Plan, ToolError> {
    find(tools, name)?.dry_run_json(ctx, args_json)
}

/// Finds tool `name` in `tools` and probes a call: the plugin's `probe`
/// export (see [`Tool::probe_json`]). Fails with `unknown_tool` when there
/// is no such tool.
pub fn dispatch_probe(
    tools: &[Tool],
    name: &str,
    args_json: &str,
    idempotency_key: &str,
    ctx: &Context,
) -> Result<Probe<String>, ToolError> {
    find(tools, name)?.probe_json(ctx, args_json, idempotency_key)
}

fn find<'t>(tools: &'t [Tool], name: &str) -> Result<&'t Tool, ToolError> {
    tools.iter().find(|tool| tool.name == name).ok_or_else(|| {
        ToolError::new(
            "unknown_tool",
            format!("this plugin has no tool named {name:?}"),
        )
    })
}

/// The `describe` export.
pub fn describe_wit(tools: Vec<Tool>) -> Vec<WitToolDescriptor> {
    tools.into_iter().map(Tool::into_descriptor).collect()
}

/// The `describe-words` export: the task words of every tool that has
/// some.
pub fn describe_words_wit(tools: Vec<Tool>) -> Vec<WitToolWords> {
    tools
        .into_iter()
        .filter(|t| !t.keywords.is_empty() || !t.examples.is_empty())
        .map(|t| WitToolWords {
            name: t.name.into_owned(),
            keywords: t.keywords.into_iter().map(Cow::into_owned).collect(),
            examples: t.examples.into_iter().map(Cow::into_owned).collect(),
        })
        .collect()
}

/// The `call` export.
pub fn call_wit(
    tools: Vec<Tool>,
    name: &str,
    args_json: &str,
    context: WitCallContext,
) -> Result<WitToolOutput, WitToolError> {
    let out = dispatch(&tools, name, args_json, &Context::from(context))?;
    Ok(WitToolOutput {
        json: out.json,
        text: out.text,
    })
}

/// The `dry-run` export: the plan as JSON text.
pub fn dry_run_wit(
    tools: Vec<Tool>,
    name: &str,
    args_json: &str,
    context: WitCallContext,
) -> Result<String, WitToolError> {
    let plan = dispatch_dry_run(&tools, name, args_json, &Context::from(context))?;
    Ok(toolhost_compact_json::to_string(&plan).expect("a plan always serializes"))
}

/// The `probe` export. The context's idempotency key is set to `key`.
pub fn probe_wit(
    tools: Vec<Tool>,
    name: &str,
    args_json: &str,
    key: &str,
    context: WitCallContext,
) -> Result<WitProbeOutcome, WitToolError> {
    let ctx = Context::from(context).with_idempotency_key(key);
    Ok(match dispatch_probe(&tools, name, args_json, key, &ctx)? {
        Probe::Done(output) => WitProbeOutcome::Done(output),
        Probe::NotDone => WitProbeOutcome::NotDone,
        Probe::Unknown => WitProbeOutcome::Unknown,
    })
}

fn push_unique(codes: &mut Vec<Cow<'static, str>>, code: Cow<'static, str>) {
    if !codes.contains(&code) {
        codes.push(code);
    }
}

fn schemas_of<A: JsonSchema, O: JsonSchema>() -> (Schema, Schema) {
    let input = SchemaSettings::draft2020_12()
        .for_deserialize()
        .with(|s| s.inline_subschemas = true)
        .into_generator()
        .into_root_schema_for::<A>();
    let output = SchemaSettings::draft2020_12()
        .for_serialize()
        .with(|s| s.inline_subschemas = true)
        .into_generator()
        .into_root_schema_for::<O>();
    (complete_object(published(input)), published(output))
}

/// Gives an object schema explicit `properties` and `required` (schemars
/// leaves them out when empty), so every input schema lists both.
fn complete_object(mut schema: Schema) -> Schema {
    if schema.get("type").and_then(Value::as_str) == Some("object") {
        let object = schema.ensure_object();
        object
            .entry("properties")
            .or_insert_with(|| Value::Object(Default::default()));
        object
            .entry("required")
            .or_insert_with(|| Value::Array(Vec::new()));
    }
    schema
}

/// Drops the root `title` schemars derives from the Rust type name
/// (`ViewArgs`): it means nothing to a caller; the descriptor has a title.
fn strip_root_title(mut schema: Schema) -> Schema {
    schema.remove("title");
    schema
}

/// What a schema carries into every model context, and no more: without the
/// root `title` ([`strip_root_title`]), without the root `description` (the
/// doc comment of the argument or output type, e.g. "Arguments of
/// `file_view`.": the tool's description says what matters) and without
/// schemars' integer and float `format`s (`uint32`, `int64`, `double`, …),
/// which are not JSON Schema formats and validate nothing (the bounds are
/// in `minimum` and `maximum`).
fn published(schema: Schema) -> Schema {
    let mut schema = strip_root_title(schema);
    schema.remove("description");
    let mut value = schema.to_value();
    drop_number_formats(&mut value);
    Schema::try_from(value).expect("a schema stays a schema without formats")
}

fn drop_number_formats(v: &mut Value) {
    const NUMBER_FORMATS: &[&str] = &[
        "int", "int8", "int16", "int32", "int64", "int128", "uint", "uint8", "uint16", "uint32",
        "uint64", "uint128", "float", "double",
    ];
    match v {
        Value::Object(map) => {
            if map
                .get("format")
                .and_then(Value::as_str)
                .is_some_and(|f| NUMBER_FORMATS.contains(&f))
            {
                map.remove("format");
            }
            map.values_mut().for_each(drop_number_formats);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_number_formats),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::json;

    /// Arguments of `add`.
    #[derive(Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    struct AddArgs {
        /// First term.
        #[schemars(range(min = 0, max = 100))]
        a: u32,
        /// Second term.
        #[serde(default)]
        #[schemars(range(max = 100))]
        b: u32,
        /// A file.
        #[schemars(length(min = 1, max = 10), extend("x-toolhost-path" = "read"))]
        path: Option<String>,
    }

    #[derive(Serialize, JsonSchema)]
    struct AddOutput {
        sum: u32,
    }

    fn add(_: &Context, args: AddArgs) -> Result<AddOutput, ToolError> {
        if args.a == 13 || args.path.is_some() {
            return Err(ToolError::new("unlucky", "13").field("/a"));
        }
        Ok(AddOutput {
            sum: args.a + args.b,
        })
    }

    /// No arguments.
    #[derive(Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    struct NoArgs {}

    fn nothing(_: &Context, _: NoArgs) -> Result<AddOutput, ToolError> {
        Ok(AddOutput { sum: 0 })
    }

    #[test]
    fn empty_argument_struct_is_a_complete_closed_object() {
        let schema = Tool::new("nothing", nothing).input_schema();
        assert_eq!(schema["additionalProperties"], false);
        assert_eq!(schema["properties"], json!({}));
        assert_eq!(schema["required"], json!([]));
        let ctx = Context::new("c", "/workspace");
        let tool = Tool::new("nothing", nothing);
        assert_eq!(tool.call_json(&ctx, "{}").unwrap(), r#"{"sum":0}"#);
        assert_eq!(
            tool.call_json(&ctx, r#"{"x":1}"#).unwrap_err().code,
            "invalid_arguments"
        );
    }

    fn tools() -> Vec<Tool> {
        vec![Tool::new("add", add)
            .side_effect(SideEffect::ReadOnly)
            .reads_files()
            .error_codes(&["unlucky", "unlucky"])]
    }

    #[test]
    fn input_schema_is_closed_with_bounds() {
        let schema = tools()[0].input_schema();
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["additionalProperties"], false);
        assert_eq!(schema["required"], json!(["a"]));
        assert_eq!(schema["properties"]["a"]["maximum"], 100);
        assert_eq!(schema["properties"]["a"]["description"], "First term.");
        assert_eq!(schema["properties"]["path"]["x-toolhost-path"], "read");
        assert_eq!(schema["properties"]["path"]["maxLength"], 10);
        // The root description (the struct's doc comment) and schemars'
        // integer formats are not published.
        assert!(schema.get("description").is_none());
        assert!(schema["properties"]["a"].get("format").is_none());
        assert_eq!(schema["properties"]["a"]["minimum"], 0);
        assert!(schema.get("title").is_none());
        assert_eq!(
            schema["$schema"],
            "https://json-schema.org/draft/2020-12/schema"
        );
    }

    #[test]
    fn descriptor_lists_sdk_error_codes_once() {
        let d = describe_wit(tools()).remove(0);
        assert_eq!(
            d.error_codes,
            ["unlucky", "invalid_arguments", "invalid_path"]
        );
        assert!(d.needs.fs_read && !d.needs.fs_write);
        let output: Value = serde_json::from_str(d.output_schema.as_deref().unwrap()).unwrap();
        assert_eq!(output["type"], "object");
        assert_eq!(output["required"], json!(["sum"]));
    }

    #[test]
    fn task_words_are_exported_for_the_tools_that_declare_them() {
        let with_words = Tool::new("sum_terms", add)
            .keywords(&["add", "sum", "add"])
            .keywords(&["total"])
            .examples(&["add 2 and 3"]);
        assert_eq!(with_words.task_keywords(), ["add", "sum", "total"]);
        let words = describe_words_wit(vec![tools().remove(0), with_words]);
        assert_eq!(words.len(), 1);
        assert_eq!(words[0].name, "sum_terms");
        assert_eq!(words[0].keywords, ["add", "sum", "total"]);
        assert_eq!(words[0].examples, ["add 2 and 3"]);
    }

    #[test]
    fn dispatch_runs_and_maps_errors() {
        let ctx = Context::new("c", "/workspace");
        let tools = tools();
        assert_eq!(
            dispatch(&tools, "add", r#"{"a":1,"b":2}"#, &ctx).unwrap(),
            ToolOutput {
                json: r#"{"sum":3}"#.into(),
                text: None
            }
        );
        let err = dispatch(&tools, "add", r#"{"a":13}"#, &ctx).unwrap_err();
        assert_eq!(
            (err.code.as_str(), err.field.as_deref()),
            ("unlucky", Some("/a"))
        );
        let err = dispatch(&tools, "add", r#"{"a":1,"c":2}"#, &ctx).unwrap_err();
        assert_eq!(err.code, "invalid_arguments");
        assert!(err.correctable);
        let err = dispatch(&tools, "nope", "{}", &ctx).unwrap_err();
        assert_eq!(err.code, "unknown_tool");
    }

    fn plan_add(_: &Context, args: AddArgs) -> Result<Plan, ToolError> {
        Ok(Plan::new(format!("would add {} and {}", args.a, args.b)))
    }

    fn probe_add(ctx: &Context, args: AddArgs, key: &str) -> Result<Probe<AddOutput>, ToolError> {
        assert_eq!(ctx.idempotency_key(), Some(key));
        Ok(match key {
            "done" => Probe::Done(AddOutput {
                sum: args.a + args.b,
            }),
            "not-done" => Probe::NotDone,
            _ => Probe::Unknown,
        })
    }

    #[test]
    fn dry_run_and_probe_are_optional_per_tool() {
        let ctx = Context::new("c", "/workspace").with_idempotency_key("done");
        let tools = vec![
            Tool::new("add", add).dry_run(plan_add).probe(probe_add),
            Tool::new("nothing", nothing),
        ];
        let d = describe_wit(tools);
        assert!(d[0].supports_dry_run && d[0].supports_probe);
        assert!(!d[1].supports_dry_run && !d[1].supports_probe);

        let tools = vec![
            Tool::new("add", add).dry_run(plan_add).probe(probe_add),
            Tool::new("nothing", nothing),
        ];
        let plan = dispatch_dry_run(&tools, "add", r#"{"a":1,"b":2}"#, &ctx).unwrap();
        assert_eq!(plan.summary, "would add 1 and 2");
        let err = dispatch_dry_run(&tools, "add", r#"{"a":"x"}"#, &ctx).unwrap_err();
        assert_eq!(err.code, "invalid_arguments");
        let err = dispatch_dry_run(&tools, "nothing", "{}", &ctx).unwrap_err();
        assert_eq!(err.code, "dry_run_unsupported");
        let err = dispatch_dry_run(&tools, "nope", "{}", &ctx).unwrap_err();
        assert_eq!(err.code, "unknown_tool");

        let probe = |name: &str, key: &str| {
            let ctx = Context::new("c", "/workspace").with_idempotency_key(key);
            dispatch_probe(&tools, name, r#"{"a":1,"b":2}"#, key, &ctx)
        };
        assert_eq!(
            probe("add", "done").unwrap(),
            Probe::Done(r#"{"sum":3}"#.to_string())
        );
        assert_eq!(probe("add", "not-done").unwrap(), Probe::NotDone);
        assert_eq!(probe("add", "other").unwrap(), Probe::Unknown);
        assert_eq!(probe("nothing", "done").unwrap(), Probe::Unknown);
        assert_eq!(probe("nope", "done").unwrap_err().code, "unknown_tool");
    }

    #[test]
    #[should_panic(expected = "Tool::dry_run of `nothing`")]
    fn dry_run_with_other_argument_type_panics() {
        let _ = Tool::new("nothing", nothing).dry_run(plan_add);
    }

    #[test]
    #[should_panic(expected = "output type")]
    fn probe_with_other_output_type_panics() {
        fn wrong(_: &Context, _: AddArgs, _: &str) -> Result<Probe<u32>, ToolError> {
            Ok(Probe::Unknown)
        }
        let _ = Tool::new("add", add).probe(wrong);
    }
}
