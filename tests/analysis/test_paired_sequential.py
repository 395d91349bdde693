"""Paired block analysis, equivalence (TOST), the group-sequential design and the control arm (issue 15)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from analysis.measure.compare import compare_all
from analysis.measure.paired import Design, drift, paired_speedup
from analysis.measure.sequential import (
    EQUIVALENT,
    FASTER,
    P_FUTILITY,
    SLOWER,
    SPENDING,
    STOPPED,
    UNDECIDED,
    boundaries,
    fixed_verdict,
    futility_bounds,
    obf_spending,
    power_spending,
    sequential_states,
    sequential_verdict,
    t_boundaries,
)
from tests.analysis.test_stats_compare import noisy, result


def test_paired_speedup_is_the_geometric_mean_of_block_ratios_with_a_t_interval():
    ratios = [1.10, 1.20, 1.00, 1.15]
    logs = np.log(ratios)
    s = paired_speedup(logs)
    half = sps.t.ppf(0.975, 3) * logs.std(ddof=1) / 2
    assert s.value == pytest.approx(math.exp(logs.mean()))
    assert (s.ci_low, s.ci_high) == pytest.approx((math.exp(logs.mean() - half), math.exp(logs.mean() + half)))
    assert s.method == "paired_blocks_t"
    with pytest.raises(ValueError, match=">= 2 blocks"):
        paired_speedup([0.1])


def test_fixed_verdicts_faster_slower_equivalent_and_undecided():
    assert fixed_verdict(np.log([1.10, 1.11, 1.09, 1.10, 1.12])) == "faster"
    assert fixed_verdict(-np.log([1.10, 1.11, 1.09, 1.10, 1.12])) == "slower"
    assert fixed_verdict(np.log([1.001, 0.999, 1.002, 0.998, 1.0])) == "equivalent"
    assert fixed_verdict(np.log([1.10, 0.90, 1.05, 0.97, 1.02])) == "no_significant_difference"
    # equivalence wins over a tiny but measurable difference: 0.5% is inside +-2%
    assert fixed_verdict(np.log([1.005, 1.0051, 1.0049, 1.005, 1.005])) == "equivalent"
    assert fixed_verdict(np.log([1.005, 1.0051, 1.0049, 1.005, 1.005]), threshold=0.001) == "faster"


def test_lan_demets_obf_boundaries_match_the_published_table():
    """Known variance, 5 equal looks, 2.5% per side: Lan-DeMets O'Brien-Fleming-type boundaries 4.877, 3.357,
    2.680, 2.290, 2.031 (the published table, e.g. gsDesign's sfLDOF); the same simulation gives the t ones."""
    assert obf_spending(1.0, 0.025) == pytest.approx(0.025)
    assert obf_spending(0.2, 0.025) == pytest.approx(sps.norm.sf(4.877), rel=0.01)  # one side
    z, _ = boundaries(5, k_min=1, known_variance=True)
    assert z[2] == pytest.approx(3.357, abs=0.06)  # 0.08% of the paths cross there: a larger Monte Carlo error
    assert list(z[3:]) == pytest.approx([2.680, 2.290, 2.031], abs=0.02)


def test_power_family_boundaries_match_exact_normal_integration():
    """Known variance, 3 equal looks, Kim-DeMets power family rho = 2 at 2.5% per side: the simulated boundaries
    spend exactly 2 x 0.025 x (k/3)^2 by look k, computed here by integrating the normal increments (scipy)."""
    assert power_spending(0.5, 0.025) == pytest.approx(0.025 / 4) and power_spending(1.0, 0.025) == 0.025
    z, _ = boundaries(3, k_min=1, known_variance=True, spend="power2")
    assert 2 * sps.norm.sf(z[1]) == pytest.approx(2 * 0.025 / 9, rel=0.03)
    # P(|Z_1| < c_1, |Z_2| < c_2), corr(Z_1, Z_2) = sqrt(1/2): inclusion-exclusion over the bivariate cdf
    mvn = sps.multivariate_normal(mean=[0, 0], cov=[[1, math.sqrt(0.5)], [math.sqrt(0.5), 1]])
    c1, c2 = z[1], z[2]
    inside = (mvn.cdf([c1, c2]) - mvn.cdf([-c1, c2]) - mvn.cdf([c1, -c2]) + mvn.cdf([-c1, -c2]))
    assert 1 - inside == pytest.approx(2 * 0.025 * 4 / 9, rel=0.02)
    with pytest.raises(ValueError, match="power<rho>"):
        boundaries(3, spend="pocock")


def test_t_boundaries_look_from_block_2_with_a_binding_futility_wedge():
    two, one = t_boundaries(6)
    assert two.tolist() == boundaries(6, spend=SPENDING)[0].tolist()
    fut = futility_bounds(6)
    assert math.isinf(two[1]) and np.isfinite(two[2]) and two[2] > two[3] > two[4] > two[5] > two[6]
    # one nominal p-value per look, the last one for every later look; none at the final look
    expect = [sps.t.isf(P_FUTILITY[min(k - 2, len(P_FUTILITY) - 1)] / 2, k - 1) for k in range(2, 6)]
    assert list(fut[2:6]) == pytest.approx(expect) and fut[6] == 0 and fut[1] == 0
    assert list(futility_bounds(6, 0.25)[2:6]) == pytest.approx([sps.t.isf(0.125, k - 1) for k in range(2, 6)])
    assert all(fut[k] < two[k] for k in range(2, 7))
    # binding futility gives its alpha back to the later looks: no boundary is above the one without futility,
    # the last ones are below it
    no_futility, _ = boundaries(6, p_futility=0.0, spend=SPENDING)
    assert all(two[k] <= no_futility[k] for k in range(2, 7)) and two[5] < no_futility[5] and two[6] < no_futility[6]
    assert np.isfinite(one[2]) and one[2] > one[6] > sps.t.isf(0.05, 5)  # TOST: no futility, spends 5% per test
    with pytest.raises(ValueError, match="max_blocks"):
        boundaries(1)
    with pytest.raises(ValueError, match="p_futility"):
        boundaries(6, p_futility=(0.5, 1.2))


def test_sequential_design_keeps_the_false_positive_rate_at_5_percent_over_all_looks():
    x = np.random.default_rng(3).normal(0, 0.05, (20000, 6))
    state, look = sequential_states(x, 6)
    fp = np.isin(state, (FASTER, SLOWER)).mean()
    assert 0.03 < fp <= 0.055
    # naive: a fixed 95% t test at every look from 3 to 6 blocks inflates it
    naive = np.zeros(len(x), dtype=bool)
    for k in range(3, 7):
        t = x[:, :k].mean(1) / (x[:, :k].std(1, ddof=1) / math.sqrt(k))
        naive |= np.abs(t) > sps.t.isf(0.025, k - 1)
    assert naive.mean() > fp + 0.03
    # an A/A arm does not come out faster more often than alpha / 2
    assert (state == FASTER).mean() <= 0.0275 and (state == SLOWER).mean() <= 0.0275
    # most A/A arms stop at the first looks (the futility wedge): that is where the GPU-hours are saved
    assert np.isin(look[state == STOPPED], (2, 3)).mean() > 0.8 and (look == 2).mean() > 0.5


def test_sequential_stops_early_on_a_big_effect_and_on_equivalence():
    first = sequential_verdict(np.log([1.30, 1.3001]), 6)  # two blocks that agree to 0.01%: the first look
    assert first.state == "faster" and first.look == 2 and not first.wants_more
    big = sequential_verdict(np.log([1.30, 1.31, 1.29]), 6)
    assert big.state == "faster" and big.look == 3 and not big.wants_more
    assert sequential_verdict(np.log([1.30, 1.31]), 6).state == "undecided"  # 1 degree of freedom: not yet
    same = sequential_verdict(np.log([1.0005, 0.9995, 1.0002, 0.9998]), 6)
    assert same.state == "equivalent" and same.look in (3, 4)
    # the difference test closed at block 2 (the blocks disagree), but equivalence is in reach: the arm goes on
    near = sequential_verdict(np.log([1.004, 0.996]), 6)
    assert near.state == "undecided" and not near.difference_open and near.wants_more
    assert sequential_verdict(np.log([1.004, 0.996, 1.05, 1.05, 1.05, 1.05]), 6).state != "faster"
    open_ = sequential_verdict(np.log([1.06, 1.03, 1.045]), 6)
    assert open_.state == "undecided" and open_.wants_more and open_.look is None
    hopeless = sequential_verdict(np.log([1.10, 0.90, 1.00, 1.08, 0.93]), 6)
    assert hopeless.state == "stopped" and hopeless.look == 2 and not hopeless.wants_more
    state, look = sequential_states(np.log([[1.3, 1.31, 1.29, np.nan, np.nan, np.nan]]), 6)
    assert state[0] == FASTER and look[0] == 3
    assert UNDECIDED != STOPPED != EQUIVALENT


def _blocks(name, medians, role="variant", seed=0):
    return [result(name, noisy(m, sd=2.0, seed=seed + i), role=role, repeat=i) for i, m in enumerate(medians)]


def test_paired_blocks_cancel_drift_that_fools_unpaired_repeats():
    drift_ms = [500, 560, 620, 540, 480]  # the machine drifts by 29% over the sweep
    base = _blocks("a2a.ovl0.dw0", drift_ms, role="baseline")
    arm = _blocks("a2a.ovl1.dw0", [m / 1.10 for m in drift_ms], seed=100)
    (c,) = compare_all([*base, *arm])
    assert c.speedup.method == "paired_blocks_t" and c.verdict == "faster"
    assert c.speedup.value == pytest.approx(1.10, rel=0.01) and len(c.blocks) == 5
    d = drift([*base, *arm])
    assert [b["median_ms"] for b in d[0]["blocks"]] == pytest.approx(drift_ms, rel=0.01)
    assert d[0]["spread"] == pytest.approx(620 / 480 - 1, rel=0.02)


def test_control_equivalent_is_the_noise_floor_and_a_failing_control_makes_the_group_doubtful():
    drift_ms = [500, 510, 505, 495, 502, 498]
    base = _blocks("a2a.ovl0.dw0", drift_ms, role="baseline")
    arm = _blocks("a2a.ovl1.dw0", [m / 1.2 for m in drift_ms], seed=100)
    good_ctl = _blocks("a2a.ovl0.dw0.ctl", drift_ms, role="control", seed=200)
    comps = {c.variant: c for c in compare_all([*base, *arm, *good_ctl])}
    assert comps["a2a.ovl0.dw0.ctl"].verdict == "equivalent" and comps["a2a.ovl0.dw0.ctl"].control
    assert not any(c.doubtful for c in comps.values())
    bad_ctl = _blocks("a2a.ovl0.dw0.ctl", [m * 1.08 for m in drift_ms], role="control", seed=200)
    comps = {c.variant: c for c in compare_all([*base, *arm, *bad_ctl])}
    assert comps["a2a.ovl0.dw0.ctl"].verdict == "slower"
    assert all(c.doubtful for c in comps.values()) and "control arm" in comps["a2a.ovl1.dw0"].doubtful_reason
    js = comps["a2a.ovl1.dw0"].to_json()
    assert js["doubtful"] is True and len(js["blocks"]) == 6 and js["blocks"][0]["ratio"] > 1.1


def test_adaptive_design_reaches_the_comparison_through_the_manifest_design():
    base = _blocks("b", [500, 520, 510], role="baseline")
    arm = _blocks("v", [500 / 1.3, 520 / 1.3, 510 / 1.3], seed=50)
    (c,) = compare_all([*base, *arm], design=Design.from_manifest({"repeats": "auto", "max_blocks": 6}))
    assert c.verdict == "faster" and c.sequential["state"] == "faster" and c.sequential["look"] == 2
