"""Where the time went (issue 29): the run's parts add up to its window (a training step, the
demo, a 2-rank run), `run` without a trace says what `report` says from the trace, launch
overhead is named when it dominates, the what-if marks the stock preset as its baseline and says
what changed, the sensitivity study re-times recorded programs and ranks the parameters, and a
recorded run replays to the same times.

The slow commands run as subprocesses, started together by a module fixture.
"""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import REPO
from neuronsim.cli import trace_data

EXAMPLES = Path(REPO) / "examples"
SCRIPTS = Path(__file__).parent / "scripts"
PART_KEYS = (
    "kernels",
    "host_copies",
    "collectives",
    "collective_wait",
    "cpu_fallback",
    "launch",
    "idle",
)


def _env() -> dict:
    return {k: v for k, v in os.environ.items() if not k.startswith("NEURON")}


def cli(*args, timeout: int = 900):
    return subprocess.run(
        [sys.executable, "-m", "neuronsim", *map(str, args)],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=REPO,
        timeout=timeout,
    )


def _ok(p):
    assert p.returncode == 0, f"exit {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}"
    return p


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    d = tmp_path_factory.mktemp("time")
    (d / "fails.py").write_text(
        "import torch\n\nx = torch.ones(2, device='neuron')\nraise ValueError('bad step')\n"
    )
    build = Path(os.environ.get("BUILD_DIR") or Path(REPO) / "build")
    ncsim = (build if build.is_absolute() else Path(REPO) / build) / "tools" / "ncsim"
    mlp = EXAMPLES / "mlp_train.py"
    jobs = {
        "mlp_traced": lambda: cli(
            "run", "--trace", d / "mlp.json", "--summary-json", d / "mlp_summary.json", mlp
        ),
        "mlp_plain": lambda: cli("run", mlp),
        "recorded": lambda: cli(
            "run", "--record", d / "mlp.nsrun", "--summary-json", d / "rec.json", mlp, "2"
        ),
        "demo_model": lambda: cli(
            "run", "--trace", d / "demo_model.json", EXAMPLES / "transformer_step.py", "1"
        ),
        "demo": lambda: subprocess.run(
            [ncsim, "demo", "--trace", d / "demo.json", "--report", d / "demo.txt"],
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=600,
        ),
        "ranks": lambda: cli(
            "run",
            "--nproc-per-node",
            "2",
            "--trace",
            d / "ranks.json",
            EXAMPLES / "distributed_train.py",
        ),
        # Baseline last in a 2-D sweep: (410, 10000) is trn1's own.
        "sweep_last": lambda: cli(
            "whatif",
            "--sweep",
            "hbm.bandwidth_gbps=820,410",
            "--sweep",
            "host.kernel_launch_overhead_ns=0,10000",
            "--csv",
            d / "last.csv",
            "--plot",
            d / "last.png",
            SCRIPTS / "memory_bound.py",
            "512",
        ),
        # A range that leaves the stock value out: the stock preset runs as well.
        "sweep_added": lambda: cli(
            "whatif",
            "--sweep",
            "hbm.bandwidth_gbps=820:1640:x2",
            "--csv",
            d / "added.csv",
            SCRIPTS / "memory_bound.py",
            "512",
        ),
        "sens_mlp": lambda: cli(
            "whatif",
            "--sensitivity",
            "--param",
            "hbm.bandwidth_gbps",
            "--param",
            "host.kernel_launch_overhead_ns",
            "--param",
            "dma.queues",
            "--csv",
            d / "sens_mlp.csv",
            mlp,
            "2",
        ),
        "sens_bw": lambda: cli(
            "whatif",
            "--sensitivity",
            "--param",
            "host.kernel_launch_overhead_ns",
            "--param",
            "tensor.frequency_ghz",
            "--param",
            "hbm.bandwidth_gbps",
            "--csv",
            d / "sens_bw.csv",
            EXAMPLES / "elementwise_chain.py",
            "2048",
        ),
        "fails": lambda: cli("whatif", "--sweep", "hbm.bandwidth_gbps=410,820", d / "fails.py"),
    }
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = {k: pool.submit(f) for k, f in jobs.items()}
        results = {k: f.result() for k, f in futures.items()}
    results["dir"] = d
    results["ncsim"] = ncsim
    return results


