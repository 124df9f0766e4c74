//! The vocabulary every record-store trait shares (idempotency records,
//! the call journal, the capability ledger): the one [`StoreError`] they
//! return and the record [`State`] it can name. It sits below all of them,
//! so the traits and the backends that implement them import it without
//! importing each other.

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

/// The stored state of a record ("unseen" is the absence of one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// Claimed; the owner is running the call under a lease.
    InFlight,
    /// The observation is stored and replayed to repeats.
    Completed,
    /// The effect is unknown; repeats are refused until settled.
    InDoubt,
}

impl State {
    /// Every state, in lifecycle order.
    pub const ALL: [State; 3] = [State::InFlight, State::Completed, State::InDoubt];

    /// Stable snake_case name, also the value stored in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            State::InFlight => "in_flight",
            State::Completed => "completed",
            State::InDoubt => "in_doubt",
        }
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A state name that is not one of [`State::as_str`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown idempotency state {0:?}")]
pub struct UnknownState(pub String);

impl FromStr for State {
    type Err = UnknownState;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        State::ALL
            .into_iter()
            .find(|state| state.as_str() == s)
            .ok_or_else(|| UnknownState(s.to_owned()))
    }
}

/// The class of a store failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StoreErrorKind {
    /// The store could not be opened or reached: do not run the call.
    Unavailable,
    /// A newer owner holds the record (or it was settled and claimed again).
    StaleFence,
    /// No live record under the key.
    NotFound,
    /// The record is not in a state that allows the operation.
    WrongState,
    /// An argument is unusable (a zero lease, a duration too large).
    InvalidArgument,
    /// The database refused a statement.
    Backend,
    /// A stored row could not be read back.
    Corrupt,
}

impl StoreErrorKind {
    /// Stable snake_case identifier of the kind.
    pub fn as_str(self) -> &'static str {
        match self {
            StoreErrorKind::Unavailable => "unavailable",
            StoreErrorKind::StaleFence => "stale_fence",
            StoreErrorKind::NotFound => "not_found",
            StoreErrorKind::WrongState => "wrong_state",
            StoreErrorKind::InvalidArgument => "invalid_argument",
            StoreErrorKind::Backend => "backend",
            StoreErrorKind::Corrupt => "corrupt",
        }
    }
}

impl fmt::Display for StoreErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A store failure. Any error from [`Store::claim`](crate::effects::idempotency::Store::claim) means: do not run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The store could not be opened, reached or initialized.
    #[error("idempotency store unavailable: {message}")]
    Unavailable {
        /// What failed.
        message: String,
    },
    /// The caller's fence is not the record's: a newer owner took over.
    #[error("stale fence {fence} for key {key}: the record now has fence {current}")]
    StaleFence {
        /// The key.
        key: String,
        /// The caller's fence.
        fence: u64,
        /// The record's fence.
        current: u64,
    },
    /// No live record under the key.
    #[error("no idempotency record for key {key}")]
    NotFound {
        /// The key.
        key: String,
    },
    /// The record's state forbids the operation.
    #[error("cannot {operation} key {key}: the record is {state}")]
    WrongState {
        /// The key.
        key: String,
        /// The operation attempted.
        operation: &'static str,
        /// The record's state.
        state: State,
    },
    /// An unusable argument.
    #[error("invalid argument: {message}")]
    InvalidArgument {
        /// What is wrong.
        message: String,
    },
    /// The database refused a statement.
    #[error("idempotency store error: {message}")]
    Backend {
        /// The database's message.
        message: String,
    },
    /// A stored row could not be read back.
    #[error("corrupt idempotency record {key}: {message}")]
    Corrupt {
        /// The key.
        key: String,
        /// What is wrong.
        message: String,
    },
}

impl StoreError {
    /// The class of failure.
    pub fn kind(&self) -> StoreErrorKind {
        match self {
            StoreError::Unavailable { .. } => StoreErrorKind::Unavailable,
            StoreError::StaleFence { .. } => StoreErrorKind::StaleFence,
            StoreError::NotFound { .. } => StoreErrorKind::NotFound,
            StoreError::WrongState { .. } => StoreErrorKind::WrongState,
            StoreError::InvalidArgument { .. } => StoreErrorKind::InvalidArgument,
            StoreError::Backend { .. } => StoreErrorKind::Backend,
            StoreError::Corrupt { .. } => StoreErrorKind::Corrupt,
        }
    }

    /// The store cannot be reached.
    pub fn unavailable(message: impl fmt::Display) -> StoreError {
        StoreError::Unavailable {
            message: message.to_string(),
        }
    }

    /// The backend failed in a way the host cannot correct.
    pub fn backend(message: impl fmt::Display) -> StoreError {
        StoreError::Backend {
            message: message.to_string(),
        }
    }

    /// What is stored under `key` cannot be read back.
    pub fn corrupt(key: &str, message: impl fmt::Display) -> StoreError {
        StoreError::Corrupt {
            key: key.to_owned(),
            message: message.to_string(),
        }
    }
}
