//! The rmcp `ServerHandler`: tools/list, tools/call, logging level,
//! list-changed notifications for both protocol eras.
#![allow(deprecated)] // rmcp marks logging deprecated (SEP-2577); 2025-11-25 still has it.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelledNotificationParam,
    ContentBlock, ErrorData, Implementation, InitializeResult, InputRequiredResult, InputResponses,
    JsonObject, ListToolsResult, LoggingLevel, LoggingMessageNotificationParam,
    PaginatedRequestParams, ProgressNotificationParam, ProgressToken, ProtocolVersion,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, RequestId,
    RequestMetaObject, ResourceContents, ServerCapabilities, SetLevelRequestParams,
    SubscriptionFilter, Tool,
};
use rmcp::service::{NotificationContext, Peer, RequestContext, SubscriptionContext};
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::transport::common::http_header::HEADER_SESSION_ID;
use rmcp::{RoleServer, ServerHandler, ServiceExt};
use serde_json::{json, Value};
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;

use super::compact_out::{self, CompactOut};
use super::raw_args::{self, KeptArguments, RawArguments, Tap};
use super::request_ids::UniqueIds;
use super::warm::{self, WarmThread};
use super::{ask, call_meta, elicit, listing, Generation, SessionScope, State, LIST_TTL_MS};
use toolhost::{
    new_call_id, ArtifactError, Artifacts, Call, CallOptions, CancelToken, HostTool, KeySource,
    Limits, Mode, Observation, Status,
};

/// Most stderr lines forwarded as log messages per call.
const MAX_LOG_LINES: usize = 100;

#[derive(Clone)]
pub(super) struct McpServer {
    state: Arc<State>,
    /// The scope when the transport carries none (stdio).
    default_scope: Option<Arc<SessionScope>>,
    /// `logging/setLevel` of this session (2025-11-25).
    log_level: Arc<Mutex<Option<LoggingLevel>>>,
    /// Argument texts the strict parse refused, by request id (stdio; over
    /// HTTP they come with the request).
    kept: KeptArguments,
    /// The server's warm call thread ([`warm`]), shared by its sessions.
    warm: Option<Arc<WarmThread>>,
    /// Lazy mode: the tools `find_tools` revealed to this session, on top
    /// of `find_tools` itself.
    revealed: Arc<Mutex<std::collections::BTreeSet<String>>>,
    /// Dropped with the last clone of this session's handler (the session
    /// ended): its receivers see the channel close and the tasks the
    /// session spawned stop.
    alive: Arc<tokio::sync::watch::Sender<()>>,
    /// This session's id for the circuit breaker (its calls' conversation).
    conversation: Arc<str>,
    /// Told of this session once its handshake completes (HTTP sessions,
    /// whose plain calls `direct` then answers).
    on_ready: Option<OnReady>,
    /// The calls of this session answered by `direct`, by request id, for
    /// `notifications/cancelled` (rmcp cancels only the calls it runs).
    direct_calls: Cancellables,
}

/// Called when a 2025-11-25 HTTP session's handshake completes, with the
/// session's id, its handler and the peer its notifications go to.
pub(super) type OnReady = Arc<dyn Fn(&str, &McpServer, &Peer<RoleServer>) + Send + Sync>;

/// In-flight calls of one session answered outside rmcp's service.
#[derive(Clone, Default)]
struct Cancellables(Arc<Mutex<std::collections::HashMap<RequestId, CancellationToken>>>);

/// A call registered in [`Cancellables`] until it is dropped.
pub(super) struct Cancellable {
    calls: Cancellables,
    id: RequestId,
    ct: CancellationToken,
}

impl Cancellable {
    /// Cancelled by the session's `notifications/cancelled` for the call.
    pub(super) fn ct(&self) -> &CancellationToken {
        &self.ct
    }
}

impl Drop for Cancellable {
    fn drop(&mut self) {
        let mut calls = self.calls.0.lock().unwrap_or_else(|e| e.into_inner());
        calls.remove(&self.id);
    }
}

/// One `tools/call` as the call path reads it, whichever way it came:
/// through rmcp's service ([`CallRequest::of`], with the peer notifications
/// go to) or answered straight from an HTTP request (`direct`, without a
/// peer: such a request asks for nothing a notification would carry).
pub(super) struct CallRequest<'a> {
    /// The JSON-RPC id.
    pub id: &'a RequestId,
    /// The request's `_meta`.
    pub meta: &'a RequestMetaObject,
    /// The HTTP request it came in: its scope, kept argument text, `Host`.
    pub parts: Option<&'a http::request::Parts>,
    /// Cancelled when the client cancels the request or goes away.
    pub ct: &'a CancellationToken,
    /// Where progress, log lines and list changes go.
    pub peer: Option<&'a Peer<RoleServer>>,
    /// A 2026-07-28 request: no session, nothing kept after it.
    pub stateless: bool,
    /// The `requestState` a multi round-trip retry echoes ([`elicit`]).
    pub request_state: Option<&'a str>,
    /// The answers a multi round-trip retry carries.
    pub input_responses: Option<&'a InputResponses>,
}

impl<'a> CallRequest<'a> {
    /// The request rmcp's service hands the handler.
    fn of(cx: &'a RequestContext<RoleServer>) -> CallRequest<'a> {
        CallRequest {
            id: &cx.id,
            meta: &cx.meta,
            parts: cx.extensions.get::<http::request::Parts>(),
            ct: &cx.ct,
            peer: Some(&cx.peer),
            stateless: is_stateless(cx),
            request_state: None,
            input_responses: None,
        }
    }

    /// What decides who the call's tool may ask ([`ask`]).
    fn asking(&self) -> ask::Request<'_> {
        ask::Request {
            stateless: self.stateless,
            peer: self.peer,
            meta: self.meta,
            request_state: self.request_state,
            input_responses: self.input_responses,
        }
    }

