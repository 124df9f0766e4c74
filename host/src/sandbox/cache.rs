//! On-disk cache of compiled components.
//!
//! Compiling a component costs tens of milliseconds for a small Rust plugin
//! and seconds for a large Python one, so compiled code is kept on disk.
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
//!   `MAGIC ‖ length ‖ digest`: the artifact's length and a BLAKE3 digest
//!   over the artifact's file name (the key) and all of its bytes.
//! - **Integrity**: before wasmtime sees an entry, the host reads the
//!   artifact once through an open descriptor and checks its length and
//!   digest against `KEY.sum`. A truncated or extended file, any changed
//!   byte, a missing or damaged `KEY.sum`, and a foreign entry (another
//!   key's intact pair copied or renamed into this key's place: the digest
//!   covers the name) all fail the check; such an entry is removed and the
//!   component recompiled and rewritten. wasmtime itself then rejects an
//!   artifact of another version or engine configuration. The digest is
//!   BLAKE3, a cryptographic hash several times faster than SHA-256 here:
//!   checking the 40 MB entry of an 18 MB Python component takes about
//!   10 ms on one core, against some 25 ms. An entry whose bytes the host
//!   already holds (the reference tools' artifact, built into the binary)
//!   is instead compared with them byte for byte ([`CompileCache::check_equal`]):
//!   no digest to compute on every start, and `KEY.sum` is not read.
//! - **Mapping safety**: wasmtime opens the artifact again by path. After it
//!   has, the host checks that the path still names the file it verified
//!   (same device and inode, which cannot be reused while the verified file
//!   is open); if another host replaced the entry in between, the mapped
//!   component is dropped and recompiled. Entries are never modified in
//!   place: they are written to a temporary file and renamed, and removed by
//!   unlinking, so a running host's mapping never changes under it. (To
//!   clear the cache, delete its files; never truncate or edit one.)
//! - **Ownership**: the directory is created owner-only (0700). `KEY.sum` is
//!   renamed into place before `KEY.cwasm`, so a reader racing a first write
//!   sees no artifact rather than an unverifiable one; any other interleaving
//!   of concurrent writers fails the check and costs a recompile, never a
//!   wrong load.

use std::fs::{File, Metadata};
use std::hash::{Hash, Hasher};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use wasmtime::component::Component;
use wasmtime::Engine;

use super::WASMTIME_VERSION;

/// The first bytes of a `KEY.sum` file.
const MAGIC: &[u8; 8] = b"THCSUM03";

/// Length of a `KEY.sum` file: magic, artifact length, digest.
const SUM_BYTES: usize = MAGIC.len() + 8 + blake3::OUT_LEN;

/// Bytes read at a time when an entry is compared with the bytes it must hold.
const COMPARE_CHUNK: usize = 256 * 1024;

/// Why a cache entry was not used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Miss {
    /// No entry for this key (or it was replaced while being loaded).
    Absent,
    /// An entry exists but failed the integrity check, or wasmtime rejected it.
    Corrupt,
}

/// A directory of compiled components.
#[derive(Debug, Clone)]
pub struct CompileCache {
    dir: PathBuf,
}

/// An artifact that matched its `KEY.sum`, still open so that its identity
/// can be compared with what wasmtime maps.
#[derive(Debug)]
pub struct Checked {
    file: File,
}

