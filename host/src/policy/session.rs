//! Sessions: a caller bound to one verified capability token.
//!
//! A [`Session`] is what an agent (or sub-agent) holds: a workspace and a
//! [`Grant`] folded from a token the host verified. It decides
//!
//! - which tools the caller sees ([`Host::visible_tools`](crate::pipeline::Host::visible_tools)): only those the
//!   token's `tool` caveats allow;
//! - each call's sandbox: mounts only for the token's `read`/`write`
//!   prefixes (writable only with the `write` right, and only for a tool that
//!   declares writes and is not read-only), network only to the token's
//!   origins that the tool also declares, programs only those the token
//!   grants that the tool also declares (`needs.exec`), fuel = min(tool, token ceiling),
//!   deadline = min(tool timeout, time left before expiry);
//! - and whether the call may happen at all: an expired token, a revoked
//!   one (or one whose ancestor was revoked), or a token with a `max_calls`
//!   or `budget_fuel` caveat that has nothing left, gets a `denied`
//!   observation naming the caveat; the plugin never runs.
//!
//! `max_calls` and `budget_fuel` are counted per caveat, host-wide (in the
//! record store when the host has one), not per session: a call (or a
//! plan, which runs the tool's dry-run) is charged against every such
//! caveat in the token's chain, so the caveat limits the token that
//! carries it and every token derived from it together, whichever session
//! or process holds them (see [`crate::policy::budget`], [`crate::policy::ledger`]). Fuel is
//! reserved before the call (its fuel limit is at most what the chain's
//! fuel budgets have left) and what it did not consume is given back after.
//!
//! ```no_run
//! # use toolhost::{policy::capability::{Caveat, RootKey, Token}, call::Call, policy::session::Session, paths::Workspace};
//! # fn demo(host: &toolhost::pipeline::Host, key: &RootKey) -> Result<(), Box<dyn std::error::Error>> {
//! let token = Token::mint(key, &["tool=file_view".parse::<Caveat>()?, "right=read".parse()?, "read=src".parse()?])?;
//! let session = Session::open(key, &token.encode(), Workspace::open(".".as_ref())?)?;
//! let opts = Default::default();
//! let obs = host.run(&session, Call::new("file_view", r#"{"path":"src/lib.rs","offset":1,"limit":5}"#, &opts));
//! # Ok(()) }
//! ```

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use crate::call::CallOptions;
use crate::observation::{ErrorCode, ErrorInfo, Observation};
use crate::paths::{Grants, Workspace};
use crate::plugin::catalog::Catalog;
use crate::policy::budget::{Admission, BudgetError, BudgetLedger};
use crate::policy::capability::{
    BudgetKind, CallBudget, CapError, Caveat, CaveatKind, Grant, Keyring, RootKey, Token, TokenId,
    WidenError,
};

/// Why a session could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    // The messages include the inner error's, so it is not also a `source`:
    // a chain printer (`{:#}`) then says it once, not `X: X`.
    #[error("the token is not valid: {0}")]
    Token(CapError),
    #[error("the workspace or a granted prefix is not usable: {0}")]
    Path(crate::paths::PathError),
    /// The token's `aud` caveats name other workspaces.
    #[error(
        "the token is for the workspace {audience}, not this host's {workspace}; \
         mint or attenuate one with --audience {workspace}"
    )]
    Audience { audience: String, workspace: String },
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

/// A grant as plain lists: what the CLI's `--allow-read`, `--allow-write`,
/// `--allow-net`, `--allow-exec` and `--allow-secrets` flags (and a library caller that
/// holds the root key) hand to [`Session::allowing`]. Every list starts
/// empty: an `Allow::default()` grants no path, no origin and no right.
#[derive(Clone, Copy, Debug, Default)]
pub struct Allow<'a> {
    /// Workspace prefixes the calls may read (`.` for all of it).
    pub read: &'a [&'a str],
    /// Workspace prefixes the calls may write (and read).
    pub write: &'a [&'a str],
    /// Network origins, `scheme://host:port`.
    pub net: &'a [&'a str],
    /// Native programs: names looked up on the host's `PATH`, or absolute
    /// paths.
    pub exec: &'a [&'a str],
    /// Outputs are not redacted and a network tool's arguments may carry a
    /// secret.
    pub secrets: bool,
    /// The calls may approve their own plans (the `self_approve` right):
    /// an irreversible call runs on the plan token of its own dry run, no
    /// person asked.
    pub self_approve: bool,
    /// The calls may run scripts (the `script` right): `run_script`, whose
    /// inner calls run under the same grant ([`crate::script`]).
    pub script: bool,
}

