//! `toolhost serve`: the catalog as an MCP server, over stdio or Streamable
//! HTTP.
//!
//! A thin adapter on the official Rust SDK (`rmcp`, pinned in
//! `crates/mcp/Cargo.toml`); every rmcp type stays inside this crate. It serves
//! both protocol eras rmcp speaks: the 2025-11-25 handshake (`initialize`)
//! and the stateless 2026-07-28 revision (`server/discover`, per-request
//! `_meta`, `resultType`, list cache hints, `subscriptions/listen`).
//!
//! - `tools/list`: every tool the session's [`SessionScope`] allows, in name
//!   order, paginated by an opaque cursor (see [`listing`]). Annotations come
//!   from the declared side-effect level; all four hints are always emitted.
//!   `outputSchema` is the tool's own output schema: `structuredContent` is
//!   the tool's output, the model reads the observation's `text` (the last
//!   text block) and the envelope is in the result's `_meta` (see
//!   [`listing`]). The listing is the same bytes in every session with the
//!   same plugins and grants (name order, no per-session fields).
//! - `tools/call`: [`Host::run`] off the runtime thread (first on the
//!   server's call thread, kept warm between calls, `warm`), with the
//!   client's own argument text when rmcp's parse would have collapsed a
//!   duplicate key (`raw_args`); over HTTP a plain stateless call skips
//!   rmcp's per-request service for the same handler code (`direct`). Any
//!   non-`ok` observation is `isError: true`; an unknown (or hidden) tool is
//!   JSON-RPC `-32602`. With a progress token the server sends
//!   `notifications/progress` while the call runs (0 at the start, the share
//!   of the wall-clock budget used so far, 100 at the end);
//!   `notifications/cancelled` stops the running instance (a side-effecting
//!   call stopped that way is `unknown`). Side-effecting calls go through
//!   the record store under the idempotency key the client sends in
//!   `_meta`, and irreversible ones need the plan token of a dry run (see
//!   [`call_meta`]). Content blocks: see [`listing::content_blocks`].
//! - Logging: a call's captured stderr lines are forwarded as
//!   `notifications/message` (level `info`, logger = tool name) after the
//!   instance ends — on 2025-11-25 sessions unless `logging/setLevel` raised
//!   the level above `info`, on 2026-07-28 requests only when `_meta` carries
//!   a `logLevel` of `info` or lower.
//! - The plugin directory is watched (OS notifications, or polling every
//!   `--watch-ms` where there are none; see `watch.rs`); a changed set
//!   of `*.wasm` files (added, removed, replaced) reloads the catalog and sends `notifications/tools/list_changed` to every session
//!   (2025-11-25) and every `subscriptions/listen` stream (2026-07-28).
//!
//! Bounds: over HTTP, sessions are capped in total (`--max-sessions`) and
//! per token (`--max-sessions-per-token`), closed after `--session-idle-ms`
//! without activity, and a client gets `--request-timeout-ms` to send a
//! request's headers and again its body (see `sessions` and `http`).
//! Over stdio, a request reusing the id of one still running is refused
//! with a JSON-RPC error and does not run (`request_ids`).
//!
//! Security: HTTP binds to loopback unless `--allow-remote`; `Origin` must be
//! absent or `http(s)://localhost|127.0.0.1|[::1]` (any port), else 403; the
//! `Host` header must be a loopback name (both on `/mcp` and `/metrics`; the
//! latter also needs the `metrics` right, see `http`); a request whose token
//! is revoked or expired is 401; a message over `--max-message-bytes`
//! (default 4 MiB) is refused (HTTP 413; on stdio the line is dropped
//! unanswered, since its id cannot be read, and the session goes on). Logs
//! go to stderr. Who may do what is decided per request by a
//! [`SessionPolicy`] from the bearer token: [`TokenPolicy`] binds a client
//! that presents a capability token to a session on it (fewer tools, the
//! token's grants and limits), and gives the others the command-line grants
//! (or 401 with `--require-token`).

/// A line on stderr; a closed stderr is ignored rather than fatal.
/// The server's own log lines go through `tracing` (filtered by
/// `RUST_LOG`; the binary installs the subscriber): `log!` at info,
/// `warn!` for problems.
macro_rules! log {
    ($($arg:tt)*) => {{
        tracing::info!($($arg)*);
    }};
}

