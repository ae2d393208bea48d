#!/usr/bin/env bash
# Regenerates docs/dashboard-overview.png and docs/dashboard-loadbalancer.png: runs the
# dashboard's Chromium test against `portico demo`, which saves them when asked.
# Usage: bash scripts/dashboard-screenshots.sh
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
apt_install chromium
PORTICO_DASHBOARD_SCREENSHOTS="$PWD/docs" \
  cargo test -p portico --test e2e dashboard::dashboard_shows_the_demo -- --nocapture
ls -l docs/dashboard-overview.png docs/dashboard-loadbalancer.png
