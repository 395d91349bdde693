"""The sweep's actions on a planned folder (CONTRACTS §1): run a new plan, resume, status, collect, cancel."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from contracts.errors import ConfigError
from contracts.exits import ExitCode
from contracts.manifest import Manifest
from contracts.statuses import ManifestStatus
from contracts.sweepdir import SweepDir
from experiments.conductor.progress import Display, RunView, read_tail, update_from_log

# experiments.conductor.drive (and through it the analysis, about 0.5 s of imports) and the backends are imported by
# the actions that use them: ``action=status`` needs neither (issue 17)


def run_new(plan, argv: list[str]) -> int:
    """``action=run`` for a new sweep: write the plan, then submit, track, collect and analyse."""
    from experiments.conductor.drive import drive
    from experiments.plan import analysis_options, write_plan
    from experiments.report_plan import print_plan

    options = analysis_options(plan.cfg, plan.settings.hang_min_s)
    sd = SweepDir(write_plan(plan, argv))
    print_plan(plan, sd.root)
    return drive(sd, plan.settings, options, resume=False, cluster=plan.cfg["cluster"])


def given(argv: list[str], group: str) -> set[str]:
    """The keys of ``group`` (``history``, ``analysis``) set on this command line."""
    out = set()
    for a in argv:
        key = a.split("=", 1)[0].lstrip("+~")
        if key.startswith(group + "."):
            out.add(key.split(".", 1)[1])
    return out


def run_action(action: str, argv: list[str]) -> int:
    """``status``, ``collect``, ``cancel`` for ``sweep_id=``, and ``run`` with an existing id (resume).

    Settings given on this command line under ``history.`` and ``analysis.`` override what the sweep was planned
    with; everything else comes from the manifest.
    """
    from experiments.compose import compose_overrides
    from experiments.plan import SweepSettings, analysis_options

    cfg = compose_overrides(argv).base
    settings = SweepSettings.from_cfg(cfg)
    sd = SweepDir(find_sweep(settings))
    if action == "status":
        return show_status(sd)
    if action == "cancel":
        return cancel_sweep(sd)
    m = Manifest.load(sd)
    history = {k: v for k, v in (cfg.get("history") or {}).items() if k in given(argv, "history")}
    analysis = {**(m.config.get("analysis") or {}),
                **{k: v for k, v in (cfg.get("analysis") or {}).items() if k in given(argv, "analysis")}}
    options = analysis_options({"analysis": analysis}, settings.hang_min_s)
    from experiments.conductor.drive import drive

    return drive(sd, settings, options, resume=True, collect_only=action == "collect", history=history)


def find_sweep(settings) -> Path:
    """The folder of ``sweep_id=`` (``output_dir`` or ``results/*/<id>``). Raises ConfigError if unknown."""
    if settings.output_dir and SweepDir(Path(settings.output_dir)).exists():
        return Path(settings.output_dir)
    if not settings.sweep_id:
        raise ConfigError("this action needs sweep_id=<YYYYmmdd-HHMMSSZ-xxxxxx> (or sweep_id=latest, or output_dir= "
                          "of a sweep)")
    root = Path(settings.results_root)
    if settings.sweep_id == "latest":
        found = sorted(root.glob("*/*/manifest.json"), key=lambda p: p.parent.name)
        if not found:
            raise ConfigError(f"sweep_id=latest: no sweep under {root}/*/")
        return found[-1].parent
    hits = sorted(root.glob(f"*/{settings.sweep_id}/manifest.json"))
    if not hits:
        known = sorted(p.parent.name for p in root.glob("*/*/manifest.json"))[-10:]
        raise ConfigError(f"sweep_id={settings.sweep_id} not found under {root}/*/. "
                          f"Known sweeps: {', '.join(known) or 'none'}")
    return hits[0].parent


def show_status(sd: SweepDir) -> int:
    """``action=status``: the run table of any sweep, from any shell."""
    m = Manifest.load(sd)
    views = []
    for v in m.variants:
        if not v.attempts:
            views.append(RunView(v.name, v.name, 0, 0, state=str(v.status), note="; ".join(v.variant.reasons)[:100]))
        for a in v.attempts:
            ref = a.ref(v.name)
            view = RunView(ref.task, v.name, a.attempt, a.repeat, job_id=a.job_id, state=str(a.status),
                           note=",".join(a.flags))
            update_from_log(view, read_tail(sorted(sd.logs(ref).glob("*"))))
            views.append(view)
    Display(f"sweep {m.sweep_id} ({m.name}, {m.cluster}, mode={m.mode})", static=True).close(views)
    return ExitCode.OK


def cancel_sweep(sd: SweepDir) -> int:
    """``action=cancel``: cancel every unfinished job of the sweep and mark it cancelled, in one manifest write."""
    from experiments.conductor.backends import make_backend
    from experiments.conductor.drive import Round

    m = Manifest.load(sd)
    backend = make_backend(sd, m, strict=False)  # cancelling needs no secret values
    rnd = Round()
    refs = m.refs({ManifestStatus.PLANNED, ManifestStatus.SUBMITTED, ManifestStatus.RUNNING})
    for ref in refs:
        backend.cancel(ref)
        rnd.set(ref, status=ManifestStatus.CANCELLED, add_flags=["cancelled_by_user"])
    rnd.commit(sd)
    print(f"cancelled {len(refs)} unfinished run(s) of sweep {m.sweep_id}")
    return ExitCode.OK


__all__: list[Any] = ["cancel_sweep", "find_sweep", "run_action", "run_new", "show_status"]
