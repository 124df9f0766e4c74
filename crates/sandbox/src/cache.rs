//! On-disk cache of compiled components.
//!
//! Compiling a component costs tens of milliseconds for a small Rust plugin
//! and seconds for a large Python one, so compiled code is kept on disk.
//! Loading an entry runs its machine code in the host process, outside every
//! sandbox, so an entry is used only if this host's own secret vouches for
//! it; anything else is recompiled.
//!
//! - **Key**: BLAKE3 of this cache's format, the wasmtime version, the
//!   engine's compilation settings (`Engine::precompile_compatibility_hash`)
//!   and the component's own BLAKE3 digest. A new component, wasmtime
//!   version, engine setting or entry format maps to a new entry; stale
//!   entries are simply never read again.
//! - **Layout**: an entry is two files. `KEY.cwasm` holds exactly the bytes
//!   of `Component::serialize`, so that wasmtime maps it
//!   (`Component::deserialize_file`): machine code and heap images come
//!   straight from the page cache, nothing is copied, and a fresh instance's
//!   memory is a copy-on-write view of the file. `KEY.sum` (48 bytes) holds
//!   `MAGIC ‖ length ‖ MAC`: the artifact's length and a keyed BLAKE3 MAC
//!   over the artifact's file name (the key, which digests the engine
//!   settings and the component) and all of its bytes.
//! - **Authentication**: the MAC key is derived from a secret file only the
//!   host holds, `cache.key` beside the root key
//!   (`~/.local/share/toolhost/cache.key`, or `$TOOLHOST_CACHE_KEY_FILE`),
//!   created owner-only (0600, in a 0700 directory) on first use. Whoever
//!   can write into the cache directory but cannot read that file cannot
//!   make an entry this host accepts: a planted artifact, a patched one, an
//!   old-format entry with a public digest, or an entry written under
//!   another host's key all fail the check.
//! - **Ownership**: the directory is created owner-only (0700). A directory
//!   not owned by this user, writable by group or others, or inside the
//!   workspace is refused ([`CacheError`]): the host then compiles without
//!   a cache. Entry files are opened without following symbolic links, and
//!   one that is not a regular file owned by this user, or that is writable
//!   by group or others, is refused like a damaged one.
//! - **Integrity**: before wasmtime sees an entry, the host reads the
//!   artifact once through an open descriptor and checks its length and
//!   MAC against `KEY.sum`. A truncated or extended file, any changed
//!   byte, a missing or damaged `KEY.sum`, and a foreign entry (another
//!   key's intact pair copied or renamed into this key's place: the MAC
//!   covers the name) all fail the check; such an entry is removed and the
//!   component recompiled and rewritten, with a warning in the log. wasmtime
//!   itself then rejects an artifact of another version or engine
//!   configuration. The embedded tools' entries, written from the
//!   artifacts built into the binary, are checked the same way, so a start
//!   reads the file, not the binary's copy.
//! - **Mapping safety**: wasmtime maps the very file that was checked
//!   (through `/proc/self/fd` where there is one), and the host checks that
//!   it mapped the file it verified (same device and inode). Entries are
//!   never modified in place: they are written to a temporary file and
//!   renamed, and removed by unlinking, so a running host's mapping never
//!   changes under it. (To clear the cache, delete its files; never
//!   truncate or edit one.)
//! - **Concurrency**: `KEY.sum` is renamed into place before `KEY.cwasm`,
//!   so a reader racing a first write sees no artifact rather than an
//!   unverifiable one; any other interleaving of concurrent writers fails
//!   the check and costs a recompile, never a wrong load.

use std::fs::{File, Metadata};
use std::hash::{Hash, Hasher};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use wasmtime::component::Component;
use wasmtime::Engine;

use super::WASMTIME_VERSION;

/// The first bytes of a `KEY.sum` file.
const MAGIC: &[u8; 8] = b"THCSUM04";

/// Length of a `KEY.sum` file: magic, artifact length, digest.
const SUM_BYTES: usize = MAGIC.len() + 8 + blake3::OUT_LEN;

