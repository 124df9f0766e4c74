//! Streamable HTTP on `/mcp`: hyper in front of rmcp's tower service.
//!
//! Before rmcp sees a request this layer routes by path (anything but
//! `/mcp` is 404), asks the [`SessionPolicy`] for the request's scope from
//! its bearer token (401 when refused), reads a POST body up to the limit
//! (413 beyond it, whether declared or streamed) and answers a body that is
//! not JSON with a JSON-RPC parse error (-32700, HTTP 400); a `tools/call`
//! whose arguments fail the strict parse travels on with their text (see
//! [`super::raw_args`]). rmcp then
//! checks `Host` (loopback names only) and `Origin` (absent, or
//! `http(s)://localhost|127.0.0.1|[::1]` with any port; otherwise 403).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::{header, Request, Response, StatusCode};
use http_body_util::{combinators::BoxBody, BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

use super::server::McpServer;
use super::{SessionPolicy, State};

type Body = BoxBody<Bytes, Infallible>;
type Service = StreamableHttpService<McpServer, LocalSessionManager>;

/// Origins a browser page may call from: the loopback names, any port.
pub const ALLOWED_ORIGINS: [&str; 6] = [
    "http://localhost:*",
    "https://localhost:*",
    "http://127.0.0.1:*",
    "https://127.0.0.1:*",
    "http://[::1]:*",
    "https://[::1]:*",
];

fn plain(status: StatusCode, message: &str) -> Response<Body> {
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "text/plain; charset=utf-8")
        .body(Full::new(Bytes::from(message.to_string())).boxed())
        .expect("a valid response")
}

async fn route(
    mut req: Request<Incoming>,
    service: Service,
    policy: Arc<dyn SessionPolicy>,
    max_message_bytes: usize,
) -> Result<Response<Body>, Infallible> {
    if req.uri().path() != "/mcp" {
        return Ok(plain(
            StatusCode::NOT_FOUND,
            "not found; the MCP endpoint is /mcp",
        ));
    }
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max_message_bytes as u64) {
        return Ok(plain(
            StatusCode::PAYLOAD_TOO_LARGE,
            &format!("the message is larger than {max_message_bytes} bytes"),
        ));
    }
    let bearer = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(str::trim);
    match policy.scope_for(bearer) {
        Ok(scope) => {
            req.extensions_mut().insert(scope);
        }
        Err(refused) => {
            let mut resp = plain(StatusCode::UNAUTHORIZED, &refused.0);
            resp.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                http::HeaderValue::from_static("Bearer"),
            );
            return Ok(resp);
        }
    }
    if req.method() != http::Method::POST {
        return Ok(service.handle(req).await);
    }
    // Buffer the body (bounded) so that a malformed message gets a JSON-RPC
    // parse error instead of a transport-level complaint.
    let (mut parts, body) = req.into_parts();
    let bytes = match http_body_util::Limited::new(body, max_message_bytes)
        .collect()
        .await
    {
        Ok(collected) => collected.to_bytes(),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => {
            return Ok(plain(
                StatusCode::PAYLOAD_TOO_LARGE,
                &format!("the message is larger than {max_message_bytes} bytes"),
            ))
        }
        Err(e) => {
            return Ok(plain(
                StatusCode::BAD_REQUEST,
                &format!("cannot read the body: {e}"),
            ))
        }
    };
    let is_json = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("application/json"));
    if is_json {
        let inspected = super::raw_args::inspect(&bytes);
        if let Ok(Some(raw)) = &inspected {
            parts.extensions.insert(raw.clone());
        }
        if let Err(e) = inspected {
            let error = serde_json::json!({
                "jsonrpc": "2.0",
                "id": null,
                "error": {"code": -32700, "message": format!("parse error: {e}")},
            });
            return Ok(Response::builder()
                .status(StatusCode::BAD_REQUEST)
                .header(header::CONTENT_TYPE, "application/json")
                .body(Full::new(Bytes::from(error.to_string())).boxed())
                .expect("a valid response"));
        }
    }
    Ok(service
        .handle(Request::from_parts(parts, Full::new(bytes)))
        .await)
}

/// Accepts connections on `addr` until the process stops.
pub(super) async fn serve(
    addr: SocketAddr,
    allow_remote: bool,
    max_message_bytes: usize,
    state: Arc<State>,
    policy: Arc<dyn SessionPolicy>,
) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {addr}: {e}"))?;
    let local = listener.local_addr()?;
    let mut config = StreamableHttpServerConfig::default()
        .with_allowed_origins(ALLOWED_ORIGINS)
        .with_max_request_body_bytes(max_message_bytes)
        .with_json_response(true);
    if allow_remote && !local.ip().is_loopback() {
        // Clients reach us by a name we cannot list; Origin is still checked.
        config = config.disable_allowed_hosts();
    }
    let server = McpServer::new(state, None);
    let service: Service = StreamableHttpService::new(
        move || Ok(server.fresh()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    log!("toolhost: serving MCP on http://{local}/mcp");
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                log!("toolhost: accept failed: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let service = service.clone();
        let policy = policy.clone();
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |req| {
                route(req, service.clone(), policy.clone(), max_message_bytes)
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}