impl CompileCache {
    /// Opens (creating if needed, owner-only) a cache directory.
    pub fn open(dir: impl Into<PathBuf>) -> std::io::Result<Self> {
        let dir = dir.into();
        std::fs::create_dir_all(&dir)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))?;
        }
        Ok(CompileCache { dir })
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
        let file = File::open(path).map_err(|_| Miss::Absent)?;
        let len_now = file.metadata().map_err(|_| Miss::Corrupt)?.len();
        // An artifact without its sum cannot be verified.
        let sum = std::fs::read(sum_path(path)).map_err(|_| Miss::Corrupt)?;
        let (len, digest) = parse_sum(&sum).ok_or(Miss::Corrupt)?;
        if len_now != len {
            return Err(Miss::Corrupt);
        }
        let mut hasher = entry_hasher(path, len);
        hasher.update_reader(&file).map_err(|_| Miss::Corrupt)?;
        // `count` includes the name and length prefix.
        if hasher.count() != prefix_len(path) + len || hasher.finalize() != digest {
            return Err(Miss::Corrupt);
        }
        Ok(Checked { file })
    }

    /// Checks that the artifact at `path` holds exactly `artifact`: its
    /// length, then every byte, read through one open descriptor. For an
    /// entry whose bytes the caller already has; `KEY.sum` plays no part.
    pub fn check_equal(&self, path: &Path, artifact: &[u8]) -> Result<Checked, Miss> {
        let mut file = File::open(path).map_err(|_| Miss::Absent)?;
        let len = file.metadata().map_err(|_| Miss::Corrupt)?.len();
        if len != artifact.len() as u64 {
            return Err(Miss::Corrupt);
        }
        let mut buf = vec![0u8; COMPARE_CHUNK.min(artifact.len())];
        for want in artifact.chunks(COMPARE_CHUNK) {
            let got = &mut buf[..want.len()];
            file.read_exact(got).map_err(|_| Miss::Corrupt)?;
            if got != want {
                return Err(Miss::Corrupt);
            }
        }
        // Grown since its length was read: not the artifact either.
        if file.read(&mut [0u8; 1]).map_err(|_| Miss::Corrupt)? != 0 {
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

    /// Maps the entry at `path` once it holds exactly `artifact`
    /// ([`check_equal`](Self::check_equal)): for an artifact the host has
    /// in memory but would rather map than copy (see
    /// `Sandbox::load_embedded`).
    pub(super) fn load_equal(
        &self,
        engine: &Engine,
        path: &Path,
        artifact: &[u8],
    ) -> Result<Component, Miss> {
        let checked = self.check_equal(path, artifact)?;
        map_checked(engine, path, checked)
    }

    /// Writes an entry: `KEY.sum`, then the artifact, each atomically.
    pub(super) fn put(&self, path: &Path, artifact: &[u8]) -> std::io::Result<()> {
        let len = artifact.len() as u64;
        let mut hasher = entry_hasher(path, len);
        hasher.update(artifact);
        let mut sum = Vec::with_capacity(SUM_BYTES);
        sum.extend_from_slice(MAGIC);
        sum.extend_from_slice(&len.to_le_bytes());
        sum.extend_from_slice(hasher.finalize().as_bytes());
        write_atomically(&sum_path(path), &sum)?;
        write_atomically(path, artifact)
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
    // bytes at `path` were just checked, against the digest recorded when
    // this host's `put` wrote them or against the bytes themselves; the
    // identity check below makes sure wasmtime mapped that same file;
    // entries are only ever replaced by rename or unlinked, never changed in
    // place. wasmtime rejects an artifact of another version or engine
    // configuration.
    let component =
        unsafe { Component::deserialize_file(engine, path) }.map_err(|_| Miss::Corrupt)?;
    match (checked.file.metadata(), std::fs::metadata(path)) {
        (Ok(checked), Ok(now)) if same_file(&checked, &now) => Ok(component),
        // Replaced by another host meanwhile: not what was checked.
        _ => Err(Miss::Absent),
    }
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

/// Bytes hashed before the artifact: the name's length, the name, the
/// artifact's length.
fn prefix_len(path: &Path) -> u64 {
    16 + file_name(path).len() as u64
}

/// The digest of an entry, binding it to its file name (the key) so that it
/// is valid only under the key it was written for:
/// `BLAKE3(len(name) ‖ name ‖ len(artifact) ‖ artifact)`, in BLAKE3's
/// key-derivation mode with this cache's own context string.
fn entry_hasher(path: &Path, artifact_len: u64) -> blake3::Hasher {
    let name = file_name(path);
    let mut hasher = blake3::Hasher::new_derive_key("toolhost compile cache entry v3");
    hasher.update(&(name.len() as u64).to_le_bytes());
    hasher.update(name);
    hasher.update(&artifact_len.to_le_bytes());
    hasher
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
        let cache = CompileCache::open(tmp.path().join("c")).unwrap();
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
    fn an_entry_loads_only_while_it_equals_the_bytes_held() {
        let (_tmp, cache, engine, p) = empty_entry();
        let good = artifact(&engine);
        assert_eq!(
            cache.load_equal(&engine, &p, &good).unwrap_err(),
            Miss::Absent
        );
        cache.put(&p, &good).unwrap();
        cache.load_equal(&engine, &p, &good).unwrap();
        // Its sum is not needed: the bytes themselves are the check.
        std::fs::remove_file(sum_path(&p)).unwrap();
        cache.load_equal(&engine, &p, &good).unwrap();

        let mut bad = Vec::new();
        bad.push(("truncated", good[..good.len() - 1].to_vec()));
        bad.push(("extended", [&good[..], b"\0"].concat()));
        bad.push(("empty", Vec::new()));
        for at in [0, good.len() / 2, good.len() - 1] {
            let mut b = good.clone();
            b[at] ^= 0x01;
            bad.push(("a byte flipped", b));
        }
        for (what, bytes) in bad {
            // Written as another host would have written it, sum and all.
            cache.put(&p, &bytes).unwrap();
            cache.check(&p).unwrap();
            assert_eq!(
                cache.check_equal(&p, &good).unwrap_err(),
                Miss::Corrupt,
                "{what}"
            );
            assert_eq!(
                cache.load_equal(&engine, &p, &good).unwrap_err(),
                Miss::Corrupt,
                "{what}"
            );
        }
        // An artifact longer than one read, differing only in its last byte.
        let long: Vec<u8> = (0..COMPARE_CHUNK * 2 + 7).map(|i| i as u8).collect();
        let q = cache.dir().join("long.cwasm");
        cache.put(&q, &long).unwrap();
        cache.check_equal(&q, &long).unwrap();
        let mut other = long.clone();
        *other.last_mut().unwrap() ^= 1;
        assert_eq!(cache.check_equal(&q, &other).unwrap_err(), Miss::Corrupt);
    }

    #[test]
    fn eviction_removes_both_files() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = CompileCache::open(tmp.path().join("c")).unwrap();
        let p = cache.dir().join("k.cwasm");
        cache.put(&p, b"bytes").unwrap();
        cache.evict(&p);
        assert_eq!(std::fs::read_dir(cache.dir()).unwrap().count(), 0);
    }
}
