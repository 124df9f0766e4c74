//! The catalog: loaded plugins and the tools a caller may use.
//!
//! Loading a plugin compiles (or reads from the compile cache) and
//! pre-links its component, asks it to `describe()` itself under fixed
//! limits, parses and lints every descriptor and compiles each input and
//! output schema once. A tool that breaks a refusing lint rule (open object,
//! untagged union, bad name, schema that does not compile, duplicate name) is
//! kept out of the catalog and reported; the rest of its plugin still loads.
//! A plugin that cannot load at all is reported and skipped: one bad plugin
//! never takes the host down.
//!
//! With a [`Trust`] (see [`crate::plugin::trust::policy`]), every plugin read from a
//! file is also judged before its tools join: a plugin that changed since it
//! was locked (`plugin_changed`, with the diff), is not in the lock
//! (`plugin_not_locked`), is unsigned or badly signed (`unsigned_plugin`,
//! `bad_signature`) is refused whole; a tool whose texts address the model
//! (`suspicious_description`) is reported as a warning, or refused under a
//! strict policy. The names of the tools a refused plugin declared are kept
//! ([`Catalog::refusal`]), so a call to one of them is answered with the
//! refusal rather than `unknown_tool`. The embedded reference tools are part
//! of the binary and are not judged.
//!
//! A plugin loaded under a namespace ([`Source::Namespaced`], `--plugin
//! fs=PATH`) joins with its tools named `fs.<name>` ([`crate::toolname`]):
//! that is the name in the catalog, in every listing, call, journal entry
//! and token caveat, while the plugin is still called with the name it
//! declared ([`Tool::guest_name`]). Two plugins may then declare the same
//! name under different namespaces.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::descriptor::{Described, ToolDescriptor};
use crate::plugin::lint::{self, Compat, Finding, Rule, Severity, Target, ToolReport};
use crate::plugin::schema::CompiledSchema;
use crate::plugin::trust::policy::{plugin_name, Refusal, Trust};
use crate::plugin::trust::signature;
use crate::sandbox::{Contract, LoadEvent, Plugin, Sandbox, SandboxError};

/// The tools the host answers itself (`artifact_view`, `find_tools`,
/// `delegate`): no plugin may declare one of these names, so a spill's
/// follow-up, a lazy search or a delegation never reaches a plugin.
pub const HOST_TOOL_NAMES: [&str; 3] = ["artifact_view", "find_tools", "delegate"];

/// Whether `name` is one of [`HOST_TOOL_NAMES`].
pub fn is_host_tool(name: &str) -> bool {
    HOST_TOOL_NAMES.contains(&name)
}

pub use crate::sandbox::embedded::{Embedded, REFERENCE, SCRIPT};

/// Where a plugin comes from.
#[derive(Debug, Clone)]
pub enum Source {
    /// A component built into the binary ([`Embedded`]: compressed, with
    /// its artifact precompiled and its digests computed at build time),
    /// with a display name.
    Embedded {
        name: String,
        component: &'static Embedded,
    },
    /// A component file.
    File(PathBuf),
    /// A component file whose tools are loaded under a namespace:
    /// `namespace.tool` ([`crate::toolname`]).
    Namespaced { namespace: String, path: PathBuf },
}

impl From<crate::toolname::PluginSpec> for Source {
    fn from(spec: crate::toolname::PluginSpec) -> Source {
        match spec.namespace {
            Some(namespace) => Source::Namespaced {
                namespace,
                path: spec.path,
            },
            None => Source::File(spec.path),
        }
    }
}

impl Source {
    /// The reference tools (`file_view`, `file_edit`, `grep_search`).
    pub fn reference() -> Source {
        Source::Embedded {
            name: "builtin:reference".into(),
            component: &REFERENCE,
        }
    }

    /// The script engine (`run_script`, [`crate::script`]).
    pub fn script() -> Source {
        Source::Embedded {
            name: "builtin:script".into(),
            component: &SCRIPT,
        }
    }

