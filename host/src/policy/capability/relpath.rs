//! Workspace-relative paths as caveats name them. There is one path type
//! and one grammar, [`crate::paths::RelPath`] (the root is `.`, `src`
//! covers `src/lib.rs` and not `srcx`); a caveat adds only what its text
//! syntax cannot carry: a comma (it separates list values) and a leading or
//! trailing space (values are trimmed).

pub use crate::paths::RelPath;

/// Why a text is not a caveat path prefix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PrefixError {
    /// Not a workspace path at all (the message of [`crate::paths`]).
    #[error("{}", .0.message)]
    Path(crate::paths::PathError),
    /// A comma or an edge space: the caveat syntax would split or trim it.
    #[error("a caveat path cannot contain commas or start or end with a space")]
    ListChar,
}

/// Parses a caveat path prefix: a [`RelPath`] the caveat text can carry.
pub fn parse_prefix(path: &str) -> Result<RelPath, PrefixError> {
    check_listable(path)?;
    RelPath::parse(path).map_err(PrefixError::Path)
}

/// Refuses what the comma-separated caveat syntax cannot carry.
pub(super) fn check_listable(path: &str) -> Result<(), PrefixError> {
    if path.contains(',') || path.trim() != path {
        return Err(PrefixError::ListChar);
    }
    Ok(())
}
