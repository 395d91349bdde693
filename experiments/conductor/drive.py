"""``action=run``: submit, track, collect, analyse, open gates, report, history (CONTRACTS §1-§5).

Flow: write the plan -> (``preflight=container``: one validate job first) -> submit the open stages -> track with
live progress -> collect logs and effective configs into ``variants/<v>/attempt-<k>/`` -> analyse -> open gates
and submit the next stage -> final report -> history. ``detach=true`` (Slurm) returns once the jobs are queued;
``action=collect`` finishes such a sweep later, from any shell.

The manifest is read once, when the sweep is opened, and passed on typed (:attr:`Sweep.m`); every change goes
through the sweep's one :class:`contracts.manifest.ManifestWriter`, one locked write per round. The tracking loop
itself is :mod:`experiments.conductor.tracking`.
"""

from __future__ import annotations

import sys
from typing import Any

from analysis.api import Options
from contracts.errors import ConfigError
from contracts.exits import ExitCode, combine
from contracts.manifest import Manifest, ManifestWriter
from contracts.statuses import GOOD_OUTCOMES, RESUBMIT_STATUSES, ManifestStatus, Preflight
from contracts.sweepdir import SweepDir
from experiments import timeline
from experiments.blocks import add_blocks, next_block, schedule_new_arms
from experiments.conductor.accounting import record_attempt_gpu_hours, record_slurm_timeouts
from experiments.conductor.analyse import analyse, history_step, rewrite_report, show
from experiments.conductor.backends import make_backend
from experiments.conductor.chain import chain_collect
from experiments.conductor.collect import secret_values
from experiments.conductor.fabric import FabricGateFailed, fabric_gate
from experiments.conductor.gates import open_gates, reference_step, undecided
from experiments.conductor.prearm import stop_leftover_prearm
from experiments.conductor.progress import Display
from experiments.conductor.recover import SubmitError
from experiments.conductor.revision import warn_revision
from experiments.conductor.tracking import Sweep, collect_all, interrupt, reattach, track

MAX_GATE_ROUNDS = 5


def open_sweep(sd: SweepDir, settings: Any, options: Options, cluster: dict[str, Any] | None = None) -> Sweep:
    """A :class:`Sweep` for a planned folder. Raises ConfigError (a missing secret) or the launcher's errors."""
    m = Manifest.load(sd)
    warn_revision(m)  # a resume after a commit runs other code than the sweep's earlier attempts
    backend = make_backend(sd, m, cluster)
    display = Display(f"sweep {m.sweep_id} ({m.name}, {m.cluster}, mode={m.mode})")
    return Sweep(sd, backend, settings, options, display, m.mode, secret_values(m, cluster), writer=ManifestWriter(sd, m))


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
    sd, m = sw.sd, sw.m
    detach = bool(settings.detach)
    if detach and not sw.backend.detaches:
        # a local job belongs to the process that started it: nothing would track or collect it after an exit
        print("note: the local executor never detaches (CONTRACTS §1); running in the foreground", file=sys.stderr)
        detach = False
    try:
        if not collect_only:
            if m.extra.get("conformance") and not resume:
                from experiments.conductor.conformance import run_conformance

                run_conformance(sw)
            if m.preflight == Preflight.CONTAINER and not resume:
                from experiments.conductor.preflight import container_preflight

                container_preflight(sw)
            if resume:  # adopt what an earlier conductor left in flight (it may have died any way): never twice
                reattach(sw)
                stop_leftover_prearm(sw, keep=("fabric",))  # a resume runs no preflight or conformance job again
            fabric_gate(sw, resume)  # Slurm over several nodes: slow nodes named, then excluded or the sweep stops
            pending = runs_to_submit(sd, sw.m)
            track(sw, pending, detach)
            if detach:
                sw.stop()
                _record_timeline(sd, "run")
                print(f"detached: {len(pending)} run(s) queued. Finish with: python -m experiments.sweep "
                      f"action=collect sweep_id={m.sweep_id} output_dir={sd.root}")
                chain_collect(sw, history)
                return ExitCode.OK
        else:
            reattach(sw)
        gate_rounds, final = 0, None
        while gate_rounds < MAX_GATE_ROUNDS:
            collect_all(sw)
            record_attempt_gpu_hours(sw)  # Slurm: what sacct accounted, for the report beside the estimate
            record_slurm_timeouts(sw)  # Slurm: the cluster's KillWait/SlurmdTimeout/GraceTime, for late stops
            sw.backend.disconnect()  # the analysis needs no connection; a gate's launch opens one again
            if not more_launches_possible(sw.m):
                sw.backend.finish()  # a waiting validate process ends (its own exit) while this analysis runs
            summary = analyse(sd, options, quiet=True)
            what = next_step(sw, summary)
            if what is None:
                final = summary  # nothing ran or changed since: this analysis (and its report) is the final one
                break
            gate_rounds += what == "gate"
            track(sw, runs_to_submit(sd, sw.m, new_only=True), detach)
            if detach:
                sw.stop()
                print(f"{'gate opened' if what == 'gate' else 'adaptive: next block'}: queued. Finish with: "
                      f"python -m experiments.sweep action=collect sweep_id={m.sweep_id} output_dir={sd.root}")
                chain_collect(sw, history)
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
    except FabricGateFailed as e:
        sw.stop()
        print(f"error: fabric gate: {e}", file=sys.stderr)
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
    gate = reference_step(sw.m)
    if gate is not None:  # the arms were stopped: the sweep says so in its exit code and report
        print(f"reference gate: {gate.text}", file=sys.stderr)
        try:
            summary = rewrite_report(sd, summary, gate)
        except OSError as e:
            _disk_error(sd, m.sweep_id, e)
            return int(combine(summary.exit_code, gate.exit_code, ExitCode.INFRA))
    hist = {**(sw.m.config.get("history") or {}), **(history or {})}
    if hist.get("enabled"):
        step = history_step(sd, sw.m, summary, hist)
        try:  # the report names the history's outcome and carries the exit code the process ends with
            summary = rewrite_report(sd, summary, step)
        except OSError as e:
            _disk_error(sd, m.sweep_id, e)
            return int(combine(summary.exit_code, step.exit_code, ExitCode.INFRA))
    _record_timeline(sd, "collect" if collect_only else "run")
    return int(summary.exit_code)


