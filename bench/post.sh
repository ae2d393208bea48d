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
# Usage: bash bench/post.sh   (RUNS=3 DURATION=6 CONNECTIONS=50 by default; PORTICO=path and
#        BENCH=path run those binaries instead of building the release ones)
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
source bench/lib-one-route.sh
apt_install nginx wrk curl python3
release_binaries

start_work
chmod 755 "$work" # the nginx workers run as an unprivileged user

# The backend reads every body (nginx discards it before `return`) and answers "ok".
start_backend "$BACKEND_PORT" "client_max_body_size 1m; location / { return 200 \"ok\\n\"; }"

mkdir -p "$work/portico"
service_manifest "$work/portico/all.yaml" sink "$BACKEND_PORT"
ingress_manifest "$work/portico/all.yaml" sink sink.test / Prefix sink ""
start_portico_on "$work/portico" "$PORTICO_PORT" 127.0.0.1:0 "$ADMIN_PORT"

start_nginx_proxy "$NGINX_PORT" "  client_max_body_size 1m;
  upstream sink { server 127.0.0.1:$BACKEND_PORT; keepalive 64; }
  server { listen 127.0.0.1:$NGINX_PORT; server_name sink.test; location / { $(nginx_proxy_to sink) } }"

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

one_case() { # case
  echo "$(wrk_cpu -s "$work/$1.lua" -H "Host: sink.test" "http://127.0.0.1:$port/upload") $DURATION"
}
run_cases one_case

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
