"""Typed records of the figures against the bound (summary.json ``bound``, CONTRACTS §7); analysis/measure/bound.py
computes them. Kept apart so that analysis/measure/results.py can read them back without importing the computation."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any


def fnum(x: Any) -> float | None:
    """A JSON-safe float: None for None, NaN and infinities."""
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


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
    precision: str | None = None  # the sweep's precision (conf/precision/), what the published row was matched on
    core_recipes: list[str] = field(default_factory=list)  # Megatron-Core's recipes of the same model/GPU/precision

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
