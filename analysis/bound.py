"""Figures against the bound (CONTRACTS §7 ``bound``): what a run could have done, next to what it did.

- **MFU**: a run's model TFLOP/s/GPU (Megatron's own count, the iteration line) over the GPU's dense bf16 peak
  (``conf/reference/gpu_peaks.yaml``, or ``cluster.peak_tflops``), and over the matmul ceiling measured on the
  machine (``cluster.matmul_ceiling``: scripts/gpu/matmul_ceiling.py) when the sweep carries one.
- **All-to-all bandwidth**: the bytes one GPU's EP all-to-all moves per step over the all-to-all kernel time of
  the run's profile (``comm_ms.alltoall``, analysis/profile_breakdown.py), against the link bound of the cluster
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from analysis.results import Comparison, RunResult, fnum

REFERENCE_TOLERANCE = 0.05  # NVIDIA's own perf CI judges TFLOP/s/GPU at +-5% (FACTS §4)
BYTES_BF16 = 2
PASSES = 4  # dispatch + combine, forward and backward


class BoundError(ValueError):
    """A bound input that cannot be used (the message names the file or value and why)."""


@dataclass(frozen=True)
class SweepBound:
    """The sweep's bound as the planner recorded it (manifest ``bound``). Units: TFLOP/s per GPU, GB/s per GPU one
    direction, bytes per GPU per step."""

    gpu_type: str | None = None
    peak_tflops: float | None = None
    peak_source: str | None = None
    matmul_ceiling_tflops: float | None = None
    matmul_source: str | None = None
    link: str | None = None  # "nvlink" | "nic" | "nvlink+nic"
    link_gbps: float | None = None
    link_note: str | None = None
    a2a_bytes_per_step: float | None = None
    reference: dict[str, Any] | None = None  # the matched row of conf/reference/megatron_bridge_perf.yaml
    reference_note: str | None = None  # why no row matched, or how the sweep differs from the matched row
    reference_gate: bool = False
    ceiling: dict[str, Any] | None = None  # the overlap ceiling known at plan time (ceiling_from=)

    @classmethod
    def from_json(cls, d: dict[str, Any] | None) -> SweepBound | None:
        if not d:
            return None
        return cls(**{k: d.get(k) for k in cls.__dataclass_fields__ if k in d})

    def to_json(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass(frozen=True)
class RunBound:
    """One run against the bound: MFU against the peak and the ceiling (fractions), all-to-all GB/s and its
    fraction of the link bound (None where unknown)."""

    run: str
    tflops: float | None
    mfu_peak: float | None
    mfu_ceiling: float | None
    a2a_gbps: float | None
    a2a_of_link: float | None

    def to_json(self) -> dict[str, Any]:
        return {"run": self.run, "tflops": fnum(self.tflops), "mfu_peak": fnum(self.mfu_peak),
                "mfu_ceiling": fnum(self.mfu_ceiling), "a2a_gbps": fnum(self.a2a_gbps),
                "a2a_of_link": fnum(self.a2a_of_link)}


@dataclass(frozen=True)
class OverlapBound:
    """An overlap arm against its baseline's exposed communication: ``max_saving`` (exposed / step), the measured
    step-time saving ``1 - 1/speedup`` with its 95% interval, and ``fraction`` = measured / max (None without a
    profiled baseline or a speedup). ``source``: the run whose profile gave the exposed time."""

    variant: str
    baseline: str
    exposed_ms: float
    step_ms: float
    max_saving: float
    measured_saving: float | None
    saving_low: float | None
    saving_high: float | None
    fraction: float | None
    source: str

    def text(self) -> str:
        """``overlap can gain at most X%; measured Y% [lo, hi], Z% of the ceiling``."""
        head = f"overlap can gain at most {100 * self.max_saving:.1f}% of the step"
        if self.measured_saving is None:
            return head + "; not measured"
        ci = ("" if self.saving_low is None or self.saving_high is None
              else f" [{100 * self.saving_low:+.1f}%, {100 * self.saving_high:+.1f}%]")
        frac = "" if self.fraction is None else f", {100 * self.fraction:.0f}% of the ceiling"
        return f"{head}; measured {100 * self.measured_saving:+.1f}%{ci}{frac}"

    def to_json(self) -> dict[str, Any]:
        return {"variant": self.variant, "baseline": self.baseline, "exposed_ms": self.exposed_ms,
                "step_ms": self.step_ms, "max_saving": self.max_saving,
                "measured_saving": fnum(self.measured_saving), "saving_low": fnum(self.saving_low),
                "saving_high": fnum(self.saving_high), "fraction": fnum(self.fraction), "source": self.source,
                "text": self.text()}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> OverlapBound:
        return cls(**{k: d.get(k) for k in cls.__dataclass_fields__})


@dataclass(frozen=True)
class ReferenceCheck:
    """The baseline's median TFLOP/s/GPU against the published row: ``ratio`` = measured / published; ``below``
    when the ratio is under 1 - ``tolerance``."""

    baseline: str
    measured_tflops: float
    published_tflops: float
    ratio: float
    tolerance: float
    row: dict[str, Any]

    @property
    def below(self) -> bool:
        return self.ratio < 1 - self.tolerance

    def text(self) -> str:
        r = self.row
        where = (f"{r.get('published_model')} on {r.get('gpus')} x {str(r.get('gpu')).upper()} "
                 f"{r.get('precision')}, {r.get('container')}")
        verdict = (f"WARNING: {100 * (1 - self.ratio):.1f}% below the published figure (more than "
                   f"{100 * self.tolerance:.0f}%): the baseline does not reproduce NVIDIA's, so speedups over it "
                   "may not carry over" if self.below else "within the tolerance" if self.ratio < 1
                   else "at or above it")
        return (f"published baseline: {where}: {self.published_tflops:g} TFLOP/s/GPU ({r.get('source')}); this "
                f"sweep's baseline {self.baseline} measured {self.measured_tflops:.1f} ({100 * self.ratio:.1f}%): "
                f"{verdict}")

    def to_json(self) -> dict[str, Any]:
        return {"baseline": self.baseline, "measured_tflops": self.measured_tflops,
                "published_tflops": self.published_tflops, "ratio": self.ratio, "tolerance": self.tolerance,
                "below": self.below, "row": self.row, "text": self.text()}


@dataclass(frozen=True)
class BoundReport:
    """Everything the report says against the bound (summary.json ``bound``)."""

    sweep: SweepBound
    runs: tuple[RunBound, ...] = ()
    overlap: tuple[OverlapBound, ...] = ()
    reference: tuple[ReferenceCheck, ...] = ()
    notes: tuple[str, ...] = field(default=())

    def for_variant(self, variant: str) -> OverlapBound | None:
        return next((o for o in self.overlap if o.variant == variant), None)

    def to_json(self) -> dict[str, Any]:
        return {"sweep": self.sweep.to_json(), "runs": [r.to_json() for r in self.runs],
                "overlap": [o.to_json() for o in self.overlap], "reference": [c.to_json() for c in self.reference],
                "notes": list(self.notes)}

    @classmethod
    def from_json(cls, d: dict[str, Any] | None) -> BoundReport | None:
        if not d:
            return None
        sweep = SweepBound.from_json(d.get("sweep")) or SweepBound()
        runs = tuple(RunBound(**{k: r.get(k) for k in RunBound.__dataclass_fields__}) for r in d.get("runs") or ())
        refs = tuple(ReferenceCheck(**{k: c.get(k) for k in ReferenceCheck.__dataclass_fields__})
                     for c in d.get("reference") or ())
        return cls(sweep, runs, tuple(OverlapBound.from_json(o) for o in d.get("overlap") or ()), refs,
                   tuple(d.get("notes") or ()))


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
