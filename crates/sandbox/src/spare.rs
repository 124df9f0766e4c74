//! Fresh instances made before the calls that use them, and used stores
//! torn down after, in a thread's idle time between calls.
//!
//! Every call runs in a fresh instance: instantiated for that call and used
//! by no other. Instantiating (taking a pooled slot, mapping the heap image,
//! resolving every import) and tearing the store down afterwards are fixed
//! costs of a call that do not depend on what it is granted. Where a thread
//! waits between calls anyway (a stdio session's call thread, see
//! `mcp::warm`, spins for the next call after answering one), that work
//! can move into the wait, off the path from request to answer. Such a
//! thread says so with [`Sandbox::defer_to_idle`] and then runs
//! [`Sandbox::idle_work`] after each answer; the calls *it* runs then
//! leave their work to it:
//!
//! - as a call starts, it queues a request for the plugin's next instance,
//!   a **spare**: a store and instance made under a neutral state (nothing
//!   mounted, no network, no programs, the epoch not kept ticking for it),
//!   kept in the plugin's [`Slot`];
//! - the plugin's next call takes the spare, puts its own state in (its
//!   WASI context with the call's mounts, network policy, captures,
//!   deadline, memory limit, programs) and arms its own fuel and deadline
//!   before any guest code runs. A spare serves one call; a call that finds
//!   none instantiates as before;
//! - after a call, its store is queued to be dropped.
//!
//! Nothing is handed to another thread: on a small virtual machine, waking
//! a parked thread on another CPU costs more than instantiating, and a
//! background thread doing this work made small calls slower (figures in
//! docs/performance.md). Calls on any other thread (in process,
//! over HTTP, a stdio call that found the warm thread busy) instantiate
//! and drop inline, and take a spare when one is there: nothing they leave
//! behind waits for a thread that may never run again.
//!
//! A spare is kept only when instantiating it called nothing in the host
//! (a call hook fails the instantiation at the first such call) within
//! [`SPARE_FUEL`](super::SPARE_FUEL): whatever guest code ran (start
//! functions) could compute but not see the neutral state, so the instance
//! is exactly what instantiating it for the call would have given, and the
//! fuel it took is charged to the call as it would have been. A component
//! whose instantiation calls the host never gets spares. A spare whose
//! instantiation took more memory than a call allows is dropped and the
//! call instantiates under its own limit, which fails the way it always
//! did. At most [`MAX_SPARES`] exist at once per sandbox, one per plugin,
//! and at most one is asked for at a time per plugin. The sandbox's pool
//! has room for them beside [`SandboxConfig::max_concurrent_instances`]
//! calls and as many stores waiting to be dropped; a call that finds that
//! many waiting drops its own store itself, so that waiting stores never
//! take a call's slot.
//!
//! [`SandboxConfig::max_concurrent_instances`]: super::SandboxConfig
//! [`Sandbox::defer_to_idle`]: super::Sandbox::defer_to_idle
//! [`Sandbox::idle_work`]: super::Sandbox::idle_work

use std::cell::Cell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use wasmtime::component::Instance;
use wasmtime::Store;

use super::{compat, Plugin, State};

thread_local! {
    /// The queue (its [`Shared::id`]) whose idle work this thread runs
    /// between its calls (see the module docs); 0: none.
    static DEFERS: Cell<u64> = const { Cell::new(0) };
}

/// Ids of queues, from 1.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// Most spares alive at once, across every plugin of a sandbox.
pub(super) const MAX_SPARES: usize = 8;

/// A fresh instance made ahead for one plugin's next call.
pub(super) struct Spare {
    pub store: Store<State>,
    pub fresh: Fresh,
    /// The fuel instantiating it took (its start functions').
    pub spent_fuel: u64,
    /// Counts this spare in [`Shared::live`] until it is taken or dropped.
    _live: Live,
}

/// An instance no call has used yet, with the `plugin` world's exports
/// (of the component's contract version) looked up.
pub(super) struct Fresh {
    pub instance: Instance,
    pub plugin: compat::Loaded,
}

/// One plugin's spare, shared by the plugin's clones.
#[derive(Default)]
pub(super) struct Slot {
    spare: Mutex<Option<Spare>>,
    /// Making a spare called the host or failed: this plugin gets none.
    refused: AtomicBool,
    /// A spare was asked for and not made yet: one request at a time.
    requested: AtomicBool,
}

