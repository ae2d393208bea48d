#!/usr/bin/env bash
# User-space instructions per proxied request, counted by callgrind (valgrind), for Portico and
# the proxies it is measured against: the same nine routes, six nginx backends and wrk load as
# bench/proxy.sh, the small (~100-byte) response. Instructions do not drift with the VM's speed
# or the other core's load the way CPU time does (back-to-back runs agree within 0.5 %), so a
# step of the proxy's own work shows here even when the wall clock cannot tell it from noise.
# It counts only what runs in the proxy's process outside the kernel: the kernel's share of a
# request is in bench/proxy.sh's "kernel µs/req" column.
#
# Proxies: portico (own HTTP/1.1 path), portico-hyper (PORTICO_HTTP1=hyper), nginx
# (master_process off), haproxy (nbthread 1), floor (portico-bench hyper-floor), raw
# (portico-bench raw-floor); and, for the access log's cost (not in the default list),
# portico-log (`--access-log FILE`, its writer thread counted) and nginx-log (`access_log FILE
# combined buffer=64k flush=1s`). Each runs alone under callgrind on core 0, instrumentation off
# until a 2 s warm-up is done; then wrk (1 thread, CONNECTIONS connections, on core 1) for
# DURATION seconds with instrumentation on; instructions over requests: the whole process's,
# and its busiest thread's (the request path's; Portico's access log writer is another thread,
# which the kernel may run on another core when the proxy's is saturated).
#
# Usage: bash bench/instructions.sh                         (all proxies, keep-alive and close)
#        PROXIES="portico nginx" MODES=keepalive bash bench/instructions.sh
#        PROXIES="portico portico-log nginx nginx-log" MODES=keepalive bash bench/instructions.sh
#        (PORTICO=path and BENCH=path run those binaries instead of building the release ones;
#        PROFILES=DIR keeps each run's callgrind output there, for callgrind_annotate)
# It starts and stops only its own processes, by PID, and sends traffic only to 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."
PROXIES=${PROXIES:-portico portico-hyper nginx haproxy floor raw}
MODES=${MODES:-keepalive close}
CONNECTIONS=${CONNECTIONS:-20}
DURATION=${DURATION:-8}

source scripts/lib.sh
apt_install nginx haproxy wrk valgrind curl
if [ -z "${PORTICO:-}" ] || [ -z "${BENCH:-}" ]; then
  cargo build --release --locked -q -p portico -p portico-bench
fi
PORTICO=${PORTICO:-${CARGO_TARGET_DIR:-$PWD/target}/release/portico}
BENCH=${BENCH:-${CARGO_TARGET_DIR:-$PWD/target}/release/portico-bench}

start_work
chmod 755 "$work" # the nginx workers run as an unprivileged user

BACKEND_PORTS=(18101 18102 18103 18104 18105 18106)
HOSTS=(h1.bench h2.bench h3.bench)
PREFIXES=(a b c)
PORT=18090
# Every proxy listens on PORT in turn; nginx as one process (callgrind follows no fork).
NGINX_PORT=$PORT HAPROXY_PORT=$PORT NGINX_MASTER=off LOAD_CPU=1
source bench/lib-proxy.sh

start_backends
portico_manifests
nginx_config
NGINX_ACCESS_LOG=$work/nginx-access.log nginx_config "$work/nginx-log"
haproxy_config
routes=()
for i in 0 1 2; do
  for j in 0 1 2; do
    p=$(pool_of $i $j)
    routes+=(--route "${HOSTS[$i]}/${PREFIXES[$j]}=127.0.0.1:${BACKEND_PORTS[$((2 * p))]},127.0.0.1:${BACKEND_PORTS[$((2 * p + 1))]}")
  done
done
for mode in keepalive close; do wrk_script small "$mode"; done

