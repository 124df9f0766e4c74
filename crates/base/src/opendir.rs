//! Open directories, and lookups beneath them that never follow a symbolic
//! link by accident.
//!
//! A path is a promise about *now*; an open descriptor stays the same
//! directory whatever is renamed or replaced afterwards. So the host opens
//! the workspace root once ([`OpenDir::open`], when the workspace is opened)
//! and reaches everything inside it from that descriptor, never by walking
//! a host path again:
//!
//! - [`OpenDir::open_beneath`] opens a directory below it without following
//!   a symbolic link at any step: `openat2` with `RESOLVE_BENEATH |
//!   RESOLVE_NO_SYMLINKS` (where the kernel lacks `openat2`, one segment at a
//!   time with `O_NOFOLLOW`). A link anywhere on the way fails with `ELOOP`,
//!   a way out with `EXDEV`. Grants are opened like this for every call, and
//!   the open directory is what the sandbox mounts.
//! - [`OpenDir::entry`] opens one name without following it (`O_PATH |
//!   O_NOFOLLOW`, which never blocks, not even on a FIFO) and says what it
//!   is ([`Kind`]); [`Entry::read_link`] reads a link's target from that same
//!   open entry, so the type and the target cannot come from two different
//!   files. [`crate::paths`] walks path arguments with it.
//! - [`OpenDir::lookup_plain`] is the one-call common case: a path without
//!   any symbolic link, opened in one `openat2`.
//! - [`OpenDir::fd_path`] names an open directory `/proc/self/fd/N` for an
//!   API that only takes a path (wasmtime-wasi's preopens): opening that
//!   name opens exactly this directory, wherever it has been moved since.
//!
//! Linux only (`O_PATH`, `openat2`, `/proc/self/fd`), like the rest of the
//! sandbox.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use rustix::fs::{FileType, Mode, OFlags, ResolveFlags, CWD};
use rustix::io::Errno;

/// What a directory entry is, read from the entry itself (`fstat`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Dir,
    File,
    Symlink,
    Fifo,
    Socket,
    CharDevice,
    BlockDevice,
    Unknown,
}

impl Kind {
    fn of(ty: FileType) -> Kind {
        match ty {
            FileType::Directory => Kind::Dir,
            FileType::RegularFile => Kind::File,
            FileType::Symlink => Kind::Symlink,
            FileType::Fifo => Kind::Fifo,
            FileType::Socket => Kind::Socket,
            FileType::CharacterDevice => Kind::CharDevice,
            FileType::BlockDevice => Kind::BlockDevice,
            FileType::Unknown => Kind::Unknown,
        }
    }

    /// Whether a tool may open it: a regular file or a directory. FIFOs,
    /// sockets and devices are not (opening one can block forever, or
    /// reach something that is not a file at all).
    pub fn is_plain(self) -> bool {
        matches!(self, Kind::Dir | Kind::File)
    }

    /// "a named pipe (FIFO)", "a socket", … for messages.
    pub fn describe(self) -> &'static str {
        match self {
            Kind::Dir => "a directory",
            Kind::File => "a regular file",
            Kind::Symlink => "a symbolic link",
            Kind::Fifo => "a named pipe (FIFO)",
            Kind::Socket => "a socket",
            Kind::CharDevice => "a character device",
            Kind::BlockDevice => "a block device",
            Kind::Unknown => "a file of unknown type",
        }
    }
}

/// An open directory (`O_PATH`), shared: clones are the same descriptor.
#[derive(Debug, Clone)]
pub struct OpenDir(Arc<OwnedFd>);

