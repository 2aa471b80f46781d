"""Every collective of the neuron backend against Gloo on CPU tensors with the same inputs (run
under torchrun by tests/python/test_distributed.py). Sizes straddle the inline threshold, so
every path runs: data in the header's slot, posted with the header (larger than a slot, in a
message of its own), and through Gloo's collective. Prints one line per rank at the end:
"rank R: N checks passed"."""

import neuronsim  # noqa: F401
import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as fc
from say import leave, say

dist.init_process_group("cpu:gloo,neuron:neuron")
rank, world = dist.get_rank(), dist.get_world_size()
dev = torch.device("neuron")
checks = 0
SIZES = (5, 3000, 70000)  # below and above the inline threshold (NEURON_SIM_CC_INLINE_BYTES=64K)


def data(shape, dtype, seed):
    g = torch.Generator().manual_seed(1000 * seed + rank)
    x = torch.randn(shape, generator=g) * 4
    if dtype.is_floating_point:
        return x.to(dtype)
    return x.round().to(dtype).clamp(-50, 50) if dtype != torch.bool else x > 0


def same(name, got, want, tol=0.0):
    global checks
    got = got.cpu()
    if got.dtype != want.dtype or got.shape != want.shape:
        raise AssertionError(
            f"rank {rank} {name}: {got.dtype}{list(got.shape)} vs {want.dtype}{list(want.shape)}"
        )
    if tol:
        # Rounding of a sum depends on its order: bound the error by the addends' size.
        atol = tol * world * 16
        ok = torch.allclose(got.float(), want.float(), rtol=tol, atol=atol)
    else:
        ok = torch.equal(got, want)
    if not ok:
        diff = (got.double() - want.double()).abs().max().item()
        raise AssertionError(f"rank {rank} {name}: neuron and Gloo differ (max abs diff {diff})")
    checks += 1


def cpu_outs_of(x):
    outs = [torch.empty_like(x) for _ in range(world)]
    dist.all_gather(outs, x)
    return outs


def tol_for(dtype):
    return {torch.bfloat16: 8e-3, torch.float16: 1e-3, torch.float32: 1e-6}.get(dtype, 0.0)