    /// Who the client is: its name and version from the request's `_meta`
    /// (2026-07-28) or the session's handshake.
    fn client(&self) -> Option<String> {
        let info = self.meta.client_info().or_else(|| {
            self.peer
                .and_then(|p| p.peer_info())
                .map(|i| i.client_info.clone())
        })?;
        Some(format!("mcp:{}/{}", info.name, info.version))
    }
}

impl McpServer {
    pub(super) fn new(state: Arc<State>, default_scope: Option<Arc<SessionScope>>) -> McpServer {
        McpServer {
            state,
            default_scope,
            log_level: Arc::new(Mutex::new(None)),
            kept: KeptArguments::default(),
            warm: None,
            revealed: Arc::default(),
            alive: Arc::new(tokio::sync::watch::channel(()).0),
            conversation: new_call_id().replacen("call-", "mcp-", 1).into(),
            on_ready: None,
            direct_calls: Cancellables::default(),
        }
    }

    /// A handler for a new session: same state, warm thread and
    /// [`on_ready`](Self::on_ready), own log level.
    pub(super) fn fresh(&self) -> McpServer {
        McpServer {
            warm: self.warm.clone(),
            on_ready: self.on_ready.clone(),
            ..McpServer::new(self.state.clone(), self.default_scope.clone())
        }
    }

    /// This handler, telling `on_ready` of each HTTP session it (or a
    /// [`fresh`](Self::fresh) copy) serves once the session's handshake
    /// completes.
    pub(super) fn on_ready(mut self, on_ready: OnReady) -> McpServer {
        self.on_ready = Some(on_ready);
        self
    }

    /// Registers a call of this session answered outside rmcp's service,
    /// so that `notifications/cancelled` reaches it; `None` when a call
    /// with this id is already running.
    pub(super) fn direct_call(&self, id: &RequestId) -> Option<Cancellable> {
        let mut calls = self
            .direct_calls
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if calls.contains_key(id) {
            return None;
        }
        let ct = CancellationToken::new();
        calls.insert(id.clone(), ct.clone());
        Some(Cancellable {
            calls: self.direct_calls.clone(),
            id: id.clone(),
            ct,
        })
    }

    /// Whether the session's log level asks for log notifications.
    pub(super) fn logs_wanted(&self) -> bool {
        self.log_level
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
    }

    /// This handler with a warm call thread ([`warm`]) that also drops the
    /// calls' stores and makes the next instances between calls (one
    /// sandbox serves every generation); without one when the thread
    /// cannot start (calls then use the blocking pool).
    pub(super) fn with_warm_thread(mut self) -> McpServer {
        let sandbox = self.state.current().host.sandbox().clone();
        let idle = sandbox.clone();
        match WarmThread::spawn(move || sandbox.defer_to_idle(), move || idle.idle_work()) {
            Ok(warm) => self.warm = Some(Arc::new(warm)),
            Err(e) => log!("toolhost: no warm call thread ({e}); calls use the blocking pool"),
        }
        self
    }

    fn scope(&self, parts: Option<&http::request::Parts>) -> Result<Arc<SessionScope>, ErrorData> {
        if let Some(parts) = parts {
            if let Some(scope) = parts.extensions.get::<Arc<SessionScope>>() {
                return Ok(scope.clone());
            }
        }
        self.default_scope
            .clone()
            .ok_or_else(|| ErrorData::internal_error("no session scope for this request", None))
    }

    /// Forwards the call's stderr lines as log messages (when enabled) and
    /// builds the `CallToolResult`.
    async fn finish(
        &self,
        req: &CallRequest<'_>,
        name: &str,
        obs: Observation,
    ) -> Result<CallToolResponse, ErrorData> {
        if let Some(peer) = req.peer.filter(|_| !obs.logs.stderr.is_empty()) {
            if self.logs_enabled(req) {
                for line in obs.logs.stderr.lines().take(MAX_LOG_LINES) {
                    let param =
                        LoggingMessageNotificationParam::new(LoggingLevel::Info, json!(line))
                            .with_logger(name.to_string());
                    let _ = peer.notify_logging_message(param).await;
                }
            }
        }
        // The model reads the observation's text (the last text block; the
        // tool's own content blocks, output convention, first);
        // structuredContent is the tool's output and `_meta` carries the
        // envelope (see `listing`).
        let mut blocks = if obs.status == Status::Ok {
            listing::content_blocks(obs.output.as_ref())
        } else {
            Vec::new()
        };
        // A spilled result: its artifact is also a resource this session's
        // token may read (`resources/read`).
        if let Some(t) = obs
            .truncated
            .as_ref()
            .filter(|_| HostTool::of(name) != Some(HostTool::ArtifactView))
        {
            if let Some(id) = &t.artifact {
                blocks.push(json!({
                    "type": "resource_link",
                    "uri": Artifacts::uri(id),
                    "name": format!("{name} output {id}"),
                    "description": "the whole output of this call, as JSON",
                    "mimeType": "application/json",
                    "size": t.original_bytes,
                }));
            }
        }
        if obs.untrusted {
            listing::mark_untrusted(&mut blocks);
        }
        let ok = obs.status == Status::Ok;
        let (text, structured, meta) = listing::call_result_parts(obs)
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        let mut content: Vec<ContentBlock> = if blocks.is_empty() {
            Vec::with_capacity(1)
        } else {
            from_json(Value::Array(blocks))?
        };
        content.push(ContentBlock::text(text));
        let mut result = if ok {
            CallToolResult::success(content)
        } else {
            CallToolResult::error(content)
        };
        result.structured_content = structured;
        // The `_meta` object as it is (no round trip through serde).
        result.meta = Some(rmcp::model::MetaObject(meta));
        Ok(result.into())
    }

    /// The arguments as the pipeline gets them: the client's own text when
    /// rmcp's parse hid a problem in it (see [`raw_args`]), else rmcp's
    /// value.
    fn arguments(&self, req: &CallRequest<'_>, parsed: Option<JsonObject>) -> String {
        let parsed = Value::Object(parsed.unwrap_or_default());
        let id = serde_json::to_string(req.id).unwrap_or_default();
        let kept = match req.parts {
            Some(parts) => parts.extensions.get::<RawArguments>().cloned(),
            None => self.kept.take(&id),
        };
        kept.and_then(|k| raw_args::usable(k, &id, &parsed))
            .unwrap_or_else(|| parsed.to_string())
    }

