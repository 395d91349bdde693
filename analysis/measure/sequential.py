"""Decisions on block log-ratios: the fixed design (every block planned) and ``repeats=auto`` (CONTRACTS §4, §7).

Input: one log-ratio per block, d_b = log(baseline median step in block b / arm median step in block b) (ms / ms;
above 0 the arm is faster). Output per arm: ``faster``, ``slower``, ``equivalent`` (within +-practical_threshold)
or undecided (``no_significant_difference`` in a fixed design).

Fixed design (:func:`fixed_states`): the 95% Student-t interval of mean(d) over the blocks decides faster/slower;
equivalence is the two one-sided tests (TOST, Schuirmann 1987, J. Pharmacokin. Biopharm. 15:657-680) at 5% each,
i.e. the 90% t interval lies inside +-log(1 + practical_threshold).

Adaptive design (:func:`sequential_states`): a two-sided group-sequential t test with an inner wedge, i.e. early
stopping for the null (Pampallona & Tsiatis 1994, J. Statist. Planning Inference 42:19-35; Jennison & Turnbull
2000, Group Sequential Methods with Applications to Clinical Trials, ch. 5), with error spending (ch. 7):

- Looks after every block from K_MIN = 2 to ``max_blocks`` (information fraction t = k / max_blocks).
- Efficacy (faster/slower): |T_k| >= e_k, T_k = mean_k / (sd_k / sqrt(k)). Each side spends alpha / 2 along the
  power family of Kim & DeMets (1987, Biometrika 74:149-154; Jennison & Turnbull ch. 7.3; gsDesign's sfPower),
  alpha_s(t) = a_s t^2 at the one-sided level a_s = alpha / 2 (SPENDING = "power2"): P(the first crossing is at look
  <= k | no difference) = 2 alpha_s(k / max_blocks). alpha = 0.05 is the A/A false-positive rate over every look.
  It spends more early than the O'Brien-Fleming-type function of Lan & DeMets (1983, Biometrika 70:659-663),
  alpha_s(t) = 2 - 2 Phi(z_{1-a_s/2} / sqrt(t)) (``spend="obf"``; with a known variance and 5 equal looks it gives
  the published 4.877, 3.357, 2.680, 2.290, 2.031, which tests/analysis check), whose first t boundaries (one or two
  degrees of freedom) no arm can cross.
- Futility (binding, for the difference test): after look k < max_blocks the difference test closes when the
  two-sided p-value of T_k is above p_k, i.e. |T_k| < f_k = t^{-1}_{k-1}(1 - p_k / 2), with p_k = P_FUTILITY[k - 2]
  = 0.45 after block 2, 0.25 after block 3 and 0.15 after every later block (a fixed nominal p-value per look; an
  inner wedge in the sense of Pampallona & Tsiatis). Binding: a closed difference test never reopens, so the e_k
  are computed with the futility stops in place and the total false-positive rate stays exactly alpha (a
  non-binding rule would waste the alpha of the paths it stops).
- The variance is unknown, so every boundary is one of the t statistic itself: under "no difference" the process
  (T_1..T_K) of i.i.d. normal blocks does not depend on the unknown scale (it is pivotal), so the e_k are found by
  simulating _N_PATHS seeded standard normal paths (:func:`boundaries`) rather than by converting normal-theory
  boundaries to nominal t levels, which overshoots alpha at few blocks. With ``known_variance`` the same code gives
  the normal-theory (z) boundaries, which tests/analysis compare with the published Lan-DeMets table and, for the
  power family, with an exact integration of the normal increments.
- Equivalent: both one-sided tests against -+log(1 + threshold) pass their one-sided O'Brien-Fleming-type spending
  boundary at level alpha (alpha_s(t) with a_s = alpha per test; no futility in their computation, so any stop only
  lowers their error). Equivalence has priority: an arm inside the practical threshold is ``equivalent`` even when it
  is measurably different, and stays open for equivalence after its difference test closed, while the TOST
  statistic projected to max_blocks at the current estimates, (margin - |mean_k|) / se_k x sqrt(max_blocks / k),
  reaches the final one-sided boundary. An arm whose difference test is closed and whose equivalence is out of reach
  is ``stopped`` (undecided, no more blocks). A decided arm stops; its first decision is its verdict.

SPENDING, P_FUTILITY and max_blocks = 6 were chosen with the model of benchmarks/verdicts.py on seeds 101, 202, 303
and 404 and checked on 505 (not its default 15): the spending family (O'Brien-Fleming-type, power 1.5 to 3,
Pocock-type), futility p-values per look (0.1 to 0.6; a conditional-power rule at the current trend is also a
threshold on |T_k| per look, so this family covers it), max_blocks 5 to 8; a first look after block 3 would cost
every arm >= 3 blocks, i.e. >= 0.60 of the GPU-hours of 5 fixed blocks, before any arm goes on. The design goal
(at every drift scale from 0.5% to 18%: A/A false positives <= 5%, the power at a 5% speedup of 5 fixed
interleaved blocks within 5 points, <= 60% of their GPU-hours) is not reachable by any of them: no design with the power at every drift scale
used less than ~0.69 of the GPU-hours at 18% drift and ~0.76 at 0.5%, and every design at <= 0.60 at 18% drift lost
>= 13 points of power at 0.5-5% drift (the t statistic with 1-3 degrees of freedom cannot stop an arm in the first
blocks: an arm 10% faster at 0.5% drift, 4 standard deviations per block, needs T_3 above ~11). This design keeps
the power and the A/A rate at every drift scale and spends 0.69-0.77 of the GPU-hours (benchmarks/RESULTS.md, per drift scale).
The within-run variance of the medians is not used: at 18% drift it is about a seventh of a block's variance, so a
test valid at every drift must be the t test there; the best test of a two-region family we checked (the t test
with a lower critical value where the block spread is near the within-run one, a higher one elsewhere, its level
held at 5% over every drift ratio) had less power than the plain t test at 5 blocks without drift (80% against 93%
at a 5% speedup).

Both state functions take a matrix (rows = arms or simulated trials, columns = blocks, NaN = no block) so that the
simulator (benchmarks/verdicts.py) runs the very code the sweep runs; :func:`fixed_verdict` and
:func:`sequential_verdict` are the one-arm forms the analysis calls.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

ALPHA = 0.05
K_MIN = 2  # the first look: after block 2 (one degree of freedom; the boundaries are exact for it)
# the difference test closes after look k when the two-sided p-value of T_k is above P_FUTILITY[k - K_MIN] (the last
# entry for every later look; binding).
P_FUTILITY: tuple[float, ...] = (0.45, 0.25, 0.15)
SPENDING = "power2"  # efficacy: Kim-DeMets power family alpha_s(t) = a_s t^2 ("obf": O'Brien-Fleming-type)
PRACTICAL_THRESHOLD = 0.02
UNDECIDED, FASTER, SLOWER, EQUIVALENT, STOPPED = 0, 1, 2, 3, 4
STATE_NAMES = {UNDECIDED: "undecided", FASTER: "faster", SLOWER: "slower", EQUIVALENT: "equivalent",
               STOPPED: "stopped"}
METHOD = "group_sequential_t_power2_binding_futility"
_N_PATHS = 400_000  # simulated null paths behind the boundaries (Monte Carlo error of the level about 0.0003)
_PATHS_SEED = 20261129


def obf_spending(t: float, level: float) -> float:
    """Lan-DeMets O'Brien-Fleming-type error spent on ONE side by information fraction ``t`` in [0, 1]:
    2 - 2 Phi(z_{1-level/2} / sqrt(t)), ``level`` the one-sided level (gsDesign's ``sfLDOF`` convention)."""
    from scipy import stats as sps  # on first use: the planner imports this module for K_MIN, METHOD

    if t <= 0:
        return 0.0
    return float(2 - 2 * sps.norm.cdf(sps.norm.ppf(1 - level / 2) / math.sqrt(min(t, 1.0))))


def power_spending(t: float, level: float, rho: float = 2.0) -> float:
    """Kim-DeMets power-family error spent on ONE side by information fraction ``t`` in [0, 1]: level x t^rho
    (Kim & DeMets 1987, Biometrika 74:149-154; Jennison & Turnbull 2000, section 7.3; gsDesign's ``sfPower``)."""
    return 0.0 if t <= 0 else float(level * min(t, 1.0) ** rho)


def spending(name: str, t: float, level: float) -> float:
    """The spending function ``name``: ``obf`` (:func:`obf_spending`) or ``power<rho>`` (:func:`power_spending`).
    Raises ValueError for another name."""
    if name == "obf":
        return obf_spending(t, level)
    if name.startswith("power"):
        try:
            return power_spending(t, level, float(name[5:]))
        except ValueError:
            pass
    raise ValueError(f"spending={name!r}: valid are 'obf' and 'power<rho>' (e.g. 'power2')")


def futility_bounds(max_blocks: int, p_futility: float | tuple[float, ...] = P_FUTILITY,
                    k_min: int = K_MIN) -> np.ndarray:
    """f_k per look k (index 0..max_blocks): the difference test closes when |T_k| < f_k; 0 (never) before
    ``k_min`` and at the final look. f_k = t^{-1}_{k-1}(1 - p_k / 2), a fixed nominal p-value per look: p_k is
    ``p_futility[k - k_min]`` (its last entry for the later looks; a float: the same at every look)."""
    from scipy import stats as sps  # on first use: the planner imports this module for K_MIN, METHOD

    ps = (p_futility,) if isinstance(p_futility, (int, float)) else tuple(p_futility)
    f = np.zeros(max_blocks + 1)
    for k in range(max(k_min, 2), max_blocks):
        p = ps[min(k - k_min, len(ps) - 1)]
        if p > 0:
            f[k] = float(sps.t.isf(p / 2, k - 1))
    return f


def _null_paths(max_blocks: int, known_variance: bool) -> np.ndarray:
    """|T_k| (or |Z_k| with ``known_variance``) of _N_PATHS seeded standard normal paths, columns k = 1..K."""
    z = np.random.default_rng(_PATHS_SEED).standard_normal((_N_PATHS, max_blocks))
    k = np.arange(1, max_blocks + 1)
    total = z.cumsum(axis=1)
    if known_variance:
        return total / np.sqrt(k)
    mean = total / k
    var = np.maximum((np.square(z).cumsum(axis=1) - k * mean**2) / np.maximum(k - 1, 1), 1e-300)
    return mean / np.sqrt(var / k)


def _spend(stat: np.ndarray, spent: list[float], k_min: int, fut: np.ndarray | None) -> np.ndarray:
    """Critical values per look such that the paths still running cross with the spending increments."""
    n, kmax = stat.shape
    crit = np.full(kmax + 1, np.inf)
    alive = np.ones(n, dtype=bool)
    for j in range(k_min, kmax + 1):
        n_cross = int(round((spent[j] - spent[j - 1]) * n))
        col = stat[alive, j - 1]
        if n_cross >= 1 and col.size > n_cross:
            crit[j] = float(np.partition(col, col.size - n_cross)[col.size - n_cross])
        alive &= ~(stat[:, j - 1] >= crit[j])
        if fut is not None:
            alive &= ~(np.abs(stat[:, j - 1]) < fut[j])
    return crit


@lru_cache(maxsize=64)
def boundaries(max_blocks: int, alpha: float = ALPHA, k_min: int = K_MIN,
               p_futility: float | tuple[float, ...] = P_FUTILITY, known_variance: bool = False,
               spend: str = "obf") -> tuple[np.ndarray, np.ndarray]:
    """(two-sided efficacy, one-sided equivalence) critical values per look k (index 0..max_blocks; inf before
    ``k_min``, and inf where a look spends less than one simulated path).

    Two-sided: |T_k| >= e_k crosses; the paths that cross, or fall into the futility region |T_k| < f_k
    (:func:`futility_bounds`; binding; none with ``known_variance``), stop, and e_k is the value that the paths still
    running exceed with probability 2 (alpha_s(t_k) - alpha_s(t_{k-1})), alpha_s the spending function ``spend``
    (:func:`spending`) at alpha / 2. One-sided (each test of the TOST): T_k with the O'Brien-Fleming-type spending
    at alpha and no futility. Monte Carlo error of the level about 0.0003 (_N_PATHS paths).

    Raises ValueError for max_blocks < k_min, k_min < 1, alpha outside (0, 1), a p_futility outside [0, 1) or an
    unknown ``spend``.
    """
    ps = (p_futility,) if isinstance(p_futility, (int, float)) else tuple(p_futility)
    if k_min < 1 or max_blocks < k_min or not 0 < alpha < 1 or not ps or not all(0 <= p < 1 for p in ps):
        raise ValueError(f"max_blocks={max_blocks} must be >= k_min={k_min} >= 1, alpha={alpha} in (0, 1) and "
                         f"p_futility={p_futility} in [0, 1)")
    two = [0.0 if j < k_min else 2 * spending(spend, j / max_blocks, alpha / 2) for j in range(max_blocks + 1)]
    one = [0.0 if j < k_min else obf_spending(j / max_blocks, alpha) for j in range(max_blocks + 1)]
    t = _null_paths(max_blocks, known_variance)
    fut = futility_bounds(max_blocks, ps, k_min) if not known_variance else None
    return _spend(np.abs(t), two, k_min, fut), _spend(t, one, k_min, None)


def t_boundaries(max_blocks: int, alpha: float = ALPHA, k_min: int = K_MIN) -> tuple[np.ndarray, np.ndarray]:
    """The sweep's boundaries: :func:`boundaries` with P_FUTILITY, SPENDING and an unknown variance."""
    return boundaries(max_blocks, alpha, k_min, P_FUTILITY, spend=SPENDING)


def _moments(x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Mean and standard error of the first k columns of ``x`` (no NaN there)."""
    head = x[:, :k]
    mean = head.mean(axis=1)
    sd = head.std(axis=1, ddof=1) if k > 1 else np.zeros(len(x))
    return mean, np.maximum(sd / math.sqrt(k), 1e-12)


def _classify(mean: np.ndarray, se: np.ndarray, crit2: float, crit1: float, margin: float) -> np.ndarray:
    out = np.full(len(mean), UNDECIDED)
    out[mean / se >= crit2] = FASTER
    out[mean / se <= -crit2] = SLOWER
    out[((mean + margin) / se > crit1) & ((margin - mean) / se > crit1)] = EQUIVALENT
    return out


def fixed_states(log_ratios: np.ndarray, threshold: float = PRACTICAL_THRESHOLD,
                 confidence: float = 0.95) -> np.ndarray:
    """Fixed-design state per row of ``log_ratios`` (rows x blocks, every block present): FASTER / SLOWER when the
    ``confidence`` t interval excludes 0, EQUIVALENT when the TOST passes, else UNDECIDED. Needs >= 2 blocks."""
    from scipy import stats as sps  # on first use: the planner imports this module for K_MIN, METHOD

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
    A row is decided at the first look k >= K_MIN whose boundary it crosses, or stopped when its difference test is
    closed (futility) and equivalence is out of reach; later blocks of that row are ignored.
    """
    state, look, _ = _replay(log_ratios, max_blocks, threshold, alpha)
    return state, look


def _replay(log_ratios: np.ndarray, max_blocks: int, threshold: float,
            alpha: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(state, look, difference test still open) per row; see :func:`sequential_states`."""
    x = np.atleast_2d(np.asarray(log_ratios, dtype=np.float64))
    two, one = t_boundaries(max_blocks, alpha)
    fut = futility_bounds(max_blocks, P_FUTILITY)
    margin = math.log1p(threshold)
    n_obs = np.where(np.isnan(x), 0, 1).cumprod(axis=1).sum(axis=1)
    state = np.full(len(x), UNDECIDED)
    look = np.zeros(len(x), dtype=int)
    open_ = np.ones(len(x), dtype=bool)
    for k in range(K_MIN, min(x.shape[1], max_blocks) + 1):
        idx = np.flatnonzero((state == UNDECIDED) & (n_obs >= k))
        if not idx.size:
            continue
        mean, se = _moments(np.nan_to_num(x[idx]), k)
        s = _classify(mean, se, two[k], one[k], margin)
        s[~open_[idx] & np.isin(s, (FASTER, SLOWER))] = UNDECIDED  # binding: a closed difference test stays closed
        if k < max_blocks:
            open_[idx[(s == UNDECIDED) & (np.abs(mean / se) < fut[k])]] = False
            reach = (margin - np.abs(mean)) / se * math.sqrt(max_blocks / k) >= one[max_blocks]
            s[(s == UNDECIDED) & ~open_[idx] & ~reach] = STOPPED
        state[idx] = s
        look[idx[s != UNDECIDED]] = k
    return state, look, open_


@dataclass(frozen=True)
class SequentialResult:
    """The adaptive decision of one arm: state name, the look (blocks) that decided it (None: undecided), the blocks
    seen, whether its difference test is still open (False: only ``equivalent`` can still come), and whether the
    arm may run another block (undecided and fewer than ``max_blocks`` blocks)."""

    state: str
    look: int | None
    blocks: int
    max_blocks: int
    difference_open: bool = True

    @property
    def wants_more(self) -> bool:
        return self.state == "undecided" and self.blocks < self.max_blocks  # "stopped": futility, no more blocks

    def to_json(self) -> dict[str, object]:
        return {"design": METHOD, "state": self.state, "look": self.look, "blocks": self.blocks,
                "max_blocks": self.max_blocks, "difference_open": self.difference_open,
                "wants_more": self.wants_more}


def sequential_verdict(log_ratios: list[float] | np.ndarray, max_blocks: int,
                       threshold: float = PRACTICAL_THRESHOLD, alpha: float = ALPHA) -> SequentialResult:
    """The adaptive decision of one arm from its block log-ratios in block order (see the module docstring)."""
    x = np.asarray(log_ratios, dtype=np.float64)
    state, look, open_ = _replay(x[None, :], max_blocks, threshold, alpha)
    return SequentialResult(STATE_NAMES[int(state[0])], int(look[0]) or None, int(x.size), max_blocks,
                            bool(open_[0]))


def fixed_verdict(log_ratios: list[float] | np.ndarray, threshold: float = PRACTICAL_THRESHOLD) -> str:
    """faster / slower / equivalent / no_significant_difference of one arm in a fixed design (>= 2 blocks)."""
    state = int(fixed_states(np.asarray(log_ratios, dtype=np.float64)[None, :], threshold)[0])
    return "no_significant_difference" if state == UNDECIDED else STATE_NAMES[state]


def verdict_name(state: str) -> str:
    """The comparison verdict of a sequential state: undecided and stopped are ``no_significant_difference``."""
    return "no_significant_difference" if state in ("undecided", "stopped") else state
