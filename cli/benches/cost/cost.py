#!/usr/bin/env python3
"""Instructions and allocations per call of `toolhost serve`, counted by
callgrind, and the server's peak RSS.

Wall-clock figures on a small shared machine swing with load; the number
of instructions the server executes for the same binary and the same
requests does not (to within a fraction of a percent). For each call shape
this starts one server under `valgrind --tool=callgrind --instr-atstart=no`
(start-up runs uninstrumented), sends `--warmup` calls, switches
instrumentation on and zeroes the counters (`callgrind_control -i on`,
`-z`), sends `--calls` more, dumps the counters (`callgrind_control -d`)
and divides: what one more call costs, start-up, warm-up and shutdown left
out. Allocations are the calls to `__rust_alloc`, `__rust_alloc_zeroed`,
`malloc` and `calloc` in the same window.

The server runs with `--instance-allocation on-demand` (valgrind cannot
host the pooling allocator's address-space reservation) and on one CPU
(`taskset -c 0`), where it never spins waiting for the next request. Its
compiled-code cache lies outside the workspace, so only the first server
under valgrind compiles the embedded tools (valgrind's CPU does not match
the build's precompiled artifacts). Valgrind offers no `openat2`: the host
then opens files beneath a mount one plain step at a time, the same indexed
path the reference tools take outside valgrind.

Peak RSS (VmHWM, and VmRSS at the end, split into anonymous memory and
mapped files) comes from a separate run of each
shape without valgrind, with the default (pooling) instance allocation,
after `--rss-calls` calls.

usage: cost.py --binary target/debug/toolhost
               --guests target/guests/wasm32-wasip2/release
               [--calls 40] [--warmup 6] [--rss-calls 2000] [--shape NAME]...
               [--http-load CLIENTS,SECONDS]
               [--baseline cli/benches/cost/baseline.json] [--write-baseline]
               [--tolerance 0.05] [--json OUT] [--keep-dir DIR]

With --baseline it fails (exit 1) when a shape's instructions per call are
more than --tolerance over the baseline's; --write-baseline writes the
shapes measured into the file instead, keeping the others (the commit that
does says why).
"""
import argparse
import glob
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

STATELESS_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


def echo(i):
    return "echo_value", {"value": 7}, None


def view(path):
    return lambda i: ("file_view", {"path": path}, None)


def keyed_edit(i):
    # Alternates the file's word, so every call really writes; a fresh key
    # per call, so none is answered from the record store.
    old, new = ("ping", "pong") if i % 2 == 0 else ("pong", "ping")
    return ("file_edit", {"path": "toggle.txt", "old_str": old, "new_str": new},
            {"dev.toolhost/idempotency_key": f"cost-{i:08d}"})


# name: (transport, call(i) -> (tool, arguments, _meta), extra serve flags,
#        extra environment, whether the client holds a budgeted token)
SHAPES = {
    "trivial": ("stdio", echo, [], {}, False),
    "trivial_unjournaled": ("stdio", echo, [], {"TOOLHOST_NO_JOURNAL": "1"}, False),
    "read_3b": ("stdio", view("three.txt"), [], {}, False),
    "read_4k": ("stdio", view("four_k.txt"), [], {}, False),
    "write_keyed": ("stdio", keyed_edit, ["--allow-write", "."], {}, False),
    "token_budget": ("stdio", echo, [], {}, True),
    "http_session": ("session", echo, [], {}, False),
    "http_stateless": ("stateless", echo, [], {}, False),
}

ALLOC_FUNCTIONS = {"__rustc::__rust_alloc", "__rust_alloc",
                   "__rustc::__rust_alloc_zeroed", "__rust_alloc_zeroed",
                   "malloc", "calloc"}


