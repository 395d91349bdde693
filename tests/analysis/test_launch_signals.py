"""A signal the job asked for, read without any cancel line, and a launcher's task exit as a consequence: Megatron's
graceful exit alone (Slurm prints nothing when it delivers ``--signal``), torchrun's agent TERM echoed by srun's
``Exited with exit code 1``, and a hang ended that way; real-format logs in several layouts
(tests/analysis/launch_logs.py, fixtures in tests/analysis/fixtures/launch)."""

from __future__ import annotations

import pytest

from analysis.judge.classify import SchedulerInfo, classify
from analysis.logs.parse import parse_files, parse_lines
from tests.analysis import launch_logs as ll
from tests.analysis import timeline_logs as tl
from tests.analysis.synth import FIXTURES

LAUNCH = FIXTURES / "launch"
ASKED = ("#SBATCH --signal=TERM@60",)
# fixture -> (status, reason, flags that must be there)
EXPECTED = {
    "graceful_asked_signal_srun.log": ("failed", "slurm_time_limit", set()),
    "graceful_no_signal_asked_torchrun.log": ("incomplete", "cancelled", set()),
    "graceful_after_last_iteration_rank.log": ("ok", None, set()),
    "agent_term_srun_echo_torchrun.log": ("failed", "slurm_time_limit", {"task_exit_code"}),
    "hang_then_agent_term_srun_noprefix.log": ("failed", "suspected_hang", {"slurm_time_limit", "task_exit_code"}),
}


def test_every_launch_fixture_is_expected():
    assert sorted(p.name for p in LAUNCH.glob("*.log")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_launch_fixture_gets_its_reason(name):
    status, reason, flags = EXPECTED[name]
    v = classify(parse_files([LAUNCH / name]), median_step_ms=1000, steady_iterations=30)
    assert (v.status, v.reason) == (status, reason), (v.evidence, v.flags, v.timeline)
    assert flags <= set(v.flags), v.flags


# -- Megatron's graceful exit with no cancel line -----------------------------------------------------------------
@pytest.mark.parametrize("layout", tl.LAYOUTS)
@pytest.mark.parametrize("state,code", [("COMPLETED", 0), ("FAILED", 1), ("TIMEOUT", 0), (None, None)])
@pytest.mark.parametrize("asked_by", ["sbatch_line", "scheduler"])
def test_graceful_exit_on_the_asked_signal_before_the_end_is_the_pre_limit_stop(layout, state, code, asked_by):
    header = ASKED if asked_by == "sbatch_line" else ()
    lines = ll.run(layout, 40, 500, ll.graceful_exit(layout, 40, 42), header=header)
    sched = SchedulerInfo(state, code, signal="TERM@60" if asked_by == "scheduler" else None)
    v = classify(parse_lines(lines), scheduler=sched, median_step_ms=1000)
    assert (v.status, v.reason) == ("failed", "slurm_time_limit"), (v.evidence, v.flags)
    assert v.reason != "task_exit_code" and "exiting program" in " ".join(v.evidence)


@pytest.mark.parametrize("layout", tl.LAYOUTS)
@pytest.mark.parametrize("header,sched", [
    ((), SchedulerInfo()),  # torchrun alone
    (("#SBATCH --time=01:00:00",), SchedulerInfo("COMPLETED", 0)),  # a Slurm job that asked for no signal
    ((), SchedulerInfo("FAILED", 1)),
])
def test_graceful_exit_on_a_signal_nobody_asked_for_is_a_cancel(layout, header, sched):
    v = classify(parse_lines(ll.run(layout, 40, 500, ll.graceful_exit(layout, 40, 42), header=header)),
                 scheduler=sched, median_step_ms=1000)
    assert (v.status, v.reason) == ("incomplete", "cancelled"), (v.evidence, v.flags)


@pytest.mark.parametrize("layout", tl.LAYOUTS)
def test_graceful_exit_after_the_last_iteration_is_ok(layout):
    v = classify(parse_lines(ll.run(layout, 50, 50, ll.graceful_exit(layout, 50, 52), header=ASKED)),
                 scheduler=SchedulerInfo("COMPLETED", 0), median_step_ms=1000, steady_iterations=40)
    assert (v.status, v.reason) == ("ok", None), (v.evidence, v.flags)


@pytest.mark.parametrize("after", [True, False])
def test_cancel_lines_around_a_graceful_exit(after):
    """A plain JOB cancel printed after the graceful exit is the end of that job; printed before it, it is the
    scancel that caused it."""
    grace = ll.graceful_exit("srun", 40, 42)
    ending = grace + [tl.cancel("JOB", 50)] if after else [tl.cancel("JOB", 41)] + grace
    v = classify(parse_lines(ll.run("srun", 40, 500, ending, header=ASKED)), median_step_ms=1000)
    assert v.reason == ("slurm_time_limit" if after else "cancelled"), (v.evidence, v.flags)


def test_graceful_exit_with_a_step_only_cancel_stays_the_pre_limit_stop():
    ending = [tl.cancel("STEP", 41)] + ll.graceful_exit("torchrun", 40, 42)
    v = classify(parse_lines(ll.run("torchrun", 40, 500, ending, header=ASKED)), median_step_ms=1000)
    assert v.reason == "slurm_time_limit"


# -- srun's echo of the launcher's own exit -------------------------------------------------------------------------
@pytest.mark.parametrize("layout", tl.LAYOUTS)
@pytest.mark.parametrize("sig", ["15", "Signals.SIGTERM"])
@pytest.mark.parametrize("asked", [True, False])
def test_srun_echo_of_torchruns_exit_after_its_signal_is_a_consequence(layout, sig, asked):
    lines = ll.run(layout, 40, 500, ll.agent_signal(43, sig) + [ll.srun_exit(1)])
    sched = SchedulerInfo("FAILED", 1, signal="TERM@60" if asked else None)
    v = classify(parse_lines(lines), scheduler=sched, median_step_ms=1000)
    want = ("failed", "slurm_time_limit") if asked else ("incomplete", "cancelled")
    assert (v.status, v.reason) == want, (v.evidence, v.flags, v.timeline)
    assert "task_exit_code" in v.flags
    assert v.timeline["demoted"].get("task_exit_code", "").startswith("exit_of:")


def test_a_task_exit_printed_before_the_signal_is_still_its_cause():
    """srun's kill-on-bad-exit: task 3 exits 1 first, then the others get TERM: the exit is the cause."""
    lines = ll.run("srun", 40, 500, [ll.srun_exit(1, task=3)] + [f"0: {x}" for x in ll.agent_signal(43)],
                   header=ASKED)
    v = classify(parse_lines(lines), median_step_ms=1000)
    assert v.reason == "task_exit_code" and "signal:SIGTERM" in v.flags


@pytest.mark.parametrize("layout", tl.LAYOUTS)
@pytest.mark.parametrize("gap,reason", [(3000, "suspected_hang"), (120, "slurm_time_limit")])
def test_a_hang_ended_by_the_pre_limit_term_through_srun(layout, gap, reason):
    lines = ll.run(layout, 40, 500, ll.agent_signal(40 + gap) + [ll.srun_exit(1)])
    v = classify(parse_lines(lines), scheduler=SchedulerInfo("FAILED", 1, signal="TERM@60"), median_step_ms=1000)
    assert (v.status, v.reason) == ("failed", reason), (v.evidence, v.flags)
    if reason == "suspected_hang":
        assert "slurm_time_limit" in v.flags and v.details["last_iteration_age_s"] == pytest.approx(gap)
