#!/usr/bin/env bash
# Balancing benchmark: least request (P2C over a latency EWMA in the proxy, leastconn in haproxy)
# against round robin, with three echo members of one Service, the third answering DELAY_MS later.
# For each provider (the built-in proxy, haproxy) and algorithm: CONCURRENCY clients send
# requests back to back for DURATION seconds; the table gives req/s, p50/p99 latency and each
# member's share of the requests.
#
# Usage: bash bench/balance.sh      (DURATION=10 CONCURRENCY=16 DELAY_MS=50 by default)
# It starts and stops only its own processes and sends traffic only to 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-10}
CONCURRENCY=${CONCURRENCY:-16}
DELAY_MS=${DELAY_MS:-50}

source scripts/lib.sh
apt_install haproxy
cargo build --release --locked -q -p portico -p portico-bench
TARGET=${CARGO_TARGET_DIR:-$PWD/target}/release

work=$(mktemp -d)
chmod 755 "$work" # haproxy runs as an unprivileged user
trap 'rm -rf "$work"' EXIT

"$TARGET/portico-bench" balance --portico "$TARGET/portico" --dir "$work" \
  --duration "$DURATION" --concurrency "$CONCURRENCY" --delay-ms "$DELAY_MS" "$@"
