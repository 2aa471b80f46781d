#!/usr/bin/env bash
# Builds everything (tools/setup.sh) and runs every test: the C++ GoogleTest suites through
# ctest (each test in its own process: SystemC elaborates once per process), the Python tests and
# the wheel (tools/test_wheel.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
BUILD_DIR=${BUILD_DIR:-build}
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$(nproc)" --timeout 600
if [ -d tests/python ] && [ -x .venv/bin/python ]; then
  .venv/bin/python -m pytest -q tests/python
  # The pip route: the wheel built, installed into a torch-and-numpy venv, and run there.
  tools/test_wheel.sh
  tools/lint.sh
fi
