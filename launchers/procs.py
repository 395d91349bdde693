"""Processes of this host by pid, for jobs whose conductor died (docs/CONTRACTS.md §4): is a recorded process
still the one recorded, and stop it.

A pid alone can be reused once its process is gone, so a process is recorded with its start time, field 22 of
``/proc/<pid>/stat`` (clock ticks since boot, proc(5)); the pair names one process for the life of the host. A zombie
(state ``Z``: exited, not reaped yet) counts as gone.
"""

from __future__ import annotations

import os
import signal
import time


def _stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (field 3 first), or None when there is none."""
    try:
        text = open(f"/proc/{int(pid)}/stat").read()
    except (OSError, ValueError):
        return None
    return text[text.rfind(")") + 2:].split()  # the command name (field 2) may hold spaces and parentheses


def process_start(pid: int) -> int | None:
    """The start time of ``pid`` in clock ticks since boot (``/proc/<pid>/stat`` field 22), None when it is gone."""
    fields = _stat(pid)
    try:
        return int(fields[19]) if fields else None
    except (IndexError, ValueError):
        return None


def process_alive(pid: int | None, start: int | None = None) -> bool:
    """True when ``pid`` runs (not a zombie) and, if ``start`` is given, is the process that started then."""
    if not pid or pid <= 0:
        return False
    fields = _stat(pid)
    if not fields or fields[0] == "Z":
        return False
    return start is None or process_start(pid) == start


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
"""Set, for the duration of a submission, to the sweep's NeMo-Run folder: every sbatch the submission starts
inherits it through its environment, so a later conductor can tell a dead conductor's sbatch that still runs."""


def submitter_marker(state_dir: str | os.PathLike[str]) -> str:
    """The :data:`SUBMITTER_ENV` value of a sweep: its NeMo-Run folder, resolved (one per sweep)."""
    return os.path.realpath(state_dir)


def submitters(marker: str) -> list[int]:
    """Pids of this host's processes (other than this one) whose environment holds ``SUBMITTER_ENV=marker``: the
    sbatch children of a conductor that died while it submitted (they outlive it and may still queue a job)."""
    needle = f"{SUBMITTER_ENV}={marker}".encode()
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry.name}/environ", "rb") as f:
                env = f.read()
        except OSError:  # gone, or another user's
            continue
        if needle in env.split(b"\0") and process_alive(int(entry.name)):
            found.append(int(entry.name))
    return found


def wait_for_submitters(marker: str, timeout_s: float) -> list[int]:
    """Wait, ``timeout_s`` seconds at most, until no process of :func:`submitters` runs; those still running then
    are killed (an sbatch that hangs that long gets no answer from the controller). Returns the pids waited for, so
    the caller can say so. Only then can a look-up by job name trust that nothing more will be queued."""
    waited = submitters(marker)
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
