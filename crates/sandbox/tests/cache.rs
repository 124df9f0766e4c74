//! The compiled-code cache: reused across hosts, never trusted blindly.

mod support;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use support::*;
use toolhost_sandbox::embedded::REFERENCE;
use toolhost_sandbox::{LoadEvent, Plugin, Sandbox, SandboxConfig};

fn load(sandbox: &Sandbox, bytes: &[u8]) -> (Plugin, Vec<LoadEvent>) {
    let seen = Mutex::new(Vec::new());
    let plugin = sandbox
        .load(bytes, &|e| seen.lock().unwrap().push(e))
        .expect("load");
    (plugin, seen.into_inner().unwrap())
}

fn events(sandbox: &Sandbox, bytes: &[u8]) -> Vec<LoadEvent> {
    load(sandbox, bytes).1
}

fn recompiled(e: &[LoadEvent]) -> bool {
    matches!(
        e,
        [
            LoadEvent::CacheCorrupt,
            LoadEvent::Compiling { .. },
            LoadEvent::Compiled { .. }
        ]
    )
}

/// The compiled artifacts (`KEY.cwasm`) in a cache directory; each has a
/// `KEY.sum` beside it.
fn artifacts(dir: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "cwasm"))
        .collect();
    found.sort();
    found
}

fn config(dir: &Path) -> SandboxConfig {
    SandboxConfig {
        cache_dir: Some(dir.to_path_buf()),
        ..SandboxConfig::default()
    }
}

/// A sandbox whose cache in `dir` is authenticated by the secret `key`.
fn keyed(dir: &Path, key: &Path) -> Sandbox {
    Sandbox::new(&SandboxConfig {
        cache_dir: Some(dir.to_path_buf()),
        cache_key_file: Some(key.to_path_buf()),
        ..SandboxConfig::default()
    })
    .unwrap()
}

fn compiled(e: &[LoadEvent]) -> bool {
    matches!(e, [LoadEvent::Compiling { .. }, LoadEvent::Compiled { .. }])
}

#[test]
fn a_planted_entry_is_recompiled_not_run() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("cache");
    let key = tmp.path().join("host/cache.key");
    let trivial = std::fs::read(test_plugin("tp_trivial")).unwrap();
    let hostile = std::fs::read(test_plugin("tp_hostile")).unwrap();
    let host = keyed(&dir, &key);
    assert!(compiled(&events(&host, &trivial)));
    assert_eq!(events(&keyed(&dir, &key), &trivial), [LoadEvent::CacheHit]);
    let [entry] = &artifacts(&dir)[..] else {
        panic!("one entry expected")
    };

    // Another host's key writes the hostile component's code under the
    // trivial component's name: a valid entry there, refused here.
    let other_key = tmp.path().join("other/cache.key");
    let other_dir = tmp.path().join("other-cache");
    let other = keyed(&other_dir, &other_key);
    events(&other, &hostile);
    let theirs = artifacts(&other_dir)[0].clone();
    std::fs::copy(&theirs, entry).unwrap();
    let theirs_sum = std::fs::read(theirs.with_extension("sum")).unwrap();
    std::fs::write(entry.with_extension("sum"), &theirs_sum).unwrap();
    let (plugin, e) = load(&keyed(&dir, &key), &trivial);
    assert!(recompiled(&e), "{e:?}");
    let names: Vec<String> = plugin
        .describe()
        .unwrap()
        .into_iter()
        .map(|d| d.unwrap().name)
        .collect();
    assert!(
        names.iter().all(|n| n.starts_with("echo_value")),
        "{names:?}"
    );
    drop(plugin);

    // Patched machine code with a public digest recomputed over it, as the
    // previous entry format accepted.
    let mut code = std::fs::read(entry).unwrap();
    let middle = code.len() / 2;
    code[middle] ^= 0x01;
    let name = entry.file_name().unwrap().as_encoded_bytes();
    let mut h = blake3::Hasher::new_derive_key("toolhost compile cache entry v3");
    h.update(&(name.len() as u64).to_le_bytes());
    h.update(name);
    h.update(&(code.len() as u64).to_le_bytes());
    h.update(&code);
    for magic in [&b"THCSUM03"[..], &theirs_sum[..8]] {
        let mut sum = magic.to_vec();
        sum.extend_from_slice(&(code.len() as u64).to_le_bytes());
        sum.extend_from_slice(h.finalize().as_bytes());
        std::fs::remove_file(entry).unwrap();
        std::fs::write(entry, &code).unwrap();
        std::fs::write(entry.with_extension("sum"), &sum).unwrap();
        let e = events(&keyed(&dir, &key), &trivial);
        assert!(recompiled(&e), "{e:?}");
        assert_eq!(events(&keyed(&dir, &key), &trivial), [LoadEvent::CacheHit]);
    }

    // An entry made writable by others, or replaced by a link to a valid
    // entry, is refused too.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(entry, std::fs::Permissions::from_mode(0o666)).unwrap();
    assert!(recompiled(&events(&keyed(&dir, &key), &trivial)));
    let mode = std::fs::metadata(entry).unwrap().permissions().mode() & 0o022;
    assert_eq!(mode, 0, "rewritten");
    let elsewhere = tmp.path().join("elsewhere.cwasm");
    std::fs::rename(entry, &elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, entry).unwrap();
    assert!(recompiled(&events(&keyed(&dir, &key), &trivial)));
    assert!(!std::fs::symlink_metadata(entry).unwrap().is_symlink());
}

