"""The analysis options the sweep passes in (conf/config.yaml ``analysis.*`` and ``hang_min_s``), and the hang rule
the conductor applies while it tracks. A light module: it imports neither numpy nor scipy, so the planner can check
options at plan time cheaply.
"""

from __future__ import annotations

from dataclasses import dataclass

LOSS_TOLERANCE = 0.02  # CONTRACTS §7: loss parity within 2% by default
N_BOOT = 2000  # bootstrap resamples
SEED = 1234  # bootstrap seed: the same inputs give the same intervals
HANG_MIN_S = 600.0  # CASES C09: at least 10 min without a new iteration
PRACTICAL_THRESHOLD = 0.02  # within +-2% an arm is "equivalent" to its baseline: smaller effects are noise here


class UsageError(ValueError):
    """Bad command-line input: a missing path, an unknown baseline, a negative warm-up (exit code 2)."""


@dataclass(frozen=True)
class Options:
    """Analysis settings (conf/config.yaml ``analysis.*``, ``practical_threshold``): warm-up override, loss tolerance,
    bootstrap size, hang threshold (s), equivalence margin (fraction)."""

    warmup: int | None = None
    tolerance: float = LOSS_TOLERANCE
    n_boot: int = N_BOOT
    seed: int = SEED
    hang_min_s: float = HANG_MIN_S
    practical_threshold: float = PRACTICAL_THRESHOLD  # fraction: the equivalence margin of a paired verdict

    def __post_init__(self) -> None:
        if not 0 < self.practical_threshold < 1:
            raise UsageError(f"practical_threshold must be a fraction in (0, 1), e.g. 0.02; got "
                             f"{self.practical_threshold}")
        if self.warmup is not None and self.warmup < 0:
            raise UsageError(f"--warmup must be >= 0 iterations, got {self.warmup}")
        if not 0 < self.tolerance < 1:
            raise UsageError(f"loss tolerance must be in (0, 1), got {self.tolerance}")
        if self.n_boot < 100:
            raise UsageError(f"--bootstrap must be >= 100 resamples, got {self.n_boot}")
        if self.hang_min_s < 0:
            raise UsageError(f"--hang-min-s must be >= 0 s, got {self.hang_min_s}")



def is_suspected_hang(last_iteration_age_s: float | None, median_step_ms: float | None,
                      min_s: float = HANG_MIN_S) -> bool:
    """True when no new iteration has appeared for longer than max(min_s, 5 x the median step time) (CASES C09).

    ``last_iteration_age_s``: seconds since the last iteration line; ``median_step_ms``: median step time in ms
    (None when unknown: then only ``min_s`` counts). Raises ValueError for a negative age or threshold.
    """
    if last_iteration_age_s is None:
        return False
    if last_iteration_age_s < 0 or min_s < 0:
        raise ValueError(f"age {last_iteration_age_s} s and min_s {min_s} s must be >= 0")
    limit = max(min_s, 5 * (median_step_ms or 0) / 1000.0)
    return last_iteration_age_s > limit
