"""op_db comparison suite: every OpInfo in PyTorch's ``op_db`` run on the CPU and on the neuron
device, sample by sample, for float32 and bfloat16.

For each OpInfo and dtype the samples come from ``op.sample_inputs("cpu", dtype)`` (generated
under ``torch.manual_seed(0)``, so the set is deterministic). Every tensor of a sample is copied to
the device with ``.to("neuron")`` (a ``device="cpu"`` keyword, as factory functions take, becomes
``"neuron"``), the op runs on both sides, the sample's ``output_process_fn_grad`` is applied (as
PyTorch's own ``test_compare_cpu`` does) and the device outputs come back with ``.cpu()``.

Comparison (``torch.testing.assert_close``, ``equal_nan=True``) uses the default tolerances for
the output dtype (float32: rtol 1.3e-6, atol 1e-5; bfloat16: rtol 1.6e-2, atol 1e-5): in the
default (fast) mode the values of native ops are computed by ATen's CPU kernels on zero-copy views
and the fallback runs the CPU kernel itself, so results should match the CPU closely (the device
copy of a non-contiguous input is dense, which can change a kernel's summation order by a few
ulps - well inside these tolerances). 64-bit outputs are compared at the tolerances of their 32-bit
counterparts (float64 -> float32, int64 exactly): native ops compute 64-bit data at 32 bits, the
device's documented behaviour. Output dtypes and shapes must match exactly. Both sides raising
counts as agreement.

Skipped as nondeterministic: OpInfos with ``has_nondeterministic_output``, those PyTorch itself
skips in ``test_compare_cpu`` because "output is non-deterministic", and the random ops in
``RANDOM_OPS`` (the device draws from its own Philox generator, so values differ from the CPU's by
design; ``test_autograd_models`` checks the device generator's reproducibility).

Subset: running all ~35k samples takes far longer on this 2-core machine than the suite's budget
(sample generation alone is a large part, and each device op launches a simulated kernel), so the
test runs **every OpInfo and both dtypes, but at most ``MAX_SAMPLES`` (the first, in op_db's
deterministic order) samples per OpInfo per dtype**. ``NEURON_OPDB_MAX_SAMPLES=0`` runs all
samples (for a manual full survey: ``python tests/python/test_opdb.py``).

The test writes ``out/opdb_report.json``: totals, and per OpInfo/dtype the sample counts
(ran, agree, both_raise, disagree, neuron_only_error, cpu_only_error), the ATen ops that ran
natively and through the CPU fallback (``neuronsim.get_executed_ops()`` /
``get_fallback_ops()`` around the device call) and a classification: ``native`` (no fallback op),
``fallback`` (some ATen op fell back) or ``none`` (no device op ran, e.g. a metadata-only view).

It asserts that the set of (OpInfo, dtype) pairs with a disagreement equals ``KNOWN_DISAGREE``
and that the pairs with neuron-only errors equal ``KNOWN_NEURON_ONLY_ERRORS``: each entry there
is a backend bug (documented next to it), and an entry that starts agreeing must be removed.
"""

from __future__ import annotations

import json
import os
import sys
import time
import warnings
from collections import Counter

import pytest
import torch
from torch.utils._pytree import tree_flatten, tree_map

import neuronsim

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REPORT = os.path.join(REPO, "out", "opdb_report.json")

MAX_SAMPLES = int(os.environ.get("NEURON_OPDB_MAX_SAMPLES", "4"))
DTYPES = (torch.float32, torch.bfloat16)

# Random ops (values come from a generator; the device uses its own Philox streams).
RANDOM_OPS = {
    "bernoulli",
    "cauchy",
    "exponential",
    "geometric",
    "log_normal",
    "multinomial",
    "normal",
    "rand_like",
    "randint",
    "randint_like",
    "randn",
    "randn_like",
    "uniform",
    "nn.functional.alpha_dropout",
    "nn.functional.dropout",
    "nn.functional.dropout2d",
    "nn.functional.dropout3d",
    "nn.functional.feature_alpha_dropout",
    "nn.functional.rrelu",
    "nn.functional.multi_head_attention_forward",  # dropout inside
}

# (op full name, dtype) pairs whose device results disagree with the CPU: each is a backend bug.
KNOWN_DISAGREE: dict[tuple[str, str], str] = {}

# (op full name, dtype) pairs that raise on the device for samples the CPU runs: backend bugs.
KNOWN_NEURON_ONLY_ERRORS: dict[tuple[str, str], str] = {}


def _full_name(op) -> str:
    return op.name + ("." + op.variant_test_name if op.variant_test_name else "")


