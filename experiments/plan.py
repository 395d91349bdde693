"""``action=plan``: compose, expand, preflight, render job scripts and write the sweep folder (CONTRACTS §1, §3).

Nothing is submitted. The folder gets ``manifest.json`` (through :mod:`contracts.manifest`),
``variants/<name>/variant.json`` for the payload and ``variants/<name>/job.sh`` (the script as it would be
submitted) for every kept variant.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import secrets
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analysis.options import Options, UsageError
from contracts.atomic import dumps, write_text
from contracts.errors import ConfigError
from contracts.manifest import PLAN_STATE, PLAN_WRITING, Manifest
from contracts.records import SCHEMA_VERSION, Variant
from contracts.secrets import mask_config, mask_env, mask_override
from contracts.sweepdir import SweepDir
from experiments import timeline
from experiments.blocks import (
    CONTROL_SUFFIX,
    block_order,
    derive_seed,
    design_doc,
    n_initial_blocks,
    planned_arms,
    with_controls,
)
from experiments.checks import (
    check_all,
    check_git,
    check_remote_bare_metal,
    check_secret_env,
    check_secret_values,
    check_train_gpus,
    check_unattended_history,
    check_warmup,
    check_writable,
)
from experiments.compose import Composed, compose_overrides
from experiments.conformance import plan_doc
from experiments.expand import Expansion, JobSpec, expand
from experiments.settings import SWEEP_ID_RE, SweepSettings  # noqa: F401  (re-exported: the planner's API)

REPO_ROOT = Path(__file__).resolve().parent.parent


def analysis_options(cfg: dict[str, Any], hang_min_s: float) -> Options:
    """The analysis options of a sweep: ``analysis.warmup_iters`` (iterations; null = max(3, 10%)),
    ``analysis.loss_tolerance`` (fraction), ``analysis.bootstrap`` (resamples) and ``hang_min_s`` (s).

    Raises:
        ConfigError: a value of the wrong type or out of range (names the key and what is allowed).
    """
    a = dict(cfg.get("analysis") or {})
    unknown = sorted(set(a) - {"warmup_iters", "loss_tolerance", "bootstrap"})
    if unknown:
        raise ConfigError(f"unknown key analysis.{unknown[0]}; valid keys of analysis: bootstrap, loss_tolerance, "
                          "warmup_iters")
    warmup, tol, boot = a.get("warmup_iters"), a.get("loss_tolerance", 0.02), a.get("bootstrap", 2000)
    if warmup is not None and (isinstance(warmup, bool) or not isinstance(warmup, int)):
        raise ConfigError(f"analysis.warmup_iters={warmup!r} must be an integer number of iterations or null")
    if isinstance(tol, bool) or not isinstance(tol, int | float):
        raise ConfigError(f"analysis.loss_tolerance={tol!r} must be a fraction in (0, 1), e.g. 0.02")
    if isinstance(boot, bool) or not isinstance(boot, int):
        raise ConfigError(f"analysis.bootstrap={boot!r} must be an integer number of resamples (>= 100)")
    try:
        return Options(warmup=warmup, tolerance=float(tol), n_boot=boot, hang_min_s=float(hang_min_s),
                       practical_threshold=float(cfg.get("practical_threshold", 0.02)))
    except UsageError as e:
        raise ConfigError(f"analysis: {e}") from None


@dataclass(frozen=True)
class Plan:
    """A planned sweep: settings, expansion, identity, folder, resolved mode and the run order."""

    settings: SweepSettings
    cfg: dict[str, Any]
    expansion: Expansion
    sweep_id: str
    created: str
    out_dir: Path
    mode: str
    mode_note: str | None
    runs: tuple[tuple[str, int], ...]
    gpu_hours: float
    git_sha: str | None
    dirty: bool | None
    blocks: tuple[dict[str, Any], ...] = ()
    design: dict[str, Any] | None = None
    notes: tuple[str, ...] = ()  # plan-time warnings that go into the manifest (a dirty tree for action=plan)
    bound: dict[str, Any] = dataclasses.field(default_factory=dict)  # experiments/reference.py bound_doc
    conformance: dict[str, Any] | None = None  # experiments/conformance.py plan_doc (conformance=true)

    @property
    def variants(self) -> tuple[Variant, ...]:
        return self.expansion.variants

    def job(self, name: str) -> JobSpec:
        return self.expansion.jobs[name]


def new_sweep_id(now: dt.datetime | None = None) -> str:
    """``YYYYmmdd-HHMMSSZ-xxxxxx``: UTC time plus 6 random hex digits (CONTRACTS §1)."""
    now = now or dt.datetime.now(dt.UTC)
    return now.strftime("%Y%m%d-%H%M%SZ-") + secrets.token_hex(3)


def git_state(root: Path = REPO_ROOT) -> tuple[str | None, bool | None]:
    """(HEAD sha, dirty) of the project's own checkout (:func:`contracts.manifest_entries.code_revision`), or
    (None, None) when it is not one (a device copy, a copy inside another repository)."""
    from contracts.manifest_entries import code_revision

    sha = code_revision()
    if sha is None:
        return None, None
    try:
        st = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                            capture_output=True, text=True, timeout=10, check=True).stdout
        return sha, bool(st.strip())
    except (OSError, subprocess.SubprocessError):
        return None, None


def plan_blocks(variants: tuple[Variant, ...], n_blocks: int, seed: int) -> tuple[dict[str, Any], ...]:
    """The first ``n_blocks`` blocks: every arm of the open stages once per block, in a seeded random order
    (experiments/blocks.py); gated arms get blocks of their own when their gate opens."""
    arms = planned_arms(list(variants))
    return tuple({"index": b, "order": block_order(arms, seed, b)} for b in range(n_blocks))


def _estimate_hours(exp: Expansion, runs: list[str], variants: tuple[Variant, ...], blocks_per_arm: int) -> float:
    """GPU-hours (nodes x GPUs x time limit per run) of ``runs`` plus the gated arms' future blocks (each with its
    group's baseline and control again)."""
    def h(n: str) -> float:
        j = exp.jobs[n]
        return j.cluster.nodes * j.gpus_per_node * j.cluster.time_limit_s / 3600

    gated = [v for v in variants if v.status == "gated"]
    anchors = [v.name for v in variants if v.role in ("baseline", "control") and v.status != "pruned"]
    later = blocks_per_arm * (sum(h(v.name) for v in gated) + (sum(h(n) for n in anchors) if gated else 0.0))
    return sum(h(n) for n in runs) + later


