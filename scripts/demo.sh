#!/usr/bin/env bash
# The demo command: bootstrap the workspace (idempotent), then run the whole suite end to end on
# the simulated rig (generate, record live, convert, train, export, estimate live, summary).
# Extra arguments go to na-demo (see `na-demo --help`), e.g. `--out DIR` or `--quick`.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/scripts/bootstrap.sh"
set +u
# shellcheck disable=SC1091
source "$ROOT/.venv/na_env.sh"
set -u
cd "$ROOT"
# A private DDS domain on this host only, unless the caller chose one.
export ROS_DOMAIN_ID="${ROS_DOMAIN_ID:-$((100 + $$ % 100))}"
export ROS_AUTOMATIC_DISCOVERY_RANGE="${ROS_AUTOMATIC_DISCOVERY_RANGE:-LOCALHOST}"
exec na-demo "$@"
