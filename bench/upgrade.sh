#!/usr/bin/env bash
# Hand-over time of `portico run`'s upgrade (SIGUSR2, `portico upgrade --pid`): a Portico
# serving INGRESSES Ingresses is upgraded UPGRADES times in a row; for each upgrade it measures
# the time from the signal to the new process serving (its first state applied, the old one
# told: `portico upgrade` returns, polling every 20 ms) and to the old process's exit (no
# client holds a connection, so the old one exits after --shutdown-grace, set to 0s here).
# Prints a Markdown table: median and max of both.
#
# Usage: bash bench/upgrade.sh                      (builds the release binary if missing)
#        PORTICO=target/debug/portico INGRESSES=1000 UPGRADES=10 bash bench/upgrade.sh
# It starts and stops only its own processes, by PID, and listens only on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."
PORTICO=${PORTICO:-target/release/portico}
INGRESSES=${INGRESSES:-1000}
UPGRADES=${UPGRADES:-10}
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
{
  printf -- '---\napiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: bench}\nspec:\n  ports: [{name: http, port: 80}]\n'
  for i in $(seq 1 "$INGRESSES"); do
    printf -- '---\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: i%s, namespace: bench}\nspec:\n  rules:\n  - host: h%s.test\n    http:\n      paths:\n      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}\n' "$i" "$i"
  done
} >"$work/manifests/all.yaml"

"$PORTICO" run -f "$work/manifests" --http-listen 127.0.0.1:0 --https-listen 127.0.0.1:0 \
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

stats() { tr ' ' '\n' <<<"$*" | sort -n | awk '{a[NR]=$1} END {printf "%d | %d", a[int((NR+1)/2)], a[NR]}'; }
echo "| $INGRESSES Ingresses, $UPGRADES upgrades | median ms | max ms |"
echo "| --- | --- | --- |"
echo "| SIGUSR2 to the new process serving | $(stats "${serving[@]}") |"
echo "| SIGUSR2 to the old process's exit | $(stats "${exited[@]}") |"