def make_plan(overrides: list[str] | Composed, now: dt.datetime | None = None) -> Plan:
    """Compose (unless ``overrides`` is composed already: the CLI composes once), expand and preflight; decide id,
    folder, mode and run order. Writes nothing.

    Raises:
        ConfigError: any bad input (exit code 2), including an invalid baseline or the GPU-hour guard.
    """
    composed = overrides if isinstance(overrides, Composed) else compose_overrides(overrides)
    timeline.mark("composed")
    cfg = composed.base
    settings = SweepSettings.from_cfg(cfg)
    check_all(settings, cfg)  # every value a later stage reads is checked before anything is written
    analysis_options(cfg, settings.hang_min_s)
    exp = expand(composed, settings.preflight)
    timeline.mark("expanded")  # the local GPU query (nvidia-smi) and the preflight included
    exp = _prune_groups_without_baseline(exp)
    cluster = next(iter(exp.jobs.values())).cluster
    mode, note = resolve_mode(settings.mode, cluster.mode, cluster.executor, exp.local_gpus)
    check_train_gpus(mode, cluster.executor, exp.local_gpus)
    check_warmup(cfg, mode)
    check_secret_values(cluster)
    if settings.control:
        variants = with_controls(exp.variants)
        jobs = dict(exp.jobs)
        for v in variants:
            if v.role == "control":
                jobs[v.name] = exp.jobs[v.name.removesuffix(CONTROL_SUFFIX)]
        exp = dataclasses.replace(exp, variants=variants, jobs=jobs)
    exp, bound = _apply_bound(exp, settings, cfg)
    created = (now or dt.datetime.now(dt.UTC)).replace(microsecond=0)
    sweep_id = settings.sweep_id or new_sweep_id(created)
    seed = settings.block_seed if settings.block_seed is not None else derive_seed(sweep_id)
    prior = _nightly_prior(settings, cfg, exp, cluster)
    # a reference gate runs one block of the baselines first; the arms get their blocks when it opens. With a
    # nightly prior on the run-to-run noise, one block can already show equivalence (analysis/measure/pooled.py)
    n_blocks = 1 if bound.get("reference_gate") or prior else n_initial_blocks(settings.repeats, settings.max_blocks)
    blocks = plan_blocks(exp.variants, n_blocks, seed)
    runs = tuple((n, b["index"]) for b in blocks for n in b["order"])
    hours = _estimate_hours(exp, [n for n, _ in runs], exp.variants, n_blocks)
    if hours > settings.max_gpu_hours:
        raise ConfigError(f"the sweep may use up to {hours:.1f} GPU-hours ({len(runs)} runs x nodes x GPUs x "
                          f"time limit), above max_gpu_hours={settings.max_gpu_hours}. Raise it on the command "
                          f"line (max_gpu_hours={int(hours) + 1}) or shrink the sweep")
    auto = settings.repeats == "auto"
    if auto:  # the worst case: every arm to max_blocks (the conductor stops adding blocks at max_gpu_hours)
        hours = _estimate_hours(exp, [n for n in planned_arms(list(exp.variants))] * settings.max_blocks,
                                exp.variants, settings.max_blocks)
    per_run = {n: exp.jobs[n].cluster.nodes * exp.jobs[n].gpus_per_node * exp.jobs[n].cluster.time_limit_s / 3600
               for n in exp.jobs}
    design = design_doc(repeats=settings.repeats, seed=seed, control=settings.control,
                        max_blocks=settings.max_blocks, threshold=float(settings.practical_threshold),
                        run_gpu_hours={v.name: round(per_run[v.name], 6) for v in exp.variants
                                       if v.status != "pruned"},
                        seed_source="block_seed" if settings.block_seed is not None else "sweep_id")
    if prior is not None:
        design["noise_prior"] = prior.to_json()
    out = Path(settings.output_dir) if settings.output_dir else Path(settings.results_root) / exp.preset.name / sweep_id
    check_writable(out)
    sha, dirty = git_state()
    chained = cluster.executor == "slurm" and not cluster.remote and bool(settings.collect_job)
    notes = tuple(n for n in (check_git(settings, cluster.executor, dirty), check_secret_env(cluster),
                              check_remote_bare_metal(cluster),
                              *check_unattended_history(cfg, detached=bool(settings.detach) and cluster.executor
                                                        == "slurm", chained=chained)) if n)
    conformance = plan_doc(cfg, exp.container.tests_dir)
    return Plan(settings, cfg, exp, sweep_id, created.isoformat().replace("+00:00", "Z"), out, mode, note, runs,
                hours, sha, dirty, blocks, design, notes, bound, conformance)


