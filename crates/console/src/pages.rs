//! The console's pages, rendered on the server from the record store, and
//! the actions behind their forms (approve or deny, settle, revoke), each
//! the same store call as its command (`toolhost approvals`, `settle`,
//! `cap revoke`).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use http::{Response, StatusCode};
use serde_json::Value;

use toolhost::effects::approval::{self, Approvals, Decided};
use toolhost::policy::budget::IssuedState;
use toolhost::policy::capability::TokenId;
use toolhost::record::journal::{Entry, Filter};
use toolhost::{Settlement, State};

use crate::auth::{Form, Session};
use crate::html::{self, bar, esc, page, time_s, time_us};
use crate::{blocking, Body, Console, ConsoleError};

/// Journal entries the pages read at most.
const MAX_ENTRIES: usize = 5000;

/// Rows the live calls page starts with.
const FIRST_ROWS: usize = 200;

/// A GET page.
pub async fn show(
    console: &Arc<Console>,
    session: &Session,
    path: &str,
    query: &Form,
) -> Response<Body> {
    let result = match path {
        "/calls" => calls(console, session, query).await,
        "/approvals" => approvals(console, session).await,
        "/doubt" => doubt(console, session).await,
        "/tokens" => tokens(console, session).await,
        "/plugins" => Ok(plugins(console, session)),
        "/health" => health(console, session).await,
        p if p.starts_with("/call/") => detail(console, session, &p[6..], query).await,
        _ => return html::plain(StatusCode::NOT_FOUND, "no such console page"),
    };
    match result {
        Ok(page) => html::html(StatusCode::OK, page),
        Err(e) => error_page(session, &e),
    }
}

fn error_page(session: &Session, e: &ConsoleError) -> Response<Body> {
    html::html(
        e.status(),
        page(
            "",
            "Not done",
            session,
            &format!(
                "<p class=\"error\" role=\"alert\">{}</p>",
                esc(&e.to_string())
            ),
        ),
    )
}

/// A POST's action; 303 back to its page when done.
pub async fn act(
    console: &Arc<Console>,
    session: &Session,
    path: &str,
    form: &Form,
) -> Response<Body> {
    let result = match path {
        "/approvals" => decide(console, session, form).await,
        "/doubt" => settle(console, form).await,
        "/tokens/revoke" => revoke(console, session, form).await,
        _ => return html::plain(StatusCode::NOT_FOUND, "no such console action"),
    };
    match result {
        Ok(Done::Redirect(to)) => html::redirect(to),
        Ok(Done::Page(p)) => html::html(StatusCode::OK, p),
        Err(e) => error_page(session, &e),
    }
}

enum Done {
    Redirect(&'static str),
    Page(String),
}

/// The journal of the store.
fn journal(
    console: &Console,
) -> Result<Arc<dyn toolhost::record::journal::JournalBackend>, ConsoleError> {
    let j = console
        .store()
        .journal()
        .ok_or_else(|| ConsoleError::Store("the record store keeps no journal".into()))?;
    j.init()?;
    Ok(j)
}

/// The newest entries (at most [`MAX_ENTRIES`]), oldest first.
pub(crate) fn recent(console: &Console, since_us: Option<i64>) -> Result<Vec<Entry>, ConsoleError> {
    newest(console, since_us, MAX_ENTRIES)
}

/// The newest `limit` entries that started at or after `since_us`.
pub(crate) fn newest(
    console: &Console,
    since_us: Option<i64>,
    limit: usize,
) -> Result<Vec<Entry>, ConsoleError> {
    Ok(journal(console)?.query(&Filter {
        since_us,
        limit: Some(limit),
        ..Filter::default()
    })?)
}

/// The live calls' filters.
#[derive(Debug, Clone, Default)]
pub struct CallFilter {
    pub tool: Option<String>,
    pub status: Option<String>,
    /// A token id anywhere in the call's chain.
    pub token: Option<String>,
}

impl CallFilter {
    pub fn from_form(f: &Form) -> CallFilter {
        let get = |k| f.nonempty(k).map(|v| v.trim().to_string());
        CallFilter {
            tool: get("tool"),
            status: get("status"),
            token: get("token"),
        }
    }

    pub fn matches(&self, e: &Entry) -> bool {
        self.tool.as_ref().is_none_or(|t| &e.tool == t)
            && self.status.as_ref().is_none_or(|s| &e.status == s)
            && self
                .token
                .as_ref()
                .is_none_or(|t| e.token_chain.iter().any(|id| id.starts_with(t.as_str())))
    }

