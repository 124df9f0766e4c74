//! A tool asks the person behind the client (`toolhost:plugin/client`):
//! within the call on a 2025-11-25 session, as an `input_required` round
//! trip on a 2026-07-28 request; never when the client cannot answer.

use serde_json::{json, Value};

use crate::mcp::{HttpServer, Setup, StdioServer};

/// A stdio server with the conformance fixtures whose client declares
/// form elicitation.
fn asking_client(setup: &Setup) -> StdioServer {
    let mut s = StdioServer::start(setup, &[]);
    let init = s.request(
        0,
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {"form": {}}},
               "clientInfo": {"name": "asker", "version": "2"}}),
    );
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{init}");
    s.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    s
}

/// Calls `test_elicitation`, answers its question with `answer` and
/// returns the question and the call's result.
fn ask_and_answer(s: &mut StdioServer, id: i64, answer: Value) -> (Value, Value) {
    s.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                   "params": {"name": "test_elicitation", "arguments": {"message": "Who are you?"}}}));
    let question = s.wait_for("elicitation/create", |v| {
        v["method"] == "elicitation/create"
    });
    s.send(&json!({"jsonrpc": "2.0", "id": question["id"], "result": answer}));
    (question, s.response(id))
}

fn first_text(reply: &Value) -> String {
    reply["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn error_code(reply: &Value) -> Value {
    reply["result"]["_meta"]["dev.toolhost/observation"]["error"]["code"].clone()
}

#[test]
fn a_tool_asks_the_person_within_a_2025_session() {
    let setup = Setup::new(&["tp_conformance"]);
    let mut s = asking_client(&setup);

    let (question, reply) = ask_and_answer(
        &mut s,
        1,
        json!({"action": "accept", "content": {"username": "ada", "email": "ada@example.com"}}),
    );
    let params = &question["params"];
    assert_eq!(params["message"], "Who are you?", "{question}");
    assert_eq!(params["mode"], "form", "{question}");
    assert_eq!(
        params["requestedSchema"]["required"],
        json!(["username", "email"])
    );
    let text = first_text(&reply);
    assert!(
        text.starts_with("User response: action=accept") && text.contains("ada@example.com"),
        "{reply}"
    );
    // The answer is a source of the output, with its digest.
    let provenance = &reply["result"]["_meta"]["dev.toolhost/observation"]["provenance"];
    assert_eq!(provenance[0]["kind"], "person", "{reply}");
    assert_eq!(provenance[0]["ref"], "user_info", "{reply}");
    assert_eq!(provenance[0]["sha256"].as_str().unwrap().len(), 64);

    // An answer that breaks the question's schema never reaches the tool.
    let (_, reply) = ask_and_answer(
        &mut s,
        2,
        json!({"action": "accept", "content": {"username": "ada"}}),
    );
    assert_eq!(error_code(&reply), "invalid_question", "{reply}");
    let message = reply["result"]["_meta"]["dev.toolhost/observation"]["error"]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(message.contains("does not match"), "{message}");

    let (_, reply) = ask_and_answer(&mut s, 3, json!({"action": "decline"}));
    assert_eq!(
        first_text(&reply),
        "User response: action=decline, content={}"
    );

    // The journal keeps which questions were answered, not the answers
    // (its writer batches for up to 50 ms).
    std::thread::sleep(std::time::Duration::from_millis(300));
    let store = setup.state.path().join("records.sqlite");
    let out = crate::support::toolhost_command(
        &["log", "--json", "--store", store.to_str().unwrap()],
        setup.ws.dir.path(),
    )
    .output()
    .unwrap();
    let log: Value = serde_json::from_slice(&out.stdout).unwrap();
    let asked: Vec<&Value> = log
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["tool"] == "test_elicitation")
        .map(|e| &e["args_summary"]["questions"])
        .collect();
    assert_eq!(asked.len(), 3, "{log:#}");
    assert_eq!(asked[0][0]["key"], "user_info", "{log:#}");
    assert!(!log.to_string().contains("ada@example.com"), "{log:#}");
}

#[test]
fn a_client_that_cannot_answer_is_unavailable_to_the_tool() {
    let setup = Setup::new(&["tp_conformance"]);
    let mut s = StdioServer::initialized(&setup, &[]);
    let reply = s.call(1, "test_elicitation", json!({"message": "Who are you?"}));
    assert_eq!(error_code(&reply), "ask_unavailable", "{reply}");
}

/// A 2026-07-28 `tools/call` of `tool` with `arguments` whose client
/// declares elicitation; `retry` adds a `requestState` and
/// `inputResponses`.
fn stateless_call(
    server: &HttpServer,
    id: i64,
    tool: &str,
    arguments: Value,
    retry: Option<(&str, Value)>,
) -> Value {
    let mut params = json!({
        "name": tool,
        "arguments": arguments,
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
            "io.modelcontextprotocol/clientInfo": {"name": "mrtr", "version": "1"}
        }
    });
    if let Some((state, responses)) = retry {
        params["requestState"] = json!(state);
        params["inputResponses"] = responses;
    }
    let r = server.post_json(
        &[
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", tool),
        ],
        &json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    r.reply()
}

