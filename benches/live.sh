#!/usr/bin/env bash
# Live diagnosis of a backfilled synthetic job (default 100 vertices × 64 subtasks ×
# 60 samples): wall time of a whole diagnosis against its slowest single request, and the
# request count. Needs prometheus/promtool (Debian package `prometheus`).
# PROFILE=dev runs it on the test build (scripts/smoke.sh does, with a tiny job).
set -euo pipefail
cd "$(dirname "$0")/.."
V=${V:-100} S=${S:-64} N=${N:-60} RUNS=${RUNS:-10} PROFILE=${PROFILE:-release}
case "$PROFILE" in
  release) flags=(--release) dir=release ;;
  dev) flags=() dir=debug ;;
  *) echo "PROFILE is release or dev" >&2; exit 2 ;;
esac
bin="${CARGO_TARGET_DIR:-target}/$dir/examples"
tmp=$(mktemp -d); pid=""
trap 'if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; fi; rm -rf "$tmp"' EXIT
cargo build -q "${flags[@]}" --example synthetic --example live_bench
"$bin/synthetic" --vertices "$V" --subtasks "$S" --samples "$N" --out "$tmp/job.om" --plan-out "$tmp/plan.json"
promtool tsdb create-blocks-from openmetrics "$tmp/job.om" "$tmp/data" >/dev/null
printf 'global:\n  scrape_interval: 1h\n' > "$tmp/prometheus.yml"
# Port 0: Prometheus picks a free port and logs it.
prometheus --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$tmp/data" --storage.tsdb.retention.time=100y \
  --web.listen-address=127.0.0.1:0 >"$tmp/prometheus.log" 2>&1 & pid=$!
for _ in $(seq 300); do
  grep -q "Server is ready to receive web requests" "$tmp/prometheus.log" && break
  kill -0 "$pid" 2>/dev/null || { cat "$tmp/prometheus.log" >&2; exit 1; }
  sleep 0.1
done
port=$(sed -n 's/.*msg="Listening on" address=127.0.0.1:\([0-9]*\).*/\1/p' "$tmp/prometheus.log" | head -1)
[ -n "$port" ] || { echo "Prometheus did not start:" >&2; cat "$tmp/prometheus.log" >&2; exit 1; }
# The synthetic job's samples start at 1795000000000 ms, every 5 s.
at=$((1795000000000 + (N - 1) * 5000))
"$bin/live_bench" --prometheus "http://127.0.0.1:$port" --plan "$tmp/plan.json" \
  --job synthetic-job --at-ms "$at" --runs "$RUNS"