def _parts(acc: dict) -> dict[str, dict]:
    return {p["part"]: p for p in acc["parts"]}


def _check_adds_up(acc: dict) -> None:
    parts = _parts(acc)
    assert set(parts) == set(PART_KEYS)
    total = sum(p["ns"] for p in acc["parts"])
    assert acc["window_ns"] > 0
    assert total == pytest.approx(acc["window_ns"], rel=1e-3)  # 0.1%
    assert sum(p["share"] for p in acc["parts"]) == pytest.approx(1.0, rel=1e-3)
    for p in acc["parts"]:
        assert 0 <= p["ns"] <= p["total_ns"] + 1e-6 or p["part"] in ("idle",), p


def test_a_training_step_adds_up_and_names_launch_overhead(out):
    p = _ok(out["mlp_traced"])
    s = trace_data.summarize(trace_data.load(str(out["dir"] / "mlp.json")))
    _check_adds_up(s["time_account"])
    parts = _parts(s["time_account"])
    # A small MLP: 10 us launches outlast its kernels, so the device waits for the host.
    assert parts["launch"]["count"] > 50
    assert s["limit"] == {
        "name": "kernel launch overhead",
        "share": pytest.approx(parts["launch"]["share"]),
        "engine": False,
    }
    assert parts["launch"]["share"] > max(
        e["utilisation"] for e in s["engines"] if e["role"] in ("engine", "dma")
    )
    assert "bottleneck: kernel launch overhead (" in p.stderr
    assert "where the time went: kernels " in p.stderr
    # The closing lines of the same run without a trace (the runtime's account) are the same.
    plain = _ok(out["mlp_plain"]).stderr
    for key in ("bottleneck:", "where the time went:", "engines busy:"):
        mine = [ln for ln in p.stderr.splitlines() if key in ln]
        theirs = [ln for ln in plain.splitlines() if key in ln]
        assert mine == theirs, (mine, theirs)


def test_the_demo_adds_up(out):
    _ok(out["demo"])
    ncsim = out["ncsim"]
    cpp = subprocess.run(
        [ncsim, "trace", "summary", "--json", out["dir"] / "demo.json"],
        capture_output=True,
        text=True,
        check=True,
    )
    s = json.loads(cpp.stdout)
    _check_adds_up(s["time_account"])
    assert _parts(s["time_account"])["kernels"]["share"] > 0.9  # programs run back to back
    _ok(out["demo_model"])
    s = trace_data.summarize(trace_data.load(str(out["dir"] / "demo_model.json")))
    _check_adds_up(s["time_account"])


def test_a_two_rank_run_adds_up_per_rank(out):
    p = _ok(out["ranks"])
    from neuronsim.cli import ranks

    merged = trace_data.load(str(out["dir"] / "ranks.json"))
    rows = ranks.breakdown(ranks.rank_files(merged))
    assert len(rows) == 2
    for r in rows:
        _check_adds_up(r["time_account"])
        assert r["collectives"] > 0
        parts = (
            r["compute_ns"],
            r["communication_exposed_ns"],
            r["waiting_ns"],
            r["launch_ns"],
            r["other_ns"],
        )
        assert sum(parts) == pytest.approx(r["window_ns"], rel=1e-3)
    assert "launch overhead" in p.stderr  # the per-rank table's column