for n in SIZES:
    for dtype in (torch.float32, torch.bfloat16, torch.int64):
        ops = ["SUM", "MAX", "MIN", "PRODUCT"] + (
            ["AVG", "PREMUL_SUM"] if dtype.is_floating_point else []
        )
        for i, name in enumerate(ops):
            op = (
                dist._make_nccl_premul_sum(0.5)
                if name == "PREMUL_SUM"
                else getattr(dist.ReduceOp, name)
            )
            x = data((n,), dtype, i)
            if name == "PRODUCT":
                x = (x.float().abs() % 3 + 0.5).to(dtype) if dtype.is_floating_point else x % 3 + 1
            t = x.to(dev)
            dist.all_reduce(t, op=op)
            want = x.clone()
            if name == "AVG":
                dist.all_reduce(want, op=dist.ReduceOp.SUM)
                want = (want / world).to(dtype)
            elif name == "PREMUL_SUM":
                dist.all_reduce(want, op=dist.ReduceOp.SUM)
                want = (want * 0.5).to(dtype)
            else:
                dist.all_reduce(want, op=op)
            same(f"all_reduce {dtype} {n} {name}", t, want, tol_for(dtype))

        # broadcast / reduce from the last rank
        root = world - 1
        x = data((n,), dtype, 7)
        t = x.to(dev)
        dist.broadcast(t, src=root)
        want = x.clone()
        dist.broadcast(want, src=root)
        same(f"broadcast {dtype} {n}", t, want)
        t = x.to(dev)
        dist.reduce(t, dst=root, op=dist.ReduceOp.SUM)
        want = x.clone()
        dist.reduce(want, dst=root, op=dist.ReduceOp.SUM)
        if rank == root:
            same(f"reduce {dtype} {n}", t, want, tol_for(dtype))

        # all_gather (list and into a tensor) and its coalesced form
        x = data((n, 2), dtype, 8)
        outs = [torch.empty_like(x, device=dev) for _ in range(world)]
        dist.all_gather(outs, x.to(dev))
        cpu_outs = [torch.empty_like(x) for _ in range(world)]
        dist.all_gather(cpu_outs, x)
        same(f"all_gather {dtype} {n}", torch.stack([o.cpu() for o in outs]), torch.stack(cpu_outs))
        out = torch.empty(world * n, 2, dtype=dtype, device=dev)
        dist.all_gather_into_tensor(out, x.to(dev))
        same(f"all_gather_into_tensor {dtype} {n}", out, torch.cat(cpu_outs))
        y = data((3,), dtype, 9)
        with dist._coalescing_manager(async_ops=True) as cm:
            o1 = torch.empty(world * n, 2, dtype=dtype, device=dev)
            o2 = torch.empty(world * 3, dtype=dtype, device=dev)
            dist.all_gather_into_tensor(o1, x.to(dev))
            dist.all_gather_into_tensor(o2, y.to(dev))
        cm.wait()
        ys = [torch.empty_like(y) for _ in range(world)]
        dist.all_gather(ys, y)
        same(f"coalesced all_gather a {dtype} {n}", o1, torch.cat(cpu_outs))
        same(f"coalesced all_gather b {dtype} {n}", o2, torch.cat(ys))

        # reduce_scatter (list and tensor forms) and the coalesced form
        for i, op in enumerate(
            [dist.ReduceOp.SUM, dist.ReduceOp.MAX]
            + ([dist.ReduceOp.AVG] if dtype.is_floating_point else [])
        ):
            x = data((world * n,), dtype, 10 + i)
            out = torch.empty(n, dtype=dtype, device=dev)
            dist.reduce_scatter_tensor(out, x.to(dev), op=op)
            gop = dist.ReduceOp.SUM if op == dist.ReduceOp.AVG else op
            full = x.clone()
            dist.all_reduce(full, op=gop)
            want = full[rank * n : (rank + 1) * n]
            if op == dist.ReduceOp.AVG:
                want = (want / world).to(dtype)
            same(f"reduce_scatter_tensor {dtype} {n} op {i}", out, want, tol_for(dtype))
            out2 = torch.empty(n, dtype=dtype, device=dev)
            dist.reduce_scatter(out2, list(x.to(dev).chunk(world)), op=op)
            same(f"reduce_scatter {dtype} {n} op {i}", out2, want, tol_for(dtype))
        x = data((world * n,), dtype, 20)
        z = data((world * 2,), dtype, 21)
        with dist._coalescing_manager(async_ops=True) as cm:
            o1 = torch.empty(n, dtype=dtype, device=dev)
            o2 = torch.empty(2, dtype=dtype, device=dev)
            dist.reduce_scatter_tensor(o1, x.to(dev))
            dist.reduce_scatter_tensor(o2, z.to(dev))
        cm.wait()
        fx, fz = x.clone(), z.clone()
        dist.all_reduce(fx)
        dist.all_reduce(fz)
        same(
            f"coalesced reduce_scatter a {dtype} {n}",
            o1,
            fx[rank * n : (rank + 1) * n],
            tol_for(dtype),
        )
        same(
            f"coalesced reduce_scatter b {dtype} {n}",
            o2,
            fz[rank * 2 : (rank + 1) * 2],
            tol_for(dtype),
        )

        # in place, as FSDP2 calls them: all_gather_into_tensor from the output's own chunk,
        # reduce_scatter_tensor into a chunk of its input (posted data lands around them)
        x = data((n, 2), dtype, 22)
        out = torch.empty(world * n, 2, dtype=dtype, device=dev)
        out[rank * n : (rank + 1) * n].copy_(x.to(dev))
        dist.all_gather_into_tensor(out, out[rank * n : (rank + 1) * n])
        same(f"all_gather_into_tensor in place {dtype} {n}", out, torch.cat(cpu_outs_of(x)))
        x = data((world * n,), dtype, 23)
        t = x.to(dev)
        dist.reduce_scatter_tensor(t[rank * n : (rank + 1) * n], t)
        full = x.clone()
        dist.all_reduce(full)
        same(
            f"reduce_scatter_tensor in place {dtype} {n}",
            t[rank * n : (rank + 1) * n],
            full[rank * n : (rank + 1) * n],
            tol_for(dtype),
        )

        # all_to_all_single, even and uneven splits
        x = data((world * n, 3), dtype, 30)
        out = torch.empty_like(x, device=dev)
        dist.all_to_all_single(out, x.to(dev))
        want = torch.empty_like(x)
        dist.all_to_all_single(want, x.clone())
        same(f"all_to_all_single {dtype} {n}", out, want)
        t = x.to(dev)
        dist.all_to_all_single(t, t)  # in place: the output overlaps the input being sent
        same(f"all_to_all_single in place {dtype} {n}", t, want)
        send = [(rank + j) % 3 + (n if j == 0 else 0) for j in range(world)]  # rows to rank j
        recv = [(j + rank) % 3 + (n if rank == 0 else 0) for j in range(world)]
        x = data((sum(send), 3), dtype, 31)
        out = torch.empty(sum(recv), 3, dtype=dtype, device=dev)
        dist.all_to_all_single(out, x.to(dev), recv, send)
        want = torch.empty(sum(recv), 3, dtype=dtype)
        dist.all_to_all_single(want, x.clone(), recv, send)
        same(f"all_to_all_single uneven {dtype} {n}", out, want)
        # The same sizes again: parts beyond the slot now go right behind the header (sizes both
        # ranks agreed on before), the small ones in the slot.
        for k in range(2):
            x = data((sum(send), 3), dtype, 32 + k)
            dist.all_to_all_single(out, x.to(dev), recv, send)
            dist.all_to_all_single(want, x.clone(), recv, send)
            same(f"all_to_all_single uneven again {k} {dtype} {n}", out, want)

        # gather / scatter to and from rank 0
        x = data((n,), dtype, 40)
        gl = [torch.empty(n, dtype=dtype, device=dev) for _ in range(world)] if rank == 0 else None
        dist.gather(x.to(dev), gl, dst=0)
        cg = [torch.empty(n, dtype=dtype) for _ in range(world)] if rank == 0 else None
        dist.gather(x, cg, dst=0)
        if rank == 0:
            same(f"gather {dtype} {n}", torch.stack([g.cpu() for g in gl]), torch.stack(cg))
        chunks = [data((n,), dtype, 50 + j) for j in range(world)]
        out = torch.empty(n, dtype=dtype, device=dev)
        dist.scatter(out, [c.to(dev) for c in chunks] if rank == 0 else None, src=0)
        want = torch.empty(n, dtype=dtype)
        dist.scatter(want, chunks if rank == 0 else None, src=0)
        same(f"scatter {dtype} {n}", out, want)

        # send / recv around a ring (irecv before isend: no rank may block in issue)
        x = data((n,), dtype, 60)
        got = torch.empty(n, dtype=dtype, device=dev)
        ops = [
            dist.P2POp(dist.irecv, got, (rank - 1) % world),
            dist.P2POp(dist.isend, x.to(dev), (rank + 1) % world),
        ]
        for w in dist.batch_isend_irecv(ops):
            w.wait()
        want = torch.empty(n, dtype=dtype)
        reqs = [dist.irecv(want, (rank - 1) % world), dist.isend(x, (rank + 1) % world)]
        for w in reqs:
            w.wait()
        same(f"send/recv {dtype} {n}", got, want)

    # functional collectives (DTensor's and compiled graphs' path), float32
    x = data((n,), torch.float32, 70)
    t = fc.all_reduce(x.to(dev), "sum", dist.group.WORLD)
    want = x.clone()
    dist.all_reduce(want)
    same(f"functional all_reduce {n}", fc.wait_tensor(t), want, 1e-5)
    g = fc.all_gather_tensor(x.to(dev), 0, dist.group.WORLD)
    ws = [torch.empty_like(x) for _ in range(world)]
    dist.all_gather(ws, x)
    same(f"functional all_gather {n}", fc.wait_tensor(g), torch.cat(ws))
    xs = data((world * n,), torch.float32, 71)
    rs = fc.reduce_scatter_tensor(xs.to(dev), "sum", 0, dist.group.WORLD)
    full = xs.clone()
    dist.all_reduce(full)
    same(
        f"functional reduce_scatter {n}", fc.wait_tensor(rs), full[rank * n : (rank + 1) * n], 1e-5
    )
    a2a = fc.all_to_all_single(xs.to(dev), None, None, dist.group.WORLD)
    want = torch.empty_like(xs)
    dist.all_to_all_single(want, xs.clone())
    same(f"functional all_to_all {n}", fc.wait_tensor(a2a), want)
    cg = fc.all_gather_into_tensor_coalesced([x.to(dev), xs.to(dev)], dist.group.WORLD)
    w2 = [torch.empty_like(xs) for _ in range(world)]
    dist.all_gather(w2, xs)
    fc.wait_tensor(cg[0])
    same(f"functional all_gather_coalesced {n}", fc.wait_tensor(cg[1]), torch.cat(w2))

# Odd element counts above the inline threshold: on 2 ranks a full exchange (up to 4 slots) and
# the reduce-scatter + all-gather above it, whose halves differ by one element.
for name, n in [(op, n) for n in (33333, 70001) for op in ("SUM", "AVG", "MAX")]:
    x = data((n,), torch.float32, 80)
    t = x.to(dev)
    dist.all_reduce(t, op=getattr(dist.ReduceOp, name))
    want = x.clone()
    dist.all_reduce(want, op=dist.ReduceOp.MAX if name == "MAX" else dist.ReduceOp.SUM)
    if name == "AVG":
        want /= world
    same(f"all_reduce odd size {n} {name}", t, want, 1e-6)

dist.barrier()
dist.barrier(device_ids=None)
say(f"rank {rank}: {checks} checks passed")
leave()
