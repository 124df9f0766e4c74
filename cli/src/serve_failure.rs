//! A `serve --stdio` that cannot start tells its client why.
//!
//! An MCP client starts the server itself and often shows only "connection
//! closed" when it exits; the reason on stderr ends up in a log file the
//! user has to find. So when `serve --stdio` fails before it serves (a grant
//! that names no directory, an unreadable lock file, a plugin that does not
//! load), the reason is printed to stderr and also sent as the JSON-RPC
//! error answer to the client's first request, which clients show. Then
//! the process exits 2 as before.

use std::io::{BufRead, IsTerminal, Write};
use std::sync::mpsc;
use std::time::Duration;

/// How long to wait for the client's first request.
const WAIT: Duration = Duration::from_secs(10);

/// JSON-RPC's implementation-defined server error.
const SERVER_ERROR: i64 = -32000;

/// Answers the first request read from stdin (within [`WAIT`]) with an
/// error carrying `reason`. Nothing happens when stdin is a terminal (a
/// person, who reads stderr) or closes without a request.
pub fn tell_stdio_client(reason: &str) {
    if std::io::stdin().is_terminal() {
        return;
    }
    let (tx, rx) = mpsc::channel();
    // The reader may block past WAIT; the process exits anyway.
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { return };
            let Ok(msg) = serde_json::from_str::<serde_json::Value>(&line) else {
                continue;
            };
            if msg.get("method").is_some() && msg.get("id").is_some_and(|id| !id.is_null()) {
                let _ = tx.send(msg["id"].clone());
                return;
            }
        }
    });
    let Ok(id) = rx.recv_timeout(WAIT) else {
        return;
    };
    let answer = answer(&id, reason);
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{answer}").and_then(|()| out.flush());
}

/// The error response to request `id`.
fn answer(id: &serde_json::Value, reason: &str) -> serde_json::Value {
    serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {
            "code": SERVER_ERROR,
            "message": format!("toolhost could not start: {reason}"),
        },
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_answer_is_a_json_rpc_error_for_that_request() {
        let a = super::answer(&serde_json::json!(7), "grant `src` does not exist");
        assert_eq!(a["id"], 7);
        assert_eq!(a["error"]["code"], -32000);
        assert_eq!(
            a["error"]["message"],
            "toolhost could not start: grant `src` does not exist"
        );
    }
}
