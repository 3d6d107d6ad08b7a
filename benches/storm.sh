#!/usr/bin/env bash
# A cluster-wide incident (issue 25): N Flink jobs backpressured at once, most of them by
# their sinks writing to one Elasticsearch index pattern, and a webhook for each within 5 s.
#
# A real Prometheus, backfilled with promtool from `examples/synthetic --storm N`, `culprit
# serve` reading it (every job's plan in [flink.plans]), and stand-ins for Slack (web_api)
# and PagerDuty Events v2 that enforce their documented rate limits and record every
# request (benches/storm/standins.py). Reports (benches/storm/storm.py): the time from the
# first webhook to the incident summary in Slack, to the last verdict stored and to the
# last Slack post; queries in flight at Prometheus (culprit's peak and Prometheus' own
# prometheus_engine_queries); Slack and PagerDuty 429s; verdicts lost, doubled or wrong;
# culprit's CPU time and peak RSS. On SQLite (one culprit) and on PostgreSQL (three
# culprits on one database, the webhooks round-robin).
#
#   benches/storm.sh            300 jobs, SQLite then PostgreSQL (~30 min)
#   benches/storm.sh --quick    30 jobs, SQLite only (~1 min; scripts/smoke.sh runs it)
#   options: --jobs N, --store sqlite|postgres|both, --out FILE.json (default
#   target/storm/storm-<time>.json), --timeout S (per store, from the first webhook)
#   env: PROFILE=release|dev (default release), KEEP=1 keeps the scratch directory,
#        SLACK_BURST (posts a channel takes at once; default 3).
# Needs prometheus/promtool (Debian package `prometheus`), python3, and for PostgreSQL the
# Debian package `postgresql` (initdb, pg_ctl).
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0 jobs="" store="" out="" timeout=""
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1 ;;
    --jobs) jobs=$2; shift ;;
    --store) store=$2; shift ;;
    --out) out=$2; shift ;;
    --timeout) timeout=$2; shift ;;
    *) echo "storm.sh: unknown argument $1 (see the head of benches/storm.sh)" >&2; exit 2 ;;
  esac
  shift
done
if [ "$quick" = 1 ]; then
  jobs=${jobs:-30} store=${store:-sqlite} timeout=${timeout:-240} ahead_s=300
else
  jobs=${jobs:-300} store=${store:-both} timeout=${timeout:-1500} ahead_s=600
fi
case "$store" in
  sqlite) stores=(sqlite) ;;
  postgres) stores=(postgres) ;;
  both) stores=(sqlite postgres) ;;
  *) echo "storm.sh: --store is sqlite, postgres or both" >&2; exit 2 ;;
esac
PROFILE=${PROFILE:-release}
case "$PROFILE" in
  release) flags=(--release) dir=release ;;
  dev) flags=() dir=debug ;;
  *) echo "PROFILE is release or dev" >&2; exit 2 ;;
esac
for tool in prometheus promtool python3; do
  command -v "$tool" >/dev/null || { echo "storm.sh: $tool is missing (apt-get install prometheus python3)" >&2; exit 1; }
done

target="${CARGO_TARGET_DIR:-target}"
culprit="$target/$dir/culprit" synthetic="$target/$dir/examples/synthetic"
mkdir -p "$target/storm"
out=${out:-$target/storm/storm-$(date -u +%Y%m%dT%H%M%SZ).json}
here=benches/storm

