#!/usr/bin/env python3
"""Instructions per call of `toolhost serve --stdio`, counted by callgrind.

Wall-clock figures on a small shared machine swing with load; the number
of instructions the server executes for the same binary and the same
requests does not (to within a fraction of a percent). For each call
shape this runs the server under `valgrind --tool=callgrind` twice, once
answering `--warmup` calls and once answering `--warmup + --calls`, and
reports (Ir(long) - Ir(short)) / calls: what one more call costs, start-up
and warm-up subtracted.

The server runs with `--instance-allocation on-demand` (valgrind cannot
host the pooling allocator's address-space reservation) and on one CPU
(`taskset -c 0`), where it never spins waiting for the next request, so
no count depends on timing.

usage: cost.py --binary target/release/toolhost --plugin tp_trivial.wasm
               [--calls 50] [--warmup 5] [--baseline baseline.json]
               [--write-baseline] [--tolerance 0.05]

With --baseline it fails (exit 1) when a shape costs more than
--tolerance over its baseline figure; --write-baseline rewrites the file.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

SHAPES = {
    # name: (tool, arguments, extra serve flags)
    "trivial": ("echo_value", {"value": 7}, []),
    "read_3b": ("file_view", {"path": "three.txt"}, []),
    "read_4k": ("file_view", {"path": "four_k.txt"}, []),
}


def run_once(a, work, shape, n, valgrind=True):
    tool, args, extra = SHAPES[shape]
    out = os.path.join(work, f"cg.{shape}.{n}")
    env = dict(os.environ)
    env.update(
        HOME=os.path.join(work, "home"),
        TOOLHOST_KEY_FILE=os.path.join(work, "root.key"),
        TOOLHOST_STORE=os.path.join(work, "records.sqlite"),
        TOOLHOST_CACHE_DIR=os.path.join(work, "cache"),
        RUST_LOG="off",
    )
    under = ["taskset", "-c", "0", "valgrind", "--tool=callgrind",
             f"--callgrind-out-file={out}"] if valgrind else []
    cmd = under + [
        a.binary, "--instance-allocation", "on-demand",
        "--plugin", a.plugin,
        "serve", "--stdio", "--workspace", work, "--allow-read", ".",
    ] + extra
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env, cwd=work)
    nid = 0

    def rpc(method, params):
        nonlocal nid
        nid += 1
        p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": nid, "method": method,
                                  "params": params}) + "\n")
        p.stdin.flush()
        while True:
            line = p.stdout.readline()
            if not line:
                raise SystemExit(f"{shape}: server closed during {method}: "
                                 + p.stderr.read()[-2000:])
            m = json.loads(line)
            if m.get("id") == nid:
                return m

    rpc("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "cost", "version": "1"}})
    p.stdin.write('{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    for _ in range(n):
        r = rpc("tools/call", {"name": tool, "arguments": args})
        if "error" in r or r["result"].get("isError"):
            raise SystemExit(f"{shape}: call failed: {json.dumps(r)[:500]}")
    p.stdin.close()
    err = p.stderr.read()
    p.wait()
    if not valgrind:
        return 0
    m = re.search(r"Collected : (\d+)", err)
    if not m:
        raise SystemExit(f"{shape}: no callgrind total in:\n{err[-2000:]}")
    return int(m.group(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--plugin", required=True)
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--shape", action="append", choices=sorted(SHAPES))
    ap.add_argument("--baseline")
    ap.add_argument("--write-baseline", action="store_true")
    ap.add_argument("--tolerance", type=float, default=0.05)
    a = ap.parse_args()
    a.binary = os.path.abspath(a.binary)
    a.plugin = os.path.abspath(a.plugin)
    shapes = a.shape or list(SHAPES)
    figures = {}
    with tempfile.TemporaryDirectory() as work:
        os.makedirs(os.path.join(work, "home"))
        with open(os.path.join(work, "three.txt"), "w") as f:
            f.write("hi\n")
        with open(os.path.join(work, "four_k.txt"), "w") as f:
            line = "the quick brown fox jumps over the lazy dog 0123456789\n"
            f.write((line * (4096 // len(line) + 1))[:4096])
        # Compile the plugin into the cache first, so that every counted
        # run starts alike.
        run_once(a, work, shapes[0], 1, valgrind=False)
        for shape in shapes:
            short = run_once(a, work, shape, a.warmup)
            long = run_once(a, work, shape, a.warmup + a.calls)
            figures[shape] = round((long - short) / a.calls)
            print(f"{shape:10} {figures[shape]:>12,} instructions a call "
                  f"(start-up and {a.warmup} warm-up calls: {short:,})", flush=True)
    if a.baseline and a.write_baseline:
        with open(a.baseline, "w") as f:
            json.dump({"instructions_per_call": figures}, f, indent=2, sort_keys=True)
            f.write("\n")
        return 0
    if a.baseline:
        with open(a.baseline) as f:
            base = json.load(f)["instructions_per_call"]
        worse = []
        for shape, n in figures.items():
            b = base.get(shape)
            if b is None:
                continue
            ratio = n / b
            print(f"{shape:10} {ratio:.3f}x the baseline ({b:,})")
            if ratio > 1 + a.tolerance:
                worse.append(shape)
        if worse:
            print(f"over the baseline by more than {a.tolerance:.0%}: {', '.join(worse)}",
                  file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
