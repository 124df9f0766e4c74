"""A scripted MCP session with the official Python SDK client (`mcp`).

Starts the server command given after `--` over stdio, or connects to a
Streamable HTTP endpoint (`--url`, with `--header` lines such as a bearer
token), runs the steps of a JSON script through the SDK's `ClientSession` (so every answer goes through
the SDK's own parsing and, for `tools/call`, its validation of
`structuredContent` against the tool's `outputSchema`), and prints one JSON
line per step:

    {"step": N, "op": ..., "ok": true, "result": <the SDK's result as JSON>}
    {"step": N, "op": ..., "ok": false, "error": "<exception type>: <message>"}

Steps (a JSON array, from the file named by `--steps`, or `-` for stdin):

    {"op": "list"}                                    tools/list, every page
    {"op": "call", "tool": NAME, "arguments": {...}, "meta": {...}?}
                                                      tools/call (with _meta)
    {"op": "read", "uri": URI}                        resources/read
    {"op": "read_links", "of": N}                     resources/read of every
                                                      resource_link in the
                                                      result of step N
    {"op": "follow_ups", "of": N}                     the follow_up call that
                                                      step N's structuredContent
                                                      names, then each answer's
                                                      own (toolhost's envelope,
                                                      truncated.follow_up) until
                                                      none is left
    {"op": "pages", "tool": NAME, "arguments": {...}, "next": FIELD}
                                                      calls the tool, then again
                                                      while structuredContent's
                                                      FIELD is set: an object is
                                                      merged into the arguments,
                                                      a string is the `cursor`
    {"op": "bad", "tool": NAME, "arguments": {...}}   a call that must be
                                                      refused: an isError
                                                      result, or a JSON-RPC
                                                      error (reported as
                                                      {"jsonrpc_error": ...});
                                                      an ok answer fails
    {"op": "approve", "of": N}                        step N's call again (a dry
                                                      run), with the plan_token
                                                      of its answer as
                                                      _meta["dev.toolhost/plan_token"]
    {"op": "find", "query": TEXT, "calls": {NAME: {...}}}
                                                      find_tools (lazy mode),
                                                      tools/list again, then
                                                      a call of the first hit
                                                      named in `calls`, with
                                                      those arguments

The same step language is spoken by tests/mcp_client/ts/client.mjs (the
official TypeScript SDK).

With `--elicit ANSWERS` (a JSON array of ElicitResult objects, such as
{"action": "accept", "content": {"approve": true}}), the client declares
the elicitation capability and answers the server's `elicitation/create`
requests with them, in order (an extra request is cancelled); the
questions asked during a step are in its line as `"elicited"` (message and
requested schema). This option is the Python client's only.

With `--mode VERSION` (`2026-07-28`, or `legacy` for the initialize
handshake), the session is the SDK's high-level `Client` pinned to that
protocol revision instead of a `ClientSession`, and only `call` steps run:
`Client.call_tool` itself answers an `input_required` result through the
elicitation callback and retries (the multi round-trip request). This
option is the Python client's only.

The script only reports; whoever runs it decides what is right. It exits 0
when every step ran (a step the SDK refused is a reported failure, not a
crash), 2 on bad usage.

Usage:
    python sdk_client.py --steps steps.json -- toolhost serve --stdio ...
    python sdk_client.py --steps steps.json --url http://127.0.0.1:8080/mcp \
        [--header "Authorization: Bearer TOKEN"]
"""

import argparse
import json
import sys

import anyio
from mcp import types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError


# toolhost's envelope key in a tools/call result's _meta.
ENVELOPE = "dev.toolhost/observation"
# The _meta key that approves an irreversible call with its dry run's plan.
PLAN_META_KEY = "dev.toolhost/plan_token"
# Most calls one paging step makes.
MAX_CALLS = 10_000


