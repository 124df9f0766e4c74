//! What a catalog costs a model, in tokens: `toolhost catalog --cost`.
//!
//! Providers put every tool's name, description and input schema in front
//! of the model on every turn, so a catalog costs
//! `T = N · K · S` tokens over `N` turns for `K` tools of `S` tokens each.
//! This module counts `S` per tool with a real BPE
//! tokenizer, OpenAI's `o200k_base` ([`TOKENIZER`]), whose vocabulary is
//! compiled into the `tiktoken-rs` crate: counting never downloads anything.
//!
//! What is counted for one tool ([`definition_text`]) is what a provider
//! receives for it: the compact JSON
//! `{"name":…,"description":…,"parameters":…}` of the function definition,
//! with the input schema as `tools/list` publishes it.
//! Other providers wrap the same three fields differently; the counts are
//! within a few tokens of each other. The model never sees `outputSchema`,
//! annotations or `_meta`, so they are not counted.

use std::sync::OnceLock;

use serde::Serialize;
use serde_json::json;
use tiktoken_rs::CoreBPE;

use toolhost::descriptor::ToolDescriptor;

/// The tokenizer the counts are made with.
pub const TOKENIZER: &str = "o200k_base";

/// Why tokens could not be counted.
#[derive(Debug, thiserror::Error)]
pub enum CostError {
    /// The embedded vocabulary did not load (a broken build).
    #[error("the {TOKENIZER} tokenizer could not be built: {0}")]
    Tokenizer(String),
}

/// The token count of one tool's definition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolCost {
    pub name: String,
    pub tokens: u64,
}

/// The token cost of a catalog: `T = N · K · S`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CatalogCost {
    /// [`TOKENIZER`].
    pub tokenizer: &'static str,
    /// Per tool, in catalog (name) order.
    pub tools: Vec<ToolCost>,
    /// `K · S`: what every turn pays for the whole catalog.
    pub per_turn_tokens: u64,
    /// `S`, rounded down: the average per tool (0 for no tools).
    pub average_tokens_per_tool: u64,
    /// `N`.
    pub turns: u64,
    /// `N · K · S`.
    pub total_tokens: u64,
    /// The same catalog in lazy mode (`serve --lazy-tools`).
    pub lazy: LazyCost,
}

/// What a lazy session (`serve --lazy-tools`) sends the model every turn:
/// the `find_tools` definition alone; a tool joins the list once it is
/// found, and then costs what it costs in the full catalog.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LazyCost {
    /// Tokens of the `find_tools` definition: every lazy turn's base.
    pub per_turn_tokens: u64,
    /// `N` times that: before any tool is found.
    pub total_tokens: u64,
}

fn tokenizer() -> Result<&'static CoreBPE, CostError> {
    static BPE: OnceLock<Result<CoreBPE, String>> = OnceLock::new();
    BPE.get_or_init(|| tiktoken_rs::o200k_base().map_err(|e| format!("{e:#}")))
        .as_ref()
        .map_err(|e| CostError::Tokenizer(e.clone()))
}

/// Tokens of `text` under [`TOKENIZER`] (special tokens count as text).
pub fn count_tokens(text: &str) -> Result<u64, CostError> {
    Ok(tokenizer()?.encode_ordinary(text).len() as u64)
}

/// The function definition a provider receives for `d`, as compact JSON.
pub fn definition_text(d: &ToolDescriptor) -> String {
    json!({
        "name": d.name,
        "description": d.description,
        "parameters": toolhost_mcp::listing::published_schema(&d.input_schema),
    })
    .to_string()
}

/// Counts every tool of `tools` and the totals for `turns` turns.
pub fn catalog_cost<'a>(
    tools: impl IntoIterator<Item = &'a ToolDescriptor>,
    turns: u64,
) -> Result<CatalogCost, CostError> {
    let tools = tools
        .into_iter()
        .map(|d| {
            Ok(ToolCost {
                name: d.name.clone(),
                tokens: count_tokens(&definition_text(d))?,
            })
        })
        .collect::<Result<Vec<_>, CostError>>()?;
    let per_turn_tokens: u64 = tools.iter().map(|t| t.tokens).sum();
    let find = toolhost::tools::discovery::tool_definition();
    let lazy_turn = count_tokens(
        &json!({
            "name": find["name"],
            "description": find["description"],
            "parameters": find["inputSchema"],
        })
        .to_string(),
    )?;
    Ok(CatalogCost {
        lazy: LazyCost {
            per_turn_tokens: lazy_turn,
            total_tokens: lazy_turn.saturating_mul(turns),
        },
        tokenizer: TOKENIZER,
        average_tokens_per_tool: per_turn_tokens.checked_div(tools.len() as u64).unwrap_or(0),
        tools,
        per_turn_tokens,
        turns,
        total_tokens: per_turn_tokens.saturating_mul(turns),
    })
}