impl OpenDir {
    /// Opens the directory at a host path, following symbolic links in it:
    /// for paths the host chooses (the workspace root), never for paths
    /// inside a workspace.
    pub fn open(path: &Path) -> io::Result<OpenDir> {
        let fd = rustix::fs::openat(
            CWD,
            path,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        Ok(OpenDir(Arc::new(fd)))
    }

    /// Opens the directory `segs` (plain names, no `.`/`..`/empty; none for
    /// this directory itself) beneath this one without following a symbolic
    /// link at any step. `ELOOP` or `ENOTDIR`: a link (or something that is
    /// not a directory) on the way; `ENOENT`: missing.
    pub fn open_beneath(&self, segs: &[&str]) -> io::Result<OpenDir> {
        if segs.is_empty() {
            return Ok(self.clone());
        }
        let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        match openat2(self.as_fd(), &segs.join("/"), flags) {
            Err(Errno::NOSYS) => self.walk_beneath(segs),
            other => Ok(OpenDir(Arc::new(other?))),
        }
    }

    /// [`open_beneath`](Self::open_beneath) without `openat2`: one segment
    /// at a time, each opened with `O_NOFOLLOW`.
    fn walk_beneath(&self, segs: &[&str]) -> io::Result<OpenDir> {
        let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let mut dir = self.clone();
        for seg in segs {
            check_name(seg)?;
            let fd = rustix::fs::openat(dir.as_fd(), *seg, flags, Mode::empty())?;
            dir = OpenDir(Arc::new(fd));
        }
        Ok(dir)
    }

    /// Opens `rel` (a `/`-separated path of plain names) beneath this
    /// directory only if no component is a symbolic link, and says what it
    /// is; a final symbolic link is returned as such, not followed. Any
    /// other case (a link on the way, a missing component, no `openat2`)
    /// is an error, and the caller walks with [`entry`](Self::entry).
    pub fn lookup_plain(&self, rel: &str) -> io::Result<Entry> {
        let fd = openat2(
            self.as_fd(),
            rel,
            OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        )?;
        Entry::from_fd(fd)
    }

    /// Opens the regular file `rel` beneath this directory for reading,
    /// following no symbolic link at any step (`openat2`, non-blocking, so
    /// a FIFO swapped in cannot stall the host), with its size. Anything
    /// but a regular file is `EINVAL`; no `openat2` is `ENOSYS`.
    pub fn open_file_beneath(&self, rel: &str) -> io::Result<(std::fs::File, u64)> {
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
        let fd = openat2(self.as_fd(), rel, flags | OFlags::NOCTTY)?;
        let stat = rustix::fs::fstat(&fd)?;
        if Kind::of(FileType::from_raw_mode(stat.st_mode)) != Kind::File {
            return Err(Errno::INVAL.into());
        }
        Ok((std::fs::File::from(fd), stat.st_size as u64))
    }

    /// Opens the entry `name` (one plain name) of this directory without
    /// following it; never blocks.
    pub fn entry(&self, name: &str) -> io::Result<Entry> {
        check_name(name)?;
        let fd = rustix::fs::openat(
            self.as_fd(),
            name,
            OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        Entry::from_fd(fd)
    }

    /// Opens `rel` (a `/`-separated path of plain names; empty or `.` for
    /// this directory) beneath this directory for reading without
    /// `openat2`, following no symbolic link at any step, and says what it
    /// found. Only a regular file is opened for reading (through the very
    /// entry looked at, so nothing swapped in since is opened); anything
    /// else, a final symbolic link included, comes back unopened with its
    /// kind. A link or a non-directory on the way is `ELOOP` or `ENOTDIR`.
    /// Where `openat2` is missing, this is how a file beneath a mount is
    /// opened without being able to leave it; a caller that must follow
    /// links leaves such a path to a resolver that can.
    pub fn open_read_plain(&self, rel: &str) -> io::Result<(Option<std::fs::File>, Kind)> {
        let segs: Vec<&str> = rel
            .split('/')
            .filter(|s| !s.is_empty() && *s != ".")
            .collect();
        let Some((name, parents)) = segs.split_last() else {
            return Ok((None, Kind::Dir));
        };
        let entry = self.walk_beneath(parents)?.entry(name)?;
        if entry.kind != Kind::File {
            return Ok((None, entry.kind));
        }
        Ok((Some(entry.open_read()?), Kind::File))
    }

    /// A new descriptor of the same open directory (for a native sandbox
    /// to bind, [`toolhost_exec::MountSource::Fd`]).
    pub fn try_clone_fd(&self) -> io::Result<OwnedFd> {
        self.0.try_clone()
    }

    /// `/proc/self/fd/N`: a path that opens exactly this directory as long
    /// as this handle (or a clone) is alive.
    pub fn fd_path(&self) -> PathBuf {
        proc_fd_path(&self.0)
    }

    /// Whether two handles are the same directory (device and inode).
    pub fn same_dir(&self, other: &OpenDir) -> bool {
        match (rustix::fs::fstat(self), rustix::fs::fstat(other)) {
            (Ok(a), Ok(b)) => a.st_dev == b.st_dev && a.st_ino == b.st_ino,
            _ => false,
        }
    }
}

impl AsFd for OpenDir {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
}

/// One opened directory entry (`O_PATH`, not followed).
#[derive(Debug)]
pub struct Entry {
    fd: OwnedFd,
    kind: Kind,
}

impl Entry {
    fn from_fd(fd: OwnedFd) -> io::Result<Entry> {
        let stat = rustix::fs::fstat(&fd)?;
        Ok(Entry {
            kind: Kind::of(FileType::from_raw_mode(stat.st_mode)),
            fd,
        })
    }

    /// What the entry is.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// This very entry opened again for reading (through
    /// `/proc/self/fd/N`), non-blocking and without acquiring a terminal.
    pub fn open_read(&self) -> io::Result<std::fs::File> {
        let fd = rustix::fs::open(
            proc_fd_path(&self.fd),
            OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        Ok(std::fs::File::from(fd))
    }

    /// The target of a symbolic link, read from this very entry.
    pub fn read_link(&self) -> io::Result<PathBuf> {
        let target = rustix::fs::readlinkat(&self.fd, "", Vec::new())?;
        Ok(PathBuf::from(std::ffi::OsStr::from_bytes(
            target.as_bytes(),
        )))
    }

    /// The entry as a directory to continue from; `ENOTDIR` otherwise.
    pub fn into_dir(self) -> io::Result<OpenDir> {
        if self.kind != Kind::Dir {
            return Err(Errno::NOTDIR.into());
        }
        Ok(OpenDir(Arc::new(self.fd)))
    }
}

/// What `path` names beneath `dir`, looked at without opening it for I/O
/// (`O_PATH`, never blocks): resolved as wasmtime-wasi resolves a guest's
/// paths (`openat2` with `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS`: `..` and
/// symbolic links that stay beneath `dir` are followed), a final link only
/// when `follow`. `ENOSYS` without `openat2`.
pub fn kind_beneath(dir: impl AsFd, path: &str, follow: bool) -> io::Result<Kind> {
    let mut flags = OFlags::PATH | OFlags::CLOEXEC;
    if !follow {
        flags |= OFlags::NOFOLLOW;
    }
    let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS;
    let fd = openat2_with(dir.as_fd(), path, flags, resolve)?;
    Ok(Entry::from_fd(fd)?.kind())
}

/// Opens `path` beneath `dir` for reading as wasmtime-wasi would open it
/// for a guest (`openat2` with `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS`:
/// `..` and symbolic links are followed only while they stay beneath
/// `dir`; a way out is `EXDEV`), non-blocking (a FIFO never stalls the
/// host) and without acquiring a terminal, and says what it opened.
/// `ENOSYS` without `openat2`.
pub fn open_read_beneath(dir: impl AsFd, path: &str) -> io::Result<(std::fs::File, Kind)> {
    let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS;
    let fd = openat2_with(dir.as_fd(), path, flags, resolve)?;
    let stat = rustix::fs::fstat(&fd)?;
    let kind = Kind::of(FileType::from_raw_mode(stat.st_mode));
    Ok((std::fs::File::from(fd), kind))
}

/// `/proc/self/fd/N` of the open descriptor `fd`: a path that opens the
/// very file or directory it holds.
fn proc_fd_path(fd: &OwnedFd) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()))
}

