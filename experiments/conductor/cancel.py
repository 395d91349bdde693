"""``action=cancel`` from any shell, for every backend (docs/CONTRACTS.md §1, §4).

The cancelling command writes a request, ``<sweep>/cancel.json`` (its host, pid, pid start time, since when), then
takes the sweep's lease (:mod:`experiments.conductor.lease`). When a live conductor holds it, that conductor is
asked to stop: on this host with SIGTERM (which it takes as Ctrl-C, :mod:`experiments.conductor.signals`), and on
any host through the request, which it reads before each launch and at each round (:func:`check_cancel`). A
conductor that finds a live request launches nothing more: it cancels every unfinished run of the sweep itself,
on every backend (locally its jobs, on Slurm ``scancel``; it does not detach), marks them ``cancelled``
(flag ``cancelled_by_user``) and exits 130, which frees the lease. The cancelling command waits for the lease
(``CANCEL_WAIT_S`` seconds at most), then cancels what is still unfinished: a local job of a conductor that died
by its recorded process (:mod:`launchers.adopted`), a Slurm job by ``scancel``, an attempt marked ``submitting``
after looking its job up first. It prints one line per run it or the conductor stopped, then the count.

A request is stale, and the conductor that finds it removes it (with a note) instead of stopping, when its writer is
provably gone: on this host, its pid is dead or reused; on another host (its pid cannot be checked), it was written
before this conductor took the lease and more than :data:`CANCEL_WAIT_S` seconds ago (the cancelling command waits
that long for the lease and then exits, leaving the request only for the conductor that held the lease then). So a
cancel killed half-way, here or on a login node, never stops a later resume. A live request is cleared by hand by
removing ``<sweep>/cancel.json`` (the exit-130 message names it).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import socket
import sys
import time
from dataclasses import dataclass
from typing import Any

from contracts.atomic import write_json
from contracts.exits import ExitCode
from contracts.manifest import Manifest, ManifestWriter, now_iso
from contracts.procfs import process_alive, process_start
from contracts.records import RunRef
from contracts.statuses import ManifestStatus
from contracts.sweepdir import SweepDir

REQUEST_FILE = "cancel.json"
CANCEL_WAIT_S = 120.0  # s the cancelling command waits for the conductor to stop and free the lease
UNFINISHED = frozenset({ManifestStatus.PLANNED, ManifestStatus.SUBMITTED, ManifestStatus.RUNNING})


class CancelRequested(KeyboardInterrupt):
    """A live ``action=cancel`` request was found by the conductor (handled as Ctrl-C, with cancelling)."""


@dataclass(frozen=True)
class Request:
    """The request of one cancelling command (who, since when)."""

    host: str
    pid: int
    start: int | None
    since: str

    def stale(self, lease_since: str | None, now: dt.datetime | None = None) -> str | None:
        """Why this request is provably left over (module docstring), or None while it may be live.
        ``lease_since``: when the conductor reading it took the sweep's lease (ISO 8601 UTC; None: unknown)."""
        if self.host == socket.gethostname():
            return None if process_alive(self.pid, self.start) else "its writer has ended"
        written, taken = _parse_iso(self.since), _parse_iso(lease_since)
        now = now or dt.datetime.now(dt.UTC)
        if written is None:
            return None
        if taken is not None and written < taken and (now - written).total_seconds() > CANCEL_WAIT_S:
            return (f"it was written before this conductor took the sweep ({lease_since}) and its writer stopped "
                    f"waiting {CANCEL_WAIT_S:.0f} s after writing it")
        return None

    def describe(self) -> str:
        return f"action=cancel (pid {self.pid} on {self.host}, {self.since})"


def _parse_iso(text: str | None) -> dt.datetime | None:
    try:
        return dt.datetime.fromisoformat(str(text).replace("Z", "+00:00")) if text else None
    except ValueError:
        return None


def clear_hint(sd: SweepDir) -> str:
    """How to clear a request by hand (printed where a request stopped a conductor)."""
    return (f"a request left by a command that died can be cleared by removing {sd.root / REQUEST_FILE} "
            f"(a new conductor clears one itself once it is {CANCEL_WAIT_S:.0f} s old)")


