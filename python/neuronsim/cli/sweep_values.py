"""The values of a `whatif --sweep`, as users write them:

KEY=V1,V2,...      the values listed
KEY=A:B:xF         A, A*F, A*F^2, ... up to B (doubling sweeps: 410:1640:x2 -> 410,820,1640)
KEY=A:B:+S         A, A+S, A+2S, ... up to B
KEY=A..B/N         N values evenly spaced from A to B (410..1640/4 -> 410,820,1230,1640)
"""

from __future__ import annotations

import math
import re

from neuronsim.cli.errors import CLIError

HELP = (
    "values of one parameter: KEY=V1,V2,... or a range, KEY=A:B:xF (A, A*F, ... up to B: "
    "hbm.bandwidth_gbps=410:1640:x2), KEY=A:B:+S (steps of S) or KEY=A..B/N (N values from A to "
    "B); repeatable: every combination runs"
)

_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_GEOMETRIC = re.compile(rf"({_NUMBER}):({_NUMBER}):x({_NUMBER})")
_STEP = re.compile(rf"({_NUMBER}):({_NUMBER}):\+({_NUMBER})")
_EVEN = re.compile(rf"({_NUMBER})\.\.({_NUMBER})/(\d+)")
MAX_VALUES = 64


def _fmt(x: float) -> str:
    """410.0 -> '410', 0.35 -> '0.35' (no float noise)."""
    r = round(x, 9)
    return str(int(r)) if r == int(r) else f"{r:.9g}"


def _range(text: str) -> list[float] | None:
    if m := _GEOMETRIC.fullmatch(text):
        a, b, f = map(float, m.groups())
        if a <= 0 or f <= 1 or b < a:
            raise ValueError("a geometric range A:B:xF needs 0 < A <= B and F > 1")
        n = int(math.floor(math.log(b / a, f) + 1e-9)) + 1
        return [a * f**i for i in range(n)]
    if m := _STEP.fullmatch(text):
        a, b, step = map(float, m.groups())
        if step <= 0 or b < a:
            raise ValueError("a stepped range A:B:+S needs A <= B and S > 0")
        n = int(math.floor((b - a) / step + 1e-9)) + 1
        return [a + step * i for i in range(n)]
    if m := _EVEN.fullmatch(text):
        a, b, n = float(m[1]), float(m[2]), int(m[3])
        if n < 2:
            raise ValueError("a range A..B/N needs N >= 2")
        return [a + (b - a) * i / (n - 1) for i in range(n)]
    return None


def parse_sweep(text: str) -> tuple[str, list[str]]:
    key, sep, rest = text.partition("=")
    example = "e.g. hbm.bandwidth_gbps=410,820 or hbm.bandwidth_gbps=410:1640:x2"
    if not sep or not key.strip() or any(c.isspace() for c in key.strip()):
        raise CLIError(f"malformed --sweep '{text}': expected KEY=V1,V2,... or a range, {example}")
    try:
        numbers = _range(rest.strip())
    except ValueError as e:
        raise CLIError(f"malformed --sweep '{text}': {e}") from None
    if numbers is not None:
        if len(numbers) > MAX_VALUES:
            raise CLIError(f"--sweep '{text}' gives {len(numbers)} values (at most {MAX_VALUES})")
        values = [_fmt(x) for x in numbers]
    else:
        values = [v.strip() for v in rest.split(",")]
    if not all(values):
        raise CLIError(f"malformed --sweep '{text}': expected KEY=V1,V2,... or a range, {example}")
    if len(set(values)) != len(values):
        raise CLIError(f"malformed --sweep '{text}': a value is repeated")
    return key.strip(), values
