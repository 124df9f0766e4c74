//! Workspace-relative paths as caveats name them: one normal form, and
//! the prefix order (`src` covers `src/lib.rs`, not `srcx`).

use super::*;

/// Why a string is not a workspace-relative path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    #[error("absolute paths are not workspace paths")]
    Absolute,
    #[error("`..` escapes the workspace")]
    Escapes,
    #[error("backslashes and control characters are not allowed")]
    BadChar,
    /// Only for caveat prefixes ([`RelPath`]): they would break the
    /// comma-separated caveat syntax.
    #[error("a caveat path cannot contain commas or start or end with a space")]
    ListChar,
}

/// Normalizes a workspace-relative path lexically: drops empty and `.`
/// segments, resolves `..` against the previous segment. Rejects absolute
/// paths, `..` that would leave the workspace, backslashes and control
/// characters. The workspace root is `""` (also reached from `"."`).
/// Borrows when the input is already normal.
pub fn normalize_path(path: &str) -> Result<Cow<'_, str>, PathError> {
    if path.starts_with('/') {
        return Err(PathError::Absolute);
    }
    if path.chars().any(|c| c == '\\' || c.is_control()) {
        return Err(PathError::BadChar);
    }
    let already_normal = !path.ends_with('/')
        && path
            .split('/')
            .all(|seg| !seg.is_empty() && seg != "." && seg != "..");
    if already_normal || path.is_empty() {
        return Ok(Cow::Borrowed(path));
    }
    let mut segs: Vec<&str> = Vec::new();
    for seg in path.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                if segs.pop().is_none() {
                    return Err(PathError::Escapes);
                }
            }
            s => segs.push(s),
        }
    }
    Ok(Cow::Owned(segs.join("/")))
}

/// Whether `prefix` covers `path` by whole segments (both normalized; `""`
/// is the workspace root and covers everything).
pub(super) fn path_covers(prefix: &str, path: &str) -> bool {
    prefix.is_empty()
        || (path.starts_with(prefix)
            && (path.len() == prefix.len() || path.as_bytes()[prefix.len()] == b'/'))
}

/// A normalized workspace-relative path prefix (see [`normalize_path`]).
/// The workspace root is stored as `""` and displayed as `.`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RelPath(pub(super) Arc<str>);

impl RelPath {
    /// Parses and normalizes a workspace-relative path. Unlike
    /// [`normalize_path`], also refuses commas and leading or trailing
    /// spaces, which the caveat text syntax cannot carry.
    pub fn parse(path: &str) -> Result<RelPath, PathError> {
        if path.contains(',') || path.trim() != path {
            return Err(PathError::ListChar);
        }
        Ok(RelPath(Arc::from(normalize_path(path)?.as_ref())))
    }
    /// The normalized path; `""` for the workspace root.
    pub fn as_str(&self) -> &str {
        &self.0
    }
    pub fn is_root(&self) -> bool {
        self.0.is_empty()
    }
    /// Whether this prefix covers `path` (normalized) by whole segments.
    pub fn covers_path(&self, path: &str) -> bool {
        path_covers(&self.0, path)
    }
}

impl fmt::Display for RelPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_empty() { "." } else { &self.0 })
    }
}

impl Serialize for RelPath {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}
