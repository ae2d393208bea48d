# The setup shared by bench/proxy.sh and bench/instructions.sh: the backends, and the same nine
# routes as Portico manifests, an nginx.conf and a haproxy.cfg, and the wrk scripts. Source it
# after setting work, pids, HOSTS, PREFIXES, BACKEND_PORTS, LOAD_CPU and the proxies' ports
# (NGINX_PORT, HAPROXY_PORT; with NGINX_TLS_PORT and HAPROXY_TLS_PORT, and a certificate from
# make_certificate, the TLS listeners too; NGINX_MASTER=off runs nginx as one process). It
# defines functions only.

# One certificate for the three hosts, served by every proxy (haproxy reads chain + key in one file).
make_certificate() {
  mkdir -p "$work/tls"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj "/CN=bench" \
    -addext "subjectAltName=DNS:${HOSTS[0]},DNS:${HOSTS[1]},DNS:${HOSTS[2]}" \
    -keyout "$work/tls/key.pem" -out "$work/tls/cert.pem" 2>/dev/null
  cat "$work/tls/cert.pem" "$work/tls/key.pem" >"$work/tls/haproxy.pem"
  chmod 755 "$work/tls" && chmod 644 "$work/tls/"*.pem # nginx workers run unprivileged
}

# Pool p (0..2) has backends 2p and 2p+1; host i, prefix j goes to pool (i + j) % 3.
pool_of() { echo $(( ($1 + $2) % 3 )); }

start_backends() {
  mkdir -p "$work/www" "$work/backend"
  for p in "${PREFIXES[@]}"; do
    mkdir -p "$work/www/$p"
    head -c 100 /dev/zero | tr '\0' 'x' >"$work/www/$p/small"
    head -c 16384 /dev/zero | tr '\0' 'y' >"$work/www/$p/large"
  done
  {
    echo "worker_processes 1; daemon off; pid $work/backend/nginx.pid; error_log $work/backend/error.log warn;"
    echo "events { worker_connections 4096; }"
    echo "http { access_log off; sendfile on; tcp_nopush on; keepalive_requests 1000000;"
    echo "  client_body_temp_path $work/backend; proxy_temp_path $work/backend; fastcgi_temp_path $work/backend; uwsgi_temp_path $work/backend; scgi_temp_path $work/backend;"
    echo "  server { root $work/www; default_type text/plain;"
    for port in "${BACKEND_PORTS[@]}"; do echo "    listen 127.0.0.1:$port;"; done
    echo "  } }"
  } >"$work/backend/nginx.conf"
  taskset -c "$LOAD_CPU" nginx -c "$work/backend/nginx.conf" -e "$work/backend/error.log" &
  pids+=($!)
  wait_port "${BACKEND_PORTS[0]}"
}

portico_manifests() {
  local dir=$work/portico
  mkdir -p "$dir"
  for p in 0 1 2; do
    cat >>"$dir/backends.yaml" <<EOF
---
apiVersion: v1
kind: Service
metadata: {name: pool$p, namespace: bench}
spec:
  ports: [{name: http, port: 80}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: pool$p, namespace: bench, labels: {kubernetes.io/service-name: pool$p}}
addressType: IPv4
ports: [{name: http, port: ${BACKEND_PORTS[$((2 * p))]}}]
endpoints: [{addresses: [127.0.0.1], conditions: {ready: true}}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: pool$p-b, namespace: bench, labels: {kubernetes.io/service-name: pool$p}}
addressType: IPv4
ports: [{name: http, port: ${BACKEND_PORTS[$((2 * p + 1))]}}]
endpoints: [{addresses: [127.0.0.1], conditions: {ready: true}}]
EOF
  done
  # TLS only when make_certificate made one (bench/instructions.sh does not).
  local tls=
  [ -f "$work/tls/cert.pem" ] && tls=1
  [ -n "$tls" ] && cat >"$dir/secret.yaml" <<EOF
apiVersion: v1
kind: Secret
type: kubernetes.io/tls
metadata: {name: bench-tls, namespace: bench}
data:
  tls.crt: $(base64 -w0 "$work/tls/cert.pem")
  tls.key: $(base64 -w0 "$work/tls/key.pem")
EOF
  {
    echo "apiVersion: networking.k8s.io/v1"
    echo "kind: Ingress"
    # The HTTP cases stay on HTTP, as for nginx and haproxy (no redirect to HTTPS).
    echo "metadata: {name: bench, namespace: bench, annotations: {portico.dev/ssl-redirect: \"false\"}}"
    echo "spec:"
    echo "  ingressClassName: portico"
    [ -n "$tls" ] && echo "  tls: [{hosts: [${HOSTS[0]}, ${HOSTS[1]}, ${HOSTS[2]}], secretName: bench-tls}]"
    echo "  rules:"
    for i in 0 1 2; do
      echo "  - host: ${HOSTS[$i]}"
      echo "    http:"
      echo "      paths:"
      for j in 0 1 2; do
        echo "      - {path: /${PREFIXES[$j]}, pathType: Prefix, backend: {service: {name: pool$(pool_of $i $j), port: {number: 80}}}}"
      done
    done
  } >"$dir/ingress.yaml"
}

