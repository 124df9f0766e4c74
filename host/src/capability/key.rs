//! Root keys and keyrings: key ids, loading and storing keys, minting and
//! verifying the chained signature, and rotation.

use super::*;

/// Identifies a root key: the first 4 bytes of SHA-256 of a domain tag and
/// the key. Shown as 8 hex digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KeyId(pub u32);

impl fmt::Debug for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "KeyId({self})")
    }
}

impl fmt::Display for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:08x}", self.0)
    }
}

impl Serialize for KeyId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// The host's secret: 32 bytes, with the HMAC state for `sig_0`
/// precomputed. Its `Debug` shows only the key id.
#[derive(Clone)]
pub struct RootKey {
    pub(super) bytes: [u8; KEY_LEN],
    pub(super) id: KeyId,
    pub(super) mac: HmacSha256,
}

impl fmt::Debug for RootKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RootKey")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl RootKey {
    pub fn from_bytes(bytes: [u8; KEY_LEN]) -> RootKey {
        let digest = Sha256::new()
            .chain_update(KEY_ID_DOMAIN)
            .chain_update(bytes)
            .finalize();
        let id = KeyId(u32::from_be_bytes([
            digest[0], digest[1], digest[2], digest[3],
        ]));
        let mac = HmacSha256::new_from_slice(&bytes).expect("HMAC takes any key length");
        RootKey { bytes, id, mac }
    }

    /// A new key from the operating system's random source.
    pub fn generate() -> Result<RootKey, KeyError> {
        let mut bytes = [0u8; KEY_LEN];
        getrandom::fill(&mut bytes).map_err(|e| KeyError::Random(e.to_string()))?;
        Ok(RootKey::from_bytes(bytes))
    }

    /// A key from 64 hex digits.
    pub fn from_hex(hex_key: &str) -> Result<RootKey, KeyError> {
        RootKey::from_hex_at(hex_key, "hex")
    }

    fn from_hex_at(hex_key: &str, origin: &str) -> Result<RootKey, KeyError> {
        let invalid = |reason: &str| KeyError::Invalid {
            origin: origin.to_owned(),
            reason: reason.to_owned(),
        };
        let raw = hex::decode(hex_key.trim()).map_err(|_| invalid("not hex"))?;
        let bytes: [u8; KEY_LEN] = raw
            .try_into()
            .map_err(|_| invalid("a root key is 32 bytes (64 hex digits)"))?;
        Ok(RootKey::from_bytes(bytes))
    }

    /// The key in `TOOLHOST_ROOT_KEY` (hex), or `None` if the variable is
    /// unset or empty. With several comma-separated keys this is the first
    /// one (the signing key; see [`Keyring::from_env`]).
    pub fn from_env() -> Result<Option<RootKey>, KeyError> {
        Ok(Keyring::from_env()?.and_then(|ring| ring.keys.into_iter().next()))
    }

    /// Loads the key file at `path`, or creates it (32 random bytes, mode
    /// 0600; a missing parent directory is created with mode 0700) if it
    /// does not exist. Creation is atomic: concurrent first runs agree on
    /// one key. A file readable or writable by group or others is refused.
    /// The file holds 32 raw bytes (64 hex digits are accepted too).
    pub fn load_or_create(path: impl AsRef<Path>) -> Result<RootKey, KeyError> {
        let path = path.as_ref();
        match RootKey::load(path) {
            Err(KeyError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {}
            other => return other,
        }
        let key = RootKey::generate()?;
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
        // Write a private temporary file, then link it into place: the key
        // file never exists half-written, and a concurrent creator wins or
        // loses as a whole.
        let file_name = path
            .file_name()
            .map_or_else(|| "root-key".into(), |n| n.to_string_lossy().into_owned());
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let tmp = parent.join(format!(".{file_name}.{}.{nanos}.tmp", std::process::id()));
        write_private(&tmp, &key.bytes).map_err(io)?;
        let linked = std::fs::hard_link(&tmp, path);
        let _ = std::fs::remove_file(&tmp);
        match linked {
            Ok(()) => Ok(key),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => RootKey::load(path),
            // File systems without hard links: exclusive create in place.
            Err(_) => match write_private(path, &key.bytes) {
                Ok(()) => Ok(key),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => RootKey::load(path),
                Err(e) => Err(io(e)),
            },
        }
    }

    fn load(path: &Path) -> Result<RootKey, KeyError> {
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
        let data = std::fs::read(path).map_err(io)?;
        if let Ok(bytes) = <[u8; KEY_LEN]>::try_from(data.as_slice()) {
            return Ok(RootKey::from_bytes(bytes));
        }
        let text = std::str::from_utf8(&data).map_err(|_| KeyError::Invalid {
            origin: path.display().to_string(),
            reason: format!(
                "{} bytes; expected 32 raw bytes or 64 hex digits",
                data.len()
            ),
        })?;
        RootKey::from_hex_at(text, &path.display().to_string())
    }

    /// The key's id, written into every token it mints.
    pub fn key_id(&self) -> KeyId {
        self.id
    }

    /// Mints a token (same as [`Token::mint`]).
    /// A subkey for another purpose (e.g. `"idempotency"`), so one root
    /// secret serves several MACs without ever being reused directly.
    pub fn derive(&self, purpose: &str) -> [u8; 32] {
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.bytes).expect("any key length");
        mac.update(b"toolhost/subkey/v1\0");
        mac.update(purpose.as_bytes());
        mac.finalize().into_bytes().into()
    }

    pub fn mint(&self, caveats: &[Caveat]) -> Result<Token, CapError> {
        Token::mint(self, caveats)
    }

    /// Verifies `token` at time `now`: key id, signature chain (constant-time
    /// comparison), caveat types, expiry; then returns the effective grant.
    /// Errors are checked in that order: [`CapError::UnknownKeyId`],
    /// [`CapError::BadSignature`], [`CapError::UnknownCaveat`],
    /// [`CapError::Empty`], [`CapError::Expired`].
    pub fn verify(&self, token: &Token, now: SystemTime) -> Result<Grant, CapError> {
        if token.key_id() != self.id {
            return Err(CapError::UnknownKeyId(token.key_id()));
        }
        let (sig, budgets) = self.chain(token);
        if !bool::from(sig.ct_eq(token.signature())) {
            return Err(CapError::BadSignature);
        }
        let mut grant = fold(token)?;
        grant.budgets = budgets;
        let now = unix_secs(now);
        if let Some(expires_at) = grant.expires_at {
            if now >= expires_at {
                return Err(CapError::Expired { expires_at, now });
            }
        }
        Ok(grant)
    }

    /// Recomputes the signature chain of `token` with this key; also the
    /// call budgets of its `max_calls` caveats, met on the way.
    fn chain(&self, token: &Token) -> ([u8; SIG_LEN], Vec<CallBudget>) {
        let mut mac = self.mac.clone();
        mac.update(&token.bytes[..HEADER_LEN]);
        let sig: [u8; SIG_LEN] = mac.finalize().into_bytes().into();
        token.chain_from(0, sig)
    }
}

