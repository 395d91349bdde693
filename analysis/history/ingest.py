"""Read one collected sweep (summary.json, CONTRACTS §7, plus per-iteration step times) into a :class:`NightInput`.

Input record, in order of precedence:

* ``summary.json`` (schema_version 1): ``sweep`` (sweep_id, name = preset, created, git_sha, model, cluster,
  container), ``runs[]`` and ``comparisons[]``. Only the latest attempt of each (variant, repeat) counts
  (CONTRACTS §3).
* The manifest (optional): fills ``sweep`` when the summary's is ``null`` and gives each variant's ``role`` and
  ``group`` (else the run entry's own ``role``/``group``, else the comparisons'); its ``dirty`` flag is recorded.
* The series is (preset, model, cluster, container profile): the profile is ``sweep.container.name``.
* GPU-hours per run: the plan's estimate from the manifest's ``design.run_gpu_hours`` (per run of a variant); what
  Slurm accounted is passed in by the caller (``accounted``: the conductor asks ``sacct``,
  :func:`launchers.accounting.job_usage`), since this stage never talks to a scheduler.
* The step-time breakdown of a profiled run: the run entry's ``step_breakdown_ms`` (analysis/measure/profile_breakdown.py).
* Per-iteration step times, per run: the run entry's own ``step_times_ms`` list when present, else the field
  ``step_times_ms`` of ``<sweep>/variants/<variant>/attempt-<attempt>/run.json`` (written by the analysis stage:
  every steady iteration's step time in ms, warm-up excluded, in iteration order). Without either, the run is
  judged on its median alone and a warning says so.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from analysis.history.errors import HistoryInputError
from analysis.history.records import NOT_RUN_STATUSES, NightInput, RunRecord, Series, SpeedupRecord, SweepInfo
from contracts.records import RunRef, group_key
from contracts.sweepdir import SweepDir

SUMMARY_SCHEMA_VERSION = 1


def load_summary(summary: str | Path | dict[str, Any], manifest: str | Path | dict[str, Any] | None = None,
                 *, sweep_dir: str | Path | None = None,
                 accounted: Mapping[tuple[str, int], tuple[float | None, str]] | None = None) -> NightInput:
    """Build the history input of one sweep.

    ``summary``: a sweep folder (``report/summary.json`` and ``manifest.json`` inside are used), a path to
    ``summary.json``, or its parsed dict. ``manifest``: a path or dict, optional. ``sweep_dir``: where the
    ``variants/`` folders are (default: the sweep folder, or the parent of the summary's ``report/`` folder).
    ``accounted``: (variant, repeat) -> (GPU-hours Slurm accounted or None, where from / why not).

    Raises :class:`HistoryInputError` naming the file and field when the input is unreadable or malformed.
    """
    source = None
    if isinstance(summary, str | Path):
        path = Path(summary)
        if path.is_dir():
            sweep_dir = sweep_dir or path
            if manifest is None and (path / "manifest.json").is_file():
                manifest = path / "manifest.json"
            path = path / "report" / "summary.json"
        elif sweep_dir is None and path.parent.name == "report":
            sweep_dir = path.parent.parent
        source = str(path)
        summary = _read_json(path, "summary.json")
    if isinstance(manifest, str | Path):
        manifest = _read_json(Path(manifest), "manifest.json")
    where = source or "summary"
    if not isinstance(summary, dict):
        raise HistoryInputError(f"{where}: expected a JSON object, got {type(summary).__name__}")
    if summary.get("schema_version") != SUMMARY_SCHEMA_VERSION:
        raise HistoryInputError(f"{where}: schema_version {summary.get('schema_version')!r} is not supported; "
                                f"valid: {SUMMARY_SCHEMA_VERSION}")
    sweep = _sweep_info(summary.get("sweep"), manifest, where, source)
    roles, groups = _manifest_roles(manifest)
    comparisons = summary.get("comparisons") or []
    baselines = {c.get("baseline") for c in comparisons if isinstance(c, dict)}
    for c in comparisons:
        if isinstance(c, dict) and c.get("variant"):
            groups.setdefault(c["variant"], group_key(c.get("group")))
            if c.get("baseline"):
                groups.setdefault(c["baseline"], group_key(c.get("group")))
    warnings: list[str] = []
    runs = _runs(summary.get("runs"), where, roles, groups, baselines, Path(sweep_dir) if sweep_dir else None, warnings)
    runs = _with_gpu_hours(runs, manifest, accounted or {}, where)
    speedups = _speedups(comparisons, runs, where)
    warnings.extend(_baseline_warnings(sweep, runs, speedups, baselines))
    return NightInput(sweep=sweep, runs=runs, speedups=speedups, warnings=tuple(warnings))


def _read_json(path: Path, what: str) -> Any:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise HistoryInputError(f"{what} not found at {path}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise HistoryInputError(f"{what} at {path} is unreadable: {exc}") from None


def parse_created(value: Any, where: str) -> datetime:
    """Parse an ISO-8601 time; a time without zone is taken as UTC. Returns an aware UTC datetime."""
    if isinstance(value, datetime):
        dt = value
    else:
        try:
            dt = datetime.fromisoformat(str(value))
        except (TypeError, ValueError):
            raise HistoryInputError(f"{where}: created={value!r} is not an ISO-8601 time "
                                    f"(e.g. 2026-11-29T16:00:00Z)") from None
    return dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)


def _name(value: Any) -> str | None:
    if isinstance(value, dict):
        value = value.get("name")
    return None if value in (None, "") else str(value)


def _series_model(model: str | None, precision: Any) -> str | None:
    """The series' model: the model profile for BF16 (and sweeps recorded before the precision axis), ``model@fp8_cs``
    for another fixed precision, so that nights of different precisions never share a line (a swept precision is
    in each variant's name already)."""
    if model is None or precision in (None, "", "bf16", "swept"):
        return model
    return f"{model}@{precision}"


def _sweep_info(block: Any, manifest: dict[str, Any] | None, where: str, source: str | None) -> SweepInfo:
    block = block if isinstance(block, dict) else {}
    man = manifest or {}

    def pick(key: str) -> Any:
        v = block.get(key)
        return man.get(key) if v in (None, "") else v

    missing = [k for k in ("sweep_id", "name", "created", "model", "cluster") if _name(pick(k)) is None]
    if missing:
        raise HistoryInputError(f"{where}: the history needs the sweep's {', '.join(missing)}, found neither in "
                                f"summary.json 'sweep' nor in a manifest (a report of loose log files cannot be "
                                f"recorded; pass the sweep folder or its manifest.json)")
    container = pick("container") or {}
    if not isinstance(container, dict):
        raise HistoryInputError(f"{where}: sweep.container must be an object of versions, got {container!r}")
    dirty = man.get("dirty", block.get("dirty"))
    return SweepInfo(
        sweep_id=str(pick("sweep_id")),
        series=Series(preset=_name(pick("name")), model=_series_model(_name(pick("model")), man.get("precision")),
                      cluster=_name(pick("cluster")),
                      container=_name(container.get("name")) or ""),
        created=parse_created(pick("created"), where),
        git_sha=_name(pick("git_sha")),
        dirty=None if dirty is None else bool(dirty),
        container=tuple(sorted((str(k), None if v is None else str(v)) for k, v in container.items())),
        source=source,
    )


def _manifest_roles(manifest: dict[str, Any] | None) -> tuple[dict[str, str], dict[str, str]]:
    roles: dict[str, str] = {}
    groups: dict[str, str] = {}
    for v in (manifest or {}).get("variants") or []:
        if isinstance(v, dict) and v.get("name"):
            if v.get("role"):
                roles[v["name"]] = v["role"]
            groups[v["name"]] = group_key(v.get("group"))
    return roles, groups


def _num(d: Any, key: str, where: str) -> float | None:
    if not isinstance(d, dict):
        return None
    v = d.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        raise HistoryInputError(f"{where}: {key}={v!r} is not a finite number")
    return float(v)


def _step_times(run: dict[str, Any], sweep_dir: Path | None, where: str) -> tuple[tuple[float, ...], str | None]:
    """Per-iteration step times (ms) of one run and where they came from (None when absent)."""
    values, origin = run.get("step_times_ms"), where
    if values is None and sweep_dir is not None:
        ref = RunRef(str(run.get("variant")), int(run.get("repeat") or 0), int(run.get("attempt") or 1))
        path = SweepDir(sweep_dir).run_json(ref)
        if not path.is_file():  # an older sweep: attempts numbered per variant, one folder each
            path = sweep_dir / "variants" / ref.variant / f"attempt-{ref.attempt}" / "run.json"
        if path.is_file():
            values, origin = _read_json(path, "run.json").get("step_times_ms"), str(path)
    if values is None:
        return (), None
    if not isinstance(values, list) or not all(
            isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) and x > 0 for x in values):
        raise HistoryInputError(f"{origin}: step_times_ms must be a list of positive finite numbers (ms), "
                                f"got {str(values)[:120]}")
    return tuple(float(x) for x in values), origin


def _runs(raw: Any, where: str, roles: dict[str, str], groups: dict[str, str], baselines: set[Any],
          sweep_dir: Path | None, warnings: list[str]) -> tuple[RunRecord, ...]:
    if not isinstance(raw, list):
        raise HistoryInputError(f"{where}: 'runs' must be a list, got {type(raw).__name__}")
    latest: dict[tuple[str, int], dict[str, Any]] = {}
    for i, run in enumerate(raw):
        if not isinstance(run, dict) or not (run.get("variant") or run.get("name")):
            raise HistoryInputError(f"{where}: runs[{i}] has no 'variant'")
        run = dict(run, variant=str(run.get("variant") or run.get("name")))
        repeat, attempt = run.get("repeat"), run.get("attempt")
        run["repeat"] = 0 if repeat is None else repeat
        run["attempt"] = 1 if attempt is None else attempt
        if not all(isinstance(run[k], int) and not isinstance(run[k], bool) for k in ("repeat", "attempt")):
            raise HistoryInputError(f"{where}: runs[{i}] ({run['variant']}): repeat={repeat!r} and "
                                    f"attempt={attempt!r} must be integers")
        key = (run["variant"], run["repeat"])
        if key not in latest or run["attempt"] > latest[key]["attempt"]:
            latest[key] = run
    out = []
    for (variant, repeat), run in sorted(latest.items()):
        w = f"{where}: run {variant} repeat {repeat}"
        st, tf, tk, loss = (run.get(k) for k in ("step_time_ms", "tflops_per_gpu", "tokens_per_s_per_gpu", "loss"))
        steps, _ = _step_times(run, sweep_dir, w)
        role = (roles.get(variant) or run.get("role")
                or ("baseline" if variant in baselines else ("variant" if variant in groups else None)))
        try:
            rec = RunRecord(
                variant=variant, repeat=repeat, attempt=run["attempt"], status=str(run.get("status")),
                reason=run.get("reason"), role=role, group_key=groups.get(variant, group_key(run.get("group"))),
                step_time_ms=_num(st, "median", w), step_time_p90_ms=_num(st, "p90", w),
                step_time_ci_low_ms=_num(st, "ci_low", w), step_time_ci_high_ms=_num(st, "ci_high", w),
                n_steady=None if not isinstance(st, dict) or st.get("n") is None else int(st["n"]),
                tflops_per_gpu=_num(tf, "median", w), tokens_per_s_per_gpu=_num(tk, "median", w),
                peak_mem_gb=_num(run, "peak_mem_gb", w), loss_first=_num(loss, "first", w),
                loss_last=_num(loss, "last", w), step_times_ms=steps, breakdown_ms=_breakdown(run, w))
        except ValueError as exc:
            raise HistoryInputError(f"{where}: {exc}") from None
        if rec.is_timed and not steps:
            warnings.append(f"{variant} repeat {repeat}: no per-iteration step times (run.json step_times_ms "
                            f"missing); judged on its median only")
        out.append(rec)
    return tuple(out)


def _breakdown(run: dict[str, Any], where: str) -> tuple[tuple[str, float], ...]:
    """``step_breakdown_ms`` of a profiled run as (part, ms) pairs, parts of analysis/measure/profile_breakdown.py first."""
    b = run.get("step_breakdown_ms")
    if b is None:
        return ()
    if not isinstance(b, dict):
        raise HistoryInputError(f"{where}: step_breakdown_ms must be an object of ms per part, got {str(b)[:80]}")
    return tuple((str(k), v) for k in b for v in [_num(b, k, where)] if v is not None)


def _with_gpu_hours(runs: tuple[RunRecord, ...], manifest: dict[str, Any] | None,
                    accounted: Mapping[tuple[str, int], tuple[float | None, str]], where: str
                    ) -> tuple[RunRecord, ...]:
    per_run = ((manifest or {}).get("design") or {}).get("run_gpu_hours") or {}
    if not isinstance(per_run, dict):
        raise HistoryInputError(f"{where}: manifest design.run_gpu_hours must be an object, got {per_run!r}")
    out = []
    for r in runs:
        est = _num(per_run, r.variant, f"{where}: design.run_gpu_hours")
        hours, note = accounted.get((r.variant, r.repeat), (None, None))
        if hours is not None and (not math.isfinite(hours) or hours < 0):
            raise HistoryInputError(f"{where}: run {r.variant} repeat {r.repeat}: accounted GPU-hours {hours!r} "
                                    f"must be a finite number >= 0")
        out.append(replace(r, gpu_hours_estimate=est, gpu_hours_accounted=hours, gpu_hours_note=note))
    return tuple(out)


def _speedups(comparisons: Any, runs: tuple[RunRecord, ...], where: str) -> tuple[SpeedupRecord, ...]:
    if not isinstance(comparisons, list):
        raise HistoryInputError(f"{where}: 'comparisons' must be a list, got {type(comparisons).__name__}")
    timed = {r.variant for r in runs if r.is_timed}
    out = []
    for i, c in enumerate(comparisons):
        if not isinstance(c, dict) or not c.get("variant") or not c.get("baseline"):
            raise HistoryInputError(f"{where}: comparisons[{i}] needs 'variant' and 'baseline'")
        w = f"{where}: comparison {c['variant']}"
        sp = c.get("speedup")
        value = _num(sp, "value", w)
        if value is not None and value <= 0:
            raise HistoryInputError(f"{w}: speedup.value={value!r} must be > 0")
        reason = None
        if value is None:
            if c["baseline"] not in timed:
                reason = f"no successful baseline run ({c['baseline']}) tonight"
            elif c["variant"] not in timed:
                reason = "no successful run of this variant tonight"
            else:
                reason = "; ".join(str(n) for n in c.get("notes") or []) or "the analysis computed no speedup"
        out.append(SpeedupRecord(variant=str(c["variant"]), baseline=str(c["baseline"]),
                                 group_key=group_key(c.get("group")), value=value, ci_low=_num(sp, "ci_low", w),
                                 ci_high=_num(sp, "ci_high", w), verdict=c.get("verdict"), reason=reason))
    return tuple(out)


def _baseline_warnings(sweep: SweepInfo, runs: tuple[RunRecord, ...], speedups: tuple[SpeedupRecord, ...],
                       baselines: set[Any]) -> list[str]:
    names = {r.variant for r in runs if r.role == "baseline"} | {b for b in baselines if b}
    ran = [r for r in runs if r.status not in NOT_RUN_STATUSES]
    if ran and all(r.status == "validated" for r in ran):  # mode=validate: good runs that are never timed
        return [f"night {sweep.night}: every run validated (mode=validate), so no step time or speedup is timed "
                "or judged tonight"]
    out = []
    for name in sorted(names):
        mine = [r for r in runs if r.variant == name]
        if any(r.is_timed for r in mine):
            continue
        statuses = ", ".join(f"{r.status}" + (f" ({r.reason})" if r.reason else "") for r in mine) or "no run"
        n = sum(1 for s in speedups if s.baseline == name)
        judged = f"the speedups of its {n} variant(s) are not judged tonight" if n else "no speedup depends on it"
        out.append(f"night {sweep.night}: baseline {name} has no successful run ({statuses}); {judged}")
    return out
