"""Build the MoE layer's token dispatcher the way the training run builds it, on the CPU, in validate mode.

Megatron-Core 0.19.2 ``MoELayer.__init__`` (``transformer/moe/moe_layer.py:298-322``) constructs the dispatcher of
``moe_token_dispatcher_type`` with ``num_moe_experts // EP`` local experts and the process groups of
``pg_collection``. Some checks live only there, not in ``TransformerConfig``: for the flex dispatcher
(``transformer/moe/token_dispatcher.py``) "DeepEP/NCCL EP dispatcher requires TPxEP > 1" (:1770, :1788), the
backend package imports ("DeepEP is not installed", :1274; "HybridEP is not installed", :1048; "TransformerEngine
NCCL EP is unavailable", :1558) and the NCCL EP buffer budget ("requires moe_expert_rank_capacity_factor to be set",
:1563), plus the static-shape needs of :1528-1556.

:func:`build_dispatcher` runs that constructor for real, with stand-in process groups of the target's sizes (a
single-process gloo group is initialised for the duration when none exists, so that Megatron-Core's
``get_pg_size`` asks the group; nothing communicates). The backend packages are keyed to the *target* container:
where the container profile has DeepEP (``deep_ep``) or Transformer Engine >= 2.17 (NCCL EP,
``transformer_engine.pytorch.ep``) but this machine does not, a placeholder that is never called stands in for the
package's entry points, as :func:`experiments.payload.mcore_check.assumed_versions` does for TE kernels. Where a
constructor needs a GPU (``MoEAlltoAllTokenDispatcher`` creates a CUDA stream, token_dispatcher.py:469; HybridEP
allocates a CUDA flag, :1054), the build cannot run here and the planner's rules stand in: the result says so.

Where the dispatcher builds on the CPU, one whole MoE layer follows (router, experts, dispatcher; ``MoELayer`` from
Megatron-Core's local layer spec, on the meta device: no memory is allocated). Only an error raised in the MoE files
counts as the library's refusal there, since the training run builds the layer from Transformer Engine's spec.
"""

from __future__ import annotations

import contextlib
import re
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from dataclasses import replace as dataclass_replace
from types import SimpleNamespace
from typing import Any

NCCLEP_TE = (2, 17, 0)  # first Transformer Engine with transformer_engine.pytorch.ep (fused_a2a.py:609-614)
_NO_GPU = ("no nvidia driver", "torch not compiled with cuda", "cuda is not available", "no cuda gpus",
           "cudaerrorinsufficientdriver", "invalid device ordinal")
# the rules of experiments/rules.py that stand in where the build needs a GPU
STAND_IN = {
    "alltoall": "overlap_dispatcher, experts_ep",
    "allgather": "overlap_dispatcher, experts_ep",
    "hybridep": "hybridep_gpu, flex_package, hybridep_tokens_per_rank",
}


@dataclass(frozen=True)
class DispatcherBuild:
    """What the dispatcher build decided: ``failures`` (the library's message and place, e.g. ``"... (megatron/
    core/transformer/moe/token_dispatcher.py:1563)"``), ``decided`` (one line: which check decided and how) and
    ``not_run`` (a line when the build could not run here, naming the planner rules that stand in)."""

    failures: tuple[str, ...] = ()
    decided: str = ""
    not_run: tuple[str, ...] = ()


class _StandInGroup:
    """A process group of the target's size for constructors that only ask ``size()``/``rank()``."""

    def __init__(self, size: int) -> None:
        self._size = max(1, int(size))

    def size(self) -> int:
        return self._size

    def rank(self) -> int:
        return 0


def _version(text: Any) -> tuple[int, ...] | None:
    """``"2.18.0+eb63fb63"`` -> ``(2, 18, 0)``; None without digits."""
    nums = [int(n) for n in re.findall(r"\d+", str(text or ""))[:3]]
    return tuple(nums + [0] * (3 - len(nums))) if nums else None