#[test]
fn a_cache_directory_others_may_write_is_not_used() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("shared");
    let key = tmp.path().join("host/cache.key");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o775)).unwrap();
    let bytes = std::fs::read(test_plugin("tp_trivial")).unwrap();
    let sandbox = keyed(&dir, &key);
    assert!(sandbox.cache().is_none());
    assert!(compiled(&events(&sandbox, &bytes)));
    assert!(compiled(&events(&keyed(&dir, &key), &bytes)));
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        0,
        "nothing written"
    );
    // Nor one inside the workspace.
    let ws = tmp.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let sandbox = Sandbox::new(&SandboxConfig {
        cache_dir: Some(ws.join(".toolhost-cache")),
        cache_key_file: Some(key.clone()),
        workspace: Some(ws.clone()),
        ..SandboxConfig::default()
    })
    .unwrap();
    assert!(sandbox.cache().is_none());
    assert!(!ws.join(".toolhost-cache").exists());
}

#[test]
fn second_load_hits_the_cache_and_damage_forces_a_recompile() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(test_plugin("tp_trivial")).unwrap();

    let first = Sandbox::new(&config(dir.path())).unwrap();
    let e = events(&first, &bytes);
    assert!(
        matches!(
            e[..],
            [LoadEvent::Compiling { .. }, LoadEvent::Compiled { .. }]
        ),
        "{e:?}"
    );

    // A new host (as after a restart) reads the cache.
    let second = Sandbox::new(&config(dir.path())).unwrap();
    assert_eq!(events(&second, &bytes), [LoadEvent::CacheHit]);

    // Truncate the entry: detected, discarded, recompiled, rewritten.
    let [entry] = &artifacts(dir.path())[..] else {
        panic!("one entry expected")
    };
    let data = std::fs::read(entry).unwrap();
    std::fs::write(entry, &data[..data.len() / 2]).unwrap();
    let e = events(&second, &bytes);
    assert!(recompiled(&e), "{e:?}");
    assert_eq!(events(&second, &bytes), [LoadEvent::CacheHit]);

    // One flipped byte in the middle of the machine code: the same.
    let mut bad = std::fs::read(entry).unwrap();
    let middle = bad.len() / 2;
    bad[middle] ^= 0x01;
    std::fs::write(entry, &bad).unwrap();
    let e = events(&second, &bytes);
    assert!(recompiled(&e), "{e:?}");
    assert_eq!(events(&second, &bytes), [LoadEvent::CacheHit]);

    // A different component gets its own entry.
    let other = std::fs::read(test_plugin("tp_hostile")).unwrap();
    let e = events(&second, &other);
    assert!(matches!(e[0], LoadEvent::Compiling { .. }), "{e:?}");
    assert_eq!(artifacts(dir.path()).len(), 2);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 4);
}

#[test]
fn another_components_entry_in_this_ones_place_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let sandbox = Sandbox::new(&config(dir.path())).unwrap();
    let trivial = std::fs::read(test_plugin("tp_trivial")).unwrap();
    let hostile = std::fs::read(test_plugin("tp_hostile")).unwrap();
    events(&sandbox, &trivial);
    let [before] = &artifacts(dir.path())[..] else {
        panic!("one entry expected")
    };
    let trivial_entry = before.clone();
    events(&sandbox, &hostile);
    let hostile_entry = artifacts(dir.path())
        .into_iter()
        .find(|p| *p != trivial_entry)
        .unwrap();

    // Both files of the hostile entry, intact, under the trivial key.
    std::fs::copy(&hostile_entry, &trivial_entry).unwrap();
    std::fs::copy(
        hostile_entry.with_extension("sum"),
        trivial_entry.with_extension("sum"),
    )
    .unwrap();
    let restarted = Sandbox::new(&config(dir.path())).unwrap();
    let (plugin, e) = load(&restarted, &trivial);
    assert!(recompiled(&e), "{e:?}");
    let names: Vec<String> = plugin
        .describe()
        .unwrap()
        .into_iter()
        .map(|d| d.unwrap().name)
        .collect();
    assert!(
        names.contains(&"echo_value".to_string())
            && names.iter().all(|n| n.starts_with("echo_value")),
        "{names:?}"
    );
    drop(plugin);
    let (_, e) = load(&Sandbox::new(&config(dir.path())).unwrap(), &trivial);
    assert_eq!(e, [LoadEvent::CacheHit]);
}

