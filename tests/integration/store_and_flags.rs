//! Small holes from the same review: the record store's file mode, a blank
//! idempotency key, a comma inside one caveat flag.

use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::Duration;

use toolhost::{CallOptions, Claim, EffectGuard, KeySource, Source, Store};
use toolhost_store::SqliteStore;

use crate::support::*;

fn mode(path: &std::path::Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

fn toolhost(args: &[&str], state: &std::path::Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_toolhost"))
        .arg("--cache-dir")
        .arg(repo_root().join("target/test-compile-cache"))
        .arg("--key-file")
        .arg(state.join("root.key"))
        .arg("--store")
        .arg(state.join("records.sqlite"))
        .args(args)
        .env_remove("TOOLHOST_ROOT_KEY")
        .env_remove("TOOLHOST_TOKEN")
        .env_remove("TOOLHOST_STORE")
        .output()
        .unwrap()
}

#[test]
fn the_record_store_and_its_wal_files_are_owner_only() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("records.sqlite");
    let store = SqliteStore::open(&path, Duration::from_secs(60)).unwrap();
    // A write, so that the -wal and -shm files exist while the store is open.
    assert!(matches!(
        store
            .claim("k", "tool", "digest", Duration::from_secs(60))
            .unwrap(),
        Claim::Acquired { .. }
    ));
    for suffix in ["", "-wal", "-shm"] {
        let file = dir.path().join(format!("records.sqlite{suffix}"));
        assert!(file.exists(), "{} missing", file.display());
        assert_eq!(mode(&file), 0o600, "{}", file.display());
    }
    drop(store);

    // A store file made readable by others (an older host) is narrowed.
    let old = dir.path().join("old.sqlite");
    std::fs::write(&old, b"").unwrap();
    std::fs::set_permissions(&old, std::fs::Permissions::from_mode(0o644)).unwrap();
    drop(SqliteStore::open(&old, Duration::from_secs(60)).unwrap());
    assert_eq!(mode(&old), 0o600);

    // The default store the command line creates, too.
    let state = tempfile::tempdir().unwrap();
    let out = toolhost(&["records"], state.path());
    assert!(out.status.success(), "{out:?}");
    assert_eq!(mode(&state.path().join("records.sqlite")), 0o600);
}

#[test]
fn a_blank_idempotency_key_is_refused() {
    let db = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(db.path().join("r.sqlite"), Duration::from_secs(60)).unwrap();
    let h = host_with(&[Source::File(test_plugin("tp_effects"))])
        .with_records(EffectGuard::new(Arc::new(store), b"key"));
    let ws = Ws::new();
    for blank in ["", "   "] {
        let opts = CallOptions {
            idempotency: Some(KeySource::Explicit(blank.into())),
            ..CallOptions::default()
        };
        let obs = call_with(
            &h,
            &ws,
            "count_calls",
            r#"{"path":"n.txt"}"#,
            &WRITE_ALL,
            &opts,
        );
        let err = expect_error(&obs, "error", "idempotency_key_required");
        assert!(err["expected"].as_str().unwrap().contains("1-256"), "{err}");
        assert!(!ws.path("n.txt").exists(), "the call ran");
    }

    // On the command line the flag itself is refused.
    let state = tempfile::tempdir().unwrap();
    let out = toolhost(
        &[
            "call",
            "file_view",
            r#"{"path":"x","offset":1,"limit":1}"#,
            "--idempotency-key",
            "",
        ],
        state.path(),
    );
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--idempotency-key"),
        "{out:?}"
    );
}

#[test]
fn a_comma_in_a_caveat_flag_is_refused_not_split() {
    let state = tempfile::tempdir().unwrap();
    for flags in [
        &["--tool", "file_view", "--read", "src,secret"][..],
        &["--tool", "file_view,file_edit"],
        &["--tool", "file_view", "--write", "a,b"],
    ] {
        let out = toolhost(&[&["cap", "mint"][..], flags].concat(), state.path());
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("without commas"), "{stderr}");
        assert!(out.stdout.is_empty(), "a token was printed");
    }
    // One value per flag, repeated, is how to grant several.
    let out = toolhost(
        &[
            "cap",
            "mint",
            "--tool",
            "file_view",
            "--read",
            "src",
            "--read",
            "docs",
        ],
        state.path(),
    );
    assert!(out.status.success(), "{out:?}");
}
