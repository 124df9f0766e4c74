//! The operator's console: web pages served by `toolhost serve --http
//! --console` at `/console`, to watch calls live, decide approvals, settle
//! in-doubt records, revoke tokens and see budgets, plugins and health.
//!
//! The HTTP server (the MCP crate) hands every request under `/console`,
//! body read and bounded, to [`Console::handle`]; this crate does not
//! listen itself. Everything shown is read from the record store and every
//! decision is written to it, so the console of any host sharing a store
//! shows and decides for the whole fleet.
//!
//! - [`auth`]: the login (a token with the `console` right, or the text of
//!   `--console-token-file`), server-side sessions behind an `HttpOnly;
//!   SameSite=Strict` cookie, the CSRF token of every form and the
//!   same-origin check of every POST.
//! - [`pages`]: the server-rendered pages (live calls, approvals, in doubt,
//!   tokens, plugins, health) and the actions behind their forms.
//! - [`live`]: the journal as server-sent events, polled from the store.
//! - [`html`]: escaping, the page frame, the responses and their security
//!   headers.
//!
//! What is never shown: a token's text (only its id), arguments beyond the
//! journal's summaries (paths, sizes; no content), anything the journal or
//! the store holds unredacted.

pub mod auth;
pub mod html;
pub mod live;
pub mod pages;

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::combinators::BoxBody;

use toolhost::{Catalog, Store};

/// The body of a console response: a page, or an event stream.
pub type Body = BoxBody<Bytes, Infallible>;

/// The path the console is served under.
pub const PREFIX: &str = "/console";

/// Largest request body the console reads (its forms are small).
pub const MAX_BODY_BYTES: usize = 16 * 1024;

/// What went wrong serving a console request.
#[derive(Debug, thiserror::Error)]
pub enum ConsoleError {
    /// The record store failed or does not keep what the page needs.
    #[error("the record store: {0}")]
    Store(String),
    /// The named approval, record or token is not there.
    #[error("{0}")]
    NotFound(String),
    /// The request is malformed.
    #[error("{0}")]
    BadRequest(String),
    /// The thing is in a state that does not allow the action.
    #[error("{0}")]
    Conflict(String),
}

impl ConsoleError {
    /// The HTTP status this error is answered with.
    pub fn status(&self) -> StatusCode {
        match self {
            ConsoleError::Store(_) => StatusCode::SERVICE_UNAVAILABLE,
            ConsoleError::NotFound(_) => StatusCode::NOT_FOUND,
            ConsoleError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ConsoleError::Conflict(_) => StatusCode::CONFLICT,
        }
    }
}

impl From<toolhost::store_error::StoreError> for ConsoleError {
    fn from(e: toolhost::store_error::StoreError) -> Self {
        ConsoleError::Store(e.to_string())
    }
}

impl From<toolhost::policy::budget::BudgetError> for ConsoleError {
    fn from(e: toolhost::policy::budget::BudgetError) -> Self {
        ConsoleError::Store(e.to_string())
    }
}

/// Someone let in by the login form.
pub struct Login {
    /// Who, as the console names them in decisions: `console:` and the
    /// token id, or `console:token-file`.
    pub who: String,
    /// Whether the login still holds (its token not revoked or expired);
    /// asked on every request, off the async threads.
    pub live: Box<dyn Fn() -> bool + Send + Sync>,
}

/// What the serving host lends the console besides the store.
pub trait Serving: Send + Sync + 'static {
    /// Checks a capability token presented at the login: a [`Login`] when
    /// it verifies, is live and holds the `console` right; else why not.
    fn login(&self, token: &str) -> Result<Login, String>;
    /// Runs `f` on the host's current catalog (plugins page).
    fn catalog(&self, f: &mut dyn FnMut(&Catalog));
}

/// How the console is set up.
#[derive(Clone)]
pub struct Options {
    /// The record store the host runs on (journal, approvals, records,
    /// capability ledger).
    pub store: Arc<dyn Store>,
    /// How long an approved call may wait for the agent's retry.
    pub approval_ttl: Duration,
    /// A login text besides console tokens (`--console-token-file`).
    pub token_file: Option<String>,
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("approval_ttl", &self.approval_ttl)
            .field("token_file", &self.token_file.as_ref().map(|_| "…"))
            .finish_non_exhaustive()
    }
}

