#!/usr/bin/env bash
# Builds the release binary as a fresh machine with the Rust toolchain alone would: every
# protoc on this machine is made unreachable first (bound over by /dev/null in a private mount
# namespace, PROTOC unset), so a build step that still needed the protobuf compiler fails here.
# Usage: bash scripts/build-without-protoc.sh
set -euo pipefail
cd "$(dirname "$0")/.."

covered=()
while read -r found; do
  [ -n "$found" ] && covered+=("$found")
done < <(type -ap protoc | xargs -r readlink -f | sort -u)

if [ ${#covered[@]} -eq 0 ]; then
  echo "build without protoc: none on this machine"
  exec env -u PROTOC cargo build --release --locked
fi

# As root a mount namespace of our own; otherwise a user namespace that maps us to root in it.
unshare_flags=(--mount)
[ "$(id -u)" -eq 0 ] || unshare_flags=(--user --map-root-user --mount)
echo "build without protoc: covering ${covered[*]}"
exec unshare "${unshare_flags[@]}" bash -euo pipefail -c '
  for p in "$@"; do mount --bind /dev/null "$p"; done
  if protoc --version >/dev/null 2>&1; then echo "protoc still answers"; exit 1; fi
  exec env -u PROTOC cargo build --release --locked
' covering "${covered[@]}"
