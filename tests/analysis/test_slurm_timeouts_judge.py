"""Late scheduler stops read with the cluster's own Slurm timeouts (SchedulerInfo ``slurmd_timeout_s``,
``kill_wait_s``, ``grace_time_s``, read at collect time) instead of slurm.conf(5)'s defaults (300 s, 30 s, 0 s):
a stop line that arrives within the cluster's window explains the earlier symptom, one outside it does not, and the
timeline records which values were used and where from. Real-format lines in the srun, torchrun, PyTorch and plain
layouts."""

from __future__ import annotations

import pytest

from analysis.judge.classify import SchedulerInfo
from analysis.judge.timeline import SlurmTimeouts
from tests.analysis.test_misread_classes import LAYOUTS, iters, judge, pre, slurm

NET = ("[E309 {t} 311 ProcessGroupNCCL.cpp:1830] [Rank 2] Process group watchdog thread terminated with exception: "
       "NCCL error: remote process exited or there was a network error")


def _clock(s: float) -> str:
    whole = int(s)
    return f"22:{40 + whole // 60:02d}:{whole % 60:02d}.000000"


def node_fail_log(layout: str, symptom_s: float, lag_s: float) -> list[str]:
    """Training, a network error at ``symptom_s`` (s after the start), the NODE FAIL line ``lag_s`` s later."""
    return iters(layout, int(symptom_s) - 5, 2000) + [
        pre(layout, 2) + NET.format(t=_clock(symptom_s)),
        f"slurmstepd: error: *** STEP 600.0 ON gpu-s02 CANCELLED AT {slurm(symptom_s + lag_s)} DUE TO NODE FAIL ***"]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_node_failure_within_the_clusters_slurmd_timeout_explains_the_network_error(layout):
    lines = node_fail_log(layout, 60, 450)  # SlurmdTimeout=600 on this cluster: 450 s is within it
    v = judge(lines, scheduler=SchedulerInfo(slurmd_timeout_s=600))
    assert v.reason == "node_failure", (v.flags, v.timeline)
    assert v.timeline["demoted"]["nccl_error"] == "stopped_by:node_failure"
    assert v.timeline["slurm_timeouts"]["slurmd_timeout_s"] == {"value": 600.0, "source": "cluster"}
    assert v.timeline["slurm_timeouts"]["kill_wait_s"] == {"value": 30.0, "source": "default"}
    # the same log with slurm.conf(5)'s default SlurmdTimeout (300 s): the NODE FAIL line is too late to explain it
    d = judge(lines)
    assert d.reason == "nccl_error", (d.flags, d.timeline)
    assert d.timeline["slurm_timeouts"]["slurmd_timeout_s"] == {"value": 300.0, "source": "default"}


def test_a_node_failure_past_the_clusters_slurmd_timeout_does_not_explain_it():
    v = judge(node_fail_log("srun", 60, 700), scheduler=SchedulerInfo(slurmd_timeout_s=600))
    assert v.reason == "nccl_error", (v.flags, v.timeline)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_preemption_within_the_clusters_grace_time_explains_what_came_before_its_line(layout):
    """No soft signal was logged (the job ignored or did not print it): only GraceTime dates the stop."""
    lines = iters(layout, 55, 2000) + [
        pre(layout, 3) + NET.format(t=_clock(60)),
        f"slurmstepd: error: *** JOB 51234 ON gpu-r01 CANCELLED AT {slurm(60 + 400)} DUE TO PREEMPTION ***"]
    v = judge(lines, scheduler=SchedulerInfo(grace_time_s=600))
    assert v.reason == "preempted", (v.flags, v.timeline)
    assert v.timeline["slurm_timeouts"]["grace_time_s"] == {"value": 600.0, "source": "cluster"}
    d = judge(lines)  # GraceTime unknown: slurm.conf(5)'s partition default 0 s, no window before the line
    assert d.reason == "nccl_error", (d.flags, d.timeline)
    assert d.timeline["slurm_timeouts"]["grace_time_s"] == {"value": 0.0, "source": "default"}


@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_kills_echoes_within_the_clusters_kill_wait_are_the_time_limits(layout):
    lines = iters(layout, 40, 2000) + [
        f"slurmstepd: error: *** STEP 777.0 ON gpu-q1 CANCELLED AT {slurm(45)} DUE TO TIME LIMIT ***",
        pre(layout, 2) + NET.format(t=_clock(45 + 100))]
    v = judge(lines, scheduler=SchedulerInfo(kill_wait_s=120))
    assert v.reason == "slurm_time_limit"
    assert v.timeline["demoted"]["nccl_error"] == "stopped_by:slurm_time_limit", v.timeline
    d = judge(lines)  # KillWait 30 s: an error 100 s after the line is no echo of the kill
    assert d.timeline["demoted"]["nccl_error"] == "later", d.timeline
    assert d.timeline["slurm_timeouts"]["kill_wait_s"] == {"value": 30.0, "source": "default"}


def test_a_run_without_a_scheduler_stop_records_no_timeouts():
    lines = iters("srun", 30, 2000) + ["2: " + NET.format(t=_clock(35))]
    assert "slurm_timeouts" not in judge(lines, scheduler=SchedulerInfo(slurmd_timeout_s=600)).timeline


@pytest.mark.parametrize("given,value,source", [(None, 300.0, "default"), (-1, 300.0, "default"),
                                                ("600", 300.0, "default"), (0, 0.0, "cluster"),
                                                (450.5, 450.5, "cluster")])
def test_timeouts_take_the_clusters_value_only_when_it_is_a_duration(given, value, source):
    t = SlurmTimeouts.of(slurmd_timeout_s=given)
    assert t.to_json()["slurmd_timeout_s"] == {"value": value, "source": source}
