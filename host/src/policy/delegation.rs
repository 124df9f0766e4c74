//! The `delegate` tool: an agent hands a sub-agent a narrower token.
//!
//! A session whose token holds the `delegate` right (minted with
//! `cap mint … --delegate`, or the command-line grants of
//! `serve --allow-delegate`) sees one more tool, provided by the host and
//! not by a plugin: `delegate`. Its arguments name what the child may do —
//! tools, read and write prefixes, network origins, programs, the `delegate` right
//! itself, the `self_approve` right (never handed down unless asked for and
//! held) — and what it may spend: `max_calls`, `budget_fuel` (both shared
//! with the parent: every call of the child also spends the parent's
//! budgets), a per-call `fuel` ceiling and `expires_in_s` (default one
//! hour, never after the parent's expiry). The result is an
//! [`Observation`] whose output carries
//!
//! - `token`: the child, made from the session's own token with
//!   [`Token::delegate`] (no key needed; a fresh `id` caveat gives it an id
//!   of its own for revocation and `cap list`);
//! - `id`, `parent`, the `caveats` appended and the effective `grant`, in
//!   readable form;
//! - `client_config`: ready-to-paste MCP client configuration, `stdio` (a
//!   `toolhost serve --stdio` on the same store and key, the token in
//!   `TOOLHOST_TOKEN`) and `http` (this server's URL with the token as the
//!   bearer), when known.
//!
//! The child holds nothing its parent does not: every dimension is closed
//! unless asked for (no read prefixes asked → no `read` right, and so on),
//! and anything wider than the session's token is refused with a `denied`
//! observation naming *each* component that would widen, as `cap
//! attenuate` does for one. A revoked or expired session cannot delegate.
//! Delegating spends no call of the session's budgets; the child's calls do.

use std::time::{Duration, SystemTime};

use serde::Deserialize;
use serde_json::{json, Value};

use crate::descriptor::SideEffect;
use crate::observation::{ErrorCode, ErrorInfo, Observation};
use crate::policy::budget::{BudgetLedger, Issue, Issued};
use crate::policy::capability::{Caveat, CaveatKind, Right, Rights, Token, WidenError};
use crate::policy::session::Session;

/// The tool's name.
pub const TOOL_NAME: &str = "delegate";

/// Longest `expires_in_s`: 30 days.
pub const MAX_EXPIRES_IN_S: u64 = 30 * 86_400;

/// The child's expiry when `expires_in_s` is not given: one hour (and
/// never after the parent's, as every expiry of a chain).
pub const DEFAULT_EXPIRES_IN_S: u64 = 3_600;

/// What the result's `client_config` can say about how to reach a host.
#[derive(Debug, Clone, Default)]
pub struct ClientConfig {
    /// The `toolhost` program and the arguments that put a stdio server on
    /// the same store, key and plugins (`serve --stdio` is appended).
    pub stdio: Option<(String, Vec<String>)>,
    /// The workspace the stdio server serves.
    pub workspace: Option<String>,
    /// This server's MCP URL, when it serves HTTP (`http://host:port/mcp`).
    pub http_url: Option<String>,
    /// Said beside the stdio configuration (e.g. that the root key must be
    /// in the environment).
    pub note: Option<String>,
}

/// The arguments of `delegate`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DelegateArgs {
    /// Tools the child may call: names, `ns_*`, `*`.
    pub tools: Vec<String>,
    #[serde(default)]
    pub read: Vec<String>,
    #[serde(default)]
    pub write: Vec<String>,
    #[serde(default)]
    pub net: Vec<String>,
    /// Native programs (names or absolute paths): a subset of the
    /// session's.
    #[serde(default)]
    pub exec: Vec<String>,
    /// Whether the child may delegate in turn.
    #[serde(default)]
    pub delegate: bool,
    /// Whether the child may approve its own plans (only when this
    /// session's token may).
    #[serde(default)]
    pub self_approve: bool,
    /// Whether the child may run scripts (`run_script`; only when this
    /// session's token may).
    #[serde(default)]
    pub script: bool,
    pub max_calls: Option<u64>,
    pub budget_fuel: Option<u64>,
    /// Fuel ceiling of each call.
    pub fuel: Option<u64>,
    pub expires_in_s: Option<u64>,
}

