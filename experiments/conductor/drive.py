"""``action=run``: submit, track, collect, analyse, open gates, report, history (CONTRACTS §1-§5).

Flow: write the plan -> (``preflight=container``: one validate job first) -> submit the open stages -> track with
live progress -> collect logs and effective configs into ``variants/<v>/attempt-<k>/`` -> analyse -> open gates
and submit the next stage -> final report -> history. ``detach=true`` (Slurm) returns once the jobs are queued;
``action=collect`` finishes such a sweep later, from any shell.

The scheduler's state only fills the manifest's scheduling status; the run outcome comes from the analysis, which
reads the log too (CASES C08). Each poll round's changes go into the manifest in one locked write (:class:`Round`).
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import Any

from analysis.api import Options
from analysis.options import is_suspected_hang
from contracts.errors import ConfigError
from contracts.exits import ExitCode, combine
from contracts.manifest import Manifest, now_iso
from contracts.records import RunRef
from contracts.statuses import GOOD_OUTCOMES, RESUBMIT_STATUSES, ManifestStatus, Mode, Preflight
from contracts.sweepdir import SweepDir
from experiments import timeline
from experiments.blocks import add_blocks, next_block, schedule_new_arms
from experiments.conductor.analyse import analyse, record_history, show
from experiments.conductor.backends import make_backend
from experiments.conductor.collect import collect, secret_values, write_script
from experiments.conductor.gates import open_gates
from experiments.conductor.progress import Display, RunView, median_step_ms, read_tail, update_from_log
from experiments.conductor.recover import Outage, SubmitError, adopt_unrecorded, fault
from launchers.backend import Backend

MAX_GATE_ROUNDS = 5
VALIDATE_POLL_CAP_S = 0.4  # s, the longest wait between polls of a local validate batch


class Round:
    """The manifest changes of one poll round (attempt fields, payload adjustments), applied in one locked write."""

    def __init__(self) -> None:
        self.sets: list[tuple[RunRef, dict[str, Any]]] = []
        self.adjustments: list[tuple[str, list[dict[str, Any]]]] = []

    def set(self, ref: RunRef, **values: Any) -> None:
        self.sets.append((ref, values))

    def adjust(self, variant: str, adjustments: list[dict[str, Any]]) -> None:
        if adjustments:
            self.adjustments.append((variant, adjustments))

    def _apply(self, m: Manifest) -> None:
        for ref, values in self.sets:
            m.attempt(ref).set(**values)
        for name, adj in self.adjustments:
            m.variant(name).add_adjustments(adj)

    def commit(self, sd: SweepDir) -> None:
        """Write the round's changes (nothing when there are none) and start a new round."""
        if self.sets or self.adjustments:
            Manifest.update(sd, self._apply)
        self.sets, self.adjustments = [], []


@dataclass
class Sweep:
    """What a drive needs: the folder, its launcher, the sweep settings, the analysis options and the display."""

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


def open_sweep(sd: SweepDir, settings: Any, options: Options, cluster: dict[str, Any] | None = None) -> Sweep:
    """A :class:`Sweep` for a planned folder. Raises ConfigError (a missing secret) or the launcher's errors."""
    m = Manifest.load(sd)
    backend = make_backend(sd, m, cluster)
    display = Display(f"sweep {m.sweep_id} ({m.name}, {m.cluster}, mode={m.mode})")
    return Sweep(sd, backend, settings, options, display, m.mode, secret_values(m))


def drive(sd: SweepDir, settings: Any, options: Options, *, resume: bool, collect_only: bool = False,
          history: dict[str, Any] | None = None, cluster: dict[str, Any] | None = None) -> int:
    """Submit, track, collect and analyse a planned sweep folder; returns the exit code (CONTRACTS §5).

    ``history``: command-line history settings that override the manifest's (``history.url=``, ...).
    """
    timeline.mark("drive")
    try:
        sw = open_sweep(sd, settings, options, cluster)
    except ConfigError:
        raise
    except Exception as e:  # noqa: BLE001 - infrastructure (sbatch missing, tunnel down)
        print(f"error: cannot set up the executor: {e}", file=sys.stderr)
        return ExitCode.INFRA
    try:
        return _drive(sw, settings, options, resume=resume, collect_only=collect_only, history=history)
    finally:
        sw.close()


