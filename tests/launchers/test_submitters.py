"""A dead conductor's leftover sbatch processes (launchers.procs): found by what they are (an ``sbatch`` started by
the conductor that the marker names, in its session, that conductor dead), never by the inherited variable alone, so
a job's processes, which inherit it as well, are never waited for nor killed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from contracts.procfs import process_alive, read_stat
from launchers.procs import SUBMITTER_ENV, submitter_marker, submitters, wait_for_submitters

# a "conductor" that starts a child with the sweep's marker, as launchers.submit does, prints the child's pid and
# dies at once (the child is reparented and outlives it, as sbatch does after a SIGKILL of the conductor)
CONDUCTOR = """
import json, os, subprocess, sys
from launchers.procs import SUBMITTER_ENV, submitter_marker
env = dict(os.environ, **{SUBMITTER_ENV: submitter_marker(sys.argv[1])})
argv, new_session = json.loads(sys.argv[2]), sys.argv[3] == "1"
child = subprocess.Popen(argv, env=env, start_new_session=new_session, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(child.pid, flush=True)
os._exit(0)
"""


@pytest.fixture
def sbatch(tmp_path):
    """A stand-in named ``sbatch`` (its /proc comm is the script's name) that sleeps ``$1`` seconds."""
    exe = tmp_path / "bin" / "sbatch"
    exe.parent.mkdir()
    exe.write_text('#!/bin/sh\nsleep "$1"\n')
    exe.chmod(0o755)
    return exe


def _orphan(state_dir, argv, new_session=False) -> int:
    out = subprocess.run([sys.executable, "-c", CONDUCTOR, str(state_dir), json.dumps(argv), "1" if new_session else "0"],
                         capture_output=True, text=True, check=True, env=dict(os.environ, PYTHONPATH=os.getcwd()))
    pid = int(out.stdout.split()[0])
    end = time.monotonic() + 20  # until the child has exec'd its program (a loaded machine may take a while)
    while time.monotonic() < end and getattr(read_stat(pid), "comm", None) != Path(argv[0]).name[:15]:
        time.sleep(0.02)
    return pid


def _kill(*pids):
    for pid in pids:
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass


def test_only_the_dead_conductors_own_sbatch_is_found_and_waited_for(tmp_path, sbatch):
    mine, other = tmp_path / "a" / "nemo_run", tmp_path / "b" / "nemo_run"
    p = _orphan(mine, [str(sbatch), "1.5"])
    q = _orphan(other, [str(sbatch), "30"])
    try:
        assert submitters(mine) == [p]
        t0 = time.monotonic()
        assert wait_for_submitters(mine, 20) == [p]
        assert 0.5 < time.monotonic() - t0 < 15  # it waited for the child to end, not for the timeout
        assert submitters(mine) == []
        assert process_alive(q)  # another sweep's submitter is left alone
    finally:
        _kill(p, q)


def test_a_submitter_still_running_at_the_timeout_is_killed(tmp_path, sbatch):
    mine = tmp_path / "nemo_run"
    p = _orphan(mine, [str(sbatch), "60"])
    try:
        assert wait_for_submitters(mine, 0.5) == [p]
        end = time.monotonic() + 10  # SIGKILL is delivered at once; on a loaded machine the exit takes a moment
        while process_alive(p) and time.monotonic() < end:
            time.sleep(0.05)
        assert not process_alive(p)
    finally:
        _kill(p)


def test_a_jobs_processes_that_inherit_the_marker_are_not_submitters(tmp_path, sbatch):
    """What sbatch's ``--export=ALL`` gives a job on the submitting host: the same variable in every process, in
    sessions of slurmstepd's (here: a new session), and processes that are not sbatch."""
    mine = tmp_path / "nemo_run"
    job_step = _orphan(mine, [sys.executable, "-c", "import time; time.sleep(30)"])  # a rank, same session even
    job_sbatch = _orphan(mine, [str(sbatch), "30"], new_session=True)  # an sbatch a job script runs
    try:
        assert submitters(mine) == []
        t0 = time.monotonic()
        assert wait_for_submitters(mine, 5) == []
        assert time.monotonic() - t0 < 1
        assert process_alive(job_step) and process_alive(job_sbatch)
    finally:
        _kill(job_step, job_sbatch)


def test_a_live_conductors_sbatch_is_not_a_leftover(tmp_path, sbatch):
    mine = tmp_path / "nemo_run"
    child = subprocess.Popen([str(sbatch), "30"], env=dict(os.environ, **{SUBMITTER_ENV: submitter_marker(mine)}))
    try:
        time.sleep(0.3)
        assert submitters(mine) == []  # this process (its conductor) is alive
    finally:
        child.kill()
        child.wait()


def test_a_look_up_by_name_is_not_hidden_by_another_sweeps_newer_job_of_that_name(tmp_path):
    """Sweeps of the same variants use the same job names: the newest job of a name may be another sweep's."""
    from launchers.shell import Result
    from launchers.track import find_by_name

    mine, other = tmp_path / "s1", tmp_path / "s2"

    def shell(argv, timeout_s=60):
        if argv[0] == "sacct":
            return Result(0, f"12|moe.a.r0.a1|sbatch --requeue --parsable {mine}/nemo_run/x/a_sbatch.sh\n"
                             f"15|moe.a.r0.a1|sbatch --requeue --parsable {other}/nemo_run/x/a_sbatch.sh\n", "")
        return Result(0, f"16|moe.a.r0.a1|{other}/nemo_run/y/a_sbatch.sh\n", "")

    assert find_by_name(["moe.a.r0.a1"], shell, under=mine) == {"moe.a.r0.a1": ("12", f"{mine}/nemo_run/x/a_sbatch.sh")}
    assert find_by_name(["moe.a.r0.a1"], shell, under=tmp_path / "s3") == {}
    assert find_by_name(["moe.a.r0.a1"], shell)["moe.a.r0.a1"][0] == "16"
