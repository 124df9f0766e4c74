//! Streamable HTTP on `/mcp`: hyper in front of rmcp's tower service.
//!
//! Before rmcp sees a request this layer routes by path (anything but
//! `/mcp` and `/metrics` is 404), checks `Host` (loopback names only,
//! unless `--allow-remote` serves a non-loopback address) and `Origin`
//! (absent, or `http(s)://localhost|127.0.0.1|[::1]` with any port;
//! otherwise 403), asks the [`SessionPolicy`] for the request's scope from
//! its bearer token (401 when refused), and checks that the token has not
//! expired and that no id of its chain is revoked (401; 503 when the store
//! cannot say, or does not within the request timeout: the store is read
//! on the blocking pool, [`super::offload`]). It then reads a POST body up to the limit (413 beyond it,
//! whether declared or streamed) and answers a body that is not JSON with
//! a JSON-RPC parse error (-32700, HTTP 400); a `tools/call` whose
//! arguments fail the strict parse travels on with their text (see
//! [`super::raw_args`]). rmcp checks `Host` and `Origin` again.
//!
//! `/metrics` shows the whole host's figures, every token's calls
//! together, so it is served only to a token with the `metrics` right, or
//! to clients without a token on a server that listens on loopback and
//! gives such clients the command-line grants (no `--require-token`);
//! anyone else gets 403.
//!
//! Bounded in time and memory: a client must send a request's headers
//! within the request timeout (`--request-timeout-ms`, also the longest an
//! idle kept-alive connection waits for its next request) and its body
//! within the same time again, or the connection is closed (408 for a
//! stalled body); sessions are capped and expire when idle (`sessions`).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::{header, Request, Response, StatusCode};
use http_body_util::{combinators::BoxBody, BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use hyper_util::rt::TokioTimer;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

use super::direct::SessionRoute;
use super::offload;
use super::server::{McpServer, OnReady};
use super::sessions::{Owner, Refusal, SessionLimits, Sessions, OWNER};
use super::{SessionPolicy, SessionScope, State};
use toolhost::NotLive;
use toolhost::Right;

type Body = BoxBody<Bytes, Infallible>;
type Service = StreamableHttpService<McpServer, Sessions>;

/// What the HTTP layer needs besides the service.
struct Front {
    policy: Arc<dyn SessionPolicy>,
    /// Makes the handler of a call answered without rmcp (`direct`).
    server: McpServer,
    sessions: Arc<Sessions>,
    limits: HttpLimits,
    /// For `/metrics`.
    state: Arc<State>,
    /// `Host` must name a loopback interface (off only for
    /// `--allow-remote` on a non-loopback address).
    check_host: bool,
    /// Clients without a token may read `/metrics` (the server listens on
    /// loopback only).
    anonymous_metrics: bool,
    /// The operator's console at `/console` (`--console`).
    console: Option<Arc<toolhost_console::Console>>,
}

/// Limits of the HTTP transport.
#[derive(Debug, Clone, Copy)]
pub struct HttpLimits {
    /// Largest message body.
    pub max_message_bytes: usize,
    /// Time to send a request's headers, and again its body.
    pub request_timeout: std::time::Duration,
    /// Sessions.
    pub sessions: SessionLimits,
}

/// Origins a browser page may call from: the loopback names, any port.
pub const ALLOWED_ORIGINS: [&str; 6] = [
    "http://localhost:*",
    "https://localhost:*",
    "http://127.0.0.1:*",
    "https://127.0.0.1:*",
    "http://[::1]:*",
    "https://[::1]:*",
];

/// `/metrics`: the server's metrics in the Prometheus text format (read
/// off the runtime: the records gauge reads the store; 503 when it does
/// not answer within `within`).
async fn metrics(state: &Arc<State>, within: std::time::Duration) -> Response<Body> {
    let Some(m) = state.recorder.metrics.clone() else {
        return plain(StatusCode::NOT_FOUND, "this server keeps no metrics");
    };
    let records = state.records.clone();
    let text = offload::blocking(within, move || {
        let counts = records.as_ref().map(|r| r.counts_by_state());
        m.render(counts.as_deref())
    })
    .await;
    let text = match text {
        Ok(text) => text,
        Err(e) => return plain(StatusCode::SERVICE_UNAVAILABLE, &e.to_string()),
    };
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, toolhost::Metrics::CONTENT_TYPE)
        .body(Full::new(Bytes::from(text)).boxed())
        .expect("a valid response")
}

fn plain(status: StatusCode, message: &str) -> Response<Body> {
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "text/plain; charset=utf-8")
        .body(Full::new(Bytes::from(message.to_string())).boxed())
        .expect("a valid response")
}

