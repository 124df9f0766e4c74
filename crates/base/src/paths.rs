//! Workspace paths and grants: the host's first wall.
//!
//! The workspace root is opened once, when the [`Workspace`] is opened, and
//! everything below it is reached from that open descriptor
//! ([`crate::opendir`]), never by walking a host path again: a directory
//! renamed away and replaced by a symbolic link after a check cannot
//! redirect a later lookup.
//!
//! Every path argument (a string property marked `x-toolhost-path` in a
//! tool's input schema) is checked here before the guest runs:
//!
//! 1. **Shape**: empty, NUL or other control characters, absolute (`/x`,
//!    `C:\x`, `\\server`), backslashes, longer than [`MAX_PATH_BYTES`] or a
//!    segment longer than [`MAX_SEGMENT_BYTES`] → [`PathErrorKind::Malformed`]
//!    (`invalid_arguments`, correctable).
//! 2. **Lexical**: `.` and `..` are resolved without touching the disk; a
//!    path that climbs above the root → [`PathErrorKind::OutsideWorkspace`]
//!    (`denied`).
//! 3. **Symlinks**: the path is walked beneath the root descriptor one name
//!    at a time, each entry opened without following it (one `openat2` with
//!    `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS` when no component is a link).
//!    A link's target is read from the opened link itself and walked the
//!    same way; a target that leaves the workspace → `OutsideWorkspace`
//!    (`denied`, never `not_found`). A dangling symlink (or a loop) cannot be
//!    checked and is refused ([`PathErrorKind::UnresolvableLink`], `denied`).
//! 4. **Kind**: an existing target that is neither a regular file nor a
//!    directory (a FIFO, socket or device: opening one can block forever) →
//!    [`PathErrorKind::NotAFile`] (`invalid_arguments`, correctable: name a
//!    regular file). It is never opened, only looked at (`O_PATH`).
//! 5. **Grants**: the resolved path must lie under a grant with the needed
//!    [`Access`] → else [`PathErrorKind::NotGranted`] (`denied`).
//!
//! Prefixes match by whole segment: `src` covers `src` and `src/a`, never
//! `src2`. Workspace-relative paths ([`RelPath`]) are `/`-separated, have no
//! `.`/`..`/empty segments, and the root itself is written `.`.
//!
//! The resolved [`ResolvedPath::rel`] has symlinks resolved: the pipeline
//! must hand **that** path (or [`ResolvedPath::guest`]) to the guest, not the
//! raw argument, so the guest opens exactly what was checked. The sandbox
//! mounts only [`Grants::preopens`], each opened for the call by
//! [`Workspace::open_grant`] beneath the root without following a link at
//! any step (a grant whose name is now a link, or gone, is `denied`); the
//! mounts' directory handles refuse to follow links out of a mount: the
//! second wall against a symlink swapped in between check and use.

use std::fmt;
use std::io;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::observation::{ErrorCode, ErrorInfo};
use crate::opendir::{Kind, OpenDir};
use crate::text::clip_bytes;

/// Where the workspace root is mounted inside the guest.
pub const GUEST_ROOT: &str = "/workspace";

/// Longest accepted path argument, in bytes.
pub const MAX_PATH_BYTES: usize = 4096;

/// Longest accepted path segment, in bytes (the usual file-system limit).
pub const MAX_SEGMENT_BYTES: usize = 255;

/// Longest part of a raw path quoted back in messages, in bytes.
const MAX_SHOWN_BYTES: usize = 200;

/// Symbolic links followed while resolving one path before it counts as a
/// loop (the kernel's own limit).
const MAX_LINKS: usize = 40;

/// What a call does with a path: the one access vocabulary of the host. A
/// schema's `x-toolhost-path` annotation (`toolhost::plugin::schema::PathAccess`), a
/// token's `read`/`write` prefixes (`toolhost::policy::capability::Access`) and a
/// workspace grant all say it with this type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Access {
    /// The call reads the path.
    Read,
    /// The call writes (creates, changes or deletes) the path.
    Write,
}

impl Access {
    /// `read` or `write`.
    pub fn as_str(self) -> &'static str {
        match self {
            Access::Read => "read",
            Access::Write => "write",
        }
    }
}

impl fmt::Display for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a path was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathErrorKind {
    /// Not a usable relative path (empty, NUL, absolute, too long…).
    /// The caller can fix it: `invalid_arguments`.
    Malformed,
    /// Leaves the workspace, lexically or through a symlink: `denied`.
    OutsideWorkspace,
    /// Inside the workspace but not under a grant with the needed access:
    /// `denied`. `granted` is the access the path does have, if any (e.g.
    /// `Some(Read)` when a write was asked of a read-only grant).
    NotGranted {
        needed: Access,
        granted: Option<Access>,
    },
    /// A symlink whose target does not exist (or a link loop): where it
    /// leads cannot be checked, so it is refused: `denied`.
    UnresolvableLink,
    /// An existing target that is not a regular file or a directory (a
    /// FIFO, socket or device): `invalid_arguments`, correctable.
    NotAFile { kind: Kind },
    /// A grant that can no longer be opened beneath the workspace root
    /// without following a symbolic link (moved, removed, or replaced by a
    /// link since it was granted): `denied`.
    GrantUnavailable,
    /// A grant prefix that does not exist or is not a directory (only from
    /// [`Grants::new`]; a configuration error): `internal`.
    BadGrant,
    /// The workspace root is unusable, or an unexpected I/O error: `internal`.
    Io,
}

impl PathErrorKind {
    /// The host error code this kind maps to.
    pub fn code(&self) -> ErrorCode {
        match self {
            PathErrorKind::Malformed | PathErrorKind::NotAFile { .. } => {
                ErrorCode::InvalidArguments
            }
            PathErrorKind::OutsideWorkspace
            | PathErrorKind::NotGranted { .. }
            | PathErrorKind::UnresolvableLink
            | PathErrorKind::GrantUnavailable => ErrorCode::Denied,
            PathErrorKind::BadGrant | PathErrorKind::Io => ErrorCode::Internal,
        }
    }
}

/// A refused path, with a message a model can act on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct PathError {
    pub kind: PathErrorKind,
    /// One or two sentences saying what is wrong and what to do.
    pub message: String,
    /// The path as given (clipped to a few hundred bytes).
    pub path: String,
}

impl PathError {
    fn new(kind: PathErrorKind, raw: &str, message: String) -> PathError {
        PathError {
            kind,
            message,
            path: clip_bytes(raw, MAX_SHOWN_BYTES * 2).into_owned(),
        }
    }

    /// The host error code: `invalid_arguments`, `denied` or `internal`.
    pub fn code(&self) -> ErrorCode {
        self.kind.code()
    }

    /// The observation error for this refusal. `field` is the JSON Pointer
    /// of the argument that held the path (e.g. `/path`).
    pub fn to_error_info(&self, field: Option<&str>) -> ErrorInfo {
        let mut info = self.code().info(self.message.clone());
        if let Some(f) = field {
            info = info.with_field(f);
        }
        match &self.kind {
            PathErrorKind::Malformed => info
                .with_expected("a relative path inside the workspace, e.g. `src/main.rs`")
                .with_actual(format!("`{}`", shown(&self.path))),
            PathErrorKind::NotAFile { kind } => info
                .with_expected("a regular file or a directory")
                .with_actual(kind.describe()),
            PathErrorKind::NotGranted { needed, granted } => info.with_details(serde_json::json!({
                "path": self.path,
                "needed": needed.as_str(),
                "granted": granted.map(Access::as_str),
            })),
            _ => info,
        }
    }
}