def as_json(value):
    """A SDK result (a pydantic model) as plain JSON, with the wire's names."""
    dump = getattr(value, "model_dump", None)
    if dump is not None:
        return dump(mode="json", by_alias=True, exclude_none=True)
    return value


def links_of(result):
    """The URIs of the resource_link blocks of a tools/call result (as JSON)."""
    return [
        block["uri"]
        for block in result.get("content", [])
        if block.get("type") == "resource_link"
    ]


async def run_step(session, step, results, steps_of):
    op = step.get("op")
    if op == "list":
        tools, cursor = [], None
        while True:
            page = await session.list_tools(cursor=cursor) if cursor else await session.list_tools()
            tools.extend(as_json(t) for t in page.tools)
            cursor = page.next_cursor
            if not cursor:
                return {"tools": tools}
    if op == "call":
        result = await session.call_tool(
            step["tool"], step.get("arguments", {}), meta=step.get("meta")
        )
        return as_json(result)
    if op == "read":
        return as_json(await session.read_resource(step["uri"]))
    if op == "read_links":
        earlier = results[step["of"]]
        if not earlier.get("ok"):
            raise RuntimeError(f"step {step['of']} failed: nothing to read")
        reads = []
        for uri in links_of(earlier["result"]):
            reads.append(as_json(await session.read_resource(uri)))
        return {"reads": reads}
    if op == "follow_ups":
        earlier = results[step["of"]]
        if not earlier.get("ok"):
            raise RuntimeError(f"step {step['of']} failed: nothing to follow")
        follow = (earlier["result"].get("structuredContent") or {}).get("follow_up")
        answers = []
        while follow and len(answers) < MAX_CALLS:
            result = as_json(await session.call_tool(follow["tool"], follow["arguments"]))
            answers.append(result)
            envelope = result.get("_meta", {}).get(ENVELOPE, {})
            follow = (envelope.get("truncated") or {}).get("follow_up")
        return {"answers": answers}
    if op == "pages":
        arguments = dict(step.get("arguments", {}))
        answers = []
        while len(answers) < MAX_CALLS:
            result = as_json(await session.call_tool(step["tool"], arguments))
            answers.append(result)
            nxt = (result.get("structuredContent") or {}).get(step["next"])
            if isinstance(nxt, dict):
                arguments.update(nxt)
            elif isinstance(nxt, str):
                arguments["cursor"] = nxt
            else:
                break
        return {"answers": answers}
    if op == "bad":
        try:
            result = as_json(await session.call_tool(step["tool"], step.get("arguments", {})))
        except MCPError as e:
            return {"jsonrpc_error": {"code": e.error.code, "message": e.error.message}}
        if not result.get("isError"):
            raise RuntimeError(f"expected an error, got an ok answer: {json.dumps(result)}")
        return result
    if op == "approve":
        earlier = results[step["of"]]
        if not earlier.get("ok"):
            raise RuntimeError(f"step {step['of']} failed: no plan to approve")
        token = (earlier["result"].get("structuredContent") or {}).get("plan_token")
        if not token:
            raise RuntimeError(f"step {step['of']} answered no plan_token")
        planned = steps_of[step["of"]]
        result = await session.call_tool(
            planned["tool"], planned.get("arguments", {}), meta={PLAN_META_KEY: token}
        )
        return as_json(result)
    if op == "find":
        found = as_json(await session.call_tool("find_tools", {"query": step["query"]}))
        hits = [t["name"] for t in (found.get("structuredContent") or {}).get("tools", [])]
        name = next((h for h in hits if h in step["calls"]), None)
        if name is None:
            raise RuntimeError(f"find_tools found none of {sorted(step['calls'])}: {hits}")
        listed = [t.name for t in (await session.list_tools()).tools]
        called = as_json(await session.call_tool(name, step["calls"][name]))
        return {"found": found, "hits": hits, "listed": listed, "called": name, "result": called}
    raise ValueError(f"unknown op {op!r}")


