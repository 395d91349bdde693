"""In-run health from the iteration series itself: which keys each logged line carries and how the values move.

Two findings, both without a baseline (the baseline's loss-parity and grad-norm gate in :mod:`analysis.measure.compare`
is unchanged):

- **A loss key that vanishes means a NaN/Inf/<=0 loss.** Megatron-LM's ``training_log``
  (megatron/training/training.py, core_r0.x and main) sums each loss of the non-skipped iterations of a log
  interval and prints ``' {key}: {avg:.6E} |'`` only ``if avg > 0.0`` (``>= 0.0`` in later releases): a NaN or
  Inf average fails the comparison, so the key is simply left out of the line. Its ``number of nan iterations``
  counter counts only NaN/Inf losses of *skipped* iterations (``got_nan`` is set in the ``skipped_iter`` branch),
  so a bf16 run whose loss turns NaN prints lines without ``lm loss`` while the counter stays 0. A key that an
  earlier line carried and a later line lacks is therefore a non-finite (or <= 0) loss from that line's interval
  on, unless every iteration of that interval was skipped (fp16 loss-scale warm-up: nothing was summed, the
  average is 0 and the key is left out too; the line then reports ``number of skipped iterations: N`` with N the
  interval's length). Rows read from a glued line's head (``IterationSeries.partial``) are not evidence: their
  later fields are unknown, not missing.
- **Divergence within one run.** Loss and grad norm are compared with their own running level, the median of the
  ``WINDOW`` previous finite values (at least ``MIN_HISTORY``): a grad norm at >= ``GRAD_FACTOR`` x its level or a
  loss at >= ``LOSS_FACTOR`` x its level is a blow-up. It is ``diverged`` when it persists (the median of the next
  three logged values, or of those there are, is still at >= half the factor) or, on the last line logged, when
  the other series left its level too (a loss at >= ``JOINT_LOSS_FACTOR`` x its level with the grad norm, a grad
  norm at >= ``JOINT_GRAD_FACTOR`` x with the loss). A single spike that comes back is noise. The factors are orders
  of magnitude, far beyond the spikes of healthy training (loss spikes of 1.5-3x, grad-norm spikes of 10-60x early
  in training), so a noisy decreasing loss curve never trips them. Skipped iterations (fp16 overflow: no grad norm,
  no loss summed) and glued partial rows are left out.
- **A sustained joint jump.** Loss and grad norm leaving their running levels *together* -- the loss at >=
  ``JOINT_JUMP_LOSS`` x its level and the grad norm at >= ``JOINT_JUMP_GRAD`` x its level on the same line --
  and both staying up (on at least ``JOINT_KEEP`` of the next ``JOINT_AHEAD`` logged lines, at least
  ``JOINT_MIN_AHEAD`` of them, the loss at >= ``JOINT_LOSS_STAY`` x and the grad norm at >= ``JOINT_GRAD_STAY`` x
  the level before the jump) is ``diverged`` too, well below the single-series factors. This is how large-run
  reports describe a divergence (the OPT-175B logbook and paper, Zhang et al. 2022 §2.5 "loss divergences"; PaLM,
  Chowdhery et al. 2022 §5.1 "loss spikes"; Takase et al. 2023 "Spike No More"): the loss jumps with the gradient
  norm and does not return, while a loss spike that recovers, or a grad-norm spike with the loss flat, is
  healthy. The rule needs a meaningful level: at least ``JOINT_MIN_HISTORY`` earlier logged values and an
  iteration past ``JOINT_MIN_ITERATION``, and the jump must begin there (the line before it is not up already)
  (early training and learning-rate warm-up move both series by large
  factors while healthy).

- **Trends, not only jumps.** A ramp that climbs a few percent per logged line stays within ``factor`` of its
  trailing median all along; it is compared with the series' earlier stable level too (the lowest running level of
  any earlier window), so a loss or grad norm that ramps to ``factor`` x the level it held earlier is ``diverged``
  on the same persistence rule. The step time of the run's last quarter at >= ``SLOWDOWN_FACTOR`` x its first
  quarter (after warm-up) is ``slowdown``: a complete run stays a result, ``ok_with_warning``.

Cost: O(n) numpy passes; the exact running median is computed only for the few rows that pass a cheap bound (a
value >= factor x the running minimum of everything before it, which every blow-up does).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from analysis.logs import IterationSeries

WINDOW = 20  # previous finite values whose median is the running level
MIN_HISTORY = 4  # a level needs at least this many previous finite values
GRAD_FACTOR = 100.0  # grad norm at >= 100x its running level: blown up
LOSS_FACTOR = 10.0  # loss at >= 10x its running level: blown up (cross-entropy never spikes 10x when healthy)
JOINT_LOSS_FACTOR = 2.0  # a grad-norm blow-up on the last line counts when the loss is at >= 2x its level
JOINT_GRAD_FACTOR = 10.0  # a loss blow-up on the last line counts when the grad norm is at >= 10x its level

JOINT_JUMP_LOSS = 2.0  # a sustained joint jump: loss at >= 2x its running level ...
JOINT_JUMP_GRAD = 8.0  # ... and grad norm at >= 8x its running level, on the same line
JOINT_MIN_ITERATION = 50  # before this iteration the running level is not yet meaningful (warm-up)
JOINT_MIN_HISTORY = 5  # earlier finite logged values needed for the joint rule's level
JOINT_AHEAD = 10  # logged lines looked at after a joint jump
JOINT_MIN_AHEAD = 3  # a joint jump needs at least this many lines after it to be called sustained
JOINT_KEEP = 0.8  # share of those lines on which both series stay up
JOINT_LOSS_STAY = 1.5  # "stays up": loss at >= 1.5x the level before the jump ...
JOINT_GRAD_STAY = 4.0  # ... and grad norm at >= 4x it

SLOWDOWN_FACTOR = 2.0  # the last quarter's median step time at >= 2x the first quarter's: the run slowed down
SLOWDOWN_MIN_ROWS = 5  # each quarter needs at least this many logged lines

_LM = "lm loss"


@dataclass(frozen=True)
class HealthFinding:
    """One series finding: ``reason`` ("nan_inf" or "diverged"), the first ``iteration`` it concerns (the logged
    iteration number), one ``evidence`` line per finding and its ``details`` (``key``, ``value``, ``level``,
    ``factor``; units as logged)."""

    reason: str
    iteration: int
    evidence: str
    details: dict[str, Any] = field(default_factory=dict)


def _losses(series: IterationSeries) -> dict[str, np.ndarray]:
    return {_LM: series.lm_loss, **series.extra_losses}


def _skipped_all(series: IterationSeries) -> np.ndarray:
    """Rows whose whole log interval was skipped (the skipped count covers the iterations since the previous
    logged line; on the first row any skipped count does): Megatron summed no loss there."""
    it = series.iteration
    skipped = np.asarray(series.skipped)
    gap = np.empty(it.size, np.int64)
    if it.size:
        gap[0] = 1
        gap[1:] = np.maximum(it[1:] - it[:-1], 1)
    return (skipped > 0) & ((skipped >= gap) | (np.arange(it.size) == 0))


def vanished_losses(series: IterationSeries, restarts: Sequence[int] = ()) -> list[HealthFinding]:
    """A ``nan_inf`` finding per loss key that an earlier line carried and a later, not wholly skipped, line lacks
    (see the module docstring); at most one per key, at its first such line. ``restarts``: the first iteration of
    each later log file (``ParsedLog.restart_first_iterations``): a key absent from a restarted file's very first
    line on and never back is a new configuration, not a NaN."""
    n = len(series)
    if n < 2:
        return []
    partial = series.partial if series.partial is not None else np.zeros(n, bool)
    quiet = _skipped_all(series) | partial | series.nonfinite  # a printed "nan" is read elsewhere (nonfinite)
    out = []
    for key, values in _losses(series).items():
        present = ~np.isnan(values)
        if not present.any():
            continue
        seen = np.maximum.accumulate(present)
        gone = np.flatnonzero(seen & ~present & ~quiet)
        gone = gone[gone > int(np.argmax(present))]
        if not gone.size:
            continue
        i = int(gone[0])
        it = int(series.iteration[i])
        if it in restarts and not present[i:].any():
            continue
        last = int(np.flatnonzero(present[:i])[-1])
        out.append(HealthFinding(
            "nan_inf", it,
            f"iteration {it}: '{key}' is missing from the iteration line (last logged {values[last]:.6g} at "
            f"iteration {int(series.iteration[last])}); Megatron prints a loss only when its average is > 0, so "
            "it was NaN, Inf or <= 0", {"key": key, "vanished": True, "last_value": float(values[last])}))
    return out


def _level(values: np.ndarray, i: int) -> float | None:
    """The median of the WINDOW finite values before row ``i`` (None with fewer than MIN_HISTORY)."""
    before = values[max(0, i - 4 * WINDOW):i]
    before = before[np.isfinite(before) & (before > 0)][-WINDOW:]
    return float(np.median(before)) if before.size >= MIN_HISTORY else None


def _stable_levels(values: np.ndarray) -> np.ndarray:
    """Per row, the earlier stable level: the lowest running level (median of WINDOW consecutive finite values)
    of any window that ended before the row (inf where none has). A ramp that climbs a few percent per logged line
    never stands ``factor`` x above its trailing median, but it does above the level the series held before."""
    v = values[np.isfinite(values) & (values > 0)]
    where = np.flatnonzero(np.isfinite(values) & (values > 0))
    out = np.full(values.size, np.inf)
    if v.size < WINDOW + 1:
        return out
    med = np.median(np.lib.stride_tricks.sliding_window_view(v, WINDOW), axis=1)  # med[k]: v[k:k+WINDOW]
    low = np.minimum.accumulate(med)
    # the window ending at finite value j (j >= WINDOW - 1) is usable from the next finite value on
    out[where[WINDOW:]] = low[:v.size - WINDOW]
    return out


def _blowups(values: np.ndarray, factor: float) -> list[tuple[int, float]]:
    """(row, level) of each value at >= factor x its running level, or at >= factor x the earlier stable level
    (:func:`_stable_levels`: a ramp), in order."""
    if not values.size:
        return []
    v = np.where(np.isfinite(values) & (values > 0), values, np.inf)
    floor = np.minimum.accumulate(v)  # running minimum: the level of any window before is >= it
    bound = np.empty_like(floor)
    bound[0], bound[1:] = np.inf, floor[:-1]
    candidates = np.flatnonzero(np.isfinite(values) & (values >= factor * bound))
    out = []
    stable = _stable_levels(values) if candidates.size else np.empty(0)
    for i in candidates.tolist():
        level = _level(values, i)
        if level is not None and values[i] >= factor * level:
            out.append((i, level))
        elif np.isfinite(stable[i]) and values[i] >= factor * stable[i]:
            out.append((i, float(stable[i])))
    return out


def divergence(series: IterationSeries) -> HealthFinding | None:
    """The first ``diverged`` finding of the series (module docstring), or None."""
    n = len(series)
    if n < MIN_HISTORY + 1:
        return None
    keep = ~_skipped_all(series)
    if series.partial is not None:
        keep &= ~series.partial
    rows = np.flatnonzero(keep)
    loss = np.asarray(series.lm_loss, np.float64)[rows]
    grad = np.asarray(series.grad_norm, np.float64)[rows]
    hits: list[tuple[int, str, float, float]] = []  # (row among ``rows``, key, level, factor)
    series_of = {"grad norm": (grad, GRAD_FACTOR, JOINT_GRAD_FACTOR), _LM: (loss, LOSS_FACTOR, JOINT_LOSS_FACTOR)}
    for key, (values, factor, _) in series_of.items():
        other, _, joint_factor = series_of[_LM if key == "grad norm" else "grad norm"]
        for i, level in _blowups(values, factor):
            later = values[i + 1:][np.isfinite(values[i + 1:])]
            if later.size:  # a spike that comes back is noise: most of the next (up to) 3 values stay up
                persists = bool(np.median(later[:3]) >= factor / 2 * level)
            else:  # the last value logged: diverged when the other series left its level too
                other_level = _level(other, i)
                persists = other_level is not None and bool(np.isfinite(other[i])) \
                    and bool(other[i] >= joint_factor * other_level)
            if persists:
                hits.append((i, key, level, float(values[i] / level)))
                break
    joint = _joint_jump(loss, grad, np.asarray(series.iteration)[rows])
    if joint is not None:
        hits.append(joint)
    if not hits:
        return None
    i, key, level, ratio = min(hits)
    if key == _JOINT:
        row = int(rows[i])
        it = int(series.iteration[row])
        g_level = _level(grad, i) or float("nan")
        return HealthFinding(
            "diverged", it,
            f"iteration {it}: lm loss {loss[i]:.6g} is {ratio:.3g}x its running level {level:.6g} and grad norm "
            f"{grad[i]:.6g} is {grad[i] / g_level:.3g}x its level {g_level:.6g}, together, and both stay up",
            {"key": _JOINT, "value": float(loss[i]), "level": level, "factor": ratio,
             "grad_norm": float(grad[i]), "grad_level": g_level, "grad_factor": float(grad[i] / g_level)})
    row = int(rows[i])
    it = int(series.iteration[row])
    value = float((grad if key == "grad norm" else loss)[i])
    return HealthFinding(
        "diverged", it,
        f"iteration {it}: {key} {value:.6g} is {ratio:.3g}x its running level {level:.6g} (median of the previous "
        f"{WINDOW} logged values) and does not come back", {"key": key, "value": value, "level": level,
                                                             "factor": ratio})


_JOINT = "lm loss+grad norm"


def _level_min(values: np.ndarray, i: int, need: int) -> float | None:
    """Like :func:`_level`, with at least ``need`` earlier finite values."""
    before = values[max(0, i - 4 * WINDOW):i]
    before = before[np.isfinite(before) & (before > 0)][-WINDOW:]
    return float(np.median(before)) if before.size >= need else None


def _joint_jump(loss: np.ndarray, grad: np.ndarray, iterations: np.ndarray) -> tuple[int, str, float, float] | None:
    """(row, key, loss level, loss factor) of the first sustained joint jump (module docstring), or None."""
    n = loss.size
    if n < JOINT_MIN_HISTORY + JOINT_MIN_AHEAD + 1:
        return None

    def bound(v: np.ndarray) -> np.ndarray:
        w = np.where(np.isfinite(v) & (v > 0), v, np.inf)
        b = np.empty_like(w)
        b[0], b[1:] = np.inf, np.minimum.accumulate(w)[:-1]
        return b

    with np.errstate(invalid="ignore"):
        cand = np.flatnonzero(np.isfinite(loss) & np.isfinite(grad) & (iterations > JOINT_MIN_ITERATION)
                              & (loss >= JOINT_JUMP_LOSS * bound(loss)) & (grad >= JOINT_JUMP_GRAD * bound(grad)))
    for i in cand.tolist():
        if n - i - 1 < JOINT_MIN_AHEAD:
            break
        ll, gl = _level_min(loss, i, JOINT_MIN_HISTORY), _level_min(grad, i, JOINT_MIN_HISTORY)
        if ll is None or gl is None or loss[i] < JOINT_JUMP_LOSS * ll or grad[i] < JOINT_JUMP_GRAD * gl:
            continue
        if i and loss[i - 1] >= JOINT_JUMP_LOSS * ll and grad[i - 1] >= JOINT_JUMP_GRAD * gl:
            continue  # the jump began earlier, before the level was meaningful: not its onset
        la, ga = loss[i + 1:i + 1 + JOINT_AHEAD], grad[i + 1:i + 1 + JOINT_AHEAD]
        with np.errstate(invalid="ignore"):
            up = (la >= JOINT_LOSS_STAY * ll) & (ga >= JOINT_GRAD_STAY * gl)  # NaN counts as not up
        if up.sum() >= JOINT_KEEP * la.size:
            return i, _JOINT, ll, float(loss[i] / ll)
    return None


def slowdown(series: IterationSeries) -> HealthFinding | None:
    """``slowdown`` when the step time of the run's last quarter stands at >= SLOWDOWN_FACTOR x its earlier stable
    level (the median of the first quarter after the warm-up, max(3, 10%) iterations as in analysis.measure.stats),
    both over at least SLOWDOWN_MIN_ROWS logged lines; None otherwise. A median over a quarter of the run ignores
    spikes: only a level that moved and stayed counts (a straggler node, thermal throttling, a leak that grows).
    Compared per sample where the global batch size is logged (a batch-size ramp-up is no slowdown)."""
    keep = np.isfinite(series.step_ms) & (series.step_ms > 0)
    if series.partial is not None:
        keep &= ~series.partial
    rows = np.flatnonzero(keep)
    rows = rows[max(3, int(np.ceil(0.1 * rows.size))):]
    quarter = rows.size // 4
    if quarter < SLOWDOWN_MIN_ROWS:
        return None
    ms = np.asarray(series.step_ms, np.float64)
    gbs = np.asarray(series.global_batch_size, np.float64)
    # per sample where the global batch is logged: a batch-size ramp-up (Megatron's --rampup-batch-size) makes
    # steps longer without making the run slower
    per = np.where(gbs > 0, ms / np.where(gbs > 0, gbs, 1.0), ms)
    if per[rows[-quarter:]].mean() < SLOWDOWN_FACTOR * per[rows[:quarter]].min():
        return None  # cheap bound: no slowdown possible
    e_per, l_per = float(np.median(per[rows[:quarter]])), float(np.median(per[rows[-quarter:]]))
    if l_per < SLOWDOWN_FACTOR * e_per:
        return None
    early, late = float(np.median(ms[rows[:quarter]])), float(np.median(ms[rows[-quarter:]]))
    it = int(series.iteration[rows[-quarter]])
    return HealthFinding(
        "slowdown", it,
        f"step time {late:.1f} ms over the last {quarter} logged iterations (from iteration {it}) is "
        f"{late / early:.3g}x its earlier level {early:.1f} ms", {"key": "step_ms", "value": late, "level": early,
                                                                 "factor": l_per / e_per})


def series_findings(series: IterationSeries, restarts: Sequence[int] = ()) -> list[HealthFinding]:
    """Every health finding of a series: vanished losses (``nan_inf``), divergence (``diverged``), a step time
    that climbed and stayed (``slowdown``)."""
    found = vanished_losses(series, restarts)
    div = divergence(series)
    slow = slowdown(series)
    return found + ([div] if div is not None else []) + ([slow] if slow is not None else [])