macro_rules! warn {
    ($($arg:tt)*) => {{
        tracing::warn!($($arg)*);
    }};
}

mod ask;
pub mod call_meta;
mod compact_out;
mod console;
mod direct;
mod elicit;
mod http;
pub mod listing;
mod offload;
mod raw_args;
mod request_ids;
mod server;
mod sessions;
mod shutdown;
mod warm;
mod watch;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde_json::Value;
use tokio::sync::broadcast;

use toolhost::{
    CallOptions, Catalog, EffectGuard, Grants, Host, HostTool, Keyring, LoadEvent, RootKey,
    Sandbox, Session, Source, Verifier, Workspace,
};

pub use shutdown::Shutdown;
/// How the operator's console is set up (`serve --http --console`).
pub use toolhost_console::Options as ConsoleOptions;

/// Milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Default cap on one incoming message.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 4 << 20;
/// Default `tools/list` page size.
pub const DEFAULT_PAGE_SIZE: usize = 100;
/// How long a 2026-07-28 client may cache a `tools/list` page (`ttlMs`).
pub const LIST_TTL_MS: u64 = 10_000;

/// How to serve: transport, grants, limits and HTTP bounds (the `toolhost
/// serve` command line fills it in).
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Where results over their output limit are kept
    /// ([`toolhost::Artifacts`]); the binary always gives one. Without it such
    /// a result is `output_too_large`.
    pub artifacts: Option<Arc<toolhost::Artifacts>>,
    /// Speak MCP over stdin/stdout (newline-delimited JSON-RPC). One of
    /// --stdio and --http is needed.
    pub stdio: bool,
    /// Serve Streamable HTTP at ADDR (e.g. 127.0.0.1:8080), path /mcp.
    pub http: Option<SocketAddr>,
    /// Allow binding --http to a non-loopback address.
    pub allow_remote: bool,
    /// Workspace root; argument paths are relative to it.
    pub workspace: PathBuf,
    /// Grant read access to a path under the workspace (repeatable).
    pub allow_read: Vec<String>,
    /// Grant read and write access to a path under the workspace (repeatable).
    pub allow_write: Vec<String>,
    /// Grant a network origin, `scheme://host[:port]` (repeatable).
    pub allow_net: Vec<String>,
    /// Grant a native program, by name (looked up on PATH) or absolute
    /// path (repeatable).
    pub allow_exec: Vec<String>,
    /// Wall-clock limit of every call (default: each tool's own).
    pub timeout_ms: Option<u64>,
    /// Fuel limit of every call (default: 2e9).
    pub fuel: Option<u64>,
    /// Memory limit of every call, in MiB (default: 256).
    pub memory_mb: Option<u64>,
    /// Output size limit of every call (default: each tool's own).
    pub max_output_bytes: Option<usize>,
    /// Capability token of the stdio client (HTTP clients send theirs as
    /// `Authorization: Bearer …`). Verified with the host's root key.
    pub token: Option<String>,
    /// Refuse clients without a valid capability token (HTTP 401) instead of
    /// giving them the command-line grants.
    pub require_token: bool,
    /// Give clients on the command-line grants the `delegate` tool (they
    /// then run under a token minted from those grants with the `delegate`
    /// right; needs the root key).
    pub allow_delegate: bool,
    /// Let clients on the command-line grants approve their own plans of
    /// irreversible calls (the `self_approve` right): a plan token from
    /// their own dry run then runs the call with no person asked. Without
    /// it such a call ends `approval_pending` until a person runs
    /// `toolhost approvals approve`.
    pub self_approve: bool,
    /// Let clients on the command-line grants run scripts (the `script`
    /// right): `run_script`, whose inner calls run under the same grants.
    pub allow_script: bool,
    /// How the `delegate` tool's results tell a sub-agent to reach this
    /// host (filled in by the command line).
    pub client: toolhost::ClientConfig,
    /// Largest incoming message, in bytes.
    pub max_message_bytes: usize,
    /// Tools per tools/list page.
    pub page_size: usize,
    /// Lazy discovery: a session's tools/list starts with `find_tools`
    /// alone; the tools it finds join that session's list, announced with
    /// notifications/tools/list_changed.
    pub lazy_tools: bool,
    /// How long the plugin directory must stay quiet after a change before
    /// the catalog is reloaded (and the polling period where the OS gives
    /// no change notifications), in milliseconds.
    pub watch_ms: u64,
    /// HTTP: most sessions (2025-11-25 handshakes) open at once.
    pub max_sessions: usize,
    /// HTTP: most sessions open at once per token (a token made from
    /// another with an id of its own has its own allowance, and all the
    /// tokens made from one minted token share one more; clients without a
    /// token share one allowance).
    pub max_sessions_per_token: usize,
    /// HTTP: a session with nothing running for this long is closed.
    pub session_idle_ms: u64,
    /// HTTP: time a client has to send a request's headers, and again its
    /// body; also how long an idle connection is kept.
    pub request_timeout_ms: u64,
    /// A stop asked from outside (the binary's signal handler): the server
    /// drains and returns (see [`Shutdown`]).
    pub shutdown: Option<Arc<Shutdown>>,
    /// How long running calls may take to finish after a stop is asked.
    pub shutdown_grace: Duration,
    /// HTTP: serve the operator's console at `/console` (see
    /// [`toolhost_console`]).
    pub console: Option<ConsoleOptions>,
}

