"""The one reader of this host's processes from ``/proc`` (Linux proc(5)), standard library only.

A process is named by its pid and its start time, ``/proc/<pid>/stat`` field 22 ``starttime``, in clock ticks since
boot (the one unit every recorded ``pid_start`` uses): a pid alone can be reused once its process is gone, the pair
names one process for the life of the host. A zombie (state ``Z``: exited, not reaped yet) counts as gone.
:func:`epoch_of` turns a start time into epoch seconds (``btime`` of ``/proc/stat`` plus ticks over
``SC_CLK_TCK``) for the phase stamps and the timeline, which line process starts up with wall-clock marks.

Nothing here raises for a process that is gone or unreadable (another user's): the readers return None.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ProcStat", "children", "cmdline", "environ", "epoch_of", "pids", "process_alive", "process_start", "read_stat"]


@dataclass(frozen=True, slots=True)
class ProcStat:
    """The fields of ``/proc/<pid>/stat`` this project reads (proc(5) numbering)."""

    pid: int
    comm: str
    """field 2: the executable's name, at most 15 characters (may hold spaces and parentheses)"""
    state: str
    """field 3: ``R``, ``S``, ``D``, ``Z`` (zombie), ``T`` ..."""
    ppid: int
    """field 4: the parent (1 or a subreaper once the parent died)"""
    sid: int
    """field 6: the session id (a job started by slurmstepd, or by ``start_new_session``, has a session of its own)"""
    start: int
    """field 22: start time in clock ticks since boot"""


def read_stat(pid: int | str) -> ProcStat | None:
    """``/proc/<pid>/stat`` of ``pid`` (an int or ``"self"``), None when there is none or it cannot be read."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
        head, _, tail = text.rpartition(")")  # the command name (field 2) may hold spaces and parentheses
        f = tail.split()
        return ProcStat(pid=int(head.split(" (", 1)[0]), comm=head.split(" (", 1)[1], state=f[0], ppid=int(f[1]),
                        sid=int(f[3]), start=int(f[19]))
    except (OSError, ValueError, IndexError):
        return None


def process_start(pid: int | str) -> int | None:
    """The start time of ``pid`` in clock ticks since boot (``/proc/<pid>/stat`` field 22), None when it is gone."""
    st = read_stat(pid)
    return st.start if st else None


def process_alive(pid: int | None, start: int | None = None) -> bool:
    """True when ``pid`` runs (not a zombie) and, if ``start`` is given, is the process that started then."""
    if not pid or pid <= 0:
        return False
    st = read_stat(pid)
    return st is not None and st.state != "Z" and (start is None or st.start == start)


def epoch_of(ticks: int) -> float | None:
    """Epoch seconds of a start time in clock ticks since boot (``btime`` of ``/proc/stat``); None when unknown."""
    try:
        btime = next(int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                     if line.startswith("btime "))
        return btime + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def environ(pid: int) -> dict[str, str] | None:
    """The environment ``pid`` started with (``/proc/<pid>/environ``), None when unreadable (gone, another user's)."""
    try:
        raw = Path(f"/proc/{int(pid)}/environ").read_bytes()
    except (OSError, ValueError):
        return None
    out = {}
    for item in raw.split(b"\0"):
        key, eq, value = item.partition(b"=")
        if eq:
            out[key.decode(errors="replace")] = value.decode(errors="replace")
    return out


def cmdline(pid: int) -> list[str] | None:
    """The command line of ``pid`` (``/proc/<pid>/cmdline``), None when unreadable."""
    try:
        raw = Path(f"/proc/{int(pid)}/cmdline").read_bytes()
    except (OSError, ValueError):
        return None
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def children(pid: int | None = None) -> set[int]:
    """The pids of the live children of ``pid`` (default this process), from every thread's
    ``/proc/<pid>/task/<tid>/children`` (Linux >= 3.5); an empty set where /proc has no such file."""
    out: set[int] = set()
    try:
        tasks = list(Path(f"/proc/{int(pid or os.getpid())}/task").iterdir())
    except (OSError, ValueError):
        return out
    for task in tasks:
        try:
            out.update(int(p) for p in (task / "children").read_text().split())
        except (OSError, ValueError):
            continue
    return out


def pids() -> list[int]:
    """The pids of this host's processes now (``/proc/<digits>``)."""
    return [int(e.name) for e in os.scandir("/proc") if e.name.isdigit()]
