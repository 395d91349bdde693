"""Synthetic nightly histories with realistic noise, for the detection-rate tests and ``benchmarks/history.py``.

Noise model (multiplicative on the step time; defaults in :class:`NoiseModel`):

* night: one factor per night shared by every variant (cluster state, neighbours, clocks), sd 1%;
* variant-night: one factor per (night, variant), sd 0.5%;
* run: one factor per (night, variant, repeat), sd 0.5%;
* iteration: gaussian sd 2%, plus a 2% chance of a +20..60% spike (a straggler, a GC pause, a checkpoint).

Base step times follow the published ratios (FACTS §7): overlap gives 1.2-1.4x over alltoall without overlap.
Each night produces a :class:`NightInput` exactly as ``ingest.load_summary`` would from a real sweep, including the
analysis's speedup (baseline median of per-run medians / the variant's) with a per-repeat interval.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta

import numpy as np

from analysis.history.judge import history_from_inputs, judge_history
from analysis.history.records import (
    SPEEDUP,
    STEP_TIME,
    HistoryConfig,
    NightInput,
    RunRecord,
    Series,
    SpeedupRecord,
    SweepInfo,
)

BASELINE = "a2a.ovl0.dw0"
DEFAULT_VARIANTS = {BASELINE: 1000.0, "a2a.ovl1.dw0": 1000.0 / 1.25, "deepep.ovl1.dw0": 1000.0 / 1.35,
                    "hybridep.ovl1.dw0": 1000.0 / 1.40}
TOKENS_PER_STEP_PER_GPU = 16384.0  # e.g. GBS 32 x seq 4096 / 8 GPUs


@dataclass(frozen=True, kw_only=True)
class NoiseModel:
    """Relative standard deviations of each noise level (0.01 = 1%) and the shape of a night."""

    night_sd: float = 0.010
    variant_night_sd: float = 0.005
    run_sd: float = 0.005
    iteration_sd: float = 0.02
    spike_prob: float = 0.02
    spike_range: tuple[float, float] = (0.2, 0.6)
    repeats: int = 3
    iterations: int = 40


@dataclass(frozen=True, kw_only=True)
class SyntheticSeries:
    """What to simulate: the variants' base step times (ms), the series and the first night."""

    variants: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_VARIANTS))
    groups: dict[str, str] = field(default_factory=dict)
    """variant -> group key (extra axes, e.g. ``model.expert_model_parallel_size=16``); default ``""``. The
    baseline of a group is its variant whose name starts with ``a2a.ovl0.dw0``."""
    series: Series = Series(preset="nightly", model="tiny_moe", cluster="synthetic")
    start: date = date(2026, 11, 1)
    noise: NoiseModel = NoiseModel()


def simulate_night(spec: SyntheticSeries, index: int, rng: np.random.Generator,
                   factors: dict[str, float] | None = None, failed: dict[str, str] | None = None,
                   skip: tuple[str, ...] = ()) -> NightInput:
    """One night (``spec.start + index`` days). ``factors``: variant -> step-time multiplier (1.10 = a 10%
    regression). ``failed``: variant -> reason, whose runs fail. ``skip``: variants not in tonight's sweep."""
    factors, failed, nz = factors or {}, failed or {}, spec.noise
    group = {v: spec.groups.get(v, "") for v in spec.variants}
    base_of = {v: next(b for b in spec.variants if group[b] == group[v] and b.startswith(BASELINE))
               for v in spec.variants}
    night = spec.start + timedelta(days=index)
    created = datetime(night.year, night.month, night.day, 1, 0, tzinfo=UTC)
    sweep_id = f"{created:%Y%m%d-%H%M%SZ}-{index:06x}"
    night_f = 1 + rng.normal(0, nz.night_sd)
    runs, medians = [], {}
    names = [v for v in spec.variants if v not in skip]
    for rep in range(nz.repeats):  # round-robin order: A B C A B C
        for v in names:
            if v in failed:
                runs.append(RunRecord(variant=v, repeat=rep, attempt=1, status="failed", reason=failed[v],
                                      role="baseline" if v == base_of[v] else "variant", group_key=group[v]))
                continue
            base = spec.variants[v] * factors.get(v, 1.0) * night_f
            mean = base * (1 + rng.normal(0, nz.variant_night_sd)) * (1 + rng.normal(0, nz.run_sd))
            it = mean * (1 + rng.normal(0, nz.iteration_sd, nz.iterations))
            spikes = rng.random(nz.iterations) < nz.spike_prob
            it = it * (1 + spikes * rng.uniform(*nz.spike_range, nz.iterations))
            med = float(np.median(it))
            medians.setdefault(v, []).append(med)
            lo, hi = np.percentile(it, [25, 75])
            runs.append(RunRecord(variant=v, repeat=rep, attempt=1, status="ok",
                                  role="baseline" if v == base_of[v] else "variant", group_key=group[v],
                                  step_time_ms=med,
                                  step_time_p90_ms=float(np.percentile(it, 90)), step_time_ci_low_ms=float(lo),
                                  step_time_ci_high_ms=float(hi), n_steady=nz.iterations,
                                  tokens_per_s_per_gpu=TOKENS_PER_STEP_PER_GPU / (med / 1000.0),
                                  step_times_ms=tuple(float(x) for x in it)))
    speedups = []
    for v in names:
        b = base_of[v]
        if v == b:
            continue
        if b not in medians or v not in medians:
            missing = b if b not in medians else v
            speedups.append(SpeedupRecord(variant=v, baseline=b, group_key=group[v],
                                          reason=f"no successful run of {missing} tonight"))
            continue
        ratios = [x / m for x, m in zip(medians[b], medians[v], strict=False)]
        speedups.append(SpeedupRecord(variant=v, baseline=b, group_key=group[v],
                                      value=float(np.median(medians[b]) / np.median(medians[v])),
                                      ci_low=min(ratios), ci_high=max(ratios), verdict="faster"))
    sweep = SweepInfo(sweep_id=sweep_id, series=spec.series, created=created, git_sha=f"{index:040x}",
                      container=(("megatron_core", "0.19.2"),)
                      + ((("name", spec.series.container),) if spec.series.container else ()) + (("torch", "2.14.1"),))
    return NightInput(sweep=sweep, runs=tuple(runs), speedups=tuple(speedups))


