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
# Each host runs in a network namespace of its own (`ip netns`, needs
# root), reached over a veth pair at 10.213.N.2 (N = 0, 1, 2), listening
# with --allow-remote as a host on another machine would; it reaches
# PostgreSQL through the proxy, which forwards 10.213.N.1:5432 to the
# store. Without namespaces (not root, or TOOLHOST_FLEET_NETNS=0) the hosts
# listen on three loopback addresses, 127.0.0.11-13. The script says which,
# and writes each host's URL to $TOOLHOST_FLEET_DIR/hosts. The hosts use
# ports 7401-7403. HAProxy listens on 127.0.0.1:7400 and balances round
# robin; a 2025-11-25 session
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
#   TOOLHOST_FLEET_NETNS     0: loopback addresses even where namespaces work
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DIR="${TOOLHOST_FLEET_DIR:-$ROOT/target/fleet}"
BIN="${TOOLHOST_BIN:-$ROOT/target/debug/toolhost}"
PROXY_PORT=7400
HOSTS=(a b c)
PORTS=(7401 7402 7403)
# Filled by `up` (or read back from $DIR/mode): each host's address, and
# the address it reaches PostgreSQL at when in a namespace.
ADDRS=()
MODE=""
NETNS_PREFIX=th-fleet

load_mode() {
  MODE="$(cat "$DIR/mode" 2>/dev/null || echo loopback)"
  local i
  for i in 0 1 2; do
    if [ "$MODE" = netns ]; then ADDRS[$i]="10.213.$i.2"; else ADDRS[$i]="127.0.0.1$((i + 1))"; fi
  done
}

# Three namespaces, each with a veth pair: 10.213.N.1 outside, 10.213.N.2
# inside. Fails (and leaves nothing behind) where namespaces cannot be made.
make_namespaces() {
  local i ns
  for i in 0 1 2; do
    ns="$NETNS_PREFIX-${HOSTS[$i]}"
    ip netns add "$ns" 2>/dev/null || { drop_namespaces; return 1; }
    ip link add "th-${HOSTS[$i]}" type veth peer name eth0 netns "$ns" &&
      ip addr add "10.213.$i.1/24" dev "th-${HOSTS[$i]}" &&
      ip link set "th-${HOSTS[$i]}" up &&
      ip -n "$ns" addr add "10.213.$i.2/24" dev eth0 &&
      ip -n "$ns" link set eth0 up &&
      ip -n "$ns" link set lo up || { drop_namespaces; return 1; }
  done
}

drop_namespaces() {
  local h
  for h in "${HOSTS[@]}"; do
    ip netns del "$NETNS_PREFIX-$h" 2>/dev/null || true
    ip link del "th-$h" 2>/dev/null || true
  done
}

# The store URL as host N sees it: through the proxy's forward in its
# namespace's gateway.
store_for() { # INDEX STORE
  if [ "$MODE" = netns ]; then
    echo "$2" | sed -E "s#@[^/@]+:([0-9]+)/#@10.213.$1.1:\1/#"
  else
    echo "$2"
  fi
}

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
  local name="host-${HOSTS[$1]}" port="${PORTS[$1]}" addr="${ADDRS[$1]}"
  local in=() remote=()
  if [ "$MODE" = netns ]; then
    in=(ip netns exec "$NETNS_PREFIX-${HOSTS[$1]}")
    remote=(--allow-remote)
  fi
  mkdir -p "$DIR/$name"
  # shellcheck disable=SC2086
  TOOLHOST_HOST_NAME="$name" setsid "${in[@]}" "$BIN" serve --http "$addr:$port" "${remote[@]}" \
    --workspace "$DIR/workspace" --key-file "$DIR/root.key" --store "$(store_for "$1" "$2")" \
    --artifact-dir "$DIR/$name/artifacts" --cache-dir "$DIR/cache" \
    --log-format json ${TOOLHOST_FLEET_ARGS:-} \
    >>"$DIR/logs/$name.log" 2>&1 </dev/null &
  echo $! >"$DIR/$name/pid"
}