def library_place(exc: BaseException) -> str | None:
    """``megatron/core/...py:LINE`` of the innermost library frame that raised, or None."""
    frames = traceback.extract_tb(exc.__traceback__)
    for f in reversed(frames):
        if "/megatron/" in f.filename:
            return "megatron/" + f.filename.split("/megatron/", 1)[1] + f":{f.lineno}"
    return None


@contextlib.contextmanager
def _single_process_group() -> Iterator[None]:
    """A one-rank gloo process group for the build when none exists (destroyed afterwards)."""
    import torch.distributed as dist

    if dist.is_initialized():
        yield
        return
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


@contextlib.contextmanager
def _target_packages(module: Any, container: dict[str, Any]) -> Iterator[list[str]]:
    """Placeholders for the backend entry points the target container has and this machine lacks (restored)."""
    te = _version(container.get("transformer_engine"))
    wanted: list[str] = []
    if container.get("deep_ep"):
        wanted += ["fused_dispatch", "fused_combine", "set_deepep_num_sms", "hybrid_ep_dispatch",
                   "hybrid_ep_combine"]
    if te is not None and te >= NCCLEP_TE:
        wanted += ["nccl_ep_dispatch", "nccl_ep_combine", "new_nccl_ep_buffer", "ensure_nccl_ep_bootstrapped"]
    patched = [n for n in wanted if hasattr(module, n) and getattr(module, n) is None]
    for n in patched:
        setattr(module, n, lambda *a, **k: None)
    try:
        yield patched
    finally:
        for n in patched:
            setattr(module, n, None)


def _gpu_needed(exc: BaseException) -> bool:
    return isinstance(exc, RuntimeError | AssertionError) and any(t in str(exc).lower() for t in _NO_GPU)


