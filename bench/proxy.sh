#!/usr/bin/env bash
# Data-plane benchmark: Portico's built-in proxy side by side with nginx and haproxy, in one run.
#
# Every proxy serves the same routes (3 hosts x 3 path prefixes -> 3 pools of 2 backends, round
# robin, keep-alive to clients and upstreams, X-Forwarded-For added) with one worker thread pinned
# to core 0 (taskset); wrk and the backends (one nginx worker serving static files) share core 1.
# Cases: a ~100-byte and a 16 KiB response, each with keep-alive and with a new connection per
# request; and over TLS (the same ECDSA P-256 certificate for all three, made here with openssl),
# `tls-keepalive` (HTTPS requests on open connections), `tls-close` (a new TCP connection and
# TLS handshake per request; wrk resumes TLS sessions with tickets, which all three offer by
# default), the same two with the 16 KiB response (`tls-large-keepalive`, `tls-large-close`),
# `tls-handshake` (full handshakes, no resumption: TLS_CLIENTS
# parallel `openssl s_time -new` loops; req/s is handshakes/s, no latency percentiles), and
# `tls-storm` (not in the default CASES): the latency of STORM_CALM keep-alive HTTPS connections
# (small response) while the other CONNECTIONS - STORM_CALM make a new connection per request,
# a reconnect storm; req/s and CPU per request count the requests of both. For each
# proxy and case: req/s, p50/p99 latency, proxy CPU time per request (utime + stime from
# /proc), peak RSS (VmHWM). RUNS runs each (default 5); the table shows medians with min-max,
# and the ratios Portico/nginx and Portico/haproxy.
# `floor` is `portico-bench hyper-floor`: the least a reverse proxy on hyper can do (HTTP/1.1
# only, the same routes, round robin, keep-alive upstreams, X-Forwarded-For; no limits, health,
# logs or metrics), pinned the same way: what Portico costs beyond it is Portico's own. It runs
# the HTTP cases only.
# Portico runs without an access log, as nginx and haproxy do here; `portico-log` is a second
# Portico with `--access-log FILE` (one JSON line per request, written to a file in the work
# directory), measured against `portico` for the access log's cost (bench/access-log.sh), and
# `nginx-log` a second nginx logging each request as users run it (`access_log FILE combined
# buffer=64k flush=1s`), against `nginx`.
#
# PROXY_QUOTA=N (percent of one core, off by default) runs each proxy in a CPU cgroup of its own
# limited to N % of a core (cgroup v2 `cpu.max` or v1 `cpu.cfs_quota_us`, over a 10 ms period;
# root only): the proxy-bound layout. Without it the proxies may use all of core 0, and where a
# proxy needs less than that, the load generator's core is the bound; with a quota below what
# every proxy uses unlimited (40 on the 2-core VMs of docs/benchmarks.md), each proxy's budget
# is the bound, so requests per second follow its CPU per request.
# Usage: bash bench/proxy.sh            (RUNS=5 DURATION=8 CONNECTIONS=50 TLS_CLIENTS=4 STORM_CALM=10 by default;
#        PROXIES="portico portico-log nginx nginx-log haproxy floor" and CASES="small-keepalive tls-close ..." choose a subset)
# It starts and stops only its own processes, by PID, and sends traffic only to 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-5}
DURATION=${DURATION:-8}
CONNECTIONS=${CONNECTIONS:-50}
PROXY_CPU=${PROXY_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
PROXIES=${PROXIES:-portico nginx haproxy floor}
CASES=${CASES:-small-keepalive small-close large-keepalive large-close tls-keepalive tls-close tls-large-keepalive tls-large-close tls-handshake}
TLS_CLIENTS=${TLS_CLIENTS:-4}
STORM_CALM=${STORM_CALM:-10}
PROXY_QUOTA=${PROXY_QUOTA:-}

source scripts/lib.sh
apt_install nginx haproxy wrk openssl
# PORTICO=path and BENCH=path run those binaries instead of building the release ones.
if [ -z "${PORTICO:-}" ] || [ -z "${BENCH:-}" ]; then
  cargo build --release --locked -q -p portico -p portico-bench
fi
PORTICO=${PORTICO:-${CARGO_TARGET_DIR:-$PWD/target}/release/portico}
BENCH=${BENCH:-${CARGO_TARGET_DIR:-$PWD/target}/release/portico-bench}

start_work
chmod 755 "$work" # the nginx workers run as an unprivileged user

# The CPU cgroups of PROXY_QUOTA, removed at exit once their processes are gone.
cgroups=()
remove_cgroups() {
  stop_work
  local dir
  for dir in "${cgroups[@]}"; do
    for _ in $(seq 50); do rmdir "$dir" 2>/dev/null && break; sleep 0.1; done
  done
}
trap remove_cgroups EXIT

# Moves the processes PID... (with their threads) into a new CPU cgroup NAME limited to
# PROXY_QUOTA % of one core.
limit_cpu() { # name pid...
  local name=$1 dir period=10000 pid
  shift
  local quota=$((PROXY_QUOTA * period / 100))
  if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
    echo +cpu >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null || true
    dir=/sys/fs/cgroup/portico-bench-$$-$name
    mkdir "$dir"
    cgroups+=("$dir")
    echo "$quota $period" >"$dir/cpu.max"
  else
    dir=/sys/fs/cgroup/cpu/portico-bench-$$-$name
    mkdir "$dir"
    cgroups+=("$dir")
    echo "$period" >"$dir/cpu.cfs_period_us"
    echo "$quota" >"$dir/cpu.cfs_quota_us"
  fi
  for pid in "$@"; do echo "$pid" >"$dir/cgroup.procs"; done
}

BACKEND_PORTS=(18101 18102 18103 18104 18105 18106)
HOSTS=(h1.bench h2.bench h3.bench)
PREFIXES=(a b c)
PORTICO_PORT=18080 HAPROXY_PORT=18081 NGINX_PORT=18082 LOGGING_PORT=18083 FLOOR_PORT=18084 RAW_PORT=18085
NGINX_LOG_PORT=18086 NGINX_LOG_TLS_PORT=18447
PORTICO_TLS_PORT=18443 HAPROXY_TLS_PORT=18444 NGINX_TLS_PORT=18445 LOGGING_TLS_PORT=18446

source bench/lib-proxy.sh

# Full TLS handshakes (no session resumption) for DURATION seconds from TLS_CLIENTS parallel
# `openssl s_time -new` loops; prints a RESULT line like wrk's (no latency percentiles).
handshakes() { # port
  local clients=() i total=0 n
  for i in $(seq "$TLS_CLIENTS"); do
    taskset -c "$LOAD_CPU" openssl s_time -connect "127.0.0.1:$1" -new -time "$DURATION" \
      >"$work/s_time.$i" 2>&1 &
    clients+=($!)
  done
  for pid in "${clients[@]}"; do wait "$pid" || true; done
  for i in $(seq "$TLS_CLIENTS"); do
    n=$(sed -n 's/^\([0-9]*\) connections in [0-9.]*s;.*/\1/p' "$work/s_time.$i" | head -1)
    total=$((total + ${n:-0}))
  done
  echo "RESULT requests=$total duration_us=$((DURATION * 1000000)) p50_us=0 p99_us=0 errors=0"
}

# One wrk load from the load generator's core; prints its RESULT line (see wrk_script).
wrk_load() { # connections script url
  taskset -c "$LOAD_CPU" wrk -t1 -c"$1" -d"${DURATION}s" -s "$work/wrk-$2.lua" "$3" |
    grep '^RESULT'
}

# The request count of a RESULT line.
requests_of() { # line
  local n=${1#*requests=}
  echo "${n%% *}"
}

# tls-storm: STORM_CALM keep-alive connections, whose latency is measured, while the rest of
# CONNECTIONS open a new HTTPS connection per request; prints one RESULT line, with the
# requests of both loads and the latency of the keep-alive ones.
storm() { # port
  local url="https://127.0.0.1:$1/" flood calm n storm
  wrk_load $((CONNECTIONS - STORM_CALM)) small-close "$url" >"$work/storm.out" &
  flood=$!
  calm=$(wrk_load "$STORM_CALM" small-keepalive "$url")
  wait "$flood"
  n=$(requests_of "$calm")
  storm=$(requests_of "$(cat "$work/storm.out")")
  echo "${calm/requests=$n/requests=$((n + ${storm:-0}))}"
}

# Runs one load against one proxy; prints "rps p50_us p99_us cpu_us_per_req errors sys_us_per_req".
measure() { # scheme port size close pid...
  local scheme=$1 port=$2 size=$3 close=$4
  shift 4
  local before after out
  before=$(cpu_ticks "$@")
  if [ "$close" = handshake ]; then
    out=$(handshakes "$port")
  elif [ "$close" = storm ]; then
    out=$(storm "$port")
  else
    out=$(wrk_load "$CONNECTIONS" "$size-$close" "$scheme://127.0.0.1:$port/")
  fi
  after=$(cpu_ticks "$@")
  python3 - "$out" "$before" "$after" "$(getconf CLK_TCK)" <<'EOF'
import sys
kv = dict(x.split("=") for x in sys.argv[1].split()[1:])
req, dur = int(kv["requests"]), int(kv["duration_us"])
(t0, s0), (t1, s1) = (map(int, a.split()) for a in sys.argv[2:4])
per_req = lambda ticks: ticks * 1e6 / int(sys.argv[4]) / max(req, 1)
print(f"{req * 1e6 / dur:.0f} {kv['p50_us']} {kv['p99_us']} {per_req(t1 - t0):.2f} {kv['errors']} {per_req(s1 - s0):.2f}")
EOF
}

start_portico() { # http-port https-port admin-port access-log
  [ -d "$work/portico" ] || portico_manifests
  taskset -c "$PROXY_CPU" "$PORTICO" run -f "$work/portico" --workers 1 --log warn \
    --http-listen "127.0.0.1:$1" --https-listen "127.0.0.1:$2" --access-log "$4" \
    --default-certificate bench/bench-tls --admin-listen "127.0.0.1:$3" \
    --state-dir "$work/state-$1" >/dev/null &
  pids+=($!)
  wait_http "http://127.0.0.1:$3/readyz"
}

start_haproxy() {
  haproxy_config
  haproxy -c -q -f "$work/haproxy.cfg"
  taskset -c "$PROXY_CPU" haproxy -db -f "$work/haproxy.cfg" &
  pids+=($!)
  HAPROXY_PID=$!
  wait_port "$HAPROXY_PORT"
}

start_nginx() {
  nginx_config
  taskset -c "$PROXY_CPU" nginx -c "$work/nginx/nginx.conf" -e "$work/nginx/error.log" &
  pids+=($!)
  NGINX_PID=$!
  wait_port "$NGINX_PORT"
}

# The second nginx, with its access log on (`nginx-log`).
start_nginx_log() {
  NGINX_PORT=$NGINX_LOG_PORT NGINX_TLS_PORT=$NGINX_LOG_TLS_PORT \
    NGINX_ACCESS_LOG=$work/nginx-access.log nginx_config "$work/nginx-log"
  taskset -c "$PROXY_CPU" nginx -c "$work/nginx-log/nginx.conf" -e "$work/nginx-log/error.log" &
  pids+=($!)
  NGINX_LOG_PID=$!
  wait_port "$NGINX_LOG_PORT"
}

start_floor() {
  local command=${1:-hyper-floor} port=${2:-$FLOOR_PORT} routes=() i j p
  for i in 0 1 2; do
    for j in 0 1 2; do
      p=$(pool_of $i $j)
      routes+=(--route "${HOSTS[$i]}/${PREFIXES[$j]}=127.0.0.1:${BACKEND_PORTS[$((2 * p))]},127.0.0.1:${BACKEND_PORTS[$((2 * p + 1))]}")
    done
  done
  taskset -c "$PROXY_CPU" "$BENCH" "$command" --listen "127.0.0.1:$port" "${routes[@]}" &
  pids+=($!)
  wait_port "$port"
}

wanted() { [[ " $PROXIES " == *" $1 "* ]]; }
make_certificate
start_backends
urls=()
if wanted portico; then
  start_portico "$PORTICO_PORT" "$PORTICO_TLS_PORT" 18180 off
  PORTICO_PID=${pids[-1]}
  urls+=("http://127.0.0.1:$PORTICO_PORT" "https://127.0.0.1:$PORTICO_TLS_PORT")
fi
if wanted portico-log; then
  start_portico "$LOGGING_PORT" "$LOGGING_TLS_PORT" 18181 "$work/access.log"
  LOGGING_PID=${pids[-1]}
  urls+=("http://127.0.0.1:$LOGGING_PORT" "https://127.0.0.1:$LOGGING_TLS_PORT")
fi
if wanted haproxy; then
  start_haproxy
  urls+=("http://127.0.0.1:$HAPROXY_PORT" "https://127.0.0.1:$HAPROXY_TLS_PORT")
fi
if wanted nginx; then
  start_nginx
  urls+=("http://127.0.0.1:$NGINX_PORT" "https://127.0.0.1:$NGINX_TLS_PORT")
fi
if wanted nginx-log; then
  start_nginx_log
  urls+=("http://127.0.0.1:$NGINX_LOG_PORT" "https://127.0.0.1:$NGINX_LOG_TLS_PORT")
fi
if wanted floor; then
  start_floor hyper-floor "$FLOOR_PORT"
  FLOOR_PID=${pids[-1]}
  urls+=("http://127.0.0.1:$FLOOR_PORT")
fi
if wanted raw; then
  start_floor raw-floor "$RAW_PORT"
  RAW_PID=${pids[-1]}
  urls+=("http://127.0.0.1:$RAW_PORT")
fi
for size in small large; do for close in keepalive close; do wrk_script "$size" "$close"; done; done

# The processes of proxy NAME: nginx's master and workers, the one process of the others.
proxy_pids() { # name
  case $1 in
    portico) echo "$PORTICO_PID" ;;
    portico-log) echo "$LOGGING_PID" ;;
    haproxy) echo "$HAPROXY_PID" ;;
    nginx) echo "$NGINX_PID" $(pgrep -P "$NGINX_PID") ;;
    nginx-log) echo "$NGINX_LOG_PID" $(pgrep -P "$NGINX_LOG_PID") ;;
    floor) echo "$FLOOR_PID" ;;
    raw) echo "$RAW_PID" ;;
  esac
}

