//! OCI distribution: push a component to a registry and pull it back, every
//! digest checked.
//!
//! References are written `oci://HOST[:PORT]/REPO[:TAG][@sha256:HEX]` (the
//! tag defaults to `latest`; a digest, when given, is what is fetched and
//! the tag is only a label). The artifact has the Wasm OCI layout that
//! wasm-pkg-tools (`wkg oci push/pull`) and Wassette use, so either side can
//! read what the other wrote:
//!
//! - manifest `application/vnd.oci.image.manifest.v1+json` (schema 2, no
//!   `artifactType`, like `wkg`);
//! - config `application/vnd.wasm.config.v0+json`: `{created, author,
//!   architecture: "wasm", os: "wasip2", layerDigests: [<layer digest>],
//!   component: {exports, imports, target}}`, the export and import names
//!   read from the component's own top-level sections;
//! - exactly one layer `application/wasm`: the component bytes.
//!
//! **The signature travels as a manifest annotation**,
//! [`SIGNATURE_ANNOTATION`], holding the armored SSHSIG text of
//! `FILE.sig` (see [`super::signature`]). That is the simplest carrier that
//! survives any registry: the manifest digest covers it, it needs no
//! referrers API (Distribution 2.8 has none) and no second layer (which
//! `wkg` would refuse), and a client that does not know it ignores it.
//!
//! Pulling verifies, independently of the client library: the SHA-256 of
//! the manifest bytes against the digest asked for (`@sha256:…`) and, when
//! given, the digest pinned in the lock; the config and the layer against
//! their descriptors' digests and sizes; and that the config's
//! `layerDigests` name the layer. Sizes are bounded before anything is read
//! into memory. What was pulled is returned with its manifest digest, so
//! the lock can pin it (`oci://…@sha256:…`).
//!
//! The transport is the maintained `oci-client` crate (the ORAS project's
//! Rust client) on reqwest with rustls and the `ring` provider the host
//! already uses. Plain HTTP (`insecure`) is allowed only when asked for and
//! only for a loopback registry (`localhost`, `127.0.0.0/8`, `[::1]`).

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;
use std::time::Duration;

use futures_util::StreamExt;
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::errors::OciDistributionError;
use oci_client::manifest::OciDescriptor;
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference, RegistryOperation};
use serde::{Deserialize, Serialize};

use super::{is_sha256_digest, sha256_digest};

/// The reference scheme.
pub const SCHEME: &str = "oci://";
/// The manifest media type.
pub const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
/// The config media type of a Wasm artifact.
pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
/// The media type of the one layer: the component.
pub const LAYER_MEDIA_TYPE: &str = "application/wasm";
/// The manifest annotation carrying the SSHSIG signature of the layer.
pub const SIGNATURE_ANNOTATION: &str = "dev.toolhost.signature.sshsig";
/// Largest component pushed or pulled.
pub const MAX_COMPONENT_BYTES: u64 = 256 * 1024 * 1024;
/// Largest config blob pulled.
const MAX_CONFIG_BYTES: u64 = 1024 * 1024;
/// Largest signature carried.
const MAX_SIGNATURE_BYTES: usize = 64 * 1024;
const TAG_DEFAULT: &str = "latest";
const USER_AGENT: &str = concat!("toolhost/", env!("CARGO_PKG_VERSION"));