impl Allow<'_> {
    /// The caveats of a token for every tool and exactly this grant, with
    /// the rights the lists need.
    ///
    /// # Errors
    ///
    /// [`CapError::Malformed`] for a prefix or an origin the caveat grammar
    /// refuses.
    pub fn caveats(&self) -> Result<Vec<Caveat>, CapError> {
        use crate::policy::capability::{RelPath, Right, Rights, ToolPattern};
        let malformed = |what: &str, value: &str, e: &dyn std::fmt::Display| {
            CapError::Malformed(format!("{what} `{value}`: {e}"))
        };
        // A token lists values with commas: a value holding one would come
        // back as two (prefixes: `parse_prefix` says so itself).
        let one = |what: &str, value: &str| match value.contains(',') {
            true => Err(malformed(what, value, &"a comma cannot be granted")),
            false => Ok(()),
        };
        let paths = |list: &[&str], what: &str| -> Result<Vec<RelPath>, CapError> {
            list.iter()
                .map(|p| {
                    crate::policy::capability::parse_prefix(p).map_err(|e| malformed(what, p, &e))
                })
                .collect()
        };
        let mut rights = Vec::new();
        if !self.read.is_empty() || !self.write.is_empty() {
            rights.push(Right::Read);
        }
        if !self.write.is_empty() {
            rights.push(Right::Write);
        }
        if !self.net.is_empty() {
            rights.push(Right::Net);
        }
        if !self.exec.is_empty() {
            rights.push(Right::Exec);
        }
        if self.secrets {
            rights.push(Right::Secrets);
        }
        if self.self_approve {
            rights.push(Right::SelfApprove);
        }
        if self.script {
            rights.push(Right::Script);
        }
        let mut caveats = vec![Caveat::Tools(vec![ToolPattern::parse("*")?])];
        if !rights.is_empty() {
            caveats.push(Caveat::Rights(Rights::of(&rights)));
        }
        if !self.read.is_empty() {
            caveats.push(Caveat::Read(paths(self.read, "read prefix")?));
        }
        if !self.write.is_empty() {
            caveats.push(Caveat::Write(paths(self.write, "write prefix")?));
        }
        if !self.net.is_empty() {
            let origins = self
                .net
                .iter()
                .map(|o| {
                    one("origin", o)?;
                    crate::origin::Origin::parse(o).map_err(|e| malformed("origin", o, &e))
                })
                .collect::<Result<Vec<_>, _>>()?;
            caveats.push(Caveat::Net(origins));
        }
        if !self.exec.is_empty() {
            let programs = self
                .exec
                .iter()
                .map(|p| {
                    one("program", p)?;
                    crate::policy::capability::Program::parse(p)
                        .map_err(|e| malformed("program", p, &e))
                })
                .collect::<Result<Vec<_>, _>>()?;
            caveats.push(Caveat::Exec(programs));
        }
        Ok(caveats)
    }
}

