"""Judge one metric of one variant tonight against its rolling baseline (pure statistics, no database).

The rule (all three must hold for ``regression`` or ``improvement``, in the bad or good direction):

1. **Practical change**: ``|change| >= threshold`` where ``change = tonight / baseline - 1``, ``tonight`` the
   night's value (median of its runs' median step times, or the analysis's speedup) and ``baseline`` the median of
   the last ``window`` good nights' values. Two-sided, default 5% (Megatron-Bridge CI's ±5%, FACTS §7).
2. **Outside the night-to-night noise**: ``|change| >= noise_k * spread``, ``spread`` the robust standard deviation
   of those nights' values (1.4826 x median absolute deviation, relative to the baseline), default 3. A change that
   ordinary nights also show is not news (conbench's z-score over history, FACTS §7).
3. **Significant**: two-sided Mann-Whitney U tests (scipy.stats.mannwhitneyu; asv pairs a change factor with it,
   FACTS §7) on the per-run samples (tonight's runs against the baseline nights' runs, needs >= 2 and >= 3) and on
   the per-iteration samples (step time only), each with p < alpha. When neither test has enough samples, tonight's
   analysis confidence interval must exclude the baseline value.

Fewer than ``min_nights`` good nights of history give ``new_variant``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import median

from scipy.stats import mannwhitneyu

from analysis.history.records import (
    IMPROVEMENT,
    NEW_VARIANT,
    REGRESSION,
    WITHIN_NOISE,
    HistoryConfig,
    MetricJudgement,
    NightSamples,
)

MAD_TO_SD = 1.4826  # robust sd of a normal sample from its median absolute deviation


def robust_spread(values: Sequence[float], center: float) -> float:
    """Relative robust standard deviation of ``values`` around ``center``: 1.4826 x MAD / center."""
    return MAD_TO_SD * median(abs(v - center) for v in values) / center


def _mwu(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Two-sided Mann-Whitney U p-value, or None when a side is empty or every value is equal."""
    if not a or not b or len(set(a) | set(b)) == 1:
        return None
    return float(mannwhitneyu(a, b, alternative="two-sided").pvalue)


def judge_metric(metric: str, tonight: NightSamples, history: Sequence[NightSamples], config: HistoryConfig, *,
                 lower_is_better: bool) -> MetricJudgement:
    """Judge ``tonight`` against the last ``config.window`` nights of ``history`` (good nights only, any order).

    ``lower_is_better``: True for step time (ms), False for speedup. Returns a :class:`MetricJudgement` whose
    ``note`` says which check decided.
    """
    prior = sorted((h for h in history if h.night < tonight.night), key=lambda h: h.night)[-config.window:]
    nights = tuple(h.night for h in prior)
    interval = tonight.ci or ((min(tonight.runs), max(tonight.runs)) if len(tonight.runs) >= 2 else None)
    if len(prior) < config.min_nights:
        note = f"{len(prior)} good night(s) of history, fewer than min_nights={config.min_nights}"
        if prior:
            base = median(h.value for h in prior)
            note += f"; change {tonight.value / base - 1:+.1%} against them"
        return MetricJudgement(metric=metric, verdict=NEW_VARIANT, tonight=tonight.value, nights=nights, note=note,
                               interval=interval)
    base = median(h.value for h in prior)
    change = tonight.value / base - 1.0
    spread = robust_spread([h.value for h in prior], base)
    z = change / spread if spread > 0 else (math.copysign(math.inf, change) if change else 0.0)
    prior_runs = [x for h in prior for x in h.runs]
    p_runs = _mwu(tonight.runs, prior_runs) if len(tonight.runs) >= 2 and len(prior_runs) >= 3 else None
    prior_iters = [x for h in prior for x in h.iterations]
    p_iter = _mwu(tonight.iterations, prior_iters)
    ps = [p for p in (p_runs, p_iter) if p is not None]
    if ps:
        significant = all(p < config.alpha for p in ps)
        sig_note = ", ".join(f"{k}={p:.3g}" for k, p in (("p_runs", p_runs), ("p_iterations", p_iter)) if p is not None)
    elif tonight.ci is not None:
        significant = not tonight.ci[0] <= base <= tonight.ci[1]
        sig_note = f"tonight's interval [{tonight.ci[0]:.4g}, {tonight.ci[1]:.4g}] vs baseline {base:.4g}"
    else:
        significant, sig_note = False, "no samples for a significance test"
    bad = (change > 0) == lower_is_better
    facts = f"change {change:+.1%}, spread ±{spread:.1%}, z={z:+.1f}, {sig_note}"
    if abs(change) < config.threshold:
        verdict, why = WITHIN_NOISE, f"below the {config.threshold:.0%} threshold"
    elif abs(z) < config.noise_k:
        verdict, why = WITHIN_NOISE, f"within the night-to-night spread (|z| < {config.noise_k:g})"
    elif not significant:
        verdict, why = WITHIN_NOISE, f"not significant at alpha={config.alpha:g}"
    else:
        verdict, why = (REGRESSION if bad else IMPROVEMENT), "outside threshold, spread and significance"
    return MetricJudgement(metric=metric, verdict=verdict, tonight=tonight.value, baseline=base, change=change,
                           spread=spread, z=z, p_runs=p_runs, p_iterations=p_iter, nights=nights,
                           note=f"{why}: {facts}", interval=interval)
