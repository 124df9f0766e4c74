//! Artifacts: whole results kept by the host when they were too large to
//! hand back, and the host's `artifact_view` tool that reads them back in
//! windows.
//!
//! A call whose output JSON is over its output limit is not a failure: the
//! pipeline keeps the whole output (compact JSON, secrets already redacted)
//! here and answers `ok` with a head and tail of it and a
//! `truncated.follow_up` call ([`crate::observation::Observation::spilled`]).
//! Each artifact is
//!
//! - **host-owned**: kept where only the host writes (a private
//!   directory, [`dir`], or the shared PostgreSQL store), named by a random
//!   128-bit id that is checked to be 32 hex digits before it reaches the
//!   backend;
//! - **owned by one token**: its metadata holds the SHA-256 of the binding
//!   of the capability token the call ran under
//!   ([`crate::policy::capability::Grant::binding_hex`]); a read under any other
//!   token (an attenuation of it included) is `denied`;
//! - **kept for a retention period** ([`Artifacts::open`]): expiry is
//!   checked on every read, and expired artifacts are removed when a new
//!   one is written (at most once a minute);
//! - **within a quota** ([`Quota`]): per token and in all, in bytes and in
//!   artifacts, counted over the live artifacts of the backend (so every
//!   process sharing it counts the same), the check and the write being one
//!   step ([`ArtifactBackend::put`]). An output
//!   over a cap is not kept ([`ArtifactError::OverQuota`]): the call's
//!   answer is clipped, with no artifact, and says which cap.
//!
//! [`view`] is the `artifact_view` tool: `{"artifact", "offset"?,
//! "length"?}` returns at most the bytes `offset..offset+length` as
//! `content`, with `total_bytes` and `has_more`. The window ends at the
//! last record boundary in it ([`crate::boundary`]: the end of an element
//! of the output's largest array, so a match or a line is never cut in
//! two), or on a UTF-8 boundary when a record is longer than the window.
//! While bytes are left, its `truncated.follow_up` names the next window
//! (from where this one ended), so following follow-ups from a spill reads
//! the whole output, byte for byte. Over MCP the same
//! artifact is a resource (`toolhost://artifacts/<id>`, [`uri`]) that
//! `resources/read` serves whole to the token that produced it.
//!
//! Where they are kept is an [`ArtifactBackend`]: a directory of the host
//! ([`dir`]) by default, or the shared PostgreSQL store, where every host
//! of a fleet keeps and serves the same artifacts.

#[cfg(any(test, feature = "conformance"))]
#[doc(hidden)]
pub mod conformance;
pub mod dir;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::boundary::Boundaries;
use crate::descriptor::SideEffect;
use crate::observation::{ErrorCode, ErrorInfo, FollowUp, Observation, Source, Truncation};

/// The host's tool that reads an artifact back.
pub const TOOL_NAME: &str = "artifact_view";

/// Default window of `artifact_view`, in bytes.
pub const DEFAULT_WINDOW_BYTES: usize = 8 * 1024;

/// Largest window of `artifact_view`, in bytes: within the default text
/// budget with the header and the untrusted-data lines.
pub const MAX_WINDOW_BYTES: usize = 12 * 1024;

/// Default retention of an artifact.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(3600);

/// The owner recorded for a prepared call that carries no token binding
/// (every call runs under a token, so this is only a safe default): no
/// session's token binding is ever this, so no caller can read them.
pub const NO_TOKEN: &str = "-";

/// URI scheme and authority of artifacts offered as MCP resources.
pub const URI_PREFIX: &str = "toolhost://artifacts/";

/// Caps on what the store keeps; expired artifacts do not count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quota {
    /// Bytes of live artifacts one token may own (default 64 MiB).
    pub token_bytes: u64,
    /// Live artifacts one token may own (default 32).
    pub token_count: u64,
    /// Bytes of live artifacts in the store (default 512 MiB).
    pub total_bytes: u64,
    /// Live artifacts in the store (default 1024).
    pub total_count: u64,
}

impl Default for Quota {
    fn default() -> Self {
        Quota {
            token_bytes: 64 << 20,
            token_count: 32,
            total_bytes: 512 << 20,
            total_count: 1024,
        }
    }
}

