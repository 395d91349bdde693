"""Statistics (warm-up, skipped, intervals, tokens/s) and comparisons (speedup, verdicts, repeats, loss parity,
comparability, overlap ceiling, per-backend failure rates)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from analysis.logs.parse import parse_lines
from analysis.measure import stats as stats_module
from analysis.measure.compare import (
    backend_rates,
    compare_all,
    compare_variant,
    overlap_ceiling,
    speedup_from_iterations,
    speedup_from_run_medians,
)
from analysis.measure.results import RunConfig, RunResult
from analysis.measure.stats import (
    MIN_STEADY,
    bootstrap_medians,
    compute_stats,
    default_warmup,
    exact_bootstrap_medians,
    order_statistic_ci,
)
from tests.analysis.synth import iteration_line


def series(steps, losses=None, skipped=None, total=None, gbs=8):
    n = len(steps)
    total = total or n
    losses = losses if losses is not None else [5.0] * n
    lines = [iteration_line(i + 1, total, step_ms=s, loss=losses[i], gbs=gbs,
                            skipped=(skipped or [0] * n)[i]) for i, s in enumerate(steps)]
    return parse_lines(lines).series


@pytest.mark.parametrize("n,warm", [(0, 3), (10, 3), (30, 3), (31, 4), (100, 10), (1000, 100)])
def test_default_warmup(n, warm):
    assert default_warmup(n) == warm


def test_warmup_skipped_and_intervals():
    rng = np.random.default_rng(0)
    steps = [5000.0, 900.0, 800.0] + list(500 + rng.normal(0, 5, 37))
    sk = [0] * 40
    sk[20] = 1
    st = compute_stats(series(steps, skipped=sk), seq_length=1024, world_size=2)
    assert st.warmup == 4 and st.total == 40 and st.skipped == 1 and st.steady == 40 - 4 - 1
    assert 490 < st.step_time.median < 510 and st.step_time.ci_low <= st.step_time.median <= st.step_time.ci_high
    assert st.step_time.p90 >= st.step_time.median and st.step_time.n == 35
    expected_tokens = 8 * 1024 / (st.step_time.median / 1000) / 2
    assert st.tokens.median == pytest.approx(expected_tokens, rel=0.01)
    assert st.tflops.median == 3.0
    again = compute_stats(series(steps, skipped=sk), seq_length=1024, world_size=2)
    assert (again.step_time.ci_low, again.step_time.ci_high) == (st.step_time.ci_low, st.step_time.ci_high)


def test_warmup_override_and_validation():
    s = series([500.0] * 30)
    assert compute_stats(s, warmup=10).steady == 20
    assert compute_stats(s, warmup=0).steady == 30
    with pytest.raises(ValueError, match="warmup must be >= 0"):
        compute_stats(s, warmup=-1)


def test_too_few_steady_iterations_gives_no_numbers():
    st = compute_stats(series([500.0] * (3 + MIN_STEADY - 1)), train_iters=8)
    assert not st.sufficient and st.step_time is None and st.tflops is None and st.tokens is None
    assert "at least 5" in st.notes[0]
    assert compute_stats(series([500.0] * (3 + MIN_STEADY)), train_iters=8).sufficient


def test_tokens_unknown_without_seq_length():
    st = compute_stats(series([500.0] * 20))
    assert st.tokens is None and any("seq_length" in n for n in st.notes)


def test_restart_warmup_is_excluded_again():
    s = parse_lines([iteration_line(i, 40) for i in range(1, 41)]).series
    assert compute_stats(s, warmup=4, restart_first_iterations=(20,)).steady == 40 - 4 - 4


def test_large_samples_use_order_statistics():
    x = np.random.default_rng(1).normal(100, 1, 60_000)
    lo, hi = order_statistic_ci(x)
    reps = bootstrap_medians(x, n_boot=500)
    assert lo < np.median(x) < hi and hi - lo < 0.1
    assert abs(reps.mean() - np.median(x)) < 0.05
    with pytest.raises(ValueError, match="at least one value"):
        bootstrap_medians(np.array([]))


def result(name, steps, *, losses=None, role="variant", status="ok", reason=None, repeat=0, dispatcher="alltoall",
           config=None, grads=None, a2a=None):
    lines = [iteration_line(i + 1, len(steps), step_ms=s, loss=(losses or [5.0] * len(steps))[i],
                            grad=(grads or [1.0] * len(steps))[i]) for i, s in enumerate(steps)]
    s = parse_lines(lines).series
    st = compute_stats(s, warmup=3)
    return RunResult(name=f"{name}.r{repeat}", variant=name, status=status, reason=reason, repeat=repeat,
                     step_time=st.step_time, series=s, steady_mask=st.steady_mask, role=role, dispatcher=dispatcher,
                     config=config or RunConfig(8, 1024, 2, "32"), a2a_ms=a2a)


def noisy(center, n=40, seed=0, sd=3.0):
    return list(center + np.random.default_rng(seed).normal(0, sd, n))


def test_speedup_faster_slower_and_no_difference():
    base = result("a2a.ovl0.dw0", noisy(500), role="baseline")
    faster = compare_variant([base], [result("a2a.ovl1.dw0", noisy(400, seed=1))], baseline="b", variant="v", group={})
    assert faster.verdict == "faster" and faster.speedup.value == pytest.approx(1.25, rel=0.02)
    assert faster.speedup.ci_low > 1 and faster.speedup.method == "bootstrap_iterations"
    slower = compare_variant([base], [result("v", noisy(600, seed=2))], baseline="b", variant="v", group={})
    assert slower.verdict == "slower" and slower.regression
    same = compare_variant([base], [result("v", noisy(500, seed=3))], baseline="b", variant="v", group={})
    assert same.verdict == "no_significant_difference" and same.speedup.ci_low < 1 < same.speedup.ci_high


def test_speedup_helpers_validate_input():
    with pytest.raises(ValueError, match="both sides"):
        speedup_from_iterations(np.array([]), np.array([1.0]))
    with pytest.raises(ValueError, match=">= 3 runs"):
        speedup_from_run_medians([500.0], [400.0])


def test_repeats_use_per_run_medians():
    """Repeats that share no block (issue 15: same repeat index = same block) fall back to the per-run medians."""
    base = [result("b", noisy(m, seed=i), role="baseline", repeat=i) for i, m in enumerate([500, 510, 490])]
    var = [result("v", noisy(m, seed=10 + i), repeat=3 + i) for i, m in enumerate([400, 430, 380])]
    c = compare_variant(base, var, baseline="b", variant="v", group={})
    assert c.speedup.method == "per_run_medians" and c.verdict == "faster"
    paired = compare_variant(base, [replace(r, repeat=i) for i, r in enumerate(var)], baseline="b", variant="v",
                             group={})
    assert paired.speedup.method == "paired_blocks_t" and len(paired.blocks) == 3
    one = compare_variant(base[:1], var[:1], baseline="b", variant="v", group={})
    assert (c.speedup.ci_high - c.speedup.ci_low) > (one.speedup.ci_high - one.speedup.ci_low)


@pytest.mark.parametrize("config,word", [(RunConfig(16, 1024, 2, "32"), "global batch size"),
                                         (RunConfig(8, 4096, 2, "32"), "sequence length"),
                                         (RunConfig(8, 1024, 4, "32"), "GPU count"),
                                         (RunConfig(8, 1024, 2, "1"), "CUDA_DEVICE_MAX_CONNECTIONS")])
def test_not_comparable_runs(config, word):
    c = compare_variant([result("b", noisy(500), role="baseline")], [result("v", noisy(400), config=config)],
                        baseline="b", variant="v", group={})
    assert c.verdict == "not_comparable" and c.speedup.value is None and word in c.notes[0]


def test_loss_parity_and_faster_but_diverged():
    base = result("b", noisy(500), role="baseline", losses=[5.0] * 40)
    ok = compare_variant([base], [result("v", noisy(400), losses=[5.05] * 40)], baseline="b", variant="v", group={})
    assert ok.loss_parity.ok and ok.loss_parity.max_rel_diff == pytest.approx(0.01)
    assert ok.loss_parity.common_iterations == 37
    bad = compare_variant([base], [result("v", noisy(400), losses=[5.0] * 30 + [5.5] * 10)], baseline="b",
                          variant="v", group={})
    # issue 14's trust gate: a diverged variant is never called faster (verdict diverged, exit code 4)
    assert bad.verdict == "diverged" and bad.loss_parity.ok is False and bad.regression
    assert bad.speedup.value > 1.2 and "not a valid win" in " ".join(bad.notes)


def test_grad_norm_spike_flag():
    base = result("b", noisy(500), role="baseline")
    grads = [1.0] * 40
    grads[25] = 9.0
    c = compare_variant([base], [result("v", noisy(450), grads=grads)], baseline="b", variant="v", group={})
    assert c.grad_norm_spike and "iteration 26" in " ".join(c.notes)


def test_overlap_ceiling():
    ceiling = overlap_ceiling(1000.0, 400.0, 1.2)
    assert ceiling.ceiling == pytest.approx(1000 / 600) and ceiling.fraction_achieved == pytest.approx(0.2 / (1000 / 600 - 1))
    assert overlap_ceiling(1000.0, 1200.0, 1.1) is None
    base = result("b", [1000.0] * 30, role="baseline", a2a=350.0)
    c = compare_variant([base], [result("v", [800.0] * 30)], baseline="b", variant="v", group={})
    assert c.overlap_ceiling.a2a_ms == 350.0 and c.overlap_ceiling.fraction_achieved == pytest.approx(
        (1.25 - 1) / (1000 / 650 - 1))


def test_c07_failing_deepep_cells_are_shown_with_their_failure_rate():
    runs = [result("a2a.ovl0.dw0", noisy(500), role="baseline", repeat=r) for r in range(2)]
    runs += [result("a2a.ovl1.dw0", noisy(450), repeat=r) for r in range(2)]
    runs += [RunResult(name=f"deepep.r{r}", variant="deepep.ovl1.dw0", status="failed", reason="dispatcher_timeout",
                       repeat=r, dispatcher="deepep") for r in range(2)]
    runs += [RunResult(name="hy", variant="hybridep.ovl1.dw0", status="invalid_variant", reason="dispatcher_fallback",
                       dispatcher="hybridep", step_time=runs[0].step_time)]
    rates = {b.dispatcher: b for b in backend_rates(runs)}
    assert rates["deepep"].failure_rate == 1.0 and rates["deepep"].reasons == {"dispatcher_timeout": 2}
    assert rates["alltoall"].failure_rate == 0.0 and rates["hybridep"].bad == 1
    comps = {c.variant: c for c in compare_all(runs)}
    assert comps["deepep.ovl1.dw0"].verdict == "not_comparable"
    assert "dispatcher_timeout" in comps["deepep.ovl1.dw0"].notes[0]
    assert "kept out of the hybridep column" in comps["hybridep.ovl1.dw0"].notes[0]
    assert comps["a2a.ovl1.dw0"].verdict == "faster"


def test_compare_all_respects_groups():
    runs = [result("b16", noisy(500), role="baseline"), result("v16", noisy(400))]
    runs += [result("b8", noisy(300), role="baseline"), result("v8", noisy(330))]
    for r, ep in zip(runs, [16, 16, 8, 8], strict=True):
        object.__setattr__(r, "group", {"model.expert_model_parallel_size": ep})
    comps = {c.variant: c for c in compare_all(runs)}
    assert comps["v16"].baseline == "b16" and comps["v16"].verdict == "faster"
    assert comps["v8"].baseline == "b8" and comps["v8"].verdict == "slower"


def test_real_baseline_fixture_statistics():
    from analysis.logs.parse import parse_files
    from tests.analysis.synth import FIXTURES

    s = parse_files([FIXTURES / "h200_mbridge_tiny_moe_baseline.log"]).series
    st = compute_stats(s, train_iters=30, seq_length=1024, world_size=1)
    assert st.warmup == 3 and st.steady == 27
    assert st.step_time.median == pytest.approx(float(np.median(s.step_ms[3:])))
    assert st.loss_first == pytest.approx(10.48167) and st.loss_last == pytest.approx(6.540995)


def test_c10_without_throughput_field_the_number_is_unknown_with_a_note():
    lines = [iteration_line(i, 20, tflops=None) for i in range(1, 21)]
    st = compute_stats(parse_lines(lines).series)
    assert st.step_time.median == 500.0 and st.tflops is None
    assert "throughput logging was off" in " ".join(st.notes)


@pytest.mark.parametrize("n", [2_001, 2_400, 9_999])
def test_large_samples_draw_the_full_bootstraps_medians(n, monkeypatch):
    # values logged to 0.1, as the logs print them: the bootstrap medians fall on a few data values (and, for an
    # even n, means of two neighbours), and the interval bounds are those values, not a smooth approximation
    x = np.round(np.random.default_rng(n).normal(236.5, 4.7, n), 1)
    drawn = bootstrap_medians(x, n_boot=4000, seed=3)
    monkeypatch.setattr(stats_module, "LARGE_N", 10**9)
    full = bootstrap_medians(x, n_boot=4000, seed=3)
    s = np.sort(x)
    allowed = set(s) if n % 2 else set(s) | set((s[:-1] + s[1:]) / 2)
    assert set(drawn) <= allowed
    grid = np.unique(np.concatenate([drawn, full]))
    ks = np.abs(np.searchsorted(np.sort(drawn), grid, "right") - np.searchsorted(np.sort(full), grid, "right")).max()
    assert ks / 4000 < 0.05  # two-sample Kolmogorov-Smirnov distance (its 99.9% critical value here: 0.044)
    assert np.quantile(drawn, [0.025, 0.975]) == pytest.approx(np.quantile(full, [0.025, 0.975]), abs=0.1 + 1e-9)
    assert drawn.std() == pytest.approx(full.std(), rel=0.1)


def test_exact_bootstrap_medians_of_tiny_samples():
    rng = np.random.default_rng(0)
    assert set(exact_bootstrap_medians(np.array([7.0]), n_boot=50, rng=rng)) == {7.0}
    two = exact_bootstrap_medians(np.array([1.0, 3.0]), n_boot=4000, rng=rng)
    assert set(two) == {1.0, 2.0, 3.0} and np.mean(two == 2.0) == pytest.approx(0.5, abs=0.05)
    with pytest.raises(ValueError, match="at least one value"):
        exact_bootstrap_medians(np.array([]), n_boot=5, rng=rng)
