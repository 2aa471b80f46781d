"""Trace files for ``nki.benchmark(save_trace_name=...)`` / ``nki.profile``: the neuronsim
trace (Perfetto JSON) of the kernel's launch, when no whole-program trace is being recorded."""

import contextlib
import json


@contextlib.contextmanager
def maybe_trace(path):
    import neuronsim

    c = neuronsim._C
    if not path or c._trace_active():
        yield
        return
    if not str(path).endswith(".json"):
        path = str(path) + ".json"
    c._trace_start(str(path))
    try:
        yield
    finally:
        c._trace_stop(json.dumps({"source": "nki.benchmark"}))