    /// The MCP URL this request came in on: the served address, else (a
    /// request on the direct route before the address is known) its `Host`
    /// header's.
    fn request_url(&self, req: &CallRequest<'_>) -> Option<String> {
        if let Some(url) = self.state.http_url.get() {
            return Some(url.clone());
        }
        let authority = req.parts?.headers.get(http::header::HOST)?.to_str().ok()?;
        Some(format!("http://{authority}/mcp"))
    }

    /// What a call adds to this session's list: `artifact_view` after its
    /// first spilled result and, in lazy mode, the top strong hits of a
    /// `find_tools` call ([`HostTool::revealed_by_search`]). A change is announced with
    /// `notifications/tools/list_changed` (before the result, so the client
    /// can list again as soon as it reads it). A stateless HTTP request
    /// has no session to add them to (its handler is made for it and
    /// dropped after it): its list stays the same, and nothing is announced.
    async fn reveal(&self, req: &CallRequest<'_>, name: &str, obs: &Observation) {
        let mut found: Vec<String> = Vec::new();
        if self.state.lazy && HostTool::of(name) == Some(HostTool::FindTools) {
            if let Some(output) = obs.output.as_ref() {
                found.extend(HostTool::revealed_by_search(output));
            }
        }
        if obs.truncated.as_ref().is_some_and(|t| t.artifact.is_some()) {
            found.push(HostTool::ArtifactView.name().to_string());
        }
        if found.is_empty() {
            return;
        }
        // A store shared by hosts keeps them by token or session, so the
        // next request sees them through any host.
        if let (Some(store), Some(key)) = (
            self.state.reveals.clone(),
            reveal_key(req.parts, req.stateless),
        ) {
            let names = found.clone();
            let kept = crate::offload::blocking(crate::offload::STORE_WAIT, move || {
                store.add(&key, &names, REVEAL_KEEP)
            })
            .await;
            if !matches!(kept, Ok(Ok(_))) {
                tracing::warn!("toolhost: the revealed tools could not be kept in the store");
            }
        }
        let Some(peer) = req.peer.filter(|_| !(req.stateless && req.parts.is_some())) else {
            return;
        };
        let added = {
            let mut revealed = self.revealed.lock().unwrap_or_else(|e| e.into_inner());
            let before = revealed.len();
            revealed.extend(found);
            revealed.len() > before
        };
        if added {
            let _ = peer.notify_tool_list_changed().await;
        }
    }

    /// What this session was shown: its own reveals and, with a shared
    /// store, those kept for its token or session.
    async fn revealed(
        &self,
        parts: Option<&http::request::Parts>,
        stateless: bool,
    ) -> std::collections::BTreeSet<String> {
        let mut revealed = self
            .revealed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if let (Some(store), Some(key)) = (self.state.reveals.clone(), reveal_key(parts, stateless))
        {
            let kept =
                crate::offload::blocking(crate::offload::STORE_WAIT, move || store.revealed(&key))
                    .await;
            match kept {
                Ok(Ok(names)) => revealed.extend(names),
                _ => {
                    tracing::warn!("toolhost: the revealed tools could not be read from the store")
                }
            }
        }
        revealed
    }

    /// Whether stderr lines of a call go out as `notifications/message`.
    fn logs_enabled(&self, req: &CallRequest<'_>) -> bool {
        if let Some(level) = req.meta.log_level() {
            return rank(level) <= rank(LoggingLevel::Info);
        }
        if req.stateless {
            return false;
        }
        match *self.log_level.lock().unwrap_or_else(|e| e.into_inner()) {
            Some(level) => rank(level) <= rank(LoggingLevel::Info),
            None => true,
        }
    }
}

/// The store key of an HTTP request's reveals: `session:` and its
/// 2025-11-25 session's id, or for a stateless request `token:` and its
/// token's id (a client without a
/// token has none: its reveals are not kept).
fn reveal_key(parts: Option<&http::request::Parts>, stateless: bool) -> Option<String> {
    let parts = parts?;
    if !stateless {
        let id = parts.headers.get("mcp-session-id")?.to_str().ok()?;
        return Some(format!("session:{id}"));
    }
    let scope = parts.extensions.get::<Arc<SessionScope>>()?;
    (!scope.anonymous).then(|| format!("token:{}", scope.session.grant().token_id_hex()))
}

/// How long a shared store keeps a session's revealed names after the
/// last one was added.
const REVEAL_KEEP: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

/// The JSON-RPC error of a call that arrives while the server drains
/// (implementation-defined server error range).
pub(crate) const SHUTTING_DOWN: i32 = -32000;

fn is_stateless(cx: &RequestContext<RoleServer>) -> bool {
    cx.protocol_version()
        .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
}

