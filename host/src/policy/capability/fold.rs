//! Folding a token's caveats into one [`Grant`]: each kind narrows (tool
//! sets and prefixes intersect, ceilings take the minimum), never widens.

use super::*;

/// Something with a "covers" order: a prefix covers what is under it.
pub(super) trait Covers: Clone + Ord {
    fn covers(&self, other: &Self) -> bool;
}

impl Covers for ToolPattern {
    fn covers(&self, other: &Self) -> bool {
        ToolPattern::covers(self, other)
    }
}

impl Covers for RelPath {
    fn covers(&self, other: &Self) -> bool {
        RelPath::covers(self, other)
    }
}

impl Covers for Origin {
    fn covers(&self, other: &Self) -> bool {
        self == other
    }
}

impl Covers for Audience {
    fn covers(&self, other: &Self) -> bool {
        self == other
    }
}

impl Covers for Program {
    fn covers(&self, other: &Self) -> bool {
        self == other
    }
}

/// Sorts, dedups and drops items covered by another item.
pub(super) fn minimize<T: Covers>(mut items: Vec<T>) -> Vec<T> {
    if items.len() < 2 {
        return items;
    }
    items.sort();
    items.dedup();
    // Covering is transitive and, after dedup, antisymmetric: dropping
    // covered items one at a time leaves exactly the maximal ones.
    let mut i = items.len();
    while i > 0 {
        i -= 1;
        let covered = (0..items.len()).any(|j| j != i && items[j].covers(&items[i]));
        if covered {
            items.remove(i);
        }
    }
    items
}

/// The set of things covered by both `a` and `b`.
pub(super) fn intersect<T: Covers>(a: &[T], b: &[T]) -> Vec<T> {
    let mut out = Vec::new();
    for x in a {
        for y in b {
            if x.covers(y) {
                out.push(y.clone());
            } else if y.covers(x) {
                out.push(x.clone());
            }
        }
    }
    minimize(out)
}

/// Grant dimension: `None` = not opened at mint (grants nothing).
pub(super) fn narrow<T: Covers>(slot: &mut Option<Vec<T>>, items: &[T], minted: bool) {
    match slot {
        Some(current) => *current = intersect(current, items),
        None if minted => *slot = Some(minimize(items.to_vec())),
        // Appended for a dimension the minter did not open: stays closed.
        None => {}
    }
}

pub(super) fn min_opt(slot: &mut Option<u64>, v: u64) {
    *slot = Some(slot.map_or(v, |cur| cur.min(v)));
}

#[derive(Default)]
pub(super) struct Fold {
    pub(super) tools: Option<Vec<ToolPattern>>,
    pub(super) rights: Option<Rights>,
    pub(super) read: Option<Vec<RelPath>>,
    pub(super) write: Option<Vec<RelPath>>,
    pub(super) ask_write: Option<Vec<RelPath>>,
    pub(super) net: Option<Vec<Origin>>,
    pub(super) exec: Option<Vec<Program>>,
    pub(super) fuel: Option<u64>,
    pub(super) max_calls: Option<u64>,
    pub(super) budget_fuel: Option<u64>,
    pub(super) expires: Option<u64>,
    /// `None`: any workspace. Narrowed by every `aud` caveat, appended or
    /// minted.
    pub(super) audience: Option<Vec<Audience>>,
    /// Every `store` caveat's id (a host's store must be each of them).
    pub(super) stores: Vec<StoreId>,
}

impl Fold {
    pub(super) fn apply(&mut self, caveat: &Caveat, minted: bool) -> Result<(), CapError> {
        match caveat {
            Caveat::Tools(v) => narrow(&mut self.tools, v, minted),
            Caveat::Rights(r) => match &mut self.rights {
                Some(cur) => *cur = cur.intersection(*r),
                None if minted => self.rights = Some(*r),
                None => {}
            },
            Caveat::Read(v) => narrow(&mut self.read, v, minted),
            Caveat::Write(v) => narrow(&mut self.write, v, minted),
            Caveat::AskWrite(v) => narrow(&mut self.ask_write, v, minted),
            Caveat::Net(v) => narrow(&mut self.net, v, minted),
            Caveat::Exec(v) => narrow(&mut self.exec, v, minted),
            Caveat::Fuel(n) => min_opt(&mut self.fuel, *n),
            Caveat::MaxCalls(n) => min_opt(&mut self.max_calls, *n),
            Caveat::BudgetFuel(n) => min_opt(&mut self.budget_fuel, *n),
            Caveat::Expires(t) => min_opt(&mut self.expires, *t),
            Caveat::Id(_) => {}
            Caveat::Audience(v) => {
                // Binding an unbound token narrows it too.
                narrow(&mut self.audience, v, true);
            }
            Caveat::Store(id) => {
                if !self.stores.contains(id) {
                    self.stores.push(id.clone());
                }
            }
            Caveat::Unknown { kind, .. } => return Err(CapError::UnknownCaveat(kind.clone())),
        }
        Ok(())
    }

