"""A series' history in memory (:class:`SeriesHistory`) and the judgement of one night (:func:`judge_history`).

The database rows of a series become one :class:`VariantNight` per (night, variant): its step-time samples (the
median step time of each good run and every steady iteration) and its speedup samples (the analysis's speedup and
one speedup per repeat, baseline run r / variant run r of the same sweep; round-robin order puts them close in
time). Several sweeps on one night are pooled. Failed runs count as absent, never as samples.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from statistics import median
from typing import Any

from analysis.history.detect import judge_metric
from analysis.history.errors import HistoryInputError
from analysis.history.parts import PARTS_ORDER, Profiled, parts_moved
from analysis.history.records import (
    MISSING_TONIGHT,
    NOT_TIMED,
    SPEEDUP,
    STEP_TIME,
    TIMED_STATUSES,
    HistoryConfig,
    MetricJudgement,
    NightInput,
    NightReport,
    NightSamples,
    Series,
    VariantJudgement,
    ran_and_failed,
)


@dataclass(frozen=True, kw_only=True)
class VariantNight:
    """One variant on one night. ``step``/``speedup`` are None when the night has no usable sample."""

    night: date
    variant: str
    group_key: str = ""
    role: str | None = None
    statuses: tuple[str, ...] = ()
    step: NightSamples | None = None
    speedup: NightSamples | None = None
    baseline_variant: str | None = None
    speedup_reason: str | None = None
    tokens_per_s_per_gpu: float | None = None
    tflops_per_gpu: float | None = None
    breakdown: tuple[tuple[str, float], ...] = ()
    """Median over the night's profiled good runs of each breakdown part (ms per profiled step); empty if none."""
    gpu_hours_estimate: float | None = None
    gpu_hours_accounted: float | None = None
    """Sums over the night's runs of this variant (GPU-hours); accounted is None unless every run has a figure."""


@dataclass(frozen=True, kw_only=True)
class SeriesHistory:
    """Every recorded (night, variant) of one series, plus the sweep ids of each night."""

    series: Series
    entries: tuple[VariantNight, ...]
    sweep_ids: tuple[tuple[date, str], ...] = ()

    def nights(self) -> list[date]:
        """Every recorded night, oldest first."""
        return sorted({e.night for e in self.entries} | {n for n, _ in self.sweep_ids})

    def by_variant(self) -> dict[str, dict[date, VariantNight]]:
        """variant -> night -> its :class:`VariantNight`."""
        out: dict[str, dict[date, VariantNight]] = {}
        for e in self.entries:
            out.setdefault(e.variant, {})[e.night] = e
        return out


def _is_timed(row: Mapping[str, Any]) -> bool:
    return row["status"] in TIMED_STATUSES and row["step_time_ms"] is not None


