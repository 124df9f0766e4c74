//! JSON in one place, with one escape implementation:
//!
//! - [`strict`]: strict parsing of tool arguments (duplicate keys, integers
//!   beyond ±2^53, unbounded nesting refused), its items also here;
//! - [`canonical`]: canonical JSON (RFC 8785) and its SHA-256, for
//!   idempotency keys, the journal and the lock file's definition digests;
//! - [`compact`]: the `toolhost-compact-json` crate: serde_json's compact
//!   text written fast, measured without being written
//!   ([`compact::compact_len`]), and the eight-byte escape scan
//!   ([`compact::skip_clean_words`]) that [`canonical`] uses too.

pub mod canonical;
pub mod strict;

pub use toolhost_compact_json as compact;

pub use strict::clip;
pub use strict::{
    escape_pointer_token, parse_strict, parse_strict_limited, parse_with, push_pointer_token,
    JsonError, JsonErrorKind, ParseOptions, MAX_DEPTH, MAX_SAFE_INTEGER,
};
