#!/usr/bin/env bash
# Screenshots of what `neuronsim report` and `neuronsim whatif` show, for docs/ (docs/report.md):
# runs examples/mlp_train.py under a trace, writes the HTML report, a what-if sweep plot and the
# sensitivity ranking of it and of examples/elementwise_chain.py, then renders the HTML page in a
# headless Chromium (Debian's `chromium` package, installed here if missing).
#   tools/report_screenshots.sh [OUT_DIR]      (default docs/images)
# Needs the build (tools/setup.sh). The PNG plots are written by neuronsim itself (matplotlib).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-docs/images}
mkdir -p "$OUT"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
NS=.venv/bin/neuronsim

$NS run --progress never --trace "$WORK/mlp.json" examples/mlp_train.py
$NS report "$WORK/mlp.json" --html "$WORK/mlp_report.html" --roofline "$OUT/roofline.png"
$NS whatif --sweep host.kernel_launch_overhead_ns=2500:20000:x2 --plot "$OUT/whatif_sweep.png" \
  examples/mlp_train.py
$NS whatif --sensitivity --plot "$OUT/sensitivity_mlp.png" examples/mlp_train.py
$NS whatif --sensitivity --plot "$OUT/sensitivity_elementwise.png" examples/elementwise_chain.py

if ! command -v chromium >/dev/null 2>&1; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "report_screenshots: installing Debian's chromium (headless screenshots)"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
fi
# The page is long: a tall window keeps the summary, the time table and the timeline in one shot.
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1280,2600 \
  --screenshot="$PWD/$OUT/report_html.png" "file://$WORK/mlp_report.html" 2>/dev/null
echo "report_screenshots: wrote $OUT/report_html.png, roofline.png, whatif_sweep.png," \
  "sensitivity_mlp.png, sensitivity_elementwise.png"
