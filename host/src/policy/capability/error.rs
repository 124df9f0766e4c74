//! Why a token could not be decoded, minted, verified or attenuated, and
//! the denial a grant gives a call it does not cover.

use super::*;

/// Why a token could not be decoded, minted or verified.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CapError {
    /// The token's version byte is not [`TOKEN_VERSION`].
    #[error(
        "unsupported capability token version {found} (this host reads version {TOKEN_VERSION})"
    )]
    BadVersion { found: u8 },
    /// No key with the token's key id is known (rotated out, or another host's).
    #[error("capability token was signed with unknown key {0}")]
    UnknownKeyId(KeyId),
    /// The recomputed signature chain does not match: forged or altered.
    #[error(
        "capability token signature does not verify (forged, altered, reordered or truncated)"
    )]
    BadSignature,
    /// The token's (effective) expiry has passed.
    #[error("capability token expired at {} ({expires_at}); now is {now}", format_rfc3339(*.expires_at))]
    Expired { expires_at: u64, now: u64 },
    /// A caveat type this host does not know: the token is rejected.
    #[error("unknown caveat type `{0}` (known: tool, right, read, write, net, exec, fuel, max_calls, budget_fuel, expires, id)")]
    UnknownCaveat(String),
    /// The token has no caveats (or none set at mint): it grants nothing.
    #[error("capability token has no caveats and grants nothing")]
    Empty,
    /// Bad encoding or bad caveat syntax.
    #[error("malformed capability: {0}")]
    Malformed(String),
}

/// The kind of a [`CapError`], without its details.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CapErrorKind {
    BadVersion,
    UnknownKeyId,
    BadSignature,
    Expired,
    UnknownCaveat,
    Empty,
    Malformed,
}

impl CapErrorKind {
    /// A stable snake_case code, e.g. `bad_signature`.
    pub fn as_str(self) -> &'static str {
        match self {
            CapErrorKind::BadVersion => "bad_version",
            CapErrorKind::UnknownKeyId => "unknown_key_id",
            CapErrorKind::BadSignature => "bad_signature",
            CapErrorKind::Expired => "expired",
            CapErrorKind::UnknownCaveat => "unknown_caveat",
            CapErrorKind::Empty => "empty",
            CapErrorKind::Malformed => "malformed",
        }
    }
}

impl fmt::Display for CapErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl CapError {
    /// The kind of this error.
    pub fn kind(&self) -> CapErrorKind {
        match self {
            CapError::BadVersion { .. } => CapErrorKind::BadVersion,
            CapError::UnknownKeyId(_) => CapErrorKind::UnknownKeyId,
            CapError::BadSignature => CapErrorKind::BadSignature,
            CapError::Expired { .. } => CapErrorKind::Expired,
            CapError::UnknownCaveat(_) => CapErrorKind::UnknownCaveat,
            CapError::Empty => CapErrorKind::Empty,
            CapError::Malformed(_) => CapErrorKind::Malformed,
        }
    }
}

pub(super) fn malformed(msg: impl Into<String>) -> CapError {
    CapError::Malformed(msg.into())
}

/// [`Token::attenuate`] refused: the new caveats would widen the token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WidenError {
    /// A caveat is wider than the parent's effective grant for `component`.
    #[error("cannot attenuate: {message}")]
    Widens {
        component: CaveatKind,
        message: String,
    },
    /// Unknown caveat types cannot be reasoned about (and would make the
    /// token unusable).
    #[error("cannot attenuate with unknown caveat type `{0}`")]
    UnknownCaveat(String),
    /// Too many caveats, a caveat that does not round-trip through its text
    /// form (e.g. an empty list), or a token too long to encode.
    #[error("cannot attenuate: {0}")]
    Invalid(String),
}

impl WidenError {
    /// The component that would have been widened, if that is the reason.
    pub fn component(&self) -> Option<CaveatKind> {
        match self {
            WidenError::Widens { component, .. } => Some(*component),
            _ => None,
        }
    }
}

pub use toolhost_base::secret::KeyError;

/// An access a [`Grant`] refused. Its message names the failed caveat (type
/// and value) so that a model can act on it, e.g. "`secrets/key` is outside
/// the token's read prefixes (src, docs)".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Denial {
    /// The caveat type that refused the access.
    pub caveat: CaveatKind,
    /// What the token allows for that caveat type, e.g. `src, docs` or `none`.
    pub allowed: String,
    /// What was asked for (path, origin, tool, right).
    pub requested: String,
    /// The model-facing message.
    pub message: String,
}
