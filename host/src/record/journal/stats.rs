//! `toolhost stats`: per tool, from journal entries — calls, the share of
//! logical calls whose first try was valid, the malformed rate, an error
//! histogram and latency percentiles — and the break-even malformed rate
//! above which constrained decoding costs less than repairs:
//!
//! ```text
//! p_break = L_gen · t_mask / T_repair
//! ```
//!
//! `L_gen` the tokens of a call, `t_mask` the masking cost per token,
//! `T_repair` the latency of one repair round. Constraining the decoder
//! pays when the measured malformed rate is above `p_break`. The defaults
//! are a worked example (80 tokens, 0.5 ms, 1.8 s: 2.2 %).

use std::collections::BTreeMap;

use serde::Serialize;

use super::Entry;

/// Error codes that mean the call never passed validation and
/// authorization: the model's call itself was wrong.
pub const INVALID_CODES: [&str; 6] = [
    "unknown_tool",
    "invalid_json",
    "invalid_arguments",
    "denied",
    "secret_in_arguments",
    "circuit_open",
];

/// Error codes of a malformed call (`p_err`).
pub const MALFORMED_CODES: [&str; 2] = ["invalid_json", "invalid_arguments"];

/// The inputs of the break-even rate `p_break`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct BreakEven {
    /// `L_gen`: output tokens of one call.
    pub tokens: f64,
    /// `t_mask`: milliseconds of masking per token.
    pub t_mask_ms: f64,
    /// `T_repair`: milliseconds of one repair round.
    pub t_repair_ms: f64,
}

impl Default for BreakEven {
    /// A worked example: 80 tokens, 0.5 ms per token, 1.8 s per repair.
    fn default() -> Self {
        BreakEven {
            tokens: 80.0,
            t_mask_ms: 0.5,
            t_repair_ms: 1800.0,
        }
    }
}

impl BreakEven {
    /// `p_break`, a share in [0, 1] (`None` when `T_repair` is not
    /// positive).
    pub fn p_break(&self) -> Option<f64> {
        (self.t_repair_ms > 0.0).then(|| (self.tokens * self.t_mask_ms / self.t_repair_ms).min(1.0))
    }

    /// What a measured malformed rate implies.
    pub fn verdict(&self, malformed_rate: Option<f64>) -> &'static str {
        match (malformed_rate, self.p_break()) {
            (None, _) => "no first tries measured",
            (_, None) => "no break-even: T_repair must be positive",
            (Some(m), Some(p)) if m > p => {
                "constrain decoding: the malformed rate is above p_break, so masking costs less than repairs"
            }
            _ => "validate and repair: the malformed rate is at or below p_break, so repairs cost less than masking",
        }
    }
}

/// One tool's figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolStats {
    pub name: String,
    /// Every journaled call (all attempts).
    pub calls: u64,
    /// Logical calls: entries that were a first try.
    pub logical_calls: u64,
    /// Share of logical calls whose first attempt passed validation and
    /// authorization (`null` without first tries).
    pub first_try_valid_rate: Option<f64>,
    /// Share of first attempts that were `invalid_json` or
    /// `invalid_arguments`.
    pub malformed_rate: Option<f64>,
    /// Calls by error code (`ok` for successes).
    pub errors: BTreeMap<String, u64>,
    pub p50_ms: f64,
    pub p90_ms: f64,
    /// [`BreakEven::verdict`] for this tool's malformed rate.
    pub verdict: &'static str,
}

/// All tools, and the break-even beside the overall malformed rate.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Stats {
    pub tools: Vec<ToolStats>,
    pub calls: u64,
    pub first_try_valid_rate: Option<f64>,
    pub malformed_rate: Option<f64>,
    pub break_even: BreakEven,
    pub p_break: Option<f64>,
    pub verdict: &'static str,
}

#[derive(Default)]
struct Acc {
    calls: u64,
    firsts: u64,
    valid_firsts: u64,
    malformed_firsts: u64,
    errors: BTreeMap<String, u64>,
    durations_us: Vec<i64>,
}

impl Acc {
    fn add(&mut self, e: &Entry) {
        self.calls += 1;
        let code = e.error_code.as_deref();
        *self
            .errors
            .entry(code.unwrap_or("ok").to_string())
            .or_default() += 1;
        self.durations_us.push(e.duration_us());
        if e.first_try {
            self.firsts += 1;
            if !code.is_some_and(|c| INVALID_CODES.contains(&c)) {
                self.valid_firsts += 1;
            }
            if code.is_some_and(|c| MALFORMED_CODES.contains(&c)) {
                self.malformed_firsts += 1;
            }
        }
    }

