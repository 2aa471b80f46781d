"""Moving nested test arguments between devices, shared by the kernel coverage tests."""

import torch


def to_neuron(x):
    """`x` with every tensor moved to the neuron device (lists, tuples and dicts walked); a
    dict's "device" entry (an OpInfo factory kwarg) becomes "neuron"."""
    if isinstance(x, torch.Tensor):
        return x.to("neuron")
    if isinstance(x, list | tuple):
        return type(x)(to_neuron(y) for y in x)
    if isinstance(x, dict):
        return {k: ("neuron" if k == "device" else to_neuron(v)) for k, v in x.items()}
    return x


def to_cpu(x):
    """`x` with every tensor copied to the CPU; tuples come back as lists."""
    if isinstance(x, torch.Tensor):
        return x.cpu()
    if isinstance(x, list | tuple):
        return [to_cpu(y) for y in x]
    return x


def base_names(ops):
    """Op names without their overload ("aten::div.Tensor_mode" -> "aten::div")."""
    return {o.split(".")[0] for o in ops}
