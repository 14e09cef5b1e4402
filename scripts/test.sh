#!/usr/bin/env bash
# The test entry point behind `npm test` (all), `npm run test:unit` and `npm run test:e2e`.
# Unit tests are pure and fast. E2E tests need the local control plane (built here from
# upstream Go modules, cached) or TOLLGATE_TEST_KUBECONFIG pointing at a cluster, plus
# git (for the HTTP Git server) and prometheus (Debian's package) where metrics matter.
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}
unit() { node --test --test-reporter=spec "test/unit/**/*.test.ts"; }
e2e() {
  if [ -z "${TOLLGATE_TEST_KUBECONFIG:-}" ]; then
    TOLLGATE_CLUSTER_BIN_DIR=$(bash test/cluster/build.sh | tail -1)
    export TOLLGATE_CLUSTER_BIN_DIR
  fi
  node --test --test-reporter=spec --test-concurrency=1 --test-timeout=900000 "test/e2e/**/*.test.ts"
}
case "$what" in
  unit) unit ;;
  e2e) e2e ;;
  all) unit && e2e ;;
  *) echo "usage: test.sh unit|e2e|all" >&2; exit 2 ;;
esac
