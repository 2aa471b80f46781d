"""The C++ include structure, checked: every `#include "..."` of the project's own files resolved
to its file, then three rules.

1. Layers: a top-level library includes only the libraries below it (LAYERS, lowest first);
   torch headers only in backend/.
2. No wrong-way include inside a folder: within one top-level folder, its subfolders (and a
   library's include/ folders next to its src/ folders) form no cycle.
3. No include cycle between two files' units (foo.h and foo.cpp are one unit): a.cpp including
   b.h while b.cpp includes a.h is a cycle.

    python3 tools/include_layers.py [--list]     # exit 1 on a violation; --list prints the edges
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Lowest first: each may include itself and what comes before it.
LAYERS = ["sim", "device_model", "traces", "runtime", "kernels", "backend"]
# Code that sits on top of every library.
TOP = {"tools", "tests", "bench"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
TORCH = re.compile(r"^\s*#\s*include\s+<(torch|ATen|c10|pybind11)/", re.M)


def sources() -> list[Path]:
    out = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.h", "*.cpp"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return [ROOT / p for p in out if (ROOT / p).is_file()]


def include_roots() -> list[Path]:
    """Where `#include "..."` is resolved: every library's include/ and backend/ itself."""
    roots = [p for p in ROOT.glob("*/include") if p.is_dir()]
    roots += [p for p in ROOT.glob("*/*/include") if p.is_dir()]
    roots.append(ROOT / "backend")
    return roots


def resolve(name: str, including: Path, roots: list[Path]) -> Path | None:
    for base in [including.parent, *roots]:
        p = (base / name).resolve()
        if p.is_file():
            return p
    return None


def top(p: Path) -> str:
    return p.relative_to(ROOT).parts[0]


def folder(p: Path) -> str:
    """The subfolder that owns a file: backend/aten, kernels/ops (include/neuronsim/kernels/ops
    and src/ops are one), device (its src/ and include/ roots), ..."""
    parts = list(p.relative_to(ROOT).parts[:-1])
    if "include" in parts:
        i = parts.index("include")
        rest = parts[i + 3 :]  # include/neuronsim/<lib>/...
        return "/".join([parts[0], *rest]) if rest else parts[0]
    if len(parts) > 1 and parts[1] == "src":
        return "/".join([parts[0], *parts[2:]])
    return "/".join(parts)


def unit(p: Path) -> str:
    """foo.h and foo.cpp of one folder are one unit."""
    return f"{folder(p)}/{p.stem}"


def find_cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in list(edges):
        if v not in index:
            visit(v)
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--list", action="store_true", help="print the folder-level edges")
    a = p.parse_args()
    roots = include_roots()
    problems: list[str] = []
    folder_edges: dict[str, set[str]] = defaultdict(set)
    unit_edges: dict[str, set[str]] = defaultdict(set)
    for src in sources():
        text = src.read_text(errors="replace")
        t = top(src)
        if TORCH.search(text) and t not in ("backend",) and t not in TOP:
            problems.append(f"layer: {src.relative_to(ROOT)} includes torch headers")
        for name in INCLUDE.findall(text):
            dst = resolve(name, src, roots)
            if dst is None or ROOT not in dst.parents:
                continue
            td = top(dst)
            if t in LAYERS and td in LAYERS and LAYERS.index(td) > LAYERS.index(t):
                problems.append(f"layer: {src.relative_to(ROOT)} ({t}) includes {name} ({td})")
            fs, fd = folder(src), folder(dst)
            if fs != fd and t == td:
                folder_edges[fs].add(fd)
            if unit(src) != unit(dst):
                unit_edges[unit(src)].add(unit(dst))
    for comp in find_cycles(folder_edges):
        problems.append("folders include each other: " + " <-> ".join(comp))
    for comp in find_cycles(unit_edges):
        problems.append("files include each other: " + " <-> ".join(comp))
    if a.list:
        for f in sorted(folder_edges):
            print(f"{f} -> {', '.join(sorted(folder_edges[f]))}")
    for line in problems:
        print(line)
    print(f"include layers: {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
