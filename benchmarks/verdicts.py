"""Verdicts under a drifting machine: a simulator that drives the sweep's own decision code.

    .venv/bin/python benchmarks/verdicts.py [--drift PCT] [--trials N] [--aa-trials N] [--max-blocks K] [--seed S]
                                            [--plot PNG] [--against REV|DIR]

Synthetic step times (ms), per run of ``--iters`` iterations:
- the machine's speed drifts as a random walk over the runs in execution order; ``--drift PCT`` (0.5 to 18, default
  18, the spread measured on the H200) sets the step so that the expected log-range of the walk over
  7 consecutive runs is log(1 + PCT/100) (7 runs of qwen3_moe_1b spread 18% over 25 minutes);
- within-run noise: log-normal with a coefficient of variation of ``--cv`` (default 0.07, the 7.1% measured on the
  H200 baseline);
- warm-up: the first iterations are slower (x8, x1.5, x1.1: iteration 1 took 8.2 s against 0.56 s steady);
  each run's median is taken over the iterations after the analysis' own warm-up rule
  (``analysis.measure.stats.default_warmup``), which drops them all, so the median of the i.i.d. steady steps is drawn from
  its exact order-statistic distribution (:func:`run_medians`; :func:`run_medians_by_steps` draws every step, and
  tests/benchmarks checks that both give the same distribution);
- an injected true speedup s: the arm's step time is the baseline's / (1 + s).

Designs (baseline A and one arm B per trial, 1 GPU, 70 s start-up per run + the steps):
- ``sequential``: A A A A A then B B B B B, the design the interleaved blocks replace; verdict from
  ``analysis.measure.compare.speedup_from_run_medians`` + ``verdict_of`` (per-run medians, pooled t interval);
- ``fixed``: 5 interleaved blocks, each A and B in the order of ``experiments.blocks.block_order``; verdict from
  ``analysis.measure.sequential.fixed_states`` (paired t interval, TOST);
- ``adaptive`` (``repeats=auto``): blocks until ``analysis.measure.sequential.sequential_states`` decides or stops the arm
  (looks from block 2: Kim-DeMets power-family alpha spending with a binding futility boundary per look, see that
  module), at most ``--max-blocks``;
- ``nightly``: ``repeats=auto`` with the pooled statistic of ``analysis.measure.pooled`` (``pooled_states``): the same
  difference test, and equivalence judged with a prior on the run-to-run noise learnt (``learn_prior``) from
  PAST_NIGHTS simulated past A/A nights of the same series at the same drift, so equivalence can be shown from
  block 1; ``nightly_under``: the same with a prior learnt from nights that drifted UNDER_FACTOR times less than
  tonight (the prior underestimates tonight's noise).

GPU-hours (1 GPU; a run takes 70 s of start-up plus its steps): an **arm** is one A/B comparison, the arm B and its
baseline A. The GPU-hours of an arm are those of every run its comparison used, B's runs AND the baseline's runs in
the same blocks (the baseline runs in every block and counts), up to the block where the arm was decided or stopped
(5 blocks for the fixed designs; an arm that stops early saves both its runs and the baseline's runs of the blocks
it does not need, as in the sweep when it is the group's last undecided arm). **GPU-h/arm** is their mean over the
simulated arms at the four injected speedups 0, 3, 5 and 10% (equal numbers of each); **GPU-h/decided arm** is the
total over those arms divided by the number of them with a verdict (faster, slower or equivalent);
**GPU-s/decided** is the same in GPU-seconds (fixed cost included: each run's start-up counts).

Arms per cell: ``--trials`` (20,000) per true speedup above 0; the A/A cells of the fixed and adaptive designs have
``--aa-trials`` (1,000,000: Monte Carlo standard error ~0.02 points, so that "<= 5%" can be read off the printed
rate; the block orders of the first 10,000 trials are reused cyclically), the sequential design's 3 x ``--trials``.

Printed: the A/A false-positive rate (faster or slower at s = 0; its Monte Carlo standard error in brackets) of every
design at every drift scale, with the adaptive design's power at 5%, the fixed design's, the adaptive GPU-hours
against the fixed ones and which of the adaptive design's goals holds there (A/A <= 5%, power within 5 points,
GPU-hours <= 0.60);
then, at ``--drift``, per design: A/A false positives, detection rate (verdict faster) at 3%, 5% and 10%, A/A arms
shown equivalent, the share decided and GPU-hours per arm and per decided arm, and the adaptive design's GPU-hours
against the fixed ones at each speedup. Last line: ``A/A false positive X%; power 5%: Y% (fixed: Z%); GPU-hours vs
fixed: R``, for the adaptive design at ``--drift``, where Z is the power of the 5 fixed interleaved blocks and R the
adaptive design's GPU-h/arm over theirs; the line before it gives X's Monte Carlo standard error. Then the
nightly design against today's ``repeats=auto`` by drift scale (A/A false positives with a right prior and with
one too low, power at 5%, GPU-seconds per decided verdict), and the very last line: ``GPU-seconds per decided
verdict: nightly N s vs today's repeats=auto T s (R x; power 5% P% vs Q%); nightly A/A false positives by drift
...; prior too low: ...``. About 5 minutes on 2 cores.

The simulation runs as a whole process of each tree (benchmarks/harness.py ``in_trees``: this script with
``--in-tree``, importing that tree's decision code); each tree's output is printed, then the wall and CPU time of
each and this tree's over the baseline's, measured in the same run. ``--plot`` is written by this tree's process.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from functools import lru_cache
from pathlib import Path

import numpy as np

if __package__:
    from benchmarks import harness
else:  # python benchmarks/verdicts.py: this folder is sys.path[0]
    import harness

harness.use_tree()  # the decision code of the tree this process runs for (this checkout, or --against's)

try:
    from analysis.measure.compare import speedup_from_run_medians, verdict_of
    from analysis.measure.sequential import EQUIVALENT, FASTER, SLOWER, fixed_states, sequential_states
    from analysis.measure.stats import default_warmup
except ImportError:  # a tree from before analysis/ stood in rooms
    from analysis.compare import speedup_from_run_medians, verdict_of
    from analysis.sequential import EQUIVALENT, FASTER, SLOWER, fixed_states, sequential_states
    from analysis.stats import default_warmup
try:
    from analysis.measure.pooled import learn_prior, pooled_states
except ImportError:  # a tree from before the pooled statistic: its designs are left out
    learn_prior = pooled_states = None
from experiments.blocks import block_order  # noqa: E402

EFFECTS = (0.0, 0.03, 0.05, 0.10)
DRIFTS = (0.5, 2.0, 5.0, 10.0, 18.0)
STEP_MS = 1000.0
STARTUP_S = 70.0
WARMUP_FACTORS = (8.0, 1.5, 1.1)


def walk_step(drift_pct: float, rng: np.random.Generator) -> float:
    """Random-walk step (log units) whose expected range over 7 consecutive runs is log(1 + drift_pct/100)."""
    z = np.concatenate([np.zeros((20000, 1)), rng.standard_normal((20000, 6)).cumsum(axis=1)], axis=1)
    return math.log1p(drift_pct / 100) / float((z.max(axis=1) - z.min(axis=1)).mean())


def _median_noise(shape: tuple[int, ...], n: int, cv: float, rng: np.random.Generator) -> np.ndarray:
    """log(median of ``n`` i.i.d. log-normal steps of mean 1 and coefficient of variation ``cv``), drawn exactly
    from the order statistics: the m-th smallest of n uniforms is Beta(m, n - m + 1), and for an even n the next
    one is U_(m) + (1 - U_(m)) Beta(1, n - m) (David & Nagaraja 2003, Order Statistics, 3rd ed., ch. 2); np.median
    averages the two middle steps of an even count."""
    from scipy import stats as sps

    s = math.sqrt(math.log1p(cv**2))
    m = (n + 1) // 2
    u = rng.beta(m, n - m + 1, shape)
    low = -s * s / 2 + s * sps.norm.ppf(u)
    if n % 2:
        return low
    high = -s * s / 2 + s * sps.norm.ppf(u + (1 - u) * rng.beta(1, n - m, shape))
    return np.logaddexp(low, high) - math.log(2)


def run_medians(factors: np.ndarray, iters: int, cv: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Median steady step (ms) and expected GPU-hours of runs whose step time is STEP_MS x ``factors`` (any shape).

    The steady iterations (after ``analysis.measure.stats.default_warmup``, which drops every slow warm-up iteration) are
    i.i.d. log-normal, so their median is drawn from its exact distribution (:func:`_median_noise`) instead of
    drawing every step: the same model as :func:`run_medians_by_steps`, ~30x cheaper (tests/benchmarks compare the
    two). GPU-hours: (STARTUP_S + the expected sum of the steps) / 3600 per run; GPU-h/arm is a mean, which the
    expectation given the machine's speed leaves unbiased. Raises ValueError when the warm-up rule would keep a
    warm-up iteration (then the steady steps are not i.i.d.)."""
    warm = default_warmup(iters)
    if warm < len(WARMUP_FACTORS) or iters <= warm:
        raise ValueError(f"iters={iters}: the warm-up rule drops {warm} iterations, the model needs >= "
                         f"{len(WARMUP_FACTORS)} dropped and >= 1 kept")
    med = STEP_MS * factors * np.exp(_median_noise(factors.shape, iters - warm, cv, rng))
    steps_ms = STEP_MS * factors * (sum(WARMUP_FACTORS) + iters - len(WARMUP_FACTORS))
    return med, (STARTUP_S + steps_ms / 1000) / 3600