def _median_or_none(values: Iterable[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return median(vals) if vals else None


def build_history(series: Series, run_rows: Sequence[Mapping[str, Any]], speedup_rows: Sequence[Mapping[str, Any]],
                  step_times: Mapping[int, Sequence[float]], sweep_rows: Sequence[Mapping[str, Any]] = (),
                  breakdowns: Mapping[int, Mapping[str, float]] | None = None) -> SeriesHistory:
    """Group database rows (``runs``, ``speedups``, ``steps`` and ``breakdowns`` by run id, ``sweeps``) into a
    :class:`SeriesHistory`."""
    breakdowns = breakdowns or {}
    runs_by: dict[tuple[date, str], list[Mapping[str, Any]]] = {}
    for r in run_rows:
        runs_by.setdefault((_date(r["night"]), r["variant"]), []).append(r)
    sp_by: dict[tuple[date, str], list[Mapping[str, Any]]] = {}
    for s in speedup_rows:
        sp_by.setdefault((_date(s["night"]), s["variant"]), []).append(s)
    timed: dict[tuple[str, str], dict[int, float]] = {}  # (sweep, variant) -> repeat -> median step time (ms)
    for r in run_rows:
        if _is_timed(r):
            timed.setdefault((r["sweep_id"], r["variant"]), {})[r["repeat"]] = r["step_time_ms"]
    entries = []
    for key in sorted(set(runs_by) | set(sp_by)):
        night, variant = key
        rows, sps = runs_by.get(key, []), sp_by.get(key, [])
        good = [r for r in rows if _is_timed(r)]
        step = None
        if good:
            ci = (good[0]["step_time_ci_low_ms"], good[0]["step_time_ci_high_ms"]) if len(good) == 1 else None
            step = NightSamples(night=night, value=median(r["step_time_ms"] for r in good),
                                runs=tuple(r["step_time_ms"] for r in good),
                                iterations=tuple(x for r in good for x in step_times.get(r["id"], ())),
                                ci=ci if ci and None not in ci else None)
        valued = [s for s in sps if s["value"] is not None]
        speedup = None
        if valued:
            pairs = tuple(_repeat_speedups(timed, valued, variant))
            ci = (valued[0]["ci_low"], valued[0]["ci_high"]) if len(valued) == 1 else None
            speedup = NightSamples(night=night, value=median(s["value"] for s in valued), runs=pairs,
                                   ci=ci if ci and None not in ci else None)
        reason = None
        if sps and not valued:
            reason = "; ".join(sorted({s["reason"] or "no speedup recorded" for s in sps}))
        entries.append(VariantNight(
            night=night, variant=variant,
            group_key=(rows or sps)[0]["group_key"],
            role=next((r["role"] for r in rows if r["role"]), None),
            statuses=tuple(f"{r['status']}" + (f" ({r['reason']})" if r["reason"] else "") for r in rows),
            step=step, speedup=speedup, baseline_variant=sps[0]["baseline"] if sps else None, speedup_reason=reason,
            tokens_per_s_per_gpu=_median_or_none(r["tokens_per_s_per_gpu"] for r in good),
            tflops_per_gpu=_median_or_none(r["tflops_per_gpu"] for r in good),
            breakdown=_median_breakdown([breakdowns[r["id"]] for r in good if breakdowns.get(r["id"])]),
            gpu_hours_estimate=_sum_or_none([r.get("gpu_hours_estimate") for r in rows], every=False),
            gpu_hours_accounted=_sum_or_none([r.get("gpu_hours_accounted") for r in rows], every=True)))
    sweep_ids = tuple(sorted((_date(s["night"]), s["sweep_id"]) for s in sweep_rows))
    return SeriesHistory(series=series, entries=tuple(entries), sweep_ids=sweep_ids)


def _median_breakdown(parts: Sequence[Mapping[str, float]]) -> tuple[tuple[str, float], ...]:
    names = [k for k in PARTS_ORDER if any(k in b for b in parts)] + sorted(
        {k for b in parts for k in b} - set(PARTS_ORDER))
    return tuple((k, median(b[k] for b in parts if k in b)) for k in names)


def _sum_or_none(values: Sequence[float | None], every: bool) -> float | None:
    known = [v for v in values if v is not None]
    if not known or (every and len(known) < len(values)):
        return None
    return sum(known)


def _repeat_speedups(timed: Mapping[tuple[str, str], Mapping[int, float]], rows: Sequence[Mapping[str, Any]],
                     variant: str) -> Iterable[float]:
    """Per-repeat speedups: the baseline's repeat-r median / the variant's repeat-r median, within each sweep."""
    for s in rows:
        mine, base = timed.get((s["sweep_id"], variant), {}), timed.get((s["sweep_id"], s["baseline"]), {})
        for rep in sorted(set(mine) & set(base)):
            yield base[rep] / mine[rep]


def _date(value: Any) -> date:
    return value if isinstance(value, date) else date.fromisoformat(str(value)[:10])


def _missing(metric: str, note: str) -> MetricJudgement:
    return MetricJudgement(metric=metric, verdict=MISSING_TONIGHT, note=note)


def _validated(t: VariantNight) -> bool:
    """Every run of the night passed validate mode (nothing trained, so there is no timing to miss)."""
    return bool(t.statuses) and all(s.split()[0] == "validated" for s in t.statuses)


def _judge_variant(t: VariantNight, past: list[VariantNight], config: HistoryConfig) -> VariantJudgement:
    if t.step is None and _validated(t):
        note = "validated: validate mode runs no training, so there is no step time"
        return VariantJudgement(variant=t.variant, group_key=t.group_key, role=t.role,
                                step_time=MetricJudgement(metric=STEP_TIME, verdict=NOT_TIMED, note=note),
                                speedup=None, baseline_variant=t.baseline_variant,
                                tokens_per_s_per_gpu=t.tokens_per_s_per_gpu)
    if t.step is None:
        step = _missing(STEP_TIME, "no successful run tonight: " + ("; ".join(t.statuses) or "no run"))
    else:
        step = judge_metric(STEP_TIME, t.step, [e.step for e in past if e.step], config, lower_is_better=True)
    moved, parts_note = parts_moved(Profiled(t.night, t.breakdown), [Profiled(e.night, e.breakdown) for e in past],
                                    step, config)
    speedup = None
    if t.role != "baseline" and (t.baseline_variant or any(e.speedup for e in past)):
        if t.speedup is None:
            speedup = _missing(SPEEDUP, t.speedup_reason or "no speedup recorded tonight")
        else:
            speedup = judge_metric(SPEEDUP, t.speedup, [e.speedup for e in past if e.speedup], config,
                                   lower_is_better=False)
    return VariantJudgement(variant=t.variant, group_key=t.group_key, role=t.role, step_time=step, speedup=speedup,
                            baseline_variant=t.baseline_variant, tokens_per_s_per_gpu=t.tokens_per_s_per_gpu,
                            parts_moved=moved, parts_note=parts_note, gpu_hours_estimate=t.gpu_hours_estimate,
                            gpu_hours_accounted=t.gpu_hours_accounted)


def judge_history(history: SeriesHistory, night: date, config: HistoryConfig | None = None) -> NightReport:
    """Judge every variant of ``history`` on ``night`` against its last ``config.window`` good nights before it.

    Variants absent tonight but present within the window get ``missing_tonight``; those last seen before the
    window are listed as ``retired`` (not an error). Raises :class:`HistoryInputError` when nothing was recorded on
    ``night``.
    """
    config = config or HistoryConfig()
    nights = history.nights()
    if night not in nights:
        shown = ", ".join(n.isoformat() for n in nights[-10:]) or "none"
        raise HistoryInputError(f"nothing of {history.series} was recorded on night {night}; recorded nights "
                                f"(latest 10): {shown}")
    warnings = []
    recent = set([n for n in nights if n < night][-config.window:])
    judged, retired = [], []
    for variant, mine in sorted(history.by_variant().items()):
        past = [e for n, e in sorted(mine.items()) if n < night]
        tonight = mine.get(night)
        if tonight is not None:
            judged.append(_judge_variant(tonight, past, config))
            if tonight.role == "baseline" and tonight.step is None:
                warnings.append(f"baseline {variant} has no successful run on {night} ({'; '.join(tonight.statuses)})"
                                f"; the speedups of its group are not judged tonight")
        elif past and any(e.night in recent for e in past):
            last = past[-1]
            note = f"in the history (last on {last.night}) but not in the sweep(s) of {night}"
            has_speedup = last.role != "baseline" and any(e.speedup or e.baseline_variant for e in past)
            judged.append(VariantJudgement(
                variant=variant, group_key=last.group_key, role=last.role, step_time=_missing(STEP_TIME, note),
                speedup=_missing(SPEEDUP, note) if has_speedup else None, baseline_variant=last.baseline_variant))
        elif past:
            retired.append(variant)
    sweep_ids = tuple(sid for n, sid in history.sweep_ids if n == night)
    failed = tuple(f"{variant}: {s}" for variant, mine in sorted(history.by_variant().items()) if night in mine
                   for s in mine[night].statuses if ran_and_failed(s.split()[0]))
    return NightReport(night=night, series=history.series, sweep_ids=sweep_ids, config=config,
                       variants=tuple(judged), retired=tuple(retired), warnings=tuple(warnings), failed_runs=failed)


def history_from_inputs(inputs: Sequence[NightInput]) -> SeriesHistory:
    """Build a :class:`SeriesHistory` straight from recorded-sweep inputs, without a database (the same rows the
    store would return). All inputs must belong to one series; raises :class:`HistoryInputError` otherwise."""
    if not inputs:
        raise HistoryInputError("history_from_inputs needs at least one sweep")
    series = inputs[0].sweep.series
    run_rows, sp_rows, steps, sweep_rows, parts = [], [], {}, [], {}
    for n in inputs:
        s = n.sweep
        if s.series != series:
            raise HistoryInputError(f"sweep {s.sweep_id} belongs to {s.series}, not {series}")
        sweep_rows.append({"night": s.night, "sweep_id": s.sweep_id})
        for r in n.runs:
            run_id = len(run_rows) + 1
            run_rows.append({"id": run_id, "sweep_id": s.sweep_id, "night": s.night, "variant": r.variant,
                             "repeat": r.repeat, "status": r.status, "reason": r.reason, "role": r.role,
                             "group_key": r.group_key, "step_time_ms": r.step_time_ms,
                             "step_time_ci_low_ms": r.step_time_ci_low_ms,
                             "step_time_ci_high_ms": r.step_time_ci_high_ms, "tflops_per_gpu": r.tflops_per_gpu,
                             "tokens_per_s_per_gpu": r.tokens_per_s_per_gpu,
                             "gpu_hours_estimate": r.gpu_hours_estimate,
                             "gpu_hours_accounted": r.gpu_hours_accounted})
            steps[run_id] = r.step_times_ms
            if r.breakdown_ms:
                parts[run_id] = dict(r.breakdown_ms)
        sp_rows.extend({"sweep_id": s.sweep_id, "night": s.night, "variant": x.variant, "baseline": x.baseline,
                        "group_key": x.group_key, "value": x.value, "ci_low": x.ci_low, "ci_high": x.ci_high,
                        "reason": x.reason} for x in n.speedups)
    return build_history(series, run_rows, sp_rows, steps, sweep_rows, parts)