def _drive(sw: Sweep, settings: Any, options: Options, *, resume: bool, collect_only: bool,
           history: dict[str, Any] | None) -> int:
    sd = sw.sd
    m = Manifest.load(sd)
    detach = bool(settings.detach)
    if detach and sw.backend.max_concurrent is not None:
        print("note: the local executor cannot detach (CONTRACTS §1); running attached", file=sys.stderr)
        detach = False
    try:
        if not collect_only:
            if m.preflight == Preflight.CONTAINER and not resume:
                from experiments.conductor.preflight import container_preflight

                container_preflight(sw)
            pending = runs_to_submit(sd)
            track(sw, pending, detach)
            if detach:
                sw.stop()
                _record_timeline(sd, "run")
                print(f"detached: {len(pending)} run(s) queued. Finish with: python -m experiments.sweep "
                      f"action=collect sweep_id={m.sweep_id} output_dir={sd.root}")
                return ExitCode.OK
        else:
            reattach(sw)
        gate_rounds, final = 0, None
        while gate_rounds < MAX_GATE_ROUNDS:
            collect_all(sw)
            sw.backend.disconnect()  # the analysis needs no connection; a gate's launch opens one again
            summary = analyse(sd, options, quiet=True)
            what = next_step(sd, summary, settings)
            if what is None:
                final = summary  # nothing ran or changed since: this analysis (and its report) is the final one
                break
            gate_rounds += what == "gate"
            track(sw, runs_to_submit(sd, new_only=True), detach)
            if detach:
                sw.stop()
                print(f"{'gate opened' if what == 'gate' else 'adaptive: next block'}: queued. Finish with: "
                      f"python -m experiments.sweep action=collect sweep_id={m.sweep_id} output_dir={sd.root}")
                return ExitCode.OK
        if final is None:
            collect_all(sw)
    except KeyboardInterrupt:
        interrupt(sw)  # first, so that the final table shows the cancelled runs as cancelled
        sw.stop()
        return ExitCode.INTERRUPTED
    except SubmitError as e:
        sw.stop()
        print(f"error: the scheduler: {e}", file=sys.stderr)
        return ExitCode.INFRA
    except OSError as e:  # the disk filled up, the folder became read-only: the atomic writer kept the old files
        sw.stop()
        _disk_error(sd, m.sweep_id, e)
        return ExitCode.INFRA
    sw.stop()
    try:
        summary = final if final is not None else analyse(sd, options, quiet=True)
        timeline.mark("analysed")
        show(summary, sd)
    except OSError as e:
        _disk_error(sd, m.sweep_id, e)
        return ExitCode.INFRA
    rc = summary.exit_code
    hist = {**(m.config.get("history") or {}), **(history or {})}
    if hist.get("enabled") and not summary.ran:
        print("history: not recorded: no kept run ran (none was submitted, or every one was cancelled); an empty "
              "night is never a good night", file=sys.stderr)
    elif hist.get("enabled"):
        rc = combine(rc, record_history(sd, Manifest.load(sd), hist))
    _record_timeline(sd, "collect" if collect_only else "run")
    return int(rc)


def _record_timeline(sd: SweepDir, action: str) -> None:
    """Write this command's phase marks to ``conductor.json`` and print where the conductor's own time went."""
    try:
        print(timeline.describe(timeline.record(sd.root, action)), file=sys.stderr)
    except OSError as e:  # timings only: a full disk here loses no result
        print(f"warning: conductor.json not written: {e}", file=sys.stderr)


def _disk_error(sd: SweepDir, sweep_id: str, e: OSError) -> None:
    print(f"error: writing into {sd.root} failed ({e}); every file already written is intact (manifest, logs, "
          f"effective configs). Free space, then finish with: python -m experiments.sweep action=collect "
          f"sweep_id={sweep_id} output_dir={sd.root}", file=sys.stderr)


