#!/usr/bin/env bash
# The sanitizer job: the C++ GoogleTest suites built with AddressSanitizer + UBSan
# (-DNEURONSIM_SANITIZE=ON) in their own build directory and run through ctest, every report
# fatal. Only the torch-free targets the suites link are built (sim, device_model, runtime, kernels,
# traces, reference, tests/cpp): no backend, benchmarks or tools. -O1 -g: ASan's usual level,
# and the cheapest to compile. ccache is shared with the Release build (same base-dir rules as
# tools/setup.sh), so a CI machine that keeps its cache only recompiles what changed.
#   tools/sanitize.sh            configure, build, run every C++ test
#   tools/sanitize.sh -R Dtype   extra arguments go to ctest
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${SANITIZE_BUILD_DIR:-build-sanitize}
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g -DNDEBUG" -DNEURONSIM_SANITIZE=ON \
  -DNEURONSIM_BUILD_BACKEND=OFF -DNEURONSIM_BUILD_BENCH=OFF -DNEURONSIM_BUILD_TOOLS=OFF \
  -DNEURONSIM_BUILD_TESTS=ON >/dev/null
cmake --build "$BUILD_DIR" -j "$(nproc)"
# Every ASan/UBSan report stops the test with a non-zero exit (ctest then fails it); leaks count.
# No detect_stack_use_after_return: SystemC's coroutine switches hand ASan no fake-stack slot
# (sc_cor_pkg_qt::yield passes nullptr), which would discard a thread's fake frames at each switch.
export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=0:check_initialization_order=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$(nproc)" --timeout 900 "$@"
