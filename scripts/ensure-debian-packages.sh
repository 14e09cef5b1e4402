#!/usr/bin/env bash
# Installs the Debian packages tollgate's demo and e2e tests run on, when they are missing:
#   git        its http-backend serves the policy repository
#   prometheus real metrics for the resize loop
#   openssl    control-plane keys
#   ssh        the client tollgate runs (through git) for ssh:// policy and audit remotes
#   libjemalloc2 the allocator the image preloads, for the soak's replicas (test/soak)
# Used by .ci/run and `npm run demo`. As root it runs apt-get; with passwordless sudo it
# runs sudo apt-get; otherwise it exits 1 and prints the exact command to run.
#
# Usage: ensure-debian-packages.sh [--label TEXT] [PROBE=PACKAGE ...]
#   PROBE is a command name (looked up on PATH) or an absolute path that must exist;
#   PACKAGE is installed when PROBE is missing. Without pairs, the list above.
set -euo pipefail

label=tollgate
if [ "${1:-}" = "--label" ]; then
  label=$2
  shift 2
fi
if [ $# -eq 0 ]; then
  set -- git=git /usr/lib/git-core/git-http-backend=git prometheus=prometheus openssl=openssl \
    ssh=openssh-client /usr/lib/x86_64-linux-gnu/libjemalloc.so.2=libjemalloc2
fi

need=()
for pair in "$@"; do
  probe=${pair%%=*}
  package=${pair#*=}
  if [ -z "$probe" ] || [ -z "$package" ] || [ "$probe" = "$pair" ]; then
    echo "$label: ensure-debian-packages.sh: \"$pair\" is not PROBE=PACKAGE" >&2
    exit 2
  fi
  if [[ $probe == /* ]]; then
    [ -e "$probe" ] && continue
  else
    command -v "$probe" >/dev/null 2>&1 && continue
  fi
  case " ${need[*]-} " in *" $package "*) ;; *) need+=("$package") ;; esac
done
[ ${#need[@]} -eq 0 ] && exit 0

command="apt-get install -y ${need[*]}"
if ! command -v apt-get >/dev/null 2>&1; then
  echo "$label: missing ${need[*]} and this is not a Debian-based system (no apt-get): install ${need[*]} with the system's package manager" >&2
  exit 1
fi
if [ "$(id -u)" -eq 0 ]; then
  as=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  as=(sudo -n)
else
  echo "$label: missing Debian packages: ${need[*]}. Install them, then run this again:" >&2
  echo "  sudo apt-get update && sudo $command" >&2
  exit 1
fi
echo "$label: apt-get install ${need[*]}"
if ! "${as[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq ||
  ! "${as[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null; then
  echo "$label: apt-get could not install ${need[*]}; try: sudo apt-get update && sudo $command" >&2
  exit 1
fi
