//! `tools/call` over HTTP answered without rmcp's per-request service:
//! stateless requests, and requests of a 2025-11-25 session.
//!
//! rmcp serves a stateless request (2026-07-28, no session) by parsing it
//! into its message types, serialising it again to check the SEP-2243
//! headers against it, starting a one-shot service with its own task and
//! channel, and spawning a task for the handler; a session's request goes
//! through the session's worker task, a task for the handler and an SSE
//! stream for the answer. For a small call either path cost more than the
//! call itself. A plain `tools/call` — one every check of rmcp's passes at
//! a glance, whose answer is one JSON message — is answered here instead,
//! in the connection's task, by the handler's own call path
//! ([`McpServer::call`]) and written as the JSON-RPC text rmcp writes, as
//! one `application/json` body (the form the specification allows for any
//! POST whose client accepts it).
//!
//! [`read`] takes a stateless request only when all of these hold, and
//! leaves anything else to rmcp unchanged (so every refusal is rmcp's
//! own):
//!
//! - no `Mcp-Session-Id`, no `Origin`, a `Host` that is a loopback name
//!   (`127.0.0.1`, `localhost`, `[::1]`, any port) and an origin-form
//!   request target;
//! - `Accept` lists `application/json` and `text/event-stream` without
//!   parameters, `Content-Type` is `application/json`;
//! - `MCP-Protocol-Version` is `2026-07-28`, `Mcp-Method` is `tools/call`,
//!   `Mcp-Name` is the tool's name as it is (no encoded form), each sent
//!   once, and there is no `Mcp-Param-*` header for a tool whose schema
//!   declares none;
//! - the body is `{"jsonrpc": "2.0", "id", "method": "tools/call",
//!   "params": {"name", "arguments"?, "_meta"}}` with nothing else, a
//!   number or string id, and a `_meta` that names protocol version
//!   2026-07-28 with the client capabilities and asks for no progress and
//!   no log level (both would make the answer a stream).
//!
//! [`read_in_session`] takes a session's request when:
//!
//! - the session is open, finished its handshake, belongs to the token
//!   that sends the request, and its client cannot be asked questions
//!   (elicitation, which needs the request's own stream) and did not ask
//!   for log messages;
//! - `Mcp-Session-Id` is sent once; `Origin`, `Host`, the request target,
//!   `Accept` and `Content-Type` are as above; `MCP-Protocol-Version`, if
//!   sent, is sent once and names 2025-11-25, 2025-06-18 or 2025-03-26;
//!   there is no `Mcp-Method`, `Mcp-Name` or `Mcp-Param-*` header;
//! - the body is as above with `_meta` optional, naming no protocol
//!   version and asking for no progress and no log level.
//!
//! Such a call runs with the session's handler and peer exactly as rmcp
//! would run it: the session's lazily revealed tools, its list-changed
//! notifications and its circuit breaker are the same; it counts as the
//! session's activity; `notifications/cancelled` for its id stops it
//! (`McpServer::direct_call`), and so does the client going away.

use bytes::Bytes;
use http::{header, HeaderMap, Response, StatusCode};
use http_body_util::{combinators::BoxBody, BodyExt, Full};
use rmcp::model::{
    CallToolResponse, ClientCapabilities, ErrorData, JsonObject, JsonRpcMessage, ProtocolVersion,
    RequestId, RequestMetaObject, ServerJsonRpcMessage, ServerResult,
};
use rmcp::transport::common::http_header::{
    EVENT_STREAM_MIME_TYPE, HEADER_MCP_METHOD, HEADER_MCP_NAME, HEADER_MCP_PARAM_PREFIX,
    HEADER_MCP_PROTOCOL_VERSION, HEADER_SESSION_ID, JSON_MIME_TYPE,
};
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use rmcp::service::Peer;
use rmcp::RoleServer;

use super::server::{CallRequest, McpServer};
#[cfg(doc)]
use super::Generation;