    /// Every `*.wasm` file in a directory, sorted by name.
    pub fn dir(dir: &Path) -> std::io::Result<Vec<Source>> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "wasm") && p.is_file())
            .collect();
        files.sort();
        Ok(files.into_iter().map(Source::File).collect())
    }

    /// A short name for reports.
    pub fn name(&self) -> String {
        match self {
            Source::Embedded { name, .. } => name.clone(),
            Source::File(p) | Source::Namespaced { path: p, .. } => p.display().to_string(),
        }
    }

    /// The component file, unless the source is embedded.
    pub fn path(&self) -> Option<&Path> {
        match self {
            Source::Embedded { .. } => None,
            Source::File(p) | Source::Namespaced { path: p, .. } => Some(p),
        }
    }

    /// The namespace the source's tools are loaded under, if any.
    pub fn namespace(&self) -> Option<&str> {
        match self {
            Source::Namespaced { namespace, .. } => Some(namespace),
            _ => None,
        }
    }
}

/// One tool, ready to call.
pub struct Tool {
    /// The descriptor, its `name` the host's name of the tool: under a
    /// namespace, `namespace.name` ([`crate::toolname`]).
    pub descriptor: ToolDescriptor,
    /// The name the plugin declared, which the plugin is called with.
    pub guest_name: String,
    pub plugin_name: String,
    pub plugin: Plugin,
    pub input: CompiledSchema,
    pub output: Option<jsonschema::Validator>,
    pub report: ToolReport,
}

/// Why a plugin, or one of its tools, was not loaded.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Problem {
    pub plugin: String,
    /// The tool, when only that tool was refused.
    pub tool: Option<String>,
    /// The trust policy's code (`plugin_changed`, `plugin_not_locked`,
    /// `unsigned_plugin`, `bad_signature`, `suspicious_description`), when
    /// the trust policy refused it.
    pub code: Option<String>,
    pub reason: String,
}

impl Problem {
    fn trust(plugin: &str, tool: Option<&str>, r: Refusal) -> Problem {
        Problem {
            plugin: plugin.to_string(),
            tool: tool.map(str::to_string),
            code: Some(r.code.to_string()),
            reason: r.message,
        }
    }
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let code = self
            .code
            .as_deref()
            .map(|c| format!("{c}: "))
            .unwrap_or_default();
        match &self.tool {
            Some(t) => write!(
                f,
                "{}: tool `{}` refused: {code}{}",
                self.plugin, t, self.reason
            ),
            None => write!(f, "{}: not loaded: {code}{}", self.plugin, self.reason),
        }
    }
}

/// Something suspicious about a plugin that was loaded anyway (a
/// suspicious description, a signature by an untrusted key when signatures
/// are not required).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Warning {
    pub plugin: String,
    /// `suspicious_description` or `bad_signature`.
    pub code: String,
    pub reason: String,
}

impl std::fmt::Display for Warning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}: {}", self.plugin, self.code, self.reason)
    }
}

/// What the catalog found out about one plugin: for `toolhost plugin list`
/// and `plugin verify`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PluginStatus {
    /// The lock name (file stem), or the embedded plugin's name.
    pub name: String,
    pub source: String,
    /// `sha256:` of the component bytes (`null` when it could not be read).
    pub digest: Option<String>,
    /// The verified signer, `principal (fingerprint)`.
    pub signer: Option<String>,
    /// `builtin`, `locked`, `changed`, `not_locked` or `unpinned`.
    pub lock: &'static str,
    /// The tools it declared.
    pub tools: Vec<String>,
    /// The contract it was built against (`null` when it did not load):
    /// the current one, or the previous one the host still runs.
    pub contract: Option<Contract>,
    /// Its component imports `toolhost:plugin/client`: its tools may ask
    /// the person behind the client.
    pub asks: bool,
    /// The code that refused it, if it was refused whole.
    pub refused: Option<String>,
}

/// Loaded tools by name, in name order.
#[derive(Default)]
pub struct Catalog {
    tools: BTreeMap<String, Arc<Tool>>,
    problems: Vec<Problem>,
    warnings: Vec<Warning>,
    reports: Vec<(String, ToolReport)>,
    plugins: Vec<PluginStatus>,
    /// Tools of plugins refused by the trust policy, by name.
    refused: BTreeMap<String, Problem>,
}

/// A plugin's descriptors and lint reports, before it joins a catalog.
pub struct Inspected {
    pub plugin: Plugin,
    pub reports: Vec<ToolReport>,
    pub descriptors: Vec<Described>,
}

