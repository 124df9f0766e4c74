//! The effective [`Grant`] of a verified token: what a call may touch and
//! the checks a call passes against it (tool, path, time, fuel).

use super::*;

/// Read or write access to a workspace path (the host's one vocabulary).
pub use crate::paths::Access;

/// What a verified token allows: every caveat folded together (see the
/// module docs). Produced by [`RootKey::verify`] / [`Keyring::verify`].
/// Two grants are equal when they allow the same things: the token's
/// binding (which token it is) is not compared.
#[derive(Debug, Clone, Eq, Serialize)]
pub struct Grant {
    pub(super) key_id: KeyId,
    #[serde(serialize_with = "ser_hex")]
    pub(super) token_id: [u8; NONCE_LEN],
    /// The token's own id ([`Token::token_id`]).
    pub(super) id: TokenId,
    /// [`Token::binding`]: names this exact token.
    #[serde(skip)]
    pub(super) binding: [u8; 32],
    pub(super) tools: ToolSet,
    pub(super) rights: Rights,
    /// Readable prefixes: the `read` prefixes, and the `write` prefixes
    /// when the token has the `write` right.
    pub(super) read_prefixes: Vec<RelPath>,
    pub(super) write_prefixes: Vec<RelPath>,
    /// `ask_write` prefixes: writes there need an approval.
    pub(super) ask_write_prefixes: Vec<RelPath>,
    pub(super) net_origins: Vec<Origin>,
    pub(super) exec_programs: Vec<Program>,
    pub(super) fuel_ceiling: Option<u64>,
    pub(super) max_calls: Option<u64>,
    /// The smallest `budget_fuel` of the chain.
    pub(super) budget_fuel: Option<u64>,
    pub(super) expires_at: Option<u64>,
    /// The workspaces the token is for (`None`: any).
    pub(super) audience: Option<Vec<Audience>>,
    /// The record stores the token is bound to (empty: none).
    pub(super) stores: Vec<StoreId>,
    /// One per `max_calls` and `budget_fuel` caveat; known only after
    /// verification.
    #[serde(skip)]
    pub(super) budgets: Vec<CallBudget>,
}

impl PartialEq for Grant {
    fn eq(&self, other: &Grant) -> bool {
        self.key_id == other.key_id
            && self.token_id == other.token_id
            && self.id == other.id
            && self.tools == other.tools
            && self.rights == other.rights
            && self.read_prefixes == other.read_prefixes
            && self.write_prefixes == other.write_prefixes
            && self.ask_write_prefixes == other.ask_write_prefixes
            && self.net_origins == other.net_origins
            && self.exec_programs == other.exec_programs
            && self.fuel_ceiling == other.fuel_ceiling
            && self.max_calls == other.max_calls
            && self.budget_fuel == other.budget_fuel
            && self.expires_at == other.expires_at
            && self.audience == other.audience
            && self.stores == other.stores
            && self.budgets == other.budgets
    }
}

pub(super) fn ser_hex<S: Serializer>(id: &[u8; NONCE_LEN], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&hex::encode(id))
}

impl Grant {
    /// The key that minted the token.
    pub fn key_id(&self) -> KeyId {
        self.key_id
    }
    /// The token's id (its mint nonce) in hex, for audit lines.
    pub fn token_id_hex(&self) -> String {
        hex::encode(self.token_id)
    }
    /// The token's own id ([`Token::token_id`]): the mint nonce, or the
    /// last `id` caveat of a delegated token.
    pub fn id(&self) -> TokenId {
        self.id
    }
    /// [`Token::binding`] of the token, in hex: what a plan is bound to.
    pub fn binding_hex(&self) -> String {
        hex::encode(self.binding)
    }
    pub fn tools(&self) -> &ToolSet {
        &self.tools
    }
    pub fn rights(&self) -> Rights {
        self.rights
    }
    pub fn allows_tool(&self, name: &str) -> bool {
        // A console token opens the console and nothing else.
        if self.rights.contains(Right::Console) {
            return false;
        }
        // The script runner needs the `script` right besides the name.
        if name == super::rights::SCRIPT_TOOL && !self.rights.contains(Right::Script) {
            return false;
        }
        self.tools.allows(name)
    }

    /// Like [`allows_tool`](Grant::allows_tool), with a [`Denial`] to report.
    pub fn check_tool(&self, name: &str) -> Result<(), Denial> {
        if self.allows_tool(name) {
            return Ok(());
        }
        if name == super::rights::SCRIPT_TOOL && self.tools.allows(name) {
            return self.check_right(Right::Script, "run scripts");
        }
        let allowed = self.tools.to_string();
        Err(Denial {
            caveat: CaveatKind::Tool,
            message: format!("tool `{name}` is not allowed by the token (tools: {allowed})"),
            allowed,
            requested: name.to_owned(),
        })
    }

