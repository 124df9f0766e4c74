//! 32-byte secrets kept in private files: the host's root key and the
//! compile cache's key are both loaded, or created on first use, here.
//!
//! A key file holds 32 raw bytes (64 hex digits are accepted too), has mode
//! 0600 and is refused when group or others may read or write it. A root
//! key file may also hold a keyring: one key of 64 hex digits per line,
//! and a `records` line pinning the key of the shared records, blank lines
//! and `#` comments allowed ([`load_ring_or_create`]). Creation
//! is atomic, so concurrent first runs agree on one key. Subkeys for other
//! purposes are derived with [`derive()`], so one secret never serves two
//! MACs directly.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The length of every secret, in bytes.
pub const KEY_LEN: usize = 32;

/// Why a key could not be loaded, created or parsed.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("root key file {}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The key file can be read or written by group or others.
    #[error("root key file {} has mode {mode:03o}: it must be readable by its owner only (chmod 600)", path.display())]
    Permissions { path: PathBuf, mode: u32 },
    /// The key material is not 32 bytes (raw, or 64 hex digits).
    #[error("root key from {origin}: {reason}")]
    Invalid { origin: String, reason: String },
    /// The operating system's random source failed.
    #[error("no randomness available for a root key: {0}")]
    Random(String),
}

/// 32 bytes from the operating system's random source.
pub fn generate() -> Result<[u8; KEY_LEN], KeyError> {
    let mut bytes = [0u8; KEY_LEN];
    getrandom::fill(&mut bytes).map_err(|e| KeyError::Random(e.to_string()))?;
    Ok(bytes)
}

/// A key from 64 hex digits; `origin` names where they came from in the
/// error.
pub fn from_hex(hex_key: &str, origin: &str) -> Result<[u8; KEY_LEN], KeyError> {
    let invalid = |reason: &str| KeyError::Invalid {
        origin: origin.to_owned(),
        reason: reason.to_owned(),
    };
    let raw = hex::decode(hex_key.trim()).map_err(|_| invalid("not hex"))?;
    raw.try_into()
        .map_err(|_| invalid("a root key is 32 bytes (64 hex digits)"))
}

/// Loads the key file at `path`, or creates it (32 random bytes, mode
/// 0600; a missing parent directory is created with mode 0700) if it does
/// not exist.
pub fn load_or_create(path: impl AsRef<Path>) -> Result<[u8; KEY_LEN], KeyError> {
    let path = path.as_ref();
    match load(path) {
        Err(KeyError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {}
        other => return other,
    }
    let key = generate()?;
    let io = |source| KeyError::Io {
        path: path.to_owned(),
        source,
    };
    let parent = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if !parent.exists() {
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder.create(parent).map_err(io)?;
    }
    // Write a private temporary file, then link it into place: the key file
    // never exists half-written, and a concurrent creator wins or loses as a
    // whole.
    let file_name = path
        .file_name()
        .map_or_else(|| "root-key".into(), |n| n.to_string_lossy().into_owned());
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let tmp = parent.join(format!(".{file_name}.{}.{nanos}.tmp", std::process::id()));
    write_private(&tmp, &key).map_err(io)?;
    let linked = std::fs::hard_link(&tmp, path);
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => Ok(key),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => load(path),
        // File systems without hard links: exclusive create in place.
        Err(_) => match write_private(path, &key) {
            Ok(()) => Ok(key),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => load(path),
            Err(e) => Err(io(e)),
        },
    }
}

/// A root key file's keys: the token keys in file order, and the records
/// key when a `records` line pins one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyFile {
    pub keys: Vec<[u8; KEY_LEN]>,
    pub records: Option<[u8; KEY_LEN]>,
}

/// Loads the key file at `path`, or creates a file of one key as
/// [`load_or_create`] does if it does not exist. The file is 32 raw bytes
/// (one key), or text: one key of 64 hex digits per line, at least one;
/// a line `records <64 hex digits>` pins the records key; blank lines and
/// lines starting with `#` are ignored.
pub fn load_ring_or_create(path: impl AsRef<Path>) -> Result<KeyFile, KeyError> {
    let path = path.as_ref();
    let data = match read_private(path) {
        Err(KeyError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            return load_or_create(path).map(|k| KeyFile {
                keys: vec![k],
                records: None,
            });
        }
        other => other?,
    };
    if let Ok(bytes) = <[u8; KEY_LEN]>::try_from(data.as_slice()) {
        return Ok(KeyFile {
            keys: vec![bytes],
            records: None,
        });
    }
    let origin = path.display().to_string();
    let text = std::str::from_utf8(&data).map_err(|_| KeyError::Invalid {
        origin: origin.clone(),
        reason: format!(
            "{} bytes; expected 32 raw bytes or lines of 64 hex digits",
            data.len()
        ),
    })?;
    let mut file = KeyFile {
        keys: Vec::new(),
        records: None,
    };
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let at = format!("{origin} line {}", n + 1);
        match line.strip_prefix("records") {
            Some(rest) if rest.starts_with(char::is_whitespace) => {
                if file.records.is_some() {
                    return Err(KeyError::Invalid {
                        origin: at,
                        reason: "a second records line".into(),
                    });
                }
                file.records = Some(from_hex(rest, &at)?);
            }
            _ => file.keys.push(from_hex(line, &at)?),
        }
    }
    if file.keys.is_empty() {
        return Err(KeyError::Invalid {
            origin,
            reason: "no key in the file".into(),
        });
    }
    Ok(file)
}

/// The bytes of a private key file: refused when group or others may read
/// or write it, or when it is not a regular file.
fn read_private(path: &Path) -> Result<Vec<u8>, KeyError> {
    let io = |source| KeyError::Io {
        path: path.to_owned(),
        source,
    };
    let meta = std::fs::metadata(path).map_err(io)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(KeyError::Permissions {
                path: path.to_owned(),
                mode,
            });
        }
    }
    if !meta.is_file() {
        return Err(KeyError::Invalid {
            origin: path.display().to_string(),
            reason: "not a regular file".into(),
        });
    }
    std::fs::read(path).map_err(io)
}

fn load(path: &Path) -> Result<[u8; KEY_LEN], KeyError> {
    let data = read_private(path)?;
    if let Ok(bytes) = <[u8; KEY_LEN]>::try_from(data.as_slice()) {
        return Ok(bytes);
    }
    let text = std::str::from_utf8(&data).map_err(|_| KeyError::Invalid {
        origin: path.display().to_string(),
        reason: format!(
            "{} bytes; expected 32 raw bytes or 64 hex digits",
            data.len()
        ),
    })?;
    from_hex(text, &path.display().to_string())
}

/// A subkey of `secret` for another purpose (e.g. `"idempotency"`), so one
/// secret serves several MACs without ever being reused directly.
pub fn derive(secret: &[u8; KEY_LEN], purpose: &str) -> [u8; 32] {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(secret).expect("any key length");
    mac.update(b"toolhost/subkey/v1\0");
    mac.update(purpose.as_bytes());
    mac.finalize().into_bytes().into()
}

/// Creates `path` exclusively with mode 0600 and writes `bytes` to it.
pub fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
    let mut file = opts.open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}
