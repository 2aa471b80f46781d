"""The CPU fallback's write-back swept over every mutating op op_db reaches: each OpInfo's
in-place variant and out= variant run on neuron with every ATen op whose schema writes an
argument forced through the CPU fallback (neuronsim._C._cpu_fallback_call, from a dispatch
mode), and the written tensors (and results) are compared with the CPU's."""

import os
import warnings

import neuronsim
import torch
from conftest import run_python
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

SAMPLES_PER_OP = 2
# Storage and metadata ops every backend registers natively: the fallback never runs them.
NOT_FORCED = {"aten::resize_", "aten::set_", "aten::resize_as_", "aten::as_strided_"}
# linalg.matrix_rank(out=) on neuron gives 0 under any TorchDispatchMode even when no op is
# forced (without a mode it is right): a separate issue, not the fallback's.
SKIP_OPINFOS = {("linalg.matrix_rank", "out")}


def _writes(schema) -> bool:
    return any(a.alias_info is not None and a.alias_info.is_write for a in schema.arguments)


class _ForceFallback(TorchDispatchMode):
    """Sends every mutating ATen op on neuron tensors through the CPU fallback."""

    def __init__(self):
        super().__init__()
        self.forced: set[str] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        schema = func._schema
        leaves, _ = tree_flatten((args, kwargs))
        on_neuron = any(isinstance(t, torch.Tensor) and t.is_neuron for t in leaves)
        if not on_neuron or not _writes(schema) or schema.name in NOT_FORCED:
            return func(*args, **kwargs)
        self.forced.add(f"{schema.name}.{schema.overload_name}".rstrip("."))
        return neuronsim._C._cpu_fallback_call(schema.name, schema.overload_name, *args, **kwargs)


def _to(x, device):
    """A copy of x's tensors on `device` (CPU ones too: in-place variants must not write the
    sample), with factory `device=` keywords pointing there."""
    if isinstance(x, dict):
        return {k: device if k == "device" else _to(v, device) for k, v in x.items()}
    return tree_map(lambda t: t.clone().to(device) if isinstance(t, torch.Tensor) else t, x)


def _cpu(x):
    return tree_map(lambda t: t.cpu() if isinstance(t, torch.Tensor) else t, x)


def _run(fn):
    try:
        return fn(), None
    except Exception as e:  # noqa: BLE001  (both sides raising is agreement)
        return None, e


def _cases():
    from torch.testing._internal.common_methods_invocations import op_db

    for op in op_db:
        if op.inplace_variant is not None:
            yield op, "inplace"
        if op.supports_out:
            yield op, "out"


def _check(op, variant, sample, mode):
    args, kwargs = sample.args, sample.kwargs
    if variant == "inplace":

        def call(device):
            x = _to(sample.input, device)
            return lambda: (op.inplace_variant(x, *_to(args, device), **_to(kwargs, device)), x)
    else:
        expected, err = _run(lambda: op(sample.input, *args, **kwargs))
        if err is not None:
            return "skip"

        def call(device):
            out = tree_map(
                lambda t: torch.empty(0, dtype=t.dtype, device=device)
                if isinstance(t, torch.Tensor)
                else t,
                expected,
            )
            x = _to(sample.input, device)
            return lambda: (
                op(x, *_to(args, device), out=out, **_to(kwargs, device)),
                out,
            )

    # Both sides draw from the CPU stream (as TorchNeuron's random ops): each starts at one seed.
    torch.manual_seed(0)
    cpu, cpu_err = _run(call("cpu"))
    torch.manual_seed(0)
    with mode:
        dev, dev_err = _run(call("neuron"))
    if cpu_err is not None or dev_err is not None:
        assert (cpu_err is None) == (
            dev_err is None
        ), f"{op.name} {variant}: cpu raised {cpu_err!r}, neuron raised {dev_err!r}"
        return "both_raise"
    torch.testing.assert_close(
        _cpu(dev[1]), cpu[1], equal_nan=True, msg=lambda m: f"{op.name} {variant}: {m}"
    )
    return "ok"


def _sweep():
    mode = _ForceFallback()
    counts = {"ok": 0, "both_raise": 0, "skip": 0}
    failures = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for op, variant in _cases():
            if (op.name, variant) in SKIP_OPINFOS:
                continue
            if op.has_nondeterministic_output or not op.supports_dtype(torch.float32, "cpu"):
                continue
            torch.manual_seed(0)
            try:
                samples = list(op.sample_inputs("cpu", torch.float32))[:SAMPLES_PER_OP]
            except Exception:  # noqa: BLE001  (an OpInfo whose samples need CUDA)
                continue
            for sample in samples:
                torch.manual_seed(0)
                try:
                    counts[_check(op, variant, sample, mode)] += 1
                except AssertionError as e:
                    failures.append(str(e)[:300])
    print(
        f"\nfallback write-back sweep: {len(mode.forced)} mutating ATen schemas forced through "
        f"the fallback; samples {counts}; failures {len(failures)}"
    )
    assert len(mode.forced) >= 150, sorted(mode.forced)
    assert not failures, "\n".join(failures)


def test_fallback_write_back_matches_cpu_for_every_mutating_op():
    # In a fresh interpreter: the forced fallbacks would use up the process's once-per-op
    # fallback warnings that other tests check.
    r = run_python(
        f"import sys; sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})\n"
        "from test_fallback_writeback_sweep import _sweep\n_sweep()\n",
        timeout=900,
    )
    print(r.stdout[-3000:])
    assert r.returncode == 0, r.stdout[-5000:] + r.stderr[-5000:]
    assert "fallback write-back sweep" in r.stdout