/// Default `--max-sessions`.
pub const DEFAULT_MAX_SESSIONS: usize = 1024;
/// Default `--max-sessions-per-token`.
pub const DEFAULT_MAX_SESSIONS_PER_TOKEN: usize = 64;
/// Default `--session-idle-ms`: 5 minutes.
pub const DEFAULT_SESSION_IDLE_MS: u64 = 5 * 60 * 1000;
/// Default `--request-timeout-ms`: 30 seconds.
pub const DEFAULT_REQUEST_TIMEOUT_MS: u64 = 30_000;

/// Where the catalog comes from; re-read whenever the directory changes.
#[derive(Debug, Clone, Default)]
pub struct Plugins {
    /// Load the embedded reference tools.
    pub builtin: bool,
    /// Every `*.wasm` here (watched).
    pub dir: Option<PathBuf>,
    /// Single component files, each maybe under a namespace
    /// ([`toolhost::toolname`]).
    pub files: Vec<toolhost::PluginSpec>,
    /// The trust policy third-party plugins are judged by on every load
    /// (the lock and signers are re-read each time).
    pub trust: Option<toolhost::TrustPolicy>,
}

impl Plugins {
    fn sources(&self) -> Vec<Source> {
        let mut sources = Vec::new();
        if self.builtin {
            sources.push(Source::reference());
            sources.push(Source::script());
        }
        if let Some(dir) = &self.dir {
            match Source::dir(dir) {
                Ok(s) => sources.extend(s),
                Err(e) => log!("toolhost: cannot read {}: {e}", dir.display()),
            }
        }
        sources.extend(self.files.iter().cloned().map(Source::from));
        sources
    }
}

/// What one client session may see and touch: a session on a verified
/// capability token, the one the client presented or the one minted from
/// the command-line grants for clients without a token.
#[derive(Clone)]
pub struct SessionScope {
    pub session: Arc<Session>,
    /// The session is the command-line grants' (a client that presented
    /// no token): such clients count as one owner for the session limits.
    pub anonymous: bool,
}

impl SessionScope {
    /// Whether the session may see and call `tool`.
    pub fn allows(&self, tool: &str) -> bool {
        if HostTool::of(tool) == Some(HostTool::Delegate) && self.may_delegate() {
            return true;
        }
        self.session.grant().allows_tool(tool)
    }

    /// Whether the session may call every tool (its token says `tool=*`).
    pub fn allows_every_tool(&self) -> bool {
        toolhost::ToolPattern::parse("*").is_ok_and(|all| self.session.grant().tools().covers(&all))
    }

    /// Whether the session gets the host's `delegate` tool (its token holds
    /// the `delegate` right; see [`Session::may_delegate`]).
    pub fn may_delegate(&self) -> bool {
        self.session.may_delegate()
    }
}

/// A request the policy refused (HTTP 401).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unauthorized(pub String);

/// Decides, for every request, which scope a client gets from its bearer
/// token (`Authorization: Bearer …` over HTTP; `None` on stdio or without
/// the header). A capability-token policy plugs in here: verify the token,
/// derive the grants and the visible tools from its caveats.
pub trait SessionPolicy: Send + Sync + 'static {
    fn scope_for(&self, bearer: Option<&str>) -> Result<Arc<SessionScope>, Unauthorized>;
}

