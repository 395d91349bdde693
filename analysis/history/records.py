"""Typed, immutable records of the history stage: what goes into the database and what comes out of a judgement.

Input (one collected sweep): :class:`NightInput` = :class:`SweepInfo` + :class:`RunRecord` per (variant, repeat) +
:class:`SpeedupRecord` per compared variant, built from ``summary.json`` (CONTRACTS §7) by ``ingest.load_summary``.
Output: :class:`RecordResult` (what was written) and :class:`NightReport` (verdicts of one night).
Units are in the field names: ``_ms`` milliseconds, ``tokens_per_s_per_gpu`` tokens/s/GPU, ``tflops_per_gpu``
TFLOP/s/GPU; a ``change`` or ``spread`` is relative (0.05 = 5%).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields
from datetime import date, datetime
from typing import Any

from contracts.exits import ExitCode, combine
from contracts.statuses import RunOutcome, values

# Verdicts of the nightly judgement (CONTRACTS §13).
REGRESSION = "regression"
IMPROVEMENT = "improvement"
WITHIN_NOISE = "within_noise"
NEW_VARIANT = "new_variant"
MISSING_TONIGHT = "missing_tonight"
NOT_TIMED = "not_timed"  # it ran and passed, but validate mode has no timings to judge
VERDICTS = (REGRESSION, IMPROVEMENT, WITHIN_NOISE, NEW_VARIANT, MISSING_TONIGHT, NOT_TIMED)

# Metrics judged per variant. Throughput (tokens/s/GPU, TFLOP/s/GPU) is the inverse of the step time for a fixed
# model shape, so the step-time verdict is the throughput verdict (with the sign flipped).
STEP_TIME = "step_time_ms"
SPEEDUP = "speedup"
METRICS = (STEP_TIME, SPEEDUP)

# Run outcomes (CONTRACTS §4) whose step times count as performance samples. `validated` runs never trained.
TIMED_STATUSES = ("ok", "ok_with_warning")
# Run outcomes that are good (CONTRACTS §4: exit 0), and plan statuses of a run that never ran (CONTRACTS §4/§7:
# pruned at plan time or by the container preflight, skipped by a closed gate, still gated): neither is a failure.
GOOD_STATUSES = (*TIMED_STATUSES, "validated")
NOT_RUN_STATUSES = ("pruned", "skipped", "gated")


def ran_and_failed(status: str) -> bool:
    """True for a run that ran (or should have) and did not end good: what an alert counts as a failed run."""
    return status not in GOOD_STATUSES and status not in NOT_RUN_STATUSES

# Settings of the history group that are not judgement settings: where the night is told (analysis/history/outlets)
OUTLET_KEYS = ("notify", "notify_format", "notify_timeout_s", "page_url", "mlflow", "mlflow_experiment",
               "mlflow_timeout_s")


@dataclass(frozen=True, kw_only=True)
class HistoryConfig:
    """Settings of the regression judgement (the ``history`` group of ``conf/config.yaml``).

    Raises ``ValueError`` naming the field and its valid range when a value is out of range.
    """

    window: int = 7
    """Rolling baseline: the last ``window`` good nights before tonight (default 7: one week)."""
    threshold: float = 0.05
    """Smallest relative change that matters, both directions (Megatron-Bridge CI uses ±5%, FACTS §7)."""
    alpha: float = 0.05
    """Significance level of the two-sided Mann-Whitney U tests (asv pairs a change factor with Mann-Whitney)."""
    noise_k: float = 3.0
    """A change must exceed ``noise_k`` robust standard deviations of the night-to-night values (z-score over
    history, as conbench does; FACTS §7)."""
    min_nights: int = 3
    """Fewer good nights of history than this: the verdict is ``new_variant`` (no spread to judge against)."""

    def __post_init__(self) -> None:
        for name in ("window", "min_nights"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int):
                raise ValueError(f"history.{name}={v!r}: must be an integer")
        for name in ("threshold", "alpha", "noise_k"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int | float):
                raise ValueError(f"history.{name}={v!r}: must be a number")
        if not isinstance(self.window, int) or self.window < 1:
            raise ValueError(f"history.window={self.window!r}: must be an integer >= 1 (nights)")
        if not isinstance(self.min_nights, int) or not 1 <= self.min_nights <= self.window:
            raise ValueError(f"history.min_nights={self.min_nights!r}: must be an integer in 1..window ({self.window})")
        if not 0 < float(self.threshold) < 1:
            raise ValueError(f"history.threshold={self.threshold!r}: must be a fraction in (0, 1), e.g. 0.05 for 5%")
        if not 0 < float(self.alpha) < 1:
            raise ValueError(f"history.alpha={self.alpha!r}: must be in (0, 1), e.g. 0.05")
        if not float(self.noise_k) >= 0:
            raise ValueError(f"history.noise_k={self.noise_k!r}: must be >= 0 (robust standard deviations)")

    @classmethod
    def from_mapping(cls, values: dict[str, Any]) -> HistoryConfig:
        """Build from a mapping such as the Hydra ``history`` group; ``url`` and ``enabled`` are ignored.

        Raises ``ValueError`` listing the valid keys when a key is unknown.
        """
        valid = {f.name for f in fields(cls)}
        ignored = {"url", "enabled", *OUTLET_KEYS}
        unknown = sorted(set(values) - valid - ignored)
        if unknown:
            raise ValueError(f"unknown history key(s) {', '.join(unknown)}; valid: {', '.join(sorted(valid | ignored))}")
        return cls(**{k: v for k, v in values.items() if k in valid})


@dataclass(frozen=True, kw_only=True, order=True)
class Series:
    """What makes nights comparable: the sweep preset, the model, the cluster profile and the container profile
    (``conf/container/<name>.yaml``; ``""`` for nights recorded before the history kept it). Within a series each
    variant is its own line of nights: a variant is judged only against its own earlier nights.

    Text form (``str()``, ``--series``, ``Series.parse``): ``preset/model/cluster[/container]``.
    """

    preset: str
    model: str
    cluster: str
    container: str = ""

    def __str__(self) -> str:
        return "/".join((self.preset, self.model, self.cluster) + ((self.container,) if self.container else ()))

    @property
    def slug(self) -> str:
        """A name safe in an HTML id or a file name: the text form with every other character as ``-``."""
        return re.sub(r"[^A-Za-z0-9_.]+", "-", str(self)).strip("-")

    @classmethod
    def parse(cls, text: str) -> Series:
        """``preset/model/cluster`` or ``preset/model/cluster/container``.

        Raises ``ValueError`` naming the text and the expected form.
        """
        parts = str(text).split("/")
        if len(parts) not in (3, 4) or not all(parts[:3]):
            raise ValueError(f"series {text!r} is not of the form preset/model/cluster[/container], "
                             f"e.g. nightly/qwen3_30b_a3b/h100_slurm/nemo_26_04")
        return cls(preset=parts[0], model=parts[1], cluster=parts[2], container=parts[3] if len(parts) == 4 else "")

    def to_json(self) -> dict[str, str]:
        return {"preset": self.preset, "model": self.model, "cluster": self.cluster, "container": self.container}


@dataclass(frozen=True, kw_only=True)
class SweepInfo:
    """One collected sweep. ``created`` is timezone-aware UTC; its date is the sweep's *night*."""

    sweep_id: str
    series: Series
    created: datetime
    git_sha: str | None = None
    dirty: bool | None = None
    container: tuple[tuple[str, str | None], ...] = ()
    source: str | None = None

    @property
    def night(self) -> date:
        """The UTC date of the sweep's creation: a night is a UTC day, whatever the login node's time zone."""
        return self.created.date()


