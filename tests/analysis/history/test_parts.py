"""A profiled night's step-time breakdown is stored, and a regression names the parts that moved."""

from __future__ import annotations

from dataclasses import replace

from analysis.history import judge_sweep, record_summary
from analysis.history.synthetic import SyntheticSeries, simulate_series
from tests.analysis.history.helpers import write_sweep_dir

BASE = {"expert_gemm": 300.0, "dense_gemm": 150.0, "attention": 100.0, "other_compute": 80.0,
        "comm_exposed": 60.0, "idle": 20.0}


def _profiled(night, variant: str, parts: dict[str, float]):
    """``night`` with repeat 0 of ``variant`` profiled: its breakdown scaled to the run's median step time."""
    runs = []
    for r in night.runs:
        if r.variant == variant and r.repeat == 0:
            total = sum(parts.values())
            scaled = {k: v * r.step_time_ms / total for k, v in parts.items()}
            r = replace(r, breakdown_ms=tuple(scaled.items()) + (("step", r.step_time_ms),))
        runs.append(r)
    return replace(night, runs=tuple(runs))


def test_regression_names_the_parts_that_moved(tmp_path, sqlite_url):
    v = "deepep.ovl1.dw0"
    inputs = simulate_series(SyntheticSeries(), 8, seed=11, tonight={v: 1.10})
    slower = dict(BASE, comm_exposed=BASE["comm_exposed"] + 71.0)  # +10% of the step, all exposed communication
    nights = [_profiled(n, v, BASE) for n in inputs[:-1]] + [_profiled(inputs[-1], v, slower)]
    for n in nights:
        record_summary(sqlite_url, write_sweep_dir(tmp_path / "results", n))
    report = judge_sweep(sqlite_url, nights[-1].sweep.sweep_id)
    j = report.variant(v)
    assert j.step_time.verdict == "regression"
    assert [p.part for p in j.parts_moved] == ["comm_exposed"]
    moved = j.parts_moved[0]
    assert moved.change > 0.8 and moved.change_ms > 40  # about +71 ms relative to the profile's step
    assert "profiled baseline night(s)" in j.parts_note and "comm_exposed +" in j.parts_note
    js = report.to_json()["variants"]
    assert next(x for x in js if x["variant"] == v)["parts_moved"][0]["part"] == "comm_exposed"
    others = report.variant("a2a.ovl1.dw0")
    assert others.parts_moved == () and others.parts_note == ""  # never profiled: nothing said


def test_first_profiled_night_says_there_is_nothing_to_compare(tmp_path, sqlite_url):
    v = "deepep.ovl1.dw0"
    inputs = simulate_series(SyntheticSeries(), 4, seed=2)
    nights = inputs[:-1] + [_profiled(inputs[-1], v, BASE)]
    for n in nights:
        record_summary(sqlite_url, write_sweep_dir(tmp_path / "results", n))
    j = judge_sweep(sqlite_url, nights[-1].sweep.sweep_id).variant(v)
    assert j.parts_moved == () and "no earlier profiled night" in j.parts_note