/// Why an artifact could not be kept or read.
#[derive(Debug, thiserror::Error)]
pub enum ArtifactError {
    /// The id is not one the host could have made.
    #[error("`{0}` is not an artifact id (32 lowercase hex digits)")]
    BadId(String),
    /// No such artifact, or its retention period is over.
    #[error("no artifact `{0}` (it never existed or its retention period is over)")]
    NotFound(String),
    /// The artifact belongs to the calls of another token.
    #[error(
        "artifact `{0}` was produced under another capability token; only that token may read it"
    )]
    NotOwner(String),
    /// Keeping it would pass a cap of the store's [`Quota`].
    #[error("{cap} is {limit} and {used} are kept already; this output is {bytes} bytes")]
    OverQuota {
        /// Which cap, in words (`this token's artifact bytes`).
        cap: &'static str,
        limit: u64,
        used: u64,
        bytes: u64,
    },
    /// The shared store failed.
    #[error("artifact store: {0}")]
    Store(#[from] crate::store_error::StoreError),
    /// The store's directory or files failed.
    #[error("artifact store {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// What the host knows of an artifact besides its bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArtifactMeta {
    /// Hex SHA-256 of the owner's token binding.
    pub owner_sha256: String,
    /// Unix seconds after which it is gone.
    pub expires_at: u64,
    /// The tool whose output it is.
    pub tool: String,
    pub bytes: u64,
    /// Where its content came from (the spilled call's provenance).
    pub provenance: Vec<Source>,
}

/// An artifact read whole.
#[derive(Debug, Clone)]
pub struct Artifact {
    pub id: String,
    pub tool: String,
    pub content: Vec<u8>,
    pub provenance: Vec<Source>,
}

/// Where artifacts are kept: a directory of one host ([`dir::DirBackend`])
/// or the shared store (the PostgreSQL backend), so that any host serves
/// them. Ids reach a backend checked ([`valid_id`]); expiry and the owner
/// are checked by [`Artifacts`].
pub trait ArtifactBackend: Send + Sync {
    /// Keeps `content` under `id` if it fits `quota` beside the artifacts
    /// live at `now` ([`admit`]); the check and the write are one step
    /// for every host sharing the backend.
    fn put(
        &self,
        id: &str,
        meta: &ArtifactMeta,
        content: &[u8],
        quota: &Quota,
        now: u64,
    ) -> Result<(), ArtifactError>;
    /// The metadata of `id`, if it is kept (expired or not).
    fn meta(&self, id: &str) -> Result<Option<ArtifactMeta>, ArtifactError>;
    /// The bytes of `id`, if it is kept.
    fn content(&self, id: &str) -> Result<Option<Vec<u8>>, ArtifactError>;
    /// Removes `id`.
    fn remove(&self, id: &str) -> Result<(), ArtifactError>;
    /// Removes every artifact expired at `now`.
    fn sweep(&self, now: u64) -> Result<(), ArtifactError>;
}

/// Artifacts kept in a backend for a retention period, within a quota.
pub struct Artifacts {
    backend: std::sync::Arc<dyn ArtifactBackend>,
    retention: Duration,
    quota: Quota,
    /// Unix seconds of the last sweep of expired artifacts.
    swept: AtomicU64,
}

impl std::fmt::Debug for Artifacts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Artifacts")
            .field("retention", &self.retention)
            .field("quota", &self.quota)
            .finish_non_exhaustive()
    }
}

/// What the live artifacts of a store hold, in all and for one owner.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    pub token_bytes: u64,
    pub token_count: u64,
    pub total_bytes: u64,
    pub total_count: u64,
}

