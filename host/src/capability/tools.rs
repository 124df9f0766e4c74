//! Tool patterns (`file_view`, `file_*`, `*`) and the sets a `tool` caveat
//! names; network origins come from [`crate::origin`].

use super::*;

/// A tool pattern: an exact tool name (`file_view`), a namespace
/// (`file_*`, `fs.*`: every name starting with `file_` / `fs.`), or `*`
/// (every tool). A namespace must end in `_*` or `.*`, so `file_*` never
/// covers `filesystem_x`. Names use `[a-z0-9_.-]`, start with a letter and
/// are at most 128 characters.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ToolPattern {
    /// The name, or the namespace prefix without its `*` (`""` for `*`).
    pub(super) stem: Arc<str>,
    pub(super) prefix: bool,
}

impl ToolPattern {
    pub fn parse(s: &str) -> Result<ToolPattern, CapError> {
        let bad = |why: &str| malformed(format!("`{s}` is not a tool pattern: {why}"));
        if s == "*" {
            return Ok(ToolPattern {
                stem: Arc::from(""),
                prefix: true,
            });
        }
        let (stem, prefix) = match s.strip_suffix('*') {
            Some(stem) => {
                if !(stem.ends_with('_') || stem.ends_with('.')) {
                    return Err(bad("a namespace ends in `_*` or `.*` (e.g. `file_*`)"));
                }
                (stem, true)
            }
            None => (s, false),
        };
        if stem.is_empty() || stem.len() > 128 {
            return Err(bad("names have 1 to 128 characters"));
        }
        if !stem.as_bytes()[0].is_ascii_lowercase() {
            return Err(bad("names start with a lowercase letter"));
        }
        if !stem
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"_.-".contains(&b))
        {
            return Err(bad(
                "names use a-z, 0-9, `_`, `.` and `-` (`*` only at the end)",
            ));
        }
        Ok(ToolPattern {
            stem: Arc::from(stem),
            prefix,
        })
    }
    /// Whether the pattern allows the tool `name`.
    pub fn matches(&self, name: &str) -> bool {
        if self.prefix {
            name.starts_with(&*self.stem)
        } else {
            name == &*self.stem
        }
    }
    /// Whether every tool this pattern allows is allowed by `self`.
    pub fn covers(&self, other: &ToolPattern) -> bool {
        if self.prefix {
            other.stem.starts_with(&*self.stem)
        } else {
            !other.prefix && other.stem == self.stem
        }
    }
    pub fn is_namespace(&self) -> bool {
        self.prefix
    }
}

impl fmt::Display for ToolPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.stem)?;
        if self.prefix {
            f.write_str("*")?;
        }
        Ok(())
    }
}

impl Serialize for ToolPattern {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// The tools a [`Grant`] allows.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
#[serde(transparent)]
pub struct ToolSet(pub(super) Vec<ToolPattern>);

impl ToolSet {
    pub fn allows(&self, name: &str) -> bool {
        self.0.iter().any(|p| p.matches(name))
    }
    /// Whether every tool `pattern` allows is in the set.
    pub fn covers(&self, pattern: &ToolPattern) -> bool {
        self.0.iter().any(|p| p.covers(pattern))
    }
    pub fn patterns(&self) -> &[ToolPattern] {
        &self.0
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Display for ToolSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&list(&self.0))
    }
}

/// A network origin (one grammar for the whole host: see [`crate::origin`]).
pub use crate::origin::Origin;