/// A `tools/call` this module answers.
pub(super) struct DirectCall {
    id: RequestId,
    name: String,
    arguments: Option<JsonObject>,
    meta: RequestMetaObject,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Message<'a> {
    jsonrpc: &'a str,
    id: RequestId,
    method: &'a str,
    params: Params,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Params {
    name: String,
    #[serde(default)]
    arguments: Option<JsonObject>,
    #[serde(rename = "_meta", default)]
    meta: Option<RequestMetaObject>,
}

/// The one value of header `name`, when it is sent exactly once as text.
fn single<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    let mut values = headers.get_all(name).iter();
    let value = values.next()?;
    if values.next().is_some() {
        return None;
    }
    value.to_str().ok()
}

/// `Host` names this machine's loopback interface, with any port.
fn loopback_host(host: &str) -> bool {
    let name = match host.rsplit_once(':') {
        Some((name, port)) if !name.ends_with(':') && port.bytes().all(|b| b.is_ascii_digit()) => {
            name
        }
        _ => host,
    };
    matches!(name, "127.0.0.1" | "localhost" | "[::1]")
}

/// `Accept` lists both media types a stateless POST must accept, each
/// without parameters.
fn accepts_both(headers: &HeaderMap) -> bool {
    let (mut json, mut sse) = (false, false);
    for value in headers.get_all(header::ACCEPT) {
        let Ok(value) = value.to_str() else {
            return false;
        };
        for range in value.split(',').map(str::trim) {
            if range.contains(';') || range.contains('"') {
                return false;
            }
            json |= range.eq_ignore_ascii_case(JSON_MIME_TYPE);
            sse |= range.eq_ignore_ascii_case(EVENT_STREAM_MIME_TYPE);
        }
    }
    json && sse
}

/// Whether a header named `Mcp-Param-*` is present.
fn has_header_params(h: &HeaderMap) -> bool {
    let param_prefix = HEADER_MCP_PARAM_PREFIX.len();
    h.keys().any(|k| {
        k.as_str()
            .get(..param_prefix)
            .is_some_and(|p| p.eq_ignore_ascii_case(HEADER_MCP_PARAM_PREFIX))
    })
}

/// The headers both routes need: origin-form target, no `Origin`, a
/// loopback `Host`, both media types accepted, a JSON body.
fn plain_transport(parts: &http::request::Parts) -> bool {
    let h = &parts.headers;
    parts.uri.authority().is_none()
        && !h.contains_key(header::ORIGIN)
        && single(h, header::HOST.as_str()).is_some_and(loopback_host)
        && accepts_both(h)
        && single(h, header::CONTENT_TYPE.as_str())
            .is_some_and(|v| v.trim().eq_ignore_ascii_case(JSON_MIME_TYPE))
}

/// Whether the headers are ones rmcp accepts as they are (see the module
/// docs), for a stateless call of `name`.
fn plain_headers(parts: &http::request::Parts, name: &str) -> bool {
    let h = &parts.headers;
    plain_transport(parts)
        && !h.contains_key(HEADER_SESSION_ID)
        && single(h, HEADER_MCP_PROTOCOL_VERSION) == Some(ProtocolVersion::V_2026_07_28.as_str())
        && single(h, HEADER_MCP_METHOD) == Some("tools/call")
        && single(h, HEADER_MCP_NAME) == Some(name)
        && !name.starts_with("=?")
        && !has_header_params(h)
}

/// The protocol versions of sessions (the `initialize` handshake).
const SESSION_VERSIONS: [&str; 3] = ["2025-11-25", "2025-06-18", "2025-03-26"];

