//! SSH signatures of plugins: `FILE.sig` next to `FILE`, checked against an
//! `allowed_signers` file.
//!
//! A plugin author signs a component the way git signs commits:
//!
//! ```text
//! ssh-keygen -Y sign -n toolhost -f ~/.ssh/id_ed25519 plugin.wasm   # writes plugin.wasm.sig
//! ```
//!
//! The signature is OpenSSH's SSHSIG format (armored `-----BEGIN SSH
//! SIGNATURE-----`): the signer's public key, a namespace, a hash algorithm
//! and a signature over the namespace and the hash of the file. Parsing and
//! the cryptographic check are done by the RustCrypto `ssh-key` crate
//! (Ed25519, ECDSA P-256/P-384/P-521 and RSA keys).
//!
//! Trust comes from an `allowed_signers` file (`--trusted-signers`), in the
//! format of ssh-keygen's ALLOWED SIGNERS section, one key per line:
//!
//! ```text
//! # principals      [options]               key
//! alice@example.com namespaces="toolhost"   ssh-ed25519 AAAAC3Nza… alice laptop
//! ```
//!
//! Principals are a comma-separated list (quoted if it holds spaces).
//! Options: `namespaces="p1,p2"` restricts the key to matching namespaces
//! (`*` and `?` wildcards, `!` negation), `valid-after=` / `valid-before=`
//! (`YYYYMMDD[HHMM[SS]][Z]`, read as UTC) bound when the key counts, and
//! `cert-authority` marks a CA key; certificates are not supported, so such
//! a line never vouches for a plain key. Blank lines and `#` comments are
//! ignored.
//!
//! [`verify`] gives one [`Verification`]:
//!
//! - [`Verification::Verified`]: a valid signature in the `toolhost`
//!   namespace by a key an allowed line vouches for (principal and key
//!   fingerprint reported, for the lock);
//! - [`Verification::Unsigned`]: no signature;
//! - [`Verification::BadSignature`]: the signature does not hold — the file
//!   was changed, the namespace is not `toolhost`, or the signature text is
//!   malformed or of an unsupported algorithm;
//! - [`Verification::UntrustedSigner`]: a valid signature by a key no line
//!   vouches for (or not for this namespace, or not at this time).
//!
//! The signature is checked before the signer, as `ssh-keygen -Y verify`
//! does: a tampered file is `bad_signature` whoever signed it.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use ssh_key::{HashAlg, PublicKey, SshSig};

/// The namespace plugin signatures must be made in (`-n toolhost`).
pub const NAMESPACE: &str = "toolhost";

/// Appended to a file's name to find its signature.
pub const SIGNATURE_SUFFIX: &str = ".sig";

/// Largest signature file read (an RSA-16384 signature is under 6 KiB).
const MAX_SIGNATURE_BYTES: u64 = 64 * 1024;

/// Why a signature does not hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BadSignature {
    /// The text is not an SSHSIG signature.
    Malformed(String),
    /// Made in another namespace (e.g. `git` or `file`).
    WrongNamespace { found: String },
    /// The key type or hash is not supported.
    Unsupported(String),
    /// The signature does not match the bytes: the file was changed, or the
    /// signature belongs to another file.
    Mismatch,
}

impl fmt::Display for BadSignature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BadSignature::Malformed(why) => write!(f, "malformed signature: {why}"),
            BadSignature::WrongNamespace { found } => write!(
                f,
                "signature made for namespace `{found}`, not `{NAMESPACE}` (sign with -n {NAMESPACE})"
            ),
            BadSignature::Unsupported(why) => write!(f, "unsupported signature: {why}"),
            BadSignature::Mismatch => {
                f.write_str("signature does not match the file (changed after signing?)")
            }
        }
    }
}

/// A verified signer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signer {
    /// The principals of the allowed_signers line that vouched for the key.
    pub principal: String,
    /// `SHA256:…`, as `ssh-keygen -l` prints it.
    pub fingerprint: String,
    /// The key algorithm (`ssh-ed25519`, `ecdsa-sha2-nistp256`, `ssh-rsa`).
    pub algorithm: String,
}