# Starts one host again (after it was killed) on the fleet's store.
restart() { # a|b|c
  load_mode
  local i
  for i in 0 1 2; do
    if [ "${HOSTS[$i]}" = "$1" ]; then
      start_host "$i" "$(cat "$DIR/store-url")"
      wait_ready "http://${ADDRS[$i]}:${PORTS[$i]}/readyz" 60 ||
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
  drop_namespaces
  if [ "${TOOLHOST_FLEET_NETNS:-1}" != 0 ] && make_namespaces; then
    echo netns >"$DIR/mode"
  else
    echo loopback >"$DIR/mode"
  fi
  load_mode
  local i
  : >"$DIR/hosts"
  for i in 0 1 2; do
    echo "host-${HOSTS[$i]} http://${ADDRS[$i]}:${PORTS[$i]}/mcp" >>"$DIR/hosts"
  done
  if [ "$MODE" = netns ]; then
    log "hosts in network namespaces $NETNS_PREFIX-{a,b,c}: ${ADDRS[*]}, ports ${PORTS[*]}"
  else
    log "hosts on loopback addresses (no network namespaces): ${ADDRS[*]}, ports ${PORTS[*]}"
  fi
  sed -e "s|@PROXY_PORT@|$PROXY_PORT|" -e "s|@PORT_A@|${PORTS[0]}|" \
    -e "s|@PORT_B@|${PORTS[1]}|" -e "s|@PORT_C@|${PORTS[2]}|" \
    -e "s|@ADDR_A@|${ADDRS[0]}|" -e "s|@ADDR_B@|${ADDRS[1]}|" -e "s|@ADDR_C@|${ADDRS[2]}|" \
    "$ROOT/deploy/haproxy.cfg" >"$DIR/haproxy.cfg"
  if [ "$MODE" = netns ]; then
    # The hosts' way to PostgreSQL: a TCP forward on each namespace's
    # gateway to the store's address.
    local pg
    pg="$(echo "$store" | sed -E 's#^[a-z]+://[^@]*@([^/]+)/.*#\1#')"
    {
      echo ""
      echo "listen postgres"
      echo "    mode tcp"
      echo "    timeout client 1h"
      echo "    timeout server 1h"
      for i in 0 1 2; do echo "    bind 10.213.$i.1:${pg##*:}"; done
      echo "    server store $pg"
    } >>"$DIR/haproxy.cfg"
  fi
  haproxy -f "$DIR/haproxy.cfg" -D -p "$DIR/haproxy.pid"
  for i in 0 1 2; do start_host "$i" "$store"; done
  for i in 0 1 2; do
    wait_ready "http://${ADDRS[$i]}:${PORTS[$i]}/readyz" 60 ||
      { log "host-${HOSTS[$i]} is not ready; see $DIR/logs/host-${HOSTS[$i]}.log"; exit 1; }
  done
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
  local name pids=()
  for name in "${HOSTS[@]}"; do
    local pidfile="$DIR/host-$name/pid"
    if [ -f "$pidfile" ]; then
      pids+=("$(cat "$pidfile")")
      kill -TERM "$(cat "$pidfile")" 2>/dev/null || true
      rm -f "$pidfile"
    fi
  done
  # The namespaces go once their hosts have exited.
  local left=50 pid
  for pid in "${pids[@]}"; do
    while kill -0 "$pid" 2>/dev/null && [ "$left" -gt 0 ]; do sleep 0.1; left=$((left - 1)); done
  done
  drop_namespaces
}

status() {
  load_mode
  local i
  for i in 0 1 2; do
    printf 'host-%s %s\n' "${HOSTS[$i]}" \
      "$(curl -s -o /dev/null -w '%{http_code}' "http://${ADDRS[$i]}:${PORTS[$i]}/readyz" || true)"
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
