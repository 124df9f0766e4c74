#!/usr/bin/env bash
# Installs the official MCP Python SDK (`mcp`, pinned in
# tests/mcp_client/requirements.txt) into a virtual environment at
# target/py-mcp/venv, when missing, for tests/mcp_client/sdk_client.py and
# the tests that drive it (tests/integration/python_sdk.rs).
#
# Safe to run any number of times; a second run only checks. Progress goes
# to stderr, nothing to stdout. Needs python3 (>= 3.10, with venv). The
# integration tests run it themselves on a developer machine when the SDK
# is missing; under CI they fail instead.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { echo "py-mcp-client.sh: $*" >&2; }

WANT=$(sed -n 's/^mcp==\([^ ]*\).*/\1/p' tests/mcp_client/requirements.txt)
venv=target/py-mcp/venv
if "$venv/bin/python" - "$WANT" >/dev/null 2>&1 <<'PY'
import sys, importlib.metadata as m
assert m.version("mcp") == sys.argv[1]
import mcp.client.session, mcp.client.stdio
PY
then
  log "mcp $WANT: present"
else
  log "installing mcp $WANT into $venv"
  python3 -m venv "$venv" >&2
  timeout 600 "$venv/bin/pip" install --quiet --disable-pip-version-check \
    -r tests/mcp_client/requirements.txt >&2
fi
