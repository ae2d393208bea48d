#!/usr/bin/env bash
# Runs every test of Portico. Installs what the tests need when it is missing, so a fresh
# machine (and CI) needs nothing but this script. Usage: bash scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."

source scripts/lib.sh
apt_install curl

echo "== format and lints"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings

echo "== unit, golden and end-to-end tests"
cargo test --workspace --locked

echo "== the README's demo command"
bash scripts/demo-smoke.sh