/// Why the command-line grants could not become a delegating session.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("the command-line grants do not make a token: {0}")]
    Caveat(#[from] crate::policy::capability::CapError),
    #[error("{0}")]
    Session(#[from] crate::policy::session::SessionError),
}

/// The grants `serve` was started with.
#[derive(Debug, Clone, Copy)]
pub struct CommandLineGrants<'a> {
    pub read: &'a [String],
    pub write: &'a [String],
    pub net: &'a [String],
    /// `--allow-exec`: programs, names or absolute paths.
    pub exec: &'a [String],
    /// `--allow-delegate`: the token also carries the `delegate` right.
    pub delegate: bool,
    /// `--self-approve`: the token also carries the `self_approve` right.
    pub self_approve: bool,
    /// `--allow-script`: the token also carries the `script` right.
    pub script: bool,
}

impl Session {
    /// The session of `serve`'s command-line grants
    /// ([`command_line_session`]).
    pub fn from_command_line(
        key: &crate::policy::capability::RootKey,
        workspace: &crate::paths::Workspace,
        grants: CommandLineGrants<'_>,
    ) -> Result<Session, SetupError> {
        command_line_session(key, workspace, grants)
    }

    /// Whether this session gets the host's `delegate` tool (its token
    /// holds the `delegate` right).
    pub fn may_delegate(&self) -> bool {
        may_delegate(Some(self))
    }
}

/// The session of `serve`'s command-line grants, for clients that present
/// no token: a token minted from them (every tool, the prefixes and origins
/// given, the rights they need, `delegate` with `--allow-delegate`). The
/// same grants and key give the same token, so a plan made before a restart
/// still approves its call after it.
pub fn command_line_session(
    key: &crate::policy::capability::RootKey,
    workspace: &crate::paths::Workspace,
    grants: CommandLineGrants<'_>,
) -> Result<Session, SetupError> {
    let CommandLineGrants {
        read,
        write,
        net,
        exec,
        delegate,
        self_approve,
        script,
    } = grants;
    let mut caveats = vec![Caveat::parse("tool=*")?];
    let mut rights = Vec::new();
    if delegate {
        rights.push(Right::Delegate);
    }
    if self_approve {
        rights.push(Right::SelfApprove);
    }
    if script {
        rights.push(Right::Script);
    }
    if !read.is_empty() || !write.is_empty() {
        rights.push(Right::Read);
    }
    if !write.is_empty() {
        rights.push(Right::Write);
    }
    if !net.is_empty() {
        rights.push(Right::Net);
    }
    if !exec.is_empty() {
        rights.push(Right::Exec);
    }
    caveats.push(Caveat::Rights(Rights::of(&rights)));
    for (kind, items) in [
        ("read", read),
        ("write", write),
        ("net", net),
        ("exec", exec),
    ] {
        if !items.is_empty() {
            caveats.push(Caveat::parse(&format!("{kind}={}", items.join(",")))?);
        }
    }
    let token = Token::mint_deterministic(key, &caveats)?;
    Ok(Session::open(key, &token.encode(), workspace.clone())?)
}

/// Whether `session` gets the `delegate` tool.
pub fn may_delegate(session: Option<&Session>) -> bool {
    session.is_some_and(|s| s.grant().rights().contains(Right::Delegate))
}