def run_medians_by_steps(factors: np.ndarray, iters: int, cv: float,
                         rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """:func:`run_medians` the long way: every step drawn (ms), the median over the iterations after the analysis'
    own warm-up rule, GPU-hours from the drawn steps."""
    sigma = math.sqrt(math.log1p(cv**2))
    steps = STEP_MS * factors[..., None] * rng.lognormal(-sigma**2 / 2, sigma, (*factors.shape, iters))
    warm = np.ones(iters)
    warm[: len(WARMUP_FACTORS)] = WARMUP_FACTORS
    steps = steps * warm
    med = np.median(steps[..., default_warmup(iters):], axis=-1)
    return med, (STARTUP_S + steps.sum(axis=-1) / 1000) / 3600


ORDER_POOL = 10_000  # block orders drawn per cell; a larger cell reuses them cyclically
CHUNK = 200_000  # simulated arms per step (memory)


@lru_cache(maxsize=256)
def _orders(design: str, n: int, blocks: int, seed: int) -> np.ndarray:
    """(n, 2 x blocks) True where the run is B's: the sweep's own block orders, one seed per trial."""
    is_b = np.zeros((n, 2 * blocks), dtype=bool)
    if design == "sequential":
        is_b[:, blocks:] = True
        return is_b
    for t in range(n):
        for b in range(blocks):
            is_b[t, 2 * b + block_order(["A", "B"], seed + t, b).index("B")] = True
    return is_b


PAST_NIGHTS = 5  # past nights a nightly prior is learnt from
PAST_BLOCKS = 3  # blocks of each past night (an A/A of the series: df 2 each)
PRIOR_POOL = 200  # priors learnt per drift scale; the trials use them cyclically
UNDER_FACTOR = 4.0  # "--underestimate": the past nights drifted this many times less than tonight


def block_log_ratios(effect: float, drift_pct: float, n: int, blocks: int, iters: int, cv: float,
                     rng: np.random.Generator, is_b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(block log-ratios (n, blocks), GPU-hours per run (n, 2 blocks)) of ``n`` simulated A/B arms, A the baseline
    and B the arm ``effect`` faster, their runs in the orders ``is_b`` on a machine drifting by ``drift_pct``."""
    step = walk_step(drift_pct, rng)
    walk = rng.normal(0, step, (n, 2 * blocks - 1)).cumsum(axis=1)
    machine = np.exp(np.concatenate([np.zeros((n, 1)), walk], axis=1))
    med, hours = run_medians(machine / np.where(is_b, 1 + effect, 1.0), iters, cv, rng)
    a = np.where(is_b, np.nan, med).reshape(n, blocks, 2)
    b = np.where(is_b, med, np.nan).reshape(n, blocks, 2)
    return np.log(np.nanmax(a, axis=2) / np.nanmax(b, axis=2)), hours


@lru_cache(maxsize=32)
def priors(drift_pct: float, iters: int, cv: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(d0, s0^2) of PRIOR_POOL nightly priors (analysis.measure.pooled.learn_prior), each learnt from PAST_NIGHTS simulated
    A/A nights of PAST_BLOCKS interleaved blocks at ``drift_pct``: the variance of each night's block log-ratios
    with PAST_BLOCKS - 1 degrees of freedom."""
    rng = np.random.default_rng(seed)
    n = PRIOR_POOL * PAST_NIGHTS
    is_b = _orders("fixed", min(n, ORDER_POOL), PAST_BLOCKS, seed)[np.arange(n) % min(n, ORDER_POOL)]
    d, _ = block_log_ratios(0.0, drift_pct, n, PAST_BLOCKS, iters, cv, rng, is_b)
    var = d.var(axis=1, ddof=1).reshape(PRIOR_POOL, PAST_NIGHTS)
    got = [learn_prior([(v, PAST_BLOCKS - 1) for v in row]) for row in var]
    return np.array([p.df for p in got]), np.array([p.var for p in got])


@lru_cache(maxsize=32)
def within_floor(iters: int, cv: float) -> float:
    """The within-run variance of a block log-ratio: twice the variance of one run's log median (the model's exact
    order-statistic distribution, 200,000 draws), the floor the pooled statistic uses."""
    warm = default_warmup(iters)
    return 2 * float(np.var(_median_noise((200_000,), iters - warm, cv, np.random.default_rng(1))))


def simulate(design: str, effect: float, drift_pct: float, trials: int, blocks: int, iters: int, cv: float,
             seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(state per trial, GPU-hours per trial) of one design at one true speedup, in chunks of CHUNK trials.
    ``nightly``: the pooled statistic with a prior learnt from past nights at the same drift; ``nightly_under``:
    a prior learnt from nights that drifted UNDER_FACTOR times less (it underestimates tonight's noise)."""
    rng = np.random.default_rng(seed)
    if design.startswith("nightly"):
        return _simulate_nightly(design, effect, drift_pct, trials, blocks, iters, cv, seed, rng)
    step = walk_step(drift_pct, rng)
    orders = _orders(design if design == "sequential" else "fixed", min(trials, ORDER_POOL), blocks, seed)
    states, hours = [], []
    for start in range(0, trials, CHUNK):
        n = min(CHUNK, trials - start)
        is_b = orders[np.arange(start, start + n) % len(orders)]
        walk = rng.normal(0, step, (n, 2 * blocks - 1)).cumsum(axis=1)
        machine = np.exp(np.concatenate([np.zeros((n, 1)), walk], axis=1))
        s, h = _decide(design, is_b, *run_medians(machine / np.where(is_b, 1 + effect, 1.0), iters, cv, rng),
                       blocks)
        states.append(s)
        hours.append(h)
    return np.concatenate(states), np.concatenate(hours)


def _simulate_nightly(design: str, effect: float, drift_pct: float, trials: int, blocks: int, iters: int, cv: float,
                      seed: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """:func:`simulate` for the pooled statistic with a nightly prior (analysis.measure.pooled.pooled_states)."""
    past = drift_pct / (UNDER_FACTOR if design == "nightly_under" else 1.0)
    d0, s0 = priors(past, iters, cv, seed % 1000 + 7)
    orders = _orders("fixed", min(trials, ORDER_POOL), blocks, seed)
    states, hours = [], []
    for start in range(0, trials, CHUNK):
        n = min(CHUNK, trials - start)
        is_b = orders[np.arange(start, start + n) % len(orders)]
        d, h = block_log_ratios(effect, drift_pct, n, blocks, iters, cv, rng, is_b)
        pick = np.arange(start, start + n) % PRIOR_POOL
        s, look, _ = pooled_states(d, blocks, prior=(d0[pick], s0[pick]), within=within_floor(iters, cv))
        used = np.where(look > 0, look, blocks)
        states.append(s)
        hours.append(h.cumsum(axis=1)[np.arange(n), 2 * used - 1])
    return np.concatenate(states), np.concatenate(hours)


def _decide(design: str, is_b: np.ndarray, med: np.ndarray, hours: np.ndarray,
            blocks: int) -> tuple[np.ndarray, np.ndarray]:
    n = len(med)
    if design == "sequential":
        a, b = med[~is_b].reshape(n, blocks), med[is_b].reshape(n, blocks)
        names = {"faster": FASTER, "slower": SLOWER, "no_significant_difference": 0}
        state = np.array([names[verdict_of(speedup_from_run_medians(a[t], b[t]))] for t in range(n)])
        return state, hours.sum(axis=1)
    a = np.where(is_b, np.nan, med).reshape(n, blocks, 2)
    b = np.where(is_b, med, np.nan).reshape(n, blocks, 2)
    log_ratio = np.log(np.nanmax(a, axis=2) / np.nanmax(b, axis=2))
    if design == "fixed":
        return fixed_states(log_ratio), hours.sum(axis=1)
    state, look = sequential_states(log_ratio, blocks)
    used = np.where(look > 0, look, blocks)
    return state, hours.cumsum(axis=1)[np.arange(n), 2 * used - 1]


AA_FACTOR = 3  # the sequential design's A/A cell: 3x the trials (its rate is far above 5%)
AA_TRIALS = 1_000_000  # A/A arms of the fixed and adaptive designs per drift scale: MC standard error ~0.02 points


def table(drift_pct: float, trials: int, max_blocks: int, iters: int, cv: float, seed: int,
          full: bool = True, aa_trials: int = AA_TRIALS) -> dict[str, dict]:
    """Every design at every injected effect: FP / power / decided share / GPU-hours (see the module docstring).
    The A/A cell has ``aa_trials`` arms (the sequential design: AA_FACTOR x ``trials``); GPU-h/arm weighs the four
    effects equally. ``full=False``: the sequential design at s = 0 only (its power is mostly false positives)."""
    out = {}
    for design, blocks in (("sequential", 5), ("fixed", 5), ("adaptive", max_blocks), ("nightly", max_blocks),
                           ("nightly_under", max_blocks)):
        row: dict = {"decided": 0.0, "hours_by_effect": []}
        for i, effect in enumerate(EFFECTS if design != "sequential" or full else EFFECTS[:1]):
            n = trials if effect else (AA_FACTOR * trials if design == "sequential" else aa_trials)
            state, hours = simulate(design, effect, drift_pct, n, blocks, iters, cv, seed + 1000 * i)
            row["fp" if effect == 0 else f"p{round(effect * 100)}"] = (
                float(np.isin(state, (FASTER, SLOWER)).mean()) if effect == 0 else float((state == FASTER).mean()))
            row["hours_by_effect"].append(float(hours.mean()))
            row["decided"] += float(np.isin(state, (FASTER, SLOWER, EQUIVALENT)).mean())
            if effect == 0:
                row["aa_equivalent"] = float((state == EQUIVALENT).mean())
                row["fp_se"] = math.sqrt(row["fp"] * (1 - row["fp"]) / n)
                row["aa_n"] = n
        row["hours_per_arm"] = float(np.mean(row["hours_by_effect"]))
        row["decided_share"] = row["decided"] / len(EFFECTS)
        row["hours_per_decided"] = row["hours_per_arm"] / max(row["decided_share"], 1e-9)
        row["gpu_s_per_decided"] = 3600 * row["hours_per_decided"]
        out[design] = row
    return out


def goals(adaptive: dict, fixed: dict) -> dict[str, bool]:
    """The adaptive design's goals at one drift scale: A/A false positives <= 5%, power at 5% within 5 points of the
    5 fixed blocks, GPU-hours <= 0.60 of theirs."""
    return {"A/A<=5%": adaptive["fp"] <= 0.05, "power": adaptive["p5"] >= fixed["p5"] - 0.05,
            "GPU<=0.60": adaptive["hours_per_arm"] / fixed["hours_per_arm"] <= 0.60}


def plot(path: Path, by_drift: dict[float, dict], res: dict[str, dict]) -> None:
    """The README figure: left, the A/A false-positive rate against the drift scale per design; middle, the power at
    a 5% speedup of 5 fixed blocks and of the adaptive design against the drift scale, with the adaptive design's
    GPU-hours against the fixed ones; right, at the default drift, the detection rate per true speedup of both, with
    their GPU-hours per arm."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    labels = {"sequential": "AAAAA then BBBBB (before)", "fixed": "5 interleaved blocks",
              "adaptive": "adaptive (repeats=auto)"}
    fig = Figure(figsize=(15, 3.9))
    FigureCanvasAgg(fig)
    ax, cx, bx = fig.subplots(1, 3)
    drifts = list(by_drift)

    def drift_axis(axis, key: str, designs: tuple[tuple[str, str], ...], ylabel: str, title: str) -> None:
        for name, style in designs:
            axis.plot(drifts, [100 * r[name][key] for r in by_drift.values()], style, label=labels[name])
        axis.set_xscale("log")
        axis.set_xlabel("machine drift, % spread over 7 runs (random walk)")
        axis.set_ylabel(ylabel)
        axis.set_title(title, fontsize=10)
        axis.legend(fontsize=8)
        axis.grid(alpha=0.3)

    drift_axis(ax, "fp", (("sequential", "o-"), ("fixed", "s-"), ("adaptive", "^-")), "A/A false positives, %",
               "Same variant twice: called faster or slower")
    ax.axhline(5, color="grey", ls="--", lw=1)
    drift_axis(cx, "p5", (("fixed", "s-"), ("adaptive", "^-")), "5% speedup called faster, %",
               "Power at 5% (labels: adaptive GPU-hours / fixed)")
    for d, r in by_drift.items():
        cx.annotate(f"{r['adaptive']['hours_per_arm'] / r['fixed']['hours_per_arm']:.2f}",
                    (d, 100 * r["adaptive"]["p5"]), textcoords="offset points", xytext=(0, -13), ha="center",
                    fontsize=8)
    width = 0.38
    for j, name in enumerate(("fixed", "adaptive")):
        r = res[name]
        xs = np.arange(3) + (j - 0.5) * width
        bx.bar(xs, [100 * r[f"p{e}"] for e in (3, 5, 10)], width,
               label=f"{labels[name]}: {r['hours_per_arm']:.3f} GPU-h/arm")
    bx.set_xticks(np.arange(3), ["3%", "5%", "10%"])
    bx.set_xlabel("true speedup of the arm (default drift)")
    bx.set_ylabel("called faster, %")
    bx.set_title("Detection rate and GPU-hours", fontsize=10)
    bx.legend(fontsize=8)
    bx.grid(alpha=0.3, axis="y")
    fig.savefig(path, dpi=90, bbox_inches="tight")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--drift", type=float, default=18.0, help="drift scale in %% (0.5 to 18; default 18)")
    ap.add_argument("--trials", type=int, default=20000, help="simulated arms per design and true speedup > 0")
    ap.add_argument("--aa-trials", type=int, default=AA_TRIALS,
                    help="A/A arms of the fixed and adaptive designs per drift scale (the sequential one: 3x --trials)")
    ap.add_argument("--max-blocks", type=int, default=6, help="max_blocks of the adaptive design")
    ap.add_argument("--iters", type=int, default=30, help="iterations per run")
    ap.add_argument("--cv", type=float, default=0.07, help="within-run coefficient of variation")
    ap.add_argument("--seed", type=int, default=15)
    ap.add_argument("--plot", type=Path, help="write the figure of the README here (PNG)")
    harness.add_against(ap)
    ap.add_argument(harness.IN_TREE, action="store_true", help=argparse.SUPPRESS)
    argv = sys.argv[1:] if argv is None else argv
    a = ap.parse_args(argv)
    if not 0 < a.drift <= 100 or a.trials < 100 or a.aa_trials < 100 or a.max_blocks < 3:
        ap.error(f"--drift {a.drift} must be in (0, 100], --trials {a.trials} and --aa-trials {a.aa_trials} >= 100, "
                 f"--max-blocks {a.max_blocks} >= 3")
    if not a.in_tree:  # each tree's process; this tree's writes the plot
        own = harness.without(harness.without(argv, "--against"), "--plot")
        plot_args = ["--plot", str(a.plot.resolve())] if a.plot else []
        return harness.in_trees(__file__, lambda side: own + (plot_args if side.root == harness.REPO else []),
                                a.against)
    t0 = time.perf_counter()
    by_drift = {d: table(d, a.trials, a.max_blocks, a.iters, a.cv, a.seed + 7, False, a.aa_trials) for d in DRIFTS}
    print(f"By drift scale: A/A false positives (the same variant twice; goal <= 5%; {a.aa_trials} arms for the fixed "
          f"and adaptive designs, {AA_FACTOR * a.trials} for the sequential one; Monte Carlo standard error in "
          f"brackets), and the adaptive design against 5 fixed blocks ({a.trials} arms per true speedup):")
    print(f"{'drift %':>7} {'sequential A-B':>15} {'5 fixed blocks':>15} {'adaptive A/A':>15} "
          f"{'power 5% adaptive / fixed':>25} {'GPU-h vs fixed':>14}  goals met (A/A<=5%, power within 5, GPU<=0.60)")
    for d, r in by_drift.items():
        sq, fx, ad = r["sequential"], r["fixed"], r["adaptive"]
        met = goals(ad, fx)
        print(f"{d:>7.1f} {_pct(sq, 1):>15} {_pct(fx):>15} {_pct(ad):>15} {100 * ad['p5']:>15.1f}% / "
              f"{100 * fx['p5']:.1f}% {ad['hours_per_arm'] / fx['hours_per_arm']:>14.2f}  "
              + ", ".join(f"{k} {'yes' if v else 'NO'}" for k, v in met.items()))
    print(f"\nThe pooled statistic with a nightly prior (analysis.measure.pooled; prior from {PAST_NIGHTS} past nights of "
          f"{PAST_BLOCKS} blocks) against today's repeats=auto, by drift scale; 'prior too low': learnt from nights "
          f"that drifted {UNDER_FACTOR:g}x less than tonight:")
    print(f"{'drift %':>7} {'nightly A/A':>15} {'prior too low':>15} {'power 5% nightly / today':>25} "
          f"{'GPU-s/decided nightly / today':>30}")
    for d, r in by_drift.items():
        ad, nt, nu = r["adaptive"], r["nightly"], r["nightly_under"]
        print(f"{d:>7.1f} {_pct(nt):>15} {_pct(nu):>15} {100 * nt['p5']:>16.1f}% / {100 * ad['p5']:.1f}% "
              f"{nt['gpu_s_per_decided']:>19.0f} / {ad['gpu_s_per_decided']:.0f} s")
    res = table(a.drift, a.trials, a.max_blocks, a.iters, a.cv, a.seed, True, a.aa_trials)
    print(f"\ndrift {a.drift}%, within-run CV {a.cv:.1%}, {a.iters} iterations per run, {a.trials} arms per true "
          f"speedup (A/A: {a.aa_trials}; sequential {AA_FACTOR * a.trials}), adaptive max_blocks={a.max_blocks}; an "
          "arm's GPU-hours include its baseline's runs:")
    print(f"{'design':>13} {'A/A FP (MC SE)':>15} {'power 3%':>9} {'5%':>6} {'10%':>6} {'A/A equiv.':>10} "
          f"{'decided':>8} {'GPU-h/arm':>10} {'GPU-h/decided arm':>18} {'GPU-s/decided':>14}")
    for name, r in res.items():
        print(f"{name:>13} {_pct(r):>15} {100 * r['p3']:>8.1f}% {100 * r['p5']:>5.1f}% {100 * r['p10']:>5.1f}% "
              f"{100 * r['aa_equivalent']:>9.1f}% {100 * r['decided_share']:>7.1f}% {r['hours_per_arm']:>10.3f} "
              f"{r['hours_per_decided']:>18.3f} {r['gpu_s_per_decided']:>14.0f}")
    ad, fx = res["adaptive"], res["fixed"]
    ratios = zip(EFFECTS, ad["hours_by_effect"], fx["hours_by_effect"], strict=True)
    print("adaptive GPU-hours vs fixed by true speedup: " + ", ".join(f"{round(100 * e)}%: {h / g:.2f}"
                                                                       for e, h, g in ratios))
    if a.plot:
        plot(a.plot, by_drift, res)
        print(f"figure: {a.plot}")
    print(f"({time.perf_counter() - t0:.0f} s); adaptive A/A false positives {100 * ad['fp']:.2f}% with a Monte Carlo "
          f"standard error of {100 * ad['fp_se']:.2f} points ({ad['aa_n']} A/A arms)")
    print(f"A/A false positive {100 * ad['fp']:.2f}%; power 5%: {100 * ad['p5']:.1f}% (fixed: {100 * fx['p5']:.1f}%); "
          f"GPU-hours vs fixed: {ad['hours_per_arm'] / fx['hours_per_arm']:.2f}")
    nt = res["nightly"]
    print(f"GPU-seconds per decided verdict: nightly {nt['gpu_s_per_decided']:.0f} s vs today's repeats=auto "
          f"{ad['gpu_s_per_decided']:.0f} s ({nt['gpu_s_per_decided'] / ad['gpu_s_per_decided']:.2f}x; power 5% "
          f"{100 * nt['p5']:.1f}% vs {100 * ad['p5']:.1f}%); nightly A/A false positives by drift "
          + ", ".join(f"{d:g}%: {100 * r['nightly']['fp']:.2f}%" for d, r in by_drift.items())
          + "; prior too low: " + ", ".join(f"{d:g}%: {100 * r['nightly_under']['fp']:.2f}%"
                                            for d, r in by_drift.items()))
    return 0


def _pct(row: dict, digits: int = 2) -> str:
    return f"{100 * row['fp']:.{digits}f}% ({100 * row['fp_se']:.{digits}f})"


if __name__ == "__main__":
    raise SystemExit(main())
