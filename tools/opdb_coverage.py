#!/usr/bin/env python3
"""Prints the op_db coverage table of the neuron device: per OpInfo and dtype, how it ran
(native kernels, CPU fallback, or no aten op at all) and whether every sample agreed with CPU.

Reads the report ``tests/python/test_opdb.py`` writes (``out/opdb_report.json``); ``--run``
runs the survey first. ``--failing`` lists only the OpInfos with a failing sample.

    .venv/bin/python tools/opdb_coverage.py [--run] [--failing] [--report out/opdb_report.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _status(entry: dict) -> tuple[str, str]:
    """(how it ran, result) for one OpInfo/dtype entry of the report."""
    if "crashed" in entry:
        return "crashed", "FAIL"
    ran, grad_ran = entry.get("ran", 0), entry.get("grad_ran", 0)
    if ran == 0:
        return entry.get("kind", "none"), "no samples"
    fails = entry.get("disagree", 0) + entry.get("neuron_only_error", 0)
    grad_fails = entry.get("grad_disagree", 0) + entry.get("grad_neuron_only_error", 0)
    if fails == 0 and grad_fails == 0:
        return entry.get("kind", "none"), "pass"
    parts = [f"{fails}/{ran}"] if fails else []
    if grad_fails:
        parts.append(f"grad {grad_fails}/{grad_ran}")
    return entry.get("kind", "none"), "FAIL " + ", ".join(parts)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--report", default=os.path.join(REPO, "out", "opdb_report.json"))
    ap.add_argument("--run", action="store_true", help="run the op_db survey first")
    ap.add_argument("--failing", action="store_true", help="list only failing OpInfos")
    args = ap.parse_args()
    if args.run:
        test = os.path.join(REPO, "tests", "python", "test_opdb.py")
        subprocess.run([sys.executable, test], check=True, cwd=REPO, stdout=subprocess.DEVNULL)
    try:
        with open(args.report) as f:
            report = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        print(f"opdb_coverage: cannot read {args.report}: {e} (run with --run)", file=sys.stderr)
        return 2

    dtypes = [d.removeprefix("torch.") for d in report["dtypes"]]
    width = max(len(n) for n in report["ops"]) + 2
    print(f"{'OpInfo':<{width}}" + "".join(f"{d:<34}" for d in dtypes))
    counts = {d: {"native": 0, "fallback": 0, "none": 0, "pass": 0, "fail": 0} for d in dtypes}
    skipped = 0
    for name in sorted(report["ops"]):
        per_dtype = report["ops"][name]
        if "skipped" in per_dtype:  # nondeterministic: not compared
            skipped += 1
            continue
        cells, failing = [], False
        for d in dtypes:
            entry = per_dtype.get(d) or {}
            if not isinstance(entry, dict) or (not entry and "crashed" not in per_dtype):
                cells.append("-")
                continue
            kind, result = _status(per_dtype if "crashed" in per_dtype else entry)
            if result == "no samples":
                cells.append("-")
                continue
            ok = result == "pass"
            failing |= not ok
            counts[d]["pass" if ok else "fail"] += 1
            counts[d][kind if kind in counts[d] else "none"] += 1
            cells.append(f"{kind} {result}")
        if failing or not args.failing:
            print(f"{name:<{width}}" + "".join(f"{c:<34}" for c in cells))
    print()
    print(f"{skipped} OpInfos skipped as nondeterministic (random values by design)")
    for d in dtypes:
        c = counts[d]
        total = c["pass"] + c["fail"]
        pct = 100.0 * c["pass"] / max(1, total)
        print(
            f"{d}: {total} OpInfos with samples: {c['pass']} pass ({pct:.1f}%), {c['fail']} fail; "
            f"ran native {c['native']}, CPU fallback {c['fallback']}, no aten op {c['none']}"
        )
    t = report.get("totals", {})
    if t:
        print(
            f"samples: {t.get('samples')} compared, {t.get('agree', 0)} agree, "
            f"{t.get('agree_by_reference', 0)} agree against a float64 reference, "
            f"{t.get('both_raise', 0)} raise on both, {t.get('disagree', 0)} disagree, "
            f"{t.get('neuron_only_error', 0)} raise only on neuron"
        )
    if t.get("grad_samples"):
        print(
            f"gradients: {t['grad_samples']} samples, {t.get('grad_agree', 0)} agree, "
            f"{t.get('grad_agree_by_reference', 0)} agree against a float64 reference, "
            f"{t.get('grad_disagree', 0)} disagree, "
            f"{t.get('grad_neuron_only_error', 0)} raise only on neuron"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
