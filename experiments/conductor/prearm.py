"""The jobs a sweep runs before its arms: the container preflight (``preflight=container``), the stack's
conformance tests (``conformance=true``) and the fabric probe (``fabric_probe``). One way to run each: submit it (or
adopt the one a conductor before this one left queued or running), follow it until it ends, copy its logs; and one
way to stop them.

Each is a job of the sweep like a run, so the same rules hold (CONTRACTS §4):

- a resume never submits one twice: a job of the same item still queued or running in this sweep folder (found by
  its Slurm job name, ``moe.<item>``, and its script's place, :meth:`launchers.backend.Backend.find_items`) is
  adopted and followed instead;
- a conductor that stops while one runs (Ctrl-C, SIGTERM, ``action=cancel``) cancels it: its verdict is only for
  the conductor that follows it, and a resume runs it again;
- ``action=cancel`` without a live conductor cancels them too (:func:`stop_prearm_jobs`).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from contracts.atomic import write_bytes
from contracts.jobs import JobHandle, JobState
from contracts.records import RunRef
from experiments.conductor.collect import log_name
from experiments.conductor.progress import RunView
from launchers.errors import SchedulerError
from launchers.spec import JobCommand

PREARM_JOBS = {"preflight": "preflight", "conformance": "conformance", "fabric": "fabric_probe"}
"""The jobs before the arms: their key (the RunRef task's stem) -> the item name they are submitted as."""


def _ref(key: str) -> RunRef:
    return RunRef(key, 0, 1)


def _live(sw: Any, key: str) -> JobHandle | None:
    """The job of ``key`` a conductor before this one left queued or running, adopted; None when there is none."""
    ref = _ref(key)
    try:
        found = sw.backend.find_items({ref.task: PREARM_JOBS[key]}).get(ref.task)
    except SchedulerError as e:  # the look-up failed: submitting another one is the lesser harm, and said
        print(f"warning: could not look for a {PREARM_JOBS[key]} job left by an earlier conductor ({e})",
              file=sys.stderr)
        return None
    if found is None:
        return None
    return found if not sw.backend.poll([ref])[ref.task].final else None


def run_prearm(sw: Any, key: str, command: JobCommand, title: str, logs: Path, *, resume: bool = False,
               poll_s: float = 1.0) -> tuple[JobHandle, JobState]:
    """Run the job ``command`` of ``key`` (one of :data:`PREARM_JOBS`) for the sweep ``sw`` (a tracking.Sweep) to
    its end, its live row titled ``title``; its logs are copied into ``logs``. With ``resume`` a job of ``key`` that
    an earlier conductor left queued or running is followed instead of submitting another. Returns its handle and
    final state.

    Raises:
        whatever stops the conductor meanwhile (KeyboardInterrupt for Ctrl-C, SIGTERM and ``action=cancel``), after
        the job was cancelled; SchedulerError from the submission.
    """
    ref = _ref(key)
    h = _live(sw, key) if resume else None
    if h is not None:
        print(f"{title}: following job {h.job_id}, which a conductor before this one submitted", file=sys.stderr)
    else:
        h = sw.backend.submit_item(ref.task, command, key)
    view = RunView(ref.task, title, 1, 0, state="submitted")
    view.job_id = h.job_id
    try:
        st = sw.backend.poll([ref])[ref.task]
        while not st.final:
            time.sleep(poll_s)
            st = sw.backend.poll([ref])[ref.task]
            view.state = str(st.status)
            sw.display.update([view])
    except BaseException:
        try:
            sw.backend.cancel(ref)
            print(f"stopped the {title} (job {h.job_id}): a resume runs it again", file=sys.stderr)
        except Exception as e:  # noqa: BLE001 - the stop goes on; the job is named for a hand scancel
            print(f"warning: the {title} (job {h.job_id}) was not cancelled ({e})", file=sys.stderr)
        raise
    for src in sw.backend.log_files(ref):
        if src.exists():
            write_bytes(logs / log_name(src, ref), src.read_bytes())
    return h, st


def stop_leftover_prearm(sw: Any, keep: tuple[str, ...] = ()) -> None:
    """A resume: cancel the jobs before the arms that an earlier conductor left queued or running and that this
    resume will not follow (all but ``keep``), each named on the console."""
    try:
        stopped = stop_prearm_jobs(sw.backend, skip=keep)
    except SchedulerError as e:
        print(f"warning: could not look for jobs before the arms left by an earlier conductor ({e})", file=sys.stderr)
        return
    for what in stopped:
        print(f"stopped {what}, left by the conductor before this one", file=sys.stderr)


def stop_prearm_jobs(backend: Any, skip: tuple[str, ...] = ()) -> list[str]:
    """``action=cancel``: cancel every job before the arms that this sweep still has queued or running (one left by
    a conductor that died, or whose conductor has not stopped it yet). Returns ``"<item> (job <id>)"`` for each.

    Raises:
        SchedulerError: squeue, sacct or scancel failed.
    """
    refs = {key: _ref(key) for key in PREARM_JOBS if key not in skip}
    found = backend.find_items({ref.task: PREARM_JOBS[key] for key, ref in refs.items()})
    live = [ref for ref in refs.values() if ref.task in found]
    states = backend.poll(live) if live else {}
    out = []
    for ref in live:
        if not states[ref.task].final:
            backend.cancel(ref)
            out.append(f"{PREARM_JOBS[ref.variant]} (job {found[ref.task].job_id}, was {states[ref.task].status})")
    return out


__all__ = ["PREARM_JOBS", "run_prearm", "stop_leftover_prearm", "stop_prearm_jobs"]
