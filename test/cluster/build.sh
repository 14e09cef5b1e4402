#!/usr/bin/env bash
# Builds kube-apiserver, kube-scheduler, kube-controller-manager and etcd from the
# upstream Go modules pinned in go.mod/go.sum into a git-ignored cache folder keyed by
# version, so repeat runs cost nothing. Prints the folder on stdout's last line.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if ! command -v go >/dev/null 2>&1; then
  echo "tollgate e2e: Go is not installed. Install Go >= 1.26 (https://go.dev/dl or 'apt-get install golang') to build the local control plane, or set TOLLGATE_TEST_KUBECONFIG to run the e2e tests against an existing cluster." >&2
  exit 3
fi
k8s=$(sed -n 's/^\tk8s.io\/kubernetes \(v[^ ]*\).*/\1/p' "$here/go.mod")
etcd=$(sed -n 's/^\(require \)\?\t\?go.etcd.io\/etcd\/server\/v3 \(v[^ ]*\).*/\2/p' "$here/go.mod" | head -1)
sum=$(cat "$here/go.mod" "$here/go.sum" "$here/build.sh" "$here/etcd/main.go" | sha256sum | cut -c1-12)
out="${TOLLGATE_CLUSTER_BIN:-$here/../../.cache/cluster}/k8s-$k8s-etcd-$etcd-$sum"
if [ -x "$out/kube-apiserver" ] && [ -x "$out/kube-scheduler" ] && [ -x "$out/kube-controller-manager" ] && [ -x "$out/etcd" ]; then
  echo "$out"; exit 0
fi
mkdir -p "$out.tmp"
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$k8s -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(echo "$k8s" | cut -d. -f2) -X k8s.io/component-base/version.gitTreeState=clean"
start=$(date +%s)
cd "$here"
for cmd in kube-apiserver kube-scheduler kube-controller-manager; do
  echo "building $cmd $k8s ..." >&2
  CGO_ENABLED=0 go build -mod=readonly -trimpath -tags selinux,notest -ldflags "$ldflags" -o "$out.tmp/$cmd" "k8s.io/kubernetes/cmd/$cmd"
done
echo "building etcd $etcd ..." >&2
CGO_ENABLED=0 go build -mod=readonly -trimpath -ldflags "-s -w" -o "$out.tmp/etcd" ./etcd
rm -rf "$out"; mv "$out.tmp" "$out"
echo "control plane built in $(( $(date +%s) - start ))s" >&2
echo "$out"
