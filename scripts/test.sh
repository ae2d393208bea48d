#!/usr/bin/env bash
# Runs every test of Portico. Installs what the tests need when it is missing, so a fresh
# machine (and CI) needs nothing but this script. Usage: bash scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."

apt_install() {
  local missing=()
  for pkg in "$@"; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "installing: ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
}
apt_install curl

echo "== format and lints"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings

echo "== unit, golden and end-to-end tests"
cargo test --workspace --locked

echo "== the README's demo command"
bash scripts/demo-smoke.sh