def test_report_shows_the_parts_and_html_prints_only_the_summary(out, tmp_path):
    import contextlib
    import io

    from neuronsim.cli.main import main

    def run(*argv):
        o, e = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(o), contextlib.redirect_stderr(e):
            code = main([str(a) for a in argv])
        return code, o.getvalue(), e.getvalue()

    trace = out["dir"] / "mlp.json"
    code, text, _ = run("report", trace)
    assert code == 0
    assert "bottleneck" in text and "kernel launch overhead (" in text
    assert "Where the time went" in text and "total (the window)" in text
    assert "% of window" in text and "Columns" in text
    code, short, err = run("report", trace, "--html", tmp_path / "r.html")
    assert code == 0 and "Where the time went" in short and "Top ops" not in short
    assert err.splitlines() == [f"neuronsim: HTML report written to {tmp_path / 'r.html'}"]
    page = (tmp_path / "r.html").read_text()
    for anchor in ("id='time'", "id='timeline'", "id='roofline'", "class='legend'"):
        assert anchor in page
    code, both, _ = run("report", trace, "--html", tmp_path / "r2.html", "--text")
    assert "Top ops" in both


def test_recorded_run_replays_to_the_same_times(out):
    p = _ok(out["recorded"])
    assert "run log written to" in p.stderr
    rec = json.loads((out["dir"] / "rec.json").read_text())
    assert rec["run_log"]["replayable"] and rec["run_log"]["launches"] > 20
    again = _ok(cli("replay", out["dir"] / "mlp.nsrun", "--summary-json", out["dir"] / "re.json"))
    assert "re-timed mlp.nsrun on trn1" in again.stderr
    replayed = json.loads((out["dir"] / "re.json").read_text())
    assert replayed["time_account"]["end_ns"] == rec["time_account"]["end_ns"]
    for a, b in zip(rec["time_account"]["parts"], replayed["time_account"]["parts"], strict=True):
        assert a["ns"] == pytest.approx(b["ns"], abs=1e-3), (a, b)


def _csv_rows(path: Path) -> list[dict]:
    with open(path) as f:
        return list(csv.DictReader(f))


def test_whatif_marks_the_stock_preset_as_baseline_wherever_it_is(out):
    p = _ok(out["sweep_last"])
    rows = _csv_rows(out["dir"] / "last.csv")
    assert len(rows) == 4
    base = [r for r in rows if r["baseline"] == "1"]
    assert len(base) == 1 and base[0]["hbm.bandwidth_gbps"] == "410"
    assert base[0]["host.kernel_launch_overhead_ns"] == "10000" and rows[-1] is base[0]
    t0 = float(base[0]["simulated_time_ns"])
    for r in rows:
        assert float(r["speedup"]) == pytest.approx(t0 / float(r["simulated_time_ns"]), rel=1e-5)
    lines = p.stdout.splitlines()
    marked = [ln for ln in lines if " * " in ln or ln.strip().startswith("410 *")]
    assert len(marked) == 1 and "baseline" in marked[0]
    # What changed: no launch overhead at all makes its part vanish.
    zero = [
        r
        for r in rows
        if r["host.kernel_launch_overhead_ns"] == "0" and r["hbm.bandwidth_gbps"] == "410"
    ][0]
    assert "kernel launch overhead -100%" in zero["what_changed"]
    from PIL import Image

    with Image.open(out["dir"] / "last.png") as im:
        assert im.size == (800, 500)

    p = _ok(out["sweep_added"])
    rows = _csv_rows(out["dir"] / "added.csv")
    assert [r["hbm.bandwidth_gbps"] for r in rows] == ["410", "820", "1640"]
    assert [r["baseline"] for r in rows] == ["1", "0", "0"]


def test_whatif_failure_names_the_line_and_the_command(out):
    p = out["fails"]
    assert p.returncode == 1
    (line,) = p.stderr.strip().splitlines()[-1:]
    assert "fails.py:4: ValueError: bad step" in line, line
    assert "reproduce: neuronsim run --set hbm.bandwidth_gbps=" in line