pub(crate) fn io_err(path: &Path, source: std::io::Error) -> ArtifactError {
    ArtifactError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn owner_hash(owner: &str) -> String {
    hex::encode(Sha256::digest(owner.as_bytes()))
}

/// Whether `id` has the form of an id the host makes.
pub fn valid_id(id: &str) -> bool {
    id.len() == 32 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The MCP resource URI of an artifact.
pub fn uri(id: &str) -> String {
    format!("{URI_PREFIX}{id}")
}

/// The artifact id a resource URI names, if it names one.
pub fn id_of_uri(uri: &str) -> Option<&str> {
    uri.strip_prefix(URI_PREFIX).filter(|id| valid_id(id))
}

/// `Ok` when `bytes` more, owned by the owner `usage` counts for, fit
/// every cap of `quota`.
pub fn admit(quota: &Quota, usage: &Usage, bytes: u64) -> Result<(), ArtifactError> {
    let (u, q) = (usage, quota);
    let over = |cap, limit: u64, used: u64, adding: u64| {
        (used.saturating_add(adding) > limit).then_some(ArtifactError::OverQuota {
            cap,
            limit,
            used,
            bytes,
        })
    };
    let refused = over(
        "this token's artifact bytes cap",
        q.token_bytes,
        u.token_bytes,
        bytes,
    )
    .or_else(|| {
        over(
            "this token's artifact count cap",
            q.token_count,
            u.token_count,
            1,
        )
    })
    .or_else(|| {
        over(
            "the host's artifact bytes cap",
            q.total_bytes,
            u.total_bytes,
            bytes,
        )
    })
    .or_else(|| {
        over(
            "the host's artifact count cap",
            q.total_count,
            u.total_count,
            1,
        )
    });
    refused.map_or(Ok(()), Err)
}

impl Artifacts {
    /// The store in `dir` (created owner-only if missing), keeping each
    /// artifact for `retention`.
    pub fn open(dir: &Path, retention: Duration) -> Result<Artifacts, ArtifactError> {
        let backend = dir::DirBackend::open(dir)?;
        Ok(Artifacts::in_backend(
            std::sync::Arc::new(backend),
            retention,
        ))
    }

    /// The store in `backend`, keeping each artifact for `retention`.
    pub fn in_backend(
        backend: std::sync::Arc<dyn ArtifactBackend>,
        retention: Duration,
    ) -> Artifacts {
        Artifacts {
            backend,
            retention,
            quota: Quota::default(),
            swept: AtomicU64::new(0),
        }
    }

    /// The same store under `quota` instead of [`Quota::default`].
    /// What every artifact's URI starts with ([`URI_PREFIX`]).
    pub const URI_PREFIX: &'static str = URI_PREFIX;

    /// The URI of artifact `id` ([`uri`]), as a server offers it as a
    /// resource.
    pub fn uri(id: &str) -> String {
        uri(id)
    }

    /// The artifact id a URI names, if it is an artifact's ([`id_of_uri`]).
    pub fn id_of_uri(uri: &str) -> Option<&str> {
        id_of_uri(uri)
    }

    pub fn with_quota(mut self, quota: Quota) -> Artifacts {
        self.quota = quota;
        self
    }

    pub fn quota(&self) -> Quota {
        self.quota
    }

    pub fn retention(&self) -> Duration {
        self.retention
    }

    /// Keeps `content` (the output of `tool`) for the token whose binding
    /// is `owner`; returns its id.
    pub fn put(
        &self,
        owner: &str,
        tool: &str,
        content: &[u8],
        provenance: &[Source],
    ) -> Result<String, ArtifactError> {
        self.sweep_now_and_then();
        let mut raw = [0u8; 16];
        getrandom::fill(&mut raw).map_err(|e| ArtifactError::Io {
            path: PathBuf::from("getrandom"),
            source: std::io::Error::other(e.to_string()),
        })?;
        let id = hex::encode(raw);
        let now = now_secs();
        let meta = ArtifactMeta {
            owner_sha256: owner_hash(owner),
            expires_at: now.saturating_add(self.retention.as_secs()),
            tool: tool.to_owned(),
            bytes: content.len() as u64,
            provenance: provenance.to_vec(),
        };
        self.backend.put(&id, &meta, content, &self.quota, now)?;
        Ok(id)
    }

    /// The metadata of `id`, when it exists, is not expired and belongs to
    /// `owner`.
    fn meta(&self, id: &str, owner: &str) -> Result<ArtifactMeta, ArtifactError> {
        if !valid_id(id) {
            return Err(ArtifactError::BadId(
                crate::text::clip_bytes(id, 64).to_string(),
            ));
        }
        let Some(meta) = self.backend.meta(id)? else {
            return Err(ArtifactError::NotFound(id.to_owned()));
        };
        if meta.expires_at <= now_secs() {
            let _ = self.backend.remove(id);
            return Err(ArtifactError::NotFound(id.to_owned()));
        }
        let mine = owner_hash(owner);
        if !bool::from(subtle::ConstantTimeEq::ct_eq(
            mine.as_bytes(),
            meta.owner_sha256.as_bytes(),
        )) {
            return Err(ArtifactError::NotOwner(id.to_owned()));
        }
        Ok(meta)
    }

    /// The whole artifact `id`, for `owner` only.
    pub fn read(&self, id: &str, owner: &str) -> Result<Artifact, ArtifactError> {
        let meta = self.meta(id, owner)?;
        let content = self
            .backend
            .content(id)?
            .ok_or_else(|| ArtifactError::NotFound(id.to_owned()))?;
        Ok(Artifact {
            id: id.to_owned(),
            tool: meta.tool,
            content,
            provenance: meta.provenance,
        })
    }

    /// Removes expired artifacts, at most once a minute.
    fn sweep_now_and_then(&self) {
        let now = now_secs();
        let last = self.swept.load(Ordering::Relaxed);
        if now < last.saturating_add(60)
            || self
                .swept
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
        {
            return;
        }
        self.sweep();
    }

    /// Removes every expired artifact now.
    pub fn sweep(&self) {
        let _ = self.backend.sweep(now_secs());
    }
}

/// The arguments of `artifact_view`, checked.
struct ViewArgs {
    artifact: String,
    offset: u64,
    length: usize,
}

fn bad(field: &str, expected: &str, actual: &Value, message: String) -> Box<ErrorInfo> {
    Box::new(
        ErrorCode::InvalidArguments
            .info(message)
            .with_field(field.to_string())
            .with_expected(expected.to_string())
            .with_actual(crate::text::clip_bytes(&actual.to_string(), 128).to_string()),
    )
}

fn parse_args(args: &str) -> Result<ViewArgs, Box<ErrorInfo>> {
    let value = crate::json::parse_strict(args).map_err(|e| {
        let info = ErrorCode::InvalidJson.info(e.to_string());
        Box::new(match &e.pointer {
            Some(p) => info.with_field(p.clone()),
            None => info,
        })
    })?;
    let Value::Object(map) = &value else {
        return Err(bad(
            "",
            "an object {\"artifact\", \"offset\"?, \"length\"?}",
            &value,
            "the arguments must be an object".into(),
        ));
    };
    if let Some(k) = map
        .keys()
        .find(|k| !matches!(k.as_str(), "artifact" | "offset" | "length"))
    {
        return Err(bad(
            &format!("/{k}"),
            "only artifact, offset, length",
            &Value::String(k.clone()),
            format!("unknown argument `{k}`"),
        ));
    }
    let artifact = match map.get("artifact") {
        Some(Value::String(s)) => s.clone(),
        other => {
            return Err(bad(
                "/artifact",
                "the artifact id from truncated.artifact (a string)",
                other.unwrap_or(&Value::Null),
                "`artifact` is required: the id from the spilled result's truncated.artifact"
                    .into(),
            ))
        }
    };
    let offset = match map.get("offset") {
        None => 0,
        Some(v) => v.as_u64().ok_or_else(|| {
            bad(
                "/offset",
                "an integer ≥ 0 (a byte offset)",
                v,
                "`offset` must be an integer ≥ 0".into(),
            )
        })?,
    };
    let length = match map.get("length") {
        None => DEFAULT_WINDOW_BYTES,
        Some(v) => match v.as_u64() {
            Some(n) if (1..=MAX_WINDOW_BYTES as u64).contains(&n) => n as usize,
            _ => {
                return Err(bad(
                    "/length",
                    &format!("an integer 1..={MAX_WINDOW_BYTES}"),
                    v,
                    format!("`length` must be an integer from 1 to {MAX_WINDOW_BYTES}"),
                ))
            }
        },
    };
    Ok(ViewArgs {
        artifact,
        offset,
        length,
    })
}

/// The window of `content` from `start` (a char boundary) of at most
/// `len` bytes: up to the last record boundary in it
/// ([`crate::boundary`]: the end of an element of the largest JSON array,
/// or of a line), else up to a char boundary.
fn window<'a>(
    content: &'a [u8],
    bounds: &Boundaries,
    start: usize,
    len: usize,
) -> Result<&'a str, std::str::Utf8Error> {
    let limit = start.saturating_add(len).min(content.len());
    match bounds.last_within(start, limit) {
        Some(end) => std::str::from_utf8(&content[start..end]),
        None => char_window(&content[start..], len),
    }
}

