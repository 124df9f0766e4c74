//! The compiled-code cache: reused across hosts, never trusted blindly.

use crate::support::*;
use std::sync::Mutex;
use toolhost::sandbox::{LoadEvent, Sandbox, SandboxConfig};

fn events(sandbox: &Sandbox, bytes: &[u8]) -> Vec<LoadEvent> {
    let seen = Mutex::new(Vec::new());
    sandbox
        .load(bytes, &|e| seen.lock().unwrap().push(e))
        .expect("load");
    seen.into_inner().unwrap()
}

#[test]
fn second_load_hits_the_cache_and_damage_forces_a_recompile() {
    let dir = tempfile::tempdir().unwrap();
    let config = SandboxConfig {
        cache_dir: Some(dir.path().to_path_buf()),
        ..SandboxConfig::default()
    };
    let bytes = std::fs::read(test_plugin("tp_trivial")).unwrap();

    let first = Sandbox::new(&config).unwrap();
    let e = events(&first, &bytes);
    assert!(
        matches!(
            e[..],
            [LoadEvent::Compiling { .. }, LoadEvent::Compiled { .. }]
        ),
        "{e:?}"
    );

    // A new host (as after a restart) reads the cache.
    let second = Sandbox::new(&config).unwrap();
    assert_eq!(events(&second, &bytes), [LoadEvent::CacheHit]);

    // Truncate the entry: detected, discarded, recompiled, rewritten.
    let entry = std::fs::read_dir(dir.path())
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let data = std::fs::read(&entry).unwrap();
    std::fs::write(&entry, &data[..data.len() / 2]).unwrap();
    let e = events(&second, &bytes);
    assert!(
        matches!(
            e[..],
            [
                LoadEvent::CacheCorrupt,
                LoadEvent::Compiling { .. },
                LoadEvent::Compiled { .. }
            ]
        ),
        "{e:?}"
    );
    assert_eq!(events(&second, &bytes), [LoadEvent::CacheHit]);

    // A different component gets its own entry.
    let other = std::fs::read(test_plugin("tp_hostile")).unwrap();
    let e = events(&second, &other);
    assert!(matches!(e[0], LoadEvent::Compiling { .. }), "{e:?}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
}

#[test]
fn the_cache_directory_is_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    Sandbox::new(&SandboxConfig {
        cache_dir: Some(cache.clone()),
        ..SandboxConfig::default()
    })
    .unwrap();
    let mode = std::fs::metadata(&cache).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700);
}