/// The console of one host.
pub struct Console {
    options: Options,
    serving: Arc<dyn Serving>,
    sessions: auth::Sessions,
}

impl Console {
    pub fn new(options: Options, serving: Arc<dyn Serving>) -> Arc<Console> {
        Arc::new(Console {
            options,
            serving,
            sessions: auth::Sessions::default(),
        })
    }

    pub(crate) fn store(&self) -> Arc<dyn Store> {
        self.options.store.clone()
    }

    /// Answers one request under [`PREFIX`] (body already read, at most
    /// [`MAX_BODY_BYTES`]).
    pub async fn handle(self: &Arc<Self>, req: Request<Bytes>) -> Response<Body> {
        let path = req
            .uri()
            .path()
            .strip_prefix(PREFIX)
            .unwrap_or("")
            .to_string();
        let post = req.method() == Method::POST;
        if !post && req.method() != Method::GET && req.method() != Method::HEAD {
            return html::plain(StatusCode::METHOD_NOT_ALLOWED, "GET or POST only");
        }
        match (path.as_str(), post) {
            ("/app.css", false) => return html::asset("text/css", html::CSS),
            ("/app.js", false) => return html::asset("text/javascript", html::JS),
            ("/login", false) => return html::login_page(StatusCode::OK, None),
            ("/login", true) => return self.login(&req).await,
            _ => {}
        }
        let Some(session) = self.sessions.get(req.headers()) else {
            return if post {
                html::plain(StatusCode::FORBIDDEN, "not logged in to the console")
            } else {
                html::redirect("/console/login")
            };
        };
        let live = {
            let s = session.clone();
            tokio::task::spawn_blocking(move || (s.live)())
                .await
                .unwrap_or(false)
        };
        if !live {
            self.sessions.remove(&session);
            return if post {
                html::plain(
                    StatusCode::FORBIDDEN,
                    "the console token is no longer valid",
                )
            } else {
                html::redirect("/console/login")
            };
        }
        if post {
            if let Err(why) = auth::same_origin(req.headers()) {
                return html::plain(StatusCode::FORBIDDEN, why);
            }
            let form = auth::Form::parse(req.body());
            if !auth::same_secret(form.get("csrf").unwrap_or(""), &session.csrf) {
                return html::plain(StatusCode::FORBIDDEN, "missing or wrong CSRF token");
            }
            if path == "/logout" {
                self.sessions.remove(&session);
                return html::redirect_clearing("/console/login");
            }
            return pages::act(self, &session, &path, &form).await;
        }
        let query = auth::Form::parse(req.uri().query().unwrap_or("").as_bytes());
        match path.as_str() {
            "" | "/" => html::redirect("/console/calls"),
            "/events" => live::events(self, &session, &query),
            _ => pages::show(self, &session, &path, &query).await,
        }
    }

    /// The login form's POST: a session and its cookie for a token that
    /// opens the console; the form again, 401, for anything else.
    async fn login(self: &Arc<Self>, req: &Request<Bytes>) -> Response<Body> {
        if let Err(why) = auth::same_origin(req.headers()) {
            return html::plain(StatusCode::FORBIDDEN, why);
        }
        let form = auth::Form::parse(req.body());
        let token = form.get("token").unwrap_or("").trim().to_string();
        let file_ok = !token.is_empty()
            && self
                .options
                .token_file
                .as_deref()
                .is_some_and(|t| auth::same_secret(t.trim(), &token));
        let login = if file_ok {
            Ok(Login {
                who: "console:token-file".into(),
                live: Box::new(|| true),
            })
        } else if token.is_empty() {
            Err("no token given".to_string())
        } else {
            let serving = self.serving.clone();
            tokio::task::spawn_blocking(move || serving.login(&token))
                .await
                .unwrap_or_else(|_| Err("the check failed".into()))
        };
        match login {
            Ok(login) => {
                let (sid, _) = self.sessions.open(login);
                html::logged_in(&sid)
            }
            Err(why) => {
                tracing::info!("toolhost: console login refused: {why}");
                html::login_page(
                    StatusCode::UNAUTHORIZED,
                    Some("refused: not a console token"),
                )
            }
        }
    }
}

/// Runs `f` on the blocking pool (the store may be PostgreSQL, whose client
/// must not run on the async threads).
pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, ConsoleError> + Send + 'static,
) -> Result<T, ConsoleError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| ConsoleError::Store(format!("the store's task failed: {e}")))?
}
