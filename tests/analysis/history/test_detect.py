"""Regression detection on synthetic histories: detection rates, false alarms, speedup-only drops, verdicts.

The rates asserted here are the bands around what ``benchmarks/history.py`` measures with 400 trials (README
"Nightly runs"): 10% always, 5% about half (the threshold sits exactly there), 3% rarely, noise never.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import date, timedelta

import numpy as np
import pytest

from analysis.history import HistoryConfig
from analysis.history.detect import judge_metric
from analysis.history.judge import history_from_inputs, judge_history
from analysis.history.records import NightSamples
from analysis.history.synthetic import (
    BASELINE,
    NoiseModel,
    SyntheticSeries,
    detection_rate,
    false_alarms,
    simulate_night,
    simulate_series,
)

OVERLAP_VARIANTS = ("a2a.ovl1.dw0", "deepep.ovl1.dw0", "hybridep.ovl1.dw0")


@pytest.mark.parametrize("level, step_band, speedup_band, either_min", [
    (0.10, (0.95, 1.0), (0.95, 1.0), 0.95),
    (0.05, (0.30, 0.75), (0.20, 0.65), 0.45),
    (0.03, (0.0, 0.20), (0.0, 0.10), 0.0),
    (0.0, (0.0, 0.0), (0.0, 0.0), 0.0),
])
@pytest.mark.slow  # hundreds of simulated nights
def test_detection_rate_of_injected_regressions(level, step_band, speedup_band, either_min):
    r = detection_rate(level, 100, seed0=0)
    assert step_band[0] <= r.step_time <= step_band[1], r
    assert speedup_band[0] <= r.speedup <= speedup_band[1], r
    assert r.either >= either_min, r
    assert r.other_alarms == 0, r


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pure_noise_raises_no_alarm_over_30_nights(seed):
    alarms, judged = false_alarms(30, seed)
    assert judged >= 27 * 7 - 7  # 4 variants x step time + 3 speedups, every night with >= 3 nights of history
    assert alarms == 0


def test_speedup_drop_alone_is_flagged_even_when_the_baseline_got_faster():
    spec = SyntheticSeries()
    inputs = simulate_series(spec, 8, seed=5, tonight={BASELINE: 0.90})  # the baseline got 10% faster tonight
    report = judge_history(history_from_inputs(inputs), inputs[-1].sweep.night)
    assert report.variant(BASELINE).step_time.verdict == "improvement"
    for name in OVERLAP_VARIANTS:
        v = report.variant(name)
        assert v.step_time.verdict == "within_noise", v.step_time  # the variants themselves did not change...
        assert v.speedup.verdict == "regression", v.speedup  # ...but the overlap benefit shrank by ~10%
        assert v.speedup.change == pytest.approx(-0.10, abs=0.03)
    assert report.exit_code == 4


def test_improvement_is_news_but_not_a_failure():
    inputs = simulate_series(SyntheticSeries(), 8, seed=6, tonight={"a2a.ovl1.dw0": 0.88})
    report = judge_history(history_from_inputs(inputs), inputs[-1].sweep.night)
    v = report.variant("a2a.ovl1.dw0")
    assert (v.step_time.verdict, v.speedup.verdict) == ("improvement", "improvement")
    assert v.throughput_change == pytest.approx(1 / 0.88 - 1, abs=0.03)
    assert report.regressions == () and report.exit_code == 0


@pytest.mark.slow  # hundreds of simulated nights
def test_change_within_the_night_to_night_spread_is_not_a_regression():
    noisy = SyntheticSeries(noise=NoiseModel(night_sd=0.05, variant_night_sd=0.03))
    quiet = SyntheticSeries()
    noisy_hits = detection_rate(0.08, 40, variant="a2a.ovl1.dw0", spec=noisy).step_time
    quiet_hits = detection_rate(0.08, 40, variant="a2a.ovl1.dw0", spec=quiet).step_time
    assert quiet_hits >= 0.9 and noisy_hits <= 0.2, (quiet_hits, noisy_hits)


def _samples(values, start=date(2026, 11, 1)):
    return [NightSamples(night=start + timedelta(days=i), value=v, runs=(v * 0.99, v, v * 1.01))
            for i, v in enumerate(values)]


def test_judge_metric_notes_say_which_check_decided():
    cfg = HistoryConfig()
    hist = _samples([100, 92, 108, 95, 105, 98, 103])  # ±5% night-to-night spread
    tonight = NightSamples(night=date(2026, 11, 8), value=104.0, runs=(103.9, 104.0, 104.1))
    j = judge_metric("step_time_ms", tonight, hist, cfg, lower_is_better=True)
    assert j.verdict == "within_noise" and "below the 5% threshold" in j.note
    tonight = replace(tonight, value=112.0, runs=(111.9, 112.0, 112.1))
    j = judge_metric("step_time_ms", tonight, hist, cfg, lower_is_better=True)
    assert j.verdict == "within_noise" and "within the night-to-night spread" in j.note
    calm = _samples([100, 100.5, 99.5, 100.2, 99.8, 100.1, 99.9])
    j = judge_metric("step_time_ms", tonight, calm, cfg, lower_is_better=True)
    assert j.verdict == "regression" and j.change == pytest.approx(0.12, abs=0.005) and j.p_runs < 0.05
    j = judge_metric("speedup", replace(tonight, value=88.0, runs=(87.9, 88.0, 88.1)), calm, cfg,
                     lower_is_better=False)
    assert j.verdict == "regression" and j.change < 0


def test_judge_metric_significance_and_new_variant():
    cfg = HistoryConfig()
    calm = _samples([100, 100.5, 99.5, 100.2, 99.8, 100.1, 99.9])
    # one run tonight, no iterations: the analysis interval decides
    one = NightSamples(night=date(2026, 11, 8), value=110.0, runs=(110.0,), ci=(109.0, 111.0))
    assert judge_metric("step_time_ms", one, calm, cfg, lower_is_better=True).verdict == "regression"
    wide = replace(one, ci=(95.0, 125.0))
    j = judge_metric("step_time_ms", wide, calm, cfg, lower_is_better=True)
    assert j.verdict == "within_noise" and "not significant" in j.note
    bare = replace(one, ci=None)
    assert "no samples for a significance test" in judge_metric("step_time_ms", bare, calm, cfg,
                                                                 lower_is_better=True).note
    j = judge_metric("step_time_ms", one, calm[:2], cfg, lower_is_better=True)
    assert j.verdict == "new_variant" and "2 good night(s) of history, fewer than min_nights=3" in j.note
    # the rolling window holds only the last `window` nights before tonight
    long = _samples([200.0] * 5 + [100.0] * 7)
    j = judge_metric("step_time_ms", replace(one, night=date(2026, 11, 13)), long, cfg, lower_is_better=True)
    assert j.baseline == 100.0 and len(j.nights) == 7


def test_new_missing_and_retired_variants():
    spec = SyntheticSeries(variants={BASELINE: 1000.0, "a2a.ovl1.dw0": 800.0, "deepep.ovl1.dw0": 740.0,
                                     "old.ovl1.dw0": 900.0, "new.ovl1.dw0": 700.0})
    rng = np.random.default_rng(1)
    inputs = []
    for i in range(12):
        skip = ("new.ovl1.dw0",) if i < 10 else ()
        skip += ("old.ovl1.dw0",) if i >= 2 else ()  # retired long ago
        skip += ("deepep.ovl1.dw0",) if i == 11 else ()  # dropped from tonight's sweep
        inputs.append(simulate_night(spec, i, rng, skip=skip))
    report = judge_history(history_from_inputs(inputs), inputs[-1].sweep.night)
    assert report.variant("new.ovl1.dw0").step_time.verdict == "new_variant"
    assert report.variant("new.ovl1.dw0").speedup.verdict == "new_variant"
    missing = report.variant("deepep.ovl1.dw0")
    assert (missing.step_time.verdict, missing.speedup.verdict) == ("missing_tonight", "missing_tonight")
    assert "not in the sweep(s) of" in missing.step_time.note
    assert report.retired == ("old.ovl1.dw0",)
    assert report.exit_code == 0


def test_night_without_a_successful_baseline():
    spec = SyntheticSeries()
    rng = np.random.default_rng(2)
    inputs = [simulate_night(spec, i, rng, failed={BASELINE: "OOM"} if i == 8 else None) for i in range(10)]
    history = history_from_inputs(inputs)
    bad = judge_history(history, inputs[8].sweep.night)
    assert bad.variant(BASELINE).step_time.verdict == "missing_tonight"
    assert "no successful run tonight: failed (OOM)" in bad.variant(BASELINE).step_time.note
    for name in OVERLAP_VARIANTS:
        v = bad.variant(name)
        assert v.speedup.verdict == "missing_tonight" and "no successful run of a2a.ovl0.dw0" in v.speedup.note
        assert v.step_time.verdict == "within_noise"
    assert any("baseline a2a.ovl0.dw0 has no successful run" in w for w in bad.warnings)
    assert bad.exit_code == 0
    after = judge_history(history, inputs[9].sweep.night)  # the failed night is not a good night
    assert inputs[8].sweep.night not in after.variant(BASELINE).step_time.nights
    assert inputs[8].sweep.night not in after.variant("a2a.ovl1.dw0").speedup.nights
    assert len(after.variant(BASELINE).step_time.nights) == 7


@pytest.mark.parametrize("kw, match", [
    (dict(window=0), r"history.window=0: must be an integer >= 1"),
    (dict(threshold=5), r"history.threshold=5: must be a fraction in \(0, 1\)"),
    (dict(min_nights=9), r"history.min_nights=9: must be an integer in 1..window \(7\)"),
    (dict(alpha=0), r"history.alpha=0"),
    (dict(noise_k=-1), r"history.noise_k=-1"),
])
def test_config_validation(kw, match):
    with pytest.raises(ValueError, match=match):
        HistoryConfig(**kw)


def test_config_from_hydra_group():
    cfg = HistoryConfig.from_mapping({"enabled": True, "url": "sqlite:///x.db", "window": 5, "threshold": 0.03})
    assert (cfg.window, cfg.threshold) == (5, 0.03)
    with pytest.raises(ValueError, match="unknown history key\\(s\\) windw; valid: alpha, enabled, min_nights"):
        HistoryConfig.from_mapping({"windw": 5})


def test_two_sweeps_on_one_night_are_pooled():
    spec = SyntheticSeries()
    rng = np.random.default_rng(4)
    inputs = [simulate_night(spec, i, rng) for i in range(8)]
    rerun = simulate_night(spec, 7, rng)  # a second sweep the same night (e.g. a manual re-run)
    rerun = replace(rerun, sweep=replace(rerun.sweep, sweep_id=rerun.sweep.sweep_id + "-rerun"))
    report = judge_history(history_from_inputs(inputs + [rerun]), inputs[-1].sweep.night)
    assert report.sweep_ids == tuple(sorted((inputs[-1].sweep.sweep_id, rerun.sweep.sweep_id)))
    tonight = [r.step_time_ms for n in (inputs[-1], rerun) for r in n.runs if r.variant == BASELINE]
    assert report.variant(BASELINE).step_time.tonight == pytest.approx(float(np.median(tonight)))
    assert report.exit_code == 0