/// Who owns the sessions a request opens: its token (see [`Owner`]), or
/// one owner for every client without a token.
fn owner_of(scope: &SessionScope) -> Owner {
    if scope.anonymous {
        Owner::anonymous()
    } else {
        Owner::of_chain(scope.session.chain_ids())
    }
}

/// Whether `host` (the name of a `Host` header or an origin; any case,
/// brackets around an IPv6 address allowed) names the loopback interface.
fn loopback_name(host: &str) -> bool {
    let host = host.trim_matches(['[', ']']).to_ascii_lowercase();
    // An address literal names no DNS entry to rebind: any of 127.0.0.0/8
    // or ::1 is this machine.
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Whether `value` is an `Origin` a page may call from: a loopback name
/// over http or https, any port.
fn allowed_origin(value: &str) -> bool {
    let Ok(uri) = value.trim().parse::<http::Uri>() else {
        return false;
    };
    let scheme_ok = matches!(uri.scheme_str(), Some("http" | "https"));
    let plain = uri.path_and_query().is_none_or(|p| p.as_str() == "/");
    scheme_ok && plain && uri.authority().is_some_and(|a| loopback_name(a.host()))
}

/// The DNS-rebinding checks (see the module docs), for every path: `None`
/// when the request passes, else its 403 (400 for a malformed `Host`).
fn refused_headers<B>(req: &Request<B>, check_host: bool) -> Option<Response<Body>> {
    refused_host(req, check_host).or_else(|| refused_origin(req))
}

/// The `Host` check of [`refused_headers`].
fn refused_host<B>(req: &Request<B>, check_host: bool) -> Option<Response<Body>> {
    let headers = req.headers();
    if check_host {
        let host = match headers.get(header::HOST) {
            Some(v) => v.to_str().ok().map(str::to_string),
            None => req.uri().authority().map(|a| a.to_string()),
        };
        let Some(authority) = host.and_then(|h| h.parse::<http::uri::Authority>().ok()) else {
            return Some(plain(
                StatusCode::BAD_REQUEST,
                "missing or invalid Host header",
            ));
        };
        if !loopback_name(authority.host()) {
            log!("toolhost: refused a request for Host {authority} (possible DNS rebinding)");
            return Some(plain(
                StatusCode::FORBIDDEN,
                "Forbidden: Host header is not allowed",
            ));
        }
    }
    None
}

/// The `Origin` check of [`refused_headers`].
fn refused_origin<B>(req: &Request<B>) -> Option<Response<Body>> {
    let headers = req.headers();
    let mut origins = headers.get_all(header::ORIGIN).iter();
    if let Some(origin) = origins.next() {
        let ok = origins.next().is_none() && origin.to_str().is_ok_and(allowed_origin);
        if !ok {
            return Some(plain(
                StatusCode::FORBIDDEN,
                "Forbidden: Origin header is not allowed",
            ));
        }
    }
    None
}

/// 401 with the bearer challenge.
fn unauthorized(message: &str) -> Response<Body> {
    let mut resp = plain(StatusCode::UNAUTHORIZED, message);
    resp.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        http::HeaderValue::from_static("Bearer"),
    );
    resp
}

/// Whether `scope` may read `/metrics`.
fn may_read_metrics(scope: &SessionScope, anonymous_metrics: bool) -> bool {
    if scope.anonymous {
        anonymous_metrics
    } else {
        scope.session.grant().rights().contains(Right::Metrics)
    }
}

/// The answer to an `initialize` that would open one session too many.
fn refused(refusal: &Refusal, id: serde_json::Value, idle: std::time::Duration) -> Response<Body> {
    let status = match refusal {
        Refusal::Token(_) | Refusal::Delegated(_) => StatusCode::TOO_MANY_REQUESTS,
        Refusal::Server(_) => StatusCode::SERVICE_UNAVAILABLE,
    };
    let error = serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {"code": -32000, "message": refusal.to_string()},
    });
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::RETRY_AFTER, idle.as_secs().max(1).to_string())
        .body(Full::new(Bytes::from(error.to_string())).boxed())
        .expect("a valid response")
}

/// The id of `body` when it is an `initialize` request.
fn initialize_id(body: &[u8]) -> Option<serde_json::Value> {
    #[derive(serde::Deserialize)]
    struct Peek<'a> {
        #[serde(borrow)]
        method: Option<&'a str>,
        id: Option<serde_json::Value>,
    }
    let peek: Peek<'_> = serde_json::from_slice(body).ok()?;
    (peek.method == Some("initialize")).then(|| peek.id.unwrap_or(serde_json::Value::Null))
}

