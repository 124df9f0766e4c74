#!/usr/bin/env bash
# The fleet test: three `toolhost serve --http` hosts behind HAProxy and one
# PostgreSQL, brought up by deploy/fleet.sh exactly as docs/deploy.md says,
# driven through the proxy by the official MCP Python SDK
# (tests/fleet/fleet_client.py). Bounded to a few minutes; exit 0 only when
# every check holds.
#
#   1. spread: stateless reads go round robin, 2025-11-25 sessions stick to
#      their host, a keyed edit sent ten times through the proxy runs once;
#      the journal shows calls answered by all three hosts;
#      a deletion asked of the person as a 2026-07-28 round trip is accepted
#      by whichever host the retry reaches, once;
#   2. a host is SIGKILLed: the proxy stops sending to it, every read still
#      answers;
#   3. another host gets SIGTERM: it drains and exits, every read still
#      answers through the last one.
#
# Needs: haproxy, curl, PostgreSQL (TOOLHOST_FLEET_POSTGRES, or started with
# .ci/postgres.sh as root), the Python SDK venv (.ci/py-mcp-client.sh).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$ROOT"
export TOOLHOST_FLEET_DIR="$ROOT/target/fleet-test"
DIR="$TOOLHOST_FLEET_DIR"
BIN="${TOOLHOST_BIN:-$ROOT/target/debug/toolhost}"
PY="$ROOT/target/py-mcp/venv/bin/python"
URL="http://127.0.0.1:7400/mcp"

fail() { echo "fleet: FAIL $*" >&2; exit 1; }
pass() { echo "fleet: PASS $*"; }

[ -x "$PY" ] || bash .ci/py-mcp-client.sh
if [ -z "${TOOLHOST_FLEET_POSTGRES:-}" ]; then
  TOOLHOST_FLEET_POSTGRES="$(bash .ci/postgres.sh | tail -n 1)"
fi
export TOOLHOST_FLEET_POSTGRES TOOLHOST_BIN="$BIN"
export TOOLHOST_FLEET_ARGS="--allow-read . --allow-write ."

deploy/fleet.sh down 2>/dev/null || true
rm -rf "$DIR"
trap 'deploy/fleet.sh down' EXIT
timeout 180 deploy/fleet.sh up >/dev/null
printf 'hello\n' >"$DIR/workspace/notes.txt"
printf 'count=0\n' >"$DIR/workspace/counter.txt"
since="$(date -u +%Y-%m-%dT%H:%M:%SZ)"

# 1. Spread.
report="$(timeout 120 "$PY" tests/fleet/fleet_client.py "$URL" spread 2>/dev/null)" ||
  fail "spread: $report"
pass "spread: $report"
[ "$(cat "$DIR/workspace/counter.txt")" = "count=1" ] || fail "the keyed edit ran more than once"
hosts="$("$BIN" log --json --store "$TOOLHOST_FLEET_POSTGRES" --since "$since" --tool file_view --limit 1000 |
  "$PY" -c 'import json,sys; print(" ".join(sorted({e["host"] for e in json.load(sys.stdin)})))')"
[ "$hosts" = "host-a host-b host-c" ] || fail "the reads were answered by: $hosts"
pass "journal: reads answered by $hosts"

for f in gone.txt kept1.txt kept2.txt; do printf 'x\n' >"$DIR/workspace/$f"; done
report="$(timeout 120 "$PY" tests/fleet/fleet_client.py "$URL" approve 2>/dev/null)" ||
  fail "approve: $report"
[ ! -e "$DIR/workspace/gone.txt" ] && [ -e "$DIR/workspace/kept1.txt" ] && [ -e "$DIR/workspace/kept2.txt" ] ||
  fail "approve: the files are not as the person decided"
pass "approve: $report"

# 2. A host dies.
kill -KILL "$(cat "$DIR/host-b/pid")"
sleep 1.5
report="$(timeout 60 "$PY" tests/fleet/fleet_client.py "$URL" reads 2>/dev/null)" ||
  fail "after SIGKILL of host-b: $report"
pass "after SIGKILL of host-b: $report"

# 3. A host is stopped.
pid="$(cat "$DIR/host-c/pid")"
kill -TERM "$pid"
for _ in $(seq 100); do
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
kill -0 "$pid" 2>/dev/null && fail "host-c did not exit within 10 s of SIGTERM"
pass "host-c exited after SIGTERM"
sleep 1.5
report="$(timeout 60 "$PY" tests/fleet/fleet_client.py "$URL" reads 2>/dev/null)" ||
  fail "after SIGTERM of host-c: $report"
pass "after SIGTERM of host-c: $report"
deploy/fleet.sh down
sleep 1
if grep -l "panicked" "$DIR"/logs/*.log; then
  fail "a host panicked (see the logs above)"
fi
pass "no host panicked, stopping included"
echo "fleet: all checks passed"
