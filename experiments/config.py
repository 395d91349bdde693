"""Typed configuration records built from the composed Hydra config (conf/).

Each record is a small frozen dataclass validated in ``__post_init__`` (torchtitan style): a wrong type or value
raises :class:`ConfigError` naming the field, the bad value and what is allowed. Field names follow
Megatron-Core / Megatron-Bridge (CONTRACTS §9).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from contracts.cluster import GPU_TYPES, ClusterConfig, TunnelConfig
from contracts.errors import ConfigError
from contracts.records import DISPATCHERS
from contracts.statuses import Action, Mode, Preflight, values
from contracts.typed import build, one_of, positive, suggest

ACTIONS = values(Action)
PREFLIGHT = values(Preflight)
MODES = values(Mode)
RECOMPUTE_GRANULARITY = (None, "selective", "full")
RECOMPUTE_METHOD = (None, "uniform", "block")
CUDA_GRAPH_IMPL = ("none", "local", "transformer_engine", "full_iteration")


@dataclass(frozen=True, kw_only=True)
class ModelConfig:
    """Model architecture, parallelism, batch and precision settings (conf/model/*.yaml).

    Sizes are counts (layers, heads, experts) or widths (hidden, FFN). Batch sizes are in sequences,
    ``seq_length`` in tokens. Every field maps 1:1 to the Megatron-Core/Bridge field of the same name.
    """

    name: str
    recipe: str
    hf_path: str | None = None
    num_layers: int
    hidden_size: int
    num_attention_heads: int
    num_query_groups: int | None = None
    kv_channels: int | None = None
    ffn_hidden_size: int
    moe_ffn_hidden_size: int
    num_moe_experts: int
    moe_router_topk: int
    vocab_size: int
    moe_shared_expert_intermediate_size: int | None = None
    moe_shared_expert_overlap: bool = False
    mtp_num_layers: int | None = None
    add_bias_linear: bool = False
    add_qkv_bias: bool = False
    tensor_model_parallel_size: int = 1
    pipeline_model_parallel_size: int = 1
    virtual_pipeline_model_parallel_size: int | None = None
    context_parallel_size: int = 1
    expert_model_parallel_size: int = 1
    expert_tensor_parallel_size: int = 1
    sequence_parallel: bool = False
    num_layers_in_first_pipeline_stage: int | None = None
    num_layers_in_last_pipeline_stage: int | None = None
    account_for_embedding_in_pipeline_split: bool = False
    account_for_loss_in_pipeline_split: bool = False
    seq_length: int = 4096
    global_batch_size: int = 1024
    micro_batch_size: int = 1
    recompute_granularity: str | None = None
    recompute_method: str | None = None
    recompute_num_layers: int | None = None
    recompute_modules: tuple[str, ...] | None = None
    bf16: bool = True
    fp16: bool = False
    cuda_graph_impl: str = "none"
    cuda_graph_scope: tuple[str, ...] | str = ()
    overlap_grad_reduce: bool = True
    gradient_accumulation_fusion: bool = True
    moe_router_force_load_balancing: bool = True
    # Kernel fusions (Megatron-Core TransformerConfig fields). None = leave the recipe's / provider's own value;
    # conf/model/moe_bench_h200.yaml sets them from what its H200 profile showed.
    moe_permute_fusion: bool | None = None
    moe_router_fusion: bool | None = None
    bias_activation_fusion: bool | None = None
    apply_rope_fusion: bool | None = None
    cross_entropy_loss_fusion: bool | None = None
    cross_entropy_fusion_impl: str | None = None
    # NCCL EP receive-buffer budget (Megatron-Core 0.19.2 TransformerConfig field); the ncclep flex backend needs it
    # (token_dispatcher.py:1563) and TransformerConfig refuses it on other backends (transformer_config.py:1692), so
    # the planner sets it on the ncclep arms only (experiments/expand.py)
    moe_expert_rank_capacity_factor: float | None = None
    moe_ncclep_static_shape: bool | None = None
    # EP-overlap companions (Megatron-Core 0.19.2 transformer_config.py:2759-2776); None = not sent (an older core
    # has no such field)
    overlap_dispatch_backward_with_experts_wgrad: bool | None = None
    ep_overlap_early_attn_memory_release: bool | None = None
    # token dropping / padding, paged stash and the flex SM counts (transformer_config.py:892, 926-937, 1268);
    # None = not sent
    moe_expert_capacity_factor: float | None = None
    moe_pad_expert_input_to_capacity: bool | None = None
    moe_paged_stash: bool | None = None
    moe_flex_dispatcher_num_sms: int | None = None
    moe_deepep_num_sms: int | None = None
    moe_hybridep_num_sms: int | None = None

    def __post_init__(self) -> None:
        for f in ("num_layers", "hidden_size", "num_attention_heads", "ffn_hidden_size", "moe_ffn_hidden_size",
                  "num_moe_experts", "moe_router_topk", "vocab_size", "tensor_model_parallel_size",
                  "pipeline_model_parallel_size", "context_parallel_size", "expert_model_parallel_size",
                  "expert_tensor_parallel_size", "seq_length", "global_batch_size", "micro_batch_size"):
            positive(f"model.{f}", getattr(self, f))
        positive("model.virtual_pipeline_model_parallel_size", self.virtual_pipeline_model_parallel_size)
        one_of("model.recompute_granularity", self.recompute_granularity, RECOMPUTE_GRANULARITY)
        one_of("model.recompute_method", self.recompute_method, RECOMPUTE_METHOD)
        one_of("model.cuda_graph_impl", self.cuda_graph_impl, CUDA_GRAPH_IMPL)
        one_of("model.cross_entropy_fusion_impl", self.cross_entropy_fusion_impl, (None, "native", "te"))
        if self.bf16 and self.fp16:
            raise ConfigError("model.bf16 and model.fp16 are both true; choose one (or neither for fp32)")
        # C04: a scope given as a single string instead of a list is normalised, never a crash
        if isinstance(self.cuda_graph_scope, str):
            scope = tuple(s.strip() for s in self.cuda_graph_scope.split(",") if s.strip())
            object.__setattr__(self, "cuda_graph_scope", scope)

    def settings(self) -> dict[str, Any]:
        """The Megatron-named fields the job gets (everything but name/recipe/hf_path), JSON-ready."""
        out = {}
        for f in dataclasses.fields(self):
            if f.name in ("name", "recipe", "hf_path"):
                continue
            if f.name in NCCLEP_ONLY:  # set on the ncclep arms only (experiments/expand.py)
                continue
            v = getattr(self, f.name)
            if v is None and f.name in SENT_WHEN_SET:
                continue
            out[f.name] = list(v) if isinstance(v, tuple) else v
        return out


# ModelConfig fields that only the ncclep arms get: an older Megatron-Core has no such TransformerConfig field, and
# 0.19.2 refuses the capacity factor on other backends (transformer_config.py:1692-1697)
NCCLEP_ONLY = ("moe_expert_rank_capacity_factor", "moe_ncclep_static_shape")
# ModelConfig fields sent to the job only when set: an older Megatron-Core has no such TransformerConfig field
SENT_WHEN_SET = ("overlap_dispatch_backward_with_experts_wgrad", "ep_overlap_early_attn_memory_release",
                 "moe_expert_capacity_factor", "moe_pad_expert_input_to_capacity", "moe_paged_stash",
                 "moe_flex_dispatcher_num_sms", "moe_deepep_num_sms", "moe_hybridep_num_sms")
PRECISIONS = ("bf16", "fp8_cs", "fp8_delayed", "mxfp8", "nvfp4")


@dataclass(frozen=True, kw_only=True)
class Precision:
    """A training precision (conf/precision/*.yaml): the Megatron-Bridge mixed-precision recipe the payload selects
    (``mixed_precision``), the Megatron-Core fields it sets (``settings``, merged into every variant's settings),
    and the precision column of the published rows it matches (``published``)."""

    name: str
    mixed_precision: str
    published: str
    settings: dict[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        one_of("precision", self.name, PRECISIONS)


@dataclass(frozen=True, kw_only=True)
class ContainerProfile:
    """Library versions inside the training environment (conf/container/*.yaml); they key the rule table."""

    name: str
    image: str | None = None
    python: str | None = None
    torch: str | None = None
    transformer_engine: str | None = None
    megatron_core: str | None = None
    megatron_bridge: str | None = None
    deep_ep: str | None = None
    nemo_run: str | None = None
    tests_dir: str | None = None  # the image's Megatron-Bridge tests/unit_tests (conformance=true runs them)

    def versions(self) -> dict[str, str | None]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


@dataclass(frozen=True, kw_only=True)
class Stage:
    """One stage of a sweep preset: the axis values it runs and its gate (CONTRACTS §2)."""

    name: str
    dispatcher: tuple[str, ...]
    overlap: tuple[bool, ...]
    delay_wgrad: tuple[bool, ...]
    gate: str | None = None

    def __post_init__(self) -> None:
        for d in self.dispatcher:
            one_of(f"sweep stage {self.name} dispatcher", d, DISPATCHERS)
        one_of(f"sweep stage {self.name} gate", self.gate, (None, "overlap_passed"))


@dataclass(frozen=True, kw_only=True)
class SweepPreset:
    """A sweep preset (conf/sweep/*.yaml): isolation (staged), full, nightly."""

    name: str
    stages: tuple[Stage, ...]
    repeats: int = 1
    detach: bool = False
    history: bool = False


__all__ = ["ACTIONS", "CUDA_GRAPH_IMPL", "GPU_TYPES", "MODES", "PREFLIGHT", "ClusterConfig", "ConfigError",
           "cluster_from_cfg",
           "ContainerProfile", "ModelConfig", "Stage", "SweepPreset", "TunnelConfig", "build", "one_of", "positive",
           "suggest"]


def cluster_from_cfg(cfg: dict[str, Any]) -> ClusterConfig:
    """The typed cluster profile of a composed config (``cfg["cluster"]``, CONTRACTS §9).

    Raises:
        ConfigError: a field of the wrong type or value, named with what it must be (``cluster.nodes='two'``).
    """
    raw = dict(cfg["cluster"])
    for key in ("tunnel", "env_vars"):
        if raw.get(key) is not None and not isinstance(raw[key], dict):
            raise ConfigError(f"cluster.{key}={raw[key]!r} must be a mapping (or null); set its keys one at a time, "
                              f"e.g. {'cluster.tunnel.kind=ssh' if key == 'tunnel' else '+cluster.env_vars.NAME=value'}")
    raw["tunnel"] = build(TunnelConfig, dict(raw.get("tunnel") or {}), "cluster.tunnel")
    raw["env_vars"] = {str(k): str(v) for k, v in (raw.get("env_vars") or {}).items()}
    return build(ClusterConfig, raw, "cluster")
