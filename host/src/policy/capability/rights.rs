//! The rights a token can grant (`read`, `write`, `net`, `secrets`,
//! `delegate`, `exec`, `metrics`, `self_approve`, `script`, `console`) and
//! sets of them.

use super::*;

/// One right a token can grant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Right {
    Read,
    Write,
    Net,
    /// Hand narrower tokens to sub-agents through the MCP `delegate` tool
    /// (granted only when minting asks for it).
    Delegate,
    /// See secrets: the call's output, logs and errors are not redacted, and
    /// a network tool's arguments may carry a secret.
    Secrets,
    /// Run native programs (the `exec` caveat's) through the plugin
    /// contract's `exec` import, in an OS sandbox.
    Exec,
    /// Read the HTTP server's `/metrics` (the whole host's figures, every
    /// token's calls together); granted only when minting asks for it.
    Metrics,
    /// Approve its own plans: an irreversible call (or a write under an
    /// `ask_write` prefix) runs on a plan token the holder got from its
    /// own dry run, with no person asked. Granted only when minting asks
    /// for it (`cap mint --self-approve`); without it such a call waits
    /// for a person ([`crate::effects::approval`]).
    SelfApprove,
    /// Run scripts: the `run_script` tool, whose inner tool calls go
    /// through the host under the same token ([`crate::script`]). Without
    /// it the tool is not in the caller's catalog.
    Script,
    /// Open the operator's console of `serve --http --console`. Granted
    /// only when minting asks for it (`cap mint --console`), and alone: a
    /// token holding it may call no tool.
    Console,
}

/// The tool the [`Right::Script`] right unlocks.
pub const SCRIPT_TOOL: &str = "run_script";

impl Right {
    /// Every right, in canonical order.
    pub const ALL: [Right; 10] = [
        Right::Read,
        Right::Write,
        Right::Net,
        Right::Delegate,
        Right::Secrets,
        Right::Exec,
        Right::Metrics,
        Right::SelfApprove,
        Right::Script,
        Right::Console,
    ];

    /// The caveat keyword: `read`, `write`, `net`, `delegate`, `secrets`,
    /// `exec`, `metrics`, `self_approve`, `script` or `console`.
    pub fn as_str(self) -> &'static str {
        match self {
            Right::Read => "read",
            Right::Write => "write",
            Right::Net => "net",
            Right::Delegate => "delegate",
            Right::Secrets => "secrets",
            Right::Exec => "exec",
            Right::Metrics => "metrics",
            Right::SelfApprove => "self_approve",
            Right::Script => "script",
            Right::Console => "console",
        }
    }

    fn bit(self) -> u16 {
        match self {
            Right::Read => 1,
            Right::Write => 2,
            Right::Net => 4,
            Right::Delegate => 8,
            Right::Secrets => 16,
            Right::Exec => 32,
            Right::Metrics => 64,
            Right::SelfApprove => 128,
            Right::Script => 256,
            Right::Console => 512,
        }
    }
}

impl FromStr for Right {
    type Err = CapError;
    fn from_str(s: &str) -> Result<Right, CapError> {
        match s {
            "read" => Ok(Right::Read),
            "write" => Ok(Right::Write),
            "net" => Ok(Right::Net),
            "delegate" => Ok(Right::Delegate),
            "secrets" => Ok(Right::Secrets),
            "exec" => Ok(Right::Exec),
            "metrics" => Ok(Right::Metrics),
            "self_approve" => Ok(Right::SelfApprove),
            "script" => Ok(Right::Script),
            "console" => Ok(Right::Console),
            _ => Err(malformed(format!(
                "`{s}` is not a right (use read, write, net, delegate, secrets, exec, metrics, self_approve or script)"
            ))),
        }
    }
}

/// A set of [`Right`]s.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Rights(pub(super) u16);

impl Rights {
    /// No rights.
    pub const NONE: Rights = Rights(0);
    /// `read`, `write`, `net`, `delegate`, `secrets`, `exec`, `metrics`,
    /// `self_approve`, `script` and `console`.
    pub const ALL: Rights = Rights(1023);

    /// The set holding exactly these rights.
    pub fn of(rights: &[Right]) -> Rights {
        Rights(rights.iter().fold(0, |acc, r| acc | r.bit()))
    }
    pub fn contains(self, right: Right) -> bool {
        self.0 & right.bit() != 0
    }
    /// Whether every right of `other` is in `self`.
    pub fn contains_all(self, other: Rights) -> bool {
        other.0 & !self.0 == 0
    }
    pub fn intersection(self, other: Rights) -> Rights {
        Rights(self.0 & other.0)
    }
    pub fn union(self, other: Rights) -> Rights {
        Rights(self.0 | other.0)
    }
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
    /// The rights in canonical order (read, write, net, delegate, secrets,
    /// exec, metrics, self_approve, script, console).
    pub fn iter(self) -> impl Iterator<Item = Right> {
        Right::ALL.into_iter().filter(move |r| self.contains(*r))
    }
}

impl fmt::Display for Rights {
    /// `read,write`, or `none` for the empty set.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return f.write_str("none");
        }
        for (i, r) in self.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            f.write_str(r.as_str())?;
        }
        Ok(())
    }
}

impl Serialize for Rights {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter().map(Right::as_str))
    }
}
