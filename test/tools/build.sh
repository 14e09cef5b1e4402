#!/usr/bin/env bash
# Builds the deploy tools the tests use (kustomize, helm, kubectl, argocd-lua) from the Go modules pinned in
# test/tools/<tool>/go.mod and go.sum, the way test/cluster/build.sh builds the control
# plane: into a git-ignored cache folder keyed by version and by the pins' checksum, so
# repeat runs cost nothing. Usage: build.sh kustomize|helm|kubectl|argocd-lua. Prints the binary's
# path on stdout's last line. kubectl's module pins the control plane's Kubernetes
# version (the same replace lines as test/cluster/go.mod), so docs/install.md's commands
# run with a matching client.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tool=${1:?usage: build.sh kustomize|helm|kubectl|argocd-lua}
dir="$here/$tool"
case "$tool" in
  kustomize) pkg=sigs.k8s.io/kustomize/kustomize/v5; module=$pkg ;;
  helm) pkg=helm.sh/helm/v3/cmd/helm; module=helm.sh/helm/v3 ;;
  kubectl) pkg=k8s.io/kubernetes/cmd/kubectl; module=k8s.io/kubernetes ;;
  # Argo CD's Lua interpreter running a health script as Argo CD runs it (main.go here).
  argocd-lua) pkg=.; module=github.com/yuin/gopher-lua ;;
  *) echo "build.sh: unknown tool $tool (kustomize, helm, kubectl or argocd-lua)" >&2; exit 2 ;;
esac
if ! command -v go >/dev/null 2>&1; then
  echo "tollgate tests: Go is not installed; install Go >= 1.26 to build $tool, or put $tool on PATH and set TOLLGATE_${tool^^}" >&2
  exit 3
fi
version=$(sed -n "s|^\t*${module//./\\.} \(v[^ ]*\).*|\1|p" "$dir/go.mod" | head -1)
sum=$(shopt -s nullglob; cat "$dir/go.mod" "$dir/go.sum" "$here/build.sh" "$dir"/*.go | sha256sum | cut -c1-12)
out="${TOLLGATE_TOOLS_CACHE:-$here/../../.cache/tools}/$tool-$version-$sum"
if [ -x "$out/$tool" ]; then
  echo "$out/$tool"; exit 0
fi
mkdir -p "$out.tmp"
start=$(date +%s)
echo "building $tool $version ..." >&2
ldflags="-s -w"
if [ "$tool" = kubectl ]; then
  ldflags="$ldflags -X k8s.io/component-base/version.gitVersion=$version -X k8s.io/client-go/pkg/version.gitVersion=$version"
fi
if [ "$tool" = helm ]; then
  # As helm's own Makefile does: the version, and the Kubernetes version `helm template`
  # assumes (from the client-go helm is built with; otherwise it claims v1.20).
  kminor=$(sed -n 's|^\t*k8s\.io/client-go v0\.\([0-9]*\)\..*|\1|p' "$dir/go.mod")
  ldflags="$ldflags -X helm.sh/helm/v3/internal/version.version=$version"
  ldflags="$ldflags -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$kminor"
fi
(cd "$dir" && CGO_ENABLED=0 go build -mod=readonly -trimpath -ldflags "$ldflags" -o "$out.tmp/$tool" "$pkg")
rm -rf "$out"; mv "$out.tmp" "$out"
echo "$tool built in $(( $(date +%s) - start ))s" >&2
echo "$out/$tool"
