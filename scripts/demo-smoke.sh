#!/usr/bin/env bash
# Runs the README's first command exactly as written and checks each routing decision it
# prints with curl. Stops only the process it started.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked -q
log=$(mktemp)
cargo run --release -q -- demo >"$log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -f "$log"' EXIT
ready=no
for _ in $(seq 300); do
  curl -sf http://127.0.0.1:9180/readyz >/dev/null 2>&1 && { ready=yes; break; }
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
if [ "$ready" != yes ]; then
  echo "demo: not ready on 127.0.0.1:9180; its output:"; cat "$log"; exit 1
fi
check() { # host path expected-service
  local got
  got=$(curl -s -H "Host: $1" "http://127.0.0.1:8080$2" | sed -n 's/.*"service":"\([^"]*\)".*/\1/p' || true)
  if [ "$got" != "$3" ]; then
    echo "demo: $1$2 answered by '$got', expected '$3'"; cat "$log"; exit 1
  fi
  echo "demo: $1$2 -> $got"
}
check demo.test / webservice-1
check demo.test /dev/build webservice-dev
check demo.test /qa webservice-qa
check maps.example.com / webservice-maps
check images.example.com / webservice-images
check other.example.com /x webservice-1
# Every curl command the demo printed, run as printed: each must answer, and those that name
# the service answering (`-> webservice-…`) must be answered by it.
ran=0
while IFS= read -r line; do
  command=${line%%#*}
  comment=${line#*#}
  out=$(bash -c "$command --max-time 5 --fail") || {
    echo "demo: printed command failed: $command"; cat "$log"; exit 1; }
  [ -n "$out" ] || { echo "demo: printed command answered nothing: $command"; exit 1; }
  expected=$(sed -n 's/.*-> \(webservice-[a-z0-9-]*\).*/\1/p' <<<"$comment")
  if [ -n "$expected" ]; then
    got=$(sed -n 's/.*"service":"\([^"]*\)".*/\1/p' <<<"$out")
    [ "$got" = "$expected" ] || {
      echo "demo: '$command' answered by '$got', expected '$expected'"; exit 1; }
  fi
  echo "demo: ran $command"
  ran=$((ran + 1))
done < <(grep -E '^ +curl ' "$log")
[ "$ran" -gt 0 ] || { echo "demo printed no curl commands"; cat "$log"; exit 1; }
echo "demo: ok"