# Starts PROXY under callgrind on core 0 (instrumentation off), in the background: `$!` is
# valgrind's PID (each branch execs it).
start() {
  local grind=(valgrind --tool=callgrind --instr-atstart=no --separate-threads=yes "--callgrind-out-file=$work/callgrind.out")
  local http1=own log=off
  [ "$1" = portico-hyper ] && http1=hyper
  [ "$1" = portico-log ] && log=$work/access.log
  (
    case $1 in
      portico | portico-hyper | portico-log)
        export PORTICO_HTTP1=$http1 MIMALLOC_ARENA_EAGER_COMMIT=0 MIMALLOC_PURGE_DELAY=0
        exec taskset -c 0 "${grind[@]}" "$PORTICO" run -f "$work/portico" --workers 1 --log warn \
          --access-log "$log" --http-listen "127.0.0.1:$PORT" --https-listen 127.0.0.1:0 \
          --admin-listen 127.0.0.1:0 --state-dir "$work/state" ;;
      nginx) exec taskset -c 0 "${grind[@]}" nginx -c "$work/nginx/nginx.conf" -e "$work/nginx/error.log" ;;
      nginx-log) exec taskset -c 0 "${grind[@]}" nginx -c "$work/nginx-log/nginx.conf" -e "$work/nginx-log/error.log" ;;
      haproxy) exec taskset -c 0 "${grind[@]}" haproxy -db -f "$work/haproxy.cfg" ;;
      floor) exec taskset -c 0 "${grind[@]}" "$BENCH" hyper-floor --listen "127.0.0.1:$PORT" "${routes[@]}" ;;
      raw) exec taskset -c 0 "${grind[@]}" "$BENCH" raw-floor --listen "127.0.0.1:$PORT" "${routes[@]}" ;;
    esac
  ) >/dev/null 2>"$work/valgrind.log" &
}

echo "| proxy | mode | requests | instructions per request | of which its busiest thread |"
echo "| --- | --- | --- | --- | --- |"
for proxy in $PROXIES; do
  for mode in $MODES; do
    rm -f "$work"/callgrind.out*
    start "$proxy"
    pid=$!
    pids+=("$pid")
    for _ in $(seq 300); do
      code=$(curl -s -o /dev/null -w '%{http_code}' -H "Host: h1.bench" "http://127.0.0.1:$PORT/a/small" || true)
      [ "$code" = 200 ] && break
      sleep 0.1
    done
    [ "$code" = 200 ] || { echo "instructions: $proxy does not serve" >&2; cat "$work/valgrind.log" >&2; exit 1; }
    url="http://127.0.0.1:$PORT/"
    taskset -c 1 wrk -t1 -c"$CONNECTIONS" -d2s -s "$work/wrk-small-$mode.lua" "$url" >/dev/null
    callgrind_control -i on "$pid" >/dev/null 2>&1
    out=$(taskset -c 1 wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" -s "$work/wrk-small-$mode.lua" "$url")
    out=$(grep '^RESULT' <<<"$out") || { echo "instructions: wrk: $out" >&2; exit 1; }
    callgrind_control -i off "$pid" >/dev/null 2>&1
    callgrind_control -d "$pid" >/dev/null 2>&1
    kill -INT "$pid"
    wait "$pid" 2>/dev/null || true
    requests=$(sed 's/.*requests=\([0-9]*\).*/\1/' <<<"$out")
    # One file per thread (and dump): the process's total, and its busiest thread's (the
    # request path's; Portico's access log writer is a thread of its own).
    instructions=0 busiest=0
    for f in "$work"/callgrind.out*; do
      # `|| true`: grep stops at the first match and callgrind_annotate dies of SIGPIPE.
      ir=$(callgrind_annotate "$f" 2>/dev/null | grep -m1 'PROGRAM TOTALS' | awk '{gsub(",", "", $1); print $1}' || true)
      [[ ${ir:-} =~ ^[0-9]+$ ]] || continue
      instructions=$((instructions + ir))
      [ "$ir" -gt "$busiest" ] && busiest=$ir
    done
    per() { echo $(($1 / (requests > 0 ? requests : 1))); }
    echo "| $proxy | $mode | $requests | $(per "$instructions") | $(per "$busiest") |"
    if [ -n "${PROFILES:-}" ]; then
      for f in "$work"/callgrind.out*; do cp "$f" "$PROFILES/$proxy-$mode.${f##*/}"; done
    fi
  done
done
