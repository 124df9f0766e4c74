//! The exact text of a `tools/call`'s `arguments`, when rmcp's parse would
//! hide a problem in it.
//!
//! rmcp turns each message into `serde_json` values before the handler
//! runs, and `serde_json` keeps the last of two equal keys: `{"path": "a",
//! "path": "b"}` would arrive as `{"path": "b"}`, which the pipeline's
//! strict parse ([`toolhost::json`]) exists to refuse. So the transports look
//! at every message first: when it is a `tools/call` whose `arguments` text
//! fails the strict parse, that text is kept ([`Kept`]), keyed by request
//! id, and the handler hands it to the pipeline instead of rmcp's value;
//! the caller gets the same `invalid_json` observation as on the command
//! line, with the pointer to the duplicate key. Arguments that pass (every
//! well-formed call) keep nothing.
//!
//! Over HTTP the text travels with the request (an extension of its
//! `http::request::Parts`); over stdio [`Tap`] reads the lines on their way
//! to rmcp. Either way the handler only uses the kept text when it still
//! means what rmcp parsed (the same value when read leniently), so a
//! client reusing a request id cannot swap one call's arguments for
//! another's.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;
use tokio::io::{AsyncRead, ReadBuf};

/// Kept argument texts; an entry is taken once.
const MAX_KEPT: usize = 256;

/// The `arguments` text of one request, kept because it fails the strict
/// parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RawArguments {
    /// The request id, as JSON text.
    pub id: String,
    pub text: String,
}

#[derive(Deserialize)]
struct Message<'a> {
    #[serde(default)]
    method: Option<&'a str>,
    #[serde(default)]
    id: Option<Value>,
    #[serde(borrow, default)]
    params: Option<Params<'a>>,
}

#[derive(Deserialize)]
struct Params<'a> {
    #[serde(borrow, default)]
    arguments: Option<&'a RawValue>,
}

/// The arguments of `message` when it is a `tools/call` whose arguments
/// the strict parse refuses.
pub(crate) fn refused_arguments(message: &[u8]) -> Option<RawArguments> {
    inspect(message).ok().flatten()
}

/// [`refused_arguments`], telling a message that is not JSON at all (the
/// parse error) from one with nothing to keep, in one pass for the common
/// case.
pub(crate) fn inspect(message: &[u8]) -> Result<Option<RawArguments>, serde_json::Error> {
    let m: Message<'_> = match serde_json::from_slice(message) {
        Ok(m) => m,
        // JSON of another shape (e.g. a batch), or not JSON.
        Err(_) => return serde_json::from_slice::<serde::de::IgnoredAny>(message).map(|_| None),
    };
    Ok(kept_from(m))
}

fn kept_from(m: Message<'_>) -> Option<RawArguments> {
    if m.method != Some("tools/call") {
        return None;
    }
    let text = m.params?.arguments?.get();
    if toolhost::parse_strict(text).is_ok() {
        return None;
    }
    Some(RawArguments {
        id: m.id?.to_string(),
        text: text.to_string(),
    })
}

/// The kept text for `id`, if it still means `parsed` (what rmcp handed
/// the handler).
pub(crate) fn usable(kept: RawArguments, id: &str, parsed: &Value) -> Option<String> {
    if kept.id != id {
        return None;
    }
    let lenient: Value = serde_json::from_str(&kept.text).ok()?;
    (lenient == *parsed).then_some(kept.text)
}

/// Kept texts by request id (stdio).
#[derive(Clone, Default)]
pub(crate) struct KeptArguments(Arc<Mutex<HashMap<String, RawArguments>>>);

impl KeptArguments {
    fn keep(&self, raw: RawArguments) {
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if map.len() >= MAX_KEPT {
            map.clear();
        }
        map.insert(raw.id.clone(), raw);
    }

    /// Takes the text kept for `id`.
    pub(crate) fn take(&self, id: &str) -> Option<RawArguments> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).remove(id)
    }
}

/// Passes a newline-delimited stream through unchanged, looking at each
/// line (up to `max_line` bytes; longer ones are skipped, as rmcp drops
/// them) before rmcp does.
pub(crate) struct Tap<R> {
    inner: R,
    line: Vec<u8>,
    max_line: usize,
    overlong: bool,
    kept: KeptArguments,
}

impl<R> Tap<R> {
    pub(crate) fn new(inner: R, max_line: usize, kept: KeptArguments) -> Tap<R> {
        Tap {
            inner,
            line: Vec::new(),
            max_line,
            overlong: false,
            kept,
        }
    }