/// The session a request names, when its headers are ones rmcp accepts
/// as they are for a session's `tools/call` (see the module docs).
pub(super) fn plain_session_headers(parts: &http::request::Parts) -> Option<&str> {
    let h = &parts.headers;
    let version_ok = !h.contains_key(HEADER_MCP_PROTOCOL_VERSION)
        || single(h, HEADER_MCP_PROTOCOL_VERSION).is_some_and(|v| SESSION_VERSIONS.contains(&v));
    let plain = plain_transport(parts)
        && version_ok
        && !h.contains_key(HEADER_MCP_METHOD)
        && !h.contains_key(HEADER_MCP_NAME)
        && !has_header_params(h);
    if !plain {
        return None;
    }
    single(h, HEADER_SESSION_ID)
}

/// The `tools/call` in `body`, when it is plain JSON-RPC of that shape.
fn message(body: &[u8]) -> Option<(RequestId, Params)> {
    let message: Message<'_> = serde_json::from_slice(body).ok()?;
    if message.jsonrpc != "2.0" || message.method != "tools/call" {
        return None;
    }
    Some((message.id, message.params))
}

/// Whether `meta` asks for nothing that makes the answer a stream.
fn quiet_meta(meta: &RequestMetaObject) -> bool {
    !meta.contains_key("progressToken") && !meta.contains_key("io.modelcontextprotocol/logLevel")
}

/// The call in `body`, when this module answers it (see the module docs);
/// `header_params` tells whether a tool's calls carry `Mcp-Param-*`
/// headers ([`Generation::header_params`]).
pub(super) fn read(
    parts: &http::request::Parts,
    body: &[u8],
    header_params: impl Fn(&str) -> bool,
) -> Option<DirectCall> {
    let (id, params) = message(body)?;
    let Params {
        name,
        arguments,
        meta,
    } = params;
    let meta = meta?;
    let version = ProtocolVersion::V_2026_07_28;
    let plain_meta = meta.protocol_version().as_ref() == Some(&version)
        && meta.missing_required_keys(&version).is_empty()
        && quiet_meta(&meta);
    if !plain_meta || !plain_headers(parts, &name) || header_params(&name) {
        return None;
    }
    Some(DirectCall {
        id,
        name,
        arguments,
        meta,
    })
}

/// The call in a session's `body`, when this module answers it (the
/// headers were checked by [`plain_session_headers`], the session by the
/// caller; see the module docs).
pub(super) fn read_in_session(body: &[u8]) -> Option<DirectCall> {
    let (id, params) = message(body)?;
    let meta = params.meta.unwrap_or_default();
    if meta.protocol_version().is_some() || !quiet_meta(&meta) {
        return None;
    }
    Some(DirectCall {
        id,
        name: params.name,
        arguments: params.arguments,
        meta,
    })
}

/// What a session's call runs with: the session's handler and the peer
/// its notifications go to.
#[derive(Clone)]
pub(super) struct SessionRoute {
    pub server: McpServer,
    pub peer: Peer<RoleServer>,
}

impl SessionRoute {
    /// Whether a call of this session may be answered here: the session
    /// negotiated a version before 2026-07-28, its transport is open, its
    /// client cannot be asked questions, and it asked for no log messages.
    pub(super) fn plain(&self) -> bool {
        let legacy = self.peer.peer_info().is_some_and(|info| {
            info.protocol_version.as_str() < ProtocolVersion::V_2026_07_28.as_str()
        });
        legacy
            && !self.peer.is_transport_closed()
            && !super::elicit::can_ask(&self.peer)
            && !self.server.logs_wanted()
    }
}

/// Runs `call` with `server` and answers it as rmcp would: the JSON-RPC
/// result or error, `200 OK`, `application/json`. A client that goes away
/// stops the call: hyper drops this future with the connection, and the
/// call path stops a call whose waiting future is dropped. (Nothing else
/// cancels it: a stateless request has no session to send
/// `notifications/cancelled` on.)
pub(super) async fn answer(
    server: &McpServer,
    call: DirectCall,
    parts: &http::request::Parts,
) -> Response<BoxBody<Bytes, std::convert::Infallible>> {
    let ct = CancellationToken::new();
    let req = CallRequest {
        id: &call.id,
        meta: &call.meta,
        parts: Some(parts),
        ct: &ct,
        peer: None,
        stateless: true,
        request_state: None,
        input_responses: None,
    };
    respond(server, &req, call.name, call.arguments).await
}

