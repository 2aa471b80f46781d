"""Which simulated NeuronCore a rank runs on, as the Neuron runtime decides it.

A launcher (torchrun) gives each process ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE`` and
``GROUP_RANK`` (its node). Unless ``NEURON_RT_VISIBLE_CORES`` or ``NEURON_RT_NUM_CORES`` says
otherwise, the process sees its instance's logical NeuronCores and runs on its local rank's,
``neuron:<LOCAL_RANK>``, which becomes the current device: ``torch.device("neuron")`` and the
CUDA idiom ``set_device(LOCAL_RANK)`` (torchtitan, most torchrun scripts), before or after
``init_process_group``, both name it. A node with more ranks than the preset's instance has cores
spans several simulated instances, linked by the network (EFA): local rank ``l`` runs on core
``l % cores`` of the node's instance ``l // cores`` (device ``neuron:<l % cores>``).
"""

from __future__ import annotations

import dataclasses
import math
import os

from neuronsim import _C

_placement: RankPlacement | None = None


@dataclasses.dataclass(frozen=True)
class RankPlacement:
    rank: int  # global rank
    device: int  # the neuron device index this rank uses
    instance: int  # simulated instance (0 ... ), across all nodes
    core: int  # logical NeuronCore within the instance
    physical_core: int  # the core this process's simulated device runs it on
    preset: str
    overrides: tuple[str, ...]


def _int_env(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise RuntimeError(f"neuron backend: {name}={value!r} is not an integer") from None


def this_rank(global_rank: int | None = None) -> RankPlacement:
    """This process's placement; the first call (the first neuron process group) decides it and
    starts the simulated device."""
    global _placement  # noqa: PLW0603
    if _placement is not None:
        return _placement
    if global_rank is None:
        raise RuntimeError("neuron backend: no process group has placed this rank yet")
    local_rank = _int_env("LOCAL_RANK", global_rank)
    local_world = _int_env("LOCAL_WORLD_SIZE", _int_env("WORLD_SIZE", global_rank + 1))
    node = _int_env("GROUP_RANK", global_rank // max(local_world, 1))
    if not _C._is_initialized():
        cores = _C._instance_cores()
        _C._lazy_init()
    else:
        cores = _C._interconnect()["cores_per_instance"]
    config = _C._config()
    user_chose = (
        config["visible_cores"]
        or os.environ.get("NEURON_RT_VISIBLE_CORES")
        or os.environ.get("NEURON_RT_NUM_CORES")
    )
    count = _C._device_count()
    if count == 1:
        device = 0
    elif not user_chose:
        # Every core of the instance visible (CUDA-style): the rank runs on its local rank's,
        # modulo the instance when a node runs more ranks than one instance has cores.
        device = local_rank % cores
    elif local_rank < count:
        device = local_rank
    else:
        raise RuntimeError(
            f"neuron backend: rank {global_rank} (local rank {local_rank}) has no NeuronCore: "
            f"{count} are visible to this process (NEURON_RT_VISIBLE_CORES / "
            "NEURON_RT_NUM_CORES)"
        )
    visible = config["visible_cores"]
    core = visible[device] if visible else device
    instances_per_node = max(1, math.ceil(local_world / cores))
    instance = node * instances_per_node + local_rank // cores
    if _C._current_device() != device:
        _C._set_device(device)
    _placement = RankPlacement(
        rank=global_rank,
        device=device,
        instance=instance,
        core=core,
        physical_core=_C._device_properties(device)["physical_core"],
        preset=config["preset"],
        overrides=tuple(config["overrides"]),
    )
    return _placement