impl Catalog {
    /// Loads every source in order. Problems are collected, not fatal.
    pub fn load(
        sandbox: &Sandbox,
        sources: &[Source],
        progress: &dyn Fn(&str, LoadEvent),
    ) -> Catalog {
        Catalog::load_trusted(sandbox, sources, None, progress)
    }

    /// [`load`](Self::load), judging every plugin read from a file by
    /// `trust` (lock, signature, descriptions).
    pub fn load_trusted(
        sandbox: &Sandbox,
        sources: &[Source],
        trust: Option<&Trust>,
        progress: &dyn Fn(&str, LoadEvent),
    ) -> Catalog {
        let mut catalog = Catalog::default();
        for source in sources {
            catalog.add_trusted(sandbox, source, trust, progress);
        }
        catalog
    }

    /// Loads one source into the catalog.
    pub fn add(&mut self, sandbox: &Sandbox, source: &Source, progress: &dyn Fn(&str, LoadEvent)) {
        self.add_trusted(sandbox, source, None, progress);
    }

    /// Loads one source, judged by `trust` when it is a file.
    pub fn add_trusted(
        &mut self,
        sandbox: &Sandbox,
        source: &Source,
        trust: Option<&Trust>,
        progress: &dyn Fn(&str, LoadEvent),
    ) {
        let name = source.name();
        let namespace = source.namespace();
        let qualify = |tool: &str| crate::toolname::qualify(namespace, tool);
        let mut status = PluginStatus {
            name: match (source, source.path()) {
                (Source::Embedded { name, .. }, _) => name.clone(),
                (_, Some(p)) => plugin_name(p),
                (_, None) => name.clone(),
            },
            source: name.clone(),
            digest: None,
            signer: None,
            lock: match source {
                Source::Embedded { .. } => "builtin",
                Source::File(_) | Source::Namespaced { .. } => "unpinned",
            },
            tools: Vec::new(),
            contract: None,
            asks: false,
            refused: None,
        };
        // An embedded component's bytes are not needed: it loads from its
        // cache entry or artifact, and its digest was computed at build time.
        let bytes = match source {
            Source::Embedded { .. } => None,
            Source::File(_) | Source::Namespaced { .. } => match source_bytes(source) {
                Ok(b) => Some(b),
                Err(reason) => return self.refuse_plugin(status, None, reason),
            },
        };
        status.digest = Some(match (source, &bytes) {
            (Source::Embedded { component, .. }, _) => component.sha256.to_owned(),
            (_, Some(bytes)) => crate::plugin::trust::sha256_digest(bytes),
            (_, None) => unreachable!("a file source's bytes were read above"),
        });
        let inspected =
            match inspect_loaded(sandbox, source, bytes.as_deref(), &|e| progress(&name, e)) {
                Ok(i) => i,
                Err(reason) => return self.refuse_plugin(status, None, reason),
            };
        status.contract = Some(inspected.plugin.contract());
        status.asks = inspected.plugin.asks();
        status.tools = inspected
            .descriptors
            .iter()
            .map(|d| match d {
                Ok(d) => qualify(&d.name),
                Err((t, _)) => qualify(t),
            })
            .collect();
        if !matches!(source, Source::Embedded { .. }) {
            if let Some(taken) = status.tools.iter().find(|t| is_host_tool(t)) {
                let reason = format!(
                    "declares `{taken}`, the name of a tool the host itself answers \
                     ({}); rename the tool, or load the plugin under a namespace \
                     (--plugin NS=FILE names it `NS.{taken}`)",
                    HOST_TOOL_NAMES.join(", ")
                );
                return self.refuse_plugin(status, Some("reserved_name"), reason);
            }
        }
        let mut refused_tools = BTreeMap::new();
        // The trust policy judges the plugin as it is (the lock names the
        // tools it declares), whatever namespace it is loaded under.
        if let (Some(trust), Some(path), Some(bytes)) = (trust, source.path(), &bytes) {
            let signature = match signature::read_signature(path) {
                Ok(s) => s,
                Err(e) => {
                    let r = Refusal {
                        code: "bad_signature",
                        message: e.to_string(),
                    };
                    return self.refuse_plugin(status, Some(r.code), r.message);
                }
            };
            let descs: Vec<ToolDescriptor> = inspected
                .descriptors
                .iter()
                .filter_map(|d| d.as_ref().ok().cloned())
                .collect();
            let verdict = trust.check(
                &status.name,
                &path.display().to_string(),
                bytes,
                signature.as_deref(),
                &descs,
            );
            status.lock = verdict.lock_state;
            status.signer = verdict.signer.clone();
            for w in verdict.warnings {
                self.warnings.push(Warning {
                    plugin: name.clone(),
                    code: w.code.to_string(),
                    reason: w.message,
                });
            }
            if let Some(r) = verdict.refused {
                return self.refuse_plugin(status, Some(r.code), r.message);
            }
            refused_tools = verdict.refused_tools.into_iter().collect();
        }
        self.plugins.push(status);
        let mut seen_here = std::collections::HashSet::new();
        for (desc, report) in inspected.descriptors.into_iter().zip(inspected.reports) {
            let mut desc = match desc {
                Ok(d) => d,
                Err((tool, reason)) => {
                    self.problems.push(Problem {
                        plugin: name.clone(),
                        tool: Some(qualify(&tool)),
                        code: None,
                        reason,
                    });
                    continue;
                }
            };
            let guest_name = std::mem::take(&mut desc.name);
            desc.name = qualify(&guest_name);
            let refuse = |reason: String| Problem {
                plugin: name.clone(),
                tool: Some(desc.name.clone()),
                code: None,
                reason,
            };
            if let Some(r) = refused_tools.remove(&guest_name) {
                let problem = Problem::trust(&name, Some(&desc.name), r);
                self.refused.insert(desc.name.clone(), problem.clone());
                self.problems.push(problem);
                continue;
            }
            if !seen_here.insert(desc.name.clone()) {
                self.problems.push(refuse(
                    "the plugin declares this name more than once".into(),
                ));
                continue;
            }
            if let Some(other) = self.tools.get(&desc.name) {
                self.problems.push(refuse(format!(
                    "a tool with this name is already loaded from {}",
                    other.plugin_name
                )));
                continue;
            }
            self.reports.push((name.clone(), report.clone()));
            if report.refused {
                self.problems.push(refuse(report.error_summary()));
                continue;
            }
            let input = match CompiledSchema::compile(&desc.input_schema) {
                Ok(s) => s,
                Err(e) => {
                    self.problems.push(refuse(format!("input schema: {e}")));
                    continue;
                }
            };
            let output = match desc
                .output_schema
                .as_ref()
                .map(|s| jsonschema::validator_for(s))
            {
                None => None,
                Some(Ok(v)) => Some(v),
                Some(Err(e)) => {
                    self.problems.push(refuse(format!("output schema: {e}")));
                    continue;
                }
            };
            self.tools.insert(
                desc.name.clone(),
                Arc::new(Tool {
                    descriptor: desc,
                    guest_name,
                    plugin_name: name.clone(),
                    plugin: inspected.plugin.clone(),
                    input,
                    output,
                    report,
                }),
            );
        }
    }