def _is_nondeterministic(op) -> bool:
    if op.has_nondeterministic_output or op.name in RANDOM_OPS:
        return True
    for d in op.decorators:
        if getattr(d, "test_name", None) != "test_compare_cpu":
            continue
        for f in getattr(d, "decorators", ()):
            cells = getattr(f, "__closure__", None) or ()
            for c in cells:
                try:
                    v = c.cell_contents
                except ValueError:
                    continue
                if isinstance(v, str) and "non-deterministic" in v:
                    return True
    return False


def _to_neuron(x):
    return x.to("neuron") if isinstance(x, torch.Tensor) else x


def _to_cpu(x):
    return x.cpu() if isinstance(x, torch.Tensor) else x


def _neuron_sample(sample):
    ns = sample.transform(_to_neuron)
    dev = ns.kwargs.get("device")
    if dev is not None and torch.device(dev).type == "cpu":
        ns.kwargs["device"] = "neuron"
    return ns


# Output dtypes computed at 32 bits on the device and the dtype whose tolerances apply.
_AT32 = {torch.float64: torch.float32, torch.complex128: torch.complex64}


def _compare(actual, expected) -> None:
    """Raises AssertionError when the device output (moved to CPU) differs from the CPU's."""
    a_leaves, a_spec = tree_flatten(actual)
    e_leaves, e_spec = tree_flatten(expected)
    if a_spec != e_spec:
        raise AssertionError(f"output structure differs: {a_spec} vs {e_spec}")
    for a, e in zip(a_leaves, e_leaves):
        if isinstance(e, torch.Tensor):
            if not isinstance(a, torch.Tensor):
                raise AssertionError(f"expected a tensor, got {type(a).__name__}")
            if a.dtype != e.dtype or a.shape != e.shape or a.layout != e.layout:
                raise AssertionError(
                    f"metadata differs: {a.dtype}{tuple(a.shape)} vs {e.dtype}{tuple(e.shape)}"
                )
            if e.layout != torch.strided:
                a, e = a.to_dense(), e.to_dense()
            tol = {}
            if e.dtype in _AT32:
                ref = _AT32[e.dtype]
                a32, e32 = a.to(ref), e.to(ref)
                from torch.testing._comparison import default_tolerances

                rtol, atol = default_tolerances(a32, e32)
                tol = {"rtol": rtol, "atol": atol}
            torch.testing.assert_close(a, e, equal_nan=True, check_device=False, **tol)
        elif isinstance(e, float):
            torch.testing.assert_close(a, e, equal_nan=True)
        elif a != e:
            raise AssertionError(f"{a!r} != {e!r}")


