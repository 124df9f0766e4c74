//! The behaviour every [`Store`] must have, as test cases run against each
//! backend. A backend's test module defines a `run(case)` function that
//! builds a [`Backend`] and calls `case`, then expands [`suite!`] to get one
//! `#[test]` per case.
//!
//! Keys are unique per call of [`key`] (process id, clock and a counter), so
//! cases may share one database, run in parallel and run again later.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Barrier;
use std::thread;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use toolhost::effects::idempotency::{StoreErrorKind, DEFAULT_RETENTION, REASON_LEASE_EXPIRED};
use toolhost::{Claim, KeyRecord, Settlement, State, Store, StoreError};

/// How a case opens stores: every store opened from one `Backend` shares the
/// same database (another connection, as another process would).
pub(crate) struct Backend {
    /// Shown in assertion messages.
    pub name: &'static str,
    /// Opens a store with the given retention.
    #[allow(clippy::type_complexity)]
    pub open: Box<dyn Fn(Duration) -> Box<dyn Store>>,
}

impl Backend {
    fn store(&self) -> Box<dyn Store> {
        (self.open)(DEFAULT_RETENTION)
    }
}

/// A lease no case outlives.
const LONG: Duration = Duration::from_secs(600);
/// A lease cases wait out.
const SHORT: Duration = Duration::from_millis(50);
/// Comfortably longer than [`SHORT`].
const PAST_SHORT: Duration = Duration::from_millis(200);

