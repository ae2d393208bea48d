#!/usr/bin/env bash
# L4 benchmark: Portico's provider `l4` side by side with haproxy (`mode tcp`) and nginx
# (`stream`), on loopback, in one run.
#
# Each balancer spreads TCP connections over the same BACKENDS echo servers (`portico-bench
# l4-echo`) with one worker thread pinned to core PROXY_CPU (taskset); the load generator
# (`portico-bench l4-load`) and the backends share core LOAD_CPU. Portico serves a Service of
# class portico.dev/l4 with `loadBalancerIP: 127.0.0.1` (Maglev over the endpoints); haproxy
# and nginx balance round robin. Cases:
# - `conn`: CONN_CLIENTS clients each opening a connection, sending 64 bytes, reading them back
#   and closing, again and again: connections per second.
# - `stream`: STREAM_CLIENTS long connections writing 64 KiB chunks and reading them back:
#   MB/s echoed (through the balancer both ways).
# For each balancer and case: the rate, the balancer's CPU time per connection (conn) or per
# MB (stream) from /proc (utime + stime), and its peak RSS (VmHWM) at the end. RUNS runs each
# (default 3, medians); the table gives ratios Portico/haproxy and Portico/nginx.
#
# Usage: bash bench/l4.sh     (RUNS=3 DURATION=5 CONN_CLIENTS=32 STREAM_CLIENTS=4 BACKENDS=4)
# It starts and stops only its own processes, by PID, and sends traffic only to 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
DURATION=${DURATION:-5}
CONN_CLIENTS=${CONN_CLIENTS:-32}
STREAM_CLIENTS=${STREAM_CLIENTS:-4}
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

work=$(mktemp -d)
chmod 755 "$work"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

PORTICO_PORT=19000 HAPROXY_PORT=19001 NGINX_PORT=19002 ADMIN_PORT=19180
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
  ports: [{name: echo, port: $PORTICO_PORT, protocol: TCP}]" >>"$work/portico/svc.yaml"
  for port in "${BACKEND_PORTS[@]}"; do
    echo "---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: echo-$port, namespace: bench, labels: {kubernetes.io/service-name: echo}}
addressType: IPv4
ports: [{name: echo, port: $port, protocol: TCP}]
endpoints: [{addresses: [127.0.0.1], conditions: {ready: true}}]" >>"$work/portico/svc.yaml"
  done
  taskset -c "$PROXY_CPU" "$PORTICO" run -f "$work/portico" --workers 1 --log warn \
    --http-listen 127.0.0.1:0 --https-listen 127.0.0.1:0 --admin-listen "127.0.0.1:$ADMIN_PORT" \
    --access-log off --state-dir "$work/state" >"$work/portico.log" 2>&1 &
  pids+=($!)
  PORTICO_PID=$!
  wait_port "$PORTICO_PORT"
}

start_haproxy() {
  {
    echo "global
  nbthread 1
  maxconn 9000
defaults
  mode tcp
  timeout connect 5s
  timeout client 1h
  timeout server 1h
frontend l4
  bind 127.0.0.1:$HAPROXY_PORT
  default_backend echo
backend echo
  balance roundrobin"
    for port in "${BACKEND_PORTS[@]}"; do echo "  server s$port 127.0.0.1:$port"; done
  } >"$work/haproxy.cfg"
  haproxy -c -q -f "$work/haproxy.cfg"
  taskset -c "$PROXY_CPU" haproxy -db -f "$work/haproxy.cfg" &
  pids+=($!)
  HAPROXY_PID=$!
  wait_port "$HAPROXY_PORT"
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
  nginx) echo "$NGINX_PID $(pgrep -P "$NGINX_PID" | tr '\n' ' ')" ;;
  esac
}

port_of() {
  case $1 in
  portico) echo "$PORTICO_PORT" ;;
  haproxy) echo "$HAPROXY_PORT" ;;
  nginx) echo "$NGINX_PORT" ;;
  esac
}

