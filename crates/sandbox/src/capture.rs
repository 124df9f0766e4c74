//! Bounded capture of a guest's stdout and stderr.
//!
//! A plugin's output streams never reach the host's terminal. Each stream
//! keeps its first `capacity` bytes and counts the rest, so a plugin that
//! floods stdout costs the host a bounded buffer, never unbounded memory, and
//! the guest's writes keep succeeding (a flood ends by fuel or deadline, not
//! by a crash inside the guest's `println!`).

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};

#[derive(Default)]
struct Buffer {
    kept: Vec<u8>,
    omitted: u64,
}

/// One captured output stream. Clones share the same buffer.
#[derive(Clone)]
pub struct Capture {
    capacity: usize,
    buffer: Arc<Mutex<Buffer>>,
}

impl Capture {
    /// A stream that keeps at most `capacity` bytes.
    pub fn new(capacity: usize) -> Self {
        Capture {
            capacity,
            buffer: Arc::default(),
        }
    }

    /// The kept bytes and how many bytes were dropped after them.
    pub fn take(&self) -> (Vec<u8>, u64) {
        let mut buf = self.buffer.lock().unwrap_or_else(|e| e.into_inner());
        (std::mem::take(&mut buf.kept), buf.omitted)
    }

    fn append(&self, bytes: &[u8]) {
        let mut buf = self.buffer.lock().unwrap_or_else(|e| e.into_inner());
        let room = self.capacity.saturating_sub(buf.kept.len());
        let keep = room.min(bytes.len());
        buf.kept.extend_from_slice(&bytes[..keep]);
        buf.omitted += (bytes.len() - keep) as u64;
    }
}

impl OutputStream for Capture {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.append(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(64 * 1024)
    }
}

#[async_trait::async_trait]
impl Pollable for Capture {
    async fn ready(&mut self) {}
}

impl tokio::io::AsyncWrite for Capture {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        self.append(buf);
        std::task::Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

impl IsTerminal for Capture {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for Capture {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_head_and_counts_the_rest() {
        let c = Capture::new(4);
        c.append(b"ab");
        c.append(b"cdef");
        c.append(b"gh");
        let (kept, omitted) = c.take();
        assert_eq!(kept, b"abcd");
        assert_eq!(omitted, 4);
    }
}
