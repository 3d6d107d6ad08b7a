#!/usr/bin/env bash
# Writes what culprit says, offline, about every input we have, one file per input and
# format, into OUTDIR: a behaviour baseline to compare (scripts/behaviour_compare.sh) before
# and after a change that must not change behaviour.
#
#   scripts/behaviour_baseline.sh OUTDIR
#
# Inputs, each run as a user runs `culprit diagnose` (the invocations of tests/captures.rs,
# tests/cases.rs and tests/reports.rs):
#   - every real capture (examples/captures/*, which holds ../shared/captures and the Flink
#     1.x captures): recording + plan; + the checkpoint configuration from Flink REST; the
#     end-of-run scrape dumps (jm, tm1, tm2) at a fixed --at; the recording without a plan;
#   - every case shape (../shared/cases/*): recording + plan, --job and --at of EXPECTED.json;
#   - every field report with an offline input (../shared/reports/*, ../shared/reports3/*,
#     and the copies tests/reports.rs reads, tests/data/reports/*, some with a recording):
#     each recording (or promtool dump) with each plan and without one, with each of its
#     configurations and without one, plus the --label / --job runs their READMEs name;
#   - the bundled demo (`culprit demo`) in every format.
# Formats: json, text (default view), text --verbose, markdown --verbose, html (the demo:
# json, text, markdown). A run that exits non-zero writes NAME.FORMAT.error (exit code and
# stderr) instead; that is behaviour too. Reports that need a live backend (webhook-only,
# Prometheus/VictoriaMetrics/Thanos behind serve) have no offline form: OUTDIR/SKIPPED.txt
# lists them.
#
# Deterministic: the text width is fixed (COLUMNS), the inputs are named by paths that are
# the same in every checkout (examples/ relative to the repository, the shared folder by
# its real path), and nothing offline depends on the clock (the scrape dumps get --at).
# CULPRIT=path/to/binary uses that binary instead of building target/debug/culprit.
set -euo pipefail
if [ $# -ne 1 ]; then
  echo "usage: $0 OUTDIR" >&2
  exit 2
fi
repo="$(cd "$(dirname "$0")/.." && pwd)"
mkdir -p "$1"
out="$(cd "$1" && pwd)"
shared="${SHARED:-$(readlink -f "$repo/../shared")}"
cd "$repo"
if [ -z "${CULPRIT:-}" ]; then
  cargo build --quiet --bin culprit
  CULPRIT="$repo/target/debug/culprit"
fi
export COLUMNS=100 NO_COLOR=1 TZ=UTC LC_ALL=C
unset RUST_LOG
: >"$out/SKIPPED.txt"
count=0

# run NAME FORMAT_ARGS... -- CULPRIT_ARGS...: stdout to NAME.EXT, or NAME.EXT.error.
run_one() {
  local name="$1" ext="$2"
  shift 2
  local file="$out/$name.$ext" rc=0
  "$CULPRIT" "$@" >"$file" 2>"$file.stderr" || rc=$?
  if [ "$rc" -ne 0 ]; then
    { echo "exit $rc"; cat "$file.stderr"; } >"$file.error"
    rm -f "$file"
  fi
  rm -f "$file.stderr"
}

# diagnose NAME ARGS...: the verdict about one input in every format.
diagnose() {
  local name="$1"
  shift
  mkdir -p "$(dirname "$out/$name")"
  run_one "$name" json diagnose "$@" --format json
  run_one "$name" txt diagnose "$@" --format text
  run_one "$name" verbose.txt --verbose diagnose "$@" --format text
  run_one "$name" verbose.md --verbose diagnose "$@" --format markdown
  run_one "$name" html diagnose "$@" --format html
  count=$((count + 1))
}

# Captures: the end-of-run scrape dumps have no timestamps; tests/captures.rs reads them at
# 1_795_960_000_000 ms.
dumps_at="2026-11-29T13:46:40Z"
for dir in examples/captures/*/; do
  dir="${dir%/}"
  [ -f "$dir/EXPECTED.json" ] || continue
  n="captures/$(basename "$dir")"
  diagnose "$n/recording+plan" --recording "$dir/recording.om.gz" --plan "$dir/plan.json"
  if [ -f "$dir/rest/checkpoints-config.json" ]; then
    diagnose "$n/recording+plan+checkpoint-config" --recording "$dir/recording.om.gz" --plan "$dir/plan.json" \
      --checkpoint-config "$dir/rest/checkpoints-config.json"
  fi
  if [ -f "$dir/metrics/jm.prom" ]; then
    metrics=()
    for f in "$dir"/metrics/*.prom; do metrics+=(--metrics "$f"); done
    diagnose "$n/scrape-dumps+plan" "${metrics[@]}" --plan "$dir/plan.json" --at "$dumps_at"
  fi
  diagnose "$n/recording-without-plan" --recording "$dir/recording.om.gz"
done

# Case shapes: --job and --at as tests/cases.rs gives them (from EXPECTED.json).
for dir in "$shared"/cases/*/; do
  dir="${dir%/}"
  [ -f "$dir/EXPECTED.json" ] || continue
  job="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["job_name"])' "$dir/EXPECTED.json")"
  at="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["at"])' "$dir/EXPECTED.json")"
  diagnose "cases/$(basename "$dir")" --recording "$dir/recording.om.gz" --plan "$dir/plan.json" --job "$job" --at "$at"
done

# The extra runs a report's README names (tests/reports.rs: report 01 by namespace; reports3
# 01 by the old run's name and id).
extra_runs() {
  case "$1" in
    reports/01-zero-job-id-two-deployments | tests-data-reports/01-zero-job-id-two-deployments) printf '%s\n' "--label namespace=flink-us" "--label namespace=flink-eu" \
      "--label namespace=flink-ap" "--label alertname=FlinkJobBackpressured" ;;
    reports3/01-operator-upgrade-rotated-job-id) printf '%s\n' "--job orders-enricher" \
      "--job 6f1e2d3c4b5a69788796a5b4c3d2e1f0" ;;
  esac
}

