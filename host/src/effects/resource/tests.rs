use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::*;

fn r(p: &str) -> Key {
    Key::path(p, Mode::Read)
}
fn w(p: &str) -> Key {
    Key::path(p, Mode::Write)
}

/// A workspace name no other test uses (the lock table is process-wide).
fn ws(name: &str) -> PathBuf {
    PathBuf::from(format!("/nonexistent/resource-tests/{name}"))
}

#[test]
fn paths_overlap_by_whole_segments() {
    assert!(w("src").conflicts(&r("src/a.rs")));
    assert!(r("src/a.rs").conflicts(&w("src")));
    assert!(w("a.txt").conflicts(&w("a.txt")));
    assert!(w(".").conflicts(&r("deep/er/file")));
    assert!(!w("src").conflicts(&r("srcx")));
    assert!(!w("src/a").conflicts(&w("src/b")));
    assert!(!r("src").conflicts(&r("src/a")), "two reads never conflict");
    assert!(!w("x").conflicts(&Key::origin("https://x:443", Mode::Write)));
    let o = Key::origin("https://a.example:443", Mode::Write);
    assert!(o.conflicts(&Key::origin("https://a.example:443", Mode::Write)));
    assert!(!o.conflicts(&Key::origin("https://b.example:443", Mode::Write)));
    assert!(o.conflicts(&Key::origin("*", Mode::Write)));
}

#[test]
fn ancestors_are_listed_root_first() {
    assert_eq!(ancestors("a/b/c").collect::<Vec<_>>(), [".", "a", "a/b"]);
    assert_eq!(ancestors("a").collect::<Vec<_>>(), ["."]);
    assert_eq!(ancestors(".").count(), 0);
}

#[test]
fn plans_agree_with_the_key_relation() {
    let root = Path::new("/w");
    let cases: &[(&[Key], &[Key])] = &[
        (&[w("a/b/c")], &[r("a")]),
        (&[w("a/b/c")], &[r(".")]),
        (&[w("a/b/c")], &[w("a/b/c")]),
        (&[w("a/b/c")], &[r("a/b/c")]),
        (&[w("a/x")], &[w("a/y")]),
        (&[r("a")], &[r("a/b")]),
        (&[r(".")], &[r(".")]),
        (&[w("a")], &[r("b")]),
        (&[r("a"), w("a/b")], &[r("a/c")]),
    ];
    for (a, b) in cases {
        let plan_ok = Plan::new(root, a).compatible(&Plan::new(root, b));
        // The plans may be stricter than the keys, never looser.
        if conflict(a, b) {
            assert!(
                !plan_ok,
                "{a:?} vs {b:?}: conflicting keys, compatible plans"
            );
        } else if !plan_ok {
            assert_eq!(a, &[r("a"), w("a/b")], "only SIX is held stricter");
        }
    }
    // The SIX case: stricter.
    assert!(!Plan::new(root, &[r("a"), w("a/b")]).compatible(&Plan::new(root, &[r("a/c")])));
    // Other workspaces never conflict.
    assert!(Plan::new(Path::new("/v"), &[w(".")]).compatible(&Plan::new(root, &[w(".")])));
}

#[test]
fn a_conflicting_call_waits_until_the_deadline_and_reports_its_wait() {
    let locks = Locks::in_process();
    let root = ws("deadline");
    let held = locks
        .acquire(&root, &[w("f.txt")], Duration::from_secs(5), None)
        .unwrap();
    let t = Instant::now();
    let err = locks
        .acquire(&root, &[r("f.txt")], Duration::from_millis(60), None)
        .unwrap_err();
    assert!(matches!(err, WaitError::Timeout { .. }), "{err}");
    assert!(err.waited() >= Duration::from_millis(60));
    assert!(t.elapsed() >= Duration::from_millis(60));
    // Not conflicting: no wait.
    let other = locks
        .acquire(&root, &[w("g.txt")], Duration::from_millis(1), None)
        .unwrap();
    drop((held, other));
    let again = locks
        .acquire(&root, &[r("f.txt")], Duration::from_millis(1), None)
        .unwrap();
    assert_eq!(again.waited(), Duration::ZERO, "free locks are no wait");
}

#[test]
fn a_waiter_gets_the_locks_when_they_are_released() {
    let locks = Locks::in_process();
    let root = ws("release");
    let held = locks
        .acquire(&root, &[w("dir/f")], Duration::from_secs(5), None)
        .unwrap();
    let (root2, locks2) = (root.clone(), locks.clone());
    let waiter = std::thread::spawn(move || {
        locks2
            .acquire(&root2, &[r("dir")], Duration::from_secs(30), None)
            .map(|h| h.waited())
    });
    std::thread::sleep(Duration::from_millis(50));
    drop(held);
    let waited = waiter.join().unwrap().unwrap();
    assert!(waited >= Duration::from_millis(40), "{waited:?}");
}

#[test]
fn a_cancelled_waiter_gives_up() {
    let locks = Locks::in_process();
    let root = ws("cancel");
    let _held = locks
        .acquire(&root, &[w(".")], Duration::from_secs(5), None)
        .unwrap();
    let cancel = CancelToken::default();
    let c2 = cancel.clone();
    let canceller = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(30));
        c2.cancel();
    });
    let err = locks
        .acquire(&root, &[r("x")], Duration::from_secs(60), Some(&cancel))
        .unwrap_err();
    canceller.join().unwrap();
    assert!(matches!(err, WaitError::Cancelled { .. }), "{err}");
}