def _record_timeline(sd: SweepDir, action: str) -> None:
    """Write this command's phase marks to ``conductor.json`` and print where the conductor's own time went."""
    try:
        print(timeline.describe(timeline.record(sd.root, action)), file=sys.stderr)
    except OSError as e:  # timings only: a full disk here loses no result
        print(f"warning: conductor.json not written: {e}", file=sys.stderr)


def _disk_error(sd: SweepDir, sweep_id: str, e: OSError) -> None:
    """Say what failed and the command that finishes the sweep: ``action=collect`` only collects, so while a
    planned run was never submitted (the disk filled before it launched) the advice is a resume (``action=run``),
    which submits it; collect would skip it and close its gate."""
    unsent = True
    try:
        unsent = bool(runs_to_submit(sd, Manifest.load(sd)))
    except Exception:  # noqa: BLE001 - the advice only; a resume is right whenever in doubt
        pass
    action = "run" if unsent else "collect"
    print(f"error: writing into {sd.root} failed ({e}); every file already written is intact (manifest, logs, "
          f"effective configs, the previous report). Free space, then finish with: python -m experiments.sweep "
          f"action={action} sweep_id={sweep_id} output_dir={sd.root}", file=sys.stderr)


def more_launches_possible(m: Manifest) -> bool:
    """Whether :func:`next_step` can still launch runs: only ``repeats=auto`` adds blocks
    (:func:`experiments.blocks.next_block`) and only a gated or gate-closed variant can open
    (:func:`experiments.conductor.gates.open_gates`)."""
    return (m.design or {}).get("repeats") == "auto" or bool(undecided(m))


def next_step(sw: Sweep, summary: Any) -> str | None:
    """After an analysis: ``"block"`` when ``repeats=auto`` added the next block of undecided arms, ``"gate"`` when
    a gate opened (its arms get blocks of their own, experiments/blocks.py), None when the sweep is done."""
    budget = float(getattr(sw.settings, "max_gpu_hours", float("inf")))
    arms, why = next_block(sw.m, list(summary.comparisons), budget)
    if arms:
        sw.writer.change(lambda m: add_blocks(m, arms, 1))
        print(f"adaptive: block {len(sw.m.blocks) - 1} with {', '.join(arms)} ({why})", file=sys.stderr)
        return "block"
    if (sw.m.design or {}).get("repeats") == "auto":
        print(f"adaptive: stop ({why})", file=sys.stderr)
    opened = open_gates(sw.writer, summary)
    # blocks for the arms of an open gate that have none: the gate just opened, or it opened before a conductor
    # died between the gate's write and this one
    if opened or any(v.status == ManifestStatus.PLANNED and v.variant.gate for v in sw.m.variants):
        if sw.writer.change(schedule_new_arms) or opened:
            return "gate"
    return None


def runs_to_submit(sd: SweepDir, m: Manifest, new_only: bool = False) -> list[tuple[str, int]]:
    """Runs of open stages of the sweep ``m`` in ``sd`` whose latest attempt is missing or did not succeed (what a
    resume resubmits), in the recorded block order; ``new_only``: only runs without any attempt (a new block or a
    newly opened stage). The outcomes come from the analysis' run.json files."""
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


__all__ = ["MAX_GATE_ROUNDS", "SubmitError", "drive", "next_step", "open_sweep", "runs_to_submit"]
