"""``action=plan``: compose, expand, preflight, render job scripts and write the sweep folder (CONTRACTS §1, §3).

Nothing is submitted. The folder gets ``manifest.json`` (through :mod:`contracts.manifest`),
``variants/<name>/variant.json`` for the payload and ``variants/<name>/job.sh`` (the script as it would be
submitted) for every kept variant.
"""

from __future__ import annotations

import datetime as dt
import re
import secrets
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analysis.options import Options, UsageError
from contracts.atomic import write_json, write_text
from contracts.manifest import Manifest
from contracts.records import SCHEMA_VERSION, Variant
from contracts.secrets import mask_config, mask_env, mask_override
from contracts.sweepdir import SweepDir
from experiments.compose import compose_overrides
from experiments.config import ACTIONS, MODES, PREFLIGHT, ConfigError, one_of
from experiments.expand import Expansion, JobSpec, expand

SWEEP_ID_RE = re.compile(r"^\d{8}-\d{6}Z-[0-9a-f]{6}$")
REPO_ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True, kw_only=True)
class SweepSettings:
    """Top-level keys of conf/config.yaml (CONTRACTS §1), validated."""

    action: str
    dry_run: bool
    sweep_id: str | None
    output_dir: str | None
    results_root: str
    preflight: str
    mode: str | None
    repeats: int
    pack: bool
    detach: bool
    allow_dirty: bool
    max_gpu_hours: float
    hang_action: str
    hang_min_s: float
    poll_s: float

    def __post_init__(self) -> None:
        one_of("action", self.action, ACTIONS)
        one_of("preflight", self.preflight, PREFLIGHT)
        if self.mode is not None:
            one_of("mode", self.mode, MODES)
        one_of("hang_action", self.hang_action, ("cancel", "flag"))
        if not isinstance(self.repeats, int) or isinstance(self.repeats, bool) or self.repeats < 1:
            raise ConfigError(f"repeats={self.repeats!r} must be an integer >= 1")
        if self.sweep_id is not None and self.sweep_id != "latest" and not SWEEP_ID_RE.match(str(self.sweep_id)):
            raise ConfigError(f"sweep_id={self.sweep_id!r} is not of the form YYYYmmdd-HHMMSSZ-xxxxxx "
                              "(UTC time + 6 hex, e.g. 20261129-160000Z-a1b2c3) or 'latest'")
        for k in ("dry_run", "pack", "detach", "allow_dirty"):
            if not isinstance(getattr(self, k), bool):
                raise ConfigError(f"{k}={getattr(self, k)!r} must be true or false")
        if not isinstance(self.max_gpu_hours, int | float) or isinstance(self.max_gpu_hours, bool):
            raise ConfigError(f"max_gpu_hours={self.max_gpu_hours!r} must be a number")

    @property
    def effective_action(self) -> str:
        return "plan" if self.dry_run else self.action

    @classmethod
    def from_cfg(cls, cfg: dict[str, Any]) -> SweepSettings:
        names = cls.__dataclass_fields__
        return cls(**{k: cfg[k] for k in names})


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
        return Options(warmup=warmup, tolerance=float(tol), n_boot=boot, hang_min_s=float(hang_min_s))
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
    """(HEAD sha, dirty) of the repo, or (None, None) when it is not a git checkout (e.g. a device copy)."""
    try:
        sha = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=10, check=True).stdout.strip()
        st = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                            capture_output=True, text=True, timeout=10, check=True).stdout
        return sha, bool(st.strip())
    except (OSError, subprocess.SubprocessError):
        return None, None


def round_robin(variants: tuple[Variant, ...], repeats: int) -> tuple[tuple[str, int], ...]:
    """Run order A B C A B C ... over the variants that can run (not pruned), so drift hits all arms equally."""
    names = [v.name for v in variants if v.status != "pruned"]
    return tuple((n, r) for r in range(repeats) for n in names)


