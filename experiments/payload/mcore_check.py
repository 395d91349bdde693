"""Megatron-Core's own config checks, run for real on a CPU (no GPU, no Transformer Engine, no process group).

:func:`check_transformer_config` builds the real ``megatron.core.transformer.TransformerConfig`` from a variant's
settings; its ``__post_init__`` runs every Megatron-Core rule (overlap, delay_wgrad, recompute, MTP, CUDA graphs,
...). With a world size it also runs Megatron-Core's micro-batch arithmetic
(``num_microbatches_calculator.ConstantNumMicroBatchesCalculator``). Messages are the library's own text, for
example ``"overlap_moe_expert_parallel_comm must be enabled when enabling delay_wgrad_compute"``.

It is a pure function (no files, no global state left changed) and fast after the first call (the import of
megatron.core, a few seconds, happens once; a check then takes about a millisecond), so the planner's conformance
test can hold its static rule table against it case by case.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.metadata as md
import sys
import traceback
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from experiments.payload.build_checks import build_check_messages
from experiments.payload.dispatcher_build import build_dispatcher
from experiments.payload.effective import read_effective
from experiments.payload.errors import CoreMissing
from experiments.payload.spec import LIBRARY_DEFAULT_WHEN_NONE

# Settings that are not TransformerConfig fields, and where Megatron-Bridge keeps them instead
# (GPTModelProvider.vocab_size/seq_length, TrainingConfig batch sizes, DistributedDataParallelConfig).
NON_TRANSFORMER_FIELDS = ("vocab_size", "seq_length", "global_batch_size", "micro_batch_size", "overlap_grad_reduce")
# GPTModelProvider-only fields (Megatron-Bridge 0.6 models/gpt_provider.py): valid model settings that only
# Megatron-Bridge can check, so the CPU fallback skips them instead of calling them unknown.
PROVIDER_FIELDS = (
    "fp16_lm_cross_entropy", "parallel_output", "share_embeddings_and_output_weights", "make_vocab_size_divisible_by",
    "position_embedding_type", "rotary_base", "rotary_percent", "rope_scaling", "rope_scaling_factor",
    "rotary_scaling_factor", "seq_len_interpolation_factor", "scatter_embedding_sequence_parallel",
    "use_transformer_engine_full_layer_spec", "use_transformer_engine_op_fuser", "dense_grouped_gemm",
    "should_pad_vocab", "mtp_enabled", "restore_modelopt_state", "use_arbitrary_attention_mask",
)

# Checks that need a process group; listed in ``not_run`` (Megatron-Core parallel_state.initialize_model_parallel).
PROCESS_GROUP_CHECKS = (
    "megatron.core parallel_state.initialize_model_parallel: world size divisible by TP x PP x CP and by "
    "ETP x EP x PP (needs a process group)",
)

_core: dict[str, Any] = {}


@dataclass(frozen=True)
class CheckResult:
    """Outcome of the Megatron-Core checks for one settings dict.

    ``verdict`` is ``"pass"`` or ``"fail"``; ``messages`` the library's failure texts (empty on pass);
    ``warnings`` what the library warned about; ``not_run`` checks that could not run here;
    ``unknown_fields`` settings this Megatron-Core's TransformerConfig does not have;
    ``effective`` the CONTRACTS §6 ``effective`` values of the built config (``{}`` when it failed);
    ``core_version`` the Megatron-Core that ran the checks; ``assumed_versions`` the torch/TE versions the
    version-dependent checks were told (see ``versions`` of :func:`check_transformer_config`).
    """

    verdict: str
    messages: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    not_run: tuple[str, ...] = ()
    unknown_fields: tuple[str, ...] = ()
    effective: dict[str, Any] = field(default_factory=dict)
    core_version: str | None = None
    assumed_versions: dict[str, str] = field(default_factory=dict)
    decided: tuple[str, ...] = ()  # which check decided what (the library's build, or the planner rule standing in)

    @property
    def ok(self) -> bool:
        return self.verdict == "pass"


def load_core() -> dict[str, Any]:
    """Import Megatron-Core once and return the pieces the checks use.

    Raises:
        CoreMissing: ``megatron.core`` cannot be imported (names the import error and suggests the container).
    """
    if _core:
        return _core
    try:
        import torch
        from megatron.core import num_microbatches_calculator as nmc
        from megatron.core import utils as core_utils
        from megatron.core.transformer import TransformerConfig
        from packaging.version import Version
    except ImportError as e:
        raise CoreMissing(
            f"megatron.core is not importable ({type(e).__name__}: {e}); run inside the training container "
            "(the image of the variant's container profile), or install the [megatron] extra "
            "(torch + megatron-core) for CPU checks") from e
    try:
        version = md.version("megatron-core")
    except md.PackageNotFoundError:
        version = getattr(sys.modules.get("megatron.core"), "__version__", None)
    _core.update(torch=torch, utils=core_utils, TransformerConfig=TransformerConfig, nmc=nmc, Version=Version,
                 fields={f.name for f in dataclasses.fields(TransformerConfig)}, version=version)
    return _core


def precision_dtypes(settings: dict[str, Any]) -> dict[str, Any]:
    """``params_dtype``/``pipeline_dtype`` as Megatron-Bridge's mixed-precision recipes set them.

    Source: Megatron-Bridge ``training/mixed_precision.py`` ``bf16_mixed``/``fp16_mixed`` set both to the half
    dtype; fp32 recipes set float32. Megatron-Core refuses PP > 1 without ``pipeline_dtype``.
    """
    torch = load_core()["torch"]
    dtype = torch.bfloat16 if settings.get("bf16") else torch.float16 if settings.get("fp16") else torch.float32
    return {"params_dtype": dtype, "pipeline_dtype": dtype}


def transformer_config_kwargs(settings: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Map variant settings to ``TransformerConfig`` keyword arguments.

    Returns ``(kwargs, unknown)``: ``unknown`` lists settings that are neither TransformerConfig fields of the
    installed Megatron-Core nor in :data:`NON_TRANSFORMER_FIELDS` / :data:`PROVIDER_FIELDS`. On a core that has ``cuda_graph_modules``
    (0.19 renamed ``cuda_graph_scope``), the scope goes there as a list, the way Megatron-Bridge's
    ``utils.cuda_graph.set_cuda_graph_modules`` sets it (a string is comma-separated names; ``"full"`` is empty).
    """
    fields = load_core()["fields"]
    kwargs: dict[str, Any] = {}
    unknown: list[str] = []
    for key, value in settings.items():
        if key in NON_TRANSFORMER_FIELDS or key in PROVIDER_FIELDS:
            continue
        if value is None and key in LIBRARY_DEFAULT_WHEN_NONE:  # keep the library's default
            continue
        if key == "cuda_graph_scope" and "cuda_graph_modules" in fields:
            key, value = "cuda_graph_modules", scope_list(value)
        if key not in fields:
            unknown.append(key)
            continue
        kwargs[key] = list(value) if isinstance(value, tuple) else value
    for key, value in precision_dtypes(settings).items():
        kwargs.setdefault(key, value)
    return kwargs, unknown


