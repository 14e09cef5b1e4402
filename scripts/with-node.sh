#!/usr/bin/env bash
# Runs a command with Node 24 first on PATH (see node-env.sh).
set -euo pipefail
source "$(dirname "$0")/node-env.sh"
# On a fresh clone the first `npm run demo` or `npm test` installs the dependencies too.
root="$(cd "$(dirname "$0")/.." && pwd)"
if [ ! -d "$root/node_modules" ]; then
  echo "tollgate: installing dependencies (npm ci) ..." >&2
  (cd "$root" && npm ci --no-audit --no-fund >&2)
fi
exec "$@"