    /// Refuses `caveat` if it asks for anything the fold so far does not grant.
    pub(super) fn check_narrows(&self, caveat: &Caveat) -> Result<(), WidenError> {
        fn none<T>(slot: &Option<Vec<T>>) -> &[T] {
            slot.as_deref().unwrap_or(&[])
        }
        fn widens(component: CaveatKind, message: String) -> Result<(), WidenError> {
            Err(WidenError::Widens { component, message })
        }
        match caveat {
            Caveat::Tools(v) => {
                let parent = none(&self.tools);
                if let Some(p) = v.iter().find(|p| !parent.iter().any(|q| q.covers(p))) {
                    return widens(
                        CaveatKind::Tool,
                        format!(
                            "tool `{p}` is not allowed by the parent token (tools: {})",
                            list(parent)
                        ),
                    );
                }
            }
            Caveat::Rights(r) => {
                let parent = self.rights.unwrap_or(Rights::NONE);
                if let Some(extra) = r.iter().find(|x| !parent.contains(*x)) {
                    return widens(
                        CaveatKind::Right,
                        format!(
                            "right `{}` is not granted by the parent token (rights: {parent})",
                            extra.as_str()
                        ),
                    );
                }
            }
            Caveat::Read(v) | Caveat::Write(v) | Caveat::AskWrite(v) => {
                let (kind, parent) = match caveat {
                    Caveat::Read(_) => (CaveatKind::Read, none(&self.read)),
                    Caveat::Write(_) => (CaveatKind::Write, none(&self.write)),
                    _ => (CaveatKind::AskWrite, none(&self.ask_write)),
                };
                if let Some(p) = v.iter().find(|p| !parent.iter().any(|q| q.covers(p))) {
                    return widens(
                        kind,
                        format!(
                            "{kind} prefix `{p}` is outside the parent token's {kind} prefixes ({})",
                            list(parent)
                        ),
                    );
                }
            }
            Caveat::Net(v) => {
                let parent = none(&self.net);
                if let Some(o) = v.iter().find(|o| !parent.contains(o)) {
                    return widens(
                        CaveatKind::Net,
                        format!(
                            "network origin `{o}` is not among the parent token's origins ({})",
                            list(parent)
                        ),
                    );
                }
            }
            Caveat::Exec(v) => {
                let parent = none(&self.exec);
                if let Some(p) = v.iter().find(|p| !parent.contains(p)) {
                    return widens(
                        CaveatKind::Exec,
                        format!(
                            "program `{p}` is not among the parent token's programs ({})",
                            list(parent)
                        ),
                    );
                }
            }
            Caveat::Id(_) | Caveat::Store(_) => {}
            Caveat::Audience(v) => {
                if let Some(parent) = &self.audience {
                    if let Some(a) = v.iter().find(|a| !parent.contains(a)) {
                        return widens(
                            CaveatKind::Audience,
                            format!(
                                "audience `{a}` is not among the parent token's ({})",
                                list(parent)
                            ),
                        );
                    }
                }
            }
            Caveat::Fuel(n) | Caveat::MaxCalls(n) | Caveat::BudgetFuel(n) | Caveat::Expires(n) => {
                let (kind, parent, what) = match caveat {
                    Caveat::Fuel(_) => (CaveatKind::Fuel, self.fuel, "higher than"),
                    Caveat::MaxCalls(_) => (CaveatKind::MaxCalls, self.max_calls, "higher than"),
                    Caveat::BudgetFuel(_) => {
                        (CaveatKind::BudgetFuel, self.budget_fuel, "higher than")
                    }
                    _ => (CaveatKind::Expires, self.expires, "later than"),
                };
                if let Some(p) = parent.filter(|p| n > p) {
                    let show = |v: u64| match kind {
                        CaveatKind::Expires => format!("{} ({v})", format_rfc3339(v)),
                        _ => v.to_string(),
                    };
                    return widens(
                        kind,
                        format!(
                            "{kind} {} is {what} the parent token's ({})",
                            show(*n),
                            show(p)
                        ),
                    );
                }
            }
            Caveat::Unknown { kind, .. } => return Err(WidenError::UnknownCaveat(kind.clone())),
        }
        Ok(())
    }

    fn finish(self, token: &Token) -> Grant {
        let read = self.read.unwrap_or_default();
        let write = self.write.unwrap_or_default();
        let rights = self.rights.unwrap_or(Rights::NONE);
        // Write prefixes are readable only while the token can still write:
        // a delegate that dropped `write` and narrowed `read` must not keep
        // reading the parent's whole write area.
        let readable = if write.is_empty() || !rights.contains(Right::Write) {
            read
        } else if read.is_empty() {
            write.clone()
        } else {
            minimize(read.into_iter().chain(write.iter().cloned()).collect())
        };
        Grant {
            key_id: token.key_id(),
            token_id: token.id(),
            id: token.token_id(),
            binding: token.binding(),
            tools: ToolSet(self.tools.unwrap_or_default()),
            rights,
            read_prefixes: readable,
            write_prefixes: write,
            ask_write_prefixes: self.ask_write.unwrap_or_default(),
            net_origins: self.net.unwrap_or_default(),
            exec_programs: self.exec.unwrap_or_default(),
            fuel_ceiling: self.fuel,
            max_calls: self.max_calls,
            budget_fuel: self.budget_fuel,
            expires_at: self.expires,
            audience: self.audience,
            stores: self.stores,
            budgets: Vec::new(),
        }
    }
}

pub(super) fn fold(token: &Token) -> Result<Grant, CapError> {
    let minted = token.minted_len();
    if token.caveats.is_empty() || minted == 0 {
        return Err(CapError::Empty);
    }
    let mut state = Fold::default();
    for (i, c) in token.caveats.iter().enumerate() {
        state.apply(c, i < minted)?;
    }
    Ok(state.finish(token))
}