def next_step(sd: SweepDir, summary: Any, settings: Any) -> str | None:
    """After an analysis: ``"block"`` when ``repeats=auto`` added the next block of undecided arms, ``"gate"`` when
    a gate opened (its arms get blocks of their own, experiments/blocks.py), None when the sweep is done."""
    budget = float(getattr(settings, "max_gpu_hours", float("inf")))
    arms, why = next_block(Manifest.load(sd), list(summary.comparisons), budget)
    if arms:
        Manifest.update(sd, lambda m: add_blocks(m, arms, 1))
        print(f"adaptive: block {len(Manifest.load(sd).blocks) - 1} with {', '.join(arms)} ({why})", file=sys.stderr)
        return "block"
    if (Manifest.load(sd).design or {}).get("repeats") == "auto":
        print(f"adaptive: stop ({why})", file=sys.stderr)
    if open_gates(sd, summary):
        Manifest.update(sd, schedule_new_arms)
        return "gate"
    return None


def runs_to_submit(sd: SweepDir, new_only: bool = False) -> list[tuple[str, int]]:
    """Runs of open stages whose latest attempt is missing or did not succeed (what a resume resubmits), in the
    recorded block order; ``new_only``: only runs without any attempt (a new block or a newly opened stage)."""
    m = Manifest.load(sd)
    latest = m.latest_attempts()
    status = {v.name: v.status for v in m.variants}
    outcome = _outcomes(sd)
    todo = []
    for key in m.runs:
        if status.get(key[0]) != ManifestStatus.PLANNED:
            continue
        a = latest.get(key)
        if new_only and a is not None:
            continue
        if a is None or a.status == ManifestStatus.PLANNED or a.status in RESUBMIT_STATUSES or (
                a.status == ManifestStatus.SUCCEEDED and outcome.get((key, a.attempt), "ok") not in GOOD_OUTCOMES):
            todo.append(key)
    return todo


