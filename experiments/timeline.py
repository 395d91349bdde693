"""Where the conductor's own wall time goes: phase marks of one command, recorded in ``<sweep>/conductor.json``.

One command per process is the CLI's case; a process that runs several (an API user, the tests) calls
:func:`reset` before each, and :func:`record` resets after writing.

The conductor's own overhead (the budget: at most 5 s for a one-run sweep) is measured here rather than as
"sweep wall minus direct wall", which a torchrun job's own start-up (45-65 s on the H200, varying by 20 s between
runs) drowns. Times are epoch seconds; every derived figure is in seconds:

- ``start``: the process's start (``/proc/self/stat`` field 22 and the boot time of ``/proc/stat``; the import of
  this module where /proc is missing), so the interpreter's own start-up counts; after a wrapper's set-up
  (``scripts/sweep.sh``'s install), the moment the wrapper exec'd Python (:func:`command_start`);
- ``planned``: the plan is composed, expanded and preflighted; ``written``: the sweep folder is written (job.sh
  files included);
- per run: ``launched`` (the launcher returned: the job's process exists, or Slurm accepted it) and ``ended`` (the
  conductor saw it final);
- ``analysed``: the last analysis and report are written; ``end``: the record is made.

Derived (:func:`derive`): ``pre_launch_s`` = first launch - start; ``post_job_s`` = end - last end of a run;
``between_runs_s`` = the time no run was in flight between the first launch and the last end; ``overhead_s`` =
the command's wall minus the time some run was in flight (what the conductor added to the jobs' own walls);
``overhead_per_run_s`` = ``overhead_s`` / runs.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from contracts import procfs
from contracts.atomic import write_json
from contracts.sweepdir import SweepDir

SCHEMA_VERSION = 1


def process_start() -> float:
    """Epoch seconds at which this process started (:mod:`contracts.procfs`), now where /proc cannot tell or the
    answer is not plausible (in the future, or over a year ago)."""
    ticks = procfs.process_start("self")
    start = procfs.epoch_of(ticks) if ticks is not None else None
    return start if start is not None and 0 <= time.time() - start < 86400 * 365 else time.time()


EXEC_ENV = "MOE_SWEEP_EXEC"  # "<pid>:<epoch s>": a wrapper's set-up ended then, and it exec'd this process


def command_start(environ: dict[str, str] | None = None) -> float:
    """When this command started: :func:`process_start`, or later when a wrapper exec'd it after its own set-up.

    ``exec`` keeps the process (its pid and its ``/proc`` start time), so ``scripts/sweep.sh``, which installs the
    environment (``pip install``, minutes on a fresh machine) and then ``exec``s Python, would count the set-up
    as the conductor's time. The wrapper therefore exports ``MOE_SWEEP_EXEC=<its pid>:<epoch s>`` just before
    ``exec``; it counts only in the process of that pid (a job or a chained collect that inherits the environment
    is another process), and it is removed from the environment here, so no child inherits it.
    """
    environ = os.environ if environ is None else environ
    start = process_start()
    raw = environ.pop(EXEC_ENV, None)
    if not raw:
        return start
    try:
        pid, at = raw.split(":", 1)
        when = float(at)
    except ValueError:
        return start
    if not pid.isdigit() or int(pid) != os.getpid():
        return start
    return when if start <= when <= time.time() else start


_START = command_start()
_marks: dict[str, float] = {}
_runs: dict[str, dict[str, float]] = {}


def reset() -> None:
    """Forget the marks and runs so far (a new command in this process; :func:`record` also calls it)."""
    _marks.clear()
    _runs.clear()


def mark(name: str) -> None:
    """Record phase ``name`` now (the first time only: a later mark of the same name is ignored)."""
    _marks.setdefault(name, time.time())


def launched(run: str) -> None:
    """The launcher returned for ``run`` (its process exists locally, or the scheduler accepted it)."""
    _runs.setdefault(run, {})["launched"] = time.time()


def ended(run: str) -> None:
    """The conductor saw ``run`` final."""
    _runs.setdefault(run, {})["ended"] = time.time()


def derive(start: float, end: float, runs: list[dict[str, float]]) -> dict[str, float | int | None]:
    """The derived figures (s) of one command that ran from ``start`` to ``end`` with ``runs`` (each a dict with
    ``launched`` and, once final, ``ended``, epoch s). A run without ``ended`` counts as in flight until ``end``."""
    spans = sorted((r["launched"], r.get("ended", end)) for r in runs if "launched" in r)
    busy, cur = 0.0, None
    for a, b in spans:  # the union of the runs' intervals
        if cur is None or a > cur[1]:
            if cur is not None:
                busy += cur[1] - cur[0]
            cur = [a, b]
        else:
            cur[1] = max(cur[1], b)
    if cur is not None:
        busy += cur[1] - cur[0]
    first = spans[0][0] if spans else None
    last = max((b for _, b in spans), default=None)
    wall = end - start
    overhead = wall - busy
    return {
        "wall_s": round(wall, 3), "runs": len(spans),
        "pre_launch_s": round(first - start, 3) if first is not None else None,
        "post_job_s": round(end - last, 3) if last is not None else None,
        "between_runs_s": round((last - first) - busy, 3) if spans else None,
        "overhead_s": round(overhead, 3),
        "overhead_per_run_s": round(overhead / len(spans), 3) if spans else None,
    }


def _session(action: str | None, end: float) -> dict[str, Any]:
    return {
        "action": action, "pid": os.getpid(), "start": round(_START, 3), "end": round(end, 3),
        "marks": {k: round(v - _START, 3) for k, v in _marks.items()},
        "jobs": {k: {p: round(t - _START, 3) for p, t in v.items()} for k, v in _runs.items()},
        **derive(_START, end, list(_runs.values())),
    }


def _write(sweep_root: Path, session: dict[str, Any]) -> None:
    """Append ``session`` to ``conductor.json``, replacing this command's open session (:func:`checkpoint`)."""
    path = SweepDir(Path(sweep_root)).conductor_json
    try:
        doc = json.loads(path.read_text())
        sessions = list(doc["sessions"]) if doc.get("schema_version") == SCHEMA_VERSION else []
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        sessions = []
    sessions = [s for s in sessions if not (isinstance(s, dict) and s.get("open") and s.get("pid") == session["pid"]
                                            and s.get("start") == session["start"])]
    write_json(path, {"schema_version": SCHEMA_VERSION, "sessions": [*sessions, session]})


