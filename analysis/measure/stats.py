"""Per-run statistics over the steady iterations of a parsed log (CONTRACTS.md §7).

- Warm-up: the first ``warmup`` iterations are excluded; the default is max(3, ceil(10% of the iterations)), where
  "the iterations" are those actually logged: the last logged iteration, or ``train_iters`` when smaller (a run cut
  at 300 of 122,070 planned iterations warms up over 30, not 12,207; CONTRACTS §7). After a restart the first
  ``warmup`` iterations of the resumed file are excluded too (the new process warms up again).
- Iterations whose line reports skipped (``number of skipped iterations`` > 0) or NaN iterations are excluded;
  the skipped count is the sum of the logged counts.
- Fewer than MIN_STEADY = 5 steady iterations give no numbers: a percentile bootstrap over four values or fewer
  has almost no resamples that differ, so its interval would be a fiction (the run is ``insufficient_iterations``).
- Intervals: percentile bootstrap of the median, 95%, ``n_boot`` resamples (default 2000), seeded so that the same
  log always gives the same report. Above LARGE_N = 2,000 steady iterations the resamples are not built: each
  replicate's median is drawn from its exact distribution instead (:func:`bootstrap_medians`: the middle order
  statistics of n uniforms, two draws per replicate instead of n), so the replicates are distributed exactly as the
  full bootstrap's, ties of values logged to 0.1 included, with no n x n_boot resampling matrix (about 0.1 ms per
  iteration per run). On 8 runs x 30k iterations every interval bound equals the full bootstrap's to 3 significant
  digits (benchmarks/analysis.py prints both in one run). The order-statistic interval of the median
  (:func:`order_statistic_ci`, binomial quantiles) is kept as a distribution-free check; it lands on a data value
  where the bootstrap's bound of an even-sized sample may be the mean of two.
- tokens/s/GPU = global batch size x seq_length / (step time in s) / GPUs, per iteration (the logs do not print it).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from analysis.options import N_BOOT, SEED
from contracts.steady import (
    default_warmup as default_warmup,  # the rule the payload's auto iterations apply too
)

if TYPE_CHECKING:  # a type only: statistics of parsed series need not import the parser (pyarrow, RE2)
    from analysis.logs import IterationSeries

MIN_STEADY = 5

CONFIDENCE = 0.95
LARGE_N = 2_000  # above this many values: the replicates drawn without resamples (exact, and 38x faster)
_BATCH_ELEMENTS = 4_000_000  # resampled values per bootstrap batch (bounds memory: 32 MB of float64)


@dataclass(frozen=True, slots=True)
class Estimate:
    """A median with its 95% interval (units of the quantity: TFLOP/s/GPU or tokens/s/GPU)."""

    median: float
    ci_low: float
    ci_high: float

    def to_json(self) -> dict[str, float]:
        return {"median": self.median, "ci_low": self.ci_low, "ci_high": self.ci_high}


@dataclass(frozen=True, slots=True)
class StepTime:
    """Steady step time in ms: median, 90th percentile, 95% interval of the median, number of iterations."""

    median: float
    p90: float
    ci_low: float
    ci_high: float
    n: int

    def to_json(self) -> dict[str, float | int]:
        return {"median": self.median, "p90": self.p90, "ci_low": self.ci_low, "ci_high": self.ci_high, "n": self.n}


@dataclass(frozen=True, eq=False)
class RunStats:
    """Statistics of one run. Numbers are None when there are fewer than MIN_STEADY steady iterations."""

    total: int
    steady: int
    skipped: int
    warmup: int
    step_time: StepTime | None
    tflops: Estimate | None
    tokens: Estimate | None
    loss_first: float | None
    loss_last: float | None
    notes: tuple[str, ...]
    steady_mask: np.ndarray = field(repr=False)

    @property
    def sufficient(self) -> bool:
        return self.steady >= MIN_STEADY


def steady_mask(series: IterationSeries, warmup: int, restart_first_iterations: Sequence[int] = ()) -> np.ndarray:
    """Boolean mask of the steady iterations: after warm-up (also after each restart), not skipped, no NaN
    iterations, and a finite positive step time."""
    it = series.iteration
    mask = (it > warmup) & np.isfinite(series.step_ms) & (series.step_ms > 0)
    mask &= series.skipped <= 0
    mask &= series.nan_iterations <= 0
    for first in restart_first_iterations:
        mask &= ~((it >= first) & (it < first + warmup))
    return mask


def bootstrap_medians(values: np.ndarray, *, n_boot: int = N_BOOT, seed: int = SEED) -> np.ndarray:
    """``n_boot`` bootstrap replicates of the median of ``values`` (percentile bootstrap, seeded).

    Up to LARGE_N values, each replicate is the median of a resample of ``values``. Above, the replicates come
    from :func:`exact_bootstrap_medians`, which draws them from the same distribution without building resamples.
    Raises ValueError for an empty input.
    """
    x = np.asarray(values, dtype=np.float64)
    if x.size == 0:
        raise ValueError("bootstrap_medians needs at least one value")
    rng = np.random.default_rng(seed)
    if x.size > LARGE_N:
        return exact_bootstrap_medians(x, n_boot=n_boot, rng=rng)
    out = np.empty(n_boot)
    batch = max(1, _BATCH_ELEMENTS // x.size)
    for start in range(0, n_boot, batch):
        b = min(batch, n_boot - start)
        out[start : start + b] = np.median(x[rng.integers(0, x.size, size=(b, x.size))], axis=1)
    return out


def exact_bootstrap_medians(values: np.ndarray, *, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """``n_boot`` draws of the median of a size-n resample (with replacement) of ``values``, in O(n log n + n_boot).

    A resample is ``sorted(values)[floor(n * U_i)]`` for n independent uniforms U_i; the map is monotone, so its
    k-th smallest value is ``sorted(values)[floor(n * U_(k))]`` with U_(k) the k-th smallest uniform, which is
    Beta(k, n - k + 1); given U_(k) = u, U_(k+1) is u plus (1 - u) times the smallest of n - k uniforms. Two draws
    per replicate give the middle value (odd n) or the mean of the middle two (even n, as numpy's median): the
    full bootstrap's distribution of the median exactly, ties included (uniform order statistics: David &
    Nagaraja, Order Statistics; the exact bootstrap distribution of the median: Maritz & Jarrett, JASA 1978).
    Raises ValueError for an empty input.
    """
    x = np.sort(np.asarray(values, dtype=np.float64))
    n = x.size
    if n == 0:
        raise ValueError("exact_bootstrap_medians needs at least one value")
    k = (n + 1) // 2  # the (lower) middle rank, 1-based
    u = rng.beta(k, n - k + 1, n_boot)
    low = x[np.minimum((u * n).astype(np.int64), n - 1)]
    if n % 2:
        return low
    nxt = u + (1 - u) * -np.expm1(np.log1p(-rng.random(n_boot)) / (n - k))
    return (low + x[np.minimum((nxt * n).astype(np.int64), n - 1)]) / 2


def _binom_half_quantiles(n: int, q: float) -> tuple[int, int]:
    """(ppf(q), isf(q)) of Binomial(n, 1/2), as scipy.stats.binom gives them, without importing scipy (about
    0.3 s): the pmf over the central n/2 +- 10 sqrt(n) + 20 values (the mass outside is below 1e-20)."""
    half = 10 * math.isqrt(n) + 20
    lo_k, hi_k = max(0, n // 2 - half), min(n, n // 2 + half)
    k = np.arange(lo_k, hi_k + 1)
    lg = np.array([math.lgamma(i + 1) for i in range(lo_k, hi_k + 1)])
    lg_rest = np.array([math.lgamma(n - i + 1) for i in range(lo_k, hi_k + 1)])
    pmf = np.exp(math.lgamma(n + 1) - lg - lg_rest - n * math.log(2.0))
    cdf = np.cumsum(pmf)
    sf = np.cumsum(pmf[::-1])[::-1] - pmf  # P(X > k)
    ppf = int(k[np.searchsorted(cdf, q * (1 - 1e-12))]) if cdf[-1] >= q else n
    over = np.flatnonzero(sf <= q * (1 + 1e-12))
    isf = int(k[over[0]]) if over.size else n
    return ppf, isf


def order_statistic_ci(values: np.ndarray, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Distribution-free interval of the median from order statistics (binomial(n, 1/2) quantiles)."""
    x = np.sort(np.asarray(values, dtype=np.float64))
    n = x.size
    lo, hi = _binom_half_quantiles(n, (1 - confidence) / 2)
    return float(x[max(lo - 1, 0)]), float(x[min(hi, n - 1)])


