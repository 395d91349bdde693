"""Paired analysis over blocks (CONTRACTS §7): an arm's speedup from ratios within each block.

A block is one run of every kept arm, the baseline included, in a seeded random order (experiments/blocks.py);
the repeat index of a run is its block index. For each block where both the arm and the baseline have a usable run,
r_b = baseline median step (ms) / arm median step (ms) -- the ratio of the two runs' medians in the same block, so
drift between blocks cancels. The speedup is exp(mean(log r_b)) (a geometric mean of the block ratios) with the 95%
Student-t interval of mean(log r_b) over the blocks (method ``paired_blocks_t``); the verdict comes from
:mod:`analysis.measure.sequential` (fixed design) or, in ``repeats=auto``, from :mod:`analysis.measure.pooled` (the
group's pooled run-level noise and the nightly prior; interval method ``pooled_blocks_t``: the moderated t
interval). The baseline's median in each
block is the sweep's drift (``drift`` in summary.json).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from analysis.measure.results import RunResult, Speedup
from analysis.options import PRACTICAL_THRESHOLD

if TYPE_CHECKING:
    from analysis.measure.pooled import GroupNoise, NoisePrior

# scipy (via analysis.measure.sequential) is imported by the functions that use it: about 1 s of imports, which a report of
# loose logs without blocks never needs

CONFIDENCE = 0.95


@dataclass(frozen=True)
class Design:
    """How the sweep scheduled its blocks (manifest ``design``): ``adaptive`` (repeats=auto) with ``max_blocks``,
    the practical threshold (fraction; equivalence margin) and the test level ``alpha``."""

    adaptive: bool = False
    max_blocks: int = 0
    practical_threshold: float = PRACTICAL_THRESHOLD
    alpha: float = 0.05
    prior: NoisePrior | None = None  # the series' run-to-run noise learnt from past nights (analysis.pooled)
    noise: GroupNoise | None = None  # the group's pooled noise, set per group by analysis.compare.compare_all

    @classmethod
    def from_manifest(cls, design: dict | None, threshold: float = PRACTICAL_THRESHOLD) -> Design:
        from analysis.measure.pooled import NoisePrior

        d = design or {}
        return cls(adaptive=d.get("repeats") == "auto", max_blocks=int(d.get("max_blocks") or 0),
                   practical_threshold=float(d.get("practical_threshold", threshold)),
                   alpha=float(d.get("alpha", 0.05)), prior=NoisePrior.from_json(d.get("noise_prior")))


@dataclass(frozen=True)
class BlockPair:
    """One block of a comparison: index, baseline and arm median step (ms), ratio baseline/arm."""

    index: int
    baseline_ms: float
    variant_ms: float

    @property
    def ratio(self) -> float:
        return self.baseline_ms / self.variant_ms

    def to_json(self) -> dict[str, float | int]:
        return {"index": self.index, "baseline_ms": self.baseline_ms, "variant_ms": self.variant_ms,
                "ratio": self.ratio}


def block_pairs(base: Sequence[RunResult], var: Sequence[RunResult]) -> list[BlockPair]:
    """The blocks where both sides have a usable run with a median step time, in block order."""
    b = {r.repeat: r.step_time.median for r in base if r.repeat is not None and r.step_time is not None and r.good}
    v = {r.repeat: r.step_time.median for r in var if r.repeat is not None and r.step_time is not None and r.good}
    return [BlockPair(i, b[i], v[i]) for i in sorted(set(b) & set(v))]


def paired_speedup(log_ratios: Sequence[float], confidence: float = CONFIDENCE) -> Speedup:
    """exp(mean) of the block log-ratios with the t interval over the blocks; raises ValueError below 2 blocks."""
    x = np.asarray(log_ratios, dtype=np.float64)
    if x.size < 2:
        raise ValueError(f"a paired interval needs >= 2 blocks, got {x.size}")
    from scipy import stats as sps

    half = sps.t.isf((1 - confidence) / 2, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size)
    m = float(x.mean())
    return Speedup(math.exp(m), math.exp(m - half), math.exp(m + half), "paired_blocks_t")


def paired_verdict(pairs: Sequence[BlockPair], design: Design) -> tuple[Speedup, str, dict | None]:
    """(speedup, verdict, sequential record or None) of one arm over its blocks (>= 2 blocks; one block in
    ``repeats=auto`` with the group's nightly prior)."""
    from analysis.measure.sequential import fixed_verdict, sequential_verdict, verdict_name

    logs = [math.log(p.ratio) for p in pairs]
    if design.adaptive and design.max_blocks and design.noise is not None:
        from analysis.measure.pooled import pooled_speedup, pooled_verdict

        res = pooled_verdict(logs, design.noise, design.max_blocks, design.practical_threshold, design.alpha)
        got = pooled_speedup(logs, res, CONFIDENCE)
        if got is not None:
            speedup = Speedup(*got, "pooled_blocks_t")
        else:  # one block without a usable prior: the value alone, no interval
            speedup = paired_speedup(logs) if len(logs) >= 2 else Speedup(math.exp(logs[0]), method="pooled_blocks_t")
        return speedup, verdict_name(res.state), res.to_json()
    speedup = paired_speedup(logs)
    if design.adaptive and design.max_blocks:
        seq = sequential_verdict(logs, design.max_blocks, design.practical_threshold, design.alpha)
        verdict = verdict_name(seq.state)
        return speedup, verdict, seq.to_json()
    return speedup, fixed_verdict(logs, design.practical_threshold), None


def drift(runs: Sequence[RunResult]) -> list[dict]:
    """Per group: the baseline's median step (ms) in each block and its spread (max / min - 1) -- the drift of the
    machine over the sweep, which the paired ratios cancel."""
    out = []
    groups: dict[str, list[RunResult]] = {}
    for r in runs:
        if r.role == "baseline" and r.repeat is not None:
            groups.setdefault(",".join(f"{k}={r.group[k]}" for k in sorted(r.group)), []).append(r)
    for members in groups.values():
        blocks = sorted(((r.repeat, r.step_time.median) for r in members if r.good and r.step_time), key=lambda t: t[0])
        if len(blocks) < 2:
            continue
        meds = [m for _, m in blocks]
        out.append({"group": dict(members[0].group), "baseline": members[0].variant,
                    "blocks": [{"index": i, "median_ms": m} for i, m in blocks],
                    "spread": max(meds) / min(meds) - 1})
    return out
