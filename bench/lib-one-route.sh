# The setup shared by the one-route benchmarks (bench/annotations.sh, compression.sh, post.sh,
# http3.sh): a backend nginx, Portico's manifests for a Service on it and Ingresses to it, a
# Portico and an nginx each pinned to one core, and a wrk run measured in the proxy's CPU time.
# Source it after scripts/lib.sh and `start_work`, with PROXY_CPU and LOAD_CPU set. It defines
# functions only.

# The temporary paths nginx wants under DIR (it writes nothing there in these benchmarks).
nginx_paths() { # dir
  echo "client_body_temp_path $1; proxy_temp_path $1; fastcgi_temp_path $1; uwsgi_temp_path $1; scgi_temp_path $1;"
}

# Writes DIR/nginx.conf: one worker, no access log, keep-alive without a request limit, the
# `http` block holding BODY; checks it.
nginx_conf() { # dir body
  mkdir -p "$1"
  {
    echo "worker_processes 1; daemon off; pid $1/nginx.pid; error_log $1/error.log warn;"
    echo "events { worker_connections 8000; }"
    echo "http { access_log off; keepalive_requests 1000000; $(nginx_paths "$1")"
    echo "$2"
    echo "}"
  } >"$1/nginx.conf"
  nginx -t -q -c "$1/nginx.conf" -e "$1/error.log"
}

# The backend: an nginx worker on core LOAD_CPU listening on 127.0.0.1:PORT, its `server`
# block holding SERVER.
start_backend() { # port server
  nginx_conf "$work/backend" "  server { listen 127.0.0.1:$1; $2 }"
  taskset -c "$LOAD_CPU" nginx -c "$work/backend/nginx.conf" -e "$work/backend/error.log" &
  pids+=($!)
  wait_port "$1"
}

# The proxy nginx on core PROXY_CPU, its `http` block holding BODY; sets NGINX_PID.
start_nginx_proxy() { # port body
  nginx_conf "$work/nginx" "$2"
  taskset -c "$PROXY_CPU" nginx -c "$work/nginx/nginx.conf" -e "$work/nginx/error.log" &
  pids+=($!)
  NGINX_PID=$!
  wait_port "$1"
}

# The proxy nginx's processes: master and worker.
nginx_pids() { echo "$NGINX_PID" $(pgrep -P "$NGINX_PID"); }

# The lines that make nginx's `location` proxy to upstream NAME as Portico does (HTTP/1.1
# keep-alive upstream, Host kept, X-Forwarded-For added).
nginx_proxy_to() { # name
  echo "proxy_pass http://$1; proxy_http_version 1.1; proxy_set_header Connection \"\"; proxy_set_header Host \$http_host; proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;"
}

# Appends to FILE a Service NAME of namespace bench (port 80) whose endpoint is 127.0.0.1:PORT.
service_manifest() { # file name port
  cat >>"$1" <<EOF
---
apiVersion: v1
kind: Service
metadata: {name: $2, namespace: bench}
spec:
  ports: [{name: http, port: 80}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: $2-$3, namespace: bench, labels: {kubernetes.io/service-name: $2}}
addressType: IPv4
ports: [{name: http, port: $3}]
endpoints: [{addresses: [127.0.0.1], conditions: {ready: true}}]
EOF
}

# Appends to FILE an Ingress NAME of class portico: HOST's PATH (of TYPE) to Service SERVICE,
# with ANNOTATIONS (the inside of a YAML flow mapping) and, when TLS names a Secret, TLS.
ingress_manifest() { # file name host path type service annotations [tls-secret]
  local tls=
  [ -n "${8:-}" ] && tls="  tls: [{hosts: [$3], secretName: $8}]"
  cat >>"$1" <<EOF
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: $2
  namespace: bench
  annotations: {$7}
spec:
  ingressClassName: portico
$tls
  rules:
  - host: $3
    http:
      paths:
      - {path: '$4', pathType: $5, backend: {service: {name: $6, port: {number: 80}}}}
EOF
}

# Portico on the manifests in DIR, one worker thread pinned to core PROXY_CPU, access log off,
# a state directory of its own (in the work directory), with FLAGS; sets PORTICO_PID.
start_portico_on() { # dir http-port https-listen admin-port [flags...]
  local dir=$1 http=$2 https=$3 admin=$4
  shift 4
  taskset -c "$PROXY_CPU" "$PORTICO" run -f "$dir" --workers 1 --log warn \
    --http-listen "127.0.0.1:$http" --https-listen "$https" --access-log off \
    --admin-listen "127.0.0.1:$admin" --state-dir "$work/state-$http" "$@" >/dev/null &
  pids+=($!)
  PORTICO_PID=$!
  wait_http "http://127.0.0.1:$admin/readyz"
}

# One wrk run from core LOAD_CPU (keep-alive, CONNECTIONS connections, DURATION s) with the
# ARGS (headers, a script, the URL), measuring the CPU of the processes in $PROXY_PIDS; prints
# "requests cpu_ticks"; stops the benchmark on an answer that is not 2xx or a socket error.
wrk_cpu() { # args...
  local before after out
  before=$(cpu_ticks $PROXY_PIDS)
  out=$(taskset -c "$LOAD_CPU" wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" "$@")
  after=$(cpu_ticks $PROXY_PIDS)
  if grep -q 'Non-2xx\|Socket errors' <<<"$out"; then
    echo "wrk $*: errors: $out" >&2
    exit 1
  fi
  echo "$(awk '/requests in/ {print $1}' <<<"$out") $((${after%% *} - ${before%% *}))"
}

# PORTICO and BENCH: the binaries given, else the release ones, built now.
release_binaries() {
  if [ -z "${PORTICO:-}" ] || [ -z "${BENCH:-}" ]; then
    cargo build --release --locked -q -p portico -p portico-bench
    local dir=${CARGO_TARGET_DIR:-$PWD/target}/release
    PORTICO=${PORTICO:-$dir/portico}
    BENCH=${BENCH:-$dir/portico-bench}
  fi
}

# RUNS times, for each case of CASES and each proxy (portico, then nginx): sets PROXY_PIDS and
# port (PORTICO_PORT or NGINX_PORT) and appends "proxy case OUTPUT" to $results, OUTPUT being
# what FUNCTION prints for the case.
run_cases() { # function
  results=$work/results
  : >"$results"
  local run case proxy
  for run in $(seq "$RUNS"); do
    for case in "${CASES[@]}"; do
      for proxy in portico nginx; do
        case $proxy in
          portico) PROXY_PIDS=$PORTICO_PID port=$PORTICO_PORT ;;
          nginx) PROXY_PIDS=$(nginx_pids) port=$NGINX_PORT ;;
        esac
        echo "$proxy $case $("$1" "$case")" >>"$results"
      done
    done
    echo "run $run of $RUNS done" >&2
  done
}
