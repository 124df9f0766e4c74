//! Root keys and keyrings: key ids, loading and storing keys, minting and
//! verifying the chained signature, and rotation.

use super::*;
use toolhost_base::secret;

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
        secret::generate().map(RootKey::from_bytes)
    }

    /// A key from 64 hex digits.
    pub fn from_hex(hex_key: &str) -> Result<RootKey, KeyError> {
        secret::from_hex(hex_key, "hex").map(RootKey::from_bytes)
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
        secret::load_or_create(path).map(RootKey::from_bytes)
    }

    /// The key's id, written into every token it mints.
    pub fn key_id(&self) -> KeyId {
        self.id
    }

    /// A subkey for another purpose (e.g. `"idempotency"`), so one root
    /// secret serves several MACs without ever being reused directly.
    pub fn derive(&self, purpose: &str) -> [u8; 32] {
        secret::derive(&self.bytes, purpose)
    }

    /// Mints a token (same as [`Token::mint`]).
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

/// Root keys by id, for rotation: mint with the newest, verify with any.
#[derive(Debug, Clone, Default)]
pub struct Keyring {
    pub(super) keys: Vec<RootKey>,
    /// The key pinned for the shared records ([`Keyring::anchor`]).
    records: Option<RootKey>,
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
            ring.insert(RootKey::from_bytes(secret::from_hex(part, ROOT_KEY_ENV)?));
        }
        Ok(Some(ring))
    }

    /// The keyring in the key file at `path`, in file order (the first is
    /// the primary), or a new file of one key if it does not exist (see
    /// [`RootKey::load_or_create`]). The file is 32 raw bytes, or one key
    /// of 64 hex digits per line (blank lines and `#` comments ignored).
    pub fn load_or_create(path: impl AsRef<Path>) -> Result<Keyring, KeyError> {
        let file = secret::load_ring_or_create(path)?;
        let mut ring = Keyring::new();
        for bytes in file.keys {
            ring.insert(RootKey::from_bytes(bytes));
        }
        ring.records = file.records.map(RootKey::from_bytes);
        Ok(ring)
    }

    /// The key the shared records are keyed by: idempotency keys, plan
    /// signatures and approval round trips, which every host sharing a
    /// store must derive alike. The key file's `records` line when it has
    /// one, else the primary. Pinning it before a rotation keeps it the
    /// same on every host while their primaries change.
    pub fn anchor(&self) -> Option<&RootKey> {
        self.records.as_ref().or_else(|| self.primary())
    }

    /// Verifies `token` with the key its key id names.
    pub fn verify(&self, token: &Token, now: SystemTime) -> Result<Grant, CapError> {
        self.get(token.key_id())
            .ok_or(CapError::UnknownKeyId(token.key_id()))?
            .verify(token, now)
    }
}