/// Why a cache entry was not used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Miss {
    /// No entry for this key (or it was replaced while being loaded).
    Absent,
    /// An entry exists but failed the integrity check, or wasmtime rejected it.
    Corrupt,
}

/// Why a cache directory (or its key) was refused. The host then compiles
/// without a cache.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    #[error("compiled-code cache {}: {source}", dir.display())]
    Io {
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error("compiled-code cache {} is not a directory", dir.display())]
    NotADirectory { dir: PathBuf },
    #[error("compiled-code cache {} is owned by uid {owner}, not by this user (uid {uid})", dir.display())]
    NotOwned { dir: PathBuf, owner: u32, uid: u32 },
    #[error("compiled-code cache {} has mode {mode:03o}: it must not be writable by group or others", dir.display())]
    Writable { dir: PathBuf, mode: u32 },
    #[error("compiled-code cache {} lies inside the workspace {}", dir.display(), workspace.display())]
    InWorkspace { dir: PathBuf, workspace: PathBuf },
    #[error("compiled-code cache key: no HOME to keep it in; set TOOLHOST_CACHE_KEY_FILE")]
    NoKeyFile,
    #[error("compiled-code cache key: {0}")]
    Key(#[from] toolhost_base::secret::KeyError),
}

/// A directory of compiled components, and the secret that authenticates
/// its entries.
#[derive(Clone)]
pub struct CompileCache {
    dir: PathBuf,
    mac_key: [u8; 32],
}

impl std::fmt::Debug for CompileCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompileCache")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

/// An artifact that matched its `KEY.sum`, still open so that its identity
/// can be compared with what wasmtime maps.
#[derive(Debug)]
pub struct Checked {
    file: File,
}

impl CompileCache {
    /// Opens (creating if needed, owner-only) a cache directory, with the
    /// MAC key from [`default_key_file`](Self::default_key_file).
    pub fn open(dir: impl Into<PathBuf>) -> Result<Self, CacheError> {
        let key_file = Self::default_key_file().ok_or(CacheError::NoKeyFile)?;
        Self::open_with(dir, &key_file, None)
    }

    /// Opens (creating if needed, owner-only) a cache directory whose
    /// entries are authenticated under the secret in `key_file` (created
    /// owner-only if missing). Refuses a directory that is not this user's,
    /// that group or others may write, or that lies inside `workspace`.
    pub fn open_with(
        dir: impl Into<PathBuf>,
        key_file: &Path,
        workspace: Option<&Path>,
    ) -> Result<Self, CacheError> {
        let dir = dir.into();
        let io = |source| CacheError::Io {
            dir: dir.clone(),
            source,
        };
        if let Some(ws) = workspace {
            // Compared by real path, so `..` or a link cannot hide it; the
            // directory may not exist yet, so its nearest existing ancestor
            // is what is resolved.
            let ws_real = std::fs::canonicalize(ws).unwrap_or_else(|_| ws.to_owned());
            if toolhost_base::paths::real_path_of(&dir).starts_with(&ws_real) {
                return Err(CacheError::InWorkspace {
                    dir,
                    workspace: ws.to_owned(),
                });
            }
        }
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder.create(&dir).map_err(io)?;
        let meta = std::fs::metadata(&dir).map_err(io)?;
        if !meta.is_dir() {
            return Err(CacheError::NotADirectory { dir });
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            let uid = rustix::process::geteuid().as_raw();
            if meta.uid() != uid {
                return Err(CacheError::NotOwned {
                    dir,
                    owner: meta.uid(),
                    uid,
                });
            }
            let mode = meta.mode() & 0o7777;
            if mode & 0o022 != 0 {
                return Err(CacheError::Writable { dir, mode });
            }
        }
        let secret = toolhost_base::secret::load_or_create(key_file)?;
        Ok(CompileCache {
            dir,
            mac_key: toolhost_base::secret::derive(&secret, "compile cache entry mac"),
        })
    }

