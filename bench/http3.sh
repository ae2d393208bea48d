#!/usr/bin/env bash
# HTTP/3's CPU cost in the built-in proxy against its HTTP/2 over TLS, in one run (issue "Data
# plane III"), with nginx's HTTP/2 over TLS beside them for reference. Debian's nginx (1.22)
# has no HTTP/3 (it came in 1.25), and its h2load has no QUIC: this script says so and measures
# nginx over HTTP/2 only.
#
# One Portico (`--workers 1`, access log off, HTTP/3 on, the default) and one nginx (one
# worker, access log off, `listen ... ssl http2`), each pinned to core PROXY_CPU, with the same
# ECDSA P-256 certificate (made here), proxy to a backend (one nginx worker on core LOAD_CPU)
# serving 100 bytes. The load is `portico-bench h-load` on core LOAD_CPU, the same client code
# for both protocols (hyper's HTTP/2 over rustls, quinn + h3 for HTTP/3): CONNECTIONS
# connections, one request in flight on each, small GETs, for DURATION s; RUNS runs. The table
# gives the medians of requests/s and the proxy's CPU µs per request, and HTTP/3 / HTTP/2.
#
# Usage: bash bench/http3.sh   (RUNS=3 DURATION=6 CONNECTIONS=50 by default; PORTICO=path and
#        BENCH=path run those binaries instead of building the release ones)
# It starts and stops only its own processes, by PID, and sends traffic only to 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
DURATION=${DURATION:-6}
CONNECTIONS=${CONNECTIONS:-50}
PROXY_CPU=${PROXY_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
BACKEND_PORT=18911
PORTICO_PORT=18901
PORTICO_TLS_PORT=18904
NGINX_TLS_PORT=18902
ADMIN_PORT=18903
HOST=h3.test

source scripts/lib.sh
source bench/lib-one-route.sh
apt_install nginx openssl curl python3
release_binaries
if nginx -V 2>&1 | grep -q -- --with-http_v3_module; then
  echo "note: this nginx has HTTP/3, but the load tool measures it over HTTP/2 only" >&2
else
  echo "nginx $(nginx -v 2>&1 | sed 's|.*/||') has no HTTP/3: measured over HTTP/2 only" >&2
fi

start_work
chmod 755 "$work" # the nginx workers run as an unprivileged user

mkdir -p "$work/tls" "$work/www"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj "/CN=$HOST" \
  -addext "subjectAltName=DNS:$HOST" -keyout "$work/tls/key.pem" -out "$work/tls/cert.pem" 2>/dev/null
chmod 755 "$work/tls" && chmod 644 "$work/tls/"*.pem
head -c 100 /dev/zero | tr '\0' 'x' >"$work/www/small"
chmod -R a+rX "$work/www"
start_backend "$BACKEND_PORT" "root $work/www; default_type text/plain;"

mkdir -p "$work/portico"
cat >"$work/portico/all.yaml" <<EOF
---
apiVersion: v1
kind: Secret
type: kubernetes.io/tls
metadata: {name: h3, namespace: bench}
data:
  tls.crt: $(base64 -w0 "$work/tls/cert.pem")
  tls.key: $(base64 -w0 "$work/tls/key.pem")
EOF
service_manifest "$work/portico/all.yaml" small "$BACKEND_PORT"
ingress_manifest "$work/portico/all.yaml" small "$HOST" / Prefix small "" h3
start_portico_on "$work/portico" "$PORTICO_PORT" "127.0.0.1:$PORTICO_TLS_PORT" "$ADMIN_PORT"

start_nginx_proxy "$NGINX_TLS_PORT" "  upstream small { server 127.0.0.1:$BACKEND_PORT; keepalive 64; }
  server { listen 127.0.0.1:$NGINX_TLS_PORT ssl http2; server_name $HOST;
    ssl_certificate $work/tls/cert.pem; ssl_certificate_key $work/tls/key.pem; ssl_protocols TLSv1.2 TLSv1.3;
    location / { $(nginx_proxy_to small) } }"

load() { # protocol port
  taskset -c "$LOAD_CPU" "$BENCH" h-load --protocol "$1" --target "127.0.0.1:$2" --host "$HOST" \
    --path /small --connections "$CONNECTIONS" --duration "$DURATION" | grep '^RESULT'
}

# Sanity: Portico advertises HTTP/3 and answers over it; a short load of each kind has no error.
curl -sk -D - -o /dev/null --resolve "$HOST:$PORTICO_TLS_PORT:127.0.0.1" \
  "https://$HOST:$PORTICO_TLS_PORT/small" | grep -qi '^alt-svc: h3=' || {
  echo "Portico does not advertise HTTP/3 (Alt-Svc)" >&2
  exit 1
}
for check in "h3 $PORTICO_TLS_PORT" "h2 $PORTICO_TLS_PORT" "h2 $NGINX_TLS_PORT"; do
  set -- $check
  out=$(DURATION=1 load "$1" "$2")
  case $out in
    *" errors=0") ;;
    *)
      echo "$1 on port $2: $out" >&2
      exit 1
      ;;
  esac
done

results=$work/results
: >"$results"
run_once() { # proxy protocol port pid...
  local proxy=$1 protocol=$2 port=$3
  shift 3
  local before after out
  before=$(cpu_ticks "$@")
  out=$(load "$protocol" "$port")
  after=$(cpu_ticks "$@")
  echo "$proxy $protocol $out $(( ${after%% *} - ${before%% *} ))" >>"$results"
}
for run in $(seq "$RUNS"); do
  run_once portico h2 "$PORTICO_TLS_PORT" "$PORTICO_PID"
  run_once portico h3 "$PORTICO_TLS_PORT" "$PORTICO_PID"
  run_once nginx h2 "$NGINX_TLS_PORT" $(nginx_pids)
  echo "run $run of $RUNS done" >&2
done

python3 - "$results" "$(getconf CLK_TCK)" <<'EOF'
import statistics, sys
tck = int(sys.argv[2])
runs = {}
for line in open(sys.argv[1]):
    proxy, protocol, _, *kv, ticks = line.split()
    kv = dict(x.split("=") for x in kv)
    n, us = max(int(kv["requests"]), 1), int(kv["duration_us"])
    if int(kv["errors"]):
        sys.exit(f"{proxy} {protocol}: {kv['errors']} errors")
    runs.setdefault((proxy, protocol), []).append((n * 1e6 / us, int(ticks) * 1e6 / tck / n))
med = {k: (statistics.median(a for a, _ in v), statistics.median(b for _, b in v)) for k, v in runs.items()}
print("| proxy | protocol | requests/s | CPU µs per request |")
print("| --- | --- | --- | --- |")
for (proxy, protocol), (rate, cpu) in sorted(med.items(), key=lambda kv: (kv[0][0] != "portico", kv[0][1])):
    print(f"| {proxy} | {protocol} | {rate:.0f} | {cpu:.2f} |")
h3, h2 = med[("portico", "h3")][1], med[("portico", "h2")][1]
print(f"\nPortico HTTP/3 / HTTP/2 over TLS (CPU per request): {h3 / h2:.2f}; "
      f"Portico HTTP/2 / nginx HTTP/2: {h2 / med[('nginx', 'h2')][1]:.2f}; nginx HTTP/3: not available")
EOF