/// Why a push or pull failed.
#[derive(Debug, thiserror::Error)]
pub enum OciError {
    #[error("`{input}` is not an oci:// reference: {reason}")]
    BadReference { input: String, reason: String },
    #[error("plain HTTP (insecure) is allowed only for a loopback registry, not `{registry}`")]
    InsecureNotLoopback { registry: String },
    #[error("not a WebAssembly component: {0}")]
    NotAComponent(String),
    #[error("{what} of {size} bytes is larger than the limit of {max} bytes")]
    TooLarge {
        what: &'static str,
        size: u64,
        max: u64,
    },
    #[error("not a Wasm OCI artifact: {0}")]
    NotWasmArtifact(String),
    /// Bytes that do not hash to the digest they were asked for or
    /// described by: a tampered registry, a moved tag, or a broken transfer.
    #[error("{what} digest mismatch: expected {expected}, got {actual}")]
    DigestMismatch {
        what: &'static str,
        expected: String,
        actual: String,
    },
    #[error("{what} size mismatch: the descriptor says {expected} bytes, got {actual}")]
    SizeMismatch {
        what: &'static str,
        expected: u64,
        actual: u64,
    },
    #[error("registry {registry}: {message}")]
    Registry { registry: String, message: String },
    #[error("cannot start the network runtime: {0}")]
    Runtime(String),
}

/// `oci://HOST[:PORT]/REPO[:TAG][@sha256:HEX]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OciReference {
    /// `HOST[:PORT]`.
    pub registry: String,
    /// `a/b/c`, lowercase.
    pub repository: String,
    pub tag: Option<String>,
    /// `sha256:…` of the manifest.
    pub digest: Option<String>,
}

impl OciReference {
    /// The same repository pinned to a manifest digest, without a tag: the
    /// form the lock records.
    pub fn pinned(&self, digest: &str) -> OciReference {
        OciReference {
            registry: self.registry.clone(),
            repository: self.repository.clone(),
            tag: None,
            digest: Some(digest.to_string()),
        }
    }

    /// The registry host, without port or brackets.
    pub fn host(&self) -> &str {
        let r = self.registry.as_str();
        if let Some(rest) = r.strip_prefix('[') {
            return rest.split(']').next().unwrap_or("");
        }
        r.split(':').next().unwrap_or(r)
    }

    /// Whether the registry is on this machine: `localhost` or a loopback
    /// address.
    pub fn is_loopback(&self) -> bool {
        let host = self.host();
        host.eq_ignore_ascii_case("localhost")
            || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
    }

    /// The tag to push to or pull by (`latest` when none was given).
    pub fn tag_or_default(&self) -> &str {
        self.tag.as_deref().unwrap_or(TAG_DEFAULT)
    }

    fn client_reference(&self) -> Reference {
        match &self.digest {
            Some(d) => {
                Reference::with_digest(self.registry.clone(), self.repository.clone(), d.clone())
            }
            None => Reference::with_tag(
                self.registry.clone(),
                self.repository.clone(),
                self.tag_or_default().to_string(),
            ),
        }
    }
}

impl fmt::Display for OciReference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{SCHEME}{}/{}", self.registry, self.repository)?;
        if let Some(tag) = &self.tag {
            write!(f, ":{tag}")?;
        }
        if let Some(digest) = &self.digest {
            write!(f, "@{digest}")?;
        }
        Ok(())
    }
}

impl FromStr for OciReference {
    type Err = OciError;

    fn from_str(input: &str) -> Result<Self, OciError> {
        let bad = |reason: &str| OciError::BadReference {
            input: input.to_string(),
            reason: reason.to_string(),
        };
        let rest = input
            .strip_prefix(SCHEME)
            .ok_or_else(|| bad("it must start with oci://"))?;
        let (registry, path) = rest
            .split_once('/')
            .ok_or_else(|| bad("expected oci://HOST[:PORT]/REPOSITORY"))?;
        if !valid_registry(registry) {
            return Err(bad(
                "the registry must be HOST or HOST:PORT (no user name, no path)",
            ));
        }
        let (path, digest) = match path.split_once('@') {
            Some((p, d)) => {
                if !is_sha256_digest(d) {
                    return Err(bad(
                        "the digest must be sha256: and 64 lowercase hex digits",
                    ));
                }
                (p, Some(d.to_string()))
            }
            None => (path, None),
        };
        let (repository, tag) = match path.rsplit_once(':') {
            Some((r, t)) if !t.contains('/') => (r, Some(t.to_string())),
            _ => (path, None),
        };
        if repository.len() > 255 || !repository.split('/').all(valid_path_component) {
            return Err(bad(
                "the repository must be lowercase path components ([a-z0-9] separated by '.', '_', '__' or '-')",
            ));
        }
        if let Some(t) = &tag {
            let ok = t.len() <= 128
                && t.bytes()
                    .next()
                    .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_')
                && t.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
            if !ok {
                return Err(bad("the tag must be [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"));
            }
        }
        Ok(OciReference {
            registry: registry.to_string(),
            repository: repository.to_string(),
            tag,
            digest,
        })
    }
}

