//! toolhost-store: the record stores, the only crate of toolhost that talks
//! to a database.
//!
//! The host library defines what it keeps (the traits
//! `toolhost::Store`, `ledger::LedgerBackend`,
//! `journal::JournalBackend`, `approval::ApprovalBackend`,
//! `artifact::ArtifactBackend`, `breaker::BreakerBackend`,
//! `reveal::RevealBackend` and `resource::SharedLocks`); this crate keeps it:
//!
//! - [`sqlite`]: [`SqliteStore`], one file shared by the host processes of
//!   one machine: idempotency records, the ledger's, the journal's and the
//!   approvals' tables;
//! - [`postgres`]: [`PostgresStore`], one database shared by a fleet: the
//!   same tables, plus the artifacts, breaker counts and revealed tools
//!   every host must see alike;
//! - [`locks`]: [`PgLocks`], resource locks between hosts as PostgreSQL
//!   advisory locks;
//! - `rows`: the column lists and row conversions both backends share, and
//!   `stored`: the record-state decisions both make the same way.
//!
//! Every backend runs one behavioural suite per trait (`conformance` for
//! idempotency records; the host's own suites for the others), so SQLite and
//! PostgreSQL cannot drift apart.

#[cfg(test)]
mod conformance;
pub mod locks;
pub mod postgres;
mod rows;
pub mod sqlite;
mod stored;

pub use locks::PgLocks;
pub use postgres::PostgresStore;
pub use sqlite::SqliteStore;