class Env:
    """The files every server shares: workspace, key, store, cache."""

    def __init__(self, a, work):
        self.a = a
        self.work = work
        self.ws = os.path.join(work, "ws")
        os.makedirs(os.path.join(work, "home"))
        os.makedirs(self.ws)
        with open(os.path.join(self.ws, "three.txt"), "w") as f:
            f.write("hi\n")
        with open(os.path.join(self.ws, "four_k.txt"), "w") as f:
            line = "the quick brown fox jumps over the lazy dog 0123456789\n"
            f.write((line * (4096 // len(line) + 1))[:4096])
        with open(os.path.join(self.ws, "toggle.txt"), "w") as f:
            f.write("ping\n")
        self.token = None
        self.token = subprocess.run(
            [a.binary, "cap", "mint", "--tool", "*", "--read", ".",
             "--max-calls", "1000000000", "--budget-fuel", "1000000000000000000"],
            env=self.env({}), cwd=self.ws, capture_output=True, text=True,
            check=True).stdout.strip()

    def env(self, extra):
        env = dict(os.environ)
        env.update(
            HOME=os.path.join(self.work, "home"),
            TOOLHOST_KEY_FILE=os.path.join(self.a.keep_dir or self.work, "root.key"),
            TOOLHOST_STORE=os.path.join(self.work, "records.sqlite"),
            TOOLHOST_CACHE_DIR=os.path.join(self.a.keep_dir or self.work, "cache"),
            RUST_LOG="off",
        )
        env.pop("TOOLHOST_TOKEN", None)
        env.update(extra)
        return env


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Stdio:
    def __init__(self, p):
        self.p = p
        self.nid = 0

    def rpc(self, method, params, notify=False):
        msg = {"jsonrpc": "2.0", "method": method, "params": params}
        if not notify:
            self.nid += 1
            msg["id"] = self.nid
        self.p.stdin.write(json.dumps(msg) + "\n")
        self.p.stdin.flush()
        if notify:
            return None
        while True:
            line = self.p.stdout.readline()
            if not line:
                raise RuntimeError("server closed: " + self.p.stderr.read()[-2000:])
            m = json.loads(line)
            if m.get("id") == self.nid:
                return m

    def start(self):
        self.rpc("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                "clientInfo": {"name": "cost", "version": "1"}})
        self.rpc("notifications/initialized", {}, notify=True)

    def close(self):
        self.p.stdin.close()


class Http:
    def __init__(self, p, port, stateless):
        self.p = p
        self.port = port
        self.stateless = stateless
        self.nid = 0
        self.session = None
        deadline = time.time() + 600
        while True:
            try:
                self.c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
                self.c.connect()
                break
            except OSError:
                if p.poll() is not None or time.time() > deadline:
                    raise RuntimeError("serve --http did not start: "
                                       + p.stderr.read()[-2000:])
                time.sleep(0.2)

    def post(self, msg, headers):
        h = {"Content-Type": "application/json",
             "Accept": "application/json, text/event-stream"}
        h.update(headers)
        self.c.request("POST", "/mcp", body=json.dumps(msg), headers=h)
        r = self.c.getresponse()
        body = r.read().decode()
        if r.getheader("Mcp-Session-Id"):
            self.session = r.getheader("Mcp-Session-Id")
        if r.status >= 300:
            raise RuntimeError(f"HTTP {r.status}: {body[:500]}")
        if not body.strip():
            return None
        if (r.getheader("Content-Type") or "").startswith("text/event-stream"):
            for line in body.splitlines():
                if line.startswith("data:") and line[5:].strip():
                    m = json.loads(line[5:])
                    if "id" in m:
                        return m
            return None
        return json.loads(body)

    def rpc(self, method, params, notify=False):
        msg = {"jsonrpc": "2.0", "method": method, "params": params}
        if not notify:
            self.nid += 1
            msg["id"] = self.nid
        if self.stateless:
            msg["params"] = dict(params, _meta=dict(params.get("_meta") or {},
                                                    **STATELESS_META))
            headers = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method}
            if method == "tools/call":
                headers["Mcp-Name"] = params["name"]
        else:
            headers = {"MCP-Protocol-Version": "2025-11-25"}
            if self.session:
                headers["Mcp-Session-Id"] = self.session
        return self.post(msg, headers)

    def start(self):
        if self.stateless:
            return
        self.rpc("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                "clientInfo": {"name": "cost", "version": "1"}})
        self.rpc("notifications/initialized", {}, notify=True)

    def close(self):
        self.c.close()
        self.p.terminate()


def launch(e, shape, under):
    transport, _, extra, env_extra, token = SHAPES[shape]
    cmd = under + [e.a.binary, "--plugin", e.a.trivial]
    if under:
        cmd += ["--instance-allocation", "on-demand"]
    port = None
    if transport == "stdio":
        cmd += ["serve", "--stdio"]
    else:
        port = free_port()
        cmd += ["serve", "--http", f"127.0.0.1:{port}", "--shutdown-grace-ms", "0"]
    cmd += ["--workspace", e.ws, "--allow-read", "."] + extra
    if token:
        cmd += ["--token", e.token]
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=e.env(env_extra),
                         cwd=e.ws)
    client = Stdio(p) if transport == "stdio" else Http(p, port, transport == "stateless")
    client.start()
    return client


def finish(p):
    """Waits for a closed server to exit, draining its output."""
    for f in (p.stdout, p.stderr):
        f.read()
    p.wait(timeout=600)


def call(client, shape, i):
    tool, args, meta = SHAPES[shape][1](i)
    params = {"name": tool, "arguments": args}
    if meta:
        params["_meta"] = meta
    r = client.rpc("tools/call", params)
    if r is None or "error" in r or r["result"].get("isError"):
        raise RuntimeError(f"{shape}: call failed: {json.dumps(r)[:500]}")


def control(pid, *args):
    subprocess.run(["callgrind_control", *args, str(pid)], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=600)


def parse_dump(path):
    """(instructions, allocations) of a callgrind dump."""
    names = {}
    total = None
    allocs = 0
    current_cfn = None
    with open(path) as f:
        for line in f:
            if line.startswith(("fn=(", "cfn=(")):
                key, rest = line.rstrip("\n").split("=", 1)
                ident, _, name = rest.partition(" ")
                if name:
                    names[ident] = name
                if key == "cfn":
                    current_cfn = names.get(ident)
            elif line.startswith("calls="):
                if current_cfn in ALLOC_FUNCTIONS:
                    allocs += int(line[6:].split()[0])
            elif line.startswith("totals:"):
                total = int(line.split()[1])
    if total is None:
        raise RuntimeError(f"no totals in {path}")
    return total, allocs


def count(e, shape):
    a = e.a
    out = os.path.join(a.keep_dir or e.work, f"callgrind.{shape}")
    for old in glob.glob(out + "*"):
        os.remove(old)
    under = ["taskset", "-c", "0", "valgrind", "--tool=callgrind",
             "--instr-atstart=no", f"--callgrind-out-file={out}"]
    client = launch(e, shape, under)
    try:
        for i in range(a.warmup):
            call(client, shape, i)
        control(client.p.pid, "-i", "on")
        control(client.p.pid, "-z")
        for i in range(a.warmup, a.warmup + a.calls):
            call(client, shape, i)
        control(client.p.pid, "-d")
    finally:
        client.close()
        finish(client.p)
    dumps = sorted(glob.glob(out + ".*"))
    if not dumps:
        raise RuntimeError(f"{shape}: no callgrind dump")
    ir, allocs = parse_dump(dumps[-1])
    return ir / a.calls, allocs / a.calls


def rss(e, shape, calls=None):
    client = launch(e, shape, [])
    try:
        for i in range(e.a.rss_calls if calls is None else calls):
            call(client, shape, i)
        status = {}
        with open(f"/proc/{client.p.pid}/status") as f:
            for line in f:
                k, _, v = line.partition(":")
                status[k] = v.strip()
    finally:
        client.close()
        finish(client.p)
    kib = lambda k: int(status[k].split()[0])  # noqa: E731
    return kib("VmHWM"), kib("VmRSS"), kib("RssAnon"), kib("RssFile")


def proc_status(pid):
    status = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            status[k] = v.strip()
    return lambda k: int(status[k].split()[0])  # noqa: E731


def http_load(e, shape, clients, seconds):
    """`clients` connections calling `shape` at once for `seconds`: the
    calls made, and the server's RSS after them."""
    import threading
    first = launch(e, shape, [])
    p, port = first.p, first.port
    stateless = SHAPES[shape][0] == "stateless"
    made = [0] * clients
    failed = []
    deadline = time.time() + seconds

    def run(k):
        c = first if k == 0 else Http(p, port, stateless)
        if k:
            c.start()
        i = 0
        try:
            while time.time() < deadline:
                call(c, shape, i)
                i += 1
        except Exception as err:  # reported below
            failed.append(repr(err))
        made[k] = i

    threads = [threading.Thread(target=run, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    kib = proc_status(p.pid)
    first.close()
    finish(p)
    if failed:
        raise RuntimeError(f"{shape}: {failed[0]}")
    return sum(made), kib("VmHWM"), kib("VmRSS"), kib("RssAnon"), kib("RssFile")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--guests", required=True,
                    help="directory of the test plugins (tp_trivial.wasm)")
    ap.add_argument("--calls", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=6)
    ap.add_argument("--rss-calls", type=int, default=2000,
                    help="calls before reading the RSS (0: no RSS run)")
    ap.add_argument("--shape", action="append", choices=list(SHAPES))
    ap.add_argument("--http-load", metavar="CLIENTS,SECONDS",
                    help="after the shapes, CLIENTS stateless HTTP clients call at "
                    "once for SECONDS; prints the server's RSS after them")
    ap.add_argument("--baseline")
    ap.add_argument("--write-baseline", action="store_true")
    ap.add_argument("--tolerance", type=float, default=0.05)
    ap.add_argument("--json", help="write the figures here too")
    ap.add_argument("--keep-dir", help="where the root key and the compiled-code "
                    "cache are kept between runs, and each shape's callgrind dumps "
                    "(callgrind.SHAPE.1: the counted calls, for callgrind_annotate) (default: fresh ones, so the first "
                    "server compiles the embedded tools under valgrind: minutes)")
    a = ap.parse_args()
    if a.calls % 2 or a.warmup % 2:
        ap.error("--calls and --warmup must be even (the keyed write alternates)")
    a.binary = os.path.abspath(a.binary)
    if a.keep_dir:
        a.keep_dir = os.path.abspath(a.keep_dir)
        os.makedirs(a.keep_dir, mode=0o700, exist_ok=True)
    a.trivial = os.path.abspath(os.path.join(a.guests, "tp_trivial.wasm"))
    shapes = a.shape or list(SHAPES)
    figures = {}
    started = time.time()
    with tempfile.TemporaryDirectory() as work:
        e = Env(a, work)
        if a.rss_calls:
            # The first native start writes the embedded tools' artifacts
            # into the cache; done here, it is in no shape's RSS.
            rss(e, shapes[0], calls=1)
        print(f"{'shape':20} {'instructions':>13} {'allocations':>12} "
              f"{'VmHWM KiB':>10} {'VmRSS KiB':>10} {'anon KiB':>9} {'file KiB':>9}  "
              f"(a call; RSS after {a.rss_calls} calls: heap and other anonymous "
              f"memory, and mapped files: the executable, compiled tools)", flush=True)
        for shape in shapes:
            ir, allocs = count(e, shape)
            hwm, now, anon, file = rss(e, shape) if a.rss_calls else (0, 0, 0, 0)
            figures[shape] = {"instructions": round(ir), "allocations": round(allocs, 1),
                              "vm_hwm_kib": hwm, "vm_rss_kib": now,
                              "rss_anon_kib": anon, "rss_file_kib": file}
            print(f"{shape:20} {round(ir):>13,} {allocs:>12,.1f} {hwm:>10,} {now:>10,} "
                  f"{anon:>9,} {file:>9,}", flush=True)
        if a.http_load:
            clients, seconds = (int(x) for x in a.http_load.split(","))
            n, hwm, now, anon, file = http_load(e, "http_stateless", clients, seconds)
            figures["http_load"] = {"clients": clients, "seconds": seconds, "calls": n,
                                    "vm_hwm_kib": hwm, "vm_rss_kib": now,
                                    "rss_anon_kib": anon, "rss_file_kib": file}
            print(f"http_stateless, {clients} clients for {seconds} s ({n} calls): "
                  f"VmHWM {hwm:,} KiB, VmRSS {now:,} KiB "
                  f"(anon {anon:,}, file {file:,})", flush=True)
    print(f"({time.time() - started:.0f} s)", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(figures, f, indent=2, sort_keys=True)
    if a.baseline and a.write_baseline:
        # Shapes not measured in this run (--shape) keep their figures.
        base = {}
        if os.path.exists(a.baseline):
            with open(a.baseline) as f:
                base = json.load(f)["shapes"]
        base.update({shape: {"instructions": f["instructions"], "allocations": f["allocations"]}
                     for shape, f in figures.items()})
        with open(a.baseline, "w") as f:
            json.dump({"binary": os.path.relpath(a.binary), "calls": a.calls,
                       "warmup": a.warmup, "shapes": base}, f, indent=2, sort_keys=True)
            f.write("\n")
        return 0
    if a.baseline:
        with open(a.baseline) as f:
            base = json.load(f)["shapes"]
        worse = []
        for shape, fig in figures.items():
            b = base.get(shape)
            if b is None:
                print(f"{shape:20} not in the baseline")
                continue
            ratio = fig["instructions"] / b["instructions"]
            print(f"{shape:20} {ratio:.3f}x the baseline's {b['instructions']:,} "
                  f"instructions; allocations {fig['allocations']:,} "
                  f"(baseline {b['allocations']:,})")
            if ratio > 1 + a.tolerance:
                worse.append(shape)
        if worse:
            print(f"more than {a.tolerance:.0%} over the baseline: {', '.join(worse)}; "
                  "if that is the price of a change, rerun with --write-baseline and "
                  "say why in the commit message", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