/// A key no other case, run or process uses.
pub(crate) fn key(label: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(
        "test-{label}-{}-{nanos}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

fn acquire(store: &dyn Store, key: &str, digest: &str, lease: Duration) -> u64 {
    match store.claim(key, "tool.x", digest, lease).unwrap() {
        Claim::Acquired { fence } => fence,
        other => panic!("expected Acquired for {key}, got {other:?}"),
    }
}

/// Claims `key` for `tool.x` with the arguments `digest` under a [`LONG`]
/// lease, as a repeat of the call would.
fn repeat(store: &dyn Store, key: &str, digest: &str) -> Claim {
    store.claim(key, "tool.x", digest, LONG).unwrap()
}

/// The answer that replays `observation`.
fn completed(observation: &str) -> Claim {
    Claim::Completed {
        observation: observation.to_owned(),
    }
}

/// The answer that refuses a call in doubt for `reason`.
fn in_doubt(reason: &str) -> Claim {
    Claim::InDoubt {
        reason: reason.to_owned(),
    }
}

fn record(store: &dyn Store, key: &str) -> KeyRecord {
    store
        .get(key)
        .unwrap()
        .unwrap_or_else(|| panic!("no record for {key}"))
}

fn expect_kind(result: Result<(), StoreError>, kind: StoreErrorKind) -> StoreError {
    match result {
        Err(e) if e.kind() == kind => e,
        other => panic!("expected {kind}, got {other:?}"),
    }
}

/// Claim, complete, and every repeat replays the stored text byte for byte.
pub(crate) fn claim_complete_replay(b: &Backend) {
    let s = b.store();
    let k = key("replay");
    let fence = acquire(&*s, &k, "d1", LONG);
    assert!(fence > 0, "{}", b.name);
    // Deliberately not canonical: whitespace, key order, an escape, a NUL.
    let observation = "{\"b\": 1,  \"a\":\"é\\u00e9\\n\"}\n\t \u{0} 😀";
    s.complete(&k, fence, observation).unwrap();
    for _ in 0..3 {
        match repeat(&*s, &k, "d1") {
            Claim::Completed { observation: got } => {
                assert_eq!(got.as_bytes(), observation.as_bytes(), "{}", b.name)
            }
            other => panic!("{}: expected Completed, got {other:?}", b.name),
        }
    }
    let r = record(&*s, &k);
    assert_eq!(r.key, k);
    assert_eq!(r.tool, "tool.x");
    assert_eq!(r.args_digest, "d1");
    assert_eq!(r.state, State::Completed);
    assert_eq!(r.fence, fence);
    assert_eq!(r.observation.as_deref(), Some(observation));
    let expires = r.expires_at.expect("completed records expire");
    assert!(expires > r.updated_at + DEFAULT_RETENTION / 2, "{r:?}");
    assert!(r.created_at <= r.updated_at, "{r:?}");
    // The owner cannot complete twice.
    let err = expect_kind(s.complete(&k, fence, "{}"), StoreErrorKind::WrongState);
    assert!(
        matches!(
            err,
            StoreError::WrongState {
                state: State::Completed,
                ..
            }
        ),
        "{err:?}"
    );
    // Another store on the same database sees the same bytes.
    let other = b.store();
    assert_eq!(repeat(&*other, &k, "d1"), completed(observation));
}

/// A repeat while the first call runs is refused with the lease's end.
pub(crate) fn repeat_in_flight(b: &Backend) {
    let s = b.store();
    let k = key("inflight");
    let before = SystemTime::now();
    acquire(&*s, &k, "d", LONG);
    for _ in 0..2 {
        match repeat(&*s, &k, "d") {
            Claim::InFlight { until } => {
                // Allow a second of clock difference with a database server.
                assert!(until > before + LONG - Duration::from_secs(1), "{until:?}");
                assert!(
                    until < SystemTime::now() + LONG + Duration::from_secs(1),
                    "{until:?}"
                );
            }
            other => panic!("{}: expected InFlight, got {other:?}", b.name),
        }
    }
    let r = record(&*s, &k);
    assert_eq!(r.state, State::InFlight);
    assert!(r.lease_until.is_some());
    assert_eq!(r.observation, None);
}

/// The same key with other arguments is a conflict, never a replay.
pub(crate) fn conflict_on_other_arguments(b: &Backend) {
    let s = b.store();
    let k = key("conflict");
    let fence = acquire(&*s, &k, "digest-1", LONG);
    assert_eq!(
        repeat(&*s, &k, "digest-2"),
        Claim::Conflict {
            stored_digest: "digest-1".into()
        }
    );
    s.complete(&k, fence, "obs").unwrap();
    assert_eq!(
        repeat(&*s, &k, "digest-2"),
        Claim::Conflict {
            stored_digest: "digest-1".into()
        }
    );
    assert_eq!(repeat(&*s, &k, "digest-1"), completed("obs"));
}

/// A lease that runs out moves the record to in-doubt; it is never re-run.
pub(crate) fn lease_expiry_moves_to_in_doubt(b: &Backend) {
    let s = b.store();
    let (k1, k2, k3) = (key("lease1"), key("lease2"), key("lease3"));
    for k in [&k1, &k2, &k3] {
        acquire(&*s, k, "d", SHORT);
    }
    thread::sleep(PAST_SHORT);
    // Through claim.
    for _ in 0..2 {
        assert_eq!(
            repeat(&*s, &k1, "d"),
            in_doubt(REASON_LEASE_EXPIRED),
            "{}",
            b.name
        );
    }
    // Through get, without a claim first.
    let r = record(&*s, &k2);
    assert_eq!(r.state, State::InDoubt);
    assert_eq!(r.reason.as_deref(), Some(REASON_LEASE_EXPIRED));
    // Through list.
    let in_flight = s.list(Some(State::InFlight)).unwrap();
    assert!(!in_flight.iter().any(|r| r.key == k3), "{}", b.name);
    let in_doubt = s.list(Some(State::InDoubt)).unwrap();
    for k in [&k1, &k2, &k3] {
        assert!(in_doubt.iter().any(|r| &r.key == k), "{k} not in doubt");
    }
    // Still refused later.
    assert!(matches!(repeat(&*s, &k3, "d"), Claim::InDoubt { .. }));
}

/// The owner whose lease ran out (nobody took over) may still record the
/// outcome it knows.
pub(crate) fn late_owner_may_complete(b: &Backend) {
    let s = b.store();
    let k = key("late");
    let fence = acquire(&*s, &k, "d", SHORT);
    thread::sleep(PAST_SHORT);
    assert!(matches!(repeat(&*s, &k, "d"), Claim::InDoubt { .. }));
    s.complete(&k, fence, "late result").unwrap();
    assert_eq!(repeat(&*s, &k, "d"), completed("late result"));
}

/// After a takeover the old owner's fence is stale for every operation.
pub(crate) fn stale_fence_after_takeover(b: &Backend) {
    let s = b.store();
    let k = key("fence");
    let old = acquire(&*s, &k, "d", SHORT);
    thread::sleep(PAST_SHORT);
    assert!(matches!(repeat(&*s, &k, "d"), Claim::InDoubt { .. }));
    s.settle(&k, Settlement::NotDone).unwrap();
    let new = acquire(&*s, &k, "d", LONG);
    assert!(new > old, "{}: fence {new} after {old}", b.name);
    let err = expect_kind(s.complete(&k, old, "stale"), StoreErrorKind::StaleFence);
    assert_eq!(
        err,
        StoreError::StaleFence {
            key: k.clone(),
            fence: old,
            current: new
        }
    );
    expect_kind(
        s.mark_in_doubt(&k, old, "stale"),
        StoreErrorKind::StaleFence,
    );
    expect_kind(s.release(&k, old), StoreErrorKind::StaleFence);
    assert_eq!(record(&*s, &k).state, State::InFlight);
    s.complete(&k, new, "fresh").unwrap();
    assert_eq!(repeat(&*s, &k, "d"), completed("fresh"));
}

/// A trap marks the record in doubt; settling it done stores the result.
pub(crate) fn settle_done(b: &Backend) {
    let s = b.store();
    let k = key("settle-done");
    let fence = acquire(&*s, &k, "d", LONG);
    s.mark_in_doubt(&k, fence, "trap: unreachable").unwrap();
    assert_eq!(repeat(&*s, &k, "d"), in_doubt("trap: unreachable"));
    // Marking again (same owner) updates the reason.
    s.mark_in_doubt(&k, fence, "trap: out of fuel").unwrap();
    assert_eq!(record(&*s, &k).reason.as_deref(), Some("trap: out of fuel"));
    s.settle(&k, Settlement::Done("{\"probed\":true}".into()))
        .unwrap();
    assert_eq!(
        repeat(&*s, &k, "d"),
        Claim::Completed {
            observation: "{\"probed\":true}".into()
        }
    );
    let r = record(&*s, &k);
    assert_eq!(r.state, State::Completed);
    assert!(r.expires_at.is_some());
}

/// Settling not done forgets the record, so a retry runs with a new fence.
pub(crate) fn settle_not_done(b: &Backend) {
    let s = b.store();
    let k = key("settle-not-done");
    let first = acquire(&*s, &k, "d", LONG);
    s.mark_in_doubt(&k, first, "host call lost").unwrap();
    s.settle(&k, Settlement::NotDone).unwrap();
    assert_eq!(s.get(&k).unwrap(), None);
    let second = acquire(&*s, &k, "d", LONG);
    assert!(second > first);
}

/// Only in-doubt records can be settled.
pub(crate) fn settle_requires_in_doubt(b: &Backend) {
    let s = b.store();
    let k = key("settle-state");
    expect_kind(s.settle(&k, Settlement::NotDone), StoreErrorKind::NotFound);
    let fence = acquire(&*s, &k, "d", LONG);
    let err = expect_kind(
        s.settle(&k, Settlement::NotDone),
        StoreErrorKind::WrongState,
    );
    assert!(
        matches!(
            err,
            StoreError::WrongState {
                state: State::InFlight,
                operation: "settle",
                ..
            }
        ),
        "{err:?}"
    );
    s.complete(&k, fence, "x").unwrap();
    expect_kind(
        s.settle(&k, Settlement::Done("y".into())),
        StoreErrorKind::WrongState,
    );
    assert_eq!(repeat(&*s, &k, "d"), completed("x"));
}

/// An in-flight record whose lease ran out can be settled directly.
pub(crate) fn settle_after_lease_expiry(b: &Backend) {
    let s = b.store();
    let k = key("settle-lease");
    acquire(&*s, &k, "d", SHORT);
    thread::sleep(PAST_SHORT);
    s.settle(&k, Settlement::Done("probed".into())).unwrap();
    assert_eq!(repeat(&*s, &k, "d"), completed("probed"));
}

/// Release (the effect never started) forgets the record; fences are checked.
pub(crate) fn release_forgets(b: &Backend) {
    let s = b.store();
    let k = key("release");
    let fence = acquire(&*s, &k, "d", LONG);
    expect_kind(s.release(&k, fence + 1), StoreErrorKind::StaleFence);
    s.release(&k, fence).unwrap();
    assert_eq!(s.get(&k).unwrap(), None);
    expect_kind(s.release(&k, fence), StoreErrorKind::NotFound);
    let again = acquire(&*s, &k, "d", LONG);
    assert!(again > fence);
    s.complete(&k, again, "done").unwrap();
    expect_kind(s.release(&k, again), StoreErrorKind::WrongState);
}

/// Owner operations on an unknown key.
pub(crate) fn owner_operations_need_a_record(b: &Backend) {
    let s = b.store();
    let k = key("missing");
    expect_kind(s.complete(&k, 1, "x"), StoreErrorKind::NotFound);
    expect_kind(s.mark_in_doubt(&k, 1, "x"), StoreErrorKind::NotFound);
    expect_kind(s.release(&k, 1), StoreErrorKind::NotFound);
    expect_kind(s.complete(&k, u64::MAX, "x"), StoreErrorKind::NotFound);
    assert_eq!(s.get(&k).unwrap(), None);
}

/// Completed records expire after the retention: on read, and by purge.
pub(crate) fn retention_expiry(b: &Backend) {
    let retention = Duration::from_millis(500);
    let s = (b.open)(retention);
    let (k1, k2, k3) = (key("ret1"), key("ret2"), key("ret3"));
    let f1 = acquire(&*s, &k1, "d", LONG);
    s.complete(&k1, f1, "one").unwrap();
    let f2 = acquire(&*s, &k2, "d", LONG);
    s.complete(&k2, f2, "two").unwrap();
    assert!(matches!(repeat(&*s, &k1, "d"), Claim::Completed { .. }));
    thread::sleep(retention + Duration::from_millis(200));
    // Expired on read, before any purge.
    assert_eq!(s.get(&k1).unwrap(), None, "{}", b.name);
    assert!(!s.list(None).unwrap().iter().any(|r| r.key == k1));
    // Claimed afresh (even with other arguments): the old owner is stale.
    let f1b = match repeat(&*s, &k1, "other") {
        Claim::Acquired { fence } => fence,
        other => panic!("{}: expected Acquired, got {other:?}", b.name),
    };
    assert!(f1b > f1);
    expect_kind(s.complete(&k1, f1, "stale"), StoreErrorKind::StaleFence);
    assert_eq!(record(&*s, &k1).args_digest, "other");
    // A fresh record survives the purge; the expired one goes.
    let f3 = acquire(&*s, &k3, "d", LONG);
    s.complete(&k3, f3, "three").unwrap();
    let purged = s.purge_expired().unwrap();
    assert!(purged >= 1, "{}: purged {purged}", b.name);
    assert_eq!(s.get(&k2).unwrap(), None);
    assert_eq!(repeat(&*s, &k3, "d"), completed("three"));
    assert_eq!(record(&*s, &k1).state, State::InFlight);
}

/// In-doubt records outlive the retention: they wait to be settled.
pub(crate) fn in_doubt_never_expires(b: &Backend) {
    let retention = Duration::from_millis(100);
    let s = (b.open)(retention);
    let k = key("doubt-kept");
    let fence = acquire(&*s, &k, "d", LONG);
    s.mark_in_doubt(&k, fence, "trap").unwrap();
    thread::sleep(retention * 3);
    s.purge_expired().unwrap();
    assert_eq!(repeat(&*s, &k, "d"), in_doubt("trap"));
}

/// Listing, all or by state.
pub(crate) fn list_by_state(b: &Backend) {
    let s = b.store();
    let (a, c, d) = (key("list-a"), key("list-c"), key("list-d"));
    acquire(&*s, &a, "d", LONG);
    let fc = acquire(&*s, &c, "d", LONG);
    s.complete(&c, fc, "obs").unwrap();
    let fd = acquire(&*s, &d, "d", LONG);
    s.mark_in_doubt(&d, fd, "why").unwrap();
    let ours = |records: Vec<KeyRecord>| -> Vec<(String, State)> {
        records
            .into_iter()
            .filter(|r| [&a, &c, &d].contains(&&r.key))
            .map(|r| (r.key, r.state))
            .collect()
    };
    let all = ours(s.list(None).unwrap());
    assert_eq!(all.len(), 3, "{all:?}");
    assert!(all.contains(&(a.clone(), State::InFlight)));
    assert!(all.contains(&(c.clone(), State::Completed)));
    assert!(all.contains(&(d.clone(), State::InDoubt)));
    for state in State::ALL {
        let listed = ours(s.list(Some(state)).unwrap());
        assert_eq!(listed.len(), 1, "{state}: {listed:?}");
        assert_eq!(listed[0].1, state);
    }
}

/// Unusable leases are refused and nothing is recorded.
pub(crate) fn invalid_lease_is_refused(b: &Backend) {
    let s = b.store();
    let k = key("lease0");
    let err = s.claim(&k, "tool.x", "d", Duration::ZERO).unwrap_err();
    assert_eq!(err.kind(), StoreErrorKind::InvalidArgument);
    let err = s.claim(&k, "tool.x", "d", Duration::MAX).unwrap_err();
    assert_eq!(err.kind(), StoreErrorKind::InvalidArgument);
    assert_eq!(s.get(&k).unwrap(), None);
}

/// A key's fence only grows, however its records come and go.
pub(crate) fn fences_grow_per_key(b: &Backend) {
    let s = b.store();
    let other = b.store();
    let k = key("grow");
    let mut last = 0;
    for round in 0..6 {
        // Alternate connections: the floor lives in the database.
        let store = if round % 2 == 0 { &*s } else { &*other };
        let fence = acquire(store, &k, "d", LONG);
        assert!(fence > last, "{}: fence {fence} after {last}", b.name);
        last = fence;
        if round % 3 == 0 {
            store.release(&k, fence).unwrap();
        } else {
            store.mark_in_doubt(&k, fence, "trap").unwrap();
            store.settle(&k, Settlement::NotDone).unwrap();
        }
    }
    // Other keys come and go meanwhile without lowering anything.
    let k2 = key("grow-other");
    let f2 = acquire(&*s, &k2, "d", LONG);
    s.release(&k2, f2).unwrap();
    assert!(acquire(&*s, &k, "d", LONG) > last);
}

/// The concurrency case on the backend's default pair of stores.
pub(crate) fn concurrent_claims_two_stores(b: &Backend) {
    let first = b.store();
    let second = b.store();
    concurrent_claims(&[&*first, &*second], b.name);
}

/// 50 threads claim one key through `stores` (separate connections): exactly
/// one acquires; the others see it in flight or completed, never run.
pub(crate) fn concurrent_claims(stores: &[&dyn Store], name: &str) {
    const THREADS: usize = 50;
    let k = key("race");
    let barrier = Barrier::new(THREADS);
    let results: Vec<Claim> = thread::scope(|scope| {
        let handles: Vec<_> = (0..THREADS)
            .map(|i| {
                let store = stores[i % stores.len()];
                let (k, barrier) = (&k, &barrier);
                scope.spawn(move || {
                    barrier.wait();
                    let claim = repeat(store, k, "d");
                    if let Claim::Acquired { fence } = claim {
                        store.complete(k, fence, "winner").unwrap();
                    }
                    claim
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let acquired = results
        .iter()
        .filter(|c| matches!(c, Claim::Acquired { .. }))
        .count();
    assert_eq!(acquired, 1, "{name}: {results:?}");
    for claim in &results {
        match claim {
            Claim::Acquired { .. } | Claim::InFlight { .. } => {}
            Claim::Completed { observation } => assert_eq!(observation, "winner"),
            other => panic!("{name}: unexpected {other:?}"),
        }
    }
    for store in stores {
        assert_eq!(repeat(*store, &k, "d"), completed("winner"));
    }
}

/// Expands to one `#[test]` per conformance case, each calling
/// `$run(case)`; with `ignore = "why"`, each test is `#[ignore]`d with that
/// reason (a backend that needs a server the plain `cargo test` lacks).
macro_rules! suite {
    ($run:path) => {
        $crate::conformance::suite!(@list $run; []);
    };
    ($run:path, ignore = $why:literal) => {
        $crate::conformance::suite!(@list $run; [#[ignore = $why]]);
    };
    (@list $run:path; $attrs:tt) => {
        $crate::conformance::suite!(@cases $run; $attrs;
            claim_complete_replay,
            repeat_in_flight,
            conflict_on_other_arguments,
            lease_expiry_moves_to_in_doubt,
            late_owner_may_complete,
            stale_fence_after_takeover,
            settle_done,
            settle_not_done,
            settle_requires_in_doubt,
            settle_after_lease_expiry,
            release_forgets,
            owner_operations_need_a_record,
            retention_expiry,
            in_doubt_never_expires,
            list_by_state,
            invalid_lease_is_refused,
            fences_grow_per_key,
            concurrent_claims_two_stores,
        );
    };
    (@cases $run:path; $attrs:tt; $($case:ident),* $(,)?) => {
        $(
            $crate::conformance::suite!(@one $run; $attrs; $case);
        )*
    };
    (@one $run:path; [$($attr:tt)*]; $case:ident) => {
        $($attr)*
        #[test]
        fn $case() {
            $run($crate::conformance::$case);
        }
    };
}
pub(crate) use suite;
