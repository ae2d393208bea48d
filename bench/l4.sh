#!/usr/bin/env bash
# L4 benchmark: Portico's provider `l4` side by side with haproxy (`mode tcp`, without and with
# splicing) and nginx (`stream`), on loopback, in one run.
#
# Each balancer spreads TCP connections over the same BACKENDS echo servers (`portico-bench
# l4-echo`, TCP and UDP on each port) with one worker thread pinned to core PROXY_CPU
# (taskset); the load generator (`portico-bench l4-load`) and the backends share core LOAD_CPU.
# Portico serves a Service of class portico.dev/l4 with `loadBalancerIP: 127.0.0.1` (Maglev
# over the endpoints) with a TCP and a UDP port; haproxy and nginx balance round robin.
# `haproxy+splice` is a second haproxy with `option splice-request` and `option
# splice-response` (the kernel moves the bytes between the sockets through a pipe, no copy to
# user space; it pays for bulk transfers, not for short exchanges). Cases:
# - `conn`: CONN_CLIENTS clients each opening a connection, sending 64 bytes, reading them back
#   and closing, again and again: connections per second.
# - `stream`: STREAM_CLIENTS long connections writing 64 KiB chunks and reading them back:
#   MB/s echoed (through the balancer both ways).
# - `udp`: UDP_CLIENTS clients each sending a 64-byte datagram and waiting for the echo
#   (one in flight each): datagrams answered per second, Portico against nginx's `stream`
#   (`listen ... udp`; haproxy 2.6 has no UDP proxying).
# For each balancer and case: the rate, the balancer's CPU time per connection (conn) or per
# MB (stream) or per datagram (udp) from /proc (utime + stime), and its peak RSS (VmHWM) at the end.
# RUNS runs each (default 3, medians); the table gives ratios of Portico to each.
#
# Usage: bash bench/l4.sh
#   (RUNS=3 DURATION=5 CONN_CLIENTS=32 STREAM_CLIENTS=4 UDP_CLIENTS=16 BACKENDS=4)
# It starts and stops only its own processes, by PID, and sends traffic only to 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
DURATION=${DURATION:-5}
CONN_CLIENTS=${CONN_CLIENTS:-32}
STREAM_CLIENTS=${STREAM_CLIENTS:-4}
UDP_CLIENTS=${UDP_CLIENTS:-16}
BACKENDS=${BACKENDS:-4}
PROXY_CPU=${PROXY_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}

source scripts/lib.sh
apt_install nginx libnginx-mod-stream haproxy
cargo build --release --locked -q -p portico -p portico-bench
TARGET=${CARGO_TARGET_DIR:-$PWD/target}/release
PORTICO=$TARGET/portico
BENCH=$TARGET/portico-bench
NGINX_STREAM=/usr/lib/nginx/modules/ngx_stream_module.so

start_work
chmod 755 "$work"

PORTICO_PORT=19000 HAPROXY_PORT=19001 NGINX_PORT=19002 ADMIN_PORT=19180 SPLICE_PORT=19003
PORTICO_UDP_PORT=19010 NGINX_UDP_PORT=19012
BACKEND_PORTS=()
for i in $(seq "$BACKENDS"); do BACKEND_PORTS+=($((19100 + i))); done

start_backends() {
  local args=()
  for port in "${BACKEND_PORTS[@]}"; do args+=(--listen "127.0.0.1:$port"); done
  taskset -c "$LOAD_CPU" "$BENCH" l4-echo "${args[@]}" &
  pids+=($!)
  for port in "${BACKEND_PORTS[@]}"; do wait_port "$port"; done
}

start_portico() {
  mkdir -p "$work/portico"
  # One EndpointSlice per backend: each has its own port.
  : >"$work/portico/svc.yaml"
  echo "apiVersion: v1
kind: Service
metadata: {name: echo, namespace: bench}
spec:
  type: LoadBalancer
  loadBalancerClass: portico.dev/l4
  loadBalancerIP: 127.0.0.1
  ports:
  - {name: echo, port: $PORTICO_PORT, protocol: TCP}
  - {name: echo-udp, port: $PORTICO_UDP_PORT, protocol: UDP}" >>"$work/portico/svc.yaml"
  for port in "${BACKEND_PORTS[@]}"; do
    echo "---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: echo-$port, namespace: bench, labels: {kubernetes.io/service-name: echo}}
addressType: IPv4
ports: [{name: echo, port: $port, protocol: TCP}, {name: echo-udp, port: $port, protocol: UDP}]
endpoints: [{addresses: [127.0.0.1], conditions: {ready: true}}]" >>"$work/portico/svc.yaml"
  done
  taskset -c "$PROXY_CPU" "$PORTICO" run -f "$work/portico" --workers 1 --log warn \
    --http-listen 127.0.0.1:0 --https-listen 127.0.0.1:0 --admin-listen "127.0.0.1:$ADMIN_PORT" \
    --access-log off --state-dir "$work/state" >"$work/portico.log" 2>&1 &
  pids+=($!)
  PORTICO_PID=$!
  wait_port "$PORTICO_PORT"
}

