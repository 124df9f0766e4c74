#!/usr/bin/env bash
# Throughput and latency of the fleet's load workload (fleet_client.py load:
# 32 agents, half appending keyed lines to 4 shared files, the others
# reading, spilling and reading spills back, and finding tools), without
# kills or the delegation check, against: the three-host fleet behind HAProxy on
# PostgreSQL, one host on PostgreSQL, and one host on SQLite. Prints a
# table for docs/performance.md. Not run in CI.
#
#   TOOLHOST_FLEET_POSTGRES=postgres://... bash tests/fleet/bench.sh
#   TOOLHOST_FLEET_LOAD_SECONDS  seconds per setup (default 30)
#   TOOLHOST_BIN                 the binary (default target/release/toolhost
#                                when built, else target/debug/toolhost)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$ROOT"
export TOOLHOST_FLEET_DIR="$ROOT/target/fleet-bench"
DIR="$TOOLHOST_FLEET_DIR"
BIN="${TOOLHOST_BIN:-$ROOT/target/release/toolhost}"
[ -x "$BIN" ] || BIN="$ROOT/target/debug/toolhost"
export TOOLHOST_BIN="$BIN" TOOLHOST_FLEET_ARGS="--allow-read . --allow-write . --max-output-bytes 8192 --artifact-quota-token-count 1000 --lazy-tools"
export TOOLHOST_FLEET_LOAD_SECONDS="${TOOLHOST_FLEET_LOAD_SECONDS:-30}"
PY="$ROOT/target/py-mcp/venv/bin/python"
PG="${TOOLHOST_FLEET_POSTGRES:?set TOOLHOST_FLEET_POSTGRES}"

fresh() {
  rm -rf "$DIR/workspace"
  mkdir -p "$DIR/workspace"
  printf 'hello\n' >"$DIR/workspace/notes.txt"
  for f in 0 1 2 3; do printf 'END\n' >"$DIR/workspace/load-$f.txt"; done
  "$PY" -c 'import sys; sys.stdout.write("".join(f"line {i} " + "x" * 300 + "\n" for i in range(3000)))' \
    >"$DIR/workspace/spill.txt"
}

row() { # NAME URL STORE
  TOOLHOST_FLEET_FINDERS="$(for _ in 1 2; do "$BIN" cap mint --key-file "$DIR/root.key" --store "$3" --tool '*' --read .; done | tr '\n' ' ')" \
    "$PY" tests/fleet/fleet_client.py "$2" load 2>/dev/null |
    "$PY" -c 'import json,sys; r=json.load(sys.stdin); print("|", sys.argv[1], "|", r["calls_per_s"], "|", r["p50_ms"], "|", r["p99_ms"], "|")' "$1" || true
}

one_host() { # NAME STORE
  fresh
  # shellcheck disable=SC2086
  "$BIN" serve --http 127.0.0.1:7410 --workspace "$DIR/workspace" --store "$2" --key-file "$DIR/root.key" \
    --artifact-dir "$DIR/one/artifacts" --cache-dir "$DIR/cache" $TOOLHOST_FLEET_ARGS \
    >"$DIR/one.log" 2>&1 </dev/null &
  local pid=$!
  until curl -sf http://127.0.0.1:7410/readyz >/dev/null 2>&1; do sleep 0.1; done
  row "$1" http://127.0.0.1:7410/mcp "$2"
  kill -TERM "$pid"
  wait "$pid" || true
}

deploy/fleet.sh down 2>/dev/null || true
rm -rf "$DIR"
mkdir -p "$DIR"
echo "| setup | calls/s | p50 ms | p99 ms |"
echo "|---|---|---|---|"
fresh
timeout 180 deploy/fleet.sh up >/dev/null 2>&1
row "3 hosts + HAProxy, PostgreSQL" http://127.0.0.1:7400/mcp "$PG"
deploy/fleet.sh down
sleep 1
one_host "1 host, PostgreSQL" "$PG"
one_host "1 host, SQLite" "$DIR/store.db"
