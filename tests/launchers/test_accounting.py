"""GPU-hours from Slurm accounting: the sacct parser, and the real local cluster (gres gpu:h100, 2 per node)."""

from __future__ import annotations

import shutil
import subprocess
import time

import pytest

from launchers.accounting import gpus_of, job_usage, parse_sacct
from launchers.errors import SchedulerError
from tests.launchers.conftest import IN_CI

SAMPLE = """101|600|billing=2,cpu=2,gres/gpu=2,mem=4G,node=1
101.batch|600|cpu=2,gres/gpu=2,mem=4G,node=1
101.0|590|cpu=2,gres/gpu=2,mem=0,node=1
102|30|billing=1,cpu=1,mem=1G,node=1
103|3600|billing=16,cpu=16,gres/gpu:h100=8,node=1
"""


def test_parse_counts_allocation_lines_only():
    jobs = parse_sacct(SAMPLE)
    assert sorted(jobs) == ["101", "102", "103"]
    assert jobs["101"].gpu_hours == pytest.approx(600 * 2 / 3600)
    assert jobs["102"].gpus == 0 and jobs["102"].gpu_hours == 0
    assert jobs["103"].gpu_hours == pytest.approx(8.0)  # typed gres counts when the untyped entry is absent
    assert gpus_of("gres/gpu=4,gres/gpu:h100=4") == 4
    with pytest.raises(SchedulerError, match="not JobID"):
        parse_sacct("101|600\n")


QUEUE_WAIT_S = 1200  # the local cluster is shared by other tests: a job may queue behind theirs this long
RUN_WAIT_S = 120  # once started: the 3 s job, its end and slurmdbd's accounting record


def _state(job: str) -> str:
    return subprocess.run(["sacct", "-X", "-n", "-P", "-j", job, "-o", "State"], capture_output=True,
                          text=True).stdout.strip()


@pytest.mark.slurm
def test_real_sacct_gives_elapsed_times_allocated_gpus(tmp_path):
    if shutil.which("sbatch") is None:
        why = "no local Slurm (bash scripts/slurm_local/start.sh)"
        if IN_CI:
            pytest.fail(why)
        pytest.skip(why)
    # one GPU and a 1-minute limit: the job fits beside other tests' jobs (any node with a free GPU, and the
    # backfill scheduler can start it in a gap) instead of waiting for a whole node
    out = subprocess.run(["sbatch", "--parsable", "--gres=gpu:h100:1", "--time=00:01:00", "-J", "moe.acct-test",
                          "-o", str(tmp_path / "j.out"), "--wrap", "sleep 3"],
                         capture_output=True, text=True, check=True).stdout
    job = out.strip().split(";")[0]
    try:
        deadline = time.monotonic() + QUEUE_WAIT_S
        while _state(job) in ("", "PENDING") and time.monotonic() < deadline:
            time.sleep(2)
        if _state(job) in ("", "PENDING"):
            queue = subprocess.run(["squeue", "-o", "%i %j %T %R"], capture_output=True, text=True).stdout
            pytest.fail(f"job {job} still queued after {QUEUE_WAIT_S} s; the shared queue:\n{queue}")
        usage = {}
        deadline = time.monotonic() + RUN_WAIT_S
        while time.monotonic() < deadline:
            usage = job_usage([job])
            if job in usage and _state(job).startswith("COMPLETED") and usage[job].elapsed_s >= 3:
                break
            time.sleep(1)
    finally:
        subprocess.run(["scancel", job], capture_output=True, check=False)  # a finished job: nothing happens
    assert job in usage and usage[job].elapsed_s >= 3, f"job {job} ({_state(job)}) did not complete: {usage}"
    u = usage[job]
    assert u.gpus == 1 and 3 <= u.elapsed_s <= 60
    assert u.gpu_hours == pytest.approx(u.elapsed_s * 1 / 3600)
    assert job_usage(["999999999"]) == {}
