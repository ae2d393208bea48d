#!/usr/bin/env bash
# Hand-over time of `portico run`'s upgrade (SIGUSR2, `portico upgrade --pid`): a Portico
# serving INGRESSES Ingresses is upgraded UPGRADES times in a row; for each upgrade it measures
# the time from the signal to the new process serving (its first state applied, the old one
# told: `portico upgrade` returns, polling every 20 ms) and to the old process's exit (no
# client holds a connection, so the old one exits after --shutdown-grace, set to 0s here).
# Prints a Markdown table: median and max of both.
#
# MODE=agent measures `portico agent` instead (root only): in two network namespaces of its
# own joined by a veth pair, etcd, a controller and the agent n0 in the first, its standby n1
# in the second, active-standby on (`--interface`); n0 holds the VIPs of the INGRESSES load
# balancers of a dedicated class it is placed active for, and is upgraded: each upgrade hands
# the sockets, the lease and the claims over. It also checks that no claim's holder or epoch
# changed (no election).
#
# PROVIDER=haproxy serves with the haproxy provider (both modes): haproxy binds the listeners
# itself (fixed loopback ports in MODE=run), and the script also checks that every haproxy
# master is the same process before and after the upgrades (each new Portico adopts them).
#
# Usage: bash bench/upgrade.sh                      (builds the release binary if missing)
#        PORTICO=target/debug/portico INGRESSES=1000 UPGRADES=10 bash bench/upgrade.sh
#        MODE=agent INGRESSES=10 bash bench/upgrade.sh
#        PROVIDER=haproxy [MODE=agent] INGRESSES=10 bash bench/upgrade.sh
# It starts and stops only its own processes, by PID, and listens only on 127.0.0.1 (or in
# its own namespace, deleted at the end).
set -euo pipefail
cd "$(dirname "$0")/.."
PORTICO=${PORTICO:-target/release/portico}
MODE=${MODE:-run}
INGRESSES=${INGRESSES:-1000}
UPGRADES=${UPGRADES:-10}
PROVIDER=${PROVIDER:-proxy}
[ -x "$PORTICO" ] || cargo build --release --bin portico
PORTICO=$(realpath "$PORTICO")

