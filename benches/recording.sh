#!/usr/bin/env bash
# Memory and read throughput of `culprit diagnose --recording` (issue 8's targets: peak RSS
# ≤ 400 MB on 1,000 vertices × 128 subtasks × 60 samples, ≤ 60 MB on a capture), and
# culprit's read throughput beside promtool's `tsdb create-blocks-from openmetrics` on the
# same file. Needs promtool (Debian package `prometheus`) and GNU time (/usr/bin/time).
#
#   benches/recording.sh            # all three parts; the big one streams ~11.8 GB
#   PARTS=capture,promtool benches/recording.sh   # skip the big run
#   PROFILE=dev BIG=6x2x12 SMALL=6x2x12 benches/recording.sh   # scripts/smoke.sh: it runs
#
# The big recording is never written to disk: the synthetic generator streams it into
# `culprit diagnose --recording -`, so the generator shares the machine with culprit.
set -euo pipefail
cd "$(dirname "$0")/.."
BIG=${BIG:-1000x128x60} SMALL=${SMALL:-100x64x60} PARTS=${PARTS:-big,capture,promtool}
CAPTURE=${CAPTURE:-examples/captures/slow-sink} PROFILE=${PROFILE:-release}
case "$PROFILE" in
  release) flags=(--release) dir=release ;;
  dev) flags=() dir=debug ;;
  *) echo "PROFILE is release or dev" >&2; exit 2 ;;
esac
bin="${CARGO_TARGET_DIR:-target}/$dir"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cargo build -q "${flags[@]}" --bin culprit --example synthetic

# size VxSxN -> "--vertices V --subtasks S --samples N"
sizes() { IFS=x read -r v s n <<<"$1"; echo "--vertices $v --subtasks $s --samples $n"; }
# field NAME FILE: a value from /usr/bin/time -v's report
field() { sed -n "s/^[[:space:]]*$1: //p" "$2"; }
seconds() { # "h:mm:ss" or "m:ss.ss" -> seconds
  awk -F: '{ if (NF == 3) print $1 * 3600 + $2 * 60 + $3; else print $1 * 60 + $2 }' <<<"$1"
}
report() { # LABEL BYTES TIMEFILE
  local s rss
  s=$(seconds "$(field 'Elapsed (wall clock) time (h:mm:ss or m:ss)' "$3")")
  rss=$(field 'Maximum resident set size (kbytes)' "$3")
  awk -v l="$1" -v b="$2" -v s="$s" -v r="$rss" \
    'BEGIN { printf "%-44s %8.0f MB  %7.2f s  %7.1f MB/s  peak RSS %6.1f MB\n", l, b / 1e6, s, b / 1e6 / s, r / 1024 }'
}

if [[ ,$PARTS, == *,big,* ]]; then
  # The plan first (no samples), so culprit never waits on it.
  # shellcheck disable=SC2046
  "$bin/examples/synthetic" $(sizes "${BIG%x*}x0") --out /dev/null --plan-out "$tmp/big-plan.json" 2>/dev/null
  # shellcheck disable=SC2046
  "$bin/examples/synthetic" $(sizes "$BIG") --out - --plan-out "$tmp/big-plan.json" 2>"$tmp/big-bytes" |
    /usr/bin/time -v -o "$tmp/big-time" "$bin/culprit" diagnose --recording - --plan "$tmp/big-plan.json" \
      --format json >"$tmp/big-verdict.json"
  bytes=$(sed -n 's/^wrote \([0-9]*\) bytes.*/\1/p' "$tmp/big-bytes")
  report "culprit diagnose, $BIG from stdin" "$bytes" "$tmp/big-time"
  grep -o '"finding": *"[a-z_]*"' "$tmp/big-verdict.json" | head -1
fi

if [[ ,$PARTS, == *,capture,* ]]; then
  /usr/bin/time -v -o "$tmp/capture-time" "$bin/culprit" diagnose --recording "$CAPTURE/recording.om.gz" \
    --plan "$CAPTURE/plan.json" --format json >/dev/null
  report "culprit diagnose, capture $(basename "$CAPTURE") (gzip)" \
    "$(stat -c %s "$CAPTURE/recording.om.gz")" "$tmp/capture-time"
fi

if [[ ,$PARTS, == *,promtool,* ]]; then
  # shellcheck disable=SC2046
  "$bin/examples/synthetic" $(sizes "$SMALL") --out "$tmp/small.om" --plan-out "$tmp/small-plan.json"
  bytes=$(stat -c %s "$tmp/small.om")
  cat "$tmp/small.om" >/dev/null # both read from the page cache
  /usr/bin/time -v -o "$tmp/culprit-time" "$bin/culprit" diagnose --recording "$tmp/small.om" \
    --plan "$tmp/small-plan.json" --format json >/dev/null
  report "culprit diagnose (read + diagnosis), $SMALL" "$bytes" "$tmp/culprit-time"
  /usr/bin/time -v -o "$tmp/promtool-time" promtool tsdb create-blocks-from openmetrics "$tmp/small.om" \
    "$tmp/tsdb" >/dev/null
  report "promtool tsdb create-blocks-from openmetrics" "$bytes" "$tmp/promtool-time"
fi
