"""A minimal MCP server over stdio (plain python3, no packages) whose one
tool, `count`, declares an outputSchema and answers structuredContent that
does not conform to it. The SDK clients must refuse that answer: it shows
their result validation is on (tests/integration/sdk_clients.rs)."""

import json
import sys

TOOL = {
    "name": "count",
    "description": "Counts.",
    "inputSchema": {"type": "object"},
    "outputSchema": {
        "type": "object",
        "properties": {"n": {"type": "integer"}},
        "required": ["n"],
    },
}

for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    method = msg.get("method")
    if method == "initialize":
        result = {
            "protocolVersion": msg["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "nonconforming", "version": "1"},
        }
    elif method == "tools/list":
        result = {"tools": [TOOL]}
    elif method == "tools/call":
        result = {
            "content": [{"type": "text", "text": "n is a string here"}],
            "structuredContent": {"n": "not a number"},
            "isError": False,
        }
    else:
        print(json.dumps({"jsonrpc": "2.0", "id": msg["id"],
                          "error": {"code": -32601, "message": "no such method"}}), flush=True)
        continue
    print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}), flush=True)
