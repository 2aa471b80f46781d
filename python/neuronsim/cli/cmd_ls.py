"""``neuronsim ls``: the simulated Neuron devices, like ``neuron-ls``: the instance type and, per
device (``torch.device("neuron:i")``, a logical NeuronCore), the physical core that runs it, its
NeuronCore generation, HBM capacity and preset. Honours NEURON_SIM_PRESET, NEURON_SIM_SET,
NEURON_RT_VISIBLE_CORES and NEURON_RT_NUM_CORES, with --preset/--set on top. Also the
instance's topology: its chips' NeuronLink torus, the network between instances and the
collective algorithm in force."""

from __future__ import annotations

import json

from neuronsim.cli import common, presets
from neuronsim.cli.errors import CLIError
from neuronsim.cli.formatting import bytes_str


def add_parser(sub) -> None:
    p = sub.add_parser(
        "ls",
        help="list the simulated Neuron devices",
        description=__doc__.split("``: ", 1)[1],
        epilog="examples:\n  neuronsim ls\n  neuronsim ls --preset trn2 --json\n"
        "  NEURON_RT_VISIBLE_CORES=0-1 neuronsim ls",
    )
    common.add_config_options(p)
    p.add_argument("--json", action="store_true", help="print the devices as JSON")
    p.set_defaults(func=run)


def _box(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(len(headers))]
    rule = "+" + "+".join("-" * (w + 2) for w in widths) + "+"

    def line(r):
        return "| " + " | ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=False)) + " |"

    return "\n".join([rule, line(headers), rule, *map(line, rows), rule])


def _chip(logical_core: int, cores_per_chip: int, torus_cols: int) -> str:
    chip = logical_core // cores_per_chip
    return f"{chip} ({chip // torus_cols}, {chip % torus_cols})"


def devices(config: dict) -> dict:
    from neuronsim import _C

    try:
        count = _C._device_count()
        props = [_C._device_properties(d) for d in range(count)]
    except RuntimeError as e:
        raise CLIError(str(e).strip().splitlines()[0]) from None
    try:
        generation = presets.info(presets.load(config["preset"])).get("generation", "unknown")
    except CLIError:
        generation = "unknown"  # a preset file that is gone: everything else still shows
    try:
        topology = _C._interconnect()
    except RuntimeError:
        topology = None  # a preset without collective parameters
    return {
        "topology": topology,
        "instance_type": props[0]["instance"] if props else "",
        "preset": config["preset"],
        "overrides": config["overrides"],
        "visible_cores": config["visible_cores"],
        "devices": [
            {
                "index": d,
                "name": p["name"],
                "physical_core": p["physical_core"],
                "generation": generation,
                "memory_bytes": p["total_memory"],
                "preset": p["preset"],
                "tensor_peak_flops": p["tensor_peak_flops"],
                "hbm_bandwidth_bytes_per_s": p["hbm_bandwidth_bytes_per_s"],
            }
            for d, p in enumerate(props)
        ],
    }


def run(args) -> int:
    info = devices(common.configure(args.preset, args.set))
    if args.json:
        print(json.dumps(info, indent=1))
        return 0
    print(f"instance-type: {info['instance_type']} (simulated, preset {info['preset']})")
    if info["overrides"]:
        print(f"overrides: {', '.join(info['overrides'])}")
    t = info["topology"]
    if t:
        links = (
            f"{t['chips']} chips in a {t['torus_rows']}x{t['torus_cols']} NeuronLink torus "
            f"({t['link_bytes_per_s'] / 1e9:.1f} GB/s per link each way)"
            if t["chips"] > 1
            else "1 chip"
        )
        print(f"topology: {links}, {t['cores_per_chip']} logical NeuronCores per chip")
        print(
            f"network: {t['network_bytes_per_s'] / 1e9:.1f} GB/s per instance between instances, "
            f"{t['network_latency_ns'] / 1e3:.1f} us per step"
        )
        print(
            f"collectives: {t['algorithm']} inside an instance, {t['inter_instance']} across "
            f"instances; {t['dma_bytes_per_s'] / 1e9:.1f} GB/s collective DMA per rank, "
            f"{t['launch_overhead_ns'] / 1e3:.1f} us launch + {t['step_latency_ns'] / 1e3:.1f} us "
            "per step"
        )
    per_chip = (t["cores_per_chip"] if t else 0) or 1
    cols = t["torus_cols"] if t else 1
    rows = [
        [
            d["index"],
            d["physical_core"],
            _chip(
                info["visible_cores"][d["index"]] if info["visible_cores"] else d["index"],
                per_chip,
                cols,
            ),
            d["generation"],
            bytes_str(d["memory_bytes"]),
            d["preset"],
            f"{d['tensor_peak_flops'] / 1e12:.2f}",
            f"{d['hbm_bandwidth_bytes_per_s'] / 1e9:.0f}",
        ]
        for d in info["devices"]
    ]
    print(
        _box(
            [
                "NEURON DEVICE",
                "PHYSICAL CORE",
                "CHIP (TORUS ROW, COL)",
                "GENERATION",
                "MEMORY",
                "PRESET",
                "BF16 TFLOP/S",
                "HBM GB/S",
            ],
            rows,
        )
    )
    return 0
