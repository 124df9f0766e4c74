//! The artifacts of one host: files in a directory only the host writes
//! (created 0700, files 0600), `<id>.json` for the bytes and `<id>.meta`
//! for the [`ArtifactMeta`]. The quota is counted over the directory's
//! live artifacts under an advisory lock, so every process sharing the
//! directory counts the same.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use super::{admit, io_err, valid_id, ArtifactBackend, ArtifactError, ArtifactMeta, Quota, Usage};

/// A directory of artifacts.
#[derive(Debug)]
pub struct DirBackend {
    dir: PathBuf,
}

impl DirBackend {
    /// The directory `dir`, created owner-only if missing.
    pub fn open(dir: &Path) -> Result<DirBackend, ArtifactError> {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| io_err(dir, e))?;
        Ok(DirBackend {
            dir: dir.to_path_buf(),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn paths(&self, id: &str) -> (PathBuf, PathBuf) {
        (
            self.dir.join(format!("{id}.json")),
            self.dir.join(format!("{id}.meta")),
        )
    }

    /// Every artifact's id and metadata (unreadable ones skipped).
    fn all(&self) -> Vec<(String, Option<ArtifactMeta>)> {
        let Ok(entries) = fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        entries
            .flatten()
            .filter_map(|entry| {
                let name = entry.file_name();
                let id = name.to_str()?.strip_suffix(".meta")?.to_owned();
                valid_id(&id).then(|| {
                    let meta = fs::read(entry.path())
                        .ok()
                        .and_then(|raw| serde_json::from_slice::<ArtifactMeta>(&raw).ok());
                    (id, meta)
                })
            })
            .collect()
    }

    /// The live artifacts' bytes and count, in all and owned by
    /// `owner_sha256`.
    fn usage(&self, owner_sha256: &str, now: u64) -> Usage {
        let mut u = Usage::default();
        for meta in self.all().into_iter().filter_map(|(_, m)| m) {
            if meta.expires_at <= now {
                continue;
            }
            u.total_bytes = u.total_bytes.saturating_add(meta.bytes);
            u.total_count += 1;
            if meta.owner_sha256 == owner_sha256 {
                u.token_bytes = u.token_bytes.saturating_add(meta.bytes);
                u.token_count += 1;
            }
        }
        u
    }

    /// An exclusive advisory lock on the directory, held while the quota
    /// is checked and the artifact written, so processes sharing it cannot
    /// pass a cap together.
    fn lock(&self) -> Result<fs::File, ArtifactError> {
        let path = self.dir.join(".quota.lock");
        let f = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
            .map_err(|e| io_err(&path, e))?;
        rustix::fs::flock(&f, rustix::fs::FlockOperation::LockExclusive)
            .map_err(|e| io_err(&path, e.into()))?;
        Ok(f)
    }
}

impl ArtifactBackend for DirBackend {
    fn put(
        &self,
        id: &str,
        meta: &ArtifactMeta,
        content: &[u8],
        quota: &Quota,
        now: u64,
    ) -> Result<(), ArtifactError> {
        let (data, meta_path) = self.paths(id);
        let _lock = self.lock()?;
        admit(
            quota,
            &self.usage(&meta.owner_sha256, now),
            content.len() as u64,
        )?;
        let meta = serde_json::to_vec(meta).map_err(|e| io_err(&meta_path, e.into()))?;
        // The content first: whoever finds the metadata finds the content.
        write_new(&data, content)?;
        write_new(&meta_path, &meta)
    }

    fn meta(&self, id: &str) -> Result<Option<ArtifactMeta>, ArtifactError> {
        let (_, meta_path) = self.paths(id);
        let raw = match fs::read(&meta_path) {
            Ok(raw) => raw,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_err(&meta_path, e)),
        };
        serde_json::from_slice(&raw)
            .map(Some)
            .map_err(|e| io_err(&meta_path, e.into()))
    }

    fn content(&self, id: &str) -> Result<Option<Vec<u8>>, ArtifactError> {
        let (data, _) = self.paths(id);
        match fs::read(&data) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_err(&data, e)),
        }
    }

    fn remove(&self, id: &str) -> Result<(), ArtifactError> {
        let (data, meta) = self.paths(id);
        let _ = fs::remove_file(meta);
        let _ = fs::remove_file(data);
        Ok(())
    }

    fn sweep(&self, now: u64) -> Result<(), ArtifactError> {
        for (id, meta) in self.all() {
            if meta.is_none_or(|m| m.expires_at <= now) {
                self.remove(&id)?;
            }
        }
        Ok(())
    }
}

/// Writes a new owner-only file whole (a temporary name, then a rename).
fn write_new(path: &Path, bytes: &[u8]) -> Result<(), ArtifactError> {
    let tmp = path.with_extension("tmp");
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(|e| io_err(&tmp, e))?;
    f.write_all(bytes).map_err(|e| io_err(&tmp, e))?;
    drop(f);
    fs::rename(&tmp, path).map_err(|e| io_err(path, e))
}