pub(super) fn chain_step(sig: &[u8; SIG_LEN], caveat: &[u8]) -> [u8; SIG_LEN] {
    let mut mac = HmacSha256::new_from_slice(sig).expect("HMAC takes any key length");
    mac.update(caveat);
    mac.finalize().into_bytes().into()
}

pub(super) fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
    let mut file = opts.open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

/// Root keys by id, for rotation: mint with the newest, verify with any.
#[derive(Debug, Clone, Default)]
pub struct Keyring {
    pub(super) keys: Vec<RootKey>,
}

impl Keyring {
    pub fn new() -> Keyring {
        Keyring::default()
    }

    /// Adds a key (replacing one with the same id). The first key added is
    /// the [`primary`](Keyring::primary).
    pub fn insert(&mut self, key: RootKey) {
        match self.keys.iter_mut().find(|k| k.id == key.id) {
            Some(slot) => *slot = key,
            None => self.keys.push(key),
        }
    }

    /// Builder form of [`insert`](Keyring::insert).
    pub fn with(mut self, key: RootKey) -> Keyring {
        self.insert(key);
        self
    }

    pub fn get(&self, id: KeyId) -> Option<&RootKey> {
        self.keys.iter().find(|k| k.id == id)
    }

    /// The signing key: the first one added.
    pub fn primary(&self) -> Option<&RootKey> {
        self.keys.first()
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// All keys in `TOOLHOST_ROOT_KEY` (comma-separated hex, the first is
    /// the primary), or `None` if the variable is unset or empty.
    pub fn from_env() -> Result<Option<Keyring>, KeyError> {
        let Some(value) = std::env::var_os(ROOT_KEY_ENV) else {
            return Ok(None);
        };
        let value = value.into_string().map_err(|_| KeyError::Invalid {
            origin: ROOT_KEY_ENV.to_owned(),
            reason: "not UTF-8".to_owned(),
        })?;
        if value.trim().is_empty() {
            return Ok(None);
        }
        let mut ring = Keyring::new();
        for part in value.split(',') {
            ring.insert(RootKey::from_hex_at(part, ROOT_KEY_ENV)?);
        }
        Ok(Some(ring))
    }

    /// Verifies `token` with the key its key id names.
    pub fn verify(&self, token: &Token, now: SystemTime) -> Result<Grant, CapError> {
        self.get(token.key_id())
            .ok_or(CapError::UnknownKeyId(token.key_id()))?
            .verify(token, now)
    }
}