/// Runs a session's `call` with the session's handler and peer, as rmcp's
/// service would, and answers it as [`answer`] does. `None` when the
/// session already runs a call with this id: rmcp answers that one.
pub(super) async fn answer_in_session(
    route: &SessionRoute,
    call: DirectCall,
    parts: &http::request::Parts,
) -> Option<Response<BoxBody<Bytes, std::convert::Infallible>>> {
    let running = route.server.direct_call(&call.id)?;
    let req = CallRequest {
        id: &call.id,
        meta: &call.meta,
        parts: Some(parts),
        ct: running.ct(),
        peer: Some(&route.peer),
        stateless: false,
        request_state: None,
        input_responses: None,
    };
    Some(respond(&route.server, &req, call.name, call.arguments).await)
}

/// The result as rmcp's handler shapes it for a peer that negotiated a
/// version before 2026-07-28 (every session): no `resultType`, object
/// output only, and no result kind that version lacks.
fn for_legacy_peer(response: CallToolResponse) -> Result<ServerResult, ErrorData> {
    match response {
        CallToolResponse::InputRequired(_) => Err(ErrorData::invalid_request(
            "InputRequiredResult requires negotiated protocol version 2026-07-28 or newer",
            None,
        )),
        CallToolResponse::Task(_) => Err(ErrorData::missing_required_client_capability(
            ClientCapabilities::builder().enable_tasks().build(),
        )),
        complete => {
            let mut result = ServerResult::from(complete);
            result.strip_result_type_for_legacy_peer();
            result.strip_non_object_output_for_legacy_peer();
            Ok(result)
        }
    }
}

async fn respond(
    server: &McpServer,
    req: &CallRequest<'_>,
    name: String,
    arguments: Option<JsonObject>,
) -> Response<BoxBody<Bytes, std::convert::Infallible>> {
    let id = req.id.clone();
    let answered = server.call(req, &name, arguments).await;
    let result = if req.stateless {
        answered.map(ServerResult::from)
    } else {
        answered.and_then(for_legacy_peer)
    };
    let message: ServerJsonRpcMessage = match result {
        Ok(result) => JsonRpcMessage::response(result, id),
        Err(error) => JsonRpcMessage::error(error, Some(id)),
    };
    let (status, body) = match serde_json::to_vec(&message) {
        Ok(body) => (StatusCode::OK, body),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("cannot serialise the answer: {e}").into_bytes(),
        ),
    };
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(body)).boxed())
        .expect("a valid response")
}