for dir in "$shared"/reports/*/ "$shared"/reports3/*/ tests/data/reports/*/; do
  dir="${dir%/}"
  rel="$(basename "$(dirname "$dir")")/$(basename "$dir")"
  case "$dir" in tests/data/*) rel="tests-data-$rel" ;; esac
  [ "$(basename "$dir")" = tools ] && continue
  recordings=()
  for f in "$dir"/*.om.gz "$dir"/dump*.gz; do [ -f "$f" ] && recordings+=("$f"); done
  if [ ${#recordings[@]} -eq 0 ]; then
    echo "$rel: no recording (needs a live backend or serve)" >>"$out/SKIPPED.txt"
    continue
  fi
  plans=("")
  for f in "$dir"/plan*.json; do [ -f "$f" ] && plans+=("$f"); done
  configs=("")
  for f in "$dir"/*.toml; do [ -f "$f" ] && configs+=("$f"); done
  mapfile -t extras < <(echo; extra_runs "$rel")
  for r in "${recordings[@]}"; do
    for p in "${plans[@]}"; do
      for c in "${configs[@]}"; do
        for x in "${extras[@]}"; do
          name="reports/$rel/$(basename "$r")"
          args=(--recording "$r")
          if [ -n "$p" ]; then name+="+$(basename "$p")"; args+=(--plan "$p"); fi
          if [ -n "$c" ]; then name+="+$(basename "$c")"; args+=(--config "$c"); fi
          if [ -n "$x" ]; then
            name+="+$(echo "$x" | sed "s/^--//; s/ --/+/g; s/ /=/g")"
            read -ra more <<<"$x"
            args+=("${more[@]}")
          fi
          diagnose "$name" "${args[@]}"
        done
      done
    done
  done
done

# The bundled demo.
mkdir -p "$out/demo"
run_one demo/demo json demo --format json
run_one demo/demo txt demo --format text
run_one demo/demo verbose.txt --verbose demo --format text
run_one demo/demo verbose.md --verbose demo --format markdown
run_one demo/demo html demo --format html
count=$((count + 1))

echo "$count inputs ($(find "$out" -type f ! -name SKIPPED.txt | wc -l) files) in $out; $(wc -l <"$out/SKIPPED.txt") reports skipped (SKIPPED.txt)"
