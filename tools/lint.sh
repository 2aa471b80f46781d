#!/usr/bin/env bash
# Style checks: clang-format on the C++ (the root .clang-format), ruff on the Python (ruff.toml),
# and the include layers (tools/include_layers.py: no include against the layering, no cycle).
set -euo pipefail
cd "$(dirname "$0")/.."
git ls-files '*.cpp' '*.h' | xargs clang-format --dry-run --Werror
.venv/bin/ruff check python tests bench tools examples
.venv/bin/ruff format --check --quiet python tests bench tools examples
.venv/bin/python tools/include_layers.py
echo "lint: clang-format, ruff and include layers clean"