/// For `Generation`: whether a tool's input schema declares an
/// `x-mcp-header` anywhere (its calls carry `Mcp-Param-*` headers that rmcp
/// checks against the arguments).
pub(super) fn declares_header_params(schema: &serde_json::Value) -> bool {
    match schema {
        serde_json::Value::Object(map) => {
            map.contains_key("x-mcp-header") || map.values().any(declares_header_params)
        }
        serde_json::Value::Array(items) => items.iter().any(declares_header_params),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts_with_any_port() {
        for ok in [
            "127.0.0.1",
            "127.0.0.1:8080",
            "localhost:1",
            "[::1]",
            "[::1]:9",
        ] {
            assert!(loopback_host(ok), "{ok}");
        }
        for no in [
            "example.com",
            "127.0.0.2",
            "localhost.evil",
            "[::2]:80",
            "::1",
            "",
        ] {
            assert!(!loopback_host(no), "{no}");
        }
    }

    #[test]
    fn accept_needs_both_types_without_parameters() {
        let with = |v: &str| {
            let mut h = HeaderMap::new();
            h.insert(header::ACCEPT, v.parse().unwrap());
            accepts_both(&h)
        };
        assert!(with("application/json, text/event-stream"));
        assert!(with("text/event-stream,application/json"));
        assert!(!with("application/json"));
        assert!(!with("application/json;q=0, text/event-stream"));
        assert!(!with("*/*"));
    }

    const BODY: &str = r#"{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "file_view", "arguments": {"path": "a.txt"},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {},
                  "dev.toolhost/idempotency_key": "k"}}}"#;

    const HEADERS: [(&str, &str); 6] = [
        ("host", "127.0.0.1:8080"),
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", "file_view"),
    ];

    /// A POST to `/mcp` with the headers `plain` and `change` applied: a
    /// value replaced, `None` to drop it, or a header added.
    fn request(plain: &[(&str, &str)], change: &[(&str, Option<&str>)]) -> http::request::Parts {
        let mut request = http::Request::builder().method("POST").uri("/mcp");
        for &(name, value) in plain {
            if !change.iter().any(|(n, _)| *n == name) {
                request = request.header(name, value);
            }
        }
        for (name, value) in change {
            if let Some(value) = value {
                request = request.header(*name, *value);
            }
        }
        request.body(()).unwrap().into_parts().0
    }

    /// Whether `read` takes the request with the plain `HEADERS` with
    /// `change` applied (see `request`) and `body`.
    fn takes(change: &[(&str, Option<&str>)], body: &str) -> bool {
        let parts = request(&HEADERS, change);
        read(&parts, body.as_bytes(), |name| name == "annotated").is_some()
    }

    #[test]
    fn a_plain_stateless_call_is_taken() {
        assert!(takes(&[], BODY));
        assert!(takes(&[("host", Some("localhost"))], BODY));
        let string_id = BODY.replace(r#""id": 3"#, r#""id": "a""#);
        assert!(takes(&[], &string_id));
    }

    #[test]
    fn anything_rmcp_would_have_to_look_at_is_left_to_it() {
        let headers: &[&[(&str, Option<&str>)]] = &[
            &[("mcp-session-id", Some("s"))],
            &[("origin", Some("http://localhost:1"))],
            &[("host", Some("example.com"))],
            &[("host", None)],
            &[("accept", Some("application/json"))],
            &[("accept", Some("application/json;q=1, text/event-stream"))],
            &[("content-type", Some("text/plain"))],
            &[("content-type", Some("application/json; charset=utf-8"))],
            &[("mcp-protocol-version", Some("2025-11-25"))],
            &[("mcp-protocol-version", None)],
            &[("mcp-method", Some("tools/list"))],
            &[("mcp-method", None)],
            &[("mcp-name", Some("file_edit"))],
            &[("mcp-name", Some("=?base64?ZmlsZV92aWV3?="))],
            &[("mcp-name", None)],
            &[("mcp-param-path", Some("a.txt"))],
        ];
        for change in headers {
            assert!(!takes(change, BODY), "{change:?}");
        }
        let mut twice = http::Request::builder().method("POST").uri("/mcp");
        for (name, value) in HEADERS {
            twice = twice.header(name, value);
        }
        let (parts, ()) = twice
            .header("mcp-name", "file_view")
            .body(())
            .unwrap()
            .into_parts();
        assert!(read(&parts, BODY.as_bytes(), |_| false).is_none());

        let bodies = [
            BODY.replace(r#""jsonrpc": "2.0""#, r#""jsonrpc": "1.0""#),
            BODY.replace(r#""id": 3"#, r#""id": null"#),
            BODY.replace(r#""method": "tools/call""#, r#""method": "tools/list""#),
            BODY.replace(r#""dev.toolhost/idempotency_key""#, r#""progressToken""#),
            BODY.replace(
                r#""dev.toolhost/idempotency_key": "k""#,
                r#""io.modelcontextprotocol/logLevel": "debug""#,
            ),
            BODY.replace(r#""2026-07-28""#, r#""2025-11-25""#),
            BODY.replace(r#""io.modelcontextprotocol/clientCapabilities": {},"#, ""),
            BODY.replace(r#""arguments""#, r#""task": {}, "arguments""#),
            BODY.replace(r#""id": 3"#, r#""id": 3, "extra": 1"#),
            BODY.replace(
                r#""name": "file_view""#,
                r#""name": "file_view", "name": "x""#,
            ),
            "not json".to_string(),
        ];
        for body in &bodies {
            assert!(!takes(&[], body), "{body}");
        }
        let annotated = BODY.replace(r#""file_view""#, r#""annotated""#);
        assert!(!takes(&[("mcp-name", Some("annotated"))], &annotated));
    }

    const SESSION_BODY: &str = r#"{"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {
        "name": "file_view", "arguments": {"path": "a.txt"}}}"#;

    const SESSION_HEADERS: [(&str, &str); 5] = [
        ("host", "localhost:8080"),
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("mcp-protocol-version", "2025-11-25"),
        ("mcp-session-id", "s1"),
    ];

    /// The session `plain_session_headers` finds in the plain session
    /// headers with `change` applied (see `request`).
    fn session_of(change: &[(&str, Option<&str>)]) -> Option<String> {
        let parts = request(&SESSION_HEADERS, change);
        plain_session_headers(&parts).map(str::to_string)
    }

    #[test]
    fn a_plain_session_call_is_taken() {
        assert_eq!(session_of(&[]).as_deref(), Some("s1"));
        for version in ["2025-06-18", "2025-03-26"] {
            let found = session_of(&[("mcp-protocol-version", Some(version))]);
            assert_eq!(found.as_deref(), Some("s1"));
        }
        assert!(session_of(&[("mcp-protocol-version", None)]).is_some());
        let call = read_in_session(SESSION_BODY.as_bytes()).unwrap();
        assert_eq!(call.name, "file_view");
        let with_meta = SESSION_BODY.replace(
            r#""arguments""#,
            r#""_meta": {"dev.toolhost/call_id": "c"}, "arguments""#,
        );
        assert!(read_in_session(with_meta.as_bytes()).is_some());
    }

    #[test]
    fn a_session_request_rmcp_must_look_at_is_left_to_it() {
        let headers: &[&[(&str, Option<&str>)]] = &[
            &[("mcp-session-id", None)],
            &[("origin", Some("http://localhost:1"))],
            &[("host", Some("example.com"))],
            &[("accept", Some("application/json"))],
            &[("content-type", Some("text/plain"))],
            &[("mcp-protocol-version", Some("2026-07-28"))],
            &[("mcp-protocol-version", Some("1999-01-01"))],
            &[("mcp-method", Some("tools/call"))],
            &[("mcp-name", Some("file_view"))],
            &[("mcp-param-path", Some("a.txt"))],
        ];
        for change in headers {
            assert_eq!(session_of(change), None, "{change:?}");
        }
        let bodies = [
            SESSION_BODY.replace(r#""method": "tools/call""#, r#""method": "tools/list""#),
            SESSION_BODY.replace(r#""arguments""#, r#""_meta": {"progressToken": 1}, "arguments""#),
            SESSION_BODY.replace(
                r#""arguments""#,
                r#""_meta": {"io.modelcontextprotocol/protocolVersion": "2025-11-25"}, "arguments""#,
            ),
            SESSION_BODY.replace(r#""arguments""#, r#""task": {}, "arguments""#),
            SESSION_BODY.replace(r#""id": 4"#, r#""id": null"#),
        ];
        for body in &bodies {
            assert!(read_in_session(body.as_bytes()).is_none(), "{body}");
        }
    }

    #[test]
    fn header_params_are_found_at_any_depth() {
        let plain = serde_json::json!({"type": "object", "properties": {"a": {"type": "string"}}});
        let nested = serde_json::json!({"properties": {"a": {"anyOf": [{"x-mcp-header": "A"}]}}});
        assert!(!declares_header_params(&plain));
        assert!(declares_header_params(&nested));
    }
}
