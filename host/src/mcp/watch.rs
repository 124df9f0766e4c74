//! Polls the plugin directory and reloads the catalog when its `*.wasm`
//! files change (added, removed, or replaced: size or mtime differs), or
//! their `*.wasm.sig` signatures, or the directory's `toolhost.lock`: a
//! plugin refused as not locked loads once `plugin lock` pins it.
//!
//! A change is acted on once two polls in a row see the same new listing,
//! so a file still being written is not loaded half-way.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::{load, Plugins, State};
use crate::sandbox::Sandbox;

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
                || name == crate::trust::lock::LOCK_FILE_NAME
        })
        .filter_map(|e| {
            let meta = e.metadata().ok()?;
            meta.is_file()
                .then(|| (e.path(), (meta.len(), meta.modified().ok())))
        })
        .collect()
}

pub(super) fn spawn(
    dir: PathBuf,
    every: Duration,
    sandbox: Sandbox,
    plugins: Plugins,
    state: Arc<State>,
) {
    let spawned = std::thread::Builder::new()
        .name("toolhost-watch".into())
        .spawn(move || {
            let mut loaded = scan(&dir);
            let mut pending: Option<Listing> = None;
            loop {
                std::thread::sleep(every);
                let now = scan(&dir);
                if now == loaded {
                    pending = None;
                    continue;
                }
                if pending.as_ref() != Some(&now) {
                    pending = Some(now);
                    continue;
                }
                log!("toolhost: {} changed; reloading the plugins", dir.display());
                let next = load(
                    &sandbox,
                    &plugins,
                    state.records.as_ref(),
                    state.artifacts.as_ref(),
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
        log!("toolhost: warning: cannot watch the plugin directory: {e}");
    }
}
