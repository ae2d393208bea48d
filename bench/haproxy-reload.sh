#!/usr/bin/env bash
# Hitless reloads of the haproxy provider: continuous wrk load (keep-alive connections) against
# a load balancer served by haproxy (`portico run --provider haproxy`) while RELOADS Ingress
# changes (default 100) each add a route, i.e. each cause a haproxy reload; prints the reloads
# haproxy counted and the failed requests (non-2xx answers and socket errors) wrk saw.
# Loopback only; bounded in time (each change waits at most 10 s); stops only its own PIDs.
# Usage: bash bench/haproxy-reload.sh    (RELOADS=N to change the count)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
apt_install haproxy nginx wrk curl python3

RELOADS=${RELOADS:-100}
cargo build --release --locked -p portico
bin=target/release/portico
start_work

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
http_port=$(free_port); https_port=$(free_port); admin_port=$(free_port)
backends=("$(free_port)" "$(free_port)")

# Backends: one nginx worker answering 200 on two ports.
mkdir -p "$work/nginx" "$work/manifests"
{
  echo "worker_processes 1; daemon off; pid $work/nginx/nginx.pid; error_log $work/nginx/error.log warn;"
  echo "events { worker_connections 1024; }"
  echo "http { access_log off; client_body_temp_path $work/nginx; proxy_temp_path $work/nginx;"
  echo "  fastcgi_temp_path $work/nginx; uwsgi_temp_path $work/nginx; scgi_temp_path $work/nginx;"
  echo "  server {"
  for port in "${backends[@]}"; do echo "    listen 127.0.0.1:$port;"; done
  echo "    location / { return 200 \"ok\n\"; } } }"
} >"$work/nginx/nginx.conf"
nginx -c "$work/nginx/nginx.conf" -e "$work/nginx/error.log" &
pids+=($!)

cat >"$work/manifests/backends.yaml" <<EOF
apiVersion: v1
kind: Service
metadata: {name: web, namespace: bench}
spec:
  ports: [{name: http, port: 80, targetPort: 8080}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-a, namespace: bench, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{name: http, port: ${backends[0]}}]
endpoints: [{addresses: ["127.0.0.1"]}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-b, namespace: bench, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{name: http, port: ${backends[1]}}]
endpoints: [{addresses: ["127.0.0.1"]}]
EOF

# The Ingress of change i: /load (what wrk requests) plus routes /r1 .. /ri; /ri answers 404
# until change i is served.
ingress() {
  local tmp="$work/manifests/.ingress.tmp"
  {
    echo "apiVersion: networking.k8s.io/v1"
    echo "kind: Ingress"
    echo "metadata: {name: bench, namespace: bench}"
    echo "spec:"
    echo "  ingressClassName: portico"
    echo "  rules:"
    echo "  - host: bench.test"
    echo "    http:"
    echo "      paths:"
    echo "      - {path: /load, pathType: Exact, backend: {service: {name: web, port: {number: 80}}}}"
    for ((r = 1; r <= $1; r++)); do
      echo "      - {path: /r$r, pathType: Exact, backend: {service: {name: web, port: {number: 80}}}}"
    done
  } >"$tmp"
  mv "$tmp" "$work/manifests/ingress.yaml"
}
ingress 0

"$bin" run -f "$work/manifests" --provider haproxy --state-dir "$work/state" \
  --http-listen "127.0.0.1:$http_port" --https-listen "127.0.0.1:$https_port" \
  --admin-listen "127.0.0.1:$admin_port" --log warn >"$work/portico.out" 2>"$work/portico.log" &
pids+=($!)
wait_http "http://127.0.0.1:$admin_port/readyz"
curl -sf -o /dev/null -H 'Host: bench.test' "http://127.0.0.1:$http_port/load"

master=$(ls "$work"/state/loadbalancer/haproxy/*/master.sock)
# "<reloads> <failed reloads>" from the master CLI's `show proc`.
reloads() {
  python3 - "$master" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(b"show proc\n"); s.shutdown(socket.SHUT_WR)
out = b""
while chunk := s.recv(65536):
    out += chunk
line = next(l for l in out.decode().splitlines() if " master " in l)
print(line.split()[2], line.split("failed:")[1].split("]")[0].strip())
PY
}
read -r before failed_before < <(reloads)

wrk -t1 -c16 -d600s -H 'Host: bench.test' "http://127.0.0.1:$http_port/load" >"$work/wrk.txt" 2>&1 &
wrk_pid=$!
pids+=("$wrk_pid")
sleep 1
start=$(date +%s.%N)
for ((i = 1; i <= RELOADS; i++)); do
  ingress "$i"
  deadline=$((SECONDS + 10))
  until [ "$(curl -s -o /dev/null -w '%{http_code}' -H 'Host: bench.test' "http://127.0.0.1:$http_port/r$i")" = 200 ]; do
    [ $SECONDS -lt $deadline ] || { echo "change $i was not served within 10 s" >&2; exit 1; }
    sleep 0.02
  done
done
elapsed=$(python3 -c "import time; print(f'{time.time() - $start:.1f}')")
sleep 1
kill -INT "$wrk_pid"
wait "$wrk_pid" || true
read -r after failed_after < <(reloads)

requests=$(awk '/requests in/ {print $1}' "$work/wrk.txt")
non2xx=$(awk '/Non-2xx/ {print $NF}' "$work/wrk.txt")
socket=$(awk -F'[ ,]+' '/Socket errors/ {print $4 + $6 + $8 + $10}' "$work/wrk.txt")
echo "changes applied:       $RELOADS in ${elapsed}s"
echo "haproxy reloads:       $((after - before)) (failed: $((failed_after - failed_before)))"
echo "requests (wrk):        $requests"
echo "non-2xx responses:     ${non2xx:-0}"
echo "socket errors:         ${socket:-0}"
echo "failed requests:       $(( ${non2xx:-0} + ${socket:-0} ))"
