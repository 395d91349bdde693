"""Expand a composed config into the variants of one sweep and run the static preflight on each.

dispatcher x overlap x delay_wgrad (filtered by the preset's stages and the command line) x extra axes.
Duplicates collapse; every group gets its baseline (alltoall, overlap off, delay_wgrad off), added with
``role: baseline`` when the sweep lacks it (CONTRACTS §2).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contracts.records import DEFAULT_ALLOW_ADJUST, Variant, variant_name
from experiments.compose import Composed
from experiments.config import (
    NCCLEP_ONLY,
    ClusterConfig,
    ConfigError,
    ContainerProfile,
    ModelConfig,
    Precision,
    Stage,
    SweepPreset,
    build,
    cluster_from_cfg,
)
from experiments.payload.spec import arm_env
from experiments.rules import RuleContext, evaluate, fitting_ep, min_world_size, parse_version

# nvidia-smi name fragment -> cluster.gpu_type (FACTS §1 GPU generations)
_GPU_NAMES = (("GB300", "gb300"), ("GB200", "gb200"), ("B300", "b300"), ("B200", "b200"), ("H200", "h200"),
              ("H100", "h100"), ("A100", "a100"))


@dataclass(frozen=True)
class JobSpec:
    """What one variant's job needs besides the variant itself: resolved model, cluster, world size, env."""

    model: ModelConfig
    cluster: ClusterConfig
    world_size: int
    gpus_per_node: int
    gpu_type: str | None
    env: dict[str, str] = field(default_factory=dict)
    precision: Precision | None = None  # conf/precision/: None = bf16


@dataclass(frozen=True)
class Expansion:
    """The variants of the sweep (in plan order), their job specs, and sweep-level warnings."""

    preset: SweepPreset
    container: ContainerProfile
    variants: tuple[Variant, ...]
    jobs: dict[str, JobSpec]
    warnings: tuple[str, ...]
    local_gpus: int


def detect_local_gpus() -> tuple[int, str | None]:
    """(usable local GPUs, ``gpu_type`` of the first) or (0, None) without a GPU.

    The list is the launcher's own (:func:`launchers.local.gpu_names`: one ``nvidia-smi --query-gpu=name`` per
    process, capped by ``CUDA_VISIBLE_DEVICES``), so the plan's world size is what the local executor will start;
    the type comes from the first GPU's name.
    """
    from launchers.local import gpu_names

    names = gpu_names()
    if not names:
        return 0, None
    gpu_type = next((t for frag, t in _GPU_NAMES if frag in names[0].upper()), None)
    return len(names), gpu_type


# cluster.container=auto (conf/cluster/local.yaml): the profile of the stack the local machine runs
AUTO_CONTAINER = {"gpu": "mbridge_0_6_h200", "cpu": "ci_cpu"}  # GPU: the stack proven on an H200 (docs/GPU.md)
EP_KEY = "model.expert_model_parallel_size"
NEEDS_2_GPUS = "overlap arms need at least 2 GPUs (expert parallelism EP >= 2)"


def auto_container(local_gpus: int) -> str:
    """The container profile ``cluster.container=auto`` names: a GPU stack on a GPU box, ``ci_cpu`` without."""
    return AUTO_CONTAINER["gpu" if local_gpus else "cpu"]


def given_on_command_line(overrides: tuple[str, ...], key: str) -> bool:
    """Whether an override sets dotted ``key`` (``key=...``, ``+key=...``, ``++key=...``)."""
    return any(o.lstrip("+~").partition("=")[0].strip() == key for o in overrides)


def fit_local_ep(model: ModelConfig, job: JobSpec, local_gpus: int,
                 overrides: tuple[str, ...]) -> tuple[ModelConfig, str | None]:
    """On a local GPU box, shrink the model profile's expert_model_parallel_size to fit the GPUs found (so that
    the default job runs on one GPU: the tiny model at EP=1). Only when the command line does not set EP itself and the
    world size comes from the GPUs found; returns the model and a warning, or the model unchanged and None.
    """
    if job.cluster.executor != "local" or not local_gpus or given_on_command_line(overrides, EP_KEY):
        return model, None
    settings = model.settings()
    ep = fitting_ep(settings, job.world_size)
    if ep == model.expert_model_parallel_size:
        return model, None
    note = (f"{EP_KEY} {model.expert_model_parallel_size} -> {ep}: the model profile's EP does not fit the "
            f"{job.world_size} local GPU(s); set {EP_KEY}=... to choose it yourself")
    if ep == 1:
        note += f"; the {NEEDS_2_GPUS}"
    return dataclasses.replace(model, expert_model_parallel_size=ep), note


