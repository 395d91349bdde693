"""The public entry points that ``experiments.sweep action=collect`` (and a user's script) call.

* :func:`record_summary` — write one collected sweep into the history (idempotent).
* :func:`judge_sweep` / :func:`judge_night` — verdicts of a night against its rolling baseline; the report's
  ``exit_code`` is 4 when a regression is flagged (CONTRACTS §5).
* :func:`write_trend_page` — the self-contained HTML trend page.

Every function opens the database, migrates it when its schema is older, and closes it again. Errors:
:class:`~analysis.history.errors.HistoryInputError` (exit 2), :class:`~analysis.history.errors.HistoryStoreError`
and subclasses (exit 5).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import date
from pathlib import Path
from typing import Any

from analysis.history.errors import HistoryInputError
from analysis.history.ingest import load_summary
from analysis.history.judge import SeriesHistory, build_history, judge_history
from analysis.history.records import (
    TIMED_STATUSES,
    HistoryConfig,
    NightInput,
    NightReport,
    RecordResult,
    Series,
)
from analysis.history.settings import DEFAULT_URL, check_settings
from analysis.history.store import DEFAULT_TIMEOUT_S, HistoryStore

__all__ = ["DEFAULT_URL", "check_settings", "judge_night", "judge_sweep", "load_history", "record_summary",
           "write_trend_page"]


def record_summary(url: str, summary: str | Path | dict[str, Any] | NightInput,
                   manifest: str | Path | dict[str, Any] | None = None, *, sweep_dir: str | Path | None = None,
                   accounted: Mapping[tuple[str, int], tuple[float | None, str]] | None = None,
                   timeout_s: float = DEFAULT_TIMEOUT_S) -> RecordResult:
    """Record one sweep into the history database at ``url``.

    ``summary``: a sweep folder, a ``summary.json`` path or dict (CONTRACTS §7), or a ready :class:`NightInput`.
    ``manifest``: the sweep's ``manifest.json`` (path or dict); optional when the summary has its ``sweep`` block.
    Per-iteration step times come from each run's ``run.json`` (field ``step_times_ms``) under ``sweep_dir``
    (see ``analysis.history.ingest``). ``accounted``: (variant, repeat) -> (GPU-hours Slurm accounted, or None,
    and where from / why not), stored beside the plan's estimate. Recording the same sweep again replaces its rows.
    """
    night = summary if isinstance(summary, NightInput) else load_summary(summary, manifest, sweep_dir=sweep_dir,
                                                                         accounted=accounted)
    with HistoryStore(url, timeout_s=timeout_s) as store:
        return store.record(night)


def _wanted(series: Series | str | None, preset: str | None, model: str | None, cluster: str | None,
            container: str | None) -> dict[str, str | None]:
    if series is not None:
        try:
            s = series if isinstance(series, Series) else Series.parse(series)
        except ValueError as e:
            raise HistoryInputError(str(e)) from None
        preset, model, cluster = s.preset, s.model, s.cluster
        container = s.container if (isinstance(series, Series) or str(series).count("/") == 3) else container
    return {"preset": preset, "model": model, "cluster": cluster, "container": container}


def _matching(store: HistoryStore, night: date | None, wanted: dict[str, str | None]) -> list[Series]:
    return [s for s in store.series(night) if all(v is None or getattr(s, k) == v for k, v in wanted.items())]


def _pick_series(store: HistoryStore, night: date | None, wanted: dict[str, str | None]) -> Series:
    candidates = _matching(store, night, wanted)
    if len(candidates) == 1:
        return candidates[0]
    everything = ", ".join(str(s) for s in store.series(night)) or "none"
    when = f" on night {night}" if night else ""
    shown = "/".join(wanted[k] or "*" for k in ("preset", "model", "cluster", "container"))
    if not candidates:
        raise HistoryInputError(f"no recorded series matches {shown}{when} in {store.display_url}; "
                                f"recorded (preset/model/cluster/container): {everything}")
    raise HistoryInputError(f"{len(candidates)} series match {shown}{when}: {everything}; "
                            f"name one with series=preset/model/cluster/container (--series), or with preset=, "
                            f"model=, cluster= and container=")


def load_history(store: HistoryStore, series: Series, *, until: date | None = None, since: date | None = None,
                 window: int | None = None) -> SeriesHistory:
    """Read ``series`` (nights in [since, until]) into memory. With ``window``, per-iteration step times are read
    only for the runs a judgement of ``until`` needs (``until`` and each variant's last ``window`` good nights)."""
    run_rows = store.run_rows(series, since, until)
    if window is None or until is None:
        ids = [r["id"] for r in run_rows]
    else:
        good: dict[str, list[date]] = {}
        for r in run_rows:
            if r["status"] in TIMED_STATUSES and r["step_time_ms"] is not None:
                nights = good.setdefault(r["variant"], [])
                if not nights or nights[-1] != r["night"]:
                    nights.append(r["night"])
        keep = {(v, n) for v, ns in good.items() for n in [n for n in ns if n < until][-window:] + [until]}
        ids = [r["id"] for r in run_rows if (r["variant"], r["night"]) in keep]
    return build_history(series, run_rows, store.speedup_rows(series, since, until), store.step_times(ids),
                         [s for s in store.sweep_rows(series)
                          if (since is None or s["night"] >= since) and (until is None or s["night"] <= until)],
                         store.breakdowns([r["id"] for r in run_rows]))


def judge_night(url: str, night: date | str | None = None, *, series: Series | str | None = None,
                preset: str | None = None, model: str | None = None, cluster: str | None = None,
                container: str | None = None, config: HistoryConfig | None = None,
                timeout_s: float = DEFAULT_TIMEOUT_S) -> NightReport:
    """Judge ``night`` (a date or ``YYYY-MM-DD``; default: the latest recorded night) of the series named by
    ``series`` (a :class:`Series` or ``preset/model/cluster[/container]``) or by ``preset``/``model``/``cluster``/
    ``container`` (any of them may be left out when the choice is unique).

    Raises :class:`HistoryInputError` when the night or series is unknown or ambiguous (the message lists the
    recorded ones).
    """
    config = config or HistoryConfig()
    night = _night(night)
    wanted = _wanted(series, preset, model, cluster, container)
    with HistoryStore(url, timeout_s=timeout_s, create=False) as store:
        series = _pick_series(store, night, wanted)
        latest = store.nights(series)[-1]
        night = night or latest
        history = load_history(store, series, until=night, window=config.window)
    report = judge_history(history, night, config)
    if latest > night:
        report = replace(report, warnings=report.warnings + (
            f"judging night {night}, which is earlier than the latest recorded night {latest} of {series}; the "
            f"rolling baseline uses only the nights before {night}",))
    return report


def judge_sweep(url: str, sweep_id: str, *, config: HistoryConfig | None = None,
                timeout_s: float = DEFAULT_TIMEOUT_S) -> NightReport:
    """Judge the night of the recorded sweep ``sweep_id`` within its series (what ``action=collect`` calls after
    :func:`record_summary`). Raises :class:`HistoryInputError` when the sweep was never recorded."""
    with HistoryStore(url, timeout_s=timeout_s, create=False) as store:
        row = store.sweep(sweep_id)
    if row is None:
        raise HistoryInputError(f"sweep {sweep_id} is not in the history at {store.display_url}; record it first "
                                "(record_summary)")
    return judge_night(url, row["night"], series=_series_of(row), config=config, timeout_s=timeout_s)


def _series_of(row: Any) -> Series:
    return Series(preset=row["preset"], model=row["model"], cluster=row["cluster"],
                  container=row["container_profile"] or "")


def _night(night: date | str | None) -> date | None:
    if isinstance(night, str):
        try:
            return date.fromisoformat(night)
        except ValueError:
            raise HistoryInputError(f"night={night!r} is not a date like 2026-11-29") from None
    return night


def write_trend_page(url: str, out_html: str | Path, *, night: date | str | None = None,
                     series: Series | str | None = None, preset: str | None = None, model: str | None = None,
                     cluster: str | None = None, container: str | None = None, first: Series | None = None,
                     nights: int = 60, config: HistoryConfig | None = None,
                     timeout_s: float = DEFAULT_TIMEOUT_S) -> Path:
    """Write the self-contained trend page to ``out_html`` (atomically) and return its path.

    One section per series that matches ``series`` / ``preset`` / ``model`` / ``cluster`` / ``container`` (all
    recorded series when none is given; ``first`` goes first, the rest sorted). Each section shows the series' last
    ``nights`` recorded nights up to ``night`` (default: the latest): each variant's throughput and speedup over
    the nights with the regressions of every night marked, and a table of that night against its rolling baseline.

    Raises :class:`HistoryInputError` when nothing matches (the message lists the recorded series).
    """
    from analysis.history.trend import render_trend_page

    config = config or HistoryConfig()
    night = _night(night)
    wanted = _wanted(series, preset, model, cluster, container)
    sections = []
    with HistoryStore(url, timeout_s=timeout_s, create=False) as store:
        chosen = _matching(store, None, wanted)
        if not chosen:
            _pick_series(store, None, wanted)  # raises with the recorded series listed
        chosen.sort(key=lambda s: (s != first, s))
        for ser in chosen:
            all_nights = [n for n in store.nights(ser) if night is None or n <= night]
            if not all_nights:
                continue  # this series starts after ``night``
            shown = all_nights[-nights:]
            since = all_nights[max(0, len(all_nights) - nights - config.window * 3)]
            history = load_history(store, ser, since=since, until=shown[-1])
            sections.append((history, [judge_history(history, n, config) for n in shown]))
    if not sections:
        raise HistoryInputError(f"no night of {', '.join(map(str, chosen))} is on or before {night}")
    return render_trend_page(sections, Path(out_html))


def noise_prior(url: str, series: Series, *, before: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> Any:
    """The prior on the run-to-run noise of ``series`` learnt from its sweeps recorded before the sweep ``before``
    (a sweep id; sweeps created earlier, that one excluded): :func:`analysis.measure.pooled.prior_from_rows` over their
    timed runs. None when the history does not exist, has no such series, or too few sweeps with blocks.

    Raises HistoryError subclasses for a database that exists but cannot be read."""
    from analysis.measure import prior_from_rows

    with HistoryStore(url, timeout_s=timeout_s, create=False) as store:
        this = store.sweep(before) if before else None
        sweeps = [r for r in store.sweep_rows(series) if r["sweep_id"] != before
                  and (this is None or r["created"] <= this["created"])]
        wanted = {r["sweep_id"] for r in sweeps}
        rows = [dict(r) | {"ok": r["status"] in TIMED_STATUSES} for r in store.run_rows(series)
                if r["sweep_id"] in wanted]
    rank = {r["sweep_id"]: i for i, r in enumerate(sweeps)}
    return prior_from_rows(sorted(rows, key=lambda r: rank[r["sweep_id"]]))


def series_prior(history: dict[str, Any], *, preset: str, model: str, cluster: str, container: str,
                 before: str | None = None) -> Any:
    """The run-to-run noise prior of a series (:class:`analysis.measure.NoisePrior`) from the history that
    ``history`` (the sweep's ``history.*`` settings) names, learnt from its sweeps created before the sweep
    ``before`` (None: all of them): :func:`noise_prior`. None when the history is off, absent,
    or has too few sweeps with blocks.

    Raises:
        HistoryError: a database that exists but cannot be read (subclasses name why).
    """
    if not history.get("enabled") or not history.get("url"):
        return None
    from analysis.history.settings import password_from_env

    series = Series(preset=preset, model=model, cluster=cluster, container=container)
    try:
        return noise_prior(password_from_env(str(history["url"])), series, before=before or "")
    except HistoryInputError:  # no database yet: the first night has no prior
        return None


def nightly_prior(manifest: Any, notes: list[str]) -> Any:
    """:func:`series_prior` of a ``repeats=auto`` sweep's manifest (its series: preset, model, cluster,
    container), learnt from the sweeps before it; a history that cannot be read adds a note to ``notes`` and gives
    None (the verdicts stand without a prior)."""

    def name(v: Any) -> str:
        return str(v.get("name") if isinstance(v, dict) else v or "")

    try:
        return series_prior((manifest.config or {}).get("history") or {}, preset=name(manifest.name),
                            model=name(manifest.model), cluster=name(manifest.cluster),
                            container=name(manifest.container.get("name")) if isinstance(manifest.container, dict)
                            else "", before=manifest.sweep_id)
    except Exception as e:  # the verdicts stand without a prior; the report says why it is missing
        notes.append(f"no nightly noise prior: the history could not be read ({type(e).__name__}: {e})")
        return None