def scope_list(value: Any) -> list[Any]:
    """A CUDA-graph scope as a list (CASES C04: a single string must not crash): None/""/"full" -> [],
    "a,b" -> ["a", "b"], a list stays a list (Megatron-Bridge utils/cuda_graph.py ``_as_list``)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [] if value in ("", "full") else value.split(",")
    return list(value) if isinstance(value, list | tuple) else [value]


@contextlib.contextmanager
def assumed_versions(torch_version: str | None, te_version: str | None) -> Iterator[dict[str, str]]:
    """Let Megatron-Core's version checks see the target container's torch / TE versions.

    Megatron-Core caches the versions it compares against in ``megatron.core.utils._torch_version`` and
    ``_te_version`` (``is_torch_min_version``/``is_te_min_version``). Without TE installed, ``_te_version`` reads
    0.0.0 and every TE-minimum rule fails; keying it to the target container is what FACTS §2 asks for.
    The previous values are restored on exit.
    """
    core = load_core()
    utils, version_cls = core["utils"], core["Version"]
    saved = (getattr(utils, "_torch_version", None), getattr(utils, "_te_version", None))
    used: dict[str, str] = {}
    try:
        if torch_version:
            utils._torch_version = version_cls(str(torch_version))
            used["torch"] = str(torch_version)
        if te_version:
            utils._te_version = version_cls(str(te_version))
            used["transformer_engine"] = str(te_version)
        with _te_kernels_present(bool(te_version)):
            yield used
    finally:
        utils._torch_version, utils._te_version = saved


# TE kernels whose presence Megatron-Core 0.19's TransformerConfig checks by import (None without TE):
# apply_rope_fusion -> rope_utils (message "Please install TE >= 1.4"), moe_permute_fusion -> moe_utils
# ("fused permutation is not available. Please install TE >= 2.1.0").
TE_IMPORT_CHECKS = (
    ("megatron.core.models.common.embeddings.rope_utils", ("fused_apply_rotary_pos_emb",)),
    ("megatron.core.transformer.moe.moe_utils", ("fused_permute", "fused_permute_with_probs",
                                                 "fused_sort_chunks_by_index",
                                                 "fused_sort_chunks_by_index_with_probs", "fused_unpermute")),
)


@contextlib.contextmanager
def _te_kernels_present(target_has_te: bool) -> Iterator[None]:
    """Without TE here but with TE in the target container, placeholders stand for the TE kernels of
    :data:`TE_IMPORT_CHECKS` during the check (never called); restored to None afterwards."""
    import importlib

    patched = []
    if target_has_te:
        for module_name, names in TE_IMPORT_CHECKS:
            try:
                module = importlib.import_module(module_name)
            except Exception:
                continue
            for name in names:
                if hasattr(module, name) and getattr(module, name) is None:
                    setattr(module, name, lambda *a, **k: None)
                    patched.append((module, name))
    try:
        yield
    finally:
        for module, name in patched:
            setattr(module, name, None)


def library_message(exc: BaseException) -> str:
    """The library's text for a failed check: the message itself for assert/ValueError, else type-prefixed."""
    text = str(exc).strip()
    if isinstance(exc, AssertionError | ValueError) and text:
        return " ".join(text.split())
    if not text:  # a bare ``assert`` carries no text: name the library line instead
        frame = traceback.extract_tb(exc.__traceback__)[-1]
        return f"{type(exc).__name__} at {frame.filename.split('site-packages/')[-1]}:{frame.lineno}"
    return f"{type(exc).__name__}: {text}"


