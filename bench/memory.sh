#!/usr/bin/env bash
# `portico run`'s memory at full size and after every object is deleted (issue 32), for one or
# more binaries, alternating (a, b, a, b, ...) so that a loaded machine weighs on each alike.
#
#   bash bench/memory.sh [-r ROUNDS] [-g GEN_ARGS | -m MANIFESTS] BIN [BIN...]
#
# The manifests: `portico-bench gen --dir DIR --pod-addresses GEN_ARGS` (10,000 Ingresses, 50,000
# endpoints on distinct addresses, 1,000 TLS Secrets by default; PORTICO_BENCH names the
# portico-bench binary, default target/debug/portico-bench), made once, or the directory
# MANIFESTS made so before (it is copied, never changed). A BIN may be a script that `exec`s
# portico with more in its environment (mimalloc's options, say). Per binary and
# round: `BIN run` on an empty directory (idle), read 1 s after /readyz answers 200 and again
# 10 s later; then `BIN run -f` on a fresh copy of the manifests (`--log warn`, no traffic, a
# state directory of its own), read 1 s after ready; every file deleted, and read 10 s after
# `/api/v1/ingresses` and `/api/v1/services` both list nothing. Each reading is VmRSS and
# RssAnon from /proc/PID/status, in MiB. One line per reading:
#
#   BIN round phase VmRSS RssAnon
#
# and a Markdown summary at the end (the ratio is after-deletion over idle-after-10 s, each
# column its own).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/scripts/lib.sh"

rounds=2
gen_args=()
manifests=
usage="usage: $0 [-r ROUNDS] [-g GEN_ARGS | -m MANIFESTS] BIN [BIN...]"
while getopts "r:g:m:" opt; do
  case $opt in
    r) rounds=$OPTARG ;;
    g) read -r -a gen_args <<<"$OPTARG" ;;
    m) manifests=$(cd "$OPTARG" && pwd) ;;
    *) echo "$usage" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || { echo "$usage" >&2; exit 2; }
bench=${PORTICO_BENCH:-$here/target/debug/portico-bench}

start_work
if [ -z "$manifests" ]; then
  manifests=$work/manifests
  "$bench" gen --dir "$manifests" --pod-addresses "${gen_args[@]}" >/dev/null
fi
mkdir -p "$work/empty"

# "VmRSS RssAnon" of PID, in MiB with one decimal.
reading() {
  awk '/^VmRSS:/ {r = $2} /^RssAnon:/ {a = $2}
       END {printf "%.1f %.1f\n", r / 1024, a / 1024}' "/proc/$1/status"
}

# Starts BIN run on DIR; sets PID and ADMIN once /readyz answers 200.
start_portico() { # bin dir log
  local out=$3.out
  "$1" run -f "$2" --log warn --state-dir "$work/state.$RANDOM$RANDOM" \
    --http-listen 127.0.0.1:0 --https-listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 \
    >"$out" 2>"$3" </dev/null &
  PID=$!
  pids+=("$PID")
  ADMIN=
  for _ in $(seq 1200); do
    ADMIN=$(sed -n 's/.*the admin API on \([0-9.:]*\).*/\1/p' "$out" | head -1)
    [ -n "$ADMIN" ] && break
    kill -0 "$PID" 2>/dev/null || { echo "$1 exited: $(tail -3 "$3")" >&2; return 1; }
    sleep 0.05
  done
  [ -n "$ADMIN" ] || { echo "$1 printed no admin address" >&2; return 1; }
  for _ in $(seq 6000); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "http://$ADMIN/readyz")" = 200 ] && return 0
    sleep 0.05
  done
  echo "$1 was not ready in 300 s" >&2
  return 1
}

stop_portico() {
  kill "$PID" 2>/dev/null || true
  wait "$PID" 2>/dev/null || true
}

# Whether the admin API lists no KIND.
empty() { # kind
  [ "$(curl -s "http://$ADMIN/api/v1/$1")" = "[]" ]
}

declare -A sums counts
note() { # bin round phase "vmrss rssanon"
  echo "$1 $2 $3 $4"
  local key="$1|$3"
  sums[$key]="${sums[$key]:-} $4"
}

for round in $(seq "$rounds"); do
  for bin in "$@"; do
    start_portico "$bin" "$work/empty" "$work/idle.log"
    sleep 1
    note "$bin" "$round" idle "$(reading "$PID")"
    sleep 10
    note "$bin" "$round" idle-10s "$(reading "$PID")"
    stop_portico

    rm -rf "$work/copy"
    cp -r "$manifests" "$work/copy"
    start_portico "$bin" "$work/copy" "$work/full.log"
    sleep 1
    note "$bin" "$round" ready "$(reading "$PID")"
    peak=$(awk '/^VmHWM:/ {printf "%.1f", $2 / 1024}' "/proc/$PID/status")
    echo "$bin $round peak-VmHWM $peak"
    find "$work/copy" -mindepth 1 -delete
    for _ in $(seq 6000); do
      empty ingresses && empty services && break
      sleep 0.05
    done
    empty ingresses && empty services || { echo "$bin: objects still listed after 300 s" >&2; exit 1; }
    sleep 10
    note "$bin" "$round" deleted-10s "$(reading "$PID")"
    stop_portico
  done
done

echo
echo "| binary | idle 1 s (VmRSS, RssAnon) | idle 11 s | 1 s after ready | 10 s after deletion | after deletion / idle 11 s (VmRSS, RssAnon) |"
echo "| --- | --- | --- | --- | --- | --- |"
for bin in "$@"; do
  row="| $bin"
  for phase in idle idle-10s ready deleted-10s; do
    row="$row | $(echo ${sums[$bin|$phase]} | xargs -n2 | tr '\n' ';' | sed 's/;$//; s/;/; /g')"
  done
  ratio=$(paste -d' ' <(echo ${sums[$bin|deleted-10s]} | xargs -n2) <(echo ${sums[$bin|idle-10s]} | xargs -n2) |
    awk '{printf "%s%.2f, %.2f", (NR > 1 ? "; " : ""), $1 / $3, $2 / $4}')
  echo "$row | $ratio |"
done
