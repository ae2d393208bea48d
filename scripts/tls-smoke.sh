#!/usr/bin/env bash
# TLS checks with Debian's own clients against a running Portico: openssl s_client (SNI,
# wildcard, default certificate, a PKCS#1 key, a mismatched key, rotation, ALPN, refused old
# protocols), curl (HTTPS over HTTP/2 and HTTP/1.1, the 308 redirect and its opt-out, HTTP/2
# prior knowledge in cleartext), sslscan and testssl.sh (no SSLv2/SSLv3/TLS 1.0/TLS 1.1, no weak
# cipher suites). Certificates are made here with openssl; the backend is python3's http.server.
# Everything listens on 127.0.0.1 (ports chosen by the kernel); only the processes started here
# are stopped, by PID. Needs: openssl curl sslscan testssl.sh python3 (scripts/test.sh installs
# them). Usage: bash scripts/tls-smoke.sh
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
for tool in openssl curl sslscan testssl python3; do
  command -v "$tool" >/dev/null || { echo "tls-smoke: $tool is missing" >&2; exit 1; }
done
cargo build --release --locked -q -p portico
PORTICO=$PWD/target/release/portico

start_work
fail() {
  echo "tls-smoke: FAIL: $*" >&2
  [ -f "$work/portico.log" ] && sed 's/^/  portico: /' "$work/portico.log" >&2
  exit 1
}
ok() { echo "tls-smoke: ok: $*"; }

# --- certificates: an authority, leaves for each case, a PKCS#1 RSA key ---
certs=$work/certs
mkdir -p "$certs"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
  -subj "/CN=Portico smoke CA" -keyout "$certs/ca.key" -out "$certs/ca.crt" 2>/dev/null
leaf() { # name key-file subject-alt-names
  openssl req -new -key "$certs/$2" -subj "/CN=$1" -out "$certs/$1.csr" 2>/dev/null
  printf 'subjectAltName=%s\n' "$3" >"$certs/$1.ext"
  openssl x509 -req -in "$certs/$1.csr" -CA "$certs/ca.crt" -CAkey "$certs/ca.key" \
    -CAcreateserial -days 2 -extfile "$certs/$1.ext" -out "$certs/$1.crt" 2>/dev/null
  cat "$certs/$1.crt" "$certs/ca.crt" >"$certs/$1.chain"
}
ec_key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$certs/$1" 2>/dev/null; }
ec_key a.key && leaf a.smoke.test a.key "DNS:a.smoke.test,DNS:plain.smoke.test"
ec_key a2.key && leaf a2.smoke.test a2.key "DNS:a.smoke.test"
ec_key wild.key && leaf wild.smoke.test wild.key "DNS:*.wild.smoke.test"
ec_key default.key && leaf default.smoke.test default.key "DNS:default.smoke.test"
ec_key other.key && leaf bad.smoke.test other.key "DNS:bad.smoke.test"
openssl genrsa -traditional -out "$certs/rsa.key" 2048 2>/dev/null
grep -q "BEGIN RSA PRIVATE KEY" "$certs/rsa.key" || fail "openssl did not write a PKCS#1 key"
leaf rsa.smoke.test rsa.key "DNS:rsa.smoke.test"
fingerprint() { openssl x509 -noout -fingerprint -sha256 -in "$1" | cut -d= -f2; }

# --- the backend and the manifests ---
mkdir -p "$work/www" "$work/manifests"
echo "hello from the smoke backend" >"$work/www/index.html"
backend_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
python3 -m http.server --bind 127.0.0.1 --directory "$work/www" "$backend_port" >/dev/null 2>&1 &
pids+=($!)
wait_port "$backend_port"

secret() { # name chain key
  cat >"$work/manifests/secret-$1.yaml.tmp" <<EOF
apiVersion: v1
kind: Secret
type: kubernetes.io/tls
metadata: {name: $1, namespace: smoke}
data:
  tls.crt: $(base64 -w0 "$2")
  tls.key: $(base64 -w0 "$3")
EOF
  mv "$work/manifests/secret-$1.yaml.tmp" "$work/manifests/secret-$1.yaml"
}
secret a-tls "$certs/a.smoke.test.chain" "$certs/a.key"
secret wild-tls "$certs/wild.smoke.test.chain" "$certs/wild.key"
secret rsa-tls "$certs/rsa.smoke.test.chain" "$certs/rsa.key"
secret default-tls "$certs/default.smoke.test.chain" "$certs/default.key"
secret bad-tls "$certs/bad.smoke.test.chain" "$certs/a.key" # a key of another certificate
route() { echo "  - host: \"$1\""; echo "    http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}]}"; }
cat >"$work/manifests/app.yaml" <<EOF
apiVersion: v1
kind: Service
metadata: {name: web, namespace: smoke}
spec: {ports: [{name: http, port: 80}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-1, namespace: smoke, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{name: http, port: $backend_port}]
endpoints: [{addresses: [127.0.0.1]}]
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: shop, namespace: smoke}
spec:
  ingressClassName: portico
  tls:
  - {hosts: [a.smoke.test], secretName: a-tls}
  - {hosts: ["*.wild.smoke.test"], secretName: wild-tls}
  - {hosts: [rsa.smoke.test], secretName: rsa-tls}
  - {hosts: [bad.smoke.test], secretName: bad-tls}
  rules:
