"""Build a Megatron-Bridge ``ConfigContainer`` for one variant and make the variant's settings real on it.

Sources (Megatron-Bridge 0.6, FACTS §1-§3):
- overlap and delay_wgrad live on ``cfg.comm_overlap`` (a ``CommOverlapConfig``); during setup its values overwrite
  the model's copies, and many recipes leave it ``None`` (CASES C03), so it is created when missing and both flags
  are always set explicitly;
- setting ``moe_flex_dispatcher_backend`` alone does not switch to flex: ``apply_flex_dispatcher_backend`` does,
  and it silently falls back to alltoall on an unsupported GPU (CASES C05), which the effective-config comparison
  then reports;
- ``moe_shared_expert_overlap`` must be off with overlap (Megatron-Core/Bridge checks; CASES C02).
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from experiments.payload.bridge_api import GPT_PROVIDER, BridgeAPI, call_recipe, resolve_recipe
from experiments.payload.errors import UnknownField
from experiments.payload.spec import LIBRARY_DEFAULT_WHEN_NONE, VariantSpec

TRAIN_SETTINGS = ("global_batch_size", "micro_batch_size")  # -> cfg.train
DDP_SETTINGS = ("overlap_grad_reduce",)  # -> cfg.ddp (and cfg.comm_overlap, whose value would win)
COMM_OVERLAP_SETTINGS = ("overlap_moe_expert_parallel_comm", "delay_wgrad_compute")  # -> cfg.comm_overlap
DISPATCH_SETTINGS = ("moe_token_dispatcher_type", "moe_flex_dispatcher_backend")  # -> dispatcher logic
FLEX_LOGGER = "megatron.bridge.training.flex_dispatcher_backend"

# Qwen3-MoE-like blocks for model.recipe=gpt_provider (shared/tools/h200_bringup/tiny_moe_pretrain.py, which
# trained for real with Megatron-Bridge 0.6.2 on an H200). Shape and parallelism come from the settings.
QWEN3_LIKE = {
    "normalization": "RMSNorm", "gated_linear_unit": True, "qk_layernorm": True,
    "position_embedding_type": "rope", "rotary_base": 1000000, "share_embeddings_and_output_weights": False,
    "hidden_dropout": 0.0, "attention_dropout": 0.0, "init_method_std": 0.02, "moe_grouped_gemm": True,
    "moe_router_load_balancing_type": "aux_loss", "moe_aux_loss_coeff": 1e-3, "moe_router_pre_softmax": False,
    "moe_permute_fusion": False,
}


@dataclass
class Applied:
    """What :func:`apply_variant` did: the payload's own ``adjustments`` (CONTRACTS §6), ``notes`` for the log,
    and ``library_messages`` Megatron-Bridge logged while applying (e.g. its flex fallback warning)."""

    adjustments: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    library_messages: list[str] = field(default_factory=list)


def model_config_of(cfg: Any) -> Any:
    """The TransformerConfig-like object of ``cfg.model`` (a provider, or the ``.transformer`` of a model config)."""
    inner = getattr(cfg.model, "transformer", None)
    return inner if inner is not None and hasattr(inner, "num_moe_experts") else cfg.model


def _field_names(obj: Any) -> set[str] | None:
    if dataclasses.is_dataclass(obj):
        return {f.name for f in dataclasses.fields(obj)}
    return None


def _has(obj: Any, name: str) -> bool:
    names = _field_names(obj)
    return name in names if names is not None else hasattr(obj, name)


def _target(cfg: Any, api: BridgeAPI, key: str) -> Any:
    if key in TRAIN_SETTINGS:
        return cfg.train
    if key in DDP_SETTINGS:
        return cfg.ddp
    if key in COMM_OVERLAP_SETTINGS:
        return cfg.comm_overlap if cfg.comm_overlap is not None else api.CommOverlapConfig
    return model_config_of(cfg)


def check_fields(cfg: Any, spec: VariantSpec, api: BridgeAPI) -> None:
    """Every setting must exist where the payload puts it; otherwise setting it would be silently ignored.

    Raises:
        UnknownField: names each missing setting, the class, the Megatron-Bridge version and close matches.
    """
    problems = []
    for key in spec.settings:
        if spec.settings[key] is None and key in LIBRARY_DEFAULT_WHEN_NONE:
            continue
        target = _target(cfg, api, key)
        if key == "cuda_graph_scope" and (_has(target, key) or _has(target, "cuda_graph_modules")):
            continue
        if not _has(target, key):
            names = sorted(_field_names(target) or [n for n in dir(target) if not n.startswith("_")])
            close = difflib.get_close_matches(key, names, n=3)
            cls = target.__name__ if isinstance(target, type) else type(target).__name__
            problems.append(f"{key!r} does not exist on {cls}" + (f" (close: {', '.join(close)})" if close else ""))
    if problems:
        raise UnknownField(f"on Megatron-Bridge {api.version}: {'; '.join(problems)}")


def build_config(spec: VariantSpec, api: BridgeAPI) -> tuple[Any, list[str]]:
    """The un-finalised ConfigContainer for ``spec.recipe`` (before :func:`apply_variant`). Returns ``(cfg, notes)``.

    Raises:
        UnknownRecipe, HFUnreachable: see :func:`experiments.payload.bridge_api.call_recipe`.
    """
    if spec.recipe == GPT_PROVIDER:
        return gpt_provider_config(spec, api), ["model built from settings as a GPTModelProvider (Qwen3-like)"]
    return call_recipe(resolve_recipe(spec.recipe), spec.hf_path, api)


def adam_cosine(api: BridgeAPI, *, warmup_iters: int, decay_iters: int, max_lr: float = 3e-4,
                min_lr: float = 3e-5) -> tuple[Any, Any]:
    """The benchmark's optimizer and schedule, built from Megatron-Bridge's own config classes
    (``megatron.bridge.training.config.OptimizerConfig`` / ``SchedulerConfig``): distributed Adam in bf16 (betas
    0.9 / 0.95, eps 1e-8, weight decay 0.1 held constant at 0.033 by the scheduler, gradient clipping at 1.0), a
    linear warm-up over ``warmup_iters`` and a cosine decay to ``min_lr`` over ``decay_iters``. These are the
    values of Bridge 0.6.2's recipe helper ``distributed_fused_adam_with_cosine_annealing``
    (megatron/bridge/recipes/utils/optimizer_utils.py, lines 100-167); the helper itself is not imported, since
    importing anything under ``megatron.bridge.recipes`` runs that package's ``__init__``, which imports every
    model family's recipes."""
    opt = api.OptimizerConfig(optimizer="adam", lr=max_lr, min_lr=min_lr, weight_decay=0.1, bf16=True, fp16=False,
                              adam_beta1=0.9, adam_beta2=0.95, adam_eps=1e-8, use_distributed_optimizer=True,
                              clip_grad=1.0)
    sched = api.SchedulerConfig(start_weight_decay=0.033, end_weight_decay=0.033, weight_decay_incr_style="constant",
                                lr_decay_style="cosine", lr_warmup_iters=warmup_iters, lr_warmup_init=0.0,
                                lr_decay_iters=decay_iters, override_opt_param_scheduler=True)
    return opt, sched


