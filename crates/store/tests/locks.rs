//! Resource locks between hosts: PostgreSQL advisory locks, each pool of
//! connections standing for one host.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use toolhost::effects::resource::{Key, Mode, Plan, SharedLocks};
use toolhost_store::PgLocks;

fn r(p: &str) -> Key {
    Key::path(p, Mode::Read)
}
fn w(p: &str) -> Key {
    Key::path(p, Mode::Write)
}

#[test]
#[ignore = "needs PostgreSQL: export TOOLHOST_TEST_POSTGRES=\"$(bash .ci/postgres.sh)\", then --ignored (CI does)"]
fn pg_advisory_locks_between_connections() {
    // The PostgreSQL level on its own: each pool is a host of its own.
    let url = std::env::var("TOOLHOST_TEST_POSTGRES").expect("TOOLHOST_TEST_POSTGRES");
    let pools: Vec<_> = (0..6)
        .map(|_| Arc::new(PgLocks::new(&url).unwrap()))
        .collect();
    // A workspace name unique to this run: the database is shared.
    let name = format!("/w/pg-{:?}", std::time::SystemTime::now());
    let root = Path::new(&name);
    let get = |i: usize, keys: &[Key], ms: u64| {
        let plan = Plan::new(root, keys);
        let deadline = Instant::now() + Duration::from_millis(ms);
        pools[i]
            .clone()
            .acquire(&plan, deadline, None)
            .map(|(h, _)| h)
    };
    let writer = get(0, &[w("a/b")], 5000).unwrap();
    assert!(
        get(1, &[r("a")], 50).is_err(),
        "a read of the directory must wait"
    );
    assert!(get(1, &[r(".")], 50).is_err());
    assert!(get(1, &[w("a/b")], 50).is_err());
    let sibling = get(2, &[w("a/c")], 5000).expect("a write beside it does not wait");
    let reader = get(3, &[r("z")], 5000).expect("a read elsewhere does not wait");
    drop((writer, sibling));
    let dir_reader = get(1, &[r("a")], 5000).unwrap();
    let second = get(4, &[r("a")], 5000).expect("reads share");
    assert!(
        get(5, &[w("a/q")], 50).is_err(),
        "a write below a read directory waits"
    );
    drop((dir_reader, second, reader));
    // Released locks went back with their connections: a pooled connection
    // holds nothing.
    get(5, &[w("a/q")], 5000).unwrap();
    get(0, &[w(".")], 5000).unwrap();
}
