//! A tool asks the person behind the client: the host's side of the
//! `toolhost:plugin/client` import.
//!
//! The sandbox hands every `ask` of a running call to the call's
//! [`Asker`] through [`mediate`], which checks the question (its key, and
//! a schema of the flat form MCP elicitation allows), asks, and checks the
//! answer against the schema before the plugin sees it. The transport
//! decides how a person is reached:
//!
//! - a 2025-11-25 MCP session whose client declared form elicitation asks
//!   within the call (`elicitation/create`) and waits;
//! - a 2026-07-28 request cannot wait: its asker answers from the answers
//!   the request brought, and a question without one stops the call
//!   ([`Asked::Later`]); the client asks and sends the call again, with
//!   the answers so far sealed in an [`InputState`];
//! - everything else (the CLI, a client without elicitation, a dry-run or a
//!   probe) has no asker, and the plugin is told `unavailable`.

use std::collections::BTreeMap;
use std::fmt;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// Most questions one call may ask.
pub const MAX_QUESTIONS: usize = 4;
/// Largest question message and schema, in bytes each.
pub const MAX_QUESTION_BYTES: usize = 16 * 1024;

/// One question a tool asks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Question {
    /// Names the question within the call (`^[a-z][a-z0-9_]{0,63}$`).
    pub key: String,
    /// What the person reads.
    pub message: String,
    /// JSON Schema of the answer: a flat object form.
    pub schema: Value,
}

/// What the person did.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// Accepted, with the form's content (valid against the schema).
    Accepted(Value),
    Declined,
    Cancelled,
}

/// What an [`Asker`] has for one question.
#[derive(Debug, Clone, PartialEq)]
pub enum Asked {
    Answer(Answer),
    /// Nobody can be asked (the message says why).
    Unavailable(String),
    /// The answer comes only with a later request: stop the call here.
    Later,
}

/// Reaches the person behind a call's client.
pub trait Asker: Send + Sync + fmt::Debug {
    /// Asks `q` and waits for the answer (or says it cannot).
    fn ask(&self, q: &Question) -> Asked;
}

/// Why a question is refused before anyone is asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuestionError {
    #[error("the question's key must match ^[a-z][a-z0-9_]{{0,63}}$, not {0:?}")]
    Key(String),
    #[error("the question's {0} is over {MAX_QUESTION_BYTES} bytes")]
    TooLarge(&'static str),
    #[error("the question's schema is not JSON: {0}")]
    SchemaNotJson(String),
    #[error("the question's schema must be a flat form: {0}")]
    SchemaForm(String),
    #[error("the answer does not match the question's schema: {0}")]
    Answer(String),
}

/// The outcome of one `ask`, as the plugin gets it.
#[derive(Debug, Clone, PartialEq)]
pub enum Mediated {
    Answer(Answer),
    Unavailable(String),
    Invalid(String),
    /// Stop the call: the question goes back to the client.
    Later(Question),
}

/// Checks a plugin's question, asks it through `asker` and checks the
/// answer: the one path of a tool's question.
pub fn mediate(asker: Option<&dyn Asker>, key: &str, message: &str, schema: &str) -> Mediated {
    let q = match question(key, message, schema) {
        Ok(q) => q,
        Err(e) => return Mediated::Invalid(e.to_string()),
    };
    let Some(asker) = asker else {
        return Mediated::Unavailable(
            "nobody can be asked here: the call is not from an MCP client that answers forms, or it is a dry-run or a probe".into(),
        );
    };
    match asker.ask(&q) {
        Asked::Answer(Answer::Accepted(content)) => match check_answer(&q.schema, &content) {
            Ok(()) => Mediated::Answer(Answer::Accepted(content)),
            Err(e) => Mediated::Invalid(e.to_string()),
        },
        Asked::Answer(other) => Mediated::Answer(other),
        Asked::Unavailable(why) => Mediated::Unavailable(why),
        Asked::Later => Mediated::Later(q),
    }
}

/// The question a plugin's parts make, checked.
pub fn question(key: &str, message: &str, schema: &str) -> Result<Question, QuestionError> {
    if !crate::observation::is_valid_code(key) {
        return Err(QuestionError::Key(key.chars().take(80).collect()));
    }
    if message.len() > MAX_QUESTION_BYTES {
        return Err(QuestionError::TooLarge("message"));
    }
    if schema.len() > MAX_QUESTION_BYTES {
        return Err(QuestionError::TooLarge("schema"));
    }
    let schema: Value =
        serde_json::from_str(schema).map_err(|e| QuestionError::SchemaNotJson(e.to_string()))?;
    check_form(&schema)?;
    Ok(Question {
        key: key.to_string(),
        message: message.to_string(),
        schema,
    })
}