def gpt_provider_config(spec: VariantSpec, api: BridgeAPI) -> Any:
    """A ConfigContainer around a GPTModelProvider with :data:`QWEN3_LIKE` blocks, mock data and NullTokenizer.

    The settings themselves are applied afterwards by :func:`apply_variant` (so every model goes through the same
    code); ``comm_overlap`` starts as ``None`` on purpose, like most library recipes.
    """
    import torch.nn.functional as F

    s = spec.settings
    model = api.GPTModelProvider(activation_func=F.silu, **QWEN3_LIKE)
    opt, sched = adam_cosine(api, warmup_iters=max(1, spec.train_iters // 10), decay_iters=spec.train_iters)
    return api.ConfigContainer(
        model=model,
        train=api.TrainingConfig(train_iters=spec.train_iters, global_batch_size=s["global_batch_size"],
                                 micro_batch_size=s["micro_batch_size"]),
        validation=api.ValidationConfig(eval_interval=None, eval_iters=0),
        optimizer=opt,
        scheduler=sched,
        ddp=api.DistributedDataParallelConfig(check_for_nan_in_grad=True, grad_reduce_in_fp32=True,
                                              overlap_grad_reduce=bool(s.get("overlap_grad_reduce")),
                                              overlap_param_gather=False, use_distributed_optimizer=True),
        dataset=api.GPTDatasetConfig(random_seed=spec.seed, seq_length=s["seq_length"], blend=None,
                                     blend_per_split=None, split="9999,8,2", dataloader_type="single",
                                     reset_position_ids=False, reset_attention_mask=False, eod_mask_loss=False,
                                     num_dataset_builder_threads=1, skip_getting_attention_mask_from_dataset=True),
        logger=api.LoggerConfig(log_interval=spec.log_interval, log_throughput=True, tensorboard_dir=None),
        tokenizer=api.TokenizerConfig(tokenizer_type="NullTokenizer", vocab_size=s["vocab_size"]),
        checkpoint=api.CheckpointConfig(save=None, load=None, save_interval=None),
        rng=api.RNGConfig(seed=spec.seed),
        dist=api.DistributedInitConfig(),
        comm_overlap=None,
        mixed_precision="bf16_mixed" if s.get("bf16") else "fp16_mixed" if s.get("fp16") else None,
    )


@contextlib.contextmanager
def capture_logs(name: str) -> Iterator[list[str]]:
    """Collect WARNING+ messages logged by ``logging.getLogger(name)`` (and its children) inside the block."""
    records: list[str] = []

    class _Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record.getMessage())

    logger, handler = logging.getLogger(name), _Keep(level=logging.WARNING)
    # a host process (e.g. NeMo-Run's log_level=ERROR) may have raised levels or disabled logging: the warning
    # must still be seen here, so lower them for the block and restore them afterwards
    family = [logger] + [lg for n, lg in list(logging.root.manager.loggerDict.items())
                         if n.startswith(name + ".") and isinstance(lg, logging.Logger)]
    saved = [(lg, lg.level) for lg in family if lg.level > logging.WARNING or lg is logger]
    saved_disable = logging.root.manager.disable
    for lg, _ in saved:
        if lg.getEffectiveLevel() > logging.WARNING:
            lg.setLevel(logging.WARNING)
    if saved_disable >= logging.WARNING:
        logging.disable(logging.NOTSET)
    logger.addHandler(handler)
    try:
        yield records
    finally:
        logger.removeHandler(handler)
        for lg, level in saved:
            lg.setLevel(level)
        logging.disable(saved_disable)


def apply_variant(cfg: Any, spec: VariantSpec, api: BridgeAPI) -> Applied:
    """Make every variant setting real on ``cfg`` (in place), then apply the benchmark settings.

    Raises:
        UnknownField: a setting does not exist on this Megatron-Bridge version.
    """
    check_fields(cfg, spec, api)
    done = Applied()
    model, s = model_config_of(cfg), spec.settings
    special = set(TRAIN_SETTINGS + DDP_SETTINGS + COMM_OVERLAP_SETTINGS + DISPATCH_SETTINGS + ("bf16", "fp16"))
    for key, value in s.items():
        if key in special or (value is None and key in LIBRARY_DEFAULT_WHEN_NONE):
            continue
        if key == "cuda_graph_scope" and api.set_cuda_graph_modules is not None:
            api.set_cuda_graph_modules(model, value)  # Bridge's helper: current Core API, string or list
        else:
            setattr(model, key, list(value) if isinstance(value, tuple) else value)
    if "seq_length" in s and hasattr(cfg.dataset, "seq_length"):
        cfg.dataset.seq_length = s["seq_length"]
    for key in TRAIN_SETTINGS:
        if key in s:
            setattr(cfg.train, key, s[key])
    cfg.train.train_iters = spec.train_iters
    _apply_precision(cfg, model, bool(s.get("bf16")), bool(s.get("fp16")), api, done)
    _apply_low_precision_recipe(cfg, spec, api, done)
    _apply_comm_overlap(cfg, model, spec, api, done)
    _apply_dispatcher(model, spec, api, done)
    apply_shared_expert_overlap(model, spec, done)
    if getattr(model, "cuda_graph_impl", "none") not in (None, "none"):
        model.use_te_rng_tracker = True  # GPTModelProvider.provide() asserts it for CUDA graphs
        cfg.rng.te_rng_tracker = True
    apply_benchmark(cfg, spec, done)
    return done


def _apply_precision(cfg: Any, model: Any, bf16: bool, fp16: bool, api: BridgeAPI, done: Applied) -> None:
    """Bridge's mixed-precision config overwrites model.bf16/fp16 at runtime_config_update, so pick a matching one."""
    want = "bf16" if bf16 else "fp16" if fp16 else "fp32"
    mp = cfg.mixed_precision
    if isinstance(mp, str):
        mp = api.get_mixed_precision_config(mp)
    have = None if mp is None else "bf16" if mp.bf16 else "fp16" if mp.fp16 else "fp32"
    if want == "fp32":
        cfg.mixed_precision = None
        import torch

        model.params_dtype = torch.float32
    elif have != want:
        cfg.mixed_precision = api.get_mixed_precision_config(f"{want}_mixed")
        done.notes.append(f"mixed_precision {have} -> {want}_mixed (settings bf16={bf16}, fp16={fp16})")
    else:
        cfg.mixed_precision = mp
    model.bf16, model.fp16 = bf16, fp16


def _apply_low_precision_recipe(cfg: Any, spec: VariantSpec, api: BridgeAPI, done: Applied) -> None:
    """An FP8/FP4 precision (variant.json ``precision``, conf/precision/) selects its Megatron-Bridge recipe by name
    (training/mixed_precision.py ``MIXED_PRECISION_RECIPES``, e.g. ``bf16_with_fp8_current_scaling_mixed``): at
    runtime_config_update Bridge copies the recipe's fp8/fp4 fields onto the model (``MixedPrecisionConfig.setup``),
    so setting only the model's fields would be undone by a plain ``bf16_mixed``."""
    name = (spec.precision or {}).get("mixed_precision")
    if not name or name in ("bf16_mixed", "fp16_mixed"):
        return
    cfg.mixed_precision = api.get_mixed_precision_config(name)
    done.notes.append(f"mixed_precision {name} (precision={spec.precision.get('name')})")


def _apply_comm_overlap(cfg: Any, model: Any, spec: VariantSpec, api: BridgeAPI, done: Applied) -> None:
    if cfg.comm_overlap is None:
        cfg.comm_overlap = api.CommOverlapConfig(tp_comm_overlap=False)
        done.notes.append("comm_overlap was None: created CommOverlapConfig(tp_comm_overlap=False)")
    co, s = cfg.comm_overlap, spec.settings
    values = {k: bool(s[k]) for k in COMM_OVERLAP_SETTINGS}
    if "overlap_grad_reduce" in s:
        values["overlap_grad_reduce"] = bool(s["overlap_grad_reduce"])
        cfg.ddp.overlap_grad_reduce = values["overlap_grad_reduce"]
    user = getattr(co, "user_comm_overlap_cfg", None)  # set when finalize() already ran; it would win
    for key, value in values.items():
        setattr(co, key, value)
        if user is not None:
            setattr(user, key, value)
        if key in COMM_OVERLAP_SETTINGS and hasattr(model, key):
            setattr(model, key, value)


def _apply_dispatcher(model: Any, spec: VariantSpec, api: BridgeAPI, done: Applied) -> None:
    kind, backend = spec.settings["moe_token_dispatcher_type"], spec.settings["moe_flex_dispatcher_backend"]
    if kind != "flex":
        model.moe_token_dispatcher_type, model.moe_flex_dispatcher_backend = kind, None
        return
    shared_before = bool(getattr(model, "moe_shared_expert_overlap", False))
    model.moe_token_dispatcher_type, model.moe_flex_dispatcher_backend = "flex", backend
    with capture_logs(FLEX_LOGGER) as logged:
        api.apply_flex_dispatcher_backend(model, backend)
    done.library_messages.extend(logged)
    if (model.moe_token_dispatcher_type, model.moe_flex_dispatcher_backend) == ("flex", backend):
        if backend == "ncclep" and model.moe_shared_expert_overlap:  # Bridge 0.6 skips backends it does not know
            model.moe_shared_expert_overlap = False
            done.notes.append("apply_flex_dispatcher_backend does not handle ncclep here; flex/ncclep set directly")
    if shared_before and not model.moe_shared_expert_overlap:
        done.adjustments.append({"field": "moe_shared_expert_overlap", "from": True, "to": False,
                                 "why": f"flex/{backend}: apply_flex_dispatcher_backend forces it off"})


def apply_shared_expert_overlap(model: Any, spec: VariantSpec, done: Applied) -> None:
    """Overlap needs moe_shared_expert_overlap off (Megatron-Core and Bridge both assert it; CASES C02): switch it
    off on ``model`` (any object with that attribute) and record the adjustment, if ``allow_adjust`` permits."""
    if not (spec.overlap and getattr(model, "moe_shared_expert_overlap", False)):
        return
    if "moe_shared_expert_overlap" not in spec.allow_adjust:
        done.notes.append("moe_shared_expert_overlap is on with overlap and not in allow_adjust: left for the "
                          "library check to reject")
        return
    model.moe_shared_expert_overlap = False
    done.adjustments.append({"field": "moe_shared_expert_overlap", "from": True, "to": False,
                             "why": "overlap_moe_expert_parallel_comm requires moe_shared_expert_overlap=False"})


def apply_benchmark(cfg: Any, spec: VariantSpec, done: Applied) -> None:
    """Benchmark settings (what a timing needs and nothing a timing would pay for): mock data, no checkpoint save/load, no evaluation, log every iteration with
    throughput, a fixed seed, ``train_iters`` from the variant, and a warm-up shorter than the decay horizon
    (Megatron-Core OptimizerParamScheduler asserts lr_warmup_steps < lr_decay_steps)."""
    ck = cfg.checkpoint
    for attr in ("save", "load", "save_interval", "pretrained_checkpoint"):
        if hasattr(ck, attr):
            setattr(ck, attr, None)
    val = getattr(cfg, "validation", None) or cfg.train
    val.eval_interval, val.eval_iters = None, 0
    lg = cfg.logger
    lg.log_interval, lg.log_throughput = spec.log_interval, True
    for attr in ("tensorboard_dir", "wandb_project", "wandb_save_dir"):  # nothing written outside OUT_DIR
        if hasattr(lg, attr):
            setattr(lg, attr, None)
    cfg.rng.seed = spec.seed
    ds = cfg.dataset
    if hasattr(ds, "blend"):
        ds.blend, ds.blend_per_split = None, None  # Megatron-Core MockGPTDataset
        if hasattr(ds, "random_seed"):
            ds.random_seed = spec.seed
    else:
        done.notes.append(f"dataset {type(ds).__name__} has no blend: mock data not forced")
    sched = cfg.scheduler
    decay = getattr(sched, "lr_decay_iters", None) or spec.train_iters
    warm = getattr(sched, "lr_warmup_iters", 0) or 0
    if warm >= decay:
        sched.lr_warmup_iters = max(0, decay // 10)
        done.notes.append(f"lr_warmup_iters {warm} -> {sched.lr_warmup_iters} (decay horizon {decay} iterations)")
