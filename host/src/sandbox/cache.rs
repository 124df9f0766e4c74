//! On-disk cache of compiled components.
//!
//! Compiling a component costs tens of milliseconds for a small Rust plugin
//! and seconds for a large Python one, so compiled code is kept on disk.
//!
//! - **Key**: SHA-256 of the wasmtime version, the engine's compilation
//!   settings (`Engine::precompile_compatibility_hash`) and the component's
//!   own SHA-256. A new component, wasmtime version or engine setting maps to
//!   a new entry; stale entries are simply never read again.
//! - **Integrity**: an entry is `MAGIC ‖ digest ‖ payload`, where the digest
//!   is a SHA-256 over the entry's file name (the cache key) and the
//!   payload (hashed in 4 MiB chunks on several threads, see
//!   `entry_digest`). A truncated or
//!   corrupted file fails the check, and so does a foreign one: another
//!   component's entry copied or renamed into this key's place. Such an entry
//!   is recompiled and rewritten; it is never handed to
//!   `Component::deserialize`.
//! - **Ownership**: the directory is created owner-only (0700) and entries are
//!   written to a temporary file and renamed, so a reader never sees half an
//!   entry and concurrent hosts do not corrupt each other.

use std::hash::{Hash, Hasher};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use wasmtime::Engine;

const MAGIC: &[u8; 8] = b"THCWASM2";

/// Why a cache entry was not used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Miss {
    /// No entry for this key.
    Absent,
    /// An entry exists but failed the integrity check.
    Corrupt,
}

/// A directory of compiled components.
#[derive(Debug, Clone)]
pub struct CompileCache {
    dir: PathBuf,
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

    /// The entry path for a component with digest `component_sha256`.
    pub fn entry_path(&self, engine: &Engine, component_sha256: &str) -> PathBuf {
        self.dir
            .join(format!("{}.cwasm", cache_key(engine, component_sha256)))
    }

    /// Reads and verifies an entry. Returns the compiled artifact bytes.
    ///
    /// The payload is read straight into its own buffer (no second copy) and
    /// hashed on several threads: this is most of a cached start of a large
    /// component (a 40 MB artifact for an 18 MB Python component).
    pub fn get(&self, path: &Path) -> Result<Vec<u8>, Miss> {
        let mut f = std::fs::File::open(path).map_err(|_| Miss::Absent)?;
        let len = f.metadata().map_err(|_| Miss::Absent)?.len();
        let mut header = [0u8; MAGIC.len() + 32];
        if len < header.len() as u64 || f.read_exact(&mut header).is_err() {
            return Err(Miss::Corrupt);
        }
        let (magic, digest) = header.split_at(MAGIC.len());
        if magic != MAGIC {
            // An entry of an older format is stale, not damaged: it is
            // recompiled and overwritten without a warning.
            return Err(if magic.starts_with(&MAGIC[..7]) {
                Miss::Absent
            } else {
                Miss::Corrupt
            });
        }
        let expected = usize::try_from(len - header.len() as u64).map_err(|_| Miss::Corrupt)?;
        let mut payload = Vec::new();
        payload
            .try_reserve_exact(expected)
            .map_err(|_| Miss::Corrupt)?;
        f.read_to_end(&mut payload).map_err(|_| Miss::Corrupt)?;
        if payload.len() != expected || entry_digest(path, &payload).as_slice() != digest {
            return Err(Miss::Corrupt);
        }
        Ok(payload)
    }

    /// Writes an entry atomically (temporary file, then rename).
    pub fn put(&self, path: &Path, artifact: &[u8]) -> std::io::Result<()> {
        let tmp = path.with_extension(format!("tmp{}", std::process::id()));
        let result = (|| {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(MAGIC)?;
            f.write_all(&entry_digest(path, artifact))?;
            f.write_all(artifact)?;
            f.sync_all()?;
            std::fs::rename(&tmp, path)
        })();
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        result
    }

    /// Removes an entry that failed verification.
    pub fn evict(&self, path: &Path) {
        let _ = std::fs::remove_file(path);
    }
}

/// Payload bytes hashed per chunk; chunks are hashed in parallel.
const CHUNK_BYTES: usize = 4 << 20;