/// Whether `schema` is the flat form MCP elicitation allows: an object
/// whose properties are strings, numbers, integers, booleans, or arrays of
/// enumerated strings.
fn check_form(schema: &Value) -> Result<(), QuestionError> {
    let bad = |m: &str| Err(QuestionError::SchemaForm(m.to_string()));
    if schema["type"] != "object" {
        return bad("its type must be \"object\"");
    }
    let Some(props) = schema["properties"].as_object() else {
        return bad("it must have \"properties\"");
    };
    for (name, p) in props {
        match p["type"].as_str() {
            Some("string" | "number" | "integer" | "boolean") => {}
            Some("array") if p["items"].is_object() => {}
            _ => {
                return Err(QuestionError::SchemaForm(format!(
                    "property {name:?} must be a string, number, integer, boolean or an array of enumerated strings"
                )))
            }
        }
    }
    jsonschema::draft202012::new(schema)
        .map(|_| ())
        .map_err(|e| QuestionError::SchemaForm(e.to_string()))
}

/// Whether `content` answers a question of `schema`.
fn check_answer(schema: &Value, content: &Value) -> Result<(), QuestionError> {
    let validator = jsonschema::draft202012::new(schema)
        .map_err(|e| QuestionError::SchemaForm(e.to_string()))?;
    let first = validator
        .iter_errors(content)
        .next()
        .map(|e| format!("{e} at {:?}", e.instance_path().to_string()));
    match first {
        None => Ok(()),
        Some(e) => Err(QuestionError::Answer(e)),
    }
}

impl Answer {
    /// An elicitation result as an answer ([`answer_of_elicitation`]).
    pub fn of_elicitation(result: &Value) -> Option<Answer> {
        answer_of_elicitation(result)
    }
}

/// An elicitation result (`{action, content}`) as an [`Answer`]; `None`
/// for a value of another shape.
pub fn answer_of_elicitation(result: &Value) -> Option<Answer> {
    match result["action"].as_str()? {
        "accept" => Some(Answer::Accepted(
            result.get("content").cloned().unwrap_or(Value::Null),
        )),
        "decline" => Some(Answer::Declined),
        "cancel" => Some(Answer::Cancelled),
        _ => None,
    }
}

/// What a stateless call's retry carries between rounds: the answers given
/// so far, bound to the call they were given for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InputState {
    pub tool: String,
    /// SHA-256 (hex) of the arguments, canonical ([`args_digest`]).
    pub args_digest: String,
    /// The binding of the capability token of the call (hex).
    pub capability: String,
    /// Each answered key's elicitation result, as the client sent it.
    pub answers: BTreeMap<String, Value>,
    /// Until when it is accepted (ms since the Unix epoch).
    pub expires_at_ms: u64,
}

pub use crate::sealed::StateError;

/// The prefix that tells an input state from an approval's request state.
pub const INPUT_STATE_PREFIX: &str = "in1.";
const DOMAIN: &[u8] = b"toolhost/input-state/v1\0";

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl InputState {
    /// What the text of a sealed input state starts with
    /// ([`INPUT_STATE_PREFIX`]).
    pub const PREFIX: &'static str = INPUT_STATE_PREFIX;

    /// The digest of `args` a state binds ([`args_digest`]).
    pub fn digest_of(args: &Value) -> String {
        args_digest(args)
    }

    /// The text of this state, signed with `key`.
    pub fn seal(&self, key: &[u8]) -> String {
        format!(
            "{INPUT_STATE_PREFIX}{}",
            crate::sealed::seal(key, DOMAIN, self)
        )
    }

    /// The state `text` carries when `key` signed it, checked against the
    /// call it came back with.
    pub fn open(
        key: &[u8],
        text: &str,
        tool: &str,
        args_digest: &str,
        capability: &str,
    ) -> Result<InputState, StateError> {
        let body = text
            .strip_prefix(INPUT_STATE_PREFIX)
            .ok_or(StateError::Malformed)?;
        let (state, _): (InputState, _) = crate::sealed::open(key, DOMAIN, body)?;
        if state.tool != tool {
            return Err(StateError::OtherCall("another tool"));
        }
        if state.args_digest != args_digest {
            return Err(StateError::OtherCall("other arguments"));
        }
        if state.capability != capability {
            return Err(StateError::OtherCall("another capability token"));
        }
        if now_ms() >= state.expires_at_ms {
            return Err(StateError::Expired);
        }
        Ok(state)
    }
}