#[test]
fn waiters_are_served_in_arrival_order() {
    // A reader holds; a writer waits; a later reader must queue behind the
    // writer instead of joining the first reader.
    let locks = Locks::in_process();
    let root = ws("fifo");
    let first = locks
        .acquire(&root, &[r("f")], Duration::from_secs(5), None)
        .unwrap();
    let (root2, locks2) = (root.clone(), locks.clone());
    let writer = std::thread::spawn(move || {
        locks2
            .acquire(&root2, &[w("f")], Duration::from_secs(30), None)
            .map(|h| h.waited())
    });
    let t = Instant::now();
    while table::waiters_in(&root) == 0 {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "the writer never waited"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    let late = locks.acquire(&root, &[r("f")], Duration::from_millis(50), None);
    assert!(late.is_err(), "a later reader overtook the waiting writer");
    drop(first);
    writer.join().unwrap().unwrap();
}

#[test]
fn file_locks_between_open_descriptions() {
    // The cross-process level on its own: each acquisition is its own open
    // file description, as another process's would be.
    let dir = tempfile::tempdir().unwrap();
    let root = Path::new("/w/ofd");
    let get = |keys: &[Key], ms: u64| {
        let plan = Plan::new(root, keys);
        let deadline = Instant::now() + Duration::from_millis(ms);
        ofd::acquire(dir.path(), &plan, deadline, None).map(|(f, _)| f)
    };
    let writer = get(&[w("a/b")], 1000).unwrap();
    assert!(
        get(&[r("a")], 20).is_err(),
        "a read of the directory must wait"
    );
    assert!(get(&[r(".")], 20).is_err(), "a read of the root must wait");
    assert!(get(&[r("a/b")], 20).is_err());
    assert!(get(&[w("a/b")], 20).is_err());
    let sibling = get(&[w("a/c")], 1000).expect("a write beside it does not wait");
    let reader = get(&[r("z")], 1000).expect("a read elsewhere does not wait");
    drop((writer, sibling));
    let dir_reader = get(&[r("a")], 1000).unwrap();
    let second = get(&[r("a")], 1000).expect("reads share");
    assert!(
        get(&[w("a/q")], 20).is_err(),
        "a write below a read directory waits"
    );
    drop((dir_reader, second, reader));
    get(&[w("a/q")], 1000).unwrap();
    // The lock file is named by the workspace and stays empty.
    let file = ofd::lock_file(dir.path(), "/w/ofd");
    assert_eq!(std::fs::metadata(file).unwrap().len(), 0);
}

#[test]
fn an_unusable_lock_directory_is_an_error_not_a_silent_pass() {
    let dir = tempfile::tempdir().unwrap();
    let blocker = dir.path().join("file");
    std::fs::write(&blocker, b"not a directory").unwrap();
    let locks = Locks::with_dir(blocker.join("locks"));
    let err = locks
        .acquire(&ws("bad-dir"), &[w("x")], Duration::from_secs(1), None)
        .unwrap_err();
    assert!(matches!(err, WaitError::LockFile { .. }), "{err}");
}

#[test]
fn declared_resources_come_from_their_annotation_and_fail_closed() {
    use crate::plugin::schema::{CompiledSchema, PathAccess};
    let schema = serde_json::json!({
        "type": "object",
        "properties": {
            "table": {"type": "string", "x-toolhost-resource": "write"},
            "audit": {"type": "array", "items": {"type": "string", "x-toolhost-resource": "read"}},
            "path": {"type": "string", "x-toolhost-path": "read"},
        }
    });
    let s = CompiledSchema::compile(&schema).unwrap();
    let args = serde_json::json!({"table": "users", "audit": ["log"], "path": "a"});
    let got: Vec<_> = s
        .resource_args(&args)
        .into_iter()
        .map(|a| (a.pointer, a.value, a.access))
        .collect();
    assert_eq!(
        got,
        [
            ("/table".to_string(), "users", PathAccess::Write),
            ("/audit/0".to_string(), "log", PathAccess::Read),
        ]
    );
    // Paths and resources are separate indexes.
    assert_eq!(s.path_args(&args).len(), 1);
    let d = |n: &str, m: Mode| Key {
        resource: Resource::Declared(n.into()),
        mode: m,
    };
    assert!(d("users", Mode::Write).conflicts(&d("users", Mode::Read)));
    assert!(!d("users", Mode::Write).conflicts(&d("users2", Mode::Write)));
    assert!(!d("users", Mode::Read).conflicts(&d("users", Mode::Read)));
    assert!(
        !d("a", Mode::Write).conflicts(&w("a")),
        "names are not paths"
    );
    let root = Path::new("/w");
    assert!(!Plan::new(root, &[d("users", Mode::Write)])
        .compatible(&Plan::new(root, &[d("users", Mode::Read)])));
    // A malformed or untrackable annotation refuses the schema.
    for bad in [
        serde_json::json!({"type": "object", "properties": {"t": {"type": "string", "x-toolhost-resource": "rw"}}}),
        serde_json::json!({"type": "object", "properties": {"t": {"type": "integer", "x-toolhost-resource": "read"}}}),
        serde_json::json!({"type": "object", "patternProperties": {"^t": {"type": "string", "x-toolhost-resource": "read"}}}),
    ] {
        let e = CompiledSchema::compile(&bad).unwrap_err();
        assert!(e.to_string().contains("x-toolhost-resource"), "{e}");
    }
}