def _prune_groups_without_baseline(exp: Expansion) -> Expansion:
    """A group whose baseline is pruned has nothing to compare with: its arms are pruned too, with the baseline's
    reason, and the plan warns (a swept axis such as ``precision=bf16,nvfp4`` on H100 keeps its valid groups).

    Raises:
        ConfigError: every group's baseline is pruned (names each baseline and its reasons).
    """
    bases = [v for v in exp.variants if v.role == "baseline"]
    bad = [v for v in bases if v.status == "pruned"]
    if not bad:
        return exp
    lines = "; ".join(f"{v.name}: {' | '.join(v.reasons)}" for v in bad)
    if len(bad) == len(bases):
        raise ConfigError(f"the baseline of a group is invalid, so nothing can be compared: {lines}")
    bad_groups = {tuple(sorted(v.group.items())): v for v in bad}
    variants = []
    for v in exp.variants:
        base = bad_groups.get(tuple(sorted(v.group.items())))
        if base is not None and v is not base and v.status != "pruned":
            why = f"the baseline {base.name} of this group is pruned: {' | '.join(base.reasons)}"
            v = dataclasses.replace(v, status="pruned", reasons=(*v.reasons, why))
        variants.append(v)
    warning = f"group(s) with an invalid baseline pruned whole: {lines}"
    return dataclasses.replace(exp, variants=tuple(variants), warnings=(*exp.warnings, warning))


