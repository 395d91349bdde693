"""Divergence from a sustained joint jump (analysis/judge/health.py): loss and grad norm leaving their own running level
together and staying up is ``diverged``; loss spikes that recover, early training, grad-norm spikes with the loss
flat and learning-rate warm-up shapes stay ``ok``. Real-format Megatron lines (tests/analysis/megatron_format.py) in
every layout, fixtures in tests/analysis/fixtures/health."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis.judge.classify import classify
from analysis.logs.parse import parse_files, parse_lines
from tests.analysis.megatron_format import LAYOUTS, in_layout, megatron_line, run_log
from tests.analysis.synth import FIXTURES

N = 300


def curve(n: int, seed: int, *, jump_at: int | None = None, loss_x: float = 2.6, grad_x: float = 10.0,
          lasts: int | None = None, log_interval: int = 1) -> list[str]:
    """A healthy noisy curve; from ``jump_at`` on (for ``lasts`` logged lines, or to the end) both series jump."""
    rng = random.Random(seed)
    lines, k = [], 0
    for i in range(log_interval, n + 1, log_interval):
        loss = 6 * math.exp(-i / 40) + 2.3 + rng.uniform(-0.04, 0.04)
        grad = (8.0 if i < 5 else 1.0) * 0.3 * rng.uniform(0.8, 1.2)
        if jump_at is not None and i >= jump_at and (lasts is None or k < lasts):
            loss, grad, k = loss * loss_x * rng.uniform(0.95, 1.05), grad * grad_x * rng.uniform(0.9, 1.1), k + 1
        lines.append(megatron_line(i, n, losses={"lm loss": loss, "load_balancing_loss": 1.0}, grad=grad))
    return lines


def verdict(lines):
    return classify(parse_lines(lines))


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("log_interval,jump_at", [(1, 120), (10, 150), (5, 250)])
def test_a_sustained_joint_jump_is_diverged(layout, log_interval, jump_at):
    v = verdict(in_layout(run_log(curve(N, 3, jump_at=jump_at, log_interval=log_interval), N), layout))
    assert (v.status, v.reason) == ("failed", "diverged"), v.evidence
    assert v.details["iteration"] == jump_at and v.details["key"] == "lm loss+grad norm"
    assert v.details["grad_factor"] >= 8 and v.details["factor"] >= 2


@pytest.mark.parametrize("name,iteration", [("diverged_joint_jump_srun.log", 150),
                                            ("diverged_joint_jump_torchrun.log", 160)])
def test_joint_jump_fixtures(name, iteration):
    v = classify(parse_files([FIXTURES / "health" / name]))
    assert (v.status, v.reason, v.details["iteration"]) == ("failed", "diverged", iteration), v.evidence


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("lasts", [1, 2, 3])
def test_a_joint_spike_that_recovers_is_ok(layout, lasts):
    v = verdict(in_layout(run_log(curve(N, 5, jump_at=150, lasts=lasts), N), layout))
    assert v.status == "ok", v.evidence


@pytest.mark.parametrize("jump_at", [10, 25, 45])
def test_early_training_has_no_meaningful_level_yet(jump_at):
    v = verdict(run_log(curve(N, 7, jump_at=jump_at, lasts=40), N))
    assert v.status == "ok", v.evidence


@pytest.mark.parametrize("grad_x", [10.0, 30.0, 60.0])
def test_grad_norm_up_alone_with_the_loss_flat_is_ok(grad_x):
    v = verdict(run_log(curve(N, 9, jump_at=150, loss_x=1.05, grad_x=grad_x), N))
    assert v.status == "ok", v.evidence


@pytest.mark.parametrize("loss_x", [1.3, 1.8])
def test_loss_up_alone_below_the_joint_factor_is_ok(loss_x):
    assert verdict(run_log(curve(N, 11, jump_at=150, loss_x=loss_x, grad_x=3.0), N)).status == "ok"


@pytest.mark.parametrize("warmup", [60, 100, 200])
def test_learning_rate_warm_up_shapes_stay_ok(warmup):
    """Warm-up: the LR rises linearly, the grad norm rises with it (here 15x), the loss falls and bumps 1.4x at the
    end of warm-up before it settles."""
    rng = random.Random(warmup)
    lines = []
    for i in range(1, N + 1):
        frac = min(1.0, i / warmup)
        loss = 8 * math.exp(-i / 30) + 2.4 + (1.4 - 1) * 2.4 * math.exp(-((i - warmup) / 15) ** 2)
        grad = 0.2 * (1 + 14 * frac) * rng.uniform(0.85, 1.15)
        lines.append(megatron_line(i, N, losses={"lm loss": loss * rng.uniform(0.98, 1.02)}, grad=grad,
                                   lr=3e-4 * frac))
    assert verdict(run_log(lines, N)).status == "ok"


@settings(max_examples=80, deadline=None)
@given(seed=st.integers(0, 10**6), n=st.sampled_from([60, 150, 400]), p=st.floats(0.0, 0.1),
       loss_x=st.floats(2.0, 3.5), grad_x=st.floats(8.0, 40.0), burst=st.integers(1, 2))
def test_healthy_curves_with_joint_spikes_that_recover_stay_ok(seed, n, p, loss_x, grad_x, burst):
    """Joint spikes of both series, one or two lines long, scattered at random: never a sustained jump."""
    rng = random.Random(seed)
    lines, left = [], 0
    for i in range(1, n + 1):
        loss = 10 * math.exp(-i / rng.uniform(5, 100)) + rng.uniform(1.5, 3.0)
        grad = rng.uniform(0.3, 1.5)
        if left == 0 and rng.random() < p:
            left = burst
        if left:
            loss, grad, left = loss * loss_x, grad * grad_x, left - 1
        lines.append(megatron_line(i, n, losses={"lm loss": loss}, grad=grad))
    v = verdict(run_log(lines, n))
    assert v.status == "ok", v.evidence
