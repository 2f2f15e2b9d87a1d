#!/usr/bin/env bash
# Idempotent set-up of the NeuralActuator workspace: virtual environment, ROS 2 Jazzy
# (system install when /opt/ros/jazzy exists, otherwise the ros-jazzy-* wheels), the pinned
# Python dependencies, `colcon build`, and the environment file `.venv/na_env.sh`.
# Prints one line per step; a second run with nothing changed skips every step.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# Concurrent runs (two shells, parallel test sessions) wait for each other.
if [ -z "${NA_BOOTSTRAP_LOCKED:-}" ] && command -v flock >/dev/null; then
  export NA_BOOTSTRAP_LOCKED=1
  exec flock "$ROOT/.bootstrap.lock" "$0" "$@"
fi
VENV="$ROOT/.venv"
STAMPS="$VENV/.na-stamps"
ROS_SYSTEM=/opt/ros/jazzy
T0=$(date +%s.%N)

die() { echo "[bootstrap] ERROR: $*" >&2; exit 1; }
elapsed() { python3 -c "import time,sys; print(f'{time.time()-float(sys.argv[1]):.1f}')" "$T0"; }
step() { printf '[bootstrap %6ss] %s\n' "$(elapsed)" "$*"; }
# Content hash of files (missing files hash as empty), used to skip unchanged steps.
hash_of() { cat "$@" 2>/dev/null | sha256sum | cut -c1-16; }
stamp_ok() { [ -f "$STAMPS/$1" ] && [ "$(cat "$STAMPS/$1")" = "$2" ]; }
stamp_set() { mkdir -p "$STAMPS"; echo "$2" > "$STAMPS/$1"; }

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else return 1; fi; }
apt_install() {
  command -v apt-get >/dev/null || die "missing system tools ($*) and no apt-get to install them"
  step "installing system packages: $*"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null \
    && as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null \
    || die "could not install $* (run as root or with sudo)"
}

