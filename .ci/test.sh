#!/usr/bin/env bash
# Install what the tests need, then run every check: lint, format, types,
# layering, and the test suite. Safe to run again; installs are skipped when present.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v prometheus >/dev/null 2>&1 || ! command -v promtool >/dev/null 2>&1; then
    echo "installing Debian's prometheus (real server for the tests)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends prometheus >/dev/null
fi
if ! command -v chromium >/dev/null 2>&1; then
    echo "installing Debian's chromium (headless browser for the HTML report tests)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends chromium >/dev/null
fi
# The Debian package starts a system service where systemd runs; the tests start their own.
python -m pip install -q --disable-pip-version-check -e ".[test]"

echo "== ruff"; ruff check . && ruff format --check .
echo "== mypy"; mypy
echo "== import-linter"; lint-imports
# One process: under pytest-xdist (`-n 2`, installed with the test tools, fine for local runs)
# the joblib worker-pool test once waited for ever on a pool with no workers (docs/testing.md).
echo "== pytest"; python -m pytest -q "$@"
# The tests must leave the machine as they found it.
[ -c /dev/null ] || { echo "tests left /dev/null as something other than a character device" >&2; exit 1; }
