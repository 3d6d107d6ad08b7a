#!/usr/bin/env bash
# Compares two behaviour baselines (scripts/behaviour_baseline.sh): the same files with the
# same bytes. Prints every difference and exits 1 on any (a file missing on either side
# counts), 0 when they are identical.
#
#   scripts/behaviour_compare.sh BEFORE AFTER
set -euo pipefail
if [ $# -ne 2 ] || [ ! -d "$1" ] || [ ! -d "$2" ]; then
  echo "usage: $0 BEFORE_DIR AFTER_DIR" >&2
  exit 2
fi
if diff -r -u "$1" "$2"; then
  echo "identical: $(find "$1" -type f | wc -l) files"
else
  echo "behaviour differs: $(diff -rq "$1" "$2" | wc -l) files differ (above)" >&2
  exit 1
fi
