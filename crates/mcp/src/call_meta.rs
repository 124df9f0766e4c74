//! What a `tools/call` may carry in `_meta` besides the standard keys: the
//! idempotency key of a side-effecting call, the approval of an irreversible
//! one, and a request to plan instead of run.
//!
//! | `_meta` key                     | type    | meaning                                   |
//! |---------------------------------|---------|-------------------------------------------|
//! | `dev.toolhost/idempotency_key`  | string  | the key, as chosen by the client          |
//! | `dev.toolhost/trajectory_id`    | string  | with `call_id` (and `turn`): derive the key |
//! | `dev.toolhost/turn`             | integer | turn within the trajectory (default 0)    |
//! | `dev.toolhost/call_id`          | string  | the logical call; also the observation's `call_id` |
//! | `dev.toolhost/plan_token`       | string  | approves an irreversible call (from a dry run) |
//! | `dev.toolhost/dry_run`          | boolean | plan the call instead of running it       |
//! | `dev.toolhost/approval`         | string  | the id of an approval a person gave (from `approval_pending`) |
//!
//! A derived key is HMAC(trajectory | turn | call id | tool | JCS(args)), so
//! a client that retries a logical call with the same three ids gets the
//! recorded result (or `in_flight`, or `in_doubt`), never a second effect.
//! Without any of them the server derives a key that is unique to the
//! request: the call is still recorded (an interrupted one is marked in
//! doubt, not forgotten), and the observation's `effects.idempotency_key`
//! can be sent back as `dev.toolhost/idempotency_key` to retry it safely.
//!
//! A key that is neither string nor in range, or a half-given derivation
//! (a trajectory without a call id), is a malformed request: [`MetaError`]
//! names the key, what it must be and what was sent.

use serde_json::{Map, Value};

use toolhost::KeySource;

pub const IDEMPOTENCY_KEY: &str = "dev.toolhost/idempotency_key";
pub const TRAJECTORY_ID: &str = "dev.toolhost/trajectory_id";
pub const TURN: &str = "dev.toolhost/turn";
pub const CALL_ID: &str = "dev.toolhost/call_id";
pub const PLAN_TOKEN: &str = "dev.toolhost/plan_token";
pub const DRY_RUN: &str = "dev.toolhost/dry_run";
pub const APPROVAL: &str = "dev.toolhost/approval";

/// Longest key, trajectory id, call id; a plan token may be longer.
const MAX_ID_CHARS: usize = 256;
const MAX_PLAN_TOKEN_CHARS: usize = 4096;

/// The toolhost options of one `tools/call`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallMeta {
    /// Where the idempotency key comes from; `None`: a per-request key.
    pub idempotency: Option<KeySource>,
    /// The client's id of the logical call.
    pub call_id: Option<String>,
    pub plan_token: Option<String>,
    pub dry_run: bool,
    /// The id of an approval a person gave.
    pub approval: Option<String>,
}

/// A `_meta` entry that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetaError {
    /// The `_meta` key at fault.
    pub key: &'static str,
    pub expected: String,
    /// What was sent (`absent` when a companion key is missing).
    pub actual: String,
}

impl std::fmt::Display for MetaError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "_meta[\"{}\"]: expected {}, got {}",
            self.key, self.expected, self.actual
        )
    }
}

impl std::error::Error for MetaError {}

/// Reads the toolhost keys of a request's `_meta`; other keys are ignored.
pub fn parse(meta: &Map<String, Value>) -> Result<CallMeta, MetaError> {
    let key = id(meta, IDEMPOTENCY_KEY, MAX_ID_CHARS)?;
    let trajectory = id(meta, TRAJECTORY_ID, MAX_ID_CHARS)?;
    let call_id = id(meta, CALL_ID, MAX_ID_CHARS)?;
    let turn = match meta.get(TURN) {
        None => None,
        Some(v) => Some(v.as_u64().ok_or_else(|| MetaError {
            key: TURN,
            expected: "a non-negative integer".into(),
            actual: describe(v),
        })?),
    };
    let plan_token = id(meta, PLAN_TOKEN, MAX_PLAN_TOKEN_CHARS)?;
    let approval = id(meta, APPROVAL, MAX_ID_CHARS)?;
    let dry_run = match meta.get(DRY_RUN) {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(v) => {
            return Err(MetaError {
                key: DRY_RUN,
                expected: "a boolean".into(),
                actual: describe(v),
            })
        }
    };
    let idempotency = match (key, &trajectory, &call_id) {
        (Some(_), Some(_), _) => {
            return Err(MetaError {
                key: TRAJECTORY_ID,
                expected: format!("absent when `{IDEMPOTENCY_KEY}` is given (one key source)"),
                actual: "a trajectory id".into(),
            })
        }
        (Some(k), None, _) => Some(KeySource::Explicit(k)),
        (None, Some(t), Some(c)) => Some(KeySource::Derived {
            trajectory_id: t.clone(),
            turn: turn.unwrap_or(0),
            call_id: c.clone(),
        }),
        (None, Some(_), None) => {
            return Err(MetaError {
                key: CALL_ID,
                expected: format!("a call id alongside `{TRAJECTORY_ID}`"),
                actual: "absent".into(),
            })
        }
        (None, None, _) if turn.is_some() => {
            return Err(MetaError {
                key: TRAJECTORY_ID,
                expected: format!("a trajectory id alongside `{TURN}`"),
                actual: "absent".into(),
            })
        }
        (None, None, Some(_)) => {
            return Err(MetaError {
                key: TRAJECTORY_ID,
                expected: format!(
                    "a trajectory id alongside `{CALL_ID}` (a call id alone is ambiguous across conversations)"
                ),
                actual: "absent".into(),
            })
        }
        (None, None, None) => None,
    };
    if dry_run && plan_token.is_some() {
        return Err(MetaError {
            key: PLAN_TOKEN,
            expected: format!(
                "absent when `{DRY_RUN}` is true (a dry run plans, a plan token approves)"
            ),
            actual: "a plan token".into(),
        });
    }
    Ok(CallMeta {
        idempotency,
        call_id,
        plan_token,
        dry_run,
        approval,
    })
}

