//! The ledger tables of both record stores.

//! The store ledgers against real databases: a SQLite file shared by
//! several connections (as several processes share it) and PostgreSQL
//! (`TOOLHOST_TEST_POSTGRES`; those tests are `#[ignore]`d, `.ci/run` runs
//! them with `--ignored`).

use std::sync::Arc;
use std::time::{Duration, Instant, UNIX_EPOCH};

use toolhost::policy::budget::{Issue, *};
use toolhost::policy::capability::CallBudget;
use toolhost::policy::ledger::*;
use toolhost::{Caveat, RootKey, Token};
use toolhost_store::PostgresStore;
use toolhost_store::SqliteStore;

const NOW: u64 = 1_767_225_600;

fn key() -> RootKey {
    RootKey::from_bytes([11; 32])
}

fn token(caveats: &[&str]) -> Token {
    let c: Vec<Caveat> = caveats.iter().map(|c| c.parse().unwrap()).collect();
    Token::mint(&key(), &c).unwrap()
}

fn budgets(t: &Token) -> Vec<CallBudget> {
    key()
        .verify(t, UNIX_EPOCH + Duration::from_secs(NOW))
        .unwrap()
        .call_budgets()
        .to_vec()
}

fn sqlite(path: &std::path::Path) -> StoreLedger {
    StoreLedger::new(Arc::new(
        SqliteStore::open(path, Duration::from_secs(3600)).unwrap(),
    ))
}

/// A PostgreSQL ledger, or a failed test naming how to start a server. The
/// tests that need it are `#[ignore]`d; `.ci/run` runs them with
/// `--ignored`.
fn postgres() -> StoreLedger {
    let url = std::env::var("TOOLHOST_TEST_POSTGRES")
        .unwrap_or_else(|_| "postgres://toolhost:toolhost@127.0.0.1:5432/toolhost".into());
    match PostgresStore::connect(&url, Duration::from_secs(3600)) {
        Ok(store) => StoreLedger::new(Arc::new(store)),
        Err(e) => panic!(
            "PostgreSQL unreachable at {url}: {e}\n\
             start it with: export TOOLHOST_TEST_POSTGRES=\"$(bash .ci/postgres.sh)\""
        ),
    }
}

