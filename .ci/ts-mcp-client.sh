#!/usr/bin/env bash
# Installs the official MCP TypeScript SDK (`@modelcontextprotocol/sdk`,
# pinned exactly in tests/mcp_client/ts/package.json and its committed
# package-lock.json) with `npm ci` into tests/mcp_client/ts/node_modules,
# when missing, for tests/mcp_client/ts/client.mjs and the tests that drive
# it (tests/integration/sdk_clients.rs).
#
# Safe to run any number of times; a second run only checks. Progress goes
# to stderr, nothing to stdout. Needs node (>= 18; the system node the guest
# toolchains use) with npm. The integration tests run it themselves on a
# developer machine when the SDK is missing; under CI they fail instead.
set -euo pipefail
cd "$(dirname "$0")/../tests/mcp_client/ts"

log() { echo "ts-mcp-client.sh: $*" >&2; }

WANT=$(node -p 'require("./package.json").dependencies["@modelcontextprotocol/sdk"]')
have=$(node -p 'require("./node_modules/@modelcontextprotocol/sdk/package.json").version' 2>/dev/null || true)
if [ "$have" = "$WANT" ]; then
  log "@modelcontextprotocol/sdk $WANT: present"
else
  log "installing @modelcontextprotocol/sdk $WANT into tests/mcp_client/ts/node_modules"
  timeout 600 npm ci --no-audit --no-fund --ignore-scripts --loglevel=error >&2
fi
