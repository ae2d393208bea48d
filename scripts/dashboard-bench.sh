#!/usr/bin/env bash
# The dashboard with 10,000 Ingresses in headless Chromium: first contentful paint, time until
# the first page of Ingresses is shown, bytes transferred, DOM size (docs/benchmarks.md).
# Usage: bash scripts/dashboard-bench.sh
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
apt_install chromium
cargo test -p portico --test e2e dashboard::dashboard_stays_small_with_10000_ingresses \
  -- --ignored --nocapture 2>&1 | grep -E "dashboard with|test result"