fn rank(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

fn from_json<T: serde::de::DeserializeOwned>(v: Value) -> Result<T, ErrorData> {
    serde_json::from_value(v).map_err(|e| ErrorData::internal_error(e.to_string(), None))
}

/// A `tools/call` request, read: what the executor needs besides the
/// tool's name and arguments.
struct ParsedCall {
    opts: CallOptions,
    mode: Mode,
    /// The progress token, when the client wants progress notifications.
    progress: Option<ProgressToken>,
    /// The call's wall-clock budget, for the progress share.
    budget: Duration,
}

impl McpServer {
    /// `tools/call`: the tool `name` with `arguments`, for `req`.
    pub(super) async fn call(
        &self,
        req: &CallRequest<'_>,
        name: &str,
        arguments: Option<JsonObject>,
    ) -> Result<CallToolResponse, ErrorData> {
        // Counted from here, so a stop waits for it (see `shutdown`); once
        // a stop is asked, nothing new starts, except the call of an HTTP
        // request let in before it.
        let _in_flight = self.state.shutdown.call();
        let admitted = req
            .parts
            .is_some_and(|p| p.extensions.get::<crate::shutdown::Admitted>().is_some());
        if self.state.shutdown.requested() && !admitted {
            return Err(ErrorData::new(
                rmcp::model::ErrorCode(SHUTTING_DOWN),
                "the server is shutting down; the call did not run (send it to another server)",
                None,
            ));
        }
        let arguments = self.arguments(req, arguments);
        // Wait for a free core without holding a thread.
        let running = self.state.running.acquire().await;
        let scope = self.scope(req.parts)?;
        let generation = self.state.current();
        let mut parsed = match self.parse_call(req, &generation, &scope, name) {
            Ok(parsed) => parsed,
            Err(e) => {
                self.journal_refusal(&generation, &scope, name, &arguments)
                    .await;
                return Err(e);
            }
        };
        let asker = match ask::asker_for(
            &req.asking(),
            &generation,
            &scope,
            name,
            &arguments,
            parsed.budget,
        ) {
            Ok(asker) => asker,
            Err(e) => {
                self.journal_refusal(&generation, &scope, name, &arguments)
                    .await;
                return Err(e);
            }
        };
        parsed.opts.asker = asker.clone();
        let first = (parsed.opts.clone(), parsed.mode, parsed.budget);
        let answered = parsed.opts.approval.is_some() || parsed.opts.answer.is_some();
        let mode = parsed.mode;
        let obs = self
            .execute(
                req,
                generation.clone(),
                scope.clone(),
                name.to_string(),
                arguments.clone(),
                parsed,
            )
            .await?;
        let obs = match self
            .confirm(
                req,
                &generation,
                &scope,
                name,
                &arguments,
                first,
                obs,
                running,
            )
            .await
        {
            Ok(obs) | Err(obs) => obs,
        };
        if let Some(asked) = ask::input_required(
            &req.asking(),
            &generation,
            &scope,
            name,
            &arguments,
            asker.as_ref(),
            &obs,
        ) {
            return Ok(CallToolResponse::InputRequired(asked));
        }
        if mode == Mode::Run && !answered {
            if let Some(asked) = self
                .ask_stateless(req, &generation, name, &arguments, &obs)
                .await
            {
                return Ok(CallToolResponse::InputRequired(asked));
            }
        }
        self.reveal(req, name, &obs).await;
        self.finish(req, name, obs).await
    }

    /// A call that waits for a person's approval, asked of the person
    /// behind a client that can answer a form ([`elicit`]): the call's
    /// answer after the person decided (`Ok`), or the `approval_pending`
    /// result as it was (`Err`) when nobody can be asked or nobody decided.
    #[allow(clippy::too_many_arguments)]
    async fn confirm(
        &self,
        req: &CallRequest<'_>,
        generation: &Arc<Generation>,
        scope: &Arc<SessionScope>,
        name: &str,
        arguments: &str,
        (opts, mode, budget): (CallOptions, Mode, Duration),
        obs: Observation,
        running: Result<tokio::sync::SemaphorePermit<'_>, tokio::sync::AcquireError>,
    ) -> Result<Observation, Observation> {
        let Some(peer) = req.peer.filter(|_| !req.stateless) else {
            return Err(obs);
        };
        let Some((id, details)) = elicit::pending(&obs) else {
            return Err(obs);
        };
        if generation.host.approvals().is_none() {
            return Err(obs);
        }
        if mode != Mode::Run || opts.approval.is_some() || !elicit::can_ask(peer) {
            return Err(obs);
        }
        let now = crate::now_ms();
        let left = details["expires_at_ms"]
            .as_u64()
            .map_or(elicit::MAX_WAIT, |t| {
                Duration::from_millis(t.saturating_sub(now))
            });
        let question = elicit::question(name, arguments, details);
        // Waiting for a person holds no slot of the calls running at once.
        drop(running);
        let answer = tokio::select! {
            a = elicit::ask(peer, question, left.min(elicit::MAX_WAIT)) => a,
            () = req.ct.cancelled() => elicit::Answer::None,
        };
        let (approve, note) = match answer {
            elicit::Answer::Approve(note) => (true, note),
            elicit::Answer::Decline(note) => (false, note),
            elicit::Answer::None => return Err(obs),
        };
        let who = format!("{} (elicitation)", elicit::who(peer));
        // The store is written on the blocking pool (never on a worker).
        let decided = {
            let (generation, id) = (generation.clone(), id.clone());
            crate::offload::blocking(crate::offload::STORE_WAIT, move || {
                generation
                    .host
                    .approvals()
                    .map(|a| a.decide(&id, approve, &who, note.as_deref()))
            })
            .await
        };
        match decided {
            Ok(Some(Ok(_))) => {}
            Ok(Some(Err(e))) => {
                tracing::warn!("the answer to approval {id} could not be recorded: {e}");
                return Err(obs);
            }
            Ok(None) => return Err(obs),
            Err(e) => {
                tracing::warn!("the answer to approval {id} could not be recorded: {e}");
                return Err(obs);
            }
        }
        // The same call again, under the same key, with the approval: it
        // runs bound to the plan the person saw, or says why not.
        let _running = self.state.running.acquire().await;
        let parsed = ParsedCall {
            opts: CallOptions {
                approval: Some(id),
                ..opts
            },
            mode,
            progress: None,
            budget,
        };
        self.execute(
            req,
            generation.clone(),
            scope.clone(),
            name.to_string(),
            arguments.to_string(),
            parsed,
        )
        .await
        .map_err(|_| obs)
    }

    /// A call that waits for a person's approval, in a 2026-07-28 request
    /// whose client can answer a form: the `input_required` result that
    /// asks (see [`elicit`]), with the approval's signed request state.
    async fn ask_stateless(
        &self,
        req: &CallRequest<'_>,
        generation: &Arc<Generation>,
        name: &str,
        arguments: &str,
        obs: &Observation,
    ) -> Option<InputRequiredResult> {
        if !req.stateless || !elicit::can_ask_stateless(req.meta) {
            return None;
        }
        let (id, details) = elicit::pending(obs)?;
        generation.host.effect_guard()?;
        // The approval is read from the store on the blocking pool.
        let sealed = {
            let (generation, id) = (generation.clone(), id.clone());
            crate::offload::blocking(crate::offload::STORE_WAIT, move || {
                generation
                    .host
                    .effect_guard()
                    .map(|g| g.seal_request_state(&id, elicit::MAX_WAIT))
            })
            .await
        };
        match sealed {
            Ok(Some(Ok(state))) => Some(InputRequiredResult::new(
                Some(elicit::input_request(elicit::question(
                    name, arguments, details,
                ))),
                Some(state),
            )),
            Ok(Some(Err((_, e)))) => {
                tracing::warn!("approval {id} cannot be asked in this request: {e}");
                None
            }
            Ok(None) => None,
            Err(e) => {
                tracing::warn!("approval {id} cannot be asked in this request: {e}");
                None
            }
        }
    }

    /// A `tools/call` refused before the pipeline (a tool this session
    /// cannot see, or unusable `_meta`) is journaled all the same (on the
    /// blocking pool: the breaker may count in the store).
    async fn journal_refusal(
        &self,
        generation: &Arc<Generation>,
        scope: &Arc<SessionScope>,
        name: &str,
        arguments: &str,
    ) {
        use toolhost::ErrorCode;
        let (generation, scope) = (generation.clone(), scope.clone());
        let (name, arguments) = (name.to_string(), arguments.to_string());
        let conversation = self.conversation.to_string();
        let _ = crate::offload::blocking(crate::offload::STORE_WAIT, move || {
            let opts = toolhost::CallOptions {
                conversation: Some(conversation),
                ..Default::default()
            };
            let caller = toolhost::Caller {
                tool: &name,
                args: &arguments,
                opts: &opts,
                chain: scope.session.chain_ids(),
            };
            let visible = generation.host.catalog().get(&name).is_some() && scope.allows(&name);
            let code = match generation.host.catalog().refusal(&name) {
                _ if visible => ErrorCode::InvalidArguments,
                Some(p) => p
                    .code
                    .as_deref()
                    .and_then(ErrorCode::from_code)
                    .unwrap_or(ErrorCode::PluginUnavailable),
                None => ErrorCode::UnknownTool,
            };
            let info = code.info(format!(
                "`{name}`: refused before it ran (see the protocol error)"
            ));
            let _ = generation
                .host
                .recorder()
                .refusal(generation.host.catalog(), &caller, info);
        })
        .await;
    }

    /// Parse: the tool must be one this session may see (else JSON-RPC
    /// `-32602`), and `_meta` must be usable; then the call's options (its
    /// id, idempotency key, plan token) and mode.
    fn parse_call(
        &self,
        req: &CallRequest<'_>,
        generation: &Generation,
        scope: &SessionScope,
        name: &str,
    ) -> Result<ParsedCall, ErrorData> {
        let tool = generation
            .host
            .catalog()
            .get(name)
            .filter(|_| scope.allows(name));
        let host_tool = tool.is_none() && generation.host.serves_host_tool(&scope.session, name);
        let Some(budget) = tool
            .map(|t| t.descriptor.default_timeout_ms)
            .or(host_tool.then_some(0))
        else {
            if let Some(p) = generation.host.catalog().refusal(name) {
                return Err(ErrorData::invalid_params(
                    format!("tool `{name}` was refused at load: {p}"),
                    Some(json!({ "tool": name, "code": p.code })),
                ));
            }
            return Err(ErrorData::invalid_params(
                format!("unknown tool `{name}`"),
                Some(json!({ "tool": name })),
            ));
        };
        let budget = self
            .state
            .defaults
            .timeout_ms
            .map(Duration::from_millis)
            .unwrap_or(match budget {
                0 => Limits::default().timeout,
                ms => Duration::from_millis(ms.into()),
            });
        let meta = call_meta::parse(req.meta).map_err(|e| {
            ErrorData::invalid_params(
                e.to_string(),
                Some(json!({"field": format!("_meta.{}", e.key), "expected": e.expected, "actual": e.actual})),
            )
        })?;
        let mut opts = self.state.defaults.clone();
        let client_trajectory = matches!(meta.idempotency, Some(KeySource::Derived { .. }));
        let call_id = meta.call_id.unwrap_or_else(new_call_id);
        // Without the client's ids, a key unique to this request: the call
        // is still recorded, and its key is in the observation for a retry.
        opts.idempotency = Some(meta.idempotency.unwrap_or_else(|| KeySource::Derived {
            trajectory_id: "mcp".into(),
            turn: 0,
            call_id: call_id.clone(),
        }));
        opts.call_id = Some(call_id);
        opts.plan_token = meta.plan_token;
        opts.approval = meta.approval;
        // Who asks, for a pending approval's record: the client's name and
        // version from its handshake.
        opts.requested_by = req.client();
        if let Some(state) = req
            .request_state
            .filter(|s| !s.starts_with(toolhost::InputState::PREFIX))
        {
            let (approve, note) = match elicit::answer_in(req.input_responses) {
                elicit::Answer::Approve(note) => (Some(true), note),
                elicit::Answer::Decline(note) => (Some(false), note),
                elicit::Answer::None => (None, None),
            };
            opts.answer = Some(toolhost::ApprovalAnswer {
                request_state: state.to_string(),
                approve,
                note,
                by: format!(
                    "{} (input_required)",
                    req.client().as_deref().unwrap_or("mcp:unknown")
                ),
            });
        }
        // The breaker's conversation: a session's id; for a stateless HTTP
        // request (on whichever host) the trajectory the client names,
        // counted under its token, else this handler's.
        opts.conversation = if req.stateless && req.parts.is_some() && client_trajectory {
            None
        } else {
            Some(self.conversation.to_string())
        };
        opts.request_url = self.request_url(req);
        Ok(ParsedCall {
            opts,
            mode: if meta.dry_run { Mode::Plan } else { Mode::Run },
            progress: req.meta.get_progress_token(),
            budget,
        })
    }

    /// The one executor: [`Host::run`](toolhost::Host::run) off the
    /// runtime's async work, stoppable by the client's cancellation. Where
    /// it runs depends only on progress: a call without progress on the
    /// warm call thread (else the blocking pool; on this worker when the
    /// server has no warm thread and the runtime has workers to spare), a
    /// call with progress on the blocking pool while this task sends
    /// heartbeats. (Never inline on a worker: WASI's file calls block on
    /// the runtime of the thread they run on.)
    async fn execute(
        &self,
        req: &CallRequest<'_>,
        generation: Arc<Generation>,
        scope: Arc<SessionScope>,
        name: String,
        arguments: String,
        parsed: ParsedCall,
    ) -> Result<Observation, ErrorData> {
        let ParsedCall {
            opts,
            mode,
            progress,
            budget,
        } = parsed;
        let cancel = CancelToken::default();
        let started = Instant::now();
        let run_call = {
            let cancel = cancel.clone();
            let name = name.clone();
            move || {
                let call = Call {
                    mode,
                    ..Call::new(&name, &arguments, &opts).cancellable(&cancel)
                };
                generation.host.run(&scope.session, call)
            }
        };
        let multi_thread = matches!(
            tokio::runtime::Handle::current().runtime_flavor(),
            tokio::runtime::RuntimeFlavor::MultiThread
        );
        let mut stop_if_dropped = StopIfDropped(Some(cancel.clone()));
        let result = match progress.zip(req.peer) {
            None if self.warm.is_some() || !multi_thread => {
                let spin = !multi_thread;
                self.on_call_thread(req.ct, &name, spin, run_call, cancel)
                    .await
            }
            None => Ok(on_this_worker(req.ct, run_call, cancel)),
            Some((token, peer)) => {
                let heartbeat = Heartbeat {
                    token,
                    name: &name,
                    started,
                    budget,
                };
                with_progress(peer, req.ct, run_call, cancel, heartbeat).await
            }
        };
        stop_if_dropped.0 = None;
        result
    }

    /// No progress to report: the warm call thread when it is free (see
    /// `warm`), else the blocking pool; `spin`: whether this runtime's
    /// thread may spin for the result (a single-threaded runtime, stdio).
    async fn on_call_thread(
        &self,
        ct: &CancellationToken,
        tool: &str,
        spin: bool,
        run_call: impl FnOnce() -> Observation + Send + 'static,
        cancel: CancelToken,
    ) -> Result<Observation, ErrorData> {
        let handed_at = Instant::now();
        let handed = match &self.warm {
            Some(warm) => warm.try_run(run_call),
            None => Err(run_call),
        };
        let rx = match handed {
            Ok(rx) => rx,
            Err(run_call) => {
                let (tx, rx) = tokio::sync::oneshot::channel();
                tokio::task::spawn_blocking(move || {
                    let _ = tx.send(run_call());
                });
                rx
            }
        };
        // Spin only on a single-threaded runtime (stdio) and only for the
        // one call running: beside other calls the spinning thread takes
        // the CPU they run on (with 8 HTTP clients spinning cost a third of
        // the calls a second), and an HTTP worker that parks leaves its CPU
        // to the journal and the client instead of making the call share
        // the other one (a parked worker's p90 is half a spinning one's).
        let alone = self.state.running.available_permits() + 1 >= self.state.slots;
        // Nor where this process has one CPU: the result comes from that CPU.
        let spin = match &self.warm {
            _ if !alone || !spin || !warm::may_spin() => Duration::ZERO,
            Some(w) => w.result_spin(tool),
            None => warm::RESULT_SPIN,
        };
        let result = match warm::take_result(rx, spin) {
            Ok(obs) => Ok(obs),
            Err(mut rx) => tokio::select! {
                done = &mut rx => done,
                _ = ct.cancelled() => {
                    cancel.cancel();
                    rx.await
                }
            },
        };
        if let Some(warm) = &self.warm {
            warm.record_wait(tool, handed_at.elapsed());
        }
        result.map_err(|_| ErrorData::internal_error("the call thread failed", None))
    }
}

/// Stops a call when the future waiting for its result is dropped before
/// the result came: the request's own future when nothing else owns it (a
/// stateless HTTP call answered by `direct`, dropped with its connection
/// when the client goes away), not only a cancellation the future sees.
struct StopIfDropped(Option<CancelToken>);

impl Drop for StopIfDropped {
    fn drop(&mut self) {
        if let Some(cancel) = self.0.take() {
            cancel.cancel();
        }
    }
}

/// No progress to report: run on this worker (cheaper than a hop to the
/// blocking pool) and let a small task relay a cancellation.
fn on_this_worker(
    ct: &CancellationToken,
    run_call: impl FnOnce() -> Observation,
    cancel: CancelToken,
) -> Observation {
    let relay = {
        let ct = ct.clone();
        tokio::spawn(async move {
            ct.cancelled().await;
            cancel.cancel();
        })
    };
    let obs = tokio::task::block_in_place(run_call);
    relay.abort();
    obs
}

/// What the progress notifications of one call say.
struct Heartbeat<'a> {
    token: ProgressToken,
    name: &'a str,
    started: Instant,
    budget: Duration,
}