impl Slot {
    /// The spare, if there is one.
    pub fn take(&self) -> Option<Spare> {
        self.spare.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    pub fn is_empty(&self) -> bool {
        self.spare
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_none()
    }
}

enum Job {
    /// A used store, to drop.
    Drop(Store<State>),
    /// Make this plugin a spare if its slot is empty.
    Make(Plugin),
}

/// The queue of idle work, shared by a sandbox and its plugins.
#[derive(Clone)]
pub(super) struct Spares {
    shared: Arc<Shared>,
    /// Most stores waiting to be dropped; a call that finds this many drops
    /// its own store (the pool has room for this many beside the calls).
    max_pending: usize,
}

/// What the callers and the idle threads both count.
struct Shared {
    /// This queue's identity for [`DEFERS`]: a thread that runs one
    /// sandbox's idle work leaves no work to another's.
    id: u64,
    jobs: Mutex<VecDeque<Job>>,
    /// Spares alive.
    live: AtomicUsize,
    /// Stores queued to be dropped and not dropped yet.
    pending: AtomicUsize,
    made: AtomicU64,
    taken: AtomicU64,
}

/// How many spares were made and taken, since the sandbox started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SpareStats {
    /// Spares made.
    pub made: u64,
    /// Calls that ran in a spare instead of instantiating.
    pub taken: u64,
}

/// One spare counted in [`Shared::live`].
struct Live(Arc<Shared>);

impl Drop for Live {
    fn drop(&mut self) {
        self.0.live.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Spares {
    /// An empty queue; at most `max_pending` stores wait in it.
    pub fn new(max_pending: usize) -> Spares {
        Spares {
            shared: Arc::new(Shared {
                id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
                jobs: Mutex::default(),
                live: AtomicUsize::new(0),
                pending: AtomicUsize::new(0),
                made: AtomicU64::new(0),
                taken: AtomicU64::new(0),
            }),
            max_pending,
        }
    }

    /// From now on, the calls of this thread on this queue's sandbox queue
    /// their work for [`Spares::run_idle`] instead of dropping inline and
    /// asking for no spare.
    pub fn defer(&self) {
        DEFERS.with(|d| d.set(self.shared.id));
    }

    /// Whether the calls of this thread leave their work to its idle time.
    fn deferring(&self) -> bool {
        DEFERS.with(Cell::get) == self.shared.id
    }

    fn push(&self, job: Job) {
        self.shared
            .jobs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push_back(job);
    }

    /// Runs every queued job, the ones queued meanwhile too.
    pub fn run_idle(&self) {
        loop {
            let job = self
                .shared
                .jobs
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .pop_front();
            match job {
                None => return,
                Some(Job::Drop(store)) => {
                    drop(store);
                    self.shared.pending.fetch_sub(1, Ordering::SeqCst);
                }
                Some(Job::Make(plugin)) => {
                    make(&plugin, &self.shared);
                    plugin.slot.requested.store(false, Ordering::SeqCst);
                }
            }
        }
    }

    /// Counts a call that ran in a spare.
    pub fn taken(&self) {
        self.shared.taken.fetch_add(1, Ordering::Relaxed);
    }

    pub fn stats(&self) -> SpareStats {
        SpareStats {
            made: self.shared.made.load(Ordering::Relaxed),
            taken: self.shared.taken.load(Ordering::Relaxed),
        }
    }

    /// Queues `store`, done with, to be dropped in this thread's idle
    /// time; drops it here when this thread runs no idle work or
    /// `max_pending` stores already wait, so that waiting stores never hold
    /// the slots of calls.
    pub fn retire(&self, store: Store<State>) {
        let shared = &self.shared;
        if !self.deferring() {
            return drop(store);
        }
        if shared.pending.fetch_add(1, Ordering::SeqCst) < self.max_pending {
            self.push(Job::Drop(store));
        } else {
            shared.pending.fetch_sub(1, Ordering::SeqCst);
            drop(store);
        }
    }

    /// Queues a spare for `plugin` if this thread runs idle work, the
    /// plugin has none, none is asked for, and it may have one. A call asks
    /// as it starts, so that the next call's instance is made in the idle
    /// time after it.
    pub fn request(&self, plugin: &Plugin) {
        let slot = &plugin.slot;
        if self.deferring()
            && !slot.refused.load(Ordering::Relaxed)
            && slot.is_empty()
            && self.shared.live.load(Ordering::SeqCst) < MAX_SPARES
            && !slot.requested.swap(true, Ordering::SeqCst)
        {
            self.push(Job::Make(plugin.clone()));
        }
    }
}

/// Makes `plugin` a spare into its slot, or marks the slot refused.
fn make(plugin: &Plugin, shared: &Arc<Shared>) {
    let slot = &plugin.slot;
    if !slot.is_empty() || shared.live.load(Ordering::SeqCst) >= MAX_SPARES {
        return;
    }
    match plugin.make_spare() {
        Some((store, fresh, spent_fuel)) => {
            shared.live.fetch_add(1, Ordering::SeqCst);
            shared.made.fetch_add(1, Ordering::Relaxed);
            // One request at a time per plugin: only this job fills the
            // slot, and it found it empty.
            *slot.spare.lock().unwrap_or_else(|e| e.into_inner()) = Some(Spare {
                store,
                fresh,
                spent_fuel,
                _live: Live(shared.clone()),
            });
        }
        None => slot.refused.store(true, Ordering::Relaxed),
    }
}
