//! Fresh instances made before the calls that use them, and used stores
//! torn down after, both on a background thread.
//!
//! Every call runs in a fresh instance: instantiated for that call and used
//! by no other. Instantiating (taking a pooled slot, mapping the heap image,
//! resolving every import) and tearing the store down afterwards are fixed
//! costs of a call that do not depend on what it is granted: for the
//! reference tools, about a fifth of a 4 KiB `file_view` in process. So
//! they move off the call path:
//!
//! - as a call starts, it asks the [`Spares`] thread for the plugin's next
//!   instance, a **spare**: a store and instance made under a neutral state
//!   (nothing mounted, no network, no programs, the epoch not kept ticking
//!   for it), kept in the plugin's [`Slot`] and made while the call runs;
//! - the plugin's next call takes the spare, puts its own state in (its
//!   WASI context with the call's mounts, network policy, captures,
//!   deadline, memory limit, programs) and arms its own fuel and deadline
//!   before any guest code runs. A spare serves one call; a call that finds
//!   none instantiates as before;
//! - after a call, its store goes to the thread to be dropped.
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
//! many waiting (calls outpacing the thread) drops its own store itself, so
//! that waiting stores never take a call's slot.
//!
//! [`SandboxConfig::max_concurrent_instances`]: super::SandboxConfig

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use wasmtime::component::Instance;
use wasmtime::Store;

use super::{bindings, Plugin, State};

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
/// looked up.
pub(super) struct Fresh {
    pub instance: Instance,
    pub plugin: bindings::plugin::Plugin,
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

/// The background thread's queue, shared by a sandbox and its plugins. The
/// thread ends when the last of them is dropped.
#[derive(Clone)]
pub(super) struct Spares {
    jobs: mpsc::Sender<Job>,
    shared: Arc<Shared>,
    /// Most stores waiting to be dropped; a call that finds this many drops
    /// its own store (the pool has room for this many beside the calls).
    max_pending: usize,
}

/// What the callers and the thread both count.
#[derive(Default)]
struct Shared {
    /// Spares alive.
    live: AtomicUsize,
    /// Stores sent to be dropped and not dropped yet.
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
    /// Starts the thread; at most `max_pending` stores wait for it to drop
    /// them.
    pub fn start(max_pending: usize) -> Spares {
        let (jobs, queue) = mpsc::channel::<Job>();
        let shared = Arc::new(Shared::default());
        let counts = shared.clone();
        std::thread::Builder::new()
            .name("toolhost-spares".into())
            .spawn(move || {
                for job in queue {
                    match job {
                        Job::Drop(store) => {
                            drop(store);
                            counts.pending.fetch_sub(1, Ordering::SeqCst);
                        }
                        Job::Make(plugin) => {
                            make(&plugin, &counts);
                            plugin.slot.requested.store(false, Ordering::SeqCst);
                        }
                    }
                }
            })
            .expect("spawning the spares thread");
        Spares {
            jobs,
            shared,
            max_pending,
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

    /// Hands `store`, done with, to the thread to drop. When the thread is
    /// behind by `max_pending` stores, the store is dropped here instead,
    /// so that waiting stores never hold the slots of calls.
    pub fn retire(&self, store: Store<State>) {
        let pending = &self.shared.pending;
        if pending.fetch_add(1, Ordering::SeqCst) < self.max_pending {
            // The thread only ends once every sender is gone, and `self` is
            // one: these sends cannot fail while `self` exists.
            let _ = self.jobs.send(Job::Drop(store));
        } else {
            pending.fetch_sub(1, Ordering::SeqCst);
            drop(store);
        }
    }

    /// Asks the thread for a spare for `plugin` if it has none, none is
    /// being made, and it may have one. A call asks as it starts, so that
    /// the next call's instance is made while it runs.
    pub fn request(&self, plugin: &Plugin) {
        let slot = &plugin.slot;
        if !slot.refused.load(Ordering::Relaxed)
            && slot.is_empty()
            && self.shared.live.load(Ordering::SeqCst) < MAX_SPARES
            && !slot.requested.swap(true, Ordering::SeqCst)
        {
            let _ = self.jobs.send(Job::Make(plugin.clone()));
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
            // Only this thread fills slots, and it found this one empty.
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
