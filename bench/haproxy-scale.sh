#!/usr/bin/env bash
# The haproxy provider at scale, beside the built-in proxy on the same files.
#
# portico-bench (crates/bench) writes 10,000 Ingresses (20,000 Prefix paths over 2,000 hosts)
# and 5,000 Services with 50,000 endpoints, every endpoint a distinct pool member (10 echo
# backends on 127.0.0.1, the ports cycling per endpoint), runs `portico run -f DIR --provider
# haproxy` on them under light traffic and measures: cold start to serving (the first and the
# last route answer), one-Ingress changes served (a path added to an Ingress), one-endpoint
# changes served (one endpoint of a Service moved to a new backend) and the haproxy reloads
# each series caused (`portico_haproxy_reloads_total`), failed requests, and the data plane's
# CPU per request on the first and on the last route of the table (from
# /proc/<pid>/task/*/schedstat: haproxy's processes, or the Portico process for the built-in
# proxy). Then the built-in proxy on the same files, the same way.
# Each change phase stops after --phase-budget seconds (default 120).
#
# The shape of issue 35: every endpoint on an address of its own (--pod-addresses: each
# Service's first endpoint live on 127.0.0.1, the other 45,000 on distinct loopback addresses
# nobody listens on, not ready), Portico run under a hard limit of 20,000 open files
# (NOFILE=20000: `prlimit`, which haproxy inherits); the table then lists, below it, the
# diagnostics that name what was reduced to fit that limit.
#
# Usage: bash bench/haproxy-scale.sh [portico-bench haproxy-scale options]
#        INGRESSES=500 HOSTS=100 PATHS=1000 SERVICES=250 ENDPOINTS=2500 CHANGES=10 \
#          bash bench/haproxy-scale.sh
#        NOFILE=20000 CHANGES=10 bash bench/haproxy-scale.sh --pod-addresses
# It starts and stops only its own processes, by PID, and sends traffic only to 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."
INGRESSES=${INGRESSES:-10000}
HOSTS=${HOSTS:-2000}
PATHS=${PATHS:-20000}
SERVICES=${SERVICES:-5000}
ENDPOINTS=${ENDPOINTS:-50000}
CHANGES=${CHANGES:-50}
NOFILE=${NOFILE:-}

source scripts/lib.sh
apt_install haproxy
cargo build --release --locked -p portico -p portico-bench
target=${CARGO_TARGET_DIR:-target}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

timeout 1800 "$target/release/portico-bench" haproxy-scale --portico "$target/release/portico" \
  --dir "$work" --ingresses "$INGRESSES" --hosts "$HOSTS" --paths "$PATHS" \
  --services "$SERVICES" --endpoints "$ENDPOINTS" --changes "$CHANGES" \
  ${NOFILE:+--nofile "$NOFILE"} "$@"
