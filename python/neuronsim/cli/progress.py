"""A status line on stderr for long runs: wall time, simulated time reached, ops executed.

A background thread samples the simulator once a second through read-only calls (the device
clock, the op counters); it never initialises the device and never submits work, so the run's
results are the same with or without it. NEURONSIM_PROGRESS_INTERVAL (seconds, default 1)
changes how often it samples (the tests use a short one).
"""

from __future__ import annotations

import os
import sys
import threading
import time

from neuronsim.cli.formatting import time_str


def enabled(mode: str, stream=None) -> bool:
    stream = stream or sys.stderr
    if mode == "always":
        return True
    if mode == "never":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def _ops_executed() -> int:
    from neuronsim import _C

    return sum(c["native"] + c["fallback"] for c in _C._op_counts().values())


class Progress:
    def __init__(self, stream=None, interval: float | None = None, label: str = "neuronsim"):
        self._stream = stream or sys.stderr
        if interval is None:
            try:
                interval = float(os.environ.get("NEURONSIM_PROGRESS_INTERVAL", "1"))
            except ValueError:
                interval = 1.0
        self._interval = max(0.01, interval)
        self._label = label
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._width = 0
        self._start = 0.0

    def start(self) -> Progress:
        self._start = time.monotonic()
        self._thread = threading.Thread(target=self._loop, name="neuronsim-progress", daemon=True)
        self._thread.start()
        return self

    def _line(self) -> str:
        import neuronsim

        return (
            f"{self._label}: {time.monotonic() - self._start:.0f} s wall, simulated "
            f"{time_str(neuronsim.simulated_time_ns())}, {_ops_executed()} ops"
        )

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                line = self._line()
            except Exception:  # noqa: BLE001 - a status line must never break the run
                continue
            self._stream.write("\r" + line.ljust(self._width))
            self._stream.flush()
            self._width = len(line)

    def stop(self) -> None:
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        self._thread = None
        if self._width:
            self._stream.write("\r" + " " * self._width + "\r")
            self._stream.flush()
