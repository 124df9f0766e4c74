//! What a guest may open and create inside its mounts, beyond wasmtime-wasi's
//! own checks (read-only mounts, no way out of a mount).
//!
//! Two `wasi:filesystem/types` methods are shadowed in the linker:
//!
//! - `[method]descriptor.open-at` first looks at what the path names,
//!   beneath the same directory and with the same symlink rule as the open
//!   itself (`openat2` with `RESOLVE_BENEATH`, `O_PATH`, which never
//!   blocks). A FIFO, socket or device is refused with `not-permitted`
//!   before it is opened: opening a FIFO for reading waits for a writer,
//!   possibly forever, inside a system call no deadline can reach. Regular
//!   files and directories (and paths that do not exist, for `create`) go
//!   on to wasmtime-wasi's own `open-at` unchanged. (A FIFO swapped in
//!   between this look and the open is the [`super::deadline`] watchdog's
//!   case.)
//! - `[method]descriptor.symlink-at` always fails with `not-permitted`: a
//!   guest cannot create symbolic links at all, whatever the target. Links
//!   already in the workspace keep working as the host and wasmtime-wasi
//!   resolve them (inside a mount only); but a guest with write access can
//!   no longer plant one where a grant, a path argument or another
//!   session's mount will meet it. Refusing every target (rather than only
//!   targets that leave the mount) is the rule that needs no knowledge of
//!   where a descriptor sits inside its mount, and no tool needs to make
//!   links.
//!
//! `not-permitted` is what wasmtime-wasi itself answers for a write to a
//! read-only mount; a Rust guest sees `io::ErrorKind::PermissionDenied`.

use wasmtime::component::{Linker, Resource};
use wasmtime::StoreContextMut;
use wasmtime_wasi::filesystem::{Descriptor, WasiFilesystemView};
use wasmtime_wasi::p2::bindings::sync::filesystem::types::{
    DescriptorFlags, ErrorCode, Host as FsHost, HostDescriptor, OpenFlags, PathFlags,
};

use super::{SandboxError, State};
use toolhost_base::opendir;

/// The `wasi:filesystem` package version wasmtime-wasi 48 links (and we
/// shadow).
const WASI_FS: &str = "wasi:filesystem/types@0.2.12";

type OpenAtParams = (
    Resource<Descriptor>,
    PathFlags,
    String,
    OpenFlags,
    DescriptorFlags,
);

/// Shadows `open-at` and `symlink-at` in `linker` (after wasmtime-wasi
/// added its own).
pub(super) fn add_to_linker(linker: &mut Linker<State>) -> Result<(), SandboxError> {
    let engine = |e: wasmtime::Error| SandboxError::Engine(format!("{e:#}"));
    linker.allow_shadowing(true);
    let mut types = linker.instance(WASI_FS).map_err(engine)?;
    types
        .func_wrap(
            "[method]descriptor.open-at",
            |mut store: StoreContextMut<'_, State>,
             (fd, path_flags, path, oflags, flags): OpenAtParams| {
                let mut fs = store.data_mut().filesystem();
                if special_file(fs.table.get(&fd).ok(), path_flags, &path) {
                    return Ok((Err(ErrorCode::NotPermitted),));
                }
                match HostDescriptor::open_at(&mut fs, fd, path_flags, path, oflags, flags) {
                    Ok(opened) => Ok((Ok(opened),)),
                    Err(e) => Ok((Err(FsHost::convert_error_code(&mut fs, e)?),)),
                }
            },
        )
        .map_err(engine)?;
    types
        .func_wrap(
            "[method]descriptor.symlink-at",
            |_: StoreContextMut<'_, State>,
             (_fd, _target, _link): (Resource<Descriptor>, String, String)| {
                Ok((Err::<(), _>(ErrorCode::NotPermitted),))
            },
        )
        .map_err(engine)?;
    linker.allow_shadowing(false);
    Ok(())
}

/// Whether `path` beneath the directory `desc` names an existing FIFO,
/// socket or device. Anything else, or anything that cannot be looked at
/// (not a directory, missing, an escape), is left to the real `open-at`,
/// which reports it.
fn special_file(desc: Option<&Descriptor>, path_flags: PathFlags, path: &str) -> bool {
    let Some(Descriptor::Dir(dir)) = desc else {
        return false;
    };
    let follow = path_flags.contains(PathFlags::SYMLINK_FOLLOW);
    matches!(
        opendir::kind_beneath(&*dir.dir, path, follow),
        Ok(kind) if !kind.is_plain() && kind != opendir::Kind::Symlink
    )
}