start_haproxy() { # name port extra-global-lines extra-defaults-lines
  local name=$1 port=$2 global=$3 extra=$4
  {
    echo "global
  nbthread 1
  maxconn 9000
$global
defaults
  mode tcp
  timeout connect 5s
  timeout client 1h
  timeout server 1h
$extra
frontend l4
  bind 127.0.0.1:$port
  default_backend echo
backend echo
  balance roundrobin"
    for p in "${BACKEND_PORTS[@]}"; do echo "  server s$p 127.0.0.1:$p"; done
  } >"$work/$name.cfg"
  haproxy -c -q -f "$work/$name.cfg"
  taskset -c "$PROXY_CPU" haproxy -db -f "$work/$name.cfg" &
  pids+=($!)
  wait_port "$port"
}

start_nginx() {
  mkdir -p "$work/nginx"
  {
    echo "load_module $NGINX_STREAM;
worker_processes 1; daemon off; pid $work/nginx/nginx.pid; error_log $work/nginx/error.log warn;
events { worker_connections 9000; }
stream {
  upstream echo {"
    for port in "${BACKEND_PORTS[@]}"; do echo "    server 127.0.0.1:$port;"; done
    echo "  }
  server { listen 127.0.0.1:$NGINX_PORT; proxy_pass echo; proxy_connect_timeout 5s; proxy_timeout 1h; }
  upstream echo_udp {"
    for port in "${BACKEND_PORTS[@]}"; do echo "    server 127.0.0.1:$port;"; done
    echo "  }
  server { listen 127.0.0.1:$NGINX_UDP_PORT udp; proxy_pass echo_udp; proxy_responses 1; proxy_timeout 30s; }
}"
  } >"$work/nginx/nginx.conf"
  taskset -c "$PROXY_CPU" nginx -c "$work/nginx/nginx.conf" -e "$work/nginx/error.log" &
  pids+=($!)
  NGINX_PID=$!
  wait_port "$NGINX_PORT"
}

# The PIDs that do a balancer's work (nginx: master and workers).
balancer_pids() {
  case $1 in
  portico) echo "$PORTICO_PID" ;;
  haproxy) echo "$HAPROXY_PID" ;;
  haproxy+splice) echo "$SPLICE_PID" ;;
  nginx) echo "$NGINX_PID $(pgrep -P "$NGINX_PID" | tr '\n' ' ')" ;;
  esac
}

