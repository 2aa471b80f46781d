#!/usr/bin/env bash
# The pip route of README's "Use it in your CI", end to end: `pip wheel .` against the dev venv's
# torch, then the wheel installed into a separate venv holding only torch==2.13.0, numpy and
# pytest, where the NEURON_SIM=1 one-liner, `neuronsim ls` and `ncsim` must run with SystemC
# loaded from the wheel (not the system), TorchNeuron's surface and a suite written as
# TorchNeuron's tests are (tests/torchneuron) must pass through the installed `torch_neuronx`,
# and a torch mismatch must be one clear line. Prints the wheel build time and size. Run by
# tools/test.sh after tools/setup.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
WHEEL_BUILD_DIR=${WHEEL_BUILD_DIR:-$BUILD_DIR-wheel}  # kept: the next build is incremental
USER_VENV=${USER_VENV:-$BUILD_DIR-wheel-venv}          # kept: torch is installed once
dist=$(mktemp -d)
trap 'rm -rf "$dist"' EXIT

# The wheel. Same compiler and ccache settings as tools/setup.sh's build: a clean clone's first
# wheel build is then mostly cache hits (scikit-build-core would pick Python's CXX otherwise).
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
CXX=$(sed -n 's/^CMAKE_CXX_COMPILER:FILEPATH=//p' "$BUILD_DIR/CMakeCache.txt")
export CXX
start=$(date +%s)
.venv/bin/pip wheel -q --no-build-isolation --no-deps -C build-dir="$WHEEL_BUILD_DIR" -w "$dist" . \
  > "$dist/build.log" 2>&1 || { cat "$dist/build.log"; exit 1; }
wheel=$(echo "$dist"/neuronsim-*.whl)
echo "wheel: built $(basename "$wheel") in $(($(date +%s) - start)) s," \
  "$(du -k "$wheel" | cut -f1) KiB"

# A user's venv: torch==2.13.0 and numpy, installed as tools/setup.sh installs them, and the
# test runner a CI job has (pytest, the dev requirements' pin), nothing else (its package list
# is recorded when created and compared on every reuse).
pytest_pin=$(grep '^pytest==' python/requirements-dev.txt)
if [ ! -x "$USER_VENV/bin/python" ] || ! grep -qx "$pytest_pin" "$USER_VENV/baseline.txt"; then
  rm -rf "$USER_VENV"
  .venv/bin/python -m venv "$USER_VENV"
  "$USER_VENV/bin/pip" install -q torch==2.13.0 numpy
  "$USER_VENV/bin/pip" install -q "$pytest_pin"
  "$USER_VENV/bin/pip" list --format=freeze > "$USER_VENV/baseline.txt"
fi
"$USER_VENV/bin/pip" uninstall -q -y neuronsim 2>/dev/null || true
if ! "$USER_VENV/bin/pip" list --format=freeze | diff -q - "$USER_VENV/baseline.txt" >/dev/null; then
  echo "test_wheel: $USER_VENV holds more than torch, numpy and pytest: remove it" >&2
  exit 1
fi
"$USER_VENV/bin/pip" install -q --no-index "$wheel"

# Run from outside the checkout, so nothing of python/ can be imported by accident.
user_venv=$(cd "$USER_VENV" && pwd)
cp -r tests/torchneuron "$dist/torchneuron"
cd "$dist"
NEURON_SIM=1 "$user_venv/bin/python" - <<'EOF'
import torch

out = torch.ones(2, device="neuron") + 1
print(out)
assert out.device.type == "neuron" and out.cpu().tolist() == [2.0, 2.0], out

import neuronsim

# The SystemC this process runs is the wheel's own copy (neuronsim/_libs), found through the
# extension's RUNPATH before any system one: the install needs no SystemC on the machine.
pkg = neuronsim.__path__[0]
maps = open("/proc/self/maps").read().split("\n")
systemc = {line.split()[-1] for line in maps if "libsystemc" in line}
assert systemc and all(p.startswith(pkg + "/_libs/") for p in systemc), systemc
print("wheel: SystemC loaded from", *sorted(systemc))
EOF
"$user_venv/bin/neuronsim" ls
"$user_venv/bin/ncsim" presets list
# ldd's whole output first: `ldd | grep -q` under pipefail fails when grep exits before ldd ends.
ncsim_libs=$(ldd "$user_venv"/lib/python3*/site-packages/neuronsim/bin/ncsim)
if ! grep -q 'libsystemc.*/_libs/' <<<"$ncsim_libs"; then
  echo "test_wheel: ncsim does not resolve SystemC inside the wheel" >&2
  exit 1
fi

# TorchNeuron's surface, name by name, and a suite written as TorchNeuron's tests are, through
# the installed torch_neuronx (the test process imports it before anything of neuronsim).
start=$(date +%s)
"$user_venv/bin/python" -m pytest -q -p no:cacheprovider torchneuron
echo "wheel: torchneuron suite in $(($(date +%s) - start)) s"

# Another torch than the one it was built against: one line naming both versions, no traceback.
info=$(echo "$user_venv"/lib/python3*/site-packages/neuronsim/_build_info.py)
cp "$info" "$dist/build_info.py"
sed -i 's/^TORCH_VERSION = .*/TORCH_VERSION = "2.12.0"/' "$info"
set +e
err=$("$user_venv/bin/python" -c "import neuronsim" 2>&1)
rc=$?
set -e
cp "$dist/build_info.py" "$info"
if [ $rc -eq 0 ] || [ "$(echo "$err" | wc -l)" -ne 1 ] || ! grep -q "built against torch 2.12.0" <<<"$err"; then
  echo "test_wheel: a torch mismatch should fail with one line, got (rc $rc):" >&2
  echo "$err" >&2
  exit 1
fi
echo "wheel: mismatch reported as: $err"
echo "wheel: ok"