def run_opdb(max_samples: int = MAX_SAMPLES, ops=None, verbose: bool = False) -> dict:
    """Runs the comparison; returns the report (see the module docstring)."""
    from torch.testing._internal.common_methods_invocations import op_db

    ops = op_db if ops is None else ops
    totals = Counter()
    per_op: dict[str, dict] = {}
    t_start = time.perf_counter()
    neuron_s = cpu_s = 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for op in ops:
            name = _full_name(op)
            if verbose:
                print("op", name, file=sys.stderr, flush=True)
            if _is_nondeterministic(op):
                per_op[name] = {"skipped": "nondeterministic"}
                totals["ops_skipped_nondeterministic"] += 1
                continue
            totals["ops"] += 1
            entry: dict = {}
            for dtype in DTYPES:
                dname = str(dtype).removeprefix("torch.")
                if not op.supports_dtype(dtype, "cpu"):
                    continue
                r = Counter()
                native, fallback = set(), set()
                failures: list[str] = []
                torch.manual_seed(0)
                try:
                    samples = iter(op.sample_inputs("cpu", dtype, requires_grad=False))
                except Exception as e:  # noqa: BLE001
                    entry[dname] = {"sample_generation_error": repr(e)[:200]}
                    totals["sample_generation_errors"] += 1
                    continue
                n = 0
                while max_samples <= 0 or n < max_samples:
                    try:
                        sample = next(samples)
                    except StopIteration:
                        break
                    except Exception as e:  # noqa: BLE001
                        entry.setdefault("sample_generation_error", repr(e)[:200])
                        break
                    n += 1
                    r["ran"] += 1
                    ns = _neuron_sample(sample)
                    t0 = time.perf_counter()
                    cpu_out = cpu_err = None
                    try:
                        cpu_out = sample.output_process_fn_grad(
                            op(sample.input, *sample.args, **sample.kwargs)
                        )
                    except Exception as e:  # noqa: BLE001
                        cpu_err = e
                    t1 = time.perf_counter()
                    neuronsim.clear_op_tracking()
                    dev_out = dev_err = None
                    try:
                        out = ns.output_process_fn_grad(op(ns.input, *ns.args, **ns.kwargs))
                        dev_out = tree_map(_to_cpu, out)
                    except Exception as e:  # noqa: BLE001
                        dev_err = e
                    t2 = time.perf_counter()
                    cpu_s += t1 - t0
                    neuron_s += t2 - t1
                    native |= neuronsim.get_executed_ops()
                    fallback |= neuronsim.get_fallback_ops()
                    if cpu_err is not None and dev_err is not None:
                        r["both_raise"] += 1
                        r["agree"] += 1
                        continue
                    if dev_err is not None:
                        r["neuron_only_error"] += 1
                        failures.append(f"sample {n - 1}: neuron raised {dev_err!r}"[:300])
                        continue
                    if cpu_err is not None:
                        r["cpu_only_error"] += 1
                        failures.append(f"sample {n - 1}: only cpu raised {cpu_err!r}"[:300])
                        continue
                    try:
                        _compare(dev_out, cpu_out)
                        r["agree"] += 1
                    except Exception as e:  # noqa: BLE001
                        r["disagree"] += 1
                        failures.append(f"sample {n - 1}: {str(e).strip()}"[:400])
                totals["samples"] += r["ran"]
                for k in ("agree", "both_raise", "disagree", "neuron_only_error", "cpu_only_error"):
                    totals[k] += r[k]
                kind = "fallback" if fallback else ("native" if native else "none")
                totals[f"op_dtypes_{kind}"] += 1
                entry[dname] = {
                    **{k: r[k] for k in ("ran", "agree", "both_raise", "disagree",
                                         "neuron_only_error", "cpu_only_error")},
                    "kind": kind,
                    "native_aten_ops": sorted(native),
                    "fallback_aten_ops": sorted(fallback),
                    "failures": failures[:5],
                }
                if verbose and failures:
                    print(name, dname, failures[0], file=sys.stderr)
            per_op[name] = entry
    kinds = Counter()
    for e in per_op.values():
        ks = {v["kind"] for v in e.values() if isinstance(v, dict) and "kind" in v}
        if ks:
            kinds["fallback" if "fallback" in ks else ("native" if "native" in ks else "none")] += 1
    totals.update({f"ops_{k}": v for k, v in kinds.items()})
    report = {
        "max_samples_per_op_dtype": max_samples,
        "dtypes": [str(d) for d in DTYPES],
        "seconds_total": round(time.perf_counter() - t_start, 1),
        "seconds_cpu_ops": round(cpu_s, 1),
        "seconds_neuron_ops": round(neuron_s, 1),
        "totals": dict(totals),
        "ops": per_op,
    }
    return report


def _pairs(report: dict, key: str) -> set[tuple[str, str]]:
    out = set()
    for name, entry in report["ops"].items():
        for dname, r in entry.items():
            if isinstance(r, dict) and r.get(key, 0):
                out.add((name, dname))
    return out


def _write(report: dict) -> None:
    os.makedirs(os.path.dirname(REPORT), exist_ok=True)
    with open(REPORT, "w") as f:
        json.dump(report, f, indent=1, sort_keys=True)


@pytest.mark.slow
def test_opdb_matches_cpu():
    report = run_opdb()
    _write(report)
    t = report["totals"]
    assert t["ops"] > 600 and t["samples"] > 2000, t
    assert t.get("op_dtypes_native", 0) > 200, t

    disagree = _pairs(report, "disagree") | _pairs(report, "cpu_only_error")
    details = {
        p: report["ops"][p[0]][p[1]]["failures"][:2] for p in disagree - set(KNOWN_DISAGREE)
    }
    assert disagree == set(KNOWN_DISAGREE), (
        f"new disagreements: {details}; fixed (remove from KNOWN_DISAGREE): "
        f"{sorted(set(KNOWN_DISAGREE) - disagree)}"
    )
    errors = _pairs(report, "neuron_only_error")
    details = {
        p: report["ops"][p[0]][p[1]]["failures"][:2]
        for p in errors - set(KNOWN_NEURON_ONLY_ERRORS)
    }
    assert errors == set(KNOWN_NEURON_ONLY_ERRORS), (
        f"new neuron-only errors: {details}; fixed (remove from KNOWN_NEURON_ONLY_ERRORS): "
        f"{sorted(set(KNOWN_NEURON_ONLY_ERRORS) - errors)}"
    )


if __name__ == "__main__":
    rep = run_opdb(verbose=True)
    _write(rep)
    print(json.dumps({k: rep[k] for k in rep if k != "ops"}, indent=1))