fn valid_registry(registry: &str) -> bool {
    let (host, port) = if let Some(rest) = registry.strip_prefix('[') {
        match rest.split_once(']') {
            Some((ip, after)) if ip.parse::<std::net::Ipv6Addr>().is_ok() => {
                (ip, after.strip_prefix(':'))
            }
            _ => return false,
        }
    } else {
        match registry.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (registry, None),
        }
    };
    let host_ok = registry.starts_with('[')
        || (!host.is_empty()
            && host.len() <= 253
            && host.split('.').all(|label| {
                !label.is_empty()
                    && label.len() <= 63
                    && label
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-')
                    && !label.starts_with('-')
                    && !label.ends_with('-')
            }));
    let port_ok =
        port.is_none_or(|p| !p.is_empty() && p.len() <= 5 && p.parse::<u16>().is_ok_and(|n| n > 0));
    host_ok && port_ok
}

fn valid_path_component(component: &str) -> bool {
    // [a-z0-9]+ joined by '.', '_', '__' or one or more '-'.
    let bytes = component.as_bytes();
    if bytes.is_empty() || !is_alnum_lower(bytes[0]) || !is_alnum_lower(bytes[bytes.len() - 1]) {
        return false;
    }
    let mut i = 0;
    while i < bytes.len() {
        if is_alnum_lower(bytes[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && !is_alnum_lower(bytes[i]) {
            i += 1;
        }
        let sep = &component[start..i];
        if !(sep == "." || sep == "_" || sep == "__" || sep.bytes().all(|b| b == b'-')) {
            return false;
        }
    }
    true
}

fn is_alnum_lower(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

/// Registry credentials.
#[derive(Clone, Default)]
pub enum Credentials {
    #[default]
    Anonymous,
    Basic {
        username: String,
        password: String,
    },
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Credentials::Anonymous => f.write_str("Anonymous"),
            Credentials::Basic { username, .. } => write!(f, "Basic({username}, <hidden>)"),
        }
    }
}

/// How to talk to the registry.
#[derive(Debug, Clone)]
pub struct OciOptions {
    /// Plain HTTP; refused unless the registry is on loopback.
    pub insecure: bool,
    pub credentials: Credentials,
    /// Connect and read timeout.
    pub timeout: Duration,
}

impl Default for OciOptions {
    fn default() -> Self {
        OciOptions {
            insecure: false,
            credentials: Credentials::Anonymous,
            timeout: Duration::from_secs(60),
        }
    }
}

/// The config blob of a Wasm artifact.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WasmConfig {
    /// RFC 3339 creation time.
    pub created: String,
    #[serde(default)]
    pub author: Option<String>,
    /// Always `wasm`.
    pub architecture: String,
    /// `wasip2` for a component.
    pub os: String,
    /// The digest of each layer, in manifest order.
    #[serde(default)]
    pub layer_digests: Vec<String>,
    #[serde(default)]
    pub component: Option<ComponentInfo>,
}

/// The component's top-level imports and exports.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ComponentInfo {
    pub exports: Vec<String>,
    pub imports: Vec<String>,
    #[serde(default)]
    pub target: Option<String>,
}