@dataclass(frozen=True, kw_only=True)
class RunRecord:
    """One (variant, repeat) of a sweep: the latest attempt's outcome and figures (summary.json ``runs[]``)."""

    variant: str
    repeat: int
    attempt: int
    status: str
    reason: str | None = None
    role: str | None = None
    group_key: str = ""
    step_time_ms: float | None = None
    step_time_p90_ms: float | None = None
    step_time_ci_low_ms: float | None = None
    step_time_ci_high_ms: float | None = None
    n_steady: int | None = None
    tflops_per_gpu: float | None = None
    tokens_per_s_per_gpu: float | None = None
    peak_mem_gb: float | None = None
    loss_first: float | None = None
    loss_last: float | None = None
    step_times_ms: tuple[float, ...] = ()
    """Every steady iteration's step time (ms), in iteration order."""
    gpu_hours_estimate: float | None = None
    """What the plan reserved for this run: nodes x GPUs x time limit (GPU-hours; manifest ``design.run_gpu_hours``)."""
    gpu_hours_accounted: float | None = None
    """What Slurm accounted for this run: the sum over its attempts' jobs of ElapsedRaw x gres/gpu (GPU-hours)."""
    gpu_hours_note: str | None = None
    """Where ``gpu_hours_accounted`` came from, or why it is missing."""
    breakdown_ms: tuple[tuple[str, float], ...] = ()
    """Where a profiled run's step time went: (part, ms per profiled step) for the parts of
    ``analysis/measure/profile_breakdown.py`` (``PARTS``) and ``step``; empty when the run was not profiled."""

    def __post_init__(self) -> None:
        if self.status not in values(RunOutcome):
            raise ValueError(f"run {self.variant} repeat {self.repeat}: status {self.status!r} is not one of "
                             f"{', '.join(values(RunOutcome))}")

    @property
    def is_timed(self) -> bool:
        """True when this run's step times are performance samples (status ok/ok_with_warning, a median)."""
        return self.status in TIMED_STATUSES and self.step_time_ms is not None


