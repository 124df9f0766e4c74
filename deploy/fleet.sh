#!/usr/bin/env bash
# Three `toolhost serve --http` hosts behind HAProxy, sharing one
# PostgreSQL store and one root key, on this machine: what docs/deploy.md
# describes, brought up for real.
#
#   deploy/fleet.sh up      start PostgreSQL (when not given), the hosts and
#                           the proxy; print the proxy's MCP URL
#   deploy/fleet.sh down    stop the proxy and the hosts
#   deploy/fleet.sh status  each host's /readyz, through the proxy and direct
#   deploy/fleet.sh restart b  start one host again (after it died)
#
# The hosts listen on three loopback ports (127.0.0.1:7401-7403), not in
# network namespaces: the script says so when it starts them. HAProxy
# listens on 127.0.0.1:7400 and balances round robin; a 2025-11-25 session
# sticks to the host that created it (the proxy learns each session's
# `Mcp-Session-Id` from the initialize answer), and a 2026-07-28 request,
# which carries no session, may go to any host.
#
# Environment:
#   TOOLHOST_BIN             the toolhost binary (default: target/debug/toolhost,
#                            built when missing)
#   TOOLHOST_FLEET_DIR       state, logs and the proxy's configuration
#                            (default: target/fleet)
#   TOOLHOST_FLEET_POSTGRES  the store's URL (default: started with
#                            .ci/postgres.sh, which needs root)
#   TOOLHOST_FLEET_ARGS      extra arguments for every host (grants, limits)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DIR="${TOOLHOST_FLEET_DIR:-$ROOT/target/fleet}"
BIN="${TOOLHOST_BIN:-$ROOT/target/debug/toolhost}"
PROXY_PORT=7400
HOSTS=(a b c)
PORTS=(7401 7402 7403)

log() { echo "fleet.sh: $*" >&2; }

wait_ready() { # URL SECONDS
  local url="$1" left=$(($2 * 10))
  until curl -sf "$url" >/dev/null 2>&1; do
    left=$((left - 1))
    if [ "$left" -le 0 ]; then return 1; fi
    sleep 0.1
  done
}

start_host() { # INDEX STORE
  local name="host-${HOSTS[$1]}" port="${PORTS[$1]}"
  mkdir -p "$DIR/$name"
  # shellcheck disable=SC2086
  TOOLHOST_HOST_NAME="$name" setsid "$BIN" serve --http "127.0.0.1:$port" \
    --workspace "$DIR/workspace" --key-file "$DIR/root.key" --store "$2" \
    --artifact-dir "$DIR/$name/artifacts" --cache-dir "$DIR/cache" \
    --log-format json ${TOOLHOST_FLEET_ARGS:-} \
    >>"$DIR/logs/$name.log" 2>&1 </dev/null &
  echo $! >"$DIR/$name/pid"
}

# Starts one host again (after it was killed) on the fleet's store.
restart() { # a|b|c
  local i
  for i in 0 1 2; do
    if [ "${HOSTS[$i]}" = "$1" ]; then
      start_host "$i" "$(cat "$DIR/store-url")"
      wait_ready "http://127.0.0.1:${PORTS[$i]}/readyz" 60 ||
        { log "host-$1 is not ready; see $DIR/logs/host-$1.log"; exit 1; }
      return
    fi
  done
  log "no host $1"; exit 2
}

up() {
  command -v haproxy >/dev/null || { log "haproxy is missing (apt-get install haproxy)"; exit 1; }
  if [ ! -x "$BIN" ]; then
    log "building $BIN"
    (cd "$ROOT" && cargo build --locked --bin toolhost >&2)
  fi
  mkdir -p "$DIR/workspace" "$DIR/logs"
  local store="${TOOLHOST_FLEET_POSTGRES:-}"
  if [ -z "$store" ]; then
    store="$(bash "$ROOT/.ci/postgres.sh" | tail -n 1)"
  fi
  echo "$store" >"$DIR/store-url"
  # One root key for every host: a token minted by one is honoured by all.
  "$BIN" cap mint --key-file "$DIR/root.key" --store "$store" --read . >/dev/null
  log "hosts on loopback ports (no network namespaces): ${PORTS[*]}"
  local i
  for i in 0 1 2; do start_host "$i" "$store"; done
  for i in 0 1 2; do
    wait_ready "http://127.0.0.1:${PORTS[$i]}/readyz" 60 ||
      { log "host-${HOSTS[$i]} is not ready; see $DIR/logs/host-${HOSTS[$i]}.log"; exit 1; }
  done
  sed -e "s|@PROXY_PORT@|$PROXY_PORT|" -e "s|@PORT_A@|${PORTS[0]}|" \
    -e "s|@PORT_B@|${PORTS[1]}|" -e "s|@PORT_C@|${PORTS[2]}|" \
    "$ROOT/deploy/haproxy.cfg" >"$DIR/haproxy.cfg"
  haproxy -f "$DIR/haproxy.cfg" -D -p "$DIR/haproxy.pid"
  wait_ready "http://127.0.0.1:$PROXY_PORT/readyz" 20 ||
    { log "the proxy does not answer"; exit 1; }
  log "ready"
  echo "http://127.0.0.1:$PROXY_PORT/mcp"
}

down() {
  if [ -f "$DIR/haproxy.pid" ]; then
    kill "$(cat "$DIR/haproxy.pid")" 2>/dev/null || true
    rm -f "$DIR/haproxy.pid"
  fi
  local name
  for name in "${HOSTS[@]}"; do
    local pidfile="$DIR/host-$name/pid"
    if [ -f "$pidfile" ]; then
      kill -TERM "$(cat "$pidfile")" 2>/dev/null || true
      rm -f "$pidfile"
    fi
  done
}

status() {
  local i
  for i in 0 1 2; do
    printf 'host-%s %s\n' "${HOSTS[$i]}" \
      "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:${PORTS[$i]}/readyz" || true)"
  done
  printf 'proxy %s\n' "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PROXY_PORT/readyz" || true)"
}

case "${1:-}" in
  up) up ;;
  restart) restart "${2:?usage: deploy/fleet.sh restart a|b|c}" ;;
  down) down ;;
  status) status ;;
  *) echo "usage: deploy/fleet.sh up|down|status|restart HOST" >&2; exit 2 ;;
esac
