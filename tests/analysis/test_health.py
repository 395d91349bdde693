"""The run's own series as evidence (analysis/judge/health.py): a loss key that vanishes is a NaN loss, fp16 warm-up skips
stay ok, a blow-up by orders of magnitude is ``diverged`` and a noisy healthy curve is not; in every launcher
layout, and under rewordings and reorderings (hypothesis)."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis.judge import health
from analysis.judge.classify import SchedulerInfo, classify
from analysis.logs.parse import parse_files, parse_lines
from tests.analysis.megatron_format import LAYOUTS, in_layout, megatron_line, run_log
from tests.analysis.synth import FIXTURES

HEALTH = FIXTURES / "health"
T = 60


def _loss(i: int, rng: random.Random) -> float:
    return 9.5 * math.exp(-i / 25) + 2.4 + rng.uniform(-0.05, 0.05)


def _grad(i: int, rng: random.Random) -> float:
    return (12.0 if i < 4 else 1.0) * rng.uniform(0.6, 1.4)


def verdict(lines, **kw):
    return classify(parse_lines(lines), **kw)


@pytest.mark.parametrize("name,status,reason,iteration", [
    ("nan_lm_loss_vanishes_srun.log", "failed", "nan_inf", 37),
    ("nan_aux_loss_vanishes_torchrun.log", "failed", "nan_inf", 44),
    ("fp16_warmup_skips_ok.log", "ok", None, None),
    ("diverged_rank_prefix.log", "failed", "diverged", 42),
    ("healthy_noisy_spikes_ok.log", "ok", None, None),
])
def test_fixture_series_health(name, status, reason, iteration):
    v = classify(parse_files([HEALTH / name]))
    assert (v.status, v.reason) == (status, reason), v.evidence
    if iteration is not None:
        assert v.details["iteration"] == iteration


def test_vanished_key_is_named_with_its_last_value():
    v = classify(parse_files([HEALTH / "nan_aux_loss_vanishes_torchrun.log"]))
    assert v.details["key"] == "load_balancing_loss" and v.details["vanished"] is True
    assert "'load_balancing_loss' is missing" in v.evidence[0]


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("key", ["lm loss", "load_balancing_loss", "mtp_1 loss"])
@pytest.mark.parametrize("grad_nan", [False, True])
def test_a_loss_key_that_vanishes_is_nan_in_every_layout(layout, key, grad_nan):
    rng = random.Random(3)
    lines = []
    for i in range(1, 41):
        losses = {"lm loss": _loss(i, rng), "load_balancing_loss": 1.02, "mtp_1 loss": 2.9}
        if i >= 25:
            losses[key] = math.nan
        lines.append(megatron_line(i, T, losses=losses, grad=math.nan if grad_nan and i >= 25 else _grad(i, rng)))
    v = verdict(in_layout(run_log(lines, T, done=False), layout))
    assert (v.status, v.reason) == ("failed", "nan_inf") and v.details["iteration"] == 25, v.evidence


def test_a_loss_that_vanishes_on_the_final_line_of_a_complete_run_fails_it():
    rng = random.Random(4)
    lines = [megatron_line(i, T, losses={"lm loss": _loss(i, rng) if i < T else math.nan}) for i in range(1, T + 1)]
    v = verdict(run_log(lines, T))
    assert (v.status, v.reason) == ("failed", "nan_inf") and v.details["iteration"] == T


def test_nan_counter_with_a_vanished_key_names_the_first_bad_iteration():
    rng = random.Random(5)
    lines = [megatron_line(i, T, losses={"lm loss": _loss(i, rng) if i < 30 else math.nan}, nans=int(i >= 33),
                           skipped=int(i >= 33), grad=None if i >= 33 else 1.0) for i in range(1, 41)]
    v = verdict(run_log(lines, T, done=False))
    assert (v.status, v.reason) == ("failed", "nan_inf")
    assert v.details["iteration"] == 30  # the key vanished before the counter rose


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("interval", [1, 10])
def test_fp16_skipped_intervals_stay_ok(layout, interval):
    """Whole intervals skipped (no loss summed, no grad norm) print no loss key: that is the fp16 scaler backing
    off, not a NaN; an interval only partly skipped still prints its losses."""
    rng = random.Random(6)
    lines = []
    for k, i in enumerate(range(interval, T * interval + 1, interval)):
        if k < 4:  # loss-scale warm-up: every iteration of the interval skipped
            lines.append(megatron_line(i, T * interval, losses={}, grad=None, skipped=interval, loss_scale=2.0 ** (32 - k)))
        elif k == 30:  # a later overflow: part of the interval skipped
            lines.append(megatron_line(i, T * interval, losses={"lm loss": _loss(k, rng)}, skipped=max(1, interval // 2)))
        else:
            lines.append(megatron_line(i, T * interval, losses={"lm loss": _loss(k, rng)}, grad=_grad(k, rng)))
    v = verdict(in_layout(run_log(lines, T * interval), layout))
    assert (v.status, v.reason) == ("ok", None), v.evidence


def test_a_partly_skipped_interval_without_its_loss_is_nan():
    rng = random.Random(7)
    lines = [megatron_line(i, 400, losses={"lm loss": _loss(i, rng)} if i != 200 else {}, skipped=3 if i == 200 else 0)
             for i in range(10, 401, 10)]
    v = verdict(run_log(lines, 400))
    assert (v.status, v.reason, v.details["iteration"]) == ("failed", "nan_inf", 200)


def test_a_restart_with_fewer_loss_keys_is_no_nan():
    rng = random.Random(8)
    first = [megatron_line(i, T, losses={"lm loss": _loss(i, rng), "z_loss": 0.003}) for i in range(1, 31)]
    second = [megatron_line(i, T, losses={"lm loss": _loss(i, rng)}) for i in range(31, T + 1)]
    s = parse_lines(first + second).series
    assert health.vanished_losses(s, restarts=(31,)) == []
    assert health.vanished_losses(s)[0].iteration == 31  # without the restart it would be


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("what", ["grad", "loss", "both"])
@pytest.mark.parametrize("factor", [1e2, 1e3, 1e6])
def test_blow_up_by_orders_of_magnitude_is_diverged(layout, what, factor):
    rng = random.Random(9)
    lines = []
    for i in range(1, T + 1):
        up = factor * (1 + 0.1 * (i - 40)) if i >= 40 else 1.0
        loss = _loss(i, rng) * (min(up, 1e3) if what != "grad" and up > 1 else 1.0)
        grad = _grad(i, rng) * (up if what != "loss" else 1.0)
        lines.append(megatron_line(i, T, losses={"lm loss": loss}, grad=grad))
    v = verdict(in_layout(run_log(lines, T), layout))
    assert (v.status, v.reason) == ("failed", "diverged"), v.evidence
    assert v.details["iteration"] == 40 and v.details["factor"] >= health.LOSS_FACTOR


def test_blow_up_on_the_last_line_counts_when_both_series_leave_their_level():
    rng = random.Random(10)
    lines = [megatron_line(i, T, losses={"lm loss": _loss(i, rng) * (4 if i == T else 1)},
                           grad=_grad(i, rng) * (1e4 if i == T else 1)) for i in range(1, T + 1)]
    assert verdict(run_log(lines, T, done=False)).reason == "diverged"
    alone = [megatron_line(i, T, grad=_grad(i, rng) * (1e4 if i == T else 1)) for i in range(1, T + 1)]
    assert verdict(run_log(alone, T)).reason is None  # one spike on the last line, loss steady: not evidence


def test_a_spike_that_comes_back_is_not_divergence():
    rng = random.Random(11)
    lines = [megatron_line(i, T, losses={"lm loss": _loss(i, rng) * (3 if i == 30 else 1)},
                           grad=_grad(i, rng) * (500 if i == 30 else 1)) for i in range(1, T + 1)]
    assert verdict(run_log(lines, T)).status == "ok"


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10**6), n=st.sampled_from([12, 40, 150]), spikes=st.floats(0.0, 0.08),
       spike_grad=st.floats(2.0, 40.0), spike_loss=st.floats(1.1, 3.0), warm=st.floats(1.0, 80.0))
def test_healthy_noisy_curves_stay_ok(seed, n, spikes, spike_grad, spike_loss, warm):
    """Decreasing loss with noise and occasional spikes, grad norm high at the start and spiky: never diverged."""
    rng = random.Random(seed)
    lines = []
    for i in range(1, n + 1):
        loss = 10 * math.exp(-i / rng.uniform(5, 100)) + rng.uniform(1.5, 3.0)
        grad = rng.uniform(0.3, 1.5) * (warm if i < 4 else 1.0)
        if rng.random() < spikes:
            loss, grad = loss * spike_loss, grad * spike_grad
        lines.append(megatron_line(i, n, losses={"lm loss": loss, "load_balancing_loss": 1.0 + rng.random() / 20},
                                   grad=grad))
    v = verdict(run_log(lines, n))
    assert v.status == "ok", v.evidence


# -- rewordings and reorderings keep the finding ----------------------------------------------------------------
_KEYS = st.sampled_from(["lm loss", "load_balancing_loss", "mtp_1 loss", "z_loss", "seq_load_balancing_loss"])


@settings(max_examples=60, deadline=None)
@given(layout=st.sampled_from(sorted(LAYOUTS)), key=_KEYS, at=st.integers(6, 35), seed=st.integers(0, 999),
       order=st.permutations(["lm loss", "load_balancing_loss", "mtp_1 loss", "z_loss", "seq_load_balancing_loss"]),
       noise=st.lists(st.sampled_from([
           "INFO:megatron.core.optimizer:learning rate warmup done", "[rank3]: > saving checkpoint at iteration 5",
           "[W1130 08:00:03.101 ProcessGroupNCCL.cpp:1000] Warning: something benign", "0: building GPT model ..."]),
           max_size=6))
def test_vanished_key_found_whatever_the_key_order_layout_and_noise(layout, key, at, seed, order, noise):
    rng = random.Random(seed)
    lines = []
    for i in range(1, 41):
        losses = {k: (_loss(i, rng) if k == "lm loss" else 0.5 + rng.random()) for k in order}
        if i >= at:
            losses[key] = math.nan
        lines.append(megatron_line(i, 40, losses=losses, grad=_grad(i, rng)))
        if noise and i % 7 == 0:
            lines.append(noise[i % len(noise)])
    v = verdict(in_layout(run_log(lines, 40, done=False), layout))
    assert (v.reason, v.details.get("iteration")) == ("nan_inf", at), v.evidence


@settings(max_examples=40, deadline=None)
@given(layout=st.sampled_from(sorted(LAYOUTS)), at=st.integers(8, 50), factor=st.floats(150.0, 1e6),
       seed=st.integers(0, 999), grad_first=st.booleans())
def test_divergence_found_wherever_it_starts(layout, at, factor, seed, grad_first):
    rng = random.Random(seed)
    lines = []
    for i in range(1, T + 1):
        up = factor if i >= at else 1.0
        grad = _grad(i, rng) * (up if grad_first or i > at else 1.0)
        loss = _loss(i, rng) * (min(up, 50.0) if not grad_first or i > at else 1.0)
        lines.append(megatron_line(i, T, losses={"lm loss": loss}, grad=grad))
    v = verdict(in_layout(run_log(lines, T, done=False), layout), scheduler=SchedulerInfo("CANCELLED by 0", None))
    assert v.reason == "diverged" and v.details["iteration"] in (at, at + 1), v.evidence


def test_health_is_linear_in_the_rows():
    """A long healthy series costs numpy passes only: no running median per row."""
    n = 200_000
    rng = np.random.default_rng(1)
    it = np.arange(1, n + 1)
    loss = 2.0 + rng.random(n)
    series = parse_lines([megatron_line(1, n)]).series
    from dataclasses import replace

    big = replace(series, iteration=it, train_iters=np.full(n, n), step_ms=np.full(n, 500.0), tflops=np.full(n, 3.0),
                  lm_loss=loss, grad_norm=1.0 + rng.random(n), skipped=np.zeros(n, np.int64),
                  nan_iterations=np.zeros(n, np.int64), global_batch_size=np.full(n, 8), nonfinite=np.zeros(n, bool),
                  extra_losses={"load_balancing_loss": np.full(n, 1.0)}, partial=None)
    import time

    t0 = time.perf_counter()
    assert health.series_findings(big) == []
    assert time.perf_counter() - t0 < 2.0
