//! Token ids (revocation) and call budgets: the `max_calls` and
//! `budget_fuel` caveats of a chain, each with a stable identity.

use super::*;

/// The id of a token in a delegation chain: the mint nonce for a minted
/// token, the `id` caveat's nonce for a delegated one (see
/// [`Token::chain_ids`]). 32 lowercase hex digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TokenId(pub [u8; NONCE_LEN]);

impl fmt::Display for TokenId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&hex::encode(self.0))
    }
}

impl fmt::Debug for TokenId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TokenId({self})")
    }
}

impl FromStr for TokenId {
    type Err = CapError;
    fn from_str(s: &str) -> Result<TokenId, CapError> {
        let s = s.trim();
        let bytes = hex::decode(s)
            .ok()
            .and_then(|b| <[u8; NONCE_LEN]>::try_from(b).ok())
            .filter(|_| s.bytes().all(|b| !b.is_ascii_uppercase()))
            .ok_or_else(|| {
                malformed(format!("`{s}` is not a token id (32 lowercase hex digits)"))
            })?;
        Ok(TokenId(bytes))
    }
}

impl Serialize for TokenId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// The identity of one `max_calls` caveat in a token chain: SHA-256 of the
/// chained signature right after that caveat.
///
/// Every token derived from the token at that point (by attenuation, any
/// number of times) carries the same caveats up to it, hence the same
/// signature there and the same id: counting calls per id makes a budget
/// cover the token that carries the caveat and all its descendants, and
/// re-attenuating cannot reset it. A token that does not contain that prefix
/// cannot produce the id, since the intermediate signature is known only to
/// the host and to whoever held the token at that point. The id is a hash,
/// so showing it (logs, a record store) gives away nothing that could
/// extend a token.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BudgetId(pub(super) [u8; 32]);

impl BudgetId {
    pub(super) fn of_signature(sig: &[u8; SIG_LEN]) -> BudgetId {
        let digest = Sha256::new()
            .chain_update(b"toolhost/capability/budget/v1\0")
            .chain_update(sig)
            .finalize();
        BudgetId(digest.into())
    }

    /// The 32 bytes, e.g. as a record-store key.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

impl fmt::Display for BudgetId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&hex::encode(self.0))
    }
}

impl fmt::Debug for BudgetId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "BudgetId({self})")
    }
}

/// What a budget caveat counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BudgetKind {
    /// `max_calls`: calls (and plans).
    Calls,
    /// `budget_fuel`: fuel actually consumed.
    Fuel,
}

impl BudgetKind {
    /// The caveat keyword: `max_calls` or `budget_fuel`.
    pub fn as_str(self) -> &'static str {
        match self {
            BudgetKind::Calls => "max_calls",
            BudgetKind::Fuel => "budget_fuel",
        }
    }
}

/// One `max_calls` or `budget_fuel` caveat of a verified token: the calls
/// (or fuel) it allows, shared by every token derived from that point of
/// the chain (see [`BudgetId`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallBudget {
    pub id: BudgetId,
    /// Calls or fuel.
    pub kind: BudgetKind,
    /// The id of the minted token ([`Token::id`]) the chain starts from.
    pub token_id: [u8; 16],
    /// Index of the caveat in the chain (0-based).
    pub position: usize,
    /// Calls (or fuel units) allowed.
    pub max: u64,
    /// Unix seconds from which every token carrying the caveat is expired
    /// (the earliest `expires` at or before it), if any: after that, its
    /// count can be forgotten.
    pub expires_at: Option<u64>,
}
