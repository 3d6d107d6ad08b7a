#!/usr/bin/env bash
# Runs culprit's cargo-fuzz targets (fuzz/fuzz_targets), one after another, each in one
# process on one core. Not part of CI (scripts/test.sh): run it by hand, e.g. before a
# release or after touching a parser.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]      # default 600 s; all four targets
#
# Targets: webhook (the Alertmanager webhook parser and intake), recording (the recording
# reader into the compressed series store, every sample read back), plan (the Flink job
# plan reader), config (the configuration loader and what check-config prints); and, run
# only when named, recording_diagnosis (a recording read, then collected, diagnosed and
# rendered: ~900 execs/s) and exposition (the exposition parser alone).
# RUNS=N stops each target after N executions instead of after SECONDS (e.g. RUNS=10000000).
# Seed corpora are built from the captures (fuzz/seeds.py) into fuzz/corpus/<target>;
# a crash is written to fuzz/artifacts/<target>/ and stops that target (the script goes on
# and exits 1 at the end); reproduce it with
#   cd fuzz && cargo +nightly fuzz run -O -a -s none TARGET artifacts/TARGET/crash-…
# and turn it into a regression test next to the code it broke.
# Builds with overflow checks and debug assertions (-a) and no sanitizer (-s none): culprit
# is safe Rust, so a panic is what there is to find, and this runs about twice as fast.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-600}
[ $# -gt 0 ] && shift
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(webhook recording plan config)

command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal

python3 fuzz/seeds.py
cd fuzz
cargo +nightly fuzz build -O -a -s none
mkdir -p logs
failed=0
for t in "${targets[@]}"; do
  # Largest input per target: a webhook or plan of a big job, a recording piece.
  case $t in
    recording | recording_diagnosis) max_len=32768 ;;
    config) max_len=4096 ;; # a few tables; the whole example config is seeded, cut to this
    *) max_len=16384 ;;
  esac
  limit=(-max_total_time="$seconds") span="${seconds}s"
  [ -n "${RUNS:-}" ] && limit=(-runs="$RUNS") span="$RUNS runs"
  echo "fuzz: $t for $span (log fuzz/logs/$t.log)" >&2
  status=0
  corpus=corpus/$t
  [ "$t" = recording_diagnosis ] && corpus=corpus/recording
  cargo +nightly fuzz run -O -a -s none "$t" "$corpus" -- \
    "${limit[@]}" -max_len="$max_len" -timeout=10 -print_final_stats=1 \
    >"logs/$t.log" 2>&1 || status=$?
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "logs/$t.log" | grep -o '[0-9]*$' || true)
  rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "logs/$t.log" | grep -o '[0-9]*$' || true)
  crashes=$(ls "artifacts/$t" 2>/dev/null | grep -c -E '^(crash|oom|timeout|leak)-' || true)
  echo "fuzz: $t: ${execs:-?} execs (${rate:-?}/s), $crashes crash(es), exit $status" >&2
  if [ "$status" -ne 0 ] || [ "$crashes" -gt 0 ]; then
    failed=1
    grep -m1 -A12 -E "panicked|ERROR: libFuzzer" "logs/$t.log" >&2 || true
  fi
done
exit $failed