/// A caller bound to a verified capability.
pub struct Session {
    workspace: Workspace,
    token: Token,
    grant: Grant,
    grants: Grants,
    /// `grants` with the `ask_write` prefixes writable too, if the token
    /// has any.
    ask_grants: Option<Grants>,
    net: Vec<String>,
    /// Programs the token grants (names or absolute paths).
    exec: Vec<String>,
    /// The `max_calls` and `budget_fuel` caveats of the token's chain.
    budgets: Vec<CallBudget>,
    /// The ids of the token's chain, oldest first (for revocation).
    chain: Vec<TokenId>,
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
        let budgets = grant.call_budgets().to_vec();
        Session::bind(token, grant, budgets, workspace)
    }

    /// A session under a token minted with `key` for exactly `allow`
    /// (every tool, no limit beyond the grant), bound to `workspace`: how
    /// `toolhost call --allow-read …` runs, and how a library caller that
    /// holds the root key runs calls without handing tokens around.
    ///
    /// The same grant gives the same token (it is minted
    /// deterministically), so a plan and the call it approves may come from
    /// two sessions.
    ///
    /// # Errors
    ///
    /// [`SessionError::Path`] when a prefix is not a directory inside the
    /// workspace; [`SessionError::Token`] when a prefix or an origin is not
    /// one the caveat grammar accepts.
    pub fn allowing(
        key: &RootKey,
        workspace: Workspace,
        allow: &Allow<'_>,
    ) -> Result<Session, SessionError> {
        // Checked here to name the prefix; `bind` would leave it unmounted.
        Grants::new(&workspace, allow.read, allow.write)?;
        let token = Token::mint_deterministic(key, &allow.caveats()?)?;
        let grant = key.verify(&token, SystemTime::now())?;
        let budgets = grant.call_budgets().to_vec();
        Session::bind(token, grant, budgets, workspace)
    }

    fn bind(
        token: Token,
        grant: Grant,
        budgets: Vec<CallBudget>,
        workspace: Workspace,
    ) -> Result<Session, SessionError> {
        use crate::policy::capability::Right;
        if !grant.allows_workspace(workspace.root()) {
            let audience = grant
                .audience()
                .unwrap_or_default()
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ");
            return Err(SessionError::Audience {
                audience,
                workspace: workspace.root().display().to_string(),
            });
        }
        let rights = grant.rights();
        let mounted =
            |prefixes: &[crate::policy::capability::RelPath], right: Right| -> Vec<String> {
                if !rights.contains(right) {
                    return Vec::new();
                }
                prefixes
                    .iter()
                    .map(|p| p.as_str().to_string())
                    .filter(|p| workspace.root().join(p).is_dir())
                    .collect()
            };
        let read = mounted(grant.read_prefixes(), Right::Read);
        let write = mounted(grant.write_prefixes(), Right::Write);
        // Prefixes left out above, named in denials ("the grant `x` names no
        // directory in the workspace") rather than a bare "nothing is granted".
        let unmounted: Vec<String> = [
            (grant.read_prefixes(), Right::Read, &read),
            (grant.write_prefixes(), Right::Write, &write),
        ]
        .into_iter()
        .filter(|(_, right, _)| rights.contains(*right))
        .flat_map(|(prefixes, _, kept)| {
            prefixes
                .iter()
                .filter(|p| !p.is_root())
                .map(|p| p.as_str().to_string())
                .filter(move |p| !kept.contains(p))
        })
        .collect();
        // Write implies read only with the read right too.
        let read_refs: Vec<&str> = read.iter().map(String::as_str).collect();
        let write_refs: Vec<&str> = write.iter().map(String::as_str).collect();
        let grants = Grants::new(&workspace, &read_refs, &write_refs)?.noting_unmounted(unmounted);
        let ask = mounted(grant.ask_write_prefixes(), Right::Write);
        let ask_grants = if ask.is_empty() {
            None
        } else {
            let all: Vec<&str> = write_refs
                .iter()
                .copied()
                .chain(ask.iter().map(String::as_str))
                .collect();
            Some(Grants::new(&workspace, &read_refs, &all)?)
        };
        let net = if rights.contains(Right::Net) {
            grant
                .net_origins()
                .iter()
                .map(|o| o.as_str().to_string())
                .collect()
        } else {
            Vec::new()
        };
        let exec = grant
            .exec_programs()
            .iter()
            .map(|p| p.as_str().to_string())
            .collect();
        let chain = token.chain_ids();
        Ok(Session {
            workspace,
            chain,
            token,
            grant,
            grants,
            ask_grants,
            net,
            exec,
            budgets,
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
    /// this session's token. The child dies with the parent's expiry, and
    /// its calls count against the parent's `max_calls` caveats too.
    pub fn delegate(&self, caveats: &[Caveat]) -> Result<(Session, String), WidenError> {
        let child = self.token.delegate(caveats)?;
        let grant = child
            .grant_unverified()
            .map_err(|e| WidenError::Invalid(e.to_string()))?;
        let budgets = child
            .budgets_derived_from(&self.token, &self.budgets)
            .ok_or_else(|| {
                WidenError::Invalid("the child token does not extend this one".into())
            })?;
        let text = child.encode();
        let workspace = self.workspace.clone();
        let session = Session::bind(child, grant, budgets, workspace)
            .map_err(|e| WidenError::Invalid(e.to_string()))?;
        Ok((session, text))
    }

    /// Calls (and plans) this session let through so far. The `max_calls`
    /// caveats are counted host-wide, not here ([`crate::policy::budget`]).
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }

    /// The `max_calls` and `budget_fuel` caveats of this session's token
    /// chain.
    pub fn call_budgets(&self) -> &[CallBudget] {
        &self.budgets
    }

    /// The ids of this session's token chain, oldest first.
    pub fn chain_ids(&self) -> &[TokenId] {
        &self.chain
    }

    /// The gates every call and plan of the session passes before anything
    /// runs: the tool is in the token, the token has not expired, no id of
    /// its chain is revoked, and every `max_calls` / `budget_fuel` caveat
    /// of its chain has something left (then charged: one call, and the
    /// fuel `fuel` or less, which the admission says).
    pub(crate) fn admit(
        &self,
        ledger: &dyn BudgetLedger,
        catalog: &Catalog,
        tool: &str,
        fuel: u64,
    ) -> Result<Admission, Box<ErrorInfo>> {
        if !self.grant.allows_tool(tool) {
            let visible: Vec<&str> = catalog
                .tools()
                .map(|t| t.descriptor.name.as_str())
                .filter(|name| self.grant.allows_tool(name))
                .collect();
            return Err(Box::new(ErrorCode::UnknownTool.info(format!(
                "no tool named `{tool}` in this session's catalog. Available tools: {}.",
                if visible.is_empty() {
                    "none".to_string()
                } else {
                    visible.join(", ")
                }
            ))));
        }
        self.check_live(ledger)?;
        if self.grant.max_calls().is_some() && self.budgets.is_empty() {
            // Cannot happen for a verified token; never let it through.
            return Err(Box::new(budget_denial(&BudgetError::Unavailable(
                "the token's call budgets were not computed".into(),
            ))));
        }
        let secs = SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let admission = ledger
            .admit(&self.budgets, fuel, secs)
            .map_err(|e| Box::new(budget_denial(&e)))?;
        ledger.note_use(&self.chain);
        self.calls.fetch_add(1, Ordering::Relaxed);
        Ok(admission)
    }

    /// The gates every use of the token passes, a host tool's too: it has
    /// not expired and no id of its chain is revoked.
    pub fn check_live(&self, ledger: &dyn BudgetLedger) -> Result<(), Box<ErrorInfo>> {
        self.liveness(ledger).map_err(NotLive::into_info)
    }

    /// [`check_live`](Self::check_live), telling a token that is no good
    /// (expired, revoked) from a ledger that cannot say (the HTTP layer
    /// answers the first 401 and the second 503).
    pub fn liveness(&self, ledger: &dyn BudgetLedger) -> Result<(), NotLive> {
        let now = SystemTime::now();
        self.grant
            .check_time(now)
            .map_err(|d| NotLive::Dead(Box::new(denial_error(&d))))?;
        let secs = now
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        if let Some(bound) = self.grant.stores().first() {
            let host = match ledger.store_id() {
                Ok(id) => id,
                Err(e) => return Err(NotLive::Unknown(Box::new(budget_denial(&e)))),
            };
            let other = self
                .grant
                .stores()
                .iter()
                .find(|s| Some(*s) != host.as_ref());
            if let Some(token) = other.or(host.is_none().then_some(bound)) {
                return Err(NotLive::Dead(Box::new(budget_denial(
                    &BudgetError::OtherStore {
                        token: token.to_string(),
                        host: host.map(|h| h.to_string()),
                    },
                ))));
            }
        }
        match ledger.revoked(&self.chain, secs) {
            Ok(None) => Ok(()),
            Ok(Some(id)) => Err(NotLive::Dead(Box::new(budget_denial(
                &BudgetError::Revoked {
                    id,
                    chain: self.chain.clone(),
                },
            )))),
            Err(e) => Err(NotLive::Unknown(Box::new(budget_denial(&e)))),
        }
    }

    /// Whether a `budget_fuel` caveat is in the chain.
    pub(crate) fn fuel_budgeted(&self) -> bool {
        self.budgets.iter().any(|b| b.kind == BudgetKind::Fuel)
    }

    /// The fuel a call asks for: its limit, capped by the token's ceiling.
    pub(crate) fn fuel_wanted(&self, opts: &CallOptions) -> u64 {
        self.grant
            .fuel(opts.fuel.unwrap_or(crate::sandbox::Limits::default().fuel))
    }

    /// Gives back the reserved fuel a call did not consume.
    pub(crate) fn settle_fuel(
        &self,
        ledger: &dyn BudgetLedger,
        admission: Admission,
        obs: &Observation,
    ) {
        if self.fuel_budgeted() {
            let unused = admission.fuel.saturating_sub(obs.usage.fuel_consumed);
            // A failed refund leaves the fuel spent: fail closed.
            let _ = ledger.refund_fuel(&self.budgets, unused);
        }
    }
}

/// Why a session's token may not be used now ([`Session::liveness`]).
#[derive(Debug)]
pub enum NotLive {
    /// The token expired, or an id of its chain is revoked.
    Dead(Box<ErrorInfo>),
    /// The ledger cannot say whether it is revoked (fails closed).
    Unknown(Box<ErrorInfo>),
}

impl NotLive {
    /// The observation's error.
    pub(crate) fn into_info(self) -> Box<ErrorInfo> {
        match self {
            NotLive::Dead(info) | NotLive::Unknown(info) => info,
        }
    }
}

/// A `max_calls` refusal as the observation's error: it names the caveat
/// (its value and place in the chain) and what is left.
fn budget_denial(e: &BudgetError) -> ErrorInfo {
    let details = match e {
        BudgetError::Exhausted { budget, used } => serde_json::json!({
            "caveat": budget.kind.as_str(),
            "allowed": budget.max.to_string(),
            "requested": match budget.kind {
                BudgetKind::Calls => used.saturating_add(1).to_string(),
                BudgetKind::Fuel => format!("more than {used}"),
            },
            "used": used,
            "left": budget.max.saturating_sub(*used),
            "position": budget.position + 1,
            "budget": budget.id.to_string(),
        }),
        BudgetError::Revoked { id, chain } => serde_json::json!({
            "caveat": CaveatKind::Id.as_str(),
            "revoked": id.to_string(),
            "token": chain.last().map(ToString::to_string),
        }),
        BudgetError::Full { .. } | BudgetError::Unavailable(_) => serde_json::json!({
            "caveat": CaveatKind::MaxCalls.as_str(),
        }),
        BudgetError::OtherStore { token, host } => serde_json::json!({
            "caveat": CaveatKind::Store.as_str(),
            "token_store": token,
            "host_store": host,
        }),
    };
    let mut message = e.to_string();
    if matches!(
        e,
        BudgetError::Exhausted { .. }
            | BudgetError::Revoked { .. }
            | BudgetError::OtherStore { .. }
    ) {
        message.push_str("; ask for a new token");
    }
    ErrorCode::Denied.info(message).with_details(details)
}

impl Session {
    /// The workspace, grants and capability a call of this session runs in.
    pub(crate) fn scope(&self) -> Scope<'_> {
        Scope {
            workspace: &self.workspace,
            grants: &self.grants,
            net: self.net.clone(),
            exec: self.exec.clone(),
            capability: &self.grant,
            ask_grants: self.ask_grants.as_ref(),
            chain: &self.chain,
        }
    }
}

