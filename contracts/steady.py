"""The steady-step rules the payload and the analysis share (CONTRACTS §7), in the standard library alone.

- :func:`default_warmup`: the iterations a run's statistics skip, max(3, ceil(10% of the iterations));
- :func:`median_interval`: the distribution-free 95% interval of a median from order statistics (the k-th
  smallest and k-th largest values, k the largest with P(Binomial(n, 1/2) < k) <= 2.5%; Conover 1999, Practical
  Nonparametric Statistics, 3rd ed., section 3.2), which ``payload.train_iters=auto`` watches while a run trains
  and which ``analysis.measure.stats.order_statistic_ci`` computes for a run's report.
"""

from __future__ import annotations

import math


def default_warmup(n_iterations: int) -> int:
    """max(3, ceil(10% of n_iterations)) iterations of warm-up (CONTRACTS §7)."""
    return max(3, math.ceil(0.1 * max(0, n_iterations)))


def median_interval(values: list[float], confidence: float = 0.95) -> tuple[float, float, float]:
    """(median, low, high) of ``values``: the sample median (the mean of the two middle values for an even count)
    and the order-statistic interval at ``confidence``; below 6 values, where no order statistic reaches 95%, the
    interval is the whole range. Raises ValueError for no values."""
    x = sorted(float(v) for v in values)
    n = len(x)
    if not n:
        raise ValueError("median_interval needs at least one value")
    med = x[n // 2] if n % 2 else (x[n // 2 - 1] + x[n // 2]) / 2
    tail = (1 - confidence) / 2
    k, cdf = 0, 0.0
    while k < n // 2:
        nxt = cdf + math.comb(n, k) / 2**n  # P(X <= k)
        if nxt > tail:
            break
        cdf, k = nxt, k + 1
    if k == 0:
        return med, x[0], x[-1]
    return med, x[k - 1], x[n - k]