def percentile_interval(replicates: np.ndarray, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The central ``confidence`` interval of bootstrap replicates."""
    alpha = (1 - confidence) / 2
    lo, hi = np.quantile(replicates, [alpha, 1 - alpha])
    return float(lo), float(hi)


def estimate(values: np.ndarray, *, n_boot: int = N_BOOT, seed: int = SEED) -> Estimate:
    """Median of ``values`` with its bootstrap 95% interval."""
    lo, hi = percentile_interval(bootstrap_medians(values, n_boot=n_boot, seed=seed))
    return Estimate(float(np.median(values)), lo, hi)


def compute_stats(
    series: IterationSeries,
    *,
    warmup: int | None = None,
    train_iters: int | None = None,
    global_batch_size: int | None = None,
    seq_length: int | None = None,
    world_size: int | None = None,
    restart_first_iterations: Sequence[int] = (),
    n_boot: int = N_BOOT,
    seed: int = SEED,
) -> RunStats:
    """Statistics of one run (ms, TFLOP/s/GPU, tokens/s/GPU).

    ``warmup`` overrides the default (max(3, 10% of the last logged iteration, at most ``train_iters``)); it must be
    >= 0 (ValueError otherwise). ``global_batch_size`` is used where the iteration lines lack it; ``seq_length`` and
    ``world_size`` come from the effective config or the variant and are needed for tokens/s/GPU.
    """
    if warmup is not None and warmup < 0:
        raise ValueError(f"warmup must be >= 0 iterations, got {warmup}")
    logged = int(series.iteration.max()) if len(series) else 0
    n_ref = min(train_iters, logged) if train_iters else logged  # a run cut at 300 of 122,070 still has numbers
    warm = default_warmup(n_ref) if warmup is None else warmup
    mask = steady_mask(series, warm, restart_first_iterations)
    steady = int(mask.sum())
    skipped = int(series.skipped[series.skipped > 0].sum())
    notes: list[str] = []
    finite_loss = series.lm_loss[np.isfinite(series.lm_loss)]
    loss_first = float(finite_loss[0]) if finite_loss.size else None
    loss_last = float(finite_loss[-1]) if finite_loss.size else None
    common = dict(total=len(series), steady=steady, skipped=skipped, warmup=warm, loss_first=loss_first,
                  loss_last=loss_last, steady_mask=mask)
    if steady < MIN_STEADY:
        notes.append(f"{steady} steady iteration(s) after {warm} warm-up; at least {MIN_STEADY} are needed")
        return RunStats(step_time=None, tflops=None, tokens=None, notes=tuple(notes), **common)
    step = series.step_ms[mask]
    lo, hi = percentile_interval(bootstrap_medians(step, n_boot=n_boot, seed=seed))
    step_time = StepTime(float(np.median(step)), float(np.percentile(step, 90)), lo, hi, steady)
    tf = series.tflops[mask]
    tf = tf[np.isfinite(tf)]
    tflops = estimate(tf, n_boot=n_boot, seed=seed + 1) if tf.size >= MIN_STEADY else None
    if tflops is None:
        notes.append("throughput logging was off: no TFLOP/s/GPU in the log")
    tokens = None
    gbs = series.global_batch_size[mask].astype(np.float64)
    if global_batch_size:
        gbs = np.where(gbs > 0, gbs, float(global_batch_size))
    if seq_length and world_size and (gbs > 0).all():
        tokens = estimate(gbs * seq_length / (step / 1000.0) / world_size, n_boot=n_boot, seed=seed + 2)
    else:
        missing = [n for n, v in (("seq_length", seq_length), ("GPU count", world_size)) if not v]
        if not (gbs > 0).all():
            missing.append("global batch size")
        notes.append(f"tokens/s/GPU unknown: {', '.join(missing)} unknown")
    return RunStats(step_time=step_time, tflops=tflops, tokens=tokens, notes=tuple(notes), **common)
