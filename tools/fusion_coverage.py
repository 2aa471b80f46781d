"""How many ops with an eager device kernel also fuse under torch.compile, from the op library
(kernels/ops/op_rule.h: a rule with an expression or a lowering fuses) and, with --measure, by
compiling each elementwise op on small neuron tensors and reading ``neuronsim.compile_stats()``.

    NEURON_SIM=1 .venv/bin/python tools/fusion_coverage.py [--measure] [--list]
"""

from __future__ import annotations

import argparse
import functools
import sys


def rules() -> list[dict]:
    import neuronsim  # noqa: F401  (registers the device)

    return list(neuronsim._C._op_rules())


def static_coverage(list_unfused: bool) -> None:
    rs = [r for r in rules() if r["eager"] and r["name"].startswith("aten::")]
    fused = [r for r in rs if r["fuses"]]
    print(f"ops with an eager kernel: {len(rs)}")
    print(f"  of them fuse under torch.compile (expression or lowering): {len(fused)}")
    print(f"  coverage: {len(fused) / max(len(rs), 1):.1%}")
    if list_unfused:
        print("run as their eager kernel inside a compiled launch:")
        for r in sorted(rs, key=lambda r: r["name"]):
            if not r["fuses"]:
                print(f"  {r['name']}")


def sample_args(schema, device):
    """Arguments for one call: float tensors for tensors, small numbers for scalars, defaults
    elsewhere (None when the schema gives no usable value)."""
    import torch

    args = []
    for a in schema.arguments:
        if a.kwarg_only:
            break
        t = str(a.type)
        if t.startswith("Tensor"):
            args.append(torch.rand(4, 8, device=device) + 0.25)
        elif t in ("Scalar", "float", "number"):
            args.append(0.5)
        elif t == "int":
            args.append(1)
        elif t == "bool":
            args.append(False)
        elif a.has_default_value():
            args.append(a.default_value)
        else:
            return None
    return args


def _times_one(op, *args):
    return op(*args) * 1.0


def measured_coverage() -> None:
    import neuronsim
    import torch
    from neuronsim.torch_compile import stats

    device = torch.device("neuron")
    fused = not_fused = skipped = 0
    missing = []
    for r in rules():
        name = r["name"]
        if not (r["expression"] and name.startswith("aten::")):
            continue
        packet = getattr(torch.ops.aten, name[len("aten::") :], None)
        overload = getattr(packet, "default", None) or getattr(packet, "Tensor", None)
        args = sample_args(overload._schema, device) if overload is not None else None
        if args is None:
            skipped += 1
            continue
        try:
            overload(*args)  # the eager call must work for the sample to mean anything
        except Exception:
            skipped += 1
            continue
        before = stats.compile_stats()["fused_nodes"]
        torch._dynamo.reset()
        try:
            fn = functools.partial(_times_one, overload)
            torch.compile(fn, backend="neuron", dynamic=False)(*args)
        except Exception:
            skipped += 1
            continue
        if stats.compile_stats()["fused_nodes"] - before >= 2:
            fused += 1
        else:
            not_fused += 1
            missing.append(name)
    total = fused + not_fused
    print(f"elementwise ops compiled one by one: {total} ({skipped} without a usable sample)")
    print(f"  fused: {fused} ({fused / max(total, 1):.1%}); not fused: {not_fused}")
    for n in missing:
        print(f"    {n}: {neuronsim.compile_stats()['not_fused']}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--measure", action="store_true", help="compile each elementwise op too")
    p.add_argument("--list", action="store_true", help="list the ops that do not fuse")
    a = p.parse_args()
    static_coverage(a.list)
    if a.measure:
        measured_coverage()
    return 0


if __name__ == "__main__":
    sys.exit(main())
