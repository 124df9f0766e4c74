//! Caveats: the typed conditions a token carries, their text syntax
//! (`kind=value`), their binary form and their display.

use super::*;

/// The type of a caveat; its [`as_str`](CaveatKind::as_str) is the text
/// keyword.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CaveatKind {
    Tool,
    Right,
    Read,
    Write,
    AskWrite,
    Net,
    Exec,
    Fuel,
    MaxCalls,
    BudgetFuel,
    Expires,
    Id,
    Audience,
    Store,
    Unknown,
}

impl CaveatKind {
    /// `tool`, `right`, `read`, `write`, `ask_write`, `net`, `exec`, `fuel`, `max_calls`,
    /// `budget_fuel`, `expires`, `id` (`unknown` for unknown types).
    pub fn as_str(self) -> &'static str {
        match self {
            CaveatKind::Tool => "tool",
            CaveatKind::Right => "right",
            CaveatKind::Read => "read",
            CaveatKind::Write => "write",
            CaveatKind::AskWrite => "ask_write",
            CaveatKind::Net => "net",
            CaveatKind::Exec => "exec",
            CaveatKind::Fuel => "fuel",
            CaveatKind::MaxCalls => "max_calls",
            CaveatKind::BudgetFuel => "budget_fuel",
            CaveatKind::Expires => "expires",
            CaveatKind::Id => "id",
            CaveatKind::Audience => "aud",
            CaveatKind::Store => "store",
            CaveatKind::Unknown => "unknown",
        }
    }
}

impl fmt::Display for CaveatKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One typed caveat. See the [module docs](crate::policy::capability) for the text syntax and the
/// folding rules. List variants must not be empty.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Caveat {
    /// `tool=file_view,git_*`
    Tools(Vec<ToolPattern>),
    /// `right=read,write`
    Rights(Rights),
    /// `read=src,docs`
    Read(Vec<RelPath>),
    /// `write=src/gen`
    Write(Vec<RelPath>),
    /// `ask_write=docs`: a write under one of these prefixes but outside
    /// the `write` prefixes is not denied: it runs once a person approved
    /// it (or on the holder's own plan with `self_approve`). Needs the
    /// `write` right like any write.
    AskWrite(Vec<RelPath>),
    /// `net=https://api.example.com:443`
    Net(Vec<Origin>),
    /// `exec=cargo,/usr/bin/make`: native programs, by name (looked up on
    /// the host's `PATH` when a call runs) or absolute path.
    Exec(Vec<Program>),
    /// `fuel=1000000`
    Fuel(u64),
    /// `max_calls=10`
    MaxCalls(u64),
    /// `budget_fuel=5000000000`: fuel consumed by all calls of the chain
    /// from this point on, together.
    BudgetFuel(u64),
    /// `expires=1767225600` (unix seconds)
    Expires(u64),
    /// `id=<32 hex digits>`: a nonce naming the token made by this
    /// attenuation ([`Token::delegate`]), the key of its revocation and of
    /// its line in `cap list`. Grants and limits nothing.
    Id(TokenId),
    /// `aud=/home/u/proj`: the workspaces whose hosts honour the token
    /// ([`Audience`]).
    Audience(Vec<Audience>),
    /// `store=<32 hex digits>`: the record store that counts the token's
    /// budgets and holds its revocations ([`StoreId`]).
    Store(StoreId),
    /// A caveat type this host does not know, kept as found in a decoded
    /// token so it can be shown; verification rejects it.
    Unknown { kind: String, value: String },
}

impl Caveat {
    /// Parses `TYPE=VALUE`. Unknown types are an error
    /// ([`CapError::UnknownCaveat`]); bad values are [`CapError::Malformed`].
    /// `expires` takes unix seconds or RFC 3339.
    pub fn parse(s: &str) -> Result<Caveat, CapError> {
        match Caveat::parse_inner(s, None)? {
            Caveat::Unknown { kind, .. } => Err(CapError::UnknownCaveat(kind)),
            c => Ok(c),
        }
    }

