#!/usr/bin/env bash
# `npm run test:unit:any-day`: the unit tests with the wall clock moved ten years ahead and
# two years back (scripts/shifted-clock.ts), so a test that depends on today's date fails
# here, not on the day the date passes. Dot reporter: failures are listed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
for days in 3653 -730; do
  echo "== unit tests with the clock moved ${days} days"
  TOLLGATE_CLOCK_SHIFT_DAYS=$days NODE_OPTIONS="--import ./scripts/shifted-clock.ts" \
    node --test --test-reporter=dot "test/unit/**/*.test.ts"
done
