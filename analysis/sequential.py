"""Decisions on block log-ratios: the fixed design (every block planned) and ``repeats=auto`` (CONTRACTS §4, §7).

Input: one log-ratio per block, d_b = log(baseline median step in block b / arm median step in block b) (ms / ms;
above 0 the arm is faster). Output per arm: ``faster``, ``slower``, ``equivalent`` (within +-practical_threshold)
or undecided (``no_significant_difference`` in a fixed design).

Fixed design (:func:`fixed_states`): the 95% Student-t interval of mean(d) over the blocks decides faster/slower;
equivalence is the two one-sided tests (TOST, Schuirmann 1987, J. Pharmacokin. Biopharm. 15:657-680) at 5% each,
i.e. the 90% t interval lies inside +-log(1 + practical_threshold).

Adaptive design (:func:`sequential_states`): a group-sequential design with an alpha-spending function, the
O'Brien-Fleming-type spending of Lan & DeMets (1983, Biometrika 70:659-663), alpha*(t) = 2 - 2 Phi(z_{1-a/2}/sqrt(t)),
information fraction t = k / max_blocks after block k (Jennison & Turnbull 2000, Group Sequential Methods with
Applications to Clinical Trials, ch. 7). Looks start at block K_MIN = 3 (a t statistic needs 2 degrees of freedom to
mean anything); the first look spends alpha*(3/max_blocks). The variance is unknown, so the boundaries are those of
the Student-t statistic itself, found by simulating its (pivotal) null distribution (:func:`t_boundaries`) rather
than by converting normal-theory boundaries to nominal t levels, which overshoots alpha at few blocks (5.7% instead
of 5% at 6 blocks in our check). Faster/slower: the two-sided efficacy boundary at total level alpha (the A/A
false-positive rate over every look). FUTILITY = 0.8 and max_blocks = 6 were chosen with benchmarks/verdicts.py. Equivalent: both one-sided tests against -+log(1 + threshold) pass their
one-sided spending boundary at level alpha. Equivalence has priority: an arm inside the practical threshold is
``equivalent`` even when it is measurably different. A decided arm stops; its first decision is its verdict.
Futility (non-binding, so it can only lower the error rates): after look k < max_blocks an arm is ``stopped``
(undecided, no more blocks) when neither decision is within reach: the t statistic projected to max_blocks at the
current trend, |T_k| sqrt(max_blocks / k), is below FUTILITY x the final two-sided boundary, and the projected
equivalence statistic (margin - |mean|) / se_k x sqrt(max_blocks / k) is below FUTILITY x the final one-sided one.

Both functions take a matrix (rows = arms or simulated trials, columns = blocks, NaN = no block) so that the
simulator (benchmarks/verdicts.py) runs the very code the sweep runs; :func:`fixed_verdict` and
:func:`sequential_verdict` are the one-arm forms the analysis calls.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy import stats as sps

ALPHA = 0.05
K_MIN = 3
PRACTICAL_THRESHOLD = 0.02
UNDECIDED, FASTER, SLOWER, EQUIVALENT, STOPPED = 0, 1, 2, 3, 4
STATE_NAMES = {UNDECIDED: "undecided", FASTER: "faster", SLOWER: "slower", EQUIVALENT: "equivalent",
               STOPPED: "stopped"}
FUTILITY = 0.8  # non-binding futility: stop when the trend, projected to max_blocks, reaches < 80% of a boundary
_N_PATHS = 200_000  # simulated null paths behind the boundaries
_PATHS_SEED = 20261129


def obf_spending(t: float, alpha: float = ALPHA) -> float:
    """Lan-DeMets O'Brien-Fleming-type alpha spent by information fraction ``t`` in [0, 1] (two-sided level)."""
    if t <= 0:
        return 0.0
    return float(2 - 2 * sps.norm.cdf(sps.norm.ppf(1 - alpha / 2) / math.sqrt(min(t, 1.0))))