def _apply_bound(exp: Expansion, settings: SweepSettings, cfg: dict[str, Any]) -> tuple[Expansion, dict[str, Any]]:
    """The sweep's bound (experiments/reference.py) and the variants after ``prune_below_ceiling`` and
    ``reference_gate``. Raises ConfigError for a ceiling that cannot be had or read."""
    from experiments import reference

    variants = exp.variants
    reference.check_ceiling_source(settings, cfg, any(v.status == "gated" for v in variants))
    bound = reference.bound_doc(next(iter(exp.jobs.values())), settings, cfg)
    if settings.prune_below_ceiling and bound.get("ceiling"):
        variants = reference.prune_by_ceiling(variants, bound["ceiling"], float(settings.practical_threshold))
    if bound.get("reference_gate"):
        variants = reference.gate_on_reference(variants)
    return dataclasses.replace(exp, variants=variants), bound


def resolve_mode(mode: str | None, cluster_mode: str | None, executor: str, local_gpus: int) -> tuple[str, str | None]:
    """The payload mode and, when it was not given, why it was chosen (CONTRACTS §1)."""
    if mode:
        return mode, None
    if cluster_mode:
        return cluster_mode, f"mode={cluster_mode} (set by the cluster profile)"
    if executor == "local" and local_gpus == 0:
        return "validate", "mode=validate: cluster=local found no GPU, so jobs validate instead of training"
    return "train", None


def variant_payload(plan: Plan, v: Variant) -> dict[str, Any]:
    """The ``variant.json`` document the payload reads (schema_version 1, CONTRACTS §11)."""
    job = plan.job(v.name)
    prof = plan.expansion.container
    payload = plan.cfg.get("payload", {})
    return {
        "schema_version": SCHEMA_VERSION, "sweep_id": plan.sweep_id, "variant": v.name,
        "dispatcher": v.dispatcher, "overlap": v.overlap, "delay_wgrad": v.delay_wgrad,
        "axes": v.axes, "group": v.group, "role": v.role, "stage": v.stage, "mode": plan.mode,
        "model": {"name": job.model.name, "recipe": job.model.recipe, "hf_path": job.model.hf_path},
        "settings": v.settings,
        "cluster": {"name": job.cluster.name, "executor": job.cluster.executor, "nodes": job.cluster.nodes,
                    "gpus_per_node": job.gpus_per_node, "gpu_type": job.gpu_type, "world_size": job.world_size},
        "container": {k: prof.versions()[k] for k in ("name", "image", "torch", "transformer_engine",
                                                       "megatron_core", "megatron_bridge", "deep_ep")},
        "env": mask_env(job.env, job.cluster.secret_env),
        "payload": {"train_iters": payload.get("train_iters") or 30, **_auto_iters(payload),
                    "seed": payload.get("seed", 1234),
                    "hold_s": payload.get("hold_s", 0), "hold_at": payload.get("hold_at", "end"),
                    "log_interval": 1, "profile": plan.cfg.get("profile") is True},
        "allow_adjust": list(v.allow_adjust),
        "precision": ({"name": job.precision.name, "mixed_precision": job.precision.mixed_precision}
                      if job.precision is not None else {"name": "bf16", "mixed_precision": "bf16_mixed"}),
    }


