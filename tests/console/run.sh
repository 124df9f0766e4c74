#!/usr/bin/env bash
# The operator's console in a real browser (tests/console/browser.py):
# headless Chromium from Debian's packages, driven through chromedriver,
# against the debug binary. With --screenshots the pages are saved to
# docs/console/. Exit 0 only when every check holds.
#
# Needs: chromium and chromium-driver (apt), the test guests
# (target/guests, built here when missing), python3.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$ROOT"
export TOOLHOST_BIN="${TOOLHOST_BIN:-$ROOT/target/debug/toolhost}"
[ -x "$TOOLHOST_BIN" ] || cargo build --locked -p toolhost-cli
if [ ! -f target/guests/wasm32-wasip2/release/tp_effects.wasm ]; then
  (cd tests/plugins && cargo build --release --locked --target wasm32-wasip2 --target-dir ../../target/guests)
fi
exec python3 tests/console/browser.py "$@"