impl ComponentInfo {
    /// Reads the names of a component's top-level imports and exports.
    ///
    /// # Errors
    ///
    /// [`OciError::NotAComponent`] for a core module or bytes that do not
    /// parse.
    pub fn read(bytes: &[u8]) -> Result<ComponentInfo, OciError> {
        use wasmparser::{Encoding, Parser, Payload};
        let mut info = ComponentInfo::default();
        let mut depth = 0usize;
        for payload in Parser::new(0).parse_all(bytes) {
            let payload = payload.map_err(|e| OciError::NotAComponent(e.to_string()))?;
            match payload {
                Payload::Version { encoding, .. } => {
                    if depth == 0 && encoding != Encoding::Component {
                        return Err(OciError::NotAComponent(
                            "a core module, not a component".into(),
                        ));
                    }
                    depth += 1;
                }
                Payload::End(_) => depth = depth.saturating_sub(1),
                Payload::ComponentImportSection(reader) if depth == 1 => {
                    for import in reader {
                        let import = import.map_err(|e| OciError::NotAComponent(e.to_string()))?;
                        info.imports.push(import.name.name.to_string());
                    }
                }
                Payload::ComponentExportSection(reader) if depth == 1 => {
                    for export in reader {
                        let export = export.map_err(|e| OciError::NotAComponent(e.to_string()))?;
                        info.exports.push(export.name.name.to_string());
                    }
                }
                _ => {}
            }
        }
        if depth != 0 {
            return Err(OciError::NotAComponent("truncated".into()));
        }
        Ok(info)
    }
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Manifest {
    schema_version: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    media_type: Option<String>,
    config: Descriptor,
    layers: Vec<Descriptor>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    annotations: BTreeMap<String, String>,
}

#[derive(Serialize, Deserialize, Clone)]
#[serde(rename_all = "camelCase")]
struct Descriptor {
    media_type: String,
    digest: String,
    size: u64,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    annotations: BTreeMap<String, String>,
}

impl Descriptor {
    fn for_client(&self) -> OciDescriptor {
        OciDescriptor {
            media_type: self.media_type.clone(),
            digest: self.digest.clone(),
            size: i64::try_from(self.size).unwrap_or(i64::MAX),
            ..Default::default()
        }
    }
}

/// What a push stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pushed {
    /// `oci://…@sha256:…` of the manifest.
    pub pinned: OciReference,
    pub manifest_digest: String,
    pub config_digest: String,
    pub layer_digest: String,
}

/// What a pull fetched, verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pulled {
    /// The component bytes.
    pub bytes: Vec<u8>,
    /// `oci://…@sha256:…` of the manifest: what the lock records.
    pub pinned: OciReference,
    pub manifest_digest: String,
    /// `sha256:` of `bytes`.
    pub layer_digest: String,
    pub config: WasmConfig,
    /// The armored SSHSIG text of the annotation, if any.
    pub signature: Option<String>,
}

