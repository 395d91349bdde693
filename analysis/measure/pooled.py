"""Pooled run-level noise: the block decision that uses every measurement of a sweep (CONTRACTS §7).

Model (per group of a sweep; y = log of a run's median steady step time, ms):

    y[arm, block] = mu[arm] + beta[block] + e[arm, block],   e ~ N(0, sigma^2 + w[arm, block])

- ``beta``: the block effect (the machine's speed in that block), a fixed effect, so drift between blocks cancels;
- ``sigma^2``: the run-level (run-to-run) noise, ONE variance for every arm of the group, baseline and control
  included: the residual variance of the two-way additive fit (:func:`residual_variance`, least squares by
  ``numpy.linalg.lstsq`` on the arm + block design; with every cell present this is the classical two-way
  analysis of variance without interaction, residual degrees of freedom (arms - 1)(blocks - 1));
- ``w``: each run's within-run variance of its log median, from the run's own 95% interval of the median
  (:func:`within_variance`). It is reported per group (``within``: the share of the block variance that the
  runs' own steps explain) and it is the floor under the prior's scale: a prior learnt from longer runs (more
  steady steps, a tighter median) never claims more precision than tonight's runs have. Tonight's own residual
  variance already contains w, so it is not added again.

The equivalent mixed model (block random, arm fixed) gives the same arm contrasts and residual variance in a
balanced design; the fixed-block form is used because it needs no variance-component estimate for the block.
An arm's estimate is the mean over its blocks of d_b = y[baseline, b] - y[arm, b] (above 0: the arm is faster),
whose variance per block is v = 2 sigma^2 (plus the two runs' w).

Nightly prior (:class:`NoisePrior`, :func:`learn_prior`): the same series' past nights give one residual
variance each, s_i^2 with df_i degrees of freedom; under sigma^2 ~ scaled inverse chi-square(d0, s0^2) the ratios
s_i^2 / s0^2 follow an F(df_i, d0) distribution, so (s0^2, d0) are the maximum-likelihood fit of that scaled F
(``scipy.stats.f.logpdf``, ``scipy.optimize.minimize``; the empirical-Bayes variance prior of Smyth 2004, Stat.
Appl. Genet. Mol. Biol. 3:3, with an MLE in place of its moment fit). Nights that agree give a large d0 (capped at
PRIOR_DF_MAX), nights that scatter a small one. The posterior variance is the df-weighted mean
(d0 s0^2 + D s^2) / (d0 + D) and the t statistic then has d0 + D degrees of freedom (the moderated t).

Prior-data conflict: when tonight's own residual variance is above the prior's upper CONFLICT_P tail,
s^2 / s0^2 > F^{-1}(1 - CONFLICT_P; D, d0), the prior is dropped for that look (the machine is not the one the
history describes). The A/A rate when the prior underestimates tonight's noise is measured by
benchmarks/verdicts.py (``--underestimate``).

Sequential decision (:func:`pooled_states`): the looks, spending, binding futility and equivalence rules of
:mod:`analysis.sequential` (the equivalence tests spend by its SPENDING family too), with boundaries for this statistic (:func:`pooled_boundaries`): under "no difference"
T_k = mean_k / sqrt(V_k / k) with V_k = (d0 s0^2 + SS_k) / (d0 + D_k) is pivotal given d0 and the residual degrees
of freedom per block (arms - 1), so the boundaries come from simulated null paths of exactly that process: the
arm's own block log-ratios (whose deviations from their running mean are part of SS_k), the other arms'
independent residual chi-squares, and the prior's chi-square(d0). With a prior the first look is after block 1
(d0 degrees of freedom), without one after block 2, as in :mod:`analysis.sequential`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

import analysis.measure.sequential as seq

PRIOR_DF_MAX = 12.0  # the prior never counts for more than 12 degrees of freedom (a calm history still yields)
PRIOR_MIN_NIGHTS = 2  # nights needed before a prior is used at all
CONFLICT_P = 0.10  # prior-data conflict test level (one-sided, upper tail)
Z95 = 1.959963984540054  # the 97.5% normal quantile: a run's 95% interval of the median is +-Z95 standard errors
METHOD = "pooled_group_sequential_t"
_N_PATHS = 200_000
_PATHS_SEED = 20261206


@dataclass(frozen=True)
class NoisePrior:
    """The series' run-to-run noise learnt from past nights: ``var`` (variance of one block log-ratio d_b, i.e.
    2 sigma^2, in log units squared), worth ``df`` degrees of freedom, from ``nights`` nights."""

    df: float
    var: float
    nights: int

    def to_json(self) -> dict[str, float | int]:
        return {"df": self.df, "var": self.var, "nights": self.nights}

    @classmethod
    def from_json(cls, d: dict | None) -> NoisePrior | None:
        if not d or not d.get("df") or not d.get("var"):
            return None
        return cls(float(d["df"]), float(d["var"]), int(d.get("nights", 0)))


@dataclass(frozen=True)
class GroupNoise:
    """The pooled run-level noise of one group: ``var`` (variance of one block log-ratio, 2 sigma^2) with ``df``
    residual degrees of freedom over ``arms`` arms (the baseline included), the mean within-run variance of a block
    log-ratio ``within`` (the floor), and the nightly ``prior`` (None: none)."""

    var: float
    df: int
    arms: int
    within: float = 0.0
    prior: NoisePrior | None = None

    def to_json(self) -> dict:
        return {"var": _finite(self.var), "df": self.df, "arms": self.arms, "within": self.within,
                "prior": self.prior.to_json() if self.prior else None}


def _finite(x: float) -> float | None:
    """``x``, or None where it is NaN or infinite (JSON has no NaN): e.g. the variance of a single block."""
    return x if math.isfinite(x) else None


def residual_variance(cells: Iterable[tuple[str, int, float]]) -> tuple[float, int]:
    """Residual variance (per run, log units squared) and its degrees of freedom of the two-way additive fit
    y ~ arm + block over ``cells`` = (arm, block, y). Cells may be missing (unbalanced). Returns (nan, 0) when
    there are no residual degrees of freedom."""
    cells = list(cells)
    arms = sorted({a for a, _, _ in cells})
    blocks = sorted({b for _, b, _ in cells})
    n, p = len(cells), len(arms) + len(blocks) - 1
    if n <= p:
        return math.nan, 0
    x = np.zeros((n, p))
    ai, bi = {a: i for i, a in enumerate(arms)}, {b: i for i, b in enumerate(blocks)}
    for r, (a, b, _) in enumerate(cells):
        x[r, ai[a]] = 1.0
        if bi[b]:
            x[r, len(arms) + bi[b] - 1] = 1.0
    y = np.array([v for _, _, v in cells])
    coef, _, rank, _ = np.linalg.lstsq(x, y, rcond=None)
    df = n - int(rank)
    if df <= 0:
        return math.nan, 0
    return float(np.sum((y - x @ coef) ** 2) / df), df


def within_variance(median_ms: float, ci_low_ms: float, ci_high_ms: float) -> float:
    """Within-run variance of log(median) from a run's 95% interval of its median (log units squared):
    ((log high - log low) / (2 x 1.96))^2; 0 when the interval is missing or degenerate."""
    if not (median_ms and ci_low_ms and ci_high_ms) or ci_low_ms <= 0 or ci_high_ms <= ci_low_ms:
        return 0.0
    return ((math.log(ci_high_ms) - math.log(ci_low_ms)) / (2 * Z95)) ** 2


def learn_prior(nights: Sequence[tuple[float, float]]) -> NoisePrior | None:
    """The prior (:class:`NoisePrior`) from past nights' (variance of a block log-ratio, df); None with fewer than
    PRIOR_MIN_NIGHTS usable nights. Two nights: the pooled variance with their summed df; three or more: the
    maximum-likelihood scaled F fit (module docstring). d0 is capped at PRIOR_DF_MAX and at the summed df."""
    good = [(float(v), float(d)) for v, d in nights if d and d > 0 and v and v > 0 and math.isfinite(v)]
    if len(good) < PRIOR_MIN_NIGHTS:
        return None
    v = np.array([g[0] for g in good])
    d = np.array([g[1] for g in good])
    pooled = float(np.sum(v * d) / np.sum(d))
    cap = min(PRIOR_DF_MAX, float(d.sum()))
    if len(good) < 3:
        return NoisePrior(cap, pooled, len(good))
    from scipy import optimize
    from scipy import stats as sps

    def nll(theta: np.ndarray) -> float:
        s0, d0 = math.exp(min(theta[0], 50.0)), math.exp(min(max(theta[1], -5.0), 12.0))
        return -float(np.sum(sps.f.logpdf(v, d, d0, scale=s0)))

    res = optimize.minimize(nll, np.array([math.log(pooled), math.log(cap)]), method="Nelder-Mead",
                            options={"xatol": 1e-4, "fatol": 1e-6, "maxiter": 400})
    s0, d0 = math.exp(min(res.x[0], 50.0)), math.exp(min(max(res.x[1], -5.0), 12.0))
    if not res.success or not math.isfinite(s0) or s0 <= 0:
        return NoisePrior(min(cap, 2.0), pooled, len(good))
    return NoisePrior(float(min(max(d0, 1.0), cap)), float(s0), len(good))


PRIOR_WINDOW = 10  # the prior learns from the series' last 10 sweeps before tonight


def prior_from_rows(rows: Iterable[dict], window: int = PRIOR_WINDOW) -> NoisePrior | None:
    """The nightly prior from history run rows (mappings with ``sweep_id``, ``group_key``, ``variant``, ``repeat``,
    ``step_time_ms``, ``ok``: whether the run counts), in sweep order: one residual variance per sweep and group
    (:func:`residual_variance` of log step times over arms and blocks, as a block log-ratio's variance, 2 sigma^2)
    from the last ``window`` sweeps, then :func:`learn_prior`. None when fewer than PRIOR_MIN_NIGHTS have df."""
    cells: dict[tuple[str, str], list[tuple[str, int, float]]] = {}
    order: list[str] = []
    for r in rows:
        if not r.get("ok") or r.get("repeat") is None or not r.get("step_time_ms"):
            continue
        if r["sweep_id"] not in order:
            order.append(r["sweep_id"])
        cells.setdefault((r["sweep_id"], r["group_key"]), []).append(
            (str(r["variant"]), int(r["repeat"]), math.log(float(r["step_time_ms"]))))
    keep = set(order[-window:])
    nights = []
    for (sweep, _), c in cells.items():
        if sweep in keep:
            var, df = residual_variance(c)
            if df:
                nights.append((2 * var, df))
    return learn_prior(nights)


def group_noise(runs: Sequence, baseline: str, prior: NoisePrior | None = None) -> GroupNoise | None:
    """The pooled noise of one group from its usable runs (objects with ``variant``, ``repeat``, ``good`` and
    ``step_time`` in ms, e.g. :class:`analysis.results.RunResult`). None without a block-indexed usable run."""
    usable = [r for r in runs if r.good and r.step_time is not None and r.repeat is not None]
    if not usable:
        return None
    arms = {r.variant for r in usable}
    var, df = residual_variance((r.variant, int(r.repeat), math.log(r.step_time.median)) for r in usable)
    w = [within_variance(r.step_time.median, r.step_time.ci_low, r.step_time.ci_high) for r in usable]
    return GroupNoise(2 * var if df else math.nan, df, len(arms), 2 * float(np.mean(w)), prior)


def _paths(max_blocks: int, extra_df: int, prior_df: float) -> np.ndarray:
    """T_k under "no difference" (columns k = 1..max_blocks) for the moderated statistic with ``extra_df`` residual
    degrees of freedom per block from the other arms and a prior worth ``prior_df``; NaN where no df exists."""
    rng = np.random.default_rng(_PATHS_SEED)
    z = rng.standard_normal((_N_PATHS, max_blocks))
    k = np.arange(1, max_blocks + 1)
    total = z.cumsum(axis=1)
    mean = total / k
    ss = np.maximum(np.square(z).cumsum(axis=1) - k * mean**2, 0.0)
    if extra_df:
        other = rng.chisquare(extra_df, (_N_PATHS, max_blocks))
        other[:, 0] = 0.0
        ss = ss + other.cumsum(axis=1)
    prior = rng.chisquare(prior_df, (_N_PATHS, 1)) if prior_df > 0 else np.zeros((_N_PATHS, 1))
    dof = prior_df + (extra_df + 1) * (k - 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        var = np.where(dof > 0, (prior + ss) / np.maximum(dof, 1e-300), np.nan)
        return mean / np.sqrt(var / k)


@lru_cache(maxsize=128)
def pooled_boundaries(max_blocks: int, extra_df: int = 0, prior_df: float = 0.0,
                      alpha: float = seq.ALPHA) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """(two-sided efficacy e_k, one-sided equivalence, futility f_k, first look) per look k (index 0..max_blocks)
    for the pooled statistic: the spending of :mod:`analysis.sequential` (SPENDING at alpha/2 per side, binding
    futility at P_FUTILITY; each one-sided equivalence test spends alpha by the same SPENDING family, so that a
    calm machine can show equivalence after one block) on simulated null paths
    (:func:`_paths`). The first look is 1 with a prior (equivalence only: faster/slower and futility wait for
    block K_MIN, when tonight's own variance can show a conflict with the prior), else K_MIN. Raises ValueError for
    max_blocks < first look."""
    k_min = 1 if prior_df > 0 else seq.K_MIN
    if max_blocks < k_min:
        raise ValueError(f"max_blocks={max_blocks} must be >= {k_min}")
    from scipy import stats as sps

    fut = np.zeros(max_blocks + 1)
    for k in range(seq.K_MIN, max_blocks):
        p = seq.P_FUTILITY[min(max(k - seq.K_MIN, 0), len(seq.P_FUTILITY) - 1)]
        fut[k] = float(sps.t.isf(p / 2, prior_df + (extra_df + 1) * (k - 1)))
    two = [0.0 if j < seq.K_MIN else 2 * seq.spending(seq.SPENDING, j / max_blocks, alpha / 2)
           for j in range(max_blocks + 1)]
    one = [0.0 if j < k_min else seq.spending(seq.SPENDING, j / max_blocks, alpha) for j in range(max_blocks + 1)]
    t = np.nan_to_num(_paths(max_blocks, extra_df, prior_df), nan=0.0)
    return seq._spend(np.abs(t), two, k_min, fut), seq._spend(t, one, k_min, None), fut, k_min


def moderated(mean: np.ndarray, ss: np.ndarray, dof: np.ndarray, k: int, noise_prior: tuple[np.ndarray, np.ndarray],
              within: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(standard error of the mean, total df, prior used) at look k per row: the posterior variance of a block
    log-ratio (d0 s0^2 + ss) / (d0 + dof), s0^2 raised to tonight's within-run variance ``within`` where it is
    lower (a prior learnt on longer runs), the prior dropped where tonight's ss / dof is in its upper CONFLICT_P
    tail. ``noise_prior`` = (d0, s0^2) per row (d0 = 0: none)."""
    from scipy import stats as sps

    d0, s0 = noise_prior
    s0 = np.maximum(s0, within)  # a prior never claims runs more precise than tonight's own steps say
    with np.errstate(invalid="ignore", divide="ignore"):
        s2 = np.where(dof > 0, ss / np.maximum(dof, 1), np.nan)
        conflict = (dof > 0) & (d0 > 0) & (s2 / s0 > sps.f.isf(CONFLICT_P, np.maximum(dof, 1), np.maximum(d0, 1e-9)))
    use = (d0 > 0) & ~conflict
    tot = np.where(use, d0, 0) + dof
    var = np.where(use, (d0 * s0 + ss), ss) / np.maximum(tot, 1e-300)
    return np.sqrt(np.where(tot > 0, var, np.nan) / k), tot, use


def pooled_states(log_ratios: np.ndarray, max_blocks: int, *, extra_ss: np.ndarray | None = None, extra_df: int = 0,
                  prior: tuple[np.ndarray, np.ndarray] | None = None, within: np.ndarray | float = 0.0,
                  threshold: float = seq.PRACTICAL_THRESHOLD,
                  alpha: float = seq.ALPHA) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Replay the adaptive design with the pooled statistic over ``log_ratios`` (rows x blocks; a row ends at its
    first NaN). ``extra_ss`` (rows x blocks): the other arms' cumulative residual sum of squares in block log-ratio
    units after each block, with ``extra_df`` df per block after the first; ``prior`` = (d0, s0^2) per row;
    ``within``: tonight's within-run variance of a block log-ratio (the floor under the prior's scale). Returns (state, look, prior used at the decision) per row,
    states and looks as :func:`analysis.sequential.sequential_states`.

    The difference test (faster / slower, and its binding futility) uses the group's pooled variance without the
    prior, so a prior that underestimates tonight's noise can never make an A/A arm faster or slower (with two
    arms it is the test of :mod:`analysis.sequential`, its boundaries included); the prior serves the two
    one-sided equivalence tests, which it lets decide from block 1 (a calm machine). A row whose
    prior is dropped for conflict at a look is judged without it at that look.
    """
    x = np.atleast_2d(np.asarray(log_ratios, dtype=np.float64))
    n = len(x)
    d0, s0 = prior if prior is not None else (np.zeros(n), np.ones(n))
    d0 = np.round(np.broadcast_to(np.asarray(d0, dtype=np.float64), (n,)) * 2) / 2  # to 0.5: boundaries are cached
    s0 = np.broadcast_to(np.asarray(s0, dtype=np.float64), (n,))
    within = np.broadcast_to(np.asarray(within, dtype=np.float64), (n,))
    margin = math.log1p(threshold)
    n_obs = np.where(np.isnan(x), 0, 1).cumprod(axis=1).sum(axis=1)
    state = np.full(n, seq.UNDECIDED)
    look = np.zeros(n, dtype=int)
    used = np.zeros(n, dtype=bool)
    open_ = np.ones(n, dtype=bool)
    xs = np.nan_to_num(x)
    two, _, fut, k_diff = pooled_boundaries(max_blocks, extra_df, 0.0, alpha)
    if not extra_df:  # two arms: exactly the difference test of analysis.sequential
        two, fut = seq.t_boundaries(max_blocks, alpha)[0], seq.futility_bounds(max_blocks, seq.P_FUTILITY)
    for k in range(1, min(x.shape[1], max_blocks) + 1):
        idx = np.flatnonzero((state == seq.UNDECIDED) & (n_obs >= k))
        if not idx.size:
            continue
        head = xs[idx, :k]
        mean = head.mean(axis=1)
        ss = np.square(head - mean[:, None]).sum(axis=1)
        dof = np.full(idx.size, k - 1, dtype=np.float64)
        if extra_ss is not None and extra_df:
            ss = ss + extra_ss[idx, k - 1]
            dof = dof + extra_df * (k - 1)
        se_d, _, _ = moderated(mean, ss, dof, k, (np.zeros(idx.size), np.ones(idx.size)), within[idx])
        se_q, _, use = moderated(mean, ss, dof, k, (d0[idx], s0[idx]), within[idx])
        st = np.full(idx.size, seq.UNDECIDED)
        if k >= k_diff:
            t = mean / np.maximum(se_d, 1e-12)
            st[t >= two[k]] = seq.FASTER
            st[t <= -two[k]] = seq.SLOWER
            st[~open_[idx] & np.isin(st, (seq.FASTER, seq.SLOWER))] = seq.UNDECIDED
        one_final = np.full(idx.size, np.inf)
        prior_key = np.where(use, d0[idx], 0.0)
        for key in np.unique(prior_key):
            sub = np.flatnonzero(prior_key == key)
            _, one, _, k_min = pooled_boundaries(max_blocks, extra_df, float(key), alpha)
            one_final[sub] = one[max_blocks]
            if k < k_min:
                continue
            m, s = mean[sub], np.maximum(se_q[sub], 1e-12)
            eq = ((m + margin) / s > one[k]) & ((margin - m) / s > one[k])
            st[sub[eq]] = seq.EQUIVALENT
        if k >= k_diff and k < max_blocks:
            close = (st == seq.UNDECIDED) & (np.abs(mean / np.maximum(se_d, 1e-12)) < fut[k])
            open_[idx[close]] = False
            reach = (margin - np.abs(mean)) / np.maximum(se_q, 1e-12) * math.sqrt(max_blocks / k) >= one_final
            st[(st == seq.UNDECIDED) & ~open_[idx] & ~reach] = seq.STOPPED
        state[idx] = st
        look[idx[st != seq.UNDECIDED]] = k
        used[idx] = use
    return state, look, used


@dataclass(frozen=True)
class PooledResult:
    """The pooled adaptive decision of one arm (the fields of :class:`analysis.sequential.SequentialResult`, plus
    the noise it used, the prior's use and the standard error of the mean log-ratio)."""

    state: str
    look: int | None
    blocks: int
    max_blocks: int
    noise: GroupNoise
    prior_used: bool
    se: float
    dof: float  # degrees of freedom of ``se``: tonight's residual df (all arms), plus the prior's where used

    @property
    def wants_more(self) -> bool:
        return self.state == "undecided" and self.blocks < self.max_blocks

    def to_json(self) -> dict:
        return {"design": METHOD, "state": self.state, "look": self.look, "blocks": self.blocks,
                "max_blocks": self.max_blocks, "difference_open": self.state != "stopped",
                "wants_more": self.wants_more, "noise": self.noise.to_json(), "prior_used": self.prior_used,
                "se": _finite(self.se), "dof": self.dof}


def pooled_verdict(log_ratios: Sequence[float], noise: GroupNoise, max_blocks: int,
                   threshold: float = seq.PRACTICAL_THRESHOLD, alpha: float = seq.ALPHA) -> PooledResult:
    """The adaptive decision of one arm from its block log-ratios (block order) and its group's pooled noise.

    The other arms' share of the residual: the group's residual sum of squares (``noise.var`` x ``noise.df``)
    minus this arm's own, spread evenly over the blocks after the first (the boundaries use the group's residual
    df per block, arms - 2, beyond the arm's own)."""
    x = np.asarray(log_ratios, dtype=np.float64)
    k = x.size
    own = float(np.square(x - x.mean()).sum()) if k else 0.0
    extra_df = max(noise.arms - 2, 0)
    extra = None
    if extra_df and noise.df and math.isfinite(noise.var):
        other = max(noise.var * noise.df - own, 0.0)
        steps = np.concatenate([[0.0], np.full(max(k - 1, 0), other / max(k - 1, 1))])
        extra = steps.cumsum()[None, :]
    pr = (np.array([noise.prior.df]), np.array([noise.prior.var])) if noise.prior else None
    state, look, used = pooled_states(x[None, :], max_blocks, extra_ss=extra, extra_df=extra_df if extra is not None
                                      else 0, prior=pr, within=noise.within, threshold=threshold, alpha=alpha)
    ss = own + (float(extra[0, -1]) if extra is not None else 0.0)
    dof = np.array([float(k - 1 + (extra_df * (k - 1) if extra is not None else 0))])
    pr = (np.round(pr[0] * 2) / 2, pr[1]) if pr else (np.zeros(1), np.ones(1))
    se, tot, _ = moderated(np.array([x.mean() if k else 0.0]), np.array([ss]), dof, max(k, 1), pr,
                           np.array([noise.within]))
    return PooledResult(seq.STATE_NAMES[int(state[0])], int(look[0]) or None, k, max_blocks, noise,
                        bool(used[0]), float(se[0]) if math.isfinite(se[0]) else math.nan, float(tot[0]))


def pooled_speedup(log_ratios: Sequence[float], res: PooledResult,
                   confidence: float = 0.95) -> tuple[float, float, float] | None:
    """(value, low, high) of the arm's speedup: exp(mean d_b) with the ``confidence`` moderated t interval
    exp(mean +- t_{dof} se) (``speedup_method: pooled_blocks_t``); None when the pooled standard error is undefined
    (the caller keeps the plain paired interval)."""
    from scipy import stats as sps

    m = float(np.mean(log_ratios))
    if not (math.isfinite(res.se) and res.dof > 0):
        return None
    half = float(sps.t.isf((1 - confidence) / 2, res.dof)) * res.se
    return math.exp(m), math.exp(m - half), math.exp(m + half)
