//! What every [`ArtifactBackend`] must do, run on the directory backend
//! here and on the PostgreSQL one beside it: round trips (large ones across chunks), the owner
//! binding, expiry, sweeping and the quota.

use std::sync::Arc;
use std::time::Duration;

use super::{ArtifactBackend, ArtifactError, Artifacts, Quota};

/// A fresh owner binding, so suites sharing one database do not count
/// each other's artifacts against a token cap.
fn owner(tag: &str) -> String {
    let mut raw = [0u8; 8];
    getrandom::fill(&mut raw).unwrap();
    format!("{tag}-{}", hex::encode(raw))
}

pub fn suite(backend: Arc<dyn ArtifactBackend>) {
    let store = Artifacts::in_backend(backend.clone(), Duration::from_secs(600));
    let (a, b) = (owner("a"), owner("b"));

    // Round trip, small and large (several chunks, not a multiple of one).
    for len in [2usize, 3 * 256 * 1024 + 17] {
        let content: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        let id = store.put(&a, "file_view", &content, &[]).unwrap();
        let got = store.read(&id, &a).unwrap();
        assert_eq!(got.content, content, "{len} bytes");
        assert_eq!(got.tool, "file_view");
        // Another owner is refused; an unknown or malformed id is not found.
        assert!(matches!(
            store.read(&id, &b),
            Err(ArtifactError::NotOwner(_))
        ));
    }
    assert!(matches!(
        store.read(&"0".repeat(32), &a),
        Err(ArtifactError::NotFound(_))
    ));
    assert!(matches!(
        store.read("../etc", &a),
        Err(ArtifactError::BadId(_))
    ));

    // Expired artifacts are gone, on read and by a sweep.
    let gone = Artifacts::in_backend(backend.clone(), Duration::ZERO);
    let id = gone.put(&a, "t", b"{}", &[]).unwrap();
    assert!(matches!(
        gone.read(&id, &a),
        Err(ArtifactError::NotFound(_))
    ));
    let id = gone.put(&a, "t", b"{}", &[]).unwrap();
    gone.sweep();
    assert_eq!(backend.meta(&id).unwrap(), None);

    // The token's caps count its live artifacts only.
    let capped =
        Artifacts::in_backend(backend.clone(), Duration::from_secs(600)).with_quota(Quota {
            token_count: 2,
            token_bytes: 100,
            ..Quota::default()
        });
    let c = owner("c");
    capped.put(&c, "t", b"{}", &[]).unwrap();
    capped.put(&c, "t", b"{}", &[]).unwrap();
    let third = capped.put(&c, "t", b"{}", &[]);
    assert!(
        matches!(third, Err(ArtifactError::OverQuota { cap, .. }) if cap.contains("count")),
        "{third:?}"
    );
    let d = owner("d");
    let big = capped.put(&d, "t", &[b'x'; 101], &[]);
    assert!(
        matches!(big, Err(ArtifactError::OverQuota { cap, .. }) if cap.contains("bytes")),
        "{big:?}"
    );
    capped.put(&d, "t", &[b'x'; 100], &[]).unwrap();
    // A store-wide cap below what is kept refuses everyone.
    let full = Artifacts::in_backend(backend, Duration::from_secs(600)).with_quota(Quota {
        total_count: 0,
        ..Quota::default()
    });
    assert!(matches!(
        full.put(&owner("e"), "t", b"{}", &[]),
        Err(ArtifactError::OverQuota { .. })
    ));
}

/// Hosts writing together do not pass the token's count cap together.
pub fn one_quota_across_handles(open: &(dyn Fn() -> Arc<dyn ArtifactBackend> + Sync)) {
    let o = owner("shared");
    let kept = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let o = o.clone();
                s.spawn(move || {
                    let store =
                        Artifacts::in_backend(open(), Duration::from_secs(600)).with_quota(Quota {
                            token_count: 3,
                            ..Quota::default()
                        });
                    store.put(&o, "t", b"{}", &[]).is_ok()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap())
            .filter(|ok| *ok)
            .count()
    });
    assert_eq!(kept, 3);
}

#[test]
fn directory_artifacts_behave() {
    let dir = tempfile::tempdir().unwrap();
    suite(Arc::new(super::dir::DirBackend::open(dir.path()).unwrap()));
    let path = dir.path().to_path_buf();
    one_quota_across_handles(&move || {
        Arc::new(super::dir::DirBackend::open(&path).unwrap()) as Arc<dyn ArtifactBackend>
    });
}
