//! The `toolhost serve` command line, turned into the MCP crate's
//! [`ServeOptions`].

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use toolhost::{Artifacts, ClientConfig};
use toolhost_mcp::{ServeOptions, Shutdown};

/// `toolhost serve` options (the command line of [`ServeOptions`]).
#[derive(clap::Args, Debug, Clone)]
pub struct ServeArgs {
    /// Speak MCP over stdin/stdout (newline-delimited JSON-RPC). One of
    /// --stdio and --http is needed.
    #[arg(long, conflicts_with = "http")]
    pub stdio: bool,
    /// Serve Streamable HTTP at ADDR (e.g. 127.0.0.1:8080), path /mcp.
    #[arg(long, value_name = "ADDR")]
    pub http: Option<SocketAddr>,
    /// Allow binding --http to a non-loopback address.
    #[arg(long)]
    pub allow_remote: bool,
    /// Workspace root; argument paths are relative to it.
    #[arg(long, default_value = ".")]
    pub workspace: PathBuf,
    /// Grant read access to a path under the workspace (repeatable).
    #[arg(long = "allow-read", value_name = "PATH")]
    pub allow_read: Vec<String>,
    /// Grant read and write access to a path under the workspace (repeatable).
    #[arg(long = "allow-write", value_name = "PATH")]
    pub allow_write: Vec<String>,
    /// Grant a network origin, `scheme://host[:port]` (repeatable).
    #[arg(long = "allow-net", value_name = "ORIGIN")]
    pub allow_net: Vec<String>,
    /// Grant a native program, by name (looked up on PATH) or absolute
    /// path (repeatable).
    #[arg(long = "allow-exec", value_name = "PROGRAM")]
    pub allow_exec: Vec<String>,
    /// Wall-clock limit of every call (default: each tool's own).
    #[arg(long, value_name = "N")]
    pub timeout_ms: Option<u64>,
    /// Fuel limit of every call (default: 2e9).
    #[arg(long, value_name = "N")]
    pub fuel: Option<u64>,
    /// Memory limit of every call, in MiB (default: 256).
    #[arg(long, value_name = "N")]
    pub memory_mb: Option<u64>,
    /// Output size limit of every call (default: each tool's own).
    #[arg(long, value_name = "N")]
    pub max_output_bytes: Option<usize>,
    /// Capability token of the stdio client (HTTP clients send theirs as
    /// `Authorization: Bearer …`). Verified with the host's root key.
    #[arg(long, value_name = "TOKEN", env = "TOOLHOST_TOKEN")]
    pub token: Option<String>,
    /// Refuse clients without a valid capability token (HTTP 401) instead of
    /// giving them the command-line grants.
    #[arg(long)]
    pub require_token: bool,
    /// Give clients on the command-line grants the `delegate` tool (they
    /// then run under a token minted from those grants with the `delegate`
    /// right; needs the root key).
    #[arg(long)]
    pub allow_delegate: bool,
    /// Let clients on the command-line grants approve their own plans of
    /// irreversible calls (the `self_approve` right): a plan token from
    /// their own dry run then runs the call with no person asked. Without
    /// it such a call ends `approval_pending` until a person runs
    /// `toolhost approvals approve`.
    #[arg(long)]
    pub self_approve: bool,
    /// Let clients on the command-line grants run scripts (the `script`
    /// right): `run_script`, whose inner tool calls run under the same
    /// grants, each checked, budgeted and journaled.
    #[arg(long)]
    pub allow_script: bool,
    /// Largest incoming message, in bytes.
    #[arg(long, value_name = "N", default_value_t = toolhost_mcp::DEFAULT_MAX_MESSAGE_BYTES)]
    pub max_message_bytes: usize,
    /// Tools per tools/list page.
    #[arg(long, value_name = "N", default_value_t = toolhost_mcp::DEFAULT_PAGE_SIZE)]
    pub page_size: usize,
    /// Lazy discovery: a session's tools/list starts with `find_tools`
    /// alone; the tools it finds join that session's list, announced with
    /// notifications/tools/list_changed.
    #[arg(long)]
    pub lazy_tools: bool,
    /// How long the plugin directory must stay quiet after a change before
    /// the catalog is reloaded (and the polling period where the OS gives
    /// no change notifications), in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 1000)]
    pub watch_ms: u64,
    /// HTTP: most sessions (2025-11-25 handshakes) open at once.
    #[arg(long, value_name = "N", default_value_t = toolhost_mcp::DEFAULT_MAX_SESSIONS)]
    pub max_sessions: usize,
    /// HTTP: most sessions open at once per token (a token made from
    /// another with an id of its own has its own allowance, and all the
    /// tokens made from one minted token share one more; clients without a
    /// token share one allowance).
    #[arg(long, value_name = "N", default_value_t = toolhost_mcp::DEFAULT_MAX_SESSIONS_PER_TOKEN)]
    pub max_sessions_per_token: usize,
    /// HTTP: a session with nothing running for this long is closed.
    #[arg(long, value_name = "MS", default_value_t = toolhost_mcp::DEFAULT_SESSION_IDLE_MS)]
    pub session_idle_ms: u64,
    /// HTTP: time a client has to send a request's headers, and again its
    /// body; also how long an idle connection is kept.
    #[arg(long, value_name = "MS", default_value_t = toolhost_mcp::DEFAULT_REQUEST_TIMEOUT_MS)]
    pub request_timeout_ms: u64,
    /// On SIGTERM or SIGINT, how long running calls may take to finish
    /// (new ones are refused; a second signal stops at once).
    #[arg(long, value_name = "MS", default_value_t = 30_000)]
    pub shutdown_grace_ms: u64,
    /// HTTP: serve the operator's console at /console (live calls,
    /// approvals, in-doubt records, tokens, plugins, health). A browser
    /// logs in with a token from `toolhost cap mint --console` (or the text
    /// of --console-token-file).
    #[arg(long, requires = "http")]
    pub console: bool,
    /// A file whose text (at least 16 characters) also opens the console,
    /// besides console tokens.
    #[arg(long, value_name = "FILE", requires = "console")]
    pub console_token_file: Option<PathBuf>,
}

