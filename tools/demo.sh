#!/usr/bin/env bash
# The main job: builds neuronsim (tools/setup.sh), then
# 1. runs a bf16 GEMM with bias+GELU and a layernorm as ISA programs on the simulated trn1
#    NeuronCore: out/demo_trace.json (Perfetto) and out/demo_report.txt;
# 2. trains a transformer encoder layer for three steps with PyTorch on the `neuron` device:
#    out/model_trace.json (ops, kernels and engines in one timeline), out/model_report.txt and
#    out/model_report.html (with the roofline plot).
# Extra arguments go to both (e.g. --preset trn2, --set hbm.bandwidth_gbps=820).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
BUILD_DIR=${BUILD_DIR:-build}
"$BUILD_DIR"/tools/ncsim demo --trace out/demo_trace.json --report out/demo_report.txt "$@"
echo
echo "== PyTorch on the neuron device: examples/transformer_step.py =="
.venv/bin/neuronsim run --progress never "$@" --trace out/model_trace.json \
  --report out/model_report.html examples/transformer_step.py
.venv/bin/neuronsim report out/model_trace.json --top 8 | tee out/model_report.txt
echo "wrote out/model_trace.json, out/model_report.txt, out/model_report.html"
