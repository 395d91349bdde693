"""The H100 sitting of the GPU-seconds-per-verdict work (scripts/gpu/verdict_cost.sh, benchmarks/RESULTS.md): the same
A/A of moe_bench_h200 (4 layers, control arm, repeats=auto, +-2%) with today's code (``today``: train_iters=20) and
with the pooled statistic, the nightly prior, train_iters=auto and the fast teardown (``mine2``), on one machine."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from statistics import median

from analysis.report import main as report_main

FIX = Path(__file__).parent / "fixtures" / "h100_verdict_cost"


def _analyse(tmp_path: Path, name: str) -> dict:
    d = tmp_path / name
    shutil.copytree(FIX / name, d)
    assert report_main([str(d), "--quiet"]) == 0
    return json.loads((d / "report" / "summary.json").read_text())


def test_both_designs_call_the_control_equivalent_and_state_their_gpu_seconds(tmp_path):
    today, mine = _analyse(tmp_path, "today"), _analyse(tmp_path, "mine2")
    for s in (today, mine):
        (c,) = s["comparisons"]
        assert c["control"] and c["verdict"] == "equivalent" and not c["doubtful"]
        cost = s["gpu_time"]["verdicts"]
        assert cost["decided"] == 1 and cost["gpu_s_per_decided"] == s["gpu_time"]["held_s"]
    (c,) = mine["comparisons"]
    seq = c["sequential"]
    assert seq["design"] == "pooled_group_sequential_t" and seq["prior_used"] and seq["noise"]["prior"]["nights"] == 3
    # the plan started with one block (the prior), the conductor added the second: the prior was too weak
    m = json.loads((FIX / "mine2" / "manifest.json").read_text())
    assert m["design"]["noise_prior"]["nights"] == 3 and len(m["blocks"]) == 2
    assert mine["gpu_time"]["held_s"] < today["gpu_time"]["held_s"]


def test_the_runs_measure_the_same_steps_and_end_sooner(tmp_path):
    today, mine = _analyse(tmp_path, "today"), _analyse(tmp_path, "mine2")
    med = [median(r["step_time_ms"]["median"] for r in s["runs"]) for s in (today, mine)]
    assert abs(med[1] / med[0] - 1) < 0.01  # step times within 1% of today's
    down = [[r["fixed_cost"]["teardown_s"] for r in s["runs"]] for s in (today, mine)]
    assert max(down[1]) < 2.0 < min(down[0])  # the payload exits once its records are flushed
    stops = [line for p in (FIX / "mine2" / "variants").rglob("*_combined.log") for line in p.read_text().splitlines()
             if "train_iters=auto: stop after iteration" in line]
    # block 0's runs stopped after 11 and 12 iterations; block 1's at (or without reaching +-0.5% before) the cap 20
    assert sorted(int(x.split("iteration ")[1].split()[0]) for x in stops) == [11, 12, 20]
    assert sorted(r["step_time_ms"]["n"] for r in mine["runs"]) == [8, 9, 17, 17]
