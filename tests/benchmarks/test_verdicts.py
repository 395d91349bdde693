"""benchmarks/verdicts.py: its fast median sampler is the model it replaces, and its output has the promised form."""

from __future__ import annotations

import re

import numpy as np
import pytest
from scipy import stats as sps

from benchmarks import verdicts


def test_order_statistic_medians_have_the_distribution_of_the_drawn_steps():
    factors = np.exp(np.random.default_rng(1).normal(0, 0.05, 20000))
    fast, hours = verdicts.run_medians(factors, 30, 0.07, np.random.default_rng(2))
    slow, slow_hours = verdicts.run_medians_by_steps(factors, 30, 0.07, np.random.default_rng(3))
    assert sps.ks_2samp(fast / factors, slow / factors).pvalue > 1e-3
    assert np.std(np.log(fast / factors)) == pytest.approx(np.std(np.log(slow / factors)), rel=0.03)
    assert hours.mean() == pytest.approx(slow_hours.mean(), rel=1e-3)
    even, _ = verdicts.run_medians(factors, 31, 0.07, np.random.default_rng(4))  # 28 steady steps: two middle ones
    even_slow, _ = verdicts.run_medians_by_steps(factors, 31, 0.07, np.random.default_rng(5))
    assert sps.ks_2samp(even / factors, even_slow / factors).pvalue > 1e-3
    with pytest.raises(ValueError, match="warm-up"):
        verdicts.run_medians(factors, 3, 0.07, np.random.default_rng(6))


def test_output_has_every_drift_with_its_goals_and_the_last_line(capsys):
    assert verdicts.main(["--trials", "200", "--aa-trials", "3000", "--in-tree"]) == 0  # (this process)
    out = capsys.readouterr().out.splitlines()
    rows = [line for line in out if re.match(r"\s+\d+\.\d\s", line) and "A/A<=5%" in line]
    assert [float(r.split()[0]) for r in rows] == list(verdicts.DRIFTS)
    nightly = [line for line in out if re.match(r"\s+\d+\.\d\s", line) and line.rstrip().endswith(" s")]
    assert [float(r.split()[0]) for r in nightly] == list(verdicts.DRIFTS)
    for r in nightly:  # A/A with a right prior and one too low, power nightly / today, GPU-s per decided verdict
        assert re.search(r"\d+\.\d\d% \(\d\.\d\d\)\s+\d+\.\d\d% \(\d\.\d\d\)\s+\d+\.\d% / \d+\.\d%\s+\d+ / \d+ s$", r), r
    for r in rows:  # adaptive A/A with its MC SE, power adaptive / fixed, GPU-hours ratio, the three goals
        assert re.search(r"\d+\.\d\d% \(\d\.\d\d\)\s+\d+\.\d% / \d+\.\d%\s+\d\.\d\d  A/A<=5% (yes|NO), "
                         r"power (yes|NO), GPU<=0.60 (yes|NO)$", r), r
    assert re.fullmatch(r"A/A false positive \d+\.\d\d%; power 5%: \d+\.\d% \(fixed: \d+\.\d%\); "
                        r"GPU-hours vs fixed: \d\.\d\d", out[-2]), out[-2]
    assert "Monte Carlo standard error" in out[-3] and "3000 A/A arms" in out[-3]
    drifts = ", ".join(rf"{d:g}%: \d+\.\d\d%" for d in verdicts.DRIFTS)
    assert re.fullmatch(rf"GPU-seconds per decided verdict: nightly \d+ s vs today's repeats=auto \d+ s \(\d\.\d\dx; "
                        rf"power 5% \d+\.\d% vs \d+\.\d%\); nightly A/A false positives by drift {drifts}; "
                        rf"prior too low: {drifts}", out[-1]), out[-1]


def test_bad_arguments_exit_2():
    with pytest.raises(SystemExit) as e:
        verdicts.main(["--drift", "0"])
    assert e.value.code == 2
