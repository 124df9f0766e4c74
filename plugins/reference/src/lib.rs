//! The reference toolhost plugin: file, network and program tools built on `toolhost-sdk`.
//!
//! | tool          | side effect | needs              | does                                  |
//! |---------------|-------------|--------------------|---------------------------------------|
//! | `file_view`   | read-only   | fs-read            | numbered lines of a text file, paged  |
//! | `file_edit`   | reversible  | fs-read, fs-write  | exact replacement, written atomically |
//! | `grep_search` | read-only   | fs-read            | regex search over files, cursor-paged |
//! | `file_delete` | irreversible| fs-read, fs-write  | removes one file; dry-run plan, probe |
//! | `http_get`    | read-only   | network `any`      | one GET via `wasi:http`, body as text |
//! | `run_command` | reversible  | fs-read, fs-write, exec `any` | one granted program via the `exec` import |
//!
//! Every path argument is relative to the workspace root and is marked
//! `"x-toolhost-path"` in the input schema, so the host authorizes it before
//! the call runs; the tools still refuse absolute paths and `..`. Each
//! tool's description is its full contract (inputs and bounds, output shape
//! and size, error codes, side effect).
//!
//! Build the component with
//!
//! ```text
//! cd plugins && cargo build --release --target wasm32-wasip2
//! # -> target/wasm32-wasip2/release/toolhost_reference.wasm
//! ```
//!
//! The tool functions are plain Rust, so `cargo test` runs them natively
//! against a temporary directory.

mod delete;
mod edit;
mod fetch;
mod grep;
mod run;
mod text;
mod view;

#[cfg(test)]
mod testutil;

use toolhost_sdk::Tool;

/// The plugin's tools.
pub fn tools() -> Vec<Tool> {
    vec![
        view::tool(),
        edit::tool(),
        grep::tool(),
        delete::tool(),
        fetch::tool(),
        run::tool(),
    ]
}

toolhost_sdk::plugin!(tools);

#[cfg(test)]
mod tests {
    use super::*;

    /// Every tool declares the words of its tasks, within the host's
    /// bounds: `find_tools` finds it by them.
    #[test]
    fn every_tool_declares_task_words() {
        for tool in tools() {
            let name = tool.name().to_string();
            let (keywords, examples) = (tool.task_keywords(), tool.task_examples());
            assert!(keywords.len() >= 5 && keywords.len() <= 24, "{name}");
            assert!(examples.len() >= 3 && examples.len() <= 12, "{name}");
            for k in &keywords {
                assert!(
                    k.len() <= 40 && k.split_whitespace().count() <= 3,
                    "{name}: {k}"
                );
            }
            for e in &examples {
                assert!(e.len() <= 200 && !e.contains('\n'), "{name}: {e}");
            }
        }
    }

    /// Every input schema is a closed object whose strings, numbers and
    /// arrays are bounded, with at most 7 fields; path fields are marked.
    #[test]
    fn schemas_follow_the_rules() {
        for tool in tools() {
            let schema = tool.input_schema();
            let name = tool.name();
            assert_eq!(schema["type"], "object", "{name}");
            assert_eq!(schema["additionalProperties"], false, "{name}");
            let props = schema["properties"].as_object().unwrap();
            assert!(props.len() <= 7, "{name}");
            for (field, prop) in props {
                let ty = prop["type"].as_str().or_else(|| prop["type"][0].as_str());
                match ty {
                    Some("string") => assert!(prop.get("maxLength").is_some(), "{name}.{field}"),
                    Some("integer") | Some("number") => {
                        assert!(prop.get("maximum").is_some(), "{name}.{field}")
                    }
                    Some("array") => assert!(prop.get("maxItems").is_some(), "{name}.{field}"),
                    Some("boolean") => {}
                    other => panic!("{name}.{field}: unexpected type {other:?}"),
                }
                assert!(prop.get("description").is_some(), "{name}.{field}");
            }
            if name != "http_get" && name != "run_command" {
                assert_eq!(props["path"]["minLength"], 1, "{name}");
                assert!(props["path"]["x-toolhost-path"].is_string(), "{name}");
            }
            assert_eq!(tool.output_schema()["type"], "object", "{name}");
        }
    }

    #[test]
    fn print_descriptors() {
        // `cargo test -- --nocapture print_descriptors` shows the schemas.
        for tool in tools() {
            println!("{}: {}", tool.name(), tool.input_schema());
            println!("{}: {}", tool.name(), tool.output_schema());
            println!("{}: {:?}", tool.name(), tool.all_error_codes());
        }
    }
}
