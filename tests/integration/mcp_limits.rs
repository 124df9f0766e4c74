//! `toolhost serve` under abuse: a client that reuses a request id.

use std::time::Duration;

use serde_json::json;

use crate::mcp::{observation_of, Setup, StdioServer};

#[test]
fn stdio_a_reused_request_id_gets_its_own_error_answer() {
    let setup = Setup::new(&["tp_hostile"]);
    let mut server = StdioServer::initialized(
        &setup,
        &["--timeout-ms", "3000", "--fuel", "1000000000000000"],
    );
    // A call that runs until its deadline, then a second request with the
    // same id while it runs.
    server.send(&json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
        "params": {"name": "spin_forever", "arguments": {}}}));
    std::thread::sleep(Duration::from_millis(300));
    server.send(&json!({"jsonrpc": "2.0", "id": 5, "method": "tools/list", "params": {}}));
    let refusal = server.response(5);
    assert_eq!(refusal["error"]["code"], -32600, "{refusal}");
    assert!(
        refusal["error"]["message"]
            .as_str()
            .unwrap()
            .contains("already in use"),
        "{refusal}"
    );
    // The first request still gets its own answer.
    let answer = server.response(5);
    assert_eq!(
        observation_of(&answer)["error"]["code"],
        "timeout",
        "{answer}"
    );
    // Answered: the id is free again.
    let list = server.request(5, "tools/list", json!({}));
    assert!(list["result"]["tools"].is_array(), "{list}");
}