/// A normalized workspace-relative path: `/`-separated, no empty, `.` or
/// `..` segments, no leading or trailing `/`; the root is `.`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct RelPath(String);

impl RelPath {
    /// How the workspace root is written.
    pub const ROOT: &'static str = ".";

    /// The workspace root, `.`.
    pub fn root() -> RelPath {
        RelPath(RelPath::ROOT.to_owned())
    }

    /// Checks the shape of `raw` and normalizes it lexically (no disk
    /// access). Errors: `Malformed`, or `OutsideWorkspace` if `..` climbs
    /// above the root.
    pub fn parse(raw: &str) -> Result<RelPath, PathError> {
        check_shape(raw)?;
        let mut segs: Vec<&str> = Vec::new();
        for seg in raw.split('/') {
            match seg {
                "" | "." => {}
                ".." => {
                    if segs.pop().is_none() {
                        return Err(PathError::new(
                            PathErrorKind::OutsideWorkspace,
                            raw,
                            format!(
                                "`{}` leaves the workspace; paths are relative to the \
                                 workspace root and cannot go above it",
                                shown(raw)
                            ),
                        ));
                    }
                }
                s => segs.push(s),
            }
        }
        if segs.is_empty() {
            return Ok(RelPath::root());
        }
        Ok(RelPath(segs.join("/")))
    }

    /// The path as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether this is the workspace root.
    pub fn is_root(&self) -> bool {
        self.0 == RelPath::ROOT
    }

    /// The segments, none for the root.
    pub fn segments(&self) -> impl Iterator<Item = &str> {
        let s = if self.is_root() { "" } else { self.0.as_str() };
        s.split('/').filter(|s| !s.is_empty())
    }

    /// Whether `other` is this path or lies under it, by whole segment:
    /// `src` covers `src` and `src/a`, never `src2`; `.` covers everything.
    pub fn covers(&self, other: &RelPath) -> bool {
        if self.is_root() {
            return true;
        }
        let (p, o) = (self.0.as_bytes(), other.0.as_bytes());
        o.starts_with(p) && (o.len() == p.len() || o[p.len()] == b'/')
    }

    /// The path inside the guest: `/workspace` or `/workspace/src/a`.
    pub fn guest(&self) -> String {
        if self.is_root() {
            GUEST_ROOT.to_owned()
        } else {
            format!("{GUEST_ROOT}/{}", self.0)
        }
    }

    fn push(&mut self, seg: &str) {
        if self.is_root() {
            self.0.clear();
        } else {
            self.0.push('/');
        }
        self.0.push_str(seg);
    }
}

impl fmt::Display for RelPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for RelPath {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// A path argument that passed every check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedPath {
    /// Workspace-relative, normalized, symlinks resolved (`.` for the root).
    pub rel: RelPath,
    /// Absolute host path (`root` joined with `rel`).
    pub host: PathBuf,
    /// Whether the target existed when it was checked.
    pub exists: bool,
}

impl ResolvedPath {
    /// The path to give the guest: `/workspace/…`.
    pub fn guest(&self) -> String {
        self.rel.guest()
    }
}

/// One directory the sandbox mounts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Preopen {
    /// The granted prefix; [`Workspace::open_grant`] opens it for a call.
    pub rel: RelPath,
    /// Absolute, canonical host directory (for messages: the mount itself
    /// is opened beneath the workspace root, not by this path).
    pub host: PathBuf,
    /// Mount point in the guest: [`GUEST_ROOT`] or `/workspace/<prefix>`.
    pub guest: String,
    /// Mounted read-write (else read-only).
    pub writable: bool,
}

/// The paths a caller may read and write, as canonical workspace prefixes.
///
/// Write implies read. Exact duplicates are dropped, and so are read grants
/// already covered by a write grant: the guest's libc resolves a path
/// through the longest matching mount, so a read-only mount nested in a
/// writable one would refuse writes the host had allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grants {
    root: PathBuf,
    read: Vec<RelPath>,
    write: Vec<RelPath>,
    /// Prefixes a token named that are no directory in this workspace, so
    /// nothing was mounted for them; kept to name them in denials.
    unmounted: Vec<String>,
}

impl Grants {
    /// Builds grants from user-given prefixes relative to the workspace
    /// (`.` for all of it). Each prefix is normalized, its symlinks resolved,
    /// and must be an existing directory inside the workspace.
    pub fn new(ws: &Workspace, read: &[&str], write: &[&str]) -> Result<Grants, PathError> {
        let mut w: Vec<RelPath> = Vec::with_capacity(write.len());
        for raw in write {
            let p = ws.grant_prefix(raw)?;
            if !w.contains(&p) {
                w.push(p);
            }
        }
        let mut r: Vec<RelPath> = Vec::with_capacity(read.len());
        for raw in read {
            let p = ws.grant_prefix(raw)?;
            if !r.contains(&p) && !w.iter().any(|g| g.covers(&p)) {
                r.push(p);
            }
        }
        Ok(Grants {
            root: ws.root.clone(),
            read: r,
            write: w,
            unmounted: Vec::new(),
        })
    }

    /// Records prefixes that were asked for but name no directory in the
    /// workspace (so were not mounted): a denial then says which grant names
    /// nothing instead of only "nothing is granted".
    pub fn noting_unmounted(mut self, prefixes: Vec<String>) -> Grants {
        for p in prefixes {
            if !self.unmounted.contains(&p) {
                self.unmounted.push(p);
            }
        }
        self
    }

    /// Read-only grants (prefixes also covered by a write grant excluded).
    pub fn read(&self) -> &[RelPath] {
        &self.read
    }

    /// Read-write grants.
    pub fn write(&self) -> &[RelPath] {
        &self.write
    }

    /// The strongest access granted on `rel`, if any.
    pub fn access(&self, rel: &RelPath) -> Option<Access> {
        if self.write.iter().any(|g| g.covers(rel)) {
            Some(Access::Write)
        } else if self.read.iter().any(|g| g.covers(rel)) {
            Some(Access::Read)
        } else {
            None
        }
    }

    /// Whether `rel` may be accessed as `access` (write implies read).
    pub fn allows(&self, rel: &RelPath, access: Access) -> bool {
        match access {
            Access::Read => self.access(rel).is_some(),
            Access::Write => self.access(rel) == Some(Access::Write),
        }
    }

    /// The directories the sandbox mounts: exactly the grants, read-only
    /// unless written, sorted by guest path.
    pub fn preopens(&self) -> Vec<Preopen> {
        let mut out: Vec<Preopen> = self
            .write
            .iter()
            .map(|p| (p, true))
            .chain(self.read.iter().map(|p| (p, false)))
            .map(|(p, writable)| Preopen {
                rel: p.clone(),
                host: host_path(&self.root, p),
                guest: p.guest(),
                writable,
            })
            .collect();
        out.sort_by(|a, b| a.guest.cmp(&b.guest));
        out
    }

