#!/usr/bin/env bash
# The CPU cost of the ingress-nginx annotations users carry most, in the built-in proxy and in
# nginx with the directives ingress-nginx generates for them, in one run (issue "Migration from
# ingress-nginx").
#
# One Portico (`--workers 1`, access log off) and one nginx (one worker, access log off), each
# pinned to core PROXY_CPU, serve five hosts over one pool of two backends (one nginx worker
# serving a 100-byte file, on core LOAD_CPU with wrk):
#   plain.test     no annotation
#   rewrite.test   use-regex + rewrite-target: /app(/|$)(.*) -> /$2
#   cors.test      enable-cors with an allowed origin and credentials (every request carries
#                  `Origin`, so every answer gets the CORS headers)
#   limit.test     limit-rps high enough that nothing is refused (the bookkeeping's cost)
#   all.test       the three together
# nginx gets what ingress-nginx writes for them: a regex location with `rewrite ... break`,
# `add_header` lines for CORS behind a check of the origin, `limit_req` with a zone keyed by
# the client address (burst = 5 x the rate, nodelay, as limit-burst-multiplier's default).
# For each proxy and host, RUNS keep-alive wrk runs of DURATION s with CONNECTIONS
# connections: CPU time per request (utime + stime from /proc). The report gives each
# annotation's cost over the plain route, for both, and Portico / nginx per case.
#
# Usage: bash bench/annotations.sh     (RUNS=3 DURATION=6 CONNECTIONS=50 by default; PORTICO=path and BENCH=path
#        run those binaries instead of building the release ones)
# It starts and stops only its own processes, by PID, and sends traffic only to 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
DURATION=${DURATION:-6}
CONNECTIONS=${CONNECTIONS:-50}
PROXY_CPU=${PROXY_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
CASES=(plain rewrite cors limit all)
BACKEND_PORTS=(18611 18612)
PORTICO_PORT=18601
NGINX_PORT=18602
ADMIN_PORT=18603
ORIGIN=https://app.example

source scripts/lib.sh
source bench/lib-one-route.sh
apt_install nginx wrk curl python3
release_binaries

start_work
chmod 755 "$work" # the nginx workers run as an unprivileged user

# Backends: nginx answering /small (100 bytes) on two ports, whatever the prefix the proxies
# forward (the rewrite strips /app).
mkdir -p "$work/www"
head -c 100 /dev/zero | tr '\0' 'x' >"$work/www/small"
chmod -R a+rX "$work/www"
start_backend "${BACKEND_PORTS[0]}" "listen 127.0.0.1:${BACKEND_PORTS[1]}; root $work/www; default_type text/plain;"

# Portico: the pool and one Ingress per case, with ingress-nginx's annotations.
mkdir -p "$work/portico"
for port in "${BACKEND_PORTS[@]}"; do service_manifest "$work/portico/pool.yaml" pool "$port"; done
rewrite='nginx.ingress.kubernetes.io/use-regex: "true", nginx.ingress.kubernetes.io/rewrite-target: /$2'
cors="nginx.ingress.kubernetes.io/enable-cors: \"true\", nginx.ingress.kubernetes.io/cors-allow-origin: \"$ORIGIN\", nginx.ingress.kubernetes.io/cors-allow-credentials: \"true\""
limit='nginx.ingress.kubernetes.io/limit-rps: "1000000"'
for case in "${CASES[@]}"; do
  annotations= path=/ type=Prefix
  case $case in
    rewrite) annotations=$rewrite ;;
    cors) annotations=$cors ;;
    limit) annotations=$limit ;;
    all) annotations="$rewrite, $cors, $limit" ;;
  esac
  case $case in rewrite | all) path='/app(/|$)(.*)' type=ImplementationSpecific ;; esac
  ingress_manifest "$work/portico/$case.yaml" "$case" "$case.test" "$path" "$type" pool "$annotations"
done
start_portico_on "$work/portico" "$PORTICO_PORT" 127.0.0.1:0 "$ADMIN_PORT"