def make_plan(overrides: list[str], now: dt.datetime | None = None) -> Plan:
    """Compose, expand and preflight; decide id, folder, mode and run order. Writes nothing.

    Raises:
        ConfigError: any bad input (exit code 2), including an invalid baseline or the GPU-hour guard.
    """
    composed = compose_overrides(overrides)
    cfg = composed.base
    settings = SweepSettings.from_cfg(cfg)
    analysis_options(cfg, settings.hang_min_s)  # every value is checked before anything is written
    exp = expand(composed, settings.preflight)
    bad_groups = [v for v in exp.variants if v.role == "baseline" and v.status == "pruned"]
    if bad_groups:
        lines = "; ".join(f"{v.name}: {' | '.join(v.reasons)}" for v in bad_groups)
        raise ConfigError(f"the baseline of a group is invalid, so nothing can be compared: {lines}")
    cluster = next(iter(exp.jobs.values())).cluster
    mode, note = resolve_mode(settings.mode, cluster.mode, cluster.executor, exp.local_gpus)
    runs = round_robin(exp.variants, settings.repeats)
    hours = sum(exp.jobs[n].cluster.nodes * exp.jobs[n].gpus_per_node * exp.jobs[n].cluster.time_limit_s / 3600
                for n, _ in runs)
    if hours > settings.max_gpu_hours:
        raise ConfigError(f"the sweep may use up to {hours:.1f} GPU-hours ({len(runs)} runs x nodes x GPUs x "
                          f"time limit), above max_gpu_hours={settings.max_gpu_hours}. Raise it on the command "
                          f"line (max_gpu_hours={int(hours) + 1}) or shrink the sweep")
    created = (now or dt.datetime.now(dt.UTC)).replace(microsecond=0)
    sweep_id = settings.sweep_id or new_sweep_id(created)
    out = Path(settings.output_dir) if settings.output_dir else Path(settings.results_root) / exp.preset.name / sweep_id
    sha, dirty = git_state()
    return Plan(settings, cfg, exp, sweep_id, created.isoformat().replace("+00:00", "Z"), out, mode, note, runs,
                hours, sha, dirty)


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
        "payload": {"train_iters": payload.get("train_iters") or 30, "seed": payload.get("seed", 1234),
                    "hold_s": payload.get("hold_s", 0), "hold_at": payload.get("hold_at", "end"),
                    "log_interval": 1, "profile": plan.cfg.get("profile") is True},
        "allow_adjust": list(v.allow_adjust),
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
    }


def render_job(plan: Plan, v: Variant, variant_json: Path, scripts: Any = None) -> str:
    """The job script of the variant's first run, rendered by the launcher's own builder (NeMo-Run dry run for
    Slurm, the LocalExecutor command line locally) so that ``job.sh`` is what would be submitted. ``scripts``: a
    :class:`launchers.render.JobScripts`, which renders once per shape (the same text, issue 17)."""
    from launchers.render import render_job_script
    from launchers.spec import RunSpec

    job = plan.job(v.name)
    hold = float((plan.cfg.get("payload") or {}).get("hold_s") or 0) or None
    spec = RunSpec(variant=v.name, variant_json=variant_json.resolve(), attempt=1, repeat=0, mode=plan.mode,
                   hold_s=hold)
    kwargs: dict[str, Any] = {"title": plan.expansion.preset.name, "label": f"s{v.stage}"}
    if job.cluster.executor == "local":
        kwargs["gpus"] = job.gpus_per_node if plan.mode == "train" else 0
    render = scripts.render if scripts is not None else render_job_script
    return render(job.cluster, spec, state_dir=(plan.out_dir / "nemo_run").resolve(), **kwargs)


def write_plan(plan: Plan, overrides: list[str], render: bool = True) -> Path:
    """Create the sweep folder: manifest, variant.json and job.sh per kept variant. Returns the folder.

    Raises:
        ManifestError: the folder already holds a manifest (use ``sweep_id=`` to resume instead).
    """
    sd = SweepDir(plan.out_dir)
    doc = manifest_doc(plan)
    secret_env = next(iter(plan.expansion.jobs.values())).cluster.secret_env
    doc["overrides"] = [mask_override(o, secret_env) for o in overrides]
    from launchers.render import JobScripts

    scripts = JobScripts()
    try:
        for v in plan.variants:
            if v.status == "pruned":
                continue
            write_json(sd.variant_json(v.name), variant_payload(plan, v))
            if render:
                write_text(sd.job_sh(v.name), render_job(plan, v, sd.variant_json(v.name), scripts))
    finally:
        scripts.close()
    Manifest.from_json(doc).create(sd)
    return sd.root
