//! The `requestState` of a multi round-trip `tools/call`: a pending
//! approval's plan, signed, for a client to echo back with the person's
//! answer.
//!
//! A stateless (2026-07-28) client cannot be asked in the middle of a
//! call, so the server answers `input_required` with the question and a
//! [`RequestState`] sealed with HMAC-SHA256 under the host key (the key
//! plan tokens use, under another domain). It binds the approval it asks
//! about, the capability token that asked (its binding), the tool, the
//! digest of the canonical arguments, the digest of every target, the plan
//! digest and an expiry. On the retry the host opens it ([`open`]),
//! checks it against the call it came with, and spends it in the record
//! store, so it is accepted exactly once by every host sharing that store.
//! The text is `base64url(payload) "." hex(hmac)`; it is signed, not
//! encrypted (it holds no secret).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What a request state binds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestState {
    /// The pending approval the question is about.
    pub approval_id: String,
    /// The binding of the capability token that asked (hex).
    pub capability: String,
    pub tool: String,
    /// SHA-256 of the canonical arguments (hex).
    pub args_digest: String,
    /// Each target path's digest when planned.
    pub targets: Value,
    pub plan_digest: String,
    /// Until when it is accepted (ms since the Unix epoch).
    pub expires_at_ms: u64,
}

pub use crate::sealed::StateError;

/// Domain of the signature: never valid as a plan token's.
const DOMAIN: &[u8] = b"toolhost/request-state/v1\0";

/// The text of `state`, signed with `key`.
pub fn seal(key: &[u8], state: &RequestState) -> String {
    crate::sealed::seal(key, DOMAIN, state)
}

/// The state `text` carries when `key` signed it, with its signature (the
/// handle its use is recorded under). Expiry and binding are the caller's
/// to check ([`RequestState::check`]).
pub fn open(key: &[u8], text: &str) -> Result<(RequestState, String), StateError> {
    crate::sealed::open(key, DOMAIN, text).map(|(state, sig)| (state, sig.to_string()))
}

impl RequestState {
    /// Whether this state was issued for a call of `tool` with arguments
    /// of `args_digest` by the capability token of `capability`, and is
    /// still in time at `now_ms`.
    pub fn check(
        &self,
        capability: &str,
        tool: &str,
        args_digest: &str,
        now_ms: u64,
    ) -> Result<(), StateError> {
        if self.capability != capability {
            return Err(StateError::OtherCall("another capability token"));
        }
        if self.tool != tool {
            return Err(StateError::OtherCall("another tool"));
        }
        if self.args_digest != args_digest {
            return Err(StateError::OtherCall("other arguments"));
        }
        if now_ms >= self.expires_at_ms {
            return Err(StateError::Expired);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn state() -> RequestState {
        RequestState {
            approval_id: "a".repeat(32),
            capability: "cap".into(),
            tool: "file_delete".into(),
            args_digest: "d1".into(),
            targets: json!([{"path": "a.txt", "sha256": "00"}]),
            plan_digest: "p1".into(),
            expires_at_ms: 2_000,
        }
    }

    #[test]
    fn opens_what_it_sealed_and_nothing_else() {
        let text = seal(b"key", &state());
        let (opened, sig) = open(b"key", &text).unwrap();
        assert_eq!(opened, state());
        assert_eq!(sig.len(), 64);
        assert_eq!(open(b"other key", &text), Err(StateError::Forged));
        // Any one byte altered, in the payload or the signature.
        for at in [0, text.len() / 2, text.len() - 1] {
            let mut bytes = text.clone().into_bytes();
            bytes[at] = if bytes[at] == b'A' { b'B' } else { b'A' };
            let altered = String::from_utf8(bytes).unwrap();
            assert!(open(b"key", &altered).is_err(), "{at}");
        }
        assert_eq!(open(b"key", "no-dot"), Err(StateError::Malformed));
        assert_eq!(open(b"key", ""), Err(StateError::Malformed));
    }

    #[test]
    fn binds_the_call_and_expires() {
        let s = state();
        assert_eq!(s.check("cap", "file_delete", "d1", 1_999), Ok(()));
        assert_eq!(
            s.check("cap", "file_delete", "d1", 2_000),
            Err(StateError::Expired)
        );
        assert!(matches!(
            s.check("other", "file_delete", "d1", 0),
            Err(StateError::OtherCall(_))
        ));
        assert!(matches!(
            s.check("cap", "file_edit", "d1", 0),
            Err(StateError::OtherCall(_))
        ));
        assert!(matches!(
            s.check("cap", "file_delete", "d2", 0),
            Err(StateError::OtherCall(_))
        ));
    }
}