async fn route(
    mut req: Request<Incoming>,
    service: Service,
    front: Arc<Front>,
) -> Result<Response<Body>, Infallible> {
    let max_message_bytes = front.limits.max_message_bytes;
    let path = req.uri().path();
    if path == toolhost_console::PREFIX || path.starts_with("/console/") {
        return Ok(console(req, &front).await);
    }
    if !matches!(path, "/mcp" | "/metrics" | "/healthz" | "/readyz") {
        return Ok(plain(
            StatusCode::NOT_FOUND,
            "not found; the MCP endpoint is /mcp (metrics: /metrics, health: /healthz, /readyz)",
        ));
    }
    if let Some(resp) = refused_headers(&req, front.check_host) {
        return Ok(resp);
    }
    match path {
        // The process is up and answering.
        "/healthz" => return Ok(plain(StatusCode::OK, "ok")),
        "/readyz" => return Ok(readiness(&front.state).await),
        _ => {}
    }
    if front.state.shutdown.requested() {
        let mut resp = plain(
            StatusCode::SERVICE_UNAVAILABLE,
            "the server is shutting down; send the request to another server",
        );
        resp.headers_mut()
            .insert(header::CONNECTION, http::HeaderValue::from_static("close"));
        return Ok(resp);
    }
    // Let in: from here the request counts as running, and the call it
    // carries runs even if the stop comes while it is read or checked.
    // (Only a POST carries a call; a GET's stream would hold the drain.)
    if req.method() == http::Method::POST {
        let admitted = front.state.shutdown.admit();
        req.extensions_mut().insert(admitted);
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
    let scope = match front.policy.scope_for(bearer) {
        Ok(scope) => scope,
        Err(refused) => return Ok(unauthorized(&refused.0)),
    };
    if !scope.anonymous && scope.session.grant().rights().contains(Right::Console) {
        return Ok(unauthorized(
            "a console token opens the console (/console) and nothing else",
        ));
    }
    // A verified token is cached; whether it is still good is asked on
    // every request (the revocation list is re-read at most once a second).
    // The store is read off the async workers, within the request timeout.
    if !scope.anonymous {
        let (session, generation) = (scope.session.clone(), front.state.current());
        let live = offload::blocking(front.limits.request_timeout, move || {
            session.liveness(generation.host.budgets())
        })
        .await;
        match live {
            Ok(Ok(())) => {}
            Ok(Err(NotLive::Dead(info))) => return Ok(unauthorized(&info.message)),
            Ok(Err(NotLive::Unknown(info))) => {
                return Ok(plain(StatusCode::SERVICE_UNAVAILABLE, &info.message))
            }
            Err(e) => return Ok(plain(StatusCode::SERVICE_UNAVAILABLE, &e.to_string())),
        }
    }
    if req.uri().path() == "/metrics" {
        if !may_read_metrics(&scope, front.anonymous_metrics) {
            return Ok(plain(
                StatusCode::FORBIDDEN,
                "/metrics needs a token with the `metrics` right (toolhost cap mint --right metrics)",
            ));
        }
        return Ok(metrics(&front.state, front.limits.request_timeout).await);
    }
    let owner = owner_of(&scope);
    req.extensions_mut().insert(scope);
    if req.method() == http::Method::DELETE {
        // A session ended: say so with 204, which the SDKs read as success
        // (rmcp answers 202, which the Python SDK logs as a failure).
        let mut resp = service.handle(req).await;
        if resp.status() == StatusCode::ACCEPTED {
            *resp.status_mut() = StatusCode::NO_CONTENT;
        }
        return Ok(resp);
    }
    if req.method() != http::Method::POST {
        return Ok(service.handle(req).await);
    }
    // Buffer the body (bounded in size and time) so that a malformed
    // message gets a JSON-RPC parse error instead of a transport-level
    // complaint.
    let (mut parts, body) = req.into_parts();
    let collected = tokio::time::timeout(
        front.limits.request_timeout,
        http_body_util::Limited::new(body, max_message_bytes).collect(),
    )
    .await;
    let Ok(collected) = collected else {
        let mut resp = plain(
            StatusCode::REQUEST_TIMEOUT,
            &format!(
                "the body did not arrive within {} ms",
                front.limits.request_timeout.as_millis()
            ),
        );
        resp.headers_mut()
            .insert(header::CONNECTION, http::HeaderValue::from_static("close"));
        return Ok(resp);
    };
    let bytes = match collected {
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
    // A plain stateless tools/call: answered here (see `direct`).
    if is_json {
        let call = {
            let generation = front.state.current();
            super::direct::read(&parts, &bytes, |name| generation.header_params(name))
        };
        if let Some(call) = call {
            return Ok(super::direct::answer(&front.server.fresh(), call, &parts).await);
        }
        // A plain tools/call of a session: answered here too, with the
        // session's own handler.
        if let Some(id) = super::direct::plain_session_headers(&parts) {
            if let Some((route, _busy)) = front.sessions.route(id, &owner) {
                if let Some(call) = super::direct::read_in_session(&bytes) {
                    let answered = super::direct::answer_in_session(&route, call, &parts).await;
                    if let Some(resp) = answered {
                        return Ok(resp);
                    }
                }
            }
        }
    }
    // A new session (no session id yet): refuse it here, with a proper
    // status, when its owner or the server has no room.
    if !parts.headers.contains_key("mcp-session-id") {
        if let Some(id) = initialize_id(&bytes) {
            if let Err(refusal) = front.sessions.admits(&owner) {
                return Ok(refused(&refusal, id, front.limits.sessions.idle));
            }
        }
    }
    Ok(OWNER
        .scope(
            owner,
            service.handle(Request::from_parts(parts, Full::new(bytes))),
        )
        .await)
}

/// `/console`: the operator's console, when served (`--console`; else
/// 404). `Host` is checked as on every path; the console checks the
/// origin of its POSTs itself (same origin only, stricter than `/mcp`'s
/// rule). The body is read whole, up to the console's limit, within the
/// request timeout.
async fn console(req: Request<Incoming>, front: &Front) -> Response<Body> {
    let Some(console) = front.console.clone() else {
        return plain(
            StatusCode::NOT_FOUND,
            "the console is off; start the server with --console",
        );
    };
    if let Some(resp) = refused_host(&req, front.check_host) {
        return resp;
    }
    let (parts, body) = req.into_parts();
    let collected = tokio::time::timeout(
        front.limits.request_timeout,
        http_body_util::Limited::new(body, toolhost_console::MAX_BODY_BYTES).collect(),
    )
    .await;
    let bytes = match collected {
        Ok(Ok(c)) => c.to_bytes(),
        Ok(Err(_)) => return plain(StatusCode::PAYLOAD_TOO_LARGE, "the form is too large"),
        Err(_) => {
            return plain(
                StatusCode::REQUEST_TIMEOUT,
                "the body did not arrive in time",
            )
        }
    };
    console.handle(Request::from_parts(parts, bytes)).await
}

/// `/readyz`: 200 when this server takes calls — not draining, its record
/// store answers within a second (when it has one) and its catalog holds
/// tools — else 503 naming what is not ready. Nothing about the calls or
/// the store's content is said, so it needs no token.
async fn readiness(state: &Arc<State>) -> Response<Body> {
    if state.shutdown.requested() {
        return plain(StatusCode::SERVICE_UNAVAILABLE, "draining: shutting down");
    }
    if state.current().tools.is_empty() {
        return plain(StatusCode::SERVICE_UNAVAILABLE, "no tools loaded");
    }
    if let Some(records) = state.records.clone() {
        let probe =
            tokio::task::spawn_blocking(move || records.store().get("toolhost/readyz").map(|_| ()));
        match tokio::time::timeout(std::time::Duration::from_secs(1), probe).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(e))) => {
                return plain(
                    StatusCode::SERVICE_UNAVAILABLE,
                    &format!("record store unavailable: {}", e.kind()),
                )
            }
            Ok(Err(_)) | Err(_) => {
                return plain(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "record store unavailable: no answer within 1 s",
                )
            }
        }
    }
    plain(StatusCode::OK, "ready")
}