fn install_crypto_provider() {
    // reqwest is built without a provider of its own: it uses the process
    // default, which must be ring (the host's only TLS provider). Another
    // component may have installed it already; that is fine.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

fn client_for(reference: &OciReference, options: &OciOptions) -> Result<Client, OciError> {
    let protocol = if options.insecure {
        if !reference.is_loopback() {
            return Err(OciError::InsecureNotLoopback {
                registry: reference.registry.clone(),
            });
        }
        ClientProtocol::HttpsExcept(vec![reference.registry.clone()])
    } else {
        ClientProtocol::Https
    };
    install_crypto_provider();
    let config = ClientConfig {
        protocol,
        read_timeout: Some(options.timeout),
        connect_timeout: Some(options.timeout),
        user_agent: USER_AGENT,
        ..ClientConfig::default()
    };
    Client::try_from(config).map_err(|e| registry_error(reference, e))
}

fn auth(options: &OciOptions) -> RegistryAuth {
    match &options.credentials {
        Credentials::Anonymous => RegistryAuth::Anonymous,
        Credentials::Basic { username, password } => {
            RegistryAuth::Basic(username.clone(), password.clone())
        }
    }
}

fn registry_error(reference: &OciReference, error: OciDistributionError) -> OciError {
    if let OciDistributionError::DigestError(oci_client::errors::DigestError::VerificationError {
        expected,
        actual,
    }) = &error
    {
        return OciError::DigestMismatch {
            what: "blob",
            expected: expected.clone(),
            actual: actual.clone(),
        };
    }
    OciError::Registry {
        registry: reference.registry.clone(),
        message: error.to_string(),
    }
}

/// The manifest and config a component is pushed with.
fn artifact(
    component: &[u8],
    signature: Option<&str>,
    created: &str,
) -> Result<(Vec<u8>, Vec<u8>, WasmConfig), OciError> {
    let size = component.len() as u64;
    if size > MAX_COMPONENT_BYTES {
        return Err(OciError::TooLarge {
            what: "component",
            size,
            max: MAX_COMPONENT_BYTES,
        });
    }
    let info = ComponentInfo::read(component)?;
    let layer_digest = sha256_digest(component);
    let config = WasmConfig {
        created: created.to_string(),
        author: None,
        architecture: "wasm".into(),
        os: "wasip2".into(),
        layer_digests: vec![layer_digest.clone()],
        component: Some(info),
    };
    let config_bytes =
        serde_json::to_vec(&config).map_err(|e| OciError::NotWasmArtifact(e.to_string()))?;
    let mut annotations = BTreeMap::new();
    annotations.insert(
        "org.opencontainers.image.created".to_string(),
        created.to_string(),
    );
    if let Some(sig) = signature {
        if sig.len() > MAX_SIGNATURE_BYTES {
            return Err(OciError::TooLarge {
                what: "signature",
                size: sig.len() as u64,
                max: MAX_SIGNATURE_BYTES as u64,
            });
        }
        annotations.insert(SIGNATURE_ANNOTATION.to_string(), sig.to_string());
    }
    let manifest = Manifest {
        schema_version: 2,
        media_type: Some(MANIFEST_MEDIA_TYPE.into()),
        config: Descriptor {
            media_type: CONFIG_MEDIA_TYPE.into(),
            digest: sha256_digest(&config_bytes),
            size: config_bytes.len() as u64,
            annotations: BTreeMap::new(),
        },
        layers: vec![Descriptor {
            media_type: LAYER_MEDIA_TYPE.into(),
            digest: layer_digest,
            size,
            annotations: BTreeMap::new(),
        }],
        annotations,
    };
    let manifest_bytes =
        serde_json::to_vec(&manifest).map_err(|e| OciError::NotWasmArtifact(e.to_string()))?;
    Ok((manifest_bytes, config_bytes, config))
}

/// Pushes `component` (and its armored signature, if any) to `reference`
/// (its tag, `latest` by default).
///
/// # Errors
///
/// [`OciError::NotAComponent`], [`OciError::TooLarge`],
/// [`OciError::InsecureNotLoopback`], [`OciError::Registry`].
pub async fn push(
    reference: &OciReference,
    component: &[u8],
    signature: Option<&str>,
    options: &OciOptions,
) -> Result<Pushed, OciError> {
    let created = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let (manifest_bytes, config_bytes, config) = artifact(component, signature, &created)?;
    let client = client_for(reference, options)?;
    let target = OciReference {
        digest: None,
        tag: Some(reference.tag_or_default().to_string()),
        ..reference.clone()
    }
    .client_reference();
    let err = |e| registry_error(reference, e);
    client
        .auth(&target, &auth(options), RegistryOperation::Push)
        .await
        .map_err(err)?;
    let layer_digest = config.layer_digests[0].clone();
    let config_digest = sha256_digest(&config_bytes);
    client
        .push_blob(&target, component.to_vec(), &layer_digest)
        .await
        .map_err(err)?;
    client
        .push_blob(&target, config_bytes, &config_digest)
        .await
        .map_err(err)?;
    let manifest_digest = sha256_digest(&manifest_bytes);
    client
        .push_manifest_raw(
            &target,
            manifest_bytes,
            http::HeaderValue::from_static(MANIFEST_MEDIA_TYPE),
        )
        .await
        .map_err(err)?;
    Ok(Pushed {
        pinned: reference.pinned(&manifest_digest),
        manifest_digest,
        config_digest,
        layer_digest,
    })
}

/// Pulls the component at `reference` and verifies every digest; when
/// `expected_manifest` is given (the digest pinned in the lock), the
/// manifest must have it too.
///
/// # Errors
///
/// [`OciError::DigestMismatch`] and [`OciError::SizeMismatch`] for bytes
/// that are not what was asked for, [`OciError::NotWasmArtifact`] for
/// another kind of artifact, [`OciError::TooLarge`],
/// [`OciError::InsecureNotLoopback`], [`OciError::Registry`].
pub async fn pull(
    reference: &OciReference,
    expected_manifest: Option<&str>,
    options: &OciOptions,
) -> Result<Pulled, OciError> {
    let client = client_for(reference, options)?;
    let target = reference.client_reference();
    let err = |e| registry_error(reference, e);
    client
        .auth(&target, &auth(options), RegistryOperation::Pull)
        .await
        .map_err(err)?;
    let (manifest_bytes, _) = client
        .pull_manifest_raw(&target, &auth(options), &[MANIFEST_MEDIA_TYPE])
        .await
        .map_err(|e| match err(e) {
            // The client compares the body with the digest asked for.
            OciError::DigestMismatch {
                expected, actual, ..
            } => OciError::DigestMismatch {
                what: "manifest",
                expected,
                actual,
            },
            other => other,
        })?;
    let manifest_digest = sha256_digest(&manifest_bytes);
    for expected in [reference.digest.as_deref(), expected_manifest]
        .into_iter()
        .flatten()
    {
        if expected != manifest_digest {
            return Err(OciError::DigestMismatch {
                what: "manifest",
                expected: expected.to_string(),
                actual: manifest_digest,
            });
        }
    }
    let manifest: Manifest = serde_json::from_slice(&manifest_bytes)
        .map_err(|e| OciError::NotWasmArtifact(format!("manifest: {e}")))?;
    if manifest.schema_version != 2
        || manifest
            .media_type
            .as_deref()
            .is_some_and(|m| m != MANIFEST_MEDIA_TYPE)
    {
        return Err(OciError::NotWasmArtifact(
            "not an OCI image manifest (schema 2)".into(),
        ));
    }
    if manifest.config.media_type != CONFIG_MEDIA_TYPE {
        return Err(OciError::NotWasmArtifact(format!(
            "config media type {} (expected {CONFIG_MEDIA_TYPE})",
            manifest.config.media_type
        )));
    }
    let [layer] = manifest.layers.as_slice() else {
        return Err(OciError::NotWasmArtifact(format!(
            "{} layers (expected exactly one)",
            manifest.layers.len()
        )));
    };
    if layer.media_type != LAYER_MEDIA_TYPE {
        return Err(OciError::NotWasmArtifact(format!(
            "layer media type {} (expected {LAYER_MEDIA_TYPE})",
            layer.media_type
        )));
    }
    for d in [&manifest.config, layer] {
        if !is_sha256_digest(&d.digest) {
            return Err(OciError::NotWasmArtifact(format!(
                "descriptor digest `{}` is not sha256",
                d.digest
            )));
        }
    }
    let config_bytes = fetch_blob(
        &client,
        reference,
        &target,
        &manifest.config,
        "config",
        MAX_CONFIG_BYTES,
    )
    .await?;
    let config: WasmConfig = serde_json::from_slice(&config_bytes)
        .map_err(|e| OciError::NotWasmArtifact(format!("config: {e}")))?;
    if config.architecture != "wasm" {
        return Err(OciError::NotWasmArtifact(format!(
            "config architecture `{}` (expected wasm)",
            config.architecture
        )));
    }
    if !config.layer_digests.is_empty() && config.layer_digests != [layer.digest.clone()] {
        return Err(OciError::NotWasmArtifact(
            "the config's layerDigests do not name the layer".into(),
        ));
    }
    let bytes = fetch_blob(
        &client,
        reference,
        &target,
        layer,
        "layer",
        MAX_COMPONENT_BYTES,
    )
    .await?;
    let signature = manifest.annotations.get(SIGNATURE_ANNOTATION).cloned();
    Ok(Pulled {
        layer_digest: layer.digest.clone(),
        pinned: reference.pinned(&manifest_digest),
        manifest_digest,
        config,
        signature,
        bytes,
    })
}

/// Downloads one blob, bounded by its descriptor's size (itself bounded by
/// `max`), and checks its size and SHA-256.
async fn fetch_blob(
    client: &Client,
    reference: &OciReference,
    target: &Reference,
    descriptor: &Descriptor,
    what: &'static str,
    max: u64,
) -> Result<Vec<u8>, OciError> {
    if descriptor.size > max {
        return Err(OciError::TooLarge {
            what,
            size: descriptor.size,
            max,
        });
    }
    let mut stream = client
        .pull_blob_stream(target, &descriptor.for_client())
        .await
        .map_err(|e| registry_error(reference, e))?;
    let mut bytes = Vec::with_capacity(descriptor.size as usize);
    while let Some(chunk) = stream.next().await {
        let chunk = match chunk {
            Ok(c) => c,
            Err(e) => {
                // The client checks the digest at the end of the stream;
                // report that as this blob's mismatch.
                if let Some(oci_client::errors::DigestError::VerificationError {
                    expected,
                    actual,
                }) = e.get_ref().and_then(|inner| inner.downcast_ref())
                {
                    return Err(OciError::DigestMismatch {
                        what,
                        expected: expected.clone(),
                        actual: actual.clone(),
                    });
                }
                return Err(OciError::Registry {
                    registry: reference.registry.clone(),
                    message: format!("reading the {what}: {e}"),
                });
            }
        };
        if bytes.len() as u64 + chunk.len() as u64 > descriptor.size {
            return Err(OciError::SizeMismatch {
                what,
                expected: descriptor.size,
                actual: bytes.len() as u64 + chunk.len() as u64,
            });
        }
        bytes.extend_from_slice(&chunk);
    }
    if bytes.len() as u64 != descriptor.size {
        return Err(OciError::SizeMismatch {
            what,
            expected: descriptor.size,
            actual: bytes.len() as u64,
        });
    }
    let actual = sha256_digest(&bytes);
    if actual != descriptor.digest {
        return Err(OciError::DigestMismatch {
            what,
            expected: descriptor.digest.clone(),
            actual,
        });
    }
    Ok(bytes)
}

fn runtime() -> Result<tokio::runtime::Runtime, OciError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| OciError::Runtime(e.to_string()))
}