@dataclass(frozen=True, kw_only=True)
class SpeedupRecord:
    """A variant's speedup over its group's baseline (baseline median step time / variant's; > 1 is faster)."""

    variant: str
    baseline: str
    group_key: str = ""
    value: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    verdict: str | None = None
    reason: str | None = None


@dataclass(frozen=True, kw_only=True)
class NightInput:
    """Everything one sweep contributes to the history."""

    sweep: SweepInfo
    runs: tuple[RunRecord, ...]
    speedups: tuple[SpeedupRecord, ...] = ()
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class RecordResult:
    """What :func:`analysis.history.record_summary` wrote. ``replaced``: the sweep had been recorded before and its
    rows were replaced (recording is idempotent)."""

    sweep_id: str
    night: date
    series: Series
    url: str
    runs: int
    steps: int
    speedups: int
    replaced: bool
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class NightSamples:
    """One metric of one variant on one night: the night's value and the samples behind it.

    ``runs``: per-run values (median step time in ms, or per-repeat speedups). ``iterations``: every steady
    iteration's step time in ms pooled over the night's runs (empty for speedups). ``ci``: the analysis's
    interval of ``value`` when known.
    """

    night: date
    value: float
    runs: tuple[float, ...] = ()
    iterations: tuple[float, ...] = ()
    ci: tuple[float, float] | None = None


