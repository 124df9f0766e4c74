//! The approval tables of both record stores.

//! The approval backends against real databases: a SQLite file and
//! PostgreSQL (`TOOLHOST_TEST_POSTGRES`; those tests are `#[ignore]`d,
//! `.ci/run` runs them with `--ignored`). One suite, run on both.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use toolhost::effects::approval::*;
use toolhost_store::PostgresStore;
use toolhost_store::SqliteStore;

const NOW: u64 = 1_767_225_600_000;

fn approval(id: &str, expires_ms: u64) -> Approval {
    let targets = json!([{"path": "a.txt", "sha256": "00"}]);
    let plan = json!({"would_delete": "a.txt"});
    Approval {
        id: id.into(),
        state: State::Pending,
        tool: "file_delete".into(),
        args: r#"{"path":"a.txt"}"#.into(),
        args_digest: "d1".into(),
        plan_digest: plan_digest("file_delete", "d1", &targets, &plan),
        targets,
        plan,
        capability: "cap".into(),
        token_chain: vec!["t1".into(), "t2".into()],
        requested_by: Some("cli".into()),
        created_ms: NOW,
        expires_ms,
        decided_ms: None,
        decided_by: None,
        note: None,
        used_by: None,
    }
}

/// The behaviour every backend has.
fn suite(backend: &dyn ApprovalBackend) {
    backend.init().unwrap();
    backend.init().unwrap();
    let id = new_id().unwrap();
    assert!(is_id(&id));
    let a = approval(&id, NOW + 60_000);
    backend.insert(&a).unwrap();
    assert_eq!(backend.get(&id).unwrap().unwrap(), a, "read back as stored");
    assert!(backend.list().unwrap().iter().any(|x| x.id == id));
    assert_eq!(backend.get(&new_id().unwrap()).unwrap(), None);

    // Not approved yet: it cannot be used.
    assert_eq!(backend.take(&id, "k1").unwrap(), Take::NotApproved);

    // Approved once; a second decision changes nothing.
    let done = match backend
        .decide(&id, true, "cli:alice", Some("ok"), NOW + 1, NOW + 90_000)
        .unwrap()
    {
        Decided::Done(a) => a,
        other => panic!("{other:?}"),
    };
    assert_eq!(done.state, State::Approved);
    assert_eq!(done.decided_by.as_deref(), Some("cli:alice"));
    assert_eq!(done.note.as_deref(), Some("ok"));
    assert_eq!(done.expires_ms, NOW + 90_000, "usable for the ttl from now");
    match backend
        .decide(&id, false, "cli:mallory", None, NOW + 2, NOW + 90_000)
        .unwrap()
    {
        Decided::NotPending(a) => assert_eq!(a.state, State::Approved),
        other => panic!("{other:?}"),
    }

    // Spent on one key: the same key again is fine, another is refused.
    assert_eq!(backend.take(&id, "k1").unwrap(), Take::Taken);
    assert_eq!(backend.take(&id, "k1").unwrap(), Take::Taken);
    assert_eq!(backend.take(&id, "k2").unwrap(), Take::UsedBy("k1".into()));

    // Denied: never usable.
    let id2 = new_id().unwrap();
    backend.insert(&approval(&id2, NOW + 60_000)).unwrap();
    match backend
        .decide(&id2, false, "cli:bob", Some("no"), NOW, NOW + 1)
        .unwrap()
    {
        Decided::Done(a) => assert_eq!(a.state, State::Denied),
        other => panic!("{other:?}"),
    }
    assert_eq!(backend.take(&id2, "k").unwrap(), Take::NotApproved);

    // Expired before anyone decided: it cannot be approved any more.
    let id3 = new_id().unwrap();
    backend.insert(&approval(&id3, NOW + 10)).unwrap();
    match backend
        .decide(&id3, true, "cli:alice", None, NOW + 10, NOW + 1000)
        .unwrap()
    {
        Decided::NotPending(a) => {
            assert_eq!(a.state, State::Pending);
            assert_eq!(a.shown_state(NOW + 10), "expired");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        backend
            .decide(&new_id().unwrap(), true, "x", None, NOW, NOW)
            .unwrap(),
        Decided::NotFound
    );

    // Purged once expired.
    assert!(backend.purge(NOW + 11).unwrap() >= 1);
    assert_eq!(backend.get(&id3).unwrap(), None);
    assert!(backend.get(&id).unwrap().is_some(), "still live");
}

/// Two writers race to spend one approval on two keys: exactly one wins.
fn one_use_across_connections(open: &(dyn Fn() -> Arc<dyn ApprovalBackend> + Sync)) {
    let first = open();
    first.init().unwrap();
    let id = new_id().unwrap();
    first.insert(&approval(&id, u64::MAX / 4)).unwrap();
    first
        .decide(&id, true, "cli:alice", None, NOW, u64::MAX / 4)
        .unwrap();
    let taken: usize = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|i| {
                let id = id.clone();
                s.spawn(move || {
                    usize::from(open().take(&id, &format!("k{i}")).unwrap() == Take::Taken)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    assert_eq!(taken, 1);
}

fn sqlite(path: &std::path::Path) -> Arc<dyn ApprovalBackend> {
    Arc::new(SqliteStore::open(path, Duration::from_secs(3600)).unwrap())
}

fn postgres() -> Arc<dyn ApprovalBackend> {
    let url = std::env::var("TOOLHOST_TEST_POSTGRES")
        .unwrap_or_else(|_| "postgres://toolhost:toolhost@127.0.0.1:5432/toolhost".into());
    match PostgresStore::connect(&url, Duration::from_secs(3600)) {
        Ok(store) => Arc::new(store),
        Err(e) => panic!(
            "PostgreSQL unreachable at {url}: {e}\n\
             start it with: export TOOLHOST_TEST_POSTGRES=\"$(bash .ci/postgres.sh)\""
        ),
    }
}

#[test]
fn sqlite_approvals_behave() {
    let dir = tempfile::tempdir().unwrap();
    suite(&*sqlite(&dir.path().join("r.sqlite")));
}

#[test]
fn sqlite_approvals_are_spent_once_across_connections() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.sqlite");
    one_use_across_connections(&|| sqlite(&path));
}

#[test]
#[ignore = "needs PostgreSQL: export TOOLHOST_TEST_POSTGRES=\"$(bash .ci/postgres.sh)\", then --ignored (CI does)"]
fn postgres_approvals_behave() {
    suite(&*postgres());
}

#[test]
#[ignore = "needs PostgreSQL: export TOOLHOST_TEST_POSTGRES=\"$(bash .ci/postgres.sh)\", then --ignored (CI does)"]
fn postgres_approvals_are_spent_once_across_connections() {
    one_use_across_connections(&postgres);
}
