"""Typed configuration records built from the composed Hydra config (conf/).

Each record is a small frozen dataclass validated in ``__post_init__`` (torchtitan style): a wrong type or value
raises :class:`ConfigError` naming the field, the bad value and what is allowed. Field names follow
Megatron-Core / Megatron-Bridge (CONTRACTS §9).
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from dataclasses import dataclass, field
from typing import Any

from experiments.records import DISPATCHERS

GPU_TYPES = ("h100", "h200", "b200", "b300", "gb200", "gb300", "a100")
ACTIONS = ("run", "plan", "status", "collect", "cancel")
PREFLIGHT = ("static", "container", "off")
MODES = ("train", "validate")
RECOMPUTE_GRANULARITY = (None, "selective", "full")
RECOMPUTE_METHOD = (None, "uniform", "block")
CUDA_GRAPH_IMPL = ("none", "local", "transformer_engine", "full_iteration")


class ConfigError(ValueError):
    """A user-facing configuration error (exit code 2). The message names the bad value and the valid ones."""


def suggest(bad: str, valid: typing.Iterable[str]) -> str:
    """Return ``" Did you mean 'x' or 'y'?"`` for the (up to two) closest valid spellings, or ``""``."""
    close = difflib.get_close_matches(str(bad), [str(v) for v in valid], n=2, cutoff=0.6)
    return f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""


def _type_ok(value: Any, tp: Any) -> bool:
    origin = typing.get_origin(tp)
    if tp is Any:
        return True
    if origin in (types.UnionType, typing.Union):
        return any(_type_ok(value, a) for a in typing.get_args(tp))
    if tp is type(None):
        return value is None
    if tp is bool:
        return isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if tp is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if origin in (tuple, list):
        args = typing.get_args(tp)
        return isinstance(value, tuple | list) and all(_type_ok(v, args[0]) for v in value) if args else True
    if origin is dict or tp is dict:
        return isinstance(value, dict)
    if isinstance(tp, type):
        return isinstance(value, tp)
    return True


def _type_name(tp: Any) -> str:
    return str(tp).replace("typing.", "").replace("<class '", "").replace("'>", "")


def build(cls: type, data: dict[str, Any], where: str) -> Any:
    """Build dataclass ``cls`` from a plain mapping, checking keys and types.

    Raises:
        ConfigError: an unknown key (lists the valid keys) or a value of the wrong type (names field and type).
    """
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = [k for k in data if k not in fields]
    if unknown:
        k = unknown[0]
        raise ConfigError(
            f"unknown key {where}.{k}.{suggest(k, fields)} Valid keys of {where}: {', '.join(sorted(fields))}"
        )
    kw: dict[str, Any] = {}
    for name, value in data.items():
        tp = hints[name]
        if isinstance(value, list) and typing.get_origin(tp) in (tuple,) or (
            isinstance(value, list) and any(typing.get_origin(a) is tuple for a in typing.get_args(tp))
        ):
            value = tuple(value)
        if not _type_ok(value, tp):
            raise ConfigError(
                f"{where}.{name}={value!r} has the wrong type: expected {_type_name(tp)}"
            )
        kw[name] = value
    missing = [n for n, f in fields.items() if n not in kw and f.default is dataclasses.MISSING
               and f.default_factory is dataclasses.MISSING]
    if missing:
        raise ConfigError(f"{where} is missing required keys: {', '.join(missing)}")
    return cls(**kw)


def _one_of(where: str, value: Any, allowed: typing.Sequence[Any]) -> None:
    if value not in allowed:
        shown = ", ".join("null" if a is None else str(a) for a in allowed)
        raise ConfigError(f"{where}={value!r} is not allowed.{suggest(str(value), [str(a) for a in allowed])} "
                          f"Valid values: {shown}")


def _positive(where: str, value: int | None) -> None:
    if value is not None and value < 1:
        raise ConfigError(f"{where}={value} must be >= 1")


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

    def __post_init__(self) -> None:
        for f in ("num_layers", "hidden_size", "num_attention_heads", "ffn_hidden_size", "moe_ffn_hidden_size",
                  "num_moe_experts", "moe_router_topk", "vocab_size", "tensor_model_parallel_size",
                  "pipeline_model_parallel_size", "context_parallel_size", "expert_model_parallel_size",
                  "expert_tensor_parallel_size", "seq_length", "global_batch_size", "micro_batch_size"):
            _positive(f"model.{f}", getattr(self, f))
        _positive("model.virtual_pipeline_model_parallel_size", self.virtual_pipeline_model_parallel_size)
        _one_of("model.recompute_granularity", self.recompute_granularity, RECOMPUTE_GRANULARITY)
        _one_of("model.recompute_method", self.recompute_method, RECOMPUTE_METHOD)
        _one_of("model.cuda_graph_impl", self.cuda_graph_impl, CUDA_GRAPH_IMPL)
        _one_of("model.cross_entropy_fusion_impl", self.cross_entropy_fusion_impl, (None, "native", "te"))
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
            v = getattr(self, f.name)
            out[f.name] = list(v) if isinstance(v, tuple) else v
        return out


@dataclass(frozen=True, kw_only=True)
class TunnelConfig:
    """How the orchestrator reaches the cluster: ``local`` (on a login node) or ``ssh`` (key file, unattended)."""

    kind: str = "local"
    host: str | None = None
    port: int | None = None
    user: str | None = None
    identity: str | None = None
    job_dir: str | None = None

    def __post_init__(self) -> None:
        _one_of("cluster.tunnel.kind", self.kind, ("local", "ssh"))
        if self.kind == "ssh" and not (self.host and self.user):
            raise ConfigError("cluster.tunnel.kind=ssh needs cluster.tunnel.host and cluster.tunnel.user")


@dataclass(frozen=True, kw_only=True)
class ClusterConfig:
    """Where and how jobs run (conf/cluster/*.yaml). ``time_limit`` is ``HH:MM:SS`` (or ``D-HH:MM:SS``)."""

    name: str
    executor: str
    nodes: int = 1
    gpus_per_node: int | str = "auto"
    gpu_type: str | None = None
    container: str = "ci_cpu"
    account: str | None = None
    partition: str | None = None
    qos: str | None = None
    reservation: str | None = None
    constraint: str | None = None
    exclude: str | None = None
    exclusive: bool = False
    time_limit: str = "00:30:00"
    container_image: str | None = None
    container_mounts: tuple[str, ...] = ()
    container_env: tuple[str, ...] = ()
    env_vars: dict[str, Any] = field(default_factory=dict)
    secret_env: tuple[str, ...] = ()
    allow_ssh_secrets: bool = False  # CONTRACTS §10: an SSH tunnel would write secrets down; opt in explicitly
    tunnel: TunnelConfig = field(default_factory=TunnelConfig)
    mode: str | None = None

    def __post_init__(self) -> None:
        _one_of("cluster.executor", self.executor, ("local", "slurm"))
        _positive("cluster.nodes", self.nodes)
        if isinstance(self.gpus_per_node, str) and self.gpus_per_node != "auto":
            raise ConfigError(f"cluster.gpus_per_node={self.gpus_per_node!r} must be a number or 'auto'")
        if isinstance(self.gpus_per_node, int):
            _positive("cluster.gpus_per_node", self.gpus_per_node)
        if self.gpu_type not in (None, "auto"):
            _one_of("cluster.gpu_type", self.gpu_type, GPU_TYPES + ("auto",))
        if self.mode is not None:
            _one_of("cluster.mode", self.mode, MODES)
        _ = self.time_limit_s  # validates the format

    @property
    def time_limit_s(self) -> int:
        """``time_limit`` in seconds. Raises ConfigError on a malformed value."""
        text = str(self.time_limit)
        try:
            days, _, rest = text.rpartition("-")
            parts = [int(p) for p in rest.split(":")]
            while len(parts) < 3:
                parts.insert(0, 0)
            h, m, s = parts[-3:]
            return (int(days) if days else 0) * 86400 + h * 3600 + m * 60 + s
        except ValueError:
            raise ConfigError(f"cluster.time_limit={text!r} is not HH:MM:SS or D-HH:MM:SS") from None


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
            _one_of(f"sweep stage {self.name} dispatcher", d, DISPATCHERS)
        _one_of(f"sweep stage {self.name} gate", self.gate, (None, "overlap_passed"))


@dataclass(frozen=True, kw_only=True)
class SweepPreset:
    """A sweep preset (conf/sweep/*.yaml): isolation (staged), full, nightly."""

    name: str
    stages: tuple[Stage, ...]
    repeats: int = 1
    detach: bool = False
    history: bool = False