    fn check_right(&self, right: Right, doing: &str) -> Result<(), Denial> {
        if self.rights.contains(right) {
            return Ok(());
        }
        let allowed = self.rights.to_string();
        Err(Denial {
            caveat: CaveatKind::Right,
            message: format!(
                "{doing} needs the `{}` right, which the token does not grant (rights: {allowed})",
                right.as_str()
            ),
            allowed,
            requested: right.as_str().to_owned(),
        })
    }

    /// Checks access to a workspace-relative path (normalized again here;
    /// an absolute or escaping path is denied). `Read` needs the `read`
    /// right and a `read` or `write` prefix covering the path; `Write` needs
    /// the `write` right and a `write` prefix. Prefixes match whole
    /// segments.
    pub fn check_path(&self, path: &str, access: Access) -> Result<(), Denial> {
        let (right, kind, prefixes, verb) = match access {
            Access::Read => (
                Right::Read,
                CaveatKind::Read,
                &self.read_prefixes,
                "reading",
            ),
            Access::Write => (
                Right::Write,
                CaveatKind::Write,
                &self.write_prefixes,
                "writing",
            ),
        };
        self.check_right(right, &format!("{verb} `{path}`"))?;
        let allowed = || list(prefixes);
        let normal = match RelPath::parse(path) {
            Ok(p) => p,
            Err(e) => {
                return Err(Denial {
                    caveat: kind,
                    message: format!(
                        "`{}` is not a workspace path: {}; the token's {kind} prefixes are ({})",
                        e.path.escape_debug(),
                        e.message,
                        allowed()
                    ),
                    allowed: allowed(),
                    requested: path.to_owned(),
                })
            }
        };
        if prefixes.iter().any(|p| p.covers(&normal)) {
            return Ok(());
        }
        let shown = normal.as_str();
        Err(Denial {
            caveat: kind,
            message: format!(
                "`{shown}` is outside the token's {kind} prefixes ({})",
                allowed()
            ),
            allowed: allowed(),
            requested: path.to_owned(),
        })
    }

    /// Whether a write to `path`, outside the `write` prefixes, may run
    /// once approved: the token has the `write` right and an `ask_write`
    /// prefix covers the path.
    pub fn asks_for_write(&self, path: &str) -> bool {
        if !self.rights.contains(Right::Write) {
            return false;
        }
        match RelPath::parse(path) {
            Ok(p) => self.ask_write_prefixes.iter().any(|a| a.covers(&p)),
            Err(_) => false,
        }
    }

    /// The `ask_write` prefixes (empty without the `write` right).
    pub fn ask_write_prefixes(&self) -> &[RelPath] {
        if self.rights.contains(Right::Write) {
            &self.ask_write_prefixes
        } else {
            &[]
        }
    }

    /// Whether the holder may approve its own plans (the `self_approve`
    /// right).
    pub fn self_approves(&self) -> bool {
        self.rights.contains(Right::SelfApprove)
    }

    /// Checks a network origin (or URL: its origin is taken). Needs the
    /// `net` right and an exact scheme/host/port match with a `net` caveat
    /// (default ports 80/443 filled in on both sides).
    pub fn check_origin(&self, origin: &str) -> Result<(), Denial> {
        self.check_right(Right::Net, &format!("connecting to `{origin}`"))?;
        let allowed = || list(&self.net_origins);
        let parsed = Origin::from_url(origin).map_err(|e| Denial {
            caveat: CaveatKind::Net,
            message: format!("{e}; the token's network origins are ({})", allowed()),
            allowed: allowed(),
            requested: origin.to_owned(),
        })?;
        if self.net_origins.contains(&parsed) {
            return Ok(());
        }
        Err(Denial {
            caveat: CaveatKind::Net,
            message: format!(
                "`{parsed}` is not among the token's network origins ({})",
                allowed()
            ),
            allowed: allowed(),
            requested: origin.to_owned(),
        })
    }

    /// Denies once the token's expiry has passed (for grants held across
    /// calls).
    pub fn check_time(&self, now: SystemTime) -> Result<(), Denial> {
        match self.expires_at {
            Some(t) if unix_secs(now) >= t => Err(Denial {
                caveat: CaveatKind::Expires,
                message: format!("the token expired at {}", format_rfc3339(t)),
                allowed: t.to_string(),
                requested: unix_secs(now).to_string(),
            }),
            _ => Ok(()),
        }
    }

    /// Fuel for one call: the tool's default, capped by the token's ceiling.
    pub fn fuel(&self, tool_default: u64) -> u64 {
        self.fuel_ceiling
            .map_or(tool_default, |c| c.min(tool_default))
    }

