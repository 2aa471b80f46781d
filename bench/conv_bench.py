"""Simulated time of a convolution on the neuron device against its FLOP bound on TensorE.

Runs F.conv2d (and its backward) on neuron tensors through the user path, reads the simulated
device time the op took (neuronsim.simulated_time_ns around a synchronize), and divides the
op's FLOPs by TensorE's peak from the device preset (rows x columns MACs per cycle at the
TensorE clock). Prints both and their ratio, measured in this run.

    .venv/bin/python bench/conv_bench.py [--n 8 --c 64 --hw 56 --k 3]
"""

import argparse
import json

import neuronsim
import torch
import torch.nn.functional as F


def peak_flops() -> float:
    t = json.loads(neuronsim._C._preset_text("trn1"))["tensor"]
    return 2.0 * t["rows"]["value"] * t["columns"]["value"] * t["frequency_ghz"]["value"] * 1e9


def timed(fn) -> float:
    torch.neuron.synchronize()
    t0 = neuronsim.simulated_time_ns()
    out = fn()
    torch.neuron.synchronize()
    return neuronsim.simulated_time_ns() - t0, out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--c", type=int, default=64)
    ap.add_argument("--hw", type=int, default=56)
    ap.add_argument("--k", type=int, default=3)
    a = ap.parse_args()
    torch.manual_seed(0)
    x = torch.randn(a.n, a.c, a.hw, a.hw, dtype=torch.bfloat16, device="neuron")
    w = torch.randn(a.c, a.c, a.k, a.k, dtype=torch.bfloat16, device="neuron")
    conv = lambda: F.conv2d(x, w, padding=a.k // 2)  # noqa: E731
    timed(conv)  # warm up (first launch)
    fwd_ns, y = timed(conv)
    flops = 2.0 * a.n * a.c * a.c * a.k * a.k * y.shape[2] * y.shape[3]
    bound_ns = flops / peak_flops() * 1e9
    xg = x.detach().requires_grad_()
    wg = w.detach().requires_grad_()
    yg = F.conv2d(xg, wg, padding=a.k // 2)
    g = torch.ones_like(yg)
    bwd_ns, _ = timed(lambda: torch.autograd.grad(yg, (xg, wg), g))
    print(f"conv2d {a.k}x{a.k}, N={a.n}, C={a.c}->{a.c}, {a.hw}x{a.hw}, bf16")
    print(
        f"  forward : {fwd_ns / 1e3:9.1f} us simulated, FLOP bound {bound_ns / 1e3:7.1f} us "
        f"({flops / 1e9:.2f} GFLOP at {peak_flops() / 1e12:.1f} TFLOP/s): "
        f"{bound_ns / fwd_ns:.0%} of TensorE peak"
    )
    print(
        f"  backward: {bwd_ns / 1e3:9.1f} us simulated, FLOP bound {2 * bound_ns / 1e3:7.1f} us "
        f"(input + weight grads): {2 * bound_ns / bwd_ns:.0%} of TensorE peak"
    )
    print(f"  fallback ops: {sorted(neuronsim.get_fallback_ops()) or 'none'}")


if __name__ == "__main__":
    main()
