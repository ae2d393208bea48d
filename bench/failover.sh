#!/usr/bin/env bash
# Failover benchmark (issue "Active-standby"): the gap a client sees when the active agent of a
# load balancer is lost, next to keepalived's, on the same network namespaces in the same run.
#
# The e2e test `failover::benchmark` (crates/cli/tests/e2e/failover.rs, ignored in normal runs)
# builds a lab of network namespaces (a bridge, a client namespace, two agent namespaces,
# addresses from 198.18.0.0/15), etcd and `portico controller` on the bridge, echo backends, and
# a client that opens a new connection every 10 ms (open loop; an answer slower than 100 ms
# counts as missed). The gap is the longest time between two requests answered fast. It runs
# KILLS failovers of each kind:
#   - Portico: SIGKILL of the active agent (50 ms adverts), then SIGTERM of the active agent;
#   - keepalived (Debian's package) moving the same VIP between the same namespaces while both
#     agents serve the load balancer (listening without holding the address), with VRRPv2 1 s
#     adverts and with VRRPv3 100 ms adverts; a kill is SIGKILL of the master's keepalived
#     (VRRP child first) and agent, as a SIGKILL of Portico's agent leaves its address too.
# It prints p50, p90 and max per kind as a Markdown table.
#
# Usage (root: network namespaces): bash bench/failover.sh
#        KILLS=5 bash bench/failover.sh        (a quick run)
# Everything it starts is killed by PID and every namespace removed when it ends.
set -euo pipefail
cd "$(dirname "$0")/.."
KILLS=${KILLS:-20}

if [ "$(id -u)" != 0 ]; then
  echo "bench/failover.sh needs root (network namespaces)" >&2
  exit 1
fi
source scripts/lib.sh
apt_install etcd-server etcd-client keepalived iproute2 nftables python3 curl
PORTICO_FAILOVER_KILLS=$KILLS cargo test --release --locked -p portico --test e2e \
  failover::benchmark -- --ignored --exact --nocapture --test-threads 1 2>&1 |
  grep -E '^\| |gap|kills, p50' || true