/// The MCP `Tool` object of `delegate`, with the schema of its own output.
pub fn tool_definition() -> Value {
    let list = |what: &str| json!({"type": "array", "items": {"type": "string", "minLength": 1}, "description": what});
    json!({
        "name": TOOL_NAME,
        "title": "Delegate to a sub-agent",
        "description": "Make a narrower capability token for a sub-agent from this session's own \
            token. Name what the child may use (tools, read/write path prefixes, network origins, \
            programs) \
            and spend (max_calls, budget_fuel: shared with this session's budgets, which the \
            child's calls drain too; expires_in_s). Anything not named is not granted; anything \
            wider than this session holds is refused, naming each component. The result's output \
            has the token, its caveats and ready-to-paste MCP client configuration.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "tools": {
                    "type": "array", "minItems": 1,
                    "items": {"type": "string", "minLength": 1},
                    "description": "Tools the child may call: exact names, `ns_*` or `*`."
                },
                "read": list("Workspace path prefixes the child may read."),
                "write": list("Workspace path prefixes the child may write (and read)."),
                "net": list("Network origins, scheme://host[:port]."),
                "exec": list("Native programs the child may run: names on PATH or absolute paths, a subset of this session's."),
                "delegate": {"type": "boolean", "description": "Whether the child may delegate in turn (default false)."},
                "self_approve": {"type": "boolean", "description": "Whether the child may approve its own plans of irreversible calls, no person asked (default false; only if this session may)."},
                "script": {"type": "boolean", "description": "Whether the child may run scripts, run_script (default false; only if this session may)."},
                "max_calls": {"type": "integer", "minimum": 0, "description": "Calls the child (and its own children) may make."},
                "budget_fuel": {"type": "integer", "minimum": 0, "description": "Fuel the child's calls may consume together."},
                "fuel": {"type": "integer", "minimum": 1, "description": "Fuel ceiling of each call."},
                "expires_in_s": {"type": "integer", "minimum": 1, "maximum": MAX_EXPIRES_IN_S, "description": "Seconds until the child token expires (default 3600; never after this session's token)."}
            },
            "required": ["tools"],
            "additionalProperties": false
        },
        "outputSchema": {
            "type": "object",
            "properties": {
                "token": {"type": "string", "description": "The child's capability token."},
                "id": {"type": "string"},
                "parent": {"type": "string"},
                "caveats": {"type": "array", "items": {"type": "string"}},
                "grant": {"type": "object"},
                "listed": {"type": "boolean", "description": "Whether the ledger recorded the token."},
                "client_config": {"type": "object", "description": "MCP client entries for stdio and HTTP."}
            },
            "required": ["token", "id", "parent", "caveats", "grant", "listed", "client_config"]
        },
        "annotations": {
            "title": "Delegate to a sub-agent",
            "readOnlyHint": true,
            "destructiveHint": false,
            "idempotentHint": false,
            "openWorldHint": false
        },
        "_meta": {"dev.toolhost/side_effect": "read_only", "dev.toolhost/host_tool": true}
    })
}

/// A problem with one argument.
fn bad_argument(field: &str, message: String) -> Box<ErrorInfo> {
    Box::new(
        ErrorCode::InvalidArguments
            .info(message)
            .with_field(format!("/{field}")),
    )
}

/// The caveats a child gets for `args` (before its `id`): tools, rights
/// (closing every dimension not asked for), prefixes, origins, limits.
pub fn caveats_for(args: &DelegateArgs, now: SystemTime) -> Result<Vec<Caveat>, Box<ErrorInfo>> {
    fn list(
        field: &str,
        kind: &str,
        items: &[String],
        out: &mut Vec<Caveat>,
    ) -> Result<(), Box<ErrorInfo>> {
        if items.is_empty() {
            return Ok(());
        }
        if let Some(v) = items.iter().find(|v| v.contains(',')) {
            return Err(bad_argument(
                field,
                format!("`{v}`: one value per item, without commas"),
            ));
        }
        let text = format!("{kind}={}", items.join(","));
        let caveat =
            Caveat::parse(&text).map_err(|e| bad_argument(field, format!("{field}: {e}")))?;
        out.push(caveat);
        Ok(())
    }
    if args.tools.is_empty() {
        return Err(bad_argument(
            "tools",
            "name at least one tool the child may call".into(),
        ));
    }
    let mut out = Vec::new();
    list("tools", "tool", &args.tools, &mut out)?;
    let mut rights = Vec::new();
    if !args.read.is_empty() || !args.write.is_empty() {
        rights.push(Right::Read);
    }
    if !args.write.is_empty() {
        rights.push(Right::Write);
    }
    if !args.net.is_empty() {
        rights.push(Right::Net);
    }
    if !args.exec.is_empty() {
        rights.push(Right::Exec);
    }
    if args.delegate {
        rights.push(Right::Delegate);
    }
    if args.self_approve {
        rights.push(Right::SelfApprove);
    }
    if args.script {
        rights.push(Right::Script);
    }
    out.push(Caveat::Rights(Rights::of(&rights)));
    list("read", "read", &args.read, &mut out)?;
    list("write", "write", &args.write, &mut out)?;
    list("net", "net", &args.net, &mut out)?;
    list("exec", "exec", &args.exec, &mut out)?;
    if let Some(n) = args.fuel {
        out.push(Caveat::Fuel(n));
    }
    if let Some(n) = args.max_calls {
        out.push(Caveat::MaxCalls(n));
    }
    if let Some(n) = args.budget_fuel {
        out.push(Caveat::BudgetFuel(n));
    }
    {
        let secs = args.expires_in_s.unwrap_or(DEFAULT_EXPIRES_IN_S);
        if secs == 0 || secs > MAX_EXPIRES_IN_S {
            return Err(bad_argument(
                "expires_in_s",
                format!("expires_in_s must be between 1 and {MAX_EXPIRES_IN_S}"),
            ));
        }
        let at = now + Duration::from_secs(secs);
        let unix = at
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        out.push(Caveat::Expires(unix));
    }
    Ok(out)
}

