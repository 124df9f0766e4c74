//! Tests of the task words a tool declares (keywords and examples) as
//! `find_tools` indexes them, kept apart from the ranking's own tests.

use serde_json::json;

use super::discovery::index_of;
use crate::descriptor::{Needs, SideEffect, ToolDescriptor};

fn tool(name: &str, description: &str, keywords: &[&str], examples: &[&str]) -> ToolDescriptor {
    ToolDescriptor {
        name: name.into(),
        title: None,
        description: description.into(),
        input_schema: json!({"type": "object", "properties": {}}),
        output_schema: None,
        side_effect: SideEffect::ReadOnly,
        needs: Needs::default(),
        error_codes: Vec::new(),
        default_timeout_ms: 1000,
        max_output_bytes: 1024,
        supports_dry_run: false,
        supports_probe: false,
        keywords: keywords.iter().map(|s| s.to_string()).collect(),
        examples: examples.iter().map(|s| s.to_string()).collect(),
    }
}

fn catalog(with_words: bool) -> Vec<ToolDescriptor> {
    let (keywords, examples): (&[&str], &[&str]) = if with_words {
        (
            &["relocate"],
            &["tidy the quarterly journals into the vault"],
        )
    } else {
        (&[], &[])
    };
    vec![
        tool(
            "path_move",
            "Moves a file to another path in the workspace.",
            keywords,
            examples,
        ),
        tool(
            "file_view",
            "Shows numbered lines of a text file.",
            &[],
            &[],
        ),
        tool("clock_now", "Returns the current time.", &[], &[]),
    ]
}

#[test]
fn a_query_in_an_examples_words_only_finds_the_tool() {
    // None of these words is in any name, title or description.
    let query = "tidy quarterly journals vault";
    let hits = index_of(catalog(true).iter()).search(query, 3);
    assert_eq!(hits[0].name, "path_move", "{hits:?}");
    assert!(hits[0].strong, "{hits:?}");
    // Without the words nothing matches by meaning.
    let hits = index_of(catalog(false).iter()).search(query, 3);
    assert!(hits.iter().all(|h| !h.strong), "{hits:?}");
}

#[test]
fn a_keyword_finds_the_tool_like_its_name() {
    let hits = index_of(catalog(true).iter()).search("relocate", 3);
    assert_eq!(hits[0].name, "path_move", "{hits:?}");
    assert!(hits[0].strong, "{hits:?}");
}
