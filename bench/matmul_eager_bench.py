"""Simulated device time of eager matmuls through PyTorch (aten::mm / addmm / bmm / linear).

Each row runs one op on the neuron device a few times back to back (the host runs ahead, so
the kernels queue and the launch overhead hides) and prints the simulated time per op from
device events, next to its roofline bound: max(TensorE 2mnk / peak for the dtype, the bytes of
the operands and the result / min(HBM stack, DMA engines)). Compare two trees by running it in
each (see bench/README.md).

    .venv/bin/python bench/matmul_eager_bench.py [--preset trn1|trn2]
"""

import argparse
import json
import pathlib

import neuronsim
import torch
import torch.nn.functional as F


def per_op_us(fn, reps=4):
    fn()  # builds and validates once; the same program then runs from the cache
    torch.neuron.synchronize()
    start, end = torch.neuron.Event(enable_timing=True), torch.neuron.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e3 / reps


def cases():
    bf16, fp32 = torch.bfloat16, torch.float32

    def mm(m, k, n, dt):
        a, b = (
            torch.randn(m, k, dtype=dt, device="neuron"),
            torch.randn(k, n, dtype=dt, device="neuron"),
        )
        return (
            f"mm {m}x{k} @ {k}x{n} {dt}".replace("torch.", ""),
            (m, k, n, dt, [a, b]),
            lambda: a @ b,
        )

    def linear(m, k, n, dt, bias=True):
        x = torch.randn(m, k, dtype=dt, device="neuron")
        w = torch.randn(n, k, dtype=dt, device="neuron")
        b = torch.randn(n, dtype=dt, device="neuron") if bias else None
        name = f"linear x[{m},{k}] w[{n},{k}]{' +b' if bias else ''} {dt}".replace("torch.", "")
        return name, (m, k, n, dt, [x, w] + ([b] if bias else [])), lambda: F.linear(x, w, b)

    def bmm(b, m, k, n, dt, transposed_rhs):
        x = torch.randn(b, m, k, dtype=dt, device="neuron")
        y = torch.randn(b, n, k, dtype=dt, device="neuron") if transposed_rhs else None
        z = torch.randn(b, k, n, dtype=dt, device="neuron")
        rhs = y.transpose(1, 2) if transposed_rhs else z
        what = "q @ k^T" if transposed_rhs else "p @ v"
        name = f"bmm {what} [{b},{m},{k}]x[{b},{k},{n}] {dt}".replace("torch.", "")
        return name, (b * m, k, n, dt, [x, rhs]), lambda: torch.bmm(x, rhs)

    # Values come from ATen on the host (fast mode), so shapes stay small enough for the CPU.
    return [
        mm(2048, 2048, 2048, fp32),
        mm(2048, 2048, 2048, bf16),
        mm(512, 8192, 1024, bf16),
        linear(2048, 2048, 2048, bf16),
        linear(1024, 1024, 4096, fp32),
        linear(8, 4096, 4096, bf16, bias=False),
        linear(64, 2048, 8192, bf16, bias=False),
        bmm(16, 512, 128, 512, bf16, True),
        bmm(16, 512, 512, 128, bf16, False),
    ]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default="trn1")
    args = ap.parse_args()
    neuronsim.configure(preset=args.preset)
    torch.manual_seed(0)
    root = pathlib.Path(__file__).resolve().parent.parent
    preset = json.loads((root / "device_model" / "presets" / f"{args.preset}.json").read_text())
    t, dma = preset["tensor"], preset["dma"]
    flops = 2 * t["rows"]["value"] * t["columns"]["value"] * t["frequency_ghz"]["value"] * 1e9
    dma_bw = dma["engines"]["value"] * dma["engine_bandwidth_gbps"]["value"] * 1e9
    mem_bw = min(preset["hbm"]["bandwidth_gbps"]["value"] * 1e9, dma_bw)
    print(f"matmul_eager_bench: {args.preset}, simulated time per op (device events)\n")
    print(f"{'op':<50} {'simulated us':>13} {'bound us':>9} {'binds':>8} {'ratio':>6}")
    for name, (m, k, n, dt, tensors), fn in cases():
        us = per_op_us(fn)
        factor = t["fp32_cost_factor"]["value"] if dt == torch.float32 else 1.0
        tensor_us = 2 * m * k * n * factor / flops * 1e6
        nbytes = (
            sum(x.numel() * x.element_size() for x in tensors) + m * n * tensors[0].element_size()
        )
        memory_us = nbytes / mem_bw * 1e6
        bound = max(tensor_us, memory_us)
        binds = "TensorE" if tensor_us >= memory_us else "memory"
        print(f"{name:<50} {us:>13.1f} {bound:>9.1f} {binds:>8} {us / bound:>6.2f}")


if __name__ == "__main__":
    main()