/// Capability tokens: a client presenting a bearer token gets a session
/// bound to it (verified with the host's root key); a client without one
/// gets `fallback`, or 401 when there is none.
///
/// Verified sessions are cached by token text, least recently used first
/// out ([`MAX_CACHED_SESSIONS`]): the cache saves verifying a token on
/// every request and holds nothing that matters for security, since the
/// `max_calls` counts live host-wide ([`toolhost::BudgetLedger`]) and a token
/// evicted or seen again under new text counts against the same caveats.
pub struct TokenPolicy {
    pub verifier: Box<dyn Verifier + Send + Sync>,
    /// The workspace tokens' path prefixes are relative to.
    pub workspace: PathBuf,
    pub fallback: Option<Arc<SessionScope>>,
    sessions: Mutex<SessionCache>,
}

/// Most cached token sessions; the least recently used goes first.
pub const MAX_CACHED_SESSIONS: usize = 1024;

/// Verified sessions by token text, with least-recently-used eviction.
#[derive(Default)]
struct SessionCache {
    by_token: HashMap<String, (Arc<SessionScope>, u64)>,
    /// Token texts by last use.
    by_use: std::collections::BTreeMap<u64, String>,
    clock: u64,
}

impl SessionCache {
    fn get(&mut self, token: &str) -> Option<Arc<SessionScope>> {
        self.clock += 1;
        let now = self.clock;
        let (scope, used) = self.by_token.get_mut(token)?;
        self.by_use.remove(used);
        *used = now;
        self.by_use.insert(now, token.to_string());
        Some(scope.clone())
    }

    fn insert(&mut self, token: &str, scope: Arc<SessionScope>) {
        while self.by_token.len() >= MAX_CACHED_SESSIONS {
            let Some((_, oldest)) = self.by_use.pop_first() else {
                break;
            };
            self.by_token.remove(&oldest);
        }
        self.clock += 1;
        if let Some((_, used)) = self.by_token.insert(token.to_string(), (scope, self.clock)) {
            self.by_use.remove(&used);
        }
        self.by_use.insert(self.clock, token.to_string());
    }
}

impl TokenPolicy {
    pub fn new(
        verifier: Box<dyn Verifier + Send + Sync>,
        workspace: PathBuf,
        fallback: Option<Arc<SessionScope>>,
    ) -> TokenPolicy {
        TokenPolicy {
            verifier,
            workspace,
            fallback,
            sessions: Mutex::new(SessionCache::default()),
        }
    }
}

impl SessionPolicy for TokenPolicy {
    fn scope_for(&self, bearer: Option<&str>) -> Result<Arc<SessionScope>, Unauthorized> {
        let Some(token) = bearer.filter(|t| !t.is_empty()) else {
            return self
                .fallback
                .clone()
                .ok_or_else(|| Unauthorized("a capability token is required".into()));
        };
        let mut cache = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(scope) = cache.get(token) {
            return Ok(scope.clone());
        }
        let workspace =
            Workspace::open(&self.workspace).map_err(|e| Unauthorized(e.to_string()))?;
        let session = Session::open(self.verifier.as_ref(), token, workspace)
            .map_err(|e| Unauthorized(e.to_string()))?;
        let scope = Arc::new(SessionScope {
            session: Arc::new(session),
            anonymous: false,
        });
        cache.insert(token, scope.clone());
        Ok(scope)
    }
}

/// One loaded catalog, with its published definitions.
pub(crate) struct Generation {
    pub host: Host,
    /// MCP `Tool` objects in name order.
    pub tools: Vec<(String, Value)>,
    /// The same as rmcp values (for its per-request header checks), parsed
    /// once per catalog rather than per request.
    parsed: Vec<Option<rmcp::model::Tool>>,
    /// Per tool, whether its input schema declares `Mcp-Param-*` headers
    /// (`x-mcp-header`): rmcp checks such calls' headers (see `direct`).
    header_params: Vec<bool>,
    /// Digest of every definition, to tell whether a reload changed anything.
    pub fingerprint: String,
}