def load_preset(cfg: dict[str, Any]) -> SweepPreset:
    """Build the typed sweep preset from ``cfg['sweep']``."""
    raw = copy.deepcopy(cfg["sweep"])
    stages = []
    given = raw.pop("stages", None)
    if not isinstance(given, list) or not given or not all(isinstance(s, dict) for s in given):
        raise ConfigError(f"sweep.stages={given!r} must be a non-empty list of stages, each a mapping "
                          "(name, dispatcher, overlap, delay_wgrad, gate): see conf/sweep/isolation.yaml")
    for s in given:
        s = dict(s)
        for k in ("overlap", "delay_wgrad"):
            vals = s.get(k)
            if not isinstance(vals, list) or any(not isinstance(v, bool) and str(v) not in ("on", "off")
                                                 for v in vals):
                raise ConfigError(f"sweep.stages[{s.get('name')}].{k}={vals!r} must be a list of true/false "
                                  "(or on/off)")
            s[k] = [v if isinstance(v, bool) else {"on": True, "off": False}[str(v)] for v in vals]
        stages.append(build(Stage, s, f"sweep.stages[{s.get('name')}]"))
    raw["stages"] = stages
    return build(SweepPreset, raw, "sweep")


def _container_yaml(path: Path) -> dict[str, Any]:
    """The plain data of a container profile's YAML file, read once per file and modification time (a sweep with
    many groups names the same profile in each; about 6 ms per read)."""
    st = path.stat()
    return _read_yaml(str(path), st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=32)
def _read_yaml(path: str, mtime_ns: int, size: int) -> dict[str, Any]:
    from omegaconf import OmegaConf

    return OmegaConf.to_container(OmegaConf.load(path))  # type: ignore[return-value]


def load_container(cfg: dict[str, Any], cluster: ClusterConfig,
                   local_gpus: int = 0) -> tuple[ContainerProfile, list[str]]:
    """The container profile: ``container=`` if given, else the one the cluster profile names (CONTRACTS §8);
    ``auto`` names :func:`auto_container` of ``local_gpus``."""
    from experiments.compose import CONF_DIR, group_options

    warnings = []
    if cluster.container == "auto":
        cluster = dataclasses.replace(cluster, container=auto_container(local_gpus))
    if cfg.get("container"):
        prof = build(ContainerProfile, dict(cfg["container"]), "container")
        if prof.name != cluster.container:
            warnings.append(f"container profile {prof.name} differs from cluster {cluster.name}'s profile "
                            f"{cluster.container}; using {prof.name} as given on the command line")
        return prof, warnings
    if cluster.container not in group_options("container"):
        raise ConfigError(f"cluster.container={cluster.container!r} names no container profile. "
                          f"Valid: {', '.join(group_options('container'))}")
    prof = build(ContainerProfile, copy.deepcopy(_container_yaml(CONF_DIR / "container" / f"{cluster.container}.yaml")),
                 "container")
    if cluster.executor == "slurm" and prof.image and not cluster.container_image:
        raise ConfigError(f"cluster {cluster.name} uses container profile {prof.name}, which runs in the image "
                          f"{prof.image}, but cluster.container_image is null: the job would run on bare metal "
                          f"without that stack. Set cluster.container_image={prof.image} (pyxis), or "
                          f"cluster.container=<a profile with image: null> for a bare-metal cluster")
    if cluster.container_image and prof.image and cluster.container_image != prof.image:
        warnings.append(f"cluster.container_image {cluster.container_image} differs from container profile "
                        f"{prof.name}'s image {prof.image}; versions are taken from the profile")
    return prof, warnings


def _set_dotted(cfg: dict[str, Any], key: str, value: Any) -> None:
    node = cfg
    parts = key.split(".")
    for p in parts[:-1]:
        node = node[p]
    node[parts[-1]] = list(value) if isinstance(value, tuple) else value


def _knob_values(preset: SweepPreset, knobs: dict[str, tuple[Any, ...] | None]) -> dict[str, tuple]:
    """Validate the command-line knob restrictions against the preset's stages."""
    sel: dict[str, tuple] = {}
    for key in ("dispatcher", "overlap", "delay_wgrad"):
        given = knobs.get(key)
        if given is None:
            continue
        values = tuple(v if key == "dispatcher" else v == "on" for v in given)
        offered = {v for s in preset.stages for v in getattr(s, key)}
        missing = [v for v in values if v not in offered]
        if missing:
            shown = sorted(str(v if key == "dispatcher" else ("on" if v else "off")) for v in offered)
            raise ConfigError(f"{key}={missing[0] if key == 'dispatcher' else ('on' if missing[0] else 'off')} "
                              f"is not part of sweep={preset.name} (its {key} values: {', '.join(shown)}). "
                              "Use sweep=full for the whole product")
        sel[key] = values
    return sel


