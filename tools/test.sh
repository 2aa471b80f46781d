#!/usr/bin/env bash
# Builds everything (tools/setup.sh) and runs every test: the C++ GoogleTest suites through
# ctest (each test in its own process: SystemC elaborates once per process), the same suites
# under ASan + UBSan (tools/sanitize.sh), the Python tests and the wheel (tools/test_wheel.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
BUILD_DIR=${BUILD_DIR:-build}
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$(nproc)" --timeout 600
# The C++ suites again under ASan + UBSan, in build-sanitize/ (README "The sanitizer job").
if [ "${NEURONSIM_SANITIZE_JOB:-1}" = "1" ]; then
  tools/sanitize.sh
fi
if [ -d tests/python ] && [ -x .venv/bin/python ]; then
  .venv/bin/python -m pytest -q tests/python
  # The pip route: the wheel built, installed into a torch-and-numpy venv, and run there.
  tools/test_wheel.sh
  tools/lint.sh
fi
