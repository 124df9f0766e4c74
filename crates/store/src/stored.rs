//! What both stores derive from a stored row, whatever the driver: the
//! [`KeyRecord`] its columns decode to, a claim's answer from a record that is
//! already there, the check before a settle, and the error that explains an
//! owner's guarded write that touched no row.
//!
//! [`crate::sqlite`] and [`crate::postgres`] keep only their SQL and their
//! driver's types: each reads a row into a [`StoredRow`] (or a state and a
//! fence) and hands it here.

use std::time::{SystemTime, UNIX_EPOCH};

use toolhost::{Claim, KeyRecord, State, StoreError};

/// A row's columns as the driver read them, before validation. Times are
/// already [`SystemTime`]s (each store converts its own column type).
pub(super) struct StoredRow {
    pub key: String,
    pub tool: String,
    pub args_digest: String,
    pub state: String,
    pub fence: i64,
    pub created_at: SystemTime,
    pub updated_at: SystemTime,
    pub lease_until: Option<SystemTime>,
    pub expires_at: Option<SystemTime>,
    pub observation: Option<Vec<u8>>,
    pub reason: Option<String>,
}

impl StoredRow {
    /// Validates the row into a [`KeyRecord`].
    ///
    /// # Errors
    ///
    /// [`StoreError::Corrupt`] for an unknown state, a negative fence or an
    /// observation that is not UTF-8 (checked in that order).
    pub(super) fn into_record(self) -> Result<KeyRecord, StoreError> {
        let key = self.key;
        let state = self
            .state
            .parse::<State>()
            .map_err(|e| StoreError::corrupt(&key, e))?;
        let fence = to_fence(&key, self.fence)?;
        let observation = self
            .observation
            .map(String::from_utf8)
            .transpose()
            .map_err(|e| StoreError::corrupt(&key, format!("observation is not UTF-8: {e}")))?;
        Ok(KeyRecord {
            key,
            tool: self.tool,
            args_digest: self.args_digest,
            state,
            fence,
            created_at: self.created_at,
            updated_at: self.updated_at,
            lease_until: self.lease_until,
            expires_at: self.expires_at,
            observation,
            reason: self.reason,
        })
    }
}

/// A stored fence as a [`u64`].
///
/// # Errors
///
/// [`StoreError::Corrupt`] for a negative one.
pub(super) fn to_fence(key: &str, fence: i64) -> Result<u64, StoreError> {
    u64::try_from(fence).map_err(|_| StoreError::corrupt(key, format!("negative fence {fence}")))
}

/// How a claim is answered when a live record already holds its key.
#[derive(Debug)]
pub(super) enum Existing {
    /// Answer with this claim; nothing is written.
    Answer(Claim),
    /// The record is in flight with its lease running until `until`: the
    /// store checks that against its clock, and if the lease ran out moves
    /// the record to in-doubt.
    InFlight {
        /// End of the lease ([`UNIX_EPOCH`] if the row has none).
        until: SystemTime,
    },
}

/// The answer to a claim of `args_digest` that found `record` under its key
/// (the store has ruled out an expired completed record, which it takes
/// over instead).
pub(super) fn answer_existing(record: KeyRecord, args_digest: &str) -> Existing {
    if record.args_digest != args_digest {
        return Existing::Answer(Claim::Conflict {
            stored_digest: record.args_digest,
        });
    }
    match record.state {
        State::Completed => Existing::Answer(Claim::Completed {
            observation: record.observation.unwrap_or_default(),
        }),
        State::InDoubt => Existing::Answer(Claim::InDoubt {
            reason: record.reason.unwrap_or_default(),
        }),
        State::InFlight => Existing::InFlight {
            until: record.lease_until.unwrap_or(UNIX_EPOCH),
        },
    }
}

/// The record a settle may resolve: `record` is the live record under `key`
/// (an expired lease already moved to in-doubt), if any.
///
/// # Errors
///
/// [`StoreError::NotFound`] without a record, [`StoreError::WrongState`]
/// for one that is not in doubt.
pub(super) fn settleable(key: &str, record: Option<KeyRecord>) -> Result<KeyRecord, StoreError> {
    let record = record.ok_or_else(|| StoreError::NotFound {
        key: key.to_owned(),
    })?;
    if record.state != State::InDoubt {
        return Err(StoreError::WrongState {
            key: key.to_owned(),
            operation: "settle",
            state: record.state,
        });
    }
    Ok(record)
}

/// Explains why an owner's guarded write under `fence` touched no row, from
/// the `(state, fence)` now stored under `key` (`None`: no record).
pub(super) fn owner_failure(
    key: &str,
    fence: u64,
    operation: &'static str,
    current: Option<(String, i64)>,
) -> StoreError {
    let Some((state, current)) = current else {
        return StoreError::NotFound {
            key: key.to_owned(),
        };
    };
    let current = match to_fence(key, current) {
        Ok(current) => current,
        Err(e) => return e,
    };
    if current != fence {
        return StoreError::StaleFence {
            key: key.to_owned(),
            fence,
            current,
        };
    }
    match state.parse::<State>() {
        Ok(state) => StoreError::WrongState {
            key: key.to_owned(),
            operation,
            state,
        },
        Err(e) => StoreError::corrupt(key, e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolhost::effects::idempotency::StoreErrorKind;

    fn row() -> StoredRow {
        StoredRow {
            key: "k".into(),
            tool: "t".into(),
            args_digest: "d".into(),
            state: "completed".into(),
            fence: 3,
            created_at: UNIX_EPOCH,
            updated_at: UNIX_EPOCH,
            lease_until: None,
            expires_at: Some(UNIX_EPOCH),
            observation: Some(b"obs".to_vec()),
            reason: None,
        }
    }

    #[test]
    fn rows_decode_or_are_corrupt() {
        let record = row().into_record().unwrap();
        assert_eq!(record.state, State::Completed);
        assert_eq!(record.fence, 3);
        assert_eq!(record.observation.as_deref(), Some("obs"));
        let bad_rows = [
            StoredRow {
                state: "running".into(),
                ..row()
            },
            StoredRow { fence: -1, ..row() },
            StoredRow {
                observation: Some(vec![0xff]),
                ..row()
            },
        ];
        for bad in bad_rows {
            let err = bad.into_record().unwrap_err();
            assert_eq!(err.kind(), StoreErrorKind::Corrupt, "{err}");
        }
    }

    #[test]
    fn owner_failures_name_the_reason() {
        let kind = |current: Option<(&str, i64)>| {
            owner_failure("k", 2, "complete", current.map(|(s, f)| (s.to_owned(), f))).kind()
        };
        assert_eq!(kind(None), StoreErrorKind::NotFound);
        assert_eq!(kind(Some(("in_flight", 3))), StoreErrorKind::StaleFence);
        assert_eq!(kind(Some(("completed", 2))), StoreErrorKind::WrongState);
        assert_eq!(kind(Some(("running", 2))), StoreErrorKind::Corrupt);
        assert_eq!(kind(Some(("in_flight", -1))), StoreErrorKind::Corrupt);
    }
}