impl CatalogCost {
    /// A table for people: one row per tool, then the totals.
    pub fn render(&self) -> String {
        use std::fmt::Write as _;
        let width = self
            .tools
            .iter()
            .map(|t| t.name.len())
            .max()
            .unwrap_or(4)
            .max(4);
        let mut s = String::new();
        let _ = writeln!(s, "{:<width$}  tokens ({})", "tool", self.tokenizer);
        for t in &self.tools {
            let _ = writeln!(s, "{:<width$}  {:>6}", t.name, t.tokens);
        }
        let k = self.tools.len();
        let _ = writeln!(
            s,
            "per turn: {} tokens for {k} tools ({} per tool on average)",
            self.per_turn_tokens, self.average_tokens_per_tool
        );
        let _ = writeln!(
            s,
            "over {} turns: T = N·K·S = {} × {} = {} tokens",
            self.turns, self.turns, self.per_turn_tokens, self.total_tokens
        );
        let _ = write!(
            s,
            "lazy mode (serve --lazy-tools): {} tokens per turn (find_tools alone), {} over {} turns, plus each tool found from the turn it is found",
            self.lazy.per_turn_tokens, self.lazy.total_tokens, self.turns
        );
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolhost::descriptor::{Needs, SideEffect};

    fn tool(name: &str, description: &str) -> ToolDescriptor {
        ToolDescriptor {
            name: name.into(),
            title: None,
            description: description.into(),
            input_schema: json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
                "additionalProperties": false
            }),
            output_schema: Some(json!({"type": "object"})),
            side_effect: SideEffect::ReadOnly,
            needs: Needs::default(),
            error_codes: vec![],
            default_timeout_ms: 1000,
            max_output_bytes: 1024,
            supports_dry_run: false,
            supports_probe: false,
            keywords: Vec::new(),
            examples: Vec::new(),
        }
    }

    #[test]
    fn a_real_bpe_counts_known_texts() {
        // o200k_base: "hello world" is two tokens, a long made-up word
        // several.
        assert_eq!(count_tokens("hello world").unwrap(), 2);
        assert_eq!(count_tokens("").unwrap(), 0);
        assert!(count_tokens("Pneumonoultramicroscopicsilicovolcanoconiosis").unwrap() > 3);
    }

    #[test]
    fn counts_name_description_and_published_input_schema_only() {
        let d = tool("file_view", "Shows numbered lines of a file.");
        let text = definition_text(&d);
        assert!(!text.contains("output"), "{text}");
        assert_eq!(
            text,
            r#"{"name":"file_view","description":"Shows numbered lines of a file.","parameters":{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{"path":{"type":"string"}},"required":["path"],"additionalProperties":false}}"#
        );
        let cost = catalog_cost([&d, &tool("grep_search", "Finds lines.")], 10).unwrap();
        assert_eq!(cost.tools.len(), 2);
        assert_eq!(cost.tools[0].tokens, count_tokens(&text).unwrap());
        assert_eq!(
            cost.per_turn_tokens,
            cost.tools[0].tokens + cost.tools[1].tokens
        );
        assert_eq!(cost.total_tokens, 10 * cost.per_turn_tokens);
        assert_eq!(cost.average_tokens_per_tool, cost.per_turn_tokens / 2);
        let table = cost.render();
        assert!(
            table.contains("over 10 turns: T = N·K·S = 10 × "),
            "{table}"
        );
    }

    #[test]
    fn an_empty_catalog_costs_nothing() {
        let cost = catalog_cost([], 5).unwrap();
        assert_eq!((cost.per_turn_tokens, cost.average_tokens_per_tool), (0, 0));
    }
}