    /// Records a plugin refused whole: its status, the problem, and the
    /// names of its tools (for [`refusal`](Self::refusal)).
    fn refuse_plugin(&mut self, mut status: PluginStatus, code: Option<&str>, reason: String) {
        let problem = Problem {
            plugin: status.source.clone(),
            tool: None,
            code: code.map(str::to_string),
            reason,
        };
        if code.is_some() {
            for t in &status.tools {
                if !self.tools.contains_key(t) && !is_host_tool(t) {
                    self.refused.insert(t.clone(), problem.clone());
                }
            }
        }
        status.refused = Some(code.unwrap_or("plugin_unavailable").to_string());
        self.plugins.push(status);
        self.problems.push(problem);
    }

    /// Why a tool of this name is not in the catalog, when the trust policy
    /// refused it or the plugin that declares it.
    pub fn refusal(&self, tool: &str) -> Option<&Problem> {
        self.refused.get(tool)
    }

    /// Every plugin looked at, loaded or refused, in load order.
    pub fn plugins(&self) -> &[PluginStatus] {
        &self.plugins
    }

    /// Findings that did not refuse anything (suspicious descriptions, an
    /// untrusted signer when signatures are not required).
    pub fn warnings(&self) -> &[Warning] {
        &self.warnings
    }

    /// A tool by name.
    pub fn get(&self, name: &str) -> Option<&Arc<Tool>> {
        self.tools.get(name)
    }

