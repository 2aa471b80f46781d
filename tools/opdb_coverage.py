#!/usr/bin/env python3
"""Prints the op_db coverage table of the neuron device: per OpInfo and dtype, how it ran
(native kernels, CPU fallback, or no aten op at all) and whether every sample agreed with CPU,
then the pass rate over samples and the failing samples per kind.

Reads the report ``tests/python/test_opdb.py`` writes (``out/opdb_report.json``, in ISA mode
``out/opdb_isa_report.json``, for the CI subset ``out/opdb_isa_subset_report.json``); ``--run``
runs the survey first. ``--failing`` lists only the OpInfos with a failing sample.

``--mode isa`` is the ISA-mode benchmark: every op_db sample (float32 and bfloat16, forward and
gradients) with the device's programs computing the values into poisoned outputs (~10 minutes on
this machine). A sample passes when the device computed it (no CPU fallback, no host values)
and it agrees with the CPU; the ISA pass rate is passing samples over all samples.

No new CPU-fallback entries: ``tests/python/opdb_fallback_baseline.txt`` lists, by full overload
name, every ATen op that took the CPU fallback in the survey when it was last shrunk.
``--check-fallbacks`` compares the report with it and exits 1 on an op that falls back and is not
listed (a regression: make it native, or argue for it in the baseline) or on a listed op that no
longer falls back (it became native: shrink the baseline, ``--write-fallback-baseline``).
``test_opdb.py::test_opdb_no_new_fallbacks`` asserts the same.

    .venv/bin/python tools/opdb_coverage.py [--run] [--mode fast|isa] [--subset N] [--failing]
        [--report out/opdb_report.json] [--check-fallbacks | --write-fallback-baseline]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FALLBACK_BASELINE = os.path.join(REPO, "tests", "python", "opdb_fallback_baseline.txt")


def fallback_entries(report: dict) -> dict[str, list[str]]:
    """Every ATen op (full overload name) that took the CPU fallback in the survey, forward or
    gradient run, with where: ["OpInfo dtype", "OpInfo dtype grad", ...]."""
    seen: dict[str, list[str]] = {}
    for name, per_dtype in report["ops"].items():
        for dname, r in per_dtype.items():
            if not isinstance(r, dict):
                continue
            for key, tag in (("fallback_aten_ops", ""), ("grad_fallback_aten_ops", " grad")):
                for op in r.get(key, []):
                    seen.setdefault(op, []).append(f"{name} {dname}{tag}")
    return seen


def native_entries(report: dict) -> set[str]:
    """Every ATen op the survey saw run natively (forward or gradient run)."""
    out: set[str] = set()
    for per_dtype in report["ops"].values():
        for r in per_dtype.values():
            if isinstance(r, dict):
                out.update(r.get("native_aten_ops", []), r.get("grad_native_aten_ops", []))
    return out


def read_fallback_baseline(path: str = FALLBACK_BASELINE) -> set[str]:
    """The baseline's op names ('#' comments and blank lines skipped); a malformed or repeated
    name is an error."""
    names: set[str] = set()
    with open(path) as f:
        for i, line in enumerate(f, 1):
            name = line.split("#", 1)[0].strip()
            if not name:
                continue
            if not name.startswith("aten::") or any(c.isspace() for c in name):
                raise ValueError(f"{path}:{i}: not an ATen op name: {name!r}")
            if name in names:
                raise ValueError(f"{path}:{i}: {name} listed twice")
            names.add(name)
    return names


def compare_fallbacks(report: dict, baseline: set[str]) -> tuple[dict[str, list[str]], set[str]]:
    """(ops that fell back and are not in the baseline, with where; baseline ops that did not
    fall back)."""
    seen = fallback_entries(report)
    new = {op: where for op, where in sorted(seen.items()) if op not in baseline}
    return new, baseline - set(seen)


def fallback_problems(report: dict, baseline: set[str]) -> list[str]:
    """What the no-new-fallbacks check reports, one message per problem (empty: clean)."""
    new, gone = compare_fallbacks(report, baseline)
    out = []
    where = os.path.relpath(FALLBACK_BASELINE, REPO)
    if new:
        out.append(
            f"{len(new)} new CPU-fallback entries (not in {where}): "
            + "; ".join(f"{op} (in {', '.join(w[:3])})" for op, w in new.items())
        )
    if gone:
        out.append(
            f"{len(gone)} baseline entries no longer fall back (now native or not reached): "
            f"shrink the baseline, remove {sorted(gone)} (tools/opdb_coverage.py "
            "--write-fallback-baseline)"
        )
    return out


def write_fallback_baseline(report: dict, path: str = FALLBACK_BASELINE) -> int:
    seen = fallback_entries(report)
    with open(path, "w") as f:
        f.write(
            "# ATen ops (full overload names) that take the CPU fallback in the op_db survey\n"
            "# (tests/python/test_opdb.py), forward and gradient runs. No new entries may appear;\n"
            "# an op that becomes native must be removed (tools/opdb_coverage.py\n"
            "# --write-fallback-baseline rewrites this file from out/opdb_report.json).\n"
        )
        for op in sorted(seen):
            f.write(op + "\n")
    return len(seen)


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
    ap.add_argument("--report", default=None, help="default: the report of --mode/--subset")
    ap.add_argument("--run", action="store_true", help="run the op_db survey first")
    ap.add_argument("--mode", choices=("fast", "isa"), default="fast")
    ap.add_argument("--subset", type=int, default=0, help="the CI subset (one sample in N)")
    ap.add_argument("--failing", action="store_true", help="list only failing OpInfos")
    ap.add_argument(
        "--check-fallbacks",
        action="store_true",
        help="compare the CPU-fallback ops with the baseline; exit 1 on a difference",
    )
    ap.add_argument(
        "--write-fallback-baseline",
        action="store_true",
        help="rewrite the baseline from the report (after ops became native)",
    )
    args = ap.parse_args()
    if args.report is None:
        suffix = "" if args.mode == "fast" and not args.subset else f"_{args.mode}"
        suffix += "_subset" if args.subset else ""
        args.report = os.path.join(REPO, "out", f"opdb{suffix}_report.json")
    if args.run:
        test = os.path.join(REPO, "tests", "python", "test_opdb.py")
        cmd = [sys.executable, test, "--mode", args.mode, "--subset", str(args.subset)]
        subprocess.run(cmd, check=True, cwd=REPO, stdout=subprocess.DEVNULL)
    try:
        with open(args.report) as f:
            report = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        print(f"opdb_coverage: cannot read {args.report}: {e} (run with --run)", file=sys.stderr)
        return 2

    if args.write_fallback_baseline:
        n = write_fallback_baseline(report)
        print(f"opdb_coverage: {n} CPU-fallback ops written to {FALLBACK_BASELINE}")
        return 0
    if args.check_fallbacks:
        problems = fallback_problems(report, read_fallback_baseline())
        for p in problems:
            print(f"opdb_coverage: {p}", file=sys.stderr)
        if not problems:
            n = len(fallback_entries(report))
            print(f"opdb_coverage: {n} CPU-fallback ops, all in the baseline; none new")
        return 1 if problems else 0

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
    fallbacks = fallback_entries(report)
    print(
        f"CPU-fallback ATen ops (full overload names): {len(fallbacks)}; "
        f"native ATen ops: {len(native_entries(report))}"
    )
    if t.get("grad_samples"):
        print(
            f"gradients: {t['grad_samples']} samples, {t.get('grad_agree', 0)} agree, "
            f"{t.get('grad_agree_by_reference', 0)} agree against a float64 reference, "
            f"{t.get('grad_disagree', 0)} disagree, "
            f"{t.get('grad_neuron_only_error', 0)} raise only on neuron"
        )
    _print_pass_rate(report)
    return 0


def _print_pass_rate(report: dict) -> None:
    """The pass rate over samples and the failing samples per kind (forward and gradients)."""
    t = report.get("totals", {})
    mode = report.get("mode", "fast")
    what = f"{mode} mode" + (f", subset 1 in {report['subset']}" if report.get("subset") else "")
    kinds = ("wrong_value", "raises", "cpu_only_error", "fallback", "host_values")
    for label, n, p, prefix in (
        ("samples", t.get("samples", 0), t.get("pass", 0), "samples_"),
        ("gradient samples", t.get("grad_samples", 0), t.get("grad_pass", 0), "grad_samples_"),
    ):
        if not n:
            continue
        per_kind = ", ".join(f"{k} {t.get(prefix + k, 0)}" for k in kinds)
        print(f"{what}: {p} of {n} {label} pass ({100.0 * p / n:.1f}%); not passing: {per_kind}")
    both = t.get("samples", 0) + t.get("grad_samples", 0)
    if both:
        passed = t.get("pass", 0) + t.get("grad_pass", 0)
        print(f"{what}: pass rate over all samples {passed}/{both} = {100.0 * passed / both:.1f}%")
    if report.get("crashes"):
        print(f"crashed OpInfos: {report['crashes']}")


if __name__ == "__main__":
    sys.exit(main())
