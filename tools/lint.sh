#!/usr/bin/env bash
# Style checks: clang-format on the C++ (the root .clang-format), ruff on the Python (ruff.toml).
set -euo pipefail
cd "$(dirname "$0")/.."
git ls-files '*.cpp' '*.h' | xargs clang-format --dry-run --Werror
.venv/bin/ruff check python tests bench tools examples
.venv/bin/ruff format --check --quiet python tests bench tools examples
echo "lint: clang-format and ruff clean"