/// The call on the blocking pool while this task sends
/// `notifications/progress`: 0 at the start, the share of the budget used
/// so far, 100 at the end.
async fn with_progress(
    peer: &Peer<RoleServer>,
    ct: &CancellationToken,
    run_call: impl FnOnce() -> Observation + Send + 'static,
    cancel: CancelToken,
    beat: Heartbeat<'_>,
) -> Result<Observation, ErrorData> {
    let Heartbeat {
        token,
        name,
        started,
        budget,
    } = beat;
    let mut run = tokio::task::spawn_blocking(run_call);
    let notify = |progress: f64, message: String| {
        let peer = peer.clone();
        let param = ProgressNotificationParam::new(token.clone(), progress)
            .with_total(100.0)
            .with_message(message);
        async move {
            let _ = peer.notify_progress(param).await;
        }
    };
    notify(0.0, format!("{name}: started")).await;
    let mut interval = next_heartbeat(Duration::ZERO);
    let mut due = started + interval;
    let mut cancelled = false;
    let obs: Observation = loop {
        tokio::select! {
            done = &mut run => {
                break done.map_err(|e| ErrorData::internal_error(format!("the call thread failed: {e}"), None))?;
            }
            _ = ct.cancelled(), if !cancelled => {
                cancel.cancel();
                cancelled = true;
            }
            _ = tokio::time::sleep_until(due.into()) => {
                let elapsed = started.elapsed();
                let share = (elapsed.as_secs_f64() / budget.as_secs_f64() * 100.0).min(99.0);
                notify(share, format!(
                    "{name}: running, {:.2} s of a {:.1} s budget",
                    elapsed.as_secs_f64(),
                    budget.as_secs_f64()
                )).await;
                interval = next_heartbeat(interval);
                due += interval;
            }
        }
    };
    notify(100.0, format!("{name}: {}", obs.status)).await;
    Ok(obs)
}