/// The outcome of checking a plugin's signature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verification {
    Verified(Signer),
    Unsigned,
    BadSignature(BadSignature),
    /// A valid signature by a key no allowed line vouches for.
    UntrustedSigner {
        fingerprint: String,
        algorithm: String,
    },
}

impl Verification {
    /// The refusal code under a policy that requires signatures:
    /// `None` when verified, `unsigned_plugin`, or `bad_signature` (bad or
    /// untrusted).
    pub fn refusal_code(&self) -> Option<&'static str> {
        match self {
            Verification::Verified(_) => None,
            Verification::Unsigned => Some("unsigned_plugin"),
            Verification::BadSignature(_) | Verification::UntrustedSigner { .. } => {
                Some("bad_signature")
            }
        }
    }

    /// The signer, when verified.
    pub fn signer(&self) -> Option<&Signer> {
        match self {
            Verification::Verified(s) => Some(s),
            _ => None,
        }
    }
}

impl fmt::Display for Verification {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Verification::Verified(s) => write!(
                f,
                "signed by {} ({} {})",
                s.principal, s.algorithm, s.fingerprint
            ),
            Verification::Unsigned => f.write_str("not signed (no .sig file)"),
            Verification::BadSignature(why) => write!(f, "bad signature: {why}"),
            Verification::UntrustedSigner {
                fingerprint,
                algorithm,
            } => write!(
                f,
                "signed by an untrusted key ({algorithm} {fingerprint}): add it to the allowed signers file to trust it"
            ),
        }
    }
}

/// Errors reading an allowed signers file or a signed file.
#[derive(Debug, thiserror::Error)]
pub enum SignatureError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: signature file larger than {MAX_SIGNATURE_BYTES} bytes", path.display())]
    SignatureTooLarge { path: PathBuf },
    #[error("allowed signers, line {line}: {message}")]
    AllowedSigners { line: usize, message: String },
}

/// One line of an allowed signers file.
#[derive(Debug, Clone)]
pub struct AllowedSigner {
    /// The principals as written (`alice@example.com,alice@corp.example`).
    pub principals: String,
    /// `namespaces="…"` patterns; `None` allows every namespace.
    pub namespaces: Option<Vec<String>>,
    /// `cert-authority`: a CA key (never matches a plain key here).
    pub cert_authority: bool,
    /// `valid-after`, seconds since the Unix epoch.
    pub valid_after: Option<u64>,
    /// `valid-before`, seconds since the Unix epoch.
    pub valid_before: Option<u64>,
    pub key: PublicKey,
    /// 1-based line number, for messages.
    pub line: usize,
}

impl AllowedSigner {
    fn vouches_for(&self, sig: &SshSig, now: u64) -> bool {
        !self.cert_authority
            && self.key.key_data() == sig.public_key()
            && self
                .namespaces
                .as_ref()
                .is_none_or(|patterns| match_pattern_list(sig.namespace(), patterns))
            && self.valid_after.is_none_or(|t| now >= t)
            && self.valid_before.is_none_or(|t| now < t)
    }
}

/// A parsed allowed signers file.
#[derive(Debug, Clone, Default)]
pub struct AllowedSigners {
    entries: Vec<AllowedSigner>,
}

impl AllowedSigners {
    /// The lines, in file order.
    pub fn entries(&self) -> &[AllowedSigner] {
        &self.entries
    }