    /// Wall-clock budget for one call: the tool's timeout, capped by the
    /// time left before the token expires (zero once expired).
    pub fn deadline(&self, tool_timeout: Duration, now: SystemTime) -> Duration {
        match self.expires_at {
            None => tool_timeout,
            Some(t) => {
                let left = (UNIX_EPOCH + Duration::from_secs(t))
                    .duration_since(now)
                    .unwrap_or(Duration::ZERO);
                left.min(tool_timeout)
            }
        }
    }

    /// Prefixes the caller may read (its `read` and `write` prefixes), for
    /// read-only sandbox mounts; empty without the `read` right. `""` is
    /// the workspace root.
    pub fn read_prefixes(&self) -> &[RelPath] {
        if self.rights.contains(Right::Read) {
            &self.read_prefixes
        } else {
            &[]
        }
    }

    /// Prefixes the caller may write, for writable sandbox mounts; empty
    /// without the `write` right. (A writable WASI preopen is readable too.)
    pub fn write_prefixes(&self) -> &[RelPath] {
        if self.rights.contains(Right::Write) {
            &self.write_prefixes
        } else {
            &[]
        }
    }

    /// Whether the caller may see secrets: the `secrets` right. Its calls
    /// are not redacted and may pass a secret to a network tool.
    pub fn sees_secrets(&self) -> bool {
        self.rights.contains(Right::Secrets)
    }

    /// Origins the caller may connect to; empty without the `net` right.
    pub fn net_origins(&self) -> &[Origin] {
        if self.rights.contains(Right::Net) {
            &self.net_origins
        } else {
            &[]
        }
    }

    /// Programs the caller may run (names or absolute paths, as the
    /// `exec` caveats list them); empty without the `exec` right. A call
    /// runs those its tool also declares in `needs.exec`.
    pub fn exec_programs(&self) -> &[Program] {
        if self.rights.contains(Right::Exec) {
            &self.exec_programs
        } else {
            &[]
        }
    }

    pub fn fuel_ceiling(&self) -> Option<u64> {
        self.fuel_ceiling
    }

    /// The call budget of the token (the smallest `max_calls`). The grant
    /// cannot count calls: see [`call_budgets`](Grant::call_budgets).
    pub fn max_calls(&self) -> Option<u64> {
        self.max_calls
    }

    /// The total fuel of the token's chain (the smallest `budget_fuel`).
    pub fn budget_fuel(&self) -> Option<u64> {
        self.budget_fuel
    }

    /// One [`CallBudget`] per `max_calls` and `budget_fuel` caveat, in
    /// chain order: what a host counts each call against. Filled by
    /// [`RootKey::verify`] (it needs the signature chain); empty in a grant
    /// from [`Token::grant_unverified`].
    pub fn call_budgets(&self) -> &[CallBudget] {
        &self.budgets
    }

    /// Unix seconds after which the token is expired.
    pub fn expires_at(&self) -> Option<u64> {
        self.expires_at
    }

    /// The workspaces whose hosts honour the token; `None`: any.
    pub fn audience(&self) -> Option<&[Audience]> {
        self.audience.as_deref()
    }

    /// Whether a host whose workspace root is `root` honours the token.
    pub fn allows_workspace(&self, root: &std::path::Path) -> bool {
        self.audience
            .as_ref()
            .is_none_or(|list| list.iter().any(|a| a.names(root)))
    }

    /// The record stores the token is bound to (`store` caveats).
    pub fn stores(&self) -> &[StoreId] {
        &self.stores
    }
}

impl fmt::Display for Grant {
    /// A multi-line summary for `inspect`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let opt = |v: Option<u64>| v.map_or_else(|| "no limit".to_owned(), |n| n.to_string());
        writeln!(f, "key:      {}", self.key_id)?;
        writeln!(f, "token:    {}", self.token_id_hex())?;
        writeln!(f, "tools:    {}", self.tools)?;
        writeln!(f, "rights:   {}", self.rights)?;
        writeln!(f, "read:     {}", list(self.read_prefixes()))?;
        writeln!(f, "write:    {}", list(self.write_prefixes()))?;
        if !self.ask_write_prefixes().is_empty() {
            writeln!(f, "ask:      {}", list(self.ask_write_prefixes()))?;
        }
        writeln!(f, "net:      {}", list(self.net_origins()))?;
        writeln!(f, "exec:     {}", list(self.exec_programs()))?;
        writeln!(f, "fuel:     {}", opt(self.fuel_ceiling))?;
        writeln!(f, "calls:    {}", opt(self.max_calls))?;
        if let Some(aud) = &self.audience {
            writeln!(f, "audience: {}", list(aud))?;
        }
        if !self.stores.is_empty() {
            writeln!(f, "store:    {}", list(&self.stores))?;
        }
        match self.expires_at {
            Some(t) => write!(f, "expires:  {} ({t})", format_rfc3339(t)),
            None => write!(f, "expires:  never"),
        }
    }
}