    /// The cache's secret: `$TOOLHOST_CACHE_KEY_FILE`, else `cache.key`
    /// beside the root key (`$XDG_DATA_HOME/toolhost`, else
    /// `~/.local/share/toolhost`).
    pub fn default_key_file() -> Option<PathBuf> {
        if let Some(f) = std::env::var_os("TOOLHOST_CACHE_KEY_FILE").filter(|f| !f.is_empty()) {
            return Some(PathBuf::from(f));
        }
        std::env::var_os("XDG_DATA_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share")))
            .map(|base| base.join("toolhost").join("cache.key"))
    }

    /// The default location: `$TOOLHOST_CACHE_DIR`, else
    /// `$XDG_CACHE_HOME/toolhost`, else `~/.cache/toolhost`.
    pub fn default_dir() -> Option<PathBuf> {
        if let Some(d) = std::env::var_os("TOOLHOST_CACHE_DIR") {
            return Some(PathBuf::from(d));
        }
        if let Some(d) = std::env::var_os("XDG_CACHE_HOME") {
            return Some(PathBuf::from(d).join("toolhost"));
        }
        std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache").join("toolhost"))
    }

    /// The directory this cache writes to.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The artifact path (`KEY.cwasm`) for a component with BLAKE3 digest
    /// `component`, compiled by `engine`.
    pub(super) fn entry_path(&self, engine: &Engine, component: &blake3::Hash) -> PathBuf {
        self.dir
            .join(format!("{}.cwasm", cache_key(engine, component)))
    }

    /// Checks the artifact at `path` (a `KEY.cwasm`) against its `KEY.sum`:
    /// length first, then the digest over every byte.
    pub fn check(&self, path: &Path) -> Result<Checked, Miss> {
        let (file, len_now) = open_entry(path)?;
        // An artifact without its sum cannot be verified.
        let (mut sum_file, _) = open_entry(&sum_path(path)).map_err(|_| Miss::Corrupt)?;
        let mut sum = Vec::with_capacity(SUM_BYTES);
        (&mut sum_file)
            .take(SUM_BYTES as u64 + 1)
            .read_to_end(&mut sum)
            .map_err(|_| Miss::Corrupt)?;
        let (len, digest) = parse_sum(&sum).ok_or(Miss::Corrupt)?;
        if len_now != len {
            return Err(Miss::Corrupt);
        }
        let mut hasher = self.entry_hasher(path, len);
        hasher.update_reader(&file).map_err(|_| Miss::Corrupt)?;
        // `count` includes the name and length prefix.
        if hasher.count() != prefix_len(path) + len || hasher.finalize() != digest {
            return Err(Miss::Corrupt);
        }
        Ok(Checked { file })
    }

    /// Checks the entry at `path` against its `KEY.sum` and maps it (see
    /// the module docs).
    pub(super) fn load(&self, engine: &Engine, path: &Path) -> Result<Component, Miss> {
        let checked = self.check(path)?;
        map_checked(engine, path, checked)
    }

    /// Writes an entry: `KEY.sum`, then the artifact, each atomically.
    pub(super) fn put(&self, path: &Path, artifact: &[u8]) -> std::io::Result<()> {
        let len = artifact.len() as u64;
        let mut hasher = self.entry_hasher(path, len);
        hasher.update(artifact);
        let mut sum = Vec::with_capacity(SUM_BYTES);
        sum.extend_from_slice(MAGIC);
        sum.extend_from_slice(&len.to_le_bytes());
        sum.extend_from_slice(hasher.finalize().as_bytes());
        write_atomically(&sum_path(path), &sum)?;
        write_atomically(path, artifact)
    }

    /// The MAC of an entry, under this host's secret, binding it to its
    /// file name (the key) so that it is valid only under the key it was
    /// written for: keyed `BLAKE3(context ‖ len(name) ‖ name ‖
    /// len(artifact) ‖ artifact)`.
    fn entry_hasher(&self, path: &Path, artifact_len: u64) -> blake3::Hasher {
        let name = file_name(path);
        let mut hasher = blake3::Hasher::new_keyed(&self.mac_key);
        hasher.update(CONTEXT);
        hasher.update(&(name.len() as u64).to_le_bytes());
        hasher.update(name);
        hasher.update(&artifact_len.to_le_bytes());
        hasher
    }

    /// Removes an entry that failed verification (both files).
    pub(super) fn evict(&self, path: &Path) {
        let _ = std::fs::remove_file(path);
        let _ = std::fs::remove_file(sum_path(path));
    }
}

