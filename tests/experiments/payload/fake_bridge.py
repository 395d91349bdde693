"""A stand-in for Megatron-Bridge, for unit tests only.

Megatron-Bridge cannot be imported here (it needs Transformer Engine), so these tests exercise the payload's
config plumbing against this fake. The real Megatron-Bridge path (recipe build, ``runtime_config_update``,
``pretrain`` on a GPU) is exercised on the lent H200 by the H200 issue, not here.

What the fake keeps from the real library (Megatron-Bridge 0.6, read from its source):
- the model provider defers Megatron-Core's ``TransformerConfig.__post_init__`` to ``finalize()`` (here it is the
  real Megatron-Core class, so the real Core checks run);
- ``runtime_config_update`` resolves mixed precision, lets ``CommOverlapConfig`` overwrite the model's overlap
  flags, finalises the model and runs the flex GPU check;
- ``apply_flex_dispatcher_backend`` falls back to alltoall with a warning on an unsupported GPU and forces
  ``moe_shared_expert_overlap`` off otherwise;
- ``pretrain`` fires ``on_train_start`` callbacks with the finalised config and the model chunks.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import torch
from megatron.core.transformer import TransformerConfig

from experiments.payload.bridge_api import BridgeAPI

GPU = {"name": "NVIDIA H200", "major": 9}  # what the fake's torch.cuda.get_device_properties(0) reports
STATE: dict[str, Any] = {}
_log = logging.getLogger("megatron.bridge.training.flex_dispatcher_backend")


@dataclass
class FakeProvider(TransformerConfig):
    """GPTModelProvider-like: Megatron-Core TransformerConfig with post-init deferred to finalize()."""

    seq_length: int = 1024
    vocab_size: int | None = None
    position_embedding_type: str = "learned_absolute"
    rotary_base: int = 10000
    share_embeddings_and_output_weights: bool = True

    def __post_init__(self) -> None:
        pass

    def finalize(self) -> None:
        TransformerConfig.__post_init__(self)


class Bag:
    """A plain config object with the attributes it was given."""

    def __init__(self, **kw: Any):
        self.__dict__.update(kw)


@dataclass
class FakeCommOverlapConfig:
    tp_comm_overlap: bool
    overlap_grad_reduce: bool | None = None
    overlap_moe_expert_parallel_comm: bool | None = None
    delay_wgrad_compute: bool | None = None
    data_parallel_size: int | None = None


@dataclass
class FakeContainer:
    model: Any
    train: Any
    validation: Any = None
    optimizer: Any = None
    scheduler: Any = None
    ddp: Any = None
    dataset: Any = None
    logger: Any = None
    tokenizer: Any = None
    checkpoint: Any = None
    rng: Any = None
    dist: Any = None
    comm_overlap: Any = None
    mixed_precision: Any = "bf16_mixed"
    env_vars: dict[str, Any] = field(default_factory=dict)


def mixed_precision(name: str) -> Bag:
    if name not in ("bf16_mixed", "fp16_mixed"):
        raise ValueError(f"unknown mixed precision {name}")
    return Bag(bf16=name == "bf16_mixed", fp16=name == "fp16_mixed")


def apply_flex(model: Any, backend: str | None = None) -> None:
    if backend == "deepep" and GPU["major"] not in (8, 9):
        _log.warning(f"DeepEP is only applicable to Ampere, Hopper, and Blackwell (B200/B300) GPUs. "
                     f"Current GPU: {GPU['name']}. Falling back to alltoall.")
        model.moe_token_dispatcher_type, model.moe_flex_dispatcher_backend = "alltoall", None
        return
    if backend not in ("deepep", "hybridep"):
        _log.warning("Not a valid flex dispatcher backend. Skipping flex dispatcher backend configuration.")
        return
    model.moe_token_dispatcher_type, model.moe_flex_dispatcher_backend = "flex", backend
    model.moe_shared_expert_overlap = False


def runtime_config_update(cfg: Any) -> None:
    if isinstance(cfg.mixed_precision, str):
        cfg.mixed_precision = mixed_precision(cfg.mixed_precision)
    if cfg.mixed_precision is not None:
        cfg.model.bf16, cfg.model.fp16 = cfg.mixed_precision.bf16, cfg.mixed_precision.fp16
        cfg.model.params_dtype = cfg.model.pipeline_dtype = torch.bfloat16 if cfg.model.bf16 else torch.float16
    if cfg.comm_overlap is not None:  # Bridge: CommOverlapConfig overwrites the model's copies
        for key in ("overlap_moe_expert_parallel_comm", "delay_wgrad_compute"):
            setattr(cfg.model, key, bool(getattr(cfg.comm_overlap, key)))
    cfg.model.finalize()
    if cfg.model.moe_token_dispatcher_type == "flex" and cfg.model.moe_flex_dispatcher_backend == "deepep" \
            and GPU["major"] not in (8, 9):
        raise ValueError(f"DeepEP is supported for Ampere, Hopper, and Blackwell (B200/B300) GPUs. "
                         f"Current GPU: {GPU['name']}")


class FakeCallback:
    def on_train_start(self, context: Any) -> None:
        pass


DISPATCHERS = {"alltoall": "MoEAlltoAllTokenDispatcher", "allgather": "MoEAllGatherTokenDispatcher",
               "flex": "MoEFlexTokenDispatcher"}


class FakeChunk:
    """A model chunk whose MoE layer holds a dispatcher of the configured (or a forced) class."""

    def __init__(self, dispatcher_class: str):
        self.layer = SimpleNamespace(token_dispatcher=type(dispatcher_class, (), {})())

    def modules(self) -> list[Any]:
        return [self, self.layer]


def pretrain(cfg: Any, forward_step: Any, callbacks: list[Any] | None = None) -> None:
    runtime_config_update(cfg)
    if STATE.get("raise_in_setup"):
        raise STATE["raise_in_setup"]
    built = STATE.get("force_dispatcher_class") or DISPATCHERS[cfg.model.moe_token_dispatcher_type]
    context = SimpleNamespace(state=SimpleNamespace(cfg=cfg), model=[FakeChunk(built)])
    for cb in callbacks or []:
        cb.on_train_start(context)
    STATE["trained_iters"] = cfg.train.train_iters
    STATE["trained_cfg"] = cfg


def fake_api(**over: Any) -> BridgeAPI:
    """A BridgeAPI whose members are the fakes above (``over`` replaces members)."""
    kw: dict[str, Any] = dict(
        version="0.6.2-fake", ConfigContainer=FakeContainer, GPTModelProvider=FakeProvider,
        CommOverlapConfig=FakeCommOverlapConfig, TrainingConfig=Bag, ValidationConfig=Bag,
        DistributedDataParallelConfig=Bag, GPTDatasetConfig=Bag, LoggerConfig=Bag, TokenizerConfig=Bag,
        CheckpointConfig=Bag, RNGConfig=lambda seed: Bag(seed=seed, te_rng_tracker=False),
        DistributedInitConfig=Bag, OptimizerConfig=Bag, SchedulerConfig=Bag, apply_flex_dispatcher_backend=apply_flex,
        runtime_config_update=runtime_config_update, get_mixed_precision_config=mixed_precision,
        pretrain=pretrain, forward_step=lambda *a: None, pretrain_module=None, Callback=FakeCallback,
        set_cuda_graph_modules=None, AutoBridge=None,
    )
    kw.update(over)
    return BridgeAPI(**kw)


def recipe_container(**model_over: Any) -> FakeContainer:
    """What a library recipe returns: Qwen3-ish model with the recipe's own defaults, ``comm_overlap=None``."""
    model = FakeProvider(num_layers=48, hidden_size=2048, num_attention_heads=32, num_moe_experts=128,
                         moe_router_topk=8, expert_model_parallel_size=16, moe_token_dispatcher_type="alltoall",
                         **model_over)
    return FakeContainer(
        model=model,
        train=Bag(train_iters=300000, global_batch_size=1024, micro_batch_size=1),
        validation=Bag(eval_interval=500, eval_iters=32), optimizer=Bag(),
        scheduler=Bag(lr_warmup_iters=500, lr_decay_iters=None),
        ddp=Bag(overlap_grad_reduce=True), dataset=Bag(seq_length=4096, blend=None, blend_per_split=None,
                                                       random_seed=1),
        logger=Bag(log_interval=10, log_throughput=False, tensorboard_dir="/somewhere/tb"),
        tokenizer=Bag(tokenizer_model="Qwen/Qwen3-30B-A3B"),
        checkpoint=Bag(save="/somewhere/ckpt", load="/somewhere/ckpt", save_interval=500),
        rng=Bag(seed=1, te_rng_tracker=False), dist=Bag(), comm_overlap=None, mixed_precision="bf16_mixed",
    )


