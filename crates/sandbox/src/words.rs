//! Task words: the optional `discovery` export of the current contract
//! (`plugin-with-discovery`, `plugin-with-effects-and-discovery`).
//!
//! A component that exports `toolhost:plugin/discovery` is asked, once at
//! load and in the instance `describe` ran in, for the keywords and example
//! task phrasings of its tools; [`attach`] puts each tool's words on its
//! descriptor. Checked here: every entry names a tool `describe` declared,
//! at most once, and the words count towards [`MAX_DESCRIPTOR_BYTES`] with
//! the descriptors. Their bounds and text (count, length, one line, hidden
//! characters, poisoning) are the lint's and the trust checks' business, as
//! a description's are. A component without the export (and every
//! component of the previous contract, which has none) is unaffected: its
//! tools have no words.
//!
//! [`MAX_DESCRIPTOR_BYTES`]: super::MAX_DESCRIPTOR_BYTES

use std::collections::HashSet;

use wasmtime::component::{Instance, InstancePre};
use wasmtime::Store;

use super::bindings::with_discovery::exports::toolhost::plugin::discovery as wit;
use super::{Contract, SandboxError, State};
use toolhost_base::descriptor::Described;

/// One tool's words as the plugin sent them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ToolWords {
    pub name: String,
    pub keywords: Vec<String>,
    pub examples: Vec<String>,
}

/// The component's `discovery` export, when it has one.
pub(super) struct Discovery(wit::GuestIndices);

impl Discovery {
    /// The export of a current-contract component that has one.
    pub fn new(pre: &InstancePre<State>, contract: Contract) -> Option<Discovery> {
        match contract {
            Contract::Current => wit::GuestIndices::new(pre).ok().map(Discovery),
            Contract::Previous => None,
        }
    }

    /// `describe-words` in `instance`.
    pub fn describe_words(
        &self,
        store: &mut Store<State>,
        instance: &Instance,
    ) -> wasmtime::Result<Vec<ToolWords>> {
        let guest = self.0.load(&mut *store, instance)?;
        Ok(guest
            .call_describe_words(store)?
            .into_iter()
            .map(|w| ToolWords {
                name: w.name,
                keywords: w.keywords,
                examples: w.examples,
            })
            .collect())
    }
}

/// Bytes of text in `words`, for the describe size limit.
pub(super) fn bytes_of(words: &[ToolWords]) -> usize {
    words
        .iter()
        .map(|w| {
            w.name.len()
                + w.keywords.iter().map(String::len).sum::<usize>()
                + w.examples.iter().map(String::len).sum::<usize>()
        })
        .sum()
}

/// Puts each entry's words on the descriptor of the tool it names. An
/// entry for a tool `describe` did not declare, or a second entry for one,
/// refuses the plugin ([`SandboxError::Words`]). A tool whose schemas did
/// not parse keeps its error; its words are dropped with it.
pub(super) fn attach(descs: &mut [Described], words: Vec<ToolWords>) -> Result<(), SandboxError> {
    let mut seen = HashSet::new();
    for w in words {
        let slot = descs.iter_mut().find(|d| match d {
            Ok(d) => d.name == w.name,
            Err((name, _)) => *name == w.name,
        });
        let Some(slot) = slot else {
            return Err(SandboxError::Words(format!(
                "names the tool {:?}, which describe() does not declare; give words only to \
                 the plugin's own tools, by their exact names",
                clip(&w.name)
            )));
        };
        if !seen.insert(w.name.clone()) {
            return Err(SandboxError::Words(format!(
                "names the tool {:?} twice; give each tool one entry",
                w.name
            )));
        }
        if let Ok(d) = slot {
            d.keywords = w.keywords;
            d.examples = w.examples;
        }
    }
    Ok(())
}

/// A name as an error message shows it: at most 80 characters.
fn clip(name: &str) -> String {
    match name.char_indices().nth(80) {
        Some((i, _)) => format!("{}…", &name[..i]),
        None => name.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolhost_base::descriptor::{Needs, SideEffect, ToolDescriptor};

    fn tool(name: &str) -> Described {
        Ok(ToolDescriptor {
            name: name.into(),
            title: None,
            description: "Reads a file.".into(),
            input_schema: serde_json::json!({"type": "object"}),
            output_schema: None,
            side_effect: SideEffect::ReadOnly,
            needs: Needs::default(),
            error_codes: Vec::new(),
            default_timeout_ms: 1,
            max_output_bytes: 1,
            supports_dry_run: false,
            supports_probe: false,
            keywords: Vec::new(),
            examples: Vec::new(),
        })
    }

    fn words(name: &str, keywords: &[&str], examples: &[&str]) -> ToolWords {
        ToolWords {
            name: name.into(),
            keywords: keywords.iter().map(|s| s.to_string()).collect(),
            examples: examples.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn words_go_to_the_tools_they_name() {
        let mut descs = vec![tool("file_view"), tool("file_edit")];
        let list = vec![words(
            "file_edit",
            &["rename"],
            &["fix the typo in main.rs"],
        )];
        assert_eq!(
            bytes_of(&list),
            "file_editrenamefix the typo in main.rs".len()
        );
        attach(&mut descs, list).unwrap();
        let edit = descs[1].as_ref().unwrap();
        assert_eq!(edit.keywords, ["rename"]);
        assert_eq!(edit.examples, ["fix the typo in main.rs"]);
        let view = descs[0].as_ref().unwrap();
        assert!(view.keywords.is_empty() && view.examples.is_empty());
    }

    #[test]
    fn words_for_an_unknown_or_repeated_tool_refuse_the_plugin() {
        let mut descs = vec![tool("file_view")];
        let e = attach(&mut descs, vec![words("file_nuke", &["x"], &[])]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "describe-words() names the tool \"file_nuke\", which describe() does not declare; \
             give words only to the plugin's own tools, by their exact names"
        );
        let e = attach(
            &mut descs,
            vec![
                words("file_view", &["show"], &[]),
                words("file_view", &[], &[]),
            ],
        )
        .unwrap_err();
        assert!(e.to_string().contains("\"file_view\" twice"), "{e}");
        let long = "n".repeat(200);
        let e = attach(&mut descs, vec![words(&long, &[], &[])]).unwrap_err();
        assert!(e.to_string().len() < 300, "{e}");
    }

    #[test]
    fn a_tool_whose_schema_failed_keeps_its_error() {
        let mut descs: Vec<Described> = vec![Err(("file_view".into(), "bad".into()))];
        attach(&mut descs, vec![words("file_view", &["show"], &[])]).unwrap();
        assert!(descs[0].is_err());
    }
}