/// The window of `buf` (which starts at a char boundary of the artifact)
/// that ends on a char boundary at or before `len`, or just after the
/// first char when that char alone is longer.
fn char_window(buf: &[u8], len: usize) -> Result<&str, std::str::Utf8Error> {
    let mut end = len.min(buf.len());
    while end > 0 && end < buf.len() && (buf[end] & 0xC0) == 0x80 {
        end -= 1;
    }
    if end == 0 && !buf.is_empty() {
        end = 1;
        while end < buf.len() && (buf[end] & 0xC0) == 0x80 {
            end += 1;
        }
    }
    std::str::from_utf8(&buf[..end])
}

/// The `artifact_view` tool: a window of an artifact for the token whose
/// binding is `owner`, as an observation.
pub fn view(
    store: &Artifacts,
    owner: &str,
    args: &str,
    call_id: &str,
    max_text_bytes: usize,
) -> Observation {
    let fail =
        |info: ErrorInfo| Observation::failure(call_id, TOOL_NAME, SideEffect::ReadOnly, info);
    let a = match parse_args(args) {
        Ok(a) => a,
        Err(info) => return fail(*info),
    };
    let Artifact {
        content: whole,
        provenance,
        ..
    } = match store.read(&a.artifact, owner) {
        Ok(r) => r,
        Err(e @ ArtifactError::NotOwner(_)) => {
            return fail(ErrorCode::Denied.info(e.to_string()));
        }
        Err(e @ (ArtifactError::BadId(_) | ArtifactError::NotFound(_))) => {
            let actual = Value::String(a.artifact.clone());
            return fail(*bad(
                "/artifact",
                "the id of an artifact this token produced, within its retention period",
                &actual,
                e.to_string(),
            ));
        }
        Err(e) => return fail(ErrorCode::Internal.info(e.to_string())),
    };
    let total = whole.len() as u64;
    if a.offset > total {
        return fail(*bad(
            "/offset",
            &format!("at most {total} (the artifact's size)"),
            &json!(a.offset),
            format!(
                "`offset` {} is past the end of the artifact ({total} bytes)",
                a.offset
            ),
        ));
    }
    let bounds = Boundaries::of(&whole);
    let content = match window(&whole, &bounds, a.offset as usize, a.length) {
        Ok(c) => c,
        Err(_) => {
            return fail(*bad(
                "/offset",
                "an offset on a character boundary (as follow_up gives it)",
                &json!(a.offset),
                format!("`offset` {} is inside a UTF-8 character", a.offset),
            ))
        }
    };
    let next = a.offset + content.len() as u64;
    let has_more = next < total;
    let output = json!({
        "artifact": a.artifact,
        "offset": a.offset,
        "length": content.len(),
        "total_bytes": total,
        "content": content,
        "has_more": has_more,
    });
    let header = format!(
        "artifact {} bytes {}-{} of {total}{}\n",
        a.artifact,
        a.offset,
        next,
        if has_more { ", more after" } else { ", end" }
    );
    let text = format!("{header}{content}");
    let obs = Observation::ok(
        call_id,
        TOOL_NAME,
        SideEffect::ReadOnly,
        output,
        max_text_bytes,
    )
    .with_plugin_text(&text, max_text_bytes.max(text.len()));
    let mut obs = obs.with_provenance(provenance, usize::MAX);
    obs.truncated = has_more.then(|| Truncation {
        original_bytes: total,
        kept_bytes: content.len() as u64,
        omitted_bytes: total - content.len() as u64,
        hint: format!(
            "bytes {next}..{total} are left: call {TOOL_NAME} with the follow_up arguments"
        ),
        artifact: Some(a.artifact.clone()),
        follow_up: Some(FollowUp {
            tool: TOOL_NAME.to_owned(),
            arguments: json!({"artifact": a.artifact, "offset": next, "length": a.length}),
        }),
    });
    obs
}