def check_transformer_config(settings: dict[str, Any], *, world_size: int | None = None,
                             versions: dict[str, str | None] | None = None,
                             build: dict[str, Any] | None = None) -> CheckResult:
    """Run Megatron-Core's own checks on a variant's settings (CPU, no GPU, no TE, no process group).

    Args:
        settings: Megatron-named fields (CONTRACTS §9), e.g. a variant.json ``settings`` block.
        world_size: target ranks; when given, also runs Megatron-Core's micro-batch divisibility check with
            data-parallel size = world_size / (TP x PP x CP).
        versions: optional ``{"torch": ..., "transformer_engine": ...}`` of the target container; the
            version-dependent rules (torch >= 2.6 for overlap, TE minimums) then use them instead of the
            installed ones (see :func:`assumed_versions`).
        build: the target container's versions (variant.json ``container``) to also build the MoE token
            dispatcher as the model build does (:mod:`experiments.payload.dispatcher_build`); None skips the build.

    Returns:
        CheckResult; ``verdict == "fail"`` when TransformerConfig raised, a setting is unknown to this core, a
        check of the model build failed (:mod:`experiments.payload.build_checks`: router top-k, kv channels,
        heads per query group) or the micro-batch check failed.

    Raises:
        CoreMissing: megatron.core (or torch) is not importable.
    """
    core = load_core()
    kwargs, unknown = transformer_config_kwargs(settings)
    versions = versions or {}
    not_run = list(PROCESS_GROUP_CHECKS)
    provider_only = sorted(k for k in settings if k in PROVIDER_FIELDS)
    if provider_only:
        not_run.append(f"megatron.bridge GPTModelProvider fields, not TransformerConfig: {', '.join(provider_only)}")
    if unknown:
        msgs = [f"TransformerConfig of megatron-core {core['version']} has no field {k!r}" for k in unknown]
        return CheckResult("fail", messages=tuple(msgs), not_run=tuple(not_run), unknown_fields=tuple(unknown),
                           core_version=core["version"])
    messages: list[str] = []
    effective: dict[str, Any] = {}
    decided = ["TransformerConfig.__post_init__ (the library)"]
    with warnings.catch_warnings(record=True) as caught, assumed_versions(
            versions.get("torch"), versions.get("transformer_engine")) as used:
        warnings.simplefilter("always")
        try:
            cfg = core["TransformerConfig"](**kwargs)
        except Exception as e:  # the library's check failed: AssertionError, ValueError, KeyError, ...
            messages.append(library_message(e))
        else:
            effective = read_effective(cfg, None, {k: settings.get(k) for k in NON_TRANSFORMER_FIELDS})
            messages.extend(build_check_messages(cfg))  # what the model build and first step check (router, heads)
            if build is not None and not messages:
                built = build_dispatcher(cfg, build, library_message)
                messages.extend(built.failures)
                not_run.extend(built.not_run)
                decided.append(f"token dispatcher: {built.decided}")
            mb = _microbatch_check(core, settings, world_size, not_run)
            if mb:
                messages.append(mb)
    warned = tuple(dict.fromkeys(" ".join(str(w.message).split()) for w in caught))
    return CheckResult("fail" if messages else "pass", messages=tuple(messages), warnings=warned,
                       not_run=tuple(not_run), effective=effective, core_version=core["version"],
                       assumed_versions=used, decided=tuple(decided))


def _microbatch_check(core: dict[str, Any], settings: dict[str, Any], world_size: int | None,
                      not_run: list[str]) -> str | None:
    """Megatron-Core ConstantNumMicroBatchesCalculator: GBS divisible by MBS x DP. Returns its message or None."""
    name = "megatron.core num_microbatches_calculator: global batch divisible by micro batch x data parallel"
    gbs, mbs = settings.get("global_batch_size"), settings.get("micro_batch_size")
    model = 1
    for key in ("tensor_model_parallel_size", "pipeline_model_parallel_size", "context_parallel_size"):
        model *= int(settings.get(key) or 1)
    if not world_size or not gbs or not mbs or world_size % model:
        not_run.append(f"{name} (needs world_size, batch sizes and world_size % (TP x PP x CP) == 0)")
        return None
    try:
        core["nmc"].ConstantNumMicroBatchesCalculator(int(gbs), int(mbs), world_size // model, False, 1)
    except Exception as e:
        return library_message(e)
    return None
