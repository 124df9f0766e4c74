//! Tokens: the encoded chain (header, caveats, final signature), decoding,
//! attenuation and delegation, and the ids of a chain.

use super::*;

/// A capability token: header, caveats, final signature. Build one with
/// [`Token::mint`] (needs the key) or [`Token::attenuate`] (does not);
/// trust one only through [`RootKey::verify`] / [`Keyring::verify`].
/// `Debug` hides the signature.
#[derive(Clone, PartialEq, Eq)]
pub struct Token {
    /// The whole binary form: header, length-prefixed caveats, signature.
    pub(super) bytes: Vec<u8>,
    /// Byte ranges of each caveat's text in `bytes`.
    pub(super) spans: Vec<(usize, usize)>,
    pub(super) caveats: Vec<Caveat>,
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Token")
            .field("key_id", &self.key_id())
            .field("id", &self.id_hex())
            .field("minted", &self.minted_len())
            .field("caveats", &self.caveats)
            .finish_non_exhaustive()
    }
}

impl Token {
    /// Mints a token with `caveats` (at least one, none unknown, at most
    /// [`MAX_CAVEATS`]). Every caveat set here opens its dimension: see the
    /// module docs. Note that caveats of one type intersect, so grant
    /// several rights in one caveat (`right=read,write`), not two.
    pub fn mint(key: &RootKey, caveats: &[Caveat]) -> Result<Token, CapError> {
        let mut nonce = [0u8; NONCE_LEN];
        fill_nonce(&mut nonce);
        Token::mint_with_nonce(key, caveats, nonce)
    }

    /// Like [`mint`](Token::mint), but the nonce is derived from the key
    /// and the caveats, so the same caveats always give the same token.
    /// For tokens a host mints for itself on every invocation (the CLI's
    /// `--allow-*` flags): a plan and the call it approves, made with the
    /// same flags, then run under the same token.
    pub fn mint_deterministic(key: &RootKey, caveats: &[Caveat]) -> Result<Token, CapError> {
        let mut mac = HmacSha256::new_from_slice(&key.derive("deterministic-mint"))
            .expect("HMAC takes any key length");
        for c in caveats {
            let text = c.to_string();
            mac.update(&(text.len() as u64).to_be_bytes());
            mac.update(text.as_bytes());
        }
        let digest = mac.finalize().into_bytes();
        let nonce: [u8; NONCE_LEN] = digest[..NONCE_LEN].try_into().expect("nonce length");
        Token::mint_with_nonce(key, caveats, nonce)
    }

