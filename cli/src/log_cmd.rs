//! `toolhost log`, `toolhost stats` and `toolhost prune`: reading and
//! pruning the call journal (part of the `toolhost` binary, not of the
//! library; the journal itself is `toolhost::record::journal`).
//!
//! ```text
//! toolhost log [--tool T] [--trajectory ID] [--since WHEN] [--status S] [--limit N] [--json]
//! toolhost stats [--since WHEN] [--tokens N] [--t-mask-ms MS] [--t-repair-ms MS] [--json]
//! toolhost prune [--older-than DURATION]
//! ```
//!
//! `WHEN` is a duration back from now (`30m`, `2h`, `7d`) or an RFC 3339
//! time. Without `--json`, `log` and `stats` print a table.

use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use anyhow::{bail, Context, Result};
use clap::Args;

use toolhost::record::breaker::Breaker;
use toolhost::record::journal::stats::{self, BreakEven};
use toolhost::record::journal::{self, Filter, JournalBackend};
use toolhost::record::metrics::Metrics;
use toolhost::{Journal, JournalOptions, Recorder, Store};

/// Global options of the journal and the circuit breaker.
#[derive(Args, Clone, Debug)]
#[command(next_help_heading = "Global options")]
pub struct JournalArgs {
    /// Do not journal calls (`toolhost log` and `stats` then see none).
    #[arg(long, env = "TOOLHOST_NO_JOURNAL", global = true,
          value_parser = clap::builder::BoolishValueParser::new())]
    pub no_journal: bool,
    /// How long journal entries are kept, in days (0: for good); older
    /// ones are deleted by the host and by `toolhost prune`.
    #[arg(long, value_name = "DAYS", default_value_t = 30, global = true)]
    pub journal_retention_days: u64,
    /// Consecutive failures of a tool with one error code after which a
    /// repeat of the same call is answered `circuit_open` (0: never).
    #[arg(long, value_name = "K", default_value_t = toolhost::record::breaker::DEFAULT_THRESHOLD, global = true)]
    pub breaker_threshold: u32,
}

impl JournalArgs {
    fn retention(&self) -> Option<Duration> {
        (self.journal_retention_days > 0)
            .then(|| Duration::from_secs(self.journal_retention_days.saturating_mul(86_400)))
    }
}

/// The recorder of a host: the journal in `store` (a connection of its
/// own), the breaker (its counts in that store when the store shares them
/// between hosts), and `metrics` if given.
pub fn recorder(
    a: &JournalArgs,
    store: impl FnOnce() -> Result<Arc<dyn Store>>,
    metrics: Option<Arc<Metrics>>,
) -> Result<Recorder> {
    let mut breaker = Breaker::new(a.breaker_threshold);
    let journal = if a.no_journal {
        None
    } else {
        let store = store()?;
        // A store shared by hosts keeps the breaker's counts too (on the
        // journal's connection).
        if let Some(shared) = store.clone().breaker_counts() {
            breaker = breaker.shared(shared);
        }
        let backend = journal_backend(store)?;
        let on_append: Option<journal::OnAppend> = metrics.clone().map(|m| {
            let hook: journal::OnAppend = Box::new(move |e| m.observe_entry(e));
            hook
        });
        let options = JournalOptions {
            retention: a.retention(),
            on_append,
            ..JournalOptions::default()
        };
        Some(Journal::start(backend, options).context("starting the call journal")?)
    };
    Ok(Recorder {
        journal,
        breaker: Arc::new(breaker),
        metrics,
    })
}

fn journal_backend(store: Arc<dyn Store>) -> Result<Arc<dyn JournalBackend>> {
    let backend = store
        .journal()
        .context("the record store keeps no call journal")?;
    backend.init().context("opening the call journal")?;
    Ok(backend)
}