    /// Like [`Caveat::parse`], but `expires` also takes a duration from
    /// `now` (`30s`, `10m`, `2h`, `7d`, `1h30m`): see [`parse_expiry`].
    pub fn parse_at(s: &str, now: SystemTime) -> Result<Caveat, CapError> {
        match Caveat::parse_inner(s, Some(now))? {
            Caveat::Unknown { kind, .. } => Err(CapError::UnknownCaveat(kind)),
            c => Ok(c),
        }
    }

    /// The wire form: unknown types are kept (and rejected at verification).
    pub(super) fn parse_wire(s: &str) -> Result<Caveat, CapError> {
        Caveat::parse_inner(s, None)
    }

    fn parse_inner(s: &str, now: Option<SystemTime>) -> Result<Caveat, CapError> {
        let (kind, value) = s.split_once('=').ok_or_else(|| {
            malformed(format!(
                "`{s}` is not a caveat: expected TYPE=VALUE, e.g. `tool=file_view`"
            ))
        })?;
        let (kind, value) = (kind.trim(), value.trim());
        let items = || -> Result<Vec<&str>, CapError> {
            let items: Vec<&str> = value.split(',').map(str::trim).collect();
            if items.iter().any(|i| i.is_empty()) {
                return Err(malformed(format!(
                    "`{s}`: empty value (give one or more comma-separated values)"
                )));
            }
            Ok(items)
        };
        let path = |p: &str| {
            parse_prefix(p)
                .map_err(|e| malformed(format!("`{s}`: `{p}` is not a workspace path: {e}")))
        };
        let number = || -> Result<u64, CapError> {
            if value.is_empty() || value.len() > 20 || !value.bytes().all(|b| b.is_ascii_digit()) {
                return Err(malformed(format!("`{s}`: expected a whole number")));
            }
            value
                .parse()
                .map_err(|_| malformed(format!("`{s}`: number too large")))
        };
        Ok(match kind {
            "tool" => Caveat::Tools(
                items()?
                    .into_iter()
                    .map(ToolPattern::parse)
                    .collect::<Result<_, _>>()?,
            ),
            // `right=none` grants no right (what `Rights` shows when empty).
            "right" if value == "none" => Caveat::Rights(Rights::NONE),
            "right" => {
                let mut rights = Rights::NONE;
                for r in items()? {
                    rights = rights.union(Rights::of(&[r.parse()?]));
                }
                Caveat::Rights(rights)
            }
            "read" => Caveat::Read(items()?.into_iter().map(path).collect::<Result<_, _>>()?),
            "write" => Caveat::Write(items()?.into_iter().map(path).collect::<Result<_, _>>()?),
            "ask_write" => {
                Caveat::AskWrite(items()?.into_iter().map(path).collect::<Result<_, _>>()?)
            }
            "net" => Caveat::Net(
                items()?
                    .into_iter()
                    .map(|o| Origin::parse(o).map_err(|e| malformed(format!("`{s}`: {e}"))))
                    .collect::<Result<_, _>>()?,
            ),
            "exec" => Caveat::Exec(
                items()?
                    .into_iter()
                    .map(|p| Program::parse(p).map_err(|e| malformed(format!("`{s}`: {e}"))))
                    .collect::<Result<_, _>>()?,
            ),
            "fuel" => Caveat::Fuel(number()?),
            "max_calls" => Caveat::MaxCalls(number()?),
            "budget_fuel" => Caveat::BudgetFuel(number()?),
            "id" => Caveat::Id(
                value
                    .parse()
                    .map_err(|e: CapError| malformed(format!("`{s}`: {e}")))?,
            ),
            "aud" => Caveat::Audience(
                items()?
                    .into_iter()
                    .map(str::parse)
                    .collect::<Result<_, _>>()?,
            ),
            "store" => Caveat::Store(value.parse()?),
            "expires" => Caveat::Expires(match now {
                Some(now) => parse_expiry(value, now)?,
                None => parse_absolute_expiry(value)?,
            }),
            _ => Caveat::Unknown {
                kind: kind.to_owned(),
                value: value.to_owned(),
            },
        })
    }

