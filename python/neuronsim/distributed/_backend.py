"""The creator c10d calls for every ``neuron`` process group: it places this rank, checks that
every rank simulates the same hardware, makes the Gloo group that moves the data, and wraps it
in the C++ backend (``neuronsim._C._NeuronBackend``)."""

from __future__ import annotations

import datetime
import json
import os

import torch.distributed as dist

from neuronsim import _C
from neuronsim.distributed._placement import this_rank

_registered = False
# Groups created so far per group name: a name comes back after destroy_process_group(), and the
# store may keep the previous incarnation's keys (torchrun's agent store outlives groups), so
# every incarnation uses its own keys. All ranks create groups in the same order.
_incarnations: dict[str, int] = {}


def _inline_bytes(size: int) -> int:
    """Data up to this many bytes per peer travels with the header every collective exchanges
    (one round trip instead of two); larger data is posted with the header in a message of its
    own (all-gather, reduce-scatter, all-to-all, 2-rank all-reduce) or goes through Gloo's own
    collective after it (docs/distributed.md, "One collective"). Inline data
    goes from every rank to every other, so a rank receives up to (N-1) x this: the default keeps
    that near 8 MiB (at most 1 MiB a peer). The header round trip costs about what one small Gloo
    collective does (N(N-1) messages), so data that Gloo would move in latency-bound steps goes
    faster inline: measured with bench/collective_bench.py (docs/distributed.md). On two
    ranks a message of its own right behind the header (zero copies) beats the slot's two
    copies from 256 KiB a peer: all_to_all 1 MiB at 1.3x of Gloo instead of 1.5x."""
    value = os.environ.get("NEURON_SIM_CC_INLINE_BYTES")
    if value:
        try:
            n = int(value)
        except ValueError:
            raise RuntimeError(
                f"neuron backend: NEURON_SIM_CC_INLINE_BYTES={value!r} is not an integer"
            ) from None
        if n < 0:
            raise RuntimeError("neuron backend: NEURON_SIM_CC_INLINE_BYTES must be >= 0")
        return n
    if size == 2:
        return 256 << 10
    return max(4096, min(1 << 20, (8 << 20) // max(size - 1, 1)))


def _ranks_per_process() -> int:
    """NEURON_SIM_CC_MODEL_RANKS=M: the world's N processes time collectives of M ranks, each
    process standing for M/N ranks on consecutive NeuronCores; the data still moves between the
    N processes. For benchmarking large groups on a small machine: the collective model is the
    one an M-rank job uses."""
    value = os.environ.get("NEURON_SIM_CC_MODEL_RANKS")
    if not value:
        return 1
    world = int(os.environ.get("WORLD_SIZE", "1"))
    try:
        m = int(value)
    except ValueError:
        m = 0
    if m < world or m % world:
        raise RuntimeError(
            f"neuron backend: NEURON_SIM_CC_MODEL_RANKS={value!r} must be a multiple of the "
            f"world size ({world})"
        )
    return m // world


def _modelled_places(places: list[tuple[int, int]], k: int) -> list[tuple[int, int]]:
    if k == 1:
        return places
    cores = _C._instance_cores()
    out = []
    for instance, core in places:
        first = (instance * cores + core) * k
        out += [(g // cores, g % cores) for g in range(first, first + k)]
    return out


def _exchange(store, rank: int, size: int, mine: dict, timeout: datetime.timedelta) -> list[dict]:
    keys = [f"rank/{r}" for r in range(size)]
    store.set(keys[rank], json.dumps(mine))
    store.wait(keys, timeout)
    return [json.loads(store.get(k)) for k in keys]


def _create(opts, backend_options=None):
    rank, size = opts.group_rank, opts.group_size
    incarnation = _incarnations.get(opts.group_id, 0)
    _incarnations[opts.group_id] = incarnation + 1
    store = dist.PrefixStore(f"neuronsim/{incarnation}/", opts.store)
    global_ranks = list(opts.global_ranks_in_group) or list(range(size))
    place = this_rank(global_ranks[rank])
    inline = _inline_bytes(size)
    timeout = opts.timeout
    if not isinstance(timeout, datetime.timedelta):
        timeout = datetime.timedelta(seconds=float(timeout))
    mine = {
        "instance": place.instance,
        "core": place.core,
        "preset": place.preset,
        "overrides": list(place.overrides),
        "inline": inline,
    }
    everyone = _exchange(store, rank, size, mine, timeout)
    for r, other in enumerate(everyone):
        if (other["preset"], other["overrides"]) != (mine["preset"], mine["overrides"]):
            raise RuntimeError(
                f"neuron backend: rank {global_ranks[r]} simulates preset {other['preset']} "
                f"(overrides {other['overrides'] or 'none'}) but rank {place.rank} simulates "
                f"{mine['preset']} (overrides {mine['overrides'] or 'none'}); every rank needs "
                "the same --preset and --set"
            )
        if other["inline"] != inline:
            raise RuntimeError(
                "neuron backend: NEURON_SIM_CC_INLINE_BYTES differs between ranks "
                f"({other['inline']} on rank {global_ranks[r]}, {inline} on rank {place.rank})"
            )
    gloo = dist.ProcessGroupGloo(dist.PrefixStore("gloo/", store), rank, size, timeout)
    name = f"pg{opts.group_id}" if opts.group_id else "pg"
    k = _ranks_per_process()
    return _C._NeuronBackend(
        gloo,
        rank,
        size,
        place.device,
        name,
        _modelled_places([(o["instance"], o["core"]) for o in everyone], k),
        inline,
        int(timeout.total_seconds() * 1000),
        k,
    )


def register() -> None:
    """Registers the ``neuron`` backend with torch.distributed (once per process)."""
    global _registered  # noqa: PLW0603
    if _registered or not dist.is_available():
        return
    if "neuron" not in dist.Backend.backend_list:
        dist.Backend.register_backend("neuron", _create, extended_api=True, devices=["neuron"])
    _registered = True