# Recipe functions named by dotted path in tests ("tests.experiments.payload.fake_bridge.<name>").
def plain_pretrain_config() -> FakeContainer:
    return recipe_container()


def overlap_on_pretrain_config() -> FakeContainer:
    """A recipe that already switched overlap on, on the model AND on its CommOverlapConfig (CASES C03)."""
    cfg = recipe_container(overlap_moe_expert_parallel_comm=True, delay_wgrad_compute=True)
    cfg.comm_overlap = FakeCommOverlapConfig(tp_comm_overlap=True, overlap_moe_expert_parallel_comm=True,
                                             delay_wgrad_compute=True)
    return cfg


def shared_overlap_pretrain_config() -> FakeContainer:
    """A recipe whose model default turns moe_shared_expert_overlap on (CASES C02)."""
    return recipe_container(moe_shared_expert_intermediate_size=1024, moe_shared_expert_overlap=True)


class LocalEntryNotFoundError(Exception):
    """Same class name as huggingface_hub.errors.LocalEntryNotFoundError."""


def offline_pretrain_config() -> FakeContainer:
    try:
        raise LocalEntryNotFoundError("Cannot find the requested files in the local cache")
    except LocalEntryNotFoundError as e:
        raise OSError("We couldn't connect to 'https://huggingface.co' to load the files of Qwen/Qwen3-30B-A3B") from e


def hf_path_pretrain_config(hf_path: str = "Qwen/Qwen3-30B-A3B") -> FakeContainer:
    """A Bridge <= 0.3 style recipe that takes hf_path."""
    cfg = recipe_container()
    cfg.tokenizer.tokenizer_model = hf_path
    STATE["recipe_hf_path"] = hf_path
    return cfg


class FakeAutoBridge:
    """AutoBridge.from_hf_pretrained(id, revision=...) that only works offline for a local folder."""

    @classmethod
    def from_hf_pretrained(cls, path: str, **kw: Any) -> Any:
        STATE.setdefault("hf_loads", []).append((path, kw))
        if not str(path).startswith("/"):
            raise OSError(f"We couldn't connect to 'https://huggingface.co' to load {path}")
        return SimpleNamespace(to_megatron_provider=lambda load_weights=False: recipe_container().model)


def autobridge_pretrain_config() -> FakeContainer:
    """A Bridge >= 0.4 style recipe: no arguments, hard-coded model id and revision."""
    cfg = recipe_container()
    cfg.model = FakeAutoBridge.from_hf_pretrained("Qwen/Qwen3-30B-A3B", revision="ad44e77").to_megatron_provider()
    return cfg


def field_names(obj: Any) -> set[str]:
    return {f.name for f in dataclasses.fields(obj)}