$(route a.smoke.test; route "*.wild.smoke.test"; route rsa.smoke.test; route bad.smoke.test)
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: plain
  namespace: smoke
  annotations: {portico.dev/ssl-redirect: "false"}
spec:
  ingressClassName: portico
  tls:
  - {hosts: [plain.smoke.test], secretName: a-tls}
  rules:
$(route plain.smoke.test)
EOF

# --- Portico ---
"$PORTICO" run -f "$work/manifests" --default-certificate smoke/default-tls \
  --http-listen 127.0.0.1:0 --https-listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 \
  >"$work/banner" 2>"$work/portico.log" &
pids+=($!)
for _ in $(seq 200); do grep -q "admin API" "$work/banner" 2>/dev/null && break; sleep 0.05; done
# "portico: serving HTTP on A, HTTPS on B and the admin API on C"
read -r http https admin < <(sed -n 's/.*HTTP on \(.*\), HTTPS on \(.*\) and the admin API on \(.*\)/\1 \2 \3/p' "$work/banner")
[ -n "${admin:-}" ] || fail "no banner: $(cat "$work/banner")"
wait_http "http://$admin/readyz"
HTTPS_PORT=${https##*:} HTTP_PORT=${http##*:}
echo "tls-smoke: Portico on HTTP $http, HTTPS $https, admin $admin"

# s_client: the certificate presented for SNI NAME (none: no SNI), as a SHA-256 fingerprint.
presented() {
  local sni=(-noservername)
  [ -n "$1" ] && sni=(-servername "$1")
  openssl s_client -connect "$https" "${sni[@]}" </dev/null 2>/dev/null |
    openssl x509 -noout -fingerprint -sha256 | cut -d= -f2
}
expect_cert() { # sni cert-file what
  local got want
  got=$(presented "$1") want=$(fingerprint "$2")
  [ "$got" = "$want" ] || fail "$3: SNI '${1:-none}' got certificate $got, expected $want"
  ok "$3"
}

# --- openssl s_client ---
out=$(openssl s_client -connect "$https" -servername a.smoke.test -CAfile "$certs/ca.crt" \
  -verify_return_error -verify_hostname a.smoke.test </dev/null 2>&1) || fail "a.smoke.test does not verify: $out"
grep -q "Verify return code: 0 (ok)" <<<"$out" || fail "a.smoke.test: $out"
ok "SNI a.smoke.test: chain verifies against the CA for that hostname"
expect_cert a.smoke.test "$certs/a.smoke.test.crt" "SNI selects a.smoke.test's certificate"
expect_cert x.wild.smoke.test "$certs/wild.smoke.test.crt" "a wildcard certificate serves x.wild.smoke.test"
expect_cert rsa.smoke.test "$certs/rsa.smoke.test.crt" "a PKCS#1 (RSA PRIVATE KEY) key is served"
expect_cert unknown.smoke.test "$certs/default.smoke.test.crt" "unknown SNI gets --default-certificate"
expect_cert "" "$certs/default.smoke.test.crt" "no SNI gets --default-certificate"
expect_cert x.y.wild.smoke.test "$certs/default.smoke.test.crt" "a wildcard covers one label only"
expect_cert bad.smoke.test "$certs/default.smoke.test.crt" "a mismatched key falls back to the default certificate"
ingresses=$(curl -sf "http://$admin/api/v1/ingresses" | tr -d '\n')
grep -q 'spec.tls\[3\].secretName.*does not match the certificate' <<<"$ingresses" ||
  fail "no diagnostic for the mismatched key: $ingresses"
ok "the mismatched key is a diagnostic on spec.tls[3].secretName"
alpn=$(openssl s_client -connect "$https" -servername a.smoke.test -alpn h2,http/1.1 </dev/null 2>/dev/null | grep "^ALPN protocol")
[ "$alpn" = "ALPN protocol: h2" ] || fail "ALPN: '$alpn'"
ok "ALPN chooses h2"
for old in -tls1 -tls1_1; do
  if openssl s_client -connect "$https" -servername a.smoke.test "$old" -cipher 'DEFAULT:@SECLEVEL=0' </dev/null >/dev/null 2>&1; then
    fail "a $old handshake succeeded"
  fi
done
for new in -tls1_2 -tls1_3; do
  openssl s_client -connect "$https" -servername a.smoke.test "$new" </dev/null >/dev/null 2>&1 || fail "no $new handshake"
done
ok "TLS 1.0 and 1.1 refused, TLS 1.2 and 1.3 accepted"

# --- curl ---
resolve=(--resolve "a.smoke.test:$HTTPS_PORT:127.0.0.1" --resolve "a.smoke.test:$HTTP_PORT:127.0.0.1"
  --resolve "plain.smoke.test:$HTTP_PORT:127.0.0.1" --cacert "$certs/ca.crt")
got=$(curl -sS "${resolve[@]}" -o "$work/body" -w '%{http_code} %{http_version}' "https://a.smoke.test:$HTTPS_PORT/")
[ "$got" = "200 2" ] && grep -q "hello from the smoke backend" "$work/body" || fail "curl over HTTPS: $got"
ok "curl: HTTPS over HTTP/2 reaches the backend"
got=$(curl -sS --http1.1 "${resolve[@]}" -o /dev/null -w '%{http_code} %{http_version}' "https://a.smoke.test:$HTTPS_PORT/")
[ "$got" = "200 1.1" ] || fail "curl --http1.1: $got"
ok "curl: HTTPS over HTTP/1.1"
got=$(curl -sS "${resolve[@]}" -o /dev/null -w '%{http_code} %{redirect_url}' "http://a.smoke.test:$HTTP_PORT/p?q=1")
[ "$got" = "308 https://a.smoke.test:$HTTPS_PORT/p?q=1" ] || fail "redirect: $got"
got=$(curl -sS -L "${resolve[@]}" -o /dev/null -w '%{http_code} %{url_effective}' "http://a.smoke.test:$HTTP_PORT/")
[ "$got" = "200 https://a.smoke.test:$HTTPS_PORT/" ] || fail "following the redirect: $got"
ok "curl: HTTP redirects to HTTPS with 308, path and query kept"
got=$(curl -sS "${resolve[@]}" -o /dev/null -w '%{http_code}' "http://plain.smoke.test:$HTTP_PORT/")
[ "$got" = 200 ] || fail "opt-out: $got"
ok "curl: portico.dev/ssl-redirect: \"false\" keeps HTTP"
got=$(curl -sS --http2-prior-knowledge -H "Host: plain.smoke.test" -o /dev/null -w '%{http_code} %{http_version}' "http://$http/")
[ "$got" = "200 2" ] || fail "cleartext HTTP/2: $got"
ok "curl: HTTP/2 with prior knowledge in cleartext"

# --- rotation: a new certificate in the Secret reaches new handshakes without a restart ---
secret a-tls "$certs/a2.smoke.test.chain" "$certs/a2.key"
for _ in $(seq 100); do
  [ "$(presented a.smoke.test)" = "$(fingerprint "$certs/a2.smoke.test.crt")" ] && break
  sleep 0.05
done
expect_cert a.smoke.test "$certs/a2.smoke.test.crt" "a rotated Secret is served on new handshakes"

# --- sslscan: protocols and cipher suites ---
scan=$(sslscan --no-colour --sni-name=a.smoke.test "$https" 2>&1)
for line in "SSLv2     disabled" "SSLv3     disabled" "TLSv1.0   disabled" "TLSv1.1   disabled" \
  "TLSv1.2   enabled" "TLSv1.3   enabled"; do
  grep -q "^$line" <<<"$scan" || fail "sslscan: no '$line' in:"$'\n'"$scan"
done
ciphers=$(grep -E "^(Preferred|Accepted) " <<<"$scan")
[ -n "$ciphers" ] || fail "sslscan listed no cipher suite"
weak=$(grep -Ev "(GCM|CHACHA20-POLY1305|CHACHA20_POLY1305)" <<<"$ciphers" || true)
weak+=$(grep -E "RC4|DES|NULL|EXP|anon|MD5|CBC|( (40|56|64) bits)" <<<"$ciphers" || true)
[ -z "$weak" ] || fail "sslscan: weak cipher suites accepted:"$'\n'"$weak"
ok "sslscan: only TLS 1.2 and 1.3, $(wc -l <<<"$ciphers") AEAD cipher suites"

# --- testssl.sh: protocols by raw sockets (SSLv2/SSLv3 too), cipher categories ---
report=$(testssl --quiet --color 0 --warnings off --protocols --std --sneaky "$https" 2>&1)
for pattern in "SSLv2 +not offered" "SSLv3 +not offered" "TLS 1 +not offered" "TLS 1.1 +not offered" \
  "TLS 1.2 +offered" "TLS 1.3 +offered" "NULL ciphers.*not offered" "Anonymous NULL.*not offered" \
  "Export ciphers.*not offered" "LOW: 64 Bit.*not offered" "Triple DES.*not offered" \
  "Obsolete CBC ciphers.*not offered" "Strong encryption \(AEAD ciphers\) +offered"; do
  grep -Eq "$pattern" <<<"$report" || fail "testssl.sh: no '$pattern' in:"$'\n'"$report"
done
ok "testssl.sh: no SSLv2, SSLv3, TLS 1.0, TLS 1.1; no NULL, export, LOW, 3DES or CBC suites"

# --- no key material in the admin API or the log ---
for f in "$certs"/*.key; do
  body=$(grep -v -- "-----" "$f" | head -1)
  for path in /api/v1/loadbalancers /api/v1/ingresses /api/v1/diagnostics /metrics; do
    curl -sf "http://$admin$path" | grep -qF "$body" && fail "key material of $f in $path"
  done
  grep -qF "$body" "$work/portico.log" && fail "key material of $f in the log"
done
ok "no key material in the admin API or the log"
echo "tls-smoke: all checks passed"
