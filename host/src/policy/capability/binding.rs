//! Where a token may be used: its audience (the workspaces it was minted
//! for) and its store (the record store that counts its budgets and holds
//! its revocations).
//!
//! - `aud=/abs/dir[,…]`: a host honours the token only when its workspace
//!   is one of the directories. Each `aud` caveat narrows the set; one
//!   appended to a token minted without any binds it.
//! - `store=<32 hex digits>`: the id a record store was given when it was
//!   created. A host whose store has another id (a deleted, truncated or
//!   other store, which would have forgotten the token's counts and
//!   revocations) refuses the token. `cap mint` adds it.

use std::fmt;
use std::str::FromStr;

use serde::{Serialize, Serializer};

use super::{malformed, CapError};

/// A workspace a token is minted for: an absolute, normalised directory
/// path (no `.` or `..` segment, no comma, no control character).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct Audience(String);

impl Audience {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `root` (a workspace's canonical root) is this audience.
    pub fn names(&self, root: &std::path::Path) -> bool {
        root.to_str() == Some(self.0.as_str())
    }
}

impl FromStr for Audience {
    type Err = CapError;
    fn from_str(s: &str) -> Result<Audience, CapError> {
        let bad = |why: &str| malformed(format!("`aud={s}`: {why}"));
        if !s.starts_with('/') {
            return Err(bad("an audience is an absolute workspace path"));
        }
        if s.len() > 4096 {
            return Err(bad("longer than 4096 bytes"));
        }
        if s.contains(',') || s.chars().any(char::is_control) {
            return Err(bad("a comma or a control character"));
        }
        if s.split('/').any(|seg| seg == "." || seg == "..") || (s.len() > 1 && s.ends_with('/')) {
            return Err(bad("not a normalised path"));
        }
        Ok(Audience(s.to_owned()))
    }
}

impl fmt::Display for Audience {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for Audience {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

/// The id of a record store, made when the store is created: 32 lowercase
/// hex digits.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct StoreId(String);

impl StoreId {
    /// A new random id.
    pub fn random() -> Result<StoreId, CapError> {
        let mut raw = [0u8; 16];
        getrandom::fill(&mut raw).map_err(|e| malformed(format!("no randomness: {e}")))?;
        Ok(StoreId(hex::encode(raw)))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for StoreId {
    type Err = CapError;
    fn from_str(s: &str) -> Result<StoreId, CapError> {
        let s = s.trim();
        if s.len() != 32 || !s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            return Err(malformed(format!(
                "`{s}` is not a store id (32 lowercase hex digits)"
            )));
        }
        Ok(StoreId(s.to_owned()))
    }
}

impl fmt::Display for StoreId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for StoreId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn audiences_are_normalised_absolute_paths() {
        for ok in ["/", "/home/u/proj", "/a b/c"] {
            assert_eq!(ok.parse::<Audience>().unwrap().as_str(), ok);
        }
        for bad in ["proj", "./a", "/a/../b", "/a/./b", "/a,/b", "/a/", "/a\n"] {
            assert!(bad.parse::<Audience>().is_err(), "{bad:?}");
        }
        let a: Audience = "/w".parse().unwrap();
        assert!(a.names(std::path::Path::new("/w")));
        assert!(!a.names(std::path::Path::new("/w/sub")));
    }

    #[test]
    fn store_ids_are_32_hex_digits() {
        let id = StoreId::random().unwrap();
        assert_eq!(id.as_str().parse::<StoreId>().unwrap(), id);
        assert!("ABCD".parse::<StoreId>().is_err());
        assert!("g".repeat(32).parse::<StoreId>().is_err());
    }
}
