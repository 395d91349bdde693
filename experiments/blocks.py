"""Interleaved blocks, the control arm and the adaptive next block (CONTRACTS §1, §12): drift between runs cancels
in ratios taken within a block, which back-to-back repeats turn into a fake speedup.

- A **block** is one run of every kept arm of the open stages (each group's baseline included). Its order is a
  row of a **Williams design** over the block's arms (:func:`williams_rows`): over a full cycle of rows (n rows for
  n arms when n is even, 2n when n is odd) every arm takes every position equally often and follows every other
  arm equally often, so neither a position in the block (a first run that warms the machine, a last one that meets
  the next job) nor the arm before it can favour one arm. The randomisation is seeded: the arms are assigned to the
  design's symbols by ``random.Random(f"{seed}:williams")`` and each cycle's rows are shuffled by
  ``random.Random(f"{seed}:cycle{c}")``, where ``seed`` is ``block_seed`` (or, when null, derived from the sweep
  id) and is recorded in the manifest's ``design``. A run's repeat index is its block index. The order is recorded
  (manifest ``blocks``) and never recomputed: a resume submits the missing runs in the recorded order.
- ``repeats=N`` plans N blocks; ``repeats=auto`` plans K_MIN (2) blocks, then the conductor adds one block at a
  time (:func:`next_block`) with the arms that are still undecided, their groups' baselines and controls, until
  every arm is decided, an arm has ``max_blocks`` blocks, or the next block would pass ``max_gpu_hours``.
- ``control=true`` adds a copy of each group's baseline (``<baseline>.ctl``, role ``control``) to every block; its
  verdict against the baseline must be ``equivalent`` (analysis/measure/compare.py marks the group doubtful otherwise).
- A gated arm (staged isolation) gets blocks of its own once its gate opens (:func:`schedule_new_arms`): the same
  number of blocks (K_MIN for auto), with its group's baseline and control in each (with ``repeats=1`` there is
  nothing to pair, so the gated arms run alone).
"""

from __future__ import annotations

import dataclasses
import hashlib
import random
from typing import Any

from analysis.measure import K_MIN, METHOD
from contracts.manifest import Manifest
from contracts.records import Variant, safe_name
from contracts.statuses import ManifestStatus, Role

CONTROL_SUFFIX = ".ctl"


def derive_seed(sweep_id: str) -> int:
    """The block seed of a sweep when ``block_seed`` is null: the first 8 hex digits of sha256(sweep id)."""
    return int(hashlib.sha256(sweep_id.encode()).hexdigest()[:8], 16)


ORDER_RULE = ("williams: the block's arms on the rows of a Williams design (each arm in each position equally often "
              "per cycle of n rows, 2n for odd n), symbols assigned by random.Random(f'{seed}:williams'), rows of "
              "cycle c shuffled by random.Random(f'{seed}:cycle{c}')")


def williams_rows(n: int) -> list[list[int]]:
    """The rows of a Williams design for ``n`` treatments (Williams 1949, Aust. J. Sci. Res. A 2:149): the first
    row is 0, 1, n-1, 2, n-2, ...; row r adds r modulo n. For an even n the n rows are balanced for position and
    first-order carry-over; for an odd n the n rows and their mirror images (2n rows) are."""
    if n < 1:
        raise ValueError(f"a Williams design needs at least one treatment, got n={n}")
    first, lo, hi = [0], 1, n - 1
    while len(first) < n:
        first.append(lo)
        lo += 1
        if len(first) < n:
            first.append(hi)
            hi -= 1
    rows = [[(x + r) % n for x in first] for r in range(n)]
    return rows if n % 2 == 0 else rows + [row[::-1] for row in rows]


def block_order(arms: list[str], seed: int, index: int) -> list[str]:
    """The arms of the ``index``-th block of these arms: row ``index`` of the seeded Williams design over them
    (module docstring; the same inputs give the same order). Blocks 0 .. cycle-1 balance every position."""
    if len(arms) < 2:
        return list(arms)
    symbols = list(arms)
    random.Random(f"{seed}:williams").shuffle(symbols)
    rows = williams_rows(len(symbols))
    cycle, within = divmod(index, len(rows))
    picks = list(range(len(rows)))
    random.Random(f"{seed}:cycle{cycle}").shuffle(picks)
    return [symbols[i] for i in rows[picks[within]]]


def position_balance(blocks: list[dict[str, Any]]) -> dict[str, list[int]]:
    """How often each arm ran at each position of its block: {arm: [count at position 0, 1, ...]}, over the
    blocks as recorded (the manifest's ``blocks``)."""
    width = max((len(b["order"]) for b in blocks), default=0)
    out: dict[str, list[int]] = {}
    for b in blocks:
        for pos, name in enumerate(b["order"]):
            out.setdefault(name, [0] * width)[pos] += 1
    return out


def control_name(baseline: str) -> str:
    """Name of the control copy of ``baseline``: ``a2a.ovl0.dw0`` -> ``a2a.ovl0.dw0.ctl`` (Slurm-safe)."""
    return safe_name(baseline + CONTROL_SUFFIX)