def manifest_doc(plan: Plan) -> dict[str, Any]:
    """The initial ``manifest.json`` document (CONTRACTS §3, §12)."""
    exp = plan.expansion
    cluster = next(iter(exp.jobs.values())).cluster
    stages = []
    for i, s in enumerate(exp.preset.stages, start=1):
        stages.append({"index": i, "name": s.name, "gate": s.gate, "status": "gated" if s.gate else "open"})
    variants = []
    for v in exp.variants:
        d = v.to_json()
        d["attempts"] = []
        variants.append(d)
    warnings = list(exp.warnings)
    if plan.mode_note:
        warnings.append(plan.mode_note)
    warnings.extend(plan.notes)
    if plan.settings.preflight == "off":
        warnings.append("preflight=off: every check was skipped on purpose; invalid variants will be submitted")
    return {
        "schema_version": SCHEMA_VERSION, "sweep_id": plan.sweep_id, "name": exp.preset.name,
        "created": plan.created, "git_sha": plan.git_sha, "dirty": plan.dirty,
        "allow_dirty": plan.settings.allow_dirty, "preflight": plan.settings.preflight, "mode": plan.mode,
        "model": next(iter(exp.jobs.values())).model.name, "cluster": cluster.name,
        "config": mask_config(plan.cfg, cluster.secret_env), "container": exp.container.versions(),
        "warnings": warnings, "gpu_hours_estimate": round(plan.gpu_hours, 3), "overrides": [],
        "stages": stages, "runs": [{"variant": n, "repeat": r} for n, r in plan.runs], "variants": variants,
        "design": plan.design or {}, "blocks": [dict(b) for b in plan.blocks],
        "bound": dict(plan.bound), "prune_below_ceiling": plan.settings.prune_below_ceiling,
        "precision": sweep_precision(exp),
        **({"conformance": plan.conformance} if plan.conformance else {}),
    }


def sweep_precision(exp: Expansion) -> str:
    """The sweep's precision (conf/precision/): its name when every job has the same one, ``"swept"`` when
    ``precision=`` is an axis (each variant's name and axes then carry it)."""
    names = {(j.precision.name if j.precision is not None else "bf16") for j in exp.jobs.values()}
    return names.pop() if len(names) == 1 else "swept"


def render_job(plan: Plan, v: Variant, variant_json: Path, scripts: Any = None,
               before_full: Callable[[], object] | None = None) -> str:
    """The job script of the variant's first run, rendered by the launcher's own builder (NeMo-Run dry run for
    Slurm, the LocalExecutor command line locally) so that ``job.sh`` is what would be submitted. ``scripts``: a
    :class:`launchers.render.JobScripts`, which renders once per shape (the same text, one dry run); it calls
    ``before_full`` (which writes ``variant_json``) before a render that reads the variant file. Without
    ``scripts`` the file must exist."""
    from launchers.render import render_job_script
    from launchers.spec import RunSpec

    job = plan.job(v.name)
    hold = float((plan.cfg.get("payload") or {}).get("hold_s") or 0) or None
    spec = RunSpec(variant=v.name, variant_json=variant_json.resolve(), attempt=1, repeat=0, mode=plan.mode,
                   hold_s=hold)
    kwargs: dict[str, Any] = {"title": plan.expansion.preset.name, "label": f"s{v.stage}"}
    if job.cluster.executor == "local":
        kwargs["gpus"] = job.gpus_per_node if plan.mode == "train" else 0
    state_dir = (plan.out_dir / "nemo_run").resolve()
    if scripts is not None:
        return scripts.render(job.cluster, spec, state_dir=state_dir, before_full=before_full, **kwargs)
    return render_job_script(job.cluster, spec, state_dir=state_dir, **kwargs)