/// Maps the artifact at `path`, which `checked` verified, and makes sure
/// wasmtime mapped that same file.
fn map_checked(engine: &Engine, path: &Path, checked: Checked) -> Result<Component, Miss> {
    // SAFETY: `deserialize_file` requires a file written by
    // `Component::serialize` that nobody modifies while it is mapped. The
    // bytes at `path` were just checked, against the MAC (under this host's
    // secret) recorded when this host's `put` wrote them or against the
    // bytes themselves; wasmtime maps that same open file, and the identity
    // check below makes sure of it;
    // entries are only ever replaced by rename or unlinked, never changed in
    // place. wasmtime rejects an artifact of another version or engine
    // configuration.
    let through_fd = checked_path(&checked.file);
    let map_path = through_fd.as_deref().unwrap_or(path);
    let component =
        unsafe { Component::deserialize_file(engine, map_path) }.map_err(|_| Miss::Corrupt)?;
    match (checked.file.metadata(), std::fs::metadata(map_path)) {
        (Ok(checked), Ok(now)) if same_file(&checked, &now) => Ok(component),
        // Replaced by another host meanwhile: not what was checked.
        _ => Err(Miss::Absent),
    }
}

/// A path naming the open, checked file itself (`/proc/self/fd/N`), so that
/// wasmtime maps exactly the bytes that were checked; `None` where there is
/// no such path.
fn checked_path(file: &File) -> Option<PathBuf> {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let p = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
        if p.exists() {
            return Some(p);
        }
    }
    let _ = file;
    None
}

/// `KEY.sum` beside `KEY.cwasm`.
fn sum_path(artifact: &Path) -> PathBuf {
    artifact.with_extension("sum")
}

/// The artifact's length and digest from a `KEY.sum`, if it is well formed.
fn parse_sum(sum: &[u8]) -> Option<(u64, blake3::Hash)> {
    if sum.len() != SUM_BYTES || !sum.starts_with(MAGIC) {
        return None;
    }
    let (len, digest) = sum[MAGIC.len()..].split_at(8);
    let len = u64::from_le_bytes(len.try_into().ok()?);
    let digest: [u8; blake3::OUT_LEN] = digest.try_into().ok()?;
    Some((len, blake3::Hash::from(digest)))
}

fn file_name(path: &Path) -> &[u8] {
    path.file_name()
        .map(|n| n.as_encoded_bytes())
        .unwrap_or_default()
}

/// Bytes hashed before the artifact: the context, the name's length, the
/// name, the artifact's length.
fn prefix_len(path: &Path) -> u64 {
    (CONTEXT.len() + 16 + file_name(path).len()) as u64
}

/// Hashed first into every entry MAC.
const CONTEXT: &[u8] = b"toolhost compile cache entry v4\0";

/// Opens an entry file for reading without following a symbolic link, and
/// returns it with its length. A missing file is [`Miss::Absent`]; a link,
/// anything but a regular file, a file of another owner and one that group
/// or others may write are [`Miss::Corrupt`] (refused, then replaced).
fn open_entry(path: &Path) -> Result<(File, u64), Miss> {
    let mut opts = std::fs::OpenOptions::new();
    opts.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut opts, libc::O_NOFOLLOW | libc::O_NONBLOCK);
    let file = match opts.open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(Miss::Absent),
        Err(_) => return Err(Miss::Corrupt),
    };
    let meta = file.metadata().map_err(|_| Miss::Corrupt)?;
    if !meta.is_file() {
        return Err(Miss::Corrupt);
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if meta.uid() != rustix::process::geteuid().as_raw() || meta.mode() & 0o022 != 0 {
            return Err(Miss::Corrupt);
        }
    }
    Ok((file, meta.len()))
}

