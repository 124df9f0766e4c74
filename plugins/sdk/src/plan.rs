//! [`Plan`] and [`Probe`]: what a dry-run and a probe answer.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What a call would do, computed without doing it (the answer of a
/// tool's dry-run; see [`Tool::dry_run`](crate::Tool::dry_run)).
///
/// The shape follows the seed's structured dry-run: a change list (path and
/// lines added/removed), impact counts and warnings. Build it with
/// [`Plan::new`], [`Plan::change`] and [`Plan::warning`]; `counts` is kept
/// in step with `changes` by [`Plan::change`].
///
/// ```
/// use toolhost_sdk::{Change, Plan};
///
/// let plan = Plan::new("delete notes.txt (3 lines, 42 bytes)")
///     .change(Change::delete("notes.txt", 3, 42).sha256_before("ab".repeat(32)))
///     .warning("file is not empty");
/// assert_eq!(plan.counts.files, 1);
/// assert_eq!(plan.counts.deleted, 1);
/// assert_eq!(plan.counts.lines_removed, 3);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    /// One line for people: what the call would do.
    pub summary: String,
    /// Every change the call would make, in the order it would make them.
    pub changes: Vec<Change>,
    /// Totals over `changes`.
    pub counts: Counts,
    /// Things to know before approving, e.g. "file is not empty".
    pub warnings: Vec<String>,
}

impl Plan {
    /// A plan with `summary` and no changes or warnings yet.
    pub fn new(summary: impl Into<String>) -> Self {
        Plan {
            summary: summary.into(),
            changes: Vec::new(),
            counts: Counts::default(),
            warnings: Vec::new(),
        }
    }

    /// Adds a change and updates `counts`.
    #[must_use]
    pub fn change(mut self, change: Change) -> Self {
        self.counts.add(&change);
        self.changes.push(change);
        self
    }

    /// Adds a warning.
    #[must_use]
    pub fn warning(mut self, warning: impl Into<String>) -> Self {
        self.warnings.push(warning.into());
        self
    }
}

/// What a change does to its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ChangeAction {
    /// A new file.
    Create,
    /// An existing file, changed.
    Modify,
    /// An existing file, removed.
    Delete,
}

/// One file a call would change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Change {
    /// Workspace-relative path of the file.
    pub path: String,
    /// `create`, `modify` or `delete`.
    pub action: ChangeAction,
    /// Lines the file would gain.
    pub lines_added: u64,
    /// Lines the file would lose.
    pub lines_removed: u64,
    /// Size of the file now, in bytes (0 for `create`).
    pub bytes_before: u64,
    /// Size of the file afterwards, in bytes (0 for `delete`).
    pub bytes_after: u64,
    /// Lowercase hex SHA-256 of the file now (null for `create`, or when the
    /// tool does not hash): the host can compare it right before the
    /// approved call runs and re-plan if the file changed meanwhile.
    pub sha256_before: Option<String>,
}

impl Change {
    /// A change with every number 0 and no digest.
    pub fn new(path: impl Into<String>, action: ChangeAction) -> Self {
        Change {
            path: path.into(),
            action,
            lines_added: 0,
            lines_removed: 0,
            bytes_before: 0,
            bytes_after: 0,
            sha256_before: None,
        }
    }

    /// Deleting a file of `lines` lines and `bytes` bytes.
    pub fn delete(path: impl Into<String>, lines: u64, bytes: u64) -> Self {
        Change {
            lines_removed: lines,
            bytes_before: bytes,
            ..Change::new(path, ChangeAction::Delete)
        }
    }

    /// Creating a file of `lines` lines and `bytes` bytes.
    pub fn create(path: impl Into<String>, lines: u64, bytes: u64) -> Self {
        Change {
            lines_added: lines,
            bytes_after: bytes,
            ..Change::new(path, ChangeAction::Create)
        }
    }

    /// Modifying a file: lines added and removed, size before and after.
    pub fn modify(
        path: impl Into<String>,
        lines_added: u64,
        lines_removed: u64,
        bytes_before: u64,
        bytes_after: u64,
    ) -> Self {
        Change {
            lines_added,
            lines_removed,
            bytes_before,
            bytes_after,
            ..Change::new(path, ChangeAction::Modify)
        }
    }

    /// Records the file's current SHA-256 (lowercase hex).
    #[must_use]
    pub fn sha256_before(mut self, sha256: impl Into<String>) -> Self {
        self.sha256_before = Some(sha256.into());
        self
    }
}

/// Totals over a plan's changes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Counts {
    /// Files changed (the number of changes).
    pub files: u64,
    /// Files created.
    pub created: u64,
    /// Files modified.
    pub modified: u64,
    /// Files deleted.
    pub deleted: u64,
    /// Lines added, over all files.
    pub lines_added: u64,
    /// Lines removed, over all files.
    pub lines_removed: u64,
}

impl Counts {
    /// Totals over `changes`.
    pub fn of(changes: &[Change]) -> Self {
        let mut counts = Counts::default();
        for change in changes {
            counts.add(change);
        }
        counts
    }

    fn add(&mut self, change: &Change) {
        self.files += 1;
        match change.action {
            ChangeAction::Create => self.created += 1,
            ChangeAction::Modify => self.modified += 1,
            ChangeAction::Delete => self.deleted += 1,
        }
        self.lines_added += change.lines_added;
        self.lines_removed += change.lines_removed;
    }
}

/// Whether a call took effect (the answer of a tool's probe; see
/// [`Tool::probe`](crate::Tool::probe)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe<O> {
    /// It did; the output the call returned, or would have returned, as far
    /// as the world shows it (it must match the tool's output schema).
    Done(O),
    /// It did not: retrying the call is safe.
    NotDone,
    /// The world does not tell.
    Unknown,
}

impl<O> Probe<O> {
    /// Maps the output of [`Probe::Done`].
    pub fn map<P>(self, f: impl FnOnce(O) -> P) -> Probe<P> {
        match self {
            Probe::Done(output) => Probe::Done(f(output)),
            Probe::NotDone => Probe::NotDone,
            Probe::Unknown => Probe::Unknown,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn plan_serializes_to_the_documented_shape() {
        let plan = Plan::new("two files")
            .change(Change::create("new.txt", 2, 10))
            .change(Change::modify("a.txt", 1, 3, 100, 80).sha256_before("0".repeat(64)))
            .warning("careful");
        assert_eq!(plan.counts, Counts::of(&plan.changes));
        let value = serde_json::to_value(&plan).unwrap();
        assert_eq!(
            value,
            json!({
                "summary": "two files",
                "changes": [
                    {"path": "new.txt", "action": "create", "lines_added": 2, "lines_removed": 0,
                     "bytes_before": 0, "bytes_after": 10, "sha256_before": null},
                    {"path": "a.txt", "action": "modify", "lines_added": 1, "lines_removed": 3,
                     "bytes_before": 100, "bytes_after": 80, "sha256_before": "0".repeat(64)},
                ],
                "counts": {"files": 2, "created": 1, "modified": 1, "deleted": 0,
                           "lines_added": 3, "lines_removed": 3},
                "warnings": ["careful"],
            })
        );
        let back: Plan = serde_json::from_value(value).unwrap();
        assert_eq!(back, plan);
    }

    #[test]
    fn plan_schema_is_closed() {
        let schema = schemars::schema_for!(Plan).to_value();
        assert_eq!(schema["additionalProperties"], false);
        assert_eq!(
            schema["required"],
            json!(["summary", "changes", "counts", "warnings"])
        );
    }
}