    /// Reads and parses a file.
    ///
    /// # Errors
    ///
    /// [`SignatureError::Io`] or [`SignatureError::AllowedSigners`].
    pub fn read(path: &Path) -> Result<AllowedSigners, SignatureError> {
        let text = std::fs::read_to_string(path).map_err(|source| SignatureError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        AllowedSigners::parse(&text)
    }

    /// Parses the text of an allowed signers file.
    ///
    /// # Errors
    ///
    /// [`SignatureError::AllowedSigners`] naming the first bad line: an
    /// unterminated quote, an unknown option, a bad time, or a key that does
    /// not parse.
    pub fn parse(text: &str) -> Result<AllowedSigners, SignatureError> {
        let mut entries = Vec::new();
        for (index, raw) in text.lines().enumerate() {
            let line = index + 1;
            let content = raw.trim();
            if content.is_empty() || content.starts_with('#') {
                continue;
            }
            let error = |message: String| SignatureError::AllowedSigners { line, message };
            let (principals, rest) = take_token(content).map_err(error)?;
            let principals = unquote(principals);
            if principals.is_empty() {
                return Err(error("empty principals".into()));
            }
            let rest = rest.trim_start();
            // Options are present when what follows is not already a key.
            let (options, key_text) = match PublicKey::from_openssh(rest) {
                Ok(_) => ("", rest),
                Err(_) => {
                    let (options, key_text) = take_token(rest).map_err(error)?;
                    (options, key_text.trim_start())
                }
            };
            let key = PublicKey::from_openssh(key_text)
                .map_err(|e| error(format!("not a public key ({e}): {}", clip(key_text))))?;
            let mut entry = AllowedSigner {
                principals: principals.to_string(),
                namespaces: None,
                cert_authority: false,
                valid_after: None,
                valid_before: None,
                key,
                line,
            };
            for option in split_options(options).map_err(error)? {
                let (name, value) = match option.split_once('=') {
                    Some((n, v)) => (n, Some(unquote(v))),
                    None => (option, None),
                };
                match (name.to_ascii_lowercase().as_str(), value) {
                    ("cert-authority", None) => entry.cert_authority = true,
                    ("namespaces", Some(v)) => {
                        entry.namespaces =
                            Some(v.split(',').map(|s| s.trim().to_string()).collect())
                    }
                    ("valid-after", Some(v)) => {
                        entry.valid_after = Some(parse_time(v).map_err(error)?)
                    }
                    ("valid-before", Some(v)) => {
                        entry.valid_before = Some(parse_time(v).map_err(error)?)
                    }
                    _ => return Err(error(format!("unknown or malformed option `{option}`"))),
                }
            }
            entries.push(entry);
        }
        Ok(AllowedSigners { entries })
    }
}

fn clip(s: &str) -> String {
    crate::text::clip_bytes(s, 48).into_owned()
}

/// The first whitespace-delimited token (a double-quoted part may hold
/// spaces) and the rest.
fn take_token(s: &str) -> Result<(&str, &str), String> {
    let mut quoted = false;
    for (i, c) in s.char_indices() {
        match c {
            '"' => quoted = !quoted,
            c if c.is_whitespace() && !quoted => return Ok((&s[..i], &s[i..])),
            _ => {}
        }
    }
    if quoted {
        Err("unterminated quote".into())
    } else {
        Ok((s, ""))
    }
}

/// Comma-separated options; commas inside double quotes do not split.
fn split_options(s: &str) -> Result<Vec<&str>, String> {
    if s.is_empty() {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    let mut quoted = false;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '"' => quoted = !quoted,
            ',' if !quoted => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if quoted {
        return Err("unterminated quote in options".into());
    }
    out.push(&s[start..]);
    if out.iter().any(|o| o.is_empty()) {
        return Err("empty option".into());
    }
    Ok(out)
}

fn unquote(s: &str) -> &str {
    s.strip_prefix('"')
        .and_then(|s| s.strip_suffix('"'))
        .unwrap_or(s)
}

/// `YYYYMMDD[HHMM[SS]][Z]` as seconds since the Unix epoch, read as UTC.
fn parse_time(text: &str) -> Result<u64, String> {
    let digits = text.strip_suffix(['Z', 'z']).unwrap_or(text);
    let bad = || format!("bad time `{text}` (expected YYYYMMDD[HHMM[SS]][Z])");
    if !matches!(digits.len(), 8 | 12 | 14) || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let num =
        |r: std::ops::Range<usize>| digits.get(r).map_or(0, |s| s.parse::<u64>().unwrap_or(0));
    let (year, month, day) = (num(0..4), num(4..6), num(6..8));
    let (hour, minute, second) = (num(8..10), num(10..12), num(12..14));
    if !(1..=12).contains(&month)
        || day == 0
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || second > 59
        || year < 1970
    {
        return Err(bad());
    }
    Ok(days_from_civil(year, month, day) * 86_400 + hour * 3_600 + minute * 60 + second)
}

fn days_in_month(year: u64, month: u64) -> u64 {
    match month {
        2 if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (year ≥ 1970).
fn days_from_civil(year: u64, month: u64, day: u64) -> u64 {
    let (y, m) = if month <= 2 {
        (year - 1, month + 9)
    } else {
        (year, month - 3)
    };
    let era = y / 400;
    let yoe = y - era * 400;
    let doy = (153 * m + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// OpenSSH pattern lists: `*` and `?` wildcards, `!` negates; a negated
/// match refuses, otherwise any positive match accepts.
fn match_pattern_list(name: &str, patterns: &[String]) -> bool {
    let mut matched = false;
    for pattern in patterns {
        if let Some(negated) = pattern.strip_prefix('!') {
            if wildcard(name.as_bytes(), negated.as_bytes()) {
                return false;
            }
        } else if wildcard(name.as_bytes(), pattern.as_bytes()) {
            matched = true;
        }
    }
    matched
}

fn wildcard(name: &[u8], pattern: &[u8]) -> bool {
    match pattern.split_first() {
        None => name.is_empty(),
        Some((b'*', rest)) => (0..=name.len()).any(|i| wildcard(&name[i..], rest)),
        Some((b'?', rest)) => !name.is_empty() && wildcard(&name[1..], rest),
        Some((c, rest)) => name.first() == Some(c) && wildcard(&name[1..], rest),
    }
}

/// Checks `signature` (the armored text of `FILE.sig`, `None` when there is
/// none) over `bytes` against `allowed`, at the current time.
pub fn verify(bytes: &[u8], signature: Option<&str>, allowed: &AllowedSigners) -> Verification {
    verify_at(bytes, signature, allowed, SystemTime::now())
}

/// [`verify`] at a given time (for `valid-after` / `valid-before`).
pub fn verify_at(
    bytes: &[u8],
    signature: Option<&str>,
    allowed: &AllowedSigners,
    now: SystemTime,
) -> Verification {
    let Some(text) = signature else {
        return Verification::Unsigned;
    };
    let sig = match SshSig::from_pem(text.trim()) {
        Ok(sig) => sig,
        Err(e) => return Verification::BadSignature(BadSignature::Malformed(e.to_string())),
    };
    if sig.namespace() != NAMESPACE {
        return Verification::BadSignature(BadSignature::WrongNamespace {
            found: sig.namespace().to_string(),
        });
    }
    let key = PublicKey::from(sig.public_key().clone());
    if let Err(e) = key.verify(NAMESPACE, bytes, &sig) {
        return Verification::BadSignature(match e {
            ssh_key::Error::AlgorithmUnknown | ssh_key::Error::AlgorithmUnsupported { .. } => {
                BadSignature::Unsupported(e.to_string())
            }
            _ => BadSignature::Mismatch,
        });
    }
    let fingerprint = key.fingerprint(HashAlg::Sha256).to_string();
    let algorithm = key.algorithm().as_str().to_string();
    let now = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    match allowed.entries.iter().find(|e| e.vouches_for(&sig, now)) {
        Some(entry) => Verification::Verified(Signer {
            principal: entry.principals.clone(),
            fingerprint,
            algorithm,
        }),
        None => Verification::UntrustedSigner {
            fingerprint,
            algorithm,
        },
    }
}

/// Where the signature of `file` lives: `FILE.sig`.
pub fn signature_path(file: &Path) -> PathBuf {
    let mut name = file.as_os_str().to_owned();
    name.push(SIGNATURE_SUFFIX);
    PathBuf::from(name)
}

/// Reads the signature next to a file: `Ok(None)` when there is none.
///
/// # Errors
///
/// [`SignatureError::Io`] when it exists but cannot be read (or is not
/// UTF-8), [`SignatureError::SignatureTooLarge`] past 64 KiB.
pub fn read_signature(file: &Path) -> Result<Option<String>, SignatureError> {
    let path = signature_path(file);
    let io = |source| SignatureError::Io {
        path: path.clone(),
        source,
    };
    match std::fs::metadata(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(e)),
        Ok(meta) if meta.len() > MAX_SIGNATURE_BYTES => {
            return Err(SignatureError::SignatureTooLarge { path })
        }
        Ok(_) => {}
    }
    std::fs::read_to_string(&path).map(Some).map_err(io)
}

/// Verifies a component file and its `FILE.sig`.
///
/// # Errors
///
/// As [`read_signature`], or [`SignatureError::Io`] when the file itself
/// cannot be read.
pub fn verify_file(file: &Path, allowed: &AllowedSigners) -> Result<Verification, SignatureError> {
    let bytes = std::fs::read(file).map_err(|source| SignatureError::Io {
        path: file.to_path_buf(),
        source,
    })?;
    let signature = read_signature(file)?;
    Ok(verify(&bytes, signature.as_deref(), allowed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;
    use std::time::Duration;

    const SSH_KEYGEN: &str = "ssh-keygen";

    fn ssh_keygen(args: &[&str], dir: &Path) {
        let out = Command::new(SSH_KEYGEN)
            .args(args)
            .current_dir(dir)
            .output()
            .unwrap_or_else(|e| {
                panic!("running ssh-keygen ({e}); install it: apt-get install -y openssh-client")
            });
        assert!(
            out.status.success(),
            "ssh-keygen {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// A fresh key pair `DIR/NAME` (+ `.pub`); returns the public key line.
    fn keygen(dir: &Path, name: &str, kind: &[&str]) -> String {
        let mut args = vec!["-q", "-N", "", "-C", name, "-f", name];
        args.extend_from_slice(kind);
        ssh_keygen(&args, dir);
        std::fs::read_to_string(dir.join(format!("{name}.pub")))
            .unwrap()
            .trim()
            .to_string()
    }

    fn sign(dir: &Path, key: &str, namespace: &str, file: &str) -> String {
        let sig = dir.join(format!("{file}.sig"));
        let _ = std::fs::remove_file(&sig);
        ssh_keygen(&["-Y", "sign", "-n", namespace, "-f", key, file], dir);
        std::fs::read_to_string(sig).unwrap()
    }

    struct Fixture {
        dir: tempfile::TempDir,
        alice: String,
        bob: String,
    }

    fn fixture() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let alice = keygen(dir.path(), "alice", &["-t", "ed25519"]);
        let bob = keygen(dir.path(), "bob", &["-t", "ed25519"]);
        std::fs::write(dir.path().join("plugin.wasm"), b"\0asm component bytes").unwrap();
        Fixture { dir, alice, bob }
    }

    fn allowed(text: &str) -> AllowedSigners {
        AllowedSigners::parse(text).unwrap()
    }

    fn plugin_bytes(f: &Fixture) -> Vec<u8> {
        std::fs::read(f.dir.path().join("plugin.wasm")).unwrap()
    }

    #[test]
    fn ed25519_signature_by_an_allowed_key_verifies() {
        let f = fixture();
        sign(f.dir.path(), "alice", NAMESPACE, "plugin.wasm");
        let signers = allowed(&format!(
            "# trusted plugin authors\n\nalice@example.com namespaces=\"toolhost\" {}\n",
            f.alice
        ));
        let v = verify_file(&f.dir.path().join("plugin.wasm"), &signers).unwrap();
        let Verification::Verified(signer) = &v else {
            panic!("{v}")
        };
        assert_eq!(signer.principal, "alice@example.com");
        assert_eq!(signer.algorithm, "ssh-ed25519");
        assert_eq!(v.refusal_code(), None);
        // The fingerprint is the one ssh-keygen prints.
        let out = Command::new(SSH_KEYGEN)
            .args(["-l", "-f", "alice.pub"])
            .current_dir(f.dir.path())
            .output()
            .unwrap();
        let listed = String::from_utf8(out.stdout).unwrap();
        assert!(
            listed.contains(&signer.fingerprint),
            "{listed} vs {signer:?}"
        );
        assert!(signer.fingerprint.starts_with("SHA256:"));
    }

    #[test]
    fn ecdsa_and_rsa_signatures_verify() {
        let f = fixture();
        let ecdsa = keygen(f.dir.path(), "carol", &["-t", "ecdsa", "-b", "256"]);
        let rsa = keygen(f.dir.path(), "dave", &["-t", "rsa", "-b", "2048"]);
        let signers = allowed(&format!(
            "carol@example.com {ecdsa}\ndave@example.com {rsa}\n"
        ));
        for (key, principal, algorithm) in [
            ("carol", "carol@example.com", "ecdsa-sha2-nistp256"),
            ("dave", "dave@example.com", "ssh-rsa"),
        ] {
            let sig = sign(f.dir.path(), key, NAMESPACE, "plugin.wasm");
            let v = verify(&plugin_bytes(&f), Some(&sig), &signers);
            let signer = v.signer().unwrap_or_else(|| panic!("{key}: {v}"));
            assert_eq!(signer.principal, principal);
            assert_eq!(signer.algorithm, algorithm);
            // And a flipped byte breaks it, whatever the key type.
            let mut bytes = plugin_bytes(&f);
            bytes[3] ^= 1;
            assert_eq!(
                verify(&bytes, Some(&sig), &signers),
                Verification::BadSignature(BadSignature::Mismatch),
                "{key}"
            );
        }
    }

    #[test]
    fn unsigned_file_is_unsigned() {
        let f = fixture();
        let signers = allowed(&format!("alice@example.com {}\n", f.alice));
        let v = verify_file(&f.dir.path().join("plugin.wasm"), &signers).unwrap();
        assert_eq!(v, Verification::Unsigned);
        assert_eq!(v.refusal_code(), Some("unsigned_plugin"));
    }

    #[test]
    fn tampered_file_is_a_bad_signature() {
        let f = fixture();
        let sig = sign(f.dir.path(), "alice", NAMESPACE, "plugin.wasm");
        let signers = allowed(&format!("alice@example.com {}\n", f.alice));
        // Same size, one byte changed.
        let mut bytes = plugin_bytes(&f);
        let last = bytes.len() - 1;
        bytes[last] ^= 0x20;
        let v = verify(&bytes, Some(&sig), &signers);
        assert_eq!(v, Verification::BadSignature(BadSignature::Mismatch));
        assert_eq!(v.refusal_code(), Some("bad_signature"));
        assert!(v.to_string().contains("does not match"), "{v}");
        // A signature of another file is no better.
        std::fs::write(f.dir.path().join("other.wasm"), b"other").unwrap();
        let other = sign(f.dir.path(), "alice", NAMESPACE, "other.wasm");
        assert_eq!(
            verify(&plugin_bytes(&f), Some(&other), &signers),
            Verification::BadSignature(BadSignature::Mismatch)
        );
    }

    #[test]
    fn wrong_namespace_is_a_bad_signature() {
        let f = fixture();
        let sig = sign(f.dir.path(), "alice", "git", "plugin.wasm");
        let signers = allowed(&format!("alice@example.com {}\n", f.alice));
        let v = verify(&plugin_bytes(&f), Some(&sig), &signers);
        assert_eq!(
            v,
            Verification::BadSignature(BadSignature::WrongNamespace {
                found: "git".into()
            })
        );
        assert!(v.to_string().contains("-n toolhost"), "{v}");
    }

    #[test]
    fn signature_by_an_unlisted_key_is_untrusted() {
        let f = fixture();
        let sig = sign(f.dir.path(), "bob", NAMESPACE, "plugin.wasm");
        let signers = allowed(&format!("alice@example.com {}\n", f.alice));
        let v = verify(&plugin_bytes(&f), Some(&sig), &signers);
        let Verification::UntrustedSigner { fingerprint, .. } = &v else {
            panic!("{v}")
        };
        assert!(fingerprint.starts_with("SHA256:"));
        assert_eq!(v.refusal_code(), Some("bad_signature"));
        // An empty allowed_signers trusts nobody.
        assert!(matches!(
            verify(&plugin_bytes(&f), Some(&sig), &AllowedSigners::default()),
            Verification::UntrustedSigner { .. }
        ));
        // Listing bob fixes it.
        let both = allowed(&format!(
            "alice@example.com {}\n\"bob@example.com,bob@corp.example\" {}\n",
            f.alice, f.bob
        ));
        let v = verify(&plugin_bytes(&f), Some(&sig), &both);
        assert_eq!(
            v.signer().unwrap().principal,
            "bob@example.com,bob@corp.example"
        );
    }

    #[test]
    fn namespace_and_validity_options_restrict_a_key() {
        let f = fixture();
        let sig = sign(f.dir.path(), "alice", NAMESPACE, "plugin.wasm");
        let bytes = plugin_bytes(&f);
        let only_git = allowed(&format!(
            "alice@example.com namespaces=\"git,file\" {}\n",
            f.alice
        ));
        assert!(matches!(
            verify(&bytes, Some(&sig), &only_git),
            Verification::UntrustedSigner { .. }
        ));
        let wildcard = allowed(&format!(
            "alice@example.com namespaces=\"tool*\" {}\n",
            f.alice
        ));
        assert!(verify(&bytes, Some(&sig), &wildcard).signer().is_some());
        let negated = allowed(&format!(
            "alice@example.com namespaces=\"*,!toolhost\" {}\n",
            f.alice
        ));
        assert!(verify(&bytes, Some(&sig), &negated).signer().is_none());
        let ca = allowed(&format!("alice@example.com cert-authority {}\n", f.alice));
        assert!(verify(&bytes, Some(&sig), &ca).signer().is_none());

        let window = allowed(&format!(
            "alice@example.com valid-after=\"20200101\",valid-before=\"20300101Z\" {}\n",
            f.alice
        ));
        let at = |secs: u64| UNIX_EPOCH + Duration::from_secs(secs);
        // 2025-06-01 inside, 2019-06-01 before, 2031-01-01 after.
        assert!(verify_at(&bytes, Some(&sig), &window, at(1_748_736_000))
            .signer()
            .is_some());
        assert!(verify_at(&bytes, Some(&sig), &window, at(1_559_347_200))
            .signer()
            .is_none());
        assert!(verify_at(&bytes, Some(&sig), &window, at(1_924_992_000))
            .signer()
            .is_none());
    }

    #[test]
    fn malformed_signatures_are_bad_not_a_panic() {
        let f = fixture();
        let signers = allowed(&format!("alice@example.com {}\n", f.alice));
        let bytes = plugin_bytes(&f);
        let sig = sign(f.dir.path(), "alice", NAMESPACE, "plugin.wasm");
        let cases = [
            String::new(),
            "garbage".to_string(),
            "-----BEGIN SSH SIGNATURE-----\nAAAA\n-----END SSH SIGNATURE-----\n".to_string(),
            sig.replace("BEGIN SSH SIGNATURE", "BEGIN PGP SIGNATURE"),
            // Truncated body.
            sig.lines().take(3).collect::<Vec<_>>().join("\n"),
        ];
        for case in cases {
            let v = verify(&bytes, Some(&case), &signers);
            assert!(
                matches!(v, Verification::BadSignature(BadSignature::Malformed(_))),
                "{case:?}: {v}"
            );
        }
        // A signature whose base64 was altered inside (one signature byte).
        let mut lines: Vec<String> = sig.lines().map(str::to_string).collect();
        let n = lines.len() - 2;
        let line = &mut lines[n];
        let c = line.remove(2);
        line.insert(2, if c == 'A' { 'B' } else { 'A' });
        let altered = lines.join("\n");
        assert!(matches!(
            verify(&bytes, Some(&altered), &signers),
            Verification::BadSignature(_)
        ));
    }

    #[test]
    fn agrees_with_ssh_keygen_verify() {
        let f = fixture();
        sign(f.dir.path(), "alice", NAMESPACE, "plugin.wasm");
        let text = format!("alice@example.com {}\n", f.alice);
        std::fs::write(f.dir.path().join("allowed_signers"), &text).unwrap();
        let verified = |dir: &Path| {
            Command::new(SSH_KEYGEN)
                .args([
                    "-Y",
                    "verify",
                    "-f",
                    "allowed_signers",
                    "-I",
                    "alice@example.com",
                    "-n",
                    NAMESPACE,
                    "-s",
                    "plugin.wasm.sig",
                ])
                .current_dir(dir)
                .stdin(std::fs::File::open(dir.join("plugin.wasm")).unwrap())
                .output()
                .unwrap()
                .status
                .success()
        };
        let ours = |dir: &Path| {
            verify_file(&dir.join("plugin.wasm"), &allowed(&text))
                .unwrap()
                .signer()
                .is_some()
        };
        assert!(verified(f.dir.path()) && ours(f.dir.path()));
        std::fs::write(f.dir.path().join("plugin.wasm"), b"\0asm component bytez").unwrap();
        assert!(!verified(f.dir.path()) && !ours(f.dir.path()));
    }

    #[test]
    fn allowed_signers_errors_name_the_line() {
        let f = fixture();
        let cases = [
            (format!("alice {}\nbob ssh-ed25519 notbase64\n", f.alice), 2),
            (format!("\"alice {}\n", f.alice), 1),
            (format!("alice unknown-option {}\n", f.alice), 1),
            (format!("alice valid-before=\"2020\" {}\n", f.alice), 1),
            (format!("alice valid-after=\"20201301\" {}\n", f.alice), 1),
            ("alice\n".to_string(), 1),
        ];
        for (text, line) in cases {
            match AllowedSigners::parse(&text) {
                Err(SignatureError::AllowedSigners { line: l, message }) => {
                    assert_eq!(l, line, "{text:?}: {message}")
                }
                other => panic!("{text:?}: {other:?}"),
            }
        }
        let parsed = allowed(&format!(
            "# c\nalice@example.com,alice@corp.example {}\n\n  bob@example.com namespaces=\"toolhost,git\" {}\n",
            f.alice, f.bob
        ));
        assert_eq!(parsed.entries().len(), 2);
        assert_eq!(
            parsed.entries()[0].principals,
            "alice@example.com,alice@corp.example"
        );
        assert_eq!(parsed.entries()[1].line, 4);
        assert_eq!(
            parsed.entries()[1].namespaces.as_deref(),
            Some(&["toolhost".to_string(), "git".to_string()][..])
        );
    }

    #[test]
    fn times_and_patterns() {
        assert_eq!(parse_time("19700101").unwrap(), 0);
        assert_eq!(parse_time("20000301").unwrap(), 951_868_800);
        assert_eq!(parse_time("20240229235959Z").unwrap(), 1_709_251_199);
        assert!(parse_time("20230229").is_err());
        assert!(parse_time("2024022912").is_err());
        assert!(match_pattern_list("toolhost", &["toolhost".into()]));
        assert!(match_pattern_list(
            "toolhost",
            &["git".into(), "t?olh*".into()]
        ));
        assert!(!match_pattern_list("toolhost", &["git".into()]));
        assert!(!match_pattern_list(
            "toolhost",
            &["*".into(), "!tool*".into()]
        ));
    }

    #[test]
    fn signature_file_next_to_the_plugin() {
        assert_eq!(
            signature_path(Path::new("/p/plugin.wasm")),
            Path::new("/p/plugin.wasm.sig")
        );
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("p.wasm");
        std::fs::write(&file, b"x").unwrap();
        std::fs::write(signature_path(&file), vec![b'a'; 70_000]).unwrap();
        assert!(matches!(
            read_signature(&file),
            Err(SignatureError::SignatureTooLarge { .. })
        ));
        assert!(matches!(
            verify_file(&dir.path().join("missing.wasm"), &AllowedSigners::default()),
            Err(SignatureError::Io { .. })
        ));
    }
}
