"""Trace summaries for `report`, `diff`, `run` and `whatif`: the file is read here, the summary
(engines, bottleneck, FLOP/s and bytes against the peaks, kernels, ops, the op report) is the C++
one (traces/src/summary.cpp, the same `ncsim trace summary` prints) through neuronsim._C.

A trace is the Chrome trace-event JSON written by ``neuronsim.tracing``
(runtime/src/trace_session.cpp, traces/src/chrome_json_sink.cpp); a summary file is what
`neuronsim run --summary-json` writes. Traces are read as they stream from disk
(traces/src/trace_stream.cpp): a long run's trace is never held in memory whole, neither its text
nor its JSON document; only ``TraceFile.text`` reads it all.
"""

from __future__ import annotations

import codecs
import json
import os
import re
from dataclasses import dataclass

from neuronsim.cli.errors import CLIError


def _ext():
    """The extension (imports torch): only once a trace is read, never for `--help`."""
    from neuronsim import _C

    return _C


def __getattr__(name: str):
    if name == "SUMMARY_FORMAT":  # the "format" of summary documents
        return _ext()._summary_format()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass(frozen=True)
class TraceFile:
    path: str

    @property
    def text(self) -> str:
        """The whole file as text (summaries and metadata do not need it)."""
        return _read_text(self.path)


def _read_text(path: str) -> str:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise CLIError(f"{path}: no such file") from None
    except OSError as e:
        raise CLIError(f"{path}: cannot read ({e.strerror or e})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise CLIError(f"{path}: not a JSON file (binary data)") from None
    if not text.strip():
        raise CLIError(f"{path}: the file is empty")
    return text


# How much of a file is looked at before it is read as it streams: a binary or empty file is
# named as such, not as a JSON syntax error.
_HEAD_BYTES = 1 << 16


def _check_file(path: str) -> None:
    """_read_text's errors, from the file's first bytes only."""
    try:
        with open(path, "rb") as f:
            head = f.read(_HEAD_BYTES)
            whole = not f.read(1)
    except FileNotFoundError:
        raise CLIError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise CLIError(f"{path}: cannot read (Is a directory)") from None
    except OSError as e:
        raise CLIError(f"{path}: cannot read ({e.strerror or e})") from None
    try:
        text = codecs.getincrementaldecoder("utf-8")().decode(head, final=whole)
    except UnicodeDecodeError:
        raise CLIError(f"{path}: not a JSON file (binary data)") from None
    if whole and not text.strip():
        raise CLIError(f"{path}: the file is empty")


# The tail of a number or literal a truncation cut through ("12.", "-", "1e", "tru", "nul").
_PARTIAL_TOKEN = re.compile(r"[-+0-9.eE]{1,32}|t(r(u)?)?|f(a(l(s)?)?)?|n(u(l)?)?")


def _syntax_error(text: str, path: str) -> CLIError:
    """What is wrong with text the C++ JSON parser refused, in Python's words."""
    try:
        json.loads(text)
    except json.JSONDecodeError as e:
        # Cut short: the error is at the very end, inside a number or literal cut at the end
        # ("1." or "tru"), or a string runs from the last line to the end.
        body = text.rstrip()
        last_line = body.count("\n") + 1
        if (
            e.pos >= len(body)
            or _PARTIAL_TOKEN.fullmatch(body[e.pos :])
            or (e.msg.startswith("Unterminated string") and e.lineno == last_line)
        ):
            return CLIError(f"{path}: not valid JSON: the file ends early - was it truncated?")
        return CLIError(f"{path}: not valid JSON ({e.msg} at line {e.lineno} column {e.colno})")
    return CLIError(f"{path}: not valid JSON")


def _summary(path: str, accept_summary: bool) -> dict:
    _C = _ext()
    try:
        s = json.loads(_C._summary_document_file(path, accept_summary))
    except _C.TraceSyntaxError:
        raise _syntax_error(_read_text(path), path) from None
    except _C.TraceFormatError as e:
        raise CLIError(str(e)) from None
    s.setdefault("trace", os.path.abspath(path))
    return s


def load(path: str) -> TraceFile:
    """A neuronsim trace file; any problem is a one-line CLIError naming the file. The events
    are read when a summary or the metadata is asked for."""
    _check_file(path)
    return TraceFile(path)


def summarize(trace: TraceFile) -> dict:
    """Everything the subcommands print, as a JSON-ready dict (traces/include/.../summary.h)."""
    return _summary(trace.path, accept_summary=False)


def load_summary(path: str) -> dict:
    """A run's summary from a trace file or from `neuronsim run --summary-json` output."""
    _check_file(path)
    return _summary(path, accept_summary=True)


def metadata(trace: TraceFile) -> dict:
    """The trace's run metadata ("otherData": configuration, op report, ranks of a merged
    trace)."""
    _C = _ext()
    try:
        return json.loads(_C._trace_metadata_file(trace.path))
    except _C.TraceSyntaxError:
        raise _syntax_error(_read_text(trace.path), trace.path) from None
    except _C.TraceFormatError as e:
        raise CLIError(str(e)) from None


def sort_engines(labels: list[str]) -> list[str]:
    """Engine labels ("TensorE", "nc1 DMA q2") in the summary's engine order, core by core."""
    return _ext()._sort_engine_labels(labels)


def engine_utilisation(summary: dict) -> dict[str, float]:
    """Engine label -> utilisation for the compute engines and each core's DMA (all queues), the
    rows the summary lets limit a run (their "role"); the core is part of the label only when
    several cores ran."""
    multi = len(summary.get("active_cores", [])) > 1
    out = {}
    for e in summary["engines"]:
        if e.get("role") in ("engine", "dma"):
            label = f"{e['process']} {e['engine']}" if multi else e["engine"]
            out[label] = e["utilisation"]
    return out


def short_engine(summary: dict, name: str) -> str:
    """'nc0 TensorE' -> 'TensorE' when one core ran."""
    if len(summary.get("active_cores", [])) <= 1 and " " in name:
        return name.split(" ", 1)[1]
    return name