/// Every caveat of `caveats` that would widen `parent`, each checked on its
/// own: one line per component.
pub fn widenings(parent: &Token, caveats: &[Caveat]) -> Vec<WidenError> {
    caveats
        .iter()
        .filter_map(|c| parent.attenuate(std::slice::from_ref(c)).err())
        .collect()
}

/// Runs `delegate` for `session`: the observation the MCP client gets.
/// `ledger` is the host's (where the child is recorded for `cap list` and
/// the session's revocation is checked).
pub fn delegate(
    session: &Session,
    ledger: &dyn BudgetLedger,
    args_text: &str,
    config: &ClientConfig,
    call_id: &str,
) -> Observation {
    let fail =
        |info: ErrorInfo| Observation::failure(call_id, TOOL_NAME, SideEffect::ReadOnly, info);
    let value = match crate::json::parse_strict(args_text) {
        Ok(v) => v,
        Err(e) => return fail(ErrorCode::InvalidJson.info(e.to_string())),
    };
    let args: DelegateArgs = match serde_json::from_value(value) {
        Ok(a) => a,
        Err(e) => {
            return fail(ErrorCode::InvalidArguments.info(format!(
                "the arguments of `delegate` do not fit its input schema: {e}"
            )))
        }
    };
    let now = SystemTime::now();
    if let Err(d) = session.grant().check_time(now) {
        return fail(crate::policy::session::denial_error(&d));
    }
    let secs = now
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    match ledger.revoked(session.chain_ids(), secs) {
        Ok(None) => {}
        Ok(Some(id)) => {
            return fail(ErrorCode::Denied.info(format!(
                "this session's token was revoked ({id} is revoked): it cannot delegate"
            )))
        }
        Err(e) => return fail(ErrorCode::Denied.info(e.to_string())),
    }
    let caveats = match caveats_for(&args, now) {
        Ok(c) => c,
        Err(info) => return fail(*info),
    };
    let parent = session.token();
    let wider = widenings(parent, &caveats);
    if !wider.is_empty() {
        let components: Vec<Value> = wider
            .iter()
            .map(|w| {
                json!({
                    "component": w.component().map_or("caveat", CaveatKind::as_str),
                    "message": w.to_string(),
                })
            })
            .collect();
        let message = format!(
            "cannot delegate more than this session holds: {}",
            wider
                .iter()
                .map(|w| w
                    .to_string()
                    .trim_start_matches("cannot attenuate: ")
                    .to_string())
                .collect::<Vec<_>>()
                .join("; ")
        );
        return fail(ErrorCode::Denied.info(message).with_details(
            json!({"caveat": components[0]["component"], "components": components}),
        ));
    }
    let child = match parent.delegate(&caveats) {
        Ok(c) => c,
        Err(e) => return fail(ErrorCode::Denied.info(e.to_string())),
    };
    let grant = match child.grant_unverified() {
        Ok(g) => g,
        Err(e) => return fail(ErrorCode::Internal.info(e.to_string())),
    };
    let appended: Vec<String> = child.caveats()[parent.caveats().len()..]
        .iter()
        .map(ToString::to_string)
        .collect();
    let issued = Issued {
        id: child.token_id(),
        parent: Some(parent.token_id()),
        via: Issue::Delegate,
        caveats: appended.join("; "),
        issued_at: secs,
        expires_at: grant.expires_at(),
    };
    let listed = ledger.record_issued(&issued).is_ok();
    let token = child.encode();
    let output = json!({
        "token": token,
        "id": child.token_id().to_string(),
        "parent": parent.token_id().to_string(),
        "caveats": appended,
        "grant": grant,
        "listed": listed,
        "client_config": client_config(config, &token, &child.token_id().to_string()),
    });
    Observation::ok(
        call_id,
        TOOL_NAME,
        SideEffect::ReadOnly,
        output,
        crate::call::DEFAULT_TEXT_BYTES,
    )
}