    fn scan(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let newline = bytes.iter().position(|b| *b == b'\n');
            let take = newline.map_or(bytes.len(), |i| i + 1);
            if !self.overlong {
                if self.line.len() + take > self.max_line {
                    self.overlong = true;
                    self.line = Vec::new();
                } else {
                    self.line.extend_from_slice(&bytes[..take]);
                }
            }
            if newline.is_some() {
                if !self.overlong {
                    if let Some(raw) = refused_arguments(&self.line) {
                        self.kept.keep(raw);
                    }
                }
                self.line.clear();
                self.overlong = false;
            }
            bytes = &bytes[take..];
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Tap<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled {
            this.scan(&buf.filled()[before..]);
        }
        polled
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use tokio::io::AsyncReadExt;

    #[test]
    fn only_refused_tool_arguments_are_kept() {
        let dup = br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"t","arguments":{"a":1,"a":2}}}"#;
        assert_eq!(
            refused_arguments(dup),
            Some(RawArguments {
                id: "7".into(),
                text: r#"{"a":1,"a":2}"#.into()
            })
        );
        let big = br#"{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"t","arguments":{"n":9007199254740993}}}"#;
        assert_eq!(refused_arguments(big).unwrap().id, r#""x""#);
        assert!(inspect(b"{").is_err());
        assert_eq!(inspect(b"[1, 2]").unwrap(), None);
        for fine in [
            &br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"a":1}}}"#[..],
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"}}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"arguments":{"a":1,"a":2}}}"#,
            br#"not json"#,
        ] {
            assert_eq!(refused_arguments(fine), None);
        }
    }

    #[test]
    fn kept_text_is_used_only_for_its_id_and_meaning() {
        let kept = RawArguments {
            id: "7".into(),
            text: r#"{"a":1,"a":2}"#.into(),
        };
        assert_eq!(
            usable(kept.clone(), "7", &json!({"a": 2})).as_deref(),
            Some(r#"{"a":1,"a":2}"#)
        );
        assert_eq!(usable(kept.clone(), "8", &json!({"a": 2})), None);
        // Another request reusing the id with other arguments.
        assert_eq!(usable(kept, "7", &json!({"b": 1})), None);
    }

    fn read_all(tap: &mut Tap<impl AsyncRead + Unpin>) -> Vec<u8> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let mut out = Vec::new();
        rt.block_on(tap.read_to_end(&mut out)).unwrap();
        out
    }

    #[test]
    fn the_tap_passes_bytes_through_and_keeps_across_reads() {
        let lines = concat!(
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"a":1}}}"#,
            "\n",
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"t","arguments":{"a":1,"a":2}}}"#,
            "\n",
        );
        let kept = KeptArguments::default();
        // One byte at a time: lines split across reads.
        let reader = one_byte_reads(lines.as_bytes());
        let mut tap = Tap::new(reader, 1 << 20, kept.clone());
        assert_eq!(read_all(&mut tap), lines.as_bytes());
        assert_eq!(kept.take("1"), None);
        assert_eq!(kept.take("2").unwrap().text, r#"{"a":1,"a":2}"#);
        assert_eq!(kept.take("2"), None, "taken once");
    }

    #[test]
    fn an_overlong_line_is_skipped_and_the_next_one_seen() {
        let dup = r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"t","arguments":{"a":1,"a":2}}}"#;
        let input = format!("{}\n{dup}\n", "x".repeat(500));
        let kept = KeptArguments::default();
        let mut tap = Tap::new(one_byte_reads(input.as_bytes()), 200, kept.clone());
        assert_eq!(read_all(&mut tap), input.as_bytes());
        assert!(kept.take("3").is_some());
    }

    /// A reader that returns one byte per read.
    fn one_byte_reads(bytes: &[u8]) -> impl AsyncRead + Unpin {
        struct OneByte(Vec<u8>, usize);
        impl AsyncRead for OneByte {
            fn poll_read(
                self: Pin<&mut Self>,
                _: &mut Context<'_>,
                buf: &mut ReadBuf<'_>,
            ) -> Poll<std::io::Result<()>> {
                let this = self.get_mut();
                if this.1 < this.0.len() {
                    buf.put_slice(&this.0[this.1..this.1 + 1]);
                    this.1 += 1;
                }
                Poll::Ready(Ok(()))
            }
        }
        OneByte(bytes.to_vec(), 0)
    }
}
