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

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::descriptor::ToolDescriptor;
use crate::lint::{self, Compat, Finding, Rule, Severity, Target, ToolReport};
use crate::sandbox::{LoadEvent, Plugin, Sandbox, SandboxError};
use crate::schema::CompiledSchema;

/// The reference tools, built from `plugins/reference` by the build script.
pub static REFERENCE_PLUGIN: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/toolhost_reference.wasm"));

/// Where a plugin comes from.
#[derive(Debug, Clone)]
pub enum Source {
    /// Bytes compiled into the binary, with a display name.
    Embedded { name: String, bytes: &'static [u8] },
    /// A component file.
    File(PathBuf),
}

impl Source {
    /// The reference tools (`file_view`, `file_edit`, `grep_search`).
    pub fn reference() -> Source {
        Source::Embedded {
            name: "builtin:reference".into(),
            bytes: REFERENCE_PLUGIN,
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
            Source::File(p) => p.display().to_string(),
        }
    }
}

/// One tool, ready to call.
pub struct Tool {
    pub descriptor: ToolDescriptor,
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
    pub reason: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.tool {
            Some(t) => write!(f, "{}: tool `{}` refused: {}", self.plugin, t, self.reason),
            None => write!(f, "{}: not loaded: {}", self.plugin, self.reason),
        }
    }
}

/// Loaded tools by name, in name order.
#[derive(Default)]
pub struct Catalog {
    tools: BTreeMap<String, Arc<Tool>>,
    problems: Vec<Problem>,
    reports: Vec<(String, ToolReport)>,
}

/// A plugin's descriptors and lint reports, before it joins a catalog.
pub struct Inspected {
    pub plugin: Plugin,
    pub reports: Vec<ToolReport>,
    pub descriptors: Vec<Result<ToolDescriptor, (String, String)>>,
}

impl Catalog {
    /// Loads every source in order. Problems are collected, not fatal.
    pub fn load(
        sandbox: &Sandbox,
        sources: &[Source],
        progress: &dyn Fn(&str, LoadEvent),
    ) -> Catalog {
        let mut catalog = Catalog::default();
        for source in sources {
            catalog.add(sandbox, source, progress);
        }
        catalog
    }

    /// Loads one source into the catalog.
    pub fn add(&mut self, sandbox: &Sandbox, source: &Source, progress: &dyn Fn(&str, LoadEvent)) {
        let name = source.name();
        let inspected = match inspect(sandbox, source, &|e| progress(&name, e)) {
            Ok(i) => i,
            Err(reason) => {
                self.problems.push(Problem {
                    plugin: name,
                    tool: None,
                    reason,
                });
                return;
            }
        };
        let mut seen_here = std::collections::HashSet::new();
        for (desc, report) in inspected.descriptors.into_iter().zip(inspected.reports) {
            let desc = match desc {
                Ok(d) => d,
                Err((tool, reason)) => {
                    self.problems.push(Problem {
                        plugin: name.clone(),
                        tool: Some(tool),
                        reason,
                    });
                    continue;
                }
            };
            let refuse = |reason: String| Problem {
                plugin: name.clone(),
                tool: Some(desc.name.clone()),
                reason,
            };
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
                    plugin_name: name.clone(),
                    plugin: inspected.plugin.clone(),
                    input,
                    output,
                    report,
                }),
            );
        }
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

/// Loads and describes one plugin and lints each tool, without adding it.
pub fn inspect(
    sandbox: &Sandbox,
    source: &Source,
    progress: &dyn Fn(LoadEvent),
) -> Result<Inspected, String> {
    let owned;
    let bytes: &[u8] = match source {
        Source::Embedded { bytes, .. } => bytes,
        Source::File(p) => {
            owned = std::fs::read(p).map_err(|e| format!("cannot read {}: {e}", p.display()))?;
            &owned
        }
    };
    let plugin = sandbox
        .load(bytes, progress)
        .map_err(|e: SandboxError| e.to_string())?;
    let texts = plugin.describe().map_err(|e| e.to_string())?;
    let mut descriptors = Vec::new();
    let mut reports = Vec::new();
    for text in texts {
        let tool = text.name.clone();
        match text.parse() {
            Ok(d) => {
                reports.push(lint::lint_tool(&d));
                descriptors.push(Ok(d));
            }
            Err(reason) => {
                reports.push(unparsable(&tool, &reason));
                descriptors.push(Err((tool, reason)));
            }
        }
    }
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