/// What a call may touch: a session's workspace and what its verified
/// capability grants there. Only [`Session`](crate::policy::session::Session) makes
/// one: every call runs under a token.
pub(crate) struct Scope<'a> {
    pub workspace: &'a Workspace,
    /// The token's prefixes that name directories of the workspace.
    pub grants: &'a Grants,
    /// Network origins the caller grants (`scheme://host:port`). A call gets
    /// those its tool declares in `needs.network_hosts` (all of them for
    /// `any`); see [`crate::sandbox::net_grant`].
    pub net: Vec<String>,
    /// Native programs the caller grants (names or absolute paths). A call
    /// may run those its tool also declares in `needs.exec` (all of them
    /// for `any`); see [`crate::exec_call`].
    pub exec: Vec<String>,
    /// The verified capability: every path argument is also checked
    /// against its caveats (so a denial names the caveat), and its fuel
    /// ceiling and expiry cap the call's limits.
    pub capability: &'a crate::policy::capability::Grant,
    /// The grants with the token's `ask_write` prefixes writable too: the
    /// mounts of a call that writes there (which then needs an approval).
    pub ask_grants: Option<&'a Grants>,
    /// The ids of the token's chain, oldest first.
    pub chain: &'a [crate::policy::capability::TokenId],
}

/// A capability denial as the observation's error: it names the caveat.
pub(crate) fn denial_error(d: &crate::policy::capability::Denial) -> ErrorInfo {
    ErrorCode::Denied
        .info(d.message.clone())
        .with_details(serde_json::json!({
            "caveat": d.caveat.as_str(),
            "allowed": d.allowed,
            "requested": d.requested,
        }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::capability::Right;

    fn key() -> RootKey {
        RootKey::from_hex(&"3c".repeat(32)).unwrap()
    }

    fn workspace(dirs: &[&str]) -> (tempfile::TempDir, Workspace) {
        let dir = tempfile::tempdir().unwrap();
        for d in dirs {
            std::fs::create_dir_all(dir.path().join(d)).unwrap();
        }
        let ws = Workspace::open(dir.path()).unwrap();
        (dir, ws)
    }

    #[test]
    fn an_empty_allow_grants_no_path_no_origin_and_no_right() {
        let (_dir, ws) = workspace(&["src"]);
        let s = Session::allowing(&key(), ws, &Allow::default()).unwrap();
        assert!(s.grant().rights().is_empty());
        assert!(s
            .grant()
            .check_path("src/a.rs", crate::paths::Access::Read)
            .is_err());
        assert!(s.scope().net.is_empty());
    }

    #[test]
    fn allowing_mints_the_rights_the_lists_need_and_nothing_more() {
        let (_dir, ws) = workspace(&["src", "out"]);
        let allow = Allow {
            read: &["src"],
            write: &["out"],
            net: &["https://api.example.com:443"],
            exec: &["cargo"],
            secrets: false,
            self_approve: false,
            script: false,
        };
        let s = Session::allowing(&key(), ws, &allow).unwrap();
        let rights = s.grant().rights();
        for right in [Right::Read, Right::Write, Right::Net, Right::Exec] {
            assert!(rights.contains(right), "{right:?}");
        }
        assert!(!rights.contains(Right::Secrets));
        assert!(!rights.contains(Right::Script));
        assert!(s
            .grant()
            .check_path("src/a.rs", crate::paths::Access::Read)
            .is_ok());
        assert!(s
            .grant()
            .check_path("src/a.rs", crate::paths::Access::Write)
            .is_err());
        assert!(s
            .grant()
            .check_path("out/b", crate::paths::Access::Write)
            .is_ok());
        assert!(s
            .grant()
            .check_path("docs/c", crate::paths::Access::Read)
            .is_err());
        assert_eq!(s.scope().net, ["https://api.example.com:443"]);
        assert_eq!(s.scope().exec, ["cargo"]);
    }

    #[test]
    fn the_same_allow_gives_the_same_token() {
        let (_dir, ws) = workspace(&["src"]);
        let (_dir2, ws2) = workspace(&["src"]);
        let allow = Allow {
            read: &["src"],
            ..Allow::default()
        };
        let a = Session::allowing(&key(), ws, &allow).unwrap();
        let b = Session::allowing(&key(), ws2, &allow).unwrap();
        assert_eq!(a.token().encode(), b.token().encode());
    }

    #[test]
    fn what_a_token_cannot_carry_is_refused_not_dropped() {
        for allow in [
            Allow {
                read: &["a,b"],
                ..Allow::default()
            },
            Allow {
                net: &["any"],
                ..Allow::default()
            },
            Allow {
                net: &["ftp://example.com"],
                ..Allow::default()
            },
            Allow {
                write: &["../up"],
                ..Allow::default()
            },
            Allow {
                exec: &["../bin/sh"],
                ..Allow::default()
            },
            Allow {
                exec: &["true,sh"],
                ..Allow::default()
            },
        ] {
            let err = allow.caveats().unwrap_err();
            assert!(matches!(err, CapError::Malformed(_)), "{allow:?}: {err}");
        }
        // A prefix that names no directory is an error naming it.
        let (_dir, ws) = workspace(&[]);
        let allow = Allow {
            read: &["missing"],
            ..Allow::default()
        };
        let err = Session::allowing(&key(), ws, &allow).err().unwrap();
        assert!(matches!(err, SessionError::Path(_)), "{err}");
        assert!(err.to_string().contains("missing"), "{err}");
    }
}
