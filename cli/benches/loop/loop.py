#!/usr/bin/env python3
"""How long an infinite loop holds a call, seen by an MCP client.

Starts `toolhost serve --stdio` with the hostile test plugin, opens a
2025-11-25 session and calls `spin_forever` (a guest that never returns)
--runs times under the default limits, timing each round trip from the
request's last byte to the answer. Every answer must be `fuel_exhausted`.
The breaker is off (`--breaker-threshold 0`): otherwise the same failing
call is refused without running from its second repetition on.

    python3 cli/benches/loop/loop.py --binary target/release/toolhost \
        --guests target/guests/wasm32-wasip2/release
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--guests", required=True, help="directory of tp_hostile.wasm")
    ap.add_argument("--runs", type=int, default=9)
    a = ap.parse_args()
    wasm = os.path.abspath(os.path.join(a.guests, "tp_hostile.wasm"))
    with tempfile.TemporaryDirectory() as work:
        server = subprocess.Popen(
            [os.path.abspath(a.binary), "serve", "--stdio", "--no-journal",
             "--breaker-threshold", "0", "--plugin", wasm,
             "--cache-dir", os.path.join(work, "cache")],
            cwd=work, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL)

        def send(message):
            server.stdin.write((json.dumps(message) + "\n").encode())
            server.stdin.flush()

        def answer():
            while True:
                line = server.stdout.readline()
                if not line:
                    raise SystemExit("the server closed its output")
                message = json.loads(line)
                if "id" in message:
                    return message

        send({"jsonrpc": "2.0", "id": 0, "method": "initialize",
              "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                         "clientInfo": {"name": "loop-bench", "version": "1"}}})
        answer()
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        times = []
        for i in range(1, a.runs + 1):
            started = time.perf_counter()
            send({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                  "params": {"name": "spin_forever", "arguments": {}}})
            reply = answer()
            times.append((time.perf_counter() - started) * 1e3)
            code = (reply["result"]["_meta"]["dev.toolhost/observation"]
                    .get("error") or {}).get("code")
            if code != "fuel_exhausted":
                raise SystemExit(f"run {i}: expected fuel_exhausted, got {reply}")
        server.stdin.close()
        server.wait()
    times.sort()
    print(f"infinite loop over stdio, default limits, {a.runs} runs: "
          f"median {times[len(times) // 2]:.0f} ms, min {times[0]:.0f}, "
          f"max {times[-1]:.0f} (target <= 200)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
