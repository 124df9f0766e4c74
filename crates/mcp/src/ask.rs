//! A tool's questions to the person behind the client
//! ([`toolhost::Asker`]), in both protocol eras.
//!
//! - A 2025-11-25 session whose client declared form elicitation: the call
//!   thread's question goes out as `elicitation/create` on the session and
//!   the thread waits for the answer ([`SessionAsker`]), within the call's
//!   deadline.
//! - A 2026-07-28 request whose `_meta` client capabilities declare
//!   `elicitation`: the tool is answered from the answers the request
//!   brought (`inputResponses`, plus those sealed in its `requestState`).
//!   A question without an answer stops the call, and the result is
//!   `input_required`: the question under its key in `inputRequests`, and
//!   a new `requestState` holding every answer so far, signed under the
//!   host key and bound to the token, tool and arguments. The client asks
//!   the person and sends the call again; the tool runs from the start.
//!   A `requestState` that does not verify is a JSON-RPC `-32602` error.
//! - Any other client has no asker: the tool is told `unavailable`.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use rmcp::model::{
    ElicitRequest, ElicitRequestParams, ElicitationAction, ElicitationSchema, ErrorData,
    InputRequest, InputRequests, InputRequiredResult,
};
use rmcp::service::Peer;
use rmcp::RoleServer;
use serde_json::{json, Value};
use toolhost::{Answer, AnswersAtHand, Asked, Asker, InputState, Question};
use toolhost::{ErrorCode, Observation};

use super::{elicit, Generation, SessionScope};

/// What of a `tools/call` request decides who its tool may ask.
pub(super) struct Request<'a> {
    /// A 2026-07-28 request.
    pub stateless: bool,
    /// The session's peer (2025-11-25).
    pub peer: Option<&'a Peer<RoleServer>>,
    /// The request's `_meta` (its client capabilities, 2026-07-28).
    pub meta: &'a rmcp::model::RequestMetaObject,
    pub request_state: Option<&'a str>,
    pub input_responses: Option<&'a rmcp::model::InputResponses>,
}

/// How long the answers of a stateless call stay usable.
const STATE_TTL: Duration = Duration::from_secs(10 * 60);

/// Asks within a 2025-11-25 session and waits.
pub(super) struct SessionAsker {
    peer: Peer<RoleServer>,
    runtime: tokio::runtime::Handle,
    wait: Duration,
}

impl fmt::Debug for SessionAsker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SessionAsker")
            .field("wait", &self.wait)
            .finish_non_exhaustive()
    }
}

impl Asker for SessionAsker {
    fn ask(&self, q: &Question) -> Asked {
        let schema: ElicitationSchema = match serde_json::from_value(q.schema.clone()) {
            Ok(s) => s,
            Err(e) => {
                return Asked::Unavailable(format!(
                    "the question's form cannot be sent as an elicitation: {e}"
                ))
            }
        };
        let params = ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: q.message.clone(),
            requested_schema: schema,
        };
        let (peer, wait) = (self.peer.clone(), self.wait);
        let (tx, rx) = std::sync::mpsc::channel();
        // The call runs on a thread of its own, off the runtime: the
        // question is sent from the runtime and this thread waits.
        self.runtime.spawn(async move {
            let _ = tx.send(
                peer.create_elicitation_with_timeout(params, Some(wait))
                    .await,
            );
        });
        match rx.recv() {
            Ok(Ok(result)) => Asked::Answer(match result.action {
                ElicitationAction::Accept => {
                    Answer::Accepted(result.content.unwrap_or(Value::Null))
                }
                ElicitationAction::Decline => Answer::Declined,
                _ => Answer::Cancelled,
            }),
            Ok(Err(e)) => Asked::Unavailable(format!("the client gave no answer: {e}")),
            Err(_) => Asked::Unavailable("the session ended before an answer came".into()),
        }
    }
}

