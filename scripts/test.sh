#!/usr/bin/env bash
# Runs every test of Portico. Installs what the tests need when it is missing, so a fresh
# machine (and CI) needs nothing but this script. Usage: bash scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."

source scripts/lib.sh
# A fresh clone gains nothing from incremental compilation, and its caches took gigabytes.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
# The release binaries the suite builds (the demo's, the TLS checks') are built with thin LTO
# over 16 codegen units: the same code, optimized less across crates, in a fraction of the time
# of Cargo.toml's release profile (whole-program LTO, one codegen unit: each binary's final
# step runs on one core). Benchmarks and published binaries use Cargo.toml's profile.
export CARGO_PROFILE_RELEASE_LTO="${CARGO_PROFILE_RELEASE_LTO:-thin}"
export CARGO_PROFILE_RELEASE_CODEGEN_UNITS="${CARGO_PROFILE_RELEASE_CODEGEN_UNITS:-16}"
# A fresh machine builds Portico with the Rust toolchain alone: the release binary of the
# README's demo command is built first, before anything is installed and with any protoc made
# unreachable; the demo and its printed commands run from it below.
echo "== the release build with the Rust toolchain alone"
bash scripts/build-without-protoc.sh
# curl and python3 (a plain backend) for the smoke scripts; openssl, sslscan and testssl.sh
# for the TLS checks; haproxy for the haproxy provider (its conformance run, golden configs
# checked with `haproxy -c`, reloads and restarts); etcd and etcdctl for the etcd store's tests;
# iproute2 and nftables for the failover tests in network
# namespaces; chromium (headless) for the dashboard's tests: never skipped.
apt_install curl openssl python3 sslscan testssl.sh haproxy etcd-server etcd-client iproute2 nftables chromium
# sed, not head: head exits after one line and haproxy then dies of SIGPIPE (pipefail).
haproxy -v | sed -n 1p

echo "== deploy/ and the Dockerfile: schemas, RBAC least privilege, pod security (offline)"
bash scripts/deploy-check.sh

echo "== format and lints"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings

echo "== unit, golden and end-to-end tests"
cargo test --workspace --locked

echo "== the README's demo command and the commands it prints"
bash scripts/demo-smoke.sh

echo "== TLS with openssl s_client, curl, sslscan and testssl.sh"
bash scripts/tls-smoke.sh