#[test]
fn the_cache_directory_is_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    Sandbox::new(&config(&cache)).unwrap();
    let mode = std::fs::metadata(&cache).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700);
}

/// Loads the embedded reference tools (with `artifact` as their
/// precompiled artifact, or their own) in `sandbox`, checks they describe
/// `file_view`, and returns the load events.
fn load_reference(sandbox: &Sandbox, artifact: Option<&'static [u8]>) -> Vec<LoadEvent> {
    let reference = match artifact {
        Some(artifact) => REFERENCE.with_precompiled(artifact),
        None => REFERENCE,
    };
    let seen = Mutex::new(Vec::new());
    let plugin = sandbox
        .load_embedded(&reference, &|e| seen.lock().unwrap().push(e))
        .expect("load");
    assert!(plugin
        .describe()
        .unwrap()
        .iter()
        .any(|t| t.as_ref().is_ok_and(|t| t.name == "file_view")));
    seen.into_inner().unwrap()
}

#[test]
fn the_embedded_reference_tools_start_from_their_precompiled_artifact() {
    let dir = tempfile::tempdir().unwrap();
    let framed = REFERENCE.precompiled();
    // Another memory limit and instance count than the default: the
    // artifact depends on the compilation settings, not on the pool's. And
    // no cache at all: the artifact is used from the binary.
    for (i, config) in [
        config(dir.path()),
        SandboxConfig {
            max_memory_bytes: 64 << 20,
            max_concurrent_instances: 3,
            ..config(dir.path())
        },
        SandboxConfig {
            cache_dir: None,
            ..SandboxConfig::default()
        },
    ]
    .into_iter()
    .enumerate()
    {
        let sandbox = Sandbox::new(&config).unwrap();
        // Nothing compiled: the first start writes the artifact itself to
        // the cache, later ones map that entry (one for both settings).
        let want = if i == 1 {
            LoadEvent::CacheHit
        } else {
            LoadEvent::Precompiled
        };
        assert_eq!(load_reference(&sandbox, None), [want]);
        let entries = artifacts(dir.path());
        assert_eq!(entries.len(), 1, "{entries:?}");
        assert_eq!(
            std::fs::metadata(&entries[0]).unwrap().len() as usize,
            framed.len() - 16,
            "the artifact without its frame"
        );
    }

    // A damaged entry is replaced from the binary, not believed.
    let entry = &artifacts(dir.path())[0];
    let mut bytes = std::fs::read(entry).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::remove_file(entry).unwrap();
    std::fs::write(entry, &bytes).unwrap();
    let sandbox = Sandbox::new(&config(dir.path())).unwrap();
    assert_eq!(load_reference(&sandbox, None), [LoadEvent::Precompiled]);
    let cache = toolhost_sandbox::CompileCache::open(dir.path()).unwrap();
    assert!(cache.check(entry).is_ok(), "rewritten whole");
}

#[test]
fn a_precompiled_artifact_that_does_not_fit_is_compiled_instead() {
    let dir = tempfile::tempdir().unwrap();
    let sandbox = Sandbox::new(&config(dir.path())).unwrap();
    let framed: &'static [u8] = Box::leak(REFERENCE.precompiled().into_boxed_slice());
    let mut damaged = framed.to_vec();
    // The settings digest of the frame (after the 8-byte magic).
    damaged[8] ^= 1;
    let truncated = &framed[..framed.len().min(12)];
    let damaged: &'static [u8] = Box::leak(damaged.into_boxed_slice());
    for artifact in [damaged, truncated, &[][..], &b"not an artifact at all"[..]] {
        let seen = load_reference(&sandbox, Some(artifact));
        assert!(
            matches!(
                seen[..],
                [LoadEvent::Compiling { .. }, LoadEvent::Compiled { .. }] | [LoadEvent::CacheHit]
            ),
            "{seen:?}"
        );
    }
}
