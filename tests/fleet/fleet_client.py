"""Drives a toolhost fleet through its proxy with the official MCP Python SDK.

Usage: fleet_client.py URL PHASE

Phases (each prints one JSON object and exits 0 when its checks hold):

  spread    30 stateless (2026-07-28) reads, 4 sessions (2025-11-25) of 5
            reads each, and one keyed edit sent 10 times: every read ok, the
            edit applied once and replayed 9 times
  reads     30 stateless reads, every one ok (after a host was killed)
  load      32 concurrent agents for TOOLHOST_FLEET_LOAD_SECONDS (default
            60): 16 readers, and 16 editors appending unique lines to 4
            shared files, each edit named by an idempotency key and resent
            until acknowledged, every fifth resent once more on purpose;
            half the readers in stateless requests, half in 2025-11-25
            sessions; 2 of the readers read a file into a spill and read it
            back through the proxy; 2 (with the tokens in
            TOOLHOST_FLEET_FINDERS, against hosts serving --lazy-tools)
            find file_view with find_tools, check it is listed after the
            search (stateless: through every host; in a session: in that
            session) and not before, and call it;
            and 1 (with TOOLHOST_FLEET_PARENT, a token that may delegate)
            delegates two children, revokes one half-way through and calls
            every host with both; after the load every spill is read
            through every host. Prints every acknowledged edit, the error
            times and latencies for tests/fleet/run.sh to check against the
            files and journal
  budget    32 concurrent 2025-11-25 sessions (spread over the hosts) read
            with the bearer token in TOOLHOST_FLEET_TOKEN until refused:
            prints how many ran and how many were `denied` naming the
            `max_calls` caveat
  one       one read with the bearer token in TOOLHOST_FLEET_TOKEN: prints
            its status or error code (exit 0 either way)
  approve   3 deletions asked of the person as input_required round trips
            (round robin: the retry usually reaches another host): the
            approved one runs once, the declined and cancelled ones do not
"""

import json
import os
import sys
import time

import anyio
from mcp.client.client import Client
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


def describe(e):
    """The innermost error of an exception group, as one line."""
    while isinstance(e, BaseExceptionGroup) and e.exceptions:
        e = e.exceptions[0]
    return f"{type(e).__name__}: {e}"[:300]


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


async def budget_agent(url, token, counts):
    """Reads in one session with the token until the budget refuses."""
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with http, streamable_http_client(url, http_client=http) as streams:
        async with ClientSession(streams[0], streams[1]) as session:
            await session.initialize()
            while True:
                result = await session.call_tool("file_view", {"path": "notes.txt"})
                obs = observation(result)
                if obs.get("status") == "ok":
                    counts["ran"] += 1
                    continue
                error = obs.get("error") or {}
                details = error.get("details") or {}
                key = error.get("code", "?") + ":" + str(details.get("caveat", ""))
                counts[key] = counts.get(key, 0) + 1
                return


async def one_read(url, token):
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with http, streamable_http_client(url, http_client=http) as streams:
        async with ClientSession(streams[0], streams[1]) as session:
            await session.initialize()
            result = await session.call_tool("file_view", {"path": "notes.txt"})
            obs = observation(result)
            error = obs.get("error")
            return obs.get("status") if error is None else error.get("code")


# Each host's own MCP URL (deploy/fleet.sh writes them to its `hosts` file).
HOST_URLS = os.environ.get(
    "TOOLHOST_FLEET_HOSTS",
    "http://127.0.0.1:7401/mcp http://127.0.0.1:7402/mcp http://127.0.0.1:7403/mcp",
).split()


def bearer(token):
    return create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})


async def listed(url, token, mode):
    """The tool names a fresh client with the token lists at `url`."""
    with anyio.fail_after(10):
        http = bearer(token)
        async with http, Client(streamable_http_client(url, http_client=http), mode=mode, cache=None) as client:
            return {t.name for t in (await client.list_tools()).tools}


