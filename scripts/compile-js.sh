#!/usr/bin/env bash
# Compiles src/ to JavaScript for the image: OUT/src holds one .js module per module of
# src/, laid out as src/ is (so every path a module finds from its own URL, schemas/ and
# package.json among them, is the same), relative imports rewritten from .ts to .js
# (TypeScript's rewriteRelativeImportExtensions), types and comments gone. The image then
# never loads Node's TypeScript stripper (about 17 MB resident, and the stripping of every
# module at a first start); bin/tollgate.js runs the compiled tree when it is there.
# TypeScript emits deterministically, so the image stays reproducible.
#
# Needs the dev dependencies (npm ci). Usage: scripts/compile-js.sh OUT
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?usage: scripts/compile-js.sh OUT (OUT/src receives the compiled modules)}
tsc=$root/node_modules/.bin/tsc
if [ ! -x "$tsc" ]; then
  echo "compile-js.sh: $tsc not found: run npm ci (TypeScript is a dev dependency)" >&2
  exit 1
fi
mkdir -p "$out"
if [ "$(cd "$out" && pwd -P)" = "$(cd "$root" && pwd -P)" ]; then
  echo "compile-js.sh: OUT is the checkout itself; give another folder (its src/ is replaced)" >&2
  exit 2
fi
rm -rf "$out/src"
# Type-checking is CI's lint step; here only the emit (noCheck).
"$tsc" -p "$root/tsconfig.compile.json" --outDir "$out/src"
# The schema validators are JavaScript already (generated): copied as they are.
cp "$root/src/policy/generated/validators.js" "$out/src/policy/generated/validators.js"