/// 50 threads, each with its own connection (as 50 processes would have),
/// call against `max_calls=10`: exactly 10 are admitted.
fn fifty_against_ten(open: &(dyn Fn() -> StoreLedger + Sync)) {
    let t = token(&["tool=*", "max_calls=10"]);
    let b = budgets(&t);
    let admitted: usize = std::thread::scope(|s| {
        let handles: Vec<_> = (0..50)
            .map(|_| {
                let b = b.clone();
                s.spawn(move || {
                    let ledger = open();
                    usize::from(ledger.admit(&b, 0, NOW).is_ok())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    assert_eq!(admitted, 10);
    let ledger = open();
    assert_eq!(ledger.used(&b[0].id), 10);
    let err = ledger.admit(&b, 0, NOW).unwrap_err();
    assert!(
        matches!(&err, BudgetError::Exhausted { used: 10, .. }),
        "{err:?}"
    );
}

#[test]
fn sqlite_fifty_concurrent_calls_against_max_calls_ten_admit_exactly_ten() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.sqlite");
    fifty_against_ten(&|| sqlite(&path));
}

#[test]
#[ignore = "needs PostgreSQL: export TOOLHOST_TEST_POSTGRES=\"$(bash .ci/postgres.sh)\", then --ignored (CI does)"]
fn postgres_fifty_concurrent_calls_against_max_calls_ten_admit_exactly_ten() {
    fifty_against_ten(&postgres);
}

/// A child's calls spend its parent's budget; a refused admission charges
/// nothing; fuel is reserved and refunded.
fn chain_and_fuel(a: &StoreLedger, b: &StoreLedger) {
    let parent = token(&["tool=*", "max_calls=3", "budget_fuel=1000"]);
    let child = parent.delegate(&["max_calls=2".parse().unwrap()]).unwrap();
    let (p, c) = (budgets(&parent), budgets(&child));
    assert_eq!(c.len(), 3);
    // Two ledgers on one store: one count.
    assert_eq!(a.admit(&c, 600, NOW).unwrap().fuel, 600);
    a.refund_fuel(&c, 100).unwrap(); // consumed 500
    assert_eq!(b.used(&p[1].id), 500);
    // Only 500 fuel left: the reservation shrinks to it.
    assert_eq!(b.admit(&c, 600, NOW).unwrap().fuel, 500);
    assert_eq!(a.used(&p[0].id), 2);
    a.refund_fuel(&c, 200).unwrap(); // 800 used, 200 left
                                     // The child's max_calls=2 is spent; the refusal charges nothing.
    let err = a.admit(&c, 1, NOW).unwrap_err();
    assert!(
        matches!(&err, BudgetError::Exhausted { budget, used: 2 } if budget.id == c[2].id),
        "{err:?}"
    );
    assert_eq!(a.used(&p[0].id), 2);
    assert_eq!(a.used(&p[1].id), 800);
    // The parent has one call and 200 fuel left.
    assert_eq!(b.admit(&p, 1000, NOW).unwrap().fuel, 200);
    let err = a.admit(&p, 1, NOW).unwrap_err();
    assert!(
        matches!(&err, BudgetError::Exhausted { budget, used: 3 } if budget.id == p[0].id),
        "{err:?}"
    );
    // A fuel budget spent.
    let t = token(&["tool=*", "budget_fuel=10"]);
    let f = budgets(&t);
    assert_eq!(a.admit(&f, 1_000_000, NOW).unwrap().fuel, 10);
    let err = b.admit(&f, 1, NOW).unwrap_err();
    assert!(
        matches!(&err, BudgetError::Exhausted { used: 10, .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("budget_fuel=10"), "{err}");
}

#[test]
fn sqlite_children_spend_their_parents_budgets_and_fuel_is_reserved() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.sqlite");
    chain_and_fuel(&sqlite(&path), &sqlite(&path));
}

#[test]
#[ignore = "needs PostgreSQL: export TOOLHOST_TEST_POSTGRES=\"$(bash .ci/postgres.sh)\", then --ignored (CI does)"]
fn postgres_children_spend_their_parents_budgets_and_fuel_is_reserved() {
    let (a, b) = (postgres(), postgres());
    chain_and_fuel(&a, &b);
}

/// A revocation made through one ledger is seen by another on the same
/// store within the staleness bound, and reaches descendants.
fn revocation(a: &StoreLedger, b: &StoreLedger) {
    let parent = token(&["tool=*"]);
    let child = parent.delegate(&[]).unwrap();
    let grandchild = child.delegate(&[]).unwrap();
    let sibling = parent.delegate(&[]).unwrap();
    assert_eq!(b.revoked(&grandchild.chain_ids(), NOW).unwrap(), None);
    assert!(a.revoke(child.token_id(), None).unwrap());
    assert!(
        !a.revoke(child.token_id(), None).unwrap(),
        "already revoked"
    );
    // Seen at once by the ledger that revoked.
    assert_eq!(
        a.revoked(&grandchild.chain_ids(), NOW).unwrap(),
        Some(child.token_id())
    );
    // Within the bound by the other.
    let deadline = Instant::now() + REVOCATION_STALENESS + Duration::from_secs(2);
    loop {
        if b.revoked(&grandchild.chain_ids(), NOW).unwrap() == Some(child.token_id()) {
            break;
        }
        assert!(Instant::now() < deadline, "not seen within the bound");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(b.revoked(&sibling.chain_ids(), NOW).unwrap(), None);
    assert_eq!(b.revoked(&parent.chain_ids(), NOW).unwrap(), None);
}

#[test]
fn sqlite_revocation_reaches_descendants_and_other_ledgers_within_the_bound() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.sqlite");
    revocation(&sqlite(&path), &sqlite(&path));
}

#[test]
#[ignore = "needs PostgreSQL: export TOOLHOST_TEST_POSTGRES=\"$(bash .ci/postgres.sh)\", then --ignored (CI does)"]
fn postgres_revocation_reaches_descendants_and_other_ledgers_within_the_bound() {
    let (a, b) = (postgres(), postgres());
    revocation(&a, &b);
}

#[test]
fn issued_tokens_are_listed_with_uses_and_state() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.sqlite");
    let ledger = sqlite(&path);
    let parent = token(&["tool=*", &format!("expires={}", NOW + 60)]);
    let child = parent.delegate(&[]).unwrap();
    for (t, via) in [(&parent, Issue::Mint), (&child, Issue::Delegate)] {
        ledger
            .record_issued(&Issued {
                id: t.token_id(),
                parent: t.parent_id(),
                via,
                caveats: "tool=*".into(),
                issued_at: NOW,
                expires_at: Some(NOW + 60),
            })
            .unwrap();
    }
    ledger.note_use(&child.chain_ids());
    ledger.note_use(&child.chain_ids());
    ledger.note_use(&parent.chain_ids());
    let list = ledger.issued(NOW).unwrap();
    assert_eq!(list.len(), 2);
    assert_eq!((list[0].calls, list[0].state), (3, "active"));
    assert_eq!((list[1].calls, list[1].state), (2, "active"));
    assert_eq!(list[1].issued.parent, Some(parent.token_id()));
    ledger.revoke(parent.token_id(), Some(NOW + 60)).unwrap();
    // Another process reads the same file.
    let list = sqlite(&path).issued(NOW).unwrap();
    assert_eq!(list[0].state, "revoked");
    assert_eq!(list[1].state, "revoked", "a descendant of a revoked token");
    assert_eq!(sqlite(&path).issued(NOW + 59).unwrap()[1].state, "revoked");
    // The revocation expires with the token.
    assert_eq!(sqlite(&path).issued(NOW + 60).unwrap()[1].state, "expired");
}

#[test]
fn a_ledger_whose_tables_cannot_be_read_denies() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.sqlite");
    let ledger = sqlite(&path);
    let t = token(&["tool=*", "max_calls=5"]);
    ledger.admit(&budgets(&t), 0, NOW).unwrap();
    // Someone breaks the store under the host's feet.
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch("DROP TABLE capability_budget; DROP TABLE capability_revoked;")
        .unwrap();
    let err = ledger.admit(&budgets(&t), 0, NOW).unwrap_err();
    assert!(matches!(err, BudgetError::Unavailable(_)), "{err:?}");
    let err = ledger.revoked(&t.chain_ids(), NOW).unwrap_err();
    assert!(matches!(err, BudgetError::Unavailable(_)), "{err:?}");
    // A token without budgets is not admitted through a broken store
    // either: the revocation check fails closed.
    let plain = token(&["tool=*"]);
    assert!(ledger.revoked(&plain.chain_ids(), NOW).is_err());
}

#[test]
fn counts_and_revocations_are_purged_when_their_tokens_expire() {
    let dir = tempfile::tempdir().unwrap();
    let store =
        Arc::new(SqliteStore::open(dir.path().join("r.sqlite"), Duration::from_secs(60)).unwrap());
    let ledger = StoreLedger::new(store.clone());
    let short = token(&["tool=*", &format!("expires={}", NOW + 10), "max_calls=1"]);
    let long = token(&["tool=*", "max_calls=1"]);
    let (s, l) = (budgets(&short), budgets(&long));
    assert_eq!(s[0].expires_at, Some(NOW + 10));
    ledger.admit(&s, 0, NOW).unwrap();
    ledger.admit(&l, 0, NOW).unwrap();
    ledger.revoke(short.token_id(), Some(NOW + 10)).unwrap();
    ledger.revoke(long.token_id(), None).unwrap();
    store.purge(NOW + 9).unwrap();
    assert_eq!(ledger.used(&s[0].id), 1);
    assert_eq!(store.revoked_ids(NOW + 9).unwrap().len(), 2);
    store.purge(NOW + 10).unwrap();
    assert_eq!(ledger.used(&s[0].id), 0, "forgotten with the token");
    assert_eq!(ledger.used(&l[0].id), 1, "no expiry: kept");
    assert_eq!(store.revoked_ids(NOW + 10).unwrap(), vec![long.token_id()]);
}

/// A store gets its id once, when it is created: every ledger on the file
/// sees the same one; a new file gets another.
#[test]
fn sqlite_store_ids_are_made_once_per_store() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.sqlite");
    let a = sqlite(&path).store_id().unwrap().unwrap();
    assert_eq!(sqlite(&path).store_id().unwrap().unwrap(), a);
    let other = sqlite(&dir.path().join("s.sqlite"))
        .store_id()
        .unwrap()
        .unwrap();
    assert_ne!(other, a);
    std::fs::remove_file(&path).unwrap();
    assert_ne!(sqlite(&path).store_id().unwrap().unwrap(), a);
}

#[test]
#[ignore = "needs PostgreSQL: export TOOLHOST_TEST_POSTGRES=\"$(bash .ci/postgres.sh)\", then --ignored (CI does)"]
fn postgres_store_ids_are_made_once_per_store() {
    let a = postgres().store_id().unwrap().unwrap();
    assert_eq!(postgres().store_id().unwrap().unwrap(), a);
}
