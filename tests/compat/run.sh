#!/usr/bin/env bash
# The official openai npm client against the simulator (and later the proxy).
# Installs the pinned client into tests/compat/node_modules on first use.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$(cd "$(dirname "${1:-build/tokenstorm}")" && pwd)/$(basename "${1:-build/tokenstorm}")
cd "$here"
# npm install is quick when everything pinned in package.json is already there
npm install --no-audit --no-fund --loglevel=error >/dev/null
TOKENSTORM_BIN="$bin" node --test --test-reporter=spec ./*.test.mjs
