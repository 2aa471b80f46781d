#!/usr/bin/env bash
# The main job: builds neuronsim (tools/setup.sh), runs a bf16 GEMM with bias+GELU and a layernorm
# on the simulated trn1 NeuronCore, and writes out/demo_trace.json (Perfetto) and
# out/demo_report.txt. Extra arguments go to `ncsim demo` (e.g. --preset trn2, --set k=v).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
BUILD_DIR=${BUILD_DIR:-build}
"$BUILD_DIR"/tools/ncsim demo --trace out/demo_trace.json --report out/demo_report.txt "$@"