/// The published definition of `artifact_view` (MCP `tools/list`).
pub fn tool_definition() -> Value {
    json!({
        "name": TOOL_NAME,
        "title": "View a spilled result",
        "description": "Read a result that was too large to return: when a call's truncated.artifact is set, call this with its truncated.follow_up arguments, then with each window's own follow_up until none is left. Read-only; returns up to `length` bytes (default 8192) of the result's JSON as `content`, ending after the last whole record (an element of its largest array) that fits. Only the token that made the call can read it, until it expires.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "artifact": {"type": "string", "description": "truncated.artifact of the spilled result"},
                "offset": {"type": "integer", "minimum": 0, "description": "first byte to return (default 0)"},
                "length": {"type": "integer", "minimum": 1, "maximum": MAX_WINDOW_BYTES, "description": "bytes to return (default 8192)"}
            },
            "required": ["artifact"],
            "additionalProperties": false
        },
        "annotations": {
            "title": "View a spilled result",
            "readOnlyHint": true,
            "destructiveHint": false,
            "idempotentHint": true,
            "openWorldHint": false
        },
        "_meta": {"dev.toolhost/side_effect": "read-only"}
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (tempfile::TempDir, Artifacts) {
        let dir = tempfile::tempdir().unwrap();
        let s = Artifacts::open(&dir.path().join("artifacts"), DEFAULT_RETENTION).unwrap();
        (dir, s)
    }

    /// Follows follow-ups from `offset` to the end; returns the windows.
    fn windows(s: &Artifacts, owner: &str, id: &str, offset: u64, length: usize) -> Vec<String> {
        let mut args = json!({"artifact": id, "offset": offset, "length": length});
        let mut out = Vec::new();
        for _ in 0..100_000 {
            let obs = view(s, owner, &args.to_string(), "c", 16 * 1024);
            assert!(obs.is_ok(), "{obs:?}");
            let content = obs.output.as_ref().unwrap()["content"].as_str().unwrap();
            assert!(
                content.len() <= length.max(4),
                "{} > {length}",
                content.len()
            );
            out.push(content.to_owned());
            match obs.truncated.and_then(|t| t.follow_up) {
                Some(f) => {
                    assert_eq!(f.tool, TOOL_NAME);
                    args = f.arguments;
                }
                None => return out,
            }
        }
        panic!("follow-ups never ended");
    }

    /// Follows follow-ups from `offset` to the end; returns the bytes read.
    fn read_all(s: &Artifacts, owner: &str, id: &str, offset: u64, length: usize) -> String {
        windows(s, owner, id, offset, length).concat()
    }

    #[test]
    fn windows_end_after_whole_records() {
        let (_d, s) = store();
        // A search's output: 400 matches whose text holds brackets, commas,
        // quotes and multi-byte characters.
        let matches: Vec<Value> = (0..400)
            .map(|i| {
                json!({"path": format!("src/é{}.rs", i % 7), "line_number": i + 1,
                    "line": format!("m{i:03} \"],[{{,}}\\ 🦀 {}", "x".repeat(i % 90))})
            })
            .collect();
        let output = json!({"matches": matches, "total": 400, "next_cursor": null});
        let content = serde_json::to_string(&output).unwrap();
        let id = s.put("o", "grep_search", content.as_bytes(), &[]).unwrap();
        let records: Vec<String> = matches.iter().map(Value::to_string).collect();
        for len in [200, 1000, 4096, DEFAULT_WINDOW_BYTES, MAX_WINDOW_BYTES] {
            let got = windows(&s, "o", &id, 0, len);
            assert_eq!(got.concat(), content, "window {len}");
            for r in &records {
                let whole = got.iter().filter(|w| w.contains(r.as_str())).count();
                assert_eq!(whole, 1, "window {len}: {r} is whole in {whole} windows");
            }
            // Every window but the last ends just after a match.
            for w in &got[..got.len() - 1] {
                assert!(
                    w.ends_with('}'),
                    "window {len} ends mid-record: …{}",
                    &w[w.len().saturating_sub(40)..]
                );
            }
        }
        // A record longer than the window is cut (on a char boundary) and
        // the windows after it end on records again.
        let got = windows(&s, "o", &id, 0, 100);
        assert_eq!(got.concat(), content);
        // Text: each window ends after a line.
        let text: String = (0..300)
            .map(|i| format!("ligne {i} é—🦀 {}\n", "y".repeat(i % 50)))
            .collect();
        let id = s.put("o", "t", text.as_bytes(), &[]).unwrap();
        let got = windows(&s, "o", &id, 0, 1000);
        assert_eq!(got.concat(), text);
        assert!(got.iter().all(|w| w.ends_with('\n')), "{got:?}");
    }

    #[test]
    fn windows_reassemble_the_artifact_on_char_boundaries() {
        let (_d, s) = store();
        let content: String = (0..600).map(|i| format!("ligne {i} é—🦀\n")).collect();
        let id = s.put("owner-a", "t", content.as_bytes(), &[]).unwrap();
        assert!(valid_id(&id));
        for len in [1, 2, 3, 5, 7, 4096, MAX_WINDOW_BYTES] {
            assert_eq!(
                read_all(&s, "owner-a", &id, 0, len),
                content,
                "window {len}"
            );
        }
        // The read is owner-only.
        let obs = view(
            &s,
            "owner-b",
            &json!({"artifact": id}).to_string(),
            "c",
            16384,
        );
        assert_eq!(obs.status, crate::observation::Status::Denied, "{obs:?}");
        assert!(s.read(&id, "owner-b").is_err());
        assert_eq!(s.read(&id, "owner-a").unwrap().content, content.as_bytes());
    }

    #[test]
    fn bad_ids_offsets_and_lengths_are_corrections() {
        let (_d, s) = store();
        let id = s.put("o", "t", "é".repeat(10).as_bytes(), &[]).unwrap();
        for (args, field) in [
            (json!({"artifact": "../../etc/passwd"}), "/artifact"),
            (json!({"artifact": "0".repeat(32)}), "/artifact"),
            (json!({"artifact": id, "offset": 1}), "/offset"),
            (json!({"artifact": id, "offset": 21}), "/offset"),
            (json!({"artifact": id, "length": 0}), "/length"),
            (
                json!({"artifact": id, "length": MAX_WINDOW_BYTES + 1}),
                "/length",
            ),
            (json!({"artifact": id, "extra": 1}), "/extra"),
            (json!({"offset": 0}), "/artifact"),
        ] {
            let obs = view(&s, "o", &args.to_string(), "c", 16384);
            let e = obs
                .error
                .as_ref()
                .unwrap_or_else(|| panic!("{args}: {obs:?}"));
            assert_eq!(e.code, "invalid_arguments", "{args}");
            assert_eq!(e.field.as_deref(), Some(field), "{args}");
        }
        let obs = view(&s, "o", r#"{"artifact":"a","artifact":"b"}"#, "c", 16384);
        assert_eq!(obs.error.unwrap().code, "invalid_json");
    }

    #[test]
    fn a_quota_caps_each_token_and_the_store() {
        let dir = tempfile::tempdir().unwrap();
        let s = Artifacts::open(dir.path(), DEFAULT_RETENTION)
            .unwrap()
            .with_quota(Quota {
                token_bytes: 100,
                token_count: 2,
                total_bytes: 250,
                total_count: 4,
            });
        let kept = |owner: &str, n: usize| s.put(owner, "t", &vec![b'x'; n], &[]);
        // Per token, in bytes: 60 + 60 > 100.
        kept("a", 60).unwrap();
        let e = kept("a", 60).unwrap_err();
        assert!(
            matches!(
                e,
                ArtifactError::OverQuota {
                    limit: 100,
                    used: 60,
                    bytes: 60,
                    ..
                }
            ),
            "{e}"
        );
        assert!(
            e.to_string().contains("this token's artifact bytes cap"),
            "{e}"
        );
        // One output larger than the cap is never kept.
        assert!(matches!(
            kept("b", 101),
            Err(ArtifactError::OverQuota { .. })
        ));
        // Per token, in count.
        kept("a", 10).unwrap();
        let e = kept("a", 1).unwrap_err();
        assert!(e.to_string().contains("count cap"), "{e}");
        // Another token has its own allowance, until the store's.
        kept("b", 100).unwrap();
        let e = kept("c", 90).unwrap_err();
        assert!(
            e.to_string().contains("the host's artifact bytes cap"),
            "{e}"
        );
        kept("c", 80).unwrap();
        let e = kept("d", 0).unwrap_err();
        assert!(
            e.to_string().contains("the host's artifact count cap"),
            "{e}"
        );
        // Nothing refused was written.
        let metas = std::fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".meta"))
            .count();
        assert_eq!(metas, 4);
    }

    #[test]
    fn expired_artifacts_are_gone() {
        let dir = tempfile::tempdir().unwrap();
        let s = Artifacts::open(dir.path(), Duration::ZERO).unwrap();
        let id = s.put("o", "t", b"{}", &[]).unwrap();
        assert!(matches!(s.read(&id, "o"), Err(ArtifactError::NotFound(_))));
        assert!(!dir.path().join(format!("{id}.json")).exists());
        let id = s.put("o", "t", b"{}", &[]).unwrap();
        s.sweep();
        assert!(!dir.path().join(format!("{id}.meta")).exists());
    }

    #[test]
    fn uris_name_only_artifact_ids() {
        assert_eq!(
            id_of_uri(&uri(&"a".repeat(32))),
            Some("a".repeat(32).as_str())
        );
        assert_eq!(id_of_uri("toolhost://artifacts/../x"), None);
        assert_eq!(id_of_uri("file:///etc/passwd"), None);
    }
}
