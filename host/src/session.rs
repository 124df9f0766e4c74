//! Sessions: a caller bound to one verified capability token.
//!
//! A [`Session`] is what an agent (or sub-agent) holds: a workspace and a
//! [`Grant`] folded from a token the host verified. It decides
//!
//! - which tools the caller sees ([`Host::visible_tools`]): only those the
//!   token's `tool` caveats allow;
//! - each call's sandbox: mounts only for the token's `read`/`write`
//!   prefixes (writable only with the `write` right, and only for a tool that
//!   declares writes and is not read-only), network only to the token's
//!   origins that the tool also declares, fuel = min(tool, token ceiling),
//!   deadline = min(tool timeout, time left before expiry);
//! - and whether the call may happen at all: an expired token, or a session
//!   past its `max_calls`, gets a `denied` observation naming the caveat;
//!   the plugin never runs.
//!
//! ```no_run
//! # use toolhost::{capability::{Caveat, RootKey, Token}, session::Session, paths::Workspace};
//! # fn demo(host: &toolhost::pipeline::Host, key: &RootKey) -> Result<(), Box<dyn std::error::Error>> {
//! let token = Token::mint(key, &["tool=file_view".parse::<Caveat>()?, "right=read".parse()?, "read=src".parse()?])?;
//! let session = Session::open(key, &token.encode(), Workspace::open(".".as_ref())?)?;
//! let obs = host.call_in(&session, "file_view", r#"{"path":"src/lib.rs","offset":1,"limit":5}"#, &Default::default());
//! # Ok(()) }
//! ```

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::SystemTime;

use crate::capability::{CapError, Caveat, Grant, Keyring, RootKey, Token, WidenError};
use crate::catalog::Tool;
use crate::descriptor::SideEffect;
use crate::observation::{ErrorCode, Observation};
use crate::paths::{Grants, Workspace};
use crate::pipeline::{denial_error, CallOptions, Host, Scope};

/// Why a session could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    // The messages include the inner error's, so it is not also a `source`:
    // a chain printer (`{:#}`) then says it once, not `X: X`.
    #[error("the token is not valid: {0}")]
    Token(CapError),
    #[error("the workspace or a granted prefix is not usable: {0}")]
    Path(crate::paths::PathError),
}

impl From<CapError> for SessionError {
    fn from(e: CapError) -> Self {
        SessionError::Token(e)
    }
}

impl From<crate::paths::PathError> for SessionError {
    fn from(e: crate::paths::PathError) -> Self {
        SessionError::Path(e)
    }
}

/// A caller bound to a verified capability.
pub struct Session {
    workspace: Workspace,
    token: Token,
    grant: Grant,
    grants: Grants,
    net: Vec<String>,
    calls: AtomicU64,
}

/// Something that can verify tokens: a single key or a keyring.
pub trait Verifier {
    fn verify_token(&self, token: &Token, now: SystemTime) -> Result<Grant, CapError>;
}

impl Verifier for RootKey {
    fn verify_token(&self, token: &Token, now: SystemTime) -> Result<Grant, CapError> {
        self.verify(token, now)
    }
}

impl Verifier for Keyring {
    fn verify_token(&self, token: &Token, now: SystemTime) -> Result<Grant, CapError> {
        self.verify(token, now)
    }
}

impl Session {
    /// Decodes and verifies `token_text` and binds it to `workspace`.
    ///
    /// Token prefixes that are not existing directories are not mounted (a
    /// call naming a path under them is denied); the rest become the
    /// session's grants.
    pub fn open(
        verifier: &dyn Verifier,
        token_text: &str,
        workspace: Workspace,
    ) -> Result<Session, SessionError> {
        let token = Token::decode(token_text.trim())?;
        let grant = verifier.verify_token(&token, SystemTime::now())?;
        Session::bind(token, grant, workspace)
    }

    fn bind(token: Token, grant: Grant, workspace: Workspace) -> Result<Session, SessionError> {
        use crate::capability::Right;
        let rights = grant.rights();
        let mounted = |prefixes: &[crate::capability::RelPath], right: Right| -> Vec<String> {
            if !rights.contains(right) {
                return Vec::new();
            }
            prefixes
                .iter()
                // The capability module spells the root "", paths spells it ".".
                .map(|p| match p.as_str() {
                    "" => ".".to_string(),
                    s => s.to_string(),
                })
                .filter(|p| workspace.root().join(p).is_dir())
                .collect()
        };
        let read = mounted(grant.read_prefixes(), Right::Read);
        let write = mounted(grant.write_prefixes(), Right::Write);
        // Write implies read only with the read right too.
        let read_refs: Vec<&str> = read.iter().map(String::as_str).collect();
        let write_refs: Vec<&str> = write.iter().map(String::as_str).collect();
        let grants = Grants::new(&workspace, &read_refs, &write_refs)?;
        let net = if rights.contains(Right::Net) {
            grant
                .net_origins()
                .iter()
                .map(|o| o.as_str().to_string())
                .collect()
        } else {
            Vec::new()
        };
        Ok(Session {
            workspace,
            token,
            grant,
            grants,
            net,
            calls: AtomicU64::new(0),
        })
    }

