//! The in-process lock table: one per process, shared by every host in it.
//!
//! A call's [`Plan`] is granted when each of its nodes is compatible with
//! what the holders hold there ([`NodeMode::compatible`]) **and** with the plan
//! of every call that started waiting before it and conflicts with it: calls
//! that conflict are served in arrival order. Waiters sleep on one condition
//! variable, woken when locks are released or a waiter gives up; a wait
//! also wakes every [`CANCEL_POLL`] to notice a cancellation.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, LazyLock, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::{NodeMode, Plan, WaitError};
use crate::sandbox::CancelToken;

/// How often a waiter looks at its cancel token.
const CANCEL_POLL: Duration = Duration::from_millis(25);

#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    intent_read: u32,
    intent_write: u32,
    read: u32,
    write: u32,
}

impl Counts {
    fn admits(&self, want: NodeMode) -> bool {
        let held = [
            (self.intent_read, NodeMode::IntentRead),
            (self.intent_write, NodeMode::IntentWrite),
            (self.read, NodeMode::Read),
            (self.write, NodeMode::Write),
        ];
        held.iter()
            .all(|&(n, mode)| n == 0 || mode.compatible(want))
    }

    fn slot(&mut self, mode: NodeMode) -> &mut u32 {
        match mode {
            NodeMode::IntentRead => &mut self.intent_read,
            NodeMode::IntentWrite => &mut self.intent_write,
            NodeMode::Read => &mut self.read,
            NodeMode::Write => &mut self.write,
        }
    }

    fn is_empty(&self) -> bool {
        self.intent_read + self.intent_write + self.read + self.write == 0
    }
}

#[derive(Default)]
struct Table {
    /// Node (workspace and path or origin) → what is held there.
    held: HashMap<String, Counts>,
    /// Waiting plans, oldest first.
    waiting: Vec<(u64, Arc<Plan>)>,
    next_ticket: u64,
}

impl Table {
    fn fits(&self, plan: &Plan) -> bool {
        plan.nodes
            .iter()
            .all(|(node, mode)| self.held.get(node.as_str()).is_none_or(|c| c.admits(*mode)))
    }

    /// Whether `plan` may go ahead of the waiters older than `ticket`.
    fn ahead_clear(&self, plan: &Plan, ticket: u64) -> bool {
        self.waiting
            .iter()
            .take_while(|(t, _)| *t < ticket)
            .all(|(_, w)| w.compatible(plan))
    }

    fn add(&mut self, plan: &Plan) {
        for (node, mode) in &plan.nodes {
            let c = match self.held.get_mut(node.as_str()) {
                Some(c) => c,
                None => self.held.entry(node.clone()).or_default(),
            };
            *c.slot(*mode) += 1;
        }
    }

    fn remove(&mut self, plan: &Plan) {
        for (node, mode) in &plan.nodes {
            if let Some(c) = self.held.get_mut(node.as_str()) {
                let n = c.slot(*mode);
                *n = n.saturating_sub(1);
                if c.is_empty() {
                    self.held.remove(node.as_str());
                }
            }
        }
    }

    fn unwait(&mut self, ticket: u64) {
        self.waiting.retain(|(t, _)| *t != ticket);
    }
}

static TABLE: LazyLock<(Mutex<Table>, Condvar)> =
    LazyLock::new(|| (Mutex::new(Table::default()), Condvar::new()));

fn lock() -> MutexGuard<'static, Table> {
    // A panic while holding the table mutex cannot leave it half-updated in
    // a way that matters more than losing every lock: keep going.
    TABLE.0.lock().unwrap_or_else(|e| e.into_inner())
}

/// Locks held in the table; dropping releases them and wakes the waiters.
#[derive(Debug)]
pub(crate) struct Guard {
    plan: Arc<Plan>,
    /// Whether the call had to wait for another.
    pub(crate) waited: bool,
}

impl Guard {
    pub(crate) fn plan(&self) -> &Plan {
        &self.plan
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        lock().remove(&self.plan);
        TABLE.1.notify_all();
    }
}

/// Waits until `plan` may be held, at most until `deadline`.
pub(crate) fn acquire(
    plan: Plan,
    deadline: Instant,
    cancel: Option<&CancelToken>,
) -> Result<Guard, WaitError> {
    let start = Instant::now();
    let plan = Arc::new(plan);
    let mut t = lock();
    if t.fits(&plan) && t.waiting.iter().all(|(_, w)| w.compatible(&plan)) {
        t.add(&plan);
        return Ok(Guard {
            plan,
            waited: false,
        });
    }
    let ticket = t.next_ticket;
    t.next_ticket += 1;
    t.waiting.push((ticket, plan.clone()));
    loop {
        let now = Instant::now();
        let give_up = if cancel.is_some_and(CancelToken::is_cancelled) {
            Some(WaitError::Cancelled {
                waited: now - start,
            })
        } else if now >= deadline {
            Some(WaitError::Timeout {
                waited: now - start,
            })
        } else {
            None
        };
        if let Some(e) = give_up {
            t.unwait(ticket);
            drop(t);
            // Younger waiters may have been waiting only for this one.
            TABLE.1.notify_all();
            return Err(e);
        }
        let nap = (deadline - now).min(if cancel.is_some() {
            CANCEL_POLL
        } else {
            Duration::MAX
        });
        t = TABLE
            .1
            .wait_timeout(t, nap)
            .unwrap_or_else(|e| e.into_inner())
            .0;
        if t.fits(&plan) && t.ahead_clear(&plan, ticket) {
            t.unwait(ticket);
            t.add(&plan);
            return Ok(Guard { plan, waited: true });
        }
    }
}

/// How many calls wait in `workspace` (for tests).
#[cfg(test)]
pub(crate) fn waiters_in(workspace: &std::path::Path) -> usize {
    let ws = workspace.to_string_lossy();
    lock()
        .waiting
        .iter()
        .filter(|(_, p)| p.workspace == ws)
        .count()
}
