"""Options and configuration shared by the subcommands that start the simulator."""

from __future__ import annotations

import argparse

from neuronsim.cli.errors import CLIError

_environment: dict | None = None


def environment_config() -> dict:
    """The configuration the environment asks for (NEURON_SIM_PRESET, NEURON_SIM_SET,
    NEURON_RT_VISIBLE_CORES, ...), read once: later configure() calls change what the runtime
    reports, and each command-line configuration starts again from the environment's."""
    global _environment  # noqa: PLW0603
    if _environment is None:
        from neuronsim import _C

        try:
            _environment = dict(_C._config())
        except RuntimeError as e:
            raise CLIError(str(e).strip().splitlines()[0]) from None
    return _environment


def add_config_options(p: argparse.ArgumentParser) -> None:
    from neuronsim.cli import presets  # the names come from the build record: no torch import

    p.add_argument(
        "--preset",
        metavar="NAME|PATH",
        help=f"hardware preset: {', '.join(presets.builtin_names())} (`neuronsim presets list` "
        "describes them) or a preset JSON file (default: NEURON_SIM_PRESET, else trn1)",
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a preset parameter, e.g. --set hbm.bandwidth_gbps=820 "
        "(repeatable; applied after NEURON_SIM_SET)",
    )


def check_set(item: str, flag: str = "--set") -> str:
    key, sep, value = item.partition("=")
    if not sep or not key.strip() or not value.strip() or any(c.isspace() for c in key.strip()):
        raise CLIError(
            f"malformed {flag} '{item}': expected KEY=VALUE, e.g. hbm.bandwidth_gbps=820"
        )
    return f"{key.strip()}={value.strip()}"


def configure(preset: str | None, sets: list[str]) -> dict:
    """Configures this process's simulator (before the device is used): the environment's
    configuration (NEURON_SIM_PRESET, NEURON_SIM_SET, NEURON_RT_VISIBLE_CORES, ...) with the
    command line's preset and overrides on top. Returns the configuration applied; a bad preset,
    key or value is a CLIError carrying the runtime's message."""
    import neuronsim

    sets = [check_set(s) for s in sets]
    pending = environment_config()
    try:
        config = {
            "preset": preset or pending["preset"],
            "overrides": [*pending["overrides"], *sets],
            "visible_cores": list(pending["visible_cores"]),
            "launch_blocking": bool(pending["launch_blocking"]),
            "isa_mode": bool(pending["isa_mode"]),
        }
        neuronsim.configure(
            config["preset"],
            config["overrides"],
            config["visible_cores"],
            config["launch_blocking"],
            config["isa_mode"],
        )
    except RuntimeError as e:
        raise CLIError(str(e).strip().splitlines()[0] if str(e).strip() else repr(e)) from None
    return config
