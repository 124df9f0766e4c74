//! What the SQLite and PostgreSQL backends share when they turn rows into
//! the domain's values and back: the column lists, the row types and the
//! integer conversions the databases need.

use std::time::Duration;

use serde_json::Value;
use toolhost::store_error::StoreError;

/// Counts as the databases store them: `i64`, saturating.
pub(crate) fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// A stored count back; a negative one (never written) reads as 0.
pub(crate) fn to_u64(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

/// `duration` in whole milliseconds, rounded up (a 1 µs lease is 1 ms), as
/// the `i64` both databases store.
pub(crate) fn duration_ms(duration: Duration, what: &str) -> Result<i64, StoreError> {
    if duration.is_zero() {
        return Err(StoreError::InvalidArgument {
            message: format!("{what} must be longer than zero"),
        });
    }
    let ms = duration.as_nanos().div_ceil(1_000_000);
    // At most ~292 million years: keeps `now + ms` far from i64 overflow.
    const MAX_MS: u128 = 1 << 53;
    if ms > MAX_MS {
        return Err(StoreError::InvalidArgument {
            message: format!("{what} of {duration:?} is too long"),
        });
    }
    Ok(ms as i64)
}

/// An approval's row.
pub(crate) mod approval {
    use super::*;
    use toolhost::effects::approval::{Approval, State};

    /// The row's columns, in [`COLUMNS`] order, as both backends read them.
    pub(crate) struct Row {
        pub id: String,
        pub state: String,
        pub tool: String,
        pub args: String,
        pub args_digest: String,
        pub targets: String,
        pub plan: String,
        pub plan_digest: String,
        pub capability: String,
        pub token_chain: String,
        pub requested_by: Option<String>,
        pub created_ms: i64,
        pub expires_ms: i64,
        pub decided_ms: Option<i64>,
        pub decided_by: Option<String>,
        pub note: Option<String>,
        pub used_by: Option<String>,
    }

    pub(crate) const COLUMNS: &str = "id, state, tool, args, args_digest, targets, plan, plan_digest, \
         capability, token_chain, requested_by, created_ms, expires_ms, decided_ms, decided_by, note, used_by";

    impl Row {
        pub(crate) fn into_approval(self) -> Result<Approval, StoreError> {
            let bad = |what: &str| StoreError::corrupt(&self.id, format!("approval {what}"));
            let json = |text: &str, what: &str| -> Result<Value, StoreError> {
                serde_json::from_str(text).map_err(|_| bad(what))
            };
            Ok(Approval {
                state: State::parse(&self.state).ok_or_else(|| bad("state"))?,
                targets: json(&self.targets, "targets")?,
                plan: json(&self.plan, "plan")?,
                token_chain: serde_json::from_str(&self.token_chain)
                    .map_err(|_| bad("token chain"))?,
                id: self.id,
                tool: self.tool,
                args: self.args,
                args_digest: self.args_digest,
                plan_digest: self.plan_digest,
                capability: self.capability,
                requested_by: self.requested_by,
                created_ms: to_u64(self.created_ms),
                expires_ms: to_u64(self.expires_ms),
                decided_ms: self.decided_ms.map(to_u64),
                decided_by: self.decided_by,
                note: self.note,
                used_by: self.used_by,
            })
        }
    }
}

/// A journal entry's row.
pub(crate) mod journal {
    use super::*;
    use toolhost::record::journal::Entry;

    /// The columns both backends read, in order.
    pub(crate) const COLUMNS: &str = "call_id, trajectory, turn, tool, token_chain, started_us, \
         ended_us, status, error_code, args_sha256, args_summary, result_sha256, output_bytes, \
         logical_key, attempt, first_try, idempotency_key, host";

    /// A row of [`COLUMNS`] back into an entry.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn entry_from_row(
        call_id: String,
        trajectory: Option<String>,
        turn: Option<i64>,
        tool: String,
        token_chain: String,
        started_us: i64,
        ended_us: i64,
        status: String,
        error_code: Option<String>,
        args_sha256: String,
        args_summary: String,
        result_sha256: Option<String>,
        output_bytes: i64,
        logical_key: Option<String>,
        attempt: i64,
        idempotency_key: Option<String>,
        host: String,
    ) -> Entry {
        let token_chain: Vec<String> = token_chain.split_whitespace().map(String::from).collect();
        let attempt = u32::try_from(attempt).unwrap_or(u32::MAX).max(1);
        Entry {
            call_id,
            trajectory,
            turn: turn.and_then(|t| u64::try_from(t).ok()),
            tool,
            token_id: token_chain.last().cloned(),
            token_chain,
            started_at: started_us,
            ended_at: ended_us,
            status,
            error_code,
            args_sha256,
            args_summary: serde_json::from_str(&args_summary).unwrap_or(Value::Null),
            result_sha256,
            output_bytes: u64::try_from(output_bytes).unwrap_or(0),
            attempt,
            first_try: attempt == 1,
            idempotency_key,
            host,
            logical_key,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolhost::store_error::StoreErrorKind;

    #[test]
    fn durations_convert_to_milliseconds() {
        assert_eq!(duration_ms(Duration::from_millis(50), "lease").unwrap(), 50);
        assert_eq!(duration_ms(Duration::from_micros(1), "lease").unwrap(), 1);
        assert_eq!(
            duration_ms(Duration::ZERO, "lease").unwrap_err().kind(),
            StoreErrorKind::InvalidArgument
        );
        assert_eq!(
            duration_ms(Duration::MAX, "lease").unwrap_err().kind(),
            StoreErrorKind::InvalidArgument
        );
    }
}