def expand(composed: Composed, preflight: str = "static") -> Expansion:
    """Expand ``composed`` into variants with statuses ``planned``/``gated``/``pruned`` and their job specs.

    Raises:
        ConfigError: a field of the wrong type, a knob value outside the preset, or an empty sweep.
    """
    base = composed.base
    preset = load_preset(base)
    sel = _knob_values(preset, composed.knobs)
    local_gpus, local_type = detect_local_gpus()
    group_axes = [a for a in composed.extra_axes if "." not in a.key]
    value_axes = [a for a in composed.extra_axes if "." in a.key]
    warnings: list[str] = []
    variants: dict[str, Variant] = {}
    jobs: dict[str, JobSpec] = {}
    container: ContainerProfile | None = None

    combos = list(itertools.product(*(a.values for a in composed.extra_axes))) or [()]
    for combo in combos:
        axes = {a.key: v for a, v in zip(composed.extra_axes, combo, strict=True)}
        gkey = tuple(sorted((a.key, axes[a.key]) for a in group_axes))
        cfg = copy.deepcopy(composed.configs[gkey])
        for a in value_axes:
            _set_dotted(cfg, a.key, axes[a.key])
        model = build(ModelConfig, dict(cfg["model"]), "model")
        precision = load_precision(cfg)
        cluster = cluster_from_cfg(cfg)
        prof, cw = load_container(cfg, cluster, local_gpus)
        container = container or prof
        warnings.extend(w for w in cw if w not in warnings)
        job = dataclasses.replace(_job_spec(model, cluster, local_gpus, local_type), precision=precision)
        model, fit_note = fit_local_ep(model, job, local_gpus, composed.overrides)
        if fit_note:
            job = dataclasses.replace(job, model=model)
            if fit_note not in warnings:
                warnings.append(fit_note)
        if cluster.gpu_type == "auto" and job.gpu_type is None:
            w = "no local GPU found: the flex-backend GPU rules were not applied (set cluster.gpu_type=...)"
            if w not in warnings:
                warnings.append(w)
        arms = []
        for idx, stage in enumerate(preset.stages, start=1):
            for d, o, w in itertools.product(stage.dispatcher, stage.overlap, stage.delay_wgrad):
                if all(v in sel.get(k, (v,)) for k, v in (("dispatcher", d), ("overlap", o), ("delay_wgrad", w))):
                    arms.append((idx, stage, d, o, w, "variant"))
        if not arms:
            raise ConfigError("the sweep is empty: no variant of sweep=" + preset.name + " matches the command "
                              "line's dispatcher/overlap/delay_wgrad values")
        if not any(d == "alltoall" and not o and not w for _, _, d, o, w, _ in arms):
            arms.insert(0, (1, preset.stages[0], "alltoall", False, False, "baseline"))
        for idx, stage, d, o, w, role in arms:
            name = variant_name(d, o, w, axes)
            if name in variants:
                continue  # duplicates collapse into one (first stage wins)
            is_base = d == "alltoall" and not o and not w
            v = _make_variant(name, d, o, w, axes, idx, stage, "baseline" if is_base else role, model, job, prof,
                              preflight, precision)
            if fit_note and v.status == "pruned" and model.expert_model_parallel_size == 1 and (o or d != "alltoall"):
                v = dataclasses.replace(v, reasons=(*v.reasons, f"the {NEEDS_2_GPUS}; this machine has "
                                                                f"{job.world_size}"))
            variants[name] = v
            jobs[name] = dataclasses.replace(job, env=arm_env(job.env, d))
    if not variants:
        raise ConfigError("the sweep is empty: no variant matches the command line's dispatcher/overlap/"
                          "delay_wgrad values in the preset's stages")
    assert container is not None
    return Expansion(preset, container, tuple(variants.values()), jobs, tuple(warnings), local_gpus)


def load_precision(cfg: dict[str, Any]) -> Precision:
    """The typed precision group (``precision=bf16|fp8_cs|fp8_delayed|mxfp8|nvfp4``, conf/precision/); bf16 when the
    config has none. Raises ConfigError for an unknown value or key."""
    raw = dict(cfg.get("precision") or {"name": "bf16", "mixed_precision": "bf16_mixed", "published": "bf16"})
    if not isinstance(raw.get("settings") or {}, dict):
        raise ConfigError(f"precision.settings={raw['settings']!r} must be a mapping of Megatron-Core fields "
                          "(e.g. fp8: hybrid), or null")
    raw["settings"] = dict(raw.get("settings") or {})
    return build(Precision, raw, "precision")


