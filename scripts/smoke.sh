#!/usr/bin/env bash
# Runs every example and bench once, briefly, on a tiny input, on the test build (no
# release build): they rot unseen otherwise. A few seconds; needs prometheus/promtool
# (scripts/test.sh installs them), and about a minute for benches/storm.sh --quick.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

echo "smoke: benches/diagnose (criterion test mode: each benchmark once, 6 vertices × 2 subtasks × 12 samples)"
CULPRIT_BENCH_SIZES=6x2x12 cargo test -q --bench diagnose
echo "smoke: benches/page (criterion test mode, 6 vertices × 2 subtasks × 12 samples)"
CULPRIT_BENCH_SIZES=6x2x12 cargo test -q --bench page

echo "smoke: benches/picture (criterion test mode: a capture's picture and a 6 vertices × 2 subtasks × 12 samples job's, once)"
CULPRIT_BENCH_SIZES=6x2x12 cargo test -q --bench picture
echo "smoke: benches/intake (criterion test mode: parsing and planning the slow-sink webhook once)"
cargo test -q --bench intake

echo "smoke: benches/recording (criterion test mode, 6 vertices × 2 subtasks × 12 samples)"
CULPRIT_BENCH_SIZES=6x2x12 cargo test -q --bench recording
echo "smoke: benches/recording.sh (streamed, capture and promtool runs on the test build)"
PROFILE=dev BIG=6x2x12 SMALL=6x2x12 benches/recording.sh

echo "smoke: examples/synthetic, then culprit diagnose on what it wrote"
cargo run -q --example synthetic -- --vertices 6 --subtasks 2 --samples 12 --out "$tmp/job.om" --plan-out "$tmp/plan.json"
cargo run -q -- diagnose --recording "$tmp/job.om" --plan "$tmp/plan.json" --format text >/dev/null

echo "smoke: examples/webhook_bench (1 s per target)"
cargo run -q --example webhook_bench -- --seconds 1 --connections 4
cargo run -q --example webhook_bench -- --seconds 1 --connections 4 --no-postgres --changing

echo "smoke: examples/flood_bench (50 unknown jobs, then a real alert)"
cargo run -q --example flood_bench -- --unknown 50 --connections 8

echo "smoke: examples/prom_answer_bench (a 1 MB answer, one run)"
cargo run -q --example prom_answer_bench -- --mb 1 --runs 1

echo "smoke: examples/conn_bench (20 idle and 20 trickling connections for 2 s)"
cargo build -q --bin culprit
cargo run -q --example conn_bench -- --culprit target/debug/culprit --idle 20 --trickling 20 --seconds 2 --every 500

echo "smoke: benches/live.sh with examples/live_bench (a real Prometheus, one run)"
PROFILE=dev V=6 S=2 N=12 RUNS=1 benches/live.sh

echo "smoke: benches/storm.sh --quick (30 jobs at once against a real Prometheus, SQLite, on the test build)"
PROFILE=dev benches/storm.sh --quick --out "$tmp/storm.json"

echo "smoke: every example and bench ran"
