//! Signed JSON texts a client carries and hands back: the request states
//! of multi round-trip calls.
//!
//! The text is `base64url(payload) "." hex(HMAC-SHA256(domain ‖ payload))`
//! under the host key. It is signed, not encrypted: what it carries must
//! hold no secret. Each kind of text has its own domain, so one is never
//! valid as another.

use hmac::{Hmac, Mac};
use serde::de::DeserializeOwned;
use serde::Serialize;
use sha2::Sha256;

/// Why a state a client handed back is refused. [`open`] answers the first
/// two; the holder of each kind of state checks the others.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StateError {
    /// Not of the form, or not the expected JSON.
    #[error("the request state is malformed")]
    Malformed,
    /// Its signature does not hold: forged, or altered.
    #[error("the request state was not issued by this host, or was altered")]
    Forged,
    /// It was issued for another call.
    #[error("the request state was issued for another call ({0})")]
    OtherCall(&'static str),
    #[error("the request state expired")]
    Expired,
    /// It was accepted once already (states that may be spent only once).
    #[error("the request state was already used; a request state is accepted once")]
    Used,
}

fn mac(key: &[u8], domain: &[u8], payload: &[u8]) -> String {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(key).expect("any key length");
    mac.update(domain);
    mac.update(payload);
    hex::encode(mac.finalize().into_bytes())
}

/// The text of `value`, signed with `key` under `domain`.
pub fn seal<T: Serialize>(key: &[u8], domain: &[u8], value: &T) -> String {
    use base64::Engine;
    let payload = serde_json::to_vec(value).expect("a sealed value serialises");
    format!(
        "{}.{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&payload),
        mac(key, domain, &payload)
    )
}

/// The value `text` carries when `key` signed it under `domain`, with its
/// signature.
pub fn open<'t, T: DeserializeOwned>(
    key: &[u8],
    domain: &[u8],
    text: &'t str,
) -> Result<(T, &'t str), StateError> {
    use base64::Engine;
    use subtle::ConstantTimeEq;
    let (payload_b64, sig) = text.split_once('.').ok_or(StateError::Malformed)?;
    let payload = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload_b64)
        .map_err(|_| StateError::Malformed)?;
    let expected = mac(key, domain, &payload);
    if expected.len() != sig.len() || !bool::from(expected.as_bytes().ct_eq(sig.as_bytes())) {
        return Err(StateError::Forged);
    }
    let value = serde_json::from_slice(&payload).map_err(|_| StateError::Malformed)?;
    Ok((value, sig))
}