def request(sd: SweepDir) -> Request | None:
    """The live cancel request of the sweep, or None. A stale one (:meth:`Request.stale`, judged against the lease
    holder's ``since``: the conductor reading it holds the lease) is removed here, with a note on stderr."""
    from experiments.conductor.lease import read_holder

    path = sd.root / REQUEST_FILE
    try:
        text = path.read_text()
        d = json.loads(text)
        r = Request(str(d["host"]), int(d["pid"]), None if d.get("start") is None else int(d["start"]),
                    str(d["since"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    holder = read_holder(sd)
    why = r.stale(holder.since if holder else None)
    if why is None:
        return r
    try:
        if path.read_text() == text:  # not replaced by a newer request meanwhile
            path.unlink()
            print(f"note: removed the cancel request of {r.describe()}: {why}", file=sys.stderr)
    except OSError:
        pass
    return None


def check_cancel(sw: Any) -> None:
    """Raise :class:`CancelRequested` when the sweep of ``sw`` (a tracking.Sweep) has a live cancel request."""
    r = request(sw.sd)
    if r is not None:
        raise CancelRequested(r.describe())


def cancel_runs(sw: Any, refs: list[RunRef], flag: str) -> None:
    """Cancel ``refs`` of ``sw`` (a tracking.Sweep) on its backend, mark each ``cancelled`` with ``flag``, collect
    what each left, and write the manifest once."""
    from experiments.conductor.collect import collect

    sw.backend.stop(refs)  # for good: a packed allocation whole, so no later run of it starts
    for ref in refs:
        sw.writer.set(ref, status=ManifestStatus.CANCELLED, add_flags=[flag])
        if ref.task in sw.views:
            sw.views[ref.task].state = "cancelled"
        sw.writer.adjust(ref.variant, collect(sw.sd, sw.backend, ref, sw.secrets))
    sw.writer.commit()


def stop_for_cancel(sw: Any, r: Request) -> int:
    """The conductor's side: cancel every unfinished run of ``sw`` on its backend, mark it cancelled, collect
    what it left. Returns how many runs were cancelled."""
    refs = sw.m.refs(UNFINISHED)
    cancel_runs(sw, refs, "cancelled_by_user")
    print(f"cancelled by {r.describe()}: stopped {len(refs)} run(s); nothing more is launched; "
          f"{clear_hint(sw.sd)}", file=sys.stderr)
    return len(refs)


def _describe(m: Manifest, ref: RunRef, job_id: str | None = None) -> str:
    """``task (job ID, was STATE)``: STATE is ``submitting`` for an attempt whose ``sbatch`` may have run unrecorded
    (its job, when looked up, is ``job_id``), else the recorded status."""
    a = m.attempt(ref)
    unrecorded = bool(a.get("submitting")) and not a.job_id
    state = "submitting" if unrecorded and a.status == ManifestStatus.PLANNED else a.status
    return f"{ref.task} (job {a.job_id or job_id or 'none'}, was {state})"


def _still_live(backend: Any, m: Manifest, refs: list[RunRef], found: dict[str, Any],
                ended: list[tuple[str, str]]) -> list[RunRef]:
    """Of the manifest's unfinished ``refs``, those to stop: a run whose job the scheduler already knows as ended
    with a result (succeeded, failed, timed out: a detached sweep that no conductor has collected yet, the manifest
    still says submitted) is left for ``action=collect`` to record, never marked cancelled; it goes into ``ended``
    as ``(task, line)``. A job known to nobody (lost) left nothing to keep: it is cancelled as asked. When the
    scheduler cannot be asked, every ref is stopped, as before, with a warning."""
    from launchers.errors import SchedulerError

    asked = [r for r in refs if m.attempt(r).job_id or r.task in found]
    try:
        states = backend.poll(asked) if asked else {}
    except SchedulerError as e:
        print(f"warning: the scheduler could not say which runs have ended ({e}); all unfinished ones are cancelled",
              file=sys.stderr)
        return refs
    live = []
    for r in refs:
        st = states.get(r.task)
        if st is not None and st.final and st.status != ManifestStatus.LOST:  # a lost job left no result to keep
            ended.append((r.task, f"not stopped {_describe(m, r)}: its job had ended ({st.state or st.status}); "
                                  f"action=collect records it"))
        else:
            live.append(r)
    return live


def _cancel_collect_job(sd: SweepDir, backend: Any) -> str | None:
    """Cancel the sweep's chained collect job (``collect_job.json``, :mod:`experiments.conductor.chain`) once its
    runs are cancelled: it would otherwise start when they end and collect a cancelled sweep. Returns its job id,
    or None when there is none (or the backend has no such job)."""
    if not backend.chains_collect:
        return None
    try:
        job_id = str(json.loads(sd.collect_job.read_text())["job_id"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    backend.cancel_jobs([job_id])
    return job_id


def cancel_sweep(sd: SweepDir) -> tuple[int, list[str]]:
    """``action=cancel`` (module docstring). Returns 0, or 5 when the conductor holding the sweep did not stop
    within ``CANCEL_WAIT_S`` seconds (the request stays: it stops at its next round); and the jobs before the arms
    it cancelled itself (:func:`experiments.conductor.prearm.stop_prearm_jobs`)."""
    from experiments.conductor.backends import make_backend
    from experiments.conductor.lease import LeaseHeld, acquire, read_holder
    from experiments.conductor.prearm import stop_prearm_jobs

    before = Manifest.load(sd)
    was = {r.task: _describe(before, r) for r in before.refs(UNFINISHED)}
    path = sd.root / REQUEST_FILE
    write_json(path, {"host": socket.gethostname(), "pid": os.getpid(), "start": process_start(os.getpid()),
                      "since": now_iso()})
    try:
        lease, signalled, end = None, False, time.monotonic() + CANCEL_WAIT_S
        while lease is None:
            try:
                lease = acquire(sd, "cancel")
            except LeaseHeld as e:
                holder = read_holder(sd)
                if not signalled and holder is not None and holder.local and process_alive(holder.pid, holder.start):
                    os.kill(holder.pid, signal.SIGTERM)
                    signalled = True
                    print(f"asked the conductor {holder.describe()} to stop", file=sys.stderr)
                if time.monotonic() > end:
                    print(f"error: {e}; it did not stop within {CANCEL_WAIT_S:.0f} s. The cancel request stays in "
                          f"{path}: the conductor stops at its next round", file=sys.stderr)
                    path = None  # type: ignore[assignment]  # keep the request for the conductor
                    return ExitCode.INFRA, []
                time.sleep(0.2)
        with lease:
            if lease.note:
                print(f"note: {lease.note}", file=sys.stderr)
            m = Manifest.load(sd)
            backend = make_backend(sd, m, strict=False)  # cancelling needs no secret values
            try:
                orphans = [r for r in m.refs({ManifestStatus.PLANNED}) if m.attempt(r).get("submitting")
                           and not m.attempt(r).job_id]
                found = backend.find_submitted(orphans) if orphans else {}
                ended_lines: list[tuple[str, str]] = []
                refs = _still_live(backend, m, m.refs(UNFINISHED), found, ended_lines)
                for r in refs:
                    was.setdefault(r.task, _describe(m, r))
                for r in orphans:  # the job found by name is the one stopped
                    was[r.task] = _describe(m, r, found[r.task].job_id if r.task in found else None)
                backend.stop(refs)
                chained = _cancel_collect_job(sd, backend) if refs else None
                prearm = stop_prearm_jobs(backend)  # the preflight, conformance or fabric probe job, if one is live
            finally:
                backend.close()
            writer = ManifestWriter(sd, m)  # one locked write, as a conductor's round
            for ref in refs:
                h = found.get(ref.task)
                # an attempt caught submitting ends as a recovered one would: its job (when found) recorded as
                # submitted, ``submitting`` cleared (experiments/conductor/recover.py), then cancelled
                unrecorded = {"submitting": None} if m.attempt(ref).get("submitting") else {}
                found_job = {"submitted": now_iso(), **h.record()} if h else {}
                writer.set(ref, status=ManifestStatus.CANCELLED, add_flags=["cancelled_by_user"], **unrecorded,
                           **found_job)
            writer.commit()
            mine = {r.task for r in refs}
            after = writer.m
            by_task = {r.task: r for r in after.refs()}
            lines = []
            ended_tasks = {task for task, _ in ended_lines}
            for task, what in was.items():
                now = after.attempt(by_task[task]).status if task in by_task else "unknown"
                if task in ended_tasks:
                    continue
                if task in mine:
                    lines.append(f"stopped {what}")
                elif now == ManifestStatus.CANCELLED:
                    lines.append(f"stopped {what} (by its conductor)")
                else:
                    lines.append(f"not stopped {what}: it had ended ({now})")
            lines += [line for _, line in ended_lines]
            if chained:
                lines.append(f"stopped the chained collect job {chained}")
            lines += [f"stopped the {what}" for what in prearm]
            for line in lines:
                print(line)
            n = sum(1 for line in lines if line.startswith("stopped") and "collect job" not in line
                    and not line.startswith("stopped the "))
            print(f"cancelled {n} unfinished run(s) of sweep {m.sweep_id}")
            return ExitCode.OK, prearm
    finally:
        if path is not None:
            try:
                path.unlink()
            except FileNotFoundError:
                pass