if [ -n "$PROXY_QUOTA" ]; then
  for proxy in $PROXIES; do limit_cpu "$proxy" $(proxy_pids "$proxy"); done
fi

# Sanity: every proxy routes every host/prefix to a backend with a 200, over HTTP and HTTPS,
# and presents the bench certificate.
for url in "${urls[@]}"; do
  for h in "${HOSTS[@]}"; do
    for p in "${PREFIXES[@]}"; do
      code=$(curl -sk -o /dev/null -w '%{http_code}' -H "Host: $h" "$url/$p/small")
      [ "$code" = 200 ] || { echo "bench: $url $h/$p/small answered $code" >&2; exit 1; }
    done
  done
done
want=$(openssl x509 -noout -fingerprint -sha256 -in "$work/tls/cert.pem")
for url in "${urls[@]}"; do
  [[ $url == https://* ]] || continue
  port=${url##*:}
  got=$(openssl s_client -connect "127.0.0.1:$port" </dev/null 2>/dev/null | openssl x509 -noout -fingerprint -sha256)
  [ "$got" = "$want" ] || { echo "bench: port $port presents another certificate" >&2; exit 1; }
done

results=$work/results.txt
echo "# case proxy run rps p50_us p99_us cpu_us_per_req errors sys_us_per_req" >"$results"
for case in $CASES; do
  # tls-keepalive, tls-close and tls-handshake are the small response over HTTPS;
  # tls-large-keepalive and tls-large-close the 16 KiB one.
  rest=$case scheme=http
  if [[ $case == tls-* ]]; then rest=${case#tls-} scheme=https; fi
  case $rest in
    *-*) size=${rest%-*} close=${rest#*-} ;;
    *) size=small close=$rest ;;
  esac
  for run in $(seq "$RUNS"); do
    # Interleave the proxies within each run so drift hits them alike.
    for proxy in $PROXIES; do
      case $proxy in
        portico) port=$PORTICO_PORT tls_port=$PORTICO_TLS_PORT ;;
        portico-log) port=$LOGGING_PORT tls_port=$LOGGING_TLS_PORT ;;
        haproxy) port=$HAPROXY_PORT tls_port=$HAPROXY_TLS_PORT ;;
        nginx) port=$NGINX_PORT tls_port=$NGINX_TLS_PORT ;;
        nginx-log) port=$NGINX_LOG_PORT tls_port=$NGINX_LOG_TLS_PORT ;;
        floor) port=$FLOOR_PORT tls_port= ;;
        raw) port=$RAW_PORT tls_port= ;;
      esac
      read -ra procs <<<"$(proxy_pids "$proxy")"
      if [ "$scheme" = https ] && [ -z "$tls_port" ]; then continue; fi
      if [ "$scheme" = https ]; then port=$tls_port; fi
      echo "$case $proxy $run $(measure "$scheme" "$port" "$size" "$close" "${procs[@]}")" | tee -a "$results" >&2
    done
  done
done
for proxy in $PROXIES; do
  echo "peak_rss_kib $proxy $(peak_rss $(proxy_pids "$proxy"))"
done >>"$results"
if wanted portico-log; then
  echo "access_log_lines portico-log $(wc -l <"$work/access.log")" >>"$results"
  dropped=$(curl -s http://127.0.0.1:18181/metrics | awk '/^portico_access_log_dropped_lines_total/ {print $2}')
  echo "access_log_dropped portico-log ${dropped:-unknown}" >>"$results"
fi
if wanted nginx-log; then
  echo "access_log_lines nginx-log $(wc -l <"$work/nginx-access.log")" >>"$results"
fi
if [ -n "$PROXY_QUOTA" ]; then
  echo "Each proxy limited to $PROXY_QUOTA % of one core (PROXY_QUOTA): the proxy-bound layout."
  echo
fi
python3 bench/report.py proxy "$results"
