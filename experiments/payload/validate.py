"""Validate mode: build the config, run every library check, write ``effective_config.json``, never train.

Where Megatron-Bridge imports (the training container), the real Bridge path runs: the recipe or GPTModelProvider
is built, the variant applied, and Bridge's own ``runtime_config_update`` (mixed precision, ``CommOverlapConfig``
setup and its checks, ``ConfigContainer.validate`` which finalises the Megatron-Core ``TransformerConfig`` and runs
the flex GPU check) runs with ``WORLD_SIZE`` set to the target's. Where it does not (CI, a laptop: no Transformer
Engine), :func:`experiments.payload.mcore_check.check_transformer_config` runs Megatron-Core's checks and the
Bridge/TE checks are listed in ``checks.not_run``. No process group is created in either case.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

from experiments.payload import runtime_info
from experiments.payload.bridge_api import GPT_PROVIDER, BridgeAPI, load_bridge
from experiments.payload.bridge_config import (
    QWEN3_LIKE,
    Applied,
    apply_shared_expert_overlap,
    apply_variant,
    build_config,
    model_config_of,
)
from experiments.payload.effective import read_effective
from experiments.payload.errors import BridgeMissing, UnknownField
from experiments.payload.mcore_check import check_transformer_config, library_message
from experiments.payload.outcome import Outcome, Verdict, assemble
from experiments.payload.spec import VariantSpec

# Library checks the CPU fallback cannot run, each with the library that runs it (Megatron-Bridge 0.6
# training/comm_overlap.py, flex_dispatcher_backend.py, config.py; Megatron-Core layer build with Transformer Engine).
BRIDGE_NOT_RUN = (
    ("megatron_bridge", "megatron.bridge CommOverlapConfig.setup (_get_model_comm_overlap_cfgs): overlap/delay_wgrad "
     "checks, incl. num_moe_experts > 1 and the TE >= 2.7.0 / 2.12.0 minimums for delay_wgrad"),
    ("megatron_bridge", "megatron.bridge apply_flex_dispatcher_backend / validate_flex_dispatcher_backend: the GPU "
     "check for deepep/hybridep and the silent fallback to alltoall"),
    ("megatron_bridge", "megatron.bridge ConfigContainer.validate: dataset, scheduler, checkpoint and CUDA-graph "
     "configuration checks"),
    ("transformer_engine", "transformer_engine: checks at layer build (delay_wgrad_compute needs TE >= 2.3.0)"),
)
# The knob values of a group's baseline (alltoall, overlap off, delay_wgrad off): a rejection the CPU fallback also
# gives with these comes from the model's own fields, which a library recipe completes only where Bridge builds it.
BASELINE_KNOBS = {"moe_token_dispatcher_type": "alltoall", "overlap_moe_expert_parallel_comm": False,
                  "delay_wgrad_compute": False}
# The Transformer Engine a rejection is re-checked against when neither this machine nor the target container has
# one: the version the project's GPU extra pins (pyproject.toml ``gpu``: transformer-engine 2.12.0).
ASSUMED_TE = "2.12.0"
_CUDA_UNAVAILABLE = ("no cuda gpus", "found no nvidia driver", "cuda driver", "torch not compiled with cuda",
                     "cuda is not available", "invalid device ordinal")


@contextlib.contextmanager
def _world_size_env(world_size: int | None) -> Iterator[None]:
    """Megatron's ``safe_get_world_size`` reads ``WORLD_SIZE`` before any process group exists: set the target's."""
    saved = os.environ.get("WORLD_SIZE")
    if world_size:
        os.environ["WORLD_SIZE"] = str(world_size)
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("WORLD_SIZE", None)
        else:
            os.environ["WORLD_SIZE"] = saved


def target_versions(spec: VariantSpec) -> dict[str, Any]:
    """torch / TE versions of the target container (variant.json ``container``) for the version-keyed checks."""
    return {"torch": spec.container.get("torch"), "transformer_engine": spec.container.get("transformer_engine")}


def gpt_provider_blocks(spec: VariantSpec) -> dict[str, Any]:
    """For ``recipe: gpt_provider``, the architecture facts of :data:`QWEN3_LIKE` that Megatron-Core's checks read
    (a gated SiLU MLP: ``bias_activation_fusion`` is checked against them); nothing for a library recipe."""
    if spec.recipe != GPT_PROVIDER:
        return {}
    import torch.nn.functional as F

    return {"gated_linear_unit": QWEN3_LIKE["gated_linear_unit"], "activation_func": F.silu}


def not_checked(why_no_bridge: str, library: str, check: str) -> str:
    """How a check the CPU fallback could not run is listed: ``not checked: <library> is not installed here
    (<check>)`` when a library import failed (Bridge itself, or a module Bridge imports, e.g. Transformer
    Engine), else ``not checked: <why_no_bridge> (<check>)`` (e.g. a flex variant's Bridge checks need a GPU)."""
    if library == "transformer_engine" and not _te_installed():
        return f"not checked: transformer_engine is not installed here ({check})"
    m = re.search(r"missing module '([^']+)'", why_no_bridge)
    if m:
        missing = m.group(1)
        lib = "megatron_bridge" if missing.split(".")[0] == "megatron" else missing.split(".")[0]
        return f"not checked: {lib} is not installed here ({check})"
    return f"not checked: {why_no_bridge or 'megatron.bridge did not run'} ({check})"


def core_outcome(spec: VariantSpec, why_no_bridge: str) -> Outcome:
    """The CPU fallback: Megatron-Core's TransformerConfig and micro-batch checks only.

    A rejection that only a missing library could decide is an environment gap, listed in ``not_run`` and in the
    warnings as ``not checked: <library> is not installed here (...)`` (:func:`not_checked`), never a verdict:

    - where neither this machine nor the target container (variant.json ``container.transformer_engine``) has a
      Transformer Engine, a rejection that disappears with :data:`ASSUMED_TE` assumed;
    - for a library recipe (``model.recipe`` other than ``gpt_provider``), a rejection that the same settings also
      get with the baseline's knobs (:data:`BASELINE_KNOBS`): it comes from the model's fields, which the recipe
      completes (e.g. DeepSeek-V3's ``multi_latent_attention``) only where Megatron-Bridge builds it.

    The verdict is then decided by the other checks.

    Raises:
        CoreMissing: megatron.core is not importable.
    """
    view, applied = SimpleNamespace(**gpt_provider_blocks(spec), **spec.settings), Applied()
    apply_shared_expert_overlap(view, spec, applied)  # the same adjustment train mode makes
    versions = target_versions(spec)
    build = dict(spec.container)
    r = check_transformer_config(vars(view), world_size=spec.world_size, versions=versions, build=build)
    if r.unknown_fields:
        raise UnknownField(f"on megatron-core {r.core_version}: " + "; ".join(r.messages))
    unchecked: list[str] = []
    if not r.ok and not versions.get("transformer_engine") and not _te_installed():
        assumed = {**versions, "transformer_engine": ASSUMED_TE}
        with_te = check_transformer_config(vars(view), world_size=spec.world_size, versions=assumed, build=build)
        if with_te.ok:  # every message came from a Transformer Engine requirement: a gap here, not a rejection
            unchecked = [f"not checked: transformer_engine is not installed here ({m})" for m in r.messages]
            r = with_te
    built = r.ok
    if not r.ok and spec.recipe != GPT_PROVIDER:
        base = check_transformer_config({**vars(view), **BASELINE_KNOBS}, world_size=spec.world_size,
                                        versions=versions, build=None)
        gaps = [m for m in r.messages if m in base.messages]
        if gaps:  # the model's own fields, not this arm's knobs, are rejected: the recipe would complete them
            unchecked += [not_checked(why_no_bridge, "megatron_bridge", f"{spec.recipe} builds the model; "
                                      f"Megatron-Core on the profile's fields alone: {m}") for m in gaps]
            unchecked.append(not_checked(why_no_bridge, "megatron_bridge", "the Megatron-Core checks after that "
                                         "one, the token dispatcher build and the micro-batch check"))
            r = replace(r, verdict="fail" if len(gaps) < len(r.messages) else "pass",
                        messages=tuple(m for m in r.messages if m not in gaps))
    effective = dict(r.effective) if built else read_effective(view)
    effective["train_iters"] = spec.train_iters
    notes = [f"Megatron-Core {r.core_version} checks; version-keyed rules assumed {r.assumed_versions}"
             if r.assumed_versions else f"Megatron-Core {r.core_version} checks with the installed versions"]
    notes += [f"decided by: {d}" for d in r.decided]
    warnings = list(r.warnings) + ([] if built else ["effective = requested: the config was rejected, never built"
                                                     if not r.ok else "effective = requested: the config was not "
                                                     "built here (its recipe needs Megatron-Bridge)"])
    target_core = spec.container.get("megatron_core")
    if target_core and r.core_version and str(r.core_version).split("+")[0] != str(target_core):
        warnings.append(f"checks ran on megatron-core {r.core_version}; the target container has {target_core}")
    not_run = unchecked + list(r.not_run) + [not_checked(why_no_bridge, lib, c) for lib, c in BRIDGE_NOT_RUN]
    return Outcome(effective=effective, adjustments=applied.adjustments, failures=list(r.messages),
                   warnings=warnings + unchecked, not_run=not_run, notes=notes + applied.notes)


def _te_installed() -> bool:
    """Whether Transformer Engine is importable here (looked up, not imported: importing it needs CUDA)."""
    import importlib.util

    return importlib.util.find_spec("transformer_engine") is not None


def bridge_outcome(spec: VariantSpec, api: BridgeAPI) -> Outcome | None:
    """The real Megatron-Bridge path. Returns None when its checks cannot run here (a flex GPU check without GPU).

    Raises:
        UnknownRecipe, HFUnreachable, UnknownField: see build_config / apply_variant.
    """
    cfg, notes = build_config(spec, api)
    try:
        applied = apply_variant(cfg, spec, api)  # apply_flex_dispatcher_backend reads GPU 0's properties
    except (RuntimeError, AssertionError) as e:
        if _gpu_missing(e):
            return None
        raise
    failures: list[str] = []
    with _world_size_env(spec.world_size):
        try:
            api.runtime_config_update(cfg)
        except Exception as e:
            if _gpu_missing(e):
                return None
            failures.append(library_message(e))
    effective = read_effective(model_config_of(cfg), cfg.train)
    not_run = ["megatron.core parallel_state.initialize_model_parallel and model build (no process group in "
               "validate mode)"]
    return Outcome(effective=effective, adjustments=applied.adjustments, failures=failures, not_run=not_run,
                   notes=notes + applied.notes + [f"Megatron-Bridge {api.version} runtime_config_update ran"],
                   library_messages=applied.library_messages)


def _gpu_missing(exc: BaseException) -> bool:
    try:
        import torch

        if torch.cuda.is_available():
            return False
    except ImportError:
        return True
    return isinstance(exc, RuntimeError | AssertionError) and any(t in str(exc).lower() for t in _CUDA_UNAVAILABLE)


def validate(spec: VariantSpec, api: BridgeAPI | None = None, why_no_bridge: str | None = None) -> Verdict:
    """Run validate mode for one variant and return its verdict (the caller writes the document).

    ``api``: the loaded Megatron-Bridge; with None and no ``why_no_bridge`` it is imported here, and when that fails
    only Megatron-Core's checks run. ``why_no_bridge`` (set by a caller that already failed to import it) skips
    the import.

    Raises:
        CoreMissing, UnknownRecipe, HFUnreachable, UnknownField: see the helpers; each has its exit code.
    """
    outcome = None
    why = why_no_bridge or ""
    if api is None and why_no_bridge is None:
        try:
            api = load_bridge(spec.container.get("image"))
        except BridgeMissing as e:
            why = str(e).split(";")[0]
    if api is not None:
        outcome = bridge_outcome(spec, api)
        why = why or "needs a GPU for this flex variant's Bridge checks; none here"
    if outcome is None:
        outcome = core_outcome(spec, why)
    return assemble(spec, outcome, hostnames=[runtime_info.local_hostname()], target=True, written_at="validate")
