#!/usr/bin/env bash
# Runs a command with Node 24 first on PATH (see node-env.sh).
set -euo pipefail
source "$(dirname "$0")/node-env.sh"
exec "$@"