    /// The caveat's type.
    pub fn kind(&self) -> CaveatKind {
        match self {
            Caveat::Tools(_) => CaveatKind::Tool,
            Caveat::Rights(_) => CaveatKind::Right,
            Caveat::Read(_) => CaveatKind::Read,
            Caveat::Write(_) => CaveatKind::Write,
            Caveat::AskWrite(_) => CaveatKind::AskWrite,
            Caveat::Net(_) => CaveatKind::Net,
            Caveat::Exec(_) => CaveatKind::Exec,
            Caveat::Fuel(_) => CaveatKind::Fuel,
            Caveat::MaxCalls(_) => CaveatKind::MaxCalls,
            Caveat::BudgetFuel(_) => CaveatKind::BudgetFuel,
            Caveat::Expires(_) => CaveatKind::Expires,
            Caveat::Id(_) => CaveatKind::Id,
            Caveat::Audience(_) => CaveatKind::Audience,
            Caveat::Store(_) => CaveatKind::Store,
            Caveat::Unknown { .. } => CaveatKind::Unknown,
        }
    }

    /// The canonical text, checked to parse back to the same caveat (so an
    /// empty list, or anything else that would not survive decoding, is
    /// refused before it is signed).
    pub(super) fn wire_text(&self) -> Result<String, String> {
        if let Caveat::Unknown { kind, .. } = self {
            return Err(format!("unknown caveat type `{kind}`"));
        }
        let text = self.to_string();
        match Caveat::parse_wire(&text) {
            Ok(back) if back == *self => {}
            _ => return Err(format!("caveat `{text}` does not round-trip (empty list?)")),
        }
        if text.len() > usize::from(u16::MAX) {
            return Err(format!(
                "a caveat is {} bytes long (at most 65535)",
                text.len()
            ));
        }
        Ok(text)
    }
}

impl FromStr for Caveat {
    type Err = CapError;
    fn from_str(s: &str) -> Result<Caveat, CapError> {
        Caveat::parse(s)
    }
}

pub(super) fn write_list<T: fmt::Display>(f: &mut fmt::Formatter<'_>, items: &[T]) -> fmt::Result {
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            f.write_str(",")?;
        }
        write!(f, "{item}")?;
    }
    Ok(())
}

impl fmt::Display for Caveat {
    /// The canonical text form, e.g. `read=src,docs`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Caveat::Tools(v) => {
                f.write_str("tool=")?;
                write_list(f, v)
            }
            Caveat::Rights(r) => write!(f, "right={r}"),
            Caveat::Read(v) => {
                f.write_str("read=")?;
                write_list(f, v)
            }
            Caveat::Write(v) => {
                f.write_str("write=")?;
                write_list(f, v)
            }
            Caveat::AskWrite(v) => {
                f.write_str("ask_write=")?;
                write_list(f, v)
            }
            Caveat::Net(v) => {
                f.write_str("net=")?;
                write_list(f, v)
            }
            Caveat::Exec(v) => {
                f.write_str("exec=")?;
                write_list(f, v)
            }
            Caveat::Fuel(n) => write!(f, "fuel={n}"),
            Caveat::MaxCalls(n) => write!(f, "max_calls={n}"),
            Caveat::BudgetFuel(n) => write!(f, "budget_fuel={n}"),
            Caveat::Expires(t) => write!(f, "expires={t}"),
            Caveat::Id(id) => write!(f, "id={id}"),
            Caveat::Audience(v) => {
                f.write_str("aud=")?;
                write_list(f, v)
            }
            Caveat::Store(id) => write!(f, "store={id}"),
            Caveat::Unknown { kind, value } => write!(f, "{kind}={value}"),
        }
    }
}

/// `a, b, c`, or `none` for an empty list (for messages).
pub(super) fn list<T: fmt::Display>(items: &[T]) -> String {
    if items.is_empty() {
        return "none".to_owned();
    }
    items
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}