tmp=$(mktemp -d /tmp/culprit-storm.XXXXXX)
pids=() pgdir="" pgbin=""
as_postgres() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
stop_pids() {
  local p
  for p in "$@"; do kill "$p" 2>/dev/null || true; done
  for p in "$@"; do
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
}
# Forgets stopped processes, so that cleanup never signals a process id reused since.
forget() {
  local keep=() p q gone
  for p in "${pids[@]}"; do
    gone=0
    for q in "$@"; do [ "$p" = "$q" ] && gone=1; done
    [ "$gone" = 1 ] || keep+=("$p")
  done
  pids=("${keep[@]}")
}
cleanup() {
  stop_pids "${pids[@]}"
  if [ -n "$pgdir" ]; then
    as_postgres "$pgbin/pg_ctl" -D "$pgdir/data" -m immediate stop >/dev/null 2>&1 || true
    rm -rf "$pgdir"
  fi
  if [ "${KEEP:-0}" = 1 ]; then echo "storm: scratch kept in $tmp" >&2; else rm -rf "$tmp"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# wait_for SECONDS WHAT COMMAND...: polls COMMAND every 0.1 s.
wait_for() {
  local limit=$1 what=$2; shift 2
  for _ in $(seq $((limit * 10))); do "$@" && return 0; sleep 0.1; done
  echo "storm: $what did not happen within $limit s" >&2
  return 1
}

echo "storm: building culprit and examples/synthetic ($PROFILE)"
cargo build -q "${flags[@]}" --bin culprit --example synthetic

# A Prometheus of its own for each store's run, holding jobs whose samples run from 6
# minutes before its start to ahead_s after it: every diagnosis of the run is of the
# present, as against a live Prometheus (a query does not see samples after its time).
# Sets prometheus_url, prom_pid and jobs_dir.
start_prometheus() {
  local d=$1 interval_ms=15000 now_ms start_ms samples t
  now_ms=$(( $(date +%s) * 1000 ))
  start_ms=$(( now_ms - 360000 ))
  samples=$(( (360000 + ahead_s * 1000) / interval_ms + 1 ))
  jobs_dir="$d/jobs"
  echo "storm: $jobs jobs, $samples samples each, every $((interval_ms / 1000)) s"
  "$synthetic" --storm "$jobs" --storm-dir "$jobs_dir" --samples "$samples" --start-ms "$start_ms" \
    --interval-ms "$interval_ms"
  t=$(date +%s)
  promtool tsdb create-blocks-from openmetrics "$jobs_dir/storm.om" "$d/prometheus" >"$d/promtool.log" 2>&1 \
    || { cat "$d/promtool.log" >&2; exit 1; }
  echo "storm: promtool backfilled $(du -sh "$jobs_dir/storm.om" | cut -f1) of OpenMetrics in $(( $(date +%s) - t )) s"
  rm -f "$jobs_dir/storm.om"
  printf 'global:\n  scrape_interval: 1h\n' > "$d/prometheus.yml"
  prometheus --config.file="$d/prometheus.yml" --storage.tsdb.path="$d/prometheus" \
    --storage.tsdb.retention.time=100y --web.listen-address=127.0.0.1:0 >"$d/prometheus.log" 2>&1 &
  prom_pid=$!; pids+=("$prom_pid")
  wait_for 60 "Prometheus ready" grep -q "Server is ready to receive web requests" "$d/prometheus.log" \
    || { cat "$d/prometheus.log" >&2; exit 1; }
  local port
  port=$(sed -n 's/.*msg="Listening on" address=127.0.0.1:\([0-9]*\).*/\1/p' "$d/prometheus.log" | head -1)
  [ -n "$port" ] || { cat "$d/prometheus.log" >&2; exit 1; }
  prometheus_url="http://127.0.0.1:$port"
  # [flink.plans]: every job's plan, as if Flink REST were out of reach (its load is not
  # what this bench measures).
  python3 - "$jobs_dir/jobs.json" >"$d/plans.toml" <<'EOF'
import json, sys
print("[flink.plans]")
for j in json.load(open(sys.argv[1])):
    print("%s = %s" % (json.dumps(j["job_name"]), json.dumps(j["plan"])))
EOF
}

printf 'xoxb-storm-bench-token' > "$tmp/slack-token"
printf 'R0UTINGKEY0STORM0000000000000000' > "$tmp/routing-key"

start_postgres() {
  pgbin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
  [ -x "$pgbin/initdb" ] || { echo "storm: PostgreSQL is not installed (apt-get install postgresql)" >&2; exit 1; }
  pgdir=$(mktemp -d /tmp/culprit-storm-pg.XXXXXX)
  pg_port=$(free_port)
  printf 'storm-bench-only' > "$pgdir/pw"
  if [ "$(id -u)" = 0 ]; then chown -R postgres: "$pgdir"; fi
  as_postgres "$pgbin/initdb" -D "$pgdir/data" -U culprit --auth-local=trust --auth-host=scram-sha-256 \
    --pwfile="$pgdir/pw" -E UTF8 >"$tmp/initdb.log" 2>&1 || { cat "$tmp/initdb.log" >&2; exit 1; }
  printf "listen_addresses = '127.0.0.1'\nport = %s\nunix_socket_directories = '%s'\nmax_connections = 300\n" \
    "$pg_port" "$pgdir" | as_postgres tee -a "$pgdir/data/postgresql.auto.conf" >/dev/null
  as_postgres "$pgbin/pg_ctl" -D "$pgdir/data" -l "$pgdir/log" -w -t 60 start >/dev/null
  as_postgres "$pgbin/psql" -h "$pgdir" -p "$pg_port" -U culprit -d postgres -q -c 'CREATE DATABASE storm'
  cp "$pgdir/pw" "$tmp/pg-password"
}

runs=()
run_store() {
  local store=$1 d="$tmp/$1" replicas=1 store_toml
  mkdir -p "$d"
  start_prometheus "$d"
  python3 "$here/standins.py" --dir "$d/standins" --ready "$d/ports.json" --slack-burst "${SLACK_BURST:-3}" \
    2>"$d/standins.log" &
  local standins_pid=$!; pids+=("$standins_pid")
  wait_for 20 "the stand-ins listening" test -s "$d/ports.json"
  local slack_port pd_port
  slack_port=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["slack"])' "$d/ports.json")
  pd_port=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["pagerduty"])' "$d/ports.json")
  if [ "$store" = postgres ]; then
    [ -n "$pgdir" ] || start_postgres
    replicas=3
    store_toml=$(printf '[store]\nurl = "postgres://culprit@127.0.0.1:%s/storm"\npassword = { file = "%s" }\n' \
      "$pg_port" "$tmp/pg-password")
  else
    store_toml=$(printf '[store]\npath = "%s"\n' "$d/culprit.db")
  fi
  local args=() started=() r
  for r in $(seq "$replicas"); do
    cat >"$d/culprit-$r.toml" <<EOF