def build_dispatcher(cfg: Any, container: dict[str, Any] | None = None,
                     message: Callable[[BaseException], str] = str) -> DispatcherBuild:
    """Construct Megatron-Core's token dispatcher for the built ``TransformerConfig`` ``cfg``.

    Args:
        cfg: a ``TransformerConfig`` that passed ``__post_init__`` (num_moe_experts, EP/ETP sizes, dispatcher).
        container: the target's versions (variant.json ``container``: ``transformer_engine``, ``deep_ep``); without
            it the packages installed here decide.
        message: how a library exception becomes its message (mcore_check.library_message).

    Returns:
        DispatcherBuild; never raises for a library error (that is a failure with its message and place).
    """
    from megatron.core.transformer.moe import token_dispatcher as td

    kind = cfg.moe_token_dispatcher_type
    backend = cfg.moe_flex_dispatcher_backend if kind == "flex" else kind
    ep, etp = int(cfg.expert_model_parallel_size or 1), int(cfg.expert_tensor_parallel_size or 1)
    experts = int(cfg.num_moe_experts or 0)
    if not experts:
        return DispatcherBuild(decided="dense model: no token dispatcher")
    n_local = max(1, experts // ep)
    groups = SimpleNamespace(ep=_StandInGroup(ep), expt_tp=_StandInGroup(etp), tp_ep=_StandInGroup(ep * etp))
    cls = {"allgather": td.MoEAllGatherTokenDispatcher, "alltoall": td.MoEAlltoAllTokenDispatcher,
           "flex": td.MoEFlexTokenDispatcher}.get(kind)
    if cls is None:
        return DispatcherBuild(failures=(f"Unsupported token dispatcher type: {kind} "
                                         "(megatron/core/transformer/moe/moe_layer.py:320)",))
    name = f"megatron.core {cls.__name__}" + (f" ({backend})" if kind == "flex" else "")
    try:
        with _single_process_group(), _target_packages(td, container or {}) as stood_in:
            cls(n_local, list(range(n_local)), config=cfg, pg_collection=groups)
    except Exception as e:  # the library's own check: ValueError, AssertionError, ImportError, ...
        if _gpu_needed(e):
            rules = STAND_IN.get(backend, "the planner's rules")
            return DispatcherBuild(decided=f"planner rules ({rules}): {name} needs a GPU to build",
                                   not_run=(f"{name} build (needs a GPU: {str(e).splitlines()[0][:80]}); the "
                                            f"planner rules {rules} stand in",))
        place = library_place(e)
        msg = message(e) + (f" ({place})" if place else "")
        return DispatcherBuild(failures=(msg,), decided=f"{name} build (the library) refused it")
    held = f"; the target's {', '.join(stood_in)} stood in by placeholder" if stood_in else ""
    built = DispatcherBuild(decided=f"{name} built on the CPU with EP={ep}, ETP={etp} (the library){held}")
    return _with_moe_layer(built, cfg, container or {}, message)


# where a MoE layer's own checks live (Megatron-Core 0.19.2): an error raised elsewhere while building it from the
# local layer spec may come from the spec, not from the layer the training builds (the TE spec), so it is noted only
MOE_LAYER_FILES = ("transformer/moe/moe_layer.py", "transformer/moe/router.py", "transformer/moe/experts.py",
                   "transformer/moe/token_dispatcher.py", "transformer/moe/moe_utils.py")


class _Groups(SimpleNamespace):
    """Stand-in process groups of the target's sizes; any group not named has one rank."""

    def __getattr__(self, name: str) -> _StandInGroup:
        return _StandInGroup(1)


def _with_moe_layer(built: DispatcherBuild, cfg: Any, container: dict[str, Any],
                    message: Callable[[BaseException], str]) -> DispatcherBuild:
    """Also build one whole MoE layer (router, experts, dispatcher: ``MoELayer.__init__``) on the meta device from
    Megatron-Core's local layer spec (``get_gpt_layer_local_spec``; no TE here), no memory allocated. A failure in
    the MoE files (:data:`MOE_LAYER_FILES`) is the library's refusal; anything else is noted as not run."""
    import copy

    import torch
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.transformer.moe import token_dispatcher as td

    if cfg.moe_grouped_gemm:
        return dataclass_replace(built, not_run=(*built.not_run, "MoE layer build: grouped-GEMM experts need "
                                                 "Transformer Engine (not here); the dispatcher build decided"))
    layer_cfg = copy.copy(cfg)  # no __post_init__ again; only how the weights are allocated changes
    layer_cfg.use_cpu_initialization, layer_cfg.perform_initialization = True, False
    ep, etp = int(cfg.expert_model_parallel_size or 1), int(cfg.expert_tensor_parallel_size or 1)
    groups = _Groups(ep=_StandInGroup(ep), expt_tp=_StandInGroup(etp), tp_ep=_StandInGroup(ep * etp),
                     tp=_StandInGroup(cfg.tensor_model_parallel_size), cp=_StandInGroup(cfg.context_parallel_size))
    try:
        spec = get_gpt_layer_local_spec(num_experts=cfg.num_moe_experts, moe_grouped_gemm=False)
        with _single_process_group(), _target_packages(td, container), torch.device("meta"):
            layer = spec.submodules.mlp(config=layer_cfg, layer_number=1, pg_collection=groups)
    except Exception as e:  # noqa: BLE001 - sorted below: the library's refusal, a GPU, or the spec
        place = library_place(e) or ""
        if _gpu_needed(e) or not any(f in place for f in MOE_LAYER_FILES):
            return dataclass_replace(built, not_run=(*built.not_run, f"MoE layer build from the local spec: "
                                                     f"{type(e).__name__}: {str(e).splitlines()[0][:100]}"))
        return DispatcherBuild(failures=(message(e) + f" ({place})",),
                               decided=f"{built.decided}; the MoE layer build (the library) refused it")
    n = sum(p.numel() for p in layer.parameters())
    return dataclass_replace(built, decided=f"{built.decided}; one MoE layer (router, {type(layer.experts).__name__}"
                                            f", dispatcher) built on the meta device, {n} parameters per rank")
