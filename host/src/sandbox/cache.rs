//! On-disk cache of compiled components.
//!
//! Compiling a component costs tens of milliseconds for a small Rust plugin
//! and seconds for a large Python one, so compiled code is kept on disk.
//!
//! - **Key**: SHA-256 of the wasmtime version, the engine's compilation
//!   settings (`Engine::precompile_compatibility_hash`) and the component's
//!   own SHA-256. A new component, wasmtime version or engine setting maps to
//!   a new entry; stale entries are simply never read again.
//! - **Integrity**: an entry is `MAGIC ‖ sha256(payload) ‖ payload`. A
//!   truncated, corrupted or foreign file fails the check and is recompiled
//!   and rewritten; it is never handed to `Component::deserialize`.
//! - **Ownership**: the directory is created owner-only (0700) and entries are
//!   written to a temporary file and renamed, so a reader never sees half an
//!   entry and concurrent hosts do not corrupt each other.

use std::hash::{Hash, Hasher};
use std::io::Write;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use wasmtime::Engine;

const MAGIC: &[u8; 8] = b"THCWASM1";

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
    pub fn get(&self, path: &Path) -> Result<Vec<u8>, Miss> {
        let data = std::fs::read(path).map_err(|_| Miss::Absent)?;
        if data.len() < MAGIC.len() + 32 || &data[..MAGIC.len()] != MAGIC {
            return Err(Miss::Corrupt);
        }
        let (digest, payload) = data[MAGIC.len()..].split_at(32);
        if Sha256::digest(payload).as_slice() != digest {
            return Err(Miss::Corrupt);
        }
        Ok(payload.to_vec())
    }

    /// Writes an entry atomically (temporary file, then rename).
    pub fn put(&self, path: &Path, artifact: &[u8]) -> std::io::Result<()> {
        let tmp = path.with_extension(format!("tmp{}", std::process::id()));
        let result = (|| {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(MAGIC)?;
            f.write_all(&Sha256::digest(artifact))?;
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
        // Foreign file.
        std::fs::write(&p, b"\0asm\x0d\0\x01\0").unwrap();
        assert_eq!(cache.get(&p), Err(Miss::Corrupt));
    }
}
