//! Streamable HTTP sessions (the 2025-11-25 `initialize` handshake),
//! bounded and freed.
//!
//! Every `initialize` over HTTP opens a session that rmcp keeps in memory
//! (a worker task, its channels, a handler) until the client deletes it.
//! Clients that never do — or a flood of `initialize` requests — would hold
//! memory for good. [`Sessions`] wraps rmcp's in-memory session manager and
//!
//! - caps the sessions open at once, in total and per owner ([`Owner`]). A
//!   token's sessions count against its own allowance: the token's chain of
//!   ids ([`Token::chain_ids`](toolhost::Token::chain_ids)), so a
//!   plain attenuation shares it and a delegated child (an id of its own)
//!   has its own. A delegated token's sessions also count against one
//!   allowance shared by every token delegated from the same minted token:
//!   a child cannot take its root's sessions, and appending ids of its own
//!   gets it no more than that shared allowance. Clients without a token
//!   share one allowance. A refused `initialize` gets HTTP 429 (an
//!   allowance is used up) or 503 (the server is full), with
//!   `Retry-After`;
//! - closes a session idle for longer than the idle timeout (no request
//!   running, no stream open, nothing received), which ends its worker and
//!   handler and frees their state; a later request naming it gets 404, as
//!   for any unknown session, and the client starts a new one.
//!
//! rmcp's own keep-alive is off: it counts a long call as idleness and would
//! end a session in the middle of it; here a running request or an open
//! stream keeps its session alive.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures_core::Stream;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError,
};
use rmcp::transport::streamable_http_server::session::{
    ServerSseMessage, SessionId, SessionManager,
};

use toolhost::TokenId;

use super::direct::SessionRoute;

/// One allowance of sessions.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Pool {
    /// Every client without a token.
    Anonymous,
    /// One token (a digest of its chain of ids) and its plain attenuations.
    Token([u8; 32]),
    /// Every token delegated from one minted token (its mint id), together.
    Delegated(TokenId),
}

/// Whom a session is counted against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Owner {
    own: Pool,
    /// For a delegated token: the allowance it shares with every token
    /// delegated from the same minted token.
    delegated: Option<Pool>,
}

impl Owner {
    /// The clients without a token.
    pub(super) fn anonymous() -> Owner {
        Owner {
            own: Pool::Anonymous,
            delegated: None,
        }
    }

    /// A token with these ids ([`Token::chain_ids`](toolhost::Token::chain_ids),
    /// oldest first). Its own allowance is keyed by the whole chain, not the
    /// last id alone: a holder can append any id, its root's included, but
    /// can never shorten the chain, so no descendant lands in an ancestor's
    /// allowance.
    pub(super) fn of_chain(chain: &[TokenId]) -> Owner {
        let mut digest = blake3::Hasher::new();
        digest.update(b"toolhost session owner");
        for id in chain {
            digest.update(&id.0);
        }
        Owner {
            own: Pool::Token(*digest.finalize().as_bytes()),
            delegated: match chain {
                [root, _, ..] => Some(Pool::Delegated(*root)),
                _ => None,
            },
        }
    }

    fn pools(&self) -> impl Iterator<Item = &Pool> {
        std::iter::once(&self.own).chain(self.delegated.as_ref())
    }
}

tokio::task_local! {
    /// Who is asking for a new session: set around each request by the
    /// HTTP layer, read by [`Sessions::create_session`].
    pub(super) static OWNER: Owner;
}

/// Bounds of the HTTP sessions.
#[derive(Debug, Clone, Copy)]
pub struct SessionLimits {
    /// Sessions open at once, all owners together.
    pub max_total: usize,
    /// Sessions open at once for one token (clients without a token share
    /// one such allowance, and so do all the tokens delegated from one
    /// minted token).
    pub max_per_owner: usize,
    /// A session with nothing running for this long is closed.
    pub idle: Duration,
}

/// Why a new session was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum Refusal {
    #[error("this client already has {0} sessions open, the limit per token; close one (HTTP DELETE with its Mcp-Session-Id) or wait until an idle one expires")]
    Token(usize),
    #[error("the tokens delegated from this token's root have {0} sessions open together, their shared limit; close one (HTTP DELETE with its Mcp-Session-Id) or wait until an idle one expires")]
    Delegated(usize),
    #[error("the server has {0} sessions open, its limit; retry later")]
    Server(usize),
}