class Answers:
    """The elicitation callback: answers in order, the questions kept."""

    def __init__(self, answers):
        self.answers = list(answers)
        self.asked = []

    async def __call__(self, context, params):
        self.asked.append(
            {
                "message": params.message,
                "requestedSchema": as_json(getattr(params, "requested_schema", None)),
            }
        )
        answer = self.answers.pop(0) if self.answers else {"action": "cancel"}
        return types.ElicitResult(**answer)


async def run_steps(session, steps, answers=None):
    await session.initialize()
    results = []
    for n, step in enumerate(steps):
        line = {"step": n, "op": step.get("op")}
        if answers is not None:
            answers.asked.clear()
        try:
            line["result"] = await run_step(session, step, results, steps)
            line["ok"] = True
        except Exception as e:  # reported, so the caller sees the SDK's refusal
            line["ok"] = False
            line["error"] = f"{type(e).__name__}: {e}"
        if answers is not None and answers.asked:
            line["elicited"] = list(answers.asked)
        results.append(line)
        print(json.dumps(line), flush=True)


async def run_client_steps(client, steps, answers=None):
    """`call` steps through the high-level `Client` (see `--mode`)."""
    for n, step in enumerate(steps):
        line = {"step": n, "op": step.get("op")}
        if answers is not None:
            answers.asked.clear()
        try:
            if step.get("op") != "call":
                raise ValueError(f"only call steps run with --mode, not {step.get('op')!r}")
            result = await client.call_tool(
                step["tool"], step.get("arguments", {}), meta=step.get("meta")
            )
            line["result"] = as_json(result)
            line["ok"] = True
        except Exception as e:  # reported, so the caller sees the SDK's refusal
            line["ok"] = False
            line["error"] = f"{type(e).__name__}: {e}"
        if answers is not None and answers.asked:
            line["elicited"] = list(answers.asked)
        print(json.dumps(line), flush=True)


async def main_client(steps, command, url, mode, answers=None):
    from mcp.client.client import Client

    callback = {"elicitation_callback": answers} if answers is not None else {}
    server = url or StdioServerParameters(command=command[0], args=command[1:])
    async with Client(server, mode=mode, **callback) as client:
        await run_client_steps(client, steps, answers)


async def main(steps, command, url, headers, answers=None):
    callback = {"elicitation_callback": answers} if answers is not None else {}
    if url:
        http = create_mcp_http_client(headers=headers)
        async with http, streamable_http_client(url, http_client=http) as streams:
            read, write = streams[0], streams[1]
            async with ClientSession(read, write, **callback) as session:
                await run_steps(session, steps, answers)
        return
    server = StdioServerParameters(command=command[0], args=command[1:])
    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write, **callback) as session:
            await run_steps(session, steps, answers)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", required=True, help="JSON file of steps, or - for stdin")
    parser.add_argument("--url", help="a Streamable HTTP endpoint, instead of a server command")
    parser.add_argument(
        "--header", action="append", default=[], help='"Name: value" on every HTTP request'
    )
    parser.add_argument(
        "--elicit", help="JSON array of answers to elicitation/create, in order"
    )
    parser.add_argument(
        "--mode", help="run call steps through Client pinned to this protocol revision"
    )
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- SERVER COMMAND...")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if bool(command) == bool(args.url):
        parser.error("give either --url or a server command (after --)")
    headers = {}
    for h in args.header:
        name, sep, value = h.partition(":")
        if not sep:
            parser.error(f"--header {h!r}: expected NAME: VALUE")
        headers[name.strip()] = value.strip()
    with (sys.stdin if args.steps == "-" else open(args.steps)) as f:
        steps = json.load(f)
    answers = Answers(json.loads(args.elicit)) if args.elicit else None
    if args.mode:
        if headers:
            parser.error("--header is not supported with --mode")
        anyio.run(main_client, steps, command, args.url, args.mode, answers)
    else:
        anyio.run(main, steps, command, args.url, headers, answers)
