"""Tracking a sweep's runs round by round: launch (respecting the backend's concurrency), poll, flag hangs and
local time limits, collect each final attempt, and the Ctrl-C and ``action=collect`` variants of the same loop.

A round's changes go into the manifest in one locked write: the :class:`Sweep` holds one
:class:`contracts.manifest.ManifestWriter`, whose manifest every function here reads (it is kept current) and whose
:meth:`~contracts.manifest.ManifestWriter.commit` ends each round (CONTRACTS §3, §4). The scheduler's state only
fills the manifest's scheduling status; the run outcome comes from the analysis, which reads the log too (CASES C08).
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import Any

from analysis.api import Options
from analysis.options import is_suspected_hang
from contracts.errors import ConfigError
from contracts.manifest import Manifest, ManifestWriter, now_iso
from contracts.records import RunRef
from contracts.statuses import ManifestStatus, Mode
from contracts.sweepdir import SweepDir
from experiments import timeline
from experiments.conductor.cancel import cancel_runs, check_cancel, request, stop_for_cancel
from experiments.conductor.collect import collect, write_script
from experiments.conductor.progress import Display, RunView, median_step_ms, read_tail, update_from_log
from experiments.conductor.recover import Outage, SubmitError, adopt_unrecorded
from experiments.conductor.signals import deferred
from launchers.backend import Backend

VALIDATE_POLL_CAP_S = 0.4  # s, the longest wait between polls of a local validate batch


@dataclass
class Sweep:
    """What a drive needs: the folder, its launcher, the sweep settings, the analysis options, the display, and the
    one manifest of the sweep (``writer``: read once when not given; :attr:`m` is its current content)."""

    sd: SweepDir
    backend: Backend
    settings: Any  # experiments.plan.SweepSettings
    options: Options
    display: Display
    mode: str
    secrets: list[str]
    views: dict[str, RunView] = field(default_factory=dict)
    started: dict[str, float] = field(default_factory=dict)
    preloaded: bool = False
    stopped: bool = False
    writer: ManifestWriter = None  # type: ignore[assignment]  # read from ``sd`` in __post_init__ when not given

    def __post_init__(self) -> None:
        if self.writer is None:
            self.writer = ManifestWriter(self.sd)

    @property
    def m(self) -> Manifest:
        """The sweep's manifest as of the last write, with this round's changes applied."""
        return self.writer.m

    def stop(self) -> None:
        """Everything is launched and tracked: end the launcher's waiting validate process (local validate mode),
        close its connections to the cluster and print the final run table (once)."""
        if not self.stopped:
            self.stopped = True
            self.backend.finish()
            self.display.close(list(self.views.values()))

    def close(self) -> None:
        """The sweep is over: :meth:`stop`, then end what the launcher holds (its NeMo-Run experiments, their
        log-copy threads, SSH connections)."""
        self.stop()
        self.backend.close()


def track(sw: Sweep, runs: list[tuple[str, int]], detach: bool = False) -> None:
    """Submit ``runs`` (respecting the backend's concurrency) and poll until every one is final.

    ``detach``: return as soon as everything is queued (Slurm only; the jobs go on without this process).
    """
    if not runs:
        return

    def add(m: Manifest) -> list[RunRef]:
        latest = m.latest_attempts()
        # an attempt recorded but never marked submitted (this process or an earlier one died around sbatch) is
        # launched again under its own number: a job may exist for it, which adopt_unrecorded looks up first
        return [latest[(n, r)].ref(n) if (n, r) in latest and latest[(n, r)].status == ManifestStatus.PLANNED
                else m.variant(n).new_attempt(r).ref(n) for n, r in runs]

    refs = sw.writer.change(add)
    m = sw.m
    for r in refs:
        sw.sd.attempt_dir(r).mkdir(parents=True, exist_ok=True)
        sw.views[r.task] = RunView(r.task, r.variant, r.attempt, r.repeat)
    stage_of = {v.name: v.variant.stage for v in m.variants}
    adopted = adopt_unrecorded(sw, refs)
    queue, active = [r for r in refs if r not in adopted], list(adopted)
    limit = sw.backend.max_concurrent or len(refs)
    time_limit = _time_limit_s(m)
    outage = Outage()
    polls = 0
    while queue or active:
        check_cancel(sw)  # a cancel from another shell: nothing more is launched
        if queue and len(active) < limit:
            take = queue[: limit - len(active)]
            del queue[: len(take)]
            if sw.backend.batch_validate:
                # local validate mode: one process checks every run, block after block in the recorded order
                active += _launch(sw, take, min(stage_of[r.variant] for r in take))
            else:
                for block in dict.fromkeys(r.repeat for r in take):  # one launch per block, in the recorded order
                    batch = [r for r in take if r.repeat == block]
                    active += _launch(sw, batch, min(stage_of[r.variant] for r in batch))
        if detach and not queue:
            sw.writer.commit()
            sw.display.update(list(sw.views.values()))
            return
        polled = outage.poll(sw, active)
        for ref in list(active) if polled else []:
            if _advance(sw, ref, polled[ref.task], time_limit):
                active.remove(ref)
        sw.writer.commit()
        sw.display.update(list(sw.views.values()))
        if queue or active:
            polls += 1
            wait, t0 = poll_interval(sw, polls), time.monotonic()
            if not sw.preloaded:  # the analysis' imports (about 1 s) run while the first jobs run
                from analysis.api import preload

                preload(plots=sw.mode == Mode.TRAIN)
                sw.preloaded = True
            # a local job's exit wakes the wait at once (launchers/exitwatch.py): no poll interval after a run
            sw.backend.wait(max(0.0, wait - (time.monotonic() - t0)))


def poll_interval(sw: Sweep, polls: int) -> float:
    """Seconds before poll ``polls + 1``: ``poll_s`` on Slurm; locally 0.1 s, doubling up to ``poll_s`` (a local
    validate run ends within seconds: a fixed 2 s wait added up to 2 s to each), at most
    ``VALIDATE_POLL_CAP_S`` for a local validate batch."""
    if sw.backend.enforce_time_limit:  # the local backend (the conductor enforces its time limit)
        # a local validate batch is polled through its runs' exit files (NeMo-Run is asked at most every 2 s,
        # launchers.backend.SHARED_POLL_S), so its polls stay short: a finished run is seen within 0.4 s
        cap = VALIDATE_POLL_CAP_S if sw.backend.batch_validate else sw.settings.poll_s
        return min(sw.settings.poll_s, cap, 0.1 * 2 ** min(polls - 1, 10))
    return sw.settings.poll_s


def _launch(sw: Sweep, batch: list[RunRef], stage: int) -> list[RunRef]:
    """Submit one stage's batch; returns the refs now in flight. A refused batch is marked failed (Slurm: exit 5).

    Before sbatch the attempts are marked ``submitting`` (one manifest write), so that a crash between the
    submission and the write of the job ids is found again on resume (:func:`adopt_unrecorded`)."""
    with deferred():  # SIGTERM/SIGHUP/SIGINT wait until the launched jobs are recorded
        return _launch_recorded(sw, batch, stage)


def _launch_recorded(sw: Sweep, batch: list[RunRef], stage: int) -> list[RunRef]:
    check_cancel(sw)
    for r in batch:
        sw.writer.set(r, submitting=now_iso())
    sw.writer.commit()
    timeline.mark("launching")  # the first launch: NeMo-Run's import (once) and the executor follow
    try:
        launched = sw.backend.launch(batch, sw.mode, stage)
    except ConfigError:
        raise
    except Exception as e:  # a refused submission: nothing of it is left queued (launchers.submit)
        for r in batch:
            sw.writer.set(r, status=ManifestStatus.FAILED, add_flags=["submit_failed"], note=str(e)[:500])
            sw.views[r.task].state, sw.views[r.task].note = "failed", f"submit: {e}"[:100]
        if not isinstance(sw.backend.max_concurrent, int):
            sw.writer.commit()
            raise SubmitError(str(e)) from e
        return []
    for r in batch:
        timeline.launched(r.task)
    for r in batch:
        h = launched[r.task]
        sw.writer.set(r, status=ManifestStatus.SUBMITTED, submitted=now_iso(), submitting=None, **h.record())
        write_script(sw.sd, r, h.script or sw.backend.script(r))
        sw.views[r.task].state, sw.views[r.task].job_id = "submitted", h.job_id
        sw.started[r.task] = time.monotonic()
    sw.writer.commit()  # a crash after this point finds every submitted job in the manifest
    return list(batch)


def _advance(sw: Sweep, ref: RunRef, st: Any, time_limit: int | None) -> bool:
    """Apply one poll to a run; True once it is final (and collected)."""
    view = sw.views[ref.task]
    update_from_log(view, read_tail(sw.backend.log_files(ref)))
    if st.job_id:
        view.job_id = st.job_id
    if st.status != view.state and st.status in (ManifestStatus.RUNNING, ManifestStatus.SUBMITTED):
        sw.writer.set(ref, status=st.status)
    if view.state not in ("timeout", "cancelled"):
        view.state = str(st.status)
    _check_hang_and_limit(sw, ref, view, time_limit)
    if not (st.final or view.state in ("timeout", "cancelled")):
        return False
    final = view.state if view.state in ("timeout", "cancelled") and not st.final else str(st.status)
    if view.state == "timeout":
        final = "timeout"
    timeline.ended(ref.task)
    sw.writer.set(ref, status=final, exit_code=st.exit_code, **_scheduler_state(st))
    view.state = final
    if st.reason and final in ("lost", "failed"):
        view.note = (view.note + " " + st.reason).strip()[:100]
    sw.writer.adjust(ref.variant, collect(sw.sd, sw.backend, ref, sw.secrets))
    return True


def _scheduler_state(st: Any) -> dict[str, str]:
    """The scheduler's own final word (``PREEMPTED``, ``OUT_OF_MEMORY``, ``NODE_FAIL``...) for the analysis, which
    reads causes from it that the manifest status cannot carry; only Slurm words are recorded."""
    from contracts.slurm import STATES, state_word

    word = state_word(st.state or "")
    return {"scheduler_state": word} if word in STATES else {}


def _check_hang_and_limit(sw: Sweep, ref: RunRef, view: RunView, time_limit: int | None) -> None:
    """Suspected hang (CASES C09): no new iteration for max(hang_min_s, 5 x median step). Flagged on the attempt;
    with ``hang_action=cancel`` the job is cancelled and the end of its log is kept by the collection. Locally the
    conductor also enforces ``cluster.time_limit`` (Slurm does it on a cluster)."""
    if view.state != "running":
        return
    age = time.monotonic() - view.last_change if view.iteration is not None else None
    if is_suspected_hang(age, median_step_ms(view), sw.settings.hang_min_s) and "suspected hang" not in view.note:
        view.note = f"suspected hang: no new iteration for {age:.0f} s"
        sw.writer.set(ref, add_flags=["suspected_hang"])
        if sw.settings.hang_action == "cancel":
            sw.backend.cancel(ref)
            view.state = "cancelled"
    if time_limit and sw.backend.enforce_time_limit:
        if time.monotonic() - sw.started.get(ref.task, time.monotonic()) > time_limit:
            sw.backend.cancel(ref)
            view.state, view.note = "timeout", "local time limit reached"
            sw.writer.set(ref, add_flags=["time_limit"])


def _time_limit_s(m: Manifest) -> int | None:
    from contracts.slurm import parse_time_limit

    try:
        return parse_time_limit(m.cluster_config.get("time_limit", "00:30:00"))
    except ConfigError:  # a malformed limit was rejected at plan time; nothing to enforce here
        return None


def collect_all(sw: Sweep) -> None:
    """Collect every final attempt (idempotent: nothing collected is overwritten)."""
    m = sw.m
    for ref in m.refs():
        if m.attempt(ref).status.final:
            sw.writer.adjust(ref.variant, collect(sw.sd, sw.backend, ref, sw.secrets))
    sw.writer.commit()


def reattach(sw: Sweep) -> None:
    """``collect``: wait for the unfinished attempts of a detached sweep (Slurm), updating the manifest."""
    m = sw.m
    refs = m.live_refs()
    for r in [*refs, *m.refs({ManifestStatus.PLANNED})]:
        a = m.attempt(r)
        sw.views[r.task] = RunView(r.task, r.variant, r.attempt, r.repeat, job_id=a.job_id, state=str(a.status))
    refs += adopt_unrecorded(sw, m.refs({ManifestStatus.PLANNED}))
    outage = Outage()
    while refs:
        polled = outage.poll(sw, refs)
        for ref in list(refs) if polled else []:
            st, view = polled[ref.task], sw.views[ref.task]
            update_from_log(view, read_tail(sw.backend.log_files(ref)))
            view.state = str(st.status)
            if st.final:
                timeline.ended(ref.task)
                sw.writer.set(ref, status=st.status, exit_code=st.exit_code, **_scheduler_state(st))
                sw.writer.adjust(ref.variant, collect(sw.sd, sw.backend, ref, sw.secrets))
                refs.remove(ref)
        sw.writer.commit()
        sw.display.update(list(sw.views.values()))
        if refs:
            check_cancel(sw)
            sw.backend.wait(sw.settings.poll_s)


def interrupt(sw: Sweep) -> None:
    """Ctrl-C, SIGTERM, SIGHUP (CONTRACTS §5): locally cancel the running runs and mark them cancelled; on Slurm
    detach. With a live cancel request (``action=cancel`` from another shell) every backend's runs are cancelled
    (:func:`experiments.conductor.cancel.stop_for_cancel`)."""
    r = request(sw.sd)
    if r is not None:
        stop_for_cancel(sw, r)
        return
    m = sw.m
    local = (m.cluster_config.get("executor") or "local") == "local"
    if local:
        cancel_runs(sw, m.refs({ManifestStatus.SUBMITTED, ManifestStatus.RUNNING, ManifestStatus.PLANNED}),
                    "interrupted")
    where = "cancelled the local runs" if local else (
        f"detached; the jobs go on. Finish later with: python -m experiments.sweep action=collect "
        f"sweep_id={m.sweep_id} output_dir={sw.sd.root}")
    print(f"interrupted: {where}", file=sys.stderr)


__all__ = ["Sweep", "collect_all", "interrupt", "poll_interval", "reattach", "track"]