/// The session manager's errors: rmcp's, or a refusal.
#[derive(Debug, thiserror::Error)]
pub(super) enum SessionsError {
    #[error(transparent)]
    Local(#[from] LocalSessionManagerError),
    #[error(transparent)]
    Refused(#[from] Refusal),
}

struct Tracked {
    owner: Owner,
    last_active: Instant,
    /// Requests running and streams open.
    busy: usize,
    /// The session's handler and peer, once its handshake completed.
    route: Option<SessionRoute>,
}

#[derive(Default)]
struct Table {
    open: HashMap<SessionId, Tracked>,
    /// Sessions open or being opened, per allowance.
    per_pool: HashMap<Pool, usize>,
    total: usize,
}

impl Table {
    fn check(&self, owner: &Owner, limits: &SessionLimits) -> Result<(), Refusal> {
        for pool in owner.pools() {
            if self.per_pool.get(pool).copied().unwrap_or(0) >= limits.max_per_owner {
                return Err(match pool {
                    Pool::Delegated(_) => Refusal::Delegated(limits.max_per_owner),
                    _ => Refusal::Token(limits.max_per_owner),
                });
            }
        }
        if self.total >= limits.max_total {
            return Err(Refusal::Server(limits.max_total));
        }
        Ok(())
    }

    fn take(&mut self, owner: &Owner) {
        self.total += 1;
        for pool in owner.pools() {
            *self.per_pool.entry(pool.clone()).or_insert(0) += 1;
        }
    }

    fn release(&mut self, owner: &Owner) {
        self.total = self.total.saturating_sub(1);
        for pool in owner.pools() {
            if let Some(n) = self.per_pool.get_mut(pool) {
                *n -= 1;
                if *n == 0 {
                    self.per_pool.remove(pool);
                }
            }
        }
    }

    fn remove(&mut self, id: &SessionId) {
        if let Some(t) = self.open.remove(id) {
            self.release(&t.owner);
        }
    }
}

/// rmcp's in-memory session manager, bounded (see the module docs).
pub(super) struct Sessions {
    inner: LocalSessionManager,
    limits: SessionLimits,
    table: Arc<Mutex<Table>>,
}

impl Sessions {
    pub(super) fn new(limits: SessionLimits) -> Sessions {
        let mut inner = LocalSessionManager::default();
        // Idleness is judged here, where a running call counts as activity.
        inner.session_config.keep_alive = None;
        Sessions {
            inner,
            limits,
            table: Arc::default(),
        }
    }

    fn table(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether `owner` may open a session now (the HTTP layer asks before
    /// it hands an `initialize` to rmcp, to answer a refusal properly).
    pub(super) fn admits(&self, owner: &Owner) -> Result<(), Refusal> {
        self.table().check(owner, &self.limits)
    }

    /// Sessions open now.
    #[cfg(test)]
    fn open(&self) -> usize {
        self.table().open.len()
    }

    fn touch(&self, id: &SessionId) {
        if let Some(t) = self.table().open.get_mut(id) {
            t.last_active = Instant::now();
        }
    }

    /// Keeps the handler and peer of session `id` for [`route`](Self::route)
    /// (told once its handshake completed); nothing when it is not open.
    pub(super) fn attach(&self, id: &str, route: SessionRoute) {
        if let Some(t) = self.table().open.get_mut(id) {
            t.route = Some(route);
        }
    }

    /// The handler and peer of session `id` for a request sent by `owner`,
    /// with the session marked busy until the guard is dropped: only when
    /// the session is open, finished its handshake, belongs to `owner` and
    /// may be answered outside rmcp ([`SessionRoute::plain`]).
    pub(super) fn route(&self, id: &str, owner: &Owner) -> Option<(SessionRoute, Busy)> {
        let (key, route) = {
            let table = self.table();
            let (key, t) = table.open.get_key_value(id)?;
            let route = t
                .route
                .as_ref()
                .filter(|r| t.owner == *owner && r.plain())?;
            (key.clone(), route.clone())
        };
        Some((route, self.busy(&key)))
    }

    /// Marks the session busy until the guard is dropped.
    fn busy(&self, id: &SessionId) -> Busy {
        if let Some(t) = self.table().open.get_mut(id) {
            t.busy += 1;
            t.last_active = Instant::now();
        }
        Busy {
            table: self.table.clone(),
            id: id.clone(),
        }
    }

    /// Closes every session idle for longer than the idle timeout; returns
    /// how many.
    pub(super) async fn close_idle(&self) -> usize {
        let idle: Vec<SessionId> = {
            let table = self.table();
            table
                .open
                .iter()
                .filter(|(_, t)| t.busy == 0 && t.last_active.elapsed() >= self.limits.idle)
                .map(|(id, _)| id.clone())
                .collect()
        };
        for id in &idle {
            let _ = self.close_session(id).await;
        }
        idle.len()
    }

    /// Runs [`close_idle`](Self::close_idle) periodically until the
    /// manager is dropped.
    pub(super) fn spawn_reaper(self: &Arc<Self>) {
        let every = (self.limits.idle / 4).clamp(Duration::from_millis(50), Duration::from_secs(5));
        let weak = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let Some(sessions) = weak.upgrade() else {
                    return;
                };
                sessions.close_idle().await;
            }
        });
    }
}

/// A running request or an open stream of a session.
pub(super) struct Busy {
    table: Arc<Mutex<Table>>,
    id: SessionId,
}

impl Drop for Busy {
    fn drop(&mut self) {
        let mut table = self.table.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(t) = table.open.get_mut(&self.id) {
            t.busy = t.busy.saturating_sub(1);
            t.last_active = Instant::now();
        }
    }
}

/// A stream that keeps its session busy while it is open.
struct Guarded<S> {
    inner: Pin<Box<S>>,
    _busy: Busy,
}

impl<S: Stream> Stream for Guarded<S> {
    type Item = S::Item;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<S::Item>> {
        self.inner.as_mut().poll_next(cx)
    }
}

impl SessionManager for Sessions {
    type Error = SessionsError;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let owner = OWNER
            .try_with(Owner::clone)
            .unwrap_or_else(|_| Owner::anonymous());
        {
            let mut table = self.table();
            table.check(&owner, &self.limits)?;
            table.take(&owner);
        }
        match self.inner.create_session().await {
            Ok((id, transport)) => {
                self.table().open.insert(
                    id.clone(),
                    Tracked {
                        owner,
                        last_active: Instant::now(),
                        busy: 0,
                        route: None,
                    },
                );
                Ok((id, transport))
            }
            Err(e) => {
                self.table().release(&owner);
                Err(e.into())
            }
        }
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        let _busy = self.busy(id);
        Ok(self.inner.initialize_session(id, message).await?)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        Ok(self.inner.has_session(id).await?)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        let closed = self.inner.close_session(id).await;
        self.table().remove(id);
        Ok(closed?)
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let busy = self.busy(id);
        let stream = self.inner.create_stream(id, message).await?;
        Ok(Guarded {
            inner: Box::pin(stream),
            _busy: busy,
        })
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        self.touch(id);
        Ok(self.inner.accept_message(id, message).await?)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let busy = self.busy(id);
        let stream = self.inner.create_standalone_stream(id).await?;
        Ok(Guarded {
            inner: Box::pin(stream),
            _busy: busy,
        })
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let busy = self.busy(id);
        let stream = self.inner.resume(id, last_event_id).await?;
        Ok(Guarded {
            inner: Box::pin(stream),
            _busy: busy,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(total: usize, per_owner: usize, idle_ms: u64) -> SessionLimits {
        SessionLimits {
            max_total: total,
            max_per_owner: per_owner,
            idle: Duration::from_millis(idle_ms),
        }
    }

    /// The owner of a token whose chain has these ids.
    fn tok(ids: &[u8]) -> Owner {
        let chain: Vec<TokenId> = ids.iter().map(|&n| TokenId([n; 16])).collect();
        Owner::of_chain(&chain)
    }

    async fn open_as(s: &Sessions, owner: &Owner) -> Result<SessionId, SessionsError> {
        OWNER
            .scope(owner.clone(), async { s.create_session().await })
            .await
            .map(|(id, _transport)| id)
    }

    fn run(test: impl std::future::Future<Output = ()>) {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap()
            .block_on(test);
    }

    #[test]
    fn caps_per_owner_and_in_total() {
        run(caps_per_owner_and_in_total_async());
    }

    async fn caps_per_owner_and_in_total_async() {
        let s = Sessions::new(limits(3, 2, 60_000));
        open_as(&s, &tok(&[1])).await.unwrap();
        open_as(&s, &tok(&[1])).await.unwrap();
        assert!(matches!(
            open_as(&s, &tok(&[1])).await,
            Err(SessionsError::Refused(Refusal::Token(2)))
        ));
        assert_eq!(s.admits(&tok(&[1])), Err(Refusal::Token(2)));
        let b = open_as(&s, &tok(&[2])).await.unwrap();
        assert!(matches!(
            open_as(&s, &tok(&[3])).await,
            Err(SessionsError::Refused(Refusal::Server(3)))
        ));
        // Closing one makes room.
        s.close_session(&b).await.unwrap();
        open_as(&s, &tok(&[3])).await.unwrap();
        assert_eq!(s.open(), 3);
    }

    #[test]
    fn idle_sessions_close_busy_ones_stay() {
        run(idle_sessions_close_busy_ones_stay_async());
    }

    async fn idle_sessions_close_busy_ones_stay_async() {
        let s = Sessions::new(limits(10, 10, 20));
        let idle = open_as(&s, &tok(&[1])).await.unwrap();
        let working = open_as(&s, &tok(&[1])).await.unwrap();
        let busy = s.busy(&working);
        tokio::time::sleep(Duration::from_millis(40)).await;
        assert_eq!(s.close_idle().await, 1);
        assert!(
            !s.inner.has_session(&idle).await.unwrap(),
            "freed in rmcp too"
        );
        assert!(s.inner.has_session(&working).await.unwrap());
        drop(busy);
        assert_eq!(s.close_idle().await, 0, "activity just ended");
        tokio::time::sleep(Duration::from_millis(40)).await;
        assert_eq!(s.close_idle().await, 1);
        assert_eq!(s.open(), 0);
        assert!(s.admits(&tok(&[1])).is_ok());
    }

    #[test]
    fn a_delegated_token_counts_on_its_own_and_never_on_its_root() {
        run(a_delegated_token_counts_on_its_own_and_never_on_its_root_async());
    }

    async fn a_delegated_token_counts_on_its_own_and_never_on_its_root_async() {
        let s = Sessions::new(limits(100, 2, 60_000));
        let (root, child, grandchild) = (tok(&[1]), tok(&[1, 2]), tok(&[1, 2, 3]));
        // The child uses up its allowance.
        open_as(&s, &child).await.unwrap();
        open_as(&s, &child).await.unwrap();
        assert_eq!(s.admits(&child), Err(Refusal::Token(2)));
        // The root still has its own.
        assert!(s.admits(&root).is_ok());
        open_as(&s, &root).await.unwrap();
        open_as(&s, &root).await.unwrap();
        assert_eq!(s.admits(&root), Err(Refusal::Token(2)));
        // Ids the child appends get it nothing more: every token delegated
        // from the root shares one allowance.
        assert_eq!(s.admits(&grandchild), Err(Refusal::Delegated(2)));
        assert_eq!(s.admits(&tok(&[1, 9])), Err(Refusal::Delegated(2)));
        // Nor does appending the root's own id: the chain is longer.
        assert_eq!(s.admits(&tok(&[1, 2, 1])), Err(Refusal::Delegated(2)));
        assert_ne!(tok(&[1, 2, 1]), root);
        // Another minted token is untouched.
        assert!(s.admits(&tok(&[7])).is_ok());
        assert!(s.admits(&tok(&[7, 8])).is_ok());
        assert!(s.admits(&Owner::anonymous()).is_ok());
    }
}
