"""Typed records of the analysis stage and their JSON form (CONTRACTS.md §7 ``summary.json``, §3 ``run.json``).

The records are frozen dataclasses; dicts exist only at the JSON boundary (``to_json`` / ``from_json``).
Unknown values are ``null`` in JSON, never absent, and never NaN.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from analysis.measure.stats import Estimate, StepTime
from contracts.exits import ExitCode
from contracts.records import SCHEMA_VERSION
from contracts.statuses import BAD_OUTCOMES, GOOD_OUTCOMES

if TYPE_CHECKING:  # a type only: importing the parser (pyarrow, RE2) is not needed to hold results
    from analysis.logs import IterationSeries
    from analysis.measure.bound_records import BoundReport


def fnum(x: Any) -> float | None:
    """A JSON-safe float: None for None, NaN and infinities."""
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


@dataclass(frozen=True, slots=True)
class RunConfig:
    """What decides whether two runs are comparable (CONTRACTS §7 not_comparable): global batch size, sequence
    length, GPU count and CUDA_DEVICE_MAX_CONNECTIONS (a string as exported). None when unknown."""

    global_batch_size: int | None = None
    seq_length: int | None = None
    world_size: int | None = None
    cuda_device_max_connections: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "global_batch_size": self.global_batch_size,
            "seq_length": self.seq_length,
            "world_size": self.world_size,
            "cuda_device_max_connections": self.cuda_device_max_connections,
        }


@dataclass(frozen=True, eq=False)
class RunResult:
    """One counted attempt of a variant (or one loose run): the ``runs[]`` record of summary.json and run.json.

    Units: step time ms, TFLOP/s/GPU, tokens/s/GPU, peak memory GB. ``series`` and ``steady_mask`` stay in memory
    for comparisons and plots and are not written to JSON.
    """

    name: str
    variant: str
    status: str
    reason: str | None = None
    attempt: int | None = None
    repeat: int | None = None
    evidence: tuple[str, ...] = ()
    flags: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    hint: str | None = None
    details: dict[str, Any] = field(default_factory=dict)
    iterations_total: int = 0
    iterations_steady: int = 0
    iterations_skipped: int = 0
    warmup: int | None = None
    train_iters: int | None = None
    step_time: StepTime | None = None
    tflops: Estimate | None = None
    tokens: Estimate | None = None
    peak_mem_gb: float | None = None
    loss_first: float | None = None
    loss_last: float | None = None
    hosts: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    dispatcher: str | None = None
    overlap: bool | None = None
    delay_wgrad: bool | None = None
    group: dict[str, Any] = field(default_factory=dict)
    role: str | None = None
    mode: str | None = None
    config: RunConfig = field(default_factory=RunConfig)
    a2a_ms: float | None = None
    step_breakdown: dict[str, Any] | None = None  # analysis/measure/profile_breakdown.py, when the run was profiled
    timeline: dict[str, Any] | None = None  # analysis/judge/timeline.py: the causal chain (cause, then consequences)
    launch: dict[str, Any] | None = None  # analysis/judge/launch_context.py: launcher, Slurm directives, cancel lines
    gpu_hours: dict[str, Any] | None = None  # {"estimate", "accounted", "note"}: GPU-hours, plan and sacct
    fixed_cost: dict[str, Any] | None = None  # analysis/measure/fixed_cost.py: the held GPU time split, s
    series: IterationSeries | None = field(default=None, repr=False)
    steady_mask: np.ndarray | None = field(default=None, repr=False)

    @property
    def good(self) -> bool:
        """ok, ok_with_warning or validated."""
        return self.status in GOOD_OUTCOMES

    @property
    def bad(self) -> bool:
        """failed, incomplete, insufficient_iterations or invalid_variant (exit code 3)."""
        return self.status in BAD_OUTCOMES

    def steady_values(self, column: str) -> tuple[np.ndarray, np.ndarray]:
        """(iteration numbers, values) of a series column over the steady iterations; empty when unknown."""
        if self.series is None or self.steady_mask is None:
            return np.zeros(0, np.int64), np.zeros(0)
        values = getattr(self.series, column) if hasattr(self.series, column) else self.series.extra_losses[column]
        return self.series.iteration[self.steady_mask], values[self.steady_mask]

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "variant": self.variant,
            "attempt": self.attempt,
            "repeat": self.repeat,
            "status": self.status,
            "reason": self.reason,
            "evidence": list(self.evidence),
            "flags": list(self.flags),
            "iterations": {
                "total": self.iterations_total,
                "steady": self.iterations_steady,
                "skipped": self.iterations_skipped,
            },
            "train_iters": self.train_iters,
            "step_time_ms": _json_step(self.step_time),
            "tflops_per_gpu": _json_estimate(self.tflops),
            "tokens_per_s_per_gpu": _json_estimate(self.tokens),
            "peak_mem_gb": fnum(self.peak_mem_gb),
            "loss": None
            if self.loss_first is None and self.loss_last is None
            else {"first": fnum(self.loss_first), "last": fnum(self.loss_last)},
            "hosts": list(self.hosts),
            "files": list(self.files),
            # additions (CONTRACTS §7: add fields freely)
            "notes": list(self.notes),
            "hint": self.hint,
            "details": self.details,
            "warmup": self.warmup,
            "dispatcher": self.dispatcher,
            "overlap": self.overlap,
            "delay_wgrad": self.delay_wgrad,
            "group": self.group,
            "role": self.role,
            "mode": self.mode,
            "config": self.config.to_json(),
            "a2a_ms": fnum(self.a2a_ms),
            # the causal chain and the launch context (CONTRACTS §7 runs[].timeline, runs[].launch)
            "timeline": self.timeline,
            "launch": self.launch,
            # GPU-hours of this attempt: the plan's estimate and, on Slurm, what sacct accounted (CONTRACTS §7)
            "gpu_hours": self.gpu_hours,
            # where the run's held GPU time went: launch, start-up, checks, init, warm-up, steps, teardown (s)
            "fixed_cost": self.fixed_cost,
            # profile=true: where a profiled step's time goes, ms per step (None when not profiled)
            **breakdown_json(self.step_breakdown),
        }

    def to_run_json(self) -> dict[str, Any]:
        """run.json: the ``runs[]`` record plus every steady iteration (``steady_iterations``) and its step time
        (``step_times_ms``, ms, warm-up excluded, iteration order), which the history stage reads."""
        its, ms = self.steady_values("step_ms")
        return {**self.to_json(), "steady_iterations": [int(i) for i in its],
                "step_times_ms": [float(x) for x in ms]}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> RunResult:
        """Rebuild a record from ``to_json`` output (without the in-memory series)."""
        step = d.get("step_time_ms") or {}
        its = d.get("iterations") or {}
        loss = d.get("loss") or {}
        return cls(
            name=d["name"],
            variant=d["variant"],
            status=d["status"],
            reason=d.get("reason"),
            attempt=d.get("attempt"),
            repeat=d.get("repeat"),
            evidence=tuple(d.get("evidence") or ()),
            flags=tuple(d.get("flags") or ()),
            notes=tuple(d.get("notes") or ()),
            hint=d.get("hint"),
            details=dict(d.get("details") or {}),
            iterations_total=its.get("total") or 0,
            iterations_steady=its.get("steady") or 0,
            iterations_skipped=its.get("skipped") or 0,
            warmup=d.get("warmup"),
            train_iters=d.get("train_iters"),
            step_time=StepTime(**step) if step.get("median") is not None else None,
            tflops=Estimate(**d["tflops_per_gpu"]) if d.get("tflops_per_gpu") else None,
            tokens=Estimate(**d["tokens_per_s_per_gpu"]) if d.get("tokens_per_s_per_gpu") else None,
            peak_mem_gb=d.get("peak_mem_gb"),
            loss_first=loss.get("first"),
            loss_last=loss.get("last"),
            hosts=tuple(d.get("hosts") or ()),
            files=tuple(d.get("files") or ()),
            dispatcher=d.get("dispatcher"),
            overlap=d.get("overlap"),
            delay_wgrad=d.get("delay_wgrad"),
            group=dict(d.get("group") or {}),
            role=d.get("role"),
            mode=d.get("mode"),
            config=RunConfig(**(d.get("config") or {})),
            a2a_ms=d.get("a2a_ms"),
            step_breakdown=d.get("step_breakdown"),
            timeline=d.get("timeline"),
            launch=d.get("launch"),
            gpu_hours=d.get("gpu_hours"),
            fixed_cost=d.get("fixed_cost"),
        )


def breakdown_json(b: dict[str, Any] | None) -> dict[str, Any]:
    """The summary.json fields of a step breakdown (docs: analysis/README.md "Step-time breakdown"):
    ``step_breakdown_ms`` {expert_gemm, dense_gemm, attention, other_compute, comm_exposed, idle, step} (ms per
    profiled step; the parts sum to ``step``), ``comm_ms`` {alltoall, nccl_other, total, hidden},
    ``hidden_comm_fraction`` (hidden / total, None without communication) and ``step_breakdown`` (the whole
    record, with its source trace and profiled steps)."""
    if not b or "parts_ms" not in b:
        return {"step_breakdown_ms": None, "comm_ms": None, "hidden_comm_fraction": None,
                "step_breakdown": b or None}
    return {"step_breakdown_ms": {**b["parts_ms"], "step": b.get("step_ms")}, "comm_ms": b.get("comm_ms"),
            "hidden_comm_fraction": b.get("hidden_comm_fraction"), "step_breakdown": b}


def _json_step(s: StepTime | None) -> dict[str, Any]:
    if s is None:
        return {"median": None, "p90": None, "ci_low": None, "ci_high": None, "n": 0}
    return {"median": fnum(s.median), "p90": fnum(s.p90), "ci_low": fnum(s.ci_low), "ci_high": fnum(s.ci_high),
            "n": s.n}


def _json_estimate(e: Estimate | None) -> dict[str, Any] | None:
    if e is None:
        return None
    return {"median": fnum(e.median), "ci_low": fnum(e.ci_low), "ci_high": fnum(e.ci_high)}


@dataclass(frozen=True, slots=True)
class Speedup:
    """baseline median step / variant median step (> 1 means the variant is faster), with its 95% interval."""

    value: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    method: str | None = None  # "bootstrap_iterations" | "per_run_medians"


@dataclass(frozen=True, slots=True)
class LossParity:
    """Largest relative lm-loss difference over the common steady iterations, and whether it is within tolerance."""

    max_rel_diff: float | None = None
    ok: bool | None = None
    tolerance: float = 0.02
    common_iterations: int = 0


@dataclass(frozen=True, slots=True)
class OverlapCeiling:
    """Ideal overlap speedup (T_comp + T_comm) / max(T_comp, T_comm) from the baseline's all-to-all time per step
    (``a2a_ms``, ms; FACTS §7), and the fraction of the possible gain the variant achieved: (speedup-1)/(ceiling-1)."""

    a2a_ms: float
    compute_ms: float
    ceiling: float
    fraction_achieved: float | None


@dataclass(frozen=True)
class Comparison:
    """One variant against its group's baseline (CONTRACTS §7 ``comparisons[]``)."""

    variant: str
    baseline: str
    group: dict[str, Any]
    speedup: Speedup
    verdict: str  # faster | slower | equivalent | no_significant_difference | not_comparable | diverged
    loss_parity: LossParity
    notes: tuple[str, ...] = ()
    grad_norm_spike: bool = False
    overlap_ceiling: OverlapCeiling | None = None
    runs: int = 0
    baseline_runs: int = 0
    blocks: tuple[dict[str, Any], ...] = ()  # analysis/measure/paired.py BlockPair.to_json, when paired over blocks
    sequential: dict[str, Any] | None = None  # analysis/measure/sequential.py SequentialResult.to_json (repeats=auto)
    control: bool = False  # the arm is the control copy of the baseline (control=true)
    doubtful: bool = False  # the group's control arm did not come out equivalent: this verdict is not to be trusted
    doubtful_reason: str | None = None

    @property
    def regression(self) -> bool:
        """A slower or diverged verdict, or a loss divergence (exit code 4, CONTRACTS §5)."""
        return self.verdict in ("slower", "diverged") or self.loss_parity.ok is False

    def to_json(self) -> dict[str, Any]:
        ceiling = self.overlap_ceiling
        return {
            "variant": self.variant,
            "baseline": self.baseline,
            "group": self.group,
            "speedup": {"value": fnum(self.speedup.value), "ci_low": fnum(self.speedup.ci_low),
                        "ci_high": fnum(self.speedup.ci_high)},
            "verdict": self.verdict,
            "loss_parity": {"max_rel_diff": fnum(self.loss_parity.max_rel_diff), "ok": self.loss_parity.ok},
            "notes": list(self.notes),
            # additions
            "speedup_method": self.speedup.method,
            "loss_tolerance": self.loss_parity.tolerance,
            "loss_common_iterations": self.loss_parity.common_iterations,
            "grad_norm_spike": self.grad_norm_spike,
            "overlap_ceiling": None
            if ceiling is None
            else {"a2a_ms": ceiling.a2a_ms, "compute_ms": ceiling.compute_ms, "ceiling": ceiling.ceiling,
                  "fraction_achieved": fnum(ceiling.fraction_achieved)},
            "runs": self.runs,
            "baseline_runs": self.baseline_runs,
            "blocks": [dict(b) for b in self.blocks],
            "sequential": self.sequential,
            "control": self.control,
            "doubtful": self.doubtful,
            "doubtful_reason": self.doubtful_reason,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Comparison:
        sp = d.get("speedup") or {}
        lp = d.get("loss_parity") or {}
        oc = d.get("overlap_ceiling")
        return cls(
            variant=d["variant"],
            baseline=d["baseline"],
            group=dict(d.get("group") or {}),
            speedup=Speedup(sp.get("value"), sp.get("ci_low"), sp.get("ci_high"), d.get("speedup_method")),
            verdict=d["verdict"],
            loss_parity=LossParity(lp.get("max_rel_diff"), lp.get("ok"), d.get("loss_tolerance", 0.02),
                                   d.get("loss_common_iterations", 0)),
            notes=tuple(d.get("notes") or ()),
            grad_norm_spike=bool(d.get("grad_norm_spike")),
            overlap_ceiling=OverlapCeiling(**oc) if oc else None,
            runs=d.get("runs", 0),
            baseline_runs=d.get("baseline_runs", 0),
            blocks=tuple(d.get("blocks") or ()),
            sequential=d.get("sequential"),
            control=bool(d.get("control")),
            doubtful=bool(d.get("doubtful")),
            doubtful_reason=d.get("doubtful_reason"),
        )


@dataclass(frozen=True, slots=True)
class BackendRate:
    """Failure rate of one dispatcher over the kept runs of a sweep (CASES C07): failing cells are shown, not dropped."""

    dispatcher: str
    runs: int
    good: int
    bad: int
    reasons: dict[str, int]

    @property
    def failure_rate(self) -> float | None:
        return self.bad / self.runs if self.runs else None

    def to_json(self) -> dict[str, Any]:
        return {"dispatcher": self.dispatcher, "runs": self.runs, "good": self.good, "bad": self.bad,
                "failure_rate": self.failure_rate, "reasons": dict(self.reasons)}


@dataclass(frozen=True)
class LaterStep:
    """A step the sweep ran after the analysis (``step``: ``"history"``) with its exit code (CONTRACTS §5) and what
    it did, in one sentence; it joins the summary's exit code, so that the files say what the process exits with."""

    step: str
    exit_code: int
    text: str

    def to_json(self) -> dict[str, Any]:
        return {"step": self.step, "exit_code": int(self.exit_code), "text": self.text}


@dataclass(frozen=True)
class Summary:
    """The whole analysis of a sweep or of loose logs: ``summary.json`` (schema_version 1, CONTRACTS §7).

    ``after``: the steps the sweep ran after this analysis (the nightly history); :attr:`exit_code` is the
    analysis' own code combined with theirs (3 > 5 > 4 > 2 > 1 > 130 > 0), :attr:`analysis_exit_code` the
    analysis' alone."""

    sweep: dict[str, Any] | None
    runs: tuple[RunResult, ...]
    comparisons: tuple[Comparison, ...] = ()
    backends: tuple[BackendRate, ...] = ()
    notes: tuple[str, ...] = ()
    drift: tuple[dict[str, Any], ...] = ()  # analysis/measure/paired.py drift(): the baseline's median per block, per group
    design: dict[str, Any] | None = None  # the manifest's block design (blocks, seed, repeats, control, ...)
    gpu_time: dict[str, Any] | None = None  # analysis/measure/fixed_cost.py GpuTime: every attempt's held time and steps
    bound: BoundReport | None = None  # analysis/measure/bound.py: MFU, all-to-all bandwidth, overlap ceiling, published row
    after: tuple[LaterStep, ...] = ()

    @property
    def ran(self) -> bool:
        """True when at least one kept run gave a result (not pruned, skipped or cancelled before it logged)."""
        return any(r.status not in ("pruned", "skipped", "cancelled") for r in self.runs)

    @property
    def exit_code(self) -> int:
        """The sweep's exit code: :attr:`analysis_exit_code` combined with the later steps' (class docstring)."""
        from contracts.exits import combine

        return int(combine(self.analysis_exit_code, *(s.exit_code for s in self.after)))

    @property
    def analysis_exit_code(self) -> int:
        """CONTRACTS §5: 3 when a kept run is failed/incomplete/insufficient/invalid/cancelled, or when no kept run
        ran at all (an empty or cancelled night is never good), else 4 when a comparison is slower or its loss
        diverged, else 0 (pruned and skipped runs are not kept runs)."""
        if any(r.bad for r in self.runs) or not self.ran:
            return ExitCode.RUN_FAILED
        if any(c.regression for c in self.comparisons):
            return ExitCode.REGRESSION
        return ExitCode.OK

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "sweep": self.sweep,
            "runs": [r.to_json() for r in self.runs],
            "comparisons": [c.to_json() for c in self.comparisons],
            # additions
            "backends": [b.to_json() for b in self.backends],
            "notes": list(self.notes),
            "exit_code": self.exit_code,
            "analysis_exit_code": self.analysis_exit_code,
            "after": [a.to_json() for a in self.after],
            "drift": [dict(d) for d in self.drift],
            "design": self.design,
            "noise_floor": self.noise_floor,
            "gpu_time": self.gpu_time,
            "bound": None if self.bound is None else self.bound.to_json(),
        }

    @property
    def noise_floor(self) -> list[dict[str, Any]]:
        """The control arms' speedups (the sweep's measured noise floor), one per group with a control."""
        return [{"group": c.group, "control": c.variant, "verdict": c.verdict, "speedup": c.speedup.value,
                 "ci_low": c.speedup.ci_low, "ci_high": c.speedup.ci_high,
                 "half_width": None if c.speedup.ci_low is None or c.speedup.ci_high is None
                 else (c.speedup.ci_high - c.speedup.ci_low) / 2} for c in self.comparisons if c.control]

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Summary:
        """Read a summary.json back (for the history stage); raises ValueError on another schema version."""
        if d.get("schema_version") != SCHEMA_VERSION:
            raise ValueError(f"summary.json schema_version {d.get('schema_version')!r} is not {SCHEMA_VERSION}")
        return cls(
            sweep=d.get("sweep"),
            runs=tuple(RunResult.from_json(r) for r in d.get("runs") or ()),
            comparisons=tuple(Comparison.from_json(c) for c in d.get("comparisons") or ()),
            backends=tuple(
                BackendRate(b["dispatcher"], b["runs"], b["good"], b["bad"], dict(b.get("reasons") or {}))
                for b in d.get("backends") or ()
            ),
            notes=tuple(d.get("notes") or ()),
            drift=tuple(d.get("drift") or ()),
            design=d.get("design"),
            gpu_time=d.get("gpu_time"),
            bound=_bound_from_json(d.get("bound")),
            after=tuple(LaterStep(str(a["step"]), int(a["exit_code"]), str(a["text"])) for a in d.get("after") or ()),
        )


def _bound_from_json(d: dict[str, Any] | None) -> BoundReport | None:
    from analysis.measure.bound_records import BoundReport

    return BoundReport.from_json(d)