    /// The folded capability.
    pub fn grant(&self) -> &Grant {
        &self.grant
    }

    /// The token this session holds.
    pub fn token(&self) -> &Token {
        &self.token
    }

    /// The workspace.
    pub fn workspace(&self) -> &Workspace {
        &self.workspace
    }

    /// A narrower session for a sub-agent: the token with `caveats`
    /// appended. Refuses, naming the component, any caveat that would widen
    /// this session's token. The child dies with the parent's expiry.
    pub fn delegate(&self, caveats: &[Caveat]) -> Result<(Session, String), WidenError> {
        let child = self.token.attenuate(caveats)?;
        let grant = child
            .grant_unverified()
            .map_err(|e| WidenError::Invalid(e.to_string()))?;
        let text = child.encode();
        let workspace = self.workspace.clone();
        let session = Session::bind(child, grant, workspace)
            .map_err(|e| WidenError::Invalid(e.to_string()))?;
        Ok((session, text))
    }

    /// Calls made so far in this session.
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }
}

impl Host {
    /// The tools this session may see, in name order.
    pub fn visible_tools<'a>(
        &'a self,
        session: &'a Session,
    ) -> impl Iterator<Item = &'a Arc<Tool>> {
        self.catalog()
            .tools()
            .filter(move |t| session.grant.allows_tool(&t.descriptor.name))
    }

    /// Runs one call for a session: the token decides what the call sees.
    pub fn call_in(
        &self,
        session: &Session,
        tool: &str,
        args: &str,
        opts: &CallOptions,
    ) -> Observation {
        self.call_in_cancellable(session, tool, args, opts, None)
    }

    /// [`call_in`](Self::call_in), stoppable with a cancel token.
    pub fn call_in_cancellable(
        &self,
        session: &Session,
        tool: &str,
        args: &str,
        opts: &CallOptions,
        cancel: Option<&crate::sandbox::CancelToken>,
    ) -> Observation {
        let call_id = opts
            .call_id
            .clone()
            .unwrap_or_else(crate::pipeline::new_call_id);
        let opts = CallOptions {
            call_id: Some(call_id.clone()),
            ..opts.clone()
        };
        // A tool outside the token is not in this caller's catalog.
        if !session.grant.allows_tool(tool) {
            let visible: Vec<&str> = self
                .visible_tools(session)
                .map(|t| t.descriptor.name.as_str())
                .collect();
            let info = ErrorCode::UnknownTool.info(format!(
                "no tool named `{tool}` in this session's catalog. Available tools: {}.",
                if visible.is_empty() {
                    "none".to_string()
                } else {
                    visible.join(", ")
                }
            ));
            return Observation::failure(&call_id, tool, SideEffect::ReadOnly, info);
        }
        let level = self
            .catalog()
            .get(tool)
            .map_or(SideEffect::ReadOnly, |t| t.descriptor.side_effect);
        if let Err(d) = session.grant.check_time(SystemTime::now()) {
            return Observation::failure(&call_id, tool, level, denial_error(&d));
        }
        if let Some(max) = session.grant.max_calls() {
            let n = session.calls.fetch_add(1, Ordering::SeqCst);
            if n >= max {
                let d = crate::capability::Denial {
                    caveat: crate::capability::CaveatKind::MaxCalls,
                    allowed: max.to_string(),
                    requested: (n + 1).to_string(),
                    message: format!("this session's token allows {max} calls and all were used; ask for a new token"),
                };
                return Observation::failure(&call_id, tool, level, denial_error(&d));
            }
        } else {
            session.calls.fetch_add(1, Ordering::Relaxed);
        }
        self.call_cancellable(tool, args, &session.scope(), &opts, cancel)
    }

    /// Plans a call for a session ([`Host::plan`]); the token decides what
    /// the dry-run may read, as for a call.
    pub fn plan_in(
        &self,
        session: &Session,
        tool: &str,
        args: &str,
        opts: &CallOptions,
    ) -> Observation {
        let call_id = opts
            .call_id
            .clone()
            .unwrap_or_else(crate::pipeline::new_call_id);
        if !session.grant.allows_tool(tool) {
            let info = ErrorCode::UnknownTool
                .info(format!("no tool named `{tool}` in this session's catalog"));
            return Observation::failure(&call_id, tool, SideEffect::ReadOnly, info);
        }
        if let Err(d) = session.grant.check_time(SystemTime::now()) {
            return Observation::failure(&call_id, tool, SideEffect::ReadOnly, denial_error(&d));
        }
        let opts = CallOptions {
            call_id: Some(call_id),
            ..opts.clone()
        };
        self.plan(tool, args, &session.scope(), &opts)
    }
}

impl Session {
    fn scope(&self) -> Scope<'_> {
        Scope {
            workspace: &self.workspace,
            grants: &self.grants,
            net: self.net.clone(),
            capability: Some(&self.grant),
        }
    }
}
