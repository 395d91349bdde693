"""``effective_config.json`` (CONTRACTS §6): what actually ran, compared with what the variant asked for.

The payload reads the effective values from the finalised config objects (Megatron-Bridge's model provider,
``cfg.train``, or Megatron-Core's ``TransformerConfig`` in the CPU fallback), compares them with the variant's
settings, and writes one JSON document. Unknown values are ``null``, never absent.
"""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Any

from contracts.atomic import write_json
from contracts.records import canonical_field
from experiments.payload.spec import VariantSpec

# CONTRACTS §6 "effective" keys, in contract order.
EFFECTIVE_KEYS = (
    "moe_token_dispatcher_type", "moe_flex_dispatcher_backend", "overlap_moe_expert_parallel_comm",
    "delay_wgrad_compute", "moe_shared_expert_overlap", "tensor_model_parallel_size",
    "pipeline_model_parallel_size", "virtual_pipeline_model_parallel_size", "context_parallel_size",
    "expert_model_parallel_size", "expert_tensor_parallel_size", "num_moe_experts", "moe_router_topk",
    "moe_router_force_load_balancing", "seq_length", "global_batch_size", "micro_batch_size", "bf16",
    "fp16", "recompute_granularity", "recompute_method", "recompute_num_layers", "recompute_modules",
    "cuda_graph_impl", "cuda_graph_scope", "mtp_num_layers", "train_iters",
)
PRECISION_FIELDS = ("fp8", "fp8_recipe", "fp4", "fp4_recipe")  # conf/precision/*.yaml settings
TRAIN_KEYS = ("global_batch_size", "micro_batch_size", "train_iters")  # live on cfg.train in Bridge
VERSION_KEYS = ("python", "torch", "transformer_engine", "megatron_core", "megatron_bridge", "deep_ep", "cuda", "nccl")
HARDWARE_KEYS = ("gpu_name", "compute_capability", "nodes", "gpus_per_node", "world_size", "hostnames", "nodelist",
                 "node_of_rank", "ranks_per_node")

# Requested ``None`` means "the library default" for these, so a filled-in value is not a difference:
# TransformerConfig.__post_init__ sets expert_tensor_parallel_size = tensor_model_parallel_size when None.
_LIBRARY_FILLS_NONE = ("expert_tensor_parallel_size",)


def jsonable(value: Any) -> Any:
    """A JSON-safe copy: enums become their names, dtypes and other objects their ``str``."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [jsonable(v) for v in value]
    return str(value)


def cuda_graph_scope_of(model_cfg: Any) -> Any:
    """The CUDA-graph scope of a model config as a list of names.

    Megatron-Core 0.19 renamed ``cuda_graph_scope`` to ``cuda_graph_modules`` and migrates the old field in
    ``TransformerConfig.__post_init__`` (setting ``cuda_graph_scope`` to None); older cores keep the old field.
    """
    scope = getattr(model_cfg, "cuda_graph_scope", None)
    if scope is None and hasattr(model_cfg, "cuda_graph_modules"):
        scope = model_cfg.cuda_graph_modules
    return jsonable(scope)


def read_effective(model_cfg: Any, train_cfg: Any = None, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The §6 ``effective`` block read from config objects (attributes missing on them are ``None``).

    ``model_cfg`` is a TransformerConfig-like object; ``train_cfg`` Bridge's ``TrainingConfig`` (or None);
    ``extra`` supplies values neither holds (e.g. batch sizes in the CPU fallback).
    """
    out: dict[str, Any] = {}
    for key in EFFECTIVE_KEYS:
        if key == "cuda_graph_scope":
            out[key] = cuda_graph_scope_of(model_cfg)
        elif key in TRAIN_KEYS and train_cfg is not None:
            out[key] = jsonable(getattr(train_cfg, key, None))
        else:
            out[key] = jsonable(getattr(model_cfg, key, None))
    for key, value in (extra or {}).items():
        if key in out and out[key] is None:
            out[key] = jsonable(value)
    return out


def _norm(key: str, value: Any) -> Any:
    """Normalise a value for comparison (sources in comments)."""
    value = jsonable(value)
    return canonical_field(key, value)


