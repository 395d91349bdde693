"""Cause before consequence, launch context and progress-based hangs: real-format logs in several layouts
(tests/analysis/fixtures/timeline, built by tests/analysis/timeline_logs.py), the Slurm cancel grammar, death
signals numeric and named, and a property test that rewords and reorders a crash and keeps its primary reason."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis.judge import launch_context, timeline
from analysis.judge.classify import SchedulerInfo, classify
from analysis.logs.parse import parse_files, parse_lines
from tests.analysis import timeline_logs as tl
from tests.analysis.synth import FIXTURES

TL = FIXTURES / "timeline"
# fixture -> (status, reason, flags that must be there, the cause's rank or None)
EXPECTED = {
    "exception_then_watchdogs_torchrun.log": ("failed", "traceback", {"nccl_timeout"}, 3),
    "watchdogs_then_exception_srun.log": ("failed", "traceback", {"nccl_timeout", "srun_teardown"}, 3),
    "assertion_then_watchdogs_noprefix.log": ("failed", "assertion", {"nccl_timeout"}, None),
    "root_cause_rank_torchrun.log": ("failed", "cuda_oom", {"traceback"}, 2),
    "srun_kill_on_bad_exit.log": ("failed", "task_exit_code", {"srun_teardown"}, None),
    "task_failure_segfault.log": ("failed", "killed_by_signal:SIGSEGV", {"srun_teardown"}, None),
    "step_cancel_graceful_exit.log": ("failed", "slurm_time_limit", {"pre_limit_term"}, None),
    "sighup_numeric_torchrun.log": ("incomplete", "cancelled", set(), None),
    "sigint_named_torchrun.log": ("incomplete", "cancelled", set(), None),
    "sigterm_numeric_no_slurm.log": ("incomplete", "cancelled", set(), None),
    "sigterm_asked_signal_slurm.log": ("failed", "slurm_time_limit", set(), None),
    "ended_well_teardown_terminated.log": ("ok", None, set(), None),
    "scancel_long_after_last_step.log": ("failed", "suspected_hang", {"cancelled"}, None),
    "scancel_right_after_step.log": ("incomplete", "cancelled", set(), None),
    "sigterm_long_after_last_step.log": ("failed", "suspected_hang", {"cancelled"}, None),
}


def test_every_timeline_fixture_is_expected():
    assert sorted(p.name for p in TL.glob("*.log")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_timeline_fixture_gets_its_reason(name):
    status, reason, flags, rank = EXPECTED[name]
    v = classify(parse_files([TL / name]), median_step_ms=1000, steady_iterations=30)
    assert (v.status, v.reason) == (status, reason), (v.evidence, v.flags, v.timeline)
    assert flags <= set(v.flags), v.flags
    if reason is not None and rank is not None:
        assert v.timeline["cause"]["rank"] == rank
    if "signal:SIGTERM" in v.flags or name.startswith("ended_well"):
        assert "slurm_time_limit" not in v.flags and "hang_at_exit" != v.reason


def test_the_chain_has_cause_then_consequences_with_rank_time_and_line():
    v = classify(parse_files([TL / "exception_then_watchdogs_torchrun.log"]), median_step_ms=1000)
    cause, later = v.timeline["cause"], v.timeline["consequences"]
    assert cause["reason"] == "traceback" and "ValueError" in cause["line"] and cause["time"].startswith("2026-12-02")
    assert v.details["exception_type"] == "ValueError"
    watch = next(e for e in later if e["reason"] == "nccl_timeout")
    assert watch["rank"] in (0, 1, 2) and watch["time"] == "2026-12-02T10:10:41.000000" and "Watchdog" in watch["line"]
    assert v.timeline["demoted"]["nccl_timeout"] == "waiting_for:traceback"
    assert v.launch["launcher"] == "torchrun"


def test_root_cause_record_picks_the_rank_and_its_exception():
    v = classify(parse_files([TL / "root_cause_rank_torchrun.log"]))
    assert v.details["torchrun"]["rank"] == 2
    assert v.timeline["cause"]["rank"] == 2 and "OutOfMemoryError" in v.timeline["cause"]["line"]


def test_root_cause_record_picks_the_exception_of_its_rank_within_one_reason():
    lines = (tl.setup("rank") + tl.iterations(20, 500, "rank") + tl.exception("rank", 5, "KeyError", "'bias'")
             + tl.exception("rank", 2, "RuntimeError", "shape mismatch") + tl.torchrun_record(25, 2, other=(5, 1)))
    v = classify(parse_lines(lines))
    assert v.reason == "traceback" and v.details["exception_type"] == "RuntimeError"
    assert v.timeline["cause"]["rank"] == 2


# -- Slurm's cancel grammar: JOB versus STEP, each DUE TO reason ----------------------------------------------------
@pytest.mark.parametrize("entity", ["JOB", "STEP"])
@pytest.mark.parametrize("due,reason,status", [
    ("TIME LIMIT", "slurm_time_limit", "failed"), ("PREEMPTION", "preempted", "incomplete"),
    ("JOB REQUEUE", "preempted", "incomplete"), ("NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS", "node_failure",
                                                  "failed"),
    ("TASK FAILURE", "task_exit_code", "failed"), ("FOO BAR", "cancelled", "incomplete"),
])
def test_cancel_line_grammar(entity, due, reason, status):
    lines = tl.setup("srun") + tl.iterations(30, 500, "srun") + [tl.cancel(entity, 32, due)]
    v = classify(parse_lines(lines), median_step_ms=1000)
    assert (v.status, v.reason) == (status, reason), (v.evidence, v.flags)
    c = launch_context.CANCEL_RE.search(lines[-1])
    assert c is not None and c.group("entity") == entity and (c.group("due") or "") in due


def test_job_cancel_is_scancel_and_step_only_cancel_after_a_task_failure_is_teardown():
    base = tl.setup("srun") + tl.iterations(30, 500, "srun")
    assert classify(parse_lines(base + [tl.cancel("JOB", 31), tl.cancel("STEP", 31)])).reason == "cancelled"
    v = classify(parse_lines(base + tl.exception("srun", 4) + ["srun: error: node1: task 4: Exited with exit code 1",
                                                               tl.cancel("STEP", 31)]))
    assert v.reason == "traceback" and "cancelled" not in v.flags and "srun_teardown" in v.flags


def test_salloc_time_limit_revoke_is_a_time_limit():
    lines = tl.iterations(30, 500) + ["salloc: Job 255505 has exceeded its time limit and its allocation has been "
                                      "revoked.", "srun: forcing job termination"]
    assert classify(parse_lines(lines)).reason == "slurm_time_limit"


# -- death signals, numeric and named ---------------------------------------------------------------------------
@pytest.mark.parametrize("word,sig", [("1", "SIGHUP"), ("2", "SIGINT"), ("15", "SIGTERM"),
                                      ("Signals.SIGTERM", "SIGTERM"), ("SIGHUP", "SIGHUP"), ("Signals.SIGINT",
                                                                                              "SIGINT")])
def test_death_signal_numeric_and_named(word, sig):
    v = classify(parse_lines(tl.iterations(30, 500, "torchrun") + tl.death_signal(32, word)))
    assert (v.status, v.reason) == ("incomplete", "cancelled")
    assert v.details["signal"] == sig and "slurm_time_limit" not in v.flags
    assert v.launch["launcher"] == "torchrun"


def test_sigterm_in_a_job_that_asked_for_it_is_the_pre_limit_warning_only_then():
    body = tl.iterations(30, 500, "srun") + [f"0: {x}" for x in tl.death_signal(32, "15")]
    asked = classify(parse_lines(["#SBATCH --signal=TERM@60"] + body))
    assert asked.reason == "slurm_time_limit" and asked.details["pre_limit_term"] is True
    assert classify(parse_lines(["#SBATCH --time=01:00:00"] + body)).reason == "cancelled"
    from_launcher = classify(parse_lines(body), scheduler=SchedulerInfo("FAILED", 15, signal="TERM@60"))
    assert from_launcher.reason == "slurm_time_limit"


def test_sigterm_that_echoes_another_tasks_failure_is_not_a_reason():
    lines = (tl.iterations(30, 500, "srun") + tl.exception("srun", 1, "RuntimeError", "boom")
             + ["srun: error: node1: task 1: Exited with exit code 1"] + [f"0: {x}" for x in tl.death_signal(33, "15")])
    v = classify(parse_lines(lines))
    assert v.reason == "traceback" and "signal:SIGTERM" in v.flags


# -- hangs end in many ways -------------------------------------------------------------------------------------
@pytest.mark.parametrize("ending,by", [
    (lambda s: [tl.cancel("JOB", s)], "cancelled"),
    (lambda s: [tl.cancel("STEP", s, "TIME LIMIT")], "slurm_time_limit"),
    (lambda s: tl.death_signal(s, "Signals.SIGTERM"), "cancelled"),
    (lambda s: tl.death_signal(s, "1"), "cancelled"),
])
@pytest.mark.parametrize("gap,hang", [(3600, True), (300, False)])
def test_hang_is_measured_at_whatever_ended_the_run(ending, by, gap, hang):
    lines = tl.iterations(30, 500, "srun") + ending(30 + gap)
    v = classify(parse_lines(lines), median_step_ms=1000)
    if hang:
        assert (v.status, v.reason) == ("failed", "suspected_hang") and by in v.flags
        assert v.details["last_iteration_age_s"] == pytest.approx(gap) and v.details["ended_by"] == by
    else:
        assert v.reason == by


def test_hang_at_the_schedulers_end_time():
    v = classify(parse_lines(tl.iterations(30, 500)), median_step_ms=1000,
                 scheduler=SchedulerInfo("CANCELLED by 1000", None, ended_at=tl.slurm_time(30 + 4000)))
    assert v.reason == "suspected_hang" and "cancelled" in v.flags


def test_hang_rule_follows_the_median_step():
    lines = tl.iterations(30, 500, "srun", step_s=300) + [tl.cancel("JOB", 30 * 300 + 1000)]
    assert classify(parse_lines(lines), median_step_ms=300_000).reason == "cancelled"  # 1000 s < 5 x 300 s


# -- stamps and ranks --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("line,expected", [
    ("[E1202 10:28:07.123456 ProcessGroupNCCL.cpp:616] x", "2026-12-02T10:28:07.123456"),
    ("W1202 15:09:14.162000 3646 file.cpp:183] x", "2026-12-02T15:09:14.162000"),
    ("[rank13]:[E218 04:54:22.864467604 ProcessGroupNCCL.cpp:616] x", "2026-02-18T04:54:22.864468"),
    ("2026-12-02 10:28:07,123 - ERROR - x", "2026-12-02T10:28:07.123000"),
    ("[2026-12-02 10:28:07] iteration 5/ 10 |", "2026-12-02T10:28:07.000000"),
    ("slurmstepd: error: *** STEP 12.0 ON node CANCELLED AT 2026-12-02T10:28:07 ***", "2026-12-02T10:28:07.000000"),
    ("  time      : 2026-12-02_10:28:07", "2026-12-02T10:28:07.000000"),
    ("no stamp here", None),
])
def test_stamps(line, expected):
    assert timeline.iso(timeline.stamp(line, 2026)) == expected


@pytest.mark.parametrize("line,rank,kind", [
    ("3: RuntimeError: x", 3, "global"), ("[default5]:RuntimeError: x", 5, "local"),
    ("[rank12]:[E1202 10:28:07.1 x.cpp:1] [Rank 1] Watchdog", 12, "global"), ("[Rank 4] Watchdog", 4, "message"),
    ("RuntimeError: x", None, None),
])
def test_ranks(line, rank, kind):
    assert timeline.rank_of(line) == (rank, kind)


# -- property: rewording and reordering keep the primary reason ------------------------------------------------------
_CAUSES = [("ValueError", "bad shape", "traceback"), ("AssertionError", "tokens per expert", "assertion"),
           ("KeyError", "'bias'", "traceback"), ("torch.OutOfMemoryError", "CUDA out of memory. Tried to allocate "
                                                 "2.00 GiB", "cuda_oom")]


@settings(max_examples=60, deadline=None)
@given(layout=st.sampled_from(tl.LAYOUTS), cause=st.sampled_from(_CAUSES), bad=st.integers(0, 7),
       op=st.sampled_from(["ALLTOALL_BASE", "ALLREDUCE", "_REDUCE_SCATTER_BASE", "BROADCAST"]),
       timeout_s=st.sampled_from([60, 600, 1800]), seed=st.integers(0, 10**6), stamped=st.booleans(),
       torchrun=st.booleans())
def test_cause_is_stable_under_rewording_and_reordering(layout, cause, bad, op, timeout_s, seed, stamped, torchrun):
    etype, message, reason = cause
    last = 30
    per_rank: dict[int, list[str]] = {bad: tl.exception(layout, bad, etype, message, last + 1 if stamped else None)}
    for r in range(8):
        if r != bad:
            per_rank[r] = [tl.watchdog(layout, r, last + timeout_s + 1 + r, op, timeout_ms=timeout_s * 1000)]
    # independent ranks' lines interleave in any order; each rank's own lines keep theirs
    rng = random.Random(seed)
    queues = {r: list(v) for r, v in per_rank.items()}
    tail: list[str] = []
    while queues:
        r = rng.choice(sorted(queues))
        tail.append(queues[r].pop(0))
        if not queues[r]:
            del queues[r]
    if torchrun:
        tail += tl.torchrun_record(last + timeout_s + 10, bad)
    lines = tl.setup(layout) + tl.iterations(last, 500, layout) + tail
    v = classify(parse_lines(lines), median_step_ms=1000)
    assert v.reason == reason, (layout, v.flags, v.timeline)
    assert "nccl_timeout" in v.flags


def test_one_runs_reading_goes_down_to_the_timeline_and_back_once():
    """A call trace of one run's classification: the verdict calls the timeline's functions once (``read``), and
    the timeline calls nothing of the verdict's but the priority keys handed down to it (the causes are read
    inside the timeline, before the order)."""
    import sys

    log = parse_files([TL / "scancel_long_after_last_step.log"])
    down: list[str] = []
    up: set[str] = set()

    def profile(frame, event, arg):
        if event != "call" or frame.f_back is None:
            return
        callee, caller = frame.f_globals.get("__name__"), frame.f_back.f_globals.get("__name__")
        name = frame.f_code.co_name
        if (caller, callee) == ("analysis.judge.classify", "analysis.judge.timeline") and \
                callable(vars(timeline).get(name)) and not isinstance(vars(timeline)[name], type):
            down.append(name)  # a function of the module (a record's method, to_json, is no reading)
        elif (caller, callee) == ("analysis.judge.timeline", "analysis.judge.classify"):
            up.add(name)

    sys.setprofile(profile)
    try:
        verdict = classify(log, scheduler=SchedulerInfo("CANCELLED by 1000"))
    finally:
        sys.setprofile(None)
    assert verdict.reason == "suspected_hang"
    assert down == ["read"], down
    assert up <= {"_in_priority", "level_then_priority"}, up