/// When the next progress heartbeat is due: 50 ms, then doubling up to 1 s.
fn next_heartbeat(previous: Duration) -> Duration {
    if previous.is_zero() {
        Duration::from_millis(50)
    } else {
        (previous * 2).min(Duration::from_secs(1))
    }
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> InitializeResult {
        let capabilities: ServerCapabilities = serde_json::from_value(
            json!({"tools": {"listChanged": true}, "logging": {}, "resources": {}}),
        )
        .expect("static capabilities");
        InitializeResult::new(capabilities)
            .with_server_info(Implementation::new("toolhost", env!("CARGO_PKG_VERSION")))
            .with_instructions(toolhost::messages::SERVER_INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        cx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let scope = self.scope(cx.extensions.get::<http::request::Parts>())?;
        let generation = self.state.current();
        let revealed = self
            .revealed(
                cx.extensions.get::<http::request::Parts>(),
                is_stateless(&cx),
            )
            .await;
        let mut visible: Vec<(String, &Value)> = generation
            .tools
            .iter()
            .filter(|(name, _)| scope.allows(name))
            .filter(|(name, _)| !self.state.lazy || revealed.contains(name))
            .map(|(name, def)| (name.clone(), def))
            .collect();
        // The script runner's description declares the tools this session
        // may call from a script (TypeScript, from their schemas).
        let script_def;
        if let Some(at) = visible.iter().position(|(n, _)| n == toolhost::SCRIPT_TOOL) {
            let catalog = generation.host.catalog();
            let callable = generation
                .tools
                .iter()
                .filter(|(name, _)| scope.allows(name))
                .filter_map(|(name, _)| catalog.get(name))
                .map(|t| &t.descriptor);
            let decl = toolhost::script_declarations(callable);
            script_def = listing::with_description_note(visible[at].1, &decl);
            visible[at].1 = &script_def;
        }
        // The host's own tools this session is served: `find_tools` in lazy
        // mode (first of all), `delegate` (it shadows a plugin's of that
        // name), `artifact_view` once a result of this session spilled
        // (until then it would only cost every turn tokens).
        let host_defs: Vec<(HostTool, Value)> = generation
            .host
            .host_tools(&scope.session)
            .filter(|t| match t {
                HostTool::FindTools => self.state.lazy,
                HostTool::Delegate => true,
                HostTool::ArtifactView => revealed.contains(t.name()),
            })
            .map(|t| (t, t.definition()))
            .collect();
        for (tool, def) in &host_defs {
            let name = tool.name();
            visible.retain(|(n, _)| n != name);
            let at = visible.partition_point(|(n, _)| n.as_str() < name);
            visible.insert(at, (name.to_string(), def));
        }
        let cursor = request.as_ref().and_then(|r| r.cursor.as_deref());
        let (page, next) = listing::page(&visible, cursor, self.state.page_size)
            .map_err(|_| ErrorData::invalid_params("invalid cursor", None))?;
        let mut result = json!({ "tools": page });
        result["_meta"] = json!({
            listing::META_ENVELOPE_SCHEMA: toolhost::OBSERVATION_SCHEMA_ID,
        });
        // A session sees the refusals of tools it could call; a refused
        // plugin whose tools are unknown only when it may call anything.
        let refused = listing::refused(generation.host.catalog(), &|tool| match tool {
            Some(t) => scope.allows(t),
            None => scope.allows_every_tool(),
        });
        if !refused.is_empty() {
            result["_meta"][listing::META_REFUSED] = Value::Array(refused);
        }
        if let Some(next) = next {
            result["nextCursor"] = Value::String(next);
        }
        if is_stateless(&cx) {
            result["resultType"] = json!("complete");
            result["ttlMs"] = json!(LIST_TTL_MS);
            result["cacheScope"] = json!("private");
        }
        from_json(result)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let req = CallRequest {
            request_state: request.request_state.as_deref(),
            input_responses: request.input_responses.as_ref(),
            ..CallRequest::of(&cx)
        };
        // Boxed: rmcp spawns a task per request holding this future, and
        // the call's state machine inline made every spawn and poll copy
        // kilobytes.
        Box::pin(self.call(&req, &request.name, request.arguments)).await
    }

    /// The published definition; rmcp checks `Mcp-Param-*` headers
    /// (SEP-2243) of HTTP requests against its `x-mcp-header` properties.
    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.state.current().rmcp_tool(name)
    }

    /// `resources/read` of a spilled result (`toolhost://artifacts/<id>`,
    /// the `resource_link` of its call): the whole output, to the token
    /// that made the call and no other.
    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let scope = self.scope(cx.extensions.get::<http::request::Parts>())?;
        let generation = self.state.current();
        let uri = request.uri;
        let not_found =
            |why: String| ErrorData::resource_not_found(why, Some(json!({ "uri": uri.clone() })));
        if generation.host.artifacts().is_none() {
            return Err(not_found(format!("no resource `{uri}`")));
        }
        let Some(id) = Artifacts::id_of_uri(&uri) else {
            return Err(not_found(format!(
                "no resource `{uri}`: this server serves only {}<id> of spilled results",
                Artifacts::URI_PREFIX
            )));
        };
        let id = id.to_string();
        let read = crate::offload::blocking(crate::offload::STORE_WAIT, {
            let generation = generation.clone();
            move || {
                scope.session.check_live(generation.host.budgets())?;
                let owner = scope.session.grant().binding_hex();
                Ok(match generation.host.artifacts() {
                    Some(store) => store.read(&id, &owner),
                    None => Err(ArtifactError::NotFound(id)),
                })
            }
        })
        .await;
        let artifact = match read {
            Err(e) => return Err(ErrorData::internal_error(e.to_string(), None)),
            Ok(Err(info)) => {
                let info: Box<toolhost::ErrorInfo> = info;
                return Err(ErrorData::invalid_request(info.message.clone(), None));
            }
            Ok(Ok(read)) => read,
        };
        let artifact = artifact.map_err(|e| match e {
            ArtifactError::NotOwner(_) => ErrorData::invalid_request(
                e.to_string(),
                Some(json!({"uri": uri.clone(), "code": "denied"})),
            ),
            ArtifactError::Io { .. } => ErrorData::internal_error(e.to_string(), None),
            _ => not_found(e.to_string()),
        })?;
        let text = String::from_utf8(artifact.content)
            .map_err(|_| ErrorData::internal_error("the artifact is not UTF-8", None))?;
        let mut result = ReadResourceResult::new(vec![ResourceContents::TextResourceContents {
            uri: uri.clone(),
            mime_type: Some("application/json".into()),
            text,
            meta: None,
        }]);
        if is_stateless(&cx) {
            // One token's data: cached by that client only, and only while
            // the artifact is kept.
            result.ttl_ms = Some(0);
            result.cache_scope = Some(rmcp::model::CacheScope::Private);
        }
        Ok(result.into())
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        *self.log_level.lock().unwrap_or_else(|e| e.into_inner()) = Some(request.level);
        Ok(())
    }

    async fn on_cancelled(
        &self,
        notification: CancelledNotificationParam,
        _cx: NotificationContext<RoleServer>,
    ) {
        // rmcp has already cancelled the request if it runs it.
        let Some(id) = notification.request_id else {
            return;
        };
        let calls = self
            .direct_calls
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(ct) = calls.get(&id) {
            ct.cancel();
        }
    }

    async fn on_initialized(&self, cx: NotificationContext<RoleServer>) {
        let session_id = cx
            .extensions
            .get::<http::request::Parts>()
            .and_then(|p| p.headers.get(HEADER_SESSION_ID))
            .and_then(|v| v.to_str().ok());
        if let (Some(on_ready), Some(id)) = (&self.on_ready, session_id) {
            on_ready(id, self, &cx.peer);
        }
        // 2025-11-25 sessions: forward catalog changes to this peer until
        // the session ends (its handler is dropped) or the peer goes away.
        let peer = cx.peer.clone();
        let mut changes = self.state.changed.subscribe();
        let mut alive = self.alive.subscribe();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    // Only ever an error: the session's handler is gone.
                    _ = alive.changed() => break,
                    change = changes.recv() => match change {
                        Ok(()) | Err(RecvError::Lagged(_)) => {
                            if peer.notify_tool_list_changed().await.is_err() {
                                break;
                            }
                        }
                        Err(RecvError::Closed) => break,
                    },
                }
            }
        });
    }

    fn accepted_subscription_filter(
        &self,
        _requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(SubscriptionFilter::builder().tools_list_changed().build())
    }

    async fn listen(&self, subscription: SubscriptionContext) -> Result<(), ErrorData> {
        let mut changes = self.state.changed.subscribe();
        loop {
            tokio::select! {
                _ = subscription.cancelled() => return Ok(()),
                change = changes.recv() => match change {
                    Ok(()) | Err(RecvError::Lagged(_)) => {
                        if subscription.sink().notify_tool_list_changed().await.is_err() {
                            return Ok(());
                        }
                    }
                    Err(RecvError::Closed) => return Ok(()),
                },
            }
        }
    }
}