    /// `read: src, docs; write: out` for messages.
    fn describe(&self) -> String {
        let list = |v: &[RelPath]| {
            if v.is_empty() {
                "none".to_owned()
            } else {
                v.iter().map(RelPath::as_str).collect::<Vec<_>>().join(", ")
            }
        };
        let granted = if self.read.is_empty() && self.write.is_empty() {
            "nothing is granted".to_owned()
        } else {
            format!("read: {}; write: {}", list(&self.read), list(&self.write))
        };
        match self.unmounted.as_slice() {
            [] => granted,
            [one] => format!(
                "{granted}; the grant `{}` names no directory in the workspace",
                shown(one)
            ),
            many => format!(
                "{granted}; the grants {} name no directory in the workspace",
                many.iter()
                    .map(|p| format!("`{}`", shown(p)))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

/// The workspace: a canonical root directory all path arguments live in,
/// held open for as long as the workspace value lives.
#[derive(Debug, Clone)]
pub struct Workspace {
    root: PathBuf,
    dir: OpenDir,
}

/// Two workspaces are the same when they have the same root path.
impl PartialEq for Workspace {
    fn eq(&self, other: &Workspace) -> bool {
        self.root == other.root
    }
}

impl Eq for Workspace {}

impl Workspace {
    /// Opens the workspace at `root`, which must be an existing directory;
    /// the root is canonicalized (symlinks resolved) and opened, and every
    /// later lookup starts from that open directory.
    pub fn open(root: &Path) -> Result<Workspace, PathError> {
        let shown_root = root.display().to_string();
        let canon = std::fs::canonicalize(root).map_err(|e| {
            PathError::new(
                PathErrorKind::Io,
                &shown_root,
                format!("workspace root `{shown_root}` cannot be opened: {e}"),
            )
        })?;
        let meta = std::fs::metadata(&canon).map_err(|e| {
            PathError::new(
                PathErrorKind::Io,
                &shown_root,
                format!("workspace root `{shown_root}` cannot be read: {e}"),
            )
        })?;
        if !meta.is_dir() {
            return Err(PathError::new(
                PathErrorKind::Io,
                &shown_root,
                format!("workspace root `{shown_root}` is not a directory"),
            ));
        }
        if canon.to_str().is_none() {
            return Err(PathError::new(
                PathErrorKind::Io,
                &shown_root,
                format!("workspace root `{shown_root}` is not valid UTF-8"),
            ));
        }
        let dir = OpenDir::open(&canon).map_err(|e| {
            PathError::new(
                PathErrorKind::Io,
                &shown_root,
                format!("workspace root `{shown_root}` cannot be opened: {e}"),
            )
        })?;
        Ok(Workspace { root: canon, dir })
    }

    /// The canonical root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The open root directory.
    pub fn dir(&self) -> &OpenDir {
        &self.dir
    }

    /// Opens a granted prefix for one call: beneath the root descriptor,
    /// following no symbolic link at any step. The result is what the
    /// sandbox mounts. A grant that was moved, removed or replaced by a
    /// link since it was granted → [`PathErrorKind::GrantUnavailable`]
    /// (`denied`).
    pub fn open_grant(&self, rel: &RelPath) -> Result<OpenDir, PathError> {
        let segs: Vec<&str> = rel.segments().collect();
        self.dir.open_beneath(&segs).map_err(|e| {
            let why = self.why_not_a_dir(&segs).unwrap_or_else(|| e.to_string());
            PathError::new(
                PathErrorKind::GrantUnavailable,
                rel.as_str(),
                format!(
                    "the granted directory `{}` cannot be opened inside the workspace ({why}); \
                     grants are opened without following symbolic links, so the call was \
                     refused. Ask the user to restore the directory or grant it again",
                    shown(rel.as_str())
                ),
            )
        })
    }

    /// Why `segs` is not a directory reachable without links, for a
    /// message: the first name on the way that is missing, a link, or not
    /// a directory.
    fn why_not_a_dir(&self, segs: &[&str]) -> Option<String> {
        let mut dir = self.dir.clone();
        let mut at = RelPath::root();
        for seg in segs {
            at.push(seg);
            let entry = match dir.entry(seg) {
                Ok(entry) => entry,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    return Some(format!("`{}` no longer exists", shown(at.as_str())))
                }
                Err(_) => return None,
            };
            match entry.kind() {
                Kind::Dir => dir = entry.into_dir().ok()?,
                Kind::Symlink => {
                    return Some(format!("`{}` is now a symbolic link", shown(at.as_str())))
                }
                kind => {
                    return Some(format!(
                        "`{}` is now {}, not a directory",
                        shown(at.as_str()),
                        kind.describe()
                    ))
                }
            }
        }
        None
    }

    /// Checks a path argument and resolves it: shape, lexical
    /// normalization, symlinks, kind, then grants (see the module docs).
    pub fn resolve(
        &self,
        raw: &str,
        access: Access,
        grants: &Grants,
    ) -> Result<ResolvedPath, PathError> {
        debug_assert_eq!(grants.root, self.root, "grants of another workspace");
        let lexical = RelPath::parse(raw)?;
        let (resolved, kind) = self.resolve_links(raw, &lexical)?;
        if let Some(kind) = kind.filter(|k| !k.is_plain()) {
            let via = if resolved.rel != lexical {
                format!(" (it resolves to `{}`)", resolved.rel)
            } else {
                String::new()
            };
            return Err(PathError::new(
                PathErrorKind::NotAFile { kind },
                raw,
                format!(
                    "`{}`{via} is {}, not a regular file or a directory; tools only open \
                     regular files and directories, so it was not opened",
                    shown(raw),
                    kind.describe()
                ),
            ));
        }
        if grants.allows(&resolved.rel, access) {
            return Ok(resolved);
        }
        let granted = grants.access(&resolved.rel);
        let via = if resolved.rel != lexical {
            format!(" (it resolves to `{}`)", resolved.rel)
        } else {
            String::new()
        };
        let message = match (access, granted) {
            (Access::Write, Some(Access::Read)) => format!(
                "`{}`{via} is granted read-only ({}); writing it needs write access",
                shown(raw),
                grants.describe()
            ),
            _ => format!(
                "`{}`{via} is outside the granted paths ({}): it needs {} access",
                shown(raw),
                grants.describe(),
                access
            ),
        };
        Err(PathError::new(
            PathErrorKind::NotGranted {
                needed: access,
                granted,
            },
            raw,
            message,
        ))
    }

    /// Resolves symlinks in a lexically normalized path beneath the root
    /// descriptor (see the module docs), and says what the target is when
    /// it exists (`None`: it does not).
    fn resolve_links(
        &self,
        raw: &str,
        lexical: &RelPath,
    ) -> Result<(ResolvedPath, Option<Kind>), PathError> {
        // The common case: no link anywhere, one system call.
        if let Ok(entry) = self.dir.lookup_plain(lexical.as_str()) {
            if entry.kind() != Kind::Symlink {
                let resolved = ResolvedPath {
                    rel: lexical.clone(),
                    host: host_path(&self.root, lexical),
                    exists: true,
                };
                return Ok((resolved, Some(entry.kind())));
            }
        }
        self.walk(raw, lexical)
    }

    /// One name at a time from the root descriptor, each entry opened
    /// without following it; a link's target (read from the opened link)
    /// is walked the same way.
    fn walk(
        &self,
        raw: &str,
        lexical: &RelPath,
    ) -> Result<(ResolvedPath, Option<Kind>), PathError> {
        let io_error = |e: io::Error| {
            PathError::new(
                PathErrorKind::Io,
                raw,
                format!("`{}` cannot be checked: {e}", shown(raw)),
            )
        };
        // The directories resolved so far (real directories, no links).
        let mut dirs: Vec<(String, OpenDir)> = Vec::new();
        // Names still to walk, last first; `true` when from a link target.
        let mut todo: Vec<(String, bool)> =
            lexical.segments().map(|s| (s.to_owned(), false)).collect();
        todo.reverse();
        let mut links = 0;
        let rel_of = |dirs: &[(String, OpenDir)]| {
            let mut rel = RelPath::root();
            for (name, _) in dirs {
                rel.push(name);
            }
            rel
        };
        while let Some((name, from_link)) = todo.pop() {
            if name == ".." {
                if dirs.pop().is_none() {
                    return Err(outside_through_link(raw));
                }
                continue;
            }
            let parent = dirs.last().map_or(&self.dir, |(_, d)| d);
            let entry = match parent.entry(&name) {
                Ok(entry) => entry,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    // A link whose target is missing cannot be checked (and
                    // creating through it would land wherever it points).
                    if from_link || todo.iter().any(|(_, l)| *l) {
                        return Err(unresolvable(raw));
                    }
                    let mut rel = rel_of(&dirs);
                    rel.push(&name);
                    for (rest, _) in todo.iter().rev() {
                        rel.push(rest);
                    }
                    return Ok((self.resolved(rel, false), None));
                }
                Err(e) => return Err(io_error(e)),
            };
            match entry.kind() {
                Kind::Symlink => {
                    links += 1;
                    if links > MAX_LINKS {
                        return Err(unresolvable(raw));
                    }
                    let target = entry.read_link().map_err(io_error)?;
                    let target = if target.is_absolute() {
                        let Ok(inside) = target.strip_prefix(&self.root) else {
                            return Err(outside_through_link(raw));
                        };
                        dirs.clear();
                        inside.to_path_buf()
                    } else {
                        target
                    };
                    for c in target.components().rev() {
                        match c {
                            Component::Normal(seg) => {
                                let Some(seg) = seg.to_str() else {
                                    return Err(PathError::new(
                                        PathErrorKind::Io,
                                        raw,
                                        format!(
                                            "`{}` resolves to a name that is not valid UTF-8",
                                            shown(raw)
                                        ),
                                    ));
                                };
                                todo.push((seg.to_owned(), true));
                            }
                            Component::ParentDir => todo.push(("..".to_owned(), true)),
                            Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
                        }
                    }
                }
                Kind::Dir => {
                    let dir = entry.into_dir().map_err(io_error)?;
                    dirs.push((name, dir));
                }
                kind => {
                    let mut rel = rel_of(&dirs);
                    rel.push(&name);
                    if todo.is_empty() {
                        return Ok((self.resolved(rel, true), Some(kind)));
                    }
                    // A path that goes on below a file: it does not exist
                    // (the tool reports ENOTDIR), unless a link led here.
                    if todo.iter().any(|(_, l)| *l) {
                        return Err(unresolvable(raw));
                    }
                    for (rest, _) in todo.iter().rev() {
                        rel.push(rest);
                    }
                    return Ok((self.resolved(rel, false), None));
                }
            }
        }
        Ok((self.resolved(rel_of(&dirs), true), Some(Kind::Dir)))
    }

    fn resolved(&self, rel: RelPath, exists: bool) -> ResolvedPath {
        ResolvedPath {
            host: host_path(&self.root, &rel),
            rel,
            exists,
        }
    }

    /// Normalizes and resolves a grant prefix: an existing directory inside
    /// the workspace, as a canonical relative path.
    fn grant_prefix(&self, raw: &str) -> Result<RelPath, PathError> {
        let lexical = RelPath::parse(raw)?;
        let (resolved, kind) = self.resolve_links(raw, &lexical)?;
        if kind == Some(Kind::File) {
            // WASI mounts directories: a file alone cannot be handed to a
            // tool without the rest of its directory.
            let parent = resolved
                .rel
                .segments()
                .collect::<Vec<_>>()
                .split_last()
                .map(|(_, dirs)| dirs.join("/"))
                .filter(|d| !d.is_empty())
                .unwrap_or_else(|| ".".into());
            return Err(PathError::new(
                PathErrorKind::BadGrant,
                raw,
                format!(
                    "grant `{}` is a file; a grant names a directory, which the tool gets \
                     whole: grant the directory that holds it (`{parent}`), or move the file \
                     into a directory of its own and grant that",
                    shown(raw)
                ),
            ));
        }
        if kind != Some(Kind::Dir) {
            let what = if resolved.exists {
                "is not a directory"
            } else {
                "does not exist"
            };
            return Err(PathError::new(
                PathErrorKind::BadGrant,
                raw,
                format!(
                    "grant `{}` {what} in the workspace; grants name existing directories",
                    shown(raw)
                ),
            ));
        }
        Ok(resolved.rel)
    }
}

/// The real path of `path`, resolving its nearest existing ancestor and
/// appending the rest.
pub fn real_path_of(path: &Path) -> PathBuf {
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_owned());
    let mut rest = Vec::new();
    let mut cur = abs.as_path();
    loop {
        if let Ok(real) = std::fs::canonicalize(cur) {
            return rest.iter().rev().fold(real, |p, c| p.join(c));
        }
        match (cur.parent(), cur.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_owned());
                cur = parent;
            }
            _ => return abs,
        }
    }
}

