//! The live calls as server-sent events (`/console/events`).
//!
//! Each stream polls the store's journal every [`POLL`] for the newest
//! [`ROWS`] calls that started within [`WINDOW`] and sends those it has
//! not sent yet
//! (`event: call`, the row as JSON: no arguments, no output), so the calls
//! of every host sharing the store appear, within a second of being
//! journaled. It sends a comment every [`KEEPALIVE`] and ends when the
//! browser goes away or the session's token stops being valid.

use std::collections::HashSet;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{header, Response, StatusCode};
use http_body_util::BodyExt;
use tokio::sync::mpsc;

use crate::auth::{Form, Session};
use crate::pages::{newest, row_json, CallFilter};
use crate::{Body, Console};

/// How often the journal is read.
pub const POLL: Duration = Duration::from_millis(250);

/// How far back a stream looks for calls it has not sent (a call is
/// journaled when it ends, under its start time).
pub const WINDOW: Duration = Duration::from_secs(15 * 60);

/// How many of the newest calls a poll reads: as many as the page keeps
/// (`app.js`), so a busy store costs each poll no more than the page shows.
pub const ROWS: usize = 500;

/// How often an idle stream sends a comment.
pub const KEEPALIVE: Duration = Duration::from_secs(15);

/// How often the session's token is checked again.
const RECHECK: Duration = Duration::from_secs(5);

/// A body fed from a channel.
struct Channel(mpsc::Receiver<Bytes>);

impl http_body::Body for Channel {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        self.0
            .poll_recv(cx)
            .map(|b| b.map(|b| Ok(http_body::Frame::data(b))))
    }
}

/// The event stream of the live calls matching `query`'s filters.
pub fn events(console: &Arc<Console>, session: &Arc<Session>, query: &Form) -> Response<Body> {
    let filter = CallFilter::from_form(query);
    let (tx, rx) = mpsc::channel::<Bytes>(64);
    let (console, session) = (console.clone(), session.clone());
    tokio::spawn(async move {
        let mut seen: HashSet<String> = HashSet::new();
        let (mut checked, mut sent) = (Instant::now(), Instant::now());
        if tx
            .send(Bytes::from_static(b"retry: 1000\n\n"))
            .await
            .is_err()
        {
            return;
        }
        loop {
            let since = toolhost::record::journal::unix_us(std::time::SystemTime::now())
                - WINDOW.as_micros() as i64;
            let c = console.clone();
            let entries = crate::blocking(move || newest(&c, Some(since), ROWS)).await;
            let mut out = String::new();
            match entries {
                Ok(entries) => {
                    for e in entries.iter().filter(|e| filter.matches(e)) {
                        if seen.insert(e.call_id.clone()) {
                            out.push_str(&format!("event: call\ndata: {}\n\n", row_json(e)));
                        }
                    }
                    // Forget what fell out of the window.
                    if seen.len() > 2 * entries.len() + 1024 {
                        let current: HashSet<&str> =
                            entries.iter().map(|e| e.call_id.as_str()).collect();
                        seen.retain(|id| current.contains(id.as_str()));
                    }
                }
                Err(e) => out.push_str(&format!(
                    "event: trouble\ndata: {}\n\n",
                    serde_json::json!(e.to_string())
                )),
            }
            if out.is_empty() && sent.elapsed() >= KEEPALIVE {
                out.push_str(": keepalive\n\n");
            }
            if !out.is_empty() {
                if tx.send(Bytes::from(out)).await.is_err() {
                    return;
                }
                sent = Instant::now();
            }
            if checked.elapsed() >= RECHECK {
                let s = session.clone();
                let live = tokio::task::spawn_blocking(move || (s.live)())
                    .await
                    .unwrap_or(false);
                if !live {
                    let _ = tx
                        .send(Bytes::from_static(
                            b"event: ended\ndata: \"logged out\"\n\n",
                        ))
                        .await;
                    return;
                }
                checked = Instant::now();
            }
            tokio::select! {
                () = tokio::time::sleep(POLL) => {}
                () = tx.closed() => return,
            }
        }
    });
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-store")
        .header("x-content-type-options", "nosniff")
        .body(Channel(rx).boxed())
        .expect("a valid response")
}
