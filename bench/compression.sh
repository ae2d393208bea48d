#!/usr/bin/env bash
# Response compression's CPU cost in the built-in proxy and in nginx, in one run (issue "Data
# plane III"): CPU time per MB of uncompressed response body, gzip at the same level in both
# (level 1: Portico's and nginx's default `gzip_comp_level`), and Portico's brotli and zstd beside
# them; `identity` (no coding) is the proxying cost both pay anyway.
#
# One Portico (`--workers 1`, access log off, `--compression zstd,br,gzip`: the coding chosen by
# the request's `Accept-Encoding`) and one nginx (one worker, access log off, `gzip on;
# gzip_comp_level 1`), each pinned to core PROXY_CPU, proxy to a backend (one nginx worker,
# core LOAD_CPU, beside wrk) serving a JSON document of SIZE bytes (default 65536; generated
# here, as compressible as an API's answer). For each proxy and coding, RUNS keep-alive wrk runs
# of DURATION s with CONNECTIONS connections; the table gives the medians: MB/s of uncompressed
# body, CPU ms per MB, the compressed size, and Portico / nginx for gzip and identity.
#
# Usage: bash bench/compression.sh   (RUNS=3 DURATION=6 CONNECTIONS=10 SIZE=65536 by default;
#        PORTICO=path and BENCH=path run those binaries instead of building the release ones)
# It starts and stops only its own processes, by PID, and sends traffic only to 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
DURATION=${DURATION:-6}
CONNECTIONS=${CONNECTIONS:-10}
SIZE=${SIZE:-65536}
PROXY_CPU=${PROXY_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
BACKEND_PORT=18711
PORTICO_PORT=18701
NGINX_PORT=18702
ADMIN_PORT=18703

source scripts/lib.sh
source bench/lib-one-route.sh
apt_install nginx wrk curl python3
release_binaries

start_work
chmod 755 "$work" # the nginx workers run as an unprivileged user

# The document: an API's list of records, SIZE bytes.
mkdir -p "$work/www"
python3 - "$SIZE" >"$work/www/doc.json" <<'EOF'
import json, random, sys
random.seed(7)
size, items, words = int(sys.argv[1]), [], ["alpha", "beta", "gamma", "delta", "portico", "ingress", "route", "pool"]
while True:
    items.append({"id": len(items), "name": " ".join(random.choice(words) for _ in range(3)),
                  "score": round(random.random() * 1000, 3), "active": random.random() < 0.5,
                  "tags": random.sample(words, 3)})
    text = json.dumps(items)
    if len(text) >= size:
        sys.stdout.write(text[:size])
        break
EOF
chmod -R a+rX "$work/www"
start_backend "$BACKEND_PORT" "root $work/www; types { application/json json; }"

mkdir -p "$work/portico"
service_manifest "$work/portico/all.yaml" docs "$BACKEND_PORT"
ingress_manifest "$work/portico/all.yaml" docs docs.test / Prefix docs ""
start_portico_on "$work/portico" "$PORTICO_PORT" 127.0.0.1:0 "$ADMIN_PORT" --compression zstd,br,gzip

start_nginx_proxy "$NGINX_PORT" "  gzip on; gzip_comp_level 1; gzip_min_length 256; gzip_proxied any; gzip_vary on; gzip_types application/json;
  upstream docs { server 127.0.0.1:$BACKEND_PORT; keepalive 64; }
  server { listen 127.0.0.1:$NGINX_PORT; server_name docs.test; location / { $(nginx_proxy_to docs) } }"

# Sanity: each coding decodes to the exact document; prints the compressed size.
decoded_size() { # port coding
  local port=$1 coding=$2
  curl -s -D "$work/headers" -o "$work/body.$coding" -H "Host: docs.test" \
    -H "Accept-Encoding: $coding" "http://127.0.0.1:$port/doc.json"
  local got
  got=$(awk 'tolower($1) == "content-encoding:" {print $2}' "$work/headers" | tr -d '\r')
  case $coding in
    identity) [ -z "$got" ] && cmp -s "$work/body.$coding" "$work/www/doc.json" ;;
    gzip) [ "$got" = gzip ] && gzip -dc "$work/body.$coding" | cmp -s - "$work/www/doc.json" ;;
    br) [ "$got" = br ] ;;
    zstd) [ "$got" = zstd ] ;;
  esac || {
    echo "port $port, $coding: not the document in that coding (Content-Encoding: $got)" >&2
    exit 1
  }
  wc -c <"$work/body.$coding"
}

results=$work/results
: >"$results"
run_once() { # proxy port coding
  echo "$1 $3 $(wrk_cpu -H "Host: docs.test" -H "Accept-Encoding: $3" \
    "http://127.0.0.1:$2/doc.json") $DURATION" >>"$results"
}

declare -A compressed
for coding in identity gzip br zstd; do
  compressed[portico-$coding]=$(decoded_size "$PORTICO_PORT" "$coding")
done
for coding in identity gzip; do
  compressed[nginx-$coding]=$(decoded_size "$NGINX_PORT" "$coding")
done
for run in $(seq "$RUNS"); do
  PROXY_PIDS=$PORTICO_PID
  for coding in identity gzip br zstd; do run_once portico "$PORTICO_PORT" "$coding"; done
  PROXY_PIDS=$(nginx_pids)
  for coding in identity gzip; do run_once nginx "$NGINX_PORT" "$coding"; done
  echo "run $run of $RUNS done" >&2
done

sizes=""
for key in "${!compressed[@]}"; do sizes+="$key=${compressed[$key]} "; done
python3 - "$results" "$(getconf CLK_TCK)" "$SIZE" "$sizes" <<'EOF'
import statistics, sys
tck, size = int(sys.argv[2]), int(sys.argv[3])
sizes = dict(x.split("=") for x in sys.argv[4].split())
runs = {}
for line in open(sys.argv[1]):
    proxy, coding, requests, ticks, duration = line.split()
    mb = int(requests) * size / 1e6
    runs.setdefault((proxy, coding), []).append((mb / int(duration), int(ticks) * 1e3 / tck / max(mb, 1e-9)))
med = {k: (statistics.median(a for a, _ in v), statistics.median(b for _, b in v)) for k, v in runs.items()}
print(f"Document: {size} bytes of JSON.")
print("| proxy | coding | MB/s (uncompressed) | CPU ms per MB | compressed size | Portico / nginx (CPU per MB) |")
print("| --- | --- | --- | --- | --- | --- |")
for (proxy, coding), (rate, cpu) in sorted(med.items()):
    ratio = ""
    if proxy == "portico" and ("nginx", coding) in med:
        ratio = f"{cpu / med[('nginx', coding)][1]:.2f}"
    print(f"| {proxy} | {coding} | {rate:.1f} | {cpu:.2f} | {sizes.get(f'{proxy}-{coding}', '?')} B | {ratio} |")
EOF
