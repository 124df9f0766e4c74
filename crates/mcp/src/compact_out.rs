//! Messages to a stdio client, written by toolhost's compact JSON writer.
//!
//! rmcp's stdio transport writes every message with serde_json, which
//! escapes a string one byte at a time. A page of a file is ~50 KB of
//! escape-dense text (the page as the model-facing text and again as the
//! structured lines), and that escaping was the largest part of the
//! runtime thread's work on such an answer. [`CompactOut`] wraps the
//! transport and writes each outgoing message itself with
//! [`toolhost_compact_json::to_vec`] (the writer the guest SDK writes
//! outputs with): the same bytes serde_json would write, with strings
//! escaped eight bytes at a time. A message that cannot be written at all
//! goes to rmcp, which reports it as it always did.
//!
//! Both write whole lines to the one stdout, one line at a time, under one
//! lock ([`split`]). rmcp's transport gets a [`LineBuffer`] as its writer:
//! it keeps what rmcp writes until rmcp flushes (rmcp flushes after each
//! whole message), then writes it in one piece under the lock, so a line
//! of one never lands inside a line of the other.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use futures_util::future::Either;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::RoleServer;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::Mutex;

/// The client's stdout, shared by [`CompactOut`] and rmcp's writer.
type Shared<W> = Arc<Mutex<W>>;

/// `out` split in two: the handle [`CompactOut`] writes through, and the
/// writer to give rmcp's transport.
pub(super) fn split<W>(out: W) -> (Shared<W>, LineBuffer<W>) {
    let shared = Arc::new(Mutex::new(out));
    let buffer = LineBuffer {
        out: shared.clone(),
        buf: Vec::new(),
        flushing: None,
    };
    (shared, buffer)
}

/// Writes `bytes` (whole lines) under the lock, and flushes.
async fn write_lines<W: AsyncWrite + Unpin>(out: Shared<W>, bytes: Vec<u8>) -> io::Result<()> {
    let mut out = out.lock().await;
    out.write_all(&bytes).await?;
    out.flush().await
}

/// A transport whose outgoing messages toolhost writes itself (see the
/// module documentation); `inner` receives, and is handed what cannot be
/// written.
pub(super) struct CompactOut<T, W> {
    inner: T,
    out: Shared<W>,
}

impl<T, W> CompactOut<T, W> {
    /// `inner` must write to the [`LineBuffer`] split from `out`.
    pub(super) fn new(inner: T, out: Shared<W>) -> CompactOut<T, W> {
        CompactOut { inner, out }
    }
}

impl<T, W> Transport<RoleServer> for CompactOut<T, W>
where
    T: Transport<RoleServer, Error = io::Error>,
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), io::Error>> + Send + 'static {
        match toolhost_compact_json::to_vec(&item) {
            Ok(mut line) => {
                line.push(b'\n');
                Either::Left(write_lines(self.out.clone(), line))
            }
            Err(_) => Either::Right(self.inner.send(item)),
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleServer>>> + Send {
        self.inner.receive()
    }

    fn close(&mut self) -> impl Future<Output = Result<(), io::Error>> + Send {
        self.inner.close()
    }
}

/// The writer rmcp's transport writes to: what it is given waits in a
/// buffer until a flush, which writes all of it under the stdout's lock.
pub(super) struct LineBuffer<W> {
    out: Shared<W>,
    buf: Vec<u8>,
    /// The write of the last flush, while it runs.
    flushing: Option<Pin<Box<dyn Future<Output = io::Result<()>> + Send>>>,
}

impl<W> LineBuffer<W> {
    /// Drives the running flush, if any, to its end.
    fn poll_flushing(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let Some(flushing) = self.flushing.as_mut() else {
            return Poll::Ready(Ok(()));
        };
        let done = ready!(flushing.as_mut().poll(cx));
        self.flushing = None;
        Poll::Ready(done)
    }
}

impl<W: AsyncWrite + Unpin + Send + 'static> AsyncWrite for LineBuffer<W> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        ready!(this.poll_flushing(cx))?;
        this.buf.extend_from_slice(data);
        Poll::Ready(Ok(data.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.flushing.is_none() && !this.buf.is_empty() {
            let bytes = std::mem::take(&mut this.buf);
            this.flushing = Some(Box::pin(write_lines(this.out.clone(), bytes)));
        }
        this.poll_flushing(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_flush(cx)
    }
}

#[cfg(test)]
mod tests {
    use rmcp::transport::async_rw::AsyncRwTransport;
    use serde_json::{json, Value};
    use tokio::io::AsyncReadExt;

    use super::*;

    /// A response with a page of escape-dense text goes out as the line
    /// serde_json writes; rmcp's own error for a line that is not JSON-RPC
    /// (written through the buffer) comes out whole, after it.
    #[test]
    fn messages_are_serde_jsons_lines_and_rmcps_own_stay_whole() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(answer_then_refusal());
    }

    async fn answer_then_refusal() {
        let (mut client_in, server_in) = tokio::io::duplex(1 << 20);
        let (server_out, mut client_out) = tokio::io::duplex(1 << 20);
        let (shared, buffer) = split(server_out);
        let mut transport = CompactOut::new(
            AsyncRwTransport::<RoleServer, _, _>::new(server_in, buffer),
            shared,
        );
        let text: String = (0..2_000)
            .map(|i| format!("{i}\t\"q\" \\ \u{1b}[0m é\n"))
            .collect();
        let result = json!({"content": [{"type": "text", "text": text}], "isError": false});
        let message: TxJsonRpcMessage<RoleServer> =
            serde_json::from_value(json!({"jsonrpc": "2.0", "id": 7, "result": result}))
                .expect("a response");
        let want = serde_json::to_string(&message).unwrap() + "\n";
        transport.send(message).await.unwrap();

        // Not JSON-RPC: rmcp answers it itself, through the buffer.
        client_in.write_all(b"{\"nonsense\": 1}\n").await.unwrap();
        client_in.shutdown().await.unwrap();
        assert!(transport.receive().await.is_none(), "no message came in");
        drop(transport);

        let mut got = String::new();
        client_out.read_to_string(&mut got).await.unwrap();
        let (first, rest) = got.split_at(want.len());
        assert_eq!(first, want);
        let lines: Vec<&str> = rest.lines().collect();
        assert_eq!(lines.len(), 1, "{rest}");
        let error: Value = serde_json::from_str(lines[0]).unwrap();
        assert_eq!(error["error"]["code"], -32600, "{error}");
    }
}
