"""The bound a sweep is measured against, decided at plan time (manifest ``bound``, CONTRACTS §12, FACTS §8).

- the GPU's dense bf16 peak (``conf/reference/gpu_peaks.yaml``, or ``cluster.peak_tflops``) and the measured
  matmul ceiling (``cluster.matmul_ceiling``: TFLOP/s or the path of scripts/gpu/matmul_ceiling.py's JSON);
- the all-to-all link bound of the cluster profile and the bytes one GPU's EP all-to-all moves per step
  (:mod:`analysis.measure.bound`);
- the published NVIDIA Megatron-Bridge row (``conf/reference/megatron_bridge_perf.yaml``) whose model, GPU, GPU
  count and precision are the sweep's; ``reference_gate=true`` gates every arm but the baseline behind it
  (gate ``reference_passed``: one reference block of the baseline runs first; experiments/conductor/gates.py);
- ``prune_below_ceiling=true``: an overlap arm (overlap or delay_wgrad on) whose overlap ceiling, the baseline's
  exposed communication over its step (``ceiling_from=<sweep dir>``: an earlier profiled sweep), is below
  ``practical_threshold`` cannot be shown faster: it is pruned with that reason. Without ``ceiling_from`` a staged
  sweep with ``profile=true`` decides it at the gate, from its own stage-1 baseline's profile.
"""

from __future__ import annotations

import dataclasses
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from analysis.measure import (
    BoundError,
    a2a_bytes_per_step,
    ceiling_from_sweep,
    link_bound,
    read_matmul_ceiling,
)
from contracts.errors import ConfigError
from contracts.records import Variant

REFERENCE_DIR = Path(__file__).resolve().parent.parent / "conf" / "reference"
REFERENCE_GATE = "reference_passed"
CEILING_REASON = "overlap ceiling"


@cache
def gpu_peaks() -> dict[str, dict[str, Any]]:
    """conf/reference/gpu_peaks.yaml: gpu_type -> {dense_bf16_tflops, sparse_bf16_tflops, source, checked}."""
    return yaml.safe_load((REFERENCE_DIR / "gpu_peaks.yaml").read_text())


@cache
def published_rows() -> tuple[dict[str, Any], ...]:
    """conf/reference/megatron_bridge_perf.yaml: NVIDIA's published rows (model, gpu, gpus, precision, ...)."""
    return tuple(yaml.safe_load((REFERENCE_DIR / "megatron_bridge_perf.yaml").read_text()))


CORE_RECIPES_URL = "https://github.com/NVIDIA/Megatron-LM/blob/19d22f518dfaf90bec803fd6fb6e76df9a61c047/examples/moe_recipes"


@cache
def core_recipes() -> tuple[dict[str, Any], ...]:
    """conf/reference/megatron_core_moe_recipes.yaml: Megatron-Core's MoE recipe index (layouts and features, no
    throughput), the second source shown beside the published row."""
    return tuple(yaml.safe_load((REFERENCE_DIR / "megatron_core_moe_recipes.yaml").read_text()))


def core_recipe_notes(model: str, gpu: str | None, precision: str) -> list[str]:
    """One line per Megatron-Core recipe of this model, GPU and precision (any GPU count), with its URL."""
    out = []
    for r in core_recipes():
        if r["model"] == model and r["gpu"] == gpu and r["precision"] == precision:
            out.append(f"Megatron-Core recipe on {r['gpus']} x {gpu} {precision}: TP/PP/EP/CP/ETP {r['tp']}/{r['pp']}/"
                       f"{r['ep']}/{r['cp']}/{r['etp']}, MBS/GBS/SL {r['mbs']}/{r['gbs']}/{r['seq']}; "
                       f"{r['features']} ({CORE_RECIPES_URL}/{r['recipe']})")
    return out


def match_row(model: str, gpu: str | None, gpus: int, precision: str,
              rows: tuple[dict[str, Any], ...] | None = None) -> tuple[dict[str, Any] | None, str | None]:
    """(the published row of this model, GPU, GPU count and precision, None) or (None, why no row matched).
    Of several rows (container releases) the newest container wins."""
    rows = published_rows() if rows is None else rows
    same = [r for r in rows if r["model"] == model and r["gpu"] == gpu and r["precision"] == precision]
    hit = [r for r in same if int(r["gpus"]) == gpus]
    if hit:
        return sorted(hit, key=lambda r: str(r["container"]))[-1], None
    if same:
        return None, (f"no published row for {model} on {gpus} x {gpu} {precision}; NVIDIA publishes it on "
                      + ", ".join(sorted({str(r['gpus']) for r in same})) + " GPUs")
    return None, None


def describe_row(row: dict[str, Any]) -> str:
    """One line naming a published row: model, GPUs, precision, container and its TFLOP/s/GPU, with its source."""
    return (f"{row.get('published_model', row.get('model'))} on {row.get('gpus')} x {row.get('gpu')}, "
            f"{row.get('precision')}, {row.get('container')}: {row.get('tflops_per_gpu')} TFLOP/s/GPU "
            f"({row.get('source')})")


def layout_note(row: dict[str, Any], m: Any) -> str | None:
    """How the sweep's parallelism and batch differ from the published row's, or None when they agree."""
    mine = {"tp": m.tensor_model_parallel_size, "pp": m.pipeline_model_parallel_size,
            "cp": m.context_parallel_size, "vp": m.virtual_pipeline_model_parallel_size,
            "ep": m.expert_model_parallel_size, "gbs": m.global_batch_size, "mbs": m.micro_batch_size,
            "seq": m.seq_length}
    diff = [f"{k.upper()} {mine[k]} vs {row.get(k)}" for k in mine
            if row.get(k) is not None and mine[k] is not None and int(row[k]) != int(mine[k])
            and not (k == "vp" and int(row[k]) == 1 and mine[k] in (None, 1))]
    return None if not diff else ("the sweep's layout differs from the published one (" + ", ".join(diff)
                                  + "): the comparison is of the same model and scale, not the same recipe")