fn host_path(root: &Path, rel: &RelPath) -> PathBuf {
    let mut p = root.to_path_buf();
    for seg in rel.segments() {
        p.push(seg);
    }
    p
}

fn unresolvable(raw: &str) -> PathError {
    PathError::new(
        PathErrorKind::UnresolvableLink,
        raw,
        format!(
            "`{}` goes through a symbolic link whose target does not exist (or a link \
             loop); where it leads cannot be checked, so it is refused",
            shown(raw)
        ),
    )
}

fn outside_through_link(raw: &str) -> PathError {
    PathError::new(
        PathErrorKind::OutsideWorkspace,
        raw,
        format!(
            "`{}` leads through a symbolic link to a place outside the workspace; only \
             paths inside the workspace can be used",
            shown(raw)
        ),
    )
}

/// Rejects what is not a usable relative path.
fn check_shape(raw: &str) -> Result<(), PathError> {
    let malformed = |msg: String| Err(PathError::new(PathErrorKind::Malformed, raw, msg));
    if raw.is_empty() {
        return malformed(
            "the path is empty; give a path relative to the workspace root, e.g. \
             `src/main.rs` (`.` is the root)"
                .to_owned(),
        );
    }
    if raw.len() > MAX_PATH_BYTES {
        return malformed(format!(
            "the path is {} bytes long; the limit is {MAX_PATH_BYTES} bytes",
            raw.len()
        ));
    }
    let b = raw.as_bytes();
    if b.contains(&0) {
        return malformed(format!(
            "`{}` contains a NUL byte; give a plain path relative to the workspace root",
            shown(raw)
        ));
    }
    let drive = b.len() >= 2
        && b[0].is_ascii_alphabetic()
        && b[1] == b':'
        && matches!(b.get(2), None | Some(b'/' | b'\\'));
    if b[0] == b'/' || b[0] == b'\\' || drive {
        return malformed(format!(
            "`{}` is an absolute path; paths are relative to the workspace root, e.g. \
             `src/main.rs`",
            shown(raw)
        ));
    }
    if b.contains(&b'\\') {
        return malformed(format!(
            "`{}` contains a backslash; separate directories with `/`",
            shown(raw)
        ));
    }
    if raw.chars().any(char::is_control) {
        return malformed(format!(
            "`{}` contains a control character; give a plain path relative to the \
             workspace root",
            shown(raw)
        ));
    }
    if let Some(seg) = raw.split('/').find(|s| s.len() > MAX_SEGMENT_BYTES) {
        return malformed(format!(
            "`{}` has a name of {} bytes; the limit is {MAX_SEGMENT_BYTES} bytes per name",
            shown(raw),
            seg.len()
        ));
    }
    Ok(())
}

