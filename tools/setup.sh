#!/usr/bin/env bash
# Installs everything neuronsim needs on a fresh Debian 12 machine and builds it:
#   apt packages (compiler toolchain, SystemC, Eigen, fmt, GoogleTest, Google Benchmark,
#   nlohmann-json, CLI11, ccache, ninja), a Python venv in .venv with torch==2.13.0 (CPU),
#   then a Release build in build/.
# Idempotent: a second run only rebuilds what changed.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(build-essential cmake ninja-build ccache pkg-config libsystemc-dev libeigen3-dev
  libfmt-dev libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev libcli11-dev
  clang-format python3-venv python3-dev)
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if [ "${NEURONSIM_SKIP_VENV:-0}" != "1" ]; then
  if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
  fi
  # torch first and pinned: anything depending on torch must not pull a CUDA build.
  if ! .venv/bin/python -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '2.13.0')" 2>/dev/null; then
    .venv/bin/pip install -q torch==2.13.0 numpy
  fi
  .venv/bin/pip install -q -r python/requirements-dev.txt
fi

BUILD_DIR=${BUILD_DIR:-build}
# Paths under the checkout hash as relative, so any clone (CI's included) reuses the cache; the
# extension's precompiled torch header is cached too (ccache needs this sloppiness for it).
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1 CCACHE_SLOPPINESS=pch_defines,time_macros
BACKEND=OFF
[ -x .venv/bin/python ] && [ -f backend/CMakeLists.txt ] && [ "${NEURONSIM_SKIP_VENV:-0}" != "1" ] && BACKEND=ON
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DNEURONSIM_BUILD_BACKEND=$BACKEND -DPython3_EXECUTABLE="$PWD/.venv/bin/python" >/dev/null
cmake --build "$BUILD_DIR" -j "$(nproc)"
if [ "$BACKEND" = "ON" ]; then
  # The extension is built by CMake (above) into python/neuronsim/; this only links the package
  # into the venv (editable: pyproject.toml's override runs no CMake) and registers its
  # torch.backends entry point and console script; again when a package was added (torch_neuronx,
  # the TorchNeuron stand-in).
  if ! .venv/bin/python -c "import importlib.metadata as m, importlib.util as u, sys; m.version('neuronsim'); sys.exit(u.find_spec('torch_neuronx') is None)" >/dev/null 2>&1; then
    .venv/bin/pip install -q --no-build-isolation --no-deps -e .
  fi
  # The NKI import names (neuronxcc.nki, nki): the wheel installs this .pth itself.
  site=$(.venv/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
  if ! cmp -s python/neuronsim-nki-names.pth "$site/neuronsim-nki-names.pth"; then
    cp python/neuronsim-nki-names.pth "$site/"
  fi
fi
