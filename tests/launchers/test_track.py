"""Job states from squeue/sacct output (the scheduler CLI is faked here; test_slurm_submit.py uses the real one)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from launchers.errors import SchedulerError
from launchers.shell import Result
from launchers.track import log_files, manifest_status, query, states


class FakeShell:
    """Answers squeue and sacct with canned text; records the calls."""

    def __init__(self, squeue: str = "", sacct: str = "", squeue_rc: int = 0, squeue_err: str = "",
                 sacct_rc: int = 0) -> None:
        self.answers = {"squeue": Result(squeue_rc, squeue, squeue_err), "sacct": Result(sacct_rc, sacct, "boom")}
        self.calls: list[list[str]] = []

    def __call__(self, argv: Sequence[str], timeout_s: float = 60) -> Result:
        self.calls.append(list(argv))
        return self.answers[argv[0]]


@pytest.mark.parametrize("state,status", [
    ("PENDING", "submitted"), ("REQUEUED", "submitted"), ("RUNNING", "running"), ("COMPLETING", "running"),
    ("COMPLETED", "succeeded"), ("FAILED", "failed"), ("OUT_OF_MEMORY", "failed"), ("NODE_FAIL", "failed"),
    ("CANCELLED by 0", "cancelled"), ("CANCELLED+", "cancelled"), ("TIMEOUT", "timeout"), ("WHATEVER", "lost"),
])
def test_slurm_states_map_to_manifest_statuses(state: str, status: str) -> None:
    assert manifest_status(state) == status


def test_query_prefers_the_queue_for_live_jobs_and_keeps_timeout() -> None:
    shell = FakeShell(squeue="11|RUNNING|None|0:05|n1\n",
                      sacct="11|PENDING|0:0|0||None\n12|TIMEOUT|0:0|65|n1|None\n13|FAILED|2:0|3|n1|None\n"
                            "14|CANCELLED by 0|0:15|9|n1|None\n")
    got = query(["11", "12", "13", "14"], shell)
    assert got["11"].status == "running" and got["11"].nodes == "n1"
    assert got["12"].status == "timeout" and got["12"].elapsed_s == 65
    assert (got["13"].status, got["13"].exit_code) == ("failed", 2)
    assert (got["14"].status, got["14"].signal) == ("cancelled", 15)
    assert shell.calls[1][:5] == ["sacct", "-X", "-n", "-P", "-j"] and shell.calls[1][5] == "11,12,13,14"


def test_unknown_ids_are_not_an_error_but_a_dead_sacct_is() -> None:
    quiet = FakeShell(squeue_rc=1, squeue_err="slurm_load_jobs error: Invalid job id specified")
    assert query(["99"], quiet) == {}
    with pytest.raises(SchedulerError, match="sacct failed"):
        query(["99"], FakeShell(sacct_rc=1))


def test_vanished_job_is_lost_only_after_the_grace_period() -> None:
    shell = FakeShell()
    assert states({"7": 1000.0}, shell, now=1010.0)["7"].status == "submitted"
    lost = states({"7": 1000.0}, shell, now=2000.0)["7"]
    assert lost.status == "lost" and lost.final


def test_log_files_match_the_job_id_exactly(tmp_path: Path) -> None:
    for name in ("log-moe.a_5_b-a1_5_0.out", "log-moe.a_5_b-a1_5_1.out", "sbatch_moe.a_5_b-a1_5.out",
                 "log-moe.a_5_b-a1_15_0.out", "sbatch_moe.a_5_b-a1_15.out", "other.txt"):
        (tmp_path / name).write_text("x")
    assert [p.name for p in log_files(tmp_path, "5")] == [
        "log-moe.a_5_b-a1_5_0.out", "log-moe.a_5_b-a1_5_1.out", "sbatch_moe.a_5_b-a1_5.out"]
    assert log_files(tmp_path / "missing", "5") == []