def write_plan(plan: Plan, overrides: list[str], render: bool = True) -> Path:
    """Create the sweep folder: manifest, variant.json and job.sh per kept variant. Returns the folder.

    Order (docs/CONTRACTS.md §3): every file is rendered in memory first (a render error writes nothing); then the
    folder is claimed by creating the full manifest exclusively (``Manifest.create``: flock + exists check), with
    ``plan_state: writing``; only the winner writes the variant files, then marks the plan ``complete``. A loser
    writes nothing and names the sweep that holds the folder. A crash between the claim and ``complete`` leaves a
    manifest that every later action refuses, naming the folder to remove (nothing was submitted from it).

    Raises:
        SweepExistsError: the folder already holds a manifest (use ``sweep_id=`` to resume instead).
        ConfigError: the folder cannot be written (read-only, disk full).
    """
    sd = SweepDir(plan.out_dir)
    doc = manifest_doc(plan)
    secret_env = next(iter(plan.expansion.jobs.values())).cluster.secret_env
    doc["overrides"] = [mask_override(o, secret_env) for o in overrides]
    doc[PLAN_STATE] = PLAN_WRITING
    files = _render_files(plan, sd, render)
    try:
        written = Manifest.from_json(doc).create(sd)
    except OSError as e:
        raise ConfigError(f"output_dir={sd.root} cannot be written ({e.strerror or e}); nothing was written. "
                          "Choose another output_dir or results_root") from None
    try:
        for path, text in files:
            write_text(path, text)
        Manifest.mark_plan_complete(sd, written)
    except OSError as e:
        raise ConfigError(f"the plan of sweep {plan.sweep_id} in {sd.root} could not be completed ({e}); nothing "
                          f"was submitted. Remove {sd.root} and plan again") from None
    return sd.root


def _render_files(plan: Plan, sd: SweepDir, render: bool) -> list[tuple[Path, str]]:
    """(path, text) of every variant.json and job.sh, rendered before the folder is touched. The launcher's renderer
    needs the variant file on disk, so it renders against a scratch copy of the layout, whose path is then replaced
    by the sweep folder's in the script text."""
    import shutil
    import tempfile

    from launchers.render import JobScripts

    files: list[tuple[Path, str]] = []
    scratch = Path(tempfile.mkdtemp(prefix="moe-plan-")).resolve()
    scripts = JobScripts()  # one NeMo-Run dry run per shape, the same text for every variant of it
    try:
        tmp = SweepDir(scratch)
        tmp.variants.mkdir()  # where the template's placeholder variant sits while it renders
        for v in plan.variants:
            if v.status == "pruned":
                continue
            text = dumps(variant_payload(plan, v))
            files.append((sd.variant_json(v.name), text))
            if render:
                # the scratch copy of variant.json only for a run rendered in full (a template needs none), so a
                # 1,000-variant plan does not write 1,000 scratch files it never reads
                script = render_job(plan, v, tmp.variant_json(v.name), scripts,
                                    functools.partial(write_text, tmp.variant_json(v.name), text))
                files.append((sd.job_sh(v.name), script.replace(str(scratch), str(sd.root.resolve()))))
    finally:
        scripts.close()
        shutil.rmtree(scratch, ignore_errors=True)
    return files


def _auto_iters(payload: dict[str, Any]) -> dict[str, Any]:
    """The cap and precision of ``payload.train_iters=auto`` (experiments/payload/auto_iters.py), else nothing."""
    if payload.get("train_iters") != "auto":
        return {}
    from experiments.payload.auto_iters import DEFAULT_MAX_ITERS, DEFAULT_PRECISION

    return {"max_iters": payload.get("max_iters") or DEFAULT_MAX_ITERS,
            "stop_precision": payload.get("stop_precision") or DEFAULT_PRECISION}


def _nightly_prior(settings: SweepSettings, cfg: dict[str, Any], exp: Expansion, cluster: Any) -> Any:
    """The series' noise prior for a ``repeats=auto`` sweep with the history on (``analysis.history.series_prior``:
    learnt from the earlier sweeps of the same preset, model, cluster and container), else None. A history that
    cannot be read leaves the sweep without a prior (the analysis says so), never stops the plan."""
    hist = cfg.get("history") or {}
    if settings.repeats != "auto" or not hist.get("enabled"):
        return None
    from analysis.history import series_prior

    try:
        return series_prior(hist, preset=exp.preset.name, model=next(iter(exp.jobs.values())).model.name,
                            cluster=cluster.name, container=str(exp.container.versions().get("name") or ""))
    except Exception:
        return None
