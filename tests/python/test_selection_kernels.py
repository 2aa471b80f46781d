"""Selection, scans and compaction run natively and match CPU: topk, sort/argsort (stable too),
cumsum/cumprod, nonzero/nonzero_static/masked_select, on their op_db samples (float32, plus
int32 where the OpInfo has it), and a Mixtral-style MoE layer (router softmax, topk, expert
dispatch through nonzero and index ops) forward and backward with none of these ops on the CPU
fallback.
"""

import copy
import warnings

import neuronsim
import pytest
import torch
from tensor_trees import base_names, to_cpu, to_neuron
from torch.testing._internal.common_methods_invocations import op_db

OPS = [
    "topk",
    "sort",
    "argsort",
    "cumsum",
    "cumprod",
    "nonzero",
    "nonzero_static",
    "masked_select",
]
FAMILY = {
    "aten::topk",
    "aten::sort",
    "aten::cumsum",
    "aten::cumprod",
    "aten::nonzero",
    "aten::nonzero_static",
    "aten::masked_select",
}
OPINFOS = [o for o in op_db if o.name in OPS and o.variant_test_name == ""]


@pytest.mark.parametrize("op", OPINFOS, ids=lambda o: o.name)
@pytest.mark.parametrize("dtype", [torch.float32, torch.int32], ids=str)
def test_opinfo_samples_native_and_match_cpu(op, dtype):
    if dtype not in op.supported_dtypes("cpu"):
        pytest.skip("dtype not supported by the OpInfo")
    torch.manual_seed(0)
    native = 0
    for s in op.sample_inputs("cpu", dtype):
        try:
            expected = op(s.input, *s.args, **s.kwargs)
        except Exception:
            continue
        neuronsim.clear_op_tracking()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = op(to_neuron(s.input), *to_neuron(s.args), **to_neuron(s.kwargs))
        torch.testing.assert_close(to_cpu(got), expected, equal_nan=True)
        fallback = base_names(neuronsim.get_fallback_ops()) & FAMILY
        executed = base_names(neuronsim.get_executed_ops()) & FAMILY
        # Only the kernels' documented limits fall back (rows longer than SBUF holds, dims
        # that do not fold into rows, broadcast masks).
        if not fallback:
            native += executed != set()
    assert native > 0, f"{op.name}: no sample ran natively"


def test_long_sort_and_scan_rows():
    """Rows over one 128-partition tile, strided dims, descending stable sort with ties."""
    torch.manual_seed(0)
    x = torch.randint(0, 5, (300, 40)).float()
    for fn in [
        lambda t: torch.sort(t, dim=1, descending=True, stable=True),
        lambda t: torch.sort(t, dim=0, stable=True),
        lambda t: torch.topk(t, 3, dim=0, largest=False),
        lambda t: torch.cumsum(t, 0),
        lambda t: torch.cumprod(t * 0.5, 1),
        lambda t: torch.nonzero(t > 3),
        lambda t: torch.masked_select(t, t > 3),
    ]:
        neuronsim.clear_op_tracking()
        got, want = fn(x.to("neuron")), fn(x)
        torch.testing.assert_close(to_cpu(got), to_cpu(want))
        assert neuronsim.get_fallback_ops() == set()


def test_mixtral_moe_layer_runs_without_fallback_from_these_families():
    from transformers import MixtralConfig
    from transformers.models.mixtral.modeling_mixtral import MixtralSparseMoeBlock

    cfg = MixtralConfig(
        hidden_size=32, intermediate_size=64, num_local_experts=4, num_experts_per_tok=2
    )
    torch.manual_seed(0)
    block = MixtralSparseMoeBlock(cfg)
    for p in block.parameters():
        torch.nn.init.normal_(p, std=0.1)
    x = torch.randn(2, 5, 32)
    device_block = copy.deepcopy(block).to("neuron")
    block(x).square().mean().backward()
    neuronsim.clear_op_tracking()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = device_block(x.to("neuron"))
        out.square().mean().backward()
    assert base_names(neuronsim.get_fallback_ops()) & FAMILY == set()
    assert {"aten::topk", "aten::nonzero"} <= neuronsim.get_executed_ops()
    torch.testing.assert_close(out.cpu(), block(x))
    for a, b in zip(block.parameters(), device_block.parameters(), strict=True):
        torch.testing.assert_close(b.grad.cpu(), a.grad)