/// SHA-256 (hex) of `args` with every object's keys sorted: the same for
/// the same arguments however a client orders or spaces them.
pub fn args_digest(args: &Value) -> String {
    fn canonical(v: &Value, out: &mut String) {
        match v {
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                out.push('{');
                for (i, k) in keys.into_iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&Value::String(k.clone()).to_string());
                    out.push(':');
                    canonical(&map[k], out);
                }
                out.push('}');
            }
            Value::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    canonical(item, out);
                }
                out.push(']');
            }
            other => out.push_str(&other.to_string()),
        }
    }
    let mut text = String::new();
    canonical(args, &mut text);
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// Answers from the answers a stateless request brought; any other
/// question stops the call ([`Asked::Later`]).
#[derive(Debug, Default)]
pub struct AnswersAtHand {
    pub answers: BTreeMap<String, Value>,
}

impl Asker for AnswersAtHand {
    fn ask(&self, q: &Question) -> Asked {
        match self.answers.get(&q.key).and_then(answer_of_elicitation) {
            Some(a) => Asked::Answer(a),
            None => Asked::Later,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const FORM: &str = r#"{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},"required":["name"]}"#;

    #[derive(Debug)]
    struct Fixed(Asked);
    impl Asker for Fixed {
        fn ask(&self, _: &Question) -> Asked {
            self.0.clone()
        }
    }

    #[test]
    fn a_valid_answer_reaches_the_plugin_and_an_invalid_one_does_not() {
        let ok = Fixed(Asked::Answer(Answer::Accepted(json!({"name": "Ada"}))));
        assert_eq!(
            mediate(Some(&ok), "who", "Who?", FORM),
            Mediated::Answer(Answer::Accepted(json!({"name": "Ada"})))
        );
        let bad = Fixed(Asked::Answer(Answer::Accepted(json!({"age": "old"}))));
        match mediate(Some(&bad), "who", "Who?", FORM) {
            Mediated::Invalid(m) => assert!(m.contains("does not match"), "{m}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn malformed_questions_are_refused_before_anyone_is_asked() {
        let asker = Fixed(Asked::Unavailable("never asked".into()));
        for (key, schema) in [
            ("Bad Key", FORM),
            ("ok", "not json"),
            ("ok", r#"{"type":"string"}"#),
            (
                "ok",
                r#"{"type":"object","properties":{"n":{"type":"object"}}}"#,
            ),
        ] {
            assert!(
                matches!(
                    mediate(Some(&asker), key, "?", schema),
                    Mediated::Invalid(_)
                ),
                "{key} {schema}"
            );
        }
        assert!(matches!(
            mediate(None, "ok", "?", FORM),
            Mediated::Unavailable(_)
        ));
    }

    #[test]
    fn answers_at_hand_answer_their_keys_and_defer_the_rest() {
        let at_hand = AnswersAtHand {
            answers: BTreeMap::from([(
                "who".to_string(),
                json!({"action": "accept", "content": {"name": "Ada"}}),
            )]),
        };
        assert!(matches!(
            mediate(Some(&at_hand), "who", "?", FORM),
            Mediated::Answer(Answer::Accepted(_))
        ));
        assert!(matches!(
            mediate(Some(&at_hand), "other", "?", FORM),
            Mediated::Later(_)
        ));
    }

    #[test]
    fn an_input_state_opens_only_for_its_call_and_key() {
        let state = InputState {
            tool: "t".into(),
            args_digest: args_digest(&json!({"b": 1, "a": [1, {"d": 2, "c": 3}]})),
            capability: "cap".into(),
            answers: BTreeMap::new(),
            expires_at_ms: now_ms() + 60_000,
        };
        let text = state.seal(b"key");
        let digest = args_digest(&json!({"a": [1, {"c": 3, "d": 2}], "b": 1}));
        assert_eq!(
            InputState::open(b"key", &text, "t", &digest, "cap").unwrap(),
            state
        );
        assert_eq!(
            InputState::open(b"other", &text, "t", &digest, "cap"),
            Err(StateError::Forged)
        );
        assert_eq!(
            InputState::open(b"key", &text, "u", &digest, "cap"),
            Err(StateError::OtherCall("another tool"))
        );
        let mut tampered = text.clone().into_bytes();
        let at = tampered.len() - 3;
        tampered[at] = if tampered[at] == b'0' { b'1' } else { b'0' };
        assert_eq!(
            InputState::open(
                b"key",
                &String::from_utf8(tampered).unwrap(),
                "t",
                &digest,
                "cap"
            ),
            Err(StateError::Forged)
        );
        let expired = InputState {
            expires_at_ms: 0,
            ..state
        }
        .seal(b"key");
        assert_eq!(
            InputState::open(b"key", &expired, "t", &digest, "cap"),
            Err(StateError::Expired)
        );
    }
}
