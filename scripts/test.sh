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
echo "[test] pytest (ROS_DOMAIN_ID chosen per session by conftest.py)"
# pytest exits 5 when it collected no test; that is a failure here too.
python -m pytest "$@"