impl Generation {
    fn new(host: Host) -> Generation {
        let tools: Vec<(String, Value)> = host
            .catalog()
            .tools()
            .map(|t| (t.descriptor.name.clone(), listing::tool_definition(t)))
            .collect();
        let mut all = String::new();
        for (name, def) in &tools {
            all.push_str(name);
            all.push(' ');
            all.push_str(
                def["_meta"][listing::META_DEFINITION_SHA256]
                    .as_str()
                    .unwrap_or(""),
            );
            all.push('\n');
        }
        let fingerprint = {
            use sha2::Digest;
            hex::encode(sha2::Sha256::digest(all.as_bytes()))
        };
        let parsed = tools
            .iter()
            .map(|(_, def)| serde_json::from_value(def.clone()).ok())
            .collect();
        let header_params = tools
            .iter()
            .map(|(_, def)| direct::declares_header_params(&def["inputSchema"]))
            .collect();
        Generation {
            host,
            tools,
            parsed,
            header_params,
            fingerprint,
        }
    }

    /// Where `name` is in [`Generation::tools`] (and the lists beside it).
    fn position(&self, name: &str) -> Option<usize> {
        self.tools
            .binary_search_by(|(n, _)| n.as_str().cmp(name))
            .ok()
    }

    /// The published definition of `name` as an rmcp value.
    pub(crate) fn rmcp_tool(&self, name: &str) -> Option<rmcp::model::Tool> {
        self.parsed[self.position(name)?].clone()
    }

    /// Whether calls of `name` carry `Mcp-Param-*` headers (its published
    /// input schema declares one); false for a name not in the list.
    pub(crate) fn header_params(&self, name: &str) -> bool {
        self.position(name).is_some_and(|i| self.header_params[i])
    }
}

/// Shared by every session of one server.
pub(crate) struct State {
    current: RwLock<Arc<Generation>>,
    /// Fires after a reload that changed the tool list.
    pub changed: broadcast::Sender<()>,
    pub defaults: CallOptions,
    pub page_size: usize,
    /// `--lazy-tools`: sessions list `find_tools` and what it found.
    pub lazy: bool,
    /// The idempotency record store every generation's host uses.
    pub records: Option<EffectGuard>,
    /// The artifact store every generation's host spills to.
    pub artifacts: Option<Arc<toolhost::Artifacts>>,
    /// Where revealed tools are kept by token or session id, when the
    /// record store shares them between hosts ([`toolhost::RevealBackend`]).
    pub reveals: Option<Arc<dyn toolhost::RevealBackend>>,
    /// The journal, breaker and metrics every generation's host shares.
    pub recorder: toolhost::Recorder,
    /// What `delegate` results say about reaching this host.
    pub client: toolhost::ClientConfig,
    /// This server's MCP URL once it listens on HTTP.
    pub http_url: std::sync::OnceLock<String>,
    /// Calls running at once: two per core. Many more only make instances
    /// fight for the cores (and the allocator), each call getting slower;
    /// the rest wait their turn without holding a thread. (Two, not one, so
    /// that a slow call does not hold up every quick one.)
    pub running: tokio::sync::Semaphore,
    /// The permits `running` started with ([`call_slots`]).
    pub slots: usize,
    /// A stop asked from outside, and the calls still running.
    pub shutdown: Arc<Shutdown>,
    /// How long running calls may take to finish after a stop.
    pub shutdown_grace: Duration,
}

/// How many calls a server runs at once (the semaphore of each session's state): two per
/// core this process may use. A call holds its slot until it ends (a call
/// waiting for a person's approval gives it back while it waits), and its
/// deadline ends it whatever the guest waits on (clocks, polls, I/O; see
/// `sandbox::deadline`), so a sleeping call cannot keep its slot past it.
pub fn call_slots() -> usize {
    2 * std::thread::available_parallelism().map_or(2, |n| n.get())
}

impl State {
    pub fn current(&self) -> Arc<Generation> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Installs a new catalog; announces it when the tools changed.
    pub fn install(&self, next: Generation) -> bool {
        let changed = {
            let mut cur = self.current.write().unwrap_or_else(|e| e.into_inner());
            let changed = cur.fingerprint != next.fingerprint;
            *cur = Arc::new(next);
            changed
        };
        if changed {
            let _ = self.changed.send(());
        }
        changed
    }
}