/// Writes `data` to a new temporary file beside `path`, then renames it over
/// `path`: readers see the old file or the whole new one, and a file that is
/// mapped somewhere is never changed.
fn write_atomically(path: &Path, data: &[u8]) -> std::io::Result<()> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(
        ".tmp{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let tmp = PathBuf::from(tmp);
    let result = (|| {
        let mut f = File::create(&tmp)?;
        f.write_all(data)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Whether two metadata describe the same file.
#[cfg(unix)]
fn same_file(a: &Metadata, b: &Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    a.dev() == b.dev() && a.ino() == b.ino()
}

/// Whether two metadata describe the same file (without inode numbers: the
/// same length and modification time).
#[cfg(not(unix))]
fn same_file(a: &Metadata, b: &Metadata) -> bool {
    a.len() == b.len() && a.modified().ok() == b.modified().ok()
}

/// The cache key: entry format, wasmtime version, engine settings and
/// component digest.
fn cache_key(engine: &Engine, component: &blake3::Hash) -> String {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut h);
    let mut d = blake3::Hasher::new_derive_key("toolhost compile cache key v3");
    d.update(WASMTIME_VERSION.as_bytes());
    d.update(b"|");
    d.update(&h.finish().to_le_bytes());
    d.update(component.as_bytes());
    d.finalize().to_hex().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The smallest component: no imports, no exports.
    const EMPTY_COMPONENT: &[u8] = b"\0asm\x0d\0\x01\0";

    fn engine() -> Engine {
        let mut config = wasmtime::Config::new();
        config.wasm_component_model(true);
        Engine::new(&config).unwrap()
    }

    /// A cache in `base/dir` whose secret is `base/key`.
    fn open_in(base: &Path, dir: &str, key: &str) -> CompileCache {
        CompileCache::open_with(base.join(dir), &base.join("keys").join(key), None).unwrap()
    }

    fn artifact(engine: &Engine) -> Vec<u8> {
        Component::new(engine, EMPTY_COMPONENT)
            .unwrap()
            .serialize()
            .unwrap()
    }

    /// A new cache in a temporary directory, an engine, and the entry path
    /// of [`EMPTY_COMPONENT`] there (nothing written yet).
    fn empty_entry() -> (tempfile::TempDir, CompileCache, Engine, PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let cache = open_in(tmp.path(), "c", "key");
        let engine = engine();
        let p = cache.entry_path(&engine, &blake3::hash(EMPTY_COMPONENT));
        (tmp, cache, engine, p)
    }

    #[test]
    fn a_written_entry_loads() {
        let (_tmp, cache, engine, p) = empty_entry();
        assert_eq!(cache.check(&p).unwrap_err(), Miss::Absent);
        assert_eq!(cache.load(&engine, &p).unwrap_err(), Miss::Absent);
        cache.put(&p, &artifact(&engine)).unwrap();
        cache.check(&p).unwrap();
        cache.load(&engine, &p).unwrap();
        // Two files, no temporaries left behind.
        let mut names: Vec<_> = std::fs::read_dir(cache.dir())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        assert_eq!(
            names,
            [p.file_name().unwrap(), sum_path(&p).file_name().unwrap()]
        );
        // Another engine configuration is another key.
        let mut config = wasmtime::Config::new();
        config.wasm_component_model(true).consume_fuel(true);
        let other = Engine::new(&config).unwrap();
        assert_ne!(cache.entry_path(&other, &blake3::hash(EMPTY_COMPONENT)), p);
    }

    #[test]
    fn damage_of_any_kind_fails_the_check() {
        let (_tmp, cache, engine, p) = empty_entry();
        let good = artifact(&engine);
        // Refused (by the check, else by wasmtime), then rewritten.
        let refused = |what: &str, by_check: bool| {
            if by_check {
                assert_eq!(cache.check(&p).unwrap_err(), Miss::Corrupt, "{what}");
            } else {
                cache.check(&p).unwrap();
            }
            assert_eq!(
                cache.load(&engine, &p).unwrap_err(),
                Miss::Corrupt,
                "{what}"
            );
            cache.put(&p, &good).unwrap();
            cache.load(&engine, &p).unwrap();
        };
        cache.put(&p, &good).unwrap();

        std::fs::write(&p, &good[..good.len() - 1]).unwrap();
        refused("truncated", true);
        std::fs::write(&p, [&good[..], b"\0"].concat()).unwrap();
        refused("extended", true);
        for at in [0, good.len() / 2, good.len() - 1] {
            let mut bad = good.clone();
            bad[at] ^= 0x01;
            std::fs::write(&p, &bad).unwrap();
            refused(&format!("byte {at} flipped"), true);
        }
        std::fs::remove_file(sum_path(&p)).unwrap();
        refused("sum missing", true);
        let sum = std::fs::read(sum_path(&p)).unwrap();
        std::fs::write(sum_path(&p), &sum[..SUM_BYTES - 1]).unwrap();
        refused("sum truncated", true);
        let mut bad = sum.clone();
        bad[SUM_BYTES - 1] ^= 0x01;
        std::fs::write(sum_path(&p), &bad).unwrap();
        refused("sum digest flipped", true);
        let mut old = sum.clone();
        old[..8].copy_from_slice(b"THCSUM02");
        std::fs::write(sum_path(&p), &old).unwrap();
        refused("another format", true);

        // Another key's intact entry, copied into this key's place.
        let q = cache.entry_path(&engine, &blake3::hash(b"another component"));
        cache.put(&q, &good).unwrap();
        cache.load(&engine, &q).unwrap();
        std::fs::copy(&q, &p).unwrap();
        std::fs::copy(sum_path(&q), sum_path(&p)).unwrap();
        refused("foreign entry", true);

        // A consistent pair that is not a wasmtime artifact: the check
        // passes, wasmtime refuses it.
        cache.put(&p, EMPTY_COMPONENT).unwrap();
        refused("not an artifact", false);
    }

    #[test]
    fn eviction_removes_both_files() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = open_in(tmp.path(), "c", "key");
        let p = cache.dir().join("k.cwasm");
        cache.put(&p, b"bytes").unwrap();
        cache.evict(&p);
        assert_eq!(std::fs::read_dir(cache.dir()).unwrap().count(), 0);
    }

    /// The `KEY.sum` the previous format wrote: a public digest anyone
    /// can compute.
    fn old_style_sum(path: &Path, artifact: &[u8]) -> Vec<u8> {
        let name = file_name(path);
        let mut h = blake3::Hasher::new_derive_key("toolhost compile cache entry v3");
        h.update(&(name.len() as u64).to_le_bytes());
        h.update(name);
        h.update(&(artifact.len() as u64).to_le_bytes());
        h.update(artifact);
        let mut sum = b"THCSUM03".to_vec();
        sum.extend_from_slice(&(artifact.len() as u64).to_le_bytes());
        sum.extend_from_slice(h.finalize().as_bytes());
        sum
    }

    #[test]
    fn an_entry_without_this_hosts_mac_is_refused() {
        let (tmp, cache, engine, p) = empty_entry();
        let good = artifact(&engine);
        // Written under another host's secret, into this cache.
        let other = open_in(tmp.path(), "c", "other-key");
        other.put(&p, &good).unwrap();
        other.load(&engine, &p).unwrap();
        assert_eq!(cache.check(&p).unwrap_err(), Miss::Corrupt);
        // A patched artifact with a freshly computed public digest, in
        // the old format and in the current one without the secret.
        std::fs::write(&p, &good).unwrap();
        std::fs::write(sum_path(&p), old_style_sum(&p, &good)).unwrap();
        assert_eq!(cache.check(&p).unwrap_err(), Miss::Corrupt);
        let mut forged = old_style_sum(&p, &good);
        forged[..8].copy_from_slice(MAGIC);
        std::fs::write(sum_path(&p), &forged).unwrap();
        assert_eq!(cache.check(&p).unwrap_err(), Miss::Corrupt);
        assert_eq!(cache.load(&engine, &p).unwrap_err(), Miss::Corrupt);
        // The host's own entry is used.
        cache.put(&p, &good).unwrap();
        cache.load(&engine, &p).unwrap();
        // The secret file is owner-only.
        use std::os::unix::fs::PermissionsExt;
        let key = tmp.path().join("keys/key");
        let mode = std::fs::metadata(&key).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let dir_mode = std::fs::metadata(key.parent().unwrap())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(dir_mode & 0o777, 0o700);
    }

    #[test]
    fn entries_open_to_others_or_behind_links_are_refused() {
        use std::os::unix::fs::PermissionsExt;
        let (tmp, cache, engine, p) = empty_entry();
        let good = artifact(&engine);
        cache.put(&p, &good).unwrap();
        cache.load(&engine, &p).unwrap();
        for mode in [0o666, 0o620, 0o602] {
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
            assert_eq!(cache.check(&p).unwrap_err(), Miss::Corrupt, "{mode:o}");
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
            cache.check(&p).unwrap();
            std::fs::set_permissions(sum_path(&p), std::fs::Permissions::from_mode(mode)).unwrap();
            assert_eq!(cache.check(&p).unwrap_err(), Miss::Corrupt, "sum {mode:o}");
            std::fs::set_permissions(sum_path(&p), std::fs::Permissions::from_mode(0o600)).unwrap();
        }
        // A valid entry elsewhere, linked into place: not followed.
        let elsewhere = tmp.path().join("elsewhere.cwasm");
        std::fs::rename(&p, &elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &p).unwrap();
        assert_eq!(cache.check(&p).unwrap_err(), Miss::Corrupt);
        assert_eq!(cache.load(&engine, &p).unwrap_err(), Miss::Corrupt);
        std::fs::remove_file(&p).unwrap();
        std::fs::rename(&elsewhere, &p).unwrap();
        cache.check(&p).unwrap();
        // Someone else's file (needs root to make one).
        if rustix::process::geteuid().is_root() {
            std::os::unix::fs::chown(&p, Some(65534), Some(65534)).unwrap();
            assert_eq!(cache.check(&p).unwrap_err(), Miss::Corrupt);
        }
    }

    #[test]
    fn a_cache_directory_others_can_write_or_inside_the_workspace_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let key = tmp.path().join("keys/key");
        for mode in [0o770, 0o777, 0o702, 0o1777] {
            let dir = tmp.path().join(format!("shared{mode:o}"));
            std::fs::create_dir(&dir).unwrap();
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(mode)).unwrap();
            let err = CompileCache::open_with(&dir, &key, None).unwrap_err();
            assert!(
                matches!(err, CacheError::Writable { .. }),
                "{mode:o}: {err}"
            );
        }
        // Read-only for others is fine.
        let dir = tmp.path().join("readable");
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        CompileCache::open_with(&dir, &key, None).unwrap();

        let ws = tmp.path().join("ws");
        std::fs::create_dir(&ws).unwrap();
        for inside in [ws.join(".cache"), ws.join("a/../b/c"), ws.clone()] {
            let err = CompileCache::open_with(&inside, &key, Some(&ws)).unwrap_err();
            assert!(matches!(err, CacheError::InWorkspace { .. }), "{err}");
        }
        // Also through a link to the workspace.
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&ws, &link).unwrap();
        let err = CompileCache::open_with(link.join("c"), &key, Some(&ws)).unwrap_err();
        assert!(matches!(err, CacheError::InWorkspace { .. }), "{err}");
        CompileCache::open_with(tmp.path().join("out"), &key, Some(&ws)).unwrap();

        if rustix::process::geteuid().is_root() {
            let theirs = tmp.path().join("theirs");
            std::fs::create_dir(&theirs).unwrap();
            std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
            let err = CompileCache::open_with(&theirs, &key, None).unwrap_err();
            assert!(matches!(err, CacheError::NotOwned { .. }), "{err}");
        }
    }
}
