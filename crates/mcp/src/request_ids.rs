//! One answer per request, even when a client reuses an id.
//!
//! rmcp keys a running request by its JSON-RPC id: a second request with
//! the id of one still running replaces the first in that table, both run,
//! and only the first answer to arrive is sent; the other is dropped as if
//! cancelled. A client that reuses an id by mistake then waits forever for
//! one of them, and the call whose answer was dropped may still have acted.
//!
//! [`UniqueIds`] wraps a transport and keeps the ids of the client's
//! requests that have not been answered yet. A request whose id is among
//! them never reaches rmcp: it is answered at once with a JSON-RPC error
//! (`-32600`, invalid request) naming the id, and nothing runs. The first
//! request goes on and gets its own answer. An id is free again once its
//! answer (result or error) is sent, or once the client cancels it
//! (`notifications/cancelled`: rmcp then sends no answer).

use std::collections::HashSet;
use std::future::Future;

use rmcp::model::{ClientNotification, ErrorData, JsonRpcMessage, RequestId};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::RoleServer;

/// A transport that refuses a request whose id is still in use.
pub(super) struct UniqueIds<T> {
    inner: T,
    /// Ids of the client's requests not answered yet.
    open: HashSet<RequestId>,
}

impl<T> UniqueIds<T> {
    pub(super) fn new(inner: T) -> UniqueIds<T> {
        UniqueIds {
            inner,
            open: HashSet::new(),
        }
    }
}

/// The answer to a request that reuses the id of one still running.
fn duplicate_error(id: &RequestId) -> TxJsonRpcMessage<RoleServer> {
    JsonRpcMessage::error(
        ErrorData::invalid_request(
            format!(
                "request id {id} is already in use by a request that has not been answered yet; \
                 this request was not run. Use a new id for every request"
            ),
            Some(serde_json::json!({ "id": id })),
        ),
        Some(id.clone()),
    )
}

impl<T> Transport<RoleServer> for UniqueIds<T>
where
    T: Transport<RoleServer>,
{
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        match &item {
            JsonRpcMessage::Response(r) => {
                self.open.remove(&r.id);
            }
            JsonRpcMessage::Error(e) => {
                if let Some(id) = &e.id {
                    self.open.remove(id);
                }
            }
            _ => {}
        }
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            let message = self.inner.receive().await?;
            match &message {
                JsonRpcMessage::Request(r) if !self.open.insert(r.id.clone()) => {
                    // Answer without holding up the next message; the send
                    // future owns what it needs.
                    let refusal = self.inner.send(duplicate_error(&r.id));
                    tokio::spawn(async move {
                        let _ = refusal.await;
                    });
                    continue;
                }
                JsonRpcMessage::Notification(n) => {
                    if let ClientNotification::CancelledNotification(c) = &n.notification {
                        if let Some(id) = &c.params.request_id {
                            self.open.remove(id);
                        }
                    }
                }
                _ => {}
            }
            return Some(message);
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}
