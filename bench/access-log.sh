#!/usr/bin/env bash
# The access log's CPU cost per request in the built-in proxy: two Portico processes on the
# same routes, one with `--access-log off`, one writing every request's JSON line to a file,
# beside two nginx, one with `access_log off`, one logging each request as users run it
# (`combined`, `buffer=64k flush=1s`); the same pinned load (bench/proxy.sh) alternates between
# them, RUNS times per case. The report's last tables give CPU per request with the log on over
# off for each, and Portico's CPU and latency against nginx's, both logging.
#
# Usage: bash bench/access-log.sh     (RUNS=5 DURATION=8 CONNECTIONS=50 by default;
#        CASES="small-keepalive small-close" by default, any bench/proxy.sh case works)
set -euo pipefail
cd "$(dirname "$0")/.."
PROXIES="portico portico-log nginx nginx-log" CASES=${CASES:-small-keepalive small-close} exec bash bench/proxy.sh