def lazy_ok(lazy):
    """Both finders ran rounds; the stateless one's token listed no hit
    before its first search and the hit through every host after it; each
    2025-11-25 session listed the hit only after its search."""
    stateless, session = lazy.get("2026-07-28", {}), lazy.get("legacy", {})
    return (
        stateless.get("rounds", 0) > 0
        and stateless.get("listed_before_search") is False
        and stateless.get("listed_by") == HOST_URLS
        and session.get("rounds", 0) > 0
        and session.get("listed_after") >= session["rounds"]
        and session.get("unlisted_before") >= session["rounds"]
    )


async def read_with(url, token):
    """One read in a 2025-11-25 session with the bearer token: its status
    or error code."""
    with anyio.fail_after(10):
        return await one_read(url, token)


async def delegate(url, token):
    """A child token from the `delegate` host tool: {"token", "id"}."""
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with http, streamable_http_client(url, http_client=http) as streams:
        async with ClientSession(streams[0], streams[1]) as session:
            await session.initialize()
            result = await session.call_tool("delegate", {"tools": ["file_view"], "read": ["."]})
            out = result.structured_content or {}
            if not out.get("token"):
                raise RuntimeError(f"delegate: {json.dumps(observation(result))[:200]}")
            return {"token": out["token"], "id": out["id"]}


async def read_spill(url, uri):
    """resources/read of a spill in a 2025-11-25 session: the SHA-256 of
    its text."""
    import hashlib

    with anyio.fail_after(10):
        async with streamable_http_client(url) as streams:
            async with ClientSession(streams[0], streams[1]) as session:
                await session.initialize()
                result = await session.read_resource(uri)
                text = "".join(getattr(c, "text", "") or "" for c in result.contents)
                if not text:
                    raise RuntimeError("empty resource")
                return hashlib.sha256(text.encode()).hexdigest()


async def budget(url, token, agents):
    counts = {"ran": 0}
    async with anyio.create_task_group() as tg:
        for _ in range(agents):
            tg.start_soon(budget_agent, url, token, counts)
    return counts


LOAD_FILES = ["load-0.txt", "load-1.txt", "load-2.txt", "load-3.txt"]


def edit_meta(agent, n):
    return {
        "dev.toolhost/trajectory_id": f"load-{agent}",
        "dev.toolhost/turn": n,
        "dev.toolhost/call_id": f"a{agent}-e{n}",
    }


