#!/usr/bin/env bash
# The test command: bootstrap the workspace (idempotent), then run every package's tests
# and the workspace tests. Extra arguments go to pytest, e.g. `-m unit` for the fast ones.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/scripts/bootstrap.sh"
set +u
# shellcheck disable=SC1091
source "$ROOT/.venv/na_env.sh"
set -u
cd "$ROOT"
echo "[test] ruff check"
ruff check .
# pytest exits 5 when it collected no test; that is a failure here too.
if [ $# -gt 0 ]; then
  echo "[test] pytest $* (ROS_DOMAIN_ID chosen per session by conftest.py; two workers when -m selects no system test)"
  exec python -m pytest "$@"
fi
# The whole suite in two runs: everything but the system tests on two workers (pytest-xdist, each worker in its own
# DDS domain), then the system tests alone, since they run the whole graph on the simulated rig in real time.
LOGS="$(mktemp -d)"
trap 'rm -rf "$LOGS"' EXIT
status=0
echo "[test] pytest -m 'not system' (two workers)"
python -m pytest -m "not system" 2>&1 | tee "$LOGS/rest.txt" || status=1
echo "[test] pytest -m system (one process)"
python -m pytest -m system 2>&1 | tee "$LOGS/system.txt" || status=1
python "$ROOT/scripts/sum_pytest_runs.py" "$LOGS/rest.txt" "$LOGS/system.txt" || status=1
exit "$status"
