#!/usr/bin/env bash
# What tracing costs the built-in proxy (issue "Data plane III"): CPU time per request of one
# Portico without `--otlp-endpoint` (tracing off), one exporting to a collector at
# `--trace-sample-ratio 0.01` and one at 1.0, on a saturated proxy core, in one run.
#
# Each Portico (`--workers 1`, access log off) is pinned to core PROXY_CPU and they take turns;
# the backend (one nginx worker answering 200) and the collector (an nginx worker answering 200
# to every OTLP/HTTP export and discarding it) share core LOAD_CPU with wrk. Requests carry no
# `traceparent`: the proxy decides each sample itself. RUNS keep-alive wrk runs of DURATION s
# with CONNECTIONS connections per Portico; the table gives the medians of requests/s and CPU µs
# per request (the whole process, the exporter's thread included), and each over tracing off.
#
# Usage: bash bench/tracing.sh   (RUNS=5 DURATION=6 CONNECTIONS=50 by default; PORTICO=path and
#        BENCH=path run those binaries instead of building the release ones)
# It starts and stops only its own processes, by PID, and sends traffic only to 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-5}
DURATION=${DURATION:-6}
CONNECTIONS=${CONNECTIONS:-50}
PROXY_CPU=${PROXY_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
BACKEND_PORT=19111
COLLECTOR_PORT=19112
VARIANTS=(off sampled-1pct sampled-all)
declare -A PORTS=([off]=19101 [sampled-1pct]=19102 [sampled-all]=19103)
declare -A ADMINS=([off]=19121 [sampled-1pct]=19122 [sampled-all]=19123)

source scripts/lib.sh
source bench/lib-one-route.sh
apt_install nginx wrk curl python3
release_binaries

start_work
chmod 755 "$work" # the nginx workers run as an unprivileged user

# The backend and the collector: one nginx worker on the load core, two servers.
start_backend "$BACKEND_PORT" "location / { return 200 \"ok\\n\"; } }
  server { listen 127.0.0.1:$COLLECTOR_PORT; client_max_body_size 16m;
    access_log $work/collector.log; location /v1/traces { return 200 \"\"; }"

mkdir -p "$work/portico"
service_manifest "$work/portico/all.yaml" app "$BACKEND_PORT"
ingress_manifest "$work/portico/all.yaml" app app.test / Prefix app ""
declare -A PIDS
for variant in "${VARIANTS[@]}"; do
  flags=()
  case $variant in
    sampled-1pct) flags=(--otlp-endpoint "http://127.0.0.1:$COLLECTOR_PORT/v1/traces" --trace-sample-ratio 0.01) ;;
    sampled-all) flags=(--otlp-endpoint "http://127.0.0.1:$COLLECTOR_PORT/v1/traces" --trace-sample-ratio 1.0) ;;
  esac
  start_portico_on "$work/portico" "${PORTS[$variant]}" 127.0.0.1:0 "${ADMINS[$variant]}" "${flags[@]}"
  PIDS[$variant]=$PORTICO_PID
done

# Sanity: each answers the route.
for variant in "${VARIANTS[@]}"; do
  code=$(curl -s -o /dev/null -w '%{http_code}' -H "Host: app.test" "http://127.0.0.1:${PORTS[$variant]}/")
  [ "$code" = 200 ] || { echo "$variant answered $code" >&2; exit 1; }
done

results=$work/results
: >"$results"
for run in $(seq "$RUNS"); do
  for variant in "${VARIANTS[@]}"; do
    PROXY_PIDS=${PIDS[$variant]}
    echo "$variant $(wrk_cpu -H "Host: app.test" "http://127.0.0.1:${PORTS[$variant]}/") $DURATION" >>"$results"
  done
  echo "run $run of $RUNS done" >&2
done
# The spans reached the collector: exports seen only from the tracing Porticos.
exports=$(grep -c 'POST /v1/traces' "$work/collector.log" || true)
[ "$exports" -gt 0 ] || { echo "the collector received no export" >&2; exit 1; }
echo "OTLP exports received by the collector: $exports"
echo

python3 - "$results" "$(getconf CLK_TCK)" "${VARIANTS[*]}" <<'EOF'
import statistics, sys
tck, variants = int(sys.argv[2]), sys.argv[3].split()
runs = {}
for line in open(sys.argv[1]):
    variant, requests, ticks, duration = line.split()
    n = max(int(requests), 1)
    runs.setdefault(variant, []).append((n / int(duration), int(ticks) * 1e6 / tck / n))
med = {k: (statistics.median(a for a, _ in v), statistics.median(b for _, b in v)) for k, v in runs.items()}
off = med["off"][1]
print("| Portico | req/s | CPU µs/req | CPU per request / tracing off |")
print("| --- | --- | --- | --- |")
for v in variants:
    rps, cpu = med[v]
    print(f"| {v} | {rps:.0f} | {cpu:.2f} | {cpu / off:.3f} |")
EOF
