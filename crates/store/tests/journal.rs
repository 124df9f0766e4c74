//! The call journal in a SQLite record store.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use toolhost::record::journal::*;
use toolhost::store_error::StoreError;
use toolhost_store::SqliteStore;

fn pending(call_id: &str, key: Option<&str>, code: Option<&str>) -> Pending {
    Pending {
        call_id: call_id.into(),
        trajectory: Some("t".into()),
        turn: Some(1),
        logical_key: key.map(String::from),
        tool: "file_view".into(),
        tool_ref: None,
        token_chain: vec!["aa".into(), "bb".into()],
        started_us: 1_700_000_000_000_000,
        ended_us: 1_700_000_000_000_250,
        status: if code.is_some() { "error" } else { "ok" },
        error_code: code.map(String::from),
        args: r#"{"path":"a.txt","limit":5}"#.into(),
        args_valid: code.is_none(),
        output: code
            .is_none()
            .then(|| ResultOutput::Value(json!({"lines": []}))),
        output_bytes: 14,
        idempotency_key: None,
        questions: Vec::new(),
    }
}

#[test]
fn sqlite_journal_numbers_attempts_per_logical_call_and_survives_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("records.sqlite");
    let store = Arc::new(SqliteStore::open(&path, Duration::from_secs(60)).unwrap());
    let journal = Journal::start(store.clone(), JournalOptions::default()).unwrap();
    journal.append(pending("c1", Some("k1"), Some("invalid_json")));
    journal.append(pending("c2", Some("k2"), None));
    journal.append(pending("c1", Some("k1"), None));
    journal.append(pending("c3", None, None));
    assert!(journal.flush(Duration::from_secs(30)));
    // Another process on the same file continues the sequence.
    let other = Arc::new(SqliteStore::open(&path, Duration::from_secs(60)).unwrap());
    let second = Journal::start(other, JournalOptions::default()).unwrap();
    second.append(pending("c1", Some("k1"), None));
    drop(second); // dropping flushes
    let all = journal.backend().query(&Filter::default()).unwrap();
    let attempts: Vec<(String, u32, bool)> = all
        .iter()
        .map(|e| (e.call_id.clone(), e.attempt, e.first_try))
        .collect();
    assert_eq!(
        attempts,
        [
            ("c1".into(), 1, true),
            ("c2".into(), 1, true),
            ("c1".into(), 2, false),
            ("c3".into(), 1, true),
            ("c1".into(), 3, false),
        ]
    );
    let e = &all[0];
    assert_eq!(e.token_id.as_deref(), Some("bb"));
    assert_eq!(e.token_chain, ["aa", "bb"]);
    assert_eq!(e.args_summary, json!({"bytes": 26}));
    assert_eq!(e.duration_us(), 250);
    assert!(all[1].result_sha256.as_ref().is_some_and(|h| h.len() == 64));
    let only_errors = journal
        .backend()
        .query(&Filter {
            status: Some("error".into()),
            ..Filter::default()
        })
        .unwrap();
    assert_eq!(only_errors.len(), 1);
    let newest = journal
        .backend()
        .query(&Filter {
            limit: Some(2),
            ..Filter::default()
        })
        .unwrap();
    assert_eq!(newest.len(), 2);
    assert_eq!(newest[1].attempt, 3);
    assert_eq!(journal.backend().prune(i64::MAX).unwrap(), 5);
}

/// A backend that refuses the first appends: entries stay queued and are
/// written once it recovers.
struct Flaky {
    inner: SqliteStore,
    refusals: std::sync::atomic::AtomicU32,
}

impl JournalBackend for Flaky {
    fn init(&self) -> Result<(), StoreError> {
        self.inner.init()
    }
    fn append(&self, entries: &mut [Entry]) -> Result<(), StoreError> {
        if self
            .refusals
            .fetch_update(
                std::sync::atomic::Ordering::SeqCst,
                std::sync::atomic::Ordering::SeqCst,
                |n| n.checked_sub(1),
            )
            .is_ok()
        {
            return Err(StoreError::unavailable("down"));
        }
        self.inner.append(entries)
    }
    fn query(&self, filter: &Filter) -> Result<Vec<Entry>, StoreError> {
        self.inner.query(filter)
    }
    fn prune(&self, before_us: i64) -> Result<u64, StoreError> {
        self.inner.prune(before_us)
    }
}

#[test]
fn a_refused_batch_is_kept_and_written_later() {
    let dir = tempfile::tempdir().unwrap();
    let backend = Arc::new(Flaky {
        inner: SqliteStore::open(dir.path().join("r.sqlite"), Duration::from_secs(60)).unwrap(),
        refusals: 1.into(),
    });
    let journal = Journal::start(backend.clone(), JournalOptions::default()).unwrap();
    journal.append(pending("c1", None, None));
    journal.append(pending("c2", None, None));
    drop(journal); // the writer retries before it stops
    assert_eq!(backend.query(&Filter::default()).unwrap().len(), 2);
}