port_of() { # balancer case
  case $1/$2 in
  portico/udp) echo "$PORTICO_UDP_PORT" ;;
  nginx/udp) echo "$NGINX_UDP_PORT" ;;
  portico/*) echo "$PORTICO_PORT" ;;
  haproxy/*) echo "$HAPROXY_PORT" ;;
  haproxy+splice/*) echo "$SPLICE_PORT" ;;
  nginx/*) echo "$NGINX_PORT" ;;
  esac
}

# One run: "rate cpu_per_unit errors" (conn: connections/s and CPU µs per connection; stream:
# MB/s and CPU ms per MB; udp: datagrams/s and CPU µs per datagram).
measure() { # balancer case
  local name=$1 case=$2 mode clients size before after out
  # shellcheck disable=SC2046
  set -- $(balancer_pids "$name")
  case $case in
  conn) mode=connections clients=$CONN_CLIENTS size=64 ;;
  stream) mode=throughput clients=$STREAM_CLIENTS size=65536 ;;
  udp) mode=udp clients=$UDP_CLIENTS size=64 ;;
  esac
  before=$(cpu_ticks "$@")
  out=$(taskset -c "$LOAD_CPU" "$BENCH" l4-load --target "127.0.0.1:$(port_of "$name" "$case")" \
    --mode "$mode" --concurrency "$clients" --duration "$DURATION" --size "$size")
  after=$(cpu_ticks "$@")
  python3 - "$case" "$out" "$before" "$after" "$(getconf CLK_TCK)" <<'EOF'
import sys
case = sys.argv[1]
kv = dict(x.split("=") for x in sys.argv[2].split())
(t0, _), (t1, _) = (map(int, a.split()) for a in sys.argv[3:5])
cpu = (t1 - t0) / int(sys.argv[5])
secs = float(kv["seconds"])
if case in ("conn", "udp"):
    n = int(kv["connections"])
    print(f"{n / secs:.0f} {cpu * 1e6 / max(n, 1):.1f} {kv['errors']}")
else:
    mb = int(kv["bytes"]) / 1e6
    print(f"{mb / secs:.0f} {cpu * 1e3 / max(mb, 1e-9):.2f} {kv['errors']}")
EOF
}

start_backends
start_portico
start_haproxy haproxy "$HAPROXY_PORT" "" ""
HAPROXY_PID=${pids[-1]}
# Each pipe is two descriptors: the default (maxconn / 4 pipes) would pass the usual limit.
start_haproxy haproxy-splice "$SPLICE_PORT" "  maxpipes 512" "  option splice-request
  option splice-response"
SPLICE_PID=${pids[-1]}
start_nginx
wait_udp_port() { # port: the UDP port answers
  local deadline=$((SECONDS + 10))
  until taskset -c "$LOAD_CPU" "$BENCH" l4-load --target "127.0.0.1:$1" --mode udp \
    --concurrency 1 --duration 1 --size 8 | grep -qv '^connections=0 '; do
    [ $SECONDS -lt $deadline ] || { echo "UDP port $1 never answered" >&2; exit 1; }
  done
}
wait_udp_port "$PORTICO_UDP_PORT"
wait_udp_port "$NGINX_UDP_PORT"
BALANCERS="portico haproxy haproxy+splice nginx"
results=$work/results
: >"$results"
for run in $(seq "$RUNS"); do
  for case in conn stream udp; do
    for name in $BALANCERS; do
      if [ "$case" = udp ] && [[ $name == haproxy* ]]; then continue; fi
      echo "$name $case $(measure "$name" "$case")" >>"$results"
      sleep 1 # let TIME_WAIT and the backends settle
    done
  done
  echo "run $run of $RUNS done" >&2
done
for name in $BALANCERS; do
  # shellcheck disable=SC2046
  echo "rss $name $(peak_rss $(balancer_pids "$name"))" >>"$results"
done

python3 - "$results" "$RUNS" "$DURATION" "$CONN_CLIENTS" "$STREAM_CLIENTS" "$UDP_CLIENTS" "$BACKENDS" <<'EOF'
import statistics, sys
rows, rss = {}, {}
for line in open(sys.argv[1]):
    f = line.split()
    if f[0] == "rss":
        rss[f[1]] = int(f[2])
    else:
        rows.setdefault((f[0], f[1]), []).append((float(f[2]), float(f[3]), int(f[4])))
runs, duration, cc, sc, uc, backends = sys.argv[2:]
names = ["portico", "haproxy", "haproxy+splice", "nginx"]
def med(k, i):
    return statistics.median(r[i] for r in rows[k]) if k in rows else None
print(f"L4 balancers on loopback, 1 worker thread each, {backends} echo backends, "
      f"{runs} runs x {duration} s, medians")
print()
print("| case | metric | portico | haproxy | haproxy+splice | nginx "
      "| portico/haproxy | portico/haproxy+splice | portico/nginx |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
def cells(v, fmt):
    shown = [fmt.format(x) if x is not None else "-" for x in v]
    ratios = [f"{v[0] / x:.2f}" if x else "-" for x in v[1:]]
    return " | ".join(shown + ratios)
def line(case, metric, i, fmt):
    v = [med((n, case), i) for n in names]
    print(f"| {case} | {metric} | {cells(v, fmt)} |")
line("conn", f"connections/s ({cc} clients, 64 B each way)", 0, "{:.0f}")
line("conn", "CPU µs per connection", 1, "{:.1f}")
line("stream", f"MB/s echoed ({sc} connections)", 0, "{:.0f}")
line("stream", "CPU ms per MB", 1, "{:.2f}")
line("udp", f"datagrams/s answered ({uc} clients, 64 B)", 0, "{:.0f}")
line("udp", "CPU µs per datagram", 1, "{:.1f}")
v = [rss[n] / 1024 for n in names]
print(f"| all | peak RSS (MiB) | {cells(v, '{:.1f}')} |")
errors = {n: sum(r[2] for c in ("conn", "stream", "udp") for r in rows.get((n, c), []))
          for n in names}
print()
print("client errors (timeouts, refused, lost datagrams): "
      + ", ".join(f"{n} {e}" for n, e in errors.items()))
EOF
