//! What lint reports: the [`Rule`]s, one [`Finding`] per problem, and the
//! per-tool ([`ToolReport`]) and per-catalog ([`CatalogReport`]) results,
//! with their text and JSON forms.

use std::fmt;

use serde::Serialize;

/// A lint rule. Serialized (and displayed) as its stable snake_case id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    ClosedObjects,
    TypedValues,
    RequiredFields,
    RequiredUnknown,
    BoundedValues,
    UnitsInNames,
    TaggedUnions,
    MaxProperties,
    PropertyDescriptions,
    ToolName,
    Description,
    HiddenText,
    RootObject,
    InputSchema,
    OutputSchema,
    ErrorCodes,
    NeedsConsistency,
    Limits,
    TaskWords,
    DuplicateTool,
}

impl Rule {
    /// Every rule, in documentation order.
    pub const ALL: [Rule; 20] = [
        Rule::ClosedObjects,
        Rule::TypedValues,
        Rule::RequiredFields,
        Rule::RequiredUnknown,
        Rule::BoundedValues,
        Rule::UnitsInNames,
        Rule::TaggedUnions,
        Rule::MaxProperties,
        Rule::PropertyDescriptions,
        Rule::ToolName,
        Rule::Description,
        Rule::HiddenText,
        Rule::RootObject,
        Rule::InputSchema,
        Rule::OutputSchema,
        Rule::ErrorCodes,
        Rule::NeedsConsistency,
        Rule::Limits,
        Rule::TaskWords,
        Rule::DuplicateTool,
    ];

    /// The stable snake_case id.
    pub fn id(self) -> &'static str {
        match self {
            Rule::ClosedObjects => "closed_objects",
            Rule::TypedValues => "typed_values",
            Rule::RequiredFields => "required_fields",
            Rule::RequiredUnknown => "required_unknown",
            Rule::BoundedValues => "bounded_values",
            Rule::UnitsInNames => "units_in_names",
            Rule::TaggedUnions => "tagged_unions",
            Rule::MaxProperties => "max_properties",
            Rule::PropertyDescriptions => "property_descriptions",
            Rule::ToolName => "tool_name",
            Rule::Description => "description",
            Rule::HiddenText => "hidden_text",
            Rule::RootObject => "root_object",
            Rule::InputSchema => "input_schema",
            Rule::OutputSchema => "output_schema",
            Rule::ErrorCodes => "error_codes",
            Rule::NeedsConsistency => "needs_consistency",
            Rule::Limits => "limits",
            Rule::TaskWords => "task_words",
            Rule::DuplicateTool => "duplicate_tool",
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id())
    }
}

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// The tool is refused.
    Error,
    /// Advice; the tool loads.
    Warning,
}

impl Severity {
    /// `error` or `warning`.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a finding's pointer points into.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Target {
    /// The descriptor itself (`/name`, `/description`, `/error_codes/0`…).
    Descriptor,
    /// The input schema.
    InputSchema,
    /// The output schema.
    OutputSchema,
}

/// One problem in one tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub rule: Rule,
    pub severity: Severity,
    /// What `pointer` points into.
    pub target: Target,
    /// JSON Pointer into the target (`""` is its root).
    pub pointer: String,
    /// What is wrong and how to fix it.
    pub message: String,
}

impl Finding {
    /// Where the finding is, for people: `/properties/opts`, `(root)`,
    /// `output_schema/properties/x`, `name`.
    pub fn place(&self) -> String {
        match self.target {
            Target::InputSchema if self.pointer.is_empty() => "(root)".into(),
            Target::InputSchema => self.pointer.clone(),
            Target::OutputSchema => format!("output_schema{}", self.pointer),
            Target::Descriptor => self.pointer.trim_start_matches('/').to_owned(),
        }
    }
}

impl fmt::Display for Finding {
    /// `error  closed_objects  /properties/opts  object allows extra properties; …`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}  {}  {}  {}",
            self.severity,
            self.rule,
            self.place(),
            self.message
        )
    }
}

/// Whether the input schema fits providers' strict modes: each list holds
/// the reasons it does not (empty = compatible).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Compat {
    pub openai: Vec<String>,
    pub anthropic: Vec<String>,
}

/// The lint result for one tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolReport {
    /// The tool's name as declared.
    pub tool: String,
    /// Findings: descriptor first, then input schema, then output schema,
    /// each in document order.
    pub findings: Vec<Finding>,
    /// True when any finding is an error: the tool must not be loaded.
    pub refused: bool,
    pub compat: Compat,
}

impl ToolReport {
    /// Number of error findings.
    pub fn errors(&self) -> usize {
        self.count(Severity::Error)
    }

    /// Number of warning findings.
    pub fn warnings(&self) -> usize {
        self.count(Severity::Warning)
    }

    fn count(&self, severity: Severity) -> usize {
        self.findings
            .iter()
            .filter(|f| f.severity == severity)
            .count()
    }

    /// The error findings, one message per line (`rule at place: message`),
    /// for refusal reasons.
    pub fn error_summary(&self) -> String {
        self.findings
            .iter()
            .filter(|f| f.severity == Severity::Error)
            .map(|f| format!("{} at {}: {}", f.rule, f.place(), f.message))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}

fn compat_line(f: &mut fmt::Formatter<'_>, provider: &str, reasons: &[String]) -> fmt::Result {
    if reasons.is_empty() {
        writeln!(f, "  {provider} strict: compatible")
    } else {
        writeln!(f, "  {provider} strict: not compatible")?;
        for r in reasons {
            writeln!(f, "    - {r}")?;
        }
        Ok(())
    }
}

impl fmt::Display for ToolReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{}: {} ({}, {})",
            self.tool,
            if self.refused { "refused" } else { "ok" },
            plural(self.errors(), "error"),
            plural(self.warnings(), "warning")
        )?;
        for finding in &self.findings {
            writeln!(f, "  {finding}")?;
        }
        compat_line(f, "openai", &self.compat.openai)?;
        compat_line(f, "anthropic", &self.compat.anthropic)
    }
}

/// One tool of a catalog, with the plugin that defines it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CatalogEntry {
    pub plugin: String,
    #[serde(flatten)]
    pub report: ToolReport,
}

/// A problem across tools (today: a name defined more than once).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CatalogFinding {
    pub rule: Rule,
    pub severity: Severity,
    /// The tool name concerned.
    pub tool: String,
    /// The plugins defining it, in catalog order (a plugin appears twice if
    /// it defines the name twice).
    pub plugins: Vec<String>,
    pub message: String,
}

impl fmt::Display for CatalogFinding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}  {}  {}  {}",
            self.severity, self.rule, self.tool, self.message
        )
    }
}

/// The lint result for a catalog.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CatalogReport {
    /// Every tool, in input order.
    pub tools: Vec<CatalogEntry>,
    /// Findings across tools.
    pub findings: Vec<CatalogFinding>,
}

impl CatalogReport {
    /// Whether any tool is refused or any catalog finding is an error.
    pub fn has_errors(&self) -> bool {
        self.tools.iter().any(|t| t.report.refused)
            || self.findings.iter().any(|f| f.severity == Severity::Error)
    }

    /// Whether `tool` is named by a duplicate-name finding.
    pub fn is_duplicate(&self, tool: &str) -> bool {
        self.findings
            .iter()
            .any(|f| f.rule == Rule::DuplicateTool && f.tool == tool)
    }
}

impl fmt::Display for CatalogReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for entry in &self.tools {
            write!(f, "[{}] {}", entry.plugin, entry.report)?;
        }
        for finding in &self.findings {
            writeln!(f, "{finding}")?;
        }
        Ok(())
    }
}
