//! The `task_words` rule: a tool's declared keywords and examples are
//! within bounds, and its description or examples name a task.
//!
//! `find_tools` matches a task as a person phrases it ("rename the config
//! loader", "fetch the release notes"), so a tool is found by the verbs of
//! the tasks it does. A tool passes when its description or one of its
//! examples holds a word of [`TASK_VERBS`] (the generic verbs of software
//! tasks, in any of the usual English inflections: `reads`, `fixed`,
//! `running`, `copies`); otherwise the rule warns. Keywords do not count:
//! they are the author's own shorthand, and the description is what every
//! model reads. Keywords and examples out of bounds
//! ([`check_task_words`]) are errors, as are hidden characters in them
//! (`hidden_text`).

use super::{Linter, Rule, Severity, Target};
use crate::descriptor::{check_task_words, ToolDescriptor};

/// Verbs of tasks, base forms, sorted: what a description that names a
/// task contains at least one of.
pub const TASK_VERBS: &[&str] = &[
    "add",
    "analyze",
    "annotate",
    "answer",
    "append",
    "apply",
    "archive",
    "ask",
    "assert",
    "audit",
    "authenticate",
    "backup",
    "benchmark",
    "bisect",
    "block",
    "book",
    "browse",
    "build",
    "bump",
    "calculate",
    "call",
    "cancel",
    "change",
    "chart",
    "check",
    "checkout",
    "clean",
    "clear",
    "clone",
    "close",
    "collect",
    "commit",
    "compare",
    "compile",
    "compress",
    "compute",
    "configure",
    "connect",
    "convert",
    "copy",
    "count",
    "crawl",
    "create",
    "debug",
    "decode",
    "decompress",
    "decrypt",
    "delete",
    "deploy",
    "describe",
    "detect",
    "diagnose",
    "diff",
    "disable",
    "download",
    "draw",
    "drop",
    "dump",
    "edit",
    "email",
    "enable",
    "encode",
    "encrypt",
    "enumerate",
    "erase",
    "evaluate",
    "execute",
    "explain",
    "explore",
    "export",
    "extract",
    "fetch",
    "fill",
    "filter",
    "find",
    "fix",
    "format",
    "generate",
    "get",
    "grep",
    "hash",
    "import",
    "index",
    "inspect",
    "install",
    "join",
    "kill",
    "launch",
    "link",
    "lint",
    "list",
    "load",
    "locate",
    "lock",
    "log",
    "look",
    "make",
    "measure",
    "merge",
    "migrate",
    "modify",
    "monitor",
    "mount",
    "move",
    "navigate",
    "notify",
    "open",
    "optimize",
    "order",
    "page",
    "parse",
    "patch",
    "pay",
    "ping",
    "plan",
    "plot",
    "post",
    "preview",
    "print",
    "probe",
    "profile",
    "publish",
    "pull",
    "purge",
    "push",
    "put",
    "query",
    "read",
    "rebase",
    "rebuild",
    "record",
    "refactor",
    "refresh",
    "release",
    "reload",
    "remove",
    "rename",
    "render",
    "reorder",
    "repair",
    "replace",
    "reply",
    "report",
    "request",
    "reset",
    "resize",
    "resolve",
    "restart",
    "restore",
    "retrieve",
    "retry",
    "return",
    "revert",
    "review",
    "rewrite",
    "run",
    "save",
    "scan",
    "schedule",
    "scrape",
    "search",
    "see",
    "send",
    "set",
    "show",
    "sign",
    "sort",
    "split",
    "start",
    "stop",
    "store",
    "submit",
    "summarize",
    "sync",
    "tag",
    "test",
    "trace",
    "transform",
    "translate",
    "trigger",
    "trim",
    "truncate",
    "type",
    "undo",
    "uninstall",
    "unlock",
    "unzip",
    "update",
    "upgrade",
    "upload",
    "validate",
    "verify",
    "view",
    "visit",
    "wait",
    "watch",
    "wipe",
    "write",
    "zip",
];

/// Whether `text` holds a word of [`TASK_VERBS`], in any usual inflection.
pub fn names_a_task(text: &str) -> bool {
    text.split(|c: char| !c.is_ascii_alphabetic())
        .filter(|w| w.len() >= 2)
        .any(|w| base_forms(&w.to_ascii_lowercase()).any(is_task_verb))
}

fn is_task_verb(w: String) -> bool {
    TASK_VERBS.binary_search(&w.as_str()).is_ok()
}

/// `w` and what it is with a usual inflection undone: `reads` → `read`,
/// `copies` → `copy`, `fixed` → `fix`, `saved` → `save`, `running` →
/// `run`, `writing` → `write`.
fn base_forms(w: &str) -> impl Iterator<Item = String> + '_ {
    let mut out = vec![w.to_string()];
    let undouble = |s: &str| {
        let b = s.as_bytes();
        (b.len() >= 2 && b[b.len() - 1] == b[b.len() - 2]).then(|| s[..s.len() - 1].to_string())
    };
    if let Some(s) = w.strip_suffix("ies").or_else(|| w.strip_suffix("ied")) {
        out.push(format!("{s}y"));
    }
    for suffix in ["es", "s", "ed", "d"] {
        if let Some(s) = w.strip_suffix(suffix) {
            out.push(s.to_string());
        }
    }
    for suffix in ["ing", "ed"] {
        if let Some(s) = w.strip_suffix(suffix) {
            out.push(format!("{s}e"));
            out.extend(undouble(s));
        }
    }
    out.into_iter()
}

impl Linter {
    pub(super) fn task_words(&mut self, desc: &ToolDescriptor) {
        let d = Target::Descriptor;
        let problems = check_task_words(&desc.keywords, &desc.examples);
        for p in &problems {
            let pointer = match p.index {
                Some(i) => format!("/{}/{i}", p.list),
                None => format!("/{}", p.list),
            };
            self.push(
                Rule::TaskWords,
                Severity::Error,
                d,
                pointer,
                format!(
                    "{p}; keywords are short task words (rename, move), examples one-line task phrasings"
                ),
            );
        }
        let lists = [("keywords", &desc.keywords), ("examples", &desc.examples)];
        for (list, items) in lists {
            for (i, item) in items.iter().enumerate() {
                let flagged = problems
                    .iter()
                    .any(|p| p.list == list && p.index == Some(i));
                if !flagged {
                    self.hidden(d, &format!("/{list}/{i}"), item);
                }
            }
        }
        if !desc.description.trim().is_empty()
            && !names_a_task(&desc.description)
            && !desc.examples.iter().any(|e| names_a_task(e))
        {
            self.push(
                Rule::TaskWords,
                Severity::Warning,
                d,
                "/description",
                "neither the description nor an example names a task (a verb such as read, \
                 search, edit, rename, build, test, run, fetch or delete); say what the tool \
                 does, so that find_tools finds it for the tasks it is for",
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_verbs_are_sorted_for_search() {
        assert!(TASK_VERBS.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn inflected_verbs_name_a_task() {
        for text in [
            "Reads a file.",
            "Copies one file.",
            "Fixed-width report of the build.",
            "Running tests, one at a time.",
            "Writing the output.",
            "Saved searches.",
            "Stopped jobs are listed.",
        ] {
            assert!(names_a_task(text), "{text}");
        }
        for text in ["A utility.", "The clock, in UTC.", "Helper for stuff."] {
            assert!(!names_a_task(text), "{text}");
        }
    }
}