def simulate_series(spec: SyntheticSeries, nights: int, seed: int,
                    tonight: dict[str, float] | None = None) -> list[NightInput]:
    """``nights`` nights of pure noise; the last one gets the step-time multipliers ``tonight``."""
    rng = np.random.default_rng(seed)
    return [simulate_night(spec, i, rng, tonight if i == nights - 1 else None) for i in range(nights)]


@dataclass(frozen=True, kw_only=True)
class DetectionRate:
    """How often an injected step-time change of ``level`` on one variant was flagged, over ``trials`` seeds."""

    level: float
    trials: int
    step_time: float
    """Fraction of trials whose step-time verdict was ``regression``."""
    speedup: float
    """Fraction whose speedup verdict was ``regression``."""
    either: float
    other_alarms: int
    """Regressions or improvements flagged on any other (variant, metric) in these trials (false alarms)."""


def detection_rate(level: float, trials: int, *, variant: str = "deepep.ovl1.dw0", seed0: int = 0,
                   spec: SyntheticSeries | None = None, config: HistoryConfig | None = None) -> DetectionRate:
    """Simulate ``trials`` histories of window + 1 nights whose last night slows ``variant`` by ``level`` (0.05 =
    5% longer steps) and judge that night. Seeds are ``seed0 .. seed0 + trials - 1`` (deterministic)."""
    spec, config = spec or SyntheticSeries(), config or HistoryConfig()
    st = sp = ei = other = 0
    for seed in range(seed0, seed0 + trials):
        inputs = simulate_series(spec, config.window + 1, seed, {variant: 1 + level} if level else None)
        report = judge_history(history_from_inputs(inputs), inputs[-1].sweep.night, config)
        flagged = set(report.regressions)
        st += (variant, STEP_TIME) in flagged
        sp += (variant, SPEEDUP) in flagged
        ei += bool({(variant, STEP_TIME), (variant, SPEEDUP)} & flagged)
        other += len([x for x in set(report.regressions) | set(report.improvements) if x[0] != variant])
    return DetectionRate(level=level, trials=trials, step_time=st / trials, speedup=sp / trials, either=ei / trials,
                         other_alarms=other)


def false_alarms(nights: int, seed: int, *, spec: SyntheticSeries | None = None,
                 config: HistoryConfig | None = None) -> tuple[int, int]:
    """Judge every night of a ``nights``-night pure-noise history; return (alarms, judgements made).

    An alarm is any ``regression`` or ``improvement``; a judgement is one (night, variant, metric) with enough
    history to be judged (``min_nights``)."""
    spec, config = spec or SyntheticSeries(), config or HistoryConfig()
    inputs = simulate_series(spec, nights, seed)
    history = history_from_inputs(inputs)
    alarms = judged = 0
    for n in inputs[config.min_nights:]:
        report = judge_history(history, n.sweep.night, config)
        alarms += len(report.regressions) + len(report.improvements)
        judged += sum(1 for v in report.variants for j in v.judgements if j.baseline is not None)
    return alarms, judged