# nginx: the same routes with the directives ingress-nginx writes for the annotations.
proxy=$(nginx_proxy_to pool)
cors_lines="set \$cors ''; if (\$cors_ok) { set \$cors 'true'; }
      if (\$request_method = 'OPTIONS') { set \$cors \"\${cors}options\"; }
      if (\$cors = 'trueoptions') { add_header Access-Control-Allow-Origin \$http_origin; add_header Access-Control-Allow-Credentials true; add_header Access-Control-Allow-Methods 'GET, PUT, POST, DELETE, PATCH, OPTIONS'; add_header Access-Control-Allow-Headers 'DNT,Keep-Alive,User-Agent,X-Requested-With,If-Modified-Since,Cache-Control,Content-Type,Range,Authorization'; add_header Access-Control-Max-Age 1728000; return 204; }
      if (\$cors = 'true') { add_header Access-Control-Allow-Origin \$http_origin always; add_header Access-Control-Allow-Credentials true always; add_header Access-Control-Allow-Methods 'GET, PUT, POST, DELETE, PATCH, OPTIONS' always; add_header Access-Control-Allow-Headers 'DNT,Keep-Alive,User-Agent,X-Requested-With,If-Modified-Since,Cache-Control,Content-Type,Range,Authorization' always; }"
limit_lines="limit_req zone=rps burst=5000000 nodelay; limit_req_status 503;"
http="  upstream pool { server 127.0.0.1:${BACKEND_PORTS[0]}; server 127.0.0.1:${BACKEND_PORTS[1]}; keepalive 64; }
  limit_req_zone \$binary_remote_addr zone=rps:5m rate=1000000r/s;
  map \$http_origin \$cors_ok { default 0; \"$ORIGIN\" 1; }"
for case in "${CASES[@]}"; do
  case $case in
    plain) location="location / { $proxy }" ;;
    rewrite) location="location ~* \"^/app(/|\$)(.*)\" { rewrite \"(?i)/app(/|\$)(.*)\" /\$2 break; $proxy }" ;;
    cors) location="location / { $cors_lines
      $proxy }" ;;
    limit) location="location / { $limit_lines $proxy }" ;;
    all) location="location ~* \"^/app(/|\$)(.*)\" { $limit_lines $cors_lines
      rewrite \"(?i)/app(/|\$)(.*)\" /\$2 break; $proxy }" ;;
  esac
  http+="
  server { listen 127.0.0.1:$NGINX_PORT; server_name $case.test;
    $location
  }"
done
start_nginx_proxy "$NGINX_PORT" "$http"

path_of() { case $1 in rewrite | all) echo /app/small ;; *) echo /small ;; esac; }

# Sanity: both proxies answer every case with the backend's 100 bytes, and CORS headers where
# asked for.
for port in "$PORTICO_PORT" "$NGINX_PORT"; do
  for case in "${CASES[@]}"; do
    out=$(curl -s -D - -o "$work/body" -H "Host: $case.test" -H "Origin: $ORIGIN" \
      "http://127.0.0.1:$port$(path_of "$case")")
    size=$(wc -c <"$work/body")
    if ! grep -q '^HTTP/1.1 200' <<<"$out" || [ "$size" != 100 ]; then
      echo "port $port, $case: not the backend's answer: $out" >&2
      exit 1
    fi
    if [ "$case" = cors ] || [ "$case" = all ]; then
      grep -qi "^access-control-allow-origin: $ORIGIN" <<<"$out" || {
        echo "port $port, $case: no CORS header: $out" >&2
        exit 1
      }
    fi
  done
done

one_case() { # case
  wrk_cpu -H "Host: $1.test" -H "Origin: $ORIGIN" "http://127.0.0.1:$port$(path_of "$1")"
}
run_cases one_case

python3 - "$results" "$(getconf CLK_TCK)" "${CASES[*]}" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
tck, cases = int(sys.argv[2]), sys.argv[3].split()
us = {}
for proxy, case, requests, ticks in rows:
    us.setdefault((proxy, case), []).append(int(ticks) * 1e6 / tck / max(int(requests), 1))
med = {k: statistics.median(v) for k, v in us.items()}
print("| case | Portico µs/req | over plain | nginx µs/req | over plain | Portico / nginx |")
print("| --- | --- | --- | --- | --- | --- |")
for c in cases:
    p, n = med[("portico", c)], med[("nginx", c)]
    pp, np_ = med[("portico", "plain")], med[("nginx", "plain")]
    print(f"| {c} | {p:.2f} | {p / pp - 1:+.1%} | {n:.2f} | {n / np_ - 1:+.1%} | {p / n:.2f} |")
EOF