/// `--since`: a duration back from now or an RFC 3339 time, as unix µs.
fn parse_since(s: &str) -> Result<i64> {
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(s.trim()) {
        return Ok(t.timestamp_micros());
    }
    match humantime::parse_duration(s.trim()) {
        Ok(d) => {
            Ok(journal::unix_us(SystemTime::now())
                - i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
        }
        Err(e) => bail!(
            "--since `{s}`: give a duration back from now (30m, 2h, 7d) or an RFC 3339 time ({e})"
        ),
    }
}

#[derive(Args, Debug)]
pub struct LogArgs {
    /// Only calls of this tool.
    #[arg(long)]
    tool: Option<String>,
    /// Only calls of this trajectory.
    #[arg(long)]
    trajectory: Option<String>,
    /// Only calls started since WHEN: 30m, 2h, 7d, or an RFC 3339 time.
    #[arg(long, value_name = "WHEN")]
    since: Option<String>,
    /// Only calls with this status: ok, error, denied, partial, unknown;
    /// or a person's decisions on approvals: approved, declined.
    #[arg(long, value_name = "S", value_parser = ["ok", "error", "denied", "partial", "unknown", "approved", "declined"])]
    status: Option<String>,
    /// The newest N entries (0: all).
    #[arg(long, value_name = "N", default_value_t = 100)]
    limit: usize,
    /// Print JSON (an array of entries) instead of a table.
    #[arg(long)]
    json: bool,
}

/// `toolhost log`.
pub fn log(store: Arc<dyn Store>, a: LogArgs) -> Result<ExitCode> {
    let backend = journal_backend(store)?;
    let filter = Filter {
        tool: a.tool,
        trajectory: a.trajectory,
        token_chain: None,
        since_us: a.since.as_deref().map(parse_since).transpose()?,
        status: a.status,
        limit: (a.limit > 0).then_some(a.limit),
    };
    let entries = backend.query(&filter).context("reading the call journal")?;
    if a.json {
        crate::emit(serde_json::to_string_pretty(&entries)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut rows = vec![[
        "STARTED".to_string(),
        "TOOL".into(),
        "STATUS".into(),
        "ERROR".into(),
        "TRY".into(),
        "MS".into(),
        "TRAJECTORY/TURN".into(),
        "CALL".into(),
    ]];
    for e in &entries {
        rows.push([
            journal::format_us(e.started_at),
            e.tool.clone(),
            e.status.clone(),
            e.error_code.clone().unwrap_or_else(|| "-".into()),
            e.attempt.to_string(),
            format!("{:.1}", e.duration_us() as f64 / 1000.0),
            match (&e.trajectory, e.turn) {
                (Some(t), Some(n)) => format!("{t}/{n}"),
                _ => "-".into(),
            },
            match &e.args_summary["approval"] {
                // A person's decision: which approval, and who.
                serde_json::Value::Object(a) => format!(
                    "approval {} by {}",
                    a.get("id").and_then(|v| v.as_str()).unwrap_or("?"),
                    a.get("decided_by").and_then(|v| v.as_str()).unwrap_or("?")
                ),
                _ => e.call_id.clone(),
            },
        ]);
    }
    crate::emit(table(&rows))?;
    if entries.is_empty() && std::io::stdout().is_terminal() {
        eprintln!("toolhost: no journal entries match");
    }
    Ok(ExitCode::SUCCESS)
}

/// Left-aligned columns, two spaces apart, control characters shown as `?`.
fn table<const N: usize>(rows: &[[String; N]]) -> String {
    let clean = |s: &str| -> String {
        s.chars()
            .map(|c| if c.is_control() { '?' } else { c })
            .collect()
    };
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|r| r.iter().map(|c| clean(c)).collect())
        .collect();
    let mut width = [0usize; N];
    for r in &rows {
        for (i, c) in r.iter().enumerate() {
            width[i] = width[i].max(c.chars().count());
        }
    }
    let mut out = String::new();
    for r in &rows {
        let line: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{c:<w$}", w = width[i]))
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    out.pop();
    out
}

#[derive(Args, Debug)]
pub struct StatsArgs {
    /// Only calls started since WHEN: 30m, 2h, 7d, or an RFC 3339 time.
    #[arg(long, value_name = "WHEN")]
    since: Option<String>,
    /// L_gen: output tokens of one call (default 80).
    #[arg(long, value_name = "N")]
    tokens: Option<f64>,
    /// t_mask: masking milliseconds per token (default 0.5).
    #[arg(long, value_name = "MS")]
    t_mask_ms: Option<f64>,
    /// T_repair: milliseconds of one repair round (default 1800).
    #[arg(long, value_name = "MS")]
    t_repair_ms: Option<f64>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// `toolhost stats`.
pub fn stats(store: Arc<dyn Store>, a: StatsArgs) -> Result<ExitCode> {
    let backend = journal_backend(store)?;
    let d = BreakEven::default();
    let break_even = BreakEven {
        tokens: a.tokens.unwrap_or(d.tokens),
        t_mask_ms: a.t_mask_ms.unwrap_or(d.t_mask_ms),
        t_repair_ms: a.t_repair_ms.unwrap_or(d.t_repair_ms),
    };
    for (name, v) in [
        ("--tokens", break_even.tokens),
        ("--t-mask-ms", break_even.t_mask_ms),
        ("--t-repair-ms", break_even.t_repair_ms),
    ] {
        if !v.is_finite() || v < 0.0 {
            bail!("{name} {v}: give a finite number ≥ 0");
        }
    }
    if break_even.t_repair_ms == 0.0 {
        bail!("--t-repair-ms 0: a repair round takes some time; give a positive number");
    }
    let filter = Filter {
        since_us: a.since.as_deref().map(parse_since).transpose()?,
        ..Filter::default()
    };
    let entries = backend.query(&filter).context("reading the call journal")?;
    let s = stats::compute(&entries, break_even);
    if a.json {
        crate::emit(serde_json::to_string_pretty(&s)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    let pct = |r: Option<f64>| r.map_or("-".to_string(), |r| format!("{:.1}%", r * 100.0));
    let mut rows = vec![[
        "TOOL".to_string(),
        "CALLS".into(),
        "LOGICAL".into(),
        "FIRST-TRY VALID".into(),
        "MALFORMED".into(),
        "P50 MS".into(),
        "P90 MS".into(),
        "ERRORS".into(),
    ]];
    for t in &s.tools {
        let errors: Vec<String> = t
            .errors
            .iter()
            .filter(|(code, _)| code.as_str() != "ok")
            .map(|(code, n)| format!("{code}:{n}"))
            .collect();
        rows.push([
            t.name.clone(),
            t.calls.to_string(),
            t.logical_calls.to_string(),
            pct(t.first_try_valid_rate),
            pct(t.malformed_rate),
            format!("{:.1}", t.p50_ms),
            format!("{:.1}", t.p90_ms),
            if errors.is_empty() {
                "-".into()
            } else {
                errors.join(" ")
            },
        ]);
    }
    let mut text = table(&rows);
    text.push_str(&format!(
        "\n\nmalformed rate (first tries, all tools): {}\n\
         p_break = L_gen·t_mask/T_repair = {}·{} ms/{} ms = {}\n\
         verdict: {}",
        pct(s.malformed_rate),
        break_even.tokens,
        break_even.t_mask_ms,
        break_even.t_repair_ms,
        pct(s.p_break),
        s.verdict
    ));
    crate::emit(text)?;
    Ok(ExitCode::SUCCESS)
}

#[derive(Args, Debug)]
pub struct PruneArgs {
    /// Delete entries older than this (`30d`, `12h`); default: the journal
    /// retention (`--journal-retention-days`).
    #[arg(long, value_name = "DURATION")]
    older_than: Option<String>,
}

/// `toolhost prune`.
pub fn prune(store: Arc<dyn Store>, j: &JournalArgs, a: PruneArgs) -> Result<ExitCode> {
    let age = match a.older_than.as_deref() {
        Some(s) => humantime::parse_duration(s.trim())
            .with_context(|| format!("--older-than `{s}`: give a duration such as 30d or 12h"))?,
        None => match j.retention() {
            Some(r) => r,
            None => bail!(
                "the journal keeps entries for good (--journal-retention-days 0): say --older-than"
            ),
        },
    };
    let backend = journal_backend(store)?;
    let before =
        journal::unix_us(SystemTime::now()) - i64::try_from(age.as_micros()).unwrap_or(i64::MAX);
    let n = backend.prune(before).context("pruning the call journal")?;
    eprintln!(
        "toolhost: deleted {n} journal entr{} older than {}",
        if n == 1 { "y" } else { "ies" },
        humantime::format_duration(age)
    );
    Ok(ExitCode::SUCCESS)
}