    fn rate(n: u64, of: u64) -> Option<f64> {
        (of > 0).then(|| n as f64 / of as f64)
    }
}

/// The `q` quantile (nearest rank) of `v`, in milliseconds.
fn quantile_ms(v: &mut [i64], q: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_unstable();
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[rank - 1] as f64 / 1000.0
}

/// The figures of `entries` (any order, any number of hosts).
pub fn compute(entries: &[Entry], break_even: BreakEven) -> Stats {
    let mut by_tool: BTreeMap<&str, Acc> = BTreeMap::new();
    let mut all = Acc::default();
    for e in entries {
        by_tool.entry(&e.tool).or_default().add(e);
        all.add(e);
    }
    let tools = by_tool
        .into_iter()
        .map(|(name, mut a)| {
            let malformed_rate = Acc::rate(a.malformed_firsts, a.firsts);
            ToolStats {
                name: name.to_string(),
                calls: a.calls,
                logical_calls: a.firsts,
                first_try_valid_rate: Acc::rate(a.valid_firsts, a.firsts),
                malformed_rate,
                p50_ms: quantile_ms(&mut a.durations_us, 0.5),
                p90_ms: quantile_ms(&mut a.durations_us, 0.9),
                errors: a.errors,
                verdict: break_even.verdict(malformed_rate),
            }
        })
        .collect();
    let malformed_rate = Acc::rate(all.malformed_firsts, all.firsts);
    Stats {
        tools,
        calls: all.calls,
        first_try_valid_rate: Acc::rate(all.valid_firsts, all.firsts),
        malformed_rate,
        break_even,
        p_break: break_even.p_break(),
        verdict: break_even.verdict(malformed_rate),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(tool: &str, attempt: u32, code: Option<&str>, us: i64) -> Entry {
        Entry {
            call_id: "c".into(),
            trajectory: None,
            turn: None,
            tool: tool.into(),
            token_id: None,
            token_chain: vec![],
            started_at: 0,
            ended_at: us,
            status: if code.is_some() { "error" } else { "ok" }.into(),
            error_code: code.map(String::from),
            args_sha256: String::new(),
            args_summary: serde_json::Value::Null,
            result_sha256: None,
            output_bytes: 0,
            attempt,
            first_try: attempt == 1,
            idempotency_key: None,
            host: "h".into(),
            logical_key: None,
        }
    }

    #[test]
    fn worked_example_break_even_is_two_point_two_percent() {
        let p = BreakEven::default().p_break().unwrap();
        assert!((p - 40.0 / 1800.0).abs() < 1e-12, "{p}");
        assert!(BreakEven::default()
            .verdict(Some(0.05))
            .starts_with("constrain"));
        assert!(BreakEven::default()
            .verdict(Some(0.01))
            .starts_with("validate"));
        let zero = BreakEven {
            t_repair_ms: 0.0,
            ..BreakEven::default()
        };
        assert_eq!(zero.p_break(), None);
    }

    #[test]
    fn rates_count_logical_calls_by_their_first_try() {
        let es = [
            entry("a", 1, None, 1000),
            entry("a", 1, None, 2000),
            entry("a", 1, Some("invalid_arguments"), 3000),
            entry("a", 1, Some("invalid_json"), 4000),
            entry("a", 2, None, 5000),
            entry("a", 2, None, 6000),
            entry("b", 1, Some("not_found"), 10_000),
        ];
        let s = compute(&es, BreakEven::default());
        let a = &s.tools[0];
        assert_eq!((a.calls, a.logical_calls), (6, 4));
        assert_eq!(a.first_try_valid_rate, Some(0.5));
        assert_eq!(a.malformed_rate, Some(0.5));
        assert_eq!(a.errors["ok"], 4);
        assert_eq!(a.p50_ms, 3.0);
        assert_eq!(a.p90_ms, 6.0);
        // A tool's own error is a valid call that failed.
        assert_eq!(s.tools[1].first_try_valid_rate, Some(1.0));
        assert_eq!(s.calls, 7);
        assert_eq!(s.first_try_valid_rate, Some(3.0 / 5.0));
    }
}