@lru_cache(maxsize=64)
def t_boundaries(max_blocks: int, alpha: float = ALPHA, k_min: int = K_MIN) -> tuple[np.ndarray, np.ndarray]:
    """(two-sided, one-sided) critical values of the t statistic per look k (index 0..max_blocks; inf before
    ``k_min``) that spend ``alpha`` along :func:`obf_spending`.

    Under the null the sequence T_k = mean_k / (sd_k / sqrt(k)) of i.i.d. normal blocks does not depend on the
    unknown mean-zero scale (it is pivotal), so its crossing probabilities are those of N_PATHS simulated standard
    normal paths (seeded: the same boundaries every time; Monte Carlo error of the level about 0.0005). At look k the
    boundary is the value that the paths still running exceed with probability alpha*(t_k) - alpha*(t_{k-1})
    (two-sided: |T_k|; one-sided: T_k with the one-sided spending alpha*(t; 2 alpha) / 2, for each test of the TOST).

    Raises ValueError for max_blocks < k_min or alpha outside (0, 1).
    """
    if max_blocks < k_min or not 0 < alpha < 1:
        raise ValueError(f"max_blocks={max_blocks} must be >= {k_min} and alpha={alpha} in (0, 1)")
    z = np.random.default_rng(_PATHS_SEED).standard_normal((_N_PATHS, max_blocks))
    k = np.arange(1, max_blocks + 1)
    mean = z.cumsum(axis=1) / k
    var = np.maximum((np.square(z).cumsum(axis=1) - k * mean**2) / np.maximum(k - 1, 1), 1e-300)
    t = mean / np.sqrt(var / k)
    out = []
    for sides in (2, 1):
        stat = np.abs(t) if sides == 2 else t
        spent = [obf_spending(j / max_blocks, alpha if sides == 2 else 2 * alpha) / (1 if sides == 2 else 2)
                 for j in range(max_blocks + 1)]
        crit = np.full(max_blocks + 1, np.inf)
        alive = np.ones(_N_PATHS, dtype=bool)
        for j in range(k_min, max_blocks + 1):
            n_cross = int(round((spent[j] - (spent[j - 1] if j > k_min else 0.0)) * _N_PATHS))
            col = stat[alive, j - 1]
            if n_cross >= 1 and col.size > n_cross:
                crit[j] = float(np.partition(col, col.size - n_cross - 1)[col.size - n_cross - 1])
                alive &= ~(stat[:, j - 1] > crit[j])
        out.append(crit)
    return out[0], out[1]


