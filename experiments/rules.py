"""Static preflight: a declarative rule table keyed by container versions and the cluster's GPU type.

Each :class:`Rule` says when it applies, what must hold, the message of a violation, and the library check it
mirrors (``source``). ``scope`` tells where the real check lives:

- ``core``:   Megatron-Core ``TransformerConfig.__post_init__`` (held against the real library by
              tests/experiments/test_conformance.py);
- ``bridge``: Megatron-Bridge (``CommOverlapConfig`` setup, flex dispatcher validation);
- ``te``:     Transformer Engine minimum versions checked at layer build;
- ``world``:  process-group arithmetic done at distributed initialisation;
- ``env``:    the container's contents (packages present).

Rules of severity ``warning`` never prune; they are written into the manifest.
Sources: FACTS.md §1-§2 (Megatron-Bridge 0.2-0.6, Megatron-Core 0.14-0.19 overlap checks; core 0.19.2
transformer_config.py lines 2669-2775).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Version = tuple[int, int, int]

# GPU generation facts (FACTS §1: Bridge flex_dispatcher_backend GPU checks)
COMPUTE_CAPABILITY = {"a100": 8, "h100": 9, "h200": 9, "b200": 10, "b300": 10, "gb200": 10, "gb300": 10}
DEEPEP_GPUS = ("a100", "h100", "h200", "b200", "b300")  # cc 8.x/9.x, or a name starting "NVIDIA B200/B300"


def parse_version(text: str | None) -> Version | None:
    """``"2.12.0"`` -> ``(2, 12, 0)``; ``None`` or text without digits -> ``None``."""
    if text is None:
        return None
    nums = [int(n) for n in re.findall(r"\d+", str(text))[:3]]
    if not nums:
        return None
    while len(nums) < 3:
        nums.append(0)
    return (nums[0], nums[1], nums[2])


@dataclass(frozen=True)
class RuleContext:
    """Everything a rule may look at for one variant.

    ``settings`` are the Megatron-named fields of the variant (CONTRACTS §9) including the four knob fields;
    ``world_size`` is nodes x GPUs per node; ``env`` the job's environment variables.
    """

    settings: dict[str, Any]
    dispatcher: str
    overlap: bool
    delay_wgrad: bool
    torch: Version | None = None
    te: Version | None = None
    core: Version | None = None
    bridge: Version | None = None
    deep_ep: Version | None = None
    gpu_type: str | None = None
    world_size: int | None = None
    nodes: int = 1
    env: dict[str, Any] = field(default_factory=dict)
    precision: str = "bf16"

    def __getattr__(self, name: str) -> Any:  # ctx.num_layers etc. read settings
        try:
            return self.__dict__["settings"][name]
        except KeyError:
            raise AttributeError(name) from None


@dataclass(frozen=True)
class Rule:
    """One row of the table: if ``when(ctx)`` and not ``ok(ctx)``, the variant violates the rule."""

    id: str
    scope: str
    when: Callable[[RuleContext], bool]
    ok: Callable[[RuleContext], bool]
    message: Callable[[RuleContext], str]
    source: str
    severity: str = "error"


@dataclass(frozen=True)
class Finding:
    """A violated rule for one variant: ``text`` is what the manifest's ``reasons``/``warnings`` get."""

    rule: str
    scope: str
    severity: str
    message: str
    source: str

    @property
    def text(self) -> str:
        return f"[{self.rule}] {self.message} (mirrors {self.source}; {DECIDED_BY.get(self.scope, 'planner rule')})"


# Which check decided a finding at plan time, and where the library's own check runs (the plan says it per reason)
DECIDED_BY = {
    "core": "planner rule; validate mode re-checks it with Megatron-Core",
    "bridge": "planner rule; Megatron-Bridge checks it in the container (preflight=container)",
    "te": "planner rule; Transformer Engine checks it at layer build, on the GPU",
    "world": "planner rule; checked at process-group setup, on the cluster",
    "env": "planner rule, from the container profile and the job environment",
}


def _ge(v: Version | None, need: Version) -> bool:
    return v is None or v >= need  # unknown version: the rule cannot reject (a warning rule reports it)


def _core_in(ctx: RuleContext, lo: Version, hi: Version) -> bool:
    return ctx.core is not None and lo <= ctx.core < hi


def _modules(ctx: RuleContext) -> list[str]:
    return list(ctx.settings.get("recompute_modules") or [])


def _scope(ctx: RuleContext) -> list[str]:
    s = ctx.settings.get("cuda_graph_scope") or []
    return [s] if isinstance(s, str) else list(s)


def _graphs(ctx: RuleContext) -> bool:
    return ctx.cuda_graph_impl in ("local", "transformer_engine")


def _dp(ctx: RuleContext) -> int | None:
    mp = ctx.tensor_model_parallel_size * ctx.pipeline_model_parallel_size * ctx.context_parallel_size
    if not ctx.world_size or ctx.world_size % mp:
        return None
    return ctx.world_size // mp


def _pipeline_layers_ok(ctx: RuleContext) -> bool:
    pp, vpp = ctx.pipeline_model_parallel_size, ctx.virtual_pipeline_model_parallel_size or 1
    layers = ctx.num_layers + int(bool(ctx.settings.get("account_for_embedding_in_pipeline_split"))) + int(
        bool(ctx.settings.get("account_for_loss_in_pipeline_split")))
    stages = pp
    for key in ("num_layers_in_first_pipeline_stage", "num_layers_in_last_pipeline_stage"):
        if ctx.settings.get(key) is not None and pp > 1:
            layers -= ctx.settings[key]
            stages -= 1
    if stages <= 0:
        return layers == 0
    return layers >= 0 and layers % (stages * vpp) == 0


GRAPHS = "Megatron-Core TransformerConfig CUDA-graph module checks (core 0.19)"
OVERLAP = "Megatron-Core TransformerConfig overlap_moe_expert_parallel_comm checks (core 0.19)"
BRIDGE_OVL = "Megatron-Bridge CommOverlapConfig._get_model_comm_overlap_cfgs (Bridge 0.6)"
FLEX = "Megatron-Bridge flex_dispatcher_backend.validate_flex_dispatcher_backend (Bridge 0.6)"
ovl: Callable[[RuleContext], bool] = lambda c: c.overlap  # noqa: E731
dw: Callable[[RuleContext], bool] = lambda c: c.delay_wgrad  # noqa: E731
always: Callable[[RuleContext], bool] = lambda c: True  # noqa: E731

