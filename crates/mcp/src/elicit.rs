//! Asking the person behind a 2025-11-25 client (`elicitation/create`,
//! form mode) to approve a call that waits for approval.
//!
//! When a call ends `approval_pending` ([`toolhost::Approvals`]) and the
//! client declared the `elicitation` capability (form mode), the server
//! does not hand the agent the approval id: it shows the plan the host's
//! dry run made, in plain words, and asks for a small form (`approve`
//! yes/no, an optional `note`).
//!
//! - **accept** with `approve: true`: the approval is settled as approved
//!   (by the client's name and version) and the call runs again with it,
//!   bound to exactly that plan: a target changed in between is
//!   `stale_plan` and nothing runs;
//! - **accept** with `approve: false`, or **decline**: the approval is
//!   settled as declined and the call's answer is `approval_declined`;
//! - **cancel**, no answer in time, or a client error: nothing is settled;
//!   the answer is the `approval_pending` result itself, whose id a person
//!   can still approve with `toolhost approvals approve`.
//!
//! A 2026-07-28 request has no channel back to the client in the middle
//! of a call, so the same question goes out as an `input_required` result
//! (multi round-trip request): the form under `inputRequests.approval` and
//! the signed request state of the approval (the host seals it). The
//! client asks the person and
//! sends the call again with the answer in `inputResponses.approval` and
//! the same `requestState`; any host sharing the key and the record store
//! accepts that state once, records the decision and runs the call bound
//! to the plan, as above. A missing answer (cancel) decides nothing and
//! the call ends `approval_pending`.
//!
//! Each decision is journaled like one made at a terminal.

use std::time::Duration;

use rmcp::model::{
    ElicitRequest, ElicitRequestParams, ElicitationAction, ElicitationSchema, InputRequest,
    InputRequests, InputResponses, RequestMetaObject,
};
use rmcp::service::{ElicitationMode, Peer};
use rmcp::RoleServer;
use serde::Deserialize;
use serde_json::{json, Value};
use toolhost::{ErrorCode, Observation};

/// Longest a person is waited for, whatever the approval's own expiry.
pub(super) const MAX_WAIT: Duration = Duration::from_secs(10 * 60);

/// Most bytes of the plan shown in the question.
const MAX_PLAN_BYTES: usize = 2000;

/// The person's answer.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Answer {
    Approve(Option<String>),
    Decline(Option<String>),
    /// Cancelled, timed out, or the client failed: nothing is decided.
    None,
}

/// The pending approval of `obs`: its id and its details.
pub(super) fn pending(obs: &Observation) -> Option<(String, &Value)> {
    let e = obs.error.as_ref()?;
    if e.host_code() != Some(ErrorCode::ApprovalPending) {
        return None;
    }
    let details = e.details.as_ref()?;
    let id = details["approval_id"].as_str()?.to_string();
    Some((id, details))
}

/// Whether the session's client can answer a form.
pub(super) fn can_ask(peer: &Peer<RoleServer>) -> bool {
    peer.supported_elicitation_modes()
        .contains(&ElicitationMode::Form)
}

/// Who answers through this client: its name and version.
pub(super) fn who(peer: &Peer<RoleServer>) -> String {
    match peer.peer_info() {
        Some(info) => format!("mcp:{}/{}", info.client_info.name, info.client_info.version),
        None => "mcp:unknown".into(),
    }
}

/// The question: the plan in plain words.
pub(super) fn question(tool: &str, arguments: &str, details: &Value) -> String {
    let mut text = format!("Approve this call?\n\nTool: {tool}\nArguments: {arguments}\n");
    if let Some(targets) = details["targets"].as_array().filter(|t| !t.is_empty()) {
        text.push_str("Targets:\n");
        for t in targets {
            let path = t["path"].as_str().unwrap_or("?");
            match t["sha256"].as_str() {
                None => text.push_str(&format!("- {path} (does not exist now)\n")),
                Some(d) => {
                    let (kind, hex) = d.split_once(':').unwrap_or(("file", d));
                    let short = &hex[..hex.len().min(12)];
                    text.push_str(&format!("- {path} ({kind}, sha256 {short}…)\n"));
                }
            }
        }
    }
    match &details["plan"] {
        Value::Null => {
            text.push_str("The tool describes no plan; the call acts on the targets above.\n")
        }
        plan if plan["summary"].is_string() => text.push_str(&in_words(plan)),
        plan => {
            let shown = plan.to_string();
            let clipped = if shown.len() > MAX_PLAN_BYTES {
                let mut end = MAX_PLAN_BYTES;
                while !shown.is_char_boundary(end) {
                    end -= 1;
                }
                format!("{}… ({} bytes more)", &shown[..end], shown.len() - end)
            } else {
                shown
            };
            text.push_str(&format!("Plan: {clipped}\n"));
        }
    }
    text.push_str(&format!(
        "\nApproval {} (plan digest {}).",
        details["approval_id"].as_str().unwrap_or("?"),
        details["plan_digest"].as_str().unwrap_or("?")
    ));
    text
}

