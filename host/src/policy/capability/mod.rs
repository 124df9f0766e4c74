//! Capability tokens: chained-HMAC (macaroon-style) bearer tokens whose
//! caveats fold into one effective [`Grant`].
//!
//! A [`Token`] is minted by the host with its [`RootKey`] and a list of
//! typed [`Caveat`]s. Whoever holds a token can *attenuate* it — append
//! caveats that narrow it — without the key; nobody can remove a caveat,
//! reorder the chain or change a byte without the host noticing, because the
//! host recomputes the whole chain:
//!
//! ```text
//! sig_0 = HMAC-SHA256(root_key, id)            id = version | key id | nonce | minted count
//! sig_n = HMAC-SHA256(sig_{n-1}, caveat_n)     caveat_n = its text form, e.g. b"read=src"
//! token = id | (u16 length | caveat)* | sig_last          → base64url, no padding
//! ```
//!
//! The final signature is compared in constant time.
//!
//! # Caveats
//!
//! The text syntax (used on the wire, by the CLI and by `inspect`) is
//! `TYPE=VALUE`; list values are comma-separated and union *within* one
//! caveat:
//!
//! | caveat | meaning |
//! | --- | --- |
//! | `tool=file_view,git_*` | tools the token may call: exact names (`file_view`, `fs.read`), `ns_*` / `ns.*` (every name starting with `ns_` / `ns.`), or `*` (every tool); names and prefixes follow the one tool-name grammar of [`crate::toolname`], so `ns.*` is the namespace `ns` and a pattern outside the grammar is refused |
//! | `right=read,write,net` | rights: `read`, `write`, `net`, `exec` (run the `exec` caveat's programs), `delegate` (hand narrower tokens to sub-agents over MCP; only when minted with it), `self_approve` (approve its own plans of irreversible calls, no person asked; only when minted with it), `secrets` (outputs are not redacted and arguments carrying a secret are not refused, see [`crate::redact`]); `right=none` grants none |
//! | `read=src,docs` | workspace path prefixes the token may read |
//! | `write=src/gen` | workspace path prefixes the token may write (and read) |
//! | `ask_write=docs` | workspace path prefixes the token may write once a person approved the call (with the `write` right): a write there outside the `write` prefixes is not denied but waits for approval ([`crate::effects::approval`]) |
//! | `net=https://api.example.com:443` | network origins `http(s)://host[:port]` (exact match; default ports 80/443 are filled in; grammar in [`crate::origin`]: no `ws`/`wss`, no numeric hosts but dotted quads) |
//! | `exec=cargo,/usr/bin/make` | native programs the token may run (with the `exec` right): a name, looked up on the host's `PATH` when a call runs, or an absolute path; exact match (see [`Program`]) |
//! | `fuel=1000000` | fuel ceiling per call |
//! | `max_calls=10` | calls allowed to the token that carries the caveat and every token derived from it, together (counted by the host per caveat, see [`CallBudget`]) |
//! | `budget_fuel=5000000000` | fuel the calls of the token that carries the caveat and of every token derived from it may consume together (counted like `max_calls`) |
//! | `id=<32 hex digits>` | the id of a delegated token ([`Token::delegate`]): the key of revocation; grants and limits nothing |
//! | `expires=1767225600` | absolute expiry, unix seconds (also accepted: RFC 3339; [`Caveat::parse_at`] also takes `30s`/`10m`/`2h`/`7d`) |
//!
//! Folding rules (what [`RootKey::verify`] computes):
//!
//! - **Every caveat must pass.** Caveats of the same type *intersect*: a
//!   second `tool` caveat narrows the first, never widens it. A duplicate
//!   caveat is therefore harmless and allowed.
//! - **Closed world.** `tool`, `right`, `read`, `write`, `ask_write`, `net` and `exec` are
//!   *grants*: a dimension the token was not minted with grants nothing
//!   (no `net` caveat at mint → no network), and a caveat appended later for
//!   such a dimension cannot open it (it intersects with nothing). The number
//!   of caveats set at mint is part of the signed id, so a holder cannot
//!   pass an appended caveat off as a minted one.
//! - `fuel`, `max_calls`, `budget_fuel` and `expires` are *limits*: absent
//!   means no extra limit, several mean the minimum. `id` is neither.
//! - An unknown caveat type rejects the token; a token with no caveats is
//!   rejected ([`CapError::Empty`]), it grants nothing.
//! - Paths are relative to the workspace, normalized lexically (`a/./b/../c`
//!   → `a/c`); absolute paths and `..` that escapes are rejected. A prefix
//!   covers a path by whole segments: `src` covers `src` and `src/a`, never
//!   `src2`; `.` covers the whole workspace. Reading needs the `read` right
//!   and a `read` *or* `write` prefix; writing needs the `write` right and a
//!   `write` prefix. (Lexical checks cannot see symlinks: the sandbox's
//!   preopens enforce containment on the real file system.)
//!
//! # Attenuation
//!
//! [`Token::attenuate`] refuses, with a [`WidenError`] naming the component,
//! any caveat that would widen the token: a tool or right the parent does not
//! grant, a path prefix outside the parent's, an origin or program the
//! parent does not list, a higher fuel or call ceiling, a later expiry. The child keeps every
//! parent caveat, so it also dies with the parent's expiry. (A holder who
//! appends caveats by hand, skipping these checks, still cannot widen
//! anything: the folding rules above only ever narrow.)
//!
//! # Keys
//!
//! A [`RootKey`] is 32 random bytes, either in a file the host creates on
//! first run ([`RootKey::load_or_create`], mode 0600 in a 0700 directory) or
//! in `TOOLHOST_ROOT_KEY` (hex; [`RootKey::from_env`]). Its [`KeyId`] is
//! derived from the key and travels in every token, so keys can rotate: a
//! [`Keyring`] verifies tokens of every key it holds.
//!
//! # Files
//!
//! One concept each: `error` (what can go wrong), `rights`, `relpath`
//! (caveat paths), `program` (exec programs), `tools` (tool patterns), `caveat` (the caveat kinds and
//! their syntax), `expiry` (durations and RFC 3339 times), `key` (root keys,
//! keyrings, signing), `token` (encoding, attenuation, delegation), `fold`
//! (caveats → grant), `grant` (the checks a call passes) and `ids` (token
//! ids and call budgets).
//!
//! # Example
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::{Duration, SystemTime, UNIX_EPOCH};
//! use toolhost::policy::capability::{Access, Caveat, RootKey, Token};
//!
//! let key = RootKey::from_bytes([7; 32]);
//! let now = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
//!
//! // The host mints a token for an agent…
//! let agent = Token::mint(&key, &[
//!     Caveat::parse("tool=file_*")?,
//!     Caveat::parse("right=read,write")?,
//!     Caveat::parse("read=src,docs")?,
//!     Caveat::parse("write=src/gen")?,
//!     Caveat::parse_at("expires=2h", now)?,
//! ])?;
//!
//! // …the agent narrows it for a sub-agent, without the key…
//! let sub = agent.attenuate(&[
//!     Caveat::parse("tool=file_view")?,
//!     Caveat::parse("right=read")?,
//! ])?;
//! // …and cannot widen it.
//! assert!(sub.attenuate(&[Caveat::parse("right=write")?]).is_err());
//!
//! // The host verifies what it receives.
//! let sub = Token::decode(&sub.encode())?;
//! let grant = key.verify(&sub, now)?;
//! assert!(grant.allows_tool("file_view"));
//! assert!(!grant.allows_tool("file_write"));
//! assert!(grant.check_path("src/lib.rs", Access::Read).is_ok());
//! assert!(grant.check_path("src2/lib.rs", Access::Read).is_err());
//! assert!(grant.check_path("src/gen/out.rs", Access::Write).is_err());
//! assert_eq!(grant.deadline(Duration::from_secs(30), now), Duration::from_secs(30));
//! # Ok(())
//! # }
//! ```