work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/manifests" "$work/state"
if [ "$MODE" = agent ]; then
  ns="ptbench$$"
  ns1="ptbench$$s"
  ip netns add "$ns"
  ip netns add "$ns1"
  cleanup() {
    for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
    for n in "$ns" "$ns1"; do
      for pid in $(ip netns pids "$n" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
      ip netns del "$n" 2>/dev/null || true
    done
    rm -rf "$work"
  }
  in_ns() { ip netns exec "$ns" "$@"; }
  in_ns ip link set lo up
  in_ns ip link add ha0 type veth peer name ha1
  in_ns ip link set ha1 netns "$ns1"
  in_ns ip address add 10.255.0.2/16 dev ha0
  in_ns ip link set ha0 up
  ip netns exec "$ns1" ip address add 10.255.0.3/16 dev ha1
  ip netns exec "$ns1" ip link set ha1 up
  ip netns exec "$ns1" ip link set lo up
  in_ns etcd --name bench --data-dir "$work/etcd" \
    --listen-client-urls http://127.0.0.1:23790,http://10.255.0.2:23790 \
    --advertise-client-urls http://127.0.0.1:23790 --listen-peer-urls http://127.0.0.1:23800 \
    --initial-advertise-peer-urls http://127.0.0.1:23800 \
    --initial-cluster bench=http://127.0.0.1:23800 >"$work/etcd.log" 2>&1 &
  pids+=("$!")
  {
    printf -- '---\napiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata:\n  name: ha\n  annotations: {portico.dev/topology: dedicated}\nspec: {controller: portico.dev/ingress-controller}\n'
    printf -- '---\napiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: bench}\nspec:\n  ports: [{name: http, port: 80}]\n'
    for i in $(seq 1 "$INGRESSES"); do
      printf -- '---\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: i%s, namespace: bench}\nspec:\n  ingressClassName: ha\n  rules:\n  - host: h%s.test\n    http:\n      paths:\n      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}\n' "$i" "$i"
    done
  } >"$work/manifests/all.yaml"
  store=--store=etcd://127.0.0.1:23790
  # Not through in_ns: $! must be the agent's PID (ip netns exec execs it).
  ip netns exec "$ns" "$PORTICO" agent --node n0 "$store" --interface ha0 --advertise-address 10.255.0.2 \
    --http-listen 127.0.0.1:18080 --https-listen 127.0.0.1:18443 --admin-listen 127.0.0.1:19180 \
    --state-dir "$work/state" --access-log off --shutdown-grace 0s --provider "$PROVIDER" \
    >"$work/out" 2>"$work/err" &
  pid=$!
  pids+=("$pid")
  for _ in $(seq 1 500); do grep -qs "admin API on" "$work/out" && break; sleep 0.02; done
  mkdir -p "$work/state1"
  ip netns exec "$ns1" "$PORTICO" agent --node n1 --store=etcd://10.255.0.2:23790 --interface ha1 \
    --advertise-address 10.255.0.3 --http-listen 127.0.0.1:18080 --https-listen 127.0.0.1:18443 \
    --admin-listen 127.0.0.1:19180 --state-dir "$work/state1" --access-log off \
    >"$work/out1" 2>"$work/err1" &
  pids+=("$!")
  in_ns "$PORTICO" controller -f "$work/manifests" "$store" --admin-listen 127.0.0.1:19181 \
    --identity c1 --vip-pool 10.255.1.0/20 --fip-pool 10.255.32.0/20 --provider "$PROVIDER" \
    >"$work/controller.out" 2>&1 &
  pids+=("$!")
  held() { in_ns etcdctl --endpoints 127.0.0.1:23790 get --prefix /portico/ha/ --print-value-only | grep -o '"holder":"n[01]","epoch":[0-9]*' | sort | uniq -c | tr '\n' ' '; }
  claims() { in_ns etcdctl --endpoints 127.0.0.1:23790 get --prefix /portico/ha/ --print-value-only | grep -c '"holder"' || true; }
  epochs() { held; }
  for _ in $(seq 1 1500); do [ "$(claims)" -ge "$INGRESSES" ] && break; sleep 0.1; done
  [ "$(claims)" -ge "$INGRESSES" ] || { echo "not every load balancer is claimed" >&2; exit 1; }
  # Settled: the epochs unchanged over 3 s (an agent without a standby adding many addresses
  # at start may step down and claim again while it does).
  before=$(epochs)
  for _ in $(seq 1 20); do
    sleep 3
    now_epochs=$(epochs)
    [ "$now_epochs" = "$before" ] && break
    before=$now_epochs
  done
fi
if [ "$MODE" = run ]; then
{
  printf -- '---\napiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: bench}\nspec:\n  ports: [{name: http, port: 80}]\n'
  for i in $(seq 1 "$INGRESSES"); do
    printf -- '---\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: i%s, namespace: bench}\nspec:\n  rules:\n  - host: h%s.test\n    http:\n      paths:\n      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}\n' "$i" "$i"
  done
} >"$work/manifests/all.yaml"

# haproxy binds its listeners itself: it cannot be given port 0.
listen=(--http-listen 127.0.0.1:0 --https-listen 127.0.0.1:0)
[ "$PROVIDER" = haproxy ] && listen=(--http-listen 127.0.0.1:28080 --https-listen 127.0.0.1:28443)
"$PORTICO" run -f "$work/manifests" "${listen[@]}" --provider "$PROVIDER" \
  --admin-listen 127.0.0.1:0 --state-dir "$work/state" --access-log off \
  --shutdown-grace 0s >"$work/out" 2>"$work/err" &
pid=$!
pids+=("$pid")
for _ in $(seq 1 500); do grep -qs "admin API on" "$work/out" && break; sleep 0.02; done
admin=$(head -1 "$work/out" | awk '{print $NF}')
for _ in $(seq 1 500); do
  curl -fs "http://$admin/readyz" >/dev/null 2>&1 && break
  sleep 0.02
done
fi

# The haproxy masters (their PID files), to compare after the upgrades.
masters() { cat "$work"/state/loadbalancer/haproxy/*/haproxy.pid 2>/dev/null | sort -n | tr '\n' ' '; }
if [ "$PROVIDER" = haproxy ]; then
  for _ in $(seq 1 500); do [ -n "$(masters)" ] && break; sleep 0.02; done
  masters_before=$(masters)
  [ -n "$masters_before" ] || { echo "no haproxy master runs" >&2; exit 1; }
fi

now() { date +%s%N; }
serving=()
exited=()
for i in $(seq 1 "$UPGRADES"); do
  start=$(now)
  out=$("$PORTICO" upgrade --pid "$pid" --state-dir "$work/state")
  ready=$(now)
  new=$(awk '{print $4}' <<<"$out")
  pids+=("$new")
  while [ -e "/proc/$pid" ] && ! grep -q '^State:.*Z' "/proc/$pid/status" 2>/dev/null; do
    sleep 0.005
  done
  gone=$(now)
  serving+=($(((ready - start) / 1000000)))
  exited+=($(((gone - start) / 1000000)))
  pid=$new
done

if [ "$MODE" = agent ]; then
  after=$(epochs)
  [ "$before" = "$after" ] || { echo "a claim's epoch changed (an election): $before -> $after" >&2; exit 1; }
  echo "(agent: claims by holder and epoch before and after the upgrades of n0: $after)"
fi
if [ "$PROVIDER" = haproxy ]; then
  [ "$(masters)" = "$masters_before" ] || { echo "the haproxy masters changed: $masters_before -> $(masters)" >&2; exit 1; }
  for m in $masters_before; do
    [ -e "/proc/$m" ] || { echo "haproxy master $m is gone" >&2; exit 1; }
  done
  echo "(haproxy: $(wc -w <<<"$masters_before") master(s), the same PIDs before and after: $masters_before)"
fi
stats() { tr ' ' '\n' <<<"$*" | sort -n | awk '{a[NR]=$1} END {printf "%d | %d", a[int((NR+1)/2)], a[NR]}'; }
echo "| $MODE, provider $PROVIDER: $INGRESSES Ingresses, $UPGRADES upgrades | median ms | max ms |"
echo "| --- | --- | --- |"
echo "| SIGUSR2 to the new process serving | $(stats "${serving[@]}") |"
echo "| SIGUSR2 to the old process's exit | $(stats "${exited[@]}") |"