    /// All tools, in name order.
    pub fn tools(&self) -> impl Iterator<Item = &Arc<Tool>> {
        self.tools.values()
    }

    /// Everything that was refused while loading.
    pub fn problems(&self) -> &[Problem] {
        &self.problems
    }

    /// Lint reports of every tool that was looked at, accepted or not.
    pub fn reports(&self) -> &[(String, ToolReport)] {
        &self.reports
    }

    /// Tool names close to `name`, for an `unknown_tool` hint.
    pub fn suggestions(&self, name: &str) -> Vec<String> {
        let mut scored: Vec<(usize, &String)> = self
            .tools
            .keys()
            .map(|k| (edit_distance(k, name), k))
            .filter(|(d, k)| *d <= 3.max(k.len() / 3))
            .collect();
        scored.sort();
        scored.into_iter().take(3).map(|(_, k)| k.clone()).collect()
    }
}

/// The component bytes of a source (an embedded one unpacked).
fn source_bytes(source: &Source) -> Result<std::borrow::Cow<'static, [u8]>, String> {
    match source {
        Source::Embedded { component, .. } => Ok(std::borrow::Cow::Owned(component.wasm())),
        Source::File(p) | Source::Namespaced { path: p, .. } => std::fs::read(p)
            .map(std::borrow::Cow::Owned)
            .map_err(|e| format!("cannot read {}: {e}", p.display())),
    }
}

impl Source {
    /// Loads and describes this plugin and lints each tool, without adding
    /// it to a catalog ([`inspect`]).
    pub fn inspect(
        &self,
        sandbox: &Sandbox,
        progress: &dyn Fn(LoadEvent),
    ) -> Result<Inspected, String> {
        inspect(sandbox, self, progress)
    }
}

/// Loads and describes one plugin and lints each tool, without adding it.
pub fn inspect(
    sandbox: &Sandbox,
    source: &Source,
    progress: &dyn Fn(LoadEvent),
) -> Result<Inspected, String> {
    match source {
        Source::Embedded { .. } => inspect_loaded(sandbox, source, None, progress),
        _ => inspect_loaded(sandbox, source, Some(&source_bytes(source)?), progress),
    }
}

/// [`inspect_bytes`] on `source`: an embedded one loads through
/// [`Sandbox::load_embedded`]; any other from its `bytes`.
fn inspect_loaded(
    sandbox: &Sandbox,
    source: &Source,
    bytes: Option<&[u8]>,
    progress: &dyn Fn(LoadEvent),
) -> Result<Inspected, String> {
    let plugin = match (source, bytes) {
        (Source::Embedded { component, .. }, _) => sandbox.load_embedded(component, progress),
        (_, Some(bytes)) => sandbox.load(bytes, progress),
        (_, None) => return Err(format!("{}: no component bytes", source.name())),
    };
    describe(plugin.map_err(|e: SandboxError| e.to_string())?)
}

/// [`inspect`] on component bytes already read.
pub fn inspect_bytes(
    sandbox: &Sandbox,
    bytes: &[u8],
    progress: &dyn Fn(LoadEvent),
) -> Result<Inspected, String> {
    let plugin = sandbox
        .load(bytes, progress)
        .map_err(|e: SandboxError| e.to_string())?;
    describe(plugin)
}

/// Describes a loaded plugin and lints each tool.
fn describe(plugin: Plugin) -> Result<Inspected, String> {
    let descriptors = plugin.describe().map_err(|e| e.to_string())?;
    let reports = descriptors
        .iter()
        .map(|d| match d {
            Ok(d) => lint::lint_tool(d),
            Err((tool, reason)) => unparsable(tool, reason),
        })
        .collect();
    Ok(Inspected {
        plugin,
        reports,
        descriptors,
    })
}

/// The report of a descriptor whose schema text is not JSON.
fn unparsable(tool: &str, reason: &str) -> ToolReport {
    let target = if reason.starts_with("output") {
        (Rule::OutputSchema, Target::OutputSchema)
    } else {
        (Rule::InputSchema, Target::InputSchema)
    };
    ToolReport {
        tool: tool.to_string(),
        findings: vec![Finding {
            rule: target.0,
            severity: Severity::Error,
            target: target.1,
            pointer: String::new(),
            message: reason.to_string(),
        }],
        refused: true,
        compat: Compat::default(),
    }
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur.push(sub.min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}
