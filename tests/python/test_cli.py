"""The ``neuronsim`` command line: run, whatif, report, diff, ls, presets.

Every configuration needs its own process (the simulated device is configured once per
process), so the slow commands run as subprocesses, started together by a module fixture; the
commands that only read files (report, diff, presets) run in this process through ``main()``.
Scripts under tests/python/scripts: a small model's training step, a memory-bound script
(large fp32 elementwise ops and copies) and a compute-bound one (large bf16 matmuls).
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import re
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import REPO
from neuronsim.cli import trace_data
from neuronsim.cli.errors import CLIError
from neuronsim.cli.main import main

SCRIPTS = Path(__file__).parent / "scripts"
CONSOLE_SCRIPT = Path(sys.executable).parent / "neuronsim"
INSTRUCTION_ROWS = ("TensorE", "TensorE (LoadStationary)", "VectorE", "ScalarE", "GpSimdE")


def _env(extra: dict | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEURON")}
    env.update(extra or {})
    return env


def cli(*args, env: dict | None = None, module: bool = True, timeout: int = 600):
    """`python -m neuronsim ARGS` (or the console script) in a fresh process."""
    cmd = [sys.executable, "-m", "neuronsim"] if module else [str(CONSOLE_SCRIPT)]
    return subprocess.run(
        [*cmd, *map(str, args)],
        capture_output=True,
        text=True,
        env=_env(env),
        cwd=REPO,
        timeout=timeout,
    )


def in_process(*args) -> tuple[int, str, str]:
    """main(ARGS) here, for the commands that never start the simulator."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([str(a) for a in args])
        except SystemExit as e:
            code = e.code
    return code, out.getvalue(), err.getvalue()


# Error cases that configure the simulator run in one fresh process (here the device may already
# be in use): each calls main() and records its exit code and stderr; an exception escaping
# main() is recorded as a traceback.
_ERRORS_DRIVER = """
import contextlib, io, json, sys, traceback
from neuronsim.cli.main import main
out = []
for argv in json.loads(sys.argv[1]):
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main(argv)
        except SystemExit as e:
            code = e.code
        except BaseException:
            traceback.print_exc()
            code = "escaped"
    out.append({"argv": argv, "code": code, "stderr": err.getvalue()})
print(json.dumps(out))
"""


