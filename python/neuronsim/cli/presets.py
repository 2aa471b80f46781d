"""The hardware presets: every parameter with value and source. The built-in ones are the JSON
files compiled into the extension (device_model/presets/*.json, through neuronsim._C), as the
runtime reads them; a preset given as a path (``--preset my.json``) is read from that path, as
the runtime does.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from neuronsim.cli.errors import CLIError


def _extension():
    from neuronsim import _C  # imports torch: only when a preset is read

    return _C


def builtin_names() -> list[str]:
    """The built-in presets, from the build's record (no torch import: `--help` lists them)."""
    try:
        from neuronsim._build_info import PRESETS
    except ImportError:  # a build from before PRESETS was recorded
        return sorted(_extension()._preset_names())
    return sorted(PRESETS)


def load(name_or_path: str, _depth: int = 0) -> dict:
    """The preset's JSON tree: a built-in name first, then a file path (the runtime's order)."""
    origin = name_or_path
    folder = None  # a preset read from a file finds its base next to it
    _C = _extension()
    text = _C._preset_text(name_or_path) if os.sep not in name_or_path else ""
    if not text:
        path = Path(name_or_path)
        if not path.is_file():
            # The runtime's message (it suggests the nearest built-in name).
            raise CLIError(_C._preset_error(name_or_path) or f"unknown preset '{name_or_path}'")
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError) as e:
            raise CLIError(f"{path}: not a readable preset ({e})") from None
        origin = str(path)
        folder = path.parent
    try:
        tree = json.loads(text)
    except json.JSONDecodeError as e:
        raise CLIError(f"{origin}: not a readable preset ({e})") from None
    if not isinstance(tree, dict) or not isinstance(tree.get("preset"), dict):
        raise CLIError(f'{origin}: not a neuronsim preset (no "preset" object)')
    base = tree["preset"].get("base")
    if isinstance(base, str) and _depth < 8:
        # An instance preset holds what differs from its chip preset (the runtime merges the same
        # way): a built-in name, else a file next to this one.
        local = folder / base if folder is not None else None
        merged = load(str(local) if local is not None and local.is_file() else base, _depth + 1)
        _merge(merged, tree)
        return merged
    return tree


def _merge(base: dict, over: dict) -> None:
    for key, value in over.items():
        if isinstance(value, dict) and "value" not in value and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = value


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