class Load:
    """What the load agents saw: latencies, acknowledged edits, errors."""

    def __init__(self, seconds):
        self.deadline = time.monotonic() + seconds
        self.latencies = []
        self.acked = []  # [file, line, ok answers, attempts without an answer]
        self.errors = []  # [wall-clock time, what] of failed attempts
        self.unsettled = []  # edits never acknowledged
        self.reads_ok = 0
        self.drain_refusals = 0
        self.reads_failed = 0
        self.resent = 0
        self.resent_replayed = 0
        self.spills = []  # [uri, sha256 of its text when first read back]
        self.spills_unread = 0
        self.finds_ok = 0
        self.finds_wrong = []  # queries whose best hit was not file_view
        self.child = {}  # what the orchestrator saw
        self.lazy = {}  # what the finders saw, by protocol era

    async def call(self, client, tool, args, meta=None):
        started = time.monotonic()
        try:
            for _ in range(3):
                try:
                    result = await client.call_tool(tool, args, meta=meta)
                    break
                except Exception as e:
                    # A draining host answers 503 to a request that reached
                    # it after the stop (the proxy retries those), and runs
                    # one let in before; a refusal here ("did not run") is
                    # counted, and the test fails on any.
                    if "the call did not run" not in str(e):
                        raise
                    self.drain_refusals += 1
            else:
                raise RuntimeError("refused three times by draining hosts")
        except Exception as e:
            self.errors.append([time.time(), f"{tool}: " + describe(e)])
            return None
        self.latencies.append(time.monotonic() - started)
        obs = dict(observation(result))
        obs["output"] = result.structured_content
        if obs.get("status") != "ok":
            self.errors.append([time.time(), f"{tool}: {json.dumps(obs.get('error'))}"[:300]])
        return obs

    async def reader(self, url, mode):
        """Reads notes.txt: `mode` "2026-07-28" sends stateless requests
        (round robin over the hosts), "legacy" keeps one 2025-11-25
        session (the proxy holds it to one host by its Mcp-Session-Id)."""
        while time.monotonic() < self.deadline:
            try:
                async with Client(url, mode=mode) as client:
                    while time.monotonic() < self.deadline:
                        obs = await self.call(client, "file_view", {"path": "notes.txt"})
                        if obs is None:
                            break  # a fresh client after a transport error
                        if obs.get("status") == "ok":
                            self.reads_ok += 1
                        else:
                            self.reads_failed += 1
            except Exception as e:
                self.errors.append([time.time(), "client: " + describe(e)])
                await anyio.sleep(0.1)

    async def edit_once(self, url, agent, n, path, line):
        """Sends one keyed edit until a host acknowledges it (30 s at most);
        returns the observation and how many attempts got no answer."""
        meta = edit_meta(agent, n)
        args = {"path": path, "old_str": "END\n", "new_str": f"{line}\nEND\n"}
        give_up = time.monotonic() + 30
        cut = 0
        while time.monotonic() < give_up:
            try:
                async with Client(url, mode="2026-07-28") as client:
                    obs = await self.call(client, "file_edit", args, meta)
                    if obs is None:
                        cut += 1
                    elif obs.get("status") == "ok":
                        return obs, cut
            except Exception as e:
                cut += 1
                self.errors.append([time.time(), "client: " + describe(e)])
            await anyio.sleep(0.2)
        return None, cut

    async def editor(self, url, agent):
        path = LOAD_FILES[agent % len(LOAD_FILES)]
        n = 0
        while time.monotonic() < self.deadline:
            n += 1
            line = f"a{agent}-e{n}"
            obs, cut = await self.edit_once(url, agent, n, path, line)
            if obs is None:
                self.unsettled.append(line)
                continue
            answers = 1
            if n % 5 == 0:
                # A retry of an acknowledged edit: it must not run again.
                self.resent += 1
                again, more = await self.edit_once(url, agent, n, path, line)
                cut += more
                if again is not None:
                    answers += 1
                    if again.get("effects", {}).get("replayed") is True:
                        self.resent_replayed += 1
            self.acked.append([path, line, answers, cut])

    async def spiller(self, url):
        """Reads 400 long lines (over the output limit, so the result is
        spilled), then reads the spill back through the proxy with a fresh
        client, which usually reaches another host."""
        while time.monotonic() < self.deadline:
            try:
                async with Client(url, mode="2026-07-28") as client:
                    obs = await self.call(client, "file_view", {"path": "spill.txt", "limit": 400})
                if obs is None or obs.get("status") != "ok":
                    continue
                artifact = (obs.get("truncated") or {}).get("artifact")
                uri = f"toolhost://artifacts/{artifact}" if isinstance(artifact, str) else None
                if not uri:
                    self.errors.append([time.time(), f"file_view: not spilled: {json.dumps(obs)[:200]}"])
                    self.spills_unread += 1
                    continue
                digest = None
                for _ in range(20):
                    try:
                        digest = await read_spill(url, uri)
                        break
                    except Exception as e:
                        self.errors.append([time.time(), "resources/read: " + describe(e)])
                        await anyio.sleep(0.25)
                if digest is None:
                    self.spills_unread += 1
                else:
                    self.spills.append([uri, digest])
            except Exception as e:
                self.errors.append([time.time(), "client: " + describe(e)])
                await anyio.sleep(0.1)

    async def listed_at(self, host, token, mode):
        """`listed` at one host, tried for up to 5 s (a host may be
        restarting); no names when it never answers."""
        for _ in range(10):
            try:
                return await listed(host, token, mode)
            except Exception as e:
                self.errors.append([time.time(), "tools/list: " + describe(e)])
                await anyio.sleep(0.5)
        return set()

    async def finder(self, url, query, token, mode):
        """Lazy discovery (the hosts serve `--lazy-tools`) with a token of
        its own: `find_tools`, then a call of the best hit.

        Stateless (`mode` "2026-07-28"): a fresh token lists `find_tools`
        alone; after its first search the reveal is kept in the shared
        store by the token, so each host, asked directly, lists the hit.
        In a 2025-11-25 session (`mode` "legacy") the reveal is kept by
        the session: each round opens one, checks the hit is not listed,
        searches, and checks it is."""
        lazy = self.lazy.setdefault(mode, {"rounds": 0})
        if mode == "legacy":
            lazy.update(unlisted_before=0, listed_after=0)
        if mode != "legacy":
            lazy["listed_before_search"] = "file_view" in await self.listed_at(HOST_URLS[0], token, mode)
        while time.monotonic() < self.deadline:
            try:
                http = bearer(token)
                async with http, Client(streamable_http_client(url, http_client=http), mode=mode, cache=None) as client:
                    if mode == "legacy":
                        before = {t.name for t in (await client.list_tools()).tools}
                        lazy["unlisted_before"] += "file_view" not in before
                    found = await self.call(client, "find_tools", {"query": query, "limit": 3})
                    if found is None or found.get("status") != "ok":
                        continue
                    best = ((found.get("output") or {}).get("tools") or [{}])[0].get("name")
                    if best != "file_view":
                        self.finds_wrong.append([query, best])
                        continue
                    if mode == "legacy":
                        after = {t.name for t in (await client.list_tools()).tools}
                        lazy["listed_after"] += best in after
                    elif "listed_by" not in lazy:
                        lazy["listed_by"] = [h for h in HOST_URLS if best in await self.listed_at(h, token, mode)]
                    obs = await self.call(client, best, {"path": "notes.txt"})
                    if obs is not None and obs.get("status") == "ok":
                        self.finds_ok += 1
                        lazy["rounds"] += 1
            except Exception as e:
                self.errors.append([time.time(), "client: " + describe(e)])
                await anyio.sleep(0.1)

    async def orchestrator(self, url, parent, revoke_at):
        """Delegates two children from `parent`, runs both, revokes the
        first `revoke_at` seconds in (`toolhost cap revoke`, as an operator
        would), then calls every host directly with each child until each
        host was called twice with the revoked one more than 1 s after the
        revocation: it must be refused by every host then, the other keeps
        working."""
        c = self.child
        children = []
        for _ in range(2):
            for _ in range(20):
                try:
                    out = await delegate(url, parent)
                    children.append(out)
                    break
                except Exception as e:
                    self.errors.append([time.time(), "delegate: " + describe(e)])
                    await anyio.sleep(0.25)
        if len(children) != 2:
            c["failed"] = "could not delegate two children"
            return
        c["ran_before"] = 0
        while time.monotonic() < revoke_at:
            for child in children:
                try:
                    if await read_with(url, child["token"]) == "ok":
                        c["ran_before"] += 1
                except Exception as e:
                    self.errors.append([time.time(), "child: " + describe(e)])
            await anyio.sleep(0.05)
        proc = await anyio.run_process(
            [os.environ["TOOLHOST_BIN"], "cap", "revoke", "--store", os.environ["TOOLHOST_FLEET_POSTGRES"],
             children[0]["id"]],
            check=False,
        )
        revoked = time.time()
        c["revoke_exit"] = proc.returncode
        c["ok_after_1s"] = []  # [host, seconds after the revocation]
        c["refused_by"] = set()
        c["other_ok"] = 0
        c["other_refused"] = []
        probed = {host: 0 for host in HOST_URLS}  # revoked-child calls after 1 s
        while time.time() < revoked + 20 and min(probed.values()) < 2:
            for host in HOST_URLS:
                port = host
                for i, child in enumerate(children):
                    started = time.time()
                    try:
                        outcome = await read_with(host, child["token"])
                    except Exception as e:
                        outcome = "refused: " + describe(e)
                    if i == 0:
                        if started > revoked + 1 and "ConnectError" not in outcome:
                            probed[host] += 1
                        if outcome == "ok" and started > revoked + 1:
                            c["ok_after_1s"].append([port, round(started - revoked, 2)])
                        elif outcome != "ok" and started > revoked + 1 and "ConnectError" not in outcome:
                            c["refused_by"].add(port)
                    elif outcome == "ok":
                        c["other_ok"] += 1
                    elif "ConnectError" not in outcome:
                        c["other_refused"].append([port, outcome[:120]])
            await anyio.sleep(0.1)
        c["refused_by"] = sorted(c["refused_by"])

    async def verify_spills(self):
        """Every spill made during the load, read through every host."""
        unreadable = []
        for uri, digest in self.spills[:20]:
            for host in HOST_URLS:
                port = host
                try:
                    got = await read_spill(host, uri)
                except Exception as e:
                    got = "error: " + describe(e)
                if got != digest:
                    unreadable.append([uri, port, got[:80]])
        return unreadable

    async def run(self, url, agents):
        started = time.monotonic()
        parent = os.environ.get("TOOLHOST_FLEET_PARENT")
        queries = ["show me what is in a text file", "print the numbered lines of notes"]
        finders = os.environ.get("TOOLHOST_FLEET_FINDERS", "").split()
        modes = ["2026-07-28", "legacy"]
        async with anyio.create_task_group() as tg:
            for agent in range(agents):
                r = agent - agents // 2
                if agent < agents // 2:
                    tg.start_soon(self.editor, url, agent)
                elif r < 2:
                    tg.start_soon(self.spiller, url)
                elif r < 4 and len(finders) == 2:
                    tg.start_soon(self.finder, url, queries[r - 2], finders[r - 2], modes[r - 2])
                elif r == 4 and parent:
                    revoke_at = started + (self.deadline - started) / 2
                    tg.start_soon(self.orchestrator, url, parent, revoke_at)
                else:
                    tg.start_soon(self.reader, url, modes[agent % 2])
        elapsed = time.monotonic() - started
        spills_unreadable = await self.verify_spills()
        lat = sorted(self.latencies)

        def pct(p):
            return round(lat[min(len(lat) - 1, int(p * len(lat)))] * 1000, 1) if lat else None

        return {
            "agents": agents,
            "seconds": round(elapsed, 1),
            "calls": len(lat),
            "calls_per_s": round(len(lat) / elapsed, 1),
            "p50_ms": pct(0.50),
            "p99_ms": pct(0.99),
            "reads_ok": self.reads_ok,
            "reads_failed": self.reads_failed,
            "drain_refusals": self.drain_refusals,
            "edits_acked": len(self.acked),
            "resent": self.resent,
            "resent_replayed": self.resent_replayed,
            "unsettled": self.unsettled,
            "spills": len(self.spills),
            "spills_unread": self.spills_unread,
            "spills_unreadable": spills_unreadable,
            "finds_ok": self.finds_ok,
            "finds_wrong": self.finds_wrong[:5],
            "lazy": self.lazy,
            "child": self.child,
            "errors": self.errors,
            "acked": self.acked,
        }


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
    elif phase == "budget":
        report = await budget(url, os.environ["TOOLHOST_FLEET_TOKEN"], 32)
        ok = report["ran"] == 500
    elif phase == "one":
        try:
            report = {"outcome": await one_read(url, os.environ["TOOLHOST_FLEET_TOKEN"])}
        except Exception as e:
            report = {"outcome": f"refused: {type(e).__name__}"}
        ok = True
    elif phase == "load":
        seconds = float(os.environ.get("TOOLHOST_FLEET_LOAD_SECONDS", "60"))
        agents = int(os.environ.get("TOOLHOST_FLEET_AGENTS", "32"))
        report = await Load(seconds).run(url, agents)
        ok = (
            not report["unsettled"]
            and report["reads_failed"] == 0
            and report["resent"] == report["resent_replayed"]
            and report["spills"] > 0
            and not report["spills_unreadable"]
            and lazy_ok(report["lazy"])
            and not report["finds_wrong"]
        )
        if os.environ.get("TOOLHOST_FLEET_PARENT"):
            child = report["child"]
            ok = ok and (
                child.get("revoke_exit") == 0
                and child.get("ran_before", 0) > 0
                and not child.get("ok_after_1s")
                and child.get("refused_by") == sorted(HOST_URLS)
                and child.get("other_ok", 0) > 0
                and not child.get("other_refused")
            )
    else:
        raise SystemExit(f"unknown phase {phase!r}")
    report["ok"] = ok
    print(json.dumps(report), flush=True)
    return ok


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    sys.exit(0 if anyio.run(main, sys.argv[1], sys.argv[2]) else 1)
