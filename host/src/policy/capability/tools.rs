//! Tool patterns (`file_view`, `file_*`, `*`) and the sets a `tool` caveat
//! names; network origins come from [`crate::origin`].

use super::*;

/// A tool pattern, in the host's one tool-name grammar
/// ([`crate::toolname`]): an exact tool name (`file_view`, `fs.read`), a
/// prefix ending in `_` or `.` then `*` (`file_*`, `fs.*`, `fs.file_*`:
/// every name starting with `file_` / `fs.` / `fs.file_`), or `*` (every
/// tool). A prefix must end in `_` or `.`, so `file_*` never covers
/// `filesystem_x` and `fs.*` never covers `fsx.read`; the namespace is part
/// of the name, so `file_*` never covers `fs.file_view`.
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
                    return Err(bad(
                        "a prefix pattern ends in `_*` or `.*` (e.g. `file_*`, `fs.*`)",
                    ));
                }
                if !crate::toolname::is_pattern_prefix(stem) {
                    return Err(bad(
                        "before the `*` comes the start of a tool name: \
                         `[namespace.]name`, each part a-z, 0-9 and `_`, starting with a letter",
                    ));
                }
                (stem, true)
            }
            None => {
                if !crate::toolname::is_name(s) {
                    return Err(bad(
                        "a tool name is `[namespace.]name`: a namespace of 1 to 32 and a name \
                         of 1 to 64 characters of a-z, 0-9 and `_`, each starting with a letter \
                         (`*` only at the end)",
                    ));
                }
                (s, false)
            }
        };
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