    fn mint_with_nonce(
        key: &RootKey,
        caveats: &[Caveat],
        nonce: [u8; NONCE_LEN],
    ) -> Result<Token, CapError> {
        if caveats.is_empty() {
            return Err(CapError::Empty);
        }
        if caveats.len() > MAX_CAVEATS {
            return Err(malformed(format!(
                "at most {MAX_CAVEATS} caveats per token"
            )));
        }
        let texts = caveats
            .iter()
            .map(|c| match c {
                Caveat::Unknown { kind, .. } => Err(CapError::UnknownCaveat(kind.clone())),
                c => c.wire_text().map_err(CapError::Malformed),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let token = Token::build(key, nonce, caveats.len() as u8, &texts, caveats.to_vec());
        if token.encoded_len() > MAX_ENCODED_LEN {
            return Err(malformed(format!(
                "the token would be longer than {MAX_ENCODED_LEN} characters"
            )));
        }
        Ok(token)
    }

    pub(super) fn build(
        key: &RootKey,
        nonce: [u8; NONCE_LEN],
        minted: u8,
        texts: &[String],
        caveats: Vec<Caveat>,
    ) -> Token {
        let mut bytes = Vec::with_capacity(
            HEADER_LEN + texts.iter().map(|t| t.len() + 2).sum::<usize>() + SIG_LEN,
        );
        bytes.push(TOKEN_VERSION);
        bytes.extend_from_slice(&key.id.0.to_be_bytes());
        bytes.extend_from_slice(&nonce);
        bytes.push(minted);
        let mut mac = key.mac.clone();
        mac.update(&bytes);
        let sig: [u8; SIG_LEN] = mac.finalize().into_bytes().into();
        let mut token = Token {
            bytes,
            spans: Vec::with_capacity(texts.len()),
            caveats,
        };
        token.append_signed(sig, texts);
        token
    }

    /// Appends caveat texts to a token whose body (without signature) is in
    /// `self.bytes` and whose current signature is `sig`, then writes the
    /// new signature.
    pub(super) fn append_signed(&mut self, mut sig: [u8; SIG_LEN], texts: &[String]) {
        for text in texts {
            self.bytes
                .extend_from_slice(&(text.len() as u16).to_be_bytes());
            let start = self.bytes.len();
            self.bytes.extend_from_slice(text.as_bytes());
            self.spans.push((start, self.bytes.len()));
            sig = chain_step(&sig, text.as_bytes());
        }
        self.bytes.extend_from_slice(&sig);
    }

    /// A narrower token: this token's caveats plus `caveats`, chained from
    /// this token's signature (no key needed). Refuses any caveat wider than
    /// what the token grants at that point (checked one after another, so a
    /// caveat is also checked against the new ones before it), naming the
    /// component.
    pub fn attenuate(&self, caveats: &[Caveat]) -> Result<Token, WidenError> {
        if self.caveats.len() + caveats.len() > MAX_CAVEATS {
            return Err(WidenError::Invalid(format!(
                "a token carries at most {MAX_CAVEATS} caveats"
            )));
        }
        let mut state = Fold::default();
        for (i, c) in self.caveats.iter().enumerate() {
            state.apply(c, i < self.minted_len()).map_err(|e| match e {
                CapError::UnknownCaveat(kind) => WidenError::UnknownCaveat(kind),
                e => WidenError::Invalid(e.to_string()),
            })?;
        }
        let mut texts = Vec::with_capacity(caveats.len());
        for c in caveats {
            state.check_narrows(c)?;
            texts.push(c.wire_text().map_err(WidenError::Invalid)?);
            state
                .apply(c, false)
                .map_err(|e| WidenError::Invalid(e.to_string()))?;
        }
        let mut child = Token {
            bytes: self.bytes[..self.bytes.len() - SIG_LEN].to_vec(),
            spans: self.spans.clone(),
            caveats: self.caveats.iter().chain(caveats).cloned().collect(),
        };
        let sig: [u8; SIG_LEN] = self.signature().try_into().expect("signature length");
        child.append_signed(sig, &texts);
        if child.encoded_len() > MAX_ENCODED_LEN {
            return Err(WidenError::Invalid(format!(
                "the token would be longer than {MAX_ENCODED_LEN} characters"
            )));
        }
        Ok(child)
    }

    /// The compact text form: base64url without padding.
    pub fn encode(&self) -> String {
        URL_SAFE_NO_PAD.encode(&self.bytes)
    }

    fn encoded_len(&self) -> usize {
        (self.bytes.len() * 4).div_ceil(3)
    }

    /// Parses the text form (surrounding whitespace ignored). Checks the
    /// structure and the caveat syntax only: nothing is trusted until
    /// verified. Unknown caveat types are kept (verification rejects them).
    pub fn decode(text: &str) -> Result<Token, CapError> {
        let text = text.trim();
        if text.len() > MAX_ENCODED_LEN {
            return Err(malformed(format!(
                "token longer than {MAX_ENCODED_LEN} characters"
            )));
        }
        let bytes = URL_SAFE_NO_PAD
            .decode(text)
            .map_err(|e| malformed(format!("token is not base64url without padding: {e}")))?;
        match bytes.first() {
            None => return Err(malformed("empty token")),
            Some(&v) if v != TOKEN_VERSION => return Err(CapError::BadVersion { found: v }),
            Some(_) => {}
        }
        if bytes.len() < HEADER_LEN + SIG_LEN {
            return Err(malformed("token too short"));
        }
        let body_end = bytes.len() - SIG_LEN;
        let mut spans = Vec::new();
        let mut caveats = Vec::new();
        let mut at = HEADER_LEN;
        while at < body_end {
            if at + 2 > body_end {
                return Err(malformed("truncated caveat length"));
            }
            let len = usize::from(u16::from_be_bytes([bytes[at], bytes[at + 1]]));
            let (start, end) = (at + 2, at + 2 + len);
            if end > body_end {
                return Err(malformed("caveat runs past the end of the token"));
            }
            if caveats.len() == MAX_CAVEATS {
                return Err(malformed(format!("more than {MAX_CAVEATS} caveats")));
            }
            let text = std::str::from_utf8(&bytes[start..end])
                .map_err(|_| malformed(format!("caveat {} is not UTF-8", caveats.len() + 1)))?;
            caveats.push(Caveat::parse_wire(text)?);
            spans.push((start, end));
            at = end;
        }
        let minted = usize::from(bytes[HEADER_LEN - 1]);
        if minted > caveats.len() {
            return Err(malformed(format!(
                "token claims {minted} minted caveats but has {}",
                caveats.len()
            )));
        }
        Ok(Token {
            bytes,
            spans,
            caveats,
        })
    }

    /// Every caveat, in chain order (minted ones first).
    pub fn caveats(&self) -> &[Caveat] {
        &self.caveats
    }

    /// How many of [`caveats`](Token::caveats) were set at mint.
    pub fn minted_len(&self) -> usize {
        usize::from(self.bytes[HEADER_LEN - 1])
    }

    /// The id of the key that minted the token.
    pub fn key_id(&self) -> KeyId {
        KeyId(u32::from_be_bytes([
            self.bytes[1],
            self.bytes[2],
            self.bytes[3],
            self.bytes[4],
        ]))
    }

    /// The random nonce chosen at mint (shared by every attenuation of the
    /// token): an id for audit logs.
    pub fn id(&self) -> [u8; NONCE_LEN] {
        self.bytes[5..5 + NONCE_LEN]
            .try_into()
            .expect("nonce length")
    }

    /// [`id`](Token::id) in hex.
    pub fn id_hex(&self) -> String {
        hex::encode(self.id())
    }

    /// The ids of this token and of every token it was made from, oldest
    /// first: the mint nonce, then the value of every `id` caveat. A token
    /// made by [`delegate`](Token::delegate) ends in its own id; one made by
    /// a plain [`attenuate`](Token::attenuate) shares its parent's. A
    /// holder can append an `id` caveat of their own choosing, but can
    /// never remove one, so revoking an id reaches every descendant.
    pub fn chain_ids(&self) -> Vec<TokenId> {
        std::iter::once(TokenId(self.id()))
            .chain(self.caveats.iter().filter_map(|c| match c {
                Caveat::Id(id) => Some(*id),
                _ => None,
            }))
            .collect()
    }

    /// This token's own id: the last of [`chain_ids`](Token::chain_ids).
    pub fn token_id(&self) -> TokenId {
        self.caveats
            .iter()
            .rev()
            .find_map(|c| match c {
                Caveat::Id(id) => Some(*id),
                _ => None,
            })
            .unwrap_or(TokenId(self.id()))
    }

    /// The id of the token this one was delegated from (the id before
    /// [`token_id`](Token::token_id) in the chain), if any.
    pub fn parent_id(&self) -> Option<TokenId> {
        let ids = self.chain_ids();
        (ids.len() > 1).then(|| ids[ids.len() - 2])
    }

    /// A name for this exact token that nobody can claim for another: a
    /// hash of its final signature (which only this chain of caveats
    /// produces). Unlike [`token_id`](Token::token_id), whose `id` caveat a
    /// holder could copy onto a token of their own, it can bind something
    /// (a plan) to the token. Showing it gives nothing away.
    pub fn binding(&self) -> [u8; 32] {
        Sha256::new()
            .chain_update(b"toolhost/capability/binding/v1\0")
            .chain_update(self.signature())
            .finalize()
            .into()
    }

    /// [`attenuate`](Token::attenuate) with a fresh `id` caveat first: the
    /// child gets an id of its own (for revocation and use counts), so two
    /// delegations with the same caveats are still two tokens with two
    /// budgets.
    pub fn delegate(&self, caveats: &[Caveat]) -> Result<Token, WidenError> {
        let mut nonce = [0u8; NONCE_LEN];
        fill_nonce(&mut nonce);
        let mut all = Vec::with_capacity(caveats.len() + 1);
        all.push(Caveat::Id(TokenId(nonce)));
        all.extend_from_slice(caveats);
        self.attenuate(&all)
    }

    /// The effective grant *without verifying anything*: for display
    /// (`inspect`) and for checking attenuations. Never authorize with it.
    pub fn grant_unverified(&self) -> Result<Grant, CapError> {
        fold(self)
    }

    pub(super) fn signature(&self) -> &[u8] {
        &self.bytes[self.bytes.len() - SIG_LEN..]
    }

    /// Chains the caveats from index `from` on, starting from `sig` (the
    /// signature after caveat `from - 1`, or the header's for 0). Returns
    /// the last signature and the [`CallBudget`] of every `max_calls`
    /// caveat on the way.
    pub(super) fn chain_from(
        &self,
        from: usize,
        mut sig: [u8; SIG_LEN],
    ) -> ([u8; SIG_LEN], Vec<CallBudget>) {
        let mut expires = self.caveats[..from]
            .iter()
            .filter_map(|c| match c {
                Caveat::Expires(t) => Some(*t),
                _ => None,
            })
            .min();
        let mut budgets = Vec::new();
        for (i, &(start, end)) in self.spans.iter().enumerate().skip(from) {
            sig = chain_step(&sig, &self.bytes[start..end]);
            match self.caveats[i] {
                Caveat::Expires(t) => expires = Some(expires.map_or(t, |e| e.min(t))),
                Caveat::MaxCalls(max) | Caveat::BudgetFuel(max) => budgets.push(CallBudget {
                    id: BudgetId::of_signature(&sig),
                    kind: if matches!(self.caveats[i], Caveat::MaxCalls(_)) {
                        BudgetKind::Calls
                    } else {
                        BudgetKind::Fuel
                    },
                    token_id: self.id(),
                    position: i,
                    max,
                    expires_at: expires,
                }),
                _ => {}
            }
        }
        (sig, budgets)
    }

    /// The call budgets of this token when it was made from `parent` by
    /// [`attenuate`](Token::attenuate): `parent_budgets` (those of the
    /// verified parent), then one for each `max_calls` caveat appended
    /// after it, chained from the parent's signature (which its holder
    /// has; no key needed). `None` if this token does not extend `parent`.
    pub fn budgets_derived_from(
        &self,
        parent: &Token,
        parent_budgets: &[CallBudget],
    ) -> Option<Vec<CallBudget>> {
        let body = parent.bytes.len() - SIG_LEN;
        if self.caveats.len() < parent.caveats.len()
            || self.bytes.len() < body + SIG_LEN
            || self.bytes[..body] != parent.bytes[..body]
        {
            return None;
        }
        let sig: [u8; SIG_LEN] = parent.signature().try_into().ok()?;
        let (last, appended) = self.chain_from(parent.caveats.len(), sig);
        if last[..] != *self.signature() {
            return None;
        }
        Some(parent_budgets.iter().copied().chain(appended).collect())
    }
}

impl FromStr for Token {
    type Err = CapError;
    fn from_str(s: &str) -> Result<Token, CapError> {
        Token::decode(s)
    }
}

/// A nonce from the OS random source; if that fails, a hash of the time,
/// the process id and a counter (a nonce needs to be unique, not secret).
pub(super) fn fill_nonce(nonce: &mut [u8; NONCE_LEN]) {
    if getrandom::fill(nonce).is_ok() {
        return;
    }
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let t = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let digest = Sha256::new()
        .chain_update(t.to_le_bytes())
        .chain_update(std::process::id().to_le_bytes())
        .chain_update(n.to_le_bytes())
        .finalize();
    nonce.copy_from_slice(&digest[..NONCE_LEN]);
}
