//! Who may call what: the caller's policy.
//!
//! - [`capability`]: capability tokens, their caveats and grants;
//! - [`session`]: a caller bound to one verified token, and the scope a
//!   call gets from it;
//! - [`budget`]: `max_calls` and `budget_fuel` charged along a token's
//!   chain, and the [`BudgetLedger`](budget::BudgetLedger) trait;
//! - [`ledger`]: the process ledger of budgets and revocations;
//! - [`delegation`]: the `delegate` tool, narrower tokens for sub-agents.

pub mod budget;
pub mod capability;
pub mod delegation;
pub mod ledger;
pub mod session;
