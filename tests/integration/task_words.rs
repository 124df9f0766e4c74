//! Task words: the keywords and example phrasings a component declares
//! through the optional `discovery` export, as the host loads, lints,
//! scans and indexes them.

use toolhost::discovery::index_of;
use toolhost::trust::{scan_tool, Field, PoisonRule};
use toolhost::Source;

use crate::support::*;

#[test]
fn every_reference_tool_declares_task_words_the_lint_accepts() {
    let h = reference_host();
    for t in h.catalog().tools() {
        let d = &t.descriptor;
        assert!(
            !d.keywords.is_empty() && !d.examples.is_empty(),
            "{}",
            d.name
        );
        assert!(
            t.report
                .findings
                .iter()
                .all(|f| f.rule.to_string() != "task_words"),
            "{}",
            t.report
        );
        assert!(scan_tool(d).is_empty(), "{:?}", scan_tool(d));
    }
}

#[test]
fn a_query_in_the_words_of_one_example_finds_the_reference_tool() {
    let h = reference_host();
    let edit = &h.catalog().get("file_edit").unwrap().descriptor;
    let example = "comment out the failing assertion";
    assert!(edit.examples.iter().any(|e| e == example));
    // None of the example's words is in the tool's name, title or
    // description: only the example can find it.
    let own = format!(
        "{} {} {}",
        edit.name,
        edit.title.as_deref().unwrap_or(""),
        edit.description
    )
    .to_lowercase();
    for word in ["comment", "failing", "assertion"] {
        assert!(!own.contains(word), "{word}");
    }
    let index = index_of(h.catalog().tools().map(|t| &t.descriptor));
    let hits = index.search(example, 3);
    assert_eq!(hits[0].name, "file_edit", "{hits:?}");
}

#[test]
fn a_component_without_the_export_loads_unchanged() {
    let h = host_with(&[Source::File(test_plugin("tp_bad_output"))]);
    let names = loaded_tool_names(&h);
    assert!(!names.is_empty());
    for t in h.catalog().tools() {
        assert!(t.descriptor.keywords.is_empty() && t.descriptor.examples.is_empty());
        let json = serde_json::to_string(&t.descriptor).unwrap();
        assert!(!json.contains("\"keywords\"") && !json.contains("\"examples\""));
    }
}

#[test]
fn declared_words_are_indexed_and_bad_ones_refused_or_flagged() {
    let h = host_with(&[Source::File(test_plugin("tp_words"))]);
    let find = &h
        .catalog()
        .get("note_find")
        .expect("note_find loads")
        .descriptor;
    assert_eq!(find.keywords, ["memo", "jotting"]);
    let index = index_of(h.catalog().tools().map(|t| &t.descriptor));
    let hits = index.search("dig up the scribble about the offsite", 3);
    assert_eq!(hits[0].name, "note_find", "{hits:?}");
    assert!(hits[0].strong, "{hits:?}");
    let hits = index.search("jotting", 3);
    assert_eq!(hits[0].name, "note_find", "{hits:?}");

    // The keyword over the bound refuses the tool, saying which and why.
    assert!(h.catalog().get("note_poke").is_none());
    let problem = h
        .catalog()
        .problems()
        .iter()
        .find(|p| p.tool.as_deref() == Some("note_poke"))
        .expect("note_poke is refused");
    assert!(
        problem.reason.contains("task_words")
            && problem
                .reason
                .contains("keywords entry 0 is 45 bytes; at most 40"),
        "{problem}"
    );

    // The example that addresses the model is what the poisoning scan
    // reports, as it would in a description.
    let inspected = Source::File(test_plugin("tp_words"))
        .inspect(sandbox(), &|_| {})
        .unwrap();
    let poke = inspected
        .descriptors
        .iter()
        .filter_map(|d| d.as_ref().ok())
        .find(|d| d.name == "note_poke")
        .unwrap();
    let findings = scan_tool(poke);
    let rules: Vec<PoisonRule> = findings
        .iter()
        .filter(|f| f.field == Field::Examples)
        .map(|f| f.rule)
        .collect();
    assert!(
        rules.contains(&PoisonRule::InstructionOverride),
        "{findings:?}"
    );
    assert!(rules.contains(&PoisonRule::Concealment), "{findings:?}");
    assert_eq!(findings[0].location(), "note_poke: examples/0");
}