@dataclass(frozen=True, kw_only=True)
class MetricJudgement:
    """Tonight against the rolling baseline for one metric. ``change`` = tonight / baseline - 1; ``spread`` is the
    night-to-night robust standard deviation relative to the baseline; ``z`` = change / spread."""

    metric: str
    verdict: str
    tonight: float | None = None
    baseline: float | None = None
    change: float | None = None
    spread: float | None = None
    z: float | None = None
    p_runs: float | None = None
    p_iterations: float | None = None
    nights: tuple[date, ...] = ()
    note: str = ""
    interval: tuple[float, float] | None = None
    """Tonight's interval of ``tonight``: the analysis's confidence interval when one sweep gave it, else the
    range of tonight's per-run values (two runs or more); None when neither is known."""

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict {self.verdict!r} is not one of {', '.join(VERDICTS)}")
        if self.metric not in METRICS:
            raise ValueError(f"metric {self.metric!r} is not one of {', '.join(METRICS)}")

    def to_json(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["nights"] = [d.isoformat() for d in self.nights]
        out["interval"] = list(self.interval) if self.interval else None
        return out


@dataclass(frozen=True, kw_only=True)
class PartChange:
    """One part of the step-time breakdown tonight against the profiled nights before it (ms per profiled step).

    ``change_ms`` = tonight - baseline; ``change`` = change_ms / baseline (None when the baseline is 0);
    ``share`` = change_ms / the baseline step (ms), how much of the step this part's move amounts to."""

    part: str
    tonight_ms: float
    baseline_ms: float
    change_ms: float
    change: float | None
    share: float

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def describe(self) -> str:
        rel = "" if self.change is None else f" ({self.change:+.0%})"
        return f"{self.part} {self.change_ms:+.1f} ms{rel}"


@dataclass(frozen=True, kw_only=True)
class VariantJudgement:
    """The verdicts of one variant tonight: its step time and (unless it is a baseline) its speedup."""

    variant: str
    group_key: str
    role: str | None
    step_time: MetricJudgement
    speedup: MetricJudgement | None = None
    baseline_variant: str | None = None
    tokens_per_s_per_gpu: float | None = None
    parts_moved: tuple[PartChange, ...] = ()
    """With a profiled run tonight and a profiled night before: the breakdown parts that moved (largest first)."""
    parts_note: str = ""
    """Which profiled nights the parts were compared with, or why they were not."""
    gpu_hours_estimate: float | None = None
    """Tonight's runs of this variant: the plan's GPU-hours (sum), and what Slurm accounted (sum; None if unknown)."""
    gpu_hours_accounted: float | None = None

    @property
    def judgements(self) -> tuple[MetricJudgement, ...]:
        return (self.step_time,) + ((self.speedup,) if self.speedup is not None else ())

    @property
    def throughput_change(self) -> float | None:
        """Relative throughput change implied by the step-time change (throughput ∝ 1 / step time)."""
        c = self.step_time.change
        return None if c is None else 1.0 / (1.0 + c) - 1.0

    def to_json(self) -> dict[str, Any]:
        return {"variant": self.variant, "group_key": self.group_key, "role": self.role,
                "baseline_variant": self.baseline_variant, "tokens_per_s_per_gpu": self.tokens_per_s_per_gpu,
                "throughput_change": self.throughput_change, "step_time": self.step_time.to_json(),
                "speedup": None if self.speedup is None else self.speedup.to_json(),
                "parts_moved": [p.to_json() for p in self.parts_moved], "parts_note": self.parts_note,
                "gpu_hours_estimate": self.gpu_hours_estimate, "gpu_hours_accounted": self.gpu_hours_accounted}


@dataclass(frozen=True, kw_only=True)
class NightReport:
    """The judgement of one night of one series. ``exit_code`` is this stage's contribution (CONTRACTS §5)."""

    night: date
    series: Series
    sweep_ids: tuple[str, ...]
    config: HistoryConfig
    variants: tuple[VariantJudgement, ...]
    retired: tuple[str, ...] = ()
    """Variants seen in the history but not within the window before tonight, and absent tonight."""
    warnings: tuple[str, ...] = field(default=())
    failed_runs: tuple[str, ...] = ()
    """The night's runs that ran and failed (``variant: status (reason)``); pruned and skipped runs are not here."""

    @property
    def regressions(self) -> tuple[tuple[str, str], ...]:
        """(variant, metric) pairs judged ``regression``."""
        return tuple((v.variant, j.metric) for v in self.variants for j in v.judgements if j.verdict == REGRESSION)

    @property
    def improvements(self) -> tuple[tuple[str, str], ...]:
        return tuple((v.variant, j.metric) for v in self.variants for j in v.judgements if j.verdict == IMPROVEMENT)

    @property
    def exit_code(self) -> int:
        """This stage's contribution: 4 when a regression is flagged, else 0 (CONTRACTS §5)."""
        return ExitCode.REGRESSION if self.regressions else ExitCode.OK

    @property
    def night_exit_code(self) -> int:
        """The night's exit code: 3 when a run ran and failed, else :attr:`exit_code` (``contracts.exits.combine``)."""
        return combine(ExitCode.RUN_FAILED if self.failed_runs else ExitCode.OK, self.exit_code)

    def variant(self, name: str) -> VariantJudgement:
        """The judgement of variant ``name``; ``KeyError`` lists the judged variants."""
        for v in self.variants:
            if v.variant == name:
                return v
        raise KeyError(f"variant {name!r} not judged on {self.night}; judged: {', '.join(v.variant for v in self.variants)}")

    def to_json(self) -> dict[str, Any]:
        return {"schema_version": 1, "night": self.night.isoformat(),
                "series": self.series.to_json(),
                "sweep_ids": list(self.sweep_ids),
                "config": {f.name: getattr(self.config, f.name) for f in fields(self.config)},
                "exit_code": self.night_exit_code, "history_exit_code": self.exit_code,
                "failed_runs": list(self.failed_runs), "regressions": [list(r) for r in self.regressions],
                "improvements": [list(r) for r in self.improvements],
                "variants": [v.to_json() for v in self.variants], "retired": list(self.retired),
                "warnings": list(self.warnings)}