def bound_doc(job: Any, settings: Any, cfg: dict[str, Any]) -> dict[str, Any]:
    """The manifest's ``bound`` record for the sweep's job spec (:class:`analysis.measure.bound.SweepBound` fields).

    Raises:
        ConfigError: an unreadable ``cluster.matmul_ceiling`` file or ``ceiling_from`` folder.
    """
    c, m = job.cluster, job.model
    gpu = job.gpu_type
    peak, peak_src = c.peak_tflops, "cluster.peak_tflops" if c.peak_tflops else None
    if peak is None and gpu in gpu_peaks():
        peak, peak_src = float(gpu_peaks()[gpu]["dense_bf16_tflops"]), gpu_peaks()[gpu]["source"]
    try:
        ceiling_tf, ceiling_src = read_matmul_ceiling(c.matmul_ceiling)
        ceiling = ceiling_from_sweep(cfg["ceiling_from"]) if cfg.get("ceiling_from") else None
    except BoundError as e:
        raise ConfigError(str(e)) from None
    ep = int(m.expert_model_parallel_size or 1)
    link, gbps, note = link_bound(ep=ep, tp=int(m.tensor_model_parallel_size or 1), gpus_per_node=job.gpus_per_node,
                                  nvlink_domain=c.nvlink_domain, nvlink_gbps=c.nvlink_gbps, nic_gbps=c.nic_gbps)
    nbytes = (a2a_bytes_per_step(gbs=m.global_batch_size, seq=m.seq_length, layers=m.num_layers,
                                 topk=m.moe_router_topk, hidden=m.hidden_size, ep=ep, world=job.world_size)
              if ep > 1 else None)
    prec = getattr(job, "precision", None)
    precision = prec.published if prec is not None else "bf16" if m.bf16 else "fp16" if m.fp16 else "fp32"
    row, why = match_row(m.name, gpu, job.world_size, precision)
    ref_note = why or (layout_note(row, m) if row else None)
    return {"gpu_type": gpu, "peak_tflops": peak, "peak_source": peak_src, "matmul_ceiling_tflops": ceiling_tf,
            "matmul_source": ceiling_src, "link": link, "link_gbps": gbps, "link_note": note,
            "a2a_bytes_per_step": nbytes, "reference": row, "reference_note": ref_note,
            "reference_gate": bool(settings.reference_gate and row), "ceiling": ceiling,
            "precision": prec.name if prec is not None else precision,
            "core_recipes": core_recipe_notes(m.name, gpu, precision)}


def is_overlap_arm(v: Variant) -> bool:
    """An arm whose gain can only come from hiding communication (overlap or delay_wgrad on)."""
    return v.role not in ("baseline", "control") and bool(v.overlap or v.delay_wgrad)


def prune_by_ceiling(variants: tuple[Variant, ...], ceiling: dict[str, Any], threshold: float) -> tuple[Variant, ...]:
    """``prune_below_ceiling=true``: every overlap arm pruned when the ceiling's ``max_saving`` (exposed comm /
    step) is below ``threshold`` (practical_threshold), with the reason naming both and where the ceiling came
    from."""
    if ceiling["max_saving"] >= threshold:
        return variants
    why = (f"{CEILING_REASON} {100 * ceiling['max_saving']:.1f}% < practical_threshold {100 * threshold:.1f}%: "
           f"the baseline's exposed communication ({ceiling['exposed_ms']:.1f} of {ceiling['step_ms']:.1f} ms, "
           f"{ceiling.get('run')} in {ceiling.get('from')}) is all any overlap arm can hide, so none can be shown "
           "faster (prune_below_ceiling=true)")
    return tuple(dataclasses.replace(v, status="pruned", reasons=(*v.reasons, why))
                 if is_overlap_arm(v) and v.status in ("planned", "gated") else v for v in variants)


def gate_on_reference(variants: tuple[Variant, ...]) -> tuple[Variant, ...]:
    """``reference_gate=true`` with a published row: every planned arm but the baselines waits for the reference
    block (gate ``reference_passed``); gated arms keep their own gate, which can only open after their peer ran."""
    return tuple(dataclasses.replace(v, status="gated", gate=REFERENCE_GATE,
                                     reasons=(*v.reasons, f"gate {REFERENCE_GATE}: waits for the baseline's "
                                                          "reference block against the published figure"))
                 if v.status == "planned" and v.role not in ("baseline", "control") else v for v in variants)


def check_ceiling_source(settings: Any, cfg: dict[str, Any], has_gated_stage: bool) -> None:
    """``prune_below_ceiling=true`` needs a ceiling before the arms run: ``ceiling_from=`` or, in a staged sweep,
    ``profile=true`` (the stage-1 baseline's profile decides the later stages at the gate).

    Raises:
        ConfigError: neither is given (names both ways).
    """
    if settings.prune_below_ceiling and not cfg.get("ceiling_from") and not (cfg.get("profile") is True
                                                                             and has_gated_stage):
        raise ConfigError("prune_below_ceiling=true needs the overlap ceiling before the arms run: give "
                          "ceiling_from=<sweep dir> (an earlier sweep run with profile=true), or run a staged "
                          "sweep (sweep=isolation) with profile=true so its stage-1 baseline's profile decides the "
                          "later stages")