haproxy_config() {
  {
    echo "global"
    echo "  nbthread 1"
    echo "  maxconn 8000"
    echo "defaults"
    echo "  mode http"
    echo "  timeout connect 5s"
    echo "  timeout client 60s"
    echo "  timeout server 60s"
    echo "  option forwardfor"
    echo "  http-reuse always"
    echo "frontend bench"
    echo "  bind 127.0.0.1:$HAPROXY_PORT"
    if [ -n "${HAPROXY_TLS_PORT:-}" ]; then
      echo "  bind 127.0.0.1:$HAPROXY_TLS_PORT ssl crt $work/tls/haproxy.pem alpn h2,http/1.1 ssl-min-ver TLSv1.2"
    fi
    echo "  http-request set-var(txn.host) req.hdr(host),field(1,:),lower"
    for i in 0 1 2; do
      echo "  acl host_$i var(txn.host) -m str ${HOSTS[$i]}"
    done
    for j in 0 1 2; do
      echo "  acl path_$j path -m str /${PREFIXES[$j]}"
      echo "  acl path_$j path -m beg /${PREFIXES[$j]}/"
    done
    for i in 0 1 2; do
      for j in 0 1 2; do
        echo "  use_backend pool$(pool_of $i $j) if host_$i path_$j"
      done
    done
    for p in 0 1 2; do
      echo "backend pool$p"
      echo "  balance roundrobin"
      echo "  server s0 127.0.0.1:${BACKEND_PORTS[$((2 * p))]}"
      echo "  server s1 127.0.0.1:${BACKEND_PORTS[$((2 * p + 1))]}"
    done
  } >"$work/haproxy.cfg"
}

# nginx's configuration in DIR (default $work/nginx) on $NGINX_PORT (and $NGINX_TLS_PORT when
# set); NGINX_ACCESS_LOG=FILE logs each request there as users run it (`combined`, buffered
# 64k, flushed every second) instead of `access_log off`.
nginx_config() { # [dir]
  local dir=${1:-$work/nginx}
  local log="access_log off;"
  [ -n "${NGINX_ACCESS_LOG:-}" ] && log="access_log $NGINX_ACCESS_LOG combined buffer=64k flush=1s;"
  mkdir -p "$dir"
  {
    echo "worker_processes 1; daemon off; master_process ${NGINX_MASTER:-on}; pid $dir/nginx.pid; error_log $dir/error.log warn;"
    echo "events { worker_connections 8000; }"
    echo "http { $log keepalive_requests 1000000;"
    echo "  client_body_temp_path $dir; proxy_temp_path $dir; fastcgi_temp_path $dir; uwsgi_temp_path $dir; scgi_temp_path $dir;"
    for p in 0 1 2; do
      echo "  upstream pool$p { server 127.0.0.1:${BACKEND_PORTS[$((2 * p))]}; server 127.0.0.1:${BACKEND_PORTS[$((2 * p + 1))]}; keepalive 64; }"
    done
    for i in 0 1 2; do
      if [ -n "${NGINX_TLS_PORT:-}" ]; then
        echo "  server { listen 127.0.0.1:$NGINX_PORT; listen 127.0.0.1:$NGINX_TLS_PORT ssl; server_name ${HOSTS[$i]};"
        echo "    ssl_certificate $work/tls/cert.pem; ssl_certificate_key $work/tls/key.pem; ssl_protocols TLSv1.2 TLSv1.3;"
      else
        echo "  server { listen 127.0.0.1:$NGINX_PORT; server_name ${HOSTS[$i]};"
      fi
      for j in 0 1 2; do
        echo "    location /${PREFIXES[$j]} { proxy_pass http://pool$(pool_of $i $j); proxy_http_version 1.1; proxy_set_header Connection \"\"; proxy_set_header Host \$http_host; proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for; }"
      done
      echo "  }"
    done
    echo "}"
  } >"$dir/nginx.conf"
}

# The wrk script: cycles through the 9 host/prefix routes; reports exact counts and percentiles.
wrk_script() { # size close
  {
    echo "local reqs = {} local n = 0"
    echo "init = function(args)"
    for i in 0 1 2; do
      for j in 0 1 2; do
        local hdrs="{[\"Host\"] = \"${HOSTS[$i]}\"}"
        [ "$2" = close ] && hdrs="{[\"Host\"] = \"${HOSTS[$i]}\", [\"Connection\"] = \"close\"}"
        echo "  table.insert(reqs, wrk.format(\"GET\", \"/${PREFIXES[$j]}/$1\", $hdrs))"
      done
    done
    echo "end"
    echo "request = function() n = n % #reqs + 1 return reqs[n] end"
    echo "done = function(s, lat, r)"
    echo "  local e = s.errors"
    echo "  io.write(string.format('RESULT requests=%d duration_us=%d p50_us=%d p99_us=%d errors=%d\\n', s.requests, s.duration, lat:percentile(50), lat:percentile(99), e.connect + e.read + e.write + e.status + e.timeout))"
    echo "end"
  } >"$work/wrk-$1-$2.lua"
}