/// A single plain name: not empty, `.`, `..`, and without `/` or NUL.
fn check_name(name: &str) -> io::Result<()> {
    if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\0']) {
        return Err(Errno::INVAL.into());
    }
    Ok(())
}

/// `openat2(dir, path, flags, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`, with
/// `ENOSYS` when the kernel (or a seccomp policy) does not offer it.
fn openat2(dir: BorrowedFd<'_>, path: &str, flags: OFlags) -> Result<OwnedFd, Errno> {
    let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
    openat2_with(dir, path, flags, resolve)
}

/// Set once `openat2` answered `ENOSYS`: it is not tried again.
static UNAVAILABLE: AtomicBool = AtomicBool::new(false);

/// Makes this process behave as on a kernel without `openat2` (every
/// lookup takes its fallback). For tests that run in a process of their
/// own; there is no way back.
#[doc(hidden)]
pub fn assume_no_openat2() {
    UNAVAILABLE.store(true, Ordering::Relaxed);
}

/// `openat2` with `resolve`; `ENOSYS` when unavailable. `EAGAIN` (a rename
/// raced the lookup) is retried a few times.
fn openat2_with(
    dir: BorrowedFd<'_>,
    path: &str,
    flags: OFlags,
    resolve: ResolveFlags,
) -> Result<OwnedFd, Errno> {
    if UNAVAILABLE.load(Ordering::Relaxed) {
        return Err(Errno::NOSYS);
    }
    let mut tries = 0;
    loop {
        match rustix::fs::openat2(dir, path, flags, Mode::empty(), resolve) {
            Err(Errno::AGAIN) if tries < 4 => tries += 1,
            Err(Errno::NOSYS) => {
                UNAVAILABLE.store(true, Ordering::Relaxed);
                return Err(Errno::NOSYS);
            }
            // Some seccomp policies refuse unknown system calls with EPERM
            // (O_PATH opens fail with EPERM for no other reason).
            Err(Errno::PERM) => return Err(Errno::NOSYS),
            other => return other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    /// Makes a FIFO at `path`.
    fn fifo(path: &Path) {
        rustix::fs::mknodat(CWD, path, FileType::Fifo, Mode::from_raw_mode(0o600), 0).unwrap();
    }

    fn is(e: &io::Error, errno: Errno) -> bool {
        e.raw_os_error() == Some(errno.raw_os_error())
    }

    #[test]
    fn opens_beneath_and_refuses_links_at_every_step() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("a/b")).unwrap();
        symlink(outside.path(), dir.path().join("a/out")).unwrap();
        symlink("b", dir.path().join("a/alias")).unwrap();
        let root = OpenDir::open(dir.path()).unwrap();

        let real_b = OpenDir::open(&dir.path().join("a/b")).unwrap();
        assert!(root.open_beneath(&[]).unwrap().same_dir(&root));
        // With openat2 and with the walk kernels without it get.
        type Open<'a> = &'a dyn Fn(&[&str]) -> io::Result<OpenDir>;
        let ways: [Open; 2] = [&|s| root.open_beneath(s), &|s| root.walk_beneath(s)];
        for open in ways {
            assert!(open(&["a", "b"]).unwrap().same_dir(&real_b));
            for segs in [&["a", "out"][..], &["a", "alias"]] {
                let e = open(segs).unwrap_err();
                // ELOOP from openat2; O_NOFOLLOW|O_DIRECTORY on a link
                // gives ELOOP or ENOTDIR.
                assert!(
                    is(&e, Errno::LOOP) || is(&e, Errno::NOTDIR),
                    "{segs:?}: {e}"
                );
            }
            assert!(is(&open(&["a", "nope"]).unwrap_err(), Errno::NOENT));
            assert!(open(&["..", "ws"]).is_err());
        }
    }

    #[test]
    fn plain_opens_read_regular_files_and_follow_no_link() {
        use std::io::Read as _;
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("a/b")).unwrap();
        std::fs::write(dir.path().join("a/b/f"), "inside").unwrap();
        std::fs::write(outside.path().join("secret"), "outside").unwrap();
        symlink(outside.path(), dir.path().join("a/out")).unwrap();
        symlink(outside.path().join("secret"), dir.path().join("a/leak")).unwrap();
        symlink("b", dir.path().join("a/alias")).unwrap();
        fifo(&dir.path().join("a/p"));
        let root = OpenDir::open(dir.path()).unwrap();

        let (file, kind) = root.open_read_plain("a/b/f").unwrap();
        assert_eq!(kind, Kind::File);
        let mut text = String::new();
        file.unwrap().read_to_string(&mut text).unwrap();
        assert_eq!(text, "inside");
        assert_eq!(root.open_read_plain("./a//b/./f").unwrap().1, Kind::File);
        // Not opened: a final link, a FIFO (no wait for a writer), a directory.
        for (rel, want) in [
            ("a/leak", Kind::Symlink),
            ("a/p", Kind::Fifo),
            ("a/b", Kind::Dir),
            ("", Kind::Dir),
            (".", Kind::Dir),
        ] {
            let (file, kind) = root.open_read_plain(rel).unwrap();
            assert!(file.is_none(), "{rel:?} opened");
            assert_eq!(kind, want, "{rel:?}");
        }
        // A link on the way is refused, whether it leads out or not.
        for rel in ["a/out/secret", "a/alias/f"] {
            let e = root.open_read_plain(rel).unwrap_err();
            assert!(is(&e, Errno::LOOP) || is(&e, Errno::NOTDIR), "{rel}: {e}");
        }
        assert!(root.open_read_plain("a/../a/b/f").is_err());
        assert!(is(
            &root.open_read_plain("a/nope").unwrap_err(),
            Errno::NOENT
        ));
        // A file on the way is not a directory.
        assert!(is(
            &root.open_read_plain("a/b/f/g").unwrap_err(),
            Errno::NOTDIR
        ));
    }

    #[test]
    fn the_handle_follows_the_directory_not_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("sub/f"), "inside").unwrap();
        std::fs::write(outside.path().join("f"), "outside").unwrap();
        let root = OpenDir::open(dir.path()).unwrap();
        let sub = root.open_beneath(&["sub"]).unwrap();
        // Swap: the directory moves away, a link to outside takes its name.
        std::fs::rename(dir.path().join("sub"), dir.path().join("moved")).unwrap();
        symlink(outside.path(), dir.path().join("sub")).unwrap();
        let via_fd = std::fs::read_to_string(sub.fd_path().join("f")).unwrap();
        assert_eq!(via_fd, "inside");
        let e = root.open_beneath(&["sub"]).unwrap_err();
        assert!(is(&e, Errno::LOOP) || is(&e, Errno::NOTDIR), "{e}");
    }

    #[test]
    fn entries_say_what_they_are_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f"), "x").unwrap();
        symlink("f", dir.path().join("l")).unwrap();
        let fifo = dir.path().join("p");
        self::fifo(&fifo);
        let root = OpenDir::open(dir.path()).unwrap();
        assert_eq!(root.entry("f").unwrap().kind(), Kind::File);
        let link = root.entry("l").unwrap();
        assert_eq!(link.kind(), Kind::Symlink);
        assert_eq!(link.read_link().unwrap(), Path::new("f"));
        // Opening a FIFO with O_PATH does not wait for a writer.
        let p = root.entry("p").unwrap();
        assert_eq!(p.kind(), Kind::Fifo);
        assert!(!p.kind().is_plain());
        assert_eq!(root.lookup_plain("p").unwrap().kind(), Kind::Fifo);
        assert_eq!(root.lookup_plain("l").unwrap().kind(), Kind::Symlink);
        for bad in ["", ".", "..", "a/b"] {
            assert!(root.entry(bad).is_err(), "{bad:?}");
        }
        assert!(root.entry("f").unwrap().into_dir().is_err());
        // As a guest's open would resolve them: links followed beneath.
        std::fs::create_dir(dir.path().join("d")).unwrap();
        symlink("../p", dir.path().join("d/to_p")).unwrap();
        assert_eq!(kind_beneath(&root, "d/to_p", true).unwrap(), Kind::Fifo);
        assert_eq!(kind_beneath(&root, "d/to_p", false).unwrap(), Kind::Symlink);
        assert_eq!(kind_beneath(&root, "d/../f", true).unwrap(), Kind::File);
        let d = root.open_beneath(&["d"]).unwrap();
        assert!(kind_beneath(&d, "../f", true).is_err(), "escaped");
    }
}