# HybridEP multi-node token capacity (DeepEP branch hybrid-ep, csrc/hybrid_ep/config.cuh,
# hybrid_ep_token_capacity_is_valid, commit 94a9f8f6): across NVLink domains the IB queue pair needs
# tx_depth = 3 x max_num_of_tokens_per_rank + 1 < 65536 (HYBRID_EP_IB_QP_MAX_TX_DEPTH; internode_doca.cu asserts
# ``tx_depth > 0 && tx_depth < 65536``), so at most (65536 - 1 - 1) // 3 = 21844 tokens per rank.
HYBRIDEP_MAX_TX_DEPTH = 65536
HYBRIDEP_TX_DEPTH_TOKEN_FACTOR = 3
HYBRIDEP_TX_DEPTH_EXTRA = 1
HYBRIDEP_MAX_TOKENS_PER_RANK = (HYBRIDEP_MAX_TX_DEPTH - 1 - HYBRIDEP_TX_DEPTH_EXTRA) // HYBRIDEP_TX_DEPTH_TOKEN_FACTOR
NVLINK_DOMAIN_MAX = {"gb200": 72, "gb300": 72}  # multi-node NVLink (NVL72); other GPUs: one node is one domain
HYBRIDEP_SOURCE = ("DeepEP hybrid-ep csrc/hybrid_ep/config.cuh hybrid_ep_token_capacity_is_valid "
                   "(tx_depth = 3 x tokens per rank + 1 < 65536)")
# Megatron-LM megatron/training/arguments.py validate_args (core 0.19.2 wheel): for TP > 1 or CP > 1 on
# get_device_arch_version() < 10 with overlap_moe_expert_parallel_comm it warns "For Hopper and before, try not to
# use tensor model parallelism or context parallelism with overlap_moe_expert_parallel_comm ..."
HOPPER_TP_OVERLAP_SOURCE = "Megatron-LM megatron/training/arguments.py validate_args (TP/CP with EP overlap, arch < 10)"


def tokens_per_rank(ctx: RuleContext) -> int:
    """Tokens one rank hands to the MoE dispatcher per micro-batch: seq_length x micro_batch_size / (TP x CP).

    MoE with TP > 1 runs with sequence parallelism, so TP splits the sequence like CP does (Megatron-Core
    TransformerConfig: MoE + TP needs sequence_parallel); this is the ``max_num_of_tokens_per_rank`` HybridEP sizes
    its buffers for.
    """
    split = ctx.tensor_model_parallel_size * ctx.context_parallel_size
    return ctx.seq_length * ctx.micro_batch_size // max(split, 1)


