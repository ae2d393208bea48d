#!/usr/bin/env bash
# Distributed-mode benchmark: the generated cluster of bench/scale.sh (default 1,000 and then
# 10,000 Ingresses) served through etcd by `portico controller` and two `portico agent`s.
#
# portico-bench (crates/bench, `distributed`) starts, per size, a single-member etcd on
# 127.0.0.1 (its data directory under a temporary directory on disk), a `portico controller`
# on the manifests and two agents on 127.0.0.2 and 127.0.0.3, and measures:
#   - controller start to both agents ready and serving;
#   - CHANGES one-Ingress changes (a path moved) and CHANGES endpoint changes (a Service's
#     slice moved to a marker backend), each timed on both agents at once: p50/p99/max per
#     agent and of the later of the two; the median steps from the processes' info logs
#     (compiled, written to etcd, applied by the later agent, seen by the bench);
#   - what etcd wrote per change: the keys and values of the controller's commit as an
#     `etcdctl watch` on the desired prefix saw them, and etcd's WAL bytes (everything etcd
#     logged in the meantime, the agents' feedback included); WAL fsync times;
#   - agent B's cold start (spawn to /readyz 200 and the newest changed route served) with its
#     cache deleted (from etcd), then with etcd stopped (from its cache), COLD_STARTS each;
#   - RSS of the controller, both agents and etcd a second after start, VmHWM after the changes.
# It prints a Markdown table with the targets; a missed target says MISSED but exits 0.
#
# Usage: bash bench/distributed.sh [portico-bench distributed options]
#        SIZES=1000 CHANGES=20 bash bench/distributed.sh           (a quick run)
# Loopback only. It stops only its own processes, by PID: the bench stops them itself, and the
# exit trap stops any that a killed bench left (those listed in its PID file that still run the
# same executable).
set -euo pipefail
cd "$(dirname "$0")/.."
SIZES=${SIZES:-1000,10000}
CHANGES=${CHANGES:-50}
COLD_STARTS=${COLD_STARTS:-3}

source scripts/lib.sh
apt_install etcd-server etcd-client
cargo build --release --locked -p portico -p portico-bench

work=$(mktemp -d)
cleanup() {
  if [ -f "$work/pids" ]; then
    while read -r pid exe; do
      if [ "$(readlink "/proc/$pid/exe" 2>/dev/null)" = "$exe" ]; then
        kill "$pid" 2>/dev/null || true
      fi
    done <"$work/pids"
  fi
  rm -rf "$work"
}
trap cleanup EXIT

target/release/portico-bench distributed --portico target/release/portico --dir "$work" \
  --sizes "$SIZES" --changes "$CHANGES" --cold-starts "$COLD_STARTS" "$@"