# One run: "rate cpu_per_unit errors" (conn: connections/s and CPU µs per connection; stream:
# MB/s and CPU ms per MB).
measure() { # balancer case
  local name=$1 case=$2 mode clients size before after out
  # shellcheck disable=SC2046
  set -- $(balancer_pids "$name")
  if [ "$case" = conn ]; then mode=connections clients=$CONN_CLIENTS size=64; else
    mode=throughput clients=$STREAM_CLIENTS size=65536; fi
  before=$(cpu_ticks "$@")
  out=$(taskset -c "$LOAD_CPU" "$BENCH" l4-load --target "127.0.0.1:$(port_of "$name")" \
    --mode "$mode" --concurrency "$clients" --duration "$DURATION" --size "$size")
  after=$(cpu_ticks "$@")
  python3 - "$case" "$out" "$before" "$after" "$(getconf CLK_TCK)" <<'EOF'
import sys
case = sys.argv[1]
kv = dict(x.split("=") for x in sys.argv[2].split())
(t0, _), (t1, _) = (map(int, a.split()) for a in sys.argv[3:5])
cpu = (t1 - t0) / int(sys.argv[5])
secs = float(kv["seconds"])
if case == "conn":
    n = int(kv["connections"])
    print(f"{n / secs:.0f} {cpu * 1e6 / max(n, 1):.1f} {kv['errors']}")
else:
    mb = int(kv["bytes"]) / 1e6
    print(f"{mb / secs:.0f} {cpu * 1e3 / max(mb, 1e-9):.2f} {kv['errors']}")
EOF
}

start_backends
start_portico
start_haproxy
start_nginx
BALANCERS="portico haproxy nginx"
results=$work/results
: >"$results"
for run in $(seq "$RUNS"); do
  for case in conn stream; do
    for name in $BALANCERS; do
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

python3 - "$results" "$RUNS" "$DURATION" "$CONN_CLIENTS" "$STREAM_CLIENTS" "$BACKENDS" <<'EOF'
import statistics, sys
rows, rss = {}, {}
for line in open(sys.argv[1]):
    f = line.split()
    if f[0] == "rss":
        rss[f[1]] = int(f[2])
    else:
        rows.setdefault((f[0], f[1]), []).append((float(f[2]), float(f[3]), int(f[4])))
runs, duration, cc, sc, backends = sys.argv[2:]
names = ["portico", "haproxy", "nginx"]
med = lambda k, i: statistics.median(r[i] for r in rows[k])
print(f"L4 balancers on loopback, 1 worker thread each, {backends} echo backends, "
      f"{runs} runs x {duration} s, medians")
print()
print("| case | metric | portico | haproxy | nginx | portico/haproxy | portico/nginx |")
print("| --- | --- | --- | --- | --- | --- | --- |")
def line(case, metric, i, fmt):
    v = [med((n, case), i) for n in names]
    print(f"| {case} | {metric} | " + " | ".join(fmt.format(x) for x in v)
          + f" | {v[0] / v[1]:.2f} | {v[0] / v[2]:.2f} |")
line("conn", f"connections/s ({cc} clients, 64 B each way)", 0, "{:.0f}")
line("conn", "CPU µs per connection", 1, "{:.1f}")
line("stream", f"MB/s echoed ({sc} connections)", 0, "{:.0f}")
line("stream", "CPU ms per MB", 1, "{:.2f}")
v = [rss[n] / 1024 for n in names]
print(f"| all | peak RSS (MiB) | " + " | ".join(f"{x:.1f}" for x in v)
      + f" | {v[0] / v[1]:.2f} | {v[0] / v[2]:.2f} |")
errors = {n: sum(r[2] for c in ("conn", "stream") for r in rows[(n, c)]) for n in names}
print()
print("client errors (timeouts, refused): " + ", ".join(f"{n} {e}" for n, e in errors.items()))
EOF
