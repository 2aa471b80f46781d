"""Preset files (device/presets/*.json): every hardware parameter with value and source.

The C++ extension compiles the built-in presets in but exposes only the configuration in force
(``_C._config()``), not the files, so the CLI reads them from the repository checkout:
``<repo>/device/presets``, found relative to this package (python/neuronsim/cli). An
installed copy without the checkout can point ``NEURONSIM_PRESETS_DIR`` at that directory.
A preset given as a path (``--preset my.json``) is read from that path, as the runtime does.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from neuronsim.cli.errors import CLIError


def presets_dir() -> Path:
    env = os.environ.get("NEURONSIM_PRESETS_DIR")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[3] / "device" / "presets"


def builtin_names() -> list[str]:
    d = presets_dir()
    if not d.is_dir():
        raise CLIError(
            f"preset files not found in {d}: the neuronsim CLI reads device/presets from the "
            "repository checkout (or set NEURONSIM_PRESETS_DIR)"
        )
    return sorted(p.stem for p in d.glob("*.json"))


def load(name_or_path: str) -> dict:
    """The preset's JSON tree: a built-in name first, then a file path (the runtime's order)."""
    d = presets_dir()
    path = d / f"{name_or_path}.json"
    if not (os.sep not in name_or_path and path.is_file()):
        path = Path(name_or_path)
        if not path.is_file():
            names = ", ".join(builtin_names())
            raise CLIError(
                f"unknown preset '{name_or_path}': not a built-in preset ({names}) and no such file"
            )
    try:
        tree = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CLIError(f"{path}: not a readable preset ({e})") from None
    if not isinstance(tree, dict) or not isinstance(tree.get("preset"), dict):
        raise CLIError(f'{path}: not a neuronsim preset (no "preset" object)')
    return tree


def parameters(tree: dict) -> list[tuple[str, dict]]:
    """('hbm.bandwidth_gbps', {'value': ..., 'source': ...}) per parameter, in file order."""
    out: list[tuple[str, dict]] = []

    def walk(node: dict, prefix: str) -> None:
        for key, value in node.items():
            if not isinstance(value, dict):
                continue
            if "value" in value:
                out.append((prefix + key, value))
            else:
                walk(value, prefix + key + ".")

    walk({k: v for k, v in tree.items() if k != "preset"}, "")
    return out


def info(tree: dict) -> dict:
    return tree.get("preset", {})
