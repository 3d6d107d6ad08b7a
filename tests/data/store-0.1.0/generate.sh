#!/usr/bin/env bash
# Writes culprit-0.1.0.sql: a SQLite store as culprit 0.1.0 left it after a crash, for the
# migration test (src/service/store/tests.rs, a_store_written_by_culprit_0_1_0_…).
#
# Made from 0.1.0 itself, not from today's code: the schema is 0.1.0's `SCHEMA` text and
# every row is written with 0.1.0's own SQL statements (enqueue, claim, complete, deliver,
# in the order 0.1.0 ran them), its JSON by serde_json from 0.1.0's `Notice`, `JobRef`
# and `GroupInfo` types, copied from that commit (d98c5f7, the last before the store had
# migrations). The notices carry no verdict body (`verdict: null`), as the test's rows
# always did. Needs git, cargo (serde and serde_json from the local registry) and sqlite3.
set -euo pipefail
REV=d98c5f7
here="$(cd "$(dirname "$0")" && pwd)"
cd "$(git -C "$here" rev-parse --show-toplevel)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
git show "$REV:src/service/store.rs" | sed -n '/^const SCHEMA: &str = "$/,/^";$/p' | sed '1d;$d' >"$tmp/schema.sql"

mkdir -p "$tmp/gen/src"
cat >"$tmp/gen/Cargo.toml" <<'EOF'
[package]
name = "gen010"
version = "0.0.0"
edition = "2021"
[dependencies]
serde = { version = "1", features = ["derive"] }
serde_json = "1"
EOF
{
  echo 'pub mod verdict {'
  echo '    use serde::{Deserialize, Serialize};'
  git show "$REV:src/model/verdict.rs" | sed -n '/^\/\/\/ The job the verdict is about./,/^}/p'
  echo '    /// Never serialized here: every notice below has `verdict: None`.'
  echo '    pub type Verdict = serde_json::Value;'
  echo '}'
  echo 'pub mod notice {'
  git show "$REV:src/model/notice.rs" | sed -e 's/crate::model::verdict/crate::verdict/' -e '/^\/\/!/d'
  echo '}'
  echo 'pub mod store {'
  echo '    use serde::{Deserialize, Serialize};'
  echo '    use std::collections::BTreeMap;'
  git show "$REV:src/service/store.rs" | sed -n '/^\/\/\/ What a work item knows about one of its alert groups./,/^}/p'
  echo '}'
  cat "$here/gen010.rs"
} >"$tmp/gen/src/main.rs"
cargo run --offline -q --manifest-path "$tmp/gen/Cargo.toml" >"$tmp/rows.sql"
sqlite3 "$tmp/culprit.db" <"$tmp/schema.sql"
sqlite3 "$tmp/culprit.db" <"$tmp/rows.sql"
{
  echo "-- A store written by culprit 0.1.0 ($REV), crashed with work running and a send in flight."
  echo "-- Made by tests/data/store-0.1.0/generate.sh; do not edit by hand."
  sqlite3 "$tmp/culprit.db" .dump
} >"$here/culprit-0.1.0.sql"
echo "wrote $here/culprit-0.1.0.sql"