    fn query(&self) -> String {
        let mut q = Vec::new();
        for (k, v) in [
            ("tool", &self.tool),
            ("status", &self.status),
            ("token", &self.token),
        ] {
            if let Some(v) = v {
                q.push(format!("{k}={}", encode(v)));
            }
        }
        q.join("&")
    }
}

/// Percent-encoding for a query value.
fn encode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// One row of the live calls, as the event stream sends it.
pub fn row_json(e: &Entry) -> Value {
    serde_json::json!({
        "call_id": e.call_id,
        "started_us": e.started_at,
        "time": time_us(e.started_at),
        "trajectory": e.trajectory.clone().unwrap_or_default(),
        "tool": e.tool,
        "status": e.status,
        "duration_ms": format!("{:.1}", e.duration_us() as f64 / 1000.0),
        "output_bytes": e.output_bytes,
        "error_code": e.error_code.clone().unwrap_or_default(),
        "token": e.token_id.clone().unwrap_or_default(),
        "host": e.host,
    })
}

/// One row of the live calls, rendered here (the script renders the same
/// from [`row_json`]).
fn row_html(e: &Entry) -> String {
    let r = row_json(e);
    let s = |k: &str| esc(r[k].as_str().unwrap_or(""));
    format!(
        "<tr id=\"c-{id}\" data-call=\"{id}\" data-at=\"{at}\"><td><a href=\"/console/call/{id}?at={at}\">{time}</a></td>\
         <td>{traj}</td><td>{tool}</td><td><span class=\"status s-{status}\">{status}</span></td>\
         <td class=\"num\">{dur}</td><td class=\"num\">{bytes}</td><td>{code}</td><td class=\"id\">{token}</td></tr>",
        id = s("call_id"),
        at = e.started_at,
        time = s("time"),
        traj = s("trajectory"),
        tool = s("tool"),
        status = s("status"),
        dur = s("duration_ms"),
        bytes = e.output_bytes,
        code = s("error_code"),
        token = esc(&short(r["token"].as_str().unwrap_or(""))),
    )
}

fn short(id: &str) -> String {
    id.get(..12).unwrap_or(id).to_string()
}

async fn calls(
    console: &Arc<Console>,
    session: &Session,
    query: &Form,
) -> Result<String, ConsoleError> {
    let filter = CallFilter::from_form(query);
    let c = console.clone();
    let entries = blocking(move || recent(&c, None)).await?;
    let mut rows = String::new();
    for e in entries
        .iter()
        .rev()
        .filter(|e| filter.matches(e))
        .take(FIRST_ROWS)
    {
        rows.push_str(&row_html(e));
    }
    let val = |v: &Option<String>| esc(v.as_deref().unwrap_or(""));
    let body = format!(
        "<form method=\"get\" action=\"/console/calls\" class=\"filters\">\
         <label>Tool <input name=\"tool\" value=\"{}\"></label>\
         <label>Status <input name=\"status\" value=\"{}\" list=\"statuses\"></label>\
         <datalist id=\"statuses\"><option value=\"ok\"><option value=\"error\"><option value=\"unknown\"></datalist>\
         <label>Token <input name=\"token\" value=\"{}\"></label><button>Filter</button></form>\
         <p class=\"live\" id=\"live-state\" aria-live=\"polite\">Newest first; new calls appear as they end.</p>\
         <div class=\"scroll\"><table id=\"calls\" data-events=\"/console/events?{}\">\
         <thead><tr><th>Time (UTC)</th><th>Trajectory</th><th>Tool</th><th>Status</th>\
         <th>ms</th><th>Output bytes</th><th>Error</th><th>Token</th></tr></thead>\
         <tbody>{rows}</tbody></table></div>",
        val(&filter.tool),
        val(&filter.status),
        val(&filter.token),
        esc(&filter.query()),
    );
    Ok(page("calls", "Live calls", session, &body))
}

async fn detail(
    console: &Arc<Console>,
    session: &Session,
    call_id: &str,
    query: &Form,
) -> Result<String, ConsoleError> {
    let at = query.get("at").and_then(|a| a.parse::<i64>().ok());
    let c = console.clone();
    let entries = blocking(move || recent(&c, at)).await?;
    let e = entries
        .iter()
        .find(|e| e.call_id == call_id)
        .ok_or_else(|| ConsoleError::NotFound(format!("no call `{call_id}` in the journal")))?;
    let json = serde_json::to_string_pretty(e).unwrap_or_default();
    let inner: String = entries
        .iter()
        .filter(|o| {
            o.call_id != e.call_id
                && e.trajectory.is_some()
                && o.trajectory == e.trajectory
                && o.started_at >= e.started_at
                && o.ended_at <= e.ended_at
        })
        .map(row_html)
        .collect();
    let inner = if inner.is_empty() {
        String::new()
    } else {
        format!(
            "<h2>Calls within it</h2><div class=\"scroll\"><table><tbody>{inner}</tbody></table></div>"
        )
    };
    Ok(page(
        "calls",
        &format!("Call {}", e.tool),
        session,
        &format!(
            "<p>As the journal keeps it: argument summaries (paths and sizes, no content), digests, \
             no output.</p><pre id=\"entry\">{}</pre>{inner}<p><a href=\"/console/calls\">Back to the live calls</a></p>",
            esc(&json)
        ),
    ))
}

fn approvals_of(console: &Console) -> Result<Approvals, ConsoleError> {
    let store = console.store();
    let backend = store
        .clone()
        .approvals()
        .ok_or_else(|| ConsoleError::Store("the record store keeps no approvals".into()))?;
    Ok(Approvals::new(backend)
        .with_ttl(console.options.approval_ttl)
        .with_journal(store.journal()))
}

/// The argument summary of an approval's call, as the journal keeps it.
fn summary(console: &Console, tool: &str, args: &str) -> Value {
    let mut out = Value::Null;
    console.serving.catalog(&mut |c| {
        out = toolhost::record::journal::summarize_args(args, c.get(tool).map(|t| &**t), true);
    });
    out
}

fn pretty(v: &Value) -> String {
    esc(&serde_json::to_string_pretty(v).unwrap_or_default())
}

/// A dry run's plan for a person: its summary, its changes as a table,
/// its counts and warnings, then the whole plan folded.
fn plan_html(plan: &Value) -> String {
    let mut out = String::new();
    if let Some(s) = plan["summary"].as_str() {
        out.push_str(&format!("<p class=\"summary\">{}</p>", esc(s)));
    }
    if let Some(changes) = plan["changes"].as_array().filter(|c| !c.is_empty()) {
        let mut cols: Vec<&str> = Vec::new();
        for c in changes.iter().filter_map(Value::as_object) {
            for k in c.keys() {
                if !k.starts_with("sha256") && !cols.contains(&k.as_str()) {
                    cols.push(k);
                }
            }
        }
        out.push_str("<div class=\"scroll\"><table class=\"changes\"><thead><tr>");
        for c in &cols {
            out.push_str(&format!("<th>{}</th>", esc(&c.replace('_', " "))));
        }
        out.push_str("</tr></thead><tbody>");
        for c in changes {
            out.push_str("<tr>");
            for k in &cols {
                let v = match &c[*k] {
                    Value::String(s) => s.clone(),
                    Value::Null => String::new(),
                    other => other.to_string(),
                };
                out.push_str(&format!("<td>{}</td>", esc(&v)));
            }
            out.push_str("</tr>");
        }
        out.push_str("</tbody></table></div>");
    }
    if let Some(counts) = plan["counts"].as_object() {
        let parts: Vec<String> = counts
            .iter()
            .map(|(k, v)| format!("{} {}", esc(k), esc(&v.to_string())))
            .collect();
        out.push_str(&format!("<p class=\"counts\">{}</p>", parts.join(" · ")));
    }
    if let Some(w) = plan["warnings"].as_array().filter(|w| !w.is_empty()) {
        out.push_str("<ul class=\"warnings\">");
        for w in w {
            let text = w
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| w.to_string());
            out.push_str(&format!("<li>{}</li>", esc(&text)));
        }
        out.push_str("</ul>");
    }
    out.push_str(&format!(
        "<details><summary>The whole plan</summary><pre>{}</pre></details>",
        pretty(plan)
    ));
    out
}

