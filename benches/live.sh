#!/usr/bin/env bash
# Live diagnosis of a backfilled synthetic job (default 100 vertices × 64 subtasks ×
# 60 samples): wall time of a whole diagnosis against its slowest single request, and the
# request count. Needs prometheus/promtool (Debian package `prometheus`).
set -euo pipefail
cd "$(dirname "$0")/.."
V=${V:-100} S=${S:-64} N=${N:-60} RUNS=${RUNS:-10}
tmp=$(mktemp -d); trap 'kill $pid 2>/dev/null || true; rm -rf "$tmp"' EXIT
cargo build -q --release --example synthetic --example live_bench
target/release/examples/synthetic --vertices "$V" --subtasks "$S" --samples "$N" --out "$tmp/job.om" --plan-out "$tmp/plan.json"
promtool tsdb create-blocks-from openmetrics "$tmp/job.om" "$tmp/data" >/dev/null
printf 'global:\n  scrape_interval: 1h\n' > "$tmp/prometheus.yml"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
prometheus --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$tmp/data" --storage.tsdb.retention.time=100y \
  --web.listen-address=127.0.0.1:$port >"$tmp/prometheus.log" 2>&1 & pid=$!
until curl -sf "http://127.0.0.1:$port/-/ready" >/dev/null; do sleep 0.2; done
# The synthetic job's samples start at 1795000000000 ms, every 5 s.
at=$((1795000000000 + (N - 1) * 5000))
target/release/examples/live_bench --prometheus "http://127.0.0.1:$port" --plan "$tmp/plan.json" \
  --job synthetic-job --at-ms "$at" --runs "$RUNS"