impl ServeArgs {
    /// The server's options: these flags, where oversized results are kept,
    /// and how a sub-agent reaches this host.
    pub fn into_options(
        self,
        artifacts: Arc<Artifacts>,
        client: ClientConfig,
        shutdown: Arc<Shutdown>,
        console: Option<toolhost_mcp::ConsoleOptions>,
    ) -> ServeOptions {
        ServeOptions {
            console,
            artifacts: Some(artifacts),
            client,
            shutdown: Some(shutdown),
            shutdown_grace: Duration::from_millis(self.shutdown_grace_ms),
            stdio: self.stdio,
            http: self.http,
            allow_remote: self.allow_remote,
            workspace: self.workspace,
            allow_read: self.allow_read,
            allow_write: self.allow_write,
            allow_net: self.allow_net,
            allow_exec: self.allow_exec,
            timeout_ms: self.timeout_ms,
            fuel: self.fuel,
            memory_mb: self.memory_mb,
            max_output_bytes: self.max_output_bytes,
            token: self.token,
            require_token: self.require_token,
            allow_delegate: self.allow_delegate,
            self_approve: self.self_approve,
            allow_script: self.allow_script,
            max_message_bytes: self.max_message_bytes,
            page_size: self.page_size,
            lazy_tools: self.lazy_tools,
            watch_ms: self.watch_ms,
            max_sessions: self.max_sessions,
            max_sessions_per_token: self.max_sessions_per_token,
            session_idle_ms: self.session_idle_ms,
            request_timeout_ms: self.request_timeout_ms,
        }
    }
}
