#!/usr/bin/env bash
# Requests with bodies through the built-in proxy and nginx, in one run (issue "Data plane III"):
# CPU time per POST with a 1 KiB and a 64 KiB body (Content-Length), and per GET for reference,
# on a saturated proxy core.
#
# One Portico (`--workers 1`, access log off) and one nginx (one worker, access log off, its
# default request buffering, `client_max_body_size 1m`),
# each pinned to core PROXY_CPU, proxy to a backend (one nginx worker on core LOAD_CPU, beside
# wrk) that reads the body and answers 200 with a short body. For each proxy and case, RUNS
# keep-alive wrk runs of DURATION s with CONNECTIONS connections; the table gives the medians of
# requests/s and CPU µs per request, and Portico / nginx.
#
# Usage: bash bench/post.sh   (RUNS=3 DURATION=6 CONNECTIONS=50 by default; PORTICO=path runs
#        that binary instead of building the release one)
# It starts and stops only its own processes, by PID, and sends traffic only to 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
DURATION=${DURATION:-6}
CONNECTIONS=${CONNECTIONS:-50}
PROXY_CPU=${PROXY_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
BACKEND_PORT=18811
PORTICO_PORT=18801
NGINX_PORT=18802
ADMIN_PORT=18803
CASES=(get post-1k post-64k)

source scripts/lib.sh
apt_install nginx wrk curl python3
if [ -z "${PORTICO:-}" ]; then
  cargo build --release --locked -q -p portico
  PORTICO=${CARGO_TARGET_DIR:-$PWD/target}/release/portico
fi

start_work
chmod 755 "$work" # the nginx workers run as an unprivileged user

# The backend reads every body (nginx discards it before `return`) and answers "ok".
mkdir -p "$work/backend"
{
  echo "worker_processes 1; daemon off; pid $work/backend/nginx.pid; error_log $work/backend/error.log warn;"
  echo "events { worker_connections 4096; }"
  echo "http { access_log off; keepalive_requests 1000000; client_max_body_size 1m;"
  echo "  client_body_temp_path $work/backend; proxy_temp_path $work/backend; fastcgi_temp_path $work/backend; uwsgi_temp_path $work/backend; scgi_temp_path $work/backend;"
  echo "  server { listen 127.0.0.1:$BACKEND_PORT; location / { return 200 \"ok\\n\"; } } }"
} >"$work/backend/nginx.conf"
taskset -c "$LOAD_CPU" nginx -c "$work/backend/nginx.conf" -e "$work/backend/error.log" &
pids+=($!)
wait_port "$BACKEND_PORT"

mkdir -p "$work/portico"
cat >"$work/portico/all.yaml" <<EOF
---
apiVersion: v1
kind: Service
metadata: {name: sink, namespace: bench}
spec:
  ports: [{name: http, port: 80}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: sink, namespace: bench, labels: {kubernetes.io/service-name: sink}}
addressType: IPv4
ports: [{name: http, port: $BACKEND_PORT}]
endpoints: [{addresses: [127.0.0.1], conditions: {ready: true}}]
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: sink, namespace: bench}
spec:
  ingressClassName: portico
  rules:
  - host: sink.test
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: sink, port: {number: 80}}}}
EOF
taskset -c "$PROXY_CPU" "$PORTICO" run -f "$work/portico" --workers 1 --log warn \
  --http-listen "127.0.0.1:$PORTICO_PORT" --https-listen 127.0.0.1:0 --access-log off \
  --admin-listen "127.0.0.1:$ADMIN_PORT" >/dev/null &
pids+=($!)
PORTICO_PID=$!
wait_http "http://127.0.0.1:$ADMIN_PORT/readyz"