[prometheus]
url = "$prometheus_url"
[server]
listen = "127.0.0.1:0"
$store_toml
[notify.slack]
token = { file = "$tmp/slack-token" }
channel = "C0STORM00"
api_url = "http://127.0.0.1:$slack_port/api"
[notify.pagerduty]
routing_key = { file = "$tmp/routing-key" }
url = "http://127.0.0.1:$pd_port/v2/enqueue"
$(cat "$d/plans.toml")
EOF
    RUST_LOG=${RUST_LOG:-info} "$culprit" serve --config "$d/culprit-$r.toml" >"$d/culprit-$r.log" 2>&1 &
    local pid=$!; pids+=("$pid"); started+=("$pid")
    wait_for 60 "culprit $r listening" grep -q "culprit listening" "$d/culprit-$r.log" \
      || { tail -20 "$d/culprit-$r.log" >&2; exit 1; }
    local port
    port=$(grep -m1 "culprit listening" "$d/culprit-$r.log" | sed -n 's/.*addr=127\.0\.0\.1:\([0-9]*\).*/\1/p')
    wait_for 60 "culprit $r ready" python3 "$here/storm.py" ready "http://127.0.0.1:$port/readyz"
    args+=(--culprit "http://127.0.0.1:$port" --pid "$pid")
  done
  echo "storm: $store: $replicas culprit(s) ready; firing $jobs webhooks"
  python3 "$here/storm.py" fire --manifest "$jobs_dir/jobs.json" "${args[@]}" --prometheus "$prometheus_url" \
    --standins "$d/standins" --store "$store" --out "$d/run.json" --timeout "$timeout"
  stop_pids "${started[@]}" "$standins_pid" "$prom_pid"
  forget "${started[@]}" "$standins_pid" "$prom_pid"
  cp "$d/run.json" "$target/storm/last-$store.json"
  runs+=("$d/run.json")
}

for s in "${stores[@]}"; do run_store "$s"; done
echo
python3 "$here/storm.py" table "${runs[@]}" --json "$out"
echo "storm: report written to $out"