/// Serves one client on stdin/stdout until stdin closes.
pub(super) async fn serve_stdio(
    state: Arc<State>,
    scope: Arc<SessionScope>,
    max_message_bytes: usize,
) -> anyhow::Result<()> {
    // Non-blocking pipes on the reactor when stdin/stdout are FIFOs (as MCP
    // clients launch servers): no hop through the blocking pool per message.
    let (stdin, stdout) = rmcp::transport::io::stdio_pipes();
    let kept = KeptArguments::default();
    let stdin = Tap::new(stdin, max_message_bytes, kept.clone());
    // toolhost writes the answers itself (see `compact_out`).
    let (out, rmcp_out) = compact_out::split(stdout);
    let transport = UniqueIds::new(CompactOut::new(
        AsyncRwTransport::new(stdin, rmcp_out).with_max_line_length(max_message_bytes),
        out,
    ));
    let shutdown = state.shutdown.clone();
    let grace = state.shutdown_grace;
    let mut server = McpServer::new(state, Some(scope)).with_warm_thread();
    server.kept = kept;
    let running = server
        .serve(transport)
        .await
        .map_err(|e| anyhow::anyhow!("MCP session failed to start: {e}"))?;
    let cancel = running.cancellation_token();
    let waiting = running.waiting();
    tokio::pin!(waiting);
    tokio::select! {
        ended = &mut waiting => {
            ended.map_err(|e| anyhow::anyhow!("MCP session ended with an error: {e}"))?;
        }
        () = shutdown.wait() => {
            // Read no further requests; let the running calls answer.
            log!("toolhost: stopping: {} call(s) running", shutdown.in_flight());
            if !shutdown.drained(grace).await {
                warn!("toolhost: calls still running after the grace period; stopping anyway");
            }
            cancel.cancel();
            let _ = waiting.await;
        }
    }
    Ok(())
}