/// The binding of the session's token, as an input state binds it.
fn capability(scope: &SessionScope) -> String {
    scope.session.grant().binding_hex()
}

fn digest(arguments: &str) -> String {
    InputState::digest_of(&serde_json::from_str(arguments).unwrap_or(Value::Null))
}

/// Who this call's tool may ask, if anyone; a `requestState` of a tool's
/// questions that does not verify is refused here.
pub(super) fn asker_for(
    req: &Request<'_>,
    generation: &Generation,
    scope: &SessionScope,
    name: &str,
    arguments: &str,
    wait: Duration,
) -> Result<Option<std::sync::Arc<dyn Asker>>, ErrorData> {
    if !req.stateless {
        let Some(peer) = req.peer.filter(|p| elicit::can_ask(p)) else {
            return Ok(None);
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return Ok(None);
        };
        return Ok(Some(std::sync::Arc::new(SessionAsker {
            peer: peer.clone(),
            runtime,
            wait,
        })));
    }
    if !elicit::can_ask_stateless(req.meta) {
        return Ok(None);
    }
    let Some(guard) = generation.host.effect_guard() else {
        return Ok(None);
    };
    let mut answers = BTreeMap::new();
    if let Some(text) = req
        .request_state
        .filter(|t| t.starts_with(InputState::PREFIX))
    {
        let state = guard
            .open_input_state(text, name, &digest(arguments), &capability(scope))
            .map_err(|e| {
                ErrorData::invalid_params(
                    format!("requestState refused: {e}; call the tool again without it"),
                    Some(json!({"field": "requestState"})),
                )
            })?;
        answers = state.answers;
    }
    if let Some(responses) = req.input_responses {
        for (key, value) in responses {
            answers.insert(key.clone(), value.clone());
        }
    }
    Ok(Some(std::sync::Arc::new(AnswersAtHand { answers })))
}

/// A stateless call stopped at its tool's question: the `input_required`
/// result that asks it, with every answer so far sealed in the new
/// `requestState`.
pub(super) fn input_required(
    req: &Request<'_>,
    generation: &Generation,
    scope: &SessionScope,
    name: &str,
    arguments: &str,
    asker: Option<&std::sync::Arc<dyn Asker>>,
    obs: &Observation,
) -> Option<InputRequiredResult> {
    if !req.stateless {
        return None;
    }
    let e = obs.error.as_ref()?;
    if e.host_code() != Some(ErrorCode::InputRequired) {
        return None;
    }
    let question: Question =
        serde_json::from_value(e.details.as_ref()?["question"].clone()).ok()?;
    let guard = generation.host.effect_guard()?;
    let mut answers = BTreeMap::new();
    if let Some(text) = req
        .request_state
        .filter(|t| t.starts_with(InputState::PREFIX))
    {
        if let Ok(s) = guard.open_input_state(text, name, &digest(arguments), &capability(scope)) {
            answers = s.answers;
        }
    }
    if asker.is_some() {
        if let Some(responses) = req.input_responses {
            for (key, value) in responses {
                // Only well-formed elicitation results are kept.
                if Answer::of_elicitation(value).is_some() {
                    answers.insert(key.clone(), value.clone());
                }
            }
        }
    }
    answers.remove(&question.key);
    let state = InputState {
        tool: name.to_string(),
        args_digest: digest(arguments),
        capability: capability(scope),
        answers,
        expires_at_ms: crate::now_ms() + STATE_TTL.as_millis() as u64,
    };
    let schema: ElicitationSchema = serde_json::from_value(question.schema.clone()).ok()?;
    let params = ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: question.message.clone(),
        requested_schema: schema,
    };
    let requests = InputRequests::from([(
        question.key.clone(),
        InputRequest::Elicitation(ElicitRequest::new(params)),
    )]);
    Some(InputRequiredResult::new(
        Some(requests),
        Some(guard.seal_input_state(&state)),
    ))
}
