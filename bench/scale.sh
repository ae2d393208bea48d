#!/usr/bin/env bash
# Control-plane benchmark: Portico against a large generated cluster, beside nginx for reload cost.
#
# portico-bench (crates/bench) writes 10,000 Ingresses (20,000 Prefix paths over 2,000 hosts),
# 5,000 Services and their EndpointSlices (50,000 endpoints, all echo backends on 127.0.0.1) as
# kubectl-style YAML, with 1,000 of the Ingresses terminating TLS (a `kubernetes.io/tls` Secret
# each, ECDSA P-256 certificates for their hosts), runs the real `portico run -f` on them under
# ~200 requests/s and measures:
# cold start to ready, RSS, how fast a changed Ingress and a changed endpoint set are served
# (100 each, p50/p99/max), failed requests, and RSS after every file is deleted against an idle
# Portico. nginx gets the same routes as one nginx.conf (the TLS hosts with the same
# certificates, as PEM files): `nginx -t`, start, and 10 reloads.
# It prints a Markdown table with the targets; a missed target says MISSED but exits 0.
# Each Service has one EndpointSlice whose endpoints all share one backend port (a slice lists
# one port for all its endpoints and every address is 127.0.0.1); --port-per-endpoint gives
# every endpoint its own port instead, hence one slice per port. Each change phase stops after
# --phase-budget seconds (default 300). Then 1,000 more Ingress changes in a row (DRIFT_CHANGES)
# give the RSS drift: RSS after the first tenth against RSS after the last.
# PER_FILE=100 writes the Ingresses and Services 100 to a multi-document file (a change then
# rewrites a whole file). KUBERNETES=1 runs `portico run --kubernetes` instead, against the fake
# API server (crates/fake-apiserver/examples/fake-apiserver.rs, a process of its own) loaded with
# the same objects; each change is the changed file applied to it.
# HTTP_ROUTES=N adds the Gateway API beside the Ingresses in the same run: one Gateway and N
# HTTPRoutes (each its own hostname, two rules to two of the Services); their changes are timed
# like the Ingresses' and, with KUBERNETES=1, the time from start until every HTTPRoute has its
# status written (polled on the fake API server).
#
# Usage: bash bench/scale.sh [portico-bench scale options]      (full size: several minutes)
#        INGRESSES=500 HOSTS=100 PATHS=1000 SERVICES=250 ENDPOINTS=2500 CHANGES=20 TLS_SECRETS=50 \
#          bash bench/scale.sh
#        PER_FILE=100 bash bench/scale.sh          (multi-document files)
#        KUBERNETES=1 bash bench/scale.sh          (Kubernetes mode)
#        HTTP_ROUTES=10000 KUBERNETES=1 bash bench/scale.sh   (10,000 HTTPRoutes beside them)
# It starts and stops only its own processes, by PID, and sends traffic only to 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."
INGRESSES=${INGRESSES:-10000}
HOSTS=${HOSTS:-2000}
PATHS=${PATHS:-20000}
SERVICES=${SERVICES:-5000}
ENDPOINTS=${ENDPOINTS:-50000}
CHANGES=${CHANGES:-100}
TLS_SECRETS=${TLS_SECRETS:-1000}
PER_FILE=${PER_FILE:-1}
DRIFT_CHANGES=${DRIFT_CHANGES:-1000}
KUBERNETES=${KUBERNETES:-0}
HTTP_ROUTES=${HTTP_ROUTES:-0}

source scripts/lib.sh
apt_install nginx
cargo build --release --locked -p portico -p portico-bench
target=${CARGO_TARGET_DIR:-target}
kube=()
if [ "$KUBERNETES" = 1 ]; then
  cargo build --release --locked -p portico-fake-apiserver --example fake-apiserver
  kube=(--fake-apiserver "$target/release/examples/fake-apiserver")
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$target/release/portico-bench" scale --portico "$target/release/portico" --dir "$work" \
  --ingresses "$INGRESSES" --hosts "$HOSTS" --paths "$PATHS" --services "$SERVICES" \
  --endpoints "$ENDPOINTS" --changes "$CHANGES" --tls-secrets "$TLS_SECRETS" \
  --per-file "$PER_FILE" --drift-changes "$DRIFT_CHANGES" --http-routes "$HTTP_ROUTES" \
  "${kube[@]}" "$@"