/// Accepts connections on `addr` until a stop is asked (see `shutdown`),
/// then lets the running calls finish and returns.
pub(super) async fn serve(
    addr: SocketAddr,
    allow_remote: bool,
    limits: HttpLimits,
    state: Arc<State>,
    policy: Arc<dyn SessionPolicy>,
    console: Option<Arc<toolhost_console::Console>>,
) -> anyhow::Result<()> {
    let max_message_bytes = limits.max_message_bytes;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {addr}: {e}"))?;
    let local = listener.local_addr()?;
    let mut config = StreamableHttpServerConfig::default()
        .with_allowed_origins(ALLOWED_ORIGINS)
        .with_max_request_body_bytes(max_message_bytes)
        .with_json_response(true);
    // Clients of a remote server reach it by a name we cannot list; Origin
    // is still checked.
    let check_host = !allow_remote || local.ip().is_loopback();
    if !check_host {
        config = config.disable_allowed_hosts();
    } else if local.ip().is_loopback() {
        // A loopback address other than 127.0.0.1 is named by its own
        // literal too.
        config = config.with_allowed_hosts([
            "localhost".to_string(),
            "127.0.0.1".into(),
            "::1".into(),
            local.ip().to_string(),
        ]);
    }
    if !local.ip().is_unspecified() {
        let _ = state.http_url.set(format!("http://{local}/mcp"));
    }
    let sessions = Arc::new(Sessions::new(limits.sessions));
    sessions.spawn_reaper();
    // Each session's handler registers itself once its handshake is done,
    // for the direct route of its plain calls.
    let weak = Arc::downgrade(&sessions);
    let on_ready: OnReady = Arc::new(move |id, server, peer| {
        if let Some(sessions) = weak.upgrade() {
            let route = SessionRoute {
                server: server.clone(),
                peer: peer.clone(),
            };
            sessions.attach(id, route);
        }
    });
    let server = McpServer::new(state.clone(), None)
        .with_warm_thread()
        .on_ready(on_ready);
    let handler = server.clone();
    let service: Service =
        StreamableHttpService::new(move || Ok(handler.fresh()), sessions.clone(), config);
    let front = Arc::new(Front {
        policy,
        server,
        sessions,
        limits,
        state,
        check_host,
        anonymous_metrics: local.ip().is_loopback(),
        console,
    });
    log!("toolhost: serving MCP on http://{local}/mcp");
    if front.console.is_some() {
        log!("toolhost: the operator's console is on http://{local}/console");
    }
    let shutdown = front.state.shutdown.clone();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = shutdown.wait() => break,
        };
        let (stream, _) = match accepted {
            Ok(c) => c,
            Err(e) => {
                log!("toolhost: accept failed: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let service = service.clone();
        let front = front.clone();
        tokio::spawn(async move {
            let timeout = front.limits.request_timeout;
            let svc =
                hyper::service::service_fn(move |req| route(req, service.clone(), front.clone()));
            // The header timeout also bounds how long an idle kept-alive
            // connection waits for its next request.
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(timeout)
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
    // No new connections; requests on open ones are answered 503.
    drop(listener);
    log!(
        "toolhost: stopping: {} call(s) running, listener closed",
        shutdown.in_flight()
    );
    if !shutdown.drained(front.state.shutdown_grace).await {
        warn!("toolhost: calls still running after the grace period; stopping anyway");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(headers: &[(&str, &str)]) -> Request<()> {
        let mut req = Request::builder().uri("/metrics");
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        req.body(()).unwrap()
    }

    fn status(headers: &[(&str, &str)], check_host: bool) -> Option<StatusCode> {
        refused_headers(&get(headers), check_host).map(|r| r.status())
    }

    #[test]
    fn loopback_hosts_and_origins_pass_others_are_refused() {
        for host in [
            "127.0.0.1",
            "127.0.0.1:8080",
            "localhost",
            "LOCALHOST:1",
            "[::1]:9",
            "127.0.0.11:7401",
        ] {
            assert_eq!(status(&[("host", host)], true), None, "{host}");
        }
        for host in [
            "evil.example",
            "127.0.0.1.nip.io",
            "localhost.evil:80",
            "0.0.0.0",
            "128.0.0.1",
            "10.0.0.1",
        ] {
            assert_eq!(
                status(&[("host", host)], true),
                Some(StatusCode::FORBIDDEN),
                "{host}"
            );
            // Not checked for a remote server (`--allow-remote`).
            assert_eq!(status(&[("host", host)], false), None, "{host}");
        }
        assert_eq!(status(&[], true), Some(StatusCode::BAD_REQUEST));
        assert_eq!(
            status(&[("host", "a b")], true),
            Some(StatusCode::BAD_REQUEST)
        );
        let local = ("host", "127.0.0.1");
        for origin in [
            "http://localhost:3000",
            "https://127.0.0.1",
            "http://[::1]:1",
        ] {
            assert_eq!(status(&[local, ("origin", origin)], true), None, "{origin}");
        }
        for origin in [
            "http://evil.example",
            "null",
            "file://localhost",
            "http://localhost.evil",
            "http://localhost/path",
            "",
        ] {
            // Refused even where the host is not checked.
            assert_eq!(
                status(&[local, ("origin", origin)], false),
                Some(StatusCode::FORBIDDEN),
                "{origin}"
            );
        }
        // Two origins: refused rather than guessing which one counts.
        assert_eq!(
            status(
                &[
                    local,
                    ("origin", "http://localhost"),
                    ("origin", "http://evil")
                ],
                true
            ),
            Some(StatusCode::FORBIDDEN)
        );
    }
}