/// The digest stored in an entry, binding it to its file name (the key) so
/// that an entry is valid only under the key it was written for:
///
/// `sha256(len(name) ‖ name ‖ len(payload) ‖ sha256(chunk₀) ‖ sha256(chunk₁) ‖ …)`
///
/// over 4 MiB chunks of the payload, hashed on up to 4 threads.
fn entry_digest(path: &Path, payload: &[u8]) -> [u8; 32] {
    let chunks: Vec<&[u8]> = payload.chunks(CHUNK_BYTES).collect();
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 4)
        .min(chunks.len().max(1));
    let per_thread = chunks.len().div_ceil(threads).max(1);
    let hash_all = |part: &[&[u8]]| -> Vec<[u8; 32]> {
        part.iter().map(|c| Sha256::digest(c).into()).collect()
    };
    let digests: Vec<[u8; 32]> = if threads <= 1 {
        hash_all(&chunks)
    } else {
        std::thread::scope(|s| {
            let handles: Vec<_> = chunks
                .chunks(per_thread)
                .map(|part| s.spawn(move || hash_all(part)))
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().expect("hashing thread"))
                .collect()
        })
    };
    let mut d = Sha256::new();
    let name = path
        .file_name()
        .map(|n| n.as_encoded_bytes())
        .unwrap_or_default();
    d.update((name.len() as u64).to_le_bytes());
    d.update(name);
    d.update((payload.len() as u64).to_le_bytes());
    for chunk in &digests {
        d.update(chunk);
    }
    d.finalize().into()
}

/// The cache key: wasmtime version, engine settings and component digest.
pub fn cache_key(engine: &Engine, component_sha256: &str) -> String {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut h);
    let engine_hash = h.finish();
    let mut d = Sha256::new();
    d.update(b"wasmtime-48.0.8|");
    d.update(engine_hash.to_le_bytes());
    d.update(b"|");
    d.update(component_sha256.as_bytes());
    hex::encode(d.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_corruption() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = CompileCache::open(tmp.path().join("c")).unwrap();
        let p = cache.dir().join("x.cwasm");
        assert_eq!(cache.get(&p), Err(Miss::Absent));
        cache.put(&p, b"artifact bytes").unwrap();
        assert_eq!(cache.get(&p).unwrap(), b"artifact bytes");

        // Truncated.
        let data = std::fs::read(&p).unwrap();
        std::fs::write(&p, &data[..data.len() - 3]).unwrap();
        assert_eq!(cache.get(&p), Err(Miss::Corrupt));
        // Flipped byte.
        let mut bad = data.clone();
        *bad.last_mut().unwrap() ^= 1;
        std::fs::write(&p, &bad).unwrap();
        assert_eq!(cache.get(&p), Err(Miss::Corrupt));
        // An entry of an older format is stale, not damaged.
        let mut old = data.clone();
        old[..8].copy_from_slice(b"THCWASM1");
        std::fs::write(&p, &old).unwrap();
        assert_eq!(cache.get(&p), Err(Miss::Absent));
        // Foreign file.
        std::fs::write(&p, b"\0asm\x0d\0\x01\0").unwrap();
        assert_eq!(cache.get(&p), Err(Miss::Corrupt));
        // Another key's intact entry, copied into this key's place.
        let other = cache.dir().join("y.cwasm");
        cache.put(&other, b"other artifact").unwrap();
        assert_eq!(cache.get(&other).unwrap(), b"other artifact");
        std::fs::copy(&other, &p).unwrap();
        assert_eq!(cache.get(&p), Err(Miss::Corrupt));
        // Several chunks: every byte counts, and so does the length.
        let big: Vec<u8> = (0..CHUNK_BYTES * 2 + 17).map(|i| (i % 251) as u8).collect();
        cache.put(&p, &big).unwrap();
        assert_eq!(cache.get(&p).unwrap(), big);
        let data = std::fs::read(&p).unwrap();
        for at in [
            MAGIC.len() + 40,
            data.len() - CHUNK_BYTES - 1,
            data.len() - 1,
        ] {
            let mut bad = data.clone();
            bad[at] ^= 0x80;
            std::fs::write(&p, &bad).unwrap();
            assert_eq!(cache.get(&p), Err(Miss::Corrupt), "byte {at}");
        }
        std::fs::write(&p, &data[..data.len() - CHUNK_BYTES]).unwrap();
        assert_eq!(cache.get(&p), Err(Miss::Corrupt));
        let mut longer = data.clone();
        longer.extend_from_slice(&[0; 8]);
        std::fs::write(&p, &longer).unwrap();
        assert_eq!(cache.get(&p), Err(Miss::Corrupt));
    }
}
