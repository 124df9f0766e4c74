"""Drives a toolhost fleet through its proxy with the official MCP Python SDK.

Usage: fleet_client.py URL PHASE

Phases (each prints one JSON object and exits 0 when its checks hold):

  spread    30 stateless (2026-07-28) reads, 4 sessions (2025-11-25) of 5
            reads each, and one keyed edit sent 10 times: every read ok, the
            edit applied once and replayed 9 times
  reads     30 stateless reads, every one ok (after a host was killed)
  approve   3 deletions asked of the person as input_required round trips
            (round robin: the retry usually reaches another host): the
            approved one runs once, the declined and cancelled ones do not
"""

import json
import sys
import time

import anyio
from mcp.client.client import Client
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client


def observation(result):
    meta = result.meta or {}
    return meta.get("dev.toolhost/observation", {})


async def stateless_reads(url, n):
    statuses = []
    async with Client(url, mode="2026-07-28") as client:
        for _ in range(n):
            result = await client.call_tool("file_view", {"path": "notes.txt"})
            statuses.append(observation(result).get("status"))
    return statuses


async def session_reads(url, sessions, n):
    statuses = []
    for _ in range(sessions):
        async with streamable_http_client(url) as streams:
            async with ClientSession(streams[0], streams[1]) as session:
                await session.initialize()
                for _ in range(n):
                    result = await session.call_tool("file_view", {"path": "notes.txt"})
                    statuses.append(observation(result).get("status"))
    return statuses


async def keyed_edit(url, n):
    meta = {
        "dev.toolhost/trajectory_id": "fleet-edit",
        "dev.toolhost/turn": 1,
        "dev.toolhost/call_id": "edit-1",
    }
    args = {"path": "counter.txt", "old_str": "count=0", "new_str": "count=1"}
    outcomes = []
    async with Client(url, mode="2026-07-28") as client:
        for _ in range(n):
            result = await client.call_tool("file_edit", args, meta=meta)
            obs = observation(result)
            outcomes.append(
                {"status": obs.get("status"), "replayed": obs.get("effects", {}).get("replayed")}
            )
    return outcomes


class Answers:
    """The elicitation callback: answers in order."""

    def __init__(self, answers):
        self.answers = list(answers)

    async def __call__(self, context, params):
        from mcp import types

        answer = self.answers.pop(0) if self.answers else {"action": "cancel"}
        return types.ElicitResult(**answer)


async def deletions(url):
    answers = Answers(
        [{"action": "accept", "content": {"approve": True}}, {"action": "decline"}, {"action": "cancel"}]
    )
    codes = []
    async with Client(url, mode="2026-07-28", elicitation_callback=answers) as client:
        for name in ["gone.txt", "kept1.txt", "kept2.txt"]:
            result = await client.call_tool("file_delete", {"path": name})
            obs = observation(result)
            codes.append(obs.get("status") if obs.get("error") is None else obs["error"]["code"])
    return codes


async def main(url, phase):
    started = time.monotonic()
    if phase == "spread":
        reads = await stateless_reads(url, 30)
        session = await session_reads(url, 4, 5)
        edits = await keyed_edit(url, 10)
        elapsed = time.monotonic() - started
        report = {
            "reads_ok": reads.count("ok"),
            "session_reads_ok": session.count("ok"),
            "edits_ok": sum(1 for e in edits if e["status"] == "ok"),
            "edits_run": sum(1 for e in edits if e["replayed"] is False),
            "calls_per_s": round((len(reads) + len(session) + len(edits)) / elapsed, 1),
        }
        ok = (
            report["reads_ok"] == 30
            and report["session_reads_ok"] == 20
            and report["edits_ok"] == 10
            and report["edits_run"] == 1
        )
    elif phase == "approve":
        codes = await deletions(url)
        report = {"outcomes": codes}
        ok = codes == ["ok", "approval_declined", "approval_pending"]
    elif phase == "reads":
        reads = await stateless_reads(url, 30)
        report = {"reads_ok": reads.count("ok")}
        ok = report["reads_ok"] == 30
    else:
        raise SystemExit(f"unknown phase {phase!r}")
    report["ok"] = ok
    print(json.dumps(report), flush=True)
    return ok


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    sys.exit(0 if anyio.run(main, sys.argv[1], sys.argv[2]) else 1)