def _outcomes(sd: SweepDir) -> dict[tuple[tuple[str, int], int], str]:
    """Run outcomes from the analysis' run.json files: ((variant, repeat), attempt) -> status."""
    import json

    out = {}
    for p in sd.run_jsons():
        try:
            d = json.loads(p.read_text())
            out[((d["variant"], int(d.get("repeat") or 0)), int(d["attempt"]))] = d["status"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return out


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

    m, refs = Manifest.update(sw.sd, add)
    for r in refs:
        sw.sd.attempt_dir(r).mkdir(parents=True, exist_ok=True)
        sw.views[r.task] = RunView(r.task, r.variant, r.attempt, r.repeat)
    stage_of = {v.name: v.variant.stage for v in m.variants}
    rnd = Round()
    adopted = adopt_unrecorded(sw, rnd, m, refs)
    queue, active = [r for r in refs if r not in adopted], list(adopted)
    limit = sw.backend.max_concurrent or len(refs)
    time_limit = _time_limit_s(m)
    outage = Outage()
    polls = 0
    while queue or active:
        if queue and len(active) < limit:
            take = queue[: limit - len(active)]
            del queue[: len(take)]
            if getattr(sw.backend, "batch_validate", False):
                # local validate mode: one process checks every run, block after block in the recorded order
                active += _launch(sw, rnd, take, min(stage_of[r.variant] for r in take))
            else:
                for block in dict.fromkeys(r.repeat for r in take):  # one launch per block, in the recorded order
                    batch = [r for r in take if r.repeat == block]
                    active += _launch(sw, rnd, batch, min(stage_of[r.variant] for r in batch))
        if detach and not queue:
            rnd.commit(sw.sd)
            sw.display.update(list(sw.views.values()))
            return
        polled = outage.poll(sw, active)
        for ref in list(active) if polled else []:
            if _advance(sw, rnd, ref, polled[ref.task], time_limit):
                active.remove(ref)
        rnd.commit(sw.sd)
        sw.display.update(list(sw.views.values()))
        if queue or active:
            polls += 1
            wait, t0 = poll_interval(sw, polls), time.monotonic()
            if not sw.preloaded:  # the analysis' imports run while the first jobs run (issue 17)
                from analysis.api import preload

                preload(plots=sw.mode == Mode.TRAIN)
                sw.preloaded = True
            # a local job's exit wakes the wait at once (launchers/exitwatch.py): no poll interval after a run
            sw.backend.wait(max(0.0, wait - (time.monotonic() - t0)))


def poll_interval(sw: Sweep, polls: int) -> float:
    """Seconds before poll ``polls + 1``: ``poll_s`` on Slurm; locally 0.1 s, doubling up to ``poll_s`` (a local
    validate run ends within seconds: a fixed 2 s wait added up to 2 s to each; issue 17), at most
    ``VALIDATE_POLL_CAP_S`` for a local validate batch."""
    if sw.backend.enforce_time_limit:  # the local backend (the conductor enforces its time limit)
        # a local validate batch is polled through its runs' exit files (NeMo-Run is asked at most every 2 s,
        # launchers.backend.SHARED_POLL_S), so its polls stay short: a finished run is seen within 0.4 s
        cap = VALIDATE_POLL_CAP_S if getattr(sw.backend, "batch_validate", False) else sw.settings.poll_s
        return min(sw.settings.poll_s, cap, 0.1 * 2 ** min(polls - 1, 10))
    return sw.settings.poll_s


def _launch(sw: Sweep, rnd: Round, batch: list[RunRef], stage: int) -> list[RunRef]:
    """Submit one stage's batch; returns the refs now in flight. A refused batch is marked failed (Slurm: exit 5).

    Before sbatch the attempts are marked ``submitting`` (one manifest write), so that a crash between the
    submission and the write of the job ids is found again on resume (:func:`adopt_unrecorded`)."""
    for r in batch:
        rnd.set(r, submitting=now_iso())
    rnd.commit(sw.sd)
    timeline.mark("launching")  # the first launch: NeMo-Run's import (once) and the executor follow
    try:
        launched = sw.backend.launch(batch, sw.mode, stage)
        fault("after_submit")
    except ConfigError:
        raise
    except Exception as e:  # a refused submission: nothing of it is left queued (launchers.submit)
        for r in batch:
            rnd.set(r, status=ManifestStatus.FAILED, add_flags=["submit_failed"], note=str(e)[:500])
            sw.views[r.task].state, sw.views[r.task].note = "failed", f"submit: {e}"[:100]
        if not isinstance(sw.backend.max_concurrent, int):
            rnd.commit(sw.sd)
            raise SubmitError(str(e)) from e
        return []
    for r in batch:
        timeline.launched(r.task)
    for r in batch:
        h = launched[r.task]
        rnd.set(r, status=ManifestStatus.SUBMITTED, submitted=now_iso(), submitting=None, **h.record())
        write_script(sw.sd, r, h.script or sw.backend.script(r))
        sw.views[r.task].state, sw.views[r.task].job_id = "submitted", h.job_id
        sw.started[r.task] = time.monotonic()
    rnd.commit(sw.sd)  # a crash after this point finds every submitted job in the manifest
    return list(batch)


def _advance(sw: Sweep, rnd: Round, ref: RunRef, st: Any, time_limit: int | None) -> bool:
    """Apply one poll to a run; True once it is final (and collected)."""
    view = sw.views[ref.task]
    update_from_log(view, read_tail(sw.backend.log_files(ref)))
    if st.job_id:
        view.job_id = st.job_id
    if st.status != view.state and st.status in (ManifestStatus.RUNNING, ManifestStatus.SUBMITTED):
        rnd.set(ref, status=st.status)
    if view.state not in ("timeout", "cancelled"):
        view.state = str(st.status)
    _check_hang_and_limit(sw, rnd, ref, view, time_limit)
    if not (st.final or view.state in ("timeout", "cancelled")):
        return False
    final = view.state if view.state in ("timeout", "cancelled") and not st.final else str(st.status)
    if view.state == "timeout":
        final = "timeout"
    timeline.ended(ref.task)
    rnd.set(ref, status=final, exit_code=st.exit_code, **_scheduler_state(st))
    view.state = final
    if st.reason and final in ("lost", "failed"):
        view.note = (view.note + " " + st.reason).strip()[:100]
    rnd.adjust(ref.variant, collect(sw.sd, sw.backend, ref, sw.secrets))
    return True


def _scheduler_state(st: Any) -> dict[str, str]:
    """The scheduler's own final word (``PREEMPTED``, ``OUT_OF_MEMORY``, ``NODE_FAIL``...) for the analysis, which
    reads causes from it that the manifest status cannot carry; only Slurm words are recorded."""
    from contracts.slurm import STATES, state_word

    word = state_word(st.state or "")
    return {"scheduler_state": word} if word in STATES else {}


def _check_hang_and_limit(sw: Sweep, rnd: Round, ref: RunRef, view: RunView, time_limit: int | None) -> None:
    """Suspected hang (CASES C09): no new iteration for max(hang_min_s, 5 x median step). Flagged on the attempt;
    with ``hang_action=cancel`` the job is cancelled and the end of its log is kept by the collection. Locally the
    conductor also enforces ``cluster.time_limit`` (Slurm does it on a cluster)."""
    if view.state != "running":
        return
    age = time.monotonic() - view.last_change if view.iteration is not None else None
    if is_suspected_hang(age, median_step_ms(view), sw.settings.hang_min_s) and "suspected hang" not in view.note:
        view.note = f"suspected hang: no new iteration for {age:.0f} s"
        rnd.set(ref, add_flags=["suspected_hang"])
        if sw.settings.hang_action == "cancel":
            sw.backend.cancel(ref)
            view.state = "cancelled"
    if time_limit and sw.backend.enforce_time_limit:
        if time.monotonic() - sw.started.get(ref.task, time.monotonic()) > time_limit:
            sw.backend.cancel(ref)
            view.state, view.note = "timeout", "local time limit reached"
            rnd.set(ref, add_flags=["time_limit"])


def _time_limit_s(m: Manifest) -> int | None:
    from contracts.slurm import parse_time_limit

    try:
        return parse_time_limit(m.cluster_config.get("time_limit", "00:30:00"))
    except ConfigError:  # a malformed limit was rejected at plan time; nothing to enforce here
        return None


def collect_all(sw: Sweep) -> None:
    """Collect every final attempt (idempotent: nothing collected is overwritten)."""
    rnd = Round()
    m = Manifest.load(sw.sd)
    for ref in m.refs():
        if m.attempt(ref).status.final:
            rnd.adjust(ref.variant, collect(sw.sd, sw.backend, ref, sw.secrets))
    rnd.commit(sw.sd)


def reattach(sw: Sweep) -> None:
    """``collect``: wait for the unfinished attempts of a detached sweep (Slurm), updating the manifest."""
    m = Manifest.load(sw.sd)
    refs = m.live_refs()
    for r in [*refs, *m.refs({ManifestStatus.PLANNED})]:
        a = m.attempt(r)
        sw.views[r.task] = RunView(r.task, r.variant, r.attempt, r.repeat, job_id=a.job_id, state=str(a.status))
    refs += adopt_unrecorded(sw, Round(), m, m.refs({ManifestStatus.PLANNED}))
    outage = Outage()
    while refs:
        rnd = Round()
        polled = outage.poll(sw, refs)
        for ref in list(refs) if polled else []:
            st, view = polled[ref.task], sw.views[ref.task]
            update_from_log(view, read_tail(sw.backend.log_files(ref)))
            view.state = str(st.status)
            if st.final:
                timeline.ended(ref.task)
                rnd.set(ref, status=st.status, exit_code=st.exit_code, **_scheduler_state(st))
                rnd.adjust(ref.variant, collect(sw.sd, sw.backend, ref, sw.secrets))
                refs.remove(ref)
        rnd.commit(sw.sd)
        sw.display.update(list(sw.views.values()))
        if refs:
            time.sleep(sw.settings.poll_s)


def interrupt(sw: Sweep) -> None:
    """Ctrl-C (CONTRACTS §5): locally cancel the running runs and mark them cancelled; on Slurm detach."""
    m = Manifest.load(sw.sd)
    local = (m.cluster_config.get("executor") or "local") == "local"
    rnd = Round()
    if local:
        for ref in m.refs({ManifestStatus.SUBMITTED, ManifestStatus.RUNNING, ManifestStatus.PLANNED}):
            sw.backend.cancel(ref)
            rnd.set(ref, status=ManifestStatus.CANCELLED, add_flags=["interrupted"])
            if ref.task in sw.views:
                sw.views[ref.task].state = "cancelled"
            rnd.adjust(ref.variant, collect(sw.sd, sw.backend, ref, sw.secrets))
        rnd.commit(sw.sd)
    where = "cancelled the local runs" if local else (
        f"detached; the jobs go on. Finish later with: python -m experiments.sweep action=collect "
        f"sweep_id={m.sweep_id} output_dir={sw.sd.root}")
    print(f"interrupted: {where}", file=sys.stderr)


__all__ = ["Mode", "Round", "SubmitError", "Sweep", "drive", "open_sweep", "runs_to_submit", "track"]
