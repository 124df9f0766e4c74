//! Stateless `tools/call` over HTTP, answered without rmcp's per-request
//! service.
//!
//! rmcp serves a stateless request (2026-07-28, no session) by parsing it
//! into its message types, serialising it again to check the SEP-2243
//! headers against it, starting a one-shot service with its own task and
//! channel, and spawning a task for the handler; for a 4 KiB `file_view`
//! that path cost more than the call itself. A plain stateless
//! `tools/call` — one every check of rmcp's passes at a glance, whose
//! answer is one JSON message — is answered here instead, in the
//! connection's task, by the handler's own call path
//! ([`McpServer::call`]) and written as the same JSON-RPC text rmcp writes.
//!
//! [`read`] takes a request only when all of these hold, and leaves
//! anything else to rmcp unchanged (so every refusal is rmcp's own):
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

use bytes::Bytes;
use http::{header, HeaderMap, Response, StatusCode};
use http_body_util::{combinators::BoxBody, BodyExt, Full};
use rmcp::model::{
    JsonObject, JsonRpcMessage, ProtocolVersion, RequestId, RequestMetaObject,
    ServerJsonRpcMessage, ServerResult,
};
use rmcp::transport::common::http_header::{
    EVENT_STREAM_MIME_TYPE, HEADER_MCP_METHOD, HEADER_MCP_NAME, HEADER_MCP_PARAM_PREFIX,
    HEADER_MCP_PROTOCOL_VERSION, HEADER_SESSION_ID, JSON_MIME_TYPE,
};
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

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
    #[serde(rename = "_meta")]
    meta: RequestMetaObject,
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

/// Whether the headers are ones rmcp accepts as they are (see the module
/// docs), for a call of `name`.
fn plain_headers(parts: &http::request::Parts, name: &str) -> bool {
    let h = &parts.headers;
    let param_prefix = HEADER_MCP_PARAM_PREFIX.len();
    parts.uri.authority().is_none()
        && !h.contains_key(HEADER_SESSION_ID)
        && !h.contains_key(header::ORIGIN)
        && single(h, header::HOST.as_str()).is_some_and(loopback_host)
        && accepts_both(h)
        && single(h, header::CONTENT_TYPE.as_str())
            .is_some_and(|v| v.trim().eq_ignore_ascii_case(JSON_MIME_TYPE))
        && single(h, HEADER_MCP_PROTOCOL_VERSION) == Some(ProtocolVersion::V_2026_07_28.as_str())
        && single(h, HEADER_MCP_METHOD) == Some("tools/call")
        && single(h, HEADER_MCP_NAME) == Some(name)
        && !name.starts_with("=?")
        && !h.keys().any(|k| {
            k.as_str()
                .get(..param_prefix)
                .is_some_and(|p| p.eq_ignore_ascii_case(HEADER_MCP_PARAM_PREFIX))
        })
}

/// The call in `body`, when this module answers it (see the module docs);
/// `header_params` tells whether a tool's calls carry `Mcp-Param-*`
/// headers ([`Generation::header_params`]).
pub(super) fn read(
    parts: &http::request::Parts,
    body: &[u8],
    header_params: impl Fn(&str) -> bool,
) -> Option<DirectCall> {
    let message: Message<'_> = serde_json::from_slice(body).ok()?;
    if message.jsonrpc != "2.0" || message.method != "tools/call" {
        return None;
    }
    let Params {
        name,
        arguments,
        meta,
    } = message.params;
    let version = ProtocolVersion::V_2026_07_28;
    let plain_meta = meta.protocol_version().as_ref() == Some(&version)
        && meta.missing_required_keys(&version).is_empty()
        && !meta.contains_key("progressToken")
        && !meta.contains_key("io.modelcontextprotocol/logLevel");
    if !plain_meta || !plain_headers(parts, &name) || header_params(&name) {
        return None;
    }
    Some(DirectCall {
        id: message.id,
        name,
        arguments,
        meta,
    })
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
    let message: ServerJsonRpcMessage = match server.call(&req, &call.name, call.arguments).await {
        Ok(result) => JsonRpcMessage::response(ServerResult::from(result), call.id),
        Err(error) => JsonRpcMessage::error(error, Some(call.id)),
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

    /// Whether `read` takes the request with `headers` (the plain ones
    /// with `change` applied: a value replaced, `None` to drop it, or a
    /// header added) and `body`.
    fn takes(change: &[(&str, Option<&str>)], body: &str) -> bool {
        let mut request = http::Request::builder().method("POST").uri("/mcp");
        for (name, value) in HEADERS {
            if !change.iter().any(|(n, _)| *n == name) {
                request = request.header(name, value);
            }
        }
        for (name, value) in change {
            if let Some(value) = value {
                request = request.header(*name, *value);
            }
        }
        let (parts, ()) = request.body(()).unwrap().into_parts();
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

    #[test]
    fn header_params_are_found_at_any_depth() {
        let plain = serde_json::json!({"type": "object", "properties": {"a": {"type": "string"}}});
        let nested = serde_json::json!({"properties": {"a": {"anyOf": [{"x-mcp-header": "A"}]}}});
        assert!(!declares_header_params(&plain));
        assert!(declares_header_params(&nested));
    }
}