def checkpoint(sweep_root: Path) -> None:
    """Write this command's marks so far into ``<sweep_root>/conductor.json`` as an open session (``"open":
    true``), so that an analysis made before the command ends sees when each run was launched and ended;
    :func:`record` replaces it. A failure to write is ignored (timings only)."""
    try:
        _write(sweep_root, {**_session(None, time.time()), "open": True})
    except OSError:
        pass


def record(sweep_root: Path, action: str) -> dict[str, Any]:
    """Append this command's marks to ``<sweep_root>/conductor.json`` (one atomic rewrite; earlier commands of a
    resumed sweep are kept, this command's open session is replaced) and return the new session record. An
    unreadable old file is replaced by a fresh one (it holds timings only, never results)."""
    session = _session(action, time.time())
    _write(sweep_root, session)
    reset()  # a later command of this process (an API user, a test) starts afresh
    return session


def describe(session: dict[str, Any]) -> str:
    """One line for the console: where the conductor's own time went in ``session`` (a :func:`record` result)."""
    if not session.get("runs"):
        return f"conductor: {session['wall_s']:.1f} s, no run launched"
    return (f"conductor: {session['pre_launch_s']:.1f} s before the first launch, {session['post_job_s']:.1f} s after "
            f"the last run, {session['between_runs_s']:.1f} s between runs: {session['overhead_s']:.1f} s over "
            f"{session['runs']} run(s) ({session['overhead_per_run_s']:.1f} s per run)")
