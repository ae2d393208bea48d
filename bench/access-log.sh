#!/usr/bin/env bash
# The access log's CPU cost per request in the built-in proxy: two Portico processes on the
# same routes, one with `--access-log off`, one writing every request's JSON line to a file;
# the same pinned load (bench/proxy.sh) alternates between them, RUNS times per case. The
# report's last table gives CPU per request with the log on over off.
#
# Usage: bash bench/access-log.sh     (RUNS=5 DURATION=8 CONNECTIONS=50 by default;
#        CASES="small-keepalive small-close" by default, any bench/proxy.sh case works)
set -euo pipefail
cd "$(dirname "$0")/.."
PROXIES="portico portico-log" CASES=${CASES:-small-keepalive small-close} exec bash bench/proxy.sh
