#!/usr/bin/env bash
# Installs the guest toolchains for tools written in Python and JavaScript
# (docs/python.md, docs/js.md), when missing:
#
# - componentize-py (pinned in plugins/python/pyproject.toml) and the
#   toolhost_kit package, in a virtual environment at target/py-guest/venv;
# - componentize-js (pinned in plugins/js/package.json and
#   package-lock.json), in plugins/js/node_modules.
#
# Safe to run any number of times; a second run only checks. Progress goes
# to stderr, nothing to stdout. Needs python3 (>= 3.10, with venv) and node
# (>= 20) with npm. The integration tests (tests/integration/languages.rs)
# run it themselves on a developer machine when the toolchains are missing.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { echo "guest-toolchains.sh: $*" >&2; }

COMPONENTIZE_PY=$(sed -n 's/.*"componentize-py==\([^"]*\)".*/\1/p' plugins/python/pyproject.toml)
COMPONENTIZE_JS=$(sed -n 's/.*"@bytecodealliance\/componentize-js": "\([^"]*\)".*/\1/p' plugins/js/package.json)

# 1. Python: the same commands as docs/python.md.
venv=target/py-guest/venv
if "$venv/bin/python" - "$COMPONENTIZE_PY" >/dev/null 2>&1 <<'PY'
import sys, importlib.metadata as m, toolhost_kit
assert m.version("componentize-py") == sys.argv[1]
assert toolhost_kit.__file__.startswith(__import__("os").path.abspath("plugins/python"))
PY
then
  log "componentize-py $COMPONENTIZE_PY and toolhost_kit: present"
else
  log "installing componentize-py $COMPONENTIZE_PY and toolhost_kit into $venv"
  python3 -m venv target/py-guest/venv >&2
  target/py-guest/venv/bin/pip install -e plugins/python --quiet --disable-pip-version-check >&2
fi

# 2. JavaScript: the same command as docs/js.md.
installed=$(node -p 'require("./plugins/js/node_modules/@bytecodealliance/componentize-js/package.json").version' 2>/dev/null || true)
if [ "$installed" = "$COMPONENTIZE_JS" ]; then
  log "componentize-js $COMPONENTIZE_JS: present"
else
  log "installing componentize-js $COMPONENTIZE_JS into plugins/js/node_modules"
  npm ci --prefix plugins/js --no-audit --no-fund --loglevel=error >&2
fi