/// [`push`] on a runtime of its own, for synchronous callers (the CLI).
/// Not to be called from inside an async runtime.
///
/// # Errors
///
/// As [`push`], or [`OciError::Runtime`].
pub fn push_blocking(
    reference: &OciReference,
    component: &[u8],
    signature: Option<&str>,
    options: &OciOptions,
) -> Result<Pushed, OciError> {
    runtime()?.block_on(push(reference, component, signature, options))
}

/// [`pull`] on a runtime of its own, for synchronous callers.
///
/// # Errors
///
/// As [`pull`], or [`OciError::Runtime`].
pub fn pull_blocking(
    reference: &OciReference,
    expected_manifest: Option<&str>,
    options: &OciOptions,
) -> Result<Pulled, OciError> {
    runtime()?.block_on(pull(reference, expected_manifest, options))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> OciReference {
        s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn references_parse_and_print() {
        let r = parse("oci://127.0.0.1:5000/tools/echo:v1.2");
        assert_eq!(r.registry, "127.0.0.1:5000");
        assert_eq!(r.repository, "tools/echo");
        assert_eq!(r.tag.as_deref(), Some("v1.2"));
        assert_eq!(r.digest, None);
        assert_eq!(r.to_string(), "oci://127.0.0.1:5000/tools/echo:v1.2");
        assert!(r.is_loopback());

        let d = format!("sha256:{}", "a".repeat(64));
        let r = parse(&format!("oci://ghcr.io/org/my-tool@{d}"));
        assert_eq!(
            (r.tag.as_deref(), r.digest.as_deref()),
            (None, Some(d.as_str()))
        );
        assert!(!r.is_loopback());
        assert_eq!(r.tag_or_default(), "latest");

        let r = parse(&format!("oci://localhost:5000/a/b/c:t@{d}"));
        assert_eq!(r.tag.as_deref(), Some("t"));
        assert_eq!(
            r.pinned(&d).to_string(),
            format!("oci://localhost:5000/a/b/c@{d}")
        );
        assert!(r.is_loopback());

        let r = parse("oci://[::1]:5000/x");
        assert_eq!(r.host(), "::1");
        assert!(r.is_loopback());
        assert_eq!(parse("oci://registry.example/x").tag, None);
        assert!(parse("oci://127.5.6.7/x__y.z-w").is_loopback());
        assert!(!parse("oci://localhost.evil.example/x").is_loopback());
    }

    #[test]
    fn bad_references_are_refused() {
        for bad in [
            "127.0.0.1:5000/x",
            "oci://",
            "oci://host",
            "oci://user:pw@host/x",
            "oci://host/UPPER",
            "oci://host/a//b",
            "oci://host/-a",
            "oci://host/a:bad tag",
            "oci://host/a@sha256:abc",
            "oci://host/a@sha512:aaaa",
            "oci://host:0/a",
            "oci://host:99999/a",
            "oci://ho_st/a",
            "oci://[zz]/a",
            "oci://host/a:",
        ] {
            let err = bad.parse::<OciReference>().unwrap_err();
            assert!(matches!(err, OciError::BadReference { .. }), "{bad}: {err}");
        }
    }

    #[test]
    fn insecure_is_only_for_loopback() {
        let remote = parse("oci://registry.example/x:1");
        let err = client_for(
            &remote,
            &OciOptions {
                insecure: true,
                ..OciOptions::default()
            },
        )
        .err()
        .unwrap();
        assert!(matches!(err, OciError::InsecureNotLoopback { .. }), "{err}");
        assert!(client_for(&remote, &OciOptions::default()).is_ok());
        let local = parse("oci://127.0.0.1:5000/x:1");
        assert!(client_for(
            &local,
            &OciOptions {
                insecure: true,
                ..OciOptions::default()
            }
        )
        .is_ok());
    }

    #[test]
    fn core_modules_and_garbage_are_not_components() {
        // A minimal core module: magic + version 1.
        let module = b"\0asm\x01\0\0\0";
        assert!(matches!(
            ComponentInfo::read(module),
            Err(OciError::NotAComponent(_))
        ));
        assert!(matches!(
            ComponentInfo::read(b"not wasm at all"),
            Err(OciError::NotAComponent(_))
        ));
        let err = artifact(module, None, "2026-01-01T00:00:00Z").unwrap_err();
        assert!(matches!(err, OciError::NotAComponent(_)), "{err}");
    }

    #[test]
    fn credentials_are_not_printed() {
        let c = Credentials::Basic {
            username: "ci".into(),
            password: "hunter2".into(),
        };
        assert_eq!(format!("{c:?}"), "Basic(ci, <hidden>)");
    }
}
