"""Variant-vs-baseline comparisons inside each group (CONTRACTS.md §2, §7).

- Speedup = the baseline's median step time / the variant's (above 1: the variant is faster).
  - One run on each side: percentile bootstrap over the steady iterations of both runs (independent resamples,
    ratio of medians), 95%.
  - Repeats (more than one usable run on either side): the interval comes from the per-run medians (run-to-run
    noise): a t interval on log(median) differences with the pooled run-to-run variance; the value is the ratio of
    the geometric means of the per-run medians.
  - Blocks (drift between blocks cancels in ratios within a block): when the two sides share at least 2 blocks (runs with the same repeat index = block index),
    the speedup comes from the ratios within each block (analysis/measure/paired.py, ``paired_blocks_t``) and the verdict
    from analysis/sequential.py: ``equivalent`` when the arm is within +-practical_threshold (TOST), ``faster`` /
    ``slower`` when the interval excludes 1 (in ``repeats=auto`` the group-sequential decision).
  - Control arm (``control=true``, role ``control``): when its verdict is not ``equivalent``, every comparison of
    its group is marked ``doubtful`` (the sweep's noise floor is above what the verdicts claim).
- Verdict: ``faster`` when the interval lies above 1, ``slower`` when it lies below 1, else
  ``no_significant_difference``; ``not_comparable`` when either side has no usable run or the runs differ in global
  batch size, sequence length, GPU count or CUDA_DEVICE_MAX_CONNECTIONS (FACTS §2: the overlap gain depends on it).
- Loss parity: the largest |lm loss(variant) - lm loss(baseline)| / |lm loss(baseline)| over the common steady
  iterations (same seed; repeats are paired by repeat index). Default tolerance 2% (CONTRACTS §7).
- Trust gate (a speedup of a run that trains differently is not a speedup): a variant whose lm loss departs from its baseline's beyond the tolerance, or whose grad
  norm spikes against it (below), is never called faster or slower: its verdict is ``diverged`` (exit code 4), with
  the speedup kept for reference.
- Grad-norm spike: at a common steady iteration the variant's grad norm is more than 3x the baseline's and above
  every steady baseline grad norm.
- Overlap ceiling: given the baseline's all-to-all time per step ``a2a_ms`` (an optional input: ``profile.a2a_ms`` in
  effective_config.json, or ``a2a_ms`` in the Python API), ceiling = (T_comp + T_comm) / max(T_comp, T_comm) with
  T_comm = a2a_ms and T_comp = baseline median step - a2a_ms (FACTS §7), and the fraction achieved is
  (speedup - 1) / (ceiling - 1).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from analysis.measure.paired import Design, block_pairs, paired_verdict
from analysis.measure.results import BackendRate, Comparison, LossParity, OverlapCeiling, RunResult, Speedup
from analysis.measure.stats import CONFIDENCE, N_BOOT, SEED, bootstrap_medians, percentile_interval
from analysis.options import LOSS_TOLERANCE
from contracts.records import group_key

GRAD_SPIKE_FACTOR = 3.0
VERDICTS = ("faster", "slower", "equivalent", "no_significant_difference", "not_comparable", "diverged")
_COMPARABLE = (
    ("global_batch_size", "global batch size"),
    ("seq_length", "sequence length"),
    ("world_size", "GPU count"),
    ("cuda_device_max_connections", "CUDA_DEVICE_MAX_CONNECTIONS"),
)


def speedup_from_iterations(base_ms: np.ndarray, var_ms: np.ndarray, *, n_boot: int = N_BOOT,
                            seed: int = SEED) -> Speedup:
    """Speedup of one variant run over one baseline run from their steady step times (ms), bootstrap 95%."""
    if len(base_ms) == 0 or len(var_ms) == 0:
        raise ValueError("speedup needs steady step times on both sides")
    reps = bootstrap_medians(base_ms, n_boot=n_boot, seed=seed) / bootstrap_medians(var_ms, n_boot=n_boot,
                                                                                    seed=seed + 7919)
    lo, hi = percentile_interval(reps)
    return Speedup(float(np.median(base_ms) / np.median(var_ms)), lo, hi, "bootstrap_iterations")


def speedup_from_run_medians(base_medians: Sequence[float], var_medians: Sequence[float],
                             confidence: float = CONFIDENCE) -> Speedup:
    """Speedup from per-run median step times (ms) with repeats: pooled-variance t interval on log medians.

    Needs at least 3 runs in all (one degree of freedom); raises ValueError otherwise.
    """
    lb = np.log(np.asarray(base_medians, dtype=np.float64))
    lv = np.log(np.asarray(var_medians, dtype=np.float64))
    dof = lb.size + lv.size - 2
    if lb.size == 0 or lv.size == 0 or dof < 1:
        raise ValueError(f"per-run interval needs >= 3 runs in all, got {lb.size} + {lv.size}")
    diff = lb.mean() - lv.mean()
    pooled = (((lb - lb.mean()) ** 2).sum() + ((lv - lv.mean()) ** 2).sum()) / dof
    from scipy import stats as sps  # imported when used: about 0.3 s

    half = sps.t.ppf(0.5 + confidence / 2, dof) * math.sqrt(pooled * (1 / lb.size + 1 / lv.size))
    return Speedup(math.exp(diff), math.exp(diff - half), math.exp(diff + half), "per_run_medians")


def verdict_of(speedup: Speedup) -> str:
    """faster / slower / no_significant_difference from the interval (not_comparable when it is unknown)."""
    if speedup.ci_low is None or speedup.ci_high is None:
        return "not_comparable"
    if speedup.ci_low > 1.0:
        return "faster"
    if speedup.ci_high < 1.0:
        return "slower"
    return "no_significant_difference"


def _pairs(base: Sequence[RunResult], var: Sequence[RunResult]) -> list[tuple[RunResult, RunResult]]:
    by_repeat = {b.repeat: b for b in base}
    pairs = [(by_repeat[v.repeat], v) for v in var if v.repeat in by_repeat]
    return pairs or [(base[0], var[0])]


def loss_parity(base: Sequence[RunResult], var: Sequence[RunResult], tolerance: float = LOSS_TOLERANCE) -> LossParity:
    """Largest relative lm-loss difference over common steady iterations (repeats paired by repeat index)."""
    worst: float | None = None
    common = 0
    for b, v in _pairs(base, var):
        bi, bl = b.steady_values("lm_loss")
        vi, vl = v.steady_values("lm_loss")
        its, ib, iv = np.intersect1d(bi, vi, return_indices=True)
        ok = np.isfinite(bl[ib]) & np.isfinite(vl[iv]) & (bl[ib] != 0)
        if not ok.any():
            continue
        rel = np.abs(vl[iv][ok] - bl[ib][ok]) / np.abs(bl[ib][ok])
        common = max(common, int(ok.sum()))
        worst = float(rel.max()) if worst is None else max(worst, float(rel.max()))
    if worst is None:
        return LossParity(None, None, tolerance, 0)
    return LossParity(worst, worst <= tolerance, tolerance, common)


def grad_norm_spikes(base: RunResult, var: RunResult, factor: float = GRAD_SPIKE_FACTOR) -> list[str]:
    """Iterations where the variant's grad norm spikes against the baseline's (see module docstring)."""
    bi, bg = base.steady_values("grad_norm")
    vi, vg = var.steady_values("grad_norm")
    its, ib, iv = np.intersect1d(bi, vi, return_indices=True)
    b, v = bg[ib], vg[iv]
    finite_b = bg[np.isfinite(bg)]
    if not finite_b.size:
        return []
    spike = np.isfinite(b) & ((~np.isfinite(v)) | ((v > factor * b) & (v > finite_b.max())))
    return [f"grad-norm spike at iteration {int(i)}: {vv:.4g} vs baseline {bb:.4g}"
            for i, vv, bb in zip(its[spike], v[spike], b[spike], strict=True)][:5]


def comparability(base: RunResult, var: RunResult) -> list[str]:
    """Reasons why two runs are not comparable (empty when they are, or when a value is unknown on a side)."""
    out = []
    for attr, label in _COMPARABLE:
        a, b = getattr(base.config, attr), getattr(var.config, attr)
        if a is not None and b is not None and str(a) != str(b):
            out.append(f"{label} differs: baseline {a}, variant {b}")
    return out


def overlap_ceiling(baseline_step_ms: float, a2a_ms: float, speedup: float | None) -> OverlapCeiling | None:
    """Ideal overlap ceiling and the fraction achieved (FACTS §7); None when a2a_ms is not below the step time."""
    if not (0 < a2a_ms < baseline_step_ms):
        return None
    comp = baseline_step_ms - a2a_ms
    ceiling = baseline_step_ms / max(comp, a2a_ms)
    fraction = (speedup - 1) / (ceiling - 1) if speedup is not None and ceiling > 1 else None
    return OverlapCeiling(float(a2a_ms), float(comp), float(ceiling), fraction)


def _describe(runs: Sequence[RunResult]) -> str:
    reasons = sorted({f"{r.status}" + (f" ({r.reason})" if r.reason else "") for r in runs})
    return f"{len(runs)} run(s): {', '.join(reasons)}" if runs else "no run"


def compare_variant(base_runs: Sequence[RunResult], var_runs: Sequence[RunResult], *, baseline: str, variant: str,
                    group: dict, tolerance: float = LOSS_TOLERANCE, n_boot: int = N_BOOT,
                    seed: int = SEED, design: Design | None = None) -> Comparison:
    """Compare all runs of one variant with all runs of its group's baseline (paired over blocks when they share
    at least 2 blocks; ``design``: fixed or adaptive, with the practical threshold)."""
    design = design or Design()
    extra: dict = {}
    usable_b = [r for r in base_runs if r.good and r.step_time is not None]
    usable_v = [r for r in var_runs if r.good and r.step_time is not None]
    notes: list[str] = []
    na = Speedup()

    def result(speedup: Speedup, verdict: str, parity: LossParity | None = None, spike: bool = False,
               ceiling: OverlapCeiling | None = None) -> Comparison:
        return Comparison(variant, baseline, dict(group), speedup, verdict, parity or LossParity(tolerance=tolerance),
                          tuple(notes), spike, ceiling, len(var_runs), len(base_runs), **extra)

    if not usable_v:
        invalid = [r for r in var_runs if r.status == "invalid_variant"]
        if invalid:
            notes.append(f"invalid variant ({invalid[0].reason}): it did not run what its label says; its numbers "
                         f"are kept out of the {invalid[0].dispatcher or variant} column")
        notes.append(f"variant has no usable run: {_describe(var_runs)}")
        return result(na, "not_comparable")
    if not usable_b:
        notes.append(f"baseline {baseline} has no usable run: {_describe(base_runs)}")
        return result(na, "not_comparable")
    if len(usable_v) < len(var_runs):
        notes.append(f"{len(var_runs) - len(usable_v)} of {len(var_runs)} variant run(s) unusable: "
                     f"{_describe([r for r in var_runs if r not in usable_v])}")
    differences = comparability(usable_b[0], usable_v[0])
    if differences:
        notes.extend(differences)
        return result(na, "not_comparable")
    pairs = block_pairs(usable_b, usable_v)
    one_block = len(pairs) == 1 and design.adaptive and design.noise is not None and design.noise.prior is not None
    if len(pairs) >= 2 or one_block:  # one block decides only with the nightly prior (analysis/measure/pooled.py)
        speedup, verdict, seq = paired_verdict(pairs, design)
        extra.update(blocks=tuple(p.to_json() for p in pairs), sequential=seq)
    elif len(usable_b) == 1 and len(usable_v) == 1:
        b_ms = usable_b[0].steady_values("step_ms")[1]
        v_ms = usable_v[0].steady_values("step_ms")[1]
        if b_ms.size and v_ms.size:
            speedup = speedup_from_iterations(b_ms, v_ms, n_boot=n_boot, seed=seed)
        else:  # records read back from JSON: no series, only the medians and their intervals
            bs, vs = usable_b[0].step_time, usable_v[0].step_time
            speedup = Speedup(bs.median / vs.median, bs.ci_low / vs.ci_high, bs.ci_high / vs.ci_low, "interval_bounds")
    else:
        speedup = speedup_from_run_medians([r.step_time.median for r in usable_b],
                                           [r.step_time.median for r in usable_v])
    if len(pairs) < 2 and not one_block:
        verdict = verdict_of(speedup)
    if verdict == "equivalent" and not speedup.ci_low <= 1.0 <= speedup.ci_high:
        side = "faster" if speedup.ci_low > 1.0 else "slower"
        notes.append(f"measurably {side} ({speedup.value - 1:+.1%} [{speedup.ci_low - 1:+.1%}, {speedup.ci_high - 1:+.1%}]) "
                     f"but within the practical threshold: equivalent")
    parity = loss_parity(usable_b, usable_v, tolerance)
    if parity.ok is None:
        notes.append("loss parity unknown: no common steady iteration with lm loss on both sides")
    elif not parity.ok:
        notes.append(f"loss diverged: max relative lm-loss difference {parity.max_rel_diff:.2%} > {tolerance:.0%}"
                     + ("; faster, but not a valid win" if verdict == "faster" else ""))
    spikes = [s for b, v in _pairs(usable_b, usable_v) for s in grad_norm_spikes(b, v)]
    notes.extend(spikes)
    if parity.ok is False or spikes:
        notes.append(f"diverged from the baseline: {'loss' if parity.ok is False else 'grad norm'} beyond tolerance; "
                     f"the speedup {speedup.value:.3f} is not a valid result")
        verdict = "diverged"
    ceiling = None
    a2a = next((r.a2a_ms for r in usable_b if r.a2a_ms), None)
    if a2a:
        base_ms = float(np.median([r.step_time.median for r in usable_b]))
        ceiling = overlap_ceiling(base_ms, a2a, speedup.value)
        if ceiling is None:
            notes.append(f"a2a_ms {a2a} is not below the baseline step time {base_ms:.1f} ms: no ceiling")
    return result(speedup, verdict, parity, bool(spikes), ceiling)


def compare_all(runs: Sequence[RunResult], *, baseline: str | None = None, tolerance: float = LOSS_TOLERANCE,
                n_boot: int = N_BOOT, seed: int = SEED, design: Design | None = None) -> tuple[Comparison, ...]:
    """Every variant against its group's baseline.

    The baseline of a group is the variant named ``baseline`` when given (loose files: one group), else the variant
    whose runs have role "baseline". Groups without a baseline, and runs that never trained (pruned, skipped,
    validate mode), produce no comparison.
    """
    groups: dict[str, list[RunResult]] = {}
    for r in runs:
        if r.status in ("pruned", "skipped", "validated"):  # never trained: nothing to compare
            continue
        key = "" if baseline else group_key(r.group)
        groups.setdefault(key, []).append(r)
    out: list[Comparison] = []
    for members in groups.values():
        names = list(dict.fromkeys(r.variant for r in members))
        base_name = baseline if baseline else next((r.variant for r in members if r.role == "baseline"), None)
        if base_name is None or base_name not in names:
            continue
        base_runs = [r for r in members if r.variant == base_name]
        group_design = design
        if design is not None and design.adaptive:  # repeats=auto: the run-level noise pooled over the group's arms
            from analysis.measure.pooled import group_noise

            group_design = replace(design, noise=group_noise(members, base_name, design.prior))
        mine: list[Comparison] = []
        for name in names:
            if name == base_name:
                continue
            var_runs = [r for r in members if r.variant == name]
            c = compare_variant(base_runs, var_runs, baseline=base_name, variant=name,
                                group={} if baseline else dict(var_runs[0].group), tolerance=tolerance,
                                n_boot=n_boot, seed=seed, design=group_design)
            mine.append(replace(c, control=True) if var_runs[0].role == "control" else c)
        out.extend(mark_doubtful(mine))
    return tuple(out)


def mark_doubtful(comparisons: list[Comparison]) -> list[Comparison]:
    """Every comparison of a group is ``doubtful`` when the group's control arm is not ``equivalent`` to the
    baseline (a copy of the baseline that is not shown the same: the verdicts cannot be trusted). An adaptive control
    still undecided while the sweep runs on is not yet a failure (``sequential.wants_more``)."""
    ctl = next((c for c in comparisons if c.control), None)
    if ctl is None or ctl.verdict == "equivalent" or (ctl.sequential or {}).get("wants_more"):
        return comparisons
    floor = ("" if ctl.speedup.value is None else
             f" (control speedup {ctl.speedup.value:.3f} [{ctl.speedup.ci_low:.3f}, {ctl.speedup.ci_high:.3f}])")
    why = f"the control arm {ctl.variant} came out {ctl.verdict}, not equivalent to the baseline{floor}"
    return [replace(c, doubtful=True, doubtful_reason=why) for c in comparisons]


def backend_rates(runs: Sequence[RunResult]) -> tuple[BackendRate, ...]:
    """Per-dispatcher failure rate over the kept runs (pruned and skipped runs never ran; CASES C07)."""
    table: dict[str, list[RunResult]] = {}
    for r in runs:
        if r.status not in ("pruned", "skipped"):
            table.setdefault(r.dispatcher or "unknown", []).append(r)
    rates = []
    for dispatcher, members in table.items():
        reasons: dict[str, int] = {}
        for r in members:
            if r.bad:
                reasons[r.reason or r.status] = reasons.get(r.reason or r.status, 0) + 1
        good = sum(r.good for r in members)
        rates.append(BackendRate(dispatcher, len(members), good, sum(r.bad for r in members), reasons))
    return tuple(rates)