mkdir -p "$work/nginx"
{
  echo "worker_processes 1; daemon off; pid $work/nginx/nginx.pid; error_log $work/nginx/error.log warn;"
  echo "events { worker_connections 8000; }"
  echo "http { access_log off; keepalive_requests 1000000; client_max_body_size 1m;"
  echo "  client_body_temp_path $work/nginx; proxy_temp_path $work/nginx; fastcgi_temp_path $work/nginx; uwsgi_temp_path $work/nginx; scgi_temp_path $work/nginx;"
  echo "  upstream sink { server 127.0.0.1:$BACKEND_PORT; keepalive 64; }"
  echo "  server { listen 127.0.0.1:$NGINX_PORT; server_name sink.test;"
  echo "    location / { proxy_pass http://sink; proxy_http_version 1.1; proxy_set_header Connection \"\"; proxy_set_header Host \$http_host; proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for; }"
  echo "  } }"
} >"$work/nginx/nginx.conf"
nginx -t -q -c "$work/nginx/nginx.conf" -e "$work/nginx/error.log"
taskset -c "$PROXY_CPU" nginx -c "$work/nginx/nginx.conf" -e "$work/nginx/error.log" &
pids+=($!)
NGINX_PID=$!
wait_port "$NGINX_PORT"
nginx_pids() { echo "$NGINX_PID" $(pgrep -P "$NGINX_PID"); }

# wrk scripts: a GET, and POSTs with a body of 1 KiB and 64 KiB.
echo 'wrk.method = "GET"' >"$work/get.lua"
for kib in 1 64; do
  {
    echo 'wrk.method = "POST"'
    echo "wrk.body = string.rep(\"x\", $((kib * 1024)))"
    echo 'wrk.headers["Content-Type"] = "application/octet-stream"'
  } >"$work/post-${kib}k.lua"
done

# Sanity: both proxies carry a body to the backend and answer its 200.
for port in "$PORTICO_PORT" "$NGINX_PORT"; do
  head -c 65536 /dev/zero >"$work/body"
  code=$(curl -s -o /dev/null -w '%{http_code}' -H "Host: sink.test" --data-binary "@$work/body" \
    "http://127.0.0.1:$port/upload")
  [ "$code" = 200 ] || {
    echo "port $port: a 64 KiB POST answered $code" >&2
    exit 1
  }
done

results=$work/results
: >"$results"
run_once() { # proxy port case pid...
  local proxy=$1 port=$2 case=$3
  shift 3
  local before after out requests
  before=$(cpu_ticks "$@")
  out=$(taskset -c "$LOAD_CPU" wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" -s "$work/$case.lua" \
    -H "Host: sink.test" "http://127.0.0.1:$port/upload")
  after=$(cpu_ticks "$@")
  requests=$(awk '/requests in/ {print $1}' <<<"$out")
  if grep -q 'Non-2xx\|Socket errors' <<<"$out"; then
    echo "$proxy $case: errors: $out" >&2
    exit 1
  fi
  echo "$proxy $case $requests $(( ${after%% *} - ${before%% *} )) $DURATION" >>"$results"
}

for run in $(seq "$RUNS"); do
  for case in "${CASES[@]}"; do
    run_once portico "$PORTICO_PORT" "$case" "$PORTICO_PID"
    run_once nginx "$NGINX_PORT" "$case" $(nginx_pids)
  done
  echo "run $run of $RUNS done" >&2
done

python3 - "$results" "$(getconf CLK_TCK)" "${CASES[*]}" <<'EOF'
import statistics, sys
tck, cases = int(sys.argv[2]), sys.argv[3].split()
runs = {}
for line in open(sys.argv[1]):
    proxy, case, requests, ticks, duration = line.split()
    n = max(int(requests), 1)
    runs.setdefault((proxy, case), []).append((n / int(duration), int(ticks) * 1e6 / tck / n))
med = {k: (statistics.median(a for a, _ in v), statistics.median(b for _, b in v)) for k, v in runs.items()}
print("| case | Portico req/s | Portico CPU µs/req | nginx req/s | nginx CPU µs/req | Portico / nginx (CPU per request) |")
print("| --- | --- | --- | --- | --- | --- |")
for c in cases:
    (pr, pc), (nr, nc) = med[("portico", c)], med[("nginx", c)]
    print(f"| {c} | {pr:.0f} | {pc:.2f} | {nr:.0f} | {nc:.2f} | {pc / nc:.2f} |")
EOF