fn load(
    sandbox: &Sandbox,
    plugins: &Plugins,
    records: Option<&EffectGuard>,
    recorder: &toolhost::Recorder,
    artifacts: Option<&Arc<toolhost::Artifacts>>,
    client: &toolhost::ClientConfig,
) -> Generation {
    let mut sources = plugins.sources();
    let trust = match plugins.trust.as_ref().map(|p| p.prepare()) {
        None => None,
        Some(Ok(t)) => Some(t),
        Some(Err(e)) => {
            // Nothing third-party is trusted without a readable policy.
            warn!("toolhost: trust policy: {e}; loading the built-in tools only");
            sources.retain(|s| matches!(s, Source::Embedded { .. }));
            None
        }
    };
    let catalog = Catalog::load_trusted(sandbox, &sources, trust.as_ref(), &|plugin, event| {
        toolhost::Metrics::note_load(&event);
        if let LoadEvent::Compiling { .. } = event {
            log!("{}", toolhost::messages::compiling(plugin));
        }
    });
    for problem in catalog.warnings() {
        warn!("toolhost: warning: {problem}");
    }
    for problem in catalog.problems() {
        match &problem.code {
            Some(_) => warn!("toolhost: refused: {problem}"),
            None => warn!("toolhost: warning: {problem}"),
        }
    }
    let mut host = Host::new(sandbox.clone(), catalog)
        .with_recorder(recorder.clone())
        .with_delegation(client.clone());
    if let Some(a) = artifacts {
        host = host.with_artifacts(a.clone());
    }
    Generation::new(match records {
        Some(r) => host.with_records(r.clone()),
        None => host,
    })
}

/// Runs `toolhost serve` until stdin closes (stdio) or the process is
/// stopped (HTTP). Every client runs under a verified token ([`TokenPolicy`]):
/// the one it presents (with a root key), else the one minted from the
/// command-line grants. With `records`, side-effecting calls follow the
/// side-effect policy (idempotency keys, records, approved plans; see
/// [`call_meta`]); without, they are refused (`denied`).
pub fn run(
    sandbox: Sandbox,
    plugins: Plugins,
    args: ServeOptions,
    root_ring: Option<Keyring>,
    records: Option<EffectGuard>,
    recorder: toolhost::Recorder,
) -> Result<()> {
    let workspace = Workspace::open(&args.workspace)
        .with_context(|| format!("opening workspace {}", args.workspace.display()))?;
    let read: Vec<&str> = args.allow_read.iter().map(String::as_str).collect();
    let write: Vec<&str> = args.allow_write.iter().map(String::as_str).collect();
    Grants::new(&workspace, &read, &write).context("checking --allow-read/--allow-write")?;
    let root_ring = root_ring.filter(|ring| !ring.is_empty());
    if args.allow_delegate && root_ring.is_none() {
        bail!("--allow-delegate needs the root key (--key-file or TOOLHOST_ROOT_KEY)")
    }
    if root_ring.is_none() && (args.require_token || args.token.is_some()) {
        bail!("capability tokens need the root key (--key-file or TOOLHOST_ROOT_KEY)")
    }
    // Every call runs under a verified token: clients without one get a
    // token minted from the command-line grants (with the `delegate` right
    // under --allow-delegate, so they can hand out narrower ones). Without
    // a root key the token is minted with a key of this process only, and
    // no client token can verify.
    // Tokens of any key of the ring verify; the first signs.
    let ring = match root_ring {
        Some(ring) => ring,
        None => {
            Keyring::new().with(RootKey::generate().context("a key for the command-line grants")?)
        }
    };
    let key = ring
        .primary()
        .cloned()
        .context("the root keyring is empty")?;
    let session = Session::from_command_line(
        &key,
        &workspace,
        toolhost::CommandLineGrants {
            read: &args.allow_read,
            write: &args.allow_write,
            net: &args.allow_net,
            exec: &args.allow_exec,
            delegate: args.allow_delegate,
            self_approve: args.self_approve,
            script: args.allow_script,
        },
    )
    .context("the command-line grants")?;
    let scope = Arc::new(SessionScope {
        session: Arc::new(session),
        anonymous: true,
    });
    let policy: Arc<dyn SessionPolicy> = Arc::new(TokenPolicy::new(
        Box::new(ring),
        args.workspace.clone(),
        (!args.require_token).then_some(scope),
    ));
    serve(sandbox, plugins, args, policy, records, recorder)
}