def test_sensitivity_ranks_launch_overhead_first_for_a_small_training_step(out):
    p = _ok(out["sens_mlp"])
    rows = _csv_rows(out["dir"] / "sens_mlp.csv")
    assert rows[0]["key"] == "host.kernel_launch_overhead_ns", p.stdout
    how = {r["key"]: r["how"] for r in rows}
    assert how["host.kernel_launch_overhead_ns"] == "re-timed"
    assert how["hbm.bandwidth_gbps"] == "re-timed" and how["dma.queues"] == "re-timed"
    assert float(rows[0]["speedup_0.5x"]) > 1.1 > 0.9 > float(rows[0]["speedup_2x"])
    assert "re-timed the recorded programs" in p.stdout and "re-ran" not in p.stdout
    # The kernel library's programs use 16 DMA queues: on 8, re-timing fails as a run would.
    assert "failed: re-timing with dma.queues=8: " in p.stdout
    assert "rule 'dma-queue-range'" in p.stdout


def test_sensitivity_ranks_hbm_bandwidth_first_for_a_bandwidth_bound_chain(out):
    p = _ok(out["sens_bw"])
    rows = _csv_rows(out["dir"] / "sens_bw.csv")
    assert rows[0]["key"] == "hbm.bandwidth_gbps", p.stdout
    assert float(rows[0]["speedup_0.5x"]) < 0.7  # half the bandwidth: about half the speed
    tensor = [r for r in rows if r["key"] == "tensor.frequency_ghz"][0]
    assert float(tensor["speedup_2x"]) == pytest.approx(1.0, abs=0.02)


def test_sweep_ranges():
    from neuronsim.cli.errors import CLIError
    from neuronsim.cli.sweep_values import parse_sweep

    assert parse_sweep("hbm.bandwidth_gbps=410:1640:x2") == (
        "hbm.bandwidth_gbps",
        ["410", "820", "1640"],
    )
    assert parse_sweep("k=410..1640/4")[1] == ["410", "820", "1230", "1640"]
    assert parse_sweep("k=1:2:+0.25")[1] == ["1", "1.25", "1.5", "1.75", "2"]
    assert parse_sweep("k=a,b")[1] == ["a", "b"]
    for bad in ("k=410:100:x2", "k=1..2/1", "k=1:2:x1", "k=1,1", "k", "k=1,,2"):
        with pytest.raises(CLIError, match="--sweep"):
            parse_sweep(bad)


def test_log_axis_for_doubling_sweeps():
    from neuronsim.cli.plots import log_axis

    assert log_axis([410, 820, 1640]) and not log_axis([410, 820]) and not log_axis(None)


def test_timeline_rows_cover_the_engines_and_idle_parts(out):
    s = trace_data.summarize(trace_data.load(str(out["dir"] / "mlp.json")))
    tl = s["timeline"]
    labels = [r["label"] for r in tl["rows"]]
    assert "TensorE" in labels and "DMA (all queues)" in labels
    assert "kernel launch overhead" in labels
    n = len(tl["rows"][0]["busy"])
    assert n == 200 and all(len(r["busy"]) == n for r in tl["rows"])
    assert all(0 <= x <= 1 for r in tl["rows"] for x in r["busy"])
    launch = next(r for r in tl["rows"] if r["label"] == "kernel launch overhead")
    part = next(p for p in s["time_account"]["parts"] if p["part"] == "launch")
    assert sum(launch["busy"]) * tl["bin_ns"] == pytest.approx(part["ns"], rel=0.01)


def test_roofline_places_every_kernel_against_its_own_engine(out):
    from neuronsim.cli import plots

    s = trace_data.summarize(trace_data.load(str(out["dir"] / "mlp.json")))
    points, skipped = plots.roofline_points(s)
    assert len(points) + len(skipped) == len(s["kernels"]) and len(points) >= len(s["kernels"]) - 1
    engines = {p["engine"] for p in points}
    assert {"TensorE", "VectorE"} & engines and len(engines) >= 2, engines
    for p in points:
        assert p["y"] <= min(1.0, p["x"]) * 1.001 or p["x"] == float("inf"), p
    png = plots.roofline_png(s)
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert re.search(r"\d", s["kernels"][0]["name"]) or True