def _write_bad_files(d: Path, good_trace: Path | None = None) -> dict[str, Path]:
    files = {
        "notjson": d / "notjson.json",
        "notchrome": d / "list.json",
        "notneuronsim": d / "other_trace.json",
        "empty": d / "empty.json",
        "truncated": d / "truncated.json",
    }
    files["notjson"].write_text("this is not JSON\n")
    files["notchrome"].write_text("[1, 2, 3]\n")
    files["notneuronsim"].write_text(json.dumps({"traceEvents": [{"ph": "X", "ts": 0, "dur": 1}]}))
    files["empty"].write_text("")
    text = good_trace.read_text() if good_trace else '{"traceEvents":[{"ph":"X","ts":1.0'
    files["truncated"].write_text(text[: len(text) // 2])
    return files


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    (d / "raises.py").write_text("def f():\n    raise ValueError('from the script')\n\nf()\n")
    (d / "exits.py").write_text("import sys\nprint('bye')\nsys.exit(3)\n")
    bad = _write_bad_files(d)
    mem = SCRIPTS / "memory_bound.py"
    dma = "dma.engine_bandwidth_gbps=54.4"
    error_cases = [
        ["run", "--set", "hbm.bandwith_gbps=820", str(mem)],
        ["run", "--set", "hbm.bandwidth_gbps=fast", str(mem)],
        ["run", "--set", "hbm.bandwidth_gbps", str(mem)],
        ["run", "--preset", "trn9", str(mem)],
        ["run", str(d / "missing.py")],
        ["whatif", "--sweep", "hbm.bandwidth_gbps", str(mem)],
        ["whatif", "--sweep", "hbm.bandwidth_gbps=410,,820", str(mem)],
        ["whatif", "--sweep", "tensor.frequncy_ghz=1,2", str(mem)],
        ["report", str(bad["truncated"])],
        ["report", str(bad["notjson"])],
        ["report", str(bad["notneuronsim"])],
        ["run", str(d / "raises.py")],
        ["run", str(d / "exits.py")],
    ]
    jobs = {
        "train": lambda: cli(
            "run",
            "--trace",
            d / "train.json",
            "--summary-json",
            d / "train_summary.json",
            "--report",
            d / "train.html",
            SCRIPTS / "train_step.py",
            "2",
        ),
        "memory": lambda: cli(
            "whatif",
            "--set",
            dma,
            "--sweep",
            "hbm.bandwidth_gbps=410,820",
            "--sweep",
            "tensor.frequency_ghz=2.8,5.6",
            "--csv",
            d / "memory.csv",
            "--plot",
            d / "memory.png",
            "--out-dir",
            d / "memory_runs",
            mem,
        ),
        "compute": lambda: cli(
            "whatif",
            "--sweep",
            "tensor.frequency_ghz=2.8,5.6",
            "--sweep",
            "hbm.bandwidth_gbps=410,820",
            "--csv",
            d / "compute.csv",
            SCRIPTS / "compute_bound.py",
        ),
        "progress": lambda: cli(
            "run",
            "--progress",
            "always",
            "--set",
            dma,
            "--set",
            "hbm.bandwidth_gbps=410",
            "--summary-json",
            d / "progress_summary.json",
            mem,
            env={"NEURONSIM_PROGRESS_INTERVAL": "0.02"},
        ),
        "compiled": lambda: cli(
            "whatif",
            "--set",
            dma,
            "--sweep",
            "hbm.bandwidth_gbps=410,820",
            "--out-dir",
            d / "compiled_runs",
            SCRIPTS / "compiled_step.py",
        ),
        "errors": lambda: subprocess.run(
            [sys.executable, "-c", textwrap.dedent(_ERRORS_DRIVER), json.dumps(error_cases)],
            capture_output=True,
            text=True,
            env=_env(),
            cwd=REPO,
            timeout=600,
        ),
        "console_error": lambda: cli("run", "--set", "hbm.bandwith_gbps=820", mem, module=False),
        "ls": lambda: cli("ls", module=False),
        "ls_trn2": lambda: cli(
            "ls",
            "--json",
            env={
                "NEURON_SIM_PRESET": "trn2",
                "NEURON_RT_NUM_CORES": "2",
                "NEURON_SIM_SET": "hbm.bandwidth_gbps=1450",
            },
        ),
    }
    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        futures = {k: pool.submit(f) for k, f in jobs.items()}
        results = {k: f.result() for k, f in futures.items()}
    results["dir"] = d
    results["error_cases"] = error_cases
    return results


def _ok(p: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert p.returncode == 0, f"exit {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}"
    return p


# ---------------------------------------------------------------------------------------------
# (1) neuronsim run: the trace's structure and clocks


def _read_trace(path: Path):
    """Independent of the CLI's reader: (process, row) -> [(begin_ps, end_ps, name, args)]."""
    doc = json.loads(path.read_text())
    procs, threads = {}, {}
    for e in doc["traceEvents"]:
        if e["ph"] == "M" and e["name"] == "process_name":
            procs[e["pid"]] = e["args"]["name"]
        elif e["ph"] == "M" and e["name"] == "thread_name":
            threads[(e["pid"], e["tid"])] = e["args"]["name"]
    rows, counters = {}, set()
    for e in doc["traceEvents"]:
        if e["ph"] == "X":
            b = round(e["ts"] * 1e6)
            rows.setdefault((procs[e["pid"]], threads[(e["pid"], e["tid"])]), []).append(
                (b, b + round(e["dur"] * 1e6), e["name"], e["args"])
            )
        elif e["ph"] == "C":
            counters.add((procs[e["pid"]], e["name"]))
    for v in rows.values():
        v.sort(key=lambda s: (s[0], -s[1]))
    return doc["otherData"], rows, counters


def _inside(slices, enclosing) -> list:
    """The slices not inside any of `enclosing` (sorted, non-overlapping)."""
    import bisect

    begins = [e[0] for e in enclosing]
    bad = []
    for s in slices:
        i = bisect.bisect_right(begins, s[0]) - 1
        if i < 0 or s[1] > enclosing[i][1]:
            bad.append(s)
    return bad


def test_run_trace_structure(out):
    p = _ok(out["train"])
    assert "loss" in p.stdout  # the script ran as __main__ with its arguments
    assert "simulated time" in p.stderr and "neuronsim: bottleneck: " in p.stderr
    assert "neuronsim: where the time went: kernels " in p.stderr
    meta, rows, counters = _read_trace(out["dir"] / "train.json")
    for row in ("Python", "ATen ops", "Host runtime"):
        assert ("host", row) in rows, row
    for row in (
        "Ops",
        "Kernels",
        "TensorE",
        "TensorE (LoadStationary)",
        "VectorE",
        "ScalarE",
        "DMA q0",
        "Host DMA",
    ):
        assert ("nc0", row) in rows, row
    assert ("HBM", "HBM stack 0 bandwidth (GB/s)") in counters
    assert {("nc0", "SBUF occupancy (bytes)"), ("nc0", "PSUM occupancy (bytes)")} <= counters
    assert rows[("host", "Python")][0][2] == "Sequential"  # module ranges

    checked = 0
    for (process, row), slices in rows.items():
        if process == "host" or row == "Host DMA":
            continue
        # Non-overlapping, monotonic slices on every device row.
        for a, b in zip(slices, slices[1:], strict=False):
            assert b[0] >= a[1], f"{process} {row}: {a[:3]} overlaps {b[:3]}"
        if row in INSTRUCTION_ROWS or row.startswith("DMA q"):
            assert not _inside(
                slices, rows[(process, "Kernels")]
            ), f"{process} {row}: instruction outside kernels"
            checked += len(slices)
    assert checked > 500
    for process in {p for p, _ in rows if p.startswith("nc")}:
        if (process, "Kernels") in rows:
            assert not _inside(
                rows[(process, "Kernels")], rows[(process, "Ops")]
            ), "kernel outside ops"
    assert all(s[3].get("kernel") for s in rows[("nc0", "TensorE")])

    summary = json.loads((out["dir"] / "train_summary.json").read_text())
    assert summary["format"] == trace_data.SUMMARY_FORMAT
    assert summary["simulated_time_ns"] == meta["device_time_ns"] > 0
    assert meta["end_ns"] == max(meta["device_time_ns"], meta["host_time_ns"])
    last_device_end = max(s[1] for (pr, _), v in rows.items() if pr.startswith("nc") for s in v)
    assert last_device_end <= round(meta["device_time_ns"] * 1000)
    assert summary["instructions_outside_kernels"] == 0
    assert summary["exit_code"] == 0 and summary["argv"][1:] == ["2"]
    assert summary["op_report"] == meta["op_report"] and summary["native_calls"] > 50


def test_summary_matches_cpp_trace_summary(out):
    """The Python summary follows the C++ `ncsim trace summary` definition for definition."""
    # The build tools/test.sh made (BUILD_DIR, default build/): a missing binary is a failure,
    # not a skip, so a build elsewhere cannot silently drop this comparison.
    build = Path(os.environ.get("BUILD_DIR") or Path(REPO) / "build")
    ncsim = (build if build.is_absolute() else Path(REPO) / build) / "tools" / "ncsim"
    assert ncsim.exists(), f"{ncsim} is not built (set BUILD_DIR to the CMake build directory)"
    trace = out["dir"] / "train.json"
    cpp = json.loads(
        subprocess.run(
            [ncsim, "trace", "summary", "--json", trace], capture_output=True, text=True, check=True
        ).stdout
    )
    py = trace_data.summarize(trace_data.load(str(trace)))
    assert py["bottleneck"] == cpp["bottleneck"]
    for k in (
        "bottleneck_utilisation",
        "flops",
        "hbm_bytes",
        "dma_bytes",
        "achieved_flops_per_s",
        "peak_flops_per_s",
        "peak_hbm_bytes_per_s",
    ):
        assert py[k] == pytest.approx(cpp[k], rel=1e-9), k
    engines = {(e["process"], e["engine"]): e for e in py["engines"]}
    for e in cpp["engines"]:
        mine = engines[(e["process"], e["engine"])]
        assert (mine["instructions"], mine["busy_ns"]) == pytest.approx(
            (e["instructions"], e["busy_ns"])
        )


# ---------------------------------------------------------------------------------------------
# (2) what-if sweeps


def _csv(path: Path) -> dict[tuple[str, str], dict]:
    with open(path) as f:
        rows = list(csv.DictReader(f))
    keys = [k for k in rows[0] if k != "simulated_time_ns"][:2]
    return {(r[keys[0]], r[keys[1]]): r for r in rows}


def test_whatif_memory_bound_follows_hbm_bandwidth(out):
    """trn1: one core's 16 DMA engines (16 x 27.2 = 435 GB/s) barely exceed its 410 GB/s HBM
    stack, so raising HBM bandwidth alone hits the DMA engines' limit (+3.5%, see README). With
    the DMA engines doubled too, HBM is what limits the copy: 820 GB/s makes it much faster;
    TensorE's clock changes nothing."""
    p = _ok(out["memory"])
    lines = p.stdout.strip().splitlines()
    assert lines[0].split()[:4] == [
        "hbm.bandwidth_gbps",
        "tensor.frequency_ghz",
        "simulated",
        "time",
    ]
    # Header, rule, four runs, the footnote on the baseline.
    assert len(lines) == 2 + 4 + 1 and "DMA (all queues)" in lines[2]
    t = {k: float(r["simulated_time_ns"]) for k, r in _csv(out["dir"] / "memory.csv").items()}
    assert t[("820", "2.8")] < 0.8 * t[("410", "2.8")]
    # Determinism across processes: a parameter that does not matter gives identical times.
    assert t[("410", "5.6")] == t[("410", "2.8")] and t[("820", "5.6")] == t[("820", "2.8")]
    rows = _csv(out["dir"] / "memory.csv")
    assert rows[("410", "2.8")]["bottleneck"] == "DMA (all queues)"
    assert float(rows[("410", "2.8")]["speedup"]) == 1.0
    assert float(rows[("820", "2.8")]["speedup"]) == pytest.approx(
        t[("410", "2.8")] / t[("820", "2.8")], rel=1e-5
    )
    assert len(list((out["dir"] / "memory_runs").glob("*.json"))) == 4


def test_whatif_compute_bound_follows_tensor_clock(out):
    p = _ok(out["compute"])
    assert "TensorE" in p.stdout
    rows = _csv(out["dir"] / "compute.csv")
    t = {k: float(r["simulated_time_ns"]) for k, r in rows.items()}
    assert t[("5.6", "410")] < 0.85 * t[("2.8", "410")]
    assert t[("2.8", "820")] == pytest.approx(t[("2.8", "410")], rel=0.03)
    assert rows[("2.8", "410")]["bottleneck"] == "TensorE"


def test_whatif_on_a_compiled_script(out):
    """`neuronsim whatif` over a torch.compile'd script: each run compiles its graphs to fused
    programs (the script exits non-zero otherwise), and the memory-bound graph's fused program
    (an elementwise chain over 4 MB tensors) takes less simulated time with HBM doubled (the DMA
    engines doubled too, as in the memory-bound sweep)."""
    p = _ok(out["compiled"])
    assert p.stdout.strip().splitlines()[0].split()[:3] == [
        "hbm.bandwidth_gbps",
        "simulated",
        "time",
    ]
    runs = {}
    for f in sorted((out["dir"] / "compiled_runs").glob("*.json")):
        s = json.loads(f.read_text())
        assert s["exit_code"] == 0, s
        assert s["compile"]["graphs"] == 2 and s["compile"]["eager_nodes"] == 0, s["compile"]
        runs[int(s["overrides"]["hbm.bandwidth_gbps"])] = s
    assert set(runs) == {410, 820}

    def graph_ns(s, name):
        (g,) = [g for g in s["graph_launches"] if g["name"] == name]
        assert g["launches"] == 4
        return g["total_ns"]

    slow, fast = graph_ns(runs[410], "inf0"), graph_ns(runs[820], "inf0")
    assert fast < 0.9 * slow, (fast, slow)
    # The same programs ran: the fused chain moves the same HBM bytes under both presets.
    assert [g["hbm_bytes"] for g in runs[410]["graph_launches"]] == [
        g["hbm_bytes"] for g in runs[820]["graph_launches"]
    ]
    assert runs[820]["device_time_ns"] < runs[410]["device_time_ns"]


def test_progress_line_does_not_change_results(out):
    p = _ok(out["progress"])
    status = p.stderr.split("neuronsim: trn1")[
        0
    ]  # status lines ('\r'-separated) before the summary
    assert "s wall, simulated " in status and " ops" in status
    same = json.loads((out["dir"] / "progress_summary.json").read_text())["simulated_time_ns"]
    t = float(_csv(out["dir"] / "memory.csv")[("410", "2.8")]["simulated_time_ns"])
    assert same == t


def _check_png(path: Path, size: tuple[int, int]):
    from PIL import Image, ImageStat

    with Image.open(path) as im:
        assert im.size == size
        stat = ImageStat.Stat(im.convert("L"))
        assert stat.var[0] > 100, "blank image"
        assert len(im.convert("L").getcolors(1 << 16)) > 20


def test_whatif_plot(out):
    _ok(out["memory"])
    _check_png(out["dir"] / "memory.png", (800, 500))


# ---------------------------------------------------------------------------------------------
# (3) bad input: one line, non-zero exit, no traceback


@pytest.mark.parametrize(
    "index,expected",
    [
        (
            0,
            "unknown configuration key 'hbm.bandwith_gbps' in preset trn1 "
            "(did you mean 'hbm.bandwidth_gbps'?)",
        ),
        (1, "invalid value 'fast' for configuration key 'hbm.bandwidth_gbps'"),
        (2, "malformed --set 'hbm.bandwidth_gbps': expected KEY=VALUE"),
        (3, "unknown preset 'trn9'"),
        (4, "missing.py' not found"),
        (5, "malformed --sweep 'hbm.bandwidth_gbps'"),
        (6, "malformed --sweep 'hbm.bandwidth_gbps=410,,820'"),
        (
            7,
            "unknown configuration key 'tensor.frequncy_ghz' in preset trn1 "
            "(did you mean 'tensor.frequency_ghz'?)",
        ),
        (8, "the file ends early - was it truncated?"),
        (9, "not valid JSON"),
        (10, "not a neuronsim trace"),
    ],
)
def test_bad_input_is_one_line(out, index, expected):
    cases = json.loads(_ok(out["errors"]).stdout)
    case = cases[index]
    assert case["argv"] == out["error_cases"][index]
    assert case["code"] == 2, case
    lines = case["stderr"].splitlines()
    assert len(lines) == 1 and lines[0].startswith("neuronsim: error: "), case["stderr"]
    assert expected in lines[0]
    assert "Traceback" not in case["stderr"]


def test_a_trace_cut_anywhere_says_it_ends_early(tmp_path):
    # Wherever a truncation lands (inside a number, a literal, a string, between tokens), the
    # message is the truncation one, not a syntax error at some column.
    text = '{"traceEvents":[{"ph":"X","name":"k","ts":12.5,"dur":-3e2,"args":{"a":true,"b":null}}]}'
    f = tmp_path / "cut.json"
    for n in range(1, len(text)):
        f.write_text(text[:n])
        with pytest.raises(CLIError, match="the file ends early") as e:
            trace_data.summarize(trace_data.load(str(f)))
        assert str(f) in str(e.value), n


def test_console_script_error_process(out):
    p = out["console_error"]
    assert p.returncode == 2
    assert p.stderr.splitlines() == [
        "neuronsim: error: unknown configuration key 'hbm.bandwith_gbps' in preset trn1 "
        "(did you mean 'hbm.bandwidth_gbps'?)"
    ]


def test_script_exception_and_exit_code_pass_through(out):
    cases = json.loads(_ok(out["errors"]).stdout)
    raised, exited = cases[-2], cases[-1]
    assert raised["code"] == 1
    err = raised["stderr"]
    assert "Traceback (most recent call last)" in err and "ValueError: from the script" in err
    assert 'raises.py", line 2, in f' in err and "runpy" not in err and "cmd_run" not in err
    assert exited["code"] == 3


@pytest.mark.parametrize(
    "kind,expected",
    [
        ("notjson", "not valid JSON (Expecting value at line 1 column 1)"),
        ("notchrome", "not a Chrome trace"),
        ("notneuronsim", "not a neuronsim trace"),
        ("empty", "the file is empty"),
        ("truncated", "the file ends early - was it truncated?"),
    ],
)
def test_bad_trace_files(out, tmp_path, kind, expected):
    bad = _write_bad_files(tmp_path, out["dir"] / "train.json")
    for cmd in (["report", bad[kind]], ["diff", bad[kind], out["dir"] / "train.json"]):
        code, stdout, stderr = in_process(*cmd)
        assert code == 2 and stdout == ""
        assert stderr.splitlines() == [f"neuronsim: error: {bad[kind]}: {expected}"] or (
            len(stderr.splitlines()) == 1 and expected in stderr
        ), stderr


def test_usage_errors_are_one_line():
    for argv in (["bogus"], ["report"], ["report", "x.json", "--top", "zero"], ["presets"]):
        code, _, err = in_process(*argv)
        assert code == 2 and len(err.splitlines()) == 1 and err.startswith("neuronsim: error: "), (
            argv,
            err,
        )


# ---------------------------------------------------------------------------------------------
# (4) roofline and HTML


def test_report_roofline_and_html(out, tmp_path):
    _ok(out["train"])
    trace = out["dir"] / "train.json"
    code, stdout, _ = in_process(
        "report",
        trace,
        "--roofline",
        tmp_path / "roof.png",
        "--html",
        tmp_path / "report.html",
        "--top",
        "5",
    )
    assert code == 0
    _check_png(tmp_path / "roof.png", (950, 550))
    page = (tmp_path / "report.html").read_text()
    for section in (
        "Summary",
        "Where the time went",
        "Engines",
        "Top ops",
        "Top kernels",
        "Roofline",
        "Native and fallback ops",
        "Configuration",
    ):
        assert f">{section}</h2>" in page, section
    assert page.count('src="data:image/png;base64,') == 2  # the timeline and the roofline
    assert "http://" not in page and "https://" not in page  # self-contained
    assert "aten::addmm" in page and "hbm.bandwidth_gbps" in page
    # The page `run --report` wrote has the same sections.
    assert ">Roofline</h2>" in (out["dir"] / "train.html").read_text()

    # The roofline has one point per kernel with TensorE FLOPs, from the instructions inside it.
    s = trace_data.summarize(trace_data.load(str(trace)))
    mm = {k["name"]: k for k in s["kernels"]}["aten::addmm"]
    assert mm["flops"] > 0 and mm["hbm_bytes"] > 0
    assert mm["intensity"] == pytest.approx(mm["flops"] / mm["hbm_bytes"])
    assert 0 < mm["achieved_flops_per_s"] < s["peak_flops_per_s"]


# ---------------------------------------------------------------------------------------------
# (5) report, diff, ls, presets


def test_report_text_and_json(out):
    _ok(out["train"])
    trace = out["dir"] / "train.json"
    code, text, _ = in_process("report", trace, "--top", "3")
    assert code == 0
    for needle in (
        "simulated time",
        "bottleneck      ",
        "Where the time went",
        "TensorE FLOP/s",
        "% of peak",
        "Engines",
        "Top ops by device time (3 of",
        "Top kernels by simulated time (3 of",
        "Native and fallback ops:",
        "DMA (all queues)",
    ):
        assert needle in text, needle
    code, js, _ = in_process("report", trace, "--json")
    s = json.loads(js)
    assert (
        s["device_time_ns"]
        == json.loads((out["dir"] / "train_summary.json").read_text())["simulated_time_ns"]
    )
    ops = {o["name"]: o for o in s["ops"]}
    assert ops["aten::addmm"]["count"] == 4  # two Linear layers x two steps
    assert sum(o["percent"] for o in s["ops"]) == pytest.approx(100)
    assert s["ops"] == sorted(s["ops"], key=lambda o: -o["total_ns"])


def test_diff(out):
    _ok(out["memory"])
    runs = sorted((out["dir"] / "memory_runs").glob("*.json"))
    slow = next(r for r in runs if "_hbm.bandwidth_gbps=410,tensor.frequency_ghz=2.8." in r.name)
    fast = next(r for r in runs if "_hbm.bandwidth_gbps=820,tensor.frequency_ghz=2.8." in r.name)
    code, text, _ = in_process("diff", slow, fast)
    assert code == 0
    assert "simulated time (device)" in text and "Engines" in text and "Ops by change" in text
    code, js, _ = in_process("diff", slow, fast, "--json")
    d = json.loads(js)
    assert 0 < d["device_time_ratio"] < 0.8 and d["device_time_delta_ns"] < 0
    add = next(o for o in d["ops"] if o["op"] == "aten::add")
    assert add["count_a"] == add["count_b"] == 2 and add["ratio"] < 1
    # A trace against itself (traces and summaries are both accepted).
    code, js, _ = in_process(
        "diff", out["dir"] / "train.json", out["dir"] / "train_summary.json", "--json"
    )
    d = json.loads(js)
    assert d["device_time_ratio"] == 1.0 and all(o["delta_ns"] == 0 for o in d["ops"])


def test_ls(out):
    p = _ok(out["ls"])
    lines = p.stdout.splitlines()
    assert lines[0] == "instance-type: trn1.2xlarge (simulated, preset trn1)"
    body = [ln for ln in lines if ln.startswith("| ") and "NEURON DEVICE" not in ln]
    assert len(body) == 2 and all("NeuronCore-v2" in ln and "16.00 GiB" in ln for ln in body)
    info = json.loads(_ok(out["ls_trn2"]).stdout)
    assert info["instance_type"] == "trn2.3xlarge" and len(info["devices"]) == 2
    assert info["overrides"] == ["hbm.bandwidth_gbps=1450"]
    assert {d["generation"] for d in info["devices"]} == {"NeuronCore-v3"}
    assert info["devices"][0]["hbm_bandwidth_bytes_per_s"] == 1450e9


def test_presets():
    code, text, _ = in_process("presets", "list")
    assert code == 0 and "trn1" in text and "trn2" in text and "NeuronCore-v3" in text
    code, text, _ = in_process("presets", "show", "trn2")
    assert code == 0
    tree = json.loads((Path(REPO) / "device_model" / "presets" / "trn2.json").read_text())
    leaves = [
        (f"{g}.{k}", v) for g, group in tree.items() if g != "preset" for k, v in group.items()
    ]
    assert text.count("    source: ") == len(leaves) > 40
    for key, leaf in leaves:
        assert f"{key} = {json.dumps(leaf['value'])}" in text
        assert f"    source: {leaf['source']}" in text
    code, _, err = in_process("presets", "show", "trn7")
    assert code == 2 and "unknown preset 'trn7'" in err


def _synthetic_trace(path: Path) -> Path:
    """A hand-made trace: one op with one kernel of a matmul and a DMA on nc0, and an op report
    with a CPU fallback."""

    def meta(pid, tid, kind, name):
        return {"ph": "M", "pid": pid, "tid": tid, "name": kind, "args": {"name": name}}

    def x(tid, ts, dur, name, **args):
        return {"ph": "X", "pid": 2, "tid": tid, "ts": ts, "dur": dur, "name": name, "args": args}

    events = [
        meta(1, 0, "process_name", "host"),
        meta(1, 1, "thread_name", "ATen ops"),
        meta(2, 0, "process_name", "nc0"),
        meta(2, 1, "thread_name", "Ops"),
        meta(2, 2, "thread_name", "Kernels"),
        meta(2, 3, "thread_name", "TensorE"),
        meta(2, 4, "thread_name", "DMA q0"),
        {"ph": "X", "pid": 1, "tid": 1, "ts": 0.0, "dur": 10.0, "name": "aten::mm", "args": {}},
        x(1, 10.0, 1.0, "aten::mm"),
        x(2, 10.0, 1.0, "aten::mm", instructions=2),
        x(4, 10.0, 0.25, "dma_copy", bytes=10000.0, hbm_bytes=10000.0),
        x(3, 10.25, 0.5, "matmul", cycles=1400.0, flops=2e6),
    ]
    other = {
        "preset": "trn1",
        "overrides": {},
        "config": {"chip.cores": 2, "chip.hbm_stacks": 2},
        "peaks": {"tensor_flops_per_core": 91.75e12, "hbm_bytes_per_s_per_stack": 410e9},
        "op_report": {
            "aten::mm": {"native": 1, "fallback": 0, "computed_at_32_bits": 0},
            "aten::foo": {"native": 0, "fallback": 3, "computed_at_32_bits": 0},
        },
        "device_time_ns": 11000.0,
        "host_time_ns": 10000.0,
        "end_ns": 11000.0,
    }
    path.write_text(json.dumps({"traceEvents": events, "otherData": other}))
    return path


def test_report_on_a_synthetic_trace(tmp_path):
    trace = _synthetic_trace(tmp_path / "t.json")
    s = trace_data.summarize(trace_data.load(str(trace)))
    (mm,) = s["kernels"]
    assert (mm["flops"], mm["hbm_bytes"], mm["intensity"]) == (2e6, 1e4, 200.0)
    assert mm["achieved_flops_per_s"] == pytest.approx(2e12)  # 2 MFLOP in 1 us
    assert s["window_ns"] == 11000 and s["bottleneck"] == "nc0 TensorE"
    engines = {e["engine"]: e for e in s["engines"]}
    assert engines["TensorE"]["utilisation"] == pytest.approx(500 / 11000)
    assert s["peak_flops_per_s"] == 91.75e12 and s["peak_hbm_bytes_per_s"] == 410e9
    assert (s["native_calls"], s["fallback_calls"], s["fallback_ops"]) == (1, 3, ["aten::foo"])
    code, text, _ = in_process("report", trace, "--roofline", tmp_path / "r.png", "--text")
    assert code == 0 and "1 native calls, 3 CPU fallback calls" in text
    assert re.search(r"aten::foo\s+0\s+3\s+0", text)
    _check_png(tmp_path / "r.png", (950, 550))


def test_report_lists_compiled_graphs_fused_programs(tmp_path):
    """A compiled graph's launch is one program whose sections (the fused programs) count as the
    kernels, with the FX nodes they hold; the launch is listed as a graph launch, and an
    instruction that runs past its section's end (inside the launch) counts for its section."""

    def meta(tid, name):
        return {"ph": "M", "pid": 2, "tid": tid, "name": "thread_name", "args": {"name": name}}

    def x(tid, ts, dur, name, cat="", **args):
        return {
            "ph": "X",
            "pid": 2,
            "tid": tid,
            "ts": ts,
            "dur": dur,
            "name": name,
            "cat": cat,
            "args": args,
        }

    events = [
        {"ph": "M", "pid": 2, "tid": 0, "name": "process_name", "args": {"name": "nc0"}},
        meta(2, "Kernels"),
        meta(3, "TensorE"),
        meta(4, "DMA q0"),
        x(2, 0.0, 4.0, "fw0", "kernel", instructions=3),
        x(
            2,
            0.0,
            1.0,
            "fw0.r0 addmm+gelu",
            "section",
            nodes="addmm, gelu",
            program="fw0",
            instructions=2,
        ),
        x(2, 1.0, 3.0, "fw0.r1 add", "section", nodes="add", program="fw0", instructions=1),
        x(4, 0.0, 0.5, "dma_copy", bytes=1000.0, hbm_bytes=1000.0),
        x(3, 0.5, 1.5, "matmul", flops=4e6),  # starts in r0, ends in r1
        x(4, 2.0, 0.5, "dma_copy", bytes=500.0, hbm_bytes=500.0),
    ]
    other = {
        "preset": "trn1",
        "overrides": {},
        "config": {"chip.cores": 2, "chip.hbm_stacks": 2},
        "peaks": {"tensor_flops_per_core": 91.75e12, "hbm_bytes_per_s_per_stack": 410e9},
        "device_time_ns": 4000.0,
        "host_time_ns": 4000.0,
        "end_ns": 4000.0,
        "compile": {
            "graphs": 1,
            "nodes": 3,
            "fused_nodes": 3,
            "fused_regions": 2,
            "per_graph": [
                {
                    "name": "fw0",
                    "kind": "forward",
                    "nodes": 3,
                    "regions": 2,
                    "launches": 1,
                    "compile_s": 0.05,
                }
            ],
        },
    }
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events, "otherData": other}))
    s = trace_data.summarize(trace_data.load(str(path)))
    kernels = {k["name"]: k for k in s["kernels"]}
    assert set(kernels) == {"fw0.r0 addmm+gelu", "fw0.r1 add"}
    r0, r1 = kernels["fw0.r0 addmm+gelu"], kernels["fw0.r1 add"]
    assert (r0["fused_nodes"], r0["flops"], r0["hbm_bytes"]) == ("addmm, gelu", 4e6, 1000.0)
    assert (r1["fused_nodes"], r1["flops"], r1["hbm_bytes"]) == ("add", 0.0, 500.0)
    (launch,) = s["graph_launches"]
    assert (launch["name"], launch["launches"], launch["hbm_bytes"]) == ("fw0", 1, 1500.0)
    assert s["instructions_outside_kernels"] == 0
    code, text, _ = in_process("report", path)
    assert code == 0
    assert "fw0.r0 addmm+gelu: addmm, gelu" in text
    assert re.search(r"fw0\s+forward\s+3\s+2\s+1", text)
    assert re.search(r"fw0\s+1\s+4\.000 us", text), text