def _moments(x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Mean and standard error of the first k columns of ``x`` (no NaN there)."""
    head = x[:, :k]
    mean = head.mean(axis=1)
    sd = head.std(axis=1, ddof=1) if k > 1 else np.zeros(len(x))
    return mean, np.maximum(sd / math.sqrt(k), 1e-12)


def _classify(mean: np.ndarray, se: np.ndarray, crit2: float, crit1: float, margin: float,
              futile: tuple[float, float, float] | None = None) -> np.ndarray:
    out = np.full(len(mean), UNDECIDED)
    if futile is not None:  # (sqrt(K / k), final two-sided boundary, final one-sided boundary)
        grow, end2, end1 = futile
        out[(np.abs(mean) / se * grow < FUTILITY * end2) & ((margin - np.abs(mean)) / se * grow < FUTILITY * end1)] \
            = STOPPED
    out[mean / se > crit2] = FASTER
    out[mean / se < -crit2] = SLOWER
    out[((mean + margin) / se > crit1) & ((margin - mean) / se > crit1)] = EQUIVALENT
    return out


def fixed_states(log_ratios: np.ndarray, threshold: float = PRACTICAL_THRESHOLD,
                 confidence: float = 0.95) -> np.ndarray:
    """Fixed-design state per row of ``log_ratios`` (rows x blocks, every block present): FASTER / SLOWER when the
    ``confidence`` t interval excludes 0, EQUIVALENT when the TOST passes, else UNDECIDED. Needs >= 2 blocks."""
    x = np.atleast_2d(np.asarray(log_ratios, dtype=np.float64))
    n = x.shape[1]
    if n < 2:
        raise ValueError(f"a fixed-design verdict needs >= 2 blocks, got {n}")
    mean, se = _moments(x, n)
    a = 1 - confidence
    return _classify(mean, se, sps.t.isf(a / 2, n - 1), sps.t.isf(a, n - 1), math.log1p(threshold))


def sequential_states(log_ratios: np.ndarray, max_blocks: int, threshold: float = PRACTICAL_THRESHOLD,
                      alpha: float = ALPHA) -> tuple[np.ndarray, np.ndarray]:
    """Replay the looks of the adaptive design over ``log_ratios`` (rows x blocks; a row ends at its first NaN).

    Returns (state per row, the look, i.e. number of blocks, at which it was decided or stopped; 0 when undecided).
    A row is decided at the first look k >= K_MIN whose boundary it crosses (or stopped for futility); later blocks
    of that row are ignored.
    """
    x = np.atleast_2d(np.asarray(log_ratios, dtype=np.float64))
    two, one = t_boundaries(max_blocks, alpha)
    margin = math.log1p(threshold)
    n_obs = np.where(np.isnan(x), 0, 1).cumprod(axis=1).sum(axis=1)
    state = np.full(len(x), UNDECIDED)
    look = np.zeros(len(x), dtype=int)
    for k in range(K_MIN, min(x.shape[1], max_blocks) + 1):
        live = (state == UNDECIDED) & (n_obs >= k)
        if not live.any():
            continue
        mean, se = _moments(np.nan_to_num(x[live]), k)
        futile = (math.sqrt(max_blocks / k), two[max_blocks], one[max_blocks]) if k < max_blocks else None
        s = _classify(mean, se, two[k], one[k], margin, futile)
        idx = np.flatnonzero(live)
        state[idx] = s
        look[idx[s != UNDECIDED]] = k
    return state, look


@dataclass(frozen=True)
class SequentialResult:
    """The adaptive decision of one arm: state name, the look (blocks) that decided it (None: undecided), the blocks
    seen, and whether the arm may run another block (undecided and fewer than ``max_blocks`` blocks)."""

    state: str
    look: int | None
    blocks: int
    max_blocks: int

    @property
    def wants_more(self) -> bool:
        return self.state == "undecided" and self.blocks < self.max_blocks  # "stopped": futility, no more blocks

    def to_json(self) -> dict[str, object]:
        return {"design": "group_sequential_obf", "state": self.state, "look": self.look, "blocks": self.blocks,
                "max_blocks": self.max_blocks, "wants_more": self.wants_more}


def sequential_verdict(log_ratios: list[float] | np.ndarray, max_blocks: int,
                       threshold: float = PRACTICAL_THRESHOLD, alpha: float = ALPHA) -> SequentialResult:
    """The adaptive decision of one arm from its block log-ratios in block order (see the module docstring)."""
    x = np.asarray(log_ratios, dtype=np.float64)
    state, look = sequential_states(x[None, :], max_blocks, threshold, alpha)
    return SequentialResult(STATE_NAMES[int(state[0])], int(look[0]) or None, int(x.size), max_blocks)


def fixed_verdict(log_ratios: list[float] | np.ndarray, threshold: float = PRACTICAL_THRESHOLD) -> str:
    """faster / slower / equivalent / no_significant_difference of one arm in a fixed design (>= 2 blocks)."""
    state = int(fixed_states(np.asarray(log_ratios, dtype=np.float64)[None, :], threshold)[0])
    return "no_significant_difference" if state == UNDECIDED else STATE_NAMES[state]


def verdict_name(state: str) -> str:
    """The comparison verdict of a sequential state: undecided and stopped are ``no_significant_difference``."""
    return "no_significant_difference" if state in ("undecided", "stopped") else state
