"""Which part of the step moved: tonight's step-time breakdown against the profiled nights before it.

A night ran with ``profile=true`` gives one breakdown per profiled run (``analysis/measure/profile_breakdown.py``: expert
GEMM, dense GEMM, attention, other compute, exposed communication, idle, in ms per profiled step; they sum to the
step). Tonight's breakdown (median per part over its profiled runs) is compared with the median per part of the
profiled nights among the step-time judgement's baseline nights; when none of those was profiled, with the latest
profiled night before tonight (the note names it).

A part *moved* when ``|tonight - baseline| >= threshold / 2 x the baseline step`` (ms): on its own it accounts for
at least half of the smallest step-time change that counts (``history.threshold``, 5% by default). Parts are
listed largest move first. The rule is this tool's own: the profile is one run of a few steps, so there is no
per-part spread to test against; the step-time verdict stays the judge of whether the night regressed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from statistics import median

from analysis.history.records import HistoryConfig, MetricJudgement, PartChange


@dataclass(frozen=True)
class Profiled:
    """One night's breakdown of a variant: (part, ms per profiled step) pairs; empty when it was not profiled."""

    night: date
    breakdown: tuple[tuple[str, float], ...]

# analysis/measure/profile_breakdown.py PARTS (kept here so that judging imports no NumPy trace code), then the step total
PARTS_ORDER = ("expert_gemm", "dense_gemm", "attention", "other_compute", "comm_exposed", "idle", "step")
STEP = "step"


def _step_of(parts: dict[str, float]) -> float:
    return parts.get(STEP) or sum(v for k, v in parts.items() if k != STEP)


def parts_moved(tonight: Profiled, past: Sequence[Profiled], step: MetricJudgement,
                config: HistoryConfig) -> tuple[tuple[PartChange, ...], str]:
    """The parts of ``tonight``'s breakdown that moved against the profiled nights before it, and a note saying
    what they were compared with (or why nothing was). Empty when tonight was not profiled."""
    if not tonight.breakdown:
        return (), ""
    profiled = [e for e in past if e.breakdown and e.night < tonight.night]
    if not profiled:
        return (), "profiled tonight; no earlier profiled night to compare the breakdown with"
    in_window = [e for e in profiled if e.night in set(step.nights)]
    chosen = in_window or profiled[-1:]
    where = (f"{len(chosen)} profiled baseline night(s) ({', '.join(str(e.night) for e in chosen)})" if in_window
             else f"the latest profiled night {chosen[0].night} (no baseline night was profiled)")
    now = dict(tonight.breakdown)
    names = [k for k in now if k != STEP and any(k in dict(e.breakdown) for e in chosen)]
    base = {k: median(dict(e.breakdown)[k] for e in chosen if k in dict(e.breakdown)) for k in names}
    base_step = median(_step_of(dict(e.breakdown)) for e in chosen)
    if base_step <= 0:
        return (), f"the breakdown of {where} has no step time"
    floor = config.threshold / 2 * base_step
    moved = sorted((PartChange(part=k, tonight_ms=now[k], baseline_ms=base[k], change_ms=now[k] - base[k],
                               change=(now[k] / base[k] - 1) if base[k] else None,
                               share=(now[k] - base[k]) / base_step)
                    for k in names if abs(now[k] - base[k]) >= floor), key=lambda p: -abs(p.change_ms))
    step_change = _step_of(now) - base_step
    note = (f"breakdown against {where}: step {step_change:+.1f} ms ({step_change / base_step:+.1%}); "
            + ("; ".join(p.describe() for p in moved) if moved
               else f"no part moved by {floor:.1f} ms ({config.threshold / 2:.1%} of the step) or more"))
    return tuple(moved), note