def requested_values(spec: VariantSpec) -> dict[str, Any]:
    """What the variant asks for, for every effective key it states (settings, plus payload.train_iters)."""
    req = {k: spec.settings[k] for k in EFFECTIVE_KEYS if k in spec.settings}
    for axis, value in spec.axes.items():  # model.* axes are Megatron fields too (CONTRACTS §9)
        key = axis.split(".")[-1]
        if axis.startswith("model.") and key in EFFECTIVE_KEYS:
            req[key] = value
    req["train_iters"] = spec.train_iters
    return req


def compare(spec: VariantSpec, effective: dict[str, Any],
            recorded: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Compare requested with effective values.

    Returns ``(adjustments, mismatches)``: ``adjustments`` is ``recorded`` (the payload's own changes) plus any
    other allowed difference; ``mismatches`` are differences on fields outside ``spec.allow_adjust``
    (a flex fallback to alltoall, a recipe default, an override), each ``{field, requested, effective, why}``.
    """
    adjustments = [dict(a) for a in recorded]
    seen = {a["field"] for a in adjustments}
    mismatches: list[dict[str, Any]] = []
    for key, want in requested_values(spec).items():
        if want is None and key in _LIBRARY_FILLS_NONE:
            continue
        got = effective.get(key)
        if _norm(key, want) == _norm(key, got):
            continue
        if key in spec.allow_adjust:
            if key not in seen:
                adjustments.append({"field": key, "from": jsonable(want), "to": jsonable(got),
                                    "why": "changed during config finalisation; allowed by allow_adjust"})
            continue
        mismatches.append({"field": key, "requested": jsonable(want), "effective": jsonable(got),
                           "why": "differs from the variant and is not in allow_adjust"})
    return adjustments, mismatches


def mismatch_line(spec: VariantSpec, mismatches: list[dict[str, Any]]) -> str:
    """One loud log line naming every mismatched field."""
    parts = [f"{m['field']}: requested {m['requested']!r}, effective {m['effective']!r}" for m in mismatches]
    return (f"[payload] MISMATCH {spec.name}: the run is not what the variant says ({'; '.join(parts)}); "
            f"allow_adjust={list(spec.allow_adjust)}")


def build_document(spec: VariantSpec, *, effective: dict[str, Any], adjustments: list[dict[str, Any]],
                   mismatches: list[dict[str, Any]], env: dict[str, Any], versions: dict[str, Any],
                   hardware: dict[str, Any], verdict: str, messages: list[str], not_run: list[str],
                   warnings: list[str] | None = None, written_at: str = "",
                   extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The full CONTRACTS §6 document (every contract key present; unknown values ``None``).

    Added fields (CONTRACTS §6: "add fields freely"): ``model``, ``mismatches``, ``written_at``,
    ``checks.warnings``, and whatever ``extra`` holds.
    """
    requested = {"dispatcher": spec.dispatcher, "overlap": spec.overlap, "delay_wgrad": spec.delay_wgrad}
    requested.update(jsonable(spec.axes))
    doc: dict[str, Any] = {
        "schema_version": 1,
        "variant": spec.name,
        "mode": spec.mode,
        "attempt": spec.attempt,
        "requested": requested,
        "effective": {k: jsonable(effective.get(k)) for k in EFFECTIVE_KEYS},
        "adjustments": jsonable(adjustments),
        "env": jsonable(env),
        "versions": {k: versions.get(k) for k in VERSION_KEYS},
        "hardware": {k: jsonable(hardware.get(k)) for k in HARDWARE_KEYS},
        "checks": {"verdict": verdict, "messages": [str(m) for m in messages], "not_run": list(not_run),
                   "warnings": list(warnings or [])},
        "mismatches": jsonable(mismatches),
        "model": {"name": spec.model_name, "recipe": spec.recipe, "hf_path": spec.hf_path},
        "written_at": written_at,
        # the precision the variant asked for (conf/precision/) and its Megatron-Core fields as requested
        "precision": {**jsonable(spec.precision or {}),
                      **{k: jsonable(spec.settings.get(k)) for k in PRECISION_FIELDS if k in spec.settings}},
    }
    doc.update(jsonable(extra or {}))
    return doc


def write_atomic(path: str | Path, doc: dict[str, Any]) -> Path:
    """Write ``doc`` as JSON to ``path`` atomically (the planner's temp file + ``os.replace`` + fsync writer),
    with the mode every file of the sweep gets: ``0666 & ~umask`` (:mod:`contracts.atomic`), so a restrictive
    umask (077) is honoured and a teammate's 022 lets them read it."""
    p = Path(path)
    write_json(p, doc, durable=True)
    return p