/// `raw` as quoted in a message: clipped, control characters and backticks
/// escaped.
fn shown(raw: &str) -> String {
    let clipped = clip_bytes(raw, MAX_SHOWN_BYTES);
    let mut out = String::with_capacity(clipped.len());
    for c in clipped.chars() {
        if c == '`' {
            out.push_str("\\`");
        } else if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observation::Retry;
    use std::fs;

    /// A workspace with `src/a.rs`, `src2/b.rs`, `docs/`, `secrets/key`,
    /// `out/`, `README.md`, and an `outside/` sibling.
    struct Fixture {
        _dir: tempfile::TempDir,
        ws: Workspace,
        outside: PathBuf,
    }

    fn fixture() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ws");
        let outside = dir.path().join("outside");
        for d in ["src", "src2", "docs", "secrets", "out", "a/b"] {
            fs::create_dir_all(root.join(d)).unwrap();
        }
        fs::create_dir_all(&outside).unwrap();
        fs::write(root.join("src/a.rs"), "fn a() {}").unwrap();
        fs::write(root.join("src2/b.rs"), "").unwrap();
        fs::write(root.join("secrets/key"), "k").unwrap();
        fs::write(root.join("README.md"), "").unwrap();
        fs::write(outside.join("passwd"), "root").unwrap();
        let ws = Workspace::open(&root).unwrap();
        Fixture {
            _dir: dir,
            ws,
            outside,
        }
    }

    fn grants(f: &Fixture, read: &[&str], write: &[&str]) -> Grants {
        Grants::new(&f.ws, read, write).unwrap()
    }

    fn kind(r: Result<ResolvedPath, PathError>) -> PathErrorKind {
        r.expect_err("should be refused").kind
    }

    #[cfg(unix)]
    fn symlink(target: impl AsRef<Path>, link: impl AsRef<Path>) {
        std::os::unix::fs::symlink(target, link).unwrap();
    }

    // ---- RelPath ----

    #[test]
    fn parse_normalizes_lexically() {
        for (raw, want) in [
            ("src", "src"),
            ("src/", "src"),
            ("./src//a.rs", "src/a.rs"),
            ("a/./b", "a/b"),
            ("src/../etc", "etc"),
            ("a/b/../../c", "c"),
            (".", "."),
            ("./", "."),
            ("src/..", "."),
            ("...", "..."),
            ("a..b/.c", "a..b/.c"),
            ("日本/語", "日本/語"),
        ] {
            assert_eq!(RelPath::parse(raw).unwrap().as_str(), want, "{raw}");
        }
    }

    #[test]
    fn parse_rejects_escapes() {
        for raw in ["..", "../etc/passwd", "src/../../x", "./../x", "a/../.."] {
            let e = RelPath::parse(raw).unwrap_err();
            assert_eq!(e.kind, PathErrorKind::OutsideWorkspace, "{raw}");
            assert!(e.message.contains("leaves the workspace"), "{}", e.message);
            assert_eq!(e.code(), ErrorCode::Denied);
        }
    }

    #[test]
    fn parse_rejects_malformed() {
        let long = "a/".repeat(2100);
        let long_seg = "x".repeat(256);
        for raw in [
            "",
            "a\0b",
            "/etc/passwd",
            "/",
            "C:\\Windows",
            "c:/x",
            "C:",
            "\\\\server\\share",
            "src\\main.rs",
            "a\nb",
            "a\x1b[31mb",
            long.as_str(),
            long_seg.as_str(),
        ] {
            let e = RelPath::parse(raw).unwrap_err();
            assert_eq!(e.kind, PathErrorKind::Malformed, "{raw:?}");
            assert_eq!(e.code(), ErrorCode::InvalidArguments);
            assert!(e.message.len() < 600, "{}", e.message.len());
            assert!(!e.message.contains('\0') && !e.message.contains('\n'));
        }
        // Exactly at the limits is fine.
        assert!(RelPath::parse(&"x".repeat(255)).is_ok());
        let at_limit = "abc/".repeat(1024);
        assert_eq!(at_limit.len(), MAX_PATH_BYTES);
        assert!(RelPath::parse(&at_limit).is_ok());
        let over = format!("{at_limit}x");
        assert_eq!(
            RelPath::parse(&over).unwrap_err().kind,
            PathErrorKind::Malformed
        );
        // A colon elsewhere is an ordinary character.
        assert!(RelPath::parse("a:b").is_ok());
        assert!(RelPath::parse("ab:/c").is_ok());
    }

    #[test]
    fn covers_by_whole_segment() {
        let p = |s: &str| RelPath::parse(s).unwrap();
        assert!(p("src").covers(&p("src")));
        assert!(p("src").covers(&p("src/a")));
        assert!(!p("src").covers(&p("src2")));
        assert!(!p("src").covers(&p("src2/a")));
        assert!(!p("src/a").covers(&p("src")));
        assert!(p(".").covers(&p("anything/at/all")));
        assert!(p(".").covers(&p(".")));
        assert!(!p("src").covers(&p(".")));
        assert_eq!(p(".").guest(), "/workspace");
        assert_eq!(p("src/a").guest(), "/workspace/src/a");
        assert_eq!(p(".").segments().count(), 0);
    }

    // ---- Workspace::open ----

    #[test]
    fn open_requires_an_existing_directory() {
        let dir = tempfile::tempdir().unwrap();
        let e = Workspace::open(&dir.path().join("missing")).unwrap_err();
        assert_eq!(e.kind, PathErrorKind::Io);
        fs::write(dir.path().join("file"), "").unwrap();
        let e = Workspace::open(&dir.path().join("file")).unwrap_err();
        assert_eq!(e.kind, PathErrorKind::Io);
        assert_eq!(e.code(), ErrorCode::Internal);
        let ws = Workspace::open(&dir.path().join(".")).unwrap();
        assert_eq!(ws.root(), fs::canonicalize(dir.path()).unwrap());
    }

    // ---- resolve ----

    #[test]
    fn resolves_granted_paths() {
        let f = fixture();
        let g = grants(&f, &["src"], &[]);
        let r = f.ws.resolve("src/a.rs", Access::Read, &g).unwrap();
        assert_eq!(r.rel.as_str(), "src/a.rs");
        assert_eq!(r.host, f.ws.root().join("src/a.rs"));
        assert!(r.exists);
        assert_eq!(r.guest(), "/workspace/src/a.rs");
        let r = f.ws.resolve("./src/./a.rs", Access::Read, &g).unwrap();
        assert_eq!(r.rel.as_str(), "src/a.rs");
        let r = f.ws.resolve("src", Access::Read, &g).unwrap();
        assert_eq!(r.rel.as_str(), "src");
    }

    #[test]
    fn src_grant_does_not_cover_src2() {
        let f = fixture();
        let g = grants(&f, &["src"], &[]);
        let e = f.ws.resolve("src2/b.rs", Access::Read, &g).unwrap_err();
        assert_eq!(
            e.kind,
            PathErrorKind::NotGranted {
                needed: Access::Read,
                granted: None
            }
        );
        assert_eq!(e.code(), ErrorCode::Denied);
        assert!(
            e.message
                .contains("`src2/b.rs` is outside the granted paths (read: src; write: none)"),
            "{}",
            e.message
        );
        // Who to ask is the advice's part, by reader (crate::messages).
        assert!(e.message.ends_with("it needs read access"), "{}", e.message);
        assert!(!e.message.contains("ask the user"), "{}", e.message);
    }

    #[test]
    fn dot_dot_inside_the_workspace_is_checked_against_grants() {
        let f = fixture();
        let g = grants(&f, &["src"], &[]);
        // src/../secrets/key is secrets/key: inside the workspace, not granted.
        assert!(matches!(
            kind(f.ws.resolve("src/../secrets/key", Access::Read, &g)),
            PathErrorKind::NotGranted { .. }
        ));
        // src/../etc: inside the workspace lexically, not granted.
        assert!(matches!(
            kind(f.ws.resolve("src/../etc", Access::Read, &g)),
            PathErrorKind::NotGranted { .. }
        ));
        let all = grants(&f, &["."], &[]);
        let r = f.ws.resolve("src/../etc", Access::Read, &all).unwrap();
        assert_eq!(r.rel.as_str(), "etc");
        assert!(!r.exists);
        let r = f.ws.resolve("a/./b", Access::Read, &all).unwrap();
        assert_eq!(r.rel.as_str(), "a/b");
        assert!(r.exists);
    }

    #[test]
    fn escapes_and_absolute_paths_are_refused() {
        let f = fixture();
        let all = grants(&f, &["."], &["."]);
        assert_eq!(
            kind(f.ws.resolve("..", Access::Read, &all)),
            PathErrorKind::OutsideWorkspace
        );
        let e =
            f.ws.resolve("../outside/passwd", Access::Read, &all)
                .unwrap_err();
        assert_eq!(e.kind, PathErrorKind::OutsideWorkspace);
        assert_eq!(
            e.message,
            "`../outside/passwd` leaves the workspace; paths are relative to the workspace \
             root and cannot go above it"
        );
        let e = f.ws.resolve("/etc/passwd", Access::Read, &all).unwrap_err();
        assert_eq!(e.kind, PathErrorKind::Malformed);
        assert!(e.message.contains("absolute path"));
    }

    #[test]
    fn root_is_dot() {
        let f = fixture();
        let all = grants(&f, &["."], &[]);
        for raw in [".", "./", "src/.."] {
            let r = f.ws.resolve(raw, Access::Read, &all).unwrap();
            assert_eq!(r.rel.as_str(), ".");
            assert!(r.rel.is_root());
            assert_eq!(r.host, f.ws.root());
            assert_eq!(r.guest(), "/workspace");
        }
        let src = grants(&f, &["src"], &[]);
        assert!(f.ws.resolve(".", Access::Read, &src).is_err());
    }

    #[test]
    fn nonexistent_file_under_a_granted_dir_is_fine() {
        let f = fixture();
        let g = grants(&f, &[], &["out"]);
        let r =
            f.ws.resolve("out/new/deep/file.txt", Access::Write, &g)
                .unwrap();
        assert_eq!(r.rel.as_str(), "out/new/deep/file.txt");
        assert_eq!(r.host, f.ws.root().join("out/new/deep/file.txt"));
        assert!(!r.exists);
        // A missing path under a file: resolved, the tool reports ENOTDIR.
        let all = grants(&f, &["."], &[]);
        let r = f.ws.resolve("README.md/x", Access::Read, &all).unwrap();
        assert_eq!(r.rel.as_str(), "README.md/x");
        assert!(!r.exists);
    }

    #[test]
    fn write_to_a_read_only_grant_is_denied() {
        let f = fixture();
        let g = grants(&f, &["src", "docs"], &["out"]);
        let e = f.ws.resolve("src/a.rs", Access::Write, &g).unwrap_err();
        assert_eq!(
            e.kind,
            PathErrorKind::NotGranted {
                needed: Access::Write,
                granted: Some(Access::Read)
            }
        );
        assert!(
            e.message
                .contains("`src/a.rs` is granted read-only (read: src, docs; write: out)"),
            "{}",
            e.message
        );
        // Write implies read.
        assert!(f.ws.resolve("out/x", Access::Read, &g).is_ok());
        assert!(f.ws.resolve("out/x", Access::Write, &g).is_ok());
        // Secrets: not granted at all.
        let e = f.ws.resolve("secrets/key", Access::Read, &g).unwrap_err();
        assert_eq!(
            e.message,
            "`secrets/key` is outside the granted paths (read: src, docs; write: out): it \
             needs read access"
        );
    }

    #[test]
    fn no_grants_grant_nothing() {
        let f = fixture();
        let g = grants(&f, &[], &[]);
        let e = f.ws.resolve("src/a.rs", Access::Read, &g).unwrap_err();
        assert!(e.message.contains("nothing is granted"), "{}", e.message);
        assert!(g.preopens().is_empty());
    }

    #[test]
    fn malformed_inputs_via_resolve() {
        let f = fixture();
        let g = grants(&f, &["."], &["."]);
        let long = "a/".repeat(3000);
        for raw in ["", "a\0b", "/etc/passwd", "C:\\x", long.as_str()] {
            let e = f.ws.resolve(raw, Access::Read, &g).unwrap_err();
            assert_eq!(e.kind, PathErrorKind::Malformed, "{raw:?}");
            assert!(e.path.len() <= MAX_SHOWN_BYTES * 2 + 3);
        }
    }

    #[cfg(unix)]
    #[test]
    fn symlink_inside_pointing_outside_is_denied() {
        let f = fixture();
        let root = f.ws.root().to_path_buf();
        symlink(&f.outside, root.join("src/escape"));
        symlink(f.outside.join("passwd"), root.join("src/passwd"));
        symlink("../../outside", root.join("src/rel_escape"));
        let g = grants(&f, &["src"], &["src"]);
        for raw in [
            "src/escape/passwd",
            "src/escape",
            "src/passwd",
            "src/rel_escape/passwd",
            // Missing file under an escaping link: still denied.
            "src/escape/new.txt",
        ] {
            let e = f.ws.resolve(raw, Access::Read, &g).unwrap_err();
            assert_eq!(e.kind, PathErrorKind::OutsideWorkspace, "{raw}");
            assert_eq!(e.code(), ErrorCode::Denied);
            assert!(e.message.contains("symbolic link"), "{}", e.message);
        }
    }

    #[cfg(unix)]
    #[test]
    fn symlink_inside_pointing_inside_is_resolved() {
        let f = fixture();
        let root = f.ws.root().to_path_buf();
        symlink("../docs", root.join("src/docs_link"));
        symlink("a.rs", root.join("src/alias.rs"));
        let g = grants(&f, &["src", "docs"], &[]);
        let r = f.ws.resolve("src/alias.rs", Access::Read, &g).unwrap();
        assert_eq!(r.rel.as_str(), "src/a.rs");
        let r =
            f.ws.resolve("src/docs_link/new.md", Access::Read, &g)
                .unwrap();
        assert_eq!(r.rel.as_str(), "docs/new.md");
        assert_eq!(r.host, root.join("docs/new.md"));
        // The same link, but its target is not granted: denied, and the
        // message names where it leads.
        let only_src = grants(&f, &["src"], &[]);
        let e =
            f.ws.resolve("src/docs_link/x.md", Access::Read, &only_src)
                .unwrap_err();
        assert!(matches!(e.kind, PathErrorKind::NotGranted { .. }));
        assert!(
            e.message.contains("resolves to `docs/x.md`"),
            "{}",
            e.message
        );
    }

    #[cfg(unix)]
    #[test]
    fn dangling_symlinks_and_loops_are_refused() {
        let f = fixture();
        let root = f.ws.root().to_path_buf();
        symlink("/nonexistent/target", root.join("out/dangling_abs"));
        symlink("missing", root.join("out/dangling_rel"));
        symlink("loop_b", root.join("out/loop_a"));
        symlink("loop_a", root.join("out/loop_b"));
        symlink("../../outside/missing", root.join("out/dangling_out"));
        let g = grants(&f, &[], &["out"]);
        for raw in [
            "out/dangling_rel",
            "out/dangling_rel/x",
            "out/loop_a",
            "out/loop_a/x",
        ] {
            let e = f.ws.resolve(raw, Access::Write, &g).unwrap_err();
            assert_eq!(e.kind, PathErrorKind::UnresolvableLink, "{raw}");
            assert_eq!(e.code(), ErrorCode::Denied);
        }
        // A dangling link whose target is outside: where it points is
        // known, and it is outside.
        for raw in ["out/dangling_abs", "out/dangling_abs/x", "out/dangling_out"] {
            let e = f.ws.resolve(raw, Access::Write, &g).unwrap_err();
            assert_eq!(e.kind, PathErrorKind::OutsideWorkspace, "{raw}");
            assert_eq!(e.code(), ErrorCode::Denied);
        }
    }

    #[test]
    fn absolute_links_into_the_workspace_are_resolved() {
        let f = fixture();
        let root = f.ws.root().to_path_buf();
        symlink(root.join("docs"), root.join("src/abs_docs"));
        symlink(root.join("src/../secrets"), root.join("src/abs_dotdot"));
        let g = grants(&f, &["src", "docs"], &[]);
        let r = f.ws.resolve("src/abs_docs/x.md", Access::Read, &g).unwrap();
        assert_eq!(r.rel.as_str(), "docs/x.md");
        let e =
            f.ws.resolve("src/abs_dotdot/key", Access::Read, &g)
                .unwrap_err();
        assert!(matches!(e.kind, PathErrorKind::NotGranted { .. }), "{e:?}");
        assert!(
            e.message.contains("resolves to `secrets/key`"),
            "{}",
            e.message
        );
    }

    #[test]
    fn fifos_sockets_and_devices_are_refused_without_opening_them() {
        let f = fixture();
        let root = f.ws.root().to_path_buf();
        let fifo = root.join("src/fifo");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        symlink("fifo", root.join("src/to_fifo"));
        symlink("/dev/null", root.join("src/devnull"));
        let sock = std::os::unix::net::UnixListener::bind(root.join("src/sock")).unwrap();
        let g = grants(&f, &["."], &["."]);
        for (raw, kind) in [
            ("src/fifo", Kind::Fifo),
            ("src/to_fifo", Kind::Fifo),
            ("src/sock", Kind::Socket),
        ] {
            // Would block forever if the check opened the FIFO for reading.
            let e = f.ws.resolve(raw, Access::Read, &g).unwrap_err();
            assert_eq!(e.kind, PathErrorKind::NotAFile { kind }, "{raw}");
            assert_eq!(e.code(), ErrorCode::InvalidArguments);
            let info = e.to_error_info(Some("/path"));
            assert!(info.correctable);
            assert_eq!(info.actual.as_deref(), Some(kind.describe()));
            assert!(e.message.contains("not a regular file"), "{}", e.message);
        }
        // A link to a device outside the workspace is outside first.
        assert_eq!(
            kind(f.ws.resolve("src/devnull", Access::Read, &g)),
            PathErrorKind::OutsideWorkspace
        );
        drop(sock);
    }

    #[test]
    fn grants_open_beneath_the_root_and_never_through_a_link() {
        let f = fixture();
        let root = f.ws.root().to_path_buf();
        let g = grants(&f, &["src"], &["out"]);
        let p = g.preopens();
        let out = f.ws.open_grant(&p[0].rel).unwrap();
        assert!(out.same_dir(&crate::opendir::OpenDir::open(&root.join("out")).unwrap()));
        // Swap `src` for a link to outside after the grant was made.
        fs::rename(root.join("src"), root.join("src.moved")).unwrap();
        symlink(&f.outside, root.join("src"));
        let e = f.ws.open_grant(&p[1].rel).unwrap_err();
        assert_eq!(e.kind, PathErrorKind::GrantUnavailable);
        assert_eq!(e.code(), ErrorCode::Denied);
        assert!(e.message.contains("symbolic link"), "{}", e.message);
        // A relative link that stays inside is refused as well: no link is
        // ever followed to a mount.
        fs::remove_file(root.join("src")).unwrap();
        symlink("src.moved", root.join("src"));
        assert_eq!(
            f.ws.open_grant(&p[1].rel).unwrap_err().kind,
            PathErrorKind::GrantUnavailable
        );
        fs::remove_file(root.join("src")).unwrap();
        let e = f.ws.open_grant(&p[1].rel).unwrap_err();
        assert!(e.message.contains("no longer exists"), "{}", e.message);
        // The root itself: the descriptor opened with the workspace.
        assert!(f
            .ws
            .open_grant(&RelPath::root())
            .unwrap()
            .same_dir(f.ws.dir()));
    }

    #[test]
    fn lookups_stay_in_the_opened_root_when_its_path_is_swapped() {
        let f = fixture();
        let root = f.ws.root().to_path_buf();
        let moved = root.with_file_name("ws.moved");
        fs::rename(&root, &moved).unwrap();
        symlink(&f.outside, &root);
        let g = grants(&f, &["."], &[]);
        // `passwd` exists only outside; the workspace's own files are still
        // found where the root descriptor points.
        let r = f.ws.resolve("passwd", Access::Read, &g).unwrap();
        assert!(!r.exists);
        assert!(f.ws.resolve("src/a.rs", Access::Read, &g).unwrap().exists);
    }

    #[cfg(unix)]
    #[test]
    fn workspace_root_behind_a_symlink() {
        let f = fixture();
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("ws_link");
        symlink(f.ws.root(), &link);
        let ws = Workspace::open(&link).unwrap();
        assert_eq!(ws.root(), f.ws.root());
        let g = Grants::new(&ws, &["src"], &[]).unwrap();
        assert!(ws.resolve("src/a.rs", Access::Read, &g).is_ok());
    }

    // ---- grants and preopens ----

    #[test]
    fn grants_are_normalized_and_checked() {
        let f = fixture();
        let g = grants(&f, &["./src/", "src", "docs//"], &["out"]);
        assert_eq!(
            g.read().iter().map(RelPath::as_str).collect::<Vec<_>>(),
            ["src", "docs"]
        );
        assert_eq!(g.write()[0].as_str(), "out");
        assert_eq!(
            Grants::new(&f.ws, &["../outside"], &[]).unwrap_err().kind,
            PathErrorKind::OutsideWorkspace
        );
        assert_eq!(
            Grants::new(&f.ws, &["/etc"], &[]).unwrap_err().kind,
            PathErrorKind::Malformed
        );
        assert_eq!(
            Grants::new(&f.ws, &[""], &[]).unwrap_err().kind,
            PathErrorKind::Malformed
        );
        let e = Grants::new(&f.ws, &[], &["nope"]).unwrap_err();
        assert_eq!(e.kind, PathErrorKind::BadGrant);
        assert!(e.message.contains("does not exist"));
        let e = Grants::new(&f.ws, &["README.md"], &[]).unwrap_err();
        assert_eq!(e.kind, PathErrorKind::BadGrant);
        // A file: the message says so and names the directory to grant.
        assert!(e.message.contains("`README.md` is a file"), "{}", e.message);
        assert!(e.message.contains("holds it (`.`)"), "{}", e.message);
    }

    #[cfg(unix)]
    #[test]
    fn grant_through_a_symlink() {
        let f = fixture();
        symlink(&f.outside, f.ws.root().join("ext"));
        symlink("docs", f.ws.root().join("manual"));
        assert_eq!(
            Grants::new(&f.ws, &["ext"], &[]).unwrap_err().kind,
            PathErrorKind::OutsideWorkspace
        );
        let g = grants(&f, &["manual"], &[]);
        assert_eq!(g.read()[0].as_str(), "docs");
        assert_eq!(g.preopens()[0].host, f.ws.root().join("docs"));
    }

    #[test]
    fn preopens_mirror_the_grants() {
        let f = fixture();
        let g = grants(&f, &["src", "docs", "src"], &["out", "out/"]);
        let p = g.preopens();
        let root = f.ws.root();
        assert_eq!(
            p,
            vec![
                Preopen {
                    rel: RelPath::parse("docs").unwrap(),
                    host: root.join("docs"),
                    guest: "/workspace/docs".into(),
                    writable: false
                },
                Preopen {
                    rel: RelPath::parse("out").unwrap(),
                    host: root.join("out"),
                    guest: "/workspace/out".into(),
                    writable: true
                },
                Preopen {
                    rel: RelPath::parse("src").unwrap(),
                    host: root.join("src"),
                    guest: "/workspace/src".into(),
                    writable: false
                },
            ]
        );
        // The whole workspace.
        let g = grants(&f, &["."], &[]);
        assert_eq!(
            g.preopens(),
            vec![Preopen {
                rel: RelPath::root(),
                host: root.to_path_buf(),
                guest: "/workspace".into(),
                writable: false
            }]
        );
    }

    #[test]
    fn write_grant_makes_a_prefix_writable_and_overlaps_stay() {
        let f = fixture();
        // Same prefix read and write: one writable mount.
        let g = grants(&f, &["src"], &["src"]);
        assert_eq!(g.preopens().len(), 1);
        assert!(g.preopens()[0].writable);
        // A read grant inside a write grant adds nothing and would shadow it.
        let g = grants(&f, &["src"], &["."]);
        assert!(g.read().is_empty());
        assert!(f.ws.resolve("src/a.rs", Access::Write, &g).is_ok());
        assert_eq!(g.preopens().len(), 1);
        // A write grant inside a read grant: both mounts, the longer wins.
        let g = grants(&f, &["."], &["out"]);
        let p = g.preopens();
        assert_eq!(p.len(), 2);
        assert_eq!((p[0].guest.as_str(), p[0].writable), ("/workspace", false));
        assert_eq!(
            (p[1].guest.as_str(), p[1].writable),
            ("/workspace/out", true)
        );
        assert!(f.ws.resolve("out/x", Access::Write, &g).is_ok());
        assert!(f.ws.resolve("src/a.rs", Access::Write, &g).is_err());
        // Nested read grants overlap; both kept.
        let g = grants(&f, &[".", "src"], &[]);
        assert_eq!(g.preopens().len(), 2);
    }

    // ---- mapping to the observation ----

    #[test]
    fn errors_map_to_observation_errors() {
        let f = fixture();
        let g = grants(&f, &["src"], &[]);
        let e = f.ws.resolve("secrets/key", Access::Read, &g).unwrap_err();
        let info = e.to_error_info(Some("/path"));
        assert_eq!(info.code, "denied");
        assert!(!info.correctable);
        assert_eq!(info.retry, Retry::Never);
        assert_eq!(info.field.as_deref(), Some("/path"));
        assert_eq!(info.details.as_ref().unwrap()["needed"], "read");
        assert_eq!(
            info.details.as_ref().unwrap()["granted"],
            serde_json::Value::Null
        );

        let e = f.ws.resolve("", Access::Read, &g).unwrap_err();
        let info = e.to_error_info(Some("/path"));
        assert_eq!(info.code, "invalid_arguments");
        assert!(info.correctable);
        assert_eq!(info.retry, Retry::AfterCorrection);
        assert!(info.expected.is_some());
        assert_eq!(info.actual.as_deref(), Some("``"));

        let obs = crate::observation::Observation::failure(
            "c",
            "read_file",
            crate::descriptor::SideEffect::ReadOnly,
            f.ws.resolve("../x", Access::Read, &g)
                .unwrap_err()
                .to_error_info(Some("/path")),
        );
        assert_eq!(obs.status, crate::observation::Status::Denied);
        assert!(obs.text.contains("permission matter"));
    }

    #[test]
    fn messages_escape_and_clip_hostile_paths() {
        let f = fixture();
        let g = grants(&f, &["src"], &[]);
        let e = f.ws.resolve("docs/`x`", Access::Read, &g).unwrap_err();
        assert!(e.message.contains("docs/\\`x\\`"), "{}", e.message);
        let long = format!("docs/{}", "é".repeat(1000));
        let e = f.ws.resolve(&long, Access::Read, &g).unwrap_err();
        assert!(e.message.len() < 700, "{}", e.message.len());
    }
}
