"""Stop a recorded local process group, and find a dead conductor's leftover ``sbatch`` processes
(docs/CONTRACTS.md §4). Processes are read through the one ``/proc`` reader, :mod:`contracts.procfs`.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from contracts.procfs import environ, pids, process_alive, read_stat


def stop_group(pid: int, start: int | None, grace_s: float = 5.0) -> bool:
    """Stop the process group led by ``pid`` (a local job started in a session of its own: torchrun and its ranks,
    or the payload) when ``pid`` is still the recorded process: SIGTERM, then SIGKILL after ``grace_s`` seconds.
    Returns True when it was running and was stopped; False when it had already ended."""
    if not process_alive(pid, start):
        return False
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return False
    except PermissionError:
        os.kill(pid, signal.SIGTERM)
    end = time.monotonic() + grace_s
    while process_alive(pid, start) and time.monotonic() < end:
        time.sleep(0.05)
    if process_alive(pid, start):
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    return True


SUBMITTER_ENV = "MOE_SWEEP_SUBMITTING"
"""Set, for the duration of a submission, to :func:`submitter_marker`: the conductor's pid, start time (clock ticks)
and session id, and the sweep's NeMo-Run folder. Every sbatch the submission starts inherits it; so does every
process of a job that sbatch queues (sbatch's default ``--export=ALL``), so the variable alone does not tell a
leftover sbatch from a running job: :func:`submitters` also asks what the process is and who started it."""

SBATCH_COMM = "sbatch"  # the executable's name in /proc/<pid>/stat field 2 (Slurm's client, any version)


def submitter_marker(state_dir: str | os.PathLike[str]) -> str:
    """The :data:`SUBMITTER_ENV` value this process gives its sbatch children:
    ``<pid>:<start ticks>:<session id>:<resolved NeMo-Run folder>``."""
    me = read_stat("self")
    if me is None:  # no /proc: nothing will find leftovers either
        return f"0:0:0:{os.path.realpath(state_dir)}"
    return f"{me.pid}:{me.start}:{me.sid}:{os.path.realpath(state_dir)}"


def submitters(state_dir: str | os.PathLike[str]) -> list[int]:
    """Pids of the leftover sbatch processes of the sweep whose NeMo-Run folder is ``state_dir``: processes of
    this host that are an ``sbatch`` (:data:`SBATCH_COMM`), carry this sweep's :data:`SUBMITTER_ENV`, were started
    by the conductor the marker names (in its session, after it started) and outlive it (that conductor is dead).

    A job's processes inherit the marker too, but they are not sbatch, and slurmstepd starts them in sessions of
    their own; a live conductor's sbatch is its own business. NeMo-Run's local tunnel runs sbatch through
    invoke's ``Local`` runner, a ``Popen(shell=True)`` without a new session (invoke 2.2.1 ``runners.py`` line 1337,
    ``pty=False``), so the conductor's sbatch stays in its session. So a resume or a cancel never waits for, nor kills,
    the sweep's running jobs on this host (the local Slurm, a one-node workstation)."""
    folder = os.path.realpath(state_dir)
    found = []
    for pid in pids():
        if pid == os.getpid():
            continue
        st = read_stat(pid)
        if st is None or st.comm != SBATCH_COMM or st.state == "Z":
            continue
        value = (environ(pid) or {}).get(SUBMITTER_ENV, "")
        parts = value.split(":", 3)
        if len(parts) != 4 or Path(parts[3]) != Path(folder):
            continue
        try:
            cpid, cstart, csid = int(parts[0]), int(parts[1]), int(parts[2])
        except ValueError:
            continue
        if st.sid != csid or st.start < cstart or process_alive(cpid, cstart):
            continue
        found.append(pid)
    return found


def wait_for_submitters(state_dir: str | os.PathLike[str], timeout_s: float) -> list[int]:
    """Wait, ``timeout_s`` seconds at most, until no process of :func:`submitters` runs; those still running then
    are killed (an sbatch that hangs that long gets no answer from the controller). Returns the pids waited for, so
    the caller can say so. Only then can a look-up by job name trust that nothing more will be queued."""
    waited = submitters(state_dir)
    end = time.monotonic() + timeout_s
    left = waited
    while left and time.monotonic() < end:
        time.sleep(0.2)
        left = [p for p in left if process_alive(p)]
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return waited