static SERVING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether [`serve`] got past its start (the catalog loaded, the runtime
/// running): an error after that is not a failure to start.
pub fn started() -> bool {
    SERVING.load(std::sync::atomic::Ordering::Relaxed)
}

/// [`run`] with a custom [`SessionPolicy`].
pub fn serve(
    sandbox: Sandbox,
    plugins: Plugins,
    args: ServeOptions,
    policy: Arc<dyn SessionPolicy>,
    records: Option<EffectGuard>,
    recorder: toolhost::Recorder,
) -> Result<()> {
    if let Some(addr) = args.http {
        if !addr.ip().is_loopback() && !args.allow_remote {
            bail!("refusing to serve on {addr}: not a loopback address (pass --allow-remote to allow it)");
        }
    }
    let first = load(
        &sandbox,
        &plugins,
        records.as_ref(),
        &recorder,
        args.artifacts.as_ref(),
        &args.client,
    );
    // A plugin named on the command line that does not load stops the
    // server at start (on a later reload it is only logged).
    let named: Vec<String> = plugins
        .files
        .iter()
        .map(|f| f.path.display().to_string())
        .collect();
    if let Some(p) = first
        .host
        .catalog()
        .problems()
        .iter()
        .find(|p| p.tool.is_none() && named.contains(&p.plugin))
    {
        bail!("--plugin {}: not loaded: {}", p.plugin, p.reason);
    }
    let slots = call_slots();
    let state = Arc::new(State {
        current: RwLock::new(Arc::new(first)),
        reveals: records.as_ref().and_then(|r| r.reveals()),
        records,
        artifacts: args.artifacts.clone(),
        recorder,
        client: args.client.clone(),
        http_url: std::sync::OnceLock::new(),
        changed: broadcast::channel(16).0,
        defaults: CallOptions {
            call_id: None,
            timeout_ms: args.timeout_ms,
            fuel: args.fuel,
            memory_mb: args.memory_mb,
            max_output_bytes: args.max_output_bytes,
            ..CallOptions::default()
        },
        page_size: args.page_size.max(1),
        lazy: args.lazy_tools,
        running: tokio::sync::Semaphore::new(slots),
        slots,
        shutdown: args.shutdown.clone().unwrap_or_default(),
        shutdown_grace: args.shutdown_grace,
    });
    if let Some(dir) = plugins.dir.clone() {
        watch::spawn(
            dir,
            Duration::from_millis(args.watch_ms.max(10)),
            sandbox.clone(),
            plugins.clone(),
            state.clone(),
        );
    }
    // One stdio client: a single-threaded runtime saves the cross-thread
    // wake-ups between rmcp's tasks; calls run on the blocking pool. HTTP
    // serves many clients at once: one worker per core.
    let rt = if args.http.is_some() {
        tokio::runtime::Builder::new_multi_thread()
    } else {
        tokio::runtime::Builder::new_current_thread()
    }
    .enable_all()
    .thread_name("toolhost-mcp")
    // Calls run on these threads (the blocking pool, or a connection's
    // task): a script's inner calls nest below it.
    .thread_stack_size(toolhost::CALL_THREAD_STACK)
    .build()
    .context("starting the async runtime")?;
    SERVING.store(true, std::sync::atomic::Ordering::Relaxed);
    let result = rt.block_on(async {
        match args.http {
            Some(addr) => {
                let limits = http::HttpLimits {
                    max_message_bytes: args.max_message_bytes,
                    request_timeout: Duration::from_millis(args.request_timeout_ms.max(1)),
                    sessions: sessions::SessionLimits {
                        max_total: args.max_sessions.max(1),
                        max_per_owner: args.max_sessions_per_token.max(1),
                        idle: Duration::from_millis(args.session_idle_ms.max(1)),
                    },
                };
                let console = args.console.clone().map(|options| {
                    toolhost_console::Console::new(
                        options,
                        Arc::new(console::ConsoleServing {
                            policy: policy.clone(),
                            state: state.clone(),
                        }),
                    )
                });
                http::serve(addr, args.allow_remote, limits, state, policy, console).await
            }
            None => {
                let scope = policy
                    .scope_for(args.token.as_deref())
                    .map_err(|e| anyhow::anyhow!("no scope for the stdio client: {}", e.0))?;
                server::serve_stdio(state, scope, args.max_message_bytes).await
            }
        }
    });
    // A call still running on a blocking thread must not hold the exit.
    rt.shutdown_timeout(Duration::from_millis(200));
    result
}
