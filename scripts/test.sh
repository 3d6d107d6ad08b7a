#!/usr/bin/env bash
# Runs the whole test suite, then every example and bench briefly (scripts/smoke.sh).
# The integration tests start real Prometheus, VictoriaMetrics, Alertmanager and PostgreSQL
# processes on free loopback ports, and a headless Chromium renders the verdict pages;
# this script installs them from Debian's packages when they are missing (with sudo
# when not root). kubectl is not installed: Debian's (kubernetes-client 1.20) cannot build
# deploy/kubernetes-ha (`patches:`), so tests/deploy.rs builds both kustomizations itself
# and compares with `kubectl kustomize` only when a recent kubectl is already on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v prometheus >/dev/null && command -v promtool >/dev/null || missing+=(prometheus)
command -v victoria-metrics >/dev/null || missing+=(victoria-metrics)
command -v prometheus-alertmanager >/dev/null || missing+=(prometheus-alertmanager)
command -v chromium >/dev/null || missing+=(chromium)
# The store's PostgreSQL tests run initdb and postgres from Debian's package.
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || missing+=(postgresql)
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing ${missing[*]} (Debian packages used by the integration tests)" >&2
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# tests/email.rs runs a real SMTP server, Python's aiosmtpd (not in Debian's archive at
# a version with AUTH and STARTTLS together): from PyPI, only when missing.
if ! python3 -c "import aiosmtpd" 2>/dev/null; then
  echo "installing aiosmtpd (PyPI; the SMTP server of tests/email.rs)" >&2
  python3 -m pip install --quiet aiosmtpd
fi

# cargo test runs every default member of the workspace: culprit and crates/exposition
# (whose tests/prometheus_reference.rs checks the reader against a real Prometheus).
cargo test "$@"
# The whole suite (no arguments, as CI runs it) also runs every example and bench once.
if [ $# -eq 0 ]; then
  scripts/smoke.sh
fi
