#!/usr/bin/env bash
# Install what the tests need, then run every check: lint, format, types,
# layering, then the fast tier of the tests and, if it passes, the slow tier. Safe to run again; installs are skipped when present.
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages, only those missing, in one apt-get run: the real Prometheus server and
# promtool, a headless browser for the HTML report tests, LightGBM's OpenMP runtime.
missing=()
if ! command -v prometheus >/dev/null 2>&1 || ! command -v promtool >/dev/null 2>&1; then
    missing+=(prometheus)
fi
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
ldconfig -p 2>/dev/null | grep libgomp.so.1 >/dev/null || missing+=(libgomp1)
if [ "${#missing[@]}" -gt 0 ]; then
    echo "installing Debian's ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# The Debian package starts a system service where systemd runs; the tests start their own.
python -m pip install -q --disable-pip-version-check -e ".[test]"

# Cheapest first; each step stops the run when it fails. Types and layering (about 2 minutes
# of one core on a clean clone) run beside the fast tier, which uses one process; their output
# is printed, and their failure stops the run, once the fast tier is done.
echo "== lint: ruff"; ruff check .; ruff format --check .
checks_log=$(mktemp "${TMPDIR:-/tmp}/tiercast-checks.XXXXXX")
trap 'rm -f "$checks_log"' EXIT
( { echo "== types: mypy"; mypy && echo "== layering: import-linter" && lint-imports; } \
    >"$checks_log" 2>&1 ) &
checks_pid=$!
finish_checks() {
    local rc=0
    wait "$checks_pid" || rc=$?
    cat "$checks_log"
    return "$rc"
}

# pytest's exit 5 (no test selected, e.g. a -k that matches nothing) is not a failure here.
run_pytest() {
    local rc=0
    python -m pytest "$@" || rc=$?
    if [ "$rc" -eq 5 ]; then rc=0; fi
    return "$rc"
}

# The tiers (docs/testing.md). Fast: every test not marked slow, one process; where CI=true an
# unmarked test over 2 s fails it (tests/duration_rule.py). It fails fast: nothing slow runs
# after a fast failure.
echo "== tests: fast tier"
fast_rc=0; run_pytest -q -m "not slow" "$@" || fast_rc=$?
finish_checks
[ "$fast_rc" -eq 0 ] || exit "$fast_rc"
# Slow: in two processes (pytest-xdist), except the tests of worker pools (joblib, Dask),
# which run after them in one process: under xdist a joblib pool once waited for ever with no
# workers left (tests/test_parallel.py, docs/testing.md).
POOLS=(tests/test_parallel.py tests/test_global_model.py)
# pytest-benchmark, where a machine has it, warns under xdist, and warnings are errors here.
echo "== tests: slow tier"
run_pytest -q -m slow -n 2 -p no:benchmark --durations=25 "${POOLS[@]/#/--ignore=}" "$@"
echo "== tests: slow tier, worker pools"; run_pytest -q -m slow --durations=10 "${POOLS[@]}" "$@"
# The tests must leave the machine as they found it.
[ -c /dev/null ] || { echo "tests left /dev/null as something other than a character device" >&2; exit 1; }
