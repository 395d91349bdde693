"""The pooled run-level noise (analysis/measure/pooled.py): the two-way fit, the nightly prior, the boundaries and the level."""

from __future__ import annotations

import math

import numpy as np
import pytest

import analysis.measure.pooled as pooled
import analysis.measure.sequential as seq


def _cells(y: np.ndarray) -> list[tuple[str, int, float]]:
    return [(f"a{i}", b, float(y[i, b])) for i in range(y.shape[0]) for b in range(y.shape[1])]


def test_two_arms_residual_variance_is_half_the_paired_variance():
    rng = np.random.default_rng(3)
    y = rng.normal(0, 0.01, (2, 5)) + rng.normal(0, 0.05, 5)  # block effects cancel
    var, df = pooled.residual_variance(_cells(y))
    d = y[0] - y[1]
    assert df == 4 and var == pytest.approx(d.var(ddof=1) / 2, rel=1e-10)


def test_many_arms_residual_is_the_two_way_anova_residual():
    rng = np.random.default_rng(4)
    y = rng.normal(0, 0.01, (4, 3)) + np.arange(4)[:, None] * 0.1 + rng.normal(0, 0.05, 3)
    resid = y - y.mean(axis=1, keepdims=True) - y.mean(axis=0, keepdims=True) + y.mean()
    var, df = pooled.residual_variance(_cells(y))
    assert df == 3 * 2 and var == pytest.approx(np.sum(resid**2) / 6, rel=1e-10)


def test_a_missing_cell_keeps_the_fit_and_one_block_has_no_df():
    y = np.array([[1.0, 1.1, 1.2], [1.05, 1.12, np.nan]])
    cells = [c for c in _cells(y) if math.isfinite(c[2])]
    var, df = pooled.residual_variance(cells)
    assert df == 1 and var >= 0
    assert pooled.residual_variance([("a", 0, 1.0), ("b", 0, 1.1)]) == (pytest.approx(math.nan, nan_ok=True), 0)


def test_within_variance_from_the_runs_interval():
    w = pooled.within_variance(100.0, 99.0, 101.0)
    assert w == pytest.approx(((math.log(101) - math.log(99)) / (2 * 1.959964)) ** 2, rel=1e-5)
    assert pooled.within_variance(100.0, 0.0, 101.0) == 0.0


def test_the_prior_learns_the_scale_and_trusts_agreeing_nights_more():
    rng = np.random.default_rng(5)
    s0 = 1e-5
    calm = [(s0 * rng.chisquare(2) / 2, 2) for _ in range(10)]
    wild = [(s0 * math.exp(rng.normal(0, 1.5)) * rng.chisquare(2) / 2, 2) for _ in range(10)]
    p_calm, p_wild = pooled.learn_prior(calm), pooled.learn_prior(wild)
    assert p_calm.df > p_wild.df and p_calm.df <= pooled.PRIOR_DF_MAX
    assert 0.3 * s0 < p_calm.var < 3 * s0
    assert pooled.learn_prior(calm[:1]) is None
    two = pooled.learn_prior(calm[:2])
    assert two.df == 4 and two.var == pytest.approx((calm[0][0] + calm[1][0]) / 2)


def test_without_prior_the_difference_boundaries_are_those_of_the_sequential_design():
    two, one, fut, k_min = pooled.pooled_boundaries(6)
    ref_two, _ = seq.t_boundaries(6)
    assert k_min == seq.K_MIN
    for k in range(3, 7):  # Monte Carlo boundaries of the same process (look 2's is ~120 with one df: noisy)
        assert two[k] == pytest.approx(ref_two[k], rel=0.05)


def test_a_prior_opens_equivalence_after_one_block_but_not_the_difference_test():
    two, one, fut, k_min = pooled.pooled_boundaries(6, 0, 8.0)
    assert k_min == 1 and math.isfinite(one[1]) and math.isinf(two[1]) and fut[1] == 0


@pytest.mark.parametrize("extra_df", [0, 2])
def test_the_a_a_rate_stays_at_alpha_with_a_prior_that_is_far_too_low(extra_df):
    """The difference test never uses the prior: a prior 100x too low cannot make an A/A arm faster or slower."""
    rng = np.random.default_rng(11)
    n, k = 20_000, 6
    d = rng.normal(0, 0.02, (n, k))
    extra = None
    if extra_df:  # the other arms' residual sums of squares, block by block (variance 0.02^2 per df)
        steps = 0.02**2 * rng.chisquare(extra_df, (n, k))
        steps[:, 0] = 0
        extra = steps.cumsum(axis=1)
    state, look, used = pooled.pooled_states(d, k, extra_ss=extra, extra_df=extra_df,
                                             prior=(np.full(n, 12.0), np.full(n, 0.02**2 / 100)))
    fp = np.isin(state, (seq.FASTER, seq.SLOWER)).mean()
    assert fp <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / n)


def test_a_calm_machine_with_a_prior_decides_equivalent_in_one_or_two_blocks():
    rng = np.random.default_rng(12)
    n = 2000
    d = rng.normal(0, 0.003, (n, 6))  # 0.3% per block: far inside +-2%
    state, look, used = pooled.pooled_states(d, 6, prior=(np.full(n, 8.0), np.full(n, 0.003**2)))
    assert (state == seq.EQUIVALENT).mean() > 0.99 and np.percentile(look, 95) <= 2 and used.mean() > 0.95
    # without the prior the same data need more blocks
    _, look0, _ = pooled.pooled_states(d, 6)
    assert look0.mean() > look.mean()


def test_a_conflicting_night_drops_the_prior():
    d = np.array([[0.05, -0.05, 0.04]])  # 5% swings against a prior of 0.3%: not equivalent after block 1
    state, look, used = pooled.pooled_states(d, 6, prior=(np.array([8.0]), np.array([0.003**2])))
    assert not used[0] and state[0] != seq.EQUIVALENT


class _Run:
    def __init__(self, variant, repeat, median, lo, hi):
        from analysis.measure.stats import StepTime

        self.variant, self.repeat, self.good = variant, repeat, True
        self.step_time = StepTime(median, median, lo, hi, 20)


def test_group_noise_pools_every_arm_and_its_verdict_carries_the_noise():
    runs = [_Run(a, b, m * f, m * f * 0.998, m * f * 1.002) for b, m in enumerate((1000.0, 1010.0, 995.0))
            for a, f in (("base", 1.0), ("ctl", 1.001), ("x", 0.97 + 0.001 * b))]
    noise = pooled.group_noise(runs, "base")
    assert noise.arms == 3 and noise.df == 4 and noise.within > 0
    ctl = [math.log(1.0 / 1.001)] * 3
    res = pooled.pooled_verdict(ctl, noise, 3)
    j = res.to_json()
    assert j["design"] == pooled.METHOD and j["noise"]["df"] == 4 and res.dof == 4
    value, lo, hi = pooled.pooled_speedup(ctl, res)
    assert lo < value < hi


def test_prior_from_history_rows_uses_one_variance_per_sweep_and_group():
    rows = []
    rng = np.random.default_rng(2)
    for s in range(4):
        for b in range(3):
            for v in ("base", "ctl"):
                rows.append({"sweep_id": f"s{s}", "group_key": "g", "variant": v, "repeat": b, "ok": True,
                             "step_time_ms": 1000 * math.exp(rng.normal(0, 0.003))})
    rows.append({"sweep_id": "s9", "group_key": "g", "variant": "base", "repeat": None, "ok": True,
                 "step_time_ms": 1.0})
    p = pooled.prior_from_rows(rows)
    assert p is not None and p.nights == 4 and 0 < p.var < 1e-3