/// A plan of the reference tools' shape (`summary`, `changes`,
/// `warnings`) in plain words: one line per changed file with its line
/// counts, then each warning.
fn in_words(plan: &Value) -> String {
    let mut text = format!("Plan: {}\n", plan["summary"].as_str().unwrap_or_default());
    let changes = plan["changes"].as_array().map_or(&[][..], Vec::as_slice);
    for c in changes.iter().take(20) {
        text.push_str(&format!(
            "- {} {}: +{} -{} lines\n",
            c["action"].as_str().unwrap_or("change"),
            c["path"].as_str().unwrap_or("?"),
            c["lines_added"].as_u64().unwrap_or(0),
            c["lines_removed"].as_u64().unwrap_or(0),
        ));
    }
    if changes.len() > 20 {
        text.push_str(&format!("- and {} more files\n", changes.len() - 20));
    }
    for w in plan["warnings"].as_array().into_iter().flatten().take(10) {
        if let Some(w) = w.as_str() {
            text.push_str(&format!("Warning: {w}\n"));
        }
    }
    text
}

/// The form: approve yes/no, an optional note.
pub(super) fn form() -> ElicitationSchema {
    serde_json::from_value(json!({
        "type": "object",
        "properties": {
            "approve": {"type": "boolean", "title": "Approve", "description": "Run this call as planned.", "default": false},
            "note": {"type": "string", "title": "Note", "description": "Why (kept in the journal)."}
        },
        "required": ["approve"]
    }))
    .expect("a valid elicitation schema")
}

/// Asks the person and reads the answer.
pub(super) async fn ask(peer: &Peer<RoleServer>, message: String, wait: Duration) -> Answer {
    let params = ElicitRequestParams::FormElicitationParams {
        meta: None,
        message,
        requested_schema: form(),
    };
    let result = match peer
        .create_elicitation_with_timeout(params, Some(wait))
        .await
    {
        Ok(r) => r,
        Err(e) => {
            tracing::info!("the client gave no approval answer: {e}");
            return Answer::None;
        }
    };
    answer_of(&result.action, result.content.as_ref())
}

/// The answer an elicitation result carries.
fn answer_of(action: &ElicitationAction, content: Option<&Value>) -> Answer {
    let note = content
        .and_then(|c| c["note"].as_str())
        .map(|n| n.chars().take(500).collect::<String>())
        .filter(|n| !n.trim().is_empty());
    match action {
        ElicitationAction::Accept => match content.map(|c| &c["approve"]) {
            Some(Value::Bool(true)) => Answer::Approve(note),
            _ => Answer::Decline(note),
        },
        ElicitationAction::Decline => Answer::Decline(note),
        // Cancel, and any action a later revision adds: nothing decided.
        _ => Answer::None,
    }
}

/// The key of the approval question in an `input_required` result's
/// `inputRequests`, and of its answer in the retry's `inputResponses`.
pub(super) const INPUT_KEY: &str = "approval";

/// Whether a 2026-07-28 request's client declared it can answer a form
/// (`_meta["io.modelcontextprotocol/clientCapabilities"].elicitation`).
pub(super) fn can_ask_stateless(meta: &RequestMetaObject) -> bool {
    meta.client_capabilities()
        .and_then(|c| c.elicitation)
        .is_some_and(|e| e.form.is_some() || e.url.is_none())
}

/// The question as one entry of an `input_required` result.
pub(super) fn input_request(message: String) -> InputRequests {
    let params = ElicitRequestParams::FormElicitationParams {
        meta: None,
        message,
        requested_schema: form(),
    };
    InputRequests::from([(
        INPUT_KEY.to_string(),
        InputRequest::Elicitation(ElicitRequest::new(params)),
    )])
}

/// The person's answer in a retry's `inputResponses`: an elicitation
/// result under [`INPUT_KEY`]. A missing or unreadable one decides nothing.
pub(super) fn answer_in(responses: Option<&InputResponses>) -> Answer {
    #[derive(serde::Deserialize)]
    struct Response {
        action: ElicitationAction,
        #[serde(default)]
        content: Option<Value>,
    }
    let Some(value) = responses.and_then(|r| r.get(INPUT_KEY)) else {
        return Answer::None;
    };
    match Response::deserialize(value) {
        Ok(r) => answer_of(&r.action, r.content.as_ref()),
        Err(_) => Answer::None,
    }
}