/// A non-empty string of at most `max` characters, if present.
fn id(
    meta: &Map<String, Value>,
    key: &'static str,
    max: usize,
) -> Result<Option<String>, MetaError> {
    match meta.get(key) {
        None => Ok(None),
        Some(Value::String(s)) if !s.is_empty() && s.chars().count() <= max => Ok(Some(s.clone())),
        Some(v) => Err(MetaError {
            key,
            expected: format!("a string of 1 to {max} characters"),
            actual: describe(v),
        }),
    }
}

fn describe(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => format!("boolean {b}"),
        Value::Number(n) => format!("number {n}"),
        Value::String(s) if s.is_empty() => "an empty string".into(),
        Value::String(s) => format!("a string of {} characters", s.chars().count()),
        Value::Array(_) => "an array".into(),
        Value::Object(_) => "an object".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn meta(v: Value) -> Map<String, Value> {
        v.as_object().expect("object").clone()
    }

    #[test]
    fn nothing_given_means_a_per_request_key() {
        let m = parse(&meta(json!({"progressToken": 3}))).unwrap();
        assert_eq!(m, CallMeta::default());
    }

    #[test]
    fn an_explicit_key_and_a_plan_token() {
        let m = parse(&meta(json!({IDEMPOTENCY_KEY: "k-1", PLAN_TOKEN: "p.s"}))).unwrap();
        assert_eq!(m.idempotency, Some(KeySource::Explicit("k-1".into())));
        assert_eq!(m.plan_token.as_deref(), Some("p.s"));
        assert!(!m.dry_run);
    }

    #[test]
    fn a_derived_key_takes_the_three_ids() {
        let m = parse(&meta(json!({TRAJECTORY_ID: "t", TURN: 4, CALL_ID: "c"}))).unwrap();
        assert_eq!(
            m.idempotency,
            Some(KeySource::Derived {
                trajectory_id: "t".into(),
                turn: 4,
                call_id: "c".into()
            })
        );
        assert_eq!(m.call_id.as_deref(), Some("c"));
        let m = parse(&meta(json!({TRAJECTORY_ID: "t", CALL_ID: "c"}))).unwrap();
        assert!(matches!(
            m.idempotency,
            Some(KeySource::Derived { turn: 0, .. })
        ));
    }

    #[test]
    fn half_a_derivation_is_refused_with_the_missing_key() {
        let e = parse(&meta(json!({TRAJECTORY_ID: "t"}))).unwrap_err();
        assert_eq!((e.key, e.actual.as_str()), (CALL_ID, "absent"));
        let e = parse(&meta(json!({CALL_ID: "c"}))).unwrap_err();
        assert_eq!(e.key, TRAJECTORY_ID);
        let e = parse(&meta(json!({TURN: 1}))).unwrap_err();
        assert_eq!(e.key, TRAJECTORY_ID);
        let e = parse(&meta(
            json!({IDEMPOTENCY_KEY: "k", TRAJECTORY_ID: "t", CALL_ID: "c"}),
        ))
        .unwrap_err();
        assert_eq!(e.key, TRAJECTORY_ID);
    }

    #[test]
    fn wrong_types_name_the_key_expected_and_actual() {
        let e = parse(&meta(json!({TURN: -1, TRAJECTORY_ID: "t", CALL_ID: "c"}))).unwrap_err();
        assert_eq!(
            (e.key, e.expected.as_str(), e.actual.as_str()),
            (TURN, "a non-negative integer", "number -1")
        );
        let e = parse(&meta(json!({IDEMPOTENCY_KEY: ""}))).unwrap_err();
        assert_eq!(
            (e.key, e.actual.as_str()),
            (IDEMPOTENCY_KEY, "an empty string")
        );
        let e = parse(&meta(json!({IDEMPOTENCY_KEY: "x".repeat(257)}))).unwrap_err();
        assert_eq!(e.actual, "a string of 257 characters");
        let e = parse(&meta(json!({DRY_RUN: "yes"}))).unwrap_err();
        assert_eq!(
            (e.key, e.actual.as_str()),
            (DRY_RUN, "a string of 3 characters")
        );
        let e = parse(&meta(json!({PLAN_TOKEN: 7}))).unwrap_err();
        assert_eq!(
            e.to_string(),
            "_meta[\"dev.toolhost/plan_token\"]: expected a string of 1 to 4096 characters, got number 7"
        );
    }

    #[test]
    fn a_dry_run_cannot_carry_an_approval() {
        assert!(parse(&meta(json!({DRY_RUN: true}))).unwrap().dry_run);
        let e = parse(&meta(json!({DRY_RUN: true, PLAN_TOKEN: "p.s"}))).unwrap_err();
        assert_eq!(e.key, PLAN_TOKEN);
    }
}
