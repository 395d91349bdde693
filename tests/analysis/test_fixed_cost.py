"""The split of a run's held GPU time (analysis.measure.fixed_cost): the payload's phase stamps, Megatron's step times and
the conductor's launch and end, read from a real-format log and a conductor.json."""

from __future__ import annotations

import json

import numpy as np
import pytest

from analysis.analyze import analyze_run
from analysis.judge.classify import Expectation, SchedulerInfo
from analysis.measure import fixed_cost
from tests.analysis.megatron_format import in_layout, megatron_line

T0 = 1_764_700_000.0  # the conductor's launch, epoch s


def _log(tmp_path, layout="plain", iters=20, step_ms=1000.0, stamps=None):
    stamps = {"launcher_start": 4.0, "start": 6.0, "imported": 30.0, "checked": 33.0, "initialized": 45.0,
              "trained": 45.0 + (iters + 7) * step_ms / 1000.0 + 2.0,
              "exit": 46.0 + (iters + 7) * step_ms / 1000.0 + 2.0} \
        if stamps is None else stamps
    lines = ["[payload] train m.a2a on NVIDIA H200 (cc 9.0), rank 0; Megatron-Bridge 0.6.2"]
    lines += [f"[payload] phase {k} at {T0 + v:.3f}" for k, v in stamps.items() if k != "trained" and k != "exit"]
    lines += [megatron_line(i, iters, step_ms=step_ms * (8 if i == 1 else 1)) for i in range(1, iters + 1)]
    lines += [f"[payload] phase {k} at {T0 + v:.3f}" for k, v in stamps.items() if k in ("trained", "exit")]
    lines += ["[payload] exit 0"]
    p = tmp_path / "log-0.out"
    p.write_text("\n".join(in_layout(lines, layout)) + "\n")
    return p


@pytest.mark.parametrize("layout", ["plain", "srun", "torchrun", "rank"])
def test_the_split_adds_up_to_the_held_time(tmp_path, layout):
    path = _log(tmp_path, layout)
    held = (T0, T0 + 80.0)
    r = analyze_run([path], name="m.a2a", variant="m.a2a", expect=Expectation(mode="train", train_iters=20),
                    scheduler=SchedulerInfo("succeeded", 0), held=held)
    fc = r.fixed_cost
    assert fc is not None, r
    assert fc["held_s"] == 80.0
    assert fc["launch_s"] == pytest.approx(4.0)
    assert fc["startup_s"] == pytest.approx(26.0)
    assert fc["checks_s"] == pytest.approx(3.0)
    assert fc["init_s"] == pytest.approx(12.0)
    # the first iteration (8 s) and the other warm-up ones are not steps; the steady ones are
    assert fc["warmup_s"] + fc["steps_s"] == pytest.approx(27.0)
    assert fc["steps_s"] == pytest.approx(r.iterations_steady * 1.0)
    assert fc["in_training_s"] == pytest.approx(2.0)
    assert fc["teardown_s"] == pytest.approx(80.0 - 74.0)
    parts = sum(fc[f"{p}_s"] for p in fixed_cost.PARTS)
    assert parts == pytest.approx(fc["held_s"])
    assert fc["steps_share"] == pytest.approx(fc["steps_s"] / 80.0, abs=1e-4)


def test_without_stamps_only_the_held_time_and_steps_are_known(tmp_path):
    path = _log(tmp_path, stamps={})
    r = analyze_run([path], name="m", variant="m", expect=Expectation(mode="train", train_iters=20),
                    scheduler=SchedulerInfo("succeeded", 0), held=(T0, T0 + 60.0))
    fc = r.fixed_cost
    assert fc["held_s"] == 60.0 and fc["launch_s"] is None and fc["init_s"] is None and fc["teardown_s"] is None
    assert fc["steps_s"] > 0 and fc["steps_share"] == pytest.approx(fc["steps_s"] / 60.0, abs=1e-4)


def test_a_restart_replaces_the_first_attempts_stamps():
    texts = [f"[payload] phase {k} at {v}" for k, v in
             [("start", 10), ("imported", 20), ("initialized", 30), ("start", 100), ("imported", 130)]]
    assert fixed_cost.phases(texts) == {"start": 100.0, "imported": 130.0}


def test_held_times_take_the_launch_from_the_first_session_and_the_end_from_the_last(tmp_path):
    doc = {"schema_version": 1, "sessions": [
        {"action": "run", "start": 1000.0, "jobs": {"v.r0.a1": {"launched": 5.0}, "w.r0.a1": {"launched": 6.0,
                                                                                              "ended": 50.0}}},
        {"action": "collect", "start": 2000.0, "jobs": {"v.r0.a1": {"ended": 3.0}}},
    ]}
    p = tmp_path / "conductor.json"
    p.write_text(json.dumps(doc))
    assert fixed_cost.held_times(p) == {"v.r0.a1": (1005.0, 2003.0), "w.r0.a1": (1006.0, 1050.0)}
    p.write_text("{not json")
    assert fixed_cost.held_times(p) == {}


def test_the_sweep_total_weighs_each_run_by_its_held_time():
    a = fixed_cost.split({}, (0.0, 100.0), np.full(10, 2000.0), np.array([False] * 2 + [True] * 8))
    b = fixed_cost.split({}, (0.0, 50.0), np.full(10, 1000.0), np.array([False] * 2 + [True] * 8))
    t = fixed_cost.total([a, b, None])
    assert t.runs == 2 and t.held_s == 150.0 and t.steps_s == pytest.approx(16.0 + 8.0)
    assert t.steps_share == pytest.approx(24.0 / 150.0)
    assert fixed_cost.total([None]) is None