#[test]
fn a_stateless_question_round_trips_bound_to_its_call() {
    let setup = Setup::new(&["tp_conformance"]);
    let server = HttpServer::start(&setup, &[]);
    let tool = "test_input_required_result_multi_round";

    let first = stateless_call(&server, 1, tool, json!({}), None);
    assert_eq!(first["result"]["resultType"], "input_required", "{first}");
    let step1 = &first["result"]["inputRequests"]["step1"];
    assert_eq!(step1["method"], "elicitation/create", "{first}");
    let state1 = first["result"]["requestState"]
        .as_str()
        .unwrap()
        .to_string();

    // A wrong key is not an answer: the same question again.
    let again = stateless_call(
        &server,
        2,
        tool,
        json!({}),
        Some((
            &state1,
            json!({"wrong": {"action": "accept", "content": {"name": "x"}}}),
        )),
    );
    assert!(
        again["result"]["inputRequests"]["step1"].is_object(),
        "{again}"
    );

    // The answer to step 1 brings step 2; the new state carries step 1.
    let second = stateless_call(
        &server,
        3,
        tool,
        json!({}),
        Some((
            &state1,
            json!({"step1": {"action": "accept", "content": {"name": "Ada"}}}),
        )),
    );
    assert!(
        second["result"]["inputRequests"]["step2"].is_object(),
        "{second}"
    );
    let state2 = second["result"]["requestState"]
        .as_str()
        .unwrap()
        .to_string();
    let done = stateless_call(
        &server,
        4,
        tool,
        json!({}),
        Some((
            &state2,
            json!({"step2": {"action": "accept", "content": {"color": "teal"}}}),
        )),
    );
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
    assert_eq!(first_text(&done), "Ada likes teal");

    // The state of one call is refused with another call: other arguments,
    // another tool, or one byte changed.
    let other_args = stateless_call(
        &server,
        5,
        "test_elicitation",
        json!({"message": "B"}),
        Some((&state2, json!({}))),
    );
    assert_eq!(other_args["error"]["code"], -32602, "{other_args}");
    assert_eq!(other_args["error"]["data"]["field"], "requestState");
    let mut tampered = state2.clone().into_bytes();
    let at = tampered.len() - 1;
    tampered[at] = if tampered[at] == b'0' { b'1' } else { b'0' };
    let tampered = String::from_utf8(tampered).unwrap();
    let refused = stateless_call(&server, 6, tool, json!({}), Some((&tampered, json!({}))));
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
}

/// The official Python SDK's `Client`, in both protocol revisions over
/// HTTP: a tool's two questions reach its elicitation callback (within
/// the call on 2025-11-25, as two `input_required` rounds on 2026-07-28)
/// and the answers reach the tool.
#[test]
fn python_sdk_answers_a_tools_questions_in_both_revisions() {
    use crate::sdk_clients::{client, run_client, Sdk};
    let setup = Setup::new(&["tp_conformance"]);
    let server = HttpServer::start(&setup, &[]);
    for mode in ["legacy", "2026-07-28"] {
        let mut cmd = client(Sdk::Python);
        cmd.args(["--mode", mode, "--url"])
            .arg(format!("http://127.0.0.1:{}/mcp", server.port))
            .arg("--elicit")
            .arg(
                json!([
                    {"action": "accept", "content": {"name": "Ada"}},
                    {"action": "accept", "content": {"color": "teal"}},
                ])
                .to_string(),
            );
        let r = run_client(
            Sdk::Python,
            cmd,
            &json!([{"op": "call", "tool": "test_input_required_result_multi_round", "arguments": {}}]),
        );
        assert_eq!(r[0]["ok"], true, "{mode}: {}", r[0]);
        assert_eq!(
            r[0]["result"]["content"][0]["text"], "Ada likes teal",
            "{mode}: {}",
            r[0]
        );
        let asked: Vec<&str> = r[0]["elicited"]
            .as_array()
            .unwrap()
            .iter()
            .map(|q| q["message"].as_str().unwrap())
            .collect();
        assert_eq!(
            asked,
            [
                "Step 1: What is your name?",
                "Step 2: What is your favorite color?"
            ],
            "{mode}"
        );
    }
}

/// A component that imports the client interface is shown as one whose
/// tools may ask; one that does not, is not.
#[test]
fn plugin_list_says_which_plugins_may_ask() {
    let conformance = crate::support::test_plugin("tp_conformance");
    let out = crate::support::toolhost_command(
        &[
            "--plugin",
            conformance.to_str().unwrap(),
            "plugin",
            "list",
            "--json",
        ],
        &crate::support::repo_root(),
    )
    .output()
    .unwrap();
    assert!(out.status.success(), "{out:?}");
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    let asks = |name: &str| {
        list["plugins"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("{name} in {list:#}"))["asks"]
            .clone()
    };
    assert_eq!(asks("tp_conformance"), true);
    assert_eq!(asks("builtin:reference"), false);
}