use std::fmt;
use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use serde::{Serialize, Serializer};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

type HmacSha256 = Hmac<Sha256>;

/// The token format version this host writes and reads.
pub const TOKEN_VERSION: u8 = 1;
/// Environment variable holding the root key(s), hex; comma-separated for
/// rotation (the first one signs, all of them verify).
pub const ROOT_KEY_ENV: &str = "TOOLHOST_ROOT_KEY";
pub use toolhost_base::secret::KEY_LEN;
/// Most caveats one token may carry (minted and appended together).
pub const MAX_CAVEATS: usize = 255;
/// Longest encoded token [`Token::decode`] accepts, in characters.
pub const MAX_ENCODED_LEN: usize = 64 * 1024;

const NONCE_LEN: usize = 16;
/// version (1) | key id (4) | nonce (16) | minted caveat count (1)
const HEADER_LEN: usize = 1 + 4 + NONCE_LEN + 1;
const SIG_LEN: usize = 32;
const KEY_ID_DOMAIN: &[u8] = b"toolhost/capability/key-id/v1\0";

mod binding;
mod caveat;
mod error;
mod expiry;
mod fold;
mod grant;
mod ids;
mod key;
mod program;
mod relpath;
mod rights;
#[cfg(test)]
mod tests;
mod token;
mod tools;

pub use binding::*;
pub use caveat::*;
pub use error::*;
pub use expiry::*;
use fold::*;
pub use grant::*;
pub use ids::*;
pub use key::*;
pub use program::*;
pub use relpath::*;
pub use rights::*;
pub use token::*;
pub use tools::*;
