"""Figures against the bound (CONTRACTS §7 ``bound``): what a run could have done, next to what it did.

- **MFU**: a run's model TFLOP/s/GPU (Megatron's own count, the iteration line) over the GPU's dense bf16 peak
  (``conf/reference/gpu_peaks.yaml``, or ``cluster.peak_tflops``), and over the matmul ceiling measured on the
  machine (``cluster.matmul_ceiling``: scripts/gpu/matmul_ceiling.py) when the sweep carries one.
- **All-to-all bandwidth**: the bytes one GPU's EP all-to-all moves per step over the all-to-all kernel time of
  the run's profile (``comm_ms.alltoall``, analysis/measure/profile_breakdown.py), against the link bound of the cluster
  profile (NVLink within an NVLink domain, the NIC per GPU across domains). The bytes are an estimate for balanced
  routing (what NVIDIA's benchmarks force, FACTS §8): per GPU and step
  ``GBS x seq x num_layers x topk x hidden x 2 B x 4 x (EP - 1) / EP / world`` (dispatch and combine, forward and
  backward; every layer counted as MoE). NCCL kernel time includes waiting for the slowest peer, so the figure is
  what the step got, at most what the link can carry; the flex dispatchers' kernels are not NCCL and get none.
- **Overlap ceiling**: the baseline's exposed communication (``comm_exposed``: communication no compute hides,
  ms per profiled step) is the most any overlap arm can remove; ``max_saving = exposed / step``. An arm's measured
  saving is ``1 - 1 / speedup`` (its step time reduction), and ``fraction = measured / max``.
- **Published baseline**: the NVIDIA Megatron-Bridge row (``conf/reference/megatron_bridge_perf.yaml``) the
  planner matched by model, GPU, GPU count and precision; the baseline's median TFLOP/s/GPU below
  ``1 - REFERENCE_TOLERANCE`` of it is a warning (and, with ``reference_gate=true``, stops the arms).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from analysis.measure.bound_records import BoundReport, OverlapBound, ReferenceCheck, RunBound, SweepBound
from analysis.measure.results import Comparison, RunResult

__all__ = ["BoundError", "BoundReport", "OverlapBound", "ReferenceCheck", "RunBound", "SweepBound",
           "a2a_bytes_per_step", "bound_report", "ceiling_from_sweep", "exposed_ceiling", "link_bound",
           "read_matmul_ceiling"]

REFERENCE_TOLERANCE = 0.05  # NVIDIA's own perf CI judges TFLOP/s/GPU at +-5% (FACTS §4)
BYTES_BF16 = 2
PASSES = 4  # dispatch + combine, forward and backward


class BoundError(ValueError):
    """A bound input that cannot be used (the message names the file or value and why)."""


# -- plan-time arithmetic (the planner records the results in the manifest) --------------------------------------
def a2a_bytes_per_step(*, gbs: int, seq: int, layers: int, topk: int, hidden: int, ep: int, world: int) -> float:
    """Bytes one GPU's EP all-to-all sends per step under balanced routing (module docstring), bf16 tokens.

    Raises:
        BoundError: a non-positive size.
    """
    if min(gbs, seq, layers, topk, hidden, ep, world) <= 0:
        raise BoundError(f"all sizes must be positive: gbs={gbs} seq={seq} layers={layers} topk={topk} "
                         f"hidden={hidden} ep={ep} world={world}")
    return gbs * seq * layers * topk * hidden * BYTES_BF16 * PASSES * (ep - 1) / ep / world


def link_bound(*, ep: int, tp: int, gpus_per_node: int, nvlink_domain: int | None, nvlink_gbps: float | None,
               nic_gbps: float | None) -> tuple[str | None, float | None, str]:
    """(link, GB/s, note): the bandwidth at which one GPU's all-to-all bytes could at best leave it.

    An EP group of ``ep`` ranks (``tp`` apart) has ``g = min(ep, domain // tp)`` ranks in the GPU's NVLink domain;
    of the bytes that leave the GPU, (g - 1) / (ep - 1) go over NVLink and the rest over the NIC, both at once, so
    the best time is max(NVLink share / nvlink_gbps, NIC share / nic_gbps) per byte. None where a needed link speed
    is unknown (or EP = 1: nothing is sent).
    """
    domain = nvlink_domain or gpus_per_node
    if ep <= 1:
        return None, None, "EP=1: the all-to-all sends nothing"
    g = max(1, min(ep, domain // max(tp, 1)))
    nv_share = (g - 1) / (ep - 1)
    nic_share = 1 - nv_share
    if nic_share == 0:
        if not nvlink_gbps:
            return "nvlink", None, "within one NVLink domain; cluster.nvlink_gbps is not set"
        return "nvlink", float(nvlink_gbps), f"EP={ep} within one NVLink domain of {domain} GPUs"
    if not nic_gbps or (nv_share and not nvlink_gbps):
        return "nic", None, "across NVLink domains; cluster.nic_gbps (and nvlink_gbps) not set"
    per_byte = max(nic_share / nic_gbps, nv_share / nvlink_gbps if nv_share else 0.0)
    return ("nvlink+nic" if nv_share else "nic"), 1 / per_byte, (
        f"EP={ep} over {-(-ep // g)} NVLink domains of {domain} GPUs: {100 * nic_share:.0f}% of the bytes cross "
        f"the {nic_gbps:g} GB/s NIC")


def read_matmul_ceiling(value: float | str | None) -> tuple[float | None, str | None]:
    """(TFLOP/s, source) of ``cluster.matmul_ceiling``: a number, or the path of matmul.json (key
    ``ceiling_tflops``, scripts/gpu/matmul_ceiling.py).

    Raises:
        BoundError: the file is missing, not JSON, or lacks a positive ``ceiling_tflops``.
    """
    if value is None:
        return None, None
    if not isinstance(value, str):
        return float(value), "cluster.matmul_ceiling"
    path = Path(value).expanduser()
    try:
        doc = json.loads(path.read_text())
        tf = float(doc["ceiling_tflops"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise BoundError(f"cluster.matmul_ceiling={value!r}: not a matmul.json of scripts/gpu/matmul_ceiling.py "
                         f"with a ceiling_tflops number ({type(exc).__name__}: {exc})") from None
    if tf <= 0:
        raise BoundError(f"cluster.matmul_ceiling={value!r}: ceiling_tflops={tf} is not positive")
    return tf, f"{path} ({doc.get('dtype', 'bf16')}, {doc.get('ceiling_size')}^3, {doc.get('gpu_name') or ''})".strip()


def exposed_ceiling(runs: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The overlap ceiling of the profiled baselines among summary.json ``runs`` (dicts): ``{"max_saving",
    "exposed_ms", "step_ms", "run"}`` of the first baseline run with a step breakdown, or None."""
    for r in runs:
        b = r.get("step_breakdown_ms") or {}
        if r.get("role") == "baseline" and b.get("step") and b.get("comm_exposed") is not None:
            return {"max_saving": float(b["comm_exposed"]) / float(b["step"]), "exposed_ms": float(b["comm_exposed"]),
                    "step_ms": float(b["step"]), "run": r.get("name")}
    return None


def ceiling_from_sweep(folder: str | Path) -> dict[str, Any]:
    """The overlap ceiling measured by an earlier sweep (``ceiling_from=<sweep dir>``): its report/summary.json's
    first profiled baseline (:func:`exposed_ceiling`), with ``from`` = the folder.

    Raises:
        BoundError: no summary.json there, or no profiled baseline in it (run that sweep with profile=true).
    """
    path = Path(folder) / "report" / "summary.json"
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise BoundError(f"ceiling_from={folder}: cannot read {path} ({type(exc).__name__}: {exc}); name a sweep "
                         "folder that was analysed") from None
    found = exposed_ceiling(doc.get("runs") or [])
    if found is None:
        raise BoundError(f"ceiling_from={folder}: its baseline has no step breakdown; run that sweep with "
                         "profile=true (the exposed communication comes from the profile)")
    return {**found, "from": str(folder)}


# -- analysis ---------------------------------------------------------------------------------------------------
def _baseline_breakdown(base_runs: Sequence[RunResult]) -> tuple[float, float, str] | None:
    for r in base_runs:
        b = r.step_breakdown or {}
        parts = b.get("parts_ms") or {}
        if b.get("step_ms") and parts.get("comm_exposed") is not None:
            return float(parts["comm_exposed"]), float(b["step_ms"]), r.name
    return None


def overlap_bound(c: Comparison, base_runs: Sequence[RunResult], ceiling: dict[str, Any] | None) -> OverlapBound | None:
    """The overlap ceiling of one arm from its baseline's profile (else from ``ceiling``, the plan's); None when
    neither is known."""
    found = _baseline_breakdown(base_runs)
    if found is None and ceiling:
        found = (float(ceiling["exposed_ms"]), float(ceiling["step_ms"]), f"{ceiling.get('run')} in "
                                                                           f"{ceiling.get('from')}")
    if found is None or found[1] <= 0:
        return None
    exposed, step, source = found
    max_saving = exposed / step
    s = c.speedup

    def saving(x: float | None) -> float | None:
        return None if x is None or x <= 0 else 1 - 1 / x

    measured = saving(s.value)
    fraction = measured / max_saving if measured is not None and max_saving > 0 else None
    return OverlapBound(c.variant, c.baseline, exposed, step, max_saving, measured, saving(s.ci_low),
                        saving(s.ci_high), fraction, source)


def run_bound(r: RunResult, sb: SweepBound) -> RunBound:
    """One run's MFU and all-to-all bandwidth against the sweep's bound."""
    tf = r.tflops.median if r.tflops else None
    mfu_p = tf / sb.peak_tflops if tf and sb.peak_tflops else None
    mfu_c = tf / sb.matmul_ceiling_tflops if tf and sb.matmul_ceiling_tflops else None
    a2a_ms = ((r.step_breakdown or {}).get("comm_ms") or {}).get("alltoall")
    gbps = (sb.a2a_bytes_per_step / (a2a_ms / 1e3) / 1e9
            if a2a_ms and sb.a2a_bytes_per_step and r.dispatcher in (None, "alltoall") else None)
    return RunBound(r.name, tf, mfu_p, mfu_c, gbps, gbps / sb.link_gbps if gbps and sb.link_gbps else None)


def reference_check(runs: Sequence[RunResult], row: dict[str, Any] | None,
                    tolerance: float = REFERENCE_TOLERANCE) -> ReferenceCheck | None:
    """The baselines' median TFLOP/s/GPU (the median over their good runs) against the published row; None without
    a row or a timed baseline."""
    if not row:
        return None
    base = [r for r in runs if r.role == "baseline" and r.good and r.tflops]
    if not base:
        return None
    vals = sorted(r.tflops.median for r in base)
    mid = len(vals) // 2
    med = vals[mid] if len(vals) % 2 else (vals[mid - 1] + vals[mid]) / 2
    pub = float(row["tflops_per_gpu"])
    return ReferenceCheck(base[0].variant, float(med), pub, float(med) / pub, tolerance, dict(row))


def bound_report(bound_doc: dict[str, Any] | None, runs: Sequence[RunResult],
                 comparisons: Sequence[Comparison]) -> BoundReport | None:
    """The report's figures against the bound, from the manifest's ``bound`` record; None when the sweep has none
    (a sweep planned before it existed, or loose logs)."""
    sb = SweepBound.from_json(bound_doc)
    if sb is None:
        return None
    good = [r for r in runs if r.good]
    per_run = tuple(run_bound(r, sb) for r in good if r.tflops or r.step_breakdown)
    by_variant: dict[str, list[RunResult]] = {}
    for r in runs:
        by_variant.setdefault(r.variant, []).append(r)
    overlap = []
    for c in comparisons:
        arm = by_variant.get(c.variant) or []
        if c.control or not arm or not (arm[0].overlap or arm[0].delay_wgrad):
            continue
        ob = overlap_bound(c, by_variant.get(c.baseline) or [], sb.ceiling)
        if ob is not None:
            overlap.append(ob)
    ref = reference_check(runs, sb.reference)
    notes = []
    if sb.reference_note:
        notes.append(sb.reference_note)
    return BoundReport(sb, per_run, tuple(overlap), (ref,) if ref else (), tuple(notes))
