"""The sweep command's last line: ``exit code N: <what this command did>`` (CONTRACTS §5).

The code's one-line meaning (:func:`contracts.exits.meaning`) is right for a command that ran a sweep to its end;
for every other command it would claim what did not happen ("every kept run is good" after a plan, a status of a
running sweep, a cancel or a detached submit). So each action says what it did, from the sweep's own records:

- ``plan``: the plan is written and nothing ran;
- ``status``: what the sweep is: planned, running (finished of total), cancelled, ended but not collected, done
  with the exit code its report carries;
- ``cancel``: what it cancelled;
- a detached ``run``/``collect``: how many runs are queued and that nothing is collected yet;
- a sweep run to its end keeps the code's meaning, except when every kept run was cancelled.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

from contracts.exits import ExitCode, meaning
from contracts.manifest import Manifest
from contracts.statuses import FINAL_STATUSES, LIVE_STATUSES, ManifestStatus
from contracts.sweepdir import SweepDir


@dataclass(frozen=True)
class Ended:
    """What a command ends with: its exit code (CONTRACTS §5) and what it did (None: the code's meaning)."""

    code: int
    said: str | None = None

    def line(self) -> str:
        """The process's last line: ``exit code N: ...``."""
        return f"exit code {int(self.code)}: {self.said or meaning(self.code)}"


@dataclass(frozen=True)
class SweepState:
    """Counts over a sweep's runs (each (variant, repeat) by its latest attempt; pruned and skipped variants are no
    runs): ``finished`` ended for good (succeeded, failed, timeout, lost, cancelled), of them ``cancelled``;
    ``in_flight`` submitted or running; ``waiting`` planned and not submitted (a gated variant counts once, as
    ``gated``). ``report_exit_code``: what ``report/summary.json`` says, None without a report."""

    sweep_id: str
    total: int
    finished: int
    cancelled: int
    in_flight: int
    waiting: int
    gated: int
    report_exit_code: int | None

    def describe(self) -> str:
        """One phrase: what the sweep is now (e.g. ``running: 3 of 9 run(s) finished, 2 in flight``)."""
        sid = f"sweep {self.sweep_id}"
        if self.total == 0 and not self.gated:
            return f"{sid} has no run to make (every variant pruned or skipped, or none planned); nothing ran"
        later = f", {self.gated} gated variant(s) not opened" if self.gated else ""
        if self.in_flight:
            waiting = f", {self.waiting} not submitted yet" if self.waiting else ""
            return (f"{sid} is running: {self.finished} of {self.total} run(s) finished, {self.in_flight} in "
                    f"flight{waiting}{later}")
        if self.cancelled:
            rest = self.finished - self.cancelled
            return (f"{sid} is cancelled: {self.cancelled} of {self.total} run(s) cancelled, {rest} had ended"
                    + (f", {self.waiting} never submitted" if self.waiting else ""))
        if self.finished == 0:
            return f"{sid} is planned: nothing submitted yet ({self.total} run(s){later})"
        if self.waiting:
            return (f"{sid} is stopped: {self.finished} of {self.total} run(s) finished, {self.waiting} not "
                    f"submitted (resume with action=run sweep_id={self.sweep_id})")
        if self.report_exit_code is None:
            return (f"{sid} has ended ({self.finished} run(s)) but is not collected yet: run action=collect "
                    f"sweep_id={self.sweep_id}")
        return f"{sid} is done with exit code {self.report_exit_code} ({self.finished} run(s))"


def report_exit_code(sd: SweepDir) -> int | None:
    """The exit code the sweep's ``report/summary.json`` carries, or None without a readable report."""
    try:
        code = json.loads((sd.report / "summary.json").read_text()).get("exit_code")
    except (OSError, ValueError, AttributeError):
        return None
    return code if isinstance(code, int) and not isinstance(code, bool) else None


def sweep_state(sd: SweepDir, m: Manifest, states: dict[tuple[str, int], str] | None = None) -> SweepState:
    """The :class:`SweepState` of ``m``; ``states``: (variant, repeat) -> a fresher state than the manifest's (what
    ``action=status`` asked the scheduler)."""
    latest = m.latest_attempts()
    status = {v.name: v.status for v in m.variants}
    keys = [k for k in dict.fromkeys([*m.runs, *latest]) if status.get(k[0]) == ManifestStatus.PLANNED]
    got = [str((states or {}).get(k) or (latest[k].status if k in latest else ManifestStatus.PLANNED))
           for k in keys]
    return SweepState(
        sweep_id=m.sweep_id, total=len(keys), finished=sum(s in FINAL_STATUSES for s in got),
        cancelled=sum(s == ManifestStatus.CANCELLED for s in got), in_flight=sum(s in LIVE_STATUSES for s in got),
        waiting=sum(s not in FINAL_STATUSES and s not in LIVE_STATUSES for s in got),
        gated=sum(v.status == ManifestStatus.GATED for v in m.variants), report_exit_code=report_exit_code(sd))


def _latest_states(rows: Iterable[tuple[str, int, int, str]]) -> dict[tuple[str, int], str]:
    out: dict[tuple[str, int], tuple[int, str]] = {}
    for variant, repeat, attempt, state in rows:
        if (variant, repeat) not in out or attempt >= out[(variant, repeat)][0]:
            out[(variant, repeat)] = (attempt, state)
    return {k: s for k, (_, s) in out.items()}


def after_status(sd: SweepDir, rc: int, rows: Iterable[tuple[str, int, int, str]]) -> Ended:
    """``action=status``: ``rows`` (variant, repeat, attempt, state) are the states the table showed."""
    try:
        state = sweep_state(sd, Manifest.load(sd), _latest_states(rows))
    except Exception:  # noqa: BLE001 - the last line only; the table was shown
        return Ended(rc)
    scheduler = "; the scheduler could not be asked, so these are the recorded states" if rc == ExitCode.INFRA else ""
    return Ended(rc, f"status shown: {state.describe()}{scheduler}")


def cancelled_by_user(sd: SweepDir) -> int:
    """How many runs' latest attempts ``action=cancel`` marked cancelled (0 when the manifest is unreadable)."""
    try:
        latest = Manifest.load(sd).latest_attempts().values()
    except Exception:  # noqa: BLE001 - the last line only
        return 0
    return sum(a.status == ManifestStatus.CANCELLED and "cancelled_by_user" in a.flags for a in latest)


def after_cancel(sd: SweepDir, rc: int, before: int, prearm: list[str] | None = None) -> Ended:
    """``action=cancel``: what it cancelled (``before``: :func:`cancelled_by_user` before the command; ``prearm``:
    the jobs before the arms it cancelled, ``"<item> (job <id>, was <status>)"``)."""
    if rc != ExitCode.OK:
        return Ended(rc, "the cancel did not finish: the conductor did not stop; the request stays (see above)")
    try:
        m = Manifest.load(sd)
    except Exception:  # noqa: BLE001
        return Ended(rc, "cancel done")
    mine = cancelled_by_user(sd) - before
    jobs = f"; cancelled {', '.join(prearm)}" if prearm else ""
    if mine <= 0 and not prearm:
        return Ended(rc, f"nothing cancelled, no run was unfinished: {sweep_state(sd, m).describe()}")
    if mine <= 0:
        return Ended(rc, f"cancelled {', '.join(prearm)}; no run was unfinished: {sweep_state(sd, m).describe()}")
    return Ended(rc, f"cancelled {mine} run(s) of sweep {m.sweep_id}{jobs}; nothing more is launched")


def after_plan(root: str, runs: int) -> Ended:
    """``action=plan``: the plan is written, nothing ran."""
    return Ended(ExitCode.OK, f"plan written to {root} ({runs} run(s)); nothing was submitted or run")


def after_run(sd: SweepDir, rc: int) -> Ended:
    """A ``run``, resume or ``collect``: a detached sweep says what is queued; a sweep whose kept runs were all
    cancelled says so; every other end keeps the code's meaning."""
    try:
        state = sweep_state(sd, Manifest.load(sd))
    except Exception:  # noqa: BLE001 - the last line only
        return Ended(rc)
    if rc == ExitCode.OK and state.in_flight:
        return Ended(rc, f"detached: {state.in_flight} run(s) queued in sweep {state.sweep_id}, nothing collected "
                         f"or judged yet ({state.finished} of {state.total} finished)")
    if rc == ExitCode.INTERRUPTED:
        return Ended(rc, f"interrupted: {state.describe()}")
    if state.cancelled and state.cancelled == state.finished and not state.in_flight:
        return Ended(rc, f"every run that was started was cancelled: {state.describe()}")
    later = _later_step(sd, rc)
    if later:
        return Ended(rc, later)
    return Ended(rc)


def _later_step(sd: SweepDir, rc: int) -> str | None:
    """What happened when a step after the analysis (the history, the reference gate) decided ``rc``: the report
    was written, so the code's generic meaning ("nothing was written") would be false. None otherwise."""
    try:
        summary = json.loads(sd.summary_json.read_text())
        if summary.get("exit_code") != rc or summary.get("analysis_exit_code") == rc:
            return None
        step = next(a for a in summary.get("after") or () if a.get("exit_code") == rc)
        return (f"the sweep was analysed and reported (the analysis alone: exit code "
                f"{summary['analysis_exit_code']}); the {step['step']} step: {step['text']}")
    except (OSError, ValueError, KeyError, TypeError, AttributeError, StopIteration):
        return None


__all__ = ["Ended", "SweepState", "after_cancel", "after_plan", "after_run", "after_status", "cancelled_by_user", "sweep_state"]