async fn approvals(console: &Arc<Console>, session: &Session) -> Result<String, ConsoleError> {
    let c = console.clone();
    let list = blocking(move || Ok(approvals_of(&c)?.backend()?.list()?)).await?;
    let now = approval::now_ms();
    let mut pending = String::new();
    let mut decided = String::new();
    for a in list.iter().rev() {
        let shown = a.shown_state(now);
        if shown == "pending" {
            let targets: String = a
                .targets
                .as_array()
                .map(|t| {
                    t.iter()
                        .map(|x| {
                            format!(
                                "<li><code>{}</code></li>",
                                esc(x["path"].as_str().unwrap_or("?"))
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            pending.push_str(&format!(
                "<section class=\"card\" id=\"a-{id}\"><h2>{tool} <span class=\"id\">{id}</span></h2>\
                 <p>Asked by {by} · token {token} · until {until}</p>\
                 <h3>Targets</h3><ul>{targets}</ul>\
                 <h3>Plan</h3>{plan}\
                 <h3>Arguments (summary)</h3><pre>{args}</pre>\
                 <form method=\"post\" action=\"/console/approvals\">{csrf}\
                 <input type=\"hidden\" name=\"id\" value=\"{id}\">\
                 <label for=\"note-{id}\">Note</label><input id=\"note-{id}\" name=\"note\">\
                 <button name=\"decision\" value=\"approve\" class=\"approve\">Approve</button>\
                 <button name=\"decision\" value=\"deny\" class=\"deny\">Deny</button></form></section>",
                id = esc(&a.id),
                tool = esc(&a.tool),
                by = esc(a.requested_by.as_deref().unwrap_or("?")),
                token = esc(&a.token_chain.last().map(|t| short(t)).unwrap_or_default()),
                until = esc(&time_s(a.expires_ms / 1000)),
                plan = plan_html(&a.plan),
                args = pretty(&summary(console, &a.tool, &a.args)),
                csrf = html::csrf_field(session),
            ));
        } else if decided.len() < 64 * 1024 {
            decided.push_str(&format!(
                "<tr><td class=\"id\">{}</td><td>{}</td><td><span class=\"status s-{}\">{}</span></td><td>{}</td><td>{}</td></tr>",
                esc(&short(&a.id)),
                esc(&a.tool),
                esc(shown),
                esc(shown),
                esc(a.decided_by.as_deref().unwrap_or("")),
                esc(a.note.as_deref().unwrap_or("")),
            ));
        }
    }
    if pending.is_empty() {
        pending = "<p id=\"none-pending\">No approvals are waiting.</p>".into();
    }
    Ok(page(
        "approvals",
        "Approvals",
        session,
        &format!(
            "{pending}<h2>Decided</h2><div class=\"scroll\"><table><thead><tr><th>Id</th><th>Tool</th>\
             <th>State</th><th>By</th><th>Note</th></tr></thead><tbody>{decided}</tbody></table></div>"
        ),
    ))
}

async fn decide(
    console: &Arc<Console>,
    session: &Session,
    form: &Form,
) -> Result<Done, ConsoleError> {
    let id = form.get("id").unwrap_or("").trim().to_string();
    if !approval::is_id(&id) {
        return Err(ConsoleError::BadRequest("not an approval id".into()));
    }
    let approve = match form.get("decision") {
        Some("approve") => true,
        Some("deny") => false,
        _ => return Err(ConsoleError::BadRequest("approve or deny?".into())),
    };
    let note = form.nonempty("note").map(str::to_string);
    let (c, by) = (console.clone(), session.who.clone());
    let decided =
        blocking(move || Ok(approvals_of(&c)?.decide(&id, approve, &by, note.as_deref())?)).await?;
    match decided {
        Decided::Done(_) => Ok(Done::Redirect("/console/approvals")),
        Decided::NotFound => Err(ConsoleError::NotFound("no such approval".into())),
        Decided::NotPending(a) => Err(ConsoleError::Conflict(format!(
            "approval {} is {}, not pending: nothing changed",
            a.id,
            a.shown_state(approval::now_ms())
        ))),
    }
}

async fn doubt(console: &Arc<Console>, session: &Session) -> Result<String, ConsoleError> {
    let c = console.clone();
    let list = blocking(move || Ok(c.store().list(Some(State::InDoubt))?)).await?;
    let mut rows = String::new();
    for (i, r) in list.iter().enumerate() {
        let since = r
            .updated_at
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        rows.push_str(&format!(
            "<tr><td class=\"id\">{key}</td><td>{tool}</td><td>{reason}</td><td>{since}</td>\
             <td><form method=\"post\" action=\"/console/doubt\" id=\"settle-{i}\">{csrf}\
             <input type=\"hidden\" name=\"key\" value=\"{key}\">\
             <button name=\"outcome\" value=\"done\">Done</button> \
             <button name=\"outcome\" value=\"not_done\">Not done</button></form></td></tr>",
            key = esc(&r.key),
            tool = esc(&r.tool),
            reason = esc(r.reason.as_deref().unwrap_or("")),
            since = esc(&time_s(since)),
            csrf = html::csrf_field(session),
        ));
    }
    let body = if list.is_empty() {
        "<p id=\"none-in-doubt\">No records are in doubt.</p>".to_string()
    } else {
        format!(
            "<p>Each call's effect is unknown (a crash, a timeout, a lost answer). Done: it happened, \
             repeats get a recorded result. Not done: it did not, the next repeat runs the call.</p>\
             <div class=\"scroll\"><table id=\"doubt\"><thead><tr><th>Key</th><th>Tool</th><th>Why</th>\
             <th>Since</th><th>Settle</th></tr></thead><tbody>{rows}</tbody></table></div>"
        )
    };
    Ok(page("doubt", "In doubt", session, &body))
}

async fn settle(console: &Arc<Console>, form: &Form) -> Result<Done, ConsoleError> {
    let key = form
        .nonempty("key")
        .ok_or_else(|| ConsoleError::BadRequest("no record key".into()))?
        .to_string();
    let done = match form.get("outcome") {
        Some("done") => true,
        Some("not_done") => false,
        _ => return Err(ConsoleError::BadRequest("done or not done?".into())),
    };
    let c = console.clone();
    blocking(move || {
        let store = c.store();
        let rec = store
            .get(&key)?
            .ok_or_else(|| ConsoleError::NotFound(format!("no record with key {key}")))?;
        let settlement = Settlement::by_operator(&rec, done);
        store
            .settle(&key, settlement)
            .map_err(|e| ConsoleError::Conflict(e.to_string()))
    })
    .await?;
    Ok(Done::Redirect("/console/doubt"))
}

fn ledger(
    console: &Console,
) -> Result<Arc<dyn toolhost::policy::budget::BudgetLedger>, ConsoleError> {
    console
        .store()
        .capability_ledger()
        .ok_or_else(|| ConsoleError::Store("the record store keeps no capability ledger".into()))
}

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A right in words.
fn right_words(r: &str) -> &str {
    match r {
        "read" => "read files",
        "write" => "write files",
        "net" => "reach the network",
        "delegate" => "make tokens for sub-agents",
        "secrets" => "see secrets",
        "exec" => "run programs",
        "metrics" => "read the metrics",
        "self_approve" => "approve its own plans",
        "script" => "run scripts",
        "console" => "open the console",
        other => other,
    }
}

/// A token's caveats in words: what it may do, and its limit of calls.
fn caveats_in_words(caveats: &str) -> (Vec<String>, Option<u64>) {
    let mut words = Vec::new();
    let mut max_calls = None;
    for c in caveats.split(';').map(str::trim).filter(|c| !c.is_empty()) {
        let (k, v) = c.split_once('=').unwrap_or((c, ""));
        let list = || v.split(',').collect::<Vec<_>>().join(", ");
        match k {
            "tool" => words.push(format!("call {}", list())),
            "right" => words.push(v.split(',').map(right_words).collect::<Vec<_>>().join(", ")),
            "read" => words.push(format!("read under {}", list())),
            "write" => words.push(format!("write under {}", list())),
            "ask_write" => words.push(format!("write under {} once approved", list())),
            "net" => words.push(format!("reach {}", list())),
            "exec" => words.push(format!("run {}", list())),
            "fuel" => words.push(format!("{v} fuel a call")),
            "max_calls" => {
                let n = v.parse().ok();
                // The tightest along the chain.
                max_calls = match (max_calls, n) {
                    (Some(a), Some(b)) => Some(std::cmp::min(a, b)),
                    (a, b) => a.or(b),
                };
            }
            "budget_fuel" => words.push(format!("{v} fuel in all")),
            "expires" | "id" | "store" | "aud" | "bind" => {}
            other => words.push(other.to_string()),
        }
    }
    (words, max_calls)
}

async fn tokens(console: &Arc<Console>, session: &Session) -> Result<String, ConsoleError> {
    let c = console.clone();
    let list = blocking(move || Ok(ledger(&c)?.issued(now_secs())?)).await?;
    let known: std::collections::HashSet<TokenId> = list.iter().map(|i| i.issued.id).collect();
    let mut children: HashMap<Option<TokenId>, Vec<&IssuedState>> = HashMap::new();
    for i in &list {
        let parent = i.issued.parent.filter(|p| known.contains(p));
        children.entry(parent).or_default().push(i);
    }
    let mut out = String::new();
    tree(&children, None, session, &mut out, 0);
    if list.is_empty() {
        out = "<p>No tokens are recorded in this store (tokens minted with <code>--store</code>, \
               attenuated or delegated are).</p>"
            .into();
    }
    Ok(page("tokens", "Tokens", session, &out))
}

fn tree(
    children: &HashMap<Option<TokenId>, Vec<&IssuedState>>,
    parent: Option<TokenId>,
    session: &Session,
    out: &mut String,
    depth: usize,
) {
    let Some(kids) = children.get(&parent) else {
        return;
    };
    out.push_str(if depth == 0 {
        "<ul class=\"tree\" id=\"tokens\">"
    } else {
        "<ul>"
    });
    for t in kids {
        let id = t.issued.id.to_string();
        let (words, max_calls) = caveats_in_words(&t.issued.caveats);
        let budget = match max_calls {
            Some(max) => bar(
                t.calls as f64 / max.max(1) as f64,
                &format!("{} of {max} calls", t.calls),
                if t.calls >= max { "full" } else { "" },
            ),
            None => format!("{} calls", t.calls),
        };
        let expires = t
            .issued
            .expires_at
            .map(|e| format!("expires {}", time_s(e)))
            .unwrap_or_else(|| "no expiry".into());
        let revoke = if t.state == "active" {
            format!(
                "<form method=\"post\" action=\"/console/tokens/revoke\" class=\"inline\">{}\
                 <input type=\"hidden\" name=\"id\" value=\"{}\"><button class=\"deny\">Revoke…</button></form>",
                html::csrf_field(session),
                esc(&id)
            )
        } else {
            String::new()
        };
        out.push_str(&format!(
            "<li id=\"t-{id}\"><div class=\"token\"><span class=\"id\">{id}</span> \
             <span class=\"status s-{state}\">{state}</span> <span class=\"via\">{via}</span> \
             <span class=\"rights\">{words}</span> {budget} <span class=\"expiry\">{expires}</span> {revoke}</div>",
            id = esc(&id),
            state = esc(t.state),
            via = esc(t.issued.via.as_str()),
            words = esc(&words.join("; ")),
            expires = esc(&expires),
        ));
        tree(children, Some(t.issued.id), session, out, depth + 1);
        out.push_str("</li>");
    }
    out.push_str("</ul>");
}

/// The token and every recorded descendant.
fn subtree(list: &[IssuedState], root: TokenId) -> Vec<&IssuedState> {
    let mut out: Vec<&IssuedState> = list.iter().filter(|i| i.issued.id == root).collect();
    let mut i = 0;
    while i < out.len() {
        let id = out[i].issued.id;
        out.extend(list.iter().filter(|c| c.issued.parent == Some(id)));
        i += 1;
    }
    out
}

async fn revoke(
    console: &Arc<Console>,
    session: &Session,
    form: &Form,
) -> Result<Done, ConsoleError> {
    let id: TokenId = form
        .get("id")
        .unwrap_or("")
        .trim()
        .parse()
        .map_err(|_| ConsoleError::BadRequest("not a token id".into()))?;
    let confirmed = form.get("confirm") == Some("yes");
    let c = console.clone();
    let list = blocking(move || Ok(ledger(&c)?.issued(now_secs())?)).await?;
    let tree = subtree(&list, id);
    let Some(root) = tree.first() else {
        return Err(ConsoleError::NotFound(format!(
            "no token {id} recorded in this store"
        )));
    };
    if !confirmed {
        let items: String = tree
            .iter()
            .map(|t| format!("<li class=\"id\">{}</li>", esc(&t.issued.id.to_string())))
            .collect();
        return Ok(Done::Page(page(
            "tokens",
            "Revoke a token",
            session,
            &format!(
                "<p>Revoke this token and every token made from it? Their next calls are refused \
                 on every host sharing the store within a second.</p><ul>{items}</ul>\
                 <form method=\"post\" action=\"/console/tokens/revoke\">{}\
                 <input type=\"hidden\" name=\"id\" value=\"{}\">\
                 <button name=\"confirm\" value=\"yes\" class=\"deny\" id=\"confirm\">Revoke {} token(s)</button> \
                 <a href=\"/console/tokens\">Cancel</a></form>",
                html::csrf_field(session),
                esc(&id.to_string()),
                tree.len()
            ),
        )));
    }
    let expires = root.issued.expires_at;
    let c = console.clone();
    blocking(move || Ok(ledger(&c)?.revoke(id, expires)?)).await?;
    Ok(Done::Redirect("/console/tokens"))
}

fn plugins(console: &Arc<Console>, session: &Session) -> String {
    let mut body = String::new();
    console.serving.catalog(&mut |c| {
        let reports: HashMap<&str, &toolhost::plugin::lint::ToolReport> =
            c.reports().iter().map(|(n, r)| (n.as_str(), r)).collect();
        body.push_str(
            "<div class=\"scroll\"><table id=\"plugins\"><thead><tr><th>Plugin</th><th>Lock</th>\
             <th>Signer</th><th>Digest</th><th>Tools</th><th>Findings</th></tr></thead><tbody>",
        );
        for p in c.plugins() {
            let findings: String = p
                .tools
                .iter()
                .filter_map(|t| reports.get(t.as_str()).map(|r| (t, r)))
                .flat_map(|(t, r)| r.findings.iter().map(move |f| (t, f)))
                .map(|(t, f)| format!("<li>{}: {}</li>", esc(t), esc(&f.to_string())))
                .collect();
            let refused = p
                .refused
                .as_deref()
                .map(|r| format!(" <span class=\"status s-error\">refused: {}</span>", esc(r)))
                .unwrap_or_default();
            body.push_str(&format!(
                "<tr><td>{name}{refused}<br><small>{source}</small></td>\
                 <td><span class=\"status lock-{lock}\">{lock}</span></td><td>{signer}</td>\
                 <td class=\"id\">{digest}</td><td>{tools}</td><td><ul>{findings}</ul></td></tr>",
                name = esc(&p.name),
                source = esc(&p.source),
                lock = esc(p.lock),
                signer = esc(p.signer.as_deref().unwrap_or("unsigned")),
                digest = esc(&short(p.digest.as_deref().unwrap_or("-"))),
                tools = esc(&p.tools.join(", ")),
            ));
        }
        body.push_str("</tbody></table></div>");
        let warnings: String = c
            .warnings()
            .iter()
            .map(|w| format!("<li>{}</li>", esc(&w.to_string())))
            .collect();
        if !warnings.is_empty() {
            body.push_str(&format!("<h2>Warnings</h2><ul>{warnings}</ul>"));
        }
    });
    page(
        "plugins",
        "Plugins",
        session,
        &format!("<p>The plugins this host has loaded.</p>{body}"),
    )
}

/// A tool's current run of failures with one code in one conversation, as
/// the circuit breaker counts it, from the journal.
struct Run {
    conversation: String,
    tool: String,
    code: String,
    count: u32,
}

/// The breakers' runs still going, from entries oldest first.
fn breaker_runs(entries: &[Entry]) -> Vec<Run> {
    let mut runs: BTreeMap<(String, String), (String, u32)> = BTreeMap::new();
    for e in entries {
        let conversation = e
            .trajectory
            .clone()
            .unwrap_or_else(|| e.token_chain.join(" "));
        let key = (conversation, e.tool.clone());
        match e.error_code.as_deref() {
            None => {
                runs.remove(&key);
            }
            Some("circuit_open") => {}
            Some(code) => {
                let run = runs.entry(key).or_insert_with(|| (code.to_string(), 0));
                if run.0 != code {
                    *run = (code.to_string(), 0);
                }
                run.1 += 1;
            }
        }
    }
    runs.into_iter()
        .map(|((conversation, tool), (code, count))| Run {
            conversation,
            tool,
            code,
            count,
        })
        .collect()
}

async fn health(console: &Arc<Console>, session: &Session) -> Result<String, ConsoleError> {
    let c = console.clone();
    let day =
        toolhost::record::journal::unix_us(std::time::SystemTime::now()) - 24 * 3600 * 1_000_000;
    let entries = blocking(move || recent(&c, Some(day))).await?;
    let stats = toolhost::record::journal::stats::compute(&entries, Default::default());
    let rate = |r: Option<f64>| {
        r.map(|r| format!("{:.0}%", r * 100.0))
            .unwrap_or_else(|| "-".into())
    };
    let mut body = format!(
        "<p>The last 24 hours of the journal: {} calls on every host sharing the store.</p>\
         <p>First-try valid rate {}</p>",
        stats.calls,
        bar(
            stats.first_try_valid_rate.unwrap_or(0.0),
            &rate(stats.first_try_valid_rate),
            "ok"
        )
    );
    let mut errors: BTreeMap<&str, u64> = BTreeMap::new();
    for t in &stats.tools {
        for (code, n) in &t.errors {
            *errors.entry(code.as_str()).or_default() += n;
        }
    }
    let most = errors.values().copied().max().unwrap_or(1).max(1);
    body.push_str("<h2>Results by code</h2><table id=\"errors\"><tbody>");
    for (code, n) in &errors {
        body.push_str(&format!(
            "<tr><td>{}</td><td>{}</td></tr>",
            esc(code),
            bar(
                *n as f64 / most as f64,
                &n.to_string(),
                if *code == "ok" { "ok" } else { "err" }
            )
        ));
    }
    body.push_str("</tbody></table>");
    let slowest = stats
        .tools
        .iter()
        .map(|t| t.p90_ms)
        .fold(0.0f64, f64::max)
        .max(0.001);
    body.push_str(
        "<h2>Per tool</h2><div class=\"scroll\"><table id=\"tools\"><thead><tr><th>Tool</th><th>Calls</th>\
         <th>First-try valid</th><th>p50</th><th>p90</th></tr></thead><tbody>",
    );
    for t in &stats.tools {
        body.push_str(&format!(
            "<tr><td>{}</td><td class=\"num\">{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&t.name),
            t.calls,
            rate(t.first_try_valid_rate),
            bar(t.p50_ms / slowest, &format!("{:.1} ms", t.p50_ms), ""),
            bar(t.p90_ms / slowest, &format!("{:.1} ms", t.p90_ms), ""),
        ));
    }
    body.push_str("</tbody></table></div><h2>Circuit breakers</h2>");
    let runs = breaker_runs(&entries);
    if runs.is_empty() {
        body.push_str("<p>No tool is failing repeatedly.</p>");
    } else {
        body.push_str(
            "<table id=\"breakers\"><thead><tr><th>Conversation</th><th>Tool</th><th>Code</th>\
             <th>Failures in a row</th><th>State</th></tr></thead><tbody>",
        );
        for r in runs {
            let open = r.count >= toolhost::record::breaker::DEFAULT_THRESHOLD;
            body.push_str(&format!(
                "<tr><td class=\"id\">{}</td><td>{}</td><td>{}</td><td class=\"num\">{}</td>\
                 <td><span class=\"status s-{}\">{}</span></td></tr>",
                esc(&short(&r.conversation)),
                esc(&r.tool),
                esc(&r.code),
                r.count,
                if open { "error" } else { "ok" },
                if open { "open" } else { "closed" },
            ));
        }
        body.push_str("</tbody></table>");
    }
    Ok(page("health", "Health", session, &body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caveats_read_as_words() {
        let (w, max) = caveats_in_words(
            "tool=file_*; right=read,write; read=src; max_calls=10; id=ab; max_calls=4",
        );
        assert_eq!(
            w,
            vec!["call file_*", "read files, write files", "read under src"]
        );
        assert_eq!(max, Some(4));
    }

    fn entry(traj: &str, tool: &str, code: Option<&str>) -> Entry {
        Entry {
            call_id: "c".into(),
            trajectory: Some(traj.into()),
            turn: None,
            tool: tool.into(),
            token_id: None,
            token_chain: vec![],
            started_at: 0,
            ended_at: 0,
            status: if code.is_some() { "error" } else { "ok" }.into(),
            error_code: code.map(str::to_string),
            args_sha256: String::new(),
            args_summary: Value::Null,
            result_sha256: None,
            output_bytes: 0,
            attempt: 1,
            first_try: true,
            idempotency_key: None,
            host: "h".into(),
            logical_key: None,
        }
    }

    #[test]
    fn breaker_runs_follow_the_journal() {
        let e = [
            entry("a", "t", Some("not_found")),
            entry("a", "t", Some("not_found")),
            entry("a", "t", Some("circuit_open")),
            entry("a", "t", Some("not_found")),
            entry("b", "t", Some("timeout")),
            entry("b", "t", None),
            entry("c", "u", Some("denied")),
            entry("c", "u", Some("not_found")),
        ];
        let runs = breaker_runs(&e);
        let got: Vec<(&str, &str, &str, u32)> = runs
            .iter()
            .map(|r| {
                (
                    r.conversation.as_str(),
                    r.tool.as_str(),
                    r.code.as_str(),
                    r.count,
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![("a", "t", "not_found", 3), ("c", "u", "not_found", 1)]
        );
    }

    #[test]
    fn plans_show_changes_counts_and_warnings_escaped() {
        let plan = serde_json::json!({
            "summary": "delete <b>.txt",
            "changes": [{"path": "a.txt", "action": "delete", "sha256_before": "x"}],
            "counts": {"files": 1},
            "warnings": ["irreversible"],
        });
        let h = plan_html(&plan);
        assert!(h.contains("delete &lt;b&gt;.txt"), "{h}");
        assert!(h.contains("<td>a.txt</td><td>delete</td>"), "{h}");
        assert!(!h.contains("<th>sha256"), "{h}");
        assert!(h.contains("files 1"), "{h}");
        assert!(h.contains("<li>irreversible</li>"), "{h}");
    }

    #[test]
    fn call_filters_match_tool_status_and_any_token_of_the_chain() {
        let mut e = entry("a", "file_view", None);
        e.token_chain = vec!["aaaa1111".into(), "bbbb2222".into()];
        let f = |tool: Option<&str>, status: Option<&str>, token: Option<&str>| CallFilter {
            tool: tool.map(str::to_string),
            status: status.map(str::to_string),
            token: token.map(str::to_string),
        };
        assert!(f(None, None, None).matches(&e));
        assert!(f(Some("file_view"), Some("ok"), Some("aaaa")).matches(&e));
        assert!(f(None, None, Some("bbbb2222")).matches(&e));
        assert!(!f(Some("file_edit"), None, None).matches(&e));
        assert!(!f(None, Some("error"), None).matches(&e));
        assert!(!f(None, None, Some("cccc")).matches(&e));
    }

    #[test]
    fn query_values_are_encoded() {
        assert_eq!(encode("a b&c=d"), "a%20b%26c%3Dd");
    }
}