/// The `client_config` of a result: MCP client entries (the common
/// `mcpServers` shape) for stdio and HTTP.
fn client_config(config: &ClientConfig, token: &str, id: &str) -> Value {
    let name = format!("toolhost-{}", &id[..8.min(id.len())]);
    let stdio = config.stdio.as_ref().map(|(program, global)| {
        let mut args = global.clone();
        args.extend(["serve".into(), "--stdio".into(), "--require-token".into()]);
        if let Some(ws) = &config.workspace {
            args.extend(["--workspace".into(), ws.clone()]);
        }
        let mut entry = json!({"mcpServers": {name.clone(): {
            "command": program,
            "args": args,
            "env": {"TOOLHOST_TOKEN": token},
        }}});
        if let Some(note) = &config.note {
            entry["note"] = Value::String(note.clone());
        }
        entry
    });
    let http = config.http_url.as_ref().map(|url| {
        json!({"mcpServers": {name.clone(): {
            "type": "http",
            "url": url,
            "headers": {"Authorization": format!("Bearer {token}")},
        }}})
    });
    json!({"stdio": stdio, "http": http})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::capability::RootKey;

    fn args(v: Value) -> DelegateArgs {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn every_dimension_not_asked_for_is_closed() {
        let now = std::time::UNIX_EPOCH + Duration::from_secs(1_767_225_600);
        let c = caveats_for(&args(json!({"tools": ["file_view"]})), now).unwrap();
        let texts: Vec<String> = c.iter().map(ToString::to_string).collect();
        // Not asked for, the expiry is an hour away.
        assert_eq!(
            texts,
            ["tool=file_view", "right=none", "expires=1767229200"]
        );
        let c = caveats_for(
            &args(
                json!({"tools": ["file_*"], "write": ["src/gen"], "net": ["https://a.example"],
                         "max_calls": 3, "budget_fuel": 9, "expires_in_s": 60, "delegate": true}),
            ),
            now,
        )
        .unwrap();
        let texts: Vec<String> = c.iter().map(ToString::to_string).collect();
        assert_eq!(
            texts,
            [
                "tool=file_*",
                "right=read,write,net,delegate",
                "write=src/gen",
                "net=https://a.example:443",
                "max_calls=3",
                "budget_fuel=9",
                "expires=1767225660",
            ]
        );
        assert!(caveats_for(&args(json!({"tools": []})), now).is_err());
        let e = caveats_for(&args(json!({"tools": ["a"], "read": ["../x"]})), now).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("/read"));
        let e = caveats_for(&args(json!({"tools": ["a"], "read": ["a,b"]})), now).unwrap_err();
        assert!(e.message.contains("commas"), "{}", e.message);
        assert!(caveats_for(&args(json!({"tools": ["a"], "expires_in_s": 0})), now).is_err());
        assert!(
            serde_json::from_value::<DelegateArgs>(json!({"tools": ["a"], "root": true})).is_err()
        );
    }

    #[test]
    fn widening_is_refused_per_component() {
        let key = RootKey::from_bytes([3; 32]);
        let parent = Token::mint(
            &key,
            &[
                "tool=file_*".parse().unwrap(),
                "right=read,delegate".parse().unwrap(),
                "read=src".parse().unwrap(),
                "max_calls=5".parse().unwrap(),
            ],
        )
        .unwrap();
        let now = SystemTime::now();
        let wide = caveats_for(
            &args(
                json!({"tools": ["git_log"], "read": ["docs"], "write": ["src"], "max_calls": 9}),
            ),
            now,
        )
        .unwrap();
        let w = widenings(&parent, &wide);
        let kinds: Vec<&str> = w.iter().map(|e| e.component().unwrap().as_str()).collect();
        assert_eq!(kinds, ["tool", "right", "read", "write", "max_calls"]);
        let narrow = caveats_for(
            &args(json!({"tools": ["file_view"], "read": ["src/a"], "max_calls": 2})),
            now,
        )
        .unwrap();
        assert!(widenings(&parent, &narrow).is_empty());
        let child = parent.delegate(&narrow).unwrap();
        let g = key.verify(&child, now).unwrap();
        assert!(!g.rights().contains(Right::Delegate));
        assert_eq!(g.max_calls(), Some(2));
    }

    #[test]
    fn exec_programs_are_delegated_as_a_subset_only() {
        let key = RootKey::from_bytes([4; 32]);
        let parent = Token::mint(
            &key,
            &[
                "tool=*".parse().unwrap(),
                "right=read,exec,delegate".parse().unwrap(),
                "read=src".parse().unwrap(),
                "exec=cargo,python3".parse().unwrap(),
            ],
        )
        .unwrap();
        let now = SystemTime::now();
        let c = caveats_for(
            &args(json!({"tools": ["run_command"], "exec": ["cargo"]})),
            now,
        )
        .unwrap();
        let texts: Vec<String> = c.iter().map(ToString::to_string).collect();
        assert_eq!(texts[..3], ["tool=run_command", "right=exec", "exec=cargo"]);
        assert!(texts[3].starts_with("expires="), "{texts:?}");
        assert!(widenings(&parent, &c).is_empty());
        let g = key.verify(&parent.delegate(&c).unwrap(), now).unwrap();
        let names: Vec<&str> = g.exec_programs().iter().map(|p| p.as_str()).collect();
        assert_eq!(names, ["cargo"]);
        // A program the parent lacks is refused, naming the component.
        let wide = caveats_for(
            &args(json!({"tools": ["run_command"], "exec": ["sh"]})),
            now,
        )
        .unwrap();
        let kinds: Vec<&str> = widenings(&parent, &wide)
            .iter()
            .map(|e| e.component().unwrap().as_str())
            .collect();
        assert_eq!(kinds, ["exec"]);
        // Not a program: a command line.
        let e = caveats_for(&args(json!({"tools": ["a"], "exec": ["sh -c"]})), now).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("/exec"));
    }

    #[test]
    fn self_approve_is_handed_down_only_when_asked_for_and_held() {
        let key = RootKey::from_bytes([5; 32]);
        let holder = Token::mint(
            &key,
            &[
                "tool=*".parse().unwrap(),
                "right=read,write,delegate,self_approve".parse().unwrap(),
                "write=.".parse().unwrap(),
            ],
        )
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let s = Session::open(
            &key,
            &holder.encode(),
            crate::paths::Workspace::open(dir.path()).unwrap(),
        )
        .unwrap();
        let now = SystemTime::now();
        let without = args(json!({"tools": ["file_delete"], "write": ["."]}));
        let with = args(json!({"tools": ["file_delete"], "write": ["."], "self_approve": true}));
        let (child, _) = s.delegate(&caveats_for(&without, now).unwrap()).unwrap();
        assert!(!child.grant().self_approves(), "handed down unasked");
        let (child, _) = s.delegate(&caveats_for(&with, now).unwrap()).unwrap();
        assert!(child.grant().self_approves());
        // Asked for by a session that does not hold it: refused.
        let (plain, _) = s.delegate(&caveats_for(&without, now).unwrap()).unwrap();
        assert!(plain.delegate(&caveats_for(&with, now).unwrap()).is_err());
    }
}