def hybridep_nodes(ctx: RuleContext) -> int:
    """NVLink domains the HybridEP group (TP x EP ranks) spans: group size / ranks per domain, rounded up
    (DeepEP hybrid_ep_buffer.py: num_of_nodes = group_size // num_of_hybrid_ep_ranks_per_nvlink_domain)."""
    per_node = (ctx.world_size // ctx.nodes) if ctx.world_size and ctx.nodes else ctx.world_size or 1
    domain = max(1, min(NVLINK_DOMAIN_MAX.get(ctx.gpu_type or "", per_node), ctx.world_size or per_node))
    group = ctx.tensor_model_parallel_size * ctx.expert_model_parallel_size
    return max(1, -(-group // domain))


def _arch_before_blackwell(ctx: RuleContext) -> bool:
    return ctx.gpu_type is not None and COMPUTE_CAPABILITY.get(ctx.gpu_type, 10) < 10


# --- precision (conf/precision/*.yaml). Transformer Engine minimums as Megatron-Core 0.19.2 checks them when it
# builds the recipe: megatron/core/fp8_utils.py:732-764 (tensorwise = Float8CurrentScaling needs TE >= 2.2.0.dev0,
# mxfp8 = MXFP8BlockScaling >= 2.1.0, delayed scaling any TE 2.x) and megatron/core/fp4_utils.py:210-229
# (NVFP4BlockScaling needs TE >= 2.7.0.dev0). Blackwell-only recipes: transformer_config.py:578 ("'mxfp8' for
# Blackwell architecture only") and :660 ("NVFP4BlockScaling recipe for Blackwell+ architecture").
PRECISION_TE_MIN: dict[str, Version] = {"fp8_cs": (2, 2, 0), "fp8_delayed": (2, 0, 0), "mxfp8": (2, 1, 0),
                                        "nvfp4": (2, 7, 0)}
BLACKWELL_PRECISIONS = ("mxfp8", "nvfp4")
PRECISION_SOURCE = "Megatron-Core 0.19.2 megatron/core/fp8_utils.py:732-764, fp4_utils.py:210-229 (TE recipes)"
ARCH_SOURCE = ("Megatron-Core 0.19.2 megatron/core/transformer/transformer_config.py:578 and :660 (MXFP8 and NVFP4 "
               "recipes for Blackwell only; Transformer Engine refuses them below compute capability 10)")
# NVFP4 inside the 1F1B EP-overlap schedule: before Megatron-LM PR 6135 (backported to core_r0.19.0 as PR 7198,
# present in 0.19.2 as TransformerLayer.get_inner_quantization_context, transformer_layer.py:529-539) the
# fine-grained forward nodes ran outside get_fp4_context(), so the MoE layers of an overlap arm were not NVFP4.
NVFP4_OVERLAP_SOURCE = ("Megatron-Core 0.19.2 megatron/core/transformer/transformer_layer.py:529-539 "
                        "(get_inner_quantization_context enters the FP4 context; Megatron-LM PR 6135 / 7198)")
# NCCL EP (the ncclep flex backend), Megatron-Core 0.19.2 transformer/moe/token_dispatcher.py _NCCLEPManager:
# :1558-1562 raises ImportError when transformer_engine.pytorch.ep is missing (fused_a2a.py:609-614), :1563-1568
# raises ValueError without moe_expert_rank_capacity_factor; transformer_config.py:2716-2728 warns that overlap
# without moe_ncclep_static_shape keeps a device-to-host sync that serialises the 1F1B overlap.
NCCLEP_TE_MIN: Version = (2, 17, 0)
NCCLEP_BUILD_SOURCE = "Megatron-Core 0.19.2 megatron/core/transformer/moe/token_dispatcher.py:1558-1568 (_NCCLEPManager)"
NCCLEP_SYNC_SOURCE = "Megatron-Core 0.19.2 megatron/core/transformer/transformer_config.py:2716-2728"
NCCLEP_STATIC_SOURCE = "Megatron-Core 0.19.2 megatron/core/transformer/moe/token_dispatcher.py:1533-1545"
# A whole-layer TE CUDA graph (empty cuda_graph_modules) with EP overlap passes TransformerConfig and asserts at the
# first graph replay: transformer_layer.py:1255-1264 ("EP overlap must be disabled when CUDA graph captures the
# whole MLP/MoE part", in _te_cuda_graph_replay_impl)
WHOLE_LAYER_GRAPH_SOURCE = "Megatron-Core 0.19.2 megatron/core/transformer/transformer_layer.py:1255-1264"
EP_COMPANIONS_SOURCE = "Megatron-Core 0.19.2 megatron/core/transformer/transformer_config.py:2759-2776"
SHARED_OVERLAP_SOURCE = "Megatron-Core 0.19.2 megatron/core/transformer/transformer_config.py:1644-1650"
# The combined 1F1B schedule runs the first micro-batch's forward and the last one's backward alone
# (pipeline_parallel/combined_1f1b.py:76 and :119): n micro-batches overlap n-1 forward/backward pairs. Interleaved
# pipelining adds one warm-up micro-batch with overlap (pipeline_parallel/schedules.py:939-943).
ONE_MICROBATCH_SOURCE = ("Megatron-Core 0.19.2 megatron/core/pipeline_parallel/combined_1f1b.py:76,119; "
                         "schedules.py:939-943")
# Megatron-Bridge 0.6.0/0.6.1 models/transformer_config.py:85-121 (_enable_safe_hybridep_dispatch) turns on
# moe_hybridep_pad_uneven_dispatch_inputs for every eager (no CUDA graph) HybridEP run; 0.6.2 (same file, :91-135,
# called from training/config.py:1249 with uses_thd) only for packed THD sequences.
HYBRIDEP_PAD_SOURCE = ("Megatron-Bridge 0.6.1 models/transformer_config.py:85-121 vs 0.6.2 :91-135 "
                       "(_enable_safe_hybridep_dispatch)")
# Known failures, as warnings (no library check catches them): Megatron-Bridge PR 6020 dropped DeepEP and EP 32 -> 8
# from the DeepSeek-V3 B200 FP8-MX/NVFP4 recipes after an illegal memory access in DeepEP internode_dispatch;
# Megatron-LM issue 1810: overlap can deadlock at scale (one CUDA event gates both comm ops, so ranks may launch
# collectives in different orders); NCCL issue 2303: NCCL EP LOW_LATENCY dispatch/combine time out on GB200/GB300 NVL72.
DEEPEP_B200_URL = "https://github.com/NVIDIA-NeMo/Megatron-Bridge/pull/6020"
OVERLAP_DEADLOCK_URL = "https://github.com/NVIDIA/Megatron-LM/issues/1810"
NCCLEP_NVL72_URL = "https://github.com/NVIDIA/nccl/issues/2303"
OVERLAP_DEADLOCK_MIN_GPUS = 256  # "large runs": warn from this world size (the issue gives no threshold)


def _graphed_recompute_with_dropout(c: RuleContext) -> str | None:
    """Megatron-Core's message when a selectively recomputed module is also CUDA-graphed while its dropout is on
    (a graphed recompute cannot take a fresh random number), else None. A whole-layer graph (empty scope) counts as
    graphing every module."""
    whole, scope, mods = not _scope(c), set(_scope(c)), set(_modules(c))
    attn_drop = c.settings.get("attention_dropout", 0.1)
    hidden_drop = c.settings.get("hidden_dropout", 0.1)
    if attn_drop and "core_attn" in mods and (whole or "attn" in scope):
        return "attention dropout is not supported with graphed attention recomputation."
    if hidden_drop and (("mlp" in mods and (whole or "mlp" in scope)) or ("moe" in mods and (whole or "moe" in scope))):
        return "hidden dropout is not supported with graphed MLP/MoE recomputation."
    return None


def num_microbatches(ctx: RuleContext) -> int | None:
    """global_batch_size / (micro_batch_size x DP) per step, or None when DP is unknown."""
    dp = _dp(ctx)
    if dp is None or not ctx.micro_batch_size:
        return None
    return ctx.global_batch_size // (ctx.micro_batch_size * dp)


RULES: tuple[Rule, ...] = (
    # --- flex backends against the GPU generation and the container
    Rule("deepep_gpu", "bridge", lambda c: c.dispatcher == "deepep" and c.gpu_type is not None,
         lambda c: c.gpu_type in DEEPEP_GPUS,
         lambda c: f"DeepEP does not support {c.gpu_type} (it runs on Ampere, Hopper, B200/B300; GB200/GB300 are "
                   "rejected and Bridge silently falls back to alltoall). Use dispatcher=hybridep on this GPU", FLEX),
    Rule("hybridep_gpu", "bridge", lambda c: c.dispatcher == "hybridep" and c.gpu_type is not None,
         lambda c: COMPUTE_CAPABILITY.get(c.gpu_type, 0) in (8, 9, 10),
         lambda c: f"HybridEP needs compute capability 8, 9 or 10; {c.gpu_type} is not supported", FLEX),
    Rule("ncclep_gpu", "bridge", lambda c: c.dispatcher == "ncclep" and c.gpu_type is not None,
         lambda c: COMPUTE_CAPABILITY.get(c.gpu_type, 0) in (9, 10),
         lambda c: f"NCCL EP needs compute capability 9 or 10 (Hopper/Blackwell); {c.gpu_type} is not supported",
         FLEX),
    Rule("ncclep_core", "core", lambda c: c.dispatcher == "ncclep", lambda c: _ge(c.core, (0, 19, 0)),
         lambda c: "the ncclep flex backend needs Megatron-Core >= 0.19", "Megatron-Core moe_flex_dispatcher_backend"),
    Rule("ncclep_capacity_factor", "core", lambda c: c.dispatcher == "ncclep" and _ge(c.core, (0, 19, 0)),
         lambda c: c.settings.get("moe_expert_rank_capacity_factor") is not None,
         lambda c: "The 'ncclep' backend requires moe_expert_rank_capacity_factor to be set: it sizes the per-rank "
                   "receive buffer (set model.moe_expert_rank_capacity_factor, e.g. 1.5; it applies to the ncclep "
                   "arms only)", NCCLEP_BUILD_SOURCE),
    Rule("ncclep_te", "te", lambda c: c.dispatcher == "ncclep", lambda c: _ge(c.te, NCCLEP_TE_MIN),
         lambda c: "TransformerEngine NCCL EP is unavailable: the 'ncclep' backend needs Transformer Engine >= "
                   f"{'.'.join(map(str, NCCLEP_TE_MIN))} built with NCCL EP (transformer_engine.pytorch.ep); the "
                   f"container profile has TE {'.'.join(map(str, c.te)) if c.te else 'unknown'}", NCCLEP_BUILD_SOURCE),
    Rule("ncclep_overlap_static_shape", "core", lambda c: c.dispatcher == "ncclep" and c.overlap,
         lambda c: bool(c.settings.get("moe_ncclep_static_shape")),
         lambda c: "overlap with ncclep and moe_ncclep_static_shape=False keeps a device-to-host sync that "
                   "serialises the 1F1B overlap: this arm measures about no gain by construction (static shape needs "
                   "use_transformer_engine_op_fuser and moe_grouped_gemm)", NCCLEP_SYNC_SOURCE, "warning"),
    Rule("ncclep_static_shape_fuser", "core", lambda c: c.dispatcher == "ncclep"
         and bool(c.settings.get("moe_ncclep_static_shape")),
         lambda c: bool(c.settings.get("use_transformer_engine_op_fuser")) and bool(c.settings.get("moe_grouped_gemm")),
         lambda c: "moe_ncclep_static_shape=True requires BOTH use_transformer_engine_op_fuser and moe_grouped_gemm "
                   "(the fused grouped GEMM over device-side per-expert counts); the model profile does not set them, "
                   "so the recipe must (validate's dispatcher build decides)", NCCLEP_STATIC_SOURCE, "warning"),
    Rule("ncclep_nvl72_low_latency", "env", lambda c: c.dispatcher == "ncclep" and c.gpu_type in ("gb200", "gb300"),
         lambda c: False,
         lambda c: f"NCCL EP LOW_LATENCY dispatch/combine time out on {c.gpu_type} NVL72 (HIGH_THROUGHPUT passes): "
                   f"a known failure ({NCCLEP_NVL72_URL})", NCCLEP_NVL72_URL, "warning"),
    Rule("deepep_b200_internode", "env", lambda c: c.dispatcher == "deepep" and c.gpu_type in ("b200", "b300")
         and c.expert_model_parallel_size > (c.world_size // c.nodes if c.world_size and c.nodes else 8),
         lambda c: False,
         lambda c: f"DeepEP internode dispatch (EP={c.expert_model_parallel_size} across nodes) crashed with an "
                   f"illegal memory access on {c.gpu_type}; NVIDIA dropped DeepEP and lowered EP 32 -> 8 in its "
                   f"DeepSeek-V3 B200 recipes ({DEEPEP_B200_URL})", DEEPEP_B200_URL, "warning"),
    Rule("flex_tp_ep", "world", lambda c: c.dispatcher in ("deepep", "ncclep"),
         lambda c: c.expert_tensor_parallel_size * c.expert_model_parallel_size > 1,
         lambda c: f"{'DeepEP' if c.dispatcher == 'deepep' else 'NCCL EP'} dispatcher requires TPxEP > 1 (expert "
                   f"TP {c.expert_tensor_parallel_size} x EP {c.expert_model_parallel_size})",
         "Megatron-Core MoEFlexTokenDispatcher at model build (core 0.19; seen on the H200 at EP=1)"),
    Rule("flex_package", "env", lambda c: c.dispatcher in ("deepep", "hybridep"),
         lambda c: c.deep_ep is not None,
         lambda c: f"{'DeepEP' if c.dispatcher == 'deepep' else 'HybridEP'} is not installed in the container "
                   "profile (deep_ep: null); the run would fail before iteration 1",
         "Megatron-Core fused_a2a import ('DeepEP is not installed' / 'HybridEP is not installed')"),
    # --- precision against the GPU generation, Transformer Engine and the overlap schedule
    Rule("precision_arch", "te", lambda c: c.precision in BLACKWELL_PRECISIONS and c.gpu_type is not None,
         lambda c: not _arch_before_blackwell(c),
         lambda c: f"precision={c.precision} needs a Blackwell GPU (compute capability 10); {c.gpu_type} has "
                   f"{COMPUTE_CAPABILITY.get(c.gpu_type or '', '?')}. Use precision=fp8_cs or bf16 on this GPU",
         ARCH_SOURCE),
    Rule("precision_te", "te", lambda c: c.precision in PRECISION_TE_MIN,
         lambda c: _ge(c.te, PRECISION_TE_MIN[c.precision]),
         lambda c: f"precision={c.precision} needs Transformer Engine >= "
                   f"{'.'.join(map(str, PRECISION_TE_MIN[c.precision]))} (container TE "
                   f"{'.'.join(map(str, c.te or ()))})", PRECISION_SOURCE),
    Rule("nvfp4_overlap_core", "core", lambda c: c.precision == "nvfp4" and c.overlap and c.core is not None,
         lambda c: c.core >= (0, 19, 2),
         lambda c: "precision=nvfp4 with overlap_moe_expert_parallel_comm needs Megatron-Core >= 0.19.2: before it "
                   "the overlap schedule ran the MoE layers outside the FP4 context, so the arm would silently "
                   f"measure bf16 layers (container core {'.'.join(map(str, c.core or ()))})", NVFP4_OVERLAP_SOURCE),
    # --- overlap_moe_expert_parallel_comm preconditions
    Rule("overlap_torch", "core", ovl, lambda c: _ge(c.torch, (2, 6, 0)),
         lambda c: "A2A Overlap encounters hang issue with torch version < 2.6.0 "
                   f"(container torch {'.'.join(map(str, c.torch or ()))})", OVERLAP),
    Rule("overlap_vpp", "core", lambda c: c.overlap and c.pipeline_model_parallel_size > 1,
         lambda c: c.virtual_pipeline_model_parallel_size is not None,
         lambda c: "If enabling EP A2A overlap, virtual_pipeline_model_parallel_size must be specified when "
                   f"pipeline_model_parallel_size > 1 (PP={c.pipeline_model_parallel_size}, VPP=null)", OVERLAP),
    Rule("overlap_ep", "core", ovl, lambda c: c.expert_model_parallel_size > 1,
         lambda c: "overlap_moe_expert_parallel_comm is only supported with expert model parallelism "
                   f"(expert_model_parallel_size={c.expert_model_parallel_size})", OVERLAP),
    Rule("overlap_experts", "bridge", ovl, lambda c: c.num_moe_experts > 1,
         lambda c: f"overlap_moe_expert_parallel_comm needs num_moe_experts > 1 (got {c.num_moe_experts})",
         BRIDGE_OVL),
    Rule("overlap_dispatcher", "core", ovl, lambda c: c.moe_token_dispatcher_type in ("alltoall", "flex"),
         lambda c: "overlap_moe_expert_parallel_comm is supported with alltoall/flex token dispatcher "
                   f"(got {c.moe_token_dispatcher_type})", OVERLAP),
    Rule("overlap_full_recompute", "core", ovl, lambda c: c.recompute_granularity != "full",
         lambda c: "disable full recomputation when enabling overlap_moe_expert_parallel_comm", OVERLAP),
    Rule("overlap_recompute_method", "core", ovl, lambda c: c.recompute_method is None,
         lambda c: "disable recomputation method when enabling overlap_moe_expert_parallel_comm "
                   f"(recompute_method={c.recompute_method})", OVERLAP),
    Rule("overlap_recompute_layers", "core", ovl, lambda c: c.recompute_num_layers is None,
         lambda c: "recompute_num_layers must be None when enabling overlap_moe_expert_parallel_comm", OVERLAP),
    Rule("overlap_recompute_moe", "core", ovl, lambda c: "moe" not in _modules(c),
         lambda c: "disable moe in recompute_modules when enabling overlap_moe_expert_parallel_comm "
                   f"(recompute_modules={_modules(c)})", OVERLAP),
    Rule("overlap_precision", "core", ovl, lambda c: bool(c.bf16 or c.fp16),
         lambda c: "overlap_moe_expert_parallel_comm is only supported with bf16 or fp16 model", OVERLAP),
    Rule("overlap_shared_expert", "core", ovl, lambda c: not c.moe_shared_expert_overlap,
         lambda c: "disable moe_shared_expert_overlap when enabling overlap_moe_expert_parallel_comm", OVERLAP),
    Rule("overlap_mtp", "core", ovl, lambda c: c.mtp_num_layers in (None, 0, 1),
         lambda c: "MTP supports at most one layer when enabling overlap_moe_expert_parallel_comm "
                   f"(mtp_num_layers={c.mtp_num_layers})", OVERLAP),
    Rule("overlap_mtp_pp_old_core", "core",
         lambda c: c.overlap and c.mtp_num_layers == 1 and _core_in(c, (0, 16, 0), (0, 18, 0)),
         lambda c: c.pipeline_model_parallel_size > 1,
         lambda c: "on Megatron-Core 0.16/0.17, MTP with overlap_moe_expert_parallel_comm also needs "
                   "pipeline_model_parallel_size > 1", "Megatron-Core 0.16/0.17 TransformerConfig"),
    Rule("overlap_cuda_graph_scope", "core", lambda c: c.overlap and c.cuda_graph_impl == "transformer_engine",
         lambda c: not ({"moe", "mlp"} & set(_scope(c))),
         lambda c: "CUDA graph scope on moe and mlp is not supported with overlap_moe_expert_parallel_comm "
                   f"(cuda_graph_scope={_scope(c)})", OVERLAP),
    Rule("overlap_cuda_graph_impl_old_core", "core",
         lambda c: c.overlap and c.cuda_graph_impl != "none" and _core_in(c, (0, 16, 0), (0, 18, 0)),
         lambda c: c.cuda_graph_impl == "transformer_engine",
         lambda c: "on Megatron-Core 0.16/0.17, overlap needs cuda_graph_impl none or transformer_engine",
         "Megatron-Core 0.16/0.17 TransformerConfig"),
    Rule("overlap_whole_layer_graph", "core", lambda c: c.overlap and c.cuda_graph_impl == "transformer_engine",
         lambda c: bool(_scope(c)),
         lambda c: "EP overlap must be disabled when CUDA graph captures the whole MLP/MoE part: "
                   "cuda_graph_impl=transformer_engine with an empty cuda_graph_scope graphs the whole layer, and "
                   "TransformerConfig lets it pass; the assert fires at the first graph replay (use "
                   "cuda_graph_scope=[moe_router,moe_preprocess])", WHOLE_LAYER_GRAPH_SOURCE),
    Rule("overlap_one_microbatch", "env", lambda c: c.overlap and num_microbatches(c) is not None,
         lambda c: (num_microbatches(c) or 0) > 1,
         lambda c: f"{num_microbatches(c)} micro-batch per step (global_batch_size={c.global_batch_size}, "
                   f"micro_batch_size={c.micro_batch_size}, DP={_dp(c)}): the overlap schedule overlaps n-1 of n "
                   "micro-batches, so nothing overlaps; raise global_batch_size", ONE_MICROBATCH_SOURCE, "warning"),
    Rule("overlap_deadlock_at_scale", "env",
         lambda c: c.overlap and (c.world_size or 0) >= OVERLAP_DEADLOCK_MIN_GPUS, lambda c: False,
         lambda c: f"overlap at {c.world_size} GPUs: a deadlock at scale is reported open upstream (ranks may "
                   f"launch the two EP collectives in different orders; {OVERLAP_DEADLOCK_URL}); a hang here is "
                   "classified as such, not as a slow arm", OVERLAP_DEADLOCK_URL, "warning"),
    Rule("dispatch_bwd_wgrad_excludes_overlap", "core",
         lambda c: bool(c.settings.get("overlap_dispatch_backward_with_experts_wgrad")),
         lambda c: not c.overlap and not c.delay_wgrad and _ge(c.te, (2, 3, 0)),
         lambda c: "overlap_dispatch_backward_with_experts_wgrad excludes overlap_moe_expert_parallel_comm and "
                   "delay_wgrad_compute and needs TE >= 2.3.0", EP_COMPANIONS_SOURCE),
    Rule("early_attn_release_needs_overlap", "core",
         lambda c: bool(c.settings.get("ep_overlap_early_attn_memory_release")), lambda c: c.overlap,
         lambda c: "overlap_moe_expert_parallel_comm must be enabled when enabling "
                   "ep_overlap_early_attn_memory_release", EP_COMPANIONS_SOURCE),
    Rule("deepep_pad_to_capacity", "core", lambda c: c.dispatcher == "deepep"
         and bool(c.settings.get("moe_pad_expert_input_to_capacity")), lambda c: False,
         lambda c: "Flex token dispatcher with deepep backend does not support moe_pad_expert_input_to_capacity",
         "Megatron-Core 0.19.2 megatron/core/transformer/transformer_config.py:1600-1607"),
    Rule("pad_needs_capacity_factor", "core", lambda c: bool(c.settings.get("moe_pad_expert_input_to_capacity")),
         lambda c: c.settings.get("moe_expert_capacity_factor") is not None,
         lambda c: "moe_expert_capacity_factor must be set to use moe_pad_expert_input_to_capacity",
         "Megatron-Core 0.19.2 megatron/core/transformer/transformer_config.py:1686-1690"),
    Rule("paged_stash_needs_rank_capacity", "core", lambda c: bool(c.settings.get("moe_paged_stash")),
         lambda c: c.settings.get("moe_expert_rank_capacity_factor") is not None,
         lambda c: "moe_paged_stash requires moe_expert_rank_capacity_factor to be set; there is no need to use "
                   "paged stashing without it (the capacity factor reaches the ncclep arms only)",
         "Megatron-Core 0.19.2 megatron/core/transformer/transformer_config.py:1903-1910"),
    Rule("deprecated_sm_knobs", "core", lambda c: any(c.settings.get(k) is not None
                                                      for k in ("moe_deepep_num_sms", "moe_hybridep_num_sms")),
         lambda c: c.settings.get("moe_flex_dispatcher_num_sms") is not None or len(
             {c.settings.get(k) for k in ("moe_deepep_num_sms", "moe_hybridep_num_sms")} - {None}) <= 1,
         lambda c: "Conflicting deprecated SM-count knobs moe_deepep_num_sms / moe_hybridep_num_sms; set a single "
                   "moe_flex_dispatcher_num_sms instead",
         "Megatron-Core 0.19.2 megatron/core/transformer/transformer_config.py:1616-1635"),
    Rule("deprecated_sm_knob_used", "core", lambda c: any(c.settings.get(k) is not None
                                                          for k in ("moe_deepep_num_sms", "moe_hybridep_num_sms")),
         lambda c: False,
         lambda c: "moe_deepep_num_sms / moe_hybridep_num_sms are deprecated on Megatron-Core 0.19.2 (routed to "
                   "moe_flex_dispatcher_num_sms): set model.moe_flex_dispatcher_num_sms instead",
         "Megatron-Core 0.19.2 megatron/core/transformer/transformer_config.py:1616-1628", "warning"),
    Rule("shared_expert_overlap_dispatcher", "core", lambda c: bool(c.moe_shared_expert_overlap),
         lambda c: c.moe_token_dispatcher_type in ("alltoall", "flex"),
         lambda c: "moe_shared_expert_overlap only works with alltoall or flex token dispatcher (the model profile "
                   f"sets it; dispatcher {c.moe_token_dispatcher_type})", SHARED_OVERLAP_SOURCE),
    Rule("hybridep_padded_dispatch", "bridge", lambda c: c.dispatcher == "hybridep" and c.cuda_graph_impl == "none"
         and c.bridge is not None and (0, 6, 0) <= c.bridge < (0, 6, 2), lambda c: False,
         lambda c: f"Megatron-Bridge {'.'.join(map(str, c.bridge or ()))} forces the padded HybridEP dispatch "
                   "(moe_hybridep_pad_uneven_dispatch_inputs=true, a host sync per dispatch) on every eager run; "
                   "0.6.2 keeps it for packed THD sequences only: this arm measures the slow path",
         HYBRIDEP_PAD_SOURCE, "warning"),
    # --- CUDA-graph scopes on an all-MoE model (held against real core by the conformance test)
    Rule("graph_scope_moe_router_both", "core", lambda c: _graphs(c),
         lambda c: not {"moe", "moe_router"} <= set(_scope(c)),
         lambda c: "cuda_graph_modules must not contain both moe and moe_router.", GRAPHS),
    Rule("graph_scope_preprocess", "core", lambda c: _graphs(c) and "moe_preprocess" in _scope(c),
         lambda c: c.cuda_graph_impl == "local" or "moe_router" in _scope(c),
         lambda c: "moe_preprocess cuda graph is only supported with moe_router cuda graph.", GRAPHS),
    Rule("graph_preprocess_dtoh", "core",
         lambda c: _graphs(c) and c.num_moe_experts > 1 and "moe_preprocess" in _scope(c)
         and c.moe_token_dispatcher_type == "alltoall" and c.settings.get("moe_expert_capacity_factor") is not None
         and not c.settings.get("moe_pad_expert_input_to_capacity"), lambda c: False,
         lambda c: "moe_preprocess cuda graph is not supported when there are DtoH copies and synchronizations in "
                   "the preprocess step. (alltoall with moe_expert_capacity_factor and no padding to capacity)",
         "Megatron-Core 0.19.2 megatron/core/transformer/transformer_config.py:2504-2518"),
    Rule("graph_full_recompute", "core", lambda c: _graphs(c) and c.recompute_granularity == "full",
         lambda c: False,
         lambda c: "full recompute is only supported with full iteration CUDA graph. (cuda_graph_impl="
                   f"{c.cuda_graph_impl}, recompute_granularity=full)",
         "Megatron-Core 0.19.2 megatron/core/transformer/transformer_config.py:2521-2525"),
    Rule("graph_moe_recompute_router", "core",
         lambda c: c.cuda_graph_impl == "transformer_engine" and c.recompute_granularity == "selective"
         and "moe" in _modules(c), lambda c: "moe_router" not in _scope(c),
         lambda c: "moe recompute is not supported with moe_router CUDA graph with: --cuda-graph-impl "
                   "transformer_engine.", "Megatron-Core 0.19.2 megatron/core/transformer/transformer_config.py:2529-2535"),
    Rule("graph_recompute_dropout", "core",
         lambda c: _graphs(c) and c.recompute_granularity == "selective",
         lambda c: not _graphed_recompute_with_dropout(c),
         lambda c: _graphed_recompute_with_dropout(c) or "",
         "Megatron-Core 0.19.2 megatron/core/transformer/transformer_config.py:2538-2566 (dropout defaults 0.1, "
         ":181/:184; a recipe that sets dropout 0 passes)"),
    Rule("graph_scope_mlp", "core", lambda c: _graphs(c) and c.num_moe_experts > 1, lambda c: "mlp" not in _scope(c),
         lambda c: "mlp cuda graph is only supported for dense layers, but not found in the model. "
                   "(every layer of these model profiles is an MoE layer)", GRAPHS),
    Rule("graph_scope_moe", "core", lambda c: _graphs(c) and c.num_moe_experts > 1, lambda c: "moe" not in _scope(c),
         lambda c: "moe cuda graph is only supported with drop-padding MoE. (use moe_router/moe_preprocess)",
         GRAPHS),
    Rule("overlap_max_connections", "env", ovl,
         lambda c: str(c.env.get("CUDA_DEVICE_MAX_CONNECTIONS", "")).strip().isdigit()
         and int(c.env["CUDA_DEVICE_MAX_CONNECTIONS"]) > 1,
         lambda c: "CUDA_DEVICE_MAX_CONNECTIONS should be exported > 1 in the job environment with overlap "
                   f"(got {c.env.get('CUDA_DEVICE_MAX_CONNECTIONS')!r}); published: 32 vs 1 gave +7.8% vs +3.7%",
         "FACTS §2 performance note", "warning"),
    Rule("overlap_small_ep", "env", lambda c: c.overlap and c.expert_model_parallel_size > 1,
         lambda c: not (c.expert_model_parallel_size <= 4 and c.nodes <= 2),
         lambda c: f"small EP ({c.expert_model_parallel_size}) on {c.nodes} node(s): overlap is often flat or "
                   "slower here (published gains are at EP >= 8)", "FACTS §7", "warning"),
    # --- delay_wgrad_compute
    Rule("delay_wgrad_needs_overlap", "core", dw, lambda c: c.overlap,
         lambda c: "overlap_moe_expert_parallel_comm must be enabled when enabling delay_wgrad_compute",
         "Megatron-Core TransformerConfig delay_wgrad_compute check"),
    Rule("delay_wgrad_te_2_3", "te", dw, lambda c: _ge(c.te, (2, 3, 0)),
         lambda c: "delay_wgrad_compute needs Transformer Engine >= 2.3.0", "Megatron-Core layer build (TE 2.3)"),
    Rule("delay_wgrad_te_2_7", "bridge",
         lambda c: c.delay_wgrad and bool(c.overlap_grad_reduce or c.gradient_accumulation_fusion),
         lambda c: _ge(c.te, (2, 7, 0)),
         lambda c: "delay_wgrad_compute with overlap_grad_reduce or gradient_accumulation_fusion needs Transformer "
                   "Engine >= 2.7.0", "Megatron-Bridge comm_overlap TE check (TE 2.7)"),
    Rule("delay_wgrad_te_2_10", "core",
         lambda c: c.delay_wgrad and c.cuda_graph_impl == "transformer_engine" and _ge(c.core, (0, 16, 0)),
         lambda c: _ge(c.te, (2, 10, 0)),
         lambda c: "TE version >= 2.10.0 is required for delay_wgrad_compute with partial cuda graph",
         "Megatron-Core TransformerConfig (core >= 0.16)"),
    Rule("delay_wgrad_te_2_12", "bridge",
         lambda c: c.delay_wgrad and ("attn" in _scope(c) or (
             "moe_router" in _scope(c) and c.moe_shared_expert_intermediate_size is not None
             and not c.moe_shared_expert_overlap)),
         lambda c: _ge(c.te, (2, 12, 0)) and bool(c.gradient_accumulation_fusion)
         and not ("attn" in _scope(c) and (c.add_bias_linear or c.add_qkv_bias)),
         lambda c: "CUDA graph with delay_wgrad_compute (graphed modules attn, or moe_router with non-overlapped "
                   "shared experts) requires TE >= 2.12.0 and gradient_accumulation_fusion; with attn graphed, no "
                   "attention bias", "Megatron-Bridge 0.6.2 training/comm_overlap.py:537-557 (keys on the graphed "
                   "modules, whatever cuda_graph_impl)"),
    Rule("te_unknown", "te", lambda c: c.delay_wgrad and c.te is None, lambda c: False,
         lambda c: "the container profile has no Transformer Engine version: the TE minimums for "
                   "delay_wgrad_compute were not checked here (the real check runs inside the container)",
         "FACTS §2 TE table", "warning"),
    # --- world-size arithmetic
    Rule("world_mp", "world", lambda c: c.world_size is not None,
         lambda c: c.world_size % (c.tensor_model_parallel_size * c.pipeline_model_parallel_size
                                   * c.context_parallel_size) == 0,
         lambda c: f"TP*PP*CP = {c.tensor_model_parallel_size}*{c.pipeline_model_parallel_size}*"
                   f"{c.context_parallel_size} does not divide the world size {c.world_size}",
         "Megatron-Core parallel_state.initialize_model_parallel"),
    Rule("world_ep", "world", lambda c: c.world_size is not None,
         lambda c: c.world_size % (c.expert_tensor_parallel_size * c.expert_model_parallel_size
                                   * c.pipeline_model_parallel_size) == 0,
         lambda c: f"ETP*EP*PP = {c.expert_tensor_parallel_size}*{c.expert_model_parallel_size}*"
                   f"{c.pipeline_model_parallel_size} does not divide the world size {c.world_size}; "
                   f"set model.expert_model_parallel_size={fitting_ep(c.settings, c.world_size)} to fit "
                   f"{c.world_size} GPU(s), or run on a multiple of {_ep_ranks(c.settings)} GPUs "
                   "(cluster.gpus_per_node / cluster.nodes)",
         "Megatron-Core parallel_state.initialize_model_parallel (expert groups)"),
    Rule("experts_ep", "world", always, lambda c: c.num_moe_experts % c.expert_model_parallel_size == 0,
         lambda c: f"num_moe_experts={c.num_moe_experts} is not divisible by expert_model_parallel_size="
                   f"{c.expert_model_parallel_size}", "Megatron-Core MoELayer at model build (experts % EP)"),
    Rule("gbs_dp", "world", lambda c: _dp(c) is not None,
         lambda c: c.global_batch_size % (c.micro_batch_size * _dp(c)) == 0,
         lambda c: f"global_batch_size={c.global_batch_size} is not divisible by micro_batch_size*DP = "
                   f"{c.micro_batch_size}*{_dp(c)}", "Megatron-Core num_microbatches_calculator"),
    Rule("layers_pp", "core", lambda c: c.pipeline_model_parallel_size > 1, _pipeline_layers_ok,
         lambda c: f"num_layers={c.num_layers} cannot be split evenly over PP={c.pipeline_model_parallel_size}"
                   f" x VPP={c.virtual_pipeline_model_parallel_size or 1} (after first/last-stage layers and "
                   "embedding/loss accounting)", "Megatron-Core TransformerConfig pipeline split"),
    Rule("heads_tp", "core", always, lambda c: c.num_attention_heads % c.tensor_model_parallel_size == 0,
         lambda c: f"num_attention_heads={c.num_attention_heads} is not divisible by tensor_model_parallel_size="
                   f"{c.tensor_model_parallel_size}", "Megatron-Core TransformerConfig heads % TP"),
    Rule("query_groups_tp", "core", lambda c: c.num_query_groups is not None,
         lambda c: c.num_query_groups % c.tensor_model_parallel_size == 0,
         lambda c: f"num_query_groups={c.num_query_groups} is not divisible by tensor_model_parallel_size="
                   f"{c.tensor_model_parallel_size}", "Megatron-Core TransformerConfig query groups % TP"),
    # Megatron-Core 0.19.2 checks these at the model build or the first step, not in TransformerConfig; validate
    # mode runs the same checks (experiments/payload/build_checks.py)
    Rule("router_topk_experts", "core", lambda c: bool(c.num_moe_experts),
         lambda c: 1 <= (c.moe_router_topk or 0) <= c.num_moe_experts,
         lambda c: f"moe_router_topk={c.moe_router_topk} cannot pick from num_moe_experts={c.num_moe_experts}: the "
                   "router's torch.topk(logits, k) needs 1 <= k <= experts",
         "Megatron-Core megatron/core/transformer/moe/router.py:305 (torch.topk over the experts' logits)"),
    Rule("kv_channels_positive", "core", lambda c: c.settings.get("kv_channels") is not None,
         lambda c: c.kv_channels >= 1,
         lambda c: f"kv_channels={c.kv_channels} gives attention heads of size {c.kv_channels}; use >= 1 or null",
         "Megatron-Core megatron/core/transformer/dot_product_attention.py:85 (1 / sqrt(head size))"),
    Rule("heads_query_groups", "core", lambda c: bool(c.settings.get("num_query_groups")),
         lambda c: c.num_attention_heads % c.num_query_groups == 0,
         lambda c: f"num_attention_heads={c.num_attention_heads} is not divisible by num_query_groups="
                   f"{c.num_query_groups}",
         "Megatron-Core megatron/core/transformer/dot_product_attention.py:169 (each key/value head repeated "
         "heads // groups times)"),
    # --- size-dependent rules
    Rule("hybridep_tokens_per_rank", "world", lambda c: c.dispatcher == "hybridep" and hybridep_nodes(c) > 1,
         lambda c: tokens_per_rank(c) <= HYBRIDEP_MAX_TOKENS_PER_RANK,
         lambda c: f"HybridEP across {hybridep_nodes(c)} NVLink domains supports at most "
                   f"{HYBRIDEP_MAX_TOKENS_PER_RANK} tokens per rank (IB tx_depth = 3 x tokens + 1 < "
                   f"{HYBRIDEP_MAX_TX_DEPTH}); seq_length*micro_batch_size/(TP*CP) = {c.seq_length}*"
                   f"{c.micro_batch_size}/({c.tensor_model_parallel_size}*{c.context_parallel_size}) = "
                   f"{tokens_per_rank(c)}: lower micro_batch_size or seq_length, or raise TP/CP", HYBRIDEP_SOURCE),
    Rule("hopper_tp_overlap_connections", "env",
         lambda c: c.overlap and _arch_before_blackwell(c)
         and (c.tensor_model_parallel_size > 1 or c.context_parallel_size > 1),
         lambda c: False,
         lambda c: f"on {c.gpu_type} (Hopper and before) TP={c.tensor_model_parallel_size} / "
                   f"CP={c.context_parallel_size} wants CUDA_DEVICE_MAX_CONNECTIONS=1 while "
                   "overlap_moe_expert_parallel_comm wants a larger value (got "
                   f"{c.env.get('CUDA_DEVICE_MAX_CONNECTIONS')!r}): one of the two overlaps loses; Megatron warns "
                   "'For Hopper and before, try not to use tensor model parallelism or context parallelism with "
                   "overlap_moe_expert_parallel_comm'", HOPPER_TP_OVERLAP_SOURCE, "warning"),
)


def evaluate(ctx: RuleContext, scopes: tuple[str, ...] | None = None) -> list[Finding]:
    """Run every rule (or those of ``scopes``) on ``ctx``; return the violated ones, errors first."""
    out = []
    for r in RULES:
        if scopes is not None and r.scope not in scopes:
            continue
        if r.when(ctx) and not r.ok(ctx):
            out.append(Finding(r.id, r.scope, r.severity, r.message(ctx), r.source))
    return sorted(out, key=lambda f: f.severity != "error")


def min_world_size(settings: dict[str, Any]) -> int:
    """Smallest world size that the model's parallel sizes need: lcm(TP*PP*CP, ETP*EP*PP) (CONTRACTS §9)."""
    s = settings
    mp = s["tensor_model_parallel_size"] * s["pipeline_model_parallel_size"] * s["context_parallel_size"]
    ep = s["expert_tensor_parallel_size"] * s["expert_model_parallel_size"] * s["pipeline_model_parallel_size"]
    return math.lcm(mp, ep)


def _ep_ranks(settings: dict[str, Any]) -> int:
    return (settings["expert_tensor_parallel_size"] * settings["expert_model_parallel_size"]
            * settings["pipeline_model_parallel_size"])


def fitting_ep(settings: dict[str, Any], world_size: int) -> int:
    """The largest expert_model_parallel_size <= the settings' own that fits ``world_size`` ranks: ETP*EP*PP
    divides the world size (Megatron-Core expert groups) and EP divides num_moe_experts (MoELayer). At least 1.
    """
    etp, pp = settings["expert_tensor_parallel_size"], settings["pipeline_model_parallel_size"]
    for ep in range(settings["expert_model_parallel_size"], 1, -1):
        if world_size % (etp * ep * pp) == 0 and settings["num_moe_experts"] % ep == 0:
            return ep
    return 1