def precision_settings(precision: Precision, model: ModelConfig) -> dict[str, Any]:
    """The Megatron-Core fields of ``precision`` for this model: the recipe's own, and bf16/fp16 as the model's
    (Megatron-Bridge's FP8/FP4 recipes build on bf16_mixed, training/mixed_precision.py:184)."""
    out = dict(precision.settings)
    if precision.name != "bf16" and not model.bf16:
        raise ConfigError(f"precision={precision.name} builds on BF16 (Megatron-Bridge {precision.mixed_precision}); "
                          f"model {model.name} sets bf16=false. Set model.bf16=true or use precision=bf16")
    return out


def _job_spec(model: ModelConfig, cluster: ClusterConfig, local_gpus: int, local_type: str | None) -> JobSpec:
    gpn = cluster.gpus_per_node
    if gpn == "auto":
        gpn = local_gpus if local_gpus else None
    world = cluster.nodes * gpn if gpn else min_world_size(model.settings())
    gpu_type = local_type if cluster.gpu_type == "auto" else cluster.gpu_type
    return JobSpec(model, cluster, world, gpn or world // cluster.nodes or 1, gpu_type, dict(cluster.env_vars))


def _make_variant(name, dispatcher, overlap, delay_wgrad, axes, stage_idx, stage, role, model: ModelConfig,
                  job: JobSpec, prof: ContainerProfile, preflight: str,
                  precision: Precision | None = None) -> Variant:
    settings = model.settings()
    precision = precision or Precision(name="bf16", mixed_precision="bf16_mixed", published="bf16")
    settings.update(precision_settings(precision, model))
    if dispatcher == "ncclep":  # the NCCL EP knobs go to the ncclep arms only (NCCLEP_ONLY)
        settings.update({k: getattr(model, k) for k in NCCLEP_ONLY if getattr(model, k) is not None})
    flex = dispatcher in ("deepep", "hybridep", "ncclep")
    settings.update(
        moe_token_dispatcher_type="flex" if flex else dispatcher,
        moe_flex_dispatcher_backend=dispatcher if flex else None,
        overlap_moe_expert_parallel_comm=overlap,  # always explicit (CASES C03)
        delay_wgrad_compute=delay_wgrad,
    )
    adjustments = []
    warns: list[str] = []
    if overlap and settings["moe_shared_expert_overlap"]:
        # CASES C02: a model default that turns on shared-expert overlap must not slip through
        settings["moe_shared_expert_overlap"] = False
        adjustments.append({"field": "moe_shared_expert_overlap", "from": True, "to": False,
                            "why": "overlap_moe_expert_parallel_comm requires moe_shared_expert_overlap=False"})
        warns.append("moe_shared_expert_overlap set true -> false (required by overlap; recorded as an adjustment)")
    elif flex and settings["moe_shared_expert_overlap"]:
        # Megatron-Bridge 0.6.2 apply_flex_dispatcher_backend sets it false on every flex backend
        # (training/flex_dispatcher_backend.py:56 and :99): record what the run will do
        settings["moe_shared_expert_overlap"] = False
        adjustments.append({"field": "moe_shared_expert_overlap", "from": True, "to": False,
                            "why": "Megatron-Bridge apply_flex_dispatcher_backend turns it off for every flex backend "
                                   "(training/flex_dispatcher_backend.py:99)"})
        warns.append("moe_shared_expert_overlap set true -> false by the flex backend: this arm differs from its "
                     "baseline in the shared-expert overlap as well as the dispatcher (recorded as an adjustment)")
    reasons: list[str] = []
    if preflight != "off":
        ctx = RuleContext(settings=settings, dispatcher=dispatcher, overlap=overlap, delay_wgrad=delay_wgrad,
                          torch=parse_version(prof.torch), te=parse_version(prof.transformer_engine),
                          core=parse_version(prof.megatron_core), bridge=parse_version(prof.megatron_bridge),
                          deep_ep=parse_version(prof.deep_ep), gpu_type=job.gpu_type, world_size=job.world_size,
                          nodes=job.cluster.nodes, env=arm_env(job.env, dispatcher), precision=precision.name)
        for f in evaluate(ctx):
            (reasons if f.severity == "error" else warns).append(f.text)
    status = "pruned" if reasons else ("gated" if stage.gate else "planned")
    return Variant(name=name, dispatcher=dispatcher, overlap=overlap, delay_wgrad=delay_wgrad, axes=dict(axes),
                   group=dict(axes), role=role, stage=stage_idx, stage_name=stage.name, gate=stage.gate,
                   settings=settings, status=status, reasons=tuple(reasons), warnings=tuple(warns),
                   allow_adjust=DEFAULT_ALLOW_ADJUST, adjustments=tuple(adjustments))
