//! Watches the plugin directory and reloads the catalog when its `*.wasm`
//! files change (added, removed, or replaced: size or mtime differs), or
//! their `*.wasm.sig` signatures, or the directory's `toolhost.lock`: a
//! plugin refused as not locked loads once `plugin lock` pins it.
//!
//! The OS tells the watch thread about changes (inotify, through the
//! `notify` crate), so an idle server does not wake up for them; where
//! that is not available it polls every `--watch-ms`. A change is acted on
//! once the directory has been quiet for `--watch-ms` and two looks a
//! period apart see the same new listing, so a file still being written is
//! not loaded half-way.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::{load, Plugins, State};
use toolhost::Sandbox;

type Listing = BTreeMap<PathBuf, (u64, Option<SystemTime>)>;

fn scan(dir: &Path) -> Listing {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Listing::new();
    };
    entries
        .filter_map(|e| e.ok())
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.ends_with(".wasm")
                || name.ends_with(".wasm.sig")
                || name == toolhost::trust::LOCK_FILE_NAME
        })
        .filter_map(|e| {
            let meta = e.metadata().ok()?;
            meta.is_file()
                .then(|| (e.path(), (meta.len(), meta.modified().ok())))
        })
        .collect()
}

/// How the watch thread learns that the directory may have changed.
enum Wake {
    /// The OS's file notifications (inotify on Linux, through `notify`):
    /// the thread sleeps until the directory changes.
    Notified {
        /// Kept alive: dropping it ends the notifications.
        _watcher: notify::RecommendedWatcher,
        events: std::sync::mpsc::Receiver<()>,
    },
    /// Polling every period, when notifications cannot be had (no such
    /// directory yet, or the OS's watch limit reached).
    Polled,
}

impl Wake {
    fn new(dir: &Path) -> Wake {
        use notify::Watcher;
        let (tx, rx) = std::sync::mpsc::channel();
        // Opening or reading a file is no change, and the scans and loads
        // of this very thread open the directory and its files: waking up
        // for those would make it poll itself.
        let handler = move |event: notify::Result<notify::Event>| {
            if !matches!(&event, Ok(e) if matches!(e.kind, notify::EventKind::Access(_))) {
                let _ = tx.send(());
            }
        };
        let watcher = notify::recommended_watcher(handler).and_then(|mut w| {
            w.watch(dir, notify::RecursiveMode::NonRecursive)?;
            Ok(w)
        });
        match watcher {
            Ok(w) => Wake::Notified {
                _watcher: w,
                events: rx,
            },
            Err(e) => {
                log!(
                    "toolhost: cannot watch {} for changes ({e}); polling it instead",
                    dir.display()
                );
                Wake::Polled
            }
        }
    }

    /// Returns once the directory may have changed and then stayed quiet
    /// for `settle`; `false` when the notifications ended.
    fn wait(&self, settle: Duration) -> bool {
        match self {
            Wake::Notified { events, .. } => {
                if events.recv().is_err() {
                    return false;
                }
                while events.recv_timeout(settle).is_ok() {}
                true
            }
            Wake::Polled => {
                std::thread::sleep(settle);
                true
            }
        }
    }
}

pub(super) fn spawn(
    dir: PathBuf,
    every: Duration,
    sandbox: Sandbox,
    plugins: Plugins,
    state: Arc<State>,
) {
    // Watching starts before this returns, i.e. before the server answers
    // anything: a change a client makes after that is never missed.
    let wake = Wake::new(&dir);
    let mut loaded = scan(&dir);
    let spawned = std::thread::Builder::new()
        .name("toolhost-watch".into())
        .spawn(move || {
            let mut pending: Option<Listing> = None;
            loop {
                if !wake.wait(every) {
                    return;
                }
                let now = scan(&dir);
                if now == loaded {
                    pending = None;
                    continue;
                }
                match &wake {
                    // Quiet for a period since the last event: one more
                    // look a period later, so a file still being written
                    // (by a writer that pauses) is not loaded half-way.
                    Wake::Notified { .. } => {
                        std::thread::sleep(every);
                        if scan(&dir) != now {
                            continue;
                        }
                    }
                    Wake::Polled => {
                        if pending.as_ref() != Some(&now) {
                            pending = Some(now);
                            continue;
                        }
                    }
                }
                log!("toolhost: {} changed; reloading the plugins", dir.display());
                let next = load(
                    &sandbox,
                    &plugins,
                    state.records.as_ref(),
                    &state.recorder,
                    state.artifacts.as_ref(),
                    &state.client,
                );
                let count = next.tools.len();
                if state.install(next) {
                    log!("toolhost: {count} tools now; notifying clients");
                }
                loaded = now;
                pending = None;
            }
        });
    if let Err(e) = spawned {
        warn!("toolhost: warning: cannot watch the plugin directory: {e}");
    }
}
