"""topk(50) and sort over vocab rows, the selection Hugging Face sampling runs every token.

TopKLogitsWarper is ``torch.topk(scores, 50)`` over the vocab row, TopPLogitsWarper a
``torch.sort`` of it. Each row prints the simulated time of one call on the neuron device (after
a warm-up call, synchronized) and its kernel launches, with the values checked against the CPU
and the CPU fallback checked unused:

    .venv/bin/python bench/selection_bench.py
"""

import neuronsim
import torch
from neuronsim import _C

SHAPES = [(1, 32000), (8, 32000), (1, 50257), (8, 50257), (1, 151936)]


def cost(fn):
    fn()
    torch.neuron.synchronize()
    neuronsim.clear_op_tracking()
    l0, t0 = _C._launches(), neuronsim.simulated_time_ns()
    out = fn()
    torch.neuron.synchronize()
    assert neuronsim.get_fallback_ops() == set(), neuronsim.get_fallback_ops()
    return out, (neuronsim.simulated_time_ns() - t0) / 1e3, _C._launches() - l0


def main():
    torch.manual_seed(0)
    print(f"{'shape':>14} {'topk(50) us':>12} {'sort us':>10} {'sort ns/elem':>13} {'launches':>9}")
    for shape in SHAPES:
        x = torch.randn(*shape)
        xd = x.to("neuron")
        (v, i), topk_us, l1 = cost(lambda xd=xd: torch.topk(xd, 50))
        (s, j), sort_us, l2 = cost(lambda xd=xd: torch.sort(xd, descending=True))
        want_v, want_i = torch.topk(x, 50)
        want_s, want_j = torch.sort(x, descending=True)
        assert torch.equal(v.cpu(), want_v) and torch.equal(i.cpu(), want_i)
        assert torch.equal(s.cpu(), want_s) and torch.equal(j.cpu(), want_j)
        per = sort_us * 1e3 / x.numel()
        print(f"{str(list(shape)):>14} {topk_us:12.1f} {sort_us:10.1f} {per:13.2f} {l1 + l2:9d}")


if __name__ == "__main__":
    main()