# 1. System tools colcon needs to build the C/C++ type support of na_msgs.
missing=()
command -v cmake >/dev/null || missing+=(cmake)
command -v g++ >/dev/null || missing+=(g++)
command -v make >/dev/null || missing+=(make)
if [ ${#missing[@]} -gt 0 ]; then apt_install "${missing[@]}"; else step "system tools present (cmake, g++, make)"; fi

# 2. Python and the virtual environment.
if [ -d "$ROS_SYSTEM" ]; then
  ROS_MODE=system
  PYTHON=${NA_PYTHON:-/usr/bin/python3}
else
  ROS_MODE=wheels
  PYTHON=${NA_PYTHON:-$(command -v python3.11 || command -v python3 || true)}
fi
[ -n "$PYTHON" ] || die "no python3 found; install Python 3.11"
"$PYTHON" -c 'import sys; assert sys.version_info[:2] >= (3, 11), sys.version' 2>/dev/null \
  || die "$PYTHON is $("$PYTHON" --version 2>&1); Python 3.11 or newer is required"
if [ ! -x "$VENV/bin/python" ]; then
  step "creating virtual environment .venv with $PYTHON ($ROS_MODE ROS)"
  venv_args=()
  [ "$ROS_MODE" = system ] && venv_args+=(--system-site-packages)
  if ! "$PYTHON" -m venv "${venv_args[@]}" "$VENV" 2>/dev/null; then
    rm -rf "$VENV"
    pyver=$("$PYTHON" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
    apt_install "python${pyver}-venv"
    "$PYTHON" -m venv "${venv_args[@]}" "$VENV"
  fi
else
  step "virtual environment .venv present ($ROS_MODE ROS)"
fi
PY="$VENV/bin/python"
PIP=("$PY" -m pip install --disable-pip-version-check --quiet)

# 3. ROS 2 Jazzy.
if [ "$ROS_MODE" = system ]; then
  step "using system ROS 2 Jazzy at $ROS_SYSTEM"
  # shellcheck disable=SC1091
  set +u; source "$ROS_SYSTEM/setup.bash"; set -u
  h=$(hash_of requirements-ros.txt)-system
  if ! stamp_ok ros "$h"; then
    "${PIP[@]}" colcon-common-extensions catkin-pkg >/dev/null
    stamp_set ros "$h"
  fi
else
  h=$(hash_of requirements-ros.txt)
  if stamp_ok ros "$h"; then
    step "ROS 2 Jazzy wheels up to date"
  else
    step "installing ROS 2 Jazzy wheels (requirements-ros.txt)"
    "${PIP[@]}" -r requirements-ros.txt 2>&1 | grep -v '^WARNING: Location' || true
    "$PY" -c 'import rclpy' || die "rclpy does not import after installing the ROS wheels"
    stamp_set ros "$h"
  fi
  export AMENT_PREFIX_PATH="$VENV${AMENT_PREFIX_PATH:+:$AMENT_PREFIX_PATH}"
  export CMAKE_PREFIX_PATH="$VENV${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
fi

# 4. Python dependencies (one pinned list).
h=$(hash_of requirements.txt)
if stamp_ok pydeps "$h"; then
  step "Python dependencies up to date (requirements.txt)"
else
  step "installing Python dependencies (requirements.txt)"
  "${PIP[@]}" -r requirements.txt 2>&1 | grep -v '^WARNING: Location' || true
  "$PY" -c 'import numpy, jax, flax, mujoco, onnxruntime, rosbags, dynamixel_sdk, scservo_sdk' \
    || die "a pinned Python dependency does not import"
  stamp_set pydeps "$h"
fi

# 5. The ROS wheels were built under /opt/python/cp311-cp311; their CMake exports name
#    that prefix. Point them at this venv's include and site-packages directories.
if [ "$ROS_MODE" = wheels ]; then
  mapfile -d '' foreign < <(grep -rlZ /opt/python/cp311-cp311 "$VENV/share" 2>/dev/null || true)
  if [ ${#foreign[@]} -gt 0 ]; then
    step "rewriting ${#foreign[@]} wheel CMake exports from /opt/python/cp311-cp311 to .venv"
    pyinc=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
    npinc=$("$PY" -c 'import numpy; print(numpy.get_include())')
    sed -i \
      -e "s#/opt/python/cp311-cp311/include/python3\.11#$pyinc#g" \
      -e "s#/opt/python/cp311-cp311/lib/python3\.11/site-packages/numpy/_core/include#$npinc#g" \
      -e "s#/opt/python/cp311-cp311#$VENV#g" "${foreign[@]}"
  else
    step "wheel CMake exports already point at .venv"
  fi
fi

# 6. colcon build. Python packages are symlink-installed, so editing Python code needs no
#    rebuild; the build reruns only when a package manifest, setup file, interface or the set
#    of files changes.
build_inputs=$(
  cd "$ROOT"
  # Python sources are symlinked (develop mode), so only non-Python files and manifests count;
  # the top-level launch/ and config/ are installed by na_bringup (through its links to them).
  find src launch config -type f -not -path '*/__pycache__/*' -not -path '*/test/*' -not -name '*.py' \
    -not -name '*.pyc' | LC_ALL=C sort
  find src \( -name package.xml -o -name setup.py -o -name setup.cfg -o -name CMakeLists.txt \
    -o -name '*.msg' -o -name '*.srv' \) -type f | LC_ALL=C sort | xargs cat
)
h=$(printf '%s' "$build_inputs" | sha256sum | cut -c1-16)-$ROS_MODE
if stamp_ok colcon "$h" && [ -f "$ROOT/install/local_setup.bash" ]; then
  step "colcon workspace up to date"
else
  step "colcon build (src/)"
  # Console scripts are regenerated by the build; drop the old ones so that a command that moved to
  # another package (or was removed) does not linger on PATH.
  rm -f "$ROOT"/install/*/lib/*/na-*
  find "$VENV/bin" -maxdepth 1 -name 'na-*' -type l -delete
  # Likewise a data file (launch, config) that was removed or renamed: --symlink-install left a link to it.
  if [ -d "$ROOT/install" ]; then find "$ROOT/install" -xtype l -delete; fi
  # shellcheck disable=SC1091
  set +u; source "$VENV/bin/activate"; set -u
  mkdir -p "$ROOT/log"
  if ! colcon build --symlink-install --event-handlers console_cohesion- summary- \
      --cmake-args -DPython3_EXECUTABLE="$PY" -DBUILD_TESTING=OFF >"$ROOT/log/colcon-build.txt" 2>&1 \
      < /dev/null; then
    tail -n 40 "$ROOT/log/colcon-build.txt" >&2
    die "colcon build failed (full log: log/colcon-build.txt)"
  fi
  stamp_set colcon "$h"
fi

# User-facing commands (na-sim, na-train, na-record, na-launch, na-demo) on the venv's PATH;
# node executables stay under install/<pkg>/lib/<pkg>/ as ROS expects.
for cli in "$ROOT"/install/*/lib/*/na-*; do
  [ -e "$cli" ] && ln -sfn "$cli" "$VENV/bin/$(basename "$cli")"
done

# 7. Environment file sourced by the test command, the demo and users' shells.
ENV_FILE="$VENV/na_env.sh"
{
  echo "# Generated by scripts/bootstrap.sh: source it to use the NeuralActuator workspace."
  echo "source \"$VENV/bin/activate\""
  if [ "$ROS_MODE" = system ]; then
    echo "source \"$ROS_SYSTEM/setup.bash\""
  else
    echo "export AMENT_PREFIX_PATH=\"$VENV\${AMENT_PREFIX_PATH:+:\$AMENT_PREFIX_PATH}\""
    echo "export CMAKE_PREFIX_PATH=\"$VENV\${CMAKE_PREFIX_PATH:+:\$CMAKE_PREFIX_PATH}\""
  fi
  echo "source \"$ROOT/install/local_setup.bash\""
  echo "export RMW_IMPLEMENTATION=\${RMW_IMPLEMENTATION:-rmw_fastrtps_cpp}"
  echo "export NA_WORKSPACE=\"$ROOT\""
} > "$ENV_FILE.tmp"
if ! cmp -s "$ENV_FILE.tmp" "$ENV_FILE" 2>/dev/null; then mv "$ENV_FILE.tmp" "$ENV_FILE"; else rm "$ENV_FILE.tmp"; fi
step "done: source .venv/na_env.sh to use the workspace"