def with_controls(variants: tuple[Variant, ...]) -> tuple[Variant, ...]:
    """The variants plus, right after each kept baseline, its control copy (role ``control``)."""
    out: list[Variant] = []
    for v in variants:
        out.append(v)
        if v.role == Role.BASELINE and v.status != ManifestStatus.PRUNED:
            out.append(dataclasses.replace(v, name=control_name(v.name), role=Role.CONTROL))
    return tuple(out)


def planned_arms(variants: list[Any]) -> list[str]:
    """Names of the arms that run now: status ``planned`` (not pruned, gated or skipped), in manifest order."""
    return [v.name for v in variants if v.status == ManifestStatus.PLANNED]


def n_initial_blocks(repeats: int | str, max_blocks: int) -> int:
    """Blocks planned up front: ``repeats``, or for ``auto`` min(K_MIN, max_blocks)."""
    return min(K_MIN, max_blocks) if repeats == "auto" else int(repeats)


def design_doc(*, repeats: int | str, seed: int, control: bool, max_blocks: int, threshold: float,
               run_gpu_hours: dict[str, float], seed_source: str) -> dict[str, Any]:
    """The manifest's ``design`` record (CONTRACTS §12)."""
    return {"repeats": repeats, "seed": seed, "seed_source": seed_source, "control": control,
            "max_blocks": max_blocks if repeats == "auto" else int(repeats), "practical_threshold": threshold,
            "alpha": 0.05, "order": ORDER_RULE,
            "run_gpu_hours": run_gpu_hours,
            "method": METHOD if repeats == "auto" else "fixed_paired_t_tost"}


def _group_key(v: Any) -> str:
    return ",".join(f"{k}={v.variant.group[k]}" for k in sorted(v.variant.group))


def _with_group_anchors(m: Manifest, arms: set[str]) -> list[str]:
    """``arms`` plus the baseline and control of each of their groups, in manifest order."""
    groups = {_group_key(v) for v in m.variants if v.name in arms}
    return [v.name for v in m.variants if v.name in arms or (
        _group_key(v) in groups and v.variant.role in (Role.BASELINE, Role.CONTROL)
        and v.status == ManifestStatus.PLANNED)]


def _blocks_of(m: Manifest, name: str) -> int:
    return sum(1 for b in m.blocks if name in b["order"])


def hours_of(m: Manifest, names: list[str]) -> float:
    """GPU-hours these runs may take (nodes x GPUs x time limit each, the plan's estimate; CONTRACTS §1)."""
    per = (m.design or {}).get("run_gpu_hours") or {}
    return sum(float(per.get(n, 0.0)) for n in names)


def next_block(m: Manifest, comparisons: list[Any], max_gpu_hours: float) -> tuple[list[str] | None, str]:
    """``repeats=auto``: the next block's arms after the analysis ``comparisons`` (analysis Comparison records),
    or None with the reason the adaptive design stops.

    An arm runs again when its sequential decision is undecided and it has fewer than ``max_blocks`` blocks
    (``sequential.wants_more``); a control runs again while any arm of its group does. The block is added only if
    the sweep's GPU-hours so far plus this block stay within ``max_gpu_hours``.
    """
    design = m.design or {}
    if design.get("repeats") != "auto":
        return None, "fixed design"
    cap = int(design.get("max_blocks") or K_MIN)
    more = [c for c in comparisons if (c.sequential or {}).get("wants_more") and _blocks_of(m, c.variant) < cap]
    undecided = {c.variant for c in more if not c.control}
    if not undecided:
        undecided_ctl = {c.variant for c in more if c.control}
        if not undecided_ctl:
            return None, "every arm is decided or has max_blocks blocks"
        undecided = undecided_ctl
    arms = _with_group_anchors(m, undecided)
    spent = hours_of(m, [n for n, _ in m.runs])
    if spent + hours_of(m, arms) > max_gpu_hours:
        return None, f"the next block would pass max_gpu_hours={max_gpu_hours} ({spent:.2f} GPU-hours spent)"
    return arms, f"undecided: {', '.join(sorted(undecided))}"


def add_blocks(m: Manifest, arms: list[str], count: int) -> list[int]:
    """Append ``count`` blocks of ``arms`` in their seeded Williams orders; returns the new block indices. The row
    of each is the number of earlier blocks with the same set of arms, so the blocks of one arm set walk the
    design's rows in turn (an adaptive round's smaller set starts its own cycle)."""
    seed = int((m.design or {}).get("seed") or 0)
    out = []
    for _ in range(count):
        row = sum(1 for b in m.blocks if set(b["order"]) == set(arms))
        out.append(m.add_block(block_order(arms, seed, row)))
    return out


def schedule_new_arms(m: Manifest) -> list[str]:
    """Give blocks to the planned arms that have none yet (a gate just opened): the design's block count (K_MIN
    for auto), each with the arms' group baselines and controls. Returns the newly scheduled arm names."""
    design = m.design or {}
    if not design:
        return []
    new = {n for n in planned_arms(m.variants) if _blocks_of(m, n) == 0}
    if not new:
        return []
    count = n_initial_blocks(design.get("repeats", 1), int(design.get("max_blocks") or K_MIN))
    # one block (repeats=1) allows no paired analysis: the arms then run alone, compared with the baseline's one run
    arms = _with_group_anchors(m, new) if count >= 2 else [n for n in planned_arms(m.variants) if n in new]
    add_blocks(m, arms, count)
    return sorted(new)
